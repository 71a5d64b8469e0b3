/*
 * signal_storm.h: the signal harness test-event.c and test-hostile.c share
 * (header-only: both are also built for aarch64 by tests/aarch64/run.sh
 * with the recorder alone). The thread records in a loop while ITIMER_REAL
 * fires a handler that records too; the thread drains its own ring as it
 * goes; then every attempt must be accounted for.
 */
#ifndef STKR_TEST_SIGNAL_STORM_H
#define STKR_TEST_SIGNAL_STORM_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>

#include "recorder/stkr_internal.h"

/* This thread's ring (it must have recorded or attached). */
static stkr__ring *storm_ring(void) {
  assert_true((uintptr_t)stkr__tls > STKR__THREAD_SENTINEL_MAX);
  return &stkr__tls->ring;
}

/* n events at site (payload len bytes) with ITIMER_REAL set to it (its
 * handler, installed by the caller, counts its calls in *handler_calls,
 * reset here, and records one event each). Every 64 events and at the
 * end (the timer stopped) each record of this thread's ring goes to
 * check (if not NULL) and is released. Then: every record pushed was read,
 * and pushed + dropped (ring full, re-entrant) == n + handler calls.
 * c0/c1: the counts before and after, for the caller's own checks. */
static void storm_run(stkr_site *site, const char *payload, size_t len,
                      uint64_t n, const struct itimerval *it,
                      volatile sig_atomic_t *handler_calls,
                      void (*check)(const stkr__record *rec),
                      stkr__counts *c0, stkr__counts *c1) {
  struct itimerval off;
  const stkr__record *rec;
  uint64_t seen = 0, i;

  stkr__threads_counts(c0);
  *handler_calls = 0;
  setitimer(ITIMER_REAL, it, NULL);
  for (i = 0; i < n; i++) {
    (void)stkr_event(site, payload, len);
    if (i % 64 == 0) {
      while ((rec = stkr__ring_peek(storm_ring())) != NULL) {
        if (check != NULL)
          check(rec);
        stkr__ring_release(storm_ring(), rec);
        seen++;
      }
    }
  }
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  while ((rec = stkr__ring_peek(storm_ring())) != NULL) {
    stkr__ring_release(storm_ring(), rec);
    seen++;
  }
  stkr__threads_counts(c1);
  assert_int_equal(c1->pushed - c0->pushed, seen);
  assert_int_equal((c1->pushed - c0->pushed) +
                       (c1->dropped_ring_full - c0->dropped_ring_full) +
                       (c1->dropped_reentrant - c0->dropped_reentrant),
                   n + (uint64_t)*handler_calls);
}

#endif
