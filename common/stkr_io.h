/*
 * stkr_io.h: the one write-everything loop, read-everything loop and
 * open of a file that must be regular (libc only, header-only), for the
 * segment writer, recovery, the worker's log line, the symbolizer and the
 * tools.
 *
 * stkr_write_all(fd, p, n): write n bytes from p, going on after short
 * writes and EINTR.
 * @return 0, -errno of the failed write, or -EIO when write() returns 0.
 * On error an unknown prefix of the bytes may have been written.
 * Thread-safety: as write(2); async-signal-safe.
 *
 * stkr_fsize_room(end): may this process make a file reach `end` bytes?
 * A program may lower RLIMIT_FSIZE (QA: setrlimit to 2 KiB, then exit):
 * growing a file past the soft limit raises SIGXFSZ, whose default action
 * kills the process, in whichever thread wrote: the app's own at its exit,
 * where the last pass runs. So the recorder asks first and takes the limit
 * as a failure of its own (-EFBIG: the batch dropped and counted, the ring
 * kept in memory). @return true when there is no limit or end is within.
 * stkr_write_all_within(fd, p, n): stkr_write_all, or -EFBIG without
 * writing when the file would pass the limit (its end: the offset, or the
 * size for an O_APPEND descriptor). Thread-safety: as write(2).
 *
 * stkr_pread_all(fd, p, n, off, &got): read n bytes at offset off into p,
 * going on after short reads and EINTR, up to the end of the file.
 * @return 0 with *got = bytes read (< n only at the end of the file), or
 * -errno of the failed read with *got = bytes read before it.
 *
 * stkr_open_regular(path, flags): open path to read, only if it is a
 * regular file (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags;
 * flags may add O_NOFOLLOW, or O_RDWR where the file is also locked).
 * Paths come from recordings, debug directories and symbol cache
 * directories: a FIFO among them would block a plain open until a writer
 * came (forever), and opening a device can have effects of its own. So a
 * stat (lstat with O_NOFOLLOW) refuses those before the open, and an
 * fstat of the descriptor refuses a file swapped in between; O_NONBLOCK
 * makes that open of a FIFO return at once, and is cleared again on the
 * regular file returned. The stat narrows the window for a device swapped
 * in between, it does not close it.
 * @return the descriptor (the caller closes it), or -errno: the open's
 * or the stat's, or -EINVAL for a file that is not regular.
 * Thread-safety: as open(2).
 *
 * stkr_fd_floor(): where the recorder's own descriptors go (segments in
 * flush/, ring, session and cache files in recorder/): 64 below the soft
 * RLIMIT_NOFILE (the app keeps the top of its table too), at most 4096 (the
 * kernel grows a process's descriptor table up to the highest number in
 * use: "as high as the limit allows" would cost megabytes where the limit
 * is 1M), half of a limit below 128, never below STKR_FD_MIN: shells hand
 * out 3-9 for `exec N>`, and programs expect open() to give them the
 * lowest free number. One policy for both packages: recorder/'s own copy
 * went down to 3 under a limit of 64 or less.
 * stkr_fd_raise(fd): fd moved to the floor or above (else to STKR_FD_MIN
 * or above), close-on-exec, the original closed. @return the new
 * descriptor, fd itself if it is already there, or -EMFILE (fd closed)
 * when nothing at STKR_FD_MIN or above is free: then the recorder goes
 * without that file rather than take a number the program expects.
 *
 * stkr_open_regular_high(path, flags): stkr_open_regular, then
 * stkr_fd_raise: for the files the symbolizer opens, which in an app's
 * flush worker (inproc) stay open as long as the recording (libdw keeps
 * the ELF and debug files it is given). At 3, the lowest free number, the
 * executable's descriptor was the one an app that closes 3-9 and opens a
 * file of its own got back, and the recorder's shutdown closed the app's
 * file (QA, session 17).
 * Thread-safety: as fcntl(2).
 *
 * stkr_fsync_dir(dir): make the names created, renamed or removed in dir
 * durable (recovery's segments, symbolize's renames). A file system that
 * cannot sync a directory (EINVAL) is not an error.
 * @return 0 or -errno of the open or the fsync. Thread-safety: as open(2).
 *
 * stkr_fd_dir(fd, out, cap): the directory the file open at fd is in now,
 * absolute, into out: where a directory renamed since the file was opened
 * went (recorder/ringfile.c: the session's files at its end). Linux
 * (/proc/self/fd); elsewhere, and for a file deleted since (no links) or
 * a name longer than cap, false. Thread-safety: as readlink(2);
 * async-signal-safe.
 */
#ifndef STKR_COMMON_IO_H
#define STKR_COMMON_IO_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define STKR_FD_MIN 10
#define STKR_FD_FLOOR_MAX 4096

static inline int stkr_fd_floor(void) {
  struct rlimit rl;
  rlim_t soft = 256; /* macOS's default, if the limit cannot be read */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) soft = rl.rlim_cur;
  if (soft == RLIM_INFINITY || soft > STKR_FD_FLOOR_MAX + 64)
    soft = STKR_FD_FLOOR_MAX + 64;
  long floor = soft >= 128 ? (long)soft - 64 : (long)soft / 2;
  return floor < STKR_FD_MIN ? STKR_FD_MIN : (int)floor;
}

static inline int stkr_fd_raise(int fd) {
  int floor = stkr_fd_floor(), high;
  if (fd >= floor) {
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0 && fd >= STKR_FD_MIN) { /* full above the floor: keep it */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  if (high < 0) high = fcntl(fd, F_DUPFD_CLOEXEC, STKR_FD_MIN);
  (void)close(fd);
  return high < 0 ? -EMFILE : high;
}

static inline int stkr_open_regular(const char *path, int flags);

static inline int stkr_open_regular_high(const char *path, int flags) {
  int fd = stkr_open_regular(path, flags);
  return fd < 0 ? fd : stkr_fd_raise(fd);
}

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

/* The soft RLIMIT_FSIZE into *lim; false when there is none. */
static inline bool stkr_fsize_limit(uint64_t *lim) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return false;
  *lim = (uint64_t)rl.rlim_cur;
  return true;
}

static inline bool stkr_fsize_room(uint64_t end) {
  uint64_t lim;
  return !stkr_fsize_limit(&lim) || end <= lim;
}

static inline int stkr_write_all_within(int fd, const void *p, size_t n) {
  uint64_t lim;
  if (stkr_fsize_limit(&lim)) { /* only then the end is worth a syscall */
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    off_t at = fl != -1 && (fl & O_APPEND) != 0
                   ? (fstat(fd, &st) == 0 ? st.st_size : -1)
                   : lseek(fd, 0, SEEK_CUR);
    if (at < 0 || (uint64_t)at + n > lim) return -EFBIG;
  }
  return stkr_write_all(fd, p, n);
}

/* flock(fd, op | LOCK_NB), tried 1 ms apart for `ms` milliseconds (of
 * CLOCK_MONOTONIC, whatever the timer slack): a bounded wait for a holder
 * that holds it for microseconds, never for one stopped with it.
 * @return whether it was taken. */
static inline bool stkr_flock_within(int fd, int op, int ms) {
  struct timespec now, end, one = {0, 1000000};

  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += ms / 1000;
  end.tv_nsec += (long)(ms % 1000) * 1000000;
  if (end.tv_nsec >= 1000000000) end.tv_sec++, end.tv_nsec -= 1000000000;
  for (;;) {
    if (flock(fd, op | LOCK_NB) == 0) return true;
    if (errno != EAGAIN && errno != EINTR) return false; /* = EWOULDBLOCK */
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > end.tv_sec ||
        (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
      return false;
    nanosleep(&one, NULL);
  }
}

/* Append buf[0, n) to the regular file path (created 0600) in one
 * write: O_APPEND lands it whole at the end, never interleaved with another
 * writer's lines; under a shared flock, so that one who gives back room
 * past the file's end (`stackrec record`'s marks reserve: an exclusive
 * flock around its size check and truncation) never cuts it (waited for
 * 20 ms at most, then written anyway: a line written so past a releaser
 * stopped between the two can still be cut; and a fork by another thread
 * while the line is written leaves the child the shared lock until it
 * ends or execs, so the release keeps the reserve meanwhile). A FIFO
 * there fails at once or is refused (O_NONBLOCK, then not a regular file:
 * -ENXIO, what the open says for a FIFO without a reader), never waited
 * on; a line past RLIMIT_FSIZE is refused (-EFBIG), never raising SIGXFSZ.
 * @return 0 or -errno. */
static inline int stkr_append_line(const char *path, const void *buf,
                                   size_t n) {
  int fd = open(path,
                O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                    O_NONBLOCK | O_NOCTTY,
                0600);
  struct stat st;
  ssize_t w;
  int err = 0;

  if (fd < 0) return -errno;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -ENXIO;
  }
  (void)stkr_flock_within(fd, LOCK_SH, 20); /* released by the close */
  if (fstat(fd, &st) != 0 || !stkr_fsize_room((uint64_t)st.st_size + n)) {
    close(fd);
    return -EFBIG;
  }
  do w = write(fd, buf, n); while (w < 0 && errno == EINTR);
  if (w < 0)
    err = -errno;
  else if ((size_t)w != n)
    err = -EIO;
  if (close(fd) != 0 && err == 0) err = -errno;
  return err;
}

static inline int stkr_pread_all(int fd, void *p, size_t n, uint64_t off,
                                 size_t *got) {
  unsigned char *c = (unsigned char *)p;
  size_t done = 0;

  while (done < n) {
    ssize_t r = pread(fd, c + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *got = done;
      return -errno;
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  *got = done;
  return 0;
}

static inline int stkr_open_regular(const char *path, int flags) {
  struct stat st;
  int fd, err;

  if (((flags & O_NOFOLLOW) ? lstat(path, &st) : stat(path, &st)) != 0)
    return -errno;
  if (!S_ISREG(st.st_mode)) return -EINVAL;
  fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
  if (fd < 0) return -errno;
  if (fstat(fd, &st) != 0)
    err = -errno;
  else if (!S_ISREG(st.st_mode))
    err = -EINVAL;
  else if ((err = fcntl(fd, F_GETFL)) == -1 ||
           fcntl(fd, F_SETFL, err & ~O_NONBLOCK) == -1)
    err = -errno;
  else
    return fd;
  close(fd);
  return err;
}

static inline int stkr_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
  if (fd < 0) return -errno;
  if (fsync(fd) != 0 && errno != EINVAL) err = -errno;
  close(fd);
  return err;
}

static inline bool stkr_fd_dir(int fd, char *out, size_t cap) {
#if defined(__linux__)
  char link[32] = "/proc/self/fd/", digits[12];
  struct stat st;
  size_t len = 14, k = 0;
  ssize_t n;

  /* By hand, not snprintf: async-signal-safe (a forked child's atfork
   * handler calls it: flush/segment.c). */
  if (cap < 2 || fd < 0 || fstat(fd, &st) != 0 || st.st_nlink == 0)
    return false;
  do digits[k++] = (char)('0' + fd % 10); while ((fd /= 10) > 0);
  while (k > 0) link[len++] = digits[--k];
  link[len] = '\0';
  n = readlink(link, out, cap - 1);
  if (n <= 0 || (size_t)n >= cap - 1 || out[0] != '/') return false;
  for (len = (size_t)n; len > 0 && out[len - 1] != '/'; len--) {
  }
  if (len <= 1) return false; /* a file in / itself: not ours */
  out[len - 1] = '\0';
  return true;
#else
  (void)fd, (void)out, (void)cap;
  return false;
#endif
}

#endif /* STKR_COMMON_IO_H */
