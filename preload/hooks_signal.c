/*
 * hooks_signal.c: the hook library's signal-handler hooks (sigaction,
 * signal, bsd_signal, sysv_signal). A process's recording starts at its
 * first event (preload.c, "Start at the first event"); these make it start
 * earlier, before a handler that could interrupt malloc is in place.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
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
 * programs install handlers for them and make no watched call (gcc, cc1
 * and as under `make -j2`; starting at each cost make -j2 1.4x):
 * - faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS), which arrive
 *   in the code that faulted, for a crash handler to report;
 * - the end of the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE,
 *   SIGABRT, SIGXCPU, SIGXFSZ), which comes once, for a handler to clean up.
 * A first watched call made inside such a handler, interrupting malloc,
 * still starts recording there: not guarded against (telling "in the
 * handler" from "blocked by the program", as threads of a sigwait design
 * keep them, needs the handler wrapped; preload/README.md). Not seen
 * either: handlers installed by a raw rt_sigaction system call (some
 * language runtimes), sigset, sigvec.
 *
 * Not in TSan builds (the tests' only): the TSan runtime's own start-up
 * installs its handlers through the next sigaction, ours, whose
 * instrumented code then runs before the runtime is ready (SIGSEGV in
 * __tsan_func_entry, python3 with libtsan preloaded). There a first event
 * in a handler still starts recording, which TSan itself reports
 * ("signal-unsafe call inside of a signal"): the test of it skips. */
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

  if (handler == SIG_DFL || handler == SIG_IGN || sig <= 0 ||
      atomic_load_explicit(&stkr__pl.start, memory_order_acquire) !=
          STKR__PL_START_PENDING ||
      stkr__pl_guard || getpid() != stkr__pl_pid)
    return;
  if (signal_kind(sig) != SIG_STARTS)
    return;
  saved = errno;
  (void)stkr__pl_start_now();
  errno = saved;
}

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
