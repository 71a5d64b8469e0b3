/* test-flush-segment.c: segment files (flush/segment.c) driven directly:
 * names and modes, continuing after an earlier process's files, rotation,
 * the disk cap, and write errors (RLIMIT_FSIZE, a removed directory, a file
 * in the directory's place) with recovery. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_io.h"
#include "flush/flush_internal.h"
#include "proto/stkr_format.h"
#include "tests/testlib.h"

#define PID 777u

static off_t pid_file_size(uint32_t pid, uint32_t seq) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, pid, seq);
  return stat(p, &st) == 0 ? st.st_size : -1;
}

static off_t file_size(uint32_t seq) { return pid_file_size(PID, seq); }

/* Our files 1, 2, ... have the sizes given, in order (-1: no such file). */
#define assert_file_sizes(...)                                         \
  assert_sizes_((const off_t[]){__VA_ARGS__},                          \
                sizeof((const off_t[]){__VA_ARGS__}) / sizeof(off_t))
static void assert_sizes_(const off_t *want, uint32_t n) {
  for (uint32_t seq = 1; seq <= n; seq++) {
    if (file_size(seq) != want[seq - 1])
      print_error("file %u:\n", seq);
    assert_int_equal(file_size(seq), want[seq - 1]);
  }
}

static mode_t file_mode(uint32_t seq) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, PID, seq);
  return stat(p, &st) == 0 ? (st.st_mode & 0777) : 0;
}

static int count_files(void) {
  DIR *d = opendir(tl_dir);
  struct dirent *de;
  int n = 0;
  if (!d) return -1;
  while ((de = readdir(d))) n += de->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Does a tombstone of the disk cap say segment (pid, seq) was deleted,
 * left by process `by`: its own, or that of the run it is in (the
 * nearest file at or below seq, proto/stkr_format.h)? *file gets the seq
 * of the file that says it. */
static bool tomb_says(uint32_t pid, uint32_t seq, uint32_t by,
                      uint32_t *file) {
  for (uint32_t q = seq; q > 0; q--) {
    char p[512];
    uint8_t buf[64];
    uint32_t who = 0, last = 0;
    ssize_t n;
    int fd;
    snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, pid, q);
    if ((fd = open(p, O_RDONLY)) < 0) continue;
    n = read(fd, buf, sizeof buf);
    close(fd);
    *file = q;
    return n > 0 && stkr_fmt_tombstone_parse(buf, (size_t)n, &who, &last) &&
           who == by && (last != 0 ? last : q) >= seq;
  }
  return false;
}

static bool tomb_of(uint32_t pid, uint32_t seq, uint32_t by) {
  uint32_t file;
  return tomb_says(pid, seq, by, &file);
}

/* A tombstone's temporary file still in the directory? */
static bool temp_left(void) {
  DIR *d = opendir(tl_dir);
  struct dirent *de;
  bool found = false;
  if (!d) return false;
  while ((de = readdir(d)))
    found |= strncmp(de->d_name, ".stackrec-tomb", 14) == 0;
  closedir(d);
  return found;
}

/* What the worker does per batch: a new file when needed, one write. */
static int put(stkr__segw *s, size_t len) {
  static uint8_t buf[4096];
  int err;
  memset(buf, 'x', sizeof buf);
  if (stkr__seg_need_new(s) && (err = stkr__seg_open_next(s)) < 0) return err;
  err = stkr__seg_write(s, buf, len);
  if (err == 0) stkr__seg_enforce_cap(s);
  return err;
}

/* Segments of segment_bytes under a disk cap of cap_bytes (seg_init),
 * then n frames of 100 bytes put. */
static void start_and_put(stkr__segw *s, uint64_t segment_bytes,
                          uint64_t cap_bytes, int n) {
  assert_int_equal(stkr__seg_init(s, tl_dir, PID, segment_bytes, cap_bytes),
                   0);
  for (int i = 0; i < n; i++) assert_int_equal(put(s, 100), 0);
}

/* A file of our pid numbered seq, holding "old". */
static void put_old_file(uint32_t pid, uint32_t seq) {
  char p[512];
  snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, pid, seq);
  int fd = open(p, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "old", 3), 3);
  close(fd);
}

static void test_names_modes_and_older_files(void **state) {
  (void)state;
  stkr__segw s;
  /* Files of an earlier process with our pid (numbered from 1, as the cap
   * leaves a tombstone where it deletes), and another pid's file. */
  for (uint32_t seq = 1; seq <= 3; seq++) put_old_file(PID, seq);
  put_old_file(PID + 1, 9);

  mode_t old = umask(0);
  assert_int_equal(stkr__seg_init(&s, tl_dir, PID, 1000, 1 << 20), 0);
  assert_int_equal(put(&s, 100), 0);
  umask(old);
  assert_int_equal(s.seq, 4); /* after the old 3, not overwriting it */
  assert_int_equal(file_size(3), 3);
  assert_int_equal(file_size(4), 100);
  assert_int_equal(file_mode(4), 0600);
  assert_int_equal(fcntl(s.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  assert_int_equal(s.segments, 1);
  stkr__seg_free(&s);
  assert_int_equal(file_size(4), 100);
}

/* An earlier process's files whose first was deleted by hand: the
 * directory is not listed (seg_init looks at our first name only, so
 * that N processes do not list it N times), and ours go around them:
 * 1, 2, then 4, the old 3 untouched. */
static void test_older_files_without_their_first(void **state) {
  (void)state;
  stkr__segw s;
  put_old_file(PID, 3);
  start_and_put(&s, 100, 1 << 20, 3);
  assert_int_equal(s.seq, 4);
  assert_file_sizes(100, 100, 3, 100);
  stkr__seg_free(&s);
}

/* The highest file of an earlier process of our pid is a run's tombstone
 * (its data file above was removed empty, the process died): ours go on
 * after the run's last, never inside it (review, session 35: seq 2 after
 * a run of 1..13 cut it short). */
/* Segment 1 of PID is a run's tombstone saying 1..last, then a writer
 * starts: the seq it writes first. */
static uint32_t seq_after_run(uint32_t last) {
  uint8_t t[STKR_FMT_TOMBSTONE_RUN_SIZE];
  char p[512];
  stkr__segw s;
  uint32_t seq;
  int fd;

  assert_int_equal(tl_rm_rf(tl_dir), 0);
  assert_int_equal(mkdir(tl_dir, 0700), 0);
  stkr_fmt_tombstone_run(t, PID, last);
  snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, PID, 1u);
  fd = open(p, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, t, sizeof t), (ssize_t)sizeof t);
  close(fd);
  start_and_put(&s, 100, 1 << 20, 1);
  seq = s.seq;
  stkr__seg_free(&s);
  return seq;
}

static void test_continues_after_a_run(void **state) {
  (void)state;
  assert_int_equal(seq_after_run(13), 14);
  /* A run said to end past the last seq a name can hold is not believed
   * (QA, session 35: 0xffffffff made the next seq wrap to 0). */
  assert_int_equal(seq_after_run(0xffffffffu), 2);
}

/* One process's cap at a time (cap.lock): while another process holds the
 * lock, a scan is left for later, after a few ms at most; a holder stopped
 * (SIGSTOP) at 8 scans in a row and for a second: then the cap runs
 * without it (a holder stopped by
 * SIGSTOP stopped every cap: QA, session 35), one tombstone a segment, no
 * run (the holder may be rewriting one: session 37, 9 scans in a row
 * found the lock held within a second, and two caps at once wrote over
 * each other's runs). The holder is a child: a POSIX lock is a
 * process's. */
/* A child that holds the cap's lock until *go (a pipe's write end, set
 * here) is written to; `stop`: stopped (SIGSTOP) meanwhile. @return its
 * pid, once it holds the lock (and is stopped). */
static pid_t lock_holder(int *go, bool stop) {
  int g[2], ready[2];
  char c = 0, p[512];
  pid_t kid;

  assert_int_equal(pipe(g), 0);
  assert_int_equal(pipe(ready), 0);
  kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    snprintf(p, sizeof p, "%s/.stackrec-cache", tl_dir);
    (void)mkdir(p, 0700);
    strcat(p, "/cap.lock");
    int fd = open(p, O_RDWR | O_CREAT, 0600);
    _exit(fd < 0 || fcntl(fd, F_SETLKW, &fl) != 0 ||
                  write(ready[1], "l", 1) != 1 ||
                  (stop && raise(SIGSTOP) != 0) || read(g[0], &c, 1) != 1
              ? 1
              : 0);
  }
  assert_int_equal(read(ready[0], &c, 1), 1);
  if (stop) { /* stopped once waitpid says so */
    int st = 0;
    assert_int_equal(waitpid(kid, &st, WUNTRACED), kid);
    assert_true(WIFSTOPPED(st));
  }
  close(g[0]), close(ready[0]), close(ready[1]);
  *go = g[1];
  return kid;
}

static void lock_release(pid_t kid, int go) {
  int st = -1;
  assert_int_equal(kill(kid, SIGCONT), 0);
  assert_int_equal(write(go, "g", 1), 1);
  close(go);
  assert_int_equal(waitpid(kid, &st, 0), kid);
  assert_int_equal(st, 0);
}

static void test_disk_cap_waits_for_no_one(void **state) {
  (void)state;
  stkr__segw s;
  int go;
  pid_t kid = lock_holder(&go, true);

  /* 200-byte segments, cap 500: 3 made (600 bytes), nothing deleted in
   * 12 scans while held, within a second; after a second, within 3 more
   * the cap runs anyway. */
  start_and_put(&s, 200, 500, 6);
  assert_int_equal(s.segments, 3);
  for (int i = 0; i < 6; i++) assert_int_equal(put(&s, 10), 0);
  assert_int_equal(s.segments_deleted, 0);
  (void)nanosleep(&(struct timespec){1, 50000000}, NULL);
  for (int i = 0; i < 3; i++) assert_int_equal(put(&s, 100), 0);
  uint64_t deleted = s.segments_deleted;
  assert_true(deleted > 1);
  for (uint32_t q = 1; q <= deleted; q++) {
    uint32_t file = 0;
    assert_true(tomb_says(PID, q, PID, &file));
    assert_int_equal(file, q); /* its own, no run */
  }
  /* The holder lets go, another takes the lock: at work (not stopped), so
   * the cap waits for it again, however long (QA, session 37: a stop made
   * every later busy scan run without the lock; fails without). */
  lock_release(kid, go);
  kid = lock_holder(&go, false);
  (void)nanosleep(&(struct timespec){1, 50000000}, NULL);
  for (int i = 0; i < 3; i++) assert_int_equal(put(&s, 100), 0);
  assert_int_equal(s.segments_deleted, deleted);
  lock_release(kid, go);
  stkr__seg_free(&s);
}

/* No lock to be had at all (NFS without lockd, a cap.lock not ours; here
 * a directory in its place): the cap runs as before the lock, runs and
 * all (review, session 37: it went single-tombstone, one file a deleted
 * segment for good, and never removed a file it could not tombstone). */
static void test_disk_cap_without_any_lock(void **state) {
  char p[512];
  stkr__segw s;
  (void)state;

  snprintf(p, sizeof p, "%s/.stackrec-cache", tl_dir);
  (void)mkdir(p, 0700);
  strcat(p, "/cap.lock");
  assert_int_equal(mkdir(p, 0700), 0);
  start_and_put(&s, 200, 500, 10);
  assert_int_equal(s.segments_deleted, 3);
  for (uint32_t q = 1; q <= 3; q++) {
    uint32_t file = 0;
    assert_true(tomb_says(PID, q, PID, &file));
    assert_int_equal(file, 1); /* one run */
  }
  stkr__seg_free(&s);
}

static void test_rotation(void **state) {
  (void)state;
  stkr__segw s;
  start_and_put(&s, 250, 1 << 20, 10);
  /* 3 frames reach 250: files of 300, 300, 300, 100. */
  assert_int_equal(s.segments, 4);
  assert_file_sizes(300, 300, 300, 100);
  assert_int_equal(s.bytes, 1000);
  stkr__seg_free(&s);
  assert_int_equal(count_files(), 4);
}

static void test_disk_cap_deletes_oldest_never_current(void **state) {
  (void)state;
  stkr__segw s;
  /* Segments of 200 bytes, cap 500: at most the current file plus the
   * closed ones that fit stay. */
  start_and_put(&s, 200, 500, 10);
  /* Files 1..5 of 200 bytes each were created; total must stay <= 500. */
  assert_int_equal(s.segments, 5);
  assert_int_equal(s.segments_deleted, 3);
  /* The data gone, one tombstone for the run 1..3, at 1 (QA, session 33:
   * one each, a directory that grew without end). */
  for (uint32_t q = 1; q <= 3; q++) {
    uint32_t file = 0;
    assert_true(tomb_says(PID, q, PID, &file));
    assert_int_equal(file, 1);
  }
  assert_int_equal(file_size(4), 200);
  assert_int_equal(file_size(5), 200);

  /* A cap smaller than one segment never deletes the current file. */
  stkr__seg_free(&s);
  assert_int_equal(tl_rm_rf(tl_dir), 0);
  tl_make_dir(NULL);
  start_and_put(&s, 1000, 50, 3);
  assert_int_equal(file_size(1), 300);
  assert_int_equal(s.segments_deleted, 0);
  stkr__seg_free(&s);
}

/* A file of `pid` with `len` bytes, modified `age` seconds ago. */
static void other_file(uint32_t pid, uint32_t seq, size_t len, int age) {
  char p[512], buf[512];
  struct timespec t[2];
  snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", tl_dir, pid, seq);
  int fd = open(p, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  memset(buf, 'o', sizeof buf);
  assert_int_equal(write(fd, buf, len), (ssize_t)len);
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age;
  t[1] = t[0];
  assert_int_equal(futimens(fd, t), 0);
  close(fd);
}

/* Single tombstones that follow each other (another pid's, as a cap
 * without the lock leaves them: a stuck holder) become one run at the
 * next scan under the lock; one inside the run goes too, one after a gap
 * stays (QA, session 37: 980 tombstone files after a 4 s stop, counted
 * against the cap for good). */
static void test_disk_cap_folds_single_tombstones(void **state) {
  char p[512];
  stkr__segw s;
  (void)state;

  for (uint32_t q = 1; q <= 6; q++) {
    uint8_t t[STKR_FMT_TOMBSTONE_RUN_SIZE];
    size_t len = STKR_FMT_TOMBSTONE_SIZE;
    if (q == 4) /* a gap: 4 is data */
      continue;
    if (q == 1)
      stkr_fmt_tombstone_run(t, 7000, 2), len = sizeof t; /* says 1..2 */
    else
      stkr_fmt_tombstone(t, 7000 + q);
    snprintf(p, sizeof p, "%s/stackrec-4242-%06u.zst", tl_dir, q);
    assert_int_equal(tl_write_bytes(p, t, len), 0);
  }
  other_file(4242, 4, 300, 100);
  other_file(4242, 7, 300, 100); /* its newest */
  start_and_put(&s, 200, 4000, 4); /* scans, nothing over the cap */
  stkr__seg_free(&s);
  uint32_t file = 0;
  for (uint32_t q = 1; q <= 3; q++) {
    assert_true(tomb_says(4242, q, 7003, &file)); /* 3's deleter: the last */
    assert_int_equal(file, 1);
  }
  for (uint32_t q = 2; q <= 3; q++) {
    snprintf(p, sizeof p, "%s/stackrec-4242-%06u.zst", tl_dir, q);
    assert_int_equal(access(p, F_OK), -1);
  }
  assert_true(tomb_says(4242, 6, 7006, &file)); /* 5..6 after the gap */
  assert_int_equal(file, 5);
}


/* The newest segment of every process holds its last counters (what it
 * deleted, how its session ended): the cap never deletes it, whatever the
 * cap. QA: a cap below one segment's size left an empty directory that
 * verify called intact (the worker's end closed its file, then the cap
 * deleted it with the counters saying so; another process's newest went
 * as a "last resort"). */
static void test_disk_cap_keeps_every_newest(void **state) {
  (void)state;
  stkr__segw s;
  other_file(PID + 1, 1, 200, 30); /* older: may go */
  other_file(PID + 1, 2, 200, 20); /* its newest: stays */
  start_and_put(&s, 1000, 50, 3);
  assert_true(tomb_of(PID + 1, 1, PID)); /* its loss, told by its file */
  assert_int_equal(pid_file_size(PID + 1, 2), 200);
  assert_int_equal(s.segments_deleted, 0); /* ours only */
  /* The worker's end: its last file closed, then the cap once more. */
  stkr__seg_close(&s);
  stkr__seg_enforce_cap(&s);
  assert_int_equal(file_size(1), 300);
  assert_int_equal(pid_file_size(PID + 1, 2), 200);
  assert_int_equal(s.segments_deleted, 0);
  stkr__seg_free(&s);

  /* Rotating files over a tiny cap, in a second session of the same pid:
   * the older go, the newest stays, also once closed; so does the first
   * session's final file 1 (marked final by this session's start: it
   * holds that session's counters), whose deletion this session would
   * not have counted as its own. */
  start_and_put(&s, 100, 50, 4);
  stkr__seg_close(&s);
  stkr__seg_enforce_cap(&s);
  assert_int_equal(s.seq, 5);
  assert_int_equal(file_size(5), 100);
  assert_int_equal(file_size(1), 300);
  for (uint32_t q = 2; q < 5; q++) assert_true(tomb_of(PID, q, PID));
  assert_int_equal(s.segments_deleted, 3); /* 2..4, its own */
  /* Tombstones are never deleted again (nothing to free), and no
   * temporary file is left beside them. */
  stkr__seg_enforce_cap(&s);
  assert_int_equal(s.segments_deleted, 3);
  /* ours 1, 2 (the tombstone of the run 2..4: one file, QA session 33)
   * and 5; PID + 1's 1..2 */
  assert_int_equal(count_files(), 5);
  assert_false(temp_left());
  stkr__seg_free(&s);
}

static void test_fsize_limit_error_then_recovery(void **state) {
  (void)state;
  stkr__segw s;
  struct rlimit old, lim;
  signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of death */
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(stkr__seg_init(&s, tl_dir, PID, 1 << 20, 1 << 30), 0);
  assert_int_equal(put(&s, 100), 0);
  assert_int_equal(put(&s, 100), 0);

  /* A frame that passes the limit even in a new file: not written at all
   * (a write past it raises SIGXFSZ, which kills a program that did not
   * ignore it, as this test does only in case), -EFBIG; the new file is
   * removed, its number free again. */
  lim = old;
  lim.rlim_cur = 250;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  assert_int_equal(put(&s, 300), -EFBIG);
  assert_int_equal(s.fd, -1); /* closed: the next batch starts a new file */
  assert_int_equal(file_size(1), 200); /* whole frames only */
  assert_int_equal(file_size(2), -1);
  assert_int_equal(s.segments, 1); /* files that hold a frame */

  /* Still limited: a new file is created, nothing fits, it is removed,
   * and its number is free again (no gap in the sequence). */
  lim.rlim_cur = 0;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  assert_int_equal(put(&s, 100), -EFBIG);
  assert_int_equal(file_size(2), -1);

  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(put(&s, 100), 0);
  assert_int_equal(s.seq, 2);
  assert_int_equal(file_size(2), 100);
  assert_int_equal(s.segments, 2);
  stkr__seg_free(&s);
}

/* Under RLIMIT_FSIZE a file is closed before a frame twice the largest so
 * far could pass the limit: a batch refused there is lost, since it was
 * built for that file (QA, session 22: one batch lost at every segment
 * boundary). Frames of 200 bytes under a 1000-byte limit: files of 800
 * bytes, nothing refused, every file within the limit. */
static void test_fsize_limit_rolls_over(void **state) {
  (void)state;
  stkr__segw s;
  struct rlimit old, lim;
  signal(SIGXFSZ, SIG_IGN); /* should a write pass it after all */
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(stkr__seg_init(&s, tl_dir, PID, 1 << 20, 1 << 30), 0);
  lim = old;
  lim.rlim_cur = 1000;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  int errs = 0;
  for (int i = 0; i < 12; i++) errs += put(&s, 200) != 0;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(errs, 0);
  assert_int_equal(s.seq, 3);
  assert_int_equal(s.segments, 3);
  for (uint32_t q = 1; q <= 3; q++) assert_int_equal(file_size(q), 800);
  stkr__seg_free(&s);
}

/* s open on tl_dir with 100 bytes in segment 1, then tl_dir deleted (with
 * the open file) under it. */
static void write_then_remove_dir(stkr__segw *s) {
  assert_int_equal(stkr__seg_init(s, tl_dir, PID, 1 << 20, 1 << 30), 0);
  assert_int_equal(put(s, 100), 0);
  assert_int_equal(tl_rm_rf(tl_dir), 0);
}

static void test_directory_removed_is_recreated(void **state) {
  (void)state;
  stkr__segw s;
  write_then_remove_dir(&s);
  /* The open file was unlinked with the directory: noticed before the
   * next write, which goes to a new file in a recreated directory. */
  assert_true(stkr__seg_need_new(&s));
  assert_int_equal(stkr__seg_open_next(&s), 0);
  assert_int_equal(stkr__seg_write(&s, "abc", 3), 0);
  assert_int_equal(file_size(2), 3);
  stkr__seg_free(&s);
}

static void test_file_in_place_of_directory(void **state) {
  (void)state;
  stkr__segw s;
  write_then_remove_dir(&s);
  int fd = open(tl_dir, O_CREAT | O_WRONLY, 0600); /* a file, not a dir */
  assert_true(fd >= 0);
  close(fd);
  assert_true(put(&s, 100) < 0);
  assert_true(put(&s, 100) < 0); /* keeps failing, never crashes */
  unlink(tl_dir);
  assert_int_equal(put(&s, 100), 0); /* resumes */
  stkr__seg_free(&s);
}

/* Our descriptor sits at the floor (64 below the soft limit, at most 4096,
 * never below 10), close-on-exec. */
static void test_descriptor_is_high(void **state) {
  (void)state;
  stkr__segw s;
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  lim = old;
  lim.rlim_cur = lim.rlim_max < 1024 ? lim.rlim_max : 1024;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  assert_int_equal(stkr_fd_floor(), (int)lim.rlim_cur - 64);
  assert_int_equal(stkr__seg_init(&s, tl_dir, PID, 1 << 20, 1 << 30), 0);
  assert_int_equal(put(&s, 100), 0);
  assert_true(s.fd >= (int)lim.rlim_cur - 64);
  assert_int_equal(fcntl(s.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  stkr__seg_free(&s);
  lim.rlim_cur = 100;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  assert_int_equal(stkr_fd_floor(), 50); /* half of a limit below 128 */
  lim.rlim_cur = 15;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  assert_int_equal(stkr_fd_floor(), 10);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* The program closes our descriptor, or puts its own file at that number:
 * we never write, truncate or close its file, and go on in a new one. */
static void test_descriptor_taken_by_the_program(void **state) {
  (void)state;
  stkr__segw s;
  char p[512];
  struct stat st;
  assert_int_equal(stkr__seg_init(&s, tl_dir, PID, 1 << 20, 1 << 30), 0);
  assert_int_equal(put(&s, 100), 0);
  /* stkr_fd_owned: ours while it names our file (the hook library's
   * fcntl(F_GETFD) then finds it free), the program's once it does not. */
  assert_int_equal(stkr_fd_owned(s.fd), 1);
  assert_int_equal(stkr_fd_owned(-1), 0);
  assert_int_equal(stkr_fd_owned(0), 0);

  /* Replaced: dup2 of the program's file over our number. */
  snprintf(p, sizeof p, "%s/program-file", tl_dir);
  int mine = open(p, O_CREAT | O_RDWR | O_TRUNC, 0600);
  assert_true(mine >= 0);
  assert_int_equal(write(mine, "mine", 4), 4);
  int ours = s.fd;
  assert_int_equal(dup2(mine, ours), ours);
  assert_int_equal(stkr_fd_owned(ours), 0); /* before we noticed, too */
  assert_int_equal(stkr__seg_write(&s, "zzzz", 4), -EBADF);
  assert_int_equal(s.fd, -1);
  assert_int_equal(fcntl(ours, F_GETFD) >= 0, 1); /* not closed by us */
  assert_int_equal(fstat(mine, &st), 0);
  assert_int_equal(st.st_size, 4); /* neither written nor truncated */
  assert_int_equal(file_size(1), 100); /* our frames stay */
  assert_int_equal(put(&s, 100), 0);    /* a new file */
  assert_int_equal(s.seq, 2);
  assert_int_equal(file_size(2), 100);
  assert_int_equal(s.fds_lost, 1);
  assert_int_equal(stkr_fd_owned(s.fd), 1);
  assert_int_equal(stkr_fd_owned(ours), 0);

  /* Closed: noticed at the next batch, which goes to a new file. */
  close(s.fd);
  assert_int_equal(put(&s, 100), 0);
  assert_int_equal(s.seq, 3);
  assert_int_equal(file_size(2), 100);
  assert_int_equal(file_size(3), 100);
  assert_int_equal(s.fds_lost, 2);
  close(ours);
  close(mine);
  int last = s.fd;
  stkr__seg_free(&s);
  assert_int_equal(stkr_fd_owned(last), 0);
}

static int cleanup(void **state) {
  (void)state;
  assert_int_equal(tl_rm_rf(tl_dir), 0);
  return 0;
}

TL_TEST_MAIN_EACH("flush-segment", tl_make_dir, cleanup,
                  test_names_modes_and_older_files,
                  test_older_files_without_their_first,
                  test_continues_after_a_run, test_disk_cap_waits_for_no_one,
                  test_disk_cap_without_any_lock,
                  test_disk_cap_folds_single_tombstones,
                  test_rotation,
                  test_disk_cap_deletes_oldest_never_current,
                  test_disk_cap_keeps_every_newest,
                  test_fsize_limit_error_then_recovery,
                  test_fsize_limit_rolls_over,
                  test_directory_removed_is_recreated,
                  test_file_in_place_of_directory, test_descriptor_is_high,
                  test_descriptor_taken_by_the_program)
