/*
 * stkr_io.h: the one write-everything loop (libc only, header-only), for
 * the segment writer, recovery, the worker's log line and the tools.
 *
 * stkr_write_all(fd, p, n): write n bytes from p, going on after short
 * writes and EINTR.
 * @return 0, -errno of the failed write, or -EIO when write() returns 0.
 * On error an unknown prefix of the bytes may have been written.
 * Thread-safety: as write(2); async-signal-safe.
 */
#ifndef STKR_COMMON_IO_H
#define STKR_COMMON_IO_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

static inline int stkr_write_all(int fd, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;

  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

#endif /* STKR_COMMON_IO_H */
