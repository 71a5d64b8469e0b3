/* test-flush-timeout.c: stkr_flush_timeout, the barrier with a deadline
 * (flush/lifecycle.c, flush/worker.c request_flush). It returns by its
 * deadline when the worker is held (-ETIMEDOUT) or when another control
 * call holds the session, and the worker still serves the abandoned
 * request later (every event written; under ASan, its memory freed); on a
 * recorder thread (the flush worker's own dlclose) it refuses at once
 * (-EDEADLK) instead of waiting for itself. The hook library's dlclose
 * calls it: tests/test-unwind-record.c test_library_swapped_at_one_address. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "flush/worker.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "timeout.site");

enum { EVENTS = 1000 };

static void start(void) {
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600 * 1000,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  assert_int_equal(stkr_init(&cfg), 0);
}

/* Stop, and check that every event was written. */
static void stop_all_written(uint64_t events) {
  stkr_stats st;
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(st.written, events);
}

static void test_answers_like_flush(void **state) {
  stkr_stats st;
  (void)state;

  assert_int_equal(stkr_flush_timeout(100), -ENOTCONN);
  start();
  for (int i = 0; i < EVENTS; i++)
    assert_int_equal(stkr_event(&g_site, NULL, 0), 0);
  /* A generous deadline: met on a loaded machine too. */
  assert_int_equal(stkr_flush_timeout(30000), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, EVENTS);
  stop_all_written(EVENTS);
  assert_int_equal(stkr_flush_timeout(100), -ENOTCONN);
}

/* The worker held at its pass's start (the loader scan lock every pass
 * takes first): the call returns at its deadline, not before, and not
 * long after (bounded loosely: a loaded machine); let go, the worker
 * serves the request it left and every event is written. */
static void test_deadline_while_the_worker_is_held(void **state) {
  (void)state;

  start();
  for (int i = 0; i < EVENTS; i++)
    assert_int_equal(stkr_event(&g_site, NULL, 0), 0);
  stkr__loader_scan_begin();
  double t0 = tl_now_s();
  int rc = stkr_flush_timeout(50);
  double took = tl_now_s() - t0;
  stkr__loader_scan_end();
  assert_int_equal(rc, -ETIMEDOUT);
  if (took < 0.049 || took > 10.0)
    fail_msg("returned after %.3f s for a 50 ms deadline", took);
  /* Abandoned twice more, then served: each freed by the worker. */
  stkr__loader_scan_begin();
  assert_int_equal(stkr_flush_timeout(1), -ETIMEDOUT);
  assert_int_equal(stkr_flush_timeout(0), -ETIMEDOUT);
  stkr__loader_scan_end();
  stop_all_written(EVENTS);
}

static void *flush_thread(void *arg) {
  (void)arg;
  return (void *)(intptr_t)stkr_flush();
}

/* Another thread's stkr_flush holds the session (waiting on the held
 * worker): the call does not wait for it past its deadline. */
static void test_deadline_while_another_call_runs(void **state) {
  pthread_t th;
  void *ret;
  (void)state;

  start();
  assert_int_equal(stkr_event(&g_site, NULL, 0), 0);
  stkr__loader_scan_begin();
  assert_int_equal(pthread_create(&th, NULL, flush_thread, NULL), 0);
  usleep(20000); /* most likely inside stkr_flush by now; either way: */
  double t0 = tl_now_s();
  int rc = stkr_flush_timeout(50);
  double took = tl_now_s() - t0;
  stkr__loader_scan_end();
  assert_int_equal(pthread_join(th, &ret), 0);
  assert_int_equal((intptr_t)ret, 0);
  assert_int_equal(rc, -ETIMEDOUT);
  if (took > 10.0) fail_msg("returned after %.3f s", took);
  stop_all_written(1);
}

static void *ignored_thread(void *arg) {
  (void)arg;
  stkr__thread_ignore(); /* as the flush worker and the watchdog are */
  return (void *)(intptr_t)stkr_flush_timeout(30000);
}

/* On a thread of the recorder's own: refused at once. */
static void test_refused_on_a_recorder_thread(void **state) {
  pthread_t th;
  void *ret;
  (void)state;

  start();
  double t0 = tl_now_s();
  assert_int_equal(pthread_create(&th, NULL, ignored_thread, NULL), 0);
  assert_int_equal(pthread_join(th, &ret), 0);
  assert_int_equal((intptr_t)ret, -EDEADLK);
  if (tl_now_s() - t0 > 10.0) fail_msg("waited for itself");
  stop_all_written(0);
}

TL_TEST_MAIN("flush-timeout", tl_make_dir, tl_rm_dir, test_answers_like_flush,
             test_deadline_while_the_worker_is_held,
             test_deadline_while_another_call_runs,
             test_refused_on_a_recorder_thread)
