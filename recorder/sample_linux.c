/*
 * sample_linux.c: how a sample request reaches another thread on Linux.
 *
 * A real-time signal, sent with tgkill to the target; its handler takes
 * the request (a CAS on the slot's request word), walks the frame pointers
 * of the *interrupted* context from the ucontext's PC and frame pointer
 * (so the handler's own frames are not in the stack), answers, and wakes
 * the sampler through a futex on the same word. The sampler never waits
 * longer than its timeout; see sample.h for how a late handler is kept
 * from answering a request that was withdrawn.
 *
 * Why a real-time signal: standard signals coalesce (two samplers could
 * lose one) and are all taken by applications; real-time ones queue and
 * are mostly free. Default SIGRTMAX-7: glibc keeps 32-33, and libraries
 * that take real-time signals tend to start at SIGRTMIN.
 *
 * The app's own handler on that signal is refused (-EBUSY), at setup and
 * before every request (it may install one later): a chained handler could
 * not tell the app's signals from ours.
 */
#if !defined(__APPLE__)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "recorder/sample.h"

/* Written once at setup (under the once in sample.c), read after. */
static int g_sig;

static void stkr__futex_wait(_Atomic uint32_t *w, uint32_t v, uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  (void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
}

void stkr__splat_wake(_Atomic uint32_t *w) {
  (void)syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void stkr__splat_sleep(_Atomic uint32_t *w, uint32_t expect, unsigned ms) {
  stkr__futex_wait(w, expect, (uint64_t)ms * 1000000u);
}

static void stkr__sample_handler(int sig, siginfo_t *si, void *ucv) {
  int saved = errno;
  stkr__sslot *s = stkr__sslot_self();
  uint32_t expect = STKR__REQ_REQUESTED;
  const ucontext_t *uc = ucv;
  uint64_t pc;
  uintptr_t fp;

  (void)sig;
  /* Only our own requests (tgkill from this process); anything else that
   * arrives on this number is left alone. */
  if (s == NULL || si->si_code != SI_TKILL)
    goto out;
  /* Acquire pairs with the sampler's release store of REQUESTED. */
  if (!atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                               STKR__REQ_RUNNING,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    goto out; /* withdrawn (timed out) or not for us */
  if (si->si_pid != s->sender_pid) {
    /* Another process's tgkill while our request waits: give the request
     * back to our own signal, queued behind this one (real-time signals
     * queue). If the sampler abandoned it meanwhile, end it (IDLE), as
     * the handler ends every abandoned request. */
    expect = STKR__REQ_RUNNING;
    if (!atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                                 STKR__REQ_REQUESTED,
                                                 memory_order_release,
                                                 memory_order_relaxed))
      atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    goto out;
  }
#if defined(__x86_64__)
  pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
  pc = (uint64_t)uc->uc_mcontext.pc;
  fp = (uintptr_t)uc->uc_mcontext.regs[29];
#else
  pc = 0;
  fp = 0;
  (void)uc;
#endif
  stkr__sample_serve(s, pc, fp);
  stkr__sslot_answer(s);
out:
  errno = saved;
}

/* STACKREC_SAMPLE_SIGNAL: N, RTMIN+N or RTMAX-N, inside [SIGRTMIN, SIGRTMAX]. */
int stkr__sample_signal_parse(const char *v) {
  char *end;
  long n, base = 0, dir = 1;

  if (strncmp(v, "RTMIN", 5) == 0) {
    base = SIGRTMIN;
    v += 5;
  } else if (strncmp(v, "RTMAX", 5) == 0) {
    base = SIGRTMAX;
    dir = -1;
    v += 5;
  }
  if (base != 0 && *v == '\0')
    return (int)base;
  if (base != 0) {
    if (*v != (dir > 0 ? '+' : '-'))
      return -EINVAL;
    v++;
  }
  errno = 0;
  n = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < 0)
    return -EINVAL;
  n = base + dir * n;
  if (n < SIGRTMIN || n > SIGRTMAX)
    return -EINVAL;
  return (int)n;
}

static bool stkr__ours(const struct sigaction *sa) {
  return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == stkr__sample_handler;
}

int stkr__splat_setup(void) {
  const char *v = getenv("STACKREC_SAMPLE_SIGNAL");
  struct sigaction old, sa;
  int sig = SIGRTMAX - 7;

  if (v != NULL && *v != '\0' && (sig = stkr__sample_signal_parse(v)) < 0)
    return -EINVAL;
  if (sigaction(sig, NULL, &old) != 0)
    return -errno;
  if (!stkr__ours(&old) && !(!(old.sa_flags & SA_SIGINFO) &&
                             old.sa_handler == SIG_DFL))
    return -EBUSY;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = stkr__sample_handler;
  /* SA_RESTART: calls that can be restarted are; SA_ONSTACK: a thread
   * running on its alternate stack keeps it. */
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0)
    return -errno;
  g_sig = sig;
  return 0;
}

int stkr__splat_register(stkr__sslot *s) {
  sigset_t cur;

  s->os_tid = stkr__os_tid();
  s->plat = 0;
  if (pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, g_sig))
    return -EDEADLK;
  return 0;
}

void stkr__splat_unregister(stkr__sslot *s) {
  sigset_t set;

  (void)s;
  sigemptyset(&set);
  sigaddset(&set, g_sig);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void stkr__splat_block_self(void) { stkr__splat_unregister(NULL); }

/* Does thread tid block our signal (SigBlk in /proc)? Only after a
 * request went unanswered: a transient descriptor, closed at once. */
static bool stkr__tid_blocks(uint64_t tid) {
  char path[64], buf[2048];
  const char *p;
  int fd;
  ssize_t n;
  unsigned long long mask;

  snprintf(path, sizeof path, "/proc/self/task/%llu/status",
           (unsigned long long)tid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  p = strstr(buf, "\nSigBlk:");
  if (p == NULL)
    return false;
  mask = strtoull(p + 8, NULL, 16);
  return (mask >> (g_sig - 1)) & 1u;
}

static uint64_t stkr__now(void) { return stkr__clock_mono_ns(); }

/* How long the sampler spins before it sleeps: an answer usually comes in
 * a few microseconds (the target's handler), and a futex sleep and wake-up
 * of the sampler would cost more than that again. Bounded; sampling is
 * rare (the watchdog: 20 a second during a hang). */
#define STKR__SPIN_NS 10000u

/* Wait until `req` is DONE or the deadline passes. True: DONE (acquired). */
static bool stkr__wait_done(stkr__sslot *s, uint64_t deadline) {
  uint64_t spin_end = stkr__now() + STKR__SPIN_NS;

  while (stkr__now() < spin_end) {
    for (int i = 0; i < 64; i++) {
      /* Acquire pairs with the handler's release CAS to DONE. */
      if (atomic_load_explicit(&s->req, memory_order_acquire) ==
          STKR__REQ_DONE)
        return true;
      stkr__cpu_relax();
    }
  }
  /* seq_cst: pairs with the handler's load of `waiting` after its CAS to
   * DONE (Dekker): either it sees us waiting and wakes the futex, or we
   * see DONE below (or the futex word changed before we slept). */
  atomic_store_explicit(&s->waiting, 1, memory_order_seq_cst);
  for (;;) {
    /* seq_cst (acquire at least: pairs with the handler's CAS to DONE). */
    uint32_t v = atomic_load_explicit(&s->req, memory_order_seq_cst);
    uint64_t now;
    if (v == STKR__REQ_DONE)
      break;
    now = stkr__now();
    if (now >= deadline) {
      atomic_store_explicit(&s->waiting, 0, memory_order_relaxed);
      return false;
    }
    stkr__futex_wait(&s->req, v, deadline - now);
  }
  atomic_store_explicit(&s->waiting, 0, memory_order_relaxed);
  return true;
}

int stkr__splat_deliver(stkr__sslot *s, unsigned timeout_ms) {
  struct sigaction cur;
  uint32_t expect;
  pid_t pid = getpid();

  if (sigaction(g_sig, NULL, &cur) != 0 || !stkr__ours(&cur)) {
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    return -EBUSY; /* the app took the signal over since setup */
  }
  if (s->blocked) {
    /* Each signal sent to a thread that blocks it stays queued: check
     * before adding another. */
    if (stkr__tid_blocks(s->os_tid)) {
      atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
      return -EDEADLK;
    }
    s->blocked = false;
  }
  s->sender_pid = pid;
  /* seq_cst (a release at least: the request fields, mode, site, payload,
   * sender_pid, for the handler), then `dead` again: a thread that began
   * its exit after our claim answers only a request it sees REQUESTED
   * (stkr__slot_going); one that went in between would leave this one
   * to its timeout. */
  atomic_store_explicit(&s->req, STKR__REQ_REQUESTED, memory_order_seq_cst);
  if (atomic_load_explicit(&s->dead, memory_order_seq_cst)) {
    expect = STKR__REQ_REQUESTED;
    if (atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                                STKR__REQ_IDLE,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      return -ESRCH;
    /* else the exit took it (RUNNING): its answer, -ESRCH, comes at once;
     * no signal to a thread that blocks it now */
  } else if (syscall(SYS_tgkill, pid, (pid_t)s->os_tid, g_sig) != 0) {
    int e = errno;
    expect = STKR__REQ_REQUESTED;
    /* EAGAIN: the queue of pending real-time signals is full, so they are
     * not being taken. A CAS, not a store: the thread's exit may have
     * taken the request meanwhile, and then answers it. */
    if (atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                                STKR__REQ_IDLE,
                                                memory_order_acq_rel,
                                                memory_order_acquire))
      return e == ESRCH ? -ESRCH : e == EAGAIN ? -EDEADLK : -e;
  }
  if (stkr__wait_done(s, stkr__now() + (uint64_t)timeout_ms * 1000000u))
    return 0;
  expect = STKR__REQ_REQUESTED;
  if (atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                              STKR__REQ_IDLE,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
    /* Withdrawn before the handler took it. Why was it not taken? */
    if (atomic_load_explicit(&s->dead, memory_order_seq_cst) ||
        (syscall(SYS_tgkill, pid, (pid_t)s->os_tid, 0) != 0 &&
         errno == ESRCH))
      return -ESRCH;
    if (stkr__tid_blocks(s->os_tid)) {
      s->blocked = true;
      return -EDEADLK;
    }
    return -ETIMEDOUT;
  }
  if (expect == STKR__REQ_DONE) {
    atomic_thread_fence(memory_order_acquire);
    return 0;
  }
  /* RUNNING: the handler is walking; it is short, give it a little more. */
  if (stkr__wait_done(s, stkr__now() + 50000000u))
    return 0;
  expect = STKR__REQ_RUNNING;
  if (!atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                               STKR__REQ_ABANDONED,
                                               memory_order_acq_rel,
                                               memory_order_acquire))
    return 0; /* it just finished: DONE, acquired by the failed CAS */
  return -ETIMEDOUT; /* the handler ends the request (IDLE) */
}
#endif /* !__APPLE__ */
