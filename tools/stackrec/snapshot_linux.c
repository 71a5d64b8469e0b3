/*
 * snapshot_linux.c: the Linux backend of `stackrec snapshot`
 * (snapshot_backend.h): each thread of the target is seized, interrupted,
 * read and let go again on its own, so that it is stopped only for the
 * microseconds it takes to read its registers and copy its stack window:
 *
 *   PTRACE_SEIZE (does not stop it)     -- not part of the stop
 *   PTRACE_INTERRUPT, wait for the stop -- the stop begins when the thread
 *                                          is next scheduled
 *   PTRACE_GETREGSET NT_PRSTATUS        -- pc, sp, fp (and lr)
 *   process_vm_readv [sp, end)          -- end: the mapping's end, at most
 *                                          STKR_SNAP_STACK_MAX above sp
 *   PTRACE_DETACH                       -- the stop ends
 *
 * A few threads are interrupted at a time (IN_FLIGHT), each read and let
 * go as soon as its stop is seen: on a loaded machine a thread takes
 * milliseconds to be scheduled into its stop, and those waits overlap.
 * The walk runs afterwards over the copy (snapshot_unwind.c). Threads are
 * thus not all stopped at the same instant (eu-stack and gdb stop them all
 * for the whole time they take): what each thread was doing is exact, the
 * instants differ by the time between their stops.
 *
 * Never leaving the target stopped: a thread is seized only once it is
 * interrupted, and let go as soon as it is read (a seized thread that has
 * not stopped cannot be detached, so none is seized ahead). The signals
 * that end stackrec (STKR_SNAP_END_SIGNALS: SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE, SIGUSR1/2, SIGALRM, SIGVTALRM, SIGPROF) and SIGTSTP
 * (a ^Z would stop stackrec with a thread stopped) are blocked while
 * threads are captured (snapshot.c holds the first ones for its whole run
 * and takes them between snapshots), so they take effect only once every
 * thread is let go; SIGCHLD too: the wait for a stop sleeps on it. If
 * stackrec dies anyway (SIGKILL, a crash) the kernel detaches every tracee
 * and they run on: PTRACE_SEIZE never sends SIGSTOP, so nothing is left
 * pending. A signal that arrives for the target during its stop (a
 * signal-delivery-stop instead of our interrupt) is passed on with the
 * detach. A thread that does not stop within STOP_TIMEOUT (uninterruptible
 * sleep) ends the snapshot with an error; stackrec's exit releases it.
 */
#if defined(__linux__)
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

#include "common/stkr_fpwalk.h" /* STKR_ARCH_NAME */
#include "common/stkr_grow.h"
#include "tools/stackrec/snapshot_backend.h"

#define STOP_TIMEOUT_NS 2000000000ull /* a thread that does not stop */

static uint64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *stkr_snap_arch(void) { return STKR_ARCH_NAME; }

/* A small /proc file (a comm, a stat line) into buf, without the newline
 * the kernel ends it with; a newline inside (a thread may name itself
 * "a\nb") is kept (QA: the name was cut at it). */
static void read_proc_text(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
  if (fd >= 0) close(fd);
  if (n < 0) n = 0;
  if (n > 0 && buf[n - 1] == '\n') n--;
  buf[n] = '\0';
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
    if (stkr_grow((void **)out, &cap, *n + 1, sizeof **out) != 0) {
      closedir(d);
      return -ENOMEM;
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

/* What one call of wait_any saw. */
typedef struct stop_event {
  pid_t tid;
  int sig;   /* a signal to pass on at detach (0: our own stop) */
  bool gone; /* the thread exited */
} stop_event;

/* ---- a target that execs during a capture ---------------------------------
 * exec kills the process's other threads and waits, holding its
 * cred_guard_mutex, until each is gone; a thread we trace is gone only
 * once we reap it. Our PTRACE_SEIZE of the next thread waits for that
 * mutex (ptrace_attach), and no signal ends that wait (the call restarts):
 * with one of our interrupted threads killed by the exec, both waited for
 * ever (QA, session 43: a target of 150 threads that exec'd, 5 hangs in 12
 * series; only SIGKILL of stackrec freed it). So a helper thread, awake
 * only while a capture runs, reaps our tracees' exits once a seize has
 * waited REAP_AFTER_NS: the exec then ends, the seize returns (ESRCH), and
 * wait_any hands the exits it reaped out as gone. It reaps exits only
 * (WEXITED), never a stop. Any thread of the tracer's group may wait for
 * its tracees (wait(2), __WALL). */
#define REAP_AFTER_NS 20000000ull /* a seize takes microseconds */
#define REAP_GONE_MAX 64          /* > IN_FLIGHT: only those are ours */

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool started, capturing; /* under lock */
  pid_t gone[REAP_GONE_MAX]; /* under lock: reaped, not handed out yet */
  size_t n_gone;
  /* Written by the capturing thread around a seize (CLOCK_MONOTONIC ns,
   * 0: none under way), read by the reaper. Relaxed, paired with nothing:
   * a time only, no data is published with it (a stale read delays or
   * hastens one reap, which is always safe). */
  _Atomic uint64_t seize_since;
} g_reap = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER};

static void reap_exits(void) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | __WALL) != 0 ||
        si.si_pid == 0)
      return;
    pthread_mutex_lock(&g_reap.lock);
    /* Not after the capture ended (reaper_capture(false) cleared the list):
     * a tid used again by a thread of the next capture would read as gone
     * while it is interrupted (review). */
    if (g_reap.capturing && g_reap.n_gone < REAP_GONE_MAX)
      g_reap.gone[g_reap.n_gone++] = si.si_pid;
    pthread_mutex_unlock(&g_reap.lock);
  }
}

static void *reaper_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_reap.lock);
  for (;;) {
    while (!g_reap.capturing) pthread_cond_wait(&g_reap.wake, &g_reap.lock);
    pthread_mutex_unlock(&g_reap.lock);
    nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    uint64_t since =
        atomic_load_explicit(&g_reap.seize_since, memory_order_relaxed);
    if (since != 0 && now_ns(CLOCK_MONOTONIC) - since >= REAP_AFTER_NS)
      reap_exits();
    pthread_mutex_lock(&g_reap.lock);
  }
  return NULL;
}

/* A capture begins (on) or ends. The reaper is made at the first, with
 * every signal blocked (they are the command thread's); without one (no
 * thread to be had) a capture runs as before. */
static void reaper_capture(bool on) {
  pthread_mutex_lock(&g_reap.lock);
  if (on && !g_reap.started) {
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    g_reap.started = pthread_create(&t, NULL, reaper_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (g_reap.started) pthread_detach(t);
  }
  g_reap.capturing = on;
  g_reap.n_gone = 0; /* a capture hands out only its own threads' exits */
  if (on) pthread_cond_signal(&g_reap.wake);
  pthread_mutex_unlock(&g_reap.lock);
}

/* An exit the reaper took, if any: 0 or its tid. */
static pid_t reaped_one(void) {
  pid_t tid = 0;
  pthread_mutex_lock(&g_reap.lock);
  if (g_reap.n_gone > 0) tid = g_reap.gone[--g_reap.n_gone];
  pthread_mutex_unlock(&g_reap.lock);
  return tid;
}

/* Wait (at most until deadline_ns) for any tracee's stop or exit. SIGCHLD
 * (held, see hold_signals) says when a tracee stopped: sleep on it rather
 * than spin, which on a machine whose cores the target keeps busy would
 * hand the core to the target for a whole time slice.
 * @return 0 (*ev filled), -ETIMEDOUT, or -ECHILD (no tracee left). */
static int wait_any(uint64_t deadline_ns, stop_event *ev) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  for (;;) {
    int st;
    pid_t r = reaped_one();
    if (r > 0) {
      ev->tid = r;
      ev->sig = 0;
      ev->gone = true;
      return 0;
    }
    r = waitpid(-1, &st, __WALL | WNOHANG);
    if (r > 0) {
      ev->tid = r;
      ev->sig = 0;
      ev->gone = WIFEXITED(st) || WIFSIGNALED(st);
      if (!ev->gone && !WIFSTOPPED(st)) continue;
      /* Our interrupt (or a group-stop, which PTRACE_EVENT_STOP also
       * reports): nothing to pass on. Otherwise a signal arrived for the
       * thread first: deliver it at detach. */
      if (!ev->gone && (st >> 16) != PTRACE_EVENT_STOP &&
          (st >> 8) == WSTOPSIG(st))
        ev->sig = WSTOPSIG(st);
      return 0;
    }
    if (r < 0 && errno == ECHILD) return -ECHILD;
    if (r < 0 && errno != EINTR) return -errno;
    if (now_ns(CLOCK_MONOTONIC) > deadline_ns) return -ETIMEDOUT;
    /* Re-check every millisecond too: a SIGCHLD consumed earlier. */
    sigtimedwait(&chld, NULL, &(struct timespec){0, 1000000});
  }
}

/* Read a stopped thread and let it go at once. scratch holds
 * STKR_SNAP_STACK_MAX bytes; the copy stays there (the caller moves it). */
static int read_and_detach(const stkr_snap_map *maps,
                           size_t n_maps, stkr_snap_thread *t, int sig,
                           uint64_t t_int, uint8_t *scratch) {
  uint64_t t1 = now_ns(CLOCK_MONOTONIC), t2, end;
  ssize_t got = 0;
  int err = get_regs(t->tid, &t->regs);
  if (err == 0) {
    struct iovec local, remote;
    end = stack_end(maps, n_maps, t->regs.sp);
    t->stack_cut = end - t->regs.sp > STKR_SNAP_STACK_MAX;
    if (t->stack_cut)
      end = t->regs.sp + STKR_SNAP_STACK_MAX;
    local = (struct iovec){scratch, (size_t)(end - t->regs.sp)};
    remote = (struct iovec){(void *)(uintptr_t)t->regs.sp, local.iov_len};
    /* A short read stops at the first unreadable page: keep what came.
     * Through the thread's own id: a leader that called pthread_exit has
     * no memory to read through its pid any more (the stacks were cut to
     * their first frame). */
    got = process_vm_readv(t->tid, &local, 1, &remote, 1, 0);
    if (got < 0) got = 0;
  }
  /* Let go at once; a signal meant for the thread goes with it. */
  if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(intptr_t)sig) != 0 &&
      errno != ESRCH && err == 0)
    err = -EIO;
  t2 = now_ns(CLOCK_MONOTONIC);
  t->stop_ns = t2 - t_int;
  t->held_ns = t2 - t1;
  t->ts_mono_ns = t_int;
  t->stack_len = (uint64_t)got;
  return err;
}

int stkr_snap_exec_id(pid_t pid, uint8_t *buf, size_t cap) {
  char path[64];
  size_t len = 0;
  int fd;

  snprintf(path, sizeof path, "/proc/%d/auxv", (int)pid);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return -errno;
  while (len < cap) {
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  return (int)len;
}

static void hold_signals(sigset_t *old) {
  sigset_t hold;
  static const int sigs[] = {STKR_SNAP_HELD_SIGNALS, SIGCHLD};
  sigemptyset(&hold);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&hold, sigs[i]);
  sigprocmask(SIG_BLOCK, &hold, old);
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
    read_proc_text(path, st, sizeof st);
    /* "tid (comm) S ...": the comm may hold ')': look after the last. */
    p = strrchr(st, ')');
    alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
  }
  free(tids);
  return alive;
}

/* Is thread tid of pid a zombie (or gone)? */
static bool thread_exited(pid_t pid, pid_t tid) {
  char path[96], st[256] = "", *p;
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  read_proc_text(path, st, sizeof st);
  p = strrchr(st, ')');
  return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Is pid on its way out: gone, or gone within 200 ms? */
static bool process_exiting(pid_t pid) {
  for (int k = 0; k < 20; k++) {
    if (!process_alive(pid)) return true;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  return false;
}

/* The capture loop's state: threads are seized and interrupted a few at
 * a time (IN_FLIGHT), each read and let go as soon as its stop is seen. A
 * thread waits to be scheduled before it reaches its stop; keeping a few
 * interrupts under way overlaps those waits (on a loaded machine they
 * are milliseconds) while each thread stays stopped only from its stop
 * to its detach. Only interrupted threads are ever seized: a seized
 * thread that is not stopped cannot be detached. */
#define IN_FLIGHT 4

typedef struct capture {
  pid_t pid;
  const stkr_snap_map *maps;
  size_t n_maps;
  stkr_snap *out;
  uint8_t *scratch;
  size_t next;                /* next thread to interrupt */
  size_t in_flight;
  uint64_t t_int[IN_FLIGHT];  /* when each in-flight thread was interrupted */
  size_t slot_of[IN_FLIGHT];  /* its index in out->threads */
  bool *done;                 /* by index: read (or vanished) */
  char *err;
  size_t err_cap;
} capture;

/* The pid tracing thread tid of pid (a debugger, strace), 0 if none or
 * unknown; its name into comm. A thread has one tracer at a time: its
 * PTRACE_SEIZE then fails with EPERM, which is not a permission. */
static pid_t tracer_of(pid_t pid, pid_t tid, char *comm, size_t cap) {
  char path[96], st[4096], *p;
  pid_t tracer = 0;
  snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
  read_proc_text(path, st, sizeof st);
  if ((p = strstr(st, "\nTracerPid:")) != NULL) tracer = (pid_t)atoi(p + 11);
  comm[0] = '\0';
  if (tracer <= 0) return 0;
  snprintf(path, sizeof path, "/proc/%d/comm", (int)tracer);
  read_proc_text(path, comm, cap);
  return tracer;
}

/* Seize and interrupt the next thread. @return 0, 1 none left, or an
 * error (err filled). */
static int start_next(capture *c) {
  while (c->next < c->out->n_threads) {
    size_t i = c->next++;
    stkr_snap_thread *t = &c->out->threads[i];
    /* With a thread of ours killed by an exec and not reaped, this can
     * wait: see "a target that execs" above. Around every seize, not only
     * with threads in flight: one whose stop was seen can be killed before
     * its read, its detach then failing with ESRCH, and stay ours (review,
     * session 43). */
    atomic_store_explicit(&g_reap.seize_since, now_ns(CLOCK_MONOTONIC),
                          memory_order_relaxed);
    long seized = ptrace(PTRACE_SEIZE, t->tid, NULL, NULL);
    int e = errno;
    atomic_store_explicit(&g_reap.seize_since, 0, memory_order_relaxed);
    if (seized != 0) {
      if (e == ESRCH) { /* exited since the listing */
        c->done[i] = true;
        t->err = -ESRCH;
        continue;
      }
      /* Exiting threads refuse tracing with EPERM (zombies, or past
       * exit_mm): a thread that exited (a leader that called pthread_exit)
       * is skipped; a process that is exiting is given 200 ms to be gone.
       * Only then is EPERM a permission. */
      if (e == EPERM && thread_exited(c->pid, t->tid)) {
        c->done[i] = true;
        t->err = -ESRCH;
        continue;
      }
      if (e == EPERM && process_exiting(c->pid))
        return fail(c->err, c->err_cap, -ESRCH,
                    "process %d exited during the snapshot", (int)c->pid);
      char comm[64];
      pid_t tracer = e == EPERM ? tracer_of(c->pid, t->tid, comm, sizeof comm)
                                : 0;
      if (tracer != 0) /* QA: it said "permission denied" under strace */
        return fail(c->err, c->err_cap, -EBUSY,
                    "process %d: thread %d is traced by process %d (%s) "
                    "already: a thread has one tracer at a time (a debugger "
                    "or strace); snapshot it once that one detaches",
                    (int)c->pid, (int)t->tid, (int)tracer, comm);
      return fail(c->err, c->err_cap, e == EPERM ? -EPERM : -e,
                  "process %d: cannot trace thread %d: %s%s", (int)c->pid,
                  (int)t->tid, strerror(e),
                  e == EPERM ? " (permission denied: another user's process, "
                               "a setuid program, or ptrace restricted by "
                               "/proc/sys/kernel/yama/ptrace_scope)"
                             : "");
    }
    c->t_int[c->in_flight] = now_ns(CLOCK_MONOTONIC);
    c->slot_of[c->in_flight] = i;
    c->in_flight++;
    if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) != 0) {
      /* Seized but gone already: its exit is reported to wait_any. */
    }
    return 0;
  }
  return 1;
}

/* Handle one event of an in-flight thread. @return 0 or an error. */
static int on_event(capture *c, const stop_event *ev) {
  size_t f = 0;
  while (f < c->in_flight && c->out->threads[c->slot_of[f]].tid != ev->tid)
    f++;
  if (f == c->in_flight) { /* not ours now: a late event; let it go */
    if (!ev->gone) ptrace(PTRACE_DETACH, ev->tid, NULL, (void *)(intptr_t)ev->sig);
    return 0;
  }
  size_t i = c->slot_of[f];
  stkr_snap_thread *t = &c->out->threads[i];
  int e = ev->gone ? -ESRCH
                   : read_and_detach(c->maps, c->n_maps, t, ev->sig,
                                     c->t_int[f], c->scratch);
  c->in_flight--;
  c->t_int[f] = c->t_int[c->in_flight];
  c->slot_of[f] = c->slot_of[c->in_flight];
  c->done[i] = true;
  if (e == -ESRCH) {
    t->err = -ESRCH;
    return 0;
  }
  if (e != 0)
    return fail(c->err, c->err_cap, e, "process %d: thread %d: %s",
                (int)c->pid, (int)t->tid,
                e == -EPROTO ? "a 32-bit process: not supported"
                             : strerror(-e));
  if (t->stack_len > 0) {
    if (!(t->stack = malloc(t->stack_len)))
      return fail(c->err, c->err_cap, -ENOMEM, "process %d: out of memory",
                  (int)c->pid);
    memcpy(t->stack, c->scratch, t->stack_len);
  }
  return 0;
}

/* Every in-flight thread is waited for and let go (bounded): the error
 * path leaves nothing stopped. A thread that never stops stays seized
 * until stackrec exits, which detaches it. After a thread's timeout the
 * others in flight were interrupted at most as long ago: a short wait
 * (QA, session 43: a timeout took 4 s, its 2 and the drain's 2). */
static void drain(capture *c, uint64_t wait_ns) {
  uint64_t deadline = now_ns(CLOCK_MONOTONIC) + wait_ns;
  while (c->in_flight > 0) {
    stop_event ev;
    if (wait_any(deadline, &ev) != 0) break;
    size_t f = 0;
    while (f < c->in_flight && c->out->threads[c->slot_of[f]].tid != ev.tid)
      f++;
    if (!ev.gone) ptrace(PTRACE_DETACH, ev.tid, NULL, (void *)(intptr_t)ev.sig);
    if (f < c->in_flight) {
      c->in_flight--;
      c->t_int[f] = c->t_int[c->in_flight];
      c->slot_of[f] = c->slot_of[c->in_flight];
    }
  }
}

static int capture_all(capture *c) {
  int rc = 0;
  while (rc == 0) {
    while (rc == 0 && c->in_flight < IN_FLIGHT) {
      int r = start_next(c);
      if (r == 1) break;
      rc = r;
    }
    if (rc != 0 || c->in_flight == 0) break;
    /* The oldest interrupt bounds the wait. */
    size_t oldest = 0;
    for (size_t f = 1; f < c->in_flight; f++)
      if (c->t_int[f] < c->t_int[oldest]) oldest = f;
    stop_event ev;
    int w = wait_any(c->t_int[oldest] + STOP_TIMEOUT_NS, &ev);
    if (w == -ETIMEDOUT) {
      const stkr_snap_thread *t = &c->out->threads[c->slot_of[oldest]];
      rc = fail(c->err, c->err_cap, -ETIMEDOUT,
                "process %d: thread %d did not stop within 2 s "
                "(uninterruptible sleep?); stackrec exits to release it",
                (int)c->pid, (int)t->tid);
      break;
    }
    if (w != 0) {
      rc = fail(c->err, c->err_cap, w, "process %d: waiting for a thread: %s",
                (int)c->pid, strerror(-w));
      break;
    }
    rc = on_event(c, &ev);
  }
  if (rc != 0) drain(c, rc == -ETIMEDOUT ? 100000000u : STOP_TIMEOUT_NS);
  return rc;
}

int stkr_snap_take(pid_t pid, const stkr_snap_map *maps, size_t n_maps,
                   stkr_snap *out, char *err, size_t err_cap) {
  pid_t *tids = NULL;
  size_t n = 0, k = 0;
  char path[96];
  struct sched_param old_param;
  int rc, old_policy;
  sigset_t old_mask;
  capture c = {.pid = pid, .maps = maps, .n_maps = n_maps, .out = out,
               .err = err, .err_cap = err_cap};

  memset(out, 0, sizeof *out);
  out->pid = pid;
  out->mono_ns = now_ns(CLOCK_MONOTONIC);
  out->wall_ns = now_ns(CLOCK_REALTIME);
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  read_proc_text(path, out->comm, sizeof out->comm);
  if ((rc = list_tasks(pid, &tids, &n)) != 0 || n == 0) {
    free(tids);
    if (rc == 0 || rc == -ESRCH)
      return fail(err, err_cap, -ESRCH, "process %d: no such process",
                  (int)pid);
    return fail(err, err_cap, rc, "process %d: cannot list its threads: %s",
                (int)pid, strerror(-rc));
  }
  out->threads = calloc(n, sizeof *out->threads);
  c.done = calloc(n, sizeof *c.done);
  c.scratch = malloc(STKR_SNAP_STACK_MAX);
  if (!out->threads || !c.done || !c.scratch) {
    free(tids);
    free(c.done);
    free(c.scratch);
    return fail(err, err_cap, -ENOMEM, "process %d: out of memory", (int)pid);
  }
  out->n_threads = n;
  for (size_t i = 0; i < n; i++) {
    out->threads[i].tid = tids[i];
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid,
             (int)tids[i]);
    read_proc_text(path, out->threads[i].name, sizeof out->threads[i].name);
  }
  free(tids);
  /* Catchable signals wait until every thread is let go (see the top). */
  hold_signals(&old_mask);
  bool raised = raise_priority(&old_policy, &old_param);
  reaper_capture(true);
  rc = capture_all(&c);
  reaper_capture(false);
  restore_priority(raised, old_policy, &old_param);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  /* Keep the threads that were read, in listing order. */
  for (size_t i = 0; i < n; i++) {
    stkr_snap_thread *t = &out->threads[i];
    if (!c.done[i] || t->err != 0) {
      if (c.done[i] && t->err == -ESRCH) out->vanished++;
      free(t->stack);
      continue;
    }
    if (t->stop_ns > out->max_stop_ns) out->max_stop_ns = t->stop_ns;
    if (k != i) out->threads[k] = *t;
    k++;
  }
  out->n_threads = k;
  free(c.done);
  free(c.scratch);
  out->wall_time_ns = now_ns(CLOCK_MONOTONIC) - out->mono_ns;
  if (rc == 0 && (k == 0 || !process_alive(pid)))
    rc = fail(err, err_cap, -ESRCH,
              "process %d exited during the snapshot", (int)pid);
  return rc;
}
#endif
