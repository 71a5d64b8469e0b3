/*
 * drain_batch.c: a drain pass's batches (worker thread only): begin one,
 * fill its counters, write it (a segment's open, the encode, write(2), the
 * accounting of a failure), then hand the ring space it held back
 * (stkr__drain_release_all) and publish the new figures. Split from
 * drain.c, which reads the rings into the batch under way; the durability
 * rule (a record stays in its ring until its batch is written or counted
 * lost) is stated there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "flush/worker.h"

/* Epochs are unique for the life of the process (not per recording): a
 * thread's w_defined_seg survives stkr_shutdown()/stkr_init(), and must never
 * match an epoch of a later recording by accident. Only the worker thread
 * touches it, and successive worker threads are ordered by join/create. */
static uint32_t g_epoch;

uint32_t stkr__new_epoch(void) { return ++g_epoch; }

void stkr__drain_batch_begin(stkr__worker *w) {
  /* A new file is needed (none open, full, or unlinked behind our back):
   * everything must be defined again in it. */
  if (stkr__seg_need_new(&w->seg) && !w->seg_first) {
    w->epoch = stkr__new_epoch();
    w->seg_first = true;
  }
  stkr__batch_reset(&w->bb);
}

void stkr__drain_fill_counters(stkr__worker *w, Stackrec__Counters *c) {
  stkr_stats st;
  pthread_mutex_lock(&w->stats_mu);
  stkr__stats_compute_mark(w, &st);
  pthread_mutex_unlock(&w->stats_mu);
  c->attempted = st.attempted;
  c->written = st.written;
  c->dropped_write_error = st.dropped_write_error;
  c->segments_deleted = st.segments_deleted;
  c->dropped_ring_full = st.dropped_ring_full;
  c->dropped_reentrant = st.dropped_reentrant;
  c->dropped_other = st.dropped_other;
  c->dropped_exit = st.dropped_exit;
  w->exit_counted = st.dropped_exit;
  c->marks_dropped = stkr__marks_dropped() - w->marks_dropped_base;
}

/* The stack table past its cap (stkr_config.stack_table_bytes): renewed
 * here, right after a batch went out and before the next takes anything,
 * when nothing unwritten points into it. A record names its stack by its
 * PCs (a full record) or through its thread's mirror slot (a known one),
 * so the stacks the mirrors name are all a later record can need without
 * sending its PCs: they are kept, under new ids the mirrors take, and the
 * others forgotten (met again, they are interned and defined again).
 * The table must at least double between two renewals, so a table that
 * the mirrors alone fill (up to 128 stacks a thread) is not renewed at
 * every batch: renewals cost O(1) per stack met. */
static void renew_stacks(stkr__worker *w) {
  stkr__stacktab *st = &w->stacks;
  uint32_t base = st->id_base, max = stkr__stacktab_max_id(st), *keep;
  uint64_t bytes = stkr__stacktab_bytes(st);
  stkr__thread *t;

  if (bytes <= w->cfg.set.stack_table_bytes ||
      bytes <= 2 * w->stacks_kept_bytes)
    return;
  if ((keep = calloc(st->count, sizeof *keep)) == NULL)
    return; /* tried again after the next batch */
  for (t = stkr__threads_first(); t; t = stkr__threads_next(t))
    for (size_t i = 0; i < STKR__KNOWN_SLOTS; i++)
      if (t->w_slot_stack[i] > base && t->w_slot_stack[i] <= max)
        keep[t->w_slot_stack[i] - base - 1] = 1;
  if (stkr__stacktab_renew(st, keep) == 0) {
    for (t = stkr__threads_first(); t; t = stkr__threads_next(t))
      for (size_t i = 0; i < STKR__KNOWN_SLOTS; i++)
        if (t->w_slot_stack[i] > base && t->w_slot_stack[i] <= max)
          t->w_slot_stack[i] = keep[t->w_slot_stack[i] - base - 1];
    w->stacks_kept_bytes = stkr__stacktab_bytes(st);
    w->stack_renewals++;
  }
  free(keep);
}

void stkr__drain_publish(stkr__worker *w) {
  pthread_mutex_lock(&w->stats_mu);
  w->segments = w->seg.segments;
  w->segments_deleted = w->seg.segments_deleted;
  w->bytes = w->seg.bytes;
  w->stacks_count = w->stacks.interned;
  pthread_mutex_unlock(&w->stats_mu);
}

/* Batch.ring_pos: every thread with records read since the last write has
 * them in this batch (each write releases what was read before it). */
static void add_ring_pos(stkr__worker *w) {
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c && stkr__ring_pending(&t->ring))
      (void)stkr__batch_add_ring_pos(&w->bb, t->id,
                                     stkr__ring_read_pos(&t->ring));
  /* Out of memory: the position is missing, recovery falls back to the
   * ring's tail, which is exact unless we also crash before release. */
}

/* The batch holding every record read so far was written (or counted
 * lost): give the space back, and make the ring files' tails durable. */
void stkr__drain_release_all(void) {
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c) {
      stkr__ring_release_read(&t->ring);
      t->w_unreleased = 0;
    }
}

/* The worker's drops (records read but not held: dropped_worker) since the
 * last call, into the session file's drops_other, right before a release:
 * once released, their records are gone from the rings, and without this
 * a kill before the next written batch lost them from the accounting (QA,
 * session 27: 59 147 events under `ulimit -v`). Until the release,
 * recovery reads the records themselves. The drain pass's owner. */
void stkr__drain_file_worker_drops(stkr__worker *w) {
  uint64_t d = w->dropped_worker; /* written by the pass's owner only */
  if (d != w->dropped_worker_filed) {
    stkr__session_drops_worker(d - w->dropped_worker_filed);
    w->dropped_worker_filed = d;
  }
}

/* A batch of a session that is ending could not be written (its segment
 * cannot be opened: EMFILE after the app filled its descriptor table,
 * ENOSPC...): released, the records of ring files would be lost with
 * nothing on disk to count them. They stay in the files instead, for
 * recovery (`stackrec record`'s end, `stackrec recover`, the next
 * stkr_init), and freeze_stats counts them as pending_recovery. Records
 * of anonymous rings die with the process anyway: released, and @return
 * their number (dropped for the write error). */
static uint64_t release_anonymous(void) {
  uint64_t lost = 0;
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c && t->ring.session == 0) {
      stkr__ring_release_read(&t->ring);
      lost += t->w_unreleased;
      t->w_unreleased = 0;
    }
  return lost;
}

/* The batch being built is not written (keep_for_recovery): ring files
 * keep their records, anonymous rings' are counted as lost. */
static void keep_unwritten(stkr__worker *w) {
  uint64_t lost = release_anonymous();
  pthread_mutex_lock(&w->stats_mu);
  w->dropped_write_error += lost;
  pthread_mutex_unlock(&w->stats_mu);
  stkr__session_write_errors(w->dropped_write_error);
  stkr__drain_publish(w);
}

/* Why a batch could not be written, for a note. */
static const char *write_error_why(int err) {
  return err == -EFBIG ? "over the program's file size limit (RLIMIT_FSIZE)"
                       : strerror(-err);
}

/* The open batch as a segment's next frame: its header and images where
 * due, clock, counters, encoded and written (the segment opened first if
 * none is). @return 0, or a negative errno with *what the step that
 * failed. */
static int put_batch(stkr__worker *w, const char **what) {
  stkr__batchb *b = &w->bb;
  Stackrec__Batch *B = &b->batch;
  int err = 0;

  *what = "open";
  if (w->seg.fd < 0 && (err = stkr__seg_open_next(&w->seg)) != 0) return err;
  if (w->seg_first) {
    Stackrec__Header *h = &b->header;
    stkr_fmt_header_from_session(h, &b->config, &w->sess);
    h->segment_seq = w->seg.seq;
    h->session_first_seq = w->session_first_seq;
    h->dir_recreated = w->seg.dir_recreated;
    h->unwind_tables = w->uw_have ? &w->uw_pb : NULL;
    B->header = h;
  }
  if (w->seg_first || w->imgs.gen != w->imgs_gen_sent) {
    B->n_images = w->imgs.n;
    B->images = w->imgs.ptrs;
  }
  /* The cap before the write: this batch's counters count its deletions
   * (after the last batch they would be on no disk). */
  stkr__seg_enforce_cap(&w->seg);
  stkr__drain_publish(w);
  /* Back to back, so a reader can map mono timestamps to wall time. */
  b->clock.mono_ns = stkr__clock_mono_ns();
  b->clock.wall_ns = stkr__clock_wall_ns();
  B->clock = &b->clock;
  /* The first batch, before the start: nothing counted yet. Its Counters
   * were the previous session's producer totals (the same process's
   * threads), and recovery, which takes a session's largest, counted them
   * again (QA, session 41: 2 sessions, the first one's drops twice). */
  if (w->before_start) {
    b->counters.segments_deleted = w->seg.segments_deleted;
  } else {
    stkr__drain_fill_counters(w, &b->counters); /* notes the drops counted */
    /* Before the write: a death after it, before the commit in
     * stkr__drain_write_batch, must not leave recovery to count its new drops again. */
    stkr__threads_drops_pend(B->seq);
  }
  B->counters = &b->counters;

  w->out.len = 0;
  *what = "encode";
  if ((err = stkr_fmt_encode_batch(B, w->cctx, STKR__ZSTD_LEVEL, &w->out)) != 0)
    return err;
  *what = "write";
  return stkr__seg_write(&w->seg, w->out.data, w->out.len);
}

/* The session is ending (an exit's drain, or the last batch) and its batch
 * failed: the batch's records stay in the ring files (its number is not
 * used: no gap, nothing lost), and so do every later batch's. */
static void end_keeping_rings(stkr__worker *w, int err, const char *what) {
  w->batch_seq--;
  w->keep_for_recovery = true;
  w->write_err = err;
  /* Rings in memory (no session file) die with the process, counted by
   * keep_unwritten (QA, session 23: "stay in the ring files" of none). */
  stkr__log(STKR__LOG_WRITE, "cannot %s a segment file in %s: %s; %s", what,
            w->cfg.dir, write_error_why(err),
            stkr__session_current() != 0
                ? "the unwritten events stay in the ring files for recovery"
                : "the unwritten events are lost (its rings are in memory: "
                  "there is no session file)");
  pthread_mutex_lock(&w->stats_mu);
  w->write_errors++;
  pthread_mutex_unlock(&w->stats_mu);
  keep_unwritten(w);
}

/* Encode and write the open batch. Never fails from the caller's view: a
 * batch that cannot be written is dropped and counted, or, once the
 * session ends, left in the ring files (keep_for_recovery). */
void stkr__drain_write_batch(stkr__worker *w, bool last) {
  stkr__batchb *b = &w->bb;
  Stackrec__Batch *B = &b->batch;
  uint64_t n = b->n;
  const char *what;
  int err;

  if (w->keep_for_recovery) { /* an earlier batch of this end failed */
    keep_unwritten(w);
    if (last) stkr__drain_put_last_counters(w);
    return;
  }
  add_ring_pos(w);
  stkr__batch_finish(b);
  B->seq = ++w->batch_seq; /* failed batches keep their number: gaps show */
  B->last = last;
  err = put_batch(w, &what);

  /* For recovery: its batches continue after these. After the attempt,
   * not before: a death between a note of seq N and N's write left a gap
   * at N that verify called incomplete though recovery lost nothing. A
   * death after the write but before this note is covered by recovery's
   * scan of the newest segment, which holds batch N and its new stacks; a
   * failed write is noted too, so its gap stays (it lost events). */
  if (err != 0 &&
      (last || atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed))) {
    end_keeping_rings(w, err, what);
    if (last) stkr__drain_put_last_counters(w);
    return;
  }
  stkr__session_note(stkr__stacktab_max_id(&w->stacks), B->seq);
  /* Either way this image list is done with: on success it is on disk, on
   * failure the next segment's first batch carries it. */
  w->imgs_gen_sent = w->imgs.gen;
  if (err == 0) {
    if (w->seg_first) w->seg.dir_recreated = false; /* said in this Header */
    w->seg_first = false;
    /* Full: closed now, so a closed segment is complete on disk. */
    if (w->seg.cur_bytes >= w->seg.segment_bytes) stkr__seg_close(&w->seg);
    pthread_mutex_lock(&w->stats_mu);
    w->written += n;
    w->batches++;
    pthread_mutex_unlock(&w->stats_mu);
    /* Its counters are on disk: the ring files' drops they count are no
     * longer recovery's to add (common/stkr_ringfile.h, "drops"). The
     * worker's drops first: this batch counts them, and the commit makes
     * that its counted_other (a death between the write and this leaves
     * drops_other short of the pending count by them, which can hide as
     * many producer drops of the write's few microseconds; the reverse
     * order would count them twice). */
    if (!w->before_start) { /* the rings are still the last session's */
      stkr__drain_file_worker_drops(w);
      stkr__threads_drops_commit();
    }
  } else {
    /* The batch is lost, and with it the definitions it carried: start a
     * new epoch and a new file (the current one may hold a torn frame), so
     * later batches are self-contained in clean segments. */
    stkr__seg_close(&w->seg);
    w->epoch = stkr__new_epoch();
    w->seg_first = true;
    w->io_error = true;
    w->write_err = err;
    pthread_mutex_lock(&w->stats_mu);
    w->dropped_write_error += n;
    w->write_errors++;
    pthread_mutex_unlock(&w->stats_mu);
    /* Notes are rate-limited: this one speaks for its own batch, the
     * counters (verify) for all of them. */
    stkr__log(err == -ENOMEM ? STKR__LOG_ENCODE : STKR__LOG_WRITE,
              "cannot %s a segment file in %s: %s; this batch's %llu events "
              "dropped (every failed batch is counted: see verify)", what,
              w->cfg.dir, write_error_why(err), (unsigned long long)n);
    /* The batch's records are released next: this count is all that will
     * be left of them, and it must outlive a kill. Right before the
     * release, nothing between (the note above may block on a full pipe):
     * a kill between the two counts the batch twice, as lost and as
     * recovered, never not at all (review, session 22). */
    stkr__session_write_errors(w->dropped_write_error);
    stkr__drain_file_worker_drops(w);
  }
  stkr__drain_release_all();
  renew_stacks(w);
  stkr__drain_publish(w);
}


void stkr__drain_maybe_write_full(stkr__worker *w) {
  if (stkr__drain_batch_wants_write(w)) {
    stkr__drain_write_batch(w, false);
    stkr__drain_batch_begin(w);
  }
}
