/*
 * wake_apple.c: stkr__wake on a Mach semaphore (see wake.h).
 * semaphore_signal is a Mach trap: async-signal-safe, no descriptor, no
 * lock. semaphore_timedwait takes a relative timeout, recomputed from the
 * monotonic deadline after every early return (KERN_ABORTED).
 * *Compile-checked on Linux against tests/apple_shim only; never run.*
 */
#if defined(__APPLE__)
#include <errno.h>
#include <mach/mach.h>

#include "flush/wake.h"
#include "recorder/stkr_internal.h"

int stkr__wake_init(stkr__wake *w) {
  semaphore_t s;
  atomic_init(&w->pending, 0);
  if (semaphore_create(mach_task_self(), &s, SYNC_POLICY_FIFO, 0) !=
      KERN_SUCCESS)
    return -ENOMEM;
  w->sem = s;
  return 0;
}

void stkr__wake_destroy(stkr__wake *w) {
  (void)semaphore_destroy(mach_task_self(), (semaphore_t)w->sem);
}

void stkr__wake_post(stkr__wake *w) {
  /* seq_cst: pairs with the worker's clear in stkr__wake_wait. */
  if (atomic_exchange_explicit(&w->pending, 1, memory_order_seq_cst) == 0)
    (void)semaphore_signal((semaphore_t)w->sem);
}

int stkr__wake_wait(stkr__wake *w, uint64_t deadline_ns) {
  kern_return_t kr;
  int r = -ETIMEDOUT;
  for (;;) {
    uint64_t now = stkr__clock_mono_ns();
    if (now >= deadline_ns) break;
    uint64_t left = deadline_ns - now;
    mach_timespec_t ts = {.tv_sec = (unsigned int)(left / 1000000000u),
                          .tv_nsec = (clock_res_t)(left % 1000000000u)};
    kr = semaphore_timedwait((semaphore_t)w->sem, ts);
    if (kr == KERN_SUCCESS) {
      r = 0;
      break;
    }
    if (kr != KERN_ABORTED) break; /* timed out (or a dead port: idle) */
  }
  atomic_store_explicit(&w->pending, 0, memory_order_seq_cst);
  return r;
}
#endif
