/*
 * fd.c: the recorder's own descriptors inside someone else's process.
 *
 * The app owns the descriptor table. It may use small numbers it believes
 * free (`exec 3>f` in a shell, `flock 9`), close everything it did not open
 * (python's os.closerange(3, 1024), daemons), or dup2 its own files over
 * ours. So every descriptor the recorder keeps:
 *  - is moved to a high number (stkr_fd_raise, common/stkr_io.h), where
 *    programs rarely look,
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

#include "common/stkr_io.h"
#include "flush/flush_internal.h"

DIR *stkr__opendir_high(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d;
  if (fd < 0) return NULL;
  if ((fd = stkr_fd_raise(fd)) < 0) return NULL;
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
