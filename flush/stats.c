/*
 * stats.c: a recording's stkr_stats from the producers' counters
 * (recorder/, summed under its reap lock) and the worker's own. Split from
 * worker.c, which answers stkr_stats_get and freezes them at the end.
 */
#include <string.h>

#include "flush/worker.h"

/* The stats from the producers' counters c (recorder/) and w's own. */
static void stats_from(stkr__worker *w, const stkr__counts *cp,
                       stkr_stats *o) {
  const stkr__counts c = *cp;
  memset(o, 0, sizeof *o);
  o->dropped_ring_full = c.dropped_ring_full;
  o->dropped_reentrant = c.dropped_reentrant;
  o->dropped_other = c.dropped_other + w->dropped_worker;
  o->dropped_write_error = w->dropped_write_error;
  /* Left in memory rings by an exit out of time, and calls refused while
   * an exit ended the session (recorder/thread.c, stkr__late_call). */
  o->dropped_exit = w->dropped_exit + c.dropped_late;
  o->pending_recovery = w->pending_recovery;
  o->dropped = o->dropped_ring_full + o->dropped_reentrant +
               o->dropped_write_error + o->dropped_other + o->dropped_exit;
  /* dropped_worker events were pushed: they are in c.pushed already. */
  o->attempted = c.pushed + c.dropped_ring_full + c.dropped_reentrant +
                 c.dropped_other + c.dropped_late;
  o->written = w->written;
  o->stacks = w->stacks_count;
  o->sites = stkr__site_count();
  o->threads = w->threads;
  o->batches = w->batches;
  o->bytes = w->bytes;
  o->segments = w->segments;
  o->segments_deleted = w->segments_deleted;
  o->write_errors = w->write_errors;
}

void stkr__stats_compute(stkr__worker *w, stkr_stats *o) {
  stkr__counts c;
  /* The producers' counters, reaped threads included, summed by recorder/
   * under its reap lock (so never from an unmapped thread). Recorder start
   * zeroed them: they count since stkr_init. */
  stkr__threads_counts(&c);
  stats_from(w, &c, o);
}

void stkr__stats_compute_mark(stkr__worker *w, stkr_stats *o) {
  stkr__counts c;
  /* The batch's dropped_other counts the worker's drops too: so does
   * what the session file notes as counted (stkr__threads_counts_mark). */
  stkr__threads_counts_mark(&c, w->dropped_worker);
  stats_from(w, &c, o);
}
