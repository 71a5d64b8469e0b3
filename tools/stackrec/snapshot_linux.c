/*
 * snapshot_linux.c: the Linux backend of `stackrec snapshot` (snapshot.h):
 * one thread of the target at a time is seized, interrupted, read and let
 * go again, so that each thread is stopped only for the few microseconds
 * it takes to read its registers and copy its stack window:
 *
 *   PTRACE_SEIZE (does not stop it)     -- not part of the stop
 *   PTRACE_INTERRUPT, wait for the stop -- the stop begins
 *   PTRACE_GETREGSET NT_PRSTATUS        -- pc, sp, fp (and lr)
 *   process_vm_readv [sp, end)          -- end: the mapping's end, at most
 *                                          STKR_SNAP_STACK_MAX above sp
 *   PTRACE_DETACH                       -- the stop ends
 *
 * The walk runs afterwards over the copy (snapshot_unwind.c). Threads are
 * thus not all stopped at the same instant (eu-stack and gdb stop them all
 * for the whole time they take): what each thread was doing is exact, the
 * instants differ by the time between their stops.
 *
 * Never leaving the target stopped: a thread is stopped only between the
 * interrupt and the detach of the same loop pass; SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE, SIGUSR1/2 and SIGALRM are blocked for that pass, so
 * they take effect (default action: stackrec ends, or snapshot.c's handler
 * ends a series) only once the thread is let go; SIGCHLD too: the wait for
 * the stop sleeps on it. If stackrec dies anyway (SIGKILL, a crash) the kernel detaches
 * every tracee and they run on: PTRACE_SEIZE never sends SIGSTOP, so
 * nothing is left pending. A signal that arrives for the target during
 * its stop (a signal-delivery-stop instead of our interrupt) is passed on
 * with the detach. A thread that does not stop (uninterruptible sleep) is
 * waited for at most STOP_TIMEOUT, then reported.
 */
#if defined(__linux__)
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/stackrec/snapshot_backend.h"

#define STOP_TIMEOUT_NS 2000000000ull /* a thread that does not stop */

static uint64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *stkr_snap_arch(void) {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

static void read_comm(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
}

/* The thread ids of pid, from /proc/PID/task. */
static int list_tasks(pid_t pid, pid_t **out, size_t *n) {
  char path[64];
  size_t cap = 0;
  struct dirent *e;
  DIR *d;

  *out = NULL;
  *n = 0;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  if (!(d = opendir(path))) return errno == ENOENT ? -ESRCH : -errno;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long t = strtol(e->d_name, &end, 10);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || t <= 0) continue;
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      pid_t *nv = realloc(*out, nc * sizeof *nv);
      if (!nv) {
        closedir(d);
        return -ENOMEM;
      }
      *out = nv;
      cap = nc;
    }
    (*out)[(*n)++] = (pid_t)t;
  }
  closedir(d);
  return 0;
}

/* The registers of a stopped thread. */
static int get_regs(pid_t tid, stkr_snap_regs *r) {
#if defined(__x86_64__)
  struct user_regs_struct u;
#elif defined(__aarch64__)
  struct user_pt_regs u;
#endif
  struct iovec io = {&u, sizeof u};
  if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &io) != 0)
    return -errno;
  if (io.iov_len != sizeof u) return -EPROTO; /* a 32-bit (compat) task */
#if defined(__x86_64__)
  r->pc = u.rip;
  r->sp = u.rsp;
  r->fp = u.rbp;
  r->lr = 0;
#elif defined(__aarch64__)
  r->pc = u.pc;
  r->sp = u.sp;
  r->fp = u.regs[29];
  r->lr = u.regs[30];
#endif
  return 0;
}

/* The end of the readable range holding sp (maps are merged ranges). */
static uint64_t stack_end(const stkr_snap_map *maps, size_t n_maps,
                          uint64_t sp) {
  size_t lo = 0, hi = n_maps;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (maps[mid].hi <= sp) lo = mid + 1;
    else hi = mid;
  }
  if (lo < n_maps && maps[lo].lo <= sp) return maps[lo].hi;
  return sp + STKR_SNAP_STACK_MAX; /* a mapping made since: a partial read */
}

/* Wait (bounded) for tid's stop after the interrupt. SIGCHLD (held, see
 * hold_signals) tells when a tracee stopped: sleep on it rather than spin,
 * which on a machine whose cores the target keeps busy would hand the core
 * to the target for a whole time slice. @return 0 stopped (*sig: a signal
 * to pass on at detach, 0 for our own stop), -ESRCH gone, -ETIMEDOUT. */
static int wait_stop(pid_t tid, int *sig) {
  uint64_t deadline = 0;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  *sig = 0;
  for (;;) {
    int st;
    pid_t r = waitpid(tid, &st, __WALL | WNOHANG);
    if (r == tid) {
      if (WIFEXITED(st) || WIFSIGNALED(st)) return -ESRCH;
      if (WIFSTOPPED(st)) {
        /* Our interrupt (or a group-stop, which PTRACE_EVENT_STOP also
         * reports): nothing to pass on. Otherwise a signal arrived for
         * the thread first: deliver it at detach. */
        if ((st >> 16) != PTRACE_EVENT_STOP && (st >> 8) == WSTOPSIG(st))
          *sig = WSTOPSIG(st);
        return 0;
      }
      continue;
    }
    if (r < 0 && errno != EINTR) return -ESRCH;
    if (r == 0) {
      uint64_t now = now_ns(CLOCK_MONOTONIC);
      if (deadline == 0) deadline = now + STOP_TIMEOUT_NS;
      else if (now > deadline) return -ETIMEDOUT;
      /* Re-check every millisecond too: a SIGCHLD consumed earlier. */
      sigtimedwait(&chld, NULL, &(struct timespec){0, 1000000});
    }
  }
}

/* Stop, read and let go one seized thread: the timed stop. scratch holds
 * STKR_SNAP_STACK_MAX bytes. @return 0, -ESRCH (it exited: skip),
 * -ETIMEDOUT (it did not stop: still seized, see finish_late), -EPROTO
 * (32-bit task), -EIO. */
static int stop_and_read(pid_t pid, const stkr_snap_map *maps,
                         size_t n_maps, stkr_snap_thread *t,
                         uint8_t *scratch) {
  uint64_t t0, t1, t2, end;
  ssize_t got = 0;
  int err, sig;

  t0 = now_ns(CLOCK_MONOTONIC);
  if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) != 0)
    return -ESRCH; /* seized but gone already */
  if ((err = wait_stop(t->tid, &sig)) != 0) return err;
  t1 = now_ns(CLOCK_MONOTONIC);
  err = get_regs(t->tid, &t->regs);
  if (err == 0) {
    struct iovec local, remote;
    end = stack_end(maps, n_maps, t->regs.sp);
    if (end - t->regs.sp > STKR_SNAP_STACK_MAX)
      end = t->regs.sp + STKR_SNAP_STACK_MAX;
    local = (struct iovec){scratch, (size_t)(end - t->regs.sp)};
    remote = (struct iovec){(void *)(uintptr_t)t->regs.sp, local.iov_len};
    /* A short read stops at the first unreadable page: keep what came. */
    got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0) got = 0;
  }
  /* Let go at once; a signal meant for the thread goes with it. */
  if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(intptr_t)sig) != 0 &&
      errno != ESRCH)
    err = err ? err : -EIO;
  t2 = now_ns(CLOCK_MONOTONIC);
  t->stop_ns = t2 - t0;
  t->held_ns = t2 - t1;
  t->ts_mono_ns = t0;
  t->stack_len = (uint64_t)got;
  return err == -ESRCH ? -ESRCH : err;
}

static void hold_signals(sigset_t *old) {
  sigset_t hold;
  static const int sigs[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE,
                             SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD};
  sigemptyset(&hold);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&hold, sigs[i]);
  sigprocmask(SIG_BLOCK, &hold, old);
}

/* A thread that did not stop in time is still seized: wait once more and
 * let it go (if it never stops, stackrec's exit detaches it). */
static int finish_late(stkr_snap_thread *t) {
  int sig;
  if (wait_stop(t->tid, &sig) != 0) return -ETIMEDOUT;
  ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(intptr_t)sig);
  return 0;
}

static int fail(char *err, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t cap, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return rc;
}

/* While threads are stopped one by one, run stackrec itself at real-time
 * priority when allowed (root, CAP_SYS_NICE, an RLIMIT_RTPRIO): on a
 * loaded machine a stackrec preempted between a thread's stop and its
 * detach would keep that thread stopped for a whole time slice of someone
 * else. Nothing in the loop spins (the wait sleeps on SIGCHLD), so this
 * cannot starve the machine; SCHED_RESET_ON_FORK keeps it from children.
 * @return whether the policy was changed (restore_priority undoes it). */
static bool raise_priority(int *old_policy, struct sched_param *old) {
  struct sched_param rt = {.sched_priority = 1};
  *old_policy = sched_getscheduler(0);
  if (*old_policy < 0 || sched_getparam(0, old) != 0) return false;
  return sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &rt) == 0;
}

static void restore_priority(bool raised, int old_policy,
                             const struct sched_param *old) {
  if (raised) sched_setscheduler(0, old_policy, old);
}

/* Does any thread of pid still run? A process that exited is gone from
 * /proc or left as a zombie (Z, X) until its parent reaps it; a leader
 * that called pthread_exit is a zombie while other threads run on. */
static bool process_alive(pid_t pid) {
  pid_t *tids = NULL;
  size_t n = 0;
  bool alive = false;
  if (list_tasks(pid, &tids, &n) != 0) return false;
  for (size_t i = 0; i < n && !alive; i++) {
    char path[96], st[256] = "", *p;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid,
             (int)tids[i]);
    read_comm(path, st, sizeof st);
    /* "tid (comm) S ...": the comm may hold ')': look after the last. */
    p = strrchr(st, ')');
    alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
  }
  free(tids);
  return alive;
}

int stkr_snap_take(pid_t pid, const stkr_snap_map *maps, size_t n_maps,
                   stkr_snap *out, char *err, size_t err_cap) {
  pid_t *tids = NULL;
  size_t n = 0, k = 0;
  uint8_t *scratch = NULL;
  char path[96];
  int rc;

  memset(out, 0, sizeof *out);
  out->pid = pid;
  out->mono_ns = now_ns(CLOCK_MONOTONIC);
  out->wall_ns = now_ns(CLOCK_REALTIME);
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  read_comm(path, out->comm, sizeof out->comm);
  if ((rc = list_tasks(pid, &tids, &n)) != 0 || n == 0) {
    free(tids);
    if (rc == 0 || rc == -ESRCH)
      return fail(err, err_cap, -ESRCH, "process %d: no such process",
                  (int)pid);
    return fail(err, err_cap, rc, "process %d: cannot list its threads: %s",
                (int)pid, strerror(-rc));
  }
  out->threads = calloc(n, sizeof *out->threads);
  scratch = malloc(STKR_SNAP_STACK_MAX);
  if (!out->threads || !scratch) {
    free(tids);
    free(scratch);
    return fail(err, err_cap, -ENOMEM, "process %d: out of memory", (int)pid);
  }
  rc = 0;
  struct sched_param old_param;
  int old_policy;
  bool raised = raise_priority(&old_policy, &old_param);
  for (size_t i = 0; i < n && rc == 0; i++) {
    stkr_snap_thread *t = &out->threads[k];
    sigset_t old;
    int e;

    t->tid = tids[i];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid,
             (int)t->tid);
    read_comm(path, t->name, sizeof t->name);
    if (ptrace(PTRACE_SEIZE, t->tid, NULL, NULL) != 0) {
      e = errno;
      if (e == ESRCH) { /* exited since the listing */
        out->vanished++;
        continue;
      }
      rc = fail(err, err_cap, e == EPERM ? -EPERM : -e,
                "process %d: cannot trace thread %d: %s%s", (int)pid,
                (int)t->tid, strerror(e),
                e == EPERM ? " (another user's process, a setuid program, "
                             "or ptrace restricted: see "
                             "/proc/sys/kernel/yama/ptrace_scope)"
                           : "");
      break;
    }
    hold_signals(&old);
    e = stop_and_read(pid, maps, n_maps, t, scratch);
    if (e == -ETIMEDOUT) e = finish_late(t);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (e == -ESRCH) {
      out->vanished++;
      continue;
    }
    if (e != 0) {
      rc = fail(err, err_cap, e, "process %d: thread %d: %s", (int)pid,
                (int)t->tid,
                e == -ETIMEDOUT ? "did not stop within 2 s (uninterruptible "
                                  "sleep?); stackrec exits to release it"
                : e == -EPROTO ? "a 32-bit process: not supported"
                               : strerror(-e));
      break;
    }
    if (t->stack_len > 0 && !(t->stack = malloc(t->stack_len))) {
      rc = fail(err, err_cap, -ENOMEM, "process %d: out of memory", (int)pid);
      break;
    }
    if (t->stack) memcpy(t->stack, scratch, t->stack_len);
    if (t->stop_ns > out->max_stop_ns) out->max_stop_ns = t->stop_ns;
    k++;
  }
  restore_priority(raised, old_policy, &old_param);
  out->n_threads = k;
  free(tids);
  free(scratch);
  out->wall_time_ns = now_ns(CLOCK_MONOTONIC) - out->mono_ns;
  if (rc == 0 && (k == 0 || !process_alive(pid)))
    rc = fail(err, err_cap, -ESRCH,
              "process %d exited during the snapshot", (int)pid);
  return rc;
}

void stkr_snap_free(stkr_snap *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_threads; i++) free(s->threads[i].stack);
  free(s->threads);
  memset(s, 0, sizeof *s);
}
#endif
