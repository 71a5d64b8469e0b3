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

/* bash runs `hostname` (gethostname: one event), sleeps a second and runs
 * it again: two exec'd programs, children of bash. */
static void test_exec_on_the_tree_line(void **state) {
  const char *dir = fresh("exec");
  char want[64];
  const char *at;
  double end;
  (void)state;

  if (!hooks_run_in("bash") || !hooks_run_in("hostname"))
    return;
  assert_int_equal(cr_run("record -q -o '%s' -- /bin/bash -c 'echo $$; "
                          "hostname >/dev/null; sleep 1; "
                          "hostname >/dev/null; true'", dir), 0);
  snprintf(want, sizeof want, "  parent pid:  %ld (at its start)\n",
           strtol(cr_out, NULL, 10));
  assert_int_equal(cr_run("info '%s'", dir), 0);
  if (tl_count(cr_out, want) < 2)
    fail_msg("not two programs with bash as parent (%s):\n%s", want, cr_out);
  assert_int_equal(cr_run("info --json '%s'", dir), 0);
  cr_assert_has(cr_out, "\"os_parent_pid\":");

  /* One line from bash's start: the second hostname a second in. */
  assert_int_equal(cr_run("report --timeline '%s'", dir), 0);
  at = strstr(cr_out, "timeline: 0-");
  assert_non_null(at);
  end = strtod(at + strlen("timeline: 0-"), NULL);
  if (strncmp(strchr(at, '-') + 1 + strspn(strchr(at, '-') + 1, "0123456789."),
              " s", 2) != 0 || end < 0.9)
    fail_msg("the timeline does not span the second:\n%s", cr_out);
}

TL_TEST_MAIN("record-tree", setup, NULL, test_exec_on_the_tree_line)
