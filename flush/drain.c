/*
 * drain.c: rings -> batches -> segment files. Runs on the worker thread only.
 *
 * One pass (stkr__drain_all) walks the thread registry; for each thread it
 * consumes the records that were in the ring when the pass reached it (a
 * producer that keeps pushing cannot keep the worker in one ring forever),
 * turning each into one event row plus whatever definitions the current
 * segment still lacks; a full batch is written and a new one begun, so a
 * pass may write several batches. Then the per-thread drop deltas, and the
 * reaping of exited threads whose rings are empty.
 *
 * Accounting: every consumed record ends up in exactly one of `written`
 * (its batch reached write(2) successfully), `dropped_write_error` (its
 * batch failed to encode, open or write) or `dropped_worker` (no memory to
 * put it in a batch). Hence, once all rings are drained,
 *   Σ pushed == written + dropped_write_error + dropped_worker,
 * which is what makes attempted == written + dropped exact after a flush.
 *
 * Durability (crash-proof rings): a consumed record stays in its ring (the
 * ring's `tail` is not advanced past it) until the batch holding it has
 * gone through write(2) or has been counted lost; only then does
 * release_all() hand the space back. The ring file's tail is therefore a
 * position below which everything is in a segment, and every batch carries
 * Batch.ring_pos (thread, end) for the threads whose records it holds, so
 * that recovery after a crash between write(2) and the tail store still
 * knows exactly where the segments end (proto/stkr_recover.c).
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

static void batch_begin(stkr__worker *w) {
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
  c->marks_dropped = stkr__marks_dropped() - w->marks_dropped_base;
}

static void publish(stkr__worker *w) {
  pthread_mutex_lock(&w->stats_mu);
  w->segments = w->seg.segments;
  w->segments_deleted = w->seg.segments_deleted;
  w->bytes = w->seg.bytes;
  w->stacks_count = w->stacks.count;
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
static void release_all(void) {
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
static void file_worker_drops(stkr__worker *w) {
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
  publish(w);
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
  publish(w);
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
     * write_batch, must not leave recovery to count its new drops again. */
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
static void write_batch(stkr__worker *w, bool last) {
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
  stkr__session_note((uint32_t)w->stacks.count, B->seq);
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
      file_worker_drops(w);
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
    file_worker_drops(w);
  }
  release_all();
  publish(w);
}

/* While a session ends, batches are cut at this many events, so that what
 * is pending when the drain deadline passes encodes in a millisecond or so
 * (a full batch of 65536 takes tens of ms on a starved core). */
#define STKR__EXIT_BATCH_EVENTS 4096u

static bool batch_wants_write(const stkr__worker *w) {
  return stkr__batch_full(&w->bb) ||
         (w->bb.n >= STKR__EXIT_BATCH_EVENTS &&
          atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed) != 0);
}

static void maybe_write_full(stkr__worker *w) {
  if (batch_wants_write(w)) {
    write_batch(w, false);
    batch_begin(w);
  }
}

static void count_thread(stkr__worker *w, uint32_t id) {
  /* Out of memory: the stat undercounts; nothing else depends on it. */
  if (stkr_bit_set(&w->thread_seen, &w->thread_seen_bytes, id) == 1) {
    pthread_mutex_lock(&w->stats_mu);
    w->threads++;
    pthread_mutex_unlock(&w->stats_mu);
  }
}

/* The thread id of t's events: a new one per rename applied. */
static uint32_t event_thread_id(const stkr__thread *t) {
  return t->w_ev_id ? t->w_ev_id : t->id;
}

/* The ThreadDef of a live thread, once per epoch (and after each rename
 * applied). `name` is written only at attach (or at a start, with no
 * worker running), before the thread was published (acquire chain through
 * the registry head), so reading it here is race-free; after a rename,
 * the worker's own copy of the name told. */
static __attribute__((noinline)) void define_thread_now(stkr__worker *w,
                                                        stkr__thread *t) {
  char name[sizeof t->name];
  memcpy(name, t->w_ev_id ? t->w_name : t->name, sizeof name);
  name[sizeof name - 1] = '\0';
  if (stkr__batch_add_thread(&w->bb, event_thread_id(t), t->tid, name,
                             false) == 0)
    t->w_defined_seg = w->epoch;
}
/* Asked before every record: the check inline, the definition (a copy of
 * the name) out of line, as a call per record it was ~4% of the worker's
 * time (perf, producers part D). */
static inline void define_thread(stkr__worker *w, stkr__thread *t) {
  if (t->w_defined_seg != w->epoch) define_thread_now(w, t);
}

/* The renames t told that take effect at or before ring position pos (a
 * record's): each gives its later events a new thread id and name, and
 * its slot back to the thread. */
static void apply_renames(stkr__thread *t, uint64_t pos) {
  /* Acquire: pairs with stkr_thread_renamed's release of rn_count. */
  uint32_t n = atomic_load_explicit(&t->rn_count, memory_order_acquire);

  if (!t->w_rn_lost_said &&
      atomic_load_explicit(&t->rn_lost, memory_order_relaxed) != 0) {
    t->w_rn_lost_said = true;
    stkr__log(STKR__LOG_OTHER, "thread %u (tid %llu) renamed itself more "
              "than %d times between two passes of the worker: some of its "
              "events carry an earlier name", (unsigned)t->id,
              (unsigned long long)t->tid, STKR__RENAMES);
  }
  while (t->w_rn_applied != n) {
    const uint32_t k = t->w_rn_applied % STKR__RENAMES;
    if (t->rn[k].pos > pos)
      break;
    memcpy(t->w_name, t->rn[k].name, sizeof t->w_name);
    t->w_name[sizeof t->w_name - 1] = '\0';
    t->w_ev_id = stkr__threads_new_id();
    t->w_defined_seg = 0; /* defined anew, under the new id */
    t->w_rn_applied++;
    /* Release: the slot is read; the thread may reuse it. */
    atomic_store_explicit(&t->w_rn_done, t->w_rn_applied,
                          memory_order_release);
  }
}

/* The stack id of a full record (interned, symbolized and defined in
 * this epoch if new), which becomes its slot's stack in t's mirror. */
static uint32_t full_record_stack(stkr__worker *w, stkr__thread *t,
                                  const stkr__record *r) {
  const stkr__record_full *f = stkr__record_as_full(r);
  size_t known = w->stacks.count;
  uint32_t stack = stkr__stacktab_intern(
      &w->stacks, f->key[0], r->site_id, stkr__record_pcs(r), r->depth,
      (r->flags & STKR__REC_STACK_TRUNCATED) != 0);

  /* 0 (out of memory): this event and the slot's known records keep
   * stack id 0, "unknown", until the slot's stack is sent again. */
  t->w_slot_stack[r->slot] = stack;
  /* In inproc mode the first resolution into a library loads its debug
   * info (~50-100 ms of CPU, uninterruptible), during which a burst can
   * overflow the rings; skipping it under pressure would leave the stack
   * unsymbolized for good (a reader keeps a stack's first definition), so
   * it is not skipped: bursts want offline mode (`stackrec record`'s
   * default), where the worker never symbolizes. */
  if (stack > known && w->symc) {
    stkr__stack *s = stkr__stacktab_get(&w->stacks, stack);
    if (stkr__drain_may_symbolize(w, s))
      stkr__drain_symbolize_stack(w, s);
  }
  return stack;
}

/* @return whether r's event went into the batch (else it was counted as
 * the worker's drop: dropped_worker). */
static bool add_record(stkr__worker *w, stkr__thread *t,
                       const stkr__record *r) {
  stkr__batchb *b = &w->bb;
  uint32_t site = r->site_id, stack;
  const uint8_t *payload = stkr__record_payload(r);

  if (r->flags & STKR__REC_PAYLOAD_NEW) {
    stkr__pmirror_learn(t, r->pslot, payload, r->payload_len);
  } else if ((r->flags & STKR__REC_PAYLOAD_KNOWN) &&
             (payload = stkr__pmirror_get(t, r->pslot, r->payload_len)) == NULL) {
    /* Its payload is not to be had: counted, never written without it.
     * Its stack (a full record) still teaches the stack mirror. */
    if (!stkr__record_known(r)) (void)full_record_stack(w, t, r);
    pthread_mutex_lock(&w->stats_mu);
    w->dropped_worker++;
    pthread_mutex_unlock(&w->stats_mu);
    return false;
  }

  define_thread(w, t);
  if (site >= 1 && site <= STKR_MAX_SITES && w->site_epoch[site] != w->epoch) {
    if (stkr__batch_add_site(b, site, stkr__site_name(site)) == 0)
      w->site_epoch[site] = w->epoch;
  }
  /* A known record: its stack is its slot's, from a full record read
   * earlier from this very ring (the producer's rule), with no PCs to
   * copy and no probe of the stack table. */
  stack = stkr__record_known(r) ? t->w_slot_stack[r->slot]
                                : full_record_stack(w, t, r);
  if (stack) {
    stkr__stack *s = stkr__stacktab_get(&w->stacks, stack);
    /* Its strings and frames first: a reader resolves the stack's frames
     * when it applies the StackDef. */
    if (s->epoch != w->epoch &&
        (s->n_frames == 0 || stkr__symc_emit(w->symc, s->frames, s->n_frames,
                                             w->epoch, &b->symdefs) == 0) &&
        stkr__batch_add_stack(b, stack, s) == 0)
      s->epoch = w->epoch;
  }
  if (stkr__batch_add_event(b, stkr_clock_to_ns(&w->clk, r->ts_ns), site,
                            event_thread_id(t), stack,
                            payload, r->payload_len,
                            (r->flags & STKR__REC_PAYLOAD_TRUNCATED) != 0) != 0) {
    pthread_mutex_lock(&w->stats_mu);
    w->dropped_worker++;
    pthread_mutex_unlock(&w->stats_mu);
    return false;
  }
  return true;
}

/* Does ring r put the worker under pressure (timer.c: passes back to back,
 * not on the 1 ms tick), `pressured` being the last pass's verdict? An
 * eighth full to enter; to stay, what came in during the last pass, down
 * to a sixty-fourth. A producer looping on a hooked call refills about an
 * eighth during a pass of a worker that keeps up with it, so with one
 * threshold the worker kept falling back to the tick, whose wake-ups this
 * VM delivers late, and the ring overflowed meanwhile (producers D,
 * session 13: a faster worker dropped 4-19%, median 8%, where a slower
 * one, which never fell back, dropped 5-6%). */
bool stkr__drain_under_pressure(bool pressured, const stkr__ring *r) {
  uint64_t unread = stkr__ring_unread(r), size = stkr__ring_size(r);
  return unread >= size / 8 || (pressured && unread >= size / 64);
}

/* Consume what is in t's ring now. Returns true if it was left empty. */
static bool drain_ring(stkr__worker *w, stkr__thread *t) {
  /* Budget: what was in the ring when we got here, plus one lap for wrap
   * markers; records pushed meanwhile wait for the next pass, so a
   * producer as fast as the worker cannot keep it in one ring forever. */
  uint64_t budget = stkr__ring_unread(&t->ring) + stkr__ring_size(&t->ring);
  uint64_t seen = 0, n = 0;
  uint64_t held = 0; /* events batched in this run, not yet in w_unreleased */
  const stkr__record *r;
  bool clock_fresh = false, empty = false;
  stkr__ring_cursor cur;

  /* The read position lives in `cur` until the end of this run (see
   * stkr__ring_cursor_load): stored back before anything that reads it,
   * i.e. before a batch's write (its ring_pos and release) and on return. */
  stkr__ring_cursor_load(&t->ring, &cur);
  /* Records read keep their space until their batch is written (see the
   * top): a producer that refills the ring while a long run reads it finds
   * it full of records already read, and drops. So once half the ring is
   * read and held, the batch is written and the space handed back (one
   * thread looping on a hooked call, producers part D, 3 s runs
   * interleaved: median 1.53% dropped -> 0.98%). */
  uint64_t held_from = stkr__ring_tail(&t->ring);
  const uint64_t held_max = stkr__ring_size(&t->ring) / 2;
  for (;;) {
    if ((r = stkr__ring_cursor_peek(&t->ring, &cur)) == NULL) {
      empty = true;
      break;
    }
    if (!clock_fresh) {
      /* The calibration of the recording these records belong to: a record
       * we see was committed after its producer saw RUNNING, which was
       * released after the start's calibration (a pass that began before
       * the start would otherwise convert ticks as nanoseconds). */
      w->clk_gen = stkr__clock_cal_get(&w->clk, w->clk_gen);
      clock_fresh = true;
    }
    if (seen >= budget || stkr__drain_past_deadline(w)) break;
    seen += r->size;
    if (batch_wants_write(w) || cur.pos - held_from >= held_max) {
      stkr__ring_cursor_store(&t->ring, &cur);
      /* Counted before the write: a write that fails at an end releases
       * a memory ring and counts w_unreleased as lost (review: left in
       * `held`, those were counted nowhere). */
      t->w_unreleased += held;
      held = 0;
      write_batch(w, false);
      batch_begin(w);
      held_from = cur.pos; /* released (or kept for recovery at an end) */
    }
    /* A rename told before this record's commit is seen now (rn_count is
     * released before the head that published the record). */
    if (atomic_load_explicit(&t->rn_count, memory_order_relaxed) !=
        t->w_rn_applied)
      apply_renames(t, cur.pos);
    /* Only an event in the batch is the batch's to lose: a record the
     * worker dropped is counted already (review). */
    held += add_record(w, t, r);
    /* After add_record copied it; the space is released after the
     * batch's write (release_all). */
    stkr__ring_cursor_next(&cur, r);
    n++;
  }
  stkr__ring_cursor_store(&t->ring, &cur);
  /* Renames told at or before the read position, with no record after
   * them yet: applied now, so that the queue empties every pass. */
  if (atomic_load_explicit(&t->rn_count, memory_order_relaxed) !=
      t->w_rn_applied)
    apply_renames(t, cur.pos);
  if (cur.corrupt != 0) {
    /* Records something else wrote over (stkr__ring_cursor_peek_slow):
     * how many events they held is unknown; one is counted, and the
     * recording's accounting no longer adds up, which verify names. */
    stkr__log(STKR__LOG_OTHER, "thread %u: %llu bytes of its ring were not "
              "records the recorder wrote (another process writing in it? a "
              "child made by a raw fork system call does); skipped",
              (unsigned)t->id, (unsigned long long)cur.corrupt);
    pthread_mutex_lock(&w->stats_mu);
    w->dropped_worker++;
    pthread_mutex_unlock(&w->stats_mu);
  }
  /* Relaxed atomic store: recorder/thread.c (stkr__counts_add) reads it on
   * any thread that asks for stats; we are its only writer. */
  __atomic_store_n(&t->w_consumed, t->w_consumed + n, __ATOMIC_RELAXED);
  /* Those since the run's last batch write (which took the ones before
   * into w_unreleased and released them): a memory ring's count of them
   * is what an end that cannot write loses (QA, session 38: the records
   * of the exit's 4096-event batches written in the run were counted
   * again as lost, written + dropped > attempted, verify "damaged"). */
  t->w_unreleased += held;
  w->consumed += n;
  return empty;
}

/* Drain t's ring; prev is the thread before t in the registry (NULL: t
 * may be the head). @return true when t was reaped (freed). */
static bool drain_thread(stkr__worker *w, stkr__thread *t, stkr__thread *prev) {
  /* Acquire, and before looking at the ring: pairs with the TLS
   * destructor's release store, which follows the thread's last commit.
   * Seen set here, the ring holds everything the thread will ever push, so
   * "ring empty" below really means "done". Read after draining instead,
   * a final record committed between our last peek and this load would be
   * reaped unread. */
  bool exited = atomic_load_explicit(&t->exited, memory_order_acquire) != 0;
  bool empty = true;

  stkr__pmirror_check_stale(t);
  if (t->ring.c) {
    empty = false;
    /* Past a leading wrap marker first: a producer's low-page reuse marker
     * (stkr__ring_reuse_low) can span half the ring, and is no pressure. */
    (void)stkr__ring_peek(&t->ring);
    if (stkr__drain_under_pressure(w->pressure, &t->ring))
      w->pressure_now = true;
    for (int pass = 0; pass < 4; pass++) {
      empty = drain_ring(w, t);
      /* Release: pairs with the producer's acquire load of wake_sent
       * before it decides to wake us again; a producer that sees 0 also
       * sees the tail we advanced, so it measures the drained ring.
       * Cleared after draining, a producer that filled the ring past half
       * while we drained saw wake_sent still set and did not wake us:
       * look again (the seq_cst fence orders our clear before the re-read
       * of head), or its ring could sit full until the timer. */
      atomic_store_explicit(&t->wake_sent, 0, memory_order_release);
      atomic_thread_fence(memory_order_seq_cst);
      if (stkr__ring_unread(&t->ring) <= stkr__ring_size(&t->ring) / 2) break;
    }
    if (t->w_consumed) count_thread(w, t->id);
    /* Its records hold their ring space until written (see the top):
     * a ring still more than half taken would stay so for the rest of
     * the pass, and its producer drop. Write now and give it back. */
    if (stkr__ring_used(&t->ring) > stkr__ring_size(&t->ring) / 2 &&
        stkr__batch_nonempty(&w->bb)) {
      write_batch(w, false);
      batch_begin(w);
    }
  }

  /* Drops since the last batch. Relaxed: monotone counters; a drop counted
   * after this read is reported in the next batch. */
  uint64_t full = atomic_load_explicit(&t->dropped_ring_full,
                                       memory_order_relaxed);
  uint64_t reent = atomic_load_explicit(&t->dropped_reentrant,
                                        memory_order_relaxed);
  if (full != t->w_reported_full || reent != t->w_reported_reentrant) {
    maybe_write_full(w);
    define_thread(w, t);
    if (stkr__batch_add_drops(&w->bb, t->id, full - t->w_reported_full,
                              reent - t->w_reported_reentrant, 0) == 0) {
      t->w_reported_full = full;
      t->w_reported_reentrant = reent;
    }
    count_thread(w, t->id);
  }

  /* Done: exited, and every record read. Its final ThreadDef goes into
   * this batch; the thread is reaped once its last records are written
   * and released (its ring file goes with it, and must not while a crash
   * could still need it): now if they are, else after this pass's write
   * (stkr__drain_reap_written). A thread pool that churns has its exited
   * threads' rings charged against the ring memory cap until reaped;
   * reaped a pass later, 64 alive threads left 800 unreaped, and new ones
   * found no ring (QA, session 29: 31% of 30,000 events dropped). */
  if (exited && empty && !t->w_reap_after_write) {
    char name[sizeof t->exit_name];
    /* Final name, written before `exited` was released (acquired above);
     * after a rename applied, the name of the id its events carry (a
     * rename after its last record changes nothing then). */
    memcpy(name, t->w_ev_id ? t->w_name : t->exit_name, sizeof name);
    name[sizeof name - 1] = '\0';
    /* A thread that never recorded (attached ahead of time, or all its
     * events dropped before any definition) needs no final ThreadDef. */
    if (t->w_defined_seg != 0) {
      maybe_write_full(w);
      (void)stkr__batch_add_thread(&w->bb, event_thread_id(t), t->tid, name,
                                   true);
      t->w_defined_seg = w->epoch;
    }
    t->w_reap_after_write = true;
    w->reap_marked = true;
  }
  if (t->w_reap_after_write && !(t->ring.c && stkr__ring_pending(&t->ring))) {
    stkr__drain_reap(t, prev);
    return true;
  }
  return false;
}

/* The final pass: what the rings still hold (pushed but never consumed)
 * when the exit's deadline stopped the drain. In a ring file (crash-proof
 * rings) it is not lost: the file stays, and recovery writes it out later
 * (stackrec record, stackrec recover, the next stkr_init): counted as
 * pending_recovery. In an anonymous ring it dies with the process: counted
 * as dropped_exit, so attempted == written + dropped + pending stays exact.
 * Reaped threads were drained to the end before they were reaped. */
static void count_left_at_exit(stkr__worker *w) {
  uint64_t lost = 0, kept = 0;
  stkr__thread *t;

  for (t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    /* Relaxed: a producer that outlived the quiesce may still push; what
     * it pushes after this read is the frozen stats' gap (worker.c). */
    uint64_t pushed = atomic_load_explicit(&t->pushed, memory_order_relaxed);
    uint64_t left = pushed > t->w_consumed ? pushed - t->w_consumed : 0;
    if (t->ring.session != 0)
      kept += left;
    else
      lost += left;
  }
  pthread_mutex_lock(&w->stats_mu);
  w->dropped_exit = lost;
  w->pending_recovery = kept;
  pthread_mutex_unlock(&w->stats_mu);
}

/* A record to read in any ring? (Past leading wrap markers, as
 * drain_thread reads: markers alone write no batch, and a segment opened
 * for them would stay empty.) */
static bool rings_unread(void) {
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c && stkr__ring_peek(&t->ring) != NULL) return true;
  return false;
}

/* A segment to write into before any record is read. Read first, a batch
 * that then finds no descriptor for its segment is dropped (EMFILE: the
 * app filled its table, often after closing ours, then ran on or ended;
 * QA: python3 lost its 300 events, and the files counted none of them).
 * Left unread, the records wait in the rings for a pass that can open one,
 * or, if the process ends first, for recovery from the ring files
 * (count_left_at_exit: pending_recovery). Other errors (ENOSPC, EACCES)
 * are left to write_batch, which drops and counts: they last, and the
 * rings would only fill. So is a stkr_flush's pass (w->barrier): its
 * caller is told (-EIO) and the counters add up when it returns.
 * @return false when the pass must not read. */
static bool segment_ready(stkr__worker *w) {
  int err;

  if (w->seg.fd >= 0 || w->barrier || !rings_unread()) return true;
  if ((err = stkr__seg_open_next(&w->seg)) != -EMFILE && err != -ENFILE)
    return true;
  stkr__log(STKR__LOG_WRITE, "cannot open a segment file in %s: %s; the "
            "events wait in the rings (a later pass writes them, or "
            "recovery if the process ends first)", w->cfg.dir,
            strerror(-err));
  return false;
}

void stkr__drain_all(stkr__worker *w, bool last) {
  stkr__thread *t, *next, *prev = NULL;
  int err;

  stkr__loader_scan_begin(); /* no fork mid-scan (worker.c) */
  err = stkr__images_refresh(&w->imgs);
  if (!last) /* not out of the exit budget */
    stkr__drain_unwind_tables(w);
  stkr__loader_scan_end();
  if (err < 0)
    stkr__log(STKR__LOG_OTHER, "cannot list loaded images: %s", strerror(-err));
  stkr__drain_images_changed(w);
  if (!stkr__session_check())
    stkr__log(STKR__LOG_OTHER, "lost the lock on the session file in %s (a "
              "descriptor closed by the program?); new threads' rings are "
              "not crash-proof", w->cfg.dir);

  /* A new anchor for this pass's records (and the start's calibration if
   * a recording started since the last pass). */
  w->clk_gen = stkr__clock_cal_get(&w->clk, w->clk_gen);
  stkr__clock_recal(&w->clk);
  batch_begin(w);
  w->pressure_now = false;
  bool read = segment_ready(w);
  for (t = read ? stkr__threads_first() : NULL; t; t = next) {
    /* Past an exit's deadline, not even the bookkeeping of the remaining
     * threads (reaping unmaps, which is slow with many threads running):
     * what their rings hold is counted by count_left_at_exit. */
    if (stkr__drain_past_deadline(w)) break;
    next = stkr__threads_next(t); /* before drain_thread may reap t */
    if (!drain_thread(w, t, prev)) prev = t;
  }

  stkr__counts c;
  stkr__threads_counts(&c);
  uint64_t other = c.dropped_other;
  if (read && other != w->other_reported) {
    maybe_write_full(w);
    if (stkr__batch_add_drops(&w->bb, 0, 0, 0, other - w->other_reported) == 0)
      w->other_reported = other;
  }

  /* Batches with nothing new are not written: an idle app costs no disk.
   * A changed image list alone is worth a batch (symbolization of later
   * events needs it, and a crash may leave no later batch). */
  if (last) count_left_at_exit(w);
  if (last || (read && (stkr__batch_nonempty(&w->bb) ||
                        w->imgs.gen != w->imgs_gen_sent)))
    write_batch(w, last);
  else {
    /* Read since the last write: wrap markers, or records the worker
     * dropped (the next batch's counters count them). */
    file_worker_drops(w);
    release_all();
  }
  if (!last && w->reap_marked) stkr__drain_reap_written(w);
  if (last) {
    /* This worker reads no more records: live threads' payload mirrors
     * go (a next recording's worker starts from cleared tables). */
    for (t = stkr__threads_first(); t; t = stkr__threads_next(t))
      stkr__pmirror_free(t);
    stkr__seg_close_final(&w->seg); /* no cap after it: see write_batch */
  }
  /* Ring files for threads about to start, after the reaping above has
   * handed its rings on (reusing them costs no file operation at all).
   * Only once a second thread has recorded: a single-threaded process (a
   * forked child, a short command under `stackrec record`) would pay for
   * files it never uses, and unlink them again at its exit. */
  if (!last && c.threads >= 2) stkr__ringfile_prefill();
  publish(w);
  w->pressure = w->pressure_now;
}

void stkr__drain_first_batch(stkr__worker *w) {
  w->before_start = true;
  batch_begin(w);
  write_batch(w, false);
  w->before_start = false;
}
