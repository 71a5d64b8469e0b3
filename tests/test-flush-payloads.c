/* test-flush-payloads.c: payloads sent once per thread through the flush
 * worker (common/stkr_ringfile.h, "Payloads"; flush/worker.c, batch.c):
 * repeated, changing and evicted payloads from several threads, across
 * flushes, read back with the reader equal to what was passed, in order;
 * and a forked child (follow mode), whose table starts empty, its events
 * written with their payload. Split from test-flush.c (helpers of both:
 * tests/flush_harness.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stkr_internal.h"

#include "tests/flush_harness.h"
#include "tests/flush_util.h"
#include "tests/testlib.h"

/* ---- payloads once per thread (common/stkr_ringfile.h, "Payloads") ----
 * Repeated, changing and evicted payloads from several threads, across
 * flushes (a known payload whose bytes went out in an earlier batch, its
 * ring space long reused), read back equal to what was passed, in order;
 * and a forked child, whose table starts empty with its own worker's
 * mirror. */
#define PL_THREADS 3
#define PL_EVENTS 20000
#define PL_DISTINCT 150 /* more than the table's 64 slots: evictions */

STKR_SITE_DEFINE(g_pl_site, "flush.payloads");

/* Event i of thread k: mostly one of PL_DISTINCT paths in an order that
 * revisits and evicts slots; every 50th a payload pl_seen once. */
static size_t pl_payload_of(int k, int i, char *p, size_t cap) {
  if (i % 50 == 49)
    return (size_t)snprintf(p, cap, "/unique/%d/%d", k, i);
  return (size_t)snprintf(p, cap, "/usr/lib/k%d/file-%d.so", k,
                          (i * 7 + i / 300) % PL_DISTINCT);
}

static uint64_t g_pl_tid[PL_THREADS];

static void *pl_producer(void *arg) {
  int k = (int)(intptr_t)arg;
  char p[64];
  g_pl_tid[k] = stkr__os_tid();
  for (int i = 0; i < PL_EVENTS; i++) {
    size_t n = pl_payload_of(k, i, p, sizeof p);
    event_retry(&g_pl_site, p, n);
    /* Flushes mid-way: later known payloads refer to bytes that went out
     * in earlier batches, their ring space since reused. */
    if (k == 0 && i % 5000 == 4999) assert_int_equal(stkr_flush(), 0);
  }
  return NULL;
}

typedef struct pl_seen {
  int next[PL_THREADS]; /* a thread's events come back in its order */
  uint64_t events, bad;
} pl_seen;

static void pl_on_event(void *arg, const tf_ev *e) {
  pl_seen *s = arg;
  char want[64];
  int k;
  s->events++;
  for (k = 0; k < PL_THREADS && g_pl_tid[k] != e->tid; k++) {
  }
  if (k == PL_THREADS || s->next[k] >= PL_EVENTS) {
    s->bad++;
    return;
  }
  size_t n = pl_payload_of(k, s->next[k]++, want, sizeof want);
  if (e->payload_len != n || memcmp(e->payload, want, n) != 0 ||
      e->payload_truncated) {
    if (s->bad++ < 5)
      print_error("thread %d event %d: payload \"%.*s\", want \"%s\"\n", k,
                  s->next[k] - 1, (int)e->payload_len, e->payload, want);
  }
}

static void test_interned_payloads_roundtrip(void **state) {
  /* 64 KiB rings and a 5 ms timer: many laps, many batches. */
  stkr_config cfg = {.dir = tl_dir, .ring_bytes = 64 << 10,
                     .flush_interval_ms = 5};
  static pl_seen s; /* one test: zero */
  stkr_stats st;
  tf_sum sum;
  (void)state;
  assert_int_equal(stkr_init(&cfg), 0);
  run_threads(PL_THREADS, pl_producer);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  /* Not one event dropped by the worker for want of its payload. */
  assert_int_equal(st.written, (uint64_t)PL_THREADS * PL_EVENTS);
  assert_int_equal(tf_read(tl_dir, pl_on_event, &s, &sum), 0);
  assert_int_equal(s.events, (uint64_t)PL_THREADS * PL_EVENTS);
  assert_int_equal(s.bad, 0);
  for (int k = 0; k < PL_THREADS; k++) assert_int_equal(s.next[k], PL_EVENTS);
  assert_true(sum.clean_end);
}

/* Follow mode: the parent's thread knows the payload; the child's copy of
 * that thread must not (its table is cleared with the ring), or the
 * child's worker, which never saw the bytes, could not write its events. */
static void test_fork_child_sends_payload_again(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  skip(); /* TSan refuses threads after a multi-threaded fork */
#endif
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000,
                     .fork_mode = STKR_FORK_FOLLOW};
  static const char p[] = "/etc/known-before-fork";
  int status;
  volatile int i;
  assert_int_equal(stkr_init(&cfg), 0);
  for (i = 0; i < 3; i++) event_retry(&g_pl_site, p, sizeof p - 1);
  assert_int_equal(stkr_flush(), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    stkr_stats st;
    int bad = 0;
    for (i = 0; i < 5; i++) bad |= stkr_event(&g_pl_site, p, sizeof p - 1) != 0;
    bad |= (stkr_flush() != 0) << 1;
    bad |= (stkr_stats_get(&st) != 0 || st.written != 5) << 2;
    bad |= (stkr_shutdown() != 0) << 3;
    _exit(bad);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(stkr_shutdown(), 0);
}

static uint64_t g_fork_ok, g_fork_bad;
static void on_fork_event(void *arg, const tf_ev *e) {
  static const char p[] = "/etc/known-before-fork";
  (void)arg;
  if (e->payload_len == sizeof p - 1 && memcmp(e->payload, p, sizeof p - 1) == 0)
    g_fork_ok++;
  else
    g_fork_bad++;
}

/* Every event of both processes has the payload. */
/* Named test_fork_follow*: tests/aarch64/run.sh skips those (qemu-user
 * asserts on a forked child of a threaded process starting threads). */
static void test_fork_follow_payloads(void **state) {
  tf_sum sum;
  test_fork_child_sends_payload_again(state);
  g_fork_ok = g_fork_bad = 0;
  assert_int_equal(tf_read(tl_dir, on_fork_event, NULL, &sum), 0);
  assert_int_equal(g_fork_ok, 8);
  assert_int_equal(g_fork_bad, 0);
}

TL_TEST_MAIN_EACH("flush-payloads", tl_make_dir, teardown,
                  test_interned_payloads_roundtrip, test_fork_follow_payloads)
