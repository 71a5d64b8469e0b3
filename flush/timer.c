/*
 * timer.c: when the flush worker's next pass is due (worker.c's loop), and
 * the scans of the loader's image list, kept apart from fork.
 *
 * - The timer: the configured interval when idle; passes at once, then
 *   every 1 ms, under pressure; and after stkr_images_changed, light looks
 *   at the loader until the new image is listed (stkr__timer_after_pass,
 *   stkr__timer_light). Worker thread only, but for the hint.
 * - The scan lock: every dl_iterate_phdr of ours holds it, and fork's
 *   prepare handler takes it (worker.c registers the handlers).
 * - ASan builds: fork waits for the worker's allocations (worker.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "flush/worker.h"

/* stkr_images_changed's hint: set by any thread (release, after its
 * increment of stkr__uw_loads_hinted), taken by the worker (acquire
 * exchange, then it reads that count: stkr__timer_take_hint). */
static _Atomic bool g_images_hint;

#define STKR__PRESSURE_TICK_NS 1000000u /* 1 ms */
#define STKR__PRESSURE_HOLD_NS 100000000u /* 100 ms */
#define STKR__HINT_WAIT_NS 1000000000u /* 1 s */

static uint64_t interval_ns(const stkr__worker *w) {
  return (uint64_t)w->cfg.set.flush_interval_ms * 1000000u;
}

void stkr__timer_hint(void) {
  /* Release: the increment of stkr__uw_loads_hinted before it is seen by
   * the worker that takes the flag (acquire). */
  atomic_store_explicit(&g_images_hint, true, memory_order_release);
}

void stkr__timer_init(const stkr__worker *w, stkr__timer *tm, uint64_t now) {
  memset(tm, 0, sizeof *tm);
  tm->next_tick = now + interval_ns(w);
  tm->watch_tick = STKR__PRESSURE_TICK_NS;
}

/* Take stkr_images_changed's hint: @return whether there was one. */
bool stkr__timer_take_hint(const stkr__worker *w, stkr__timer *tm, uint64_t now) {
  if (!atomic_exchange_explicit(&g_images_hint, false, memory_order_acquire))
    return false;
  /* The announcements this watch covers once it ends (after_pass). */
  tm->hinted = stkr__unwind_loads_hinted();
  tm->several = stkr__unwind_loads_open(tm->hinted) > 1;
  tm->watching = true;
  tm->watch_gen = w->imgs.gen;
  tm->watch_until = now + STKR__HINT_WAIT_NS;
  tm->watch_tick = STKR__PRESSURE_TICK_NS;
  return true;
}

/* After a pass at `now`: when the next one is due.
 * - Pressure (a ring an eighth full or more; a sixty-fourth to stay: drain.c,
 *   stkr__drain_under_pressure) means a producer is outrunning
 *   the interval. The next pass follows at once (after a yield, so that on
 *   a busy core the producers run too): a worker that sleeps until a
 *   producer's half-full wake gets the CPU back too late on a loaded
 *   machine (measured: a 64 KiB ring fills in ~0.15 ms, a wake-up took
 *   ~1 ms), and the producer drops meanwhile. Then every 1 ms for 100 ms
 *   after the last pressured pass (bursts come in trains).
 * - Images being loaded or unloaded (stkr_images_changed, called before
 *   dlopen: the image may not be listed yet): the loader is looked at from
 *   1 ms on until the list changes (a dlopen descheduled for long on a
 *   loaded machine: at most 1 s; a dlopen of an image loaded already
 *   changes nothing), then for 100 ms after each change (a library's
 *   dependencies, a runtime importing its modules; a second when several
 *   loads were announced at once). Those looks are light and back off
 *   (stkr__timer_light).
 * - Idle: the configured interval. */
void stkr__timer_after_pass(const stkr__worker *w, stkr__timer *tm, uint64_t now) {
  if (!stkr__timer_take_hint(w, tm, now) && now < tm->watch_until &&
      w->imgs.gen != tm->watch_gen) {
    tm->watch_gen = w->imgs.gen;
    /* One load announced: listed now, and its dependencies follow within
     * 100 ms. Several (threads loading at once): one change does not mean
     * all of them are mapped (a constructor may hold the loader's lock
     * for long while another dlopen waits), so the watch, and with it the
     * walk's stop at pcs without a table, lasts a second after the last
     * change (found in review). */
    tm->watch_until = now + (tm->several ? STKR__HINT_WAIT_NS : STKR__PRESSURE_HOLD_NS);
    tm->watch_tick = STKR__PRESSURE_TICK_NS;
  }
  /* The watch is over: what it was told of is listed, and this pass (or
   * an earlier one) built its tables; or nothing changed for a second. */
  if (tm->watching && now >= tm->watch_until) {
    tm->watching = false;
    stkr__unwind_loads_covered(tm->hinted);
  }
  if (w->pressure) {
    sched_yield();
    tm->next_tick = now; /* the wait below returns at once */
    tm->burst_until = now + STKR__PRESSURE_HOLD_NS;
  } else if (now < tm->burst_until || now < tm->watch_until) {
    uint64_t tick = now < tm->burst_until ? STKR__PRESSURE_TICK_NS : tm->watch_tick;
    if (tm->next_tick > now + tick || now >= tm->next_tick)
      tm->next_tick = now + tick;
  } else if (now >= tm->next_tick) {
    tm->next_tick = now + interval_ns(w);
  }
}

/* Has a producer asked for a pass (its ring past half full)? It keeps
 * wake_sent set until the worker drains it (drain.c). Worker only. */
static bool producer_waiting(void) {
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    /* Relaxed: only a hint. The producer set it (relaxed) before its post,
     * and its post makes a pass by itself unless a hint came with it; a
     * flag seen late delays the pass by one look (at most 32 ms; a ring that
     * fills meanwhile drops, counted). */
    if (atomic_load_explicit(&t->wake_sent, memory_order_relaxed))
      return true;
  return false;
}

/* A wake-up while only the loader is watched (the timer, or the hint's own
 * post): a pass is worth it only if the loader's list moved or a producer
 * asked (a few loads, not a pass: each pass writes what the rings hold, and
 * a program calling dlopen every 10 ms had a batch written each time), and
 * the looks back off from 1 ms to 32 ms while nothing moves: most loads are
 * listed within a millisecond, and each wake-up costs a context switch.
 * @return true: no pass now (the next look is scheduled). */
bool stkr__timer_light(const stkr__worker *w, stkr__timer *tm) {
  uint64_t now = stkr__clock_mono_ns();
  bool moved;

  if (now >= tm->watch_until || now < tm->burst_until || producer_waiting())
    return false;
  stkr__loader_scan_begin();
  moved = stkr__images_stale(&w->imgs);
  stkr__loader_scan_end();
  if (moved)
    return false;
  if (tm->watch_tick < 32 * STKR__PRESSURE_TICK_NS)
    tm->watch_tick *= 2;
  tm->next_tick = now + tm->watch_tick;
  return true;
}


/* ---- scans of the loader's image list vs fork ----------------------------
 * dl_iterate_phdr holds the loader's list lock (dl_load_write_lock), which
 * glibc does not reset in a forked child: a fork while our worker scans
 * leaves it held there for good, and the child's next dlclose or
 * dl_iterate_phdr hangs. Seen with runuser, whose PAM child dlcloses its
 * modules, once passes came every 1 ms after a dlopen. So every scan of
 * ours (image list, unwind tables) holds g_scan_mu, and fork's prepare
 * handler takes it: no fork starts mid-scan. A fork from a signal handler
 * that interrupted this thread's own scan skips the lock (t_scanning): its
 * child may hang as before, rather than the parent deadlock on itself. */
static pthread_mutex_t g_scan_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread bool t_scanning;
/* Whether prepare took g_scan_mu. Forks with atfork handlers run one at a
 * time (glibc holds its atfork lock from prepare to parent/child). */
static bool g_scan_taken;

void stkr__loader_scan_begin(void) {
  pthread_mutex_lock(&g_scan_mu);
  t_scanning = true;
}

void stkr__loader_scan_end(void) {
  t_scanning = false;
  pthread_mutex_unlock(&g_scan_mu);
}

/* How long a fork waits for a scan (or the symbolizer module's dlopen)
 * to end. Bounded: the worker's dlopen waits for the loader's own lock,
 * which a thread forking from inside a library's constructor holds (it
 * runs under dlopen): waiting on for ever would hang the app. Past it the
 * fork goes ahead, its child at the old risk (a loader lock held, a
 * module half loaded), never the parent hung. */
#define SCAN_FORK_WAIT_MS 2000

void stkr__loader_scan_atfork_prepare(void) {
  g_scan_taken = false;
  if (t_scanning) return;
  /* Steps of 50 us: a scan takes tens of microseconds, so a fork that
   * meets one waits about as long as a blocking lock would. */
  for (int step = 0; step < SCAN_FORK_WAIT_MS * 20; step++) {
    struct timespec tick = {0, 50000};
    if (pthread_mutex_trylock(&g_scan_mu) == 0) {
      g_scan_taken = true;
      return;
    }
    nanosleep(&tick, NULL);
  }
}

void stkr__loader_scan_atfork_parent(void) {
  if (g_scan_taken)
    pthread_mutex_unlock(&g_scan_mu);
}

/* The child's one thread is the one that took g_scan_mu in prepare: it
 * unlocks it as the parent does (not a re-initialization behind the
 * mutex's back, which TSan took for a double lock at the child's next
 * scan). A scan that a signal handler interrupted goes on in the child and
 * unlocks it itself. */
void stkr__loader_scan_atfork_child(void) {
  if (g_scan_taken)
    pthread_mutex_unlock(&g_scan_mu);
}

/* ---- fork vs the worker's allocations (ASan builds; worker.h) -------------
 * A Dekker pair, sequentially consistent on both sides: prepare stores
 * g_fork_pending, then reads g_worker_busy; a worker stores (adds to)
 * g_worker_busy, then reads g_fork_pending. At least one of them sees the
 * other's store, so no worker starts work unseen while a fork goes ahead.
 * g_worker_busy counts threads, not workers: a worker being abandoned may
 * still be ending beside its successor. */
#if defined(STKR__ASAN_FORK)
static atomic_int g_fork_pending; /* prepare: 1; parent, child: 0 */
static atomic_int g_worker_busy;  /* the worker (and its starter) */

void stkr__asan_fork_started(void) { stkr__asan_fork_busy(); }
void stkr__asan_fork_start_failed(void) { atomic_fetch_sub(&g_worker_busy, 1); }
void stkr__asan_fork_idle(void) { atomic_fetch_sub(&g_worker_busy, 1); }

void stkr__asan_fork_busy(void) {
  for (;;) {
    atomic_fetch_add(&g_worker_busy, 1);
    if (atomic_load(&g_fork_pending) == 0) return;
    atomic_fetch_sub(&g_worker_busy, 1);
    /* Not for ever: the parent and child handlers end a pending fork;
     * a prepare that gave up (its 2 s) still forks and ends it. */
    while (atomic_load(&g_fork_pending) != 0) {
      struct timespec tick = {0, 50000};
      nanosleep(&tick, NULL);
    }
  }
}

void stkr__asan_fork_atfork_prepare(void) {
  uint64_t until;

  atomic_store(&g_fork_pending, 1);
  /* A deadline, not a count of sleeps: on a loaded machine each 50 us
   * sleep takes far longer. */
  until = stkr__clock_mono_ns() + (uint64_t)SCAN_FORK_WAIT_MS * 1000000u;
  while (atomic_load(&g_worker_busy) != 0 && stkr__clock_mono_ns() < until) {
    struct timespec tick = {0, 50000};
    nanosleep(&tick, NULL);
  }
}

void stkr__asan_fork_atfork_parent(void) { atomic_store(&g_fork_pending, 0); }

/* The child has no worker thread (worker.c forgets them). */
void stkr__asan_fork_atfork_child(void) {
  atomic_store(&g_worker_busy, 0);
  atomic_store(&g_fork_pending, 0);
}
#endif
