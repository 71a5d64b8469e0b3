/*
 * worker.h: the flush worker's state, shared by worker.c (wait loop,
 * requests, init/shutdown/fork, stats), drain.c (rings -> batches) and
 * drain_batch.c (batches -> segments).
 */
#ifndef STKR_FLUSH_WORKER_H
#define STKR_FLUSH_WORKER_H

#include <pthread.h>
#include <zstd.h>

#include "flush/flush_internal.h"
#include "flush/wake.h"
#include "proto/stkr_format.h"

/* zstd level of every frame the worker writes: 1. Against level 3
 * (zstd's default, and the tools' when they rewrite segments), measured
 * in session 13: the worker's CPU per event in flush_throughput -20 to
 * -25% (uniform 66 -> 50 ns, one stack 45 -> 36), bytes per event +3-4%
 * there (uniform 1.443 -> 1.488), and the same to the byte (422,810
 * against 422,644) for 35,577 events whose payloads are distinct paths
 * (python3 stat()ing /usr/share). The worker's CPU is what a recorded app
 * pays, and what decides whether it keeps up with a burst. */
#define STKR__ZSTD_LEVEL 1

/* A flush request; the caller blocks on req_cv until the worker sets
 * `done`. stkr_flush's is on its stack. stkr_flush_timeout's is allocated:
 * a caller that stops waiting at its deadline sets `abandoned` (under
 * req_mu) and leaves it to the worker, whose answer frees it
 * (stkr__req_answer). (The end of a session is not a queued request: its
 * caller may stop waiting at its deadline, see end_requested.) */
typedef struct stkr__req {
  int result;
  bool done;
  bool abandoned;
  struct stkr__req *next;
} stkr__req;

/* Answer every request of `list` with `result`: done, or freed if its
 * caller abandoned it. The caller holds req_mu and broadcasts req_cv. */
void stkr__req_answer(stkr__req *list, int result);

typedef struct stkr__worker {
  stkr__fconfig cfg;
  /* Who, when and with which settings (stkr__session_template, once, by
   * worker_create; read-only after): the template of the session file's
   * header and of every segment's Header, so that both say the same. Its
   * session_id names the session's segments, its session file and its
   * ring files (recorder/ringfile.c); its fields past the Config's are
   * unused. */
  stkr_sessfile_hdr sess;

  /* The seq of the session's first segment (Header.session_first_seq).
   * Written by worker_create, read by drain. */
  uint32_t session_first_seq;

  /* ---- wake-up: posted by producers past half-full rings and by every
   * request; the worker waits on it with the next periodic drain as its
   * deadline. No descriptor (wake.h). ---- */
  stkr__wake wake;
  pthread_t thread;
  /* The worker thread's stack, written by it at start; read only by a
   * forked child's atfork handler (see there). */
  uintptr_t stack_lo, stack_hi;

  /* ---- requests: req_mu protects the queue, every req->done and the
   * end-of-session fields below ---- */
  pthread_mutex_t req_mu;
  pthread_cond_t req_cv;
  stkr__req *req_head, **req_tail;
  bool end_requested; /* caller -> worker: drain by stop_by_ns, then end */
  bool ended;         /* worker -> caller: last batch written, thread done
                         with w (its last touch of it) */
  bool thread_gone;   /* an abandoned worker's thread was joined (else
                         detached); controlling thread only */
  bool thread_done;   /* worker -> reap_abandoned: the thread's last touch
                         of w (set with `ended`, or after a take-over) */
  bool end_given_up;  /* caller -> worker: an exit stopped waiting for
                         `ended`, so no stkr__drain_end_late will close
                         the final segment: the worker closes it */
  /* Who may run a pass (STKR__PASS_*): the worker claims it around each of
   * its passes; an exiting caller takes it for good while the worker is
   * parked (stkr__drain_take_over) and ends the session itself, so an exit
   * never waits for the worker thread to be scheduled (on a loaded machine
   * that wait was most of a short process's recorded cost). CAS acq_rel:
   * each owner's writes to the worker's state happen before the next
   * owner's reads. */
  _Atomic int pass_owner;
  bool taken_over; /* the ending caller's own note for abandon() */
  bool wake_unsettled; /* a producer's wake count never settled: w is
                          never freed (wake_target.c) */
  struct stkr__worker *kept_next; /* the chain of such workers */
  /* The end-of-session drain deadline (CLOCK_MONOTONIC ns; 0: none).
   * Written once by the ending caller, before it stops
   * the recorder; read by the worker per record, relaxed: a pass that
   * misses the store only drains a little longer, and the final pass runs
   * after end_requested was read under req_mu, which orders both stores
   * before it. */
  _Atomic uint64_t stop_by_ns;

  /* ---- worker-thread-only state ---- */
  stkr__stacktab stacks;
  /* What the last renewal of `stacks` kept (drain_batch.c), and how many
   * renewals there were (for a debugger: stkr_stats, whose layout is the
   * ABI's, does not carry it). */
  uint64_t stacks_kept_bytes, stack_renewals;
  stkr__segw seg;
  stkr__batchb bb;
  stkr__images imgs;
  uint64_t imgs_gen_sent; /* images.gen last put in a batch */
  /* Inproc symbolization (NULL in the offline and none modes): each stack
   * new to the recording gets its frames here, on this thread only. */
  stkr__symc *symc;
  uint64_t imgs_gen_unwind; /* images.gen the published unwind tables were
                               built for (STKR_UNWIND_TABLES) */
  Stackrec__UnwindTables uw_pb; /* their figures, for each Header */
  bool uw_have;
  uint64_t imgs_gen_app;  /* images.gen whose app flags (and symbolizer
                             image list) are set */
  ZSTD_CCtx *cctx;
  stkr_fmt_buf out;
  /* Definitions are re-emitted per "epoch": a fresh epoch starts with each
   * segment file and after any failed batch, so every segment carries the
   * definitions its events use even when an earlier batch was lost. */
  uint32_t epoch;
  /* stkr__marks_dropped() when the session began (worker_create): the
   * process-wide count runs on across sessions and into forked children,
   * which copy it; the Counters say this session's. Written once, before
   * the thread starts; read by it. */
  uint64_t marks_dropped_base;
  bool seg_first;         /* the next batch starts a segment: Header+images */
  /* The batch being written is the session's first, written before
   * recorder/ started the session (stkr__drain_first_batch): the
   * producers' counters are still the previous session's (threads live
   * across sessions), so its Counters are the start's zeros and no ring's
   * drops are noted as counted. Starting thread only, before the worker
   * thread exists. */
  bool before_start;
  uint32_t site_epoch[STKR_MAX_SITES + 1];
  uint64_t batch_seq;
  bool io_error;          /* a batch failed since the last stkr_flush */
  int write_err;          /* the last failed batch's -errno (0: none) */
  /* This pass serves a stkr_flush (worker thread only): a barrier must
   * end with every event written or dropped and counted, so it reads the
   * rings even when no segment can be opened (drain.c, segment_ready). */
  bool barrier;
  /* A write failed while the session ended: what is still unwritten in
   * ring files stays there for recovery (drain_batch.c, stkr__drain_write_batch); nothing
   * more is written. */
  bool keep_for_recovery;
  uint64_t other_reported; /* counts.dropped_other in the last Drops */
  /* dropped_worker as the session file has it (drain_batch.c, stkr__drain_file_worker_drops;
   * the drain pass's owner only). */
  uint64_t dropped_worker_filed;
  uint8_t *thread_seen;   /* bitmap by thread id: counted in stats.threads */
  size_t thread_seen_bytes;

  /* ---- stats: stats_mu protects the worker's counters below; the
   * producers' counters come from stkr__threads_counts() ---- */
  pthread_mutex_t stats_mu;
  uint64_t written, dropped_write_error, dropped_worker; /* ENOMEM */
  /* Records left in the rings when the end-of-session drain reached its
   * deadline (set once, by the final drain): in anonymous rings (lost),
   * and in ring files (kept for recovery). */
  uint64_t dropped_exit, pending_recovery;
  /* stkr_stats.dropped_exit as the last batch's Counters say it (the
   * pass's owner, stkr__drain_fill_counters): what calls refused while an
   * exit ends the session came after it (drain.c, stkr__drain_end_late). */
  uint64_t exit_counted;
  /* Records consumed from the rings (worker thread only; not under
   * stats_mu): every one is in written, dropped_write_error, dropped_worker
   * or the batch being built. */
  uint64_t consumed;
  /* Set by a drain pass that found some ring at least an eighth full,
   * or a sixty-fourth when the pass before was pressured
   * (stkr__drain_under_pressure; worker thread only): pressure_now from
   * the moment it is found, pressure once the pass ended (the next pass follows at once, then
   * every 1 ms, instead of the configured interval: worker.c, the
   * adaptive timer). */
  bool pressure, pressure_now;
  /* A thread was marked to be reaped after this pass's write (drain.c
   * marks, stkr__drain_reap_written reaps; worker thread only). */
  bool reap_marked;
  /* The event clock's calibration (recorder/clock.c): the start's, then
   * refined at every pass; converts records' ts. Worker thread only. */
  stkr_clock_cal clk;
  uint32_t clk_gen;
  uint64_t threads, batches, bytes, segments, segments_deleted, write_errors;
  uint64_t stacks_count;
} stkr__worker;

/* drain_batch.c: a new epoch of definitions (unique for the process). */
uint32_t stkr__new_epoch(void);
/* drain.c */
/* Drain every ring into batches and write them. `last`: the end of the
 * session (always written, Batch.last set, segment closed). Every pass obeys
 * w->stop_by_ns when an end was requested: it stops consuming at that
 * deadline and resolves no new stack (they keep their PCs; `stackrec
 * symbolize` resolves them later); the last pass
 * counts what it left in the rings as dropped_exit. This is the one place
 * that decides what an exit leaves behind. */
void stkr__drain_all(stkr__worker *w, bool last);
/* The session's first batch (Header and image list, no events), written
 * by the thread that starts recording, before any producer can push and
 * before the worker thread exists: a process killed before the worker's
 * first pass still leaves its image list, so the events recovered from
 * its ring files can be symbolized. A failure is counted and logged like
 * any batch's. */
void stkr__drain_first_batch(stkr__worker *w);
/* An exit's end, after its last pass and the session's close, by the
 * caller that owns w then (the worker has ended, or the caller took the
 * last pass over): batches of counters for the calls refused since the
 * last batch, then the final segment closed (the last pass leaves it
 * open when stop_by_ns is set). Not past until_ns (CLOCK_MONOTONIC). */
void stkr__drain_end_late(stkr__worker *w, uint64_t until_ns);

/* drain_batch.c: the batch under way (worker thread only). */
/* A new batch in w->bb (the segment's next epoch of definitions kept). */
void stkr__drain_batch_begin(stkr__worker *w);
/* Write w->bb (`last`: the session's end) and account for it: its records
 * are then written or counted lost, and their ring space is released. */
void stkr__drain_write_batch(stkr__worker *w, bool last);
/* Hand back the ring space of every record in a written (or lost) batch. */
void stkr__drain_release_all(void);
/* The session file's copy of dropped_worker, when it changed. */
void stkr__drain_file_worker_drops(stkr__worker *w);
/* Make this pass's figures visible to stkr_stats() and the like. */
void stkr__drain_publish(stkr__worker *w);
/* While a session ends, batches are cut at this many events, so that what
 * is pending when the drain deadline passes encodes in a millisecond or so
 * (a full batch of 65536 takes tens of ms on a starved core). */
#define STKR__EXIT_BATCH_EVENTS 4096u
/* Is the batch under way due (full, or cut short by an end)? Inline: the
 * drain asks at every record. */
static inline bool stkr__drain_batch_wants_write(const stkr__worker *w) {
  return stkr__batch_full(&w->bb) ||
         (w->bb.n >= STKR__EXIT_BATCH_EVENTS &&
          atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed) != 0);
}
/* Write the batch and begin the next if it is due. */
void stkr__drain_maybe_write_full(stkr__worker *w);
/* stkr__loader_scan_begin/end: flush_internal.h. */
/* pthread_atfork handlers for that lock (worker.c registers them). */
void stkr__loader_scan_atfork_prepare(void);
void stkr__loader_scan_atfork_parent(void);
void stkr__loader_scan_atfork_child(void);

/* ---- fork vs the worker's allocations: ASan builds only (timer.c) ---------
 * GCC 12's AddressSanitizer does not lock its allocator around fork: a
 * child forked while the worker allocates inherits a size-class lock held
 * by a thread it does not have, and hangs at its next allocation of that
 * class or in LeakSanitizer's check at exit (seen: a recorded child's
 * fresh start, 9 of 600 runs of //tests:preload-procs' failexec case under
 * load). So in ASan builds the worker says when it may allocate (busy) and
 * fork's prepare handler waits (at most 2 s) until it does not; a worker
 * about to start work while a fork is pending waits for its end. glibc's
 * malloc is fork-safe: elsewhere these are empty.
 * - stkr__asan_fork_started: the starting thread, before pthread_create
 *   (the new thread allocates before worker_main runs; waits out a
 *   pending fork like _busy); _start_failed undoes it.
 * - stkr__asan_fork_busy / _idle: the worker, around its work.
 * - stkr__asan_fork_atfork_*: worker.c registers them after the scan
 *   lock's, so that prepare waits for the worker before taking the scan
 *   lock (a worker's pass may need that lock). */
#if defined(__SANITIZE_ADDRESS__)
#define STKR__ASAN_FORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang: no __SANITIZE_ADDRESS__ */
#define STKR__ASAN_FORK 1
#endif
#endif
#if defined(STKR__ASAN_FORK)
void stkr__asan_fork_started(void);
void stkr__asan_fork_start_failed(void);
void stkr__asan_fork_busy(void);
void stkr__asan_fork_idle(void);
void stkr__asan_fork_atfork_prepare(void);
void stkr__asan_fork_atfork_parent(void);
void stkr__asan_fork_atfork_child(void);
#else
static inline void stkr__asan_fork_started(void) {}
static inline void stkr__asan_fork_start_failed(void) {}
static inline void stkr__asan_fork_busy(void) {}
static inline void stkr__asan_fork_idle(void) {}
#endif

/* ---- the worker's timer (timer.c) ------------------------------------------
 * Worker thread only, but for stkr__timer_hint (any thread). */
typedef struct stkr__timer {
  uint64_t next_tick;   /* the wait's deadline */
  uint64_t burst_until; /* passes every 1 ms after pressure, until then */
  /* After stkr_images_changed: the loader is watched until watch_until,
   * for a list that differs from watch_gen's, every watch_tick (1 ms
   * after a hint or a change, doubling to 32 ms while nothing moves). */
  uint64_t watch_until, watch_gen, watch_tick;
  /* stkr__unwind_loads_hinted() when the watch began; stored as covered
   * when it ends (`watching` until then). */
  uint64_t hinted;
  bool watching;
  bool several; /* more than one announcement open when it began */
} stkr__timer;
/* The first pass one interval after `now`. */
void stkr__timer_init(const stkr__worker *w, stkr__timer *tm, uint64_t now);
/* wake_target.c: the worker producers' wakes post to. Control calls
 * (lifecycle.c) but for stkr__wake_worker (any thread,
 * async-signal-safe). stkr__wake_arm(w): wakes post to w from now on.
 * stkr__wake_worker: the recorder's wake callback. stkr__wake_disarm: none any more; @return
 * true once no wake is in flight, false after ~100 ms of waiting (a count
 * that may never drop: then w must stay allocated, stkr__wake_keep).
 * stkr__wake_forget_after_fork: the atfork child's reset. */
void stkr__wake_arm(stkr__worker *w);
void stkr__wake_worker(void *arg);
bool stkr__wake_disarm(void);
void stkr__wake_keep(stkr__worker *w);
void stkr__wake_forget_after_fork(void);

/* stkr_images_changed's flag (the caller then posts the wake). */
void stkr__timer_hint(void);
/* Take the hint if set: the loader is watched from `now`. @return whether
 * there was one. */
bool stkr__timer_take_hint(const stkr__worker *w, stkr__timer *tm, uint64_t now);
/* After a pass at `now`: when the next one is due (tm->next_tick). */
void stkr__timer_after_pass(const stkr__worker *w, stkr__timer *tm, uint64_t now);
/* A wake-up while only the loader is watched: @return true when no pass is
 * due (the next look is scheduled), false when one is. */
bool stkr__timer_light(const stkr__worker *w, stkr__timer *tm);
/* STKR_UNWIND_TABLES: build and publish unwind tables when the image list
 * changed since the last build (drain_images.c). */
void stkr__drain_unwind_tables(stkr__worker *w);
/* A new image list (its gen not seen yet): mark the app's images (the main
 * executable, listed first, and those under STACKREC_APP_PATHS) and hand
 * the list to the symbolizer, before any stack of the pass is resolved
 * (drain_images.c). */
void stkr__drain_images_changed(stkr__worker *w);
/* Inproc mode: s's frames, resolved once (each unique PC once, in the
 * symbolizer's cache); on failure s keeps its PCs only (drain_images.c). */
void stkr__drain_symbolize_stack(stkr__worker *w, stkr__stack *s);
/* The session's counters into c (drain_batch.c; they note the drops they
 * count). Worker thread, or the thread that took the drain over. */
void stkr__drain_fill_counters(stkr__worker *w, Stackrec__Counters *c);
/* The session's last batch failed and no session file lets recovery write
 * its end: its final counters alone, into the room its last segment keeps
 * (drain_pass.c). */
void stkr__drain_put_last_counters(stkr__worker *w);

/* In an ending session: has the drain deadline passed? (false otherwise)
 * Inline: the drain asks before every record. Relaxed load: stop_by_ns is
 * a plain value stored before the wake that made this pass run (and
 * re-read every record, so a pass already running when the end was
 * requested picks it up); the clock is read only in an ending session. */
static inline bool stkr__drain_past_deadline(stkr__worker *w) {
  uint64_t stop = atomic_load_explicit(&w->stop_by_ns, memory_order_relaxed);
  return stop != 0 && stkr__clock_mono_ns() >= stop;
}
/* Does ring r put the worker under pressure, `pressured` being the last
 * pass's verdict (stkr__worker.pressure)? An eighth of the ring unread to
 * enter, a sixty-fourth to stay (drain.c). Consumer side. */
bool stkr__drain_under_pressure(bool pressured, const stkr__ring *r);
/* Inproc mode: the symbolizer's cache, made on the worker thread at its
 * start (the preload library loads the symbolizer module then,
 * flush/sym_dl.c: never on a hook's thread), before the first pass writes
 * the Header. Cheap otherwise: images are opened when a stack first needs
 * them. No backend (module missing, no memory) means offline recording,
 * and the Header says so: cfg.set.symbolize is the pass owner's from then
 * on. */
void stkr__drain_start_symbolizer(stkr__worker *w);

enum { STKR__PASS_FREE, STKR__PASS_WORKER, STKR__PASS_CALLER };
/* The worker thread: claim the next pass (false: an exiting caller took
 * the session over; touch nothing of w but req_mu and thread_done), and
 * give it back after the pass. */
bool stkr__drain_claim(stkr__worker *w);
void stkr__drain_unclaim(stkr__worker *w);
/* An exiting caller (recorder stopped, producers quiesced): if the worker
 * is parked, take its place for good, run the final pass on this thread
 * within the deadline, answer pending flushes and set `ended`. @return
 * false (nothing done) if the worker is inside a pass: wait for it then. */
bool stkr__drain_take_over(stkr__worker *w);

/* After the final drain of an exit (the worker ended, the recorder
 * stopped): is every record of every ring consumed, with no producer still
 * inside an event? Then the session's ring and session files hold nothing
 * recovery could use, and the exit removes them (stkr_shutdown_for_exit)
 * instead of leaving each process's ~0.5 MB to the next stkr_init or to
 * `stackrec record` to read and delete. */
bool stkr__drain_rings_settled(void);
/* Free exited thread t, whose every record is written and released; prev:
 * the thread before it in the registry, or NULL (drain_pass.c). */
void stkr__drain_reap(stkr__thread *t, stkr__thread *prev);
/* Reap the threads drain.c marked (w_reap_after_write) whose records this
 * pass's write released. */
void stkr__drain_reap_written(stkr__worker *w);

/* May new stack s be symbolized now (always, unless the session is
 * ending: then only if that loads nothing and time is left)? */
bool stkr__drain_may_symbolize(stkr__worker *w, const stkr__stack *s);

/* worker.c; caller holds w->stats_mu. */
void stkr__stats_compute(stkr__worker *w, stkr_stats *out);

/* ---- worker_create.c: a worker built without its thread, and freed. */
/* Build a worker: its wake, stack table, the directory (created, made
 * absolute), the dead sessions there recovered (but at a follow-mode
 * start: origin->follow_start), its first segment file open and its
 * session file.
 * Takes ownership of cfg's strings (dir, app_paths, symcache_dir), on
 * failure too. @return 0 and *out, or a negative errno (logged). */
int stkr__worker_create(stkr__fconfig *cfg, const stkr__fork_origin *origin,
                        stkr__worker **out);
/* Free everything but the thread (never started, or joined). */
void stkr__worker_free(stkr__worker *w);
/* Recover session `session` of this process from its files in dir,
 * whole (no budget): one an exit left events of in its rings, closed with
 * them (worker.c, reap_abandoned). Problems are logged. */
void stkr__worker_recover_session(const char *dir, uint64_t session);

/* ---- lifecycle.c: stkr_init, stkr_flush, stkr_shutdown and
 * stkr_shutdown_for_exit, one at a time, around these bodies (worker.c). */
int stkr__life_init(const stkr_config *in);
int stkr__life_flush(void);
/* stkr_flush_timeout's wait, until the CLOCK_MONOTONIC deadline (ns). */
int stkr__life_flush_until(uint64_t deadline_ns);
int stkr__life_shutdown(void);
int stkr__life_shutdown_for_exit(void);
/* The lock, for a forked child's start (on_fork_child): only tried. */
bool stkr__life_trylock(void);
void stkr__life_unlock(void);
/* The same for a batch's Counters (worker only): the producers' drops it
 * reads are noted for stkr__threads_drops_commit. */
void stkr__stats_compute_mark(stkr__worker *w, stkr_stats *out);

#endif /* STKR_FLUSH_WORKER_H */
