/*
 * stkr_pid.h: is a recording's writer process still running? (libc only,
 * header-only), for the readers' "still recording" wording, recovery's
 * "its pid is gone" checks and symbolize's "its files may still grow".
 *
 * stkr_pid_alive(pid): kill(pid, 0) finds it (or finds it and is not
 * allowed to signal it), and on Linux it is not a zombie. A zombie has
 * closed every descriptor, released its session file's lock and will
 * write nothing more, yet kill(2) finds it until its parent reaps it: a
 * recording read in that window called its writer "still recording" and,
 * a line later, a dead writer (QA). A pid reused by another process reads
 * as alive: callers use this for wording and for leaving files alone,
 * never for data.
 * @return true while the process may still write.
 * Thread-safety: as kill(2) and open(2).
 *
 * stkr_pid_state(pid): /proc/<pid>/stat's state letter, 0 when not known.
 *
 * stkr_pid_start_time(pid, out): field 22 of /proc/<pid>/stat, the
 * process's start in clock ticks since boot: what tells a process from a
 * later one of the same pid, and one started before a moment from one
 * after. @return 0, -ESRCH (no such process), -EIO (unreadable), or
 * -ENOSYS (not Linux). Thread-safety: as open(2).
 */
#ifndef STKR_COMMON_PID_H
#define STKR_COMMON_PID_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* The state letter of /proc/<pid>/stat ('R', 'S', 'D', 'T' stopped, 't'
 * traced, 'Z'...), or 0 when not known (not Linux, no such file). */
static inline char stkr_pid_state(uint32_t pid) {
#if defined(__linux__)
  char path[32], buf[512];
  ssize_t n;
  int fd;

  if (pid == 0 || pid > (uint32_t)INT_MAX) return 0;
  snprintf(path, sizeof path, "/proc/%u/stat", (unsigned)pid);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return 0;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  /* "pid (comm) S ...": comm may hold ") ", so the state follows the
   * last ')'. */
  for (ssize_t i = n - 1; i > 0; i--)
    if (buf[i] == ')') return i + 2 < n ? buf[i + 2] : 0;
#else
  (void)pid;
#endif
  return 0;
}

static inline bool stkr_pid_alive(uint32_t pid) {
  char state;

  if (pid == 0 || pid > (uint32_t)INT_MAX) return false;
  if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
  state = stkr_pid_state(pid);
  return state != 'Z' && state != 'X';
}

static inline int stkr_pid_start_time(uint32_t pid, uint64_t *out) {
#if defined(__linux__)
  char path[32], buf[1024], *end;
  const char *p;
  ssize_t n;
  int fd;

  snprintf(path, sizeof path, "/proc/%u/stat", (unsigned)pid);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return errno == ENOENT ? -ESRCH : -EIO;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -EIO;
  buf[n] = '\0';
  /* After the name, which may hold spaces and parentheses: its last ')'.
   * p is then at the space before field 3 (state); each step moves it to
   * the space before the next field, up to the one before field 22. */
  if ((p = strrchr(buf, ')')) == NULL) return -EIO;
  p++;
  for (int field = 3; field < 22; field++)
    if ((p = strchr(p + 1, ' ')) == NULL) return -EIO;
  if (p[1] < '0' || p[1] > '9') return -EIO;
  errno = 0;
  *out = strtoull(p + 1, &end, 10);
  return errno == 0 && (*end == ' ' || *end == '\0') ? 0 : -EIO;
#else
  (void)pid;
  (void)out;
  return -ENOSYS;
#endif
}

#endif /* STKR_COMMON_PID_H */
