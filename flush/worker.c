/*
 * worker.c: the flush worker: stkr_init/stkr_shutdown/stkr_flush/
 * stkr_stats_get, the worker thread's wait loop, the bounded end of a
 * session, and fork handling.
 *
 * Design
 * - One worker thread per recording process. It waits on a stkr__wake
 *   (wake.h: a semaphore, no descriptor) with the next periodic drain
 *   (flush_interval_ms when idle, 1 ms while a pass finds a ring an eighth
 *   full or more, or a sixty-fourth right after such a pass:
 *   stkr__drain_under_pressure) as its deadline; producers post it when
 *   their ring passes half full (async-signal-safe, coalesced), requests post it too.
 *   Every wake-up runs one drain pass (drain.c). All draining, encoding and
 *   file I/O happens on that thread, so none of it needs locks.
 * - No event loop library: libuv's epoll fd, eventfd and signal pipes sit at
 *   low descriptor numbers the app may close (libuv then aborts) and its
 *   atfork handler touches descriptors in every child. See DEVELOPERS.md.
 * - stkr_flush puts a request on a mutex-protected queue, posts the wake and
 *   waits on a condvar until the worker answers. The worker answers a flush
 *   only after a full drain pass whose batches have been through write(2),
 *   so the caller's barrier holds.
 * - stkr_shutdown ends a session completely: stop accepting events, wait
 *   out producers mid-event (at most 100 ms), then let the worker drain,
 *   symbolize and write everything the rings hold, and join it.
 * - stkr_shutdown_for_exit (the preload library's exit, _exit and exec
 *   paths) is bounded by exit_ms instead: the worker's drain deadline
 *   (stop_by_ns) at half the budget (the other half is for encoding and
 *   writing on a CPU the app's busy threads may leave little of), producers
 *   mid-event waited out for at most a quarter, then the worker asked to
 *   end and waited for until the whole budget is spent. What it could not
 *   drain stays in the rings: kept for recovery in ring files
 *   (pending_recovery), lost in anonymous rings (dropped_exit; drain.c). A
 *   worker that has not answered (a write stuck on a slow disk) is
 *   abandoned: detached, never waited for on an exit path; stkr_init waits
 *   for it and frees it. An ended worker is joined but not freed (free
 *   could wait on a malloc lock held by the thread an _exit from a signal
 *   handler interrupted).
 * - Producers never block on the worker: if it falls behind, rings fill and
 *   events are dropped and counted by recorder/.
 * - Stats: the worker's counters and the reaping of exited threads are
 *   under stats_mu; stkr_stats_get sums the producers' counters over the
 *   registry under the same mutex, so it never reads a reaped thread.
 * - fork: in the child, only the forking thread exists; the parent's mutexes
 *   may be held by threads that do not exist there and its semaphore must
 *   not be used (wake.h). The atfork child handler forgets the inherited
 *   state (leaks its memory, closes nothing but our own segment descriptor,
 *   once its identity is checked); in follow mode the child's first event
 *   calls on_fork_child, which starts a new worker (fresh mutexes,
 *   semaphore, thread and files, a new session id, parent_pid in the
 *   Header).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flush/worker.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* ---- global state ----------------------------------------------------- */

/* g_mu protects g_state, g_frozen and g_inherited against stkr_stats_get;
 * init/flush/shutdown never race each other (lifecycle.c). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static stkr__worker *g_state;
static stkr_stats g_frozen;   /* the final stats of the last recording */
/* A forked child's parent state (leaked), whose config its first event
 * starts a worker with; passed on to the child's own children until then.
 * g_origin: where this process came from (its Header's parent_pid,
 * forked_from_pid and fork_mono_ns). Both written by the fork's child
 * handler (only the forking thread exists then) and read by the start
 * that follows, on_fork_child or stkr_init, under the lifecycle lock,
 * which also set g_origin.follow_start. */
static stkr__worker *g_inherited;
static stkr__fork_origin g_origin;
/* A worker whose session end ran out of time: its thread may still be
 * writing. Never joined on an exit path; stkr_init joins and frees it. */
static stkr__worker *g_abandoned;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/* ---- stats (computed in stats.c) ------------------------------------- */

int stkr_stats_get(stkr_stats *out) {
  if (!out) return -EINVAL;
  pthread_mutex_lock(&g_mu);
  if (g_state) {
    pthread_mutex_lock(&g_state->stats_mu);
    stkr__stats_compute(g_state, out);
    pthread_mutex_unlock(&g_state->stats_mu);
  } else {
    *out = g_frozen;
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* ---- the worker thread --------------------------------------------------- */

void stkr__req_answer(stkr__req *list, int result) {
  for (stkr__req *r = list, *next; r; r = next) {
    next = r->next; /* before a free */
    if (r->abandoned) {
      free(r);
      continue;
    }
    r->result = result;
    r->done = true;
  }
}

/* Answer every request of `list` (after the stats were published: the
 * caller's lock of req_mu orders its stkr_stats_get after our updates). */
static void answer(stkr__worker *w, stkr__req *list, int result) {
  pthread_mutex_lock(&w->req_mu);
  stkr__req_answer(list, result);
  pthread_cond_broadcast(&w->req_cv);
  pthread_mutex_unlock(&w->req_mu);
}

static void *worker_main(void *arg) {
  stkr__worker *w = arg;
  stkr__timer tm;
  /* Our own I/O may pass through hooked functions (LD_PRELOAD): never
   * record it, or the worker would feed itself. */
  stkr__thread_ignore();
  if (stkr__stack_bounds(&w->stack_lo, &w->stack_hi) != 0)
    w->stack_lo = w->stack_hi = 0;
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "stackrec-flush");
#elif defined(__APPLE__)
  pthread_setname_np("stackrec-flush");
#endif
  if (!stkr__drain_claim(w)) goto taken_over;
  stkr__drain_start_symbolizer(w);
  stkr__timer_init(w, &tm, stkr__clock_mono_ns());
  stkr__drain_unclaim(w);
  uint64_t alone_at = stkr__clock_mono_ns() + STKR__ALONE_CHECK_NS;
  for (;;) {
    stkr__req *list;
    bool end;

    /* Busy (ASan builds: a fork may wait for it, worker.h) from our start
     * (worker_start) to each wait, and from each wake on. */
    stkr__asan_fork_idle();
    int woke = stkr__wake_wait(&w->wake, tm.next_tick < alone_at
                                             ? tm.next_tick
                                             : alone_at);
    stkr__asan_fork_busy();
    if (!stkr__drain_claim(w)) goto taken_over;
    pthread_mutex_lock(&w->req_mu);
    list = w->req_head;
    w->req_head = NULL;
    w->req_tail = &w->req_head;
    end = w->end_requested;
    pthread_mutex_unlock(&w->req_mu);

    if (woke == -ETIMEDOUT && list == NULL && !end) {
      uint64_t now = stkr__clock_mono_ns();
      if (now >= alone_at) { /* alone.c */
        alone_at = now + STKR__ALONE_CHECK_NS;
        stkr__drain_unclaim(w);
        if (stkr__end_if_alone()) goto taken_over; /* ended on this thread */
        if (!stkr__drain_claim(w)) goto taken_over;
      }
      if (now < tm.next_tick) { /* that wake was the check's alone */
        stkr__drain_unclaim(w);
        continue;
      }
    }
    if (end) {
      stkr__drain_all(w, true);
      stkr__alone_close();
      stkr__asan_fork_idle();
      /* Flushes that raced with the end see it as their barrier. `ended`
       * is our last touch of w: once the ending caller (or a later
       * stkr_init) sees it, it may free w. */
      pthread_mutex_lock(&w->req_mu);
      /* An exit that stopped waiting for us runs no stkr__drain_end_late:
       * the final segment, left open by the last pass, is closed here. */
      if (w->end_given_up) stkr__seg_close_final(&w->seg);
      stkr__req_answer(list, 0);
      w->ended = true;
      w->thread_done = true;
      pthread_cond_broadcast(&w->req_cv);
      pthread_mutex_unlock(&w->req_mu);
      return NULL;
    }
    /* A post with the hint set may be the hint's alone: it starts the
     * watch, and the look below decides whether a pass is due. */
    bool hinted = woke == 0 && list == NULL &&
                  stkr__timer_take_hint(w, &tm, stkr__clock_mono_ns());
    if ((woke == -ETIMEDOUT || hinted) && list == NULL && stkr__timer_light(w, &tm)) {
      stkr__drain_unclaim(w);
      continue;
    }
    /* A timeout, a producer or a flush: one pass serves them all. */
    w->barrier = list != NULL;
    stkr__drain_all(w, false);
    w->barrier = false;
    if (list) {
      answer(w, list, w->io_error ? -EIO : 0);
      w->io_error = false;
    }
    stkr__timer_after_pass(w, &tm, stkr__clock_mono_ns());
    stkr__drain_unclaim(w);
  }

taken_over:
  /* An exiting caller ended the session on its own thread. */
  stkr__asan_fork_idle();
  pthread_mutex_lock(&w->req_mu);
  w->thread_done = true;
  pthread_cond_broadcast(&w->req_cv);
  pthread_mutex_unlock(&w->req_mu);
  return NULL;
}

/* One wait on req_cv (req_mu held) of at most 5 ms, and not past the
 * CLOCK_MONOTONIC deadline give_up. pthread_cond_timedwait measures
 * CLOCK_REALTIME unless told otherwise; our condvar is created plain
 * (portable to Apple), so the callers wait in short slices against the
 * monotonic deadline: a wall-clock jump then cannot stretch the wait. */
static void req_wait_slice(stkr__worker *w, uint64_t now, uint64_t give_up) {
  uint64_t slice = give_up - now < 5000000u ? give_up - now : 5000000u;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)slice;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  (void)pthread_cond_timedwait(&w->req_cv, &w->req_mu, &ts);
}

/* Send a flush request and wait for its answer: a barrier, unbounded when
 * give_up is 0, else until that CLOCK_MONOTONIC deadline (then -ETIMEDOUT;
 * the worker still serves the request later). A flush on the worker's own
 * thread (the hook library's dlclose, reached from the worker's dlclose of
 * a module) could never be answered: -EDEADLK. */
static int request_flush(stkr__worker *w, uint64_t give_up) {
  stkr__req own = {.result = 0}, *r = &own;
  int result;
  if (stkr__tls == STKR__THREAD_IGNORED) return -EDEADLK;
  if (give_up != 0 && (r = calloc(1, sizeof *r)) == NULL) return -ENOMEM;
  pthread_mutex_lock(&w->req_mu);
  if (w->ended || w->end_requested) {
    pthread_mutex_unlock(&w->req_mu);
    if (r != &own) free(r);
    return -ENOTCONN;
  }
  *w->req_tail = r;
  w->req_tail = &r->next;
  pthread_mutex_unlock(&w->req_mu);
  stkr__wake_post(&w->wake);
  pthread_mutex_lock(&w->req_mu);
  while (!r->done) {
    uint64_t now = give_up != 0 ? stkr__clock_mono_ns() : 0;
    if (give_up == 0)
      pthread_cond_wait(&w->req_cv, &w->req_mu);
    else if (now < give_up)
      req_wait_slice(w, now, give_up);
    else
      break;
  }
  result = r->done ? r->result : -ETIMEDOUT;
  if (r != &own && !r->done)
    r->abandoned = true; /* the worker's answer frees it */
  else if (r != &own)
    free(r);
  pthread_mutex_unlock(&w->req_mu);
  return result;
}

/* The worker's stack, always this size. A thread made with default
 * attributes gets the size of RLIMIT_STACK (`ulimit -s 64`: 64 KiB) or of
 * the app's pthread_setattr_default_np, and the worker's inproc
 * symbolization runs libdw, whose line-table reader (dwarf_getsrclines)
 * keeps ~150 KiB of arrays on its stack for libc's table: the app died of
 * SIGSEGV in the worker. Not more either: pages never touched cost no
 * memory, but their address space counts in RLIMIT_AS (the default 8 MiB
 * took that much from a program under `ulimit -v`; QA, session 28). */
#define STKR__WORKER_STACK ((size_t)2 << 20)

/* Start the worker thread with every signal blocked: the app's handlers
 * must never run on our thread (and a handler calling stkr_event there
 * would record the worker). */
static int worker_start(stkr__worker *w) {
  sigset_t all, old;
  pthread_attr_t attr;
  int err;
  if ((err = pthread_attr_init(&attr)) != 0) return -err;
  (void)pthread_attr_setstacksize(&attr, STKR__WORKER_STACK);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  stkr__wake_arm(w);
  stkr__asan_fork_started();
  err = pthread_create(&w->thread, &attr, worker_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (err) {
    stkr__asan_fork_start_failed();
    w->wake_unsettled = !stkr__wake_disarm();
    return -err;
  }
  return 0;
}

static void on_fork_child(void);

/* Start recorder/ with w's config. It zeroes every producer counter and
 * empties the rings, so the stats of this recording start at 0. */
static int start_recorder(stkr__worker *w) {
  stkr__rconf rc = {.ring_bytes = w->cfg.set.ring_bytes,
                    .max_depth = w->cfg.set.max_depth,
                    .skip_frames = w->cfg.set.skip_frames,
                    .payload_max = w->cfg.set.payload_max,
                    .unwind_tables = w->cfg.set.unwind == STKR_UNWIND_TABLES};
  /* Tables before the first event, on the thread that starts recording:
   * a few ms once per process (python3's 16 images: ~8 ms of CPU), so
   * that no event of a short-lived process is walked without them. */
  uint64_t hinted = stkr__unwind_loads_hinted(); /* before the scan */
  stkr__loader_scan_begin();
  stkr__drain_unwind_tables(w);
  stkr__loader_scan_end();
  stkr__unwind_loads_covered(hinted); /* tables of what is loaded now */
  /* After the tables (the Header carries their figures), before the first
   * event can be pushed. */
  stkr__drain_first_batch(w);
  return stkr__recorder_start(
      &rc, stkr__wake_worker, NULL,
      w->cfg.set.fork_mode == STKR_FORK_FOLLOW ? on_fork_child : NULL);
}

/* A session's start, for stkr_init and a forked child in follow mode: the
 * worker (which takes over cfg's allocations), recording on, the worker's
 * thread, then the worker published in g_state. On failure nothing of it
 * is left: its first batch is discarded (not a session that recorded
 * nothing) and producers that saw RUNNING for a moment are waited out. */
static int worker_launch(stkr__fconfig *cfg,
                         const stkr__fork_origin *origin) {
  stkr__worker *w;
  int err;

  if ((err = stkr__worker_create(cfg, origin, &w)) < 0) return err;
  if ((err = start_recorder(w)) < 0) {
    stkr__seg_discard(&w->seg); /* its first batch only */
    stkr__worker_free(w);
    return err;
  }
  if ((err = worker_start(w)) < 0) {
    stkr__recorder_stop();
    stkr__threads_quiesce(100);
    stkr__seg_discard(&w->seg);
    stkr__worker_free(w);
    return err;
  }
  pthread_mutex_lock(&g_mu);
  g_state = w;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* ---- fork ------------------------------------------------------------- */

/* The fork's time, taken by the forking thread before the copy of the
 * memory: a mark the parent sets once fork() returned to it is later
 * (in the child's handler it was not: the child may run long after the
 * parent went on; ASan, test-inherit). Written by the prepare handler,
 * read by the child handler of the same fork: glibc runs one fork's
 * handlers at a time (its atfork lock is held from prepare to the parent
 * and child handlers: glibc >= 2.28, musl, bionic, Apple's libc), so two
 * threads forking at once do not mix their times; relaxed atomics keep
 * TSan, which does not see that lock, quiet.
 * Not a thread-local: an initial-exec __thread here made UBSan report a
 * misaligned stkr__tls in every forked child of the ASan build (the hook
 * library's TLS block; not understood, session 32). */
static _Atomic uint64_t g_fork_ns;

static void atfork_prepare_scan(void) {
  /* After the scan lock, whose wait can last a scan: a mark set meanwhile
   * is in the copy. clock_gettime: async-signal-safe, as fork's handlers
   * must be. */
  stkr__loader_scan_atfork_prepare();
  atomic_store_explicit(&g_fork_ns, stkr__clock_mono_ns(),
                        memory_order_relaxed);
  /* The reap lock last: the worker takes it inside a scan (a table's
   * rebuild waits for events), never the other way round (review, session
   * 33: taken first, a fork and a pass each held what the other wanted).
   * The child's handler (recorder/) releases it. */
  stkr__threads_atfork_prepare();
}

static void atfork_parent_scan(void) {
  stkr__threads_atfork_parent();
  stkr__loader_scan_atfork_parent();
}

/* Runs in the child right after fork, with only the forking thread alive.
 * Forget (leak) the parent's worker: its mutexes may be held by threads
 * that no longer exist, its semaphore must not be used (wake.h). Nothing
 * here may lock or free; close() is async-signal-safe, and the inherited
 * segment descriptor is ours alone in this process (once its identity is
 * checked: the app may have replaced it), so we do not keep it open. */
static void atfork_child(void) {
  stkr__worker *w = g_state ? g_state : g_abandoned;
  if (w)
    stkr__seg_forget_inherited(&w->seg,
                               w->cfg.set.fork_mode == STKR_FORK_FOLLOW);
  stkr__alone_close(); /* the parent's /proc/<ppid>/stat */
  stkr__log_limits_reset(); /* its notes are its own (review, session 22) */
#if defined(__SANITIZE_ADDRESS__)
  /* The parent's worker may have been in the middle of building something
   * (a symbol module) that only its stack points to; that stack is still
   * mapped here but belongs to no thread, so LeakSanitizer would call it a
   * leak at this child's exit. Scan it as a root: it is inherited state,
   * leaked by design. */
  if (w && w->stack_hi > w->stack_lo)
    __lsan_register_root_region((const void *)w->stack_lo,
                                w->stack_hi - w->stack_lo);
#endif
  /* A child that never started its worker keeps its parent's state for
   * its own children (recorder/event.c keeps them pending too). */
  if (g_state != NULL) {
    g_inherited = g_state;
    g_origin.parent_pid = g_origin.forked_from_pid = g_state->sess.pid;
    g_origin.fork_mono_ns =
        atomic_load_explicit(&g_fork_ns, memory_order_relaxed);
  } else if (g_inherited != NULL) {
    /* Its parent never recorded, so set no mark: the marks are still
     * those of the ancestor at that first fork (g_origin's other two). */
    g_origin.parent_pid = (uint32_t)getppid();
  }
  g_state = NULL;
  g_abandoned = NULL; /* its thread does not exist here */
  memset(&g_frozen, 0, sizeof g_frozen);
  stkr__wake_forget_after_fork();
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g_mu, &fresh, sizeof fresh);
}

static void atfork_child_scan(void) {
  stkr__loader_scan_atfork_child();
  atfork_child();
}

static void register_atfork(void) {
  (void)pthread_atfork(atfork_prepare_scan, atfork_parent_scan,
                       atfork_child_scan);
#if defined(STKR__ASAN_FORK)
  /* Registered last, its prepare runs first (worker.h). */
  (void)pthread_atfork(stkr__asan_fork_atfork_prepare,
                       stkr__asan_fork_atfork_parent,
                       stkr__asan_fork_atfork_child);
#endif
}

/* The root directory is not the one the session started under: a child
 * that chroot'ed (a daemon's privilege-separated child) would find the
 * recording's path inside its jail, and make and fill a directory there
 * (QA, session 24: 33 files in the jail). Not recorded then. */
static bool root_changed(const stkr__fconfig *cfg) {
  struct stat root;
  if (cfg->root_dev == 0 && cfg->root_ino == 0) return false;
  return stat("/", &root) != 0 || (uint64_t)root.st_dev != cfg->root_dev ||
         (uint64_t)root.st_ino != cfg->root_ino;
}

/* Follow mode: called by recorder/ from the child's first event, before
 * that event is pushed (recorder/ then records it if we started it).
 * Starts a fresh worker with the parent's config. */
static void on_fork_child(void) {
  stkr__worker *parent = g_inherited;
  stkr__fconfig cfg;
  int err;

  if (!parent) return;
  /* One control call at a time (lifecycle.c), only tried: this may be a
   * signal handler's event. Busy: another thread of the child is in
   * stkr_init or stkr_shutdown, which decides for it. */
  if (!stkr__life_trylock()) return;
  g_inherited = NULL;
  err = stkr__config_dup(&parent->cfg, &cfg);
  if (err == 0) {
    /* The directory renamed since (its config's name): where the parent
     * writes now, not a new directory under the old name (read as
     * "deleted and recreated"). */
    char *now = stkr__seg_dir_in_parent(&parent->seg);
    if (now != NULL) {
      free(cfg.dir);
      cfg.dir = now;
    }
  }
  if (err == 0 && root_changed(&cfg)) {
    stkr__config_free(&cfg);
    err = -EXDEV;
  }
  g_origin.follow_start = true;
  if (err == 0) err = worker_launch(&cfg, &g_origin);
  stkr__life_unlock();
  if (err == 0) return;
  /* recorder/ leaves the child off when we return without starting it. */
  if (err == -EXDEV)
    stkr__log_unrecorded(-err, "not recorded: forked child %d changed its "
                         "root directory (chroot), which hides the "
                         "recording's", (int)getpid());
  else
    stkr__log_unrecorded(-err, "cannot record in forked child %d: %s",
                         (int)getpid(), strerror(-err));
}

/* ---- the end of a session ------------------------------------------------ */

/* Stop recording and have the worker end the session (see the design note
 * at the top). `bounded`: within exit_ms; otherwise completely (everything
 * in the rings drained and symbolized; producers are stopped first, so this
 * still never waits on threads that keep producing). @return true if the
 * session ended (by the worker, whose thread is then done with w and may
 * be joined, or by this caller taking over: w->taken_over), false if the
 * worker was still busy when the budget ran out. Takes no lock an app thread
 * may hold (only ours). */
static bool end_session(stkr__worker *w, bool bounded) {
  uint64_t budget = (uint64_t)w->cfg.set.exit_ms * 1000000u;
  uint64_t start = stkr__clock_mono_ns(), give_up = start + budget;
  unsigned quiesce_ms =
      w->cfg.set.exit_ms / 4 < 100 ? w->cfg.set.exit_ms / 4 : 100;
  bool ended;

  /* The deadline first: a drain pass already running reads it per record
   * (drain.c), so it stops on time even before it sees the end request. */
  if (bounded)
    atomic_store_explicit(&w->stop_by_ns, start + budget / 2,
                          memory_order_relaxed);
  else
    /* Not an exit: a producer descheduled inside stkr_event() (a loaded
     * machine, a sanitizer) may take far longer than 100 ms to leave it,
     * and an event it pushes after the stats are frozen is counted by no
     * session (the next stkr_init zeroes the counters): faults'
     * init/shutdown cycles lost one now and then under ASan. The wait
     * ends as soon as no thread is inside an event. */
    quiesce_ms = 2000;
  /* No event may start after stop (later calls return -ENOTCONN; at an
   * exit counted as dropped_exit, the process's threads still make them);
   * quiesce waits out those in flight, so the final drain sees every
   * event that will be recorded. */
  if (bounded)
    stkr__recorder_stop_for_exit();
  else
    stkr__recorder_stop();
  stkr__threads_quiesce(quiesce_ms);
  w->wake_unsettled = !stkr__wake_disarm();
  if (bounded && (w->taken_over = stkr__drain_take_over(w))) return true;

  pthread_mutex_lock(&w->req_mu);
  w->end_requested = true;
  pthread_mutex_unlock(&w->req_mu);
  stkr__wake_post(&w->wake);

  /* In slices against the monotonic deadline (req_wait_slice). */
  pthread_mutex_lock(&w->req_mu);
  while (!bounded && !w->ended) pthread_cond_wait(&w->req_cv, &w->req_mu);
  while (!w->ended) {
    uint64_t now = stkr__clock_mono_ns();
    if (now >= give_up) break;
    req_wait_slice(w, now, give_up);
  }
  ended = w->ended;
  /* Under req_mu with the worker's own test: either it ended and we close
   * its final segment (stkr__drain_end_late), or it does (worker_main). */
  if (!ended) w->end_given_up = true;
  pthread_mutex_unlock(&w->req_mu);
  /* With ring files the unwritten events are not lost: recovery writes
   * them (QA, session 21: the note said "lost" of 21 792 events that
   * `stackrec recover` then wrote). */
  if (!ended)
    stkr__log(STKR__LOG_OTHER,
              "the flush worker did not finish within %u ms at exit; "
              "events not yet written %s",
              w->cfg.set.exit_ms,
              stkr__session_current() != 0
                  ? "stay in the ring files for recovery ('stackrec "
                    "recover', 'stackrec record', or the next stkr_init)"
                  : "are lost (counted: no ring files)");
  return ended;
}

/* Stats of a session that ended. Whatever is not accounted for yet makes
 * the frozen stats add up: events of a worker abandoned at its deadline (it
 * may still write some of them), or of a producer that outlived the
 * quiesce and pushed after the final drain. With ring files they are in
 * the files (pending_recovery: recovery writes them, deduplicated against
 * what the worker did write); without, they are lost (dropped_exit). */
static void freeze_stats(stkr__worker *w) {
  stkr_stats final;
  pthread_mutex_lock(&g_mu);
  pthread_mutex_lock(&w->stats_mu);
  stkr__stats_compute(w, &final);
  pthread_mutex_unlock(&w->stats_mu);
  if (final.attempted >
      final.written + final.dropped + final.pending_recovery) {
    uint64_t gap = final.attempted - final.written - final.dropped -
                   final.pending_recovery;
    if (stkr__session_current() != 0) {
      final.pending_recovery += gap;
    } else {
      final.dropped_exit += gap;
      final.dropped += gap;
    }
  }
  g_frozen = final;
  g_state = NULL;
  pthread_mutex_unlock(&g_mu);
}

/* After an end that did not free the worker: a thread that finished is
 * joined at once (a finished, unjoined thread is a leak to tools such as
 * TSan, and joining it waits for nothing); one still busy is detached, so
 * that nothing ever has to wait for it on an exit path. Either way w stays
 * in g_abandoned (reachable: not a leak either) until stkr_init. */
static void abandon(stkr__worker *w, bool ended) {
  /* Taken over: the worker, parked, has yet to wake and leave; joining it
   * would wait for the scheduler, which the take-over avoids. */
  bool join = ended && !w->taken_over;
  if (join)
    pthread_join(w->thread, NULL);
  else
    pthread_detach(w->thread);
  w->thread_gone = join;
  g_abandoned = w;
}

/* Free a worker left by an earlier session end (not on an exit path: this
 * may wait for a detached worker's last write to finish). */
static void reap_abandoned(void) {
  stkr__worker *w = g_abandoned;
  if (!w) return;
  g_abandoned = NULL;
  if (!w->thread_gone) {
    /* Detached: its last touch of w is setting `thread_done`. */
    pthread_mutex_lock(&w->req_mu);
    while (!w->thread_done) pthread_cond_wait(&w->req_cv, &w->req_mu);
    pthread_mutex_unlock(&w->req_mu);
  }
  /* An exit's deadline left the session open, its rings holding events
   * (pending_recovery), and the process went on after all: the files stay
   * and are recovered now, as after a death, whole, before the next
   * session writes its first segment (a recovery after it would leave the
   * session in two pieces). Before (QA, session 37), they were pooled with
   * the events in them: 1 033 of 3 000 lost, verify "damaged". */
  uint64_t sid = stkr__session_current();
  if (stkr__threads_rings_leftover() || w->keep_for_recovery) {
    /* Where its files are now (the directory may have been renamed). Not
     * bounded by a budget, as a start's recovery of others' sessions is:
     * it reads the session's segments, ~0.2 s for 24-89 MB (review). */
    char dir[PATH_MAX];
    bool here = stkr__session_dir_now(dir, sizeof dir);
    stkr__session_close(true, 0);
    stkr__worker_recover_session(here ? dir : w->seg.dir, sid);
  }
  stkr__worker_free(w);
}

/* ---- the public API's bodies (lifecycle.c calls them, one at a time) -- */

int stkr__life_init(const stkr_config *in) {
  stkr__fconfig cfg;
  int err;

  pthread_once(&g_atfork_once, register_atfork);
  if (g_state) return -EALREADY;
  reap_abandoned();
  stkr__log_target_take(); /* no worker of ours runs now: none logs meanwhile */
  /* An explicit init in a followed child replaces follow mode, but the
   * child is still a copy of its parent: its Header says so (review,
   * session 32: it started with none of its parent's marks). */
  const bool copy = g_inherited != NULL;
  g_inherited = NULL;
  g_origin.follow_start = false;
  if ((err = stkr__config_build(in, &cfg)) < 0) return err;
  return worker_launch(&cfg, copy ? &g_origin : NULL);
}

/*
 * Ordering that makes the barrier hold: an event "before the call" was
 * committed (the producer's release store of the ring head) and counted
 * (pushed++) before this call began. The request travels through req_mu
 * (our unlock, the worker's lock), so the drain pass that follows sees that
 * head with its acquire load in stkr__ring_peek, and its record gets
 * consumed. The worker then publishes written/dropped under stats_mu and
 * answers under req_mu, so our later stkr_stats_get reads both the final
 * worker counters and (by our own program order) every `pushed` increment
 * that preceded this call.
 */
int stkr__life_flush(void) {
  stkr__worker *w = g_state;
  if (!w) return -ENOTCONN;
  return request_flush(w, 0);
}

int stkr__life_flush_until(uint64_t deadline_ns) {
  stkr__worker *w = g_state;
  if (!w) return -ENOTCONN;
  return request_flush(w, deadline_ns ? deadline_ns : 1);
}

/* Shared by stkr_shutdown and stkr_shutdown_for_exit: with no worker in
 * this process, a follow-mode child that never recorded must never start. */
static int no_session(void) {
  if (g_inherited) {
    g_inherited = NULL;
    stkr__recorder_stop();
  }
  return -ENOTCONN;
}

/* A session whose accounting reaches no file: no session file (its rings
 * anonymous), no event ever written, the final batch failed too. Nothing on
 * disk would tell of its events: a `stackrec record` of a tree on a full
 * disk said "none made a watched call", verify complete, where 120 000
 * calls were lost (QA, session 22). Named as a process that recorded
 * nothing, and why. Before the session file closes. */
static void note_nothing_on_disk(const stkr__worker *w) {
  /* written, not batches: a first batch of definitions alone may have
   * fit (QA, session 23: `ulimit -f 2`). */
  if (!w->keep_for_recovery || g_frozen.written != 0 ||
      stkr__session_current() != 0 || g_frozen.attempted == 0)
    return;
  stkr__log_unrecorded(-w->write_err,
                       "none of its %llu events reached %s: %s",
                       (unsigned long long)g_frozen.attempted, w->cfg.dir,
                       w->write_err == -EFBIG
                           ? "over its file size limit (RLIMIT_FSIZE)"
                           : strerror(-w->write_err));
}

int stkr__life_shutdown(void) {
  stkr__worker *w = g_state;

  if (!w) return no_session();
  /* First, while recording: a hang in progress is recorded (sample.c). */
  stkr__watchdog_stop_for_shutdown(false);
  (void)end_session(w, false); /* unbounded: always ends */
  freeze_stats(w);
  pthread_join(w->thread, NULL);
  note_nothing_on_disk(w);
  /* The final drain wrote everything (the files go), or records stayed in
   * the rings, or the final batch, with the session's last counters, could
   * not be written (keep_for_recovery): the files stay for recovery, which
   * writes them (QA, session 22: a disk full at the end lost the counters
   * of every failed batch for good, the files pooled). */
  bool unwritten = w->keep_for_recovery;
  stkr__session_close(stkr__threads_rings_leftover() || unwritten, 0);
  stkr__worker_free(w);
  return unwritten ? -EIO : 0;
}

int stkr__life_shutdown_for_exit(void) {
  stkr__worker *w = g_state;
  uint64_t until;
  bool ended;

  if (!w) return no_session();
  until = stkr__clock_mono_ns() + (uint64_t)w->cfg.set.exit_ms * 1000000u;
  stkr__watchdog_stop_for_shutdown(true); /* bounded: see watchdog.c */
  ended = end_session(w, true);
  freeze_stats(w);
  if (ended) note_nothing_on_disk(w);
  /* Everything read: the files go now (no malloc, a few unlinks), as
   * stkr_shutdown does, unless the final batch could not be written (they
   * stay, marked, for recovery to write the final counters). Else they
   * stay for recovery as they are. */
  if (ended && g_frozen.pending_recovery == 0 && stkr__drain_rings_settled())
    stkr__session_close(w->keep_for_recovery, until);
  /* Not freed: the process is ending (free could wait on a malloc lock held
   * by the thread this call interrupted). stkr_init frees it if the process
   * goes on after all. */
  abandon(w, ended);
  /* Ours alone now (ended: the worker's last touch; or taken over). Last,
   * after the join too: calls made until here are counted (the join took
   * milliseconds under TSan, its calls uncounted: CI, session 46). */
  if (ended) stkr__drain_end_late(w, until);
  return !ended ? -ETIMEDOUT : w->keep_for_recovery ? -EIO : 0;
}
