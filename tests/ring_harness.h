/*
 * ring_harness.h: what test-event.c and test-hostile.c share to drive the
 * recorder's rings directly, without the flush worker (header-only: both
 * are also built for aarch64 by tests/aarch64/run.sh with the recorder
 * alone): starting and stopping the recorder, this thread's ring, and the
 * signal storm (the thread records in a loop while ITIMER_REAL fires a
 * handler that records too; the thread drains its own ring as it goes;
 * then every attempt must be accounted for).
 */
#ifndef STKR_TEST_RING_HARNESS_H
#define STKR_TEST_RING_HARNESS_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>

#include "recorder/stkr_internal.h"

/* Start the recorder (no worker: the test reads the rings itself).
 * @return stkr__recorder_start's result. */
static __attribute__((unused)) int rh_start(size_t ring_bytes,
                                            unsigned max_depth,
                                            unsigned payload_max) {
  stkr__rconf rc = {.ring_bytes = ring_bytes, .max_depth = max_depth,
                    .payload_max = payload_max};
  return stkr__recorder_start(&rc, NULL, NULL, NULL);
}

/* The payload of a record read from one ring in order, as the worker
 * gets it (common/stkr_ringfile.h, "Payloads"): a PAYLOAD_NEW record's
 * bytes become its slot's, a PAYLOAD_KNOWN record repeats them. Every
 * record of the ring must go through here, in order (or the mirror be
 * forgotten with the ring's reset: rh_payload_forget). NULL when the
 * slot's bytes were never seen. */
static uint8_t g_rh_pmirror[STKR__PKNOWN_SLOTS][STKR_MAX_PAYLOAD];
static uint16_t g_rh_plen[STKR__PKNOWN_SLOTS];
static __attribute__((unused)) void rh_payload_forget(void) {
  memset(g_rh_plen, 0, sizeof g_rh_plen);
}
static __attribute__((unused)) const uint8_t *rh_payload(
    const stkr__record *rec) {
  if (rec->flags & STKR__REC_PAYLOAD_NEW) {
    memcpy(g_rh_pmirror[rec->pslot], stkr__record_payload(rec),
           rec->payload_len);
    g_rh_plen[rec->pslot] = rec->payload_len;
  } else if (rec->flags & STKR__REC_PAYLOAD_KNOWN) {
    return g_rh_plen[rec->pslot] == rec->payload_len
               ? g_rh_pmirror[rec->pslot]
               : NULL;
  }
  return stkr__record_payload(rec);
}

/* A cmocka teardown: stop the recorder, empty this thread's ring. */
static __attribute__((unused)) int rh_stop(void **state) {
  stkr__thread *t = stkr__tls;
  (void)state;
  stkr__recorder_stop();
  if ((uintptr_t)t > STKR__THREAD_SENTINEL_MAX)
    stkr__ring_reset(&t->ring);
  rh_payload_forget();
  return 0;
}

/* This thread's ring (it must have recorded or attached). */
static stkr__ring *rh_ring(void) {
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
static __attribute__((unused)) void storm_run(stkr_site *site, const char *payload, size_t len,
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
      while ((rec = stkr__ring_peek(rh_ring())) != NULL) {
        if (check != NULL)
          check(rec);
        stkr__ring_release(rh_ring(), rec);
        seen++;
      }
    }
  }
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  while ((rec = stkr__ring_peek(rh_ring())) != NULL) {
    if (check != NULL)
      check(rec);
    stkr__ring_release(rh_ring(), rec);
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
