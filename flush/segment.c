/*
 * segment.c: segment files of one process.
 *
 * A segment is DIR/stackrec-<pid>-<seq>.zst, a plain sequence of zstd frames,
 * one per batch, each written with one write(2). Rules:
 *  - files are created O_EXCL (never clobber: a recycled pid in a reused
 *    directory continues after the highest seq it finds), mode 0600,
 *    O_CLOEXEC so an exec'd child does not hold them;
 *  - a file is closed as soon as it reaches segment_bytes, so a closed
 *    segment is complete on disk while the app still runs;
 *  - after a failed write the file is cut back to its last whole frame (best
 *    effort) and closed: later batches go to a new, clean file; a file with
 *    no whole frame is removed;
 *  - a file unlinked behind our back (directory removed) is abandoned, and
 *    the directory is recreated when the next file is opened;
 *  - the disk cap counts only this process's files that this writer created
 *    and deletes the oldest closed ones; the open file is never deleted.
 * Nothing here blocks other than on the file system, and nothing aborts:
 * errors are returned to the worker, which drops the batch and counts it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flush/flush_internal.h"
#include "proto/stkr_format.h"

static int seg_path(const stkr__segw *s, uint32_t seq, char *buf, size_t len) {
  char name[64];
  int err = stkr_fmt_segment_name(name, sizeof name, s->pid, seq);
  if (err < 0) return err;
  int n = snprintf(buf, len, "%s/%s", s->dir, name);
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int stkr__seg_init(stkr__segw *s, const char *dir, uint32_t pid,
                   uint64_t segment_bytes, uint64_t disk_cap_bytes) {
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
   * error here: O_EXCL still protects those files. */
  d = opendir(dir);
  if (!d) return 0;
  while ((de = readdir(d)) != NULL) {
    uint32_t p, q;
    if (stkr_fmt_segment_parse(de->d_name, &p, &q) == 0 && p == pid &&
        q > s->seq)
      s->seq = q;
  }
  closedir(d);
  return 0;
}

static int remember_closed(stkr__segw *s, uint32_t seq, uint64_t bytes) {
  if (s->n_closed == s->cap_closed) {
    size_t nc = s->cap_closed ? s->cap_closed * 2 : 16;
    stkr__segfile *n = realloc(s->closed, nc * sizeof *n);
    if (!n) return -ENOMEM;
    s->closed = n;
    s->cap_closed = nc;
  }
  s->closed[s->n_closed++] = (stkr__segfile){.seq = seq, .bytes = bytes};
  s->closed_bytes += bytes;
  return 0;
}

static void unlink_seq(stkr__segw *s, uint32_t seq) {
  char path[PATH_MAX];
  if (seg_path(s, seq, path, sizeof path) == 0) (void)unlink(path);
}

/* Close the current fd. `keep`: the file stays as a closed segment (counted
 * for the disk cap); otherwise it is gone or worthless. */
static void close_current(stkr__segw *s, bool keep) {
  if (s->fd < 0 || !s->dir) return;
  (void)close(s->fd); /* no retry on EINTR: Linux closes the fd anyway */
  s->fd = -1;
  if (keep && s->cur_bytes == 0) {
    unlink_seq(s, s->seq); /* no whole frame: nothing for a reader */
    keep = false;
  }
  if (keep && remember_closed(s, s->seq, s->cur_bytes) != 0) {
    /* Out of memory: the file stays, uncounted by the cap. */
    stkr__log(STKR__LOG_OTHER, "out of memory tracking segment %u", s->seq);
  }
  s->cur_bytes = 0;
}

bool stkr__seg_need_new(stkr__segw *s) {
  struct stat st;
  if (s->fd < 0) return true;
  if (s->cur_bytes >= s->segment_bytes) {
    close_current(s, true);
    return true;
  }
  /* One fstat per batch: detects a file (or the whole directory) removed
   * behind our back; writing on into an unlinked file would report success
   * for data nobody can read. */
  if (fstat(s->fd, &st) == 0 && st.st_nlink == 0) {
    close_current(s, false);
    return true;
  }
  return false;
}

void stkr__seg_close(stkr__segw *s) { close_current(s, true); }

int stkr__seg_open_next(stkr__segw *s) {
  char path[PATH_MAX];
  uint32_t seq = s->seq;
  bool made_dir = false;
  int err;

  close_current(s, true);
  for (int tries = 0; tries < 1000; tries++) {
    if (seq == 999999) return -ENOSPC; /* the name has 6 digits */
    seq++;
    if ((err = seg_path(s, seq, path, sizeof path)) < 0) return err;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      s->fd = fd;
      s->seq = seq;
      s->cur_bytes = 0;
      s->segments++;
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
      if ((err = stkr__mkdir_p(s->dir, 0700)) < 0) return err;
      seq--;
      continue;
    }
    return err;
  }
  return -EEXIST;
}

int stkr__seg_write(stkr__segw *s, const void *data, size_t len) {
  const uint8_t *p = data;
  size_t done = 0;
  int err = 0;

  if (s->fd < 0) return -EBADF;
  while (done < len) {
    ssize_t n = write(s->fd, p + done, len - done);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    err = n < 0 ? -errno : -EIO; /* write() returning 0: treat as I/O error */
    break;
  }
  if (err == 0) {
    s->cur_bytes += len;
    s->bytes += len;
    return 0;
  }
  /* A torn frame would make `zstd -t` fail on this file and cost a reader
   * the checksum check of a frame; cut it off if we can. Either way the
   * file is closed and the next batch starts a new segment. */
  if (done > 0 && ftruncate(s->fd, (off_t)s->cur_bytes) != 0) {
    /* Best effort: the reader stops at the torn frame. */
  }
  close_current(s, true);
  return err;
}

void stkr__seg_enforce_cap(stkr__segw *s) {
  size_t drop = 0;
  while (drop < s->n_closed &&
         s->closed_bytes + s->cur_bytes > s->disk_cap_bytes) {
    char path[PATH_MAX];
    stkr__segfile *f = &s->closed[drop++];
    s->closed_bytes -= f->bytes;
    if (seg_path(s, f->seq, path, sizeof path) != 0) continue;
    if (unlink(path) == 0) {
      s->segments_deleted++;
    } else if (errno != ENOENT) {
      /* Forget it anyway: retrying every batch would not help and the cap
       * then counts only what we can manage. */
      stkr__log(STKR__LOG_UNLINK, "cannot delete %s: %s", path,
                strerror(errno));
    }
  }
  if (drop) {
    memmove(s->closed, s->closed + drop, (s->n_closed - drop) * sizeof *s->closed);
    s->n_closed -= drop;
  }
}

void stkr__seg_free(stkr__segw *s) {
  close_current(s, true);
  free(s->closed);
  s->closed = NULL;
  s->n_closed = s->cap_closed = 0;
}
