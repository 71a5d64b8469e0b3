/*
 * test-record-tree.c: the parents of a recorded process tree. A program
 * that a shell exec'd in a child names the shell as its parent
 * (Header.os_parent_pid, since session 37), and so its events lie on the
 * tree's time line from the shell's start, not from its own (before: each
 * exec'd program's timeline began at 0 s, a command run 1 s into a script
 * drawn at its very start).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/record_env.h"
#include "tests/testlib.h"

static int setup(void **state) {
  (void)state;
  return record_env_setup("rectree");
}

/* The end of `report --timeline DIR`'s span, in seconds ("timeline:
 * 0-304 ms", "0-1.0 s"); cr_out holds the report. */
static double timeline_end_s(const char *dir) {
  const char *at;
  char *unit;
  double end;

  assert_int_equal(cr_run("report --timeline '%s'", dir), 0);
  at = strstr(cr_out, "timeline: 0-");
  assert_non_null(at);
  end = strtod(at + strlen("timeline: 0-"), &unit);
  if (strncmp(unit, " ms", 3) == 0)
    return end / 1000;
  return strncmp(unit, " s", 2) == 0 ? end : -1;
}

/* The timeline of dir spans at least min_s seconds (`what` names them in
 * the failure). */
static void timeline_spans(const char *dir, double min_s, const char *what) {
  if (timeline_end_s(dir) < min_s)
    fail_msg("the timeline does not span %s:\n%s", what, cr_out);
}

/* Whether the hooks can run in the tree the scripts below start: bash,
 * and hostname, its watched call (see hooks_run_in). */
static bool hooks_run_in_tree(void) {
  return hooks_run_in("bash") && hooks_run_in("hostname");
}

/* `stackrec record -q -o DIR -- /bin/bash -c 'SCRIPT'` (SCRIPT from fmt,
 * printf-style), which must exit 0. false, running nothing, where the
 * hooks cannot run in the tree (hooks_run_in_tree): the caller returns. */
static __attribute__((format(printf, 2, 3))) bool
record_bash(const char *dir, const char *fmt, ...) {
  char script[4096];
  va_list ap;
  int n;

  if (!hooks_run_in_tree())
    return false;
  va_start(ap, fmt);
  n = vsnprintf(script, sizeof script, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof script);
  assert_int_equal(
      cr_run("record -q -o '%s' -- /bin/bash -c '%s'", dir, script), 0);
  return true;
}

/* bash runs `hostname` (gethostname: one event), sleeps a second and runs
 * it again: two exec'd programs, children of bash. */
static void test_exec_on_the_tree_line(void **state) {
  const char *dir = fresh("exec");
  char want[64];
  (void)state;

  if (!record_bash(dir, "echo $$; hostname >/dev/null; sleep 1; "
                        "hostname >/dev/null; true"))
    return;
  snprintf(want, sizeof want, "  parent pid:  %ld (at its start)\n",
           strtol(cr_out, NULL, 10));
  assert_int_equal(cr_run("info '%s'", dir), 0);
  if (tl_count(cr_out, want) < 2)
    fail_msg("not two programs with bash as parent (%s):\n%s", want, cr_out);
  assert_int_equal(cr_run("info --json '%s'", dir), 0);
  cr_assert_has(cr_out, "\"os_parent_pid\":");

  /* One line from bash's start: the second hostname a second in. */
  timeline_spans(dir, 0.9, "the second");
}

/* The same through a parent whose clock is not known: `unshare -T -f`
 * forks its child into a new time namespace (its monotonic clock 10^5 s
 * ahead) after its own unshare(CLONE_NEWTIME), so its own start, written
 * at that fork, says no clock (common/stkr_boot.h). Passed through to
 * bash (QA, session 38: the second hostname was drawn at 0 s, from its
 * own start; fails without). Root only (a time namespace). */
static void test_exec_through_a_clockless_parent(void **state) {
  const char *dir = fresh("timens");
  (void)state;

  if (!hooks_run_in_tree())
    return;
  if (geteuid() != 0 ||
      system("unshare -T --monotonic 100000 -f true 2>/dev/null") != 0) {
    print_message("no time namespace to be had here: skipped\n");
    skip();
  }
  assert_true(record_bash(dir, "hostname >/dev/null; sleep 0.6; unshare -T "
                              "--monotonic 100000 -f hostname >/dev/null; "
                              "true"));
  assert_int_equal(cr_run("info '%s'", dir), 0);
  cr_assert_has(cr_out, "time namespace offset +100000.000000000 s");
  timeline_spans(dir, 0.5, "the 0.6 s");
}

/* The recording directory moved while the command runs (here by the
 * script itself): record finds it by its lock and ends there, and the
 * program started after the move, which could not record (its
 * STACKREC_DIR names the old path), is named in it: verify 4 (QA, session
 * 38: those lines went to the old path, and verify said complete, 0). */
static void test_moved_while_recording(void **state) {
  const char *dir = fresh("moved");
  char moved[4300];
  (void)state;

  snprintf(moved, sizeof moved, "%s.moved", dir);
  if (!record_bash(dir, "hostname >/dev/null; mv \"$STACKREC_DIR\" "
                        "'\\''%s'\\''; hostname >/dev/null; true", moved))
    return;
  cr_assert_has(cr_err, " was moved to ");
  assert_int_equal(access(dir, F_OK), -1); /* not made again */
  assert_int_equal(cr_run("verify '%s'", moved), 4);
  cr_assert_has(cr_out, "(hostname) recorded nothing");

  /* ... and a directory made under the old name at once: its lock is not
   * record's, so record still ends in the moved one (it ended in the new
   * one before: review, session 38), which holds the first hostname. */
  tl_rm_rf(moved);
  assert_true(record_bash(dir, "hostname >/dev/null; mv \"$STACKREC_DIR\" "
                              "'\\''%s'\\''; mkdir \"$STACKREC_DIR\"; "
                              "hostname >/dev/null; true", moved));
  cr_assert_has(cr_err, " was moved to ");
  assert_int_equal(cr_run("info '%s'", moved), 0);
  cr_assert_has(cr_out, "\"hostname\"");
}

/* A program that removed its own executable before its first watched
 * call: its image is named by its path, not "PATH (deleted)" (QA, session
 * 40: a module of its own in report --by module, and symbolize looked for
 * that name). */
static void test_deleted_executable_named_by_its_path(void **state) {
  const char *dir = fresh("deleted-exe");
  char exe[4300];
  (void)state;

  if (!hooks_run_in("python3"))
    return;
  snprintf(exe, sizeof exe, "%s.py3", dir);
  assert_int_equal(tl_system("cp /usr/bin/python3 '%s'", exe), 0);
  assert_int_equal(cr_run("record -q -o '%s' -- '%s' -c 'import os, sys; "
                          "os.unlink(sys.executable); os.uname()'", dir, exe),
                   0);
  assert_int_equal(cr_run("dump --json '%s'", dir), 0);
  assert_null(strstr(cr_out, "(deleted)"));
  assert_int_equal(cr_run("report --by module '%s'", dir), 0);
  assert_null(strstr(cr_out, "(deleted)"));
}

TL_TEST_MAIN("record-tree", setup, NULL, test_exec_on_the_tree_line,
             test_exec_through_a_clockless_parent,
             test_moved_while_recording,
             test_deleted_executable_named_by_its_path)
