/*
 * alone.c: has every thread of the app ended, leaving only ours (Linux)?
 *
 * glibc ends a process when its last thread returns or calls pthread_exit
 * (that thread then calls exit(0)). The flush worker is a thread too, so a
 * main thread that ends with pthread_exit once its threads are done, or a
 * program whose single thread ends with a raw SYS_exit (all that seccomp's
 * strict mode allows), left the process running for good with nothing in
 * it but the recorder (QA, session 24: killed after 10 s, where the plain
 * run exits in 55 ms). The worker asks at its idle wakes (worker.c, every
 * STKR__ALONE_CHECK_NS at most): the main thread a zombie (its state in
 * /proc/self/stat, one read), then no task alive in /proc/self/task but
 * the calling thread and the recorder's watchdog ("stkr-watchdog"). It
 * then ends the session, and the process as it would have ended
 * unrecorded: a main thread that ended last with a status of its own (a
 * raw SYS_exit(3): the kernel would have ended the process with it,
 * running nothing more) by exit_group with that status; otherwise
 * (pthread_exit) by returning from its thread, which glibc treats as any
 * thread's end: the last one calls exit(0), atexit handlers and all, as
 * the app's last thread would have. Not known, so not kept: the status of
 * another thread that ended last by a raw SYS_exit (0 instead).
 *
 * Elsewhere (Apple platforms: a process ends when its main thread returns
 * from main, whatever other threads do) nothing is asked.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flush/flush_internal.h"

#if defined(__linux__)
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/stkr_io.h"

/* The n bytes of a /proc stat file read into buf (cap bytes): NUL-
 * terminated. @return the text after the comm's closing parenthesis
 * (" S ppid ..."), or NULL. comm (16 bytes) gets the name, if asked. */
static const char *parse_stat(char *buf, ssize_t n, char *comm) {
  char *open_p, *close_p;

  if (n <= 0) return NULL;
  buf[n] = '\0';
  if ((open_p = strchr(buf, '(')) == NULL ||
      (close_p = strrchr(buf, ')')) == NULL || close_p < open_p)
    return NULL;
  if (comm != NULL) {
    size_t len = (size_t)(close_p - open_p - 1);
    if (len > 15) len = 15;
    memcpy(comm, open_p + 1, len);
    comm[len] = '\0';
  }
  return close_p + 1;
}

/* A thread's stat file, opened for the one read (see parse_stat). */
static const char *read_stat(const char *path, char *buf, size_t cap,
                             char *comm) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0) return NULL;
  n = read(fd, buf, cap - 1);
  (void)close(fd);
  return parse_stat(buf, n, comm);
}

/* /proc/self/stat, kept open from the first look on (raised, close-on-exec),
 * so that the look every 0.2 s opens nothing while the main thread lives
 * (once it is a zombie, the task list is read too): a descriptor opened, even
 * for a moment, at the lowest free number can take the one an app
 * thread's open() is about to get (its `close(0); open(...)` expecting 0).
 * Checked by identity before each read (the app may have closed it or put
 * a file of its own at the number: forgotten, never closed). A forked
 * child's copy names the parent's file: the atfork handler closes it
 * (stkr__alone_close), and the child opens its own at its first look.
 * Worker thread only, but for that handler. */
static int g_stat_fd = -1;
static uint64_t g_stat_dev, g_stat_ino;

static int self_stat_fd(void) {
  struct stat st;
  int fd;

  if (g_stat_fd >= 0 &&
      stkr__fd_check(g_stat_fd, g_stat_dev, g_stat_ino, &st) == 0)
    return g_stat_fd;
  g_stat_fd = -1; /* closed or replaced by the app: not ours to close */
  if ((fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) < 0 ||
      (fd = stkr_fd_raise(fd)) < 0)
    return -1;
  if (stkr__fd_identity(fd, &g_stat_dev, &g_stat_ino) != 0) {
    (void)close(fd);
    return -1;
  }
  return g_stat_fd = fd;
}

void stkr__alone_close(void) {
  struct stat st;
  /* (A fork between the open and its store above leaves that one
   * descriptor, close-on-exec, in the child: not worth a lock.) */
  if (g_stat_fd >= 0 &&
      stkr__fd_check(g_stat_fd, g_stat_dev, g_stat_ino, &st) == 0)
    (void)close(g_stat_fd);
  g_stat_fd = -1;
}

/* The process's stat, read again from offset 0 of the kept descriptor
 * (proc(5) files are made anew at each read from 0). */
static const char *read_self_stat(char *buf, size_t cap) {
  int fd = self_stat_fd();
  return fd < 0 ? NULL : parse_stat(buf, pread(fd, buf, cap - 1, 0), NULL);
}

/* The state letter of a stat text (after the comm). */
static char state_of(const char *rest) {
  return rest[0] == ' ' ? rest[1] : '\0';
}

/* Field `k` (1-based as in proc(5); k > 2) of a stat text after the comm,
 * as a number; -1 if absent. */
static long long field_of(const char *rest, int k) {
  int f = 2;
  for (const char *s = rest; *s != '\0'; s++)
    if (*s == ' ' && ++f == k) return strtoll(s + 1, NULL, 10);
  return -1;
}

/* Worker thread only. The recorder's own threads the last scan saw (the
 * worker, the watchdog), and whether the main thread is taken to have
 * ended last (then its status is the process's): unless a look saw app
 * threads alive after it had ended. Between two looks (0.2 s) the order
 * is not seen. */
static long g_ours = 1;
static bool g_main_was_last = true;

bool stkr__app_threads_gone(int *status) {
  char buf[1024], path[64], comm[16];
  const char *rest = read_self_stat(buf, sizeof buf);
  long self = syscall(SYS_gettid), ours = 1;
  long long code, n;
  DIR *d;
  struct dirent *de;
  bool alive = false;

  if (rest == NULL) return false;
  /* num_threads (field 20) counts a zombie main thread too. */
  n = field_of(rest, 20);
  if (state_of(rest) != 'Z') {
    g_main_was_last = true;
    return false;
  }
  if (n > 1 + g_ours) { /* more than main and ours: the app's, alive */
    g_main_was_last = false;
    return false;
  }
  /* The main thread's status as waitpid(2) gives it (exit_code, field 52,
   * since Linux 3.5): 0 after pthread_exit. The process's only if the main
   * thread ended last; otherwise the last one's, which is gone: 0, glibc's
   * exit(0) when that thread was one of its own. */
  code = field_of(rest, 52);
  *status = g_main_was_last && code > 0 && (code & 0x7f) == 0
                ? (int)((code >> 8) & 0xff)
                : 0;
  if ((d = stkr__opendir_high("/proc/self/task")) == NULL) return false;
  while (!alive && (de = readdir(d)) != NULL) {
    long tid = strtol(de->d_name, NULL, 10);
    if (tid <= 0 || tid == self || tid == (long)getpid()) continue;
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    if ((rest = read_stat(path, buf, sizeof buf, comm)) == NULL) continue;
    char st = state_of(rest);
    if (st == 'Z' || st == 'X') continue;
    if (strcmp(comm, "stkr-watchdog") == 0)
      ours++;
    else
      alive = true; /* a thread of the app's (or one starting) */
  }
  closedir(d);
  if (alive) {
    g_main_was_last = false;
    return false;
  }
  g_ours = ours;
  /* A thread made, or one that ended, while the list was read (review: an
   * app thread that started another and ended between the listing and its
   * stat): the count, read again, says so. */
  rest = read_self_stat(buf, sizeof buf);
  return rest != NULL && field_of(rest, 20) == 1 + ours;
}

/* The process's start time in clock ticks after boot (proc(5), stat field
 * 22): the same after an exec and a stkr_init run again, another for a
 * process that took a pid once used by another (a container's pid 1
 * restarted). Header.process_start. 0 when unknown. Once a session, at its
 * start, as /proc/self/comm is read then: one read, the descriptor not
 * kept (kept from the start, the looks' one sat at a number bash's `exec
 * 960>f` takes, and bash lost its file: test-fds.c). */
uint64_t stkr__process_start(void) {
  char buf[1024];
  const char *rest = read_stat("/proc/self/stat", buf, sizeof buf, NULL);
  long long v = rest != NULL ? field_of(rest, 22) : -1;

  return v > 0 ? (uint64_t)v : 0;
}

#else

void stkr__alone_close(void) {}

/* Apple: kinfo_proc's p_starttime would be the same (sysctl KERN_PROC_PID);
 * not built, as nothing of flush/ is compiled for Apple here. */
uint64_t stkr__process_start(void) { return 0; }

bool stkr__app_threads_gone(int *status) {
  (void)status;
  return false;
}

#endif

bool stkr__end_if_alone(void) {
  int status = 0;
  if (!stkr__app_threads_gone(&status)) return false;
  /* No note: the process ends as it does unrecorded. */
  (void)stkr_shutdown_for_exit();
#if defined(__linux__)
  if (status != 0) syscall(SYS_exit_group, status);
#endif
  return true;
}