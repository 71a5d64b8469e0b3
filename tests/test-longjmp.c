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
 * A jump out of an event on another thread left its guard set for good,
 * and the next stkr_init waited for it forever (QA, session 33).
 * A thread cancelled inside a control call left its locks held (QA,
 * session 41): the control calls hold cancellation off.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

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

static sigjmp_buf g_back_t;
static _Atomic int g_stuck, g_release;

static void jump_back_t(int sig) {
  (void)sig;
  siglongjmp(g_back_t, 1);
}

/* Events until a SIGUSR1 jumps out of one and leaves the guard set; then
 * waits, alive, until released. */
static void *jumping_thread(void *arg) {
  sigset_t usr1;
  (void)arg;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  if (stkr_thread_attach() != 0)
    return NULL;
  /* The signal only while events run: one in sigsetjmp itself would jump
   * through a buffer half written. A jump restores the mask sigsetjmp
   * saved: blocked. */
  while (!g_stuck) {
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    if (sigsetjmp(g_back_t, 1) == 0) {
      pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
      for (int i = 0; i < 1000000; i++)
        (void)stkr_event(&g_site, "t", 1);
      pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    }
    if (stkr_event(&g_site, "probe", 5) == -EAGAIN)
      g_stuck = 1;
  }
  while (!g_release)
    usleep(1000);
  return NULL;
}

/* A site of its own: a jump that lands inside g_site's registration
 * (a new session registers it anew) leaves it half claimed for good
 * (README, "Not fixed yet"), and its events dropped as "other". */
STKR_SITE_DEFINE(g_fresh_site, "longjmp.fresh");

static void *one_event(void *arg) {
  (void)arg;
  stkr_stats a, b;
  (void)stkr_stats_get(&a);
  int rc = stkr_event(&g_fresh_site, "fresh", 5);
  (void)stkr_stats_get(&b);
  if (rc != 0)
    fprintf(stderr, "fresh thread's event: %d (ring full +%llu, reentrant "
            "+%llu, other +%llu)\n", rc,
            (unsigned long long)(b.dropped_ring_full - a.dropped_ring_full),
            (unsigned long long)(b.dropped_reentrant - a.dropped_reentrant),
            (unsigned long long)(b.dropped_other - a.dropped_other));
  return rc == 0 ? NULL : (void *)1;
}

/* Another thread's event left by a jump: stkr_shutdown waits up to 2 s
 * for it, and so does the next stkr_init, which then starts without that
 * thread's ring (before: it never returned, the test's timeout). */
static void test_init_after_another_threads_jump(void **state) {
  stkr_config cfg = {.size = sizeof cfg, .dir = tl_dir,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  struct sigaction sa, old_sa;
  pthread_t th, other;
  sigset_t usr1, old_mask;
  stkr_stats st;
  void *rc;
  double t0;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = jump_back_t;
  assert_int_equal(sigaction(SIGUSR1, &sa, &old_sa), 0);
  g_stuck = g_release = 0;
  /* Born with the signal blocked: it unblocks it once its jump buffer is
   * set. */
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
  assert_int_equal(pthread_create(&th, NULL, jumping_thread, NULL), 0);
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  for (int i = 0; i < 200000 && !g_stuck; i++) {
    pthread_kill(th, SIGUSR1);
    usleep(50);
  }
  assert_true(g_stuck);
  assert_int_equal(stkr_shutdown(), 0);
  t0 = now_s();
  assert_int_equal(stkr_init(&cfg), 0);
  assert_true(now_s() - t0 < 30.0); /* ~2 s; a loaded machine's margin */
  /* A fresh thread records (this one's guard is test_event_left_by_
   * longjmp's, set for good). */
  assert_int_equal(pthread_create(&other, NULL, one_event, NULL), 0);
  assert_int_equal(pthread_join(other, &rc), 0);
  assert_null(rc);
  g_release = 1;
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, 1);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(sigaction(SIGUSR1, &old_sa, NULL), 0);
}

static stkr_site g_cancel_site = STKR_SITE_INIT("test.cancel");

/* Events and flushes until cancelled (at its testcancel, or inside a
 * control call if that were a cancellation point). */
static void *flushing_thread(void *arg) {
  (void)arg;
  for (;;) {
    (void)stkr_event(&g_cancel_site, "x", 1);
    (void)stkr_flush();
    (void)stkr_flush_timeout(1000);
    pthread_testcancel();
  }
  return NULL;
}

/* Threads cancelled while they flush in a loop, then the control calls
 * of the main thread, bounded: a cancel inside stkr_flush (its wait for
 * the worker) left the session's lock and the worker's request lock held,
 * and every later control call blocked for ever (QA, session 41: 20 of 20
 * runs). In a child, so that a hang is a failed test, not a stuck one. */
static int cancel_body(void *arg) {
  stkr_config cfg = {.size = sizeof cfg, .dir = arg,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  stkr_stats st;
  int err;

  alarm(60);
  if (stkr_init(&cfg) != 0)
    return 1;
  for (int i = 0; i < 20; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, flushing_thread, NULL) != 0)
      return 2;
    usleep(2000 + 1000 * (i % 7));
    pthread_cancel(th);
    pthread_join(th, NULL);
  }
  if ((err = stkr_flush_timeout(20000)) != 0) {
    fprintf(stderr, "stkr_flush_timeout after the cancels: %d\n", err);
    return 3;
  }
  if (stkr_stats_get(&st) != 0 || st.attempted != st.written + st.dropped)
    return 4;
  return stkr_shutdown() == 0 ? 0 : 5;
}

static void test_cancelled_in_control_calls(void **state) {
  (void)state;
  tl_run_child(cancel_body, tl_dir);
}

TL_TEST_MAIN_EACH("longjmp", tl_make_dir, NULL, test_wake_left_by_longjmp,
                  test_event_left_by_longjmp,
                  test_init_after_another_threads_jump,
                  test_cancelled_in_control_calls)
