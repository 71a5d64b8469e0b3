/*
 * lifecycle.c: stkr_init, stkr_flush, stkr_shutdown and
 * stkr_shutdown_for_exit one at a time. Each body (worker.c) tests the
 * session state and then acts on it: two threads' stkr_init launched two
 * workers, two stkr_shutdowns freed one worker twice or joined the wrong
 * thread (QA, session 23: SIGSEGV or a hang, 5 of 5 runs). stackrec.h
 * says they must not race; misuse still gets an errno, never a crash.
 *
 * stkr_shutdown_for_exit may run in a signal handler that interrupted
 * one of the others on its own thread: it only tries the lock, for at
 * most STKR__LIFE_EXIT_WAIT_MS, and otherwise returns -EBUSY without
 * touching the session (its events stay in the ring files for recovery).
 * A forked child's first event starts its session (worker.c,
 * on_fork_child) under the lock too, only trying it (it may be a signal
 * handler's event). The lock is made fresh in fork's child, by a handler
 * registered when the library loads: a fork while another thread held
 * it, before any stkr_init, left the child's first stkr_init blocked
 * (review, session 23).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "flush/worker.h"

#define STKR__LIFE_EXIT_WAIT_MS 100

static pthread_mutex_t g_life_mu = PTHREAD_MUTEX_INITIALIZER;

/* Until when (CLOCK_MONOTONIC ns) a stkr_shutdown_for_exit caller tries
 * the lock, 0: none. The mutex is not fair: a thread calling stkr_flush
 * in a loop took it back every time, and the exit gave up after its 100
 * ms (-EBUSY, no end mark; QA, session 39, 6 of 6 runs). The other calls
 * let such a caller go first, until then at most: a time, not a count, so
 * that a caller that never comes back (cancelled in its nanosleep, a
 * handler that longjmps) stops mattering once it is past (review, session
 * 39). Relaxed: only a hint of whom to let pass. */
static _Atomic uint64_t g_exit_until_ns;

/* The clock is read only when an exit waits: a program that forbade
 * itself the TSC (PR_SET_TSC, PR_TSC_SIGSEGV; the vDSO's clock_gettime
 * reads it) must never have it read for it (CI, session 39: SIGSEGV at
 * its stkr_shutdown). */
static bool exit_waiting(void) {
  const uint64_t until =
      atomic_load_explicit(&g_exit_until_ns, memory_order_relaxed);
  return until != 0 && stkr__clock_mono_ns() < until;
}

static void let_exit_first(void) {
  struct timespec ms = {0, 1000000};
  while (exit_waiting())
    nanosleep(&ms, NULL);
}

static void life_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g_life_mu, &fresh, sizeof fresh);
  atomic_store_explicit(&g_exit_until_ns, 0, memory_order_relaxed);
}

__attribute__((constructor)) static void life_register(void) {
  (void)pthread_atfork(NULL, NULL, life_atfork_child);
}

bool stkr__life_trylock(void) { return pthread_mutex_trylock(&g_life_mu) == 0; }

/* The control calls are no cancellation points: a thread cancelled inside
 * one (its wait for the worker's answer, a nanosleep) died holding
 * g_life_mu and the worker's request lock, and every later control call
 * blocked for ever (QA, session 41: pthread_cancel of a thread in
 * stkr_flush, then stkr_shutdown hung in 20 of 20 runs). A cancel stays
 * pending and acts at the caller's next cancellation point. glibc's and
 * Apple's pthread_setcancelstate are a flag in the thread: safe in
 * stkr_shutdown_for_exit's signal handler too. @return the state to give
 * back. */
static int no_cancel(void) {
  int old = PTHREAD_CANCEL_ENABLE;
  (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  return old;
}

static void cancel_back(int old) { (void)pthread_setcancelstate(old, NULL); }

void stkr__life_unlock(void) { pthread_mutex_unlock(&g_life_mu); }

int stkr_init(const stkr_config *in) {
  int cs = no_cancel();
  let_exit_first();
  pthread_mutex_lock(&g_life_mu);
  int err = stkr__life_init(in);
  pthread_mutex_unlock(&g_life_mu);
  cancel_back(cs);
  return err;
}

/* A flush on the recorder's own thread (the worker's dlclose of a module
 * reaching the hook library's) would wait for itself: refused before the
 * session's lock, which the thread waiting on the worker may hold. */
static bool own_thread(void) { return stkr__tls == STKR__THREAD_IGNORED; }

/* body() under the session's lock, an exit waiting let first, no
 * cancellation point in between. @return what body returned. */
static int locked(int (*body)(void)) {
  int cs = no_cancel();
  let_exit_first();
  pthread_mutex_lock(&g_life_mu);
  int err = body();
  pthread_mutex_unlock(&g_life_mu);
  cancel_back(cs);
  return err;
}

int stkr_flush(void) {
  if (own_thread()) return -EDEADLK;
  return locked(stkr__life_flush);
}

int stkr_flush_timeout(unsigned timeout_ms) {
  const uint64_t give_up =
      stkr__clock_mono_ns() + (uint64_t)timeout_ms * 1000000u;
  struct timespec ms = {0, 1000000};
  int err, cs;

  if (own_thread()) return -EDEADLK;
  cs = no_cancel();
  /* Only tried, as the exit does: the caller may be inside a control call
   * of its own (a dlclose reached from stkr_shutdown) or wait on a thread
   * that is; the deadline holds either way. */
  while (exit_waiting() || pthread_mutex_trylock(&g_life_mu) != 0) {
    if (stkr__clock_mono_ns() >= give_up) {
      cancel_back(cs);
      return -ETIMEDOUT;
    }
    nanosleep(&ms, NULL);
  }
  err = stkr__life_flush_until(give_up);
  pthread_mutex_unlock(&g_life_mu);
  cancel_back(cs);
  return err;
}

int stkr_shutdown(void) { return locked(stkr__life_shutdown); }

int stkr_shutdown_for_exit(void) {
  struct timespec ms = {0, 1000000};
  int tries = 0, err, cs = no_cancel();

  while (pthread_mutex_trylock(&g_life_mu) != 0) {
    /* Held: the others let us go first, until the tries' ~100 ms and
     * some are over (nanosleep sleeps longer, not shorter). The clock
     * only now (exit_waiting). */
    if (tries == 0)
      atomic_store_explicit(&g_exit_until_ns,
                            stkr__clock_mono_ns() +
                                (STKR__LIFE_EXIT_WAIT_MS + 50) * 1000000ull,
                            memory_order_relaxed);
    if (++tries > STKR__LIFE_EXIT_WAIT_MS) {
      atomic_store_explicit(&g_exit_until_ns, 0, memory_order_relaxed);
      /* Said, as a worker that misses the budget is (worker.c): else the
       * session just looked killed (CI, session 44: an _exit while
       * stkr_init still ran on another thread of a starved machine, the
       * first segment still empty). stkr__log takes no lock. */
      stkr__log(STKR__LOG_OTHER,
                "the recorder did not finish within %d ms at exit: another "
                "of its calls (a start or a flush, on another thread) held "
                "the session; what it recorded stays in the ring files for "
                "recovery ('stackrec recover', 'stackrec record', or the "
                "next stkr_init)", STKR__LIFE_EXIT_WAIT_MS);
      cancel_back(cs);
      return -EBUSY;
    }
    nanosleep(&ms, NULL); /* async-signal-safe */
  }
  if (tries != 0)
    atomic_store_explicit(&g_exit_until_ns, 0, memory_order_relaxed);
  err = stkr__life_shutdown_for_exit();
  pthread_mutex_unlock(&g_life_mu);
  cancel_back(cs);
  return err;
}
