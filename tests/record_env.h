/*
 * record_env.h: the environment of the tests that run `stackrec record`
 * with the built hook library (test-record-setup.c, test-record-limits.c,
 * test-record-signals.c, test-record-jobs.c;
 * test-only, included by one file of each test).
 */
#ifndef STKR_TESTS_RECORD_ENV_H
#define STKR_TESTS_RECORD_ENV_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cli_run.h"
#include "tests/testlib.h"

#if defined(__SANITIZE_THREAD__)
/* The TSan runtime cannot be preloaded into /bin/sh and friends (see
 * test-preload.c): the tests that run real programs with the hooks skip. */
#define HOOKS_IN_SYSTEM_PROGRAMS 0
#else
#define HOOKS_IN_SYSTEM_PROGRAMS 1
#endif

/* Whether a test that runs the system program prog (a shell, sleep, ...)
 * with the hooks can: if not (TSan), it says on stderr that it skipped,
 * and the caller returns (a pass: the other builds run it). */
static inline bool hooks_run_in(const char *prog) {
  if (HOOKS_IN_SYSTEM_PROGRAMS)
    return true;
  fprintf(stderr, "skipped under TSan: the hooks cannot run in %s\n", prog);
  return false;
}

static char g_tmp[2048], g_lib[4096];

/* A fresh directory name under g_tmp (not created). */
#define fresh(tag) tl_fresh(g_tmp, (tag))

#if defined(__SANITIZE_ADDRESS__)
static char g_san_rt[1024];
#endif

/* The group's setup: the built tool (cr_setup), the hook library named in
 * STACKREC_PRELOAD, g_tmp = $TEST_TMPDIR/<sub>, no STACKREC_DIR, _NOTIFY or
 * LD_PRELOAD of the caller's (under ASan, LD_PRELOAD the ASan runtime: the
 * hooks are built with it). @return 0 or -1. */
static int record_env_setup(const char *sub) {
  const char *tmp = getenv("TEST_TMPDIR");

  if (cr_setup() != 0)
    return -1;
  tl_runfile(g_lib, sizeof g_lib, "preload/libstackrec_preload.so");
  snprintf(g_tmp, sizeof g_tmp, "%.2000s/%s", tmp ? tmp : "/tmp", sub);
  mkdir(g_tmp, 0700);
  setenv("STACKREC_PRELOAD", g_lib, 1);
  unsetenv("STACKREC_DIR");
  unsetenv("STACKREC_NOTIFY");
  unsetenv("LD_PRELOAD");
#if defined(__SANITIZE_ADDRESS__)
  tl_asan_runtime(g_san_rt, sizeof g_san_rt);
  if (g_san_rt[0] == '\0')
    return -1;
  setenv("LD_PRELOAD", g_san_rt, 1);
#endif
  return 0;
}

/* For the tests that record /usr/bin/python3: `stackrec record -o DIR --
 * CMD` (CMD: fmt and its arguments), which must exit 0; python3's own
 * leaks are kept out of LeakSanitizer's exit check (ASan builds). @return
 * false, saying so, when they cannot run: the hooks load into system
 * programs (not under TSan) and python3 is there. */
__attribute__((format(printf, 2, 3))) static inline bool
record_python3(const char *dir, const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  int rc;

  if (!HOOKS_IN_SYSTEM_PROGRAMS || access("/usr/bin/python3", X_OK) != 0) {
    fprintf(stderr, "skipped: no hooks in system programs, or no python3\n");
    return false;
  }
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  rc = cr_run("record -o '%s' -- env ASAN_OPTIONS=detect_leaks=0 %s", dir,
              cmd);
  if (rc != 0)
    fail_msg("record: status %d\n%.3000s", rc, cr_err);
  return true;
}

/* `stackrec record -o DIR -- cmd` in the background, DIR a fresh(tag) name
 * (into *dir); record's stderr, with out_too its stdout too, into DIR.log
 * (its path into log, cap bytes). @return record's pid. */
static inline pid_t rec_start(const char *tag, bool out_too,
                              const char *const *cmd, const char **dir,
                              char *log, size_t cap) {
  *dir = fresh(tag);
  snprintf(log, cap, "%s.log", *dir);
  return cr_record_bg(*dir, log, out_too, NULL, cmd);
}

/* The first child of record (pid) that has exec'd comm, from
 * /proc/PID/task/PID/children (0: none yet; record's fork before the exec
 * still has record's name). */
static inline pid_t rec_child_of(pid_t pid, const char *comm) {
  char path[64], line[4096], name[64];
  pid_t found = 0;
  FILE *f;

  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  if ((f = fopen(path, "r")) == NULL)
    return 0;
  if (fgets(line, sizeof line, f) != NULL)
    for (char *t = strtok(line, " \n"); t != NULL && found == 0;
         t = strtok(NULL, " \n")) {
      snprintf(path, sizeof path, "/proc/%s/comm", t);
      tl_slurp(path, name, sizeof name);
      if (strncmp(name, comm, strlen(comm)) == 0 && name[strlen(comm)] == '\n')
        found = (pid_t)atoi(t);
    }
  fclose(f);
  return found;
}

/* Wait (bounded: 30 s, then record is killed and the test fails) until
 * record (pid) runs comm. @return comm's pid. */
static inline pid_t rec_wait_child(pid_t pid, const char *comm) {
  double t0 = tl_now_s();
  pid_t c;

  while ((c = rec_child_of(pid, comm)) == 0) {
    if (tl_now_s() - t0 > 30) {
      kill(pid, SIGKILL);
      fail_msg("record never ran %s", comm);
    }
    usleep(20000);
  }
  return c;
}

#endif
