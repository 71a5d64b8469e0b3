/*
 * fd.c: the recorder's own descriptors inside someone else's process.
 *
 * The app owns the descriptor table. It may use small numbers it believes
 * free (`exec 3>f` in a shell, `flock 9`), close everything it did not open
 * (python's os.closerange(3, 1024), daemons), or dup2 its own files over
 * ours. So every descriptor the recorder keeps:
 *  - is moved to a high number (stkr__fd_high), where programs rarely look,
 *    and is close-on-exec, so an exec'd image never inherits it;
 *  - is remembered by identity (device and inode, stkr__fd_identity) and
 *    checked before it is written (stkr__fd_check): a number that now names
 *    something else is the app's; we forget it and never close, truncate or
 *    write it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flush/flush_internal.h"

/* The kernel grows a process's descriptor table up to the highest number in
 * use (Linux: 8 bytes per slot plus bitmaps), so "as high as the limit
 * allows" would cost megabytes where the soft limit is 1M (containers).
 * STKR__FD_FLOOR_MAX bounds that to a few KiB, and 4096 is still far above
 * where programs open their own files. */
#define STKR__FD_FLOOR_MAX 4096
#define STKR__FD_FLOOR_MIN 10 /* above what shells hand out for `exec N>` */

int stkr__fd_floor(void) {
  struct rlimit rl;
  rlim_t soft = 256; /* macOS's default, if the limit cannot be read */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) soft = rl.rlim_cur;
  if (soft == RLIM_INFINITY || soft > STKR__FD_FLOOR_MAX + 64)
    soft = STKR__FD_FLOOR_MAX + 64;
  /* 64 below the limit leaves the app the top of its table too; a tiny
   * limit gets half of it. */
  long floor = soft >= 128 ? (long)soft - 64 : (long)soft / 2;
  return floor < STKR__FD_FLOOR_MIN ? STKR__FD_FLOOR_MIN : (int)floor;
}

int stkr__fd_high(int fd) {
  int floor, high;
  if (fd < 0) return fd;
  floor = stkr__fd_floor();
  if (fd >= floor) {
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0 && fd < STKR__FD_FLOOR_MIN)
    high = fcntl(fd, F_DUPFD_CLOEXEC, STKR__FD_FLOOR_MIN);
  if (high < 0) {
    /* Table full above the floor: keep the original (opened O_CLOEXEC). */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  (void)close(fd);
  return high;
}

DIR *stkr__opendir_high(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d;
  if (fd < 0) return NULL;
  fd = stkr__fd_high(fd);
  if (!(d = fdopendir(fd))) (void)close(fd);
  return d;
}

int stkr__fd_identity(int fd, uint64_t *dev, uint64_t *ino) {
  struct stat st;
  if (fd < 0) return -EBADF;
  if (fstat(fd, &st) != 0) return -errno;
  *dev = (uint64_t)st.st_dev;
  *ino = (uint64_t)st.st_ino;
  return 0;
}

int stkr__fd_check(int fd, uint64_t dev, uint64_t ino, struct stat *st) {
  if (fd < 0) return -EBADF;
  if (fstat(fd, st) != 0) return -EBADF; /* closed behind our back */
  if ((uint64_t)st->st_dev != dev || (uint64_t)st->st_ino != ino)
    return -EBADF; /* the number now names someone else's file */
  return 0;
}
