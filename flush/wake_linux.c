/*
 * wake_linux.c: stkr__wake on a POSIX unnamed semaphore (see wake.h). The
 * deadline is on CLOCK_MONOTONIC (sem_clockwait, glibc >= 2.30), so a wall
 * clock change neither stalls nor rushes the periodic drain.
 */
#if !defined(__APPLE__)
#define _GNU_SOURCE /* sem_clockwait */
#include <errno.h>
#include <time.h>

#include "flush/wake.h"

int stkr__wake_init(stkr__wake *w) {
  atomic_init(&w->pending, 0);
  /* pshared 0: process-private; a forked child gets a fresh one (wake.h). */
  return sem_init(&w->sem, 0, 0) == 0 ? 0 : -errno;
}

void stkr__wake_destroy(stkr__wake *w) { (void)sem_destroy(&w->sem); }

void stkr__wake_post(stkr__wake *w) {
  /* seq_cst: pairs with the worker's clear in stkr__wake_wait. */
  if (atomic_exchange_explicit(&w->pending, 1, memory_order_seq_cst) == 0)
    (void)sem_post(&w->sem); /* EOVERFLOW cannot happen: one post per clear */
}

int stkr__wake_wait(stkr__wake *w, uint64_t deadline_ns) {
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
  int r;
  do
    r = sem_clockwait(&w->sem, CLOCK_MONOTONIC, &ts);
  while (r != 0 && errno == EINTR);
  /* Cleared after waking, before the caller looks at rings and requests: a
   * post that comes later sees 0 and signals again (seq_cst pair). */
  atomic_store_explicit(&w->pending, 0, memory_order_seq_cst);
  return r == 0 ? 0 : -ETIMEDOUT;
}
#endif
