/*
 * watchdog.c: the hang watchdog. One thread of the recorder's own watches
 * one registered thread through its heartbeat (stkr_watchdog_tick); when
 * no beat came for threshold_ms it samples the thread every interval_ms
 * (stkr__sample_request, walk only) until the thread beats again.
 *
 * Matrix-style back-off: identical consecutive stacks are one run, kept
 * here with a count; a run becomes one `watchdog.hang` event when it ends
 * (the stack changed, the thread recovered, the watchdog stops). The
 * events are handed to the watched thread through its slot's mailbox
 * (sample.h) and pushed by that thread into its own ring (its next tick,
 * or its signal handler at the next sample), so the ring keeps one
 * producer and the events carry the watched thread's id.
 *
 * What it must not do to the app: it holds no descriptor (it sleeps on a
 * futex / a condition, never a pipe), blocks every signal (process signals
 * go to the app's threads), never records, and stops in bounded time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "recorder/sample.h"

/* The run of identical stacks under way. Watchdog thread only. */
typedef struct stkr__run {
  unsigned n;
  uint64_t hash;
  uint64_t pcs[STKR_MAX_DEPTH];
  unsigned samples;
  uint64_t first_ms, last_ms;
} stkr__run;

/* Control fields: written by the controlling thread (start/stop) while no
 * watchdog thread runs, read-only by that thread. */
static struct {
  bool running;
  pthread_t thread;
  stkr__sslot *s;
  uint32_t gen;
  unsigned threshold_ms, interval_ms, timeout_ms;
  bool for_exit;
} g_wd;
/* Stop request: set by stop (release... any order: the futex wake after it
 * is what counts), read by the watchdog thread each round. Futex word. */
static _Atomic uint32_t g_wd_stop;
/* Set (release) by the watchdog thread as its last act, read (acquire) by
 * a stop for exit, which waits for it at most STKR__WD_EXIT_MS and then
 * leaves the thread detached rather than wait longer. Futex word. */
static _Atomic uint32_t g_wd_done;
/* A thread left detached by an exit stop that has not finished: written
 * and read by control calls only. */
static bool g_wd_detached;
#define STKR__WD_EXIT_MS 50

/* Hang state, watchdog thread only. */
static struct {
  bool active, unsampleable;
  uint32_t id;
  uint64_t start_ns;
  unsigned samples;
  stkr__run run;
} g_hang;

/* Put the current run (and the recovery) into the mailbox. Returns false
 * when the box stays full (the target has not taken the earlier runs:
 * counted as lost). */
static bool stkr__wd_post(stkr__sslot *s, bool recovered, uint64_t total_ms) {
  stkr__mail *m = &s->box;
  int expect;
  unsigned tries = 0;

  /* The watched thread exited and its slot may be another thread's now:
   * its runs must not go into that thread's ring. */
  if (atomic_load_explicit(&s->used, memory_order_acquire) != 1 ||
      atomic_load_explicit(&s->gen, memory_order_acquire) != g_wd.gen)
    goto lost;
  for (;;) {
    expect = STKR__MAIL_EMPTY;
    /* Acquire pairs with the target's release store of EMPTY. */
    if (atomic_compare_exchange_strong_explicit(&s->mail, &expect,
                                                STKR__MAIL_WRITING,
                                                memory_order_acquire,
                                                memory_order_relaxed)) {
      m->nruns = 0;
      m->recovered = false;
      break;
    }
    if (expect == STKR__MAIL_FULL &&
        atomic_compare_exchange_strong_explicit(&s->mail, &expect,
                                                STKR__MAIL_WRITING,
                                                memory_order_acquire,
                                                memory_order_relaxed))
      break;
    if (++tries > 20) /* TAKEN for 20 ms: the target is stuck pushing */
      goto lost;
    stkr__splat_sleep(&g_wd_stop, atomic_load(&g_wd_stop), 1);
  }
  if (g_hang.run.n != 0) {
    if (m->nruns == STKR__MAIL_RUNS) {
      stkr__sample_count(STKR__SC_HANG_RUNS_LOST);
    } else {
      stkr__mail_run *r = &m->runs[m->nruns++];
      r->n = g_hang.run.n;
      memcpy(r->pcs, g_hang.run.pcs, 8u * r->n);
      r->payload_len = (unsigned)snprintf(
          r->payload, sizeof r->payload,
          "hang=%u ms=%llu samples=%u first_ms=%llu", g_hang.id,
          (unsigned long long)g_hang.run.last_ms, g_hang.run.samples,
          (unsigned long long)g_hang.run.first_ms);
    }
  }
  if (recovered) {
    m->recovered = true;
    m->rec_payload_len = (unsigned)snprintf(
        m->rec_payload, sizeof m->rec_payload, "hang=%u ms=%llu samples=%u",
        g_hang.id, (unsigned long long)total_ms, g_hang.samples);
  }
  g_hang.run.n = 0;
  /* Release pairs with the target's acquire CAS from FULL: the box. */
  atomic_store_explicit(&s->mail, STKR__MAIL_FULL, memory_order_release);
  return true;
lost:
  if (g_hang.run.n != 0)
    stkr__sample_count(STKR__SC_HANG_RUNS_LOST);
  g_hang.run.n = 0;
  return false;
}

/* One sample of a hung thread: extend the run or start a new one. beat:
 * the heartbeat the look that found it hung read. */
static void stkr__wd_sample(uint64_t now, uint64_t beat) {
  static uint64_t pcs[STKR_MAX_DEPTH];
  unsigned n = 0;
  uint64_t hash = 0, ms;
  int err;

  if (g_hang.unsampleable)
    return;
  err = stkr__sample_request(g_wd.s, g_wd.gen, STKR__MODE_WALK, NULL, NULL,
                             0, g_wd.timeout_ms, pcs, &n, &hash);
  if (err == -EDEADLK || err == -ESRCH || err == -EBUSY) {
    g_hang.unsampleable = true; /* counted; no signal queued per round */
    return;
  }
  if (err != 0)
    return; /* timed out: try again next round */
  /* A beat between the look and the signal: the sample is of what the
   * thread does after the hang (a CI run under ASan on a loaded machine:
   * the hang's stack was the tick loop's sleep); the next look ends the
   * hang. Relaxed: the sample's completion (sample.c, acquire) orders
   * this load after the handler, which ran after any earlier beat. */
  if (atomic_load_explicit(&g_wd.s->beat, memory_order_relaxed) != beat)
    return;
  stkr__sample_count(STKR__SC_HANG_SAMPLES);
  g_hang.samples++;
  ms = (now - g_hang.start_ns) / 1000000u;
  if (g_hang.run.n != 0 && hash == g_hang.run.hash && n == g_hang.run.n) {
    g_hang.run.samples++;
    g_hang.run.last_ms = ms;
    return;
  }
  if (g_hang.run.n != 0)
    (void)stkr__wd_post(g_wd.s, false, 0);
  g_hang.run.n = n;
  g_hang.run.hash = hash;
  memcpy(g_hang.run.pcs, pcs, 8u * n);
  g_hang.run.samples = 1;
  g_hang.run.first_ms = g_hang.run.last_ms = ms;
}

static void stkr__wd_end_hang(uint64_t now, bool recovered) {
  if (!g_hang.active)
    return;
  (void)stkr__wd_post(g_wd.s, recovered,
                      (now - g_hang.start_ns) / 1000000u);
  g_hang.active = false;
}

static void *stkr__wd_main(void *arg) {
  stkr__sslot *s = g_wd.s;
  uint64_t last_beat, last_change, now, b;

  (void)arg;
  stkr__thread_ignore(); /* never records (nor counts) events of its own */
#if !defined(__APPLE__)
  /* Named, so that top/ps/debuggers tell it from the app's threads. */
  pthread_setname_np(pthread_self(), "stkr-watchdog");
#endif
  last_beat = atomic_load_explicit(&s->beat, memory_order_relaxed);
  last_change = stkr__clock_mono_ns();
  memset(&g_hang, 0, sizeof g_hang);
  while (!atomic_load_explicit(&g_wd_stop, memory_order_acquire)) {
    stkr__splat_sleep(&g_wd_stop, 0, g_wd.interval_ms);
    if (atomic_load_explicit(&g_wd_stop, memory_order_acquire))
      break;
    now = stkr__clock_mono_ns();
    /* Relaxed: only a change matters; the mailbox has its own ordering. */
    b = atomic_load_explicit(&s->beat, memory_order_relaxed);
    if (b != last_beat || (b & 1u)) {
      last_beat = b;
      last_change = now;
      stkr__wd_end_hang(now, true);
      continue;
    }
    if (now - last_change < (uint64_t)g_wd.threshold_ms * 1000000u)
      continue;
    if (!g_hang.active) {
      uint32_t id = g_hang.id + 1;
      memset(&g_hang, 0, sizeof g_hang);
      g_hang.active = true;
      g_hang.id = id;
      g_hang.start_ns = last_change;
      stkr__sample_count(STKR__SC_HANGS);
    }
    stkr__wd_sample(now, b);
  }
  /* A tick since the last look ended the hang: recovered, though the stop
   * came before the next look (QA, session 23: a stop within an interval
   * of the recovery made it "not recovered", its length short). */
  b = atomic_load_explicit(&s->beat, memory_order_relaxed);
  if (g_hang.active && (b != last_beat || (b & 1u)))
    stkr__wd_end_hang(stkr__clock_mono_ns(), true);
  /* Stopping inside a hang: its current run is recorded (no recovery). The
   * target takes it now through one more request (its handler takes the
   * mailbox; a target blocked in stkr_watchdog_stop's join answers too),
   * or else at its next tick, or when stop returns on it. */
  if (g_hang.active) {
    (void)stkr__wd_post(s, false, 0);
    g_hang.active = false;
    if (stkr__sslot_self() != s && !g_hang.unsampleable)
      (void)stkr__sample_request(s, g_wd.gen, STKR__MODE_MAIL, NULL, NULL, 0,
                                 g_wd.for_exit ? 20 : g_wd.timeout_ms, NULL,
                                 NULL, NULL);
  }
  /* Release: pairs with the acquire load in stkr__wd_stop(for_exit). */
  atomic_store_explicit(&g_wd_done, 1, memory_order_release);
  stkr__splat_wake(&g_wd_done);
  return NULL;
}

int stkr_watchdog_start(const stkr_watchdog_opts *opts) {
  stkr_watchdog_opts o = {0, 0, 0};
  stkr_thread_handle self;
  sigset_t all, old;
  int err;

  if (g_wd.running)
    return -EALREADY;
  if (!stkr__recorder_running())
    return -ENOTCONN;
  /* A thread an exit stop left detached still uses the statics. */
  if (g_wd_detached &&
      !atomic_load_explicit(&g_wd_done, memory_order_acquire))
    return -EBUSY;
  g_wd_detached = false;
  if (opts != NULL)
    o = *opts;
  if (o.target == 0) {
    if ((err = stkr_thread_self(&self)) != 0)
      return err;
    o.target = self;
  }
  g_wd.s = stkr__sslot_of(o.target, &g_wd.gen);
  if (g_wd.s == NULL)
    return -ESRCH;
  g_wd.threshold_ms = o.threshold_ms ? o.threshold_ms : 250;
  g_wd.interval_ms = o.interval_ms ? o.interval_ms : 50;
  /* A sample's wait stays within a round (and within 10..100 ms). */
  g_wd.timeout_ms = g_wd.interval_ms < 10    ? 10
                    : g_wd.interval_ms > 100 ? 100
                                             : g_wd.interval_ms;
  g_wd.for_exit = false;
  atomic_store_explicit(&g_wd_stop, 0, memory_order_relaxed);
  atomic_store_explicit(&g_wd_done, 0, memory_order_relaxed);
  (void)stkr_site_register(&stkr__site_wd_hang);
  (void)stkr_site_register(&stkr__site_wd_recovered);
  /* The thread starts with every signal blocked: process-directed signals
   * go to the app's threads, as if the watchdog did not exist. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  err = pthread_create(&g_wd.thread, NULL, stkr__wd_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0)
    return -EAGAIN;
  g_wd.running = true;
  return 0;
}

static int stkr__wd_stop(bool for_exit) {
  stkr__sslot *s = g_wd.s;

  if (!g_wd.running)
    return -ENOTCONN;
  g_wd.for_exit = for_exit;
  /* Release: pairs with the watchdog's acquire load (for_exit above). */
  atomic_store_explicit(&g_wd_stop, 1, memory_order_release);
  stkr__splat_wake(&g_wd_stop);
  /* Bounded: the thread wakes from its sleep at once; a sample under way
   * ends by its timeout; the last request at most once more. At exit, not
   * even that: after STKR__WD_EXIT_MS the thread is left detached. */
  if (for_exit) {
    uint64_t end = stkr__clock_mono_ns() + STKR__WD_EXIT_MS * 1000000ull;
    while (!atomic_load_explicit(&g_wd_done, memory_order_acquire) &&
           stkr__clock_mono_ns() < end)
      stkr__splat_sleep(&g_wd_done, 0, 1);
    if (!atomic_load_explicit(&g_wd_done, memory_order_acquire)) {
      pthread_detach(g_wd.thread);
      g_wd_detached = true;
      g_wd.running = false;
      return 0;
    }
  }
  pthread_join(g_wd.thread, NULL);
  g_wd.running = false;
  if (stkr__sslot_self() == s)
    stkr__sample_take_mail(s, NULL, 0);
  return 0;
}

int stkr_watchdog_stop(void) { return stkr__wd_stop(false); }

void stkr__watchdog_forget_after_fork(void) {
  /* Its thread is the parent's: nothing runs here to stop or join (QA,
   * session 33: stkr_watchdog_stop joined it, and returned 0). */
  g_wd.running = false;
}

void stkr__watchdog_stop_for_shutdown(bool for_exit) {
  (void)stkr__wd_stop(for_exit);
}

/* Bump the calling thread's heartbeat (the watchdog looks for a change)
 * and set bit 0 to `idle` (see stkr__sslot.beat). One writer (this
 * thread): load and store, no RMW. Relaxed: the watchdog only looks for a
 * change; the mailbox has its own ordering. */
static inline void stkr__wd_beat(stkr__sslot *s, uint64_t idle) {
  uint64_t b = atomic_load_explicit(&s->beat, memory_order_relaxed);
  atomic_store_explicit(&s->beat, ((b | 1u) + 1u) | idle,
                        memory_order_relaxed);
}

void stkr_watchdog_tick(void) {
  stkr__sslot *s = stkr__sslot_self();

  if (s == NULL)
    return;
  stkr__wd_beat(s, 0);
  if (atomic_load_explicit(&s->mail, memory_order_relaxed) == STKR__MAIL_FULL)
    stkr__sample_take_mail(s, NULL, 0);
}

void stkr_watchdog_idle(void) {
  stkr__sslot *s = stkr__sslot_self();

  if (s != NULL)
    stkr__wd_beat(s, 1);
}
