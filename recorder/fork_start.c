/*
 * fork_start.c: the wait of a followed fork child's other threads for the
 * start its first event runs (event.c, stkr__not_running; stkr_internal.h).
 * Split from event.c, the hot path: none of this runs once recording.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h> /* nanosleep */

#include "recorder/stkr_internal.h"

/* How long the events of other threads wait for the start (its files, its
 * worker: ~1 ms). Past it they are not recorded (-ENOTCONN, as before a
 * start): a start stuck behind a lock a waiting thread holds (malloc's,
 * taken by a signal handler that interrupted it) or a hung disk would
 * otherwise hold them for good. */
#define STKR__START_WAIT_NS 1000000000ull

/* Set on the thread running the start, from before it announces it until
 * it is over: its own signal handlers' events must not wait for it (they
 * would wait for themselves). */
static __thread bool tl_starting __attribute__((tls_model("initial-exec")));

/* The start's deadline (CLOCK_MONOTONIC ns), one for all waiters: written
 * before the CAS that announces the start (release), by every thread that
 * tries that CAS but only where the one there has passed (a thread that
 * lost the CAS, descheduled for a while, must not push the winner's
 * later), read by a waiter that saw the start (its own store, or a load
 * of the state that saw the winner's CAS: acquire). One per start, not a
 * second per event: a stuck start cost every later event of every thread
 * a second (review, session 39). */
static _Atomic uint64_t g_deadline_ns;

void stkr__start_begin(void) {
  const uint64_t now = stkr__clock_mono_ns();
  uint64_t old = atomic_load_explicit(&g_deadline_ns, memory_order_relaxed);

  tl_starting = true;
  while (old <= now &&
         !atomic_compare_exchange_weak_explicit(
             &g_deadline_ns, &old, now + STKR__START_WAIT_NS,
             memory_order_relaxed, memory_order_relaxed)) {
  }
}

void stkr__start_end(void) { tl_starting = false; }

void stkr__start_after_fork(void) {
  tl_starting = false;
  atomic_store_explicit(&g_deadline_ns, 0, memory_order_relaxed);
}

int stkr__start_wait(_Atomic int *state, int starting) {
  const struct timespec nap = {0, 50000}; /* 50 us */
  const uint64_t deadline =
      atomic_load_explicit(&g_deadline_ns, memory_order_relaxed);
  int now;

  if (tl_starting)
    return starting; /* a handler of the starting thread */
  for (;;) {
    now = atomic_load_explicit(state, memory_order_acquire);
    if (now != starting || stkr__clock_mono_ns() >= deadline)
      return now;
    nanosleep(&nap, NULL);
  }
}
