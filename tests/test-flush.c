/* test-flush.c: the flush worker end to end (flush/worker.c, drain.c,
 * batch.c): events from several threads through stkr_event, stkr_flush,
 * the files decoded raw (every segment self-contained: Header first, every
 * id defined in its own segment) and read back with the reader (every event
 * with its site, thread and payload); the stats identity
 * attempted == written + dropped; rotation and the disk cap; write errors
 * with recovery; a removed directory; shutdown's last batch and frozen
 * stats; the producers' wake-up. Payloads sent once per thread:
 * test-flush-payloads.c (helpers of both: tests/flush_harness.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_boot.h"
#include "proto/stackrec.pb-c.h"
#include "recorder/stkr_internal.h"

#include "tests/flush_harness.h"
#include "tests/flush_util.h"
#include "tests/testlib.h"

/* ---- helpers ---- */

static void assert_identity(void) {
  stkr_stats st;
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.dropped, st.dropped_ring_full + st.dropped_reentrant +
                                   st.dropped_write_error + st.dropped_other);
  if (st.attempted != st.written + st.dropped) {
    print_error("attempted %llu != written %llu + dropped %llu\n",
                (unsigned long long)st.attempted,
                (unsigned long long)st.written, (unsigned long long)st.dropped);
    fail();
  }
}

/* stkr_flush() succeeds, and then `written` events are on disk by the
 * stats, which add up. */
static void flush_expect_written(uint64_t written) {
  stkr_stats st;

  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, written);
  assert_identity();
}

/* What the raw decode of every segment of this process found. */
typedef struct raw_sum {
  uint64_t events, batches, segments, last_batches, headers;
  uint64_t batches_without_payload_col, events_in_those;
  uint64_t exited_threads;
  uint64_t truncated_payloads;
  uint32_t max_stack_id;
  uint32_t parent_pid;
} raw_sum;

static bool bit(uint8_t **set, size_t *cap, uint32_t id, bool put) {
  if (id / 8 >= *cap) {
    size_t n = (id / 8 + 1) * 2;
    *set = realloc(*set, n);
    memset(*set + *cap, 0, n - *cap);
    *cap = n;
  }
  bool was = (*set)[id / 8] & (1u << (id % 8));
  if (put) (*set)[id / 8] |= (uint8_t)(1u << (id % 8));
  return was;
}

/* Decode every segment of our pid in tl_dir and check the format rules the
 * worker promises: Header (with this file's seq) exactly in the first batch
 * of each segment, images there too, each event's ids defined earlier in
 * the same segment (or in the same batch), columns of equal length,
 * payload_len either empty or one per event. */
static raw_sum check_raw_pid(uint32_t pid) {
  raw_sum s;
  uint32_t seqs[4096];
  size_t nseg = tf_segments(tl_dir, pid, seqs, 4096);
  memset(&s, 0, sizeof s);
  for (size_t i = 0; i < nseg; i++) {
    char path[512];
    Stackrec__Batch **b;
    size_t nb;
    uint8_t *sites = NULL, *threads = NULL, *stacks = NULL;
    size_t csites = 0, cthreads = 0, cstacks = 0;
    snprintf(path, sizeof path, "%s/stackrec-%u-%06u.zst", tl_dir,
             (unsigned)pid, seqs[i]);
    assert_int_equal(tf_load(path, &b, &nb), 0);
    assert_true(nb >= 1); /* no empty segment files are left behind */
    s.segments++;
    for (size_t k = 0; k < nb; k++) {
      Stackrec__Batch *B = b[k];
      s.batches++;
      if (k == 0) {
        assert_non_null(B->header);
        assert_int_equal(B->header->format_version, 1);
        assert_int_equal(B->header->pid, pid);
        s.parent_pid = B->header->parent_pid;
        assert_int_equal(B->header->segment_seq, seqs[i]);
        assert_non_null(B->header->config);
        assert_true(B->header->arch && B->header->arch[0]);
        assert_true(B->header->process_name && B->header->process_name[0]);
        assert_true(B->header->start_wall_ns > 0);
        stkr_clock_id me; /* which monotonic clock: this boot's id */
        stkr_clock_id_read(&me);
        assert_int_equal(B->header->boot_id.len, me.have_boot ? 16 : 0);
        if (me.have_boot)
          assert_memory_equal(B->header->boot_id.data, me.boot, 16);
        assert_true(B->n_images > 0);
        s.headers++;
      } else {
        assert_null(B->header);
      }
      assert_non_null(B->clock);
      assert_non_null(B->counters);
      if (B->last) s.last_batches++;
      for (size_t j = 0; j < B->n_sites; j++)
        bit(&sites, &csites, B->sites[j]->id, true);
      for (size_t j = 0; j < B->n_threads; j++) {
        bit(&threads, &cthreads, B->threads[j]->id, true);
        if (B->threads[j]->exited) s.exited_threads++;
      }
      for (size_t j = 0; j < B->n_stacks; j++) {
        Stackrec__StackDef *d = B->stacks[j];
        /* A stack carries its site, defined in this segment too. */
        assert_true(bit(&sites, &csites, d->site_id, false));
        bit(&stacks, &cstacks, d->id, true);
        if (d->id > s.max_stack_id) s.max_stack_id = d->id;
      }
      Stackrec__Events *e = B->events;
      if (!e) continue;
      size_t n = e->n_ts_delta_ns;
      /* Every event has a stack, and stacks carry the site: no column. */
      assert_int_equal(e->n_site_id, 0);
      assert_int_equal(e->n_thread_id, n);
      assert_int_equal(e->n_stack_id, n);
      assert_true(e->n_payload_len == 0 || e->n_payload_len == n);
      if (e->n_payload_len == 0) {
        assert_int_equal(e->payload_data.len, 0);
        s.batches_without_payload_col++;
        s.events_in_those += n;
      } else {
        size_t tot = 0;
        bool any = false;
        for (size_t j = 0; j < n; j++) {
          tot += e->payload_len[j];
          any |= e->payload_len[j] != 0;
        }
        assert_true(any); /* the column is left out when nobody has one */
        assert_int_equal(tot, e->payload_data.len);
      }
      s.truncated_payloads += e->n_payload_truncated;
      for (size_t j = 0; j < n; j++) {
        assert_true(bit(&threads, &cthreads, e->thread_id[j], false));
        assert_true(bit(&stacks, &cstacks, e->stack_id[j], false));
      }
      s.events += n;
    }
    free(sites);
    free(threads);
    free(stacks);
    tf_free(b, nb);
  }
  return s;
}

static raw_sum check_raw(void) { return check_raw_pid((uint32_t)getpid()); }

/* ---- tests ---- */

static void test_api_states(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir};
  stkr_stats st;
  assert_int_equal(stkr_flush(), -ENOTCONN);
  assert_int_equal(stkr_shutdown(), -ENOTCONN);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_init(&cfg), -EALREADY);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_shutdown(), -ENOTCONN);
  assert_int_equal(stkr_flush(), -ENOTCONN);
  /* Shutdown writes a last batch even with no event. */
  raw_sum r = check_raw();
  assert_int_equal(r.segments, 1);
  assert_int_equal(r.last_batches, 1);
  assert_int_equal(r.events, 0);
}

static void test_malformed_env_fails_init(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir};
  setenv("STACKREC_SEGMENT_BYTES", "12 M", 1);
  assert_int_equal(stkr_init(&cfg), -EINVAL);
  unsetenv("STACKREC_SEGMENT_BYTES");
  assert_int_equal(stkr_flush(), -ENOTCONN);
  /* A directory that cannot be created fails init with its errno, and
   * the cleanup closes nothing it did not open (fd 0 survives). */
  stkr_config bad = {.dir = "/proc/self/no/such/dir"};
  int fd0 = fcntl(0, F_GETFD);
  assert_true(stkr_init(&bad) < 0);
  assert_int_equal(fcntl(0, F_GETFD), fd0);
  assert_int_equal(stkr_flush(), -ENOTCONN);
}

#define THREADS 4
#define EVENTS 3000
#define PAYLOAD_MAX 64

STKR_SITE_DEFINE(g_site0, "flush.test.0");
STKR_SITE_DEFINE(g_site1, "flush.test.1");
STKR_SITE_DEFINE(g_site2, "flush.test.2");
STKR_SITE_DEFINE(g_site3, "flush.test.3");
static stkr_site *const g_site[THREADS] = {&g_site0, &g_site1, &g_site2,
                                           &g_site3};
static uint64_t g_tid[THREADS];
static uint32_t g_tid_id[THREADS]; /* recorder thread id, from the reader */

static __attribute__((noinline)) void emit(int k, int i) {
  char p[128];
  int len;
  if (i % 3 == 2) {
    event_retry(g_site[k], NULL, 0); /* no payload */
    return;
  }
  len = snprintf(p, sizeof p, "t%d-%d", k, i);
  if (i % 100 == 7) { /* over payload_max: cut and marked */
    memset(p + len, 'z', sizeof p - (size_t)len);
    len = (int)sizeof p;
  }
  event_retry(g_site[k], p, (size_t)len);
}

static void *producer(void *arg) {
  int k = (int)(intptr_t)arg;
  char name[16];
  snprintf(name, sizeof name, "prod-%d", k);
  pthread_setname_np(pthread_self(), name);
  g_tid[k] = stkr__os_tid();
  for (int i = 0; i < EVENTS; i++) emit(k, i);
  return NULL;
}

typedef struct seen {
  uint8_t got[THREADS][EVENTS];
  uint64_t events, bad;
} seen;

static void on_event(void *arg, const tf_ev *e) {
  seen *s = arg;
  int k = -1, i = -1;
  s->events++;
  if (e->unresolved || sscanf(e->site, "flush.test.%d", &k) != 1 || k < 0 ||
      k >= THREADS || e->tid != g_tid[k] || e->n_pcs == 0 ||
      strncmp(e->thread_name, "prod-", 5) != 0) {
    s->bad++;
    return;
  }
  g_tid_id[k] = e->thread_id;
  if (e->payload_len == 0) {
    /* payload-less events: count them against the first free slot with
     * i % 3 == 2 */
    for (i = 2; i < EVENTS; i += 3)
      if (!s->got[k][i]) break;
    if (i >= EVENTS) s->bad++;
    else s->got[k][i] = 1;
    return;
  }
  char buf[PAYLOAD_MAX + 1];
  memcpy(buf, e->payload, e->payload_len);
  buf[e->payload_len] = '\0';
  int kk;
  if (sscanf(buf, "t%d-%d", &kk, &i) != 2 || kk != k || i < 0 || i >= EVENTS ||
      s->got[k][i] || (i % 100 == 7) != e->payload_truncated ||
      (e->payload_truncated && e->payload_len != PAYLOAD_MAX)) {
    s->bad++;
    return;
  }
  s->got[k][i] = 1;
}

static void test_threads_roundtrip(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .ring_bytes = 1 << 20,
                     .flush_interval_ms = 20, .payload_max = PAYLOAD_MAX};
  stkr_stats st;
  static seen s;
  tf_sum sum;

  memset(&s, 0, sizeof s);
  assert_int_equal(stkr_init(&cfg), 0);
  run_threads(THREADS, producer);
  assert_int_equal(stkr_flush(), 0);
  assert_identity();
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, (uint64_t)THREADS * EVENTS);
  assert_int_equal(st.write_errors, 0);
  assert_int_equal(st.dropped_write_error, 0);
  assert_int_equal(st.threads, THREADS);
  assert_true(st.sites >= THREADS);
  assert_true(st.stacks >= 2); /* same code on every thread: 2 call sites */
  assert_true(st.batches >= 1);
  assert_true(st.bytes > 0);
  assert_int_equal(st.segments, 1);

  /* Readable now, while recording goes on: the flush is a barrier. */
  assert_int_equal(tf_read(tl_dir, on_event, &s, &sum), 0);
  assert_int_equal(s.bad, 0);
  assert_int_equal(s.events, (uint64_t)THREADS * EVENTS);
  for (int k = 0; k < THREADS; k++)
    for (int i = 0; i < EVENTS; i++)
      if (!s.got[k][i]) {
        print_error("missing event %d of thread %d\n", i, k);
        fail();
      }
  assert_false(sum.clean_end);
  assert_int_equal(sum.data_lost, 0);

  assert_int_equal(stkr_shutdown(), 0);
  raw_sum r = check_raw();
  assert_int_equal(r.events, (uint64_t)THREADS * EVENTS);
  assert_int_equal(r.last_batches, 1);
  uint64_t cut = 0;
  for (int i = 0; i < EVENTS; i++) cut += i % 100 == 7 && i % 3 != 2;
  assert_int_equal(r.truncated_payloads, THREADS * cut);
  /* The joined threads were reaped with a final ThreadDef. */
  assert_true(r.exited_threads >= THREADS);
  assert_int_equal(tf_read(tl_dir, NULL, NULL, &sum), 0);
  assert_true(sum.clean_end);
  assert_int_equal(sum.events, (uint64_t)THREADS * EVENTS);
}

STKR_SITE_DEFINE(g_plain, "flush.test.plain");

static void test_no_payload_column_when_no_payloads(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  assert_int_equal(stkr_init(&cfg), 0);
  for (int i = 0; i < 100; i++) event_retry(&g_plain, NULL, 0);
  assert_int_equal(stkr_flush(), 0);
  event_retry(&g_plain, "x", 1);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  raw_sum r = check_raw();
  assert_int_equal(r.events, 101);
  assert_int_equal(r.events_in_those, 100);
  assert_identity();
}

/* Random payloads do not compress: segments fill quickly. */
static void fill(int n) {
  uint8_t p[200];
  for (int i = 0; i < n; i++) {
    for (size_t j = 0; j < sizeof p; j++) p[j] = (uint8_t)rand();
    event_retry(&g_plain, p, sizeof p);
  }
}

static uint64_t dir_bytes(void) {
  uint32_t seqs[4096];
  size_t n = tf_segments(tl_dir, (uint32_t)getpid(), seqs, 4096);
  uint64_t tot = 0;
  for (size_t i = 0; i < n; i++) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, (unsigned)getpid(),
             seqs[i]);
    if (stat(p, &st) == 0) tot += (uint64_t)st.st_size;
  }
  return tot;
}

static void test_rotation_and_disk_cap(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000,
                     .segment_bytes = 16 << 10, .disk_cap_bytes = 64 << 10};
  stkr_stats st;
  assert_int_equal(stkr_init(&cfg), 0);
  for (int round = 0; round < 40; round++) {
    fill(30); /* ~6 KB per batch */
    assert_int_equal(stkr_flush(), 0);
    /* The cap holds after every batch: closed files <= cap, plus the
     * current one (under segment_bytes + one batch). */
    assert_true(dir_bytes() <= (64 << 10) + (16 << 10) + (8 << 10));
  }
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_true(st.segments >= 10);
  assert_true(st.segments_deleted >= 5);
  assert_int_equal(st.write_errors, 0);
  assert_identity();
  assert_int_equal(stkr_shutdown(), 0);
  /* Every surviving segment is self-contained. */
  raw_sum r = check_raw();
  assert_int_equal(r.headers, r.segments);
  uint32_t seqs[4096];
  /* The last batch enforces the cap before its write: frozen stats. */
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(tf_segments(tl_dir, (uint32_t)getpid(), seqs, 4096),
                   st.segments - st.segments_deleted);
  /* The reader reads what is left, without damage. */
  tf_sum sum;
  assert_int_equal(tf_read(tl_dir, NULL, NULL, &sum), 0);
  assert_int_equal(sum.data_lost, 0);
  assert_int_equal(sum.events, r.events);
  assert_int_equal(sum.unresolved, 0);
}

static void test_write_error_counted_then_resumes(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  stkr_stats st;
  struct rlimit old, lim;
  int rc;

  signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(stkr_init(&cfg), 0);
  fill(10);
  assert_int_equal(stkr_flush(), 0);

  /* No file may grow: every write fails (EFBIG). Nothing may print here
   * (the test log is a file too), so assertions wait for the limit to go. */
  lim = old;
  lim.rlim_cur = 1;
  setrlimit(RLIMIT_FSIZE, &lim);
  fill(25);
  rc = stkr_flush();
  fill(5);
  int rc2 = stkr_flush();
  int rc3 = stkr_flush(); /* nothing new: nothing failed since rc2 */
  setrlimit(RLIMIT_FSIZE, &old);
  assert_int_equal(rc, -EIO);
  assert_int_equal(rc2, -EIO);
  assert_int_equal(rc3, 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, 10);
  assert_int_equal(st.dropped_write_error, 30);
  assert_true(st.write_errors >= 2);
  assert_identity();

  fill(7);
  flush_expect_written(17);
  assert_int_equal(stkr_shutdown(), 0);

  raw_sum r = check_raw();
  assert_int_equal(r.events, 17);
  tf_sum sum;
  assert_int_equal(tf_read(tl_dir, NULL, NULL, &sum), 0);
  assert_int_equal(sum.events, 17);
  assert_int_equal(sum.data_lost, 0);
  assert_int_equal(sum.write_error_drops, 30); /* from Counters */
  assert_true(sum.clean_end);
}

static void test_directory_removed_mid_run(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  assert_int_equal(stkr_init(&cfg), 0);
  fill(5);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(tl_rm_rf(tl_dir), 0);
  fill(6);
  flush_expect_written(11);
  assert_int_equal(stkr_shutdown(), 0);
  raw_sum r = check_raw(); /* recreated dir, a new self-contained file */
  assert_int_equal(r.events, 6);
  assert_int_equal(r.segments, 1);
  assert_int_equal(r.headers, 1);
}

static void test_shutdown_drains_and_freezes_stats(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  stkr_stats a, b;
  assert_int_equal(stkr_init(&cfg), 0);
  fill(123);
  assert_int_equal(stkr_shutdown(), 0); /* no flush: shutdown drains */
  assert_int_equal(stkr_stats_get(&a), 0);
  assert_int_equal(a.written, 123);
  assert_int_equal(a.attempted, 123);
  assert_int_equal(stkr_event(&g_plain, NULL, 0), -ENOTCONN);
  assert_int_equal(stkr_stats_get(&b), 0);
  assert_memory_equal(&a, &b, sizeof a);
  raw_sum r = check_raw();
  assert_int_equal(r.events, 123);
  assert_int_equal(r.last_batches, 1);

  /* A second recording in the same directory: counters from 0, and new
   * files after the old ones. */
  assert_int_equal(stkr_init(&cfg), 0);
  fill(4);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&b), 0);
  assert_int_equal(b.attempted, 4);
  assert_int_equal(b.written, 4);
  assert_int_equal(stkr_shutdown(), 0);
  r = check_raw();
  assert_int_equal(r.events, 127);
  assert_int_equal(r.segments, 2);
  assert_int_equal(r.last_batches, 2);
}

/* With a timer that never fires, only the producers' wake-up can drain:
 * a small ring pushed far past its size must still get through. */
static void *wake_producer(void *arg) {
  (void)arg;
  uint8_t p[100];
  memset(p, 'w', sizeof p);
  for (int i = 0; i < 20000; i++) event_retry(&g_plain, p, sizeof p);
  return NULL;
}

static void test_wake_drains_without_timer(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000,
                     .ring_bytes = 64 << 10, .max_depth = 16};
  pthread_t th;
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(pthread_create(&th, NULL, wake_producer, NULL), 0);
  pthread_join(th, NULL);
  flush_expect_written(20000);
  assert_int_equal(stkr_shutdown(), 0);
}

/* Follow mode: the child's first event starts its own worker and files
 * (parent_pid in the Header); the parent's recording is untouched. */
static void test_fork_follow(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* TSan refuses to start threads after a multi-threaded fork, which is
   * exactly what follow mode does. */
  skip();
#endif
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000,
                     .fork_mode = STKR_FORK_FOLLOW};
  stkr_stats st;
  int status;
  assert_int_equal(stkr_init(&cfg), 0);
  fill(3);
  assert_int_equal(stkr_flush(), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    for (int i = 0; i < 5; i++) bad |= stkr_event(&g_plain, "c", 1) != 0;
    bad |= (stkr_flush() != 0) << 1;
    bad |= (stkr_stats_get(&st) != 0 || st.attempted != 5 || st.written != 5)
           << 2;
    bad |= (stkr_shutdown() != 0) << 3;
    _exit(bad);
  }
  fill(2);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  flush_expect_written(5);
  assert_int_equal(stkr_shutdown(), 0);
  raw_sum p = check_raw();
  assert_int_equal(p.events, 5);
  assert_int_equal(p.parent_pid, 0);
  raw_sum c = check_raw_pid((uint32_t)pid);
  assert_int_equal(c.events, 5);
  assert_int_equal(c.segments, 1);
  assert_int_equal(c.last_batches, 1);
  assert_int_equal(c.parent_pid, (uint32_t)getpid());
}

/* Disable mode: the child records nothing and writes no file. */
static void test_fork_disable(void **state) {
  (void)state;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  int status;
  assert_int_equal(stkr_init(&cfg), 0);
  fill(3);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int bad = stkr_event(&g_plain, "c", 1) != -ENOTCONN;
    bad |= (stkr_flush() != -ENOTCONN) << 1;
    bad |= (stkr_shutdown() != -ENOTCONN) << 2;
    _exit(bad);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  fill(1);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(check_raw().events, 4);
  uint32_t seqs[4];
  assert_int_equal(tf_segments(tl_dir, (uint32_t)pid, seqs, 4), 0);
}

/* A producer counts `pushed` after its commit: the worker may write the
 * record first (the producer descheduled, or ended by _exit, in between).
 * attempted must still cover written, and count the record once when the
 * producer's count arrives ("attempted 74630 < written 74631" before). */
static void test_pushed_counted_after_write(void **state) {
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  stkr_stats st;
  (void)state;
  assert_int_equal(stkr_init(&cfg), 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(stkr_event(&g_plain, NULL, 0), 0);
  atomic_store(&stkr__tls->pushed, 2); /* the third not counted yet */
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, 3);
  assert_int_equal(st.attempted, 3);
  atomic_store(&stkr__tls->pushed, 3); /* its count arrives */
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, 3);
  assert_identity();
  assert_int_equal(stkr_shutdown(), 0);
}

TL_TEST_MAIN_EACH("flush", tl_make_dir, teardown, test_api_states,
                  test_pushed_counted_after_write,
                  test_malformed_env_fails_init, test_threads_roundtrip,
                  test_no_payload_column_when_no_payloads,
                  test_rotation_and_disk_cap,
                  test_write_error_counted_then_resumes,
                  test_directory_removed_mid_run,
                  test_shutdown_drains_and_freezes_stats,
                  test_wake_drains_without_timer, test_fork_follow,
                  test_fork_disable)
