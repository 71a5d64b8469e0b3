/*
 * cachedir.c: how the recorder opens its files (stkr__open_high: a high,
 * close-on-exec descriptor whose identity is checked) and the recording's
 * shared cache directory (STKR_CACHE_DIR), which processes of one
 * recording share to start faster. Split from ringfile.c, its main user.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_io.h"
#include "common/stkr_ringfile.h"
#include "recorder/stkr_internal.h"

/* open(path) and move the descriptor to the recorder's range (at or above
 * stkr_fd_floor(), else STKR_FD_MIN: common/stkr_io.h), close-on-exec.
 * open() hands out the lowest free number, which another thread of the
 * program may dup2() onto at any moment (bash's `exec 5>f` does exactly
 * that): the low number is given back only if it still names our file,
 * and the high copy is used only if it names the file at `path`. Returns
 * the descriptor or -errno (-EMFILE: no number at STKR_FD_MIN or above
 * is free; a file it made with O_CREAT | O_EXCL is removed again). */
int stkr__open_high(const char *path, int flags) {
  struct stat a, b;
  int lo = open(path, flags | O_CLOEXEC, 0600), hi;

  if (lo < 0)
    return -errno;
  /* Where flush/ puts its own (common/stkr_io.h: stkr_fd_floor). */
  hi = fcntl(lo, F_DUPFD_CLOEXEC, stkr_fd_floor());
  if (hi < 0 && lo >= STKR_FD_MIN)
    return lo; /* nothing higher is free: keep the one we have */
  if (hi < 0 && (hi = fcntl(lo, F_DUPFD_CLOEXEC, STKR_FD_MIN)) < 0) {
    /* Never a number the program expects open() to hand it: without
     * this file rather (a limit of 64 put the session file at 3). Closed
     * only if still ours: another thread may have dup2'd over it. */
    if (fstat(lo, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
      close(lo);
      if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) unlink(path);
    }
    return -EMFILE;
  }
  if (fstat(hi, &a) != 0 || stat(path, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    close(hi); /* lo was taken over before we copied it: it is not ours */
    return -EBADF;
  }
  if (fstat(lo, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    close(lo);
  return hi;
}

/* ---- the recording's shared cache (STKR_CACHE_DIR) --------------------------
 * Files that processes of one recording share to start faster: any may be
 * missing, stale or damaged, so each user validates what it reads. Written
 * under a temporary name and renamed, so a reader sees a whole file or
 * none; read into memory (never mapped: a file truncated under a mapping
 * would raise SIGBUS in the app). */
static int cache_path(char *buf, size_t cap, const char *pre, const char *name,
                      const char *post) {
  const char *dir = stkr__session_dir();
  int n;
  if (dir == NULL) return -ENOENT;
  n = snprintf(buf, cap, "%s/" STKR_CACHE_DIR "/%s%s%s", dir, pre, name, post);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int stkr__cache_open(const char *name) {
  char path[PATH_MAX];
  int rc = cache_path(path, sizeof path, "", name, "");
  return rc != 0 ? rc : stkr__open_high(path, O_RDONLY);
}

int stkr__cache_read(const char *name, size_t max_bytes, void **out,
                     size_t *len) {
  char path[PATH_MAX];
  struct stat sb;
  void *buf;
  size_t got = 0;
  int fd, rc;

  *out = NULL;
  *len = 0;
  if ((rc = cache_path(path, sizeof path, "", name, "")) != 0) return rc;
  if ((fd = stkr__open_high(path, O_RDONLY)) < 0) return fd;
  if (fstat(fd, &sb) != 0) rc = -errno;
  else if (!S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
           (uint64_t)sb.st_size > max_bytes) rc = -EINVAL;
  else if ((buf = malloc((size_t)sb.st_size)) == NULL) rc = -ENOMEM;
  else if ((rc = stkr_pread_all(fd, buf, (size_t)sb.st_size, 0, &got)) != 0)
    free(buf);
  else {
    *out = buf;
    *len = got;
  }
  close(fd);
  return rc;
}

int stkr__cache_write(const char *name, const void *buf, size_t len) {
  char tmp[PATH_MAX], path[PATH_MAX], post[32];
  int fd, rc;

  snprintf(post, sizeof post, ".%d.tmp", (int)getpid());
  if ((rc = cache_path(path, sizeof path, "", name, "")) != 0 ||
      (rc = cache_path(tmp, sizeof tmp, ".", name, post)) != 0)
    return rc;
  fd = stkr__open_high(tmp, O_WRONLY | O_CREAT | O_EXCL);
  if (fd == -ENOENT) { /* the first writer of the recording makes it */
    char d[PATH_MAX];
    if (cache_path(d, sizeof d, "", "", "") == 0) (void)mkdir(d, 0700);
    fd = stkr__open_high(tmp, O_WRONLY | O_CREAT | O_EXCL);
  }
  if (fd < 0) return fd;
  rc = stkr_write_all_within(fd, buf, len); /* no SIGXFSZ: stkr_io.h */
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  if (rc != 0) (void)unlink(tmp);
  return rc;
}
