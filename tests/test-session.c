/*
 * test-session.c: what the writer says about sessions and directories
 * (issue 9): Header.session_id (random, non-zero, one per stkr_init and per
 * follow-mode child), Header.session_first_seq, Header.dir_recreated on the
 * first segment after the directory was removed, and the disk cap applied
 * to the whole directory across processes (defect 5: 6 processes left
 * 1.8 MB in a directory capped at 300 KB), never deleting a process's
 * newest segment nor a deletion's count (QA: a cap below one segment
 * emptied the directory, and verify called it intact).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/flush_util.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "test.session");

/* The Header of the first batch of segment `seq` of this process. */
typedef struct hdr {
  uint64_t session_id;
  uint32_t first_seq, seq;
  bool dir_recreated, present;
} hdr;

static hdr header_of(uint32_t pid, uint32_t seq) {
  char path[2200];
  Stackrec__Batch **v;
  size_t n;
  hdr h = {0};
  snprintf(path, sizeof path, "%s/stackrec-%u-%06u.zst", tl_dir, pid, seq);
  assert_int_equal(tf_load(path, &v, &n), 0);
  assert_true(n >= 1);
  if (v[0]->header) {
    h.present = true;
    h.session_id = v[0]->header->session_id;
    h.first_seq = v[0]->header->session_first_seq;
    h.seq = v[0]->header->segment_seq;
    h.dir_recreated = v[0]->header->dir_recreated;
  }
  tf_free(v, n);
  return h;
}

static stkr_config small_cfg(uint64_t segment_bytes) {
  stkr_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = tl_dir;
  cfg.segment_bytes = segment_bytes;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  cfg.flush_interval_ms = 20;
  return cfg;
}

/* n events with `len` bytes of incompressible payload, flushed every 20. */
static void events(unsigned n, size_t len, unsigned seed) {
  uint8_t p[512];
  for (unsigned i = 0; i < n; i++) {
    for (size_t k = 0; k < len; k++) p[k] = (uint8_t)rand_r(&seed);
    while (stkr_event(&g_site, p, len) == -EAGAIN) usleep(1000);
    if (i % 20 == 19) assert_int_equal(stkr_flush(), 0);
  }
  assert_int_equal(stkr_flush(), 0);
}

static void test_session_ids_and_first_seq(void **state) {
  uint32_t pid = (uint32_t)getpid(), seqs[256];
  stkr_config cfg = small_cfg(2048);
  size_t n;
  hdr h;
  uint64_t first_id;
  (void)state;

  /* Session 1: several segments (2 KiB each). */
  assert_int_equal(stkr_init(&cfg), 0);
  events(100, 100, 1);
  assert_int_equal(stkr_shutdown(), 0);
  n = tf_segments(tl_dir, pid, seqs, 256);
  assert_true(n >= 3);
  first_id = header_of(pid, seqs[0]).session_id;
  assert_true(first_id != 0);
  for (size_t i = 0; i < n; i++) {
    h = header_of(pid, seqs[i]);
    assert_true(h.present);
    assert_true(h.session_id == first_id);
    assert_int_equal(h.first_seq, seqs[0]);
    assert_int_equal(h.seq, seqs[i]);
    assert_false(h.dir_recreated);
  }

  /* Session 2 in the same directory: a new id, its own first seq. */
  uint32_t next = seqs[n - 1] + 1;
  assert_int_equal(stkr_init(&cfg), 0);
  events(100, 100, 2);
  assert_int_equal(stkr_shutdown(), 0);
  size_t n2 = tf_segments(tl_dir, pid, seqs, 256);
  assert_true(n2 > n);
  h = header_of(pid, next);
  assert_true(h.session_id != 0 && h.session_id != first_id);
  assert_int_equal(h.first_seq, next);
  h = header_of(pid, seqs[n2 - 1]);
  assert_int_equal(h.first_seq, next);
}

/* A second session in one process starts counting from nothing: its
 * first batch is written before the session starts, while the threads'
 * counters still hold the first session's, and those were its Counters
 * (QA, session 41: recovery, which takes a session's largest Counters,
 * then counted the first session's drops again for the second). */
static void test_second_session_first_counters_zero(void **state) {
  uint32_t pid = (uint32_t)getpid(), seqs[256];
  stkr_config cfg = small_cfg(1 << 20);
  stkr_stats st;
  Stackrec__Batch **v;
  size_t n, n2, nb;
  char path[2200];
  (void)state;

  /* Whether the ring fills depends on the worker's speed; attempted
   * counts either way (a failed check leaves no session running). */
  cfg.flush_interval_ms = 3600000;
  assert_int_equal(stkr_init(&cfg), 0);
  for (int i = 0; i < 20000; i++) (void)stkr_event(&g_site, "full", 4);
  int got = stkr_stats_get(&st);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(got, 0);
  assert_int_equal(st.attempted, 20000);
  n = tf_segments(tl_dir, pid, seqs, 256);
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_shutdown(), 0);
  n2 = tf_segments(tl_dir, pid, seqs, 256);
  assert_true(n2 > n);
  snprintf(path, sizeof path, "%s/stackrec-%u-%06u.zst", tl_dir, pid, seqs[n]);
  assert_int_equal(tf_load(path, &v, &nb), 0);
  assert_true(nb >= 1 && v[0]->header != NULL && v[0]->counters != NULL);
  if (v[0]->counters->attempted != 0 || v[0]->counters->dropped_ring_full != 0)
    fail_msg("the second session's first Counters: attempted %llu, ring "
             "full %llu (the first session's: %llu, %llu)",
             (unsigned long long)v[0]->counters->attempted,
             (unsigned long long)v[0]->counters->dropped_ring_full,
             (unsigned long long)st.attempted,
             (unsigned long long)st.dropped_ring_full);
  tf_free(v, nb);
}

/* dir's reader once every event of it was read (frames read lazily);
 * *events: how many. The caller frees it. */
static stkr_reader *read_through(const char *dir, uint64_t *events) {
  stkr_reader_opts o = {.lazy_frames = true};
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int rc;

  *events = 0;
  assert_int_equal(stkr_reader_open(dir, &o, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    (*events)++;
  assert_int_equal(rc, 0);
  return r;
}

/* A forked child that records 10 events (in follow mode, its first starts
 * its session) and ends cleanly. @return its pid, once it has ended. */
static pid_t follow_child(void) {
  int st;
  pid_t child = fork();

  assert_true(child >= 0);
  if (child == 0) {
    events(10, 8, 4);
    _exit(stkr_shutdown() == 0 ? 0 : 1);
  }
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return child;
}

static void test_follow_child_new_session(void **state) {
  stkr_config cfg = small_cfg(1 << 20);
  uint32_t seqs[8];
  pid_t child;
  (void)state;
#if defined(__SANITIZE_THREAD__)
  fprintf(stderr, "TSan: no threads after a multi-threaded fork: skipped\n");
  skip();
#endif
  cfg.fork_mode = STKR_FORK_FOLLOW;
  assert_int_equal(stkr_init(&cfg), 0);
  events(10, 8, 3);
  child = follow_child();
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(tf_segments(tl_dir, (uint32_t)getpid(), seqs, 8), 1);
  hdr p = header_of((uint32_t)getpid(), seqs[0]);
  assert_int_equal(tf_segments(tl_dir, (uint32_t)child, seqs, 8), 1);
  hdr c = header_of((uint32_t)child, seqs[0]);
  assert_true(p.session_id != 0 && c.session_id != 0);
  assert_true(p.session_id != c.session_id);
  assert_int_equal(c.first_seq, seqs[0]);
}

static void test_recreated_directory(void **state) {
  uint32_t pid = (uint32_t)getpid(), seqs[64];
  stkr_config cfg = small_cfg(1 << 20);
  stkr_stats st;
  uint64_t id;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  events(10, 8, 5);
  id = header_of(pid, 1).session_id;
  assert_false(header_of(pid, 1).dir_recreated);
  assert_int_equal(tl_rm_rf(tl_dir), 0);
  events(10, 8, 6); /* the worker notices, recreates the directory */
  events(10, 8, 7);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_true(st.attempted == st.written + st.dropped);

  size_t n = tf_segments(tl_dir, pid, seqs, 64);
  assert_true(n >= 1);
  assert_true(seqs[0] >= 2); /* seq 1 went with the old directory */
  hdr h = header_of(pid, seqs[0]);
  assert_true(h.dir_recreated);
  assert_true(h.session_id == id); /* the same session goes on */
  assert_int_equal(h.first_seq, 1);
  for (size_t i = 1; i < n; i++)
    assert_false(header_of(pid, seqs[i]).dir_recreated);
}

/* The directory renamed while recording (`mv DIR DIR.moved`): the
 * segments follow it, as the ring and session files do; DIR is not made
 * again (QA, session 37: the next segment made a new DIR, read as
 * "deleted and recreated", and DIR.moved had "no clean end"). */
static void test_renamed_directory(void **state) {
  stkr_config cfg = small_cfg(4096);
  char moved[300];
  stkr_reader *r;
  const stkr_process_info *p;
  stkr_stats st;
  uint64_t n;
  (void)state;

  snprintf(moved, sizeof moved, "%s.moved", tl_dir);
  assert_int_equal(stkr_init(&cfg), 0);
  events(100, 200, 5); /* ~20 KB: several segments */
  assert_int_equal(rename(tl_dir, moved), 0);
  events(200, 200, 6);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, st.written);
  assert_int_equal(access(tl_dir, F_OK), -1); /* not made again */
  r = read_through(moved, &n);
  assert_int_equal(n, st.written);
  assert_int_equal(stkr_reader_process_count(r), 1);
  p = stkr_reader_process(r, 0);
  assert_int_equal(p->dir_recreated, 0);
  assert_int_equal(p->unclean_sessions, 0);
  assert_int_equal(p->segments_missing, 0);
  assert_false(p->incomplete);
  stkr_reader_free(r);
  assert_int_equal(rename(moved, tl_dir), 0); /* for the teardown */
}

/* ... and a child forked after the rename, before the parent's writer
 * had a reason to look (its segment still open): the child records where
 * its parent's segment was at the fork (before, in a new DIR made under
 * the old name, read as "deleted and recreated"; session 37's note).
 * Twice: once with the parent's first segment open, once after the
 * parent's writer moved on to later segments (2 KiB each: its rotations
 * followed the rename). */
static void test_renamed_directory_then_fork(void **state) {
  stkr_config cfg = small_cfg(2048);
  char moved[300];
  stkr_reader *r;
  uint64_t n;
  (void)state;
#if defined(__SANITIZE_THREAD__)
  fprintf(stderr, "TSan: no threads after a multi-threaded fork: skipped\n");
  skip();
#endif
  snprintf(moved, sizeof moved, "%s.moved", tl_dir);
  cfg.fork_mode = STKR_FORK_FOLLOW;
  assert_int_equal(stkr_init(&cfg), 0);
  events(10, 8, 3);
  assert_int_equal(rename(tl_dir, moved), 0);
  for (int k = 0; k < 2; k++) {
    (void)follow_child();
    assert_int_equal(access(tl_dir, F_OK), -1); /* not made again */
    events(40, 200, 5); /* ~8 KB: several segments */
  }
  assert_int_equal(stkr_shutdown(), 0);
  r = read_through(moved, &n);
  assert_int_equal(n, 10 + 2 * (10 + 40));
  assert_int_equal(stkr_reader_process_count(r), 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(stkr_reader_process(r, i)->dir_recreated, 0);
    assert_false(stkr_reader_process(r, i)->incomplete);
  }
  stkr_reader_free(r);
  assert_int_equal(rename(moved, tl_dir), 0); /* for the teardown */
}

/* ---- the disk cap, across processes ---- */

#define PROCS 6
#define CAP (300u << 10)
#define SEG (16u << 10)

typedef struct tomb_range {
  uint32_t pid, lo, hi;
} tomb_range;

static int range_cmp(const void *a, const void *b) {
  const tomb_range *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Bytes of the segment files; *files: how many hold data (the others are
 * the cap's tombstones, proto/stkr_format.h); *tombs: the segments those
 * say were deleted, each once (a run's tombstone says all of its run; a
 * cap that ran without the lock may leave a segment's own inside a run:
 * flush/segment.c); *tomb_files: how many files they are. */
static uint64_t dir_bytes_runs(int *files, int *tombs, int *tomb_files) {
  DIR *d = opendir(tl_dir);
  struct dirent *de;
  uint64_t total = 0;
  static tomb_range r[4096];
  size_t n = 0;
  *files = *tombs = *tomb_files = 0;
  assert_non_null(d);
  while ((de = readdir(d))) {
    char p[4400];
    uint8_t t[STKR_FMT_MARKER_MAX + 1];
    uint32_t pid, seq, last = 0;
    struct stat s;
    FILE *f;
    size_t got = 0;
    if (stkr_fmt_segment_parse(de->d_name, &pid, &seq) != 0) continue;
    snprintf(p, sizeof p, "%s/%s", tl_dir, de->d_name);
    if (stat(p, &s) != 0) continue;
    total += (uint64_t)s.st_size;
    if ((f = fopen(p, "rb")) != NULL) {
      got = fread(t, 1, sizeof t, f);
      fclose(f);
    }
    if (stkr_fmt_tombstone_parse(t, got, NULL, &last)) {
      assert_true(n < sizeof r / sizeof *r);
      r[n++] = (tomb_range){pid, seq, last != 0 ? last : seq};
      (*tomb_files)++;
    } else {
      (*files)++;
    }
  }
  closedir(d);
  qsort(r, n, sizeof *r, range_cmp);
  for (size_t i = 0; i < n; i++) {
    uint32_t lo = r[i].lo;
    if (i > 0 && r[i - 1].pid == r[i].pid && r[i - 1].hi >= lo) {
      if (r[i].hi <= r[i - 1].hi) {
        r[i].hi = r[i - 1].hi; /* inside the run before */
        continue;
      }
      lo = r[i - 1].hi + 1;
    }
    (*tombs) += (int)(r[i].hi - lo + 1);
  }
  return total;
}

static uint64_t dir_bytes_tombs(int *files, int *tombs) {
  int tomb_files;
  return dir_bytes_runs(files, tombs, &tomb_files);
}

static uint64_t dir_bytes(int *files) {
  int tombs;
  return dir_bytes_tombs(files, &tombs);
}

/* What the processes of run_capped() did, by their stats. */
typedef struct capped {
  uint64_t segments, deleted;
} capped;

/* PROCS processes, each recording n events of 200 incompressible bytes
 * into segments of `seg` bytes under a directory cap of `cap` bytes. */
static capped run_capped(uint64_t seg, uint64_t cap, unsigned n) {
  int fds[2];
  pid_t kids[PROCS];
  capped c = {0};

  assert_int_equal(pipe(fds), 0);
  for (int i = 0; i < PROCS; i++) {
    kids[i] = fork();
    assert_true(kids[i] >= 0);
    if (kids[i] == 0) {
      stkr_config cfg = small_cfg(seg);
      stkr_stats st;
      uint64_t d[2];
      cfg.disk_cap_bytes = cap;
      close(fds[0]);
      if (stkr_init(&cfg) != 0) _exit(2);
      events(n, 200, 100u + (unsigned)i);
      if (stkr_shutdown() != 0) _exit(3);
      stkr_stats_get(&st);
      d[0] = st.segments;
      d[1] = st.segments_deleted;
      if (write(fds[1], d, sizeof d) != (ssize_t)sizeof d) _exit(4);
      _exit(st.attempted == st.written + st.dropped ? 0 : 5);
    }
  }
  close(fds[1]);
  for (int i = 0; i < PROCS; i++) {
    int st;
    uint64_t d[2];
    assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(read(fds[0], d, sizeof d), (ssize_t)sizeof d);
    c.segments += d[0];
    c.deleted += d[1];
  }
  close(fds[0]);
  return c;
}

/* Never silent: every process is still in the directory (its newest
 * segment, with its last counters), each session ended cleanly, and every
 * segment the cap deleted is told for the process whose it was: a
 * tombstone in its place, its own deletions also in its own counters,
 * none "missing" (QA: another process's deletions read as "first segments
 * missing", and the deleter's as "deleted while recording").
 * @return the events read. */
static uint64_t check_capped(const capped *c, int files) {
  uint64_t events, deleted = 0, placed = 0;
  stkr_reader *r = read_through(tl_dir, &events);
  int data_files, tombs;

  assert_int_equal(stkr_reader_process_count(r), PROCS);
  for (size_t i = 0; i < PROCS; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    assert_int_equal(p->unclean_sessions, 0);
    assert_int_equal(p->segments_missing, 0);
    assert_true(p->segments_cap_deleted >= p->segments_deleted);
    deleted += p->segments_deleted;
    placed += p->segments_cap_deleted;
  }
  stkr_reader_free(r);
  (void)dir_bytes_tombs(&data_files, &tombs);
  assert_int_equal(data_files, files);
  assert_int_equal(c->segments - (uint64_t)files, (uint64_t)tombs);
  assert_int_equal(placed, (uint64_t)tombs);
  assert_int_equal(deleted, c->deleted); /* each its own */
  assert_true(c->deleted <= (uint64_t)tombs);
  return events;
}

static void test_disk_cap_whole_directory(void **state) {
  int files;
  (void)state;

  capped c = run_capped(SEG, CAP, 1500); /* ~300 KB each */
  int tombs;
  uint64_t total = dir_bytes_tombs(&files, &tombs);
  fprintf(stderr, "disk cap %u bytes, %d processes: %llu bytes in %d files "
          "left, %d segments deleted (%llu of them by their own process)\n",
          CAP, PROCS, (unsigned long long)total, files, tombs,
          (unsigned long long)c.deleted);
  /* The cap is met but for each process's newest segment (and the batch
   * written after the last scan). */
  assert_true(total <= CAP + PROCS * (SEG + 8192));
  assert_true(c.deleted > 0);
  check_capped(&c, files);
}

/* QA: a cap below one segment (20000 bytes, 64 MiB segments) left an
 * empty directory in 3 of 4 runs, and verify said "intact: 0 processes".
 * Each process's only segment is its newest: none may go. */
static void test_disk_cap_below_one_segment(void **state) {
  int files;
  (void)state;

  capped c = run_capped(1 << 20, 2000, 150); /* ~30 KB each */
  (void)dir_bytes(&files);
  assert_int_equal(files, PROCS);
  assert_int_equal(c.deleted, 0);
  assert_int_equal(check_capped(&c, files), PROCS * 150);
  /* Rotating segments under that cap: the older ones go, counted. */
  assert_int_equal(tl_rm_rf(tl_dir), 0);
  tl_make_dir(NULL);
  c = run_capped(4096, 2000, 150);
  (void)dir_bytes(&files);
  assert_true(c.deleted > 0);
  check_capped(&c, files);
}

/* One pid, several sessions (an app restarted as pid 1 in a container, or
 * stkr_init again): the cap never takes a session's final segment (made
 * final, by its mode, at its end), so every session keeps the counters that say
 * what it wrote and what the cap took (QA, session 26: 5 sessions, 3
 * deleted whole, their 900 000 events in no count), and a session counts
 * in its own counters only its own segments' deletions. */
static void test_disk_cap_keeps_each_session(void **state) {
  enum { SESSIONS = 4, N = 150 };
  const stkr_process_info *p;
  stkr_reader *r;
  uint64_t attempted = 0, deleted = 0, events_read;
  int files, tombs;
  (void)state;

  for (int k = 0; k < SESSIONS; k++) {
    stkr_config cfg = small_cfg(4096);
    stkr_stats st;
    cfg.disk_cap_bytes = 2000;
    assert_int_equal(stkr_init(&cfg), 0);
    events(N, 200, 7u + (unsigned)k); /* ~30 KB: several segments */
    assert_int_equal(stkr_shutdown(), 0);
    assert_int_equal(stkr_stats_get(&st), 0);
    attempted += st.attempted;
    deleted += st.segments_deleted;
    assert_true(st.segments_deleted < st.segments); /* its own only */
  }
  (void)dir_bytes_tombs(&files, &tombs);
  assert_int_equal(files, SESSIONS); /* each session's final segment */
  assert_int_equal(deleted, (uint64_t)tombs);
  r = read_through(tl_dir, &events_read);
  assert_int_equal(stkr_reader_process_count(r), 1);
  p = stkr_reader_process(r, 0);
  assert_int_equal(p->sessions, SESSIONS);
  assert_int_equal(p->unclean_sessions, 0);
  assert_int_equal(p->attempted, attempted);
  assert_int_equal(p->accounting_mismatches, 0);
  assert_int_equal(p->segments_missing, 0);
  assert_int_equal(p->segments_cap_deleted, (uint32_t)tombs);
  assert_true(events_read < attempted);
  stkr_reader_free(r);

  /* Three sessions more: the 4 latest final segments stay, the oldest
   * ones go as any segment (a pid restarted without end must not fill
   * the directory with them; review, session 26). */
  for (int k = 0; k < 3; k++) {
    stkr_config cfg = small_cfg(4096);
    cfg.disk_cap_bytes = 2000;
    assert_int_equal(stkr_init(&cfg), 0);
    events(N, 200, 70u + (unsigned)k);
    assert_int_equal(stkr_shutdown(), 0);
  }
  (void)dir_bytes_tombs(&files, &tombs);
  assert_int_equal(files, 5); /* the newest, and 4 sessions' final ones */
}

TL_TEST_MAIN_EACH("session", tl_make_dir, tl_rm_dir, test_session_ids_and_first_seq,
                  test_second_session_first_counters_zero,
                  test_follow_child_new_session, test_recreated_directory,
                  test_renamed_directory, test_renamed_directory_then_fork,
                  test_disk_cap_whole_directory,
                  test_disk_cap_below_one_segment,
                  test_disk_cap_keeps_each_session)
