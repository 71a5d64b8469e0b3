/*
 * segment.c: segment files of one process.
 *
 * A segment is DIR/stackrec-<pid>-<seq>.zst, a plain sequence of zstd frames,
 * one per batch, each written with one write(2). Rules:
 *  - files are created O_EXCL (never clobber: a recycled pid in a reused
 *    directory continues after the highest seq it finds), mode 0600,
 *    close-on-exec so an exec'd child does not hold them, and moved to a
 *    high descriptor number (fd.c);
 *  - the descriptor is checked before every write (one fstat per batch):
 *    if the app closed it or put another file at its number, we forget the
 *    number (never close, truncate or write it: it is the app's now), note
 *    it once, and the next batch opens a new file;
 *  - a file is closed as soon as it reaches segment_bytes, so a closed
 *    segment is complete on disk while the app still runs; under
 *    RLIMIT_FSIZE, also before a batch that could pass the limit (twice
 *    the largest frame so far), since a refused batch is lost;
 *  - after a failed write the file is cut back to its last whole frame (best
 *    effort) and closed: later batches go to a new, clean file; a file with
 *    no whole frame is removed;
 *  - a segment keeps STKR__SEG_RESERVE bytes of disk past its end
 *    (fallocate, FALLOC_FL_KEEP_SIZE: readers see the file as it is; Linux
 *    only), taken with each batch's room before its write, so that on a
 *    full disk the session's last counters still fit
 *    (stkr__seg_append_last); given back at a clean end and when the next
 *    file has its own;
 *  - a file unlinked behind our back (directory removed) is abandoned, and
 *    the directory is recreated when the next file is opened;
 *  - the disk cap is for the whole directory: every process's segments
 *    count, the oldest go first, but never a process's newest file (ours
 *    or another's, open or closed): it holds that process's last counters,
 *    which say what it deleted and whether it ended, so a recording is
 *    never emptied silently (QA: a cap below one segment's size deleted
 *    every file), nor a session's final segment (marked by mode,
 *    STKR_FMT_SEGMENT_FINAL_MODE: an earlier session of a recycled pid
 *    keeps its counters): the last 4, more while they hold at most half
 *    the cap (keep_recent_finals), and where the file system keeps modes (on
 *    vfat, CIFS, WSL's drvfs every file reads as executable: the first
 *    file's mode tells, marks_off). The directory may thus exceed the
 *    cap by one segment per process, and 4 segments or half the cap in
 *    sessions' final segments. A deleted segment leaves a tombstone
 *    saying which process's cap took it: 20 bytes under its name, or, when
 *    it follows a run of them, the run's first one, rewritten to end
 *    there (cap_delete, run_extend); a process counts in
 *    its own counters the deletions of its own session's segments only
 *    (not an earlier session's of the same pid), so each loss
 *    is told once, for the process that had the events. The worker
 *    enforces the cap before a batch's write, so that batch's counters
 *    include it.
 * Nothing here blocks other than on the file system, and nothing aborts:
 * errors are returned to the worker, which drops the batch and counts it.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* fallocate, FALLOC_FL_KEEP_SIZE */
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

#include "common/stkr_io.h"
#include "common/stkr_mkdir.h"
#include "common/stkr_ringfile.h"
#include "flush/flush_internal.h"
#include "proto/stkr_format.h"

static int seg_path(const stkr__segw *s, uint32_t seq, char *buf, size_t len) {
  char name[64];
  int err = stkr_fmt_segment_name(name, sizeof name, s->pid, seq);
  if (err < 0) return err;
  int n = snprintf(buf, len, "%s/%s", s->dir, name);
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* Disk for the next `len` bytes of the current file and STKR__SEG_RESERVE
 * more past them, kept for the session's last counters. Allocated before
 * a batch's write, so that a write never eats the reserve: on a full disk
 * the batch fails whole (-ENOSPC, nothing written) and the room for the
 * last counters stays. Not counted in the file's size (FALLOC_FL_KEEP_SIZE),
 * so neither readers nor the disk cap see it. @return 0, or -ENOSPC; any
 * other failure (no fallocate here: tmpfs before Linux 3.5, NFS, Apple) is
 * 0, and the write goes ahead as before, with no reserve. */
static int reserve_tail(const stkr__segw *s, size_t len) {
#if defined(__linux__)
  /* Never past RLIMIT_FSIZE: tmpfs raises SIGXFSZ for an fallocate there,
   * even one that keeps the size (tried by hand). The worker thread
   * blocks every signal, but an exit's last drain may run on the app's
   * thread (worker.c), where it would kill the app. Under such a limit
   * there is no reserve. (No test: the worker's drain cannot be made to
   * run on the app's thread on demand.) */
  if (!stkr_fsize_room(s->cur_bytes + len + STKR__SEG_RESERVE))
    return 0;
  if (s->fd >= 0 &&
      fallocate(s->fd, FALLOC_FL_KEEP_SIZE, (off_t)s->cur_bytes,
                (off_t)(len + STKR__SEG_RESERVE)) != 0 &&
      errno == ENOSPC)
    return -ENOSPC;
#else
  (void)s;
  (void)len;
#endif
  return 0;
}

/* The file closed last (last_seq) gives its reserve back: a new file has
 * one now. Only that file (its identity: not a tombstone or a rewrite put
 * under its name), cut to its own size, which frees what lies past it. */
static void release_last_reserve(const stkr__segw *s) {
#if defined(__linux__)
  char path[PATH_MAX];
  struct stat st;
  int fd;

  if (s->last_seq == 0 || seg_path(s, s->last_seq, path, sizeof path) != 0)
    return;
  fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == s->last_dev &&
      (uint64_t)st.st_ino == s->last_ino && S_ISREG(st.st_mode))
    (void)ftruncate(fd, st.st_size);
  (void)close(fd);
#else
  (void)s;
#endif
}

/* Make fd's file a session's final segment (STKR_FMT_SEGMENT_FINAL_MODE):
 * the cap keeps it. Best effort: without it the file is only deletable. */
static void mark_final_fd(const stkr__segw *s, int fd) {
  if (!s->marks_off) (void)fchmod(fd, STKR_FMT_SEGMENT_FINAL_MODE);
}

/* The same for our pid's segment seq, by name: a regular file above a
 * tombstone's size only (never a link's target). */
static void mark_final_seq(const stkr__segw *s, uint32_t seq) {
  char path[PATH_MAX];
  struct stat st;
  int fd;

  if (seg_path(s, seq, path, sizeof path) != 0) return;
  fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (uint64_t)st.st_size > STKR_FMT_MARKER_MAX)
    mark_final_fd(s, fd);
  close(fd);
}

int stkr__seg_init(stkr__segw *s, const char *dir, uint32_t pid,
                   uint64_t segment_bytes, uint64_t disk_cap_bytes) {
  char first[PATH_MAX];
  struct stat st;
  DIR *d;
  struct dirent *de;

  memset(s, 0, sizeof *s);
  s->dir = (char *)dir;
  s->pid = pid;
  s->segment_bytes = segment_bytes;
  s->disk_cap_bytes = disk_cap_bytes;
  s->fd = -1;

  /* Continue after files an earlier process with our pid left behind
   * (containers recycle small pids). A directory we cannot list is not an
   * error here: O_EXCL still protects those files. Listing costs as much
   * as the directory has entries, in every process: a recording of N
   * processes paid for N^2 (3 000 forks under `record`: 3.0 ms a fork at
   * the start, 5.9 ms at the end). So first a look at our first name:
   * free, there is nothing of ours to continue (the cap leaves a
   * tombstone where it deletes, so an earlier process's files start at
   * 1; one whose first file was deleted by hand is still safe from us by
   * O_EXCL, ours skipping its numbers). */
  if (seg_path(s, 1, first, sizeof first) == 0 && lstat(first, &st) != 0 &&
      errno == ENOENT)
    return 0;
  d = stkr__opendir_high(dir);
  if (!d) return 0;
  while ((de = readdir(d)) != NULL) {
    uint32_t p, q;
    if (stkr_fmt_segment_parse(de->d_name, &p, &q) == 0 && p == pid &&
        q > s->seq)
      s->seq = q;
  }
  closedir(d);
  /* The highest file may be a run's tombstone: go on after its run. */
  if (s->seq > 0) s->seq = stkr_fmt_seq_said(dir, pid, s->seq);
  s->prior_seq = s->seq;
  /* That file is the newest of an earlier session of our pid, which has
   * ended (the pid is ours): its final counters are kept from the cap
   * from now on, as a clean end would have marked them. */
  if (s->seq > 0) mark_final_seq(s, s->seq);
  return 0;
}

static void unlink_seq(stkr__segw *s, uint32_t seq) {
  char path[PATH_MAX];
  if (seg_path(s, seq, path, sizeof path) == 0) (void)unlink(path);
}

/* The directory may have been renamed while we recorded (`mv DIR
 * DIR.moved`): the ring and session files follow it (recorder/
 * ringfile.c), and so do the segments, to where the current one is, or
 * with none open (the last one closed full), the session file. Before
 * (QA, session 37), the next segment made a new DIR, whose reader said
 * "deleted and recreated", while DIR.moved had "no clean end". Not
 * followed: a file the app took over (identity), or a DIR that still
 * names the same directory (another spelling). */
static void follow_renamed_dir(stkr__segw *s) {
  const size_t cap = PATH_MAX - STKR_FMT_SEGMENT_NAME_MAX - 2;
  char now[PATH_MAX], *d;
  struct stat cur, a, b;

  if (!(s->fd >= 0
            ? stkr__fd_check(s->fd, s->fd_dev, s->fd_ino, &cur) == 0 &&
                  stkr_fd_dir(s->fd, now, cap)
            : stkr__session_dir_now(now, cap)) ||
      strcmp(now, s->dir) == 0 ||
      (stat(s->dir, &a) == 0 && stat(now, &b) == 0 && a.st_dev == b.st_dev &&
       a.st_ino == b.st_ino) ||
      (d = strdup(now)) == NULL)
    return;
  /* The new name in place before the old is freed: a fork by another
   * thread meanwhile gives its child a name to read, never freed memory
   * (stkr__seg_dir_in_parent). */
  char *old = s->dir_owned;
  s->dir_owned = d;
  __atomic_store_n(&s->dir, d, __ATOMIC_RELEASE); /* stored before the free */
  free(old);
}

/* Close the current fd. `keep`: the file stays as a closed segment (the
 * disk cap then looks at the directory again); otherwise it is gone or
 * worthless. */
static void close_current(stkr__segw *s, bool keep) {
  if (s->fd < 0 || !s->dir) return;
  follow_renamed_dir(s); /* while the file tells where it is */
  stkr__fd_own(STKR__OWN_SEGMENT, -1, 0, 0);
  (void)close(s->fd); /* no retry on EINTR: Linux closes the fd anyway */
  s->fd = -1;
  if (keep && s->cur_bytes == 0) {
    /* No whole frame: nothing for a reader. Its number is free again and
     * the next file takes it, so a batch that failed in a new file leaves
     * no gap in the sequence (QA: "2 segments missing" after writes that
     * RLIMIT_FSIZE refused, which lost batches, not files). */
    unlink_seq(s, s->seq);
    s->seq--;
    s->segments--; /* stkr_stats.segments: files that hold a batch */
    keep = false;
  }
  if (keep) {
    s->cap_scan_due = true;
    /* What stkr__seg_append_last may write to once it is closed. */
    s->last_seq = s->seq;
    s->last_dev = s->fd_dev;
    s->last_ino = s->fd_ino;
  }
  s->cur_bytes = 0;
}

/* The app closed our descriptor or put its own file at that number: forget
 * the number without touching it. Whole frames written so far stay in the
 * file (it is still on disk, a closed segment as far as readers care). */
static void lost_current(stkr__segw *s) {
  stkr__log(STKR__LOG_OTHER,
            "descriptor %d of %s/stackrec-%u-%06u.zst was closed or replaced "
            "by the program; continuing in a new file",
            s->fd, s->dir, s->pid, s->seq);
  stkr__fd_own(STKR__OWN_SEGMENT, -1, 0, 0);
  s->fd = -1;
  s->fds_lost++;
  s->cap_scan_due = true;
  s->cur_bytes = 0;
}

/* 0: the current file is ours and linked; 1: it was unlinked (closed now);
 * -1: the descriptor is not ours any more (forgotten now). */
static int check_current(stkr__segw *s) {
  struct stat st;
  if (stkr__fd_check(s->fd, s->fd_dev, s->fd_ino, &st) < 0) {
    lost_current(s);
    return -1;
  }
  if (st.st_nlink == 0) {
    close_current(s, false);
    return 1;
  }
  return 0;
}

bool stkr__seg_need_new(stkr__segw *s) {
  uint64_t lim;

  if (s->fd < 0) return true;
  if (s->cur_bytes >= s->segment_bytes ||
      (s->cur_bytes > 0 && stkr_fsize_limit(&lim) &&
       s->cur_bytes + 2 * s->max_frame > lim)) {
    close_current(s, true);
    return true;
  }
  /* One fstat per batch: detects a descriptor the app took over, and a
   * file (or the whole directory) removed behind our back; writing on into
   * an unlinked file would report success for data nobody can read. */
  return check_current(s) != 0;
}

void stkr__seg_close(stkr__segw *s) { close_current(s, true); }

void stkr__seg_close_final(stkr__segw *s) {
  if (s->fd >= 0 && s->cur_bytes > 0 && check_current(s) == 0) {
    mark_final_fd(s, s->fd);
    /* The last counters are written: the reserve goes back. */
    (void)ftruncate(s->fd, (off_t)s->cur_bytes);
  } else if (s->fd < 0) {
    /* Closed already (the last batch filled it): its reserve too. */
    release_last_reserve(s);
  }
  close_current(s, true);
}

int stkr__seg_open_next(stkr__segw *s) {
  char path[PATH_MAX];
  uint32_t seq = s->seq;
  bool made_dir = false;
  int err;

  if (s->fd < 0)
    follow_renamed_dir(s); /* else close_current does */
  close_current(s, true);
  for (int tries = 0; tries < 1000; tries++) {
    if (seq >= STKR_FMT_SEQ_MAX) return -ENOSPC;
    seq++;
    if ((err = seg_path(s, seq, path, sizeof path)) < 0) return err;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if ((fd = stkr_fd_raise(fd)) < 0) { /* no number >= 10 free */
        (void)unlink(path);
        return fd;
      }
      if ((err = stkr__fd_identity(fd, &s->fd_dev, &s->fd_ino)) < 0) {
        (void)close(fd);
        (void)unlink(path);
        return err;
      }
      s->fd = fd;
      stkr__fd_own(STKR__OWN_SEGMENT, fd, s->fd_dev, s->fd_ino);
      if (s->segments == 0) { /* once: does the mode say what we set? */
        struct stat st;
        s->marks_off = fstat(fd, &st) != 0 ||
                       STKR_FMT_SEGMENT_IS_FINAL(st.st_mode);
      }
      s->seq = seq;
      s->cur_bytes = 0;
      /* The new file's reserve first; then the one before gives its own
       * back (a segment rotation costs two more system calls). */
      if (reserve_tail(s, 0) == 0) release_last_reserve(s);
      s->segments++;
      if (made_dir) s->dir_recreated = true;
      return 0;
    }
    err = -errno;
    if (err == -EINTR) {
      seq--;
      continue;
    }
    if (err == -EEXIST) continue; /* someone else's file: skip the number */
    if (err == -ENOENT && !made_dir) {
      /* The directory went away: recording resumes once it can be made. */
      made_dir = true;
      if ((err = stkr_mkdir_p(s->dir, 0700)) < 0) return err;
      seq--;
      continue;
    }
    return err;
  }
  return -EEXIST;
}

/* One frame into the current file, s's counts kept. @return 0 or the
 * write's negative errno (the file as it was: nothing cut). */
static int write_frame(stkr__segw *s, const void *data, size_t len) {
  /* Within RLIMIT_FSIZE, or not at all (SIGXFSZ would kill the app:
   * common/stkr_io.h): -EFBIG is a failed write like any other. */
  int err = stkr_write_all_within(s->fd, data, len); /* write() 0: -EIO */
  if (err == 0) {
    /* Not a file's first frame: it carries the Header, the image list and
     * every definition again, and would make every file end early. */
    if (s->cur_bytes > 0 && len > s->max_frame) s->max_frame = len;
    s->cur_bytes += len;
    s->bytes += len;
    s->bytes_since_scan += len;
  }
  return err;
}

int stkr__seg_write(stkr__segw *s, const void *data, size_t len) {
  int err;

  if (s->fd < 0) return -EBADF;
  /* Right before the write: the batch took a while to build, and the app
   * may have taken the number meanwhile. */
  if (check_current(s) != 0) return -EBADF;
  /* Only with the reserve kept past it (reserve_tail): refused, nothing
   * is written, and the file, closed, keeps its reserve as it was (a cut
   * would give it away to whoever asks next; review). */
  if ((err = reserve_tail(s, len)) != 0) {
    close_current(s, true);
    return err;
  }
  if ((err = write_frame(s, data, len)) == 0) return 0;
  /* Whose descriptor failed? If the app closed or replaced it during the
   * write, cutting it back would truncate the app's file: forget it. */
  {
    struct stat st;
    if (stkr__fd_check(s->fd, s->fd_dev, s->fd_ino, &st) < 0) {
      lost_current(s);
      return err;
    }
  }
  /* A torn frame would make `zstd -t` fail on this file and cost a reader
   * the checksum check of a frame; cut it off if we can. Either way the
   * file is closed and the next batch starts a new segment. (Nothing
   * written: the file already has that size.) */
  if (ftruncate(s->fd, (off_t)s->cur_bytes) != 0) {
    /* Best effort: the reader stops at the torn frame. */
  }
  /* The cut freed the reserve with the torn bytes: taken again at once,
   * while that space is still free. */
  (void)reserve_tail(s, 0);
  close_current(s, true);
  return err;
}

int stkr__seg_append_last(stkr__segw *s, const void *data, size_t len) {
  char path[PATH_MAX];
  struct stat st;
  int fd, err;

  /* Into the reserve the file kept: not reserve_tail, which would ask for
   * more (review). */
  if (s->fd >= 0 && s->cur_bytes > 0 && check_current(s) == 0) {
    if ((err = write_frame(s, data, len)) == 0) {
      mark_final_fd(s, s->fd);
      return 0;
    }
    (void)ftruncate(s->fd, (off_t)s->cur_bytes); /* no torn frame */
    return err;
  }
  /* A file opened for a batch that never reached it holds no Header: a
   * batch of counters cannot be its first frame. It goes (no frame). */
  if (s->fd >= 0) close_current(s, true);
  if (s->last_seq == 0) return -ENOENT;
  if ((err = seg_path(s, s->last_seq, path, sizeof path)) < 0) return err;
  /* O_NONBLOCK: a FIFO put under its name must not hang us here. */
  fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -errno;
  if ((fd = stkr_fd_raise(fd)) < 0) return fd; /* never a low number */
  /* The file we closed, not one put under its name since. */
  if (fstat(fd, &st) != 0) {
    err = -errno;
  } else if ((uint64_t)st.st_dev != s->last_dev ||
             (uint64_t)st.st_ino != s->last_ino) {
    err = -ESTALE;
  } else if ((err = stkr_write_all_within(fd, data, len)) == 0) {
    s->bytes += len;
    mark_final_fd(s, fd); /* the session's final segment after all */
    (void)ftruncate(fd, st.st_size + (off_t)len); /* the rest of the reserve */
  } else {
    (void)ftruncate(fd, st.st_size); /* no torn frame left behind */
  }
  (void)close(fd);
  return err;
}

void stkr__seg_free(stkr__segw *s) {
  close_current(s, true);
  char *owned = s->dir_owned;
  if (owned != NULL) /* no name left to a fork meanwhile once freed */
    __atomic_store_n(&s->dir, NULL, __ATOMIC_RELEASE);
  s->dir_owned = NULL;
  free(owned);
}

void stkr__seg_discard(stkr__segw *s) {
  s->cur_bytes = 0; /* what it holds counts for nothing: close removes it */
  close_current(s, true);
}

/* In a forked child of a follow-mode writer: where the parent's segment
 * was at the fork ("": not known). Set by the atfork handler, the only
 * thread then; read at the child's first event (stkr__seg_dir_in_parent).
 * Static, as the handler may not allocate. */
static char g_forked_dir[PATH_MAX - STKR_FMT_SEGMENT_NAME_MAX - 2];

void stkr__seg_forget_inherited(stkr__segw *s, bool follow) {
  struct stat st;
  stkr__fd_own(STKR__OWN_SEGMENT, -1, 0, 0);
  g_forked_dir[0] = '\0';
  if (s->fd >= 0 && stkr__fd_check(s->fd, s->fd_dev, s->fd_ino, &st) == 0) {
    /* Asked only of our own file (its identity just checked), through our
     * own copy of the descriptor: never through the app's. */
    if (follow && !stkr_fd_dir(s->fd, g_forked_dir, sizeof g_forked_dir))
      g_forked_dir[0] = '\0';
    (void)close(s->fd);
  }
  s->fd = -1;
}

char *stkr__seg_dir_in_parent(const stkr__segw *s) {
  struct stat a, b;

  if (s->dir == NULL)
    return NULL;
  if (g_forked_dir[0] != '\0' && strcmp(g_forked_dir, s->dir) != 0 &&
      !(stat(s->dir, &a) == 0 && stat(g_forked_dir, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino))
    return strdup(g_forked_dir);
  return s->dir_owned != NULL ? strdup(s->dir) : NULL;
}
