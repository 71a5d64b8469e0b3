/*
 * test-exit-goes-on.c: a process that called stkr_shutdown_for_exit() and
 * then went on after all (stkr_init again on the same directory: a crash
 * handler that returned, an app that tears down and restarts its
 * recording). Events the exit's deadline left in the rings
 * (stkr_stats.pending_recovery) are written by the recovery the next
 * stkr_init runs, as after a death. Before (QA, session 37), that
 * stkr_init pooled the rings with the events in them: 1 033 of 3 000 lost
 * in 7 of 7 runs, verify "damaged" (attempted != written + dropped).
 * Rounds after the first run in a process whose earlier threads exited
 * after their recording's end: the new threads get the configured ring
 * (before, the dead threads' rings still counted against the ring memory
 * cap until the new worker's first pass, and 2 of 3 new threads got a
 * quarter of it: 3 822 of 9 000 events dropped, ring full).
 * Also: the exit is not starved by another thread's stkr_flush loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

#define THREADS 3
#define EVENTS 3000 /* per thread and round */

STKR_SITE_DEFINE(g_site, "test.exit_goes_on");

static pthread_barrier_t g_recorded, g_go_on;
static uint64_t g_ok[THREADS];

/* Two rounds of EVENTS events each, with the main thread's end and new
 * start of the recording between them. */
static void *producer(void *arg) {
  uint64_t *ok = arg;
  char payload[200];

  memset(payload, 'z', sizeof payload);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < EVENTS; i++) {
      /* Each its own: not sent once as a known payload (ring space). */
      memcpy(payload, &i, sizeof i);
      payload[sizeof i] = (char)round;
      *ok += stkr_event(&g_site, payload, sizeof payload) == 0;
    }
    pthread_barrier_wait(&g_recorded);
    pthread_barrier_wait(&g_go_on);
  }
  return NULL;
}

/* One run into dir. @return the first session's pending_recovery. */
static uint64_t run(const char *dir, uint64_t *ok_total) {
  stkr_config c;
  stkr_stats st;
  pthread_t t[THREADS];

  stkr_config_init(&c);
  c.dir = dir;
  c.exit_ms = 1; /* too short for the worker: events stay in the rings */
  c.flush_interval_ms = 1000;
  c.ring_bytes = 1u << 20; /* every event fits: none dropped */
  memset(g_ok, 0, sizeof g_ok);
  assert_int_equal(stkr_init(&c), 0);
  assert_int_equal(pthread_barrier_init(&g_recorded, NULL, THREADS + 1), 0);
  assert_int_equal(pthread_barrier_init(&g_go_on, NULL, THREADS + 1), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, producer, &g_ok[i]), 0);
  pthread_barrier_wait(&g_recorded);
  int rc = stkr_shutdown_for_exit();
  assert_true(rc == 0 || rc == -ETIMEDOUT);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, st.written + st.dropped + st.pending_recovery);
  uint64_t pending = st.pending_recovery;
  assert_int_equal(stkr_init(&c), 0); /* the process goes on */
  pthread_barrier_wait(&g_go_on);
  pthread_barrier_wait(&g_recorded);
  assert_int_equal(stkr_shutdown(), 0);
  pthread_barrier_wait(&g_go_on);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  pthread_barrier_destroy(&g_recorded);
  pthread_barrier_destroy(&g_go_on);
  *ok_total = 0;
  for (int i = 0; i < THREADS; i++)
    *ok_total += g_ok[i];
  return pending;
}

static void test_pending_events_recovered(void **state) {
  int reached = 0;
  (void)state;

  /* The worker may drain everything within 1 ms now and then: rounds
   * until one leaves events pending (each round is checked either way). */
  for (int k = 0; k < 8 && reached < 2; k++) {
    char dir[300];
    stkr_reader_opts o = {.lazy_frames = true};
    stkr_reader *r = NULL;
    stkr_event_view ev;
    const stkr_process_info *p;
    uint64_t ok, events = 0;
    int rc;

    snprintf(dir, sizeof dir, "%s/run%d", tl_dir, k);
    reached += run(dir, &ok) > 0;
    assert_int_equal(stkr_reader_open(dir, &o, &r), 0);
    while ((rc = stkr_reader_next(r, &ev)) == 1)
      events++;
    assert_int_equal(rc, 0);
    assert_int_equal(stkr_reader_process_count(r), 1);
    p = stkr_reader_process(r, 0);
    /* Every event recorded is read, the counters add up, and none went
     * for want of ring space (a rare dropped_other, a refused event, was
     * seen once in 13 runs here: counted, and not this test's concern). */
    if (events != ok || p->damaged_batches || p->accounting_mismatches ||
        p->drops_ring_full || p->unclean_sessions || p->segments_missing)
      fail_msg("run %d: %llu events read of %llu recorded (damaged %llu, "
               "accounting %llu, incomplete %d; drops: ring full %llu, "
               "other %llu, exit %llu)", k,
               (unsigned long long)events, (unsigned long long)ok,
               (unsigned long long)p->damaged_batches,
               (unsigned long long)p->accounting_mismatches,
               (int)p->incomplete, (unsigned long long)p->drops_ring_full,
               (unsigned long long)p->drops_other,
               (unsigned long long)p->drops_exit);
    stkr_reader_free(r);
  }
  print_message("runs that left events pending at the exit: %d\n", reached);
  if (reached == 0) /* said, not passed as if tried (review) */
    skip();
}

/* stkr_shutdown_for_exit while another thread calls stkr_flush in a tight
 * loop: the exit goes first (QA, session 39: the unfair lock went back to
 * the flushing thread every time, and the exit gave up with -EBUSY after
 * 100 ms, 6 of 6 runs, the session without its end mark). */
static _Atomic int g_flushing_stop;

static void *flush_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&g_flushing_stop))
    (void)stkr_flush();
  return NULL;
}

static void test_exit_not_starved_by_flushes(void **state) {
  stkr_config cfg;
  pthread_t th;
  struct timespec ms30 = {0, 30000000};
  int err;
  (void)state;

  stkr_config_init(&cfg);
  cfg.dir = tl_dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_event(&g_site, "x", 1), 0);
  atomic_store(&g_flushing_stop, 0);
  assert_int_equal(pthread_create(&th, NULL, flush_loop, NULL), 0);
  nanosleep(&ms30, NULL);
  err = stkr_shutdown_for_exit();
  atomic_store(&g_flushing_stop, 1);
  pthread_join(th, NULL);
  assert_int_equal(err, 0);
}

TL_TEST_MAIN("exit-goes-on", tl_make_dir, NULL, test_pending_events_recovered,
             test_exit_not_starved_by_flushes)
