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
 * stkr__drain_release_all() (drain_batch.c) hand the space back. The ring
 * file's tail is therefore a position below which everything is in a
 * segment, and every batch carries Batch.ring_pos (thread, end) for the
 * threads whose records it holds, so that recovery after a crash between
 * write(2) and the tail store still knows exactly where the segments end
 * (proto/stkr_recover.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "flush/worker.h"

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
  uint32_t known = stkr__stacktab_max_id(&w->stacks);
  uint32_t stack = stkr__stacktab_intern(
      &w->stacks, f->key[0], r->site_id, stkr__record_pcs(r), r->depth,
      (r->flags & STKR__REC_STACK_TRUNCATED) != 0);

  /* 0 (out of memory, or the session's 4 G stack ids used up): this event
   * and the slot's known records keep stack id 0, "unknown", until the
   * slot's stack is sent again. Said (rate-limited), as nothing else
   * counts it. */
  if (stack == 0)
    stkr__log(STKR__LOG_OTHER, "cannot keep a new stack (out of memory, or "
              "the session's stack ids used up): its events are written "
              "without it, as stack 0 (\"unknown\")");
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
  /* 0 stays "unknown"; a mirror holds only this generation's ids (the
   * renewal remaps them: drain_batch.c), so this is a guard, not a path. */
  if (!stkr__stacktab_has(&w->stacks, stack))
    stack = 0;
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
    if (stkr__drain_batch_wants_write(w) || cur.pos - held_from >= held_max) {
      stkr__ring_cursor_store(&t->ring, &cur);
      /* Counted before the write: a write that fails at an end releases
       * a memory ring and counts w_unreleased as lost (review: left in
       * `held`, those were counted nowhere). */
      t->w_unreleased += held;
      held = 0;
      stkr__drain_write_batch(w, false);
      stkr__drain_batch_begin(w);
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
     * batch's write (stkr__drain_release_all). */
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
      stkr__drain_write_batch(w, false);
      stkr__drain_batch_begin(w);
    }
  }

  /* Drops since the last batch. Relaxed: monotone counters; a drop counted
   * after this read is reported in the next batch. */
  uint64_t full = atomic_load_explicit(&t->dropped_ring_full,
                                       memory_order_relaxed);
  uint64_t reent = atomic_load_explicit(&t->dropped_reentrant,
                                        memory_order_relaxed);
  if (full != t->w_reported_full || reent != t->w_reported_reentrant) {
    stkr__drain_maybe_write_full(w);
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
      stkr__drain_maybe_write_full(w);
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
 * are left to stkr__drain_write_batch, which drops and counts: they last, and the
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

/* See worker.h. Calls refused while this exit ends the session
 * (recorder/thread.c, stkr__late_call), made after the last batch's
 * counters by the threads that run on, most of them while the session's
 * files were handed on: one more batch of counters (last too), a few
 * times at most and within the budget. Each takes tens of microseconds,
 * so the threads still calling add fewer each time; what comes after the
 * last one is not counted (stackrec.h). Keeping the files for recovery
 * instead cost an exec's next image that recovery at its first event (QA,
 * session 46: 34-188 ms). */
void stkr__drain_end_late(stkr__worker *w, uint64_t until_ns) {
  /* The exit's whole budget, not the drain's half of it: a drain of full
   * rings uses all of that half while the threads go on calling (QA,
   * session 46: 79 000 calls of 8 looping threads uncounted). */
  for (int i = 0; i < 3 && !w->keep_for_recovery &&
                  stkr__clock_mono_ns() < until_ns;
       i++) {
    stkr_stats st;
    pthread_mutex_lock(&w->stats_mu);
    stkr__stats_compute(w, &st);
    pthread_mutex_unlock(&w->stats_mu);
    /* Not return: the final segment is closed below either way (its end
     * mark and the reserve given back; a session 46 version returned here,
     * and every exit without late calls left them: QA, session 47). */
    if (st.dropped_exit <= w->exit_counted)
      break;
    stkr__drain_batch_begin(w);
    stkr__drain_write_batch(w, true);
  }
  stkr__seg_close_final(&w->seg);
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
  stkr__drain_batch_begin(w);
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
    stkr__drain_maybe_write_full(w);
    if (stkr__batch_add_drops(&w->bb, 0, 0, 0, other - w->other_reported) == 0)
      w->other_reported = other;
  }

  /* Batches with nothing new are not written: an idle app costs no disk.
   * A changed image list alone is worth a batch (symbolization of later
   * events needs it, and a crash may leave no later batch). */
  if (last) count_left_at_exit(w);
  if (last || (read && (stkr__batch_nonempty(&w->bb) ||
                        w->imgs.gen != w->imgs_gen_sent)))
    stkr__drain_write_batch(w, last);
  else {
    /* Read since the last write: wrap markers, or records the worker
     * dropped (the next batch's counters count them). */
    stkr__drain_file_worker_drops(w);
    stkr__drain_release_all();
  }
  if (!last && w->reap_marked) stkr__drain_reap_written(w);
  if (last) {
    /* This worker reads no more records: live threads' payload mirrors
     * go (a next recording's worker starts from cleared tables). */
    for (t = stkr__threads_first(); t; t = stkr__threads_next(t))
      stkr__pmirror_free(t);
    /* no cap after it: see put_batch. An exit's end closes it later
     * (stkr__drain_end_late), after the session's files. */
    if (atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed) == 0)
      stkr__seg_close_final(&w->seg);
  }
  /* Ring files for threads about to start, after the reaping above has
   * handed its rings on (reusing them costs no file operation at all).
   * Only once a second thread has recorded: a single-threaded process (a
   * forked child, a short command under `stackrec record`) would pay for
   * files it never uses, and unlink them again at its exit. */
  if (!last && c.threads >= 2) stkr__ringfile_prefill();
  stkr__drain_publish(w);
  w->pressure = w->pressure_now;
}

void stkr__drain_first_batch(stkr__worker *w) {
  w->before_start = true;
  stkr__drain_batch_begin(w);
  stkr__drain_write_batch(w, false);
  w->before_start = false;
}
