/*
 * drain_pass.c: who runs a drain pass, the end's budget, the reaping of
 * exited threads, and an end's last counters with no session file
 * (worker.h).
 * The worker runs every pass, unless an exit takes the last one over
 * (stkr__drain_take_over) from a parked worker; the passes themselves are
 * drain.c's. Split from drain.c, which reads the rings.
 */
#include <stdatomic.h>

#include "flush/worker.h"

/* ---- the exit deadline ---------------------------------------------------
 * The one place that decides how an ending session spends its budget (see
 * worker.h; stkr__drain_past_deadline is inline there). */

/* Time an ending session must have left to start a resolution that loads
 * nothing (lookups in an image already open: a new compile unit's index
 * is the most it builds, well under this). */
#define STKR__END_RESOLVE_SPARE_NS 10000000u /* 10 ms */

bool stkr__drain_may_symbolize(stkr__worker *w, const stkr__stack *s) {
  uint64_t stop = atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed);

  if (stop == 0)
    return true;
  /* The session is ending: a resolution that loads an image's debug info
   * can cost ~50-100 ms (the first stack into libc), the whole default
   * budget, and cannot be interrupted; a worker caught in it would miss
   * the end and lose every event still in the rings. So only a stack
   * whose PCs are cached or in images already open is resolved, with
   * time to spare (QA, session 27: a program's last call, in its own
   * already-open executable, was written image+offset). Others keep
   * their PCs and the image list: `stackrec symbolize` resolves them. */
  return stkr__clock_mono_ns() + STKR__END_RESOLVE_SPARE_NS < stop &&
         stkr__symc_ready(w->symc, s->pcs, s->depth);
}

bool stkr__drain_rings_settled(void) {
  /* No lock: only the worker removes threads from the registry, and it has
   * ended; the reap lock could be held by the very thread whose signal
   * handler is exiting. A producer that outlived the exit's quiesce is
   * still `busy` (the recorder is stopped, so none can start): its record
   * may land after our check, and only the ring file can keep it. */
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    /* Acquire: pairs with the release store that ends an event, as in
     * stkr__threads_quiesce(), so a finished push shows in the ring. */
    if (atomic_load_explicit(&t->busy, memory_order_acquire)) return false;
    if (t->ring.c != NULL &&
        (stkr__ring_unread(&t->ring) != 0 || stkr__ring_pending(&t->ring)))
      return false;
  }
  return true;
}

bool stkr__drain_claim(stkr__worker *w) {
  int free_ = STKR__PASS_FREE;
  return atomic_compare_exchange_strong_explicit(
      &w->pass_owner, &free_, STKR__PASS_WORKER, memory_order_acq_rel,
      memory_order_acquire);
}

void stkr__drain_unclaim(stkr__worker *w) {
  /* Release: this pass's writes, before a taking-over caller's reads. */
  atomic_store_explicit(&w->pass_owner, STKR__PASS_FREE, memory_order_release);
}

bool stkr__drain_take_over(stkr__worker *w) {
  int free_ = STKR__PASS_FREE;
  stkr__req *list;

  if (!atomic_compare_exchange_strong_explicit(
          &w->pass_owner, &free_, STKR__PASS_CALLER, memory_order_acq_rel,
          memory_order_acquire))
    return false;
  pthread_mutex_lock(&w->req_mu);
  w->end_requested = true;
  list = w->req_head;
  w->req_head = NULL;
  w->req_tail = &w->req_head;
  pthread_mutex_unlock(&w->req_mu);
  /* The worker's own start (the symbolizer) may not have run: this pass
   * then records PCs only, as offline mode does. */
  if (w->cfg.set.symbolize == STKR_SYMBOLIZE_INPROC && w->symc == NULL)
    w->cfg.set.symbolize = STKR_SYMBOLIZE_OFFLINE;
  stkr__drain_all(w, true);
  pthread_mutex_lock(&w->req_mu);
  stkr__req_answer(list, 0);
  w->ended = true;
  pthread_cond_broadcast(&w->req_cv);
  pthread_mutex_unlock(&w->req_mu);
  /* The parked worker wakes, fails its claim and leaves. */
  stkr__wake_post(&w->wake);
  return true;
}

/* ---- reaping exited threads ---------------------------------------------- */

void stkr__drain_reap(stkr__thread *t, stkr__thread *prev) {
  /* Its drops no written batch counts yet move to the session file's
   * retired drops, so that the ring can be handed on owing nothing. */
  stkr__thread_drops_settle(t);
  stkr__pmirror_free(t);
  /* recorder/ moves the thread's counters to its retired totals under
   * its reap lock, so stats never lose them nor read unmapped memory. */
  stkr__thread_reap(t, prev);
}

void stkr__drain_reap_written(stkr__worker *w) {
  stkr__thread *t, *next, *prev = NULL;

  w->reap_marked = false;
  for (t = stkr__threads_first(); t; t = next) {
    next = stkr__threads_next(t);
    if (!t->w_reap_after_write) {
      prev = t;
    } else if (t->ring.c && stkr__ring_pending(&t->ring)) {
      w->reap_marked = true; /* kept (a failed end): not this time */
      prev = t;
    } else {
      stkr__drain_reap(t, prev);
    }
  }
}

/* ---- the last counters, with no session file ----------------------------- */

/* The session's last batch could not be written, and no session file lets
 * recovery write its end (its rings were in memory): its final counters
 * alone, no event, into the room its last segment keeps past its end
 * (stkr__seg_append_last), so that what it lost is on disk. Before, it
 * read back as killed and short of the events it lost (QA, session 31:
 * 19 001 of 20 000 on a full disk, "adds up"). The failed batch's events
 * are counted already (keep_unwritten). */
void stkr__drain_put_last_counters(stkr__worker *w) {
  stkr__batchb *b = &w->bb;
  Stackrec__Batch *B = &b->batch;

  if (stkr__session_current() != 0)
    return; /* recovery writes the end from the ring files */
  stkr__batch_reset(b);
  stkr__batch_finish(b);
  B->seq = ++w->batch_seq;
  B->last = true;
  b->clock.mono_ns = stkr__clock_mono_ns();
  b->clock.wall_ns = stkr__clock_wall_ns();
  B->clock = &b->clock;
  stkr__drain_fill_counters(w, &b->counters);
  B->counters = &b->counters;
  w->out.len = 0;
  if (stkr_fmt_encode_batch(B, w->cctx, STKR__ZSTD_LEVEL, &w->out) != 0 ||
      stkr__seg_append_last(&w->seg, w->out.data, w->out.len) != 0) {
    w->batch_seq--;
    return;
  }
  pthread_mutex_lock(&w->stats_mu);
  w->batches++;
  pthread_mutex_unlock(&w->stats_mu);
  stkr__log(STKR__LOG_WRITE, "wrote the session's final counters into the "
            "room kept at the end of its last segment in %s", w->cfg.dir);
}
