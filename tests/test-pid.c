/*
 * test-pid.c: common/stkr_pid.h, stkr_pid_alive. A child that has exited
 * but is not reaped yet (a zombie) is not alive: kill(pid, 0) still finds
 * it, and the readers called such a writer "still recording" (QA). This
 * process is alive; pid 0 and a reaped child are not.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_pid.h"
#include "tests/testlib.h"

static void test_zombie_is_not_alive(void **state) {
  siginfo_t si;
  pid_t pid;
  (void)state;

  assert_true(stkr_pid_alive((uint32_t)getpid()));
  assert_false(stkr_pid_alive(0));
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(0);
  /* Wait for the exit without reaping it: WNOWAIT leaves the zombie. */
  memset(&si, 0, sizeof si);
  assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
  assert_int_equal(kill(pid, 0), 0); /* what the readers asked before */
  assert_false(stkr_pid_alive((uint32_t)pid));
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  assert_false(stkr_pid_alive((uint32_t)pid));
}

TL_TEST_MAIN("pid", NULL, NULL, test_zombie_is_not_alive)
