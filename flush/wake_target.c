/*
 * wake_target.c: which worker the producers' wakes post to (a producer
 * whose ring passes half full, stkr_images_changed), and the bounded wait
 * for wakes still in flight when a session ends (worker.c), before its
 * worker and semaphore may be freed.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "flush/worker.h"

/* The producers' wake target. stkr__wake_worker does inc(inflight);
 * load(target); post; dec(inflight). Shutdown does store(target, NULL); wait until
 * inflight == 0; only then may the worker (and its semaphore) be freed.
 * Both sides are seq_cst (a Dekker pair): either the producer sees NULL, or
 * shutdown sees its inflight count and waits for the post to finish. */
static _Atomic(stkr__worker *) g_wake_target;
static _Atomic unsigned g_wake_inflight;

void stkr__wake_worker(void *arg) {
  (void)arg;
  atomic_fetch_add_explicit(&g_wake_inflight, 1, memory_order_seq_cst);
  stkr__worker *w = atomic_load_explicit(&g_wake_target, memory_order_seq_cst);
  if (w) stkr__wake_post(&w->wake);
  /* Release: pairs with the seq_cst load in stkr__wake_disarm; the post
   * above is complete before shutdown may free the semaphore. */
  atomic_fetch_sub_explicit(&g_wake_inflight, 1, memory_order_release);
}

void stkr_images_changed(void) {
  stkr__unwind_loads_hint(); /* before the hint: the worker reads it after */
  stkr__timer_hint();
  stkr__wake_worker(NULL);
}

/* A post is a few instructions and a syscall that never blocks, so
 * inflight drops to 0 within microseconds, unless a producer left
 * stkr__wake_worker without its decrement: a signal handler that
 * longjmp'd out of its interrupted event, an asynchronous cancel. That
 * count never drops (QA, session 24: an exit spun here at 100% CPU for
 * good), so the wait ends after STKR__WAKE_SETTLE_NS. @return false then: a post may be under way
 * still (a producer only descheduled there posts later), and the caller
 * keeps the worker (its semaphore) allocated for good (worker_free). A
 * count that never drops makes every later end wait so and keep its
 * worker too: never a free that a late post could follow (review). */
#define STKR__WAKE_SETTLE_NS 100000000u /* 100 ms */
bool stkr__wake_disarm(void) {
  uint64_t give_up = 0;
  atomic_store_explicit(&g_wake_target, NULL, memory_order_seq_cst);
  while (atomic_load_explicit(&g_wake_inflight, memory_order_seq_cst) != 0) {
    uint64_t now = stkr__clock_mono_ns();
    if (give_up == 0)
      give_up = now + STKR__WAKE_SETTLE_NS;
    else if (now >= give_up)
      return false;
    sched_yield();
  }
  return true;
}

/* Workers kept for good because a wake may still post to them, chained
 * (reachable: not a leak to LeakSanitizer). Control calls only. */
static stkr__worker *g_wake_kept;

void stkr__wake_keep(stkr__worker *w) {
  w->kept_next = g_wake_kept;
  g_wake_kept = w;
}

void stkr__wake_arm(stkr__worker *w) {
  atomic_store_explicit(&g_wake_target, w, memory_order_seq_cst);
}

void stkr__wake_forget_after_fork(void) {
  atomic_store_explicit(&g_wake_target, NULL, memory_order_relaxed);
  atomic_store_explicit(&g_wake_inflight, 0, memory_order_relaxed);
}
