/* test-record.c: the whole product end to end — stkr_init, events from
 * known call chains on several threads, stkr_flush, and the recording read
 * back with the reader: every event, its site, thread, payload and exactly
 * the PCs its thread captured. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stkr_internal.h"
#include "tests/testlib.h"

#define THREADS 4
#define EVENTS 5000 /* per thread */

/* What each thread expects for its two call chains: the walk from the
 * leaf's own frame gives every PC but the first (the return address into
 * the leaf itself, which is checked to lie inside the leaf). */
typedef struct expect {
  uint64_t pcs[2][STKR_MAX_DEPTH];
  unsigned n[2]; /* PCs of our own frames: the chain up to worker() */
  uint64_t tid;
  int ready[2];
} expect;
static expect g_expect[THREADS];

STKR_SITE_DEFINE(g_sites_0, "test.record.0");
STKR_SITE_DEFINE(g_sites_1, "test.record.1");
STKR_SITE_DEFINE(g_sites_2, "test.record.2");
STKR_SITE_DEFINE(g_sites_3, "test.record.3");
static stkr_site *const g_sites[THREADS] = {&g_sites_0, &g_sites_1, &g_sites_2,
                                            &g_sites_3};

static __attribute__((noinline)) void leaf(int k, int chain, int i) {
  char payload[32];
  int len = snprintf(payload, sizeof payload, "t%d-%d", k, i);
  expect *e = &g_expect[k];

  if (!e->ready[chain]) {
    uintptr_t lo, hi;
    uint64_t h;
    bool trunc;
    stkr__stack_bounds(&lo, &hi);
    (void)stkr__walk((uintptr_t)__builtin_frame_address(0), lo, hi, 0,
                     e->pcs[chain], STKR_MAX_DEPTH - 1, &h, &trunc);
    /* Above worker() is the thread start code of libc (or of a sanitizer
     * runtime), built without frame pointers: what a walk finds there is
     * not ours to predict (under TSan it differs from event to event). The
     * recording runs with max_depth 3: leaf, then chain_a, worker or
     * chain_b2, chain_b. */
    e->n[chain] = 2;
    e->ready[chain] = 1;
  }
  while (stkr_event(g_sites[k], payload, (size_t)len) == -EAGAIN)
    usleep(100); /* ring full: let the worker drain (counted as a drop) */
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void chain_a(int k, int i) {
  leaf(k, 0, i);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void chain_b2(int k, int i) {
  leaf(k, 1, i);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void chain_b(int k, int i) {
  chain_b2(k, i);
  __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg) {
  int k = (int)(intptr_t)arg, i;
  char name[16];
  snprintf(name, sizeof name, "worker-%d", k);
  pthread_setname_np(pthread_self(), name);
  g_expect[k].tid = stkr__os_tid();
  for (i = 0; i < EVENTS; i++) {
    if (i % 2)
      chain_b(k, i);
    else
      chain_a(k, i);
  }
  return NULL;
}

static int stop_recorder(void **state);

static int count_dir_events(const char *dir, stkr_reader_counts *counts) {
  stkr_reader *r;
  stkr_event_view ev;
  int n = 0, rc;
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    n++;
  assert_int_equal(rc, 0);
  if (counts)
    stkr_reader_get_counts(r, counts);
  stkr_reader_free(r);
  return n;
}

static void test_threads_known_chains_read_back_exactly(void **state) {
  stkr_config cfg;
  stkr_stats st;
  pthread_t th[THREADS];
  stkr_reader *r;
  stkr_event_view ev;
  stkr_reader_counts rc;
  int k, got[THREADS] = {0}, seen_next[THREADS] = {0};
  uint64_t n = 0;
  (void)state;

  cfg = (stkr_config){.dir = tl_dir, .ring_bytes = 64 << 10,
                      .flush_interval_ms = 20, .max_depth = 3};
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_init(&cfg), -EALREADY);
  for (k = 0; k < THREADS; k++)
    pthread_create(&th[k], NULL, worker, (void *)(intptr_t)k);
  for (k = 0; k < THREADS; k++)
    pthread_join(th[k], NULL); /* threads exit before the flush */
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, st.written + st.dropped);
  assert_int_equal(st.written, (uint64_t)THREADS * EVENTS);
  assert_int_equal(st.threads, THREADS);

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    int i, chain;
    const expect *e;
    char want[32];
    n++;
    assert_int_equal(sscanf(ev.site, "test.record.%d", &k), 1);
    assert_true(k >= 0 && k < THREADS);
    e = &g_expect[k];
    /* Payload t<k>-<i>, in order per thread (not NUL-terminated). */
    assert_true(ev.payload_len > 0 && ev.payload_len < sizeof want);
    memcpy(want, ev.payload, ev.payload_len);
    want[ev.payload_len] = '\0';
    assert_int_equal(sscanf(want, "t%*d-%d", &i), 1);
    snprintf(want, sizeof want, "t%d-%d", k, i);
    assert_int_equal(ev.payload_len, strlen(want));
    assert_memory_equal(ev.payload, want, ev.payload_len);
    assert_int_equal(i, seen_next[k]);
    seen_next[k]++;
    assert_false(ev.payload_truncated);
    /* Thread. */
    assert_int_equal(ev.tid, e->tid);
    snprintf(want, sizeof want, "worker-%d", k);
    assert_string_equal(ev.thread_name, want);
    /* Stack: leaf PC, then exactly the chain walked from the leaf. */
    chain = i % 2;
    assert_int_equal(ev.n_pcs, e->n[chain] + 1);
    assert_true(ev.stack_truncated);
    assert_true(ev.pcs[0] > (uint64_t)(uintptr_t)&leaf &&
                ev.pcs[0] < (uint64_t)(uintptr_t)&leaf + 4096); /* -O0+ASan: big */
    assert_memory_equal(ev.pcs + 1, e->pcs[chain], e->n[chain] * 8);
    got[k]++;
  }
  stkr_reader_get_counts(r, &rc);
  assert_int_equal(rc.data_lost, 0);
  assert_int_equal(stkr_reader_process_count(r), 1);
  {
    const stkr_process_info *p = stkr_reader_process(r, 0);
    assert_int_equal(p->pid, (uint32_t)getpid());
    assert_int_equal(p->events, n);
    assert_int_equal(p->threads, THREADS);
    /* Every thread runs the same two chains (same code, same PCs), each at
     * its own site; a stack is a call chain as seen at one site: 2 x 4,
     * each stored once. */
    assert_int_equal(p->stacks, 2 * THREADS);
    assert_int_equal(p->drops, st.dropped);
  }
  stkr_reader_free(r);
  for (k = 0; k < THREADS; k++)
    assert_int_equal(got[k], EVENTS);
  assert_int_equal(n, st.written);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_shutdown(), -ENOTCONN);
  assert_int_equal(stkr_event(g_sites[0], NULL, 0), -ENOTCONN);
}

/* A deliberately tiny ring and a worker that only wakes on the high-water
 * mark: a burst drops, and every drop is counted, in the stats and in the
 * recording. */
static void test_tiny_ring_drops_are_counted_everywhere(void **state) {
  stkr_config cfg;
  stkr_stats st;
  int i, ok = 0;
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t n = 0;
  (void)state;
  cfg = (stkr_config){.dir = tl_dir, .ring_bytes = 16 << 10, .max_depth = 16,
                      .flush_interval_ms = 60000};
  assert_int_equal(stkr_init(&cfg), 0);
  for (i = 0; i < 20000; i++)
    ok += stkr_event(g_sites[0], "burst", 5) == 0;
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, 20000);
  assert_int_equal(st.written, (uint64_t)ok);
  assert_true(st.dropped_ring_full > 0);
  assert_int_equal(st.attempted, st.written + st.dropped);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    n += strcmp(ev.site, "test.record.0") == 0 &&
         ev.payload_len == 5 && ev.pid == (uint32_t)getpid();
  {
    /* This process's recording in the shared dir (the first test's files
     * are there too, same pid: the counters add up across both runs). */
    const stkr_process_info *p = stkr_reader_process(r, 0);
    assert_true(p->drops_ring_full >= st.dropped_ring_full);
  }
  stkr_reader_free(r);
  assert_true(n >= (uint64_t)ok);
}

/* fork in follow mode: the child writes its own files into the same
 * directory; its events are its own, never in the parent's files. */
static void test_fork_follow_child_writes_own_files(void **state) {
#if defined(__SANITIZE_THREAD__)
  /* TSan refuses to start threads in the child of a multi-threaded
   * process, and the child's recorder needs its worker thread. */
  skip();
#endif
  char dir[300];
  stkr_config cfg;
  pid_t pid;
  int status, i;
  stkr_reader *r;
  stkr_event_view ev;
  int parent_events = 0, child_events = 0;
  (void)state;
  snprintf(dir, sizeof dir, "%s/fork", tl_dir);
  cfg = (stkr_config){.dir = dir, .fork_mode = STKR_FORK_FOLLOW};
  assert_int_equal(stkr_init(&cfg), 0);
  for (i = 0; i < 100; i++)
    stkr_event(g_sites[1], "parent", 6);
  pid = fork();
  if (pid == 0) {
    int ok = 1;
    for (i = 0; i < 50; i++)
      ok &= stkr_event(g_sites[2], "child", 5) == 0;
    ok &= stkr_shutdown() == 0;
    _exit(ok ? 0 : 1);
  }
  for (i = 0; i < 100; i++)
    stkr_event(g_sites[1], "parent", 6);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    if (ev.pid == (uint32_t)getpid()) {
      assert_string_equal(ev.site, "test.record.1");
      parent_events++;
    } else {
      assert_int_equal(ev.pid, (uint32_t)pid);
      assert_string_equal(ev.site, "test.record.2");
      child_events++;
    }
  }
  assert_int_equal(stkr_reader_process_count(r), 2);
  for (i = 0; i < 2; i++) {
    const stkr_process_info *p = stkr_reader_process(r, (size_t)i);
    assert_true(p->clean_end);
    if (p->pid == (uint32_t)pid)
      assert_int_equal(p->parent_pid, (uint32_t)getpid());
  }
  stkr_reader_free(r);
  assert_int_equal(parent_events, 200);
  assert_int_equal(child_events, 50);
}

/* fork in the default (disable) mode: the child records nothing and
 * writes no file. */
static void test_fork_disable_child_writes_nothing(void **state) {
  char dir[300];
  stkr_config cfg;
  pid_t pid;
  int status;
  (void)state;
  snprintf(dir, sizeof dir, "%s/fork-off", tl_dir);
  cfg = (stkr_config){.dir = dir};
  assert_int_equal(stkr_init(&cfg), 0);
  stkr_event(g_sites[1], NULL, 0);
  pid = fork();
  if (pid == 0)
    _exit(stkr_event(g_sites[2], NULL, 0) == -ENOTCONN ? 0 : 1);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(count_dir_events(dir, NULL), 1);
}

/* Threads that rename themselves between bursts of events
 * (stkr_thread_renamed after each rename): every event is written under
 * the name it was made under, and the accounting adds up across the
 * retired states (4 threads x 50 names x 20 events). */
#define RENAMES 50
#define PER_NAME 20
static void *rename_worker(void *arg) {
  int k = (int)(intptr_t)arg;
  char name[16];

  for (int r = 0; r < RENAMES; r++) {
    snprintf(name, sizeof name, "rn%d-%d", k, r);
    pthread_setname_np(pthread_self(), name);
    stkr_thread_renamed();
    stkr_thread_renamed(); /* no change: nothing */
    for (int i = 0; i < PER_NAME; i++)
      while (stkr_event(g_sites[k], name, strlen(name)) == -EAGAIN)
        usleep(100);
    /* At most STKR__RENAMES renames a thread between two passes of the
     * worker are told apart (stackrec.h): a pass every few renames. */
    if (r % 4 == 3)
      stkr_flush();
  }
  return NULL;
}

static void test_renamed_threads(void **state) {
  char dir[4200];
  stkr_config cfg;
  stkr_stats st;
  pthread_t th[THREADS];
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t n = 0, wrong = 0;
  (void)state;

  snprintf(dir, sizeof dir, "%s/renamed", tl_dir);
  cfg = (stkr_config){.dir = dir, .flush_interval_ms = 5};
  assert_int_equal(stkr_init(&cfg), 0);
  for (intptr_t k = 0; k < THREADS; k++)
    assert_int_equal(pthread_create(&th[k], NULL, rename_worker, (void *)k),
                     0);
  for (int k = 0; k < THREADS; k++)
    pthread_join(th[k], NULL);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, st.written + st.dropped);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    n++;
    /* The payload is the name the thread had when it made the event. */
    wrong += ev.thread_name == NULL ||
             strlen(ev.thread_name) != ev.payload_len ||
             memcmp(ev.thread_name, ev.payload, ev.payload_len) != 0;
  }
  assert_int_equal(n, (uint64_t)THREADS * RENAMES * PER_NAME);
  assert_int_equal(wrong, 0);
  assert_int_equal(stkr_reader_process(r, 0)->threads,
                   (uint64_t)THREADS * RENAMES);
  stkr_reader_free(r);
}

/* The name of the one event of dir whose payload is `payload`. */
static void expect_named(const char *dir, const char *payload,
                         const char *name) {
  stkr_reader *r;
  stkr_event_view ev;
  int found = 0;

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    if (!ev.is_mark && ev.payload_len == strlen(payload) &&
        memcmp(ev.payload, payload, ev.payload_len) == 0) {
      found++;
      if (ev.thread_name == NULL || strcmp(ev.thread_name, name) != 0)
        fail_msg("event \"%s\" under \"%s\", want \"%s\"", payload,
                 ev.thread_name ? ev.thread_name : "(null)", name);
    }
  stkr_reader_free(r);
  assert_int_equal(found, 1);
}

/* Review of the rename queue: renames with no event between them, more
 * than the queue holds but a pass of the worker after each, are all told
 * (the queue emptied only when a later record was read); a rename while
 * not recording names the thread in the next session. */
static void *rename_corners(void *arg) {
  const char *dir = arg;
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 60000};
  char name[16];

  pthread_setname_np(pthread_self(), "c0");
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_event(g_sites[0], "first", 5), 0);
  for (int i = 1; i <= 12; i++) {
    snprintf(name, sizeof name, "c%d", i);
    pthread_setname_np(pthread_self(), name);
    stkr_thread_renamed();
    assert_int_equal(stkr_flush(), 0);
  }
  assert_int_equal(stkr_event(g_sites[0], "after12", 7), 0);
  assert_int_equal(stkr_shutdown(), 0);
  pthread_setname_np(pthread_self(), "between");
  stkr_thread_renamed(); /* not recording */
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_event(g_sites[0], "second", 6), 0);
  assert_int_equal(stkr_shutdown(), 0);
  return NULL;
}

static void test_rename_corner_cases(void **state) {
  char dir[4200];
  pthread_t th;
  (void)state;

  snprintf(dir, sizeof dir, "%s/rename-corners", tl_dir);
  assert_int_equal(pthread_create(&th, NULL, rename_corners, dir), 0);
  pthread_join(th, NULL);
  expect_named(dir, "first", "c0");
  expect_named(dir, "after12", "c12");
  expect_named(dir, "second", "between");
}

int main(void) {
  return TL_RUN_GROUP(
      "record", tl_make_dir, NULL,
      TL_CASES(NULL, stop_recorder, test_threads_known_chains_read_back_exactly,
               test_tiny_ring_drops_are_counted_everywhere,
               test_fork_follow_child_writes_own_files,
               test_fork_disable_child_writes_nothing,
               test_renamed_threads, test_rename_corner_cases));
}

/* A failed assertion must not leave the recorder running for the next
 * test (it would see -EALREADY). */
static int stop_recorder(void **state) {
  (void)state;
  (void)stkr_shutdown();
  return 0;
}
