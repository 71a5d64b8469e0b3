/*
 * test-recover.c: crash-proof rings. A child process records into file-
 * backed rings and dies by SIGKILL; the parent (playing `stackrec record`,
 * `stackrec recover` or the next stkr_init) recovers what the child left in
 * its ring files and reads the directory back: every event the child
 * accepted is there exactly once.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_ringfile.h"
#include "tests/cli_run.h"
#include "proto/stkr_reader.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "recorder/stkr_internal.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "recover.test");

static char g_root[256];
static int g_dirs;

static void new_dir(char *out, size_t cap) {
  snprintf(out, cap, "%s/d%d", g_root, ++g_dirs);
  assert_int_equal(mkdir(out, 0700), 0);
}

/* ---- reading back --------------------------------------------------------- */

typedef struct readback {
  uint64_t events;
  uint32_t *seen;     /* by payload value (u32), for "exactly once" */
  uint32_t *thread_of; /* by payload value: the event's thread id */
  size_t n_seen;
  uint64_t by_byte[256]; /* 1-byte payloads: events per value */
  uint64_t warnings_lost;
  uint64_t warnings_inconsistent; /* e.g. a stack id defined twice */
  uint64_t stack_of[4];           /* stack id of the events of helper i */
  uint64_t helper_events[4];
  /* 4-byte payloads (record_seq: one call chain): their stack */
  uint64_t seq_stack, seq_other_stack, seq_no_stack, seq_site_bad;
  uint64_t ts_min, ts_max; /* over all events */
} readback;

static void rb_warn(void *arg, const stkr_warning *w) {
  readback *rb = arg;
  if (w->data_lost && w->kind != STKR_WARN_TRUNCATED)
    rb->warnings_lost++;
  if (w->kind == STKR_WARN_INCONSISTENT)
    rb->warnings_inconsistent++;
}

static void read_dir(const char *dir, readback *rb, size_t n_seen) {
  stkr_reader_opts o = {.warn = rb_warn, .warn_arg = rb, .lazy_frames = true};
  stkr_reader *r;
  stkr_event_view ev;
  int rc;

  memset(rb, 0, sizeof *rb);
  rb->n_seen = n_seen;
  rb->seen = calloc(n_seen ? n_seen : 1, sizeof *rb->seen);
  rb->thread_of = calloc(n_seen ? n_seen : 1, sizeof *rb->thread_of);
  assert_true(rb->seen != NULL && rb->thread_of != NULL);
  assert_int_equal(stkr_reader_open(dir, &o, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    rb->events++;
    if (rb->ts_min == 0 || ev.ts_ns < rb->ts_min) rb->ts_min = ev.ts_ns;
    if (ev.ts_ns > rb->ts_max) rb->ts_max = ev.ts_ns;
    if (ev.payload_len == 4) {
      uint32_t v;
      memcpy(&v, ev.payload, 4);
      if (v < n_seen) {
        rb->seen[v]++;
        rb->thread_of[v] = ev.thread_id;
      }
      if (ev.n_pcs == 0)
        rb->seq_no_stack++;
      else if (rb->seq_stack == 0)
        rb->seq_stack = ev.pcs[0] ^ ev.n_pcs;
      else if (rb->seq_stack != (ev.pcs[0] ^ ev.n_pcs))
        rb->seq_other_stack++;
      if (ev.site == NULL || strcmp(ev.site, "recover.test") != 0)
        rb->seq_site_bad++;
    } else if (ev.payload_len == 1) {
      rb->by_byte[ev.payload[0]]++;
    } else if (ev.payload_len == 2 && ev.payload[0] == 'h' &&
               ev.payload[1] < 4) {
      /* helper_event(): the same call chain every time per helper */
      unsigned h = ev.payload[1];
      if (rb->helper_events[h]++ == 0)
        rb->stack_of[h] = ev.n_pcs ? ev.pcs[0] ^ ev.n_pcs : 0;
      else if (rb->stack_of[h] != (ev.n_pcs ? ev.pcs[0] ^ ev.n_pcs : 0))
        rb->stack_of[h] = UINT64_MAX; /* two different stacks: wrong */
    }
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(r);
}

static void rb_free(readback *rb) {
  free(rb->seen);
  free(rb->thread_of);
}

/* dir holds `events` events, among them the payloads 0..n-1 once each. */
static void assert_read_once(const char *dir, uint64_t events, uint32_t n) {
  readback rb;

  read_dir(dir, &rb, n);
  assert_int_equal(rb.events, events);
  for (uint32_t i = 0; i < n; i++) assert_int_equal(rb.seen[i], 1);
  rb_free(&rb);
}

/* ---- recording children ------------------------------------------------ */

static void record_seq(uint32_t from, uint32_t n) {
  for (uint32_t i = from; i < from + n; i++)
    if (stkr_event(&g_site, &i, 4) != 0) _exit(91);
}

/* Fork: the child starts recording with cfg (exit 90 if it cannot), runs
 * body(arg) and dies by SIGKILL, leaving its ring files behind; the parent
 * waits for it. @return the child's wait status. */
static int run_killed_child(const stkr_config *cfg, void (*body)(void *),
                            void *arg) {
  int status;
  pid_t p = fork();

  assert_true(p >= 0);
  if (p == 0) {
    if (stkr_init(cfg) != 0) _exit(90);
    body(arg);
    kill(getpid(), SIGKILL);
    _exit(94);
  }
  assert_int_equal(waitpid(p, &status, 0), p);
  return status;
}

/* Child: record n1 events, flush, (optionally) rewind the ring file's tail
 * to where it was before the flush, as if we died between the batch's
 * write(2) and the tail store; record n2 more; die by SIGKILL. */
typedef struct die_arg {
  uint32_t n1, n2;
  bool rewind;
} die_arg;

static void die_body(void *arg) {
  const die_arg *a = arg;
  /* One call site for both phases: one stack, so that the ring holds only
   * known records after the flush (their full record is in the segment). */
  for (int phase = 0; phase < 2; phase++) {
    record_seq(phase ? a->n1 : 0, phase ? a->n2 : a->n1);
    if (phase == 0 && a->n1) {
      if (stkr_flush() != 0) _exit(92);
      if (a->rewind) {
        stkr__ring_ctl *c = stkr__tls->ring.c;
        if (stkr__tls->ring.session == 0) _exit(93); /* not a ring file */
        atomic_store_explicit(&c->tail, 0, memory_order_release);
      }
    }
  }
}

static void run_child_die(const char *dir, uint32_t n1, uint32_t n2,
                          bool rewind) {
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000,
                     .ring_bytes = 256 << 10};
  die_arg a = {n1, n2, rewind};
  int status = run_killed_child(&cfg, die_body, &a);

  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

typedef struct msgs {
  int n;
  char last[1024];
} msgs;

static void msg_cb(void *arg, const char *line) {
  msgs *m = arg;
  m->n++;
  snprintf(m->last, sizeof m->last, "%s", line);
}

static void recover(const char *dir, bool dry, stkr_recover_stats *st,
                    msgs *m) {
  stkr_recover_opts o = {.dry_run = dry, .message = msg_cb, .message_arg = m};
  memset(m, 0, sizeof *m);
  assert_int_equal(stkr_recover_dir(dir, &o, st), 0);
}

/* ---- tests ---------------------------------------------------------------- */

/* A recording's files: a session file and one ring file per thread, with
 * the header fields a reader needs; a clean shutdown removes them. */
static void test_ring_file_layout(void **state) {
  char dir[300], path[600];
  stkr_config cfg = {.flush_interval_ms = 3600000, .ring_bytes = 64 << 10};
  stkr_ringfile_meta m;
  stkr_sessfile_hdr h;
  int fd;
  (void)state;

  new_dir(dir, sizeof dir);
  cfg.dir = dir;
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_event(&g_site, "x", 1), 0);
  assert_int_equal(tl_count_files(dir, ".session"), 1);
  assert_int_equal(tl_count_files(dir, ".ring"), 1);
  tl_find_file(dir, ".ring", path, sizeof path);
  assert_true((fd = open(path, O_RDONLY)) >= 0);
  assert_int_equal(pread(fd, &m, sizeof m, 0), (ssize_t)sizeof m);
  close(fd);
  assert_memory_equal(m.magic, STKR_RINGFILE_MAGIC, 8);
  assert_int_equal(m.version, STKR_RINGFILE_VERSION);
  assert_int_equal(m.hdr_bytes, STKR_RINGFILE_HDR_BYTES);
  assert_int_equal(m.ring_size, 64 << 10);
  assert_int_equal(m.pid, getpid());
  assert_int_equal(m.thread_id, stkr__tls->id);
  assert_int_equal(m.os_tid, stkr__tls->tid);
  assert_int_equal(m.session_id, stkr__tls->ring.session);
  tl_find_file(dir, ".session", path, sizeof path);
  assert_true((fd = open(path, O_RDONLY)) >= 0);
  assert_int_equal(pread(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
  close(fd);
  assert_memory_equal(h.magic, STKR_SESSFILE_MAGIC, 8);
  assert_int_equal(h.session_id, m.session_id);
  /* The one descriptor kept (the liveness lock on the session file) is
   * high and close-on-exec; no ring file keeps one. */
  {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int kept = 0;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
      char link[300], target[700];
      ssize_t n;
      snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
      if ((n = readlink(link, target, sizeof target - 1)) <= 0) continue;
      target[n] = '\0';
      if (strstr(target, ".ring") != NULL) fail_msg("a ring fd: %s", target);
      if (strcmp(target, path) == 0) {
        int fdn = atoi(e->d_name);
        assert_true(fdn >= 1000);
        assert_true(fcntl(fdn, F_GETFD) & FD_CLOEXEC);
        kept++;
      }
    }
    closedir(d);
    assert_int_equal(kept, 1);
  }
  assert_int_equal(h.pid, getpid());
  assert_true(h.names_used >= strlen("recover.test"));
  /* Our own session is live: recovery leaves it alone. */
  {
    stkr_recover_stats st;
    msgs ms;
    recover(dir, false, &st, &ms);
    assert_int_equal(st.sessions_live, 1);
    assert_int_equal(st.sessions_dead, 0);
    assert_int_equal(tl_count_files(dir, ".ring"), 1);
  }
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(tl_count_files(dir, ".session"), 0);
  assert_int_equal(tl_count_files(dir, ".ring"), 0);
}

/* SIGKILL before any flush: every event is in the ring file, and recovery
 * writes exactly those, once; a second recovery finds nothing. */
static void test_kill_before_flush(void **state) {
  char dir[300];
  stkr_recover_stats st;
  readback rb;
  msgs ms;
  (void)state;

  new_dir(dir, sizeof dir);
  run_child_die(dir, 0, 500, false);
  recover(dir, true, &st, &ms); /* dry run: counts, changes nothing */
  assert_int_equal(st.sessions_dead, 1);
  assert_int_equal(st.events, 500);
  assert_int_equal(tl_count_files(dir, ".ring"), 1);
  recover(dir, false, &st, &ms);
  assert_int_equal(ms.n, 0);
  assert_int_equal(st.sessions_recovered, 1);
  assert_int_equal(st.events, 500);
  assert_int_equal(st.duplicates, 0);
  assert_int_equal(st.segments_written, 1);
  assert_int_equal(tl_count_files(dir, ".ring"), 0);
  assert_int_equal(tl_count_files(dir, ".session"), 0);
  read_dir(dir, &rb, 500);
  assert_int_equal(rb.events, 500);
  for (int i = 0; i < 500; i++) assert_int_equal(rb.seen[i], 1);
  assert_int_equal(rb.warnings_lost, 0);
  rb_free(&rb);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.sessions_dead + st.events, 0);
}

/* A child flushed 300 events, recorded 200 more and died (`rewind`: as if
 * between the batch's write(2) and the tail store): the 200 are recovered,
 * the 300 stay where they are (`duplicates` of them found in the ring),
 * every event read back once. */
static void flushed_then_killed(bool rewind, uint64_t duplicates) {
  char dir[300];
  stkr_recover_stats st;
  msgs ms;

  new_dir(dir, sizeof dir);
  run_child_die(dir, 300, 200, rewind);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 200);
  assert_int_equal(st.duplicates, duplicates);
  assert_read_once(dir, 500, 500);
}

/* Flushed events stay where they are; only the rest is recovered. */
static void test_kill_after_flush(void **state) {
  (void)state;
  flushed_then_killed(false, 0); /* the tail was stored */
}

/* Stacks once per thread: after the flush, the ring holds only known
 * records of the one stack, whose full record is in a segment; recovery
 * finds it there. With that segment gone (the disk cap), the events are
 * still recovered, with their site, as stack "unknown", and said. */
static void test_known_records_resolve_through_segments(void **state) {
  char dir[300], path[600];
  stkr_recover_stats st;
  readback rb;
  msgs ms;
  (void)state;

  new_dir(dir, sizeof dir);
  uint64_t t0 = stkr__clock_mono_ns();
  run_child_die(dir, 300, 200, false);
  uint64_t t1 = stkr__clock_mono_ns();
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 200);
  assert_int_equal(st.unresolved_stacks, 0);
  read_dir(dir, &rb, 500);
  assert_int_equal(rb.events, 500);
  assert_int_equal(rb.seq_no_stack + rb.seq_other_stack + rb.seq_site_bad, 0);
  /* Written and recovered events alike carry CLOCK_MONOTONIC ns (the
   * ring files may hold counter ticks: recovery converts them with the
   * session file's calibration). */
  assert_true(rb.ts_min >= t0 && rb.ts_max <= t1);
  rb_free(&rb);

  new_dir(dir, sizeof dir);
  run_child_die(dir, 300, 200, false);
  tl_find_file(dir, ".zst", path, sizeof path);
  assert_int_equal(unlink(path), 0);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 200);
  assert_int_equal(st.unresolved_stacks, 200);
  assert_non_null(strstr(ms.last, "keep their site but not their stack"));
  read_dir(dir, &rb, 500);
  assert_int_equal(rb.events, 200);
  assert_int_equal(rb.seq_no_stack, 200);
  assert_int_equal(rb.seq_site_bad, 0);
  rb_free(&rb);
}

/* Payloads once per thread (common/stkr_ringfile.h, "Payloads"): a child
 * records 1-byte payloads a, b, c at one call site, flushes, records the
 * same (now PAYLOAD_KNOWN records whose bytes are only in the segment)
 * and d (new in the ring, then known), and dies. Recovery finds a, b, c in
 * the segment and d in the ring; with the segment gone, a, b and c are
 * kept with an empty payload marked truncated, counted and said, and d
 * still resolves from the ring. */
static char payload_at(int phase, int i) {
  return phase && i % 5 == 4 ? 'd' : "abc"[i % 3];
}

static void payload_body(void *arg) {
  (void)arg;
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < (phase ? 200 : 300); i++) {
      char c = payload_at(phase, i);
      if (stkr_event(&g_site, &c, 1) != 0) _exit(91);
    }
    if (phase == 0 && stkr_flush() != 0) _exit(92);
  }
}

static void test_known_payloads_resolve_through_segments(void **state) {
  char dir[300], path[600];
  stkr_config cfg = {.flush_interval_ms = 3600000, .ring_bytes = 256 << 10};
  stkr_recover_stats st;
  uint64_t want[256] = {0}, after_d = 0;
  readback rb;
  msgs ms;
  (void)state;

  for (int phase = 0; phase < 2; phase++)
    for (int i = 0; i < (phase ? 200 : 300); i++) {
      want[(unsigned char)payload_at(phase, i)]++;
      after_d += phase && payload_at(phase, i) == 'd';
    }
  new_dir(dir, sizeof dir);
  cfg.dir = dir;
  int status = run_killed_child(&cfg, payload_body, NULL);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 200);
  assert_int_equal(st.unresolved_payloads, 0);
  assert_int_equal(st.unresolved_stacks, 0);
  read_dir(dir, &rb, 0);
  assert_int_equal(rb.events, 500);
  for (int c = 'a'; c <= 'd'; c++) assert_int_equal(rb.by_byte[c], want[c]);
  rb_free(&rb);

  new_dir(dir, sizeof dir);
  cfg.dir = dir;
  status = run_killed_child(&cfg, payload_body, NULL);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  tl_find_file(dir, ".zst", path, sizeof path);
  assert_int_equal(unlink(path), 0);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 200);
  assert_int_equal(st.unresolved_payloads, 200 - after_d);
  assert_non_null(strstr(ms.last, "lost their payload"));
  read_dir(dir, &rb, 0);
  assert_int_equal(rb.events, 200);
  assert_int_equal(rb.by_byte['d'], after_d);
  assert_int_equal(rb.by_byte['a'] + rb.by_byte['b'] + rb.by_byte['c'], 0);
  rb_free(&rb);
}

/* Died between write(2) and the tail store: the ring file still holds the
 * written records, and Batch.ring_pos says they are written. */
static void test_crash_between_write_and_tail(void **state) {
  (void)state;
  flushed_then_killed(true, 300);
}

/* The embedded case: the next stkr_init on the directory recovers. */
static void test_embedded_next_init(void **state) {
  char dir[300];
  stkr_config cfg = {.flush_interval_ms = 3600000};
  (void)state;

  new_dir(dir, sizeof dir);
  run_child_die(dir, 100, 150, false);
  cfg.dir = dir;
  assert_int_equal(stkr_init(&cfg), 0);
  /* Recovered at init: only our own session's files are left (this
   * thread, attached by an earlier test, got a ring file of it). */
  assert_int_equal(tl_count_files(dir, ".session"), 1);
  assert_int_equal(tl_count_files(dir, ".ring"), 1);
  uint32_t v = 100000;
  assert_int_equal(stkr_event(&g_site, &v, 4), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_read_once(dir, 251, 250);
}

/* fork: in follow mode the child records into its own session (its ring
 * must not write into the parent's file), in disable mode it records
 * nothing; parent and child die uncleanly; everything is recovered exactly
 * once. */
static void fork_body(void *arg) {
  int status;
  (void)arg;
  record_seq(0, 100);
  pid_t c = fork();
  if (c == 0) {
    for (uint32_t i = 1000; i < 1070; i++) /* disable: -ENOTCONN */
      (void)stkr_event(&g_site, &i, 4);
    kill(getpid(), SIGKILL);
  }
  if (c < 0 || waitpid(c, &status, 0) != c) _exit(95);
  record_seq(100, 100);
}

static void fork_case(stkr_fork_mode mode) {
  char dir[300];
  stkr_recover_stats st;
  readback rb;
  msgs ms;
  bool follow = mode == STKR_FORK_FOLLOW;

  new_dir(dir, sizeof dir);
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000,
                     .fork_mode = mode};
  assert_true(WIFSIGNALED(run_killed_child(&cfg, fork_body, NULL)));
  recover(dir, false, &st, &ms);
  assert_int_equal(st.sessions_recovered, follow ? 2 : 1);
  assert_int_equal(st.events, follow ? 270 : 200);
  read_dir(dir, &rb, 1070);
  assert_int_equal(rb.events, follow ? 270 : 200);
  for (int i = 0; i < 200; i++) assert_int_equal(rb.seen[i], 1);
  for (int i = 1000; i < 1070; i++) assert_int_equal(rb.seen[i], follow);
  rb_free(&rb);
}

/* A child that outlives its recording parent must not keep the parent's
 * session looking alive: the child closes its copy of the lock. */
static void test_child_outlives_parent(void **state) {
  char dir[300];
  stkr_recover_stats st;
  msgs ms;
  int status, pfd[2];
  pid_t c = 0;
  (void)state;

  new_dir(dir, sizeof dir);
  assert_int_equal(pipe(pfd), 0);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000};
    if (stkr_init(&cfg) != 0) _exit(90);
    record_seq(0, 50);
    c = fork();
    if (c == 0) {
      /* Inherits every descriptor but the lock's, which the atfork
       * handler closed before fork() returned here. */
      c = getpid();
      if (write(pfd[1], &c, sizeof c) != sizeof c) _exit(96);
      for (;;) pause();
    }
    if (c < 0) _exit(97);
    kill(getpid(), SIGKILL);
  }
  assert_int_equal(read(pfd[0], &c, sizeof c), (ssize_t)sizeof c);
  assert_int_equal(waitpid(p, &status, 0), p);
  recover(dir, false, &st, &ms);
  kill(c, SIGKILL);
  assert_int_equal(st.sessions_live, 0);
  assert_int_equal(st.sessions_recovered, 1);
  assert_int_equal(st.events, 50);
  close(pfd[0]);
  close(pfd[1]);
}

static void test_fork_disable(void **state) {
  (void)state;
  fork_case(STKR_FORK_DISABLE);
}

static void test_fork_follow(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* TSan refuses to start threads after a multi-threaded fork, which is
   * exactly what follow mode does (test-flush.c skips the same way). */
  skip();
#endif
  fork_case(STKR_FORK_FOLLOW);
}

/* Rings outlive their threads: an exited thread's ring (or one the worker
 * made ahead) goes to the next thread that starts. Forty short threads with
 * flushes between them (so rings get reaped and handed on), the last ten
 * never flushed; then SIGKILL: every event once, under the right thread. */
typedef struct seq_arg {
  uint32_t from, n;
} seq_arg;

static void *seq_thread(void *arg) {
  const seq_arg *a = arg;
  record_seq(a->from, a->n);
  return NULL;
}

/* 40 threads one after the other, 5 events each; the first 30 flushed. */
static void ring_reuse_body(void *arg) {
  (void)arg;
  for (uint32_t i = 0; i < 40; i++) {
    seq_arg a = {i * 5, 5};
    pthread_t t;
    if (pthread_create(&t, NULL, seq_thread, &a) != 0) _exit(97);
    pthread_join(t, NULL);
    if (i < 30 && (stkr_flush() != 0 || stkr_flush() != 0)) _exit(98);
  }
}

/* A new directory, a child recording into it with rings of ring_bytes
 * that runs body and dies by SIGKILL, then recovery (with no message).
 * @return the events recovered. */
static uint64_t killed_then_recovered(char *dir, size_t cap, size_t ring_bytes,
                                      void (*body)(void *)) {
  stkr_recover_stats st;
  msgs ms;

  new_dir(dir, cap);
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000,
                     .ring_bytes = ring_bytes};
  int status = run_killed_child(&cfg, body, NULL);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  recover(dir, false, &st, &ms);
  assert_int_equal(ms.n, 0);
  return st.events;
}

static void test_ring_reuse(void **state) {
  char dir[300];
  readback rb;
  (void)state;

  assert_int_equal(
      killed_then_recovered(dir, sizeof dir, 16 << 10, ring_reuse_body), 50);
  read_dir(dir, &rb, 200);
  assert_int_equal(rb.events, 200);
  for (int i = 0; i < 200; i++) {
    assert_int_equal(rb.seen[i], 1);
    /* Each thread's 5 events under its own id, a new one per thread. */
    if (i % 5) assert_int_equal(rb.thread_of[i], rb.thread_of[i - 1]);
    else if (i) assert_int_not_equal(rb.thread_of[i], rb.thread_of[i - 5]);
  }
  rb_free(&rb);
  assert_int_equal(tl_count_files(dir, ".ring"), 0);
}

/* A ring the worker kept empty restarted at offset 0 behind a low-page
 * reuse marker (stkr__ring_reuse_low) that the worker has not passed yet;
 * the 200 events after it are recovered from the ring file, each once. */
static void reuse_marker_body(void *arg) {
  uint32_t i = 0;
  stkr__ring *r = NULL;
  (void)arg;
  for (int k = 0; k < 20000; k++) {
    record_seq(i++, 1);
    r = &stkr__tls->ring;
    if (r->c->p_skip_len != 0) break; /* this event is behind the marker */
    /* Flushed one by one in the upper half, so that the first record to
     * touch a new page there finds the ring released. */
    uint64_t off = atomic_load(&r->c->head) & r->mask;
    if ((off >= (r->mask + 1) / 2 - 512 || i % 64 == 0) && stkr_flush() != 0)
      _exit(98);
  }
  if (r == NULL || r->c->p_skip_len == 0 || r->session == 0) _exit(95);
  record_seq(i, 199);
}

static void test_recover_after_reuse_marker(void **state) {
  char dir[300];
  readback rb;
  (void)state;

  assert_int_equal(
      killed_then_recovered(dir, sizeof dir, 64 << 10, reuse_marker_body),
      200);
  read_dir(dir, &rb, 0);
  uint64_t total = rb.events;
  assert_int_equal(rb.seq_no_stack + rb.warnings_lost, 0);
  rb_free(&rb);
  assert_true(total > 200);
  assert_read_once(dir, total, (uint32_t)total);
}

/* Four distinct call chains (one per helper), to give a session several
 * stacks. */
static __attribute__((noinline)) void helper_event(unsigned h) {
  uint8_t p[2] = {'h', (uint8_t)h};
  if (stkr_event(&g_site, p, 2) != 0) _exit(99);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void helper0(void) { helper_event(0); }
static __attribute__((noinline)) void helper1(void) { helper_event(1); }
static __attribute__((noinline)) void helper2(void) { helper_event(2); }
static __attribute__((noinline)) void helper3(void) { helper_event(3); }

/* A session over many segments, whose stacks were defined only in the
 * first ones: recovery reads the newest segment only, and still gives its
 * stacks ids nobody used (the session file notes the highest), with their
 * own PCs. */
/* One call site for every event, so that a helper's chain is one stack
 * all along: 0 1 2 (stacks 1-3), then segments that use stack 1 only,
 * then 10 x 0 1 2 3 unflushed (stack 4 is new). F: flush. */
static void many_segments_body(void *arg) {
  static void (*const helpers[4])(void) = {helper0, helper1, helper2,
                                           helper3};
  enum { F = 9 };
  uint8_t script[3 + 12 + 40];
  size_t n = 0;
  (void)arg;
  script[n++] = 0, script[n++] = 1, script[n++] = 2;
  for (int i = 0; i < 6; i++) script[n++] = F, script[n++] = 0;
  for (int i = 0; i < 40; i++) script[n++] = (uint8_t)(i % 4);
  for (size_t i = 0; i < n; i++) {
    if (script[i] == F) {
      if (stkr_flush() != 0) _exit(92);
    } else {
      helpers[script[i]]();
    }
  }
}

static void test_many_segments(void **state) {
  char dir[300];
  stkr_recover_stats st;
  readback rb;
  msgs ms;
  (void)state;

  new_dir(dir, sizeof dir);
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 3600000,
                     .segment_bytes = 1024};
  run_killed_child(&cfg, many_segments_body, NULL);
  assert_true(tl_count_files(dir, ".zst") >= 4);
  recover(dir, false, &st, &ms);
  assert_int_equal(st.events, 41);
  read_dir(dir, &rb, 0);
  assert_int_equal(rb.events, 49); /* 3 + 5 flushed, 41 recovered */
  assert_int_equal(rb.warnings_inconsistent, 0);
  assert_int_equal(rb.warnings_lost, 0);
  for (int h = 0; h < 4; h++) {
    assert_int_equal(rb.helper_events[h], h == 0 ? 17 : h == 3 ? 10 : 11);
    assert_true(rb.stack_of[h] != UINT64_MAX && rb.stack_of[h] != 0);
  }
  rb_free(&rb);
}

/* ---- SIGKILL at random moments -------------------------------------------
 * A program with 4 threads making events, each counting its own successful
 * events in memory shared with us, is killed at a random moment. What is
 * recorded (segments + recovery) must equal what it counted, per thread, up
 * to the one event per thread that can be in flight: committed to the ring
 * (recorded) but killed before the counter's increment. Never fewer. */
#define KTHREADS 4

static _Atomic uint64_t *g_counts;

static void *kill_worker(void *arg) {
  uint8_t idx = (uint8_t)(uintptr_t)arg;
  for (;;) {
    if (stkr_event(&g_site, &idx, 1) == 0)
      atomic_fetch_add_explicit(&g_counts[idx], 1, memory_order_relaxed);
    /* About 20 events per ms per thread: flushes (every 20 ms) and kills
     * land mid-stream, and reading back stays quick under sanitizers. */
    if ((rand() & 15) == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void test_sigkill_random_moments(void **state) {
  (void)state;
  g_counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(g_counts != MAP_FAILED);
  srand((unsigned)time(NULL));
  for (int round = 0; round < 20; round++) {
    char dir[300];
    stkr_recover_stats st;
    readback rb;
    msgs ms;
    int status;

    new_dir(dir, sizeof dir);
    for (int i = 0; i < KTHREADS; i++) g_counts[i] = 0;
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
      stkr_config cfg = {.dir = dir, .flush_interval_ms = 20,
                         .ring_bytes = 1 << 20};
      pthread_t th[KTHREADS];
      if (stkr_init(&cfg) != 0) _exit(90);
      for (int i = 0; i < KTHREADS; i++)
        pthread_create(&th[i], NULL, kill_worker, (void *)(uintptr_t)i);
      for (;;) pause();
    }
    struct timespec ts = {0, (20 + rand() % 280) * 1000000L};
    nanosleep(&ts, NULL);
    kill(p, SIGKILL);
    assert_int_equal(waitpid(p, &status, 0), p);
    recover(dir, false, &st, &ms);
    assert_int_equal(st.damaged_rings, 0);
    read_dir(dir, &rb, 0);
    uint64_t total = 0;
    for (int i = 0; i < KTHREADS; i++) {
      uint64_t counted = g_counts[i], recorded = rb.by_byte[i];
      if (recorded < counted || recorded > counted + 1)
        fail_msg("round %d thread %d: recorded %llu, counted %llu (recovery: "
                 "%llu events, %llu rings, %llu orphans, %llu failed, %llu "
                 "duplicates; last message: %s)", round, i,
                 (unsigned long long)recorded, (unsigned long long)counted,
                 (unsigned long long)st.events, (unsigned long long)st.rings,
                 (unsigned long long)st.orphans,
                 (unsigned long long)st.sessions_failed,
                 (unsigned long long)st.duplicates, ms.n ? ms.last : "none");
      total += recorded;
    }
    assert_int_equal(rb.events, total);
    print_message("round %2d: killed after %3ld ms: %llu events, %llu of "
                  "them recovered\n", round, ts.tv_nsec / 1000000,
                  (unsigned long long)total, (unsigned long long)st.events);
    rb_free(&rb);
  }
  munmap(g_counts, 4096);
}

/* `stackrec recover`: what it prints and its exit statuses. */
static void test_cli(void **state) {
  char dir[300], path[600];
  uint8_t word[8];
  int fd;
  (void)state;

  new_dir(dir, sizeof dir);
  run_child_die(dir, 0, 80, false);
  /* Before recovery, verify says the events are only in ring files. */
  assert_int_equal(cr_run("verify '%s'", dir), 4);
  assert_non_null(strstr(cr_out, "80 events of 1 dead writer still in ring "
                                 "files"));
  assert_int_equal(cr_run("recover --dry-run '%s'", dir), 4);
  assert_non_null(strstr(cr_out, "would recover 80 events of 1 dead"));
  assert_int_equal(cr_run("recover '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "recovered 80 events"));
  assert_int_equal(cr_run("recover --dry-run '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "would recover 0 events"));
  assert_int_equal(cr_run("verify '%s'", dir), 0);
  assert_int_equal(cr_run("recover '%s/missing'", dir), 3);
  assert_int_equal(cr_run("recover --bogus '%s'", dir), 2);
  assert_int_equal(cr_run("recover"), 2);
  /* A damaged record: the records before it are recovered, the loss is
   * named (file and offset) and the status says data was lost. */
  new_dir(dir, sizeof dir);
  run_child_die(dir, 0, 80, false);
  tl_find_file(dir, ".ring", path, sizeof path);
  assert_true((fd = open(path, O_RDWR)) >= 0);
  /* One site, one stack: a full record, then known records of one size;
   * spoil the 41st one's size field. */
  uint32_t size, first;
  char expect[128];
  assert_int_equal(pread(fd, &first, 4, STKR_RINGFILE_HDR_BYTES), 4);
  assert_int_equal(pread(fd, &size, 4, STKR_RINGFILE_HDR_BYTES + first), 4);
  assert_true(size < first); /* a known record */
  size_t bad = STKR_RINGFILE_HDR_BYTES + first + 39 * size;
  memset(word, 0xff, sizeof word);
  assert_int_equal(pwrite(fd, word, 4, (off_t)bad), 4);
  close(fd);
  assert_int_equal(cr_run("recover '%s'", dir), 1);
  assert_non_null(strstr(cr_out, "recovered 40 events"));
  snprintf(expect, sizeof expect, ".ring: offset %zu: bad record size", bad);
  assert_non_null(strstr(cr_err, expect));
}

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0) return -1;
  assert_int_equal(tl_mkdtemp(g_root, sizeof g_root, "recover"), 0);
  return 0;
}

TL_TEST_MAIN("recover", setup, NULL, test_ring_file_layout,
             test_kill_before_flush, test_kill_after_flush,
             test_crash_between_write_and_tail,
             test_known_records_resolve_through_segments,
             test_known_payloads_resolve_through_segments,
             test_embedded_next_init, test_ring_reuse,
             test_recover_after_reuse_marker, test_many_segments,
             test_child_outlives_parent, test_fork_disable, test_fork_follow,
             test_sigkill_random_moments, test_cli)
