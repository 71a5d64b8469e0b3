/*
 * test-longjmp.c: an app's signal handler that leaves the recorder's code
 * by siglongjmp (a timer handler that jumps back to a checkpoint, as
 * interpreters and coroutine libraries do). A producer's wake of the flush
 * worker (stkr_images_changed here; any event's wake alike) counts itself
 * in flight until its post is done; a jump out of it leaves that count up
 * for good, and every session end waited for it to drop, spinning at 100%
 * CPU at the app's exit forever (QA, session 24: 2 of 20 runs of a 1 ms
 * SIGALRM handler under load). The end now waits at most ~100 ms for it
 * and keeps the worker allocated; so does every later end while the count
 * stays up (a late post must never reach a freed worker).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <cmocka.h>
#include <errno.h>

#include "recorder/stackrec.h"
#include "tests/testlib.h"

static sigjmp_buf g_back;
static volatile sig_atomic_t g_jumps;

static void jump_back(int sig) {
  (void)sig;
  g_jumps++;
  siglongjmp(g_back, 1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wakes interrupted by a 50 us timer whose handler jumps out, 3000 times
 * (most of a wake is its post's system call: many jumps leave one); then
 * two session ends, each bounded. Before: the first never returned (the
 * test's timeout). */
static void test_wake_left_by_longjmp(void **state) {
  stkr_config cfg = {.size = sizeof cfg, .dir = tl_dir,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  struct sigaction sa, old_sa;
  struct itimerval it = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = jump_back; /* no SA_RESTART, no SA_NODEFER: siglongjmp
                                restores the mask saved below */
  assert_int_equal(sigaction(SIGALRM, &sa, &old_sa), 0);
  g_jumps = 0;
  (void)sigsetjmp(g_back, 1);
  if (g_jumps == 0)
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
  while (g_jumps < 3000)
    stkr_images_changed();
  assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
  assert_int_equal(sigaction(SIGALRM, &old_sa, NULL), 0);

  for (int round = 0; round < 2; round++) {
    double t0 = now_s();
    if (round == 1)
      assert_int_equal(stkr_init(&cfg), 0);
    stkr_images_changed();
    assert_int_equal(stkr_shutdown(), 0);
    /* ~0.1 s when a count was left; 30 s: a loaded machine's margin. */
    assert_true(now_s() - t0 < 30.0);
  }
}

STKR_SITE_DEFINE(g_site, "longjmp.event");

/* A jump out of stkr_event itself leaves this thread's re-entry guard set
 * (README: its later events drop as re-entrant). Its own stkr_shutdown
 * then does not wait for that event to end, which it never will (QA,
 * session 27: 2.0 s, every session). */
static void test_event_left_by_longjmp(void **state) {
  stkr_config cfg = {.size = sizeof cfg, .dir = tl_dir,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  struct sigaction sa, old_sa;
  struct itimerval once = {{0, 0}, {0, 50}};
  volatile int round;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_thread_attach(), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = jump_back;
  assert_int_equal(sigaction(SIGALRM, &sa, &old_sa), 0);
  /* One timer shot a round, its handler jumping out of whatever event it
   * lands in, until one lands inside (then the guard stays set). */
  for (round = 0; round < 20000; round++) {
    if (sigsetjmp(g_back, 1) == 0) {
      assert_int_equal(setitimer(ITIMER_REAL, &once, NULL), 0);
      for (;;)
        (void)stkr_event(&g_site, "x", 1);
    }
    if (stkr_event(&g_site, "probe", 5) == -EAGAIN)
      break;
  }
  assert_int_equal(sigaction(SIGALRM, &old_sa, NULL), 0);
  assert_true(round < 20000);
  double t0 = now_s();
  assert_int_equal(stkr_shutdown(), 0);
  /* ~ms now; 2 s before. 1.5 s: a loaded machine's margin. */
  assert_true(now_s() - t0 < 1.5);
}

TL_TEST_MAIN_EACH("longjmp", tl_make_dir, NULL, test_wake_left_by_longjmp,
                  test_event_left_by_longjmp)
