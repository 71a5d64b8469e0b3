/*
 * cli_run.h: running the built `stackrec` tool (//tools:stackrec, a data
 * dependency) from the report, verify and merge tests, with its stdout and
 * stderr captured. Header-only (static functions), like reader_util.h.
 */
#ifndef STKR_TEST_CLI_RUN_H
#define STKR_TEST_CLI_RUN_H

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "tests/testlib.h"

static char cr_bin[4096];
static char cr_out[1 << 18], cr_err[1 << 16];
static const tl_capture cr_capture = {cr_out, sizeof cr_out, cr_err,
                                      sizeof cr_err, NULL, false, -1};

/* Find the binary: $STACKREC_BIN, else the runfiles. @return 0 or -1. */
static __attribute__((unused)) int cr_setup(void) {
  if (getenv("STACKREC_BIN") != NULL)
    snprintf(cr_bin, sizeof(cr_bin), "%s", getenv("STACKREC_BIN"));
  else
    tl_runfile(cr_bin, sizeof cr_bin, "tools/stackrec");
  if (access(cr_bin, X_OK) != 0) {
    fprintf(stderr, "no stackrec binary at %s\n", cr_bin);
    return -1;
  }
  return 0;
}

/* Run `stackrec <args>` (args is shell text); stdout and stderr land in
 * cr_out and cr_err. @return the exit status, or -1 if it did not exit
 * (a crash: never acceptable). */
static __attribute__((unused)) int cr_run(const char *fmt, ...) {
  char args[8192];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  return tl_sh(&cr_capture, "'%s' %s", cr_bin, args);
}

/* Run `stackrec <args>` (as cr_run) where it must exit with `status` and
 * say `err_has` on stderr; a failure names the command. Needs <cmocka.h>
 * included first. */
static __attribute__((unused, format(printf, 3, 4))) void
cr_expect(int status, const char *err_has, const char *fmt, ...) {
  char args[8192];
  va_list ap;
  int got;

  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  got = cr_run("%s", args);
  if (got != status || strstr(cr_err, err_has) == NULL)
    fail_msg("stackrec %s: exit %d, stderr:\n%s\nwanted exit %d and \"%s\"",
             args, got, cr_err, status, err_has);
}

/* Start `stackrec record -o dir -- cmd...` in the background (cmd: the
 * program and its arguments, NULL-terminated, at most 8), its stderr, and
 * its stdout too when out_too, into the file log (created afresh); env
 * ("NAME=value") set in it when not NULL. For the tests that act on a
 * recording while it runs (signals, `stackrec mark`); the caller waits for
 * it with waitpid. @return its pid. Needs <cmocka.h> included first. */
static __attribute__((unused)) pid_t cr_record_bg(const char *dir,
                                                  const char *log, bool out_too,
                                                  const char *env,
                                                  const char *const *cmd) {
  const char *argv[16] = {cr_bin, "record", "-o", dir, "--"};
  size_t n = 5;
  pid_t pid;

  for (; *cmd != NULL && n < sizeof argv / sizeof argv[0] - 1; cmd++)
    argv[n++] = *cmd;
  assert_null(*cmd); /* every word of cmd fits */
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    if (fd >= 0) {
      if (out_too)
        dup2(fd, 1);
      dup2(fd, 2);
    }
    if (env != NULL)
      putenv((char *)env);
    execv(cr_bin, (char *const *)argv);
    _exit(127);
  }
  return pid;
}

/* Wait (bounded, generous for a loaded machine: 60 s) until path exists;
 * else kill pid (the command under test) and fail, naming what never
 * happened. Needs <cmocka.h> included first. */
static __attribute__((unused)) void cr_wait_file(const char *path, pid_t pid,
                                                 const char *what) {
  struct stat st;
  double t0 = tl_now_s();

  while (stat(path, &st) != 0) {
    if (tl_now_s() - t0 > 60) {
      kill(pid, SIGKILL);
      fail_msg("%s never happened (%s)", what, path);
    }
    usleep(20000);
  }
}

/* `stackrec report --html DIR/report.html DIR`, the page read into buf.
 * @return the exit status (as cr_run). */
static __attribute__((unused)) int cr_html(const char *dir, char *buf,
                                           size_t cap) {
  char page[4200];
  int st;

  snprintf(page, sizeof page, "%s/report.html", dir);
  st = cr_run("report --html '%s' '%s'", page, dir);
  tl_slurp(page, buf, cap);
  return st;
}

/* Line i (0-based) of s, in a static buffer. */
static __attribute__((unused)) const char *cr_line(const char *s, int i) {
  static char buf[4096];
  const char *e;

  for (; i > 0 && s; i--)
    if ((s = strchr(s, '\n')) != NULL)
      s++;
  if (s == NULL)
    return "";
  e = strchr(s, '\n');
  snprintf(buf, sizeof(buf), "%.*s", (int)(e ? e - s : (long)strlen(s)), s);
  return buf;
}

/* Assert that lines first, first + 1, ... of s are the strings given, in
 * that order: cr_assert_lines(cr_out, 2, "line 2", "line 3"). A mismatch
 * says which line before cmocka prints both texts. Needs <cmocka.h>
 * included before this header, as its other users do. */
#define cr_assert_lines(s, first, ...)                                        \
  cr__assert_lines(s, first, (const char *const[]){__VA_ARGS__, NULL})
static __attribute__((unused)) void cr__assert_lines(const char *s, int first,
                                                     const char *const *want) {
  for (int i = 0; want[i] != NULL; i++) {
    const char *got = cr_line(s, first + i);
    if (strcmp(got, want[i]) != 0)
      print_error("line %d of the output differs:\n", first + i);
    assert_string_equal(got, want[i]);
  }
}

/* Assert that each of the texts given occurs in s: cr_assert_has(cr_out,
 * "a", "b"). The first missing one is named, with s (tests/testlib.h). */
#define cr_assert_has(s, ...) tl_assert_has(s, __VA_ARGS__)

/* Assert that got (cr_out, a cr_line) is exactly the text of fmt (printf):
 * the expected output with the test's paths filled in. Needs <cmocka.h>
 * included before this header. */
static __attribute__((unused, format(printf, 2, 3))) void
cr_assert_text(const char *got, const char *fmt, ...) {
  char want[8192];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(want, sizeof want, fmt, ap);
  va_end(ap);
  assert_string_equal(got, want);
}

/* `stackrec report ARGS REC` exits 0, and its output holds want. */
static __attribute__((unused)) void cr_report_has(const char *args,
                                                  const char *rec,
                                                  const char *want) {
  assert_int_equal(cr_run("report %s '%s'", args, rec), 0);
  cr_assert_has(cr_out, want);
}

static __attribute__((unused)) int cr_count_lines(const char *s) {
  int n = 0;

  for (; *s; s++)
    n += *s == '\n';
  return n;
}

#endif
