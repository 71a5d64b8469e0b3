/*
 * segment_cap.c: the disk cap of a recording directory (segment.c's
 * segments, every process's): the oldest segments go first, each leaving
 * a tombstone, or carrying a run of them on (proto/stkr_format.h); one
 * process's cap at a time, under DIR/.stackrec-cache/cap.lock. The rules
 * are segment.c's header's. Split from segment.c.
 */
#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "common/stkr_pid.h"
#include "common/stkr_ringfile.h"
#include "flush/flush_internal.h"
#include "proto/stkr_format.h"

typedef struct capfile {
  uint32_t pid, seq;
  uint64_t bytes;
  int64_t mtime_s, mtime_ns;
  bool newest; /* a pid's newest file: that process's last counters */
  bool final;  /* a session's final segment (STKR_FMT_SEGMENT_IS_FINAL) */
  bool tomb;   /* a tombstone (or a file as small): never deleted, but a
                  run it starts may go on (cap_delete) */
} capfile;

static int cap_older(const void *a, const void *b) {
  const capfile *x = a, *y = b;
  int c = stkr_cmp_i64(x->mtime_s, y->mtime_s);
  if (c == 0) c = stkr_cmp_i64(x->mtime_ns, y->mtime_ns);
  /* Same time (timestamps are coarse): by name, i.e. pid then seq. */
  if (c == 0) c = stkr_cmp_u64(x->pid, y->pid);
  return c != 0 ? c : stkr_cmp_u64(x->seq, y->seq);
}

/* Every segment in the directory but our current one; *total gets the bytes
 * of all of them plus ours. NULL (nothing to do) when the directory cannot
 * be listed or memory is short: the cap is then enforced at a later scan. */
static capfile *cap_scan(stkr__segw *s, size_t *n_out, uint64_t *total) {
  DIR *d = stkr__opendir_high(s->dir);
  struct dirent *de;
  capfile *v = NULL;
  size_t n = 0, cap = 0;

  *total = s->fd >= 0 ? s->cur_bytes : 0;
  if (!d) return NULL;
  while ((de = readdir(d)) != NULL) {
    uint32_t pid, seq;
    struct stat st;
    if (stkr_fmt_segment_parse(de->d_name, &pid, &seq) != 0) continue;
    if (pid == s->pid && seq == s->seq && s->fd >= 0) continue;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (stkr_grow((void **)&v, &cap, n + 1, sizeof *v) != 0) {
      free(v);
      closedir(d);
      return NULL;
    }
    v[n++] = (capfile){.pid = pid, .seq = seq, .bytes = (uint64_t)st.st_size,
#if defined(__APPLE__)
                       .mtime_s = st.st_mtimespec.tv_sec,
                       .mtime_ns = st.st_mtimespec.tv_nsec,
#else
                       .mtime_s = st.st_mtim.tv_sec,
                       .mtime_ns = st.st_mtim.tv_nsec,
#endif
                       .final = !s->marks_off &&
                                STKR_FMT_SEGMENT_IS_FINAL(st.st_mode),
                       /* A tombstone (or anything as small): deleting it
                        * frees nothing, and it tells readers what the cap
                        * took. Its bytes still count. */
                       .tomb = (uint64_t)st.st_size <= STKR_FMT_MARKER_MAX};
    *total += (uint64_t)st.st_size;
  }
  closedir(d);
  /* A pid's newest file (ours: the current one, excluded above, else our
   * last closed one). */
  for (size_t i = 0; i < n; i++) {
    bool newest = !v[i].tomb && (v[i].pid != s->pid || s->fd < 0);
    for (size_t j = 0; j < n && newest; j++)
      if (!v[j].tomb && v[j].pid == v[i].pid && v[j].seq > v[i].seq)
        newest = false;
    v[i].newest = newest;
  }
  *n_out = n;
  return v;
}

/* dir/name of pid's segment seq into path. @return 0 or -1. */
static int cap_path(const stkr__segw *s, uint32_t pid, uint32_t seq,
                    char *path, size_t len) {
  char name[64];
  int k;

  if (stkr_fmt_segment_name(name, sizeof name, pid, seq) < 0) return -1;
  k = snprintf(path, len, "%s/%s", s->dir, name);
  return k < 0 || (size_t)k >= len ? -1 : 0;
}

/* Write tombstone t (len bytes) at path: beside it under a name readers
 * pass over, then renamed over it, so that a reader that has the file
 * open reads it whole. `was` (not NULL: a cap without the lock) is the
 * segment path held when looked at: if another cap replaced it since (a
 * tombstone, or a run's first: QA, session 37, a late single tombstone
 * over a run left its other segments "missing"), nothing is put, -ENOENT.
 * Checked right before the rename: a cap that resumes in between (a
 * stopped holder let go that instant) still races, in microseconds.
 * @return 0 or -errno. */
static int put_tomb(const stkr__segw *s, const char *path, const capfile *f,
                    const uint8_t *t, size_t len, const struct stat *was) {
  char tmp[PATH_MAX];
  int fd = -1, k, err;

  k = snprintf(tmp, sizeof tmp, "%s/.stackrec-tomb-%u-%u-%u", s->dir,
               (unsigned)s->pid, (unsigned)f->pid, (unsigned)f->seq);
  if (k < 0 || (size_t)k >= sizeof tmp || !stkr_fsize_room(len))
    return -ENOSPC;
  (void)unlink(tmp); /* one a crash of ours left (the name is ours) */
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -errno;
  if ((fd = stkr_fd_raise(fd)) < 0) {
    (void)unlink(tmp);
    return fd;
  }
  err = stkr_write_all(fd, t, len);
  /* Whole, or not put in place (a descriptor taken from under us by the
   * app's dup2 would leave it empty: a run's record lost; review). */
  if (err == 0) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != (off_t)len) err = -EIO;
  }
  if (close(fd) != 0 && err == 0) err = -errno;
  if (err == 0 && was != NULL) {
    struct stat now;
    if (lstat(path, &now) != 0 || now.st_dev != was->st_dev ||
        now.st_ino != was->st_ino || now.st_size != was->st_size)
      err = -ENOENT;
  }
  if (err == 0 && rename(tmp, path) != 0) err = -errno;
  if (err != 0) (void)unlink(tmp);
  return err;
}

/* f (at path) has just become a tombstone. If the run of tombstones just
 * below it (the nearest of f's pid in v, whose run ends at f->seq - 1)
 * can say f too, its first tombstone is written again to end at f, and
 * f's file goes: one file a run (proto/stkr_format.h). Under the cap's
 * lock: no other process's cap deletes meanwhile.
 * @return true if f's tombstone went into the run. */
static bool run_extend(const stkr__segw *s, const capfile *v, size_t n,
                       const capfile *f, const char *path) {
  uint8_t t[STKR_FMT_TOMBSTONE_RUN_SIZE];
  char first[PATH_MAX];
  const capfile *below = NULL;
  uint32_t last;

  for (size_t i = 0; i < n; i++)
    if (v[i].tomb && v[i].pid == f->pid && v[i].seq < f->seq &&
        (below == NULL || v[i].seq > below->seq))
      below = &v[i];
  if (below == NULL || cap_path(s, f->pid, below->seq, first, sizeof first) ||
      !stkr_fmt_tombstone_read(s->dir, f->pid, below->seq, NULL, &last) ||
      last != f->seq - 1)
    return false;
  stkr_fmt_tombstone_run(t, s->pid, f->seq);
  if (put_tomb(s, first, below, t, STKR_FMT_TOMBSTONE_RUN_SIZE, NULL) != 0)
    return false;
  (void)unlink(path); /* said by the run now */
  return true;
}

/* Delete segment f (at path) for the cap: its data go, a tombstone
 * (proto/stkr_format.h) takes its name (put_tomb), so that a reader that
 * comes later learns that the cap took it, and at whose writes; then the
 * run of tombstones below it takes it on (run_extend), if there is one.
 * Without room for the tombstone (a full disk: when the cap matters most)
 * the file is simply removed. Not `locked` (cap_lock): f's tombstone
 * stays its own.
 * @return 0 (tombstone, its own: *own_tomb true, or the run's), 1
 *         (removed without one), -ENOENT (gone already) or another -errno. */
static int cap_delete(const stkr__segw *s, const char *path,
                      const capfile *v, size_t n, const capfile *f,
                      bool locked, bool *own_tomb) {
  uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
  struct stat st;

  *own_tomb = false;
  if (lstat(path, &st) != 0)
    return -errno;
  if (S_ISREG(st.st_mode) && (uint64_t)st.st_size <= STKR_FMT_MARKER_MAX)
    return -ENOENT; /* a tombstone already */
  stkr_fmt_tombstone(t, s->pid);
  int err = put_tomb(s, path, f, t, sizeof t, locked ? NULL : &st);
  if (err == 0) {
    /* Without the lock, no run: another cap may be rewriting the run's
     * first tombstone, or be about to remove f's (proto/stkr_format.h). */
    *own_tomb = !locked || !run_extend(s, v, n, f, path);
    return 0;
  }
  /* No room for a tombstone: removed without one, as before tombstones
   * (under the lock only: without it, the file may be another cap's
   * tombstone by now). */
  if (err == -ENOENT || !locked)
    return err;
  return unlink(path) == 0 ? 1 : -errno;
}

static int by_pid_seq(const void *a, const void *b) {
  const capfile *x = a, *y = b;
  return stkr_cmp_u64_pair(x->pid, y->pid, x->seq, y->seq);
}

/* Under the lock: a pid's tombstones that follow each other become one
 * run (its first rewritten to end at the last, then the others removed,
 * as run_extend does; a reader that listed one finds the run saying it:
 * proto/stkr_tombstones.c, stkr__tomb_gone). Single ones are what a cap without the lock
 * leaves (a stuck holder: QA, session 37, 980 files after a 4 s stop of
 * 6 writers; the cap counts their bytes and never deletes them). At most
 * STKR__FOLD_MAX files a scan. v: this scan's files, any order. */
#define STKR__FOLD_MAX 256
static void fold_tombs(const stkr__segw *s, const capfile *v, size_t n) {
  capfile *t;
  size_t m = 0, i = 0;
  unsigned budget = STKR__FOLD_MAX;

  for (size_t k = 0; k < n; k++)
    m += v[k].tomb;
  if (m < 2 || (t = malloc(m * sizeof *t)) == NULL)
    return;
  m = 0;
  for (size_t k = 0; k < n; k++)
    if (v[k].tomb)
      t[m++] = v[k];
  qsort(t, m, sizeof *t, by_pid_seq);
  while (i + 1 < m && budget > 0) {
    uint32_t by, last, by_j, last_j;
    size_t j = i + 1;
    if (!stkr_fmt_tombstone_read(s->dir, t[i].pid, t[i].seq, &by, &last)) {
      i++;
      continue;
    }
    /* The next one, or one inside the run (left by a writer that died
     * between a run's steps, or by a cap without the lock). */
    while (j < m && t[j].pid == t[i].pid && t[j].seq <= last + 1 &&
           budget > 0 &&
           stkr_fmt_tombstone_read(s->dir, t[j].pid, t[j].seq, &by_j,
                                   &last_j)) {
      if (last_j > last) {
        last = last_j;
        by = by_j; /* a run names who deleted its last */
      }
      j++;
      budget--;
    }
    if (j > i + 1) {
      uint8_t rt[STKR_FMT_TOMBSTONE_RUN_SIZE];
      char path[PATH_MAX];
      stkr_fmt_tombstone_run(rt, by, last);
      if (cap_path(s, t[i].pid, t[i].seq, path, sizeof path) == 0 &&
          put_tomb(s, path, &t[i], rt, sizeof rt, NULL) == 0)
        for (size_t k = i + 1; k < j; k++)
          if (cap_path(s, t[k].pid, t[k].seq, path, sizeof path) == 0)
            (void)unlink(path); /* said by the run now */
    }
    i = j;
  }
  free(t);
}

/* Sessions' final segments are kept newest first: always the last
 * STKR__FINALS_KEPT, more while they hold at most `budget` bytes
 * together; older ones may go as any segment (their loss then told by
 * tombstones, as before they were kept): a pid restarted without end (a
 * crashing container app, a long exec chain) must not fill the directory
 * with them, nor make the cap take every other file (review, session 26).
 * v: oldest first. */
#define STKR__FINALS_KEPT 4
static void keep_recent_finals(capfile *v, size_t n, uint64_t budget) {
  uint64_t held = 0;
  unsigned count = 0;

  for (size_t i = n; i-- > 0;)
    if (v[i].final && !v[i].newest) {
      held += v[i].bytes;
      v[i].final = ++count <= STKR__FINALS_KEPT || held <= budget;
    }
}

/* One process's cap at a time: two deleting at once could each write a
 * tombstone over the other's, and a run's would lose the segments it says
 * (its tombstone below is removed). A POSIX lock (fcntl) on
 * DIR/.stackrec-cache/cap.lock: a forked child does not inherit it, as it
 * would a flock held while it forked (review: a prefork server's children
 * stopped every cap), and NFS has it. A holder scans and deletes in a few
 * ms: tried 5 times 1 ms apart, on the flush worker.
 * @return the lock's descriptor (high); -EAGAIN, held elsewhere (by
 *         *holder, 0 if not known); another -errno: no lock to be had
 *         here, the cap runs without one. */
static int cap_lock(const stkr__segw *s, uint32_t *holder) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  char path[PATH_MAX];
  int fd, k, tries;

  k = snprintf(path, sizeof path, "%s/%s", s->dir, STKR_CACHE_DIR);
  if (k < 0 || (size_t)k + sizeof "/cap.lock" > sizeof path)
    return -ENAMETOOLONG;
  (void)mkdir(path, 0700); /* record makes it; an embedded app may not */
  memcpy(path + k, "/cap.lock", sizeof "/cap.lock");
  fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -errno;
  if ((fd = stkr_fd_raise(fd)) < 0) return fd;
  *holder = 0;
  for (tries = 0; fcntl(fd, F_SETLK, &fl) != 0; tries++) {
    int err = errno == EACCES ? -EAGAIN : -errno;
    if (err != -EAGAIN || tries == 4) {
      struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
      if (err == -EAGAIN && fcntl(fd, F_GETLK, &who) == 0 &&
          who.l_type != F_UNLCK && who.l_pid > 0)
        *holder = (uint32_t)who.l_pid;
      close(fd);
      return err;
    }
    (void)nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  return fd;
}

/* The cap's lock was held at this scan (cap_lock: -EAGAIN), by process
 * `holder` (F_GETLK; 0: not known). Is that holder stuck (SIGSTOP, a
 * debugger: QA, session 35, 1.6 MB under a 64 KiB cap), so that the cap
 * must run without it? The same holder at 8 scans in a row and for
 * STKR__CAP_STUCK_NS since the first of them (a holder's scan takes ms),
 * and, where the OS says (Linux), stopped (T, t) at each: one that keeps
 * taking the lock at work is seen again and again between its releases,
 * so the same pid alone does not tell a stop.
 * Counting scans alone, six processes capping one directory found it held
 * at 9 scans in a row within a second (a flaky test, session 37: two caps
 * at once wrote over each other's runs); counting from the first busy
 * scan whoever held it, one stop made every later busy scan run without
 * the lock, the holder long back (QA, session 37: 1 388 tombstones in
 * 20 s where none were due). */
#define STKR__CAP_STUCK_NS 1000000000ull
/* Where the state is not known (not Linux; a holder in another pid
 * namespace, F_GETLK's pid 0): the same "holder" for this long, much more
 * than any scan (review, session 37: after 1 s a holder at work was taken
 * for a stuck one). A holder frozen by a cgroup freezer shows D or S, and
 * is waited for. */
#define STKR__CAP_STUCK_UNKNOWN_NS 10000000000ull
static bool cap_holder_stuck(stkr__segw *s, uint32_t holder) {
  struct timespec ts;
  uint64_t now;

  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return false; /* no time to tell a stop by: wait for the lock */
  now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  char state = stkr_pid_state(holder);
  if (state != 0 && state != 'T' && state != 't') {
    s->cap_busy = 0; /* at work */
    return false;
  }
  if (s->cap_busy == 0 || holder != s->cap_holder) {
    s->cap_busy = 0; /* another holder: one at work, not stuck */
    s->cap_busy_since_ns = now;
    s->cap_holder = holder;
  }
  s->cap_busy++;
  return s->cap_busy > 8 &&
         now - s->cap_busy_since_ns >=
             (state != 0 ? STKR__CAP_STUCK_NS : STKR__CAP_STUCK_UNKNOWN_NS);
}

void stkr__seg_enforce_cap(stkr__segw *s) {
  size_t n = 0;
  uint64_t total;
  uint32_t holder;
  capfile *v;
  int lock;

  if (!s->dir) return;
  /* A scan reads the whole directory: with many processes (a fork-heavy
   * program under `stackrec record`) one per process end would make the
   * cost grow with the square of the process count. A closed file asks
   * for one only once this process wrote a 64th of the cap since its last
   * scan, so the directory overshoots the cap by at most that much per
   * process that has not scanned yet; otherwise every 16th of the cap. */
  if (s->bytes_since_scan < s->disk_cap_bytes / 64 + 1 ||
      (!s->cap_scan_due && s->bytes_since_scan < s->disk_cap_bytes / 16 + 1))
    return;
  lock = cap_lock(s, &holder);
  if (lock == -EAGAIN && !cap_holder_stuck(s, holder)) { /* another's cap */
    s->cap_scan_due = true;
    s->bytes_since_scan = 0;
    return;
  }
  if (lock >= 0) s->cap_busy = 0;
  s->cap_scan_due = false;
  s->bytes_since_scan = 0;
  if (!(v = cap_scan(s, &n, &total))) {
    if (lock >= 0) close(lock);
    return;
  }
  if (total > s->disk_cap_bytes) {
    qsort(v, n, sizeof *v, cap_older);
    keep_recent_finals(v, n, s->disk_cap_bytes / 2);
    for (size_t i = 0; i < n && total > s->disk_cap_bytes; i++) {
      char path[PATH_MAX];
      bool own_tomb;
      if (v[i].newest || v[i].final || v[i].tomb) continue;
      if (cap_path(s, v[i].pid, v[i].seq, path, sizeof path) != 0) continue;
      /* Without the lock because another holds it (stuck): single
       * tombstones. No lock to be had at all (NFS without lockd, EACCES):
       * as before the lock, runs and all. */
      int err = cap_delete(s, path, v, n, &v[i], lock != -EAGAIN, &own_tomb);
      /* A tombstone of its own now: the next of its pid may join it. */
      v[i].tomb = (err == 0 && own_tomb) || err == -ENOENT;
      if (err >= 0 || err == -ENOENT) /* -ENOENT: another process did */
        total -= v[i].bytes;
      /* Ours: in our counters. Another's: told by the tombstone in its
       * place; without one, in our counters as before tombstones, so the
       * deletion is still said (as one of ours the reader cannot place). */
      if (err == 1 || (err == 0 && v[i].pid == s->pid &&
                       v[i].seq > s->prior_seq))
        s->segments_deleted++;
      else if (err < 0 && err != -ENOENT)
        stkr__log(STKR__LOG_UNLINK, "cannot delete %s: %s", path,
                  strerror(-err));
    }
  }
  if (lock >= 0)
    fold_tombs(s, v, n);
  free(v);
  if (lock >= 0) close(lock); /* the lock goes with it */
}

