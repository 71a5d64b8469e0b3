/*
 * hooks_signal.c: the hook library's signal-handler hooks (sigaction,
 * signal, bsd_signal, sysv_signal) and the end-signal check of a start
 * (preload.h). A process's recording starts at its first event
 * (preload.c, "Start at the first event"); these decide when that start
 * must come earlier, or not at all, because a signal handler may be
 * running.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "preload/preload.h"

/* A process that installs a handler for a signal that may come at any time
 * and often (a timer, SIGCHLD, SIGIO, SIGUSR1...) starts recording first.
 * The start allocates (malloc, pthread_create): run from a handler that
 * interrupted malloc (a 1 ms timer's handler whose getenv is the process's
 * first event), it corrupted the heap or deadlocked (9 of 40 and 18 of 30
 * runs, tests/test-preload-procs.c test_first_event_in_handler).
 * Installing the handler is the last moment at which the start is known to
 * run outside it. Two kinds of signal do not start it, because most
 * programs install handlers for them and make no watched call (gcc, cc1,
 * as, collect2 and make's children under `make -j2`):
 * - faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS), which arrive
 *   in the code that faulted, for a crash handler to report;
 * - the end of the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE,
 *   SIGABRT, SIGXCPU, SIGXFSZ), which comes once, for a handler to clean up.
 *   A first event while one of these is blocked on the thread (as it is in
 *   its own handler) does not start recording: it is not recorded, and
 *   counted and named in a note (g_deferred). Not seen: handlers installed
 *   by a raw rt_sigaction system call (some language runtimes), sigset,
 *   sigvec, and SA_NODEFER handlers of the second kind. */

/* Bit s: the app installed a handler for end signal s (< 64) while the
 * start was pending. Set by before_handler, read by start_now. */
static _Atomic uint64_t g_end_handlers;
/* First events not recorded because an end signal was blocked (maybe in
 * its handler), and the last such signal; reported by the start or the
 * end (report_deferred). */
static _Atomic unsigned g_deferred, g_deferred_sig;

/* Not in TSan builds (the tests' only): the TSan runtime's own start-up
 * installs its handlers through the next sigaction, ours, whose
 * instrumented code then runs before the runtime is ready (SIGSEGV in
 * __tsan_func_entry, python3 with libtsan preloaded). There a first event
 * in a handler still starts recording, which TSan itself reports
 * ("signal-unsafe call inside of a signal"): the two tests of it skip. */
#if !defined(__SANITIZE_THREAD__)
enum { SIG_STARTS, SIG_FAULT, SIG_END };
static int signal_kind(int sig) {
  switch (sig) {
  case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP:
  case SIGSYS:
    return SIG_FAULT;
  case SIGINT: case SIGTERM: case SIGHUP: case SIGQUIT: case SIGPIPE:
  case SIGABRT: case SIGXCPU: case SIGXFSZ:
    return SIG_END;
  default:
    return SIG_STARTS;
  }
}

static void before_handler(int sig, void (*handler)(int)) {
  int saved;

  if (handler == SIG_DFL || handler == SIG_IGN || sig <= 0 || sig >= 64 ||
      atomic_load_explicit(&stkr__pl.start, memory_order_acquire) !=
          STKR__PL_START_PENDING ||
      stkr__pl_guard || getpid() != stkr__pl_pid)
    return;
  switch (signal_kind(sig)) {
  case SIG_FAULT:
    return;
  case SIG_END:
    atomic_fetch_or_explicit(&g_end_handlers, 1ull << sig,
                             memory_order_relaxed);
    return;
  default:
    saved = errno;
    (void)stkr__pl_start_now();
    errno = saved;
  }
}

#endif /* !__SANITIZE_THREAD__ */

/* Might this thread be inside the handler of an end signal (one with an
 * app handler is blocked)? Then the start must not run here. */
bool stkr__pl_in_end_handler(void) {
  uint64_t bits =
      atomic_load_explicit(&g_end_handlers, memory_order_relaxed);
  sigset_t cur;

  if (bits == 0 || pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0)
    return false;
  for (int sig = 1; sig < 64; sig++)
    if ((bits >> sig & 1) && sigismember(&cur, sig) == 1) {
      atomic_fetch_add_explicit(&g_deferred, 1, memory_order_relaxed);
      atomic_store_explicit(&g_deferred_sig, (unsigned)sig,
                            memory_order_relaxed);
      return true;
    }
  return false;
}

/* Say how many first events in_end_handler kept from starting (to record,
 * or on stderr without it), once: a note of a process that records
 * (`started`), or why it recorded nothing. */
void stkr__pl_report_deferred(bool started) {
  unsigned n = atomic_exchange_explicit(&g_deferred, 0, memory_order_relaxed);
  if (n != 0)
    stkr__pl_note(started ? 0 : -EINTR,
                "%u watched call%s made while signal %u was blocked (maybe in "
                "its handler) before recording started: not recorded",
                n, n == 1 ? "" : "s",
                atomic_load_explicit(&g_deferred_sig, memory_order_relaxed));
}

#if !defined(__SANITIZE_THREAD__) /* see above */
typedef void (*handler_fn)(int);
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef handler_fn (*signal_fn)(int, handler_fn);

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  sigaction_fn fn = (sigaction_fn)stkr__pl_real(STKR__PL_R_sigaction);

  if (fn == NULL) {
    errno = ENOSYS;
    return -1;
  }
  /* sa_handler and sa_sigaction share storage: a SA_SIGINFO handler is a
   * function, never SIG_DFL or SIG_IGN. */
  if (act != NULL)
    before_handler(sig, act->sa_handler);
  return fn(sig, act, old);
}

/* signal, bsd_signal, sysv_signal: glibc's call its internal sigaction,
 * which the hook above does not see. */
static handler_fn signal_via(int real, int sig, handler_fn handler) {
  signal_fn fn = (signal_fn)stkr__pl_real(real);

  if (fn == NULL) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  before_handler(sig, handler);
  return fn(sig, handler);
}

handler_fn signal(int sig, handler_fn handler) {
  return signal_via(STKR__PL_R_signal, sig, handler);
}

handler_fn bsd_signal(int sig, handler_fn handler) {
  return signal_via(STKR__PL_R_bsd_signal, sig, handler);
}

handler_fn sysv_signal(int sig, handler_fn handler) {
  return signal_via(STKR__PL_R_sysv_signal, sig, handler);
}
#endif /* !__SANITIZE_THREAD__ */
