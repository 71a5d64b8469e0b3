/*
 * producers.c: does the hot path scale with threads? Aggregate stkr_event
 * throughput (events/s) with 1 producer thread vs. 2, each thread with its
 * own ring, at stack depth 32. Target: 2 threads >= 1.9x one thread.
 *
 * Two parts, one run:
 *   A. self-drain: the recorder alone (stkr__recorder_start, no worker).
 *      Each producer drains its own ring between timed batches, untimed.
 *      This isolates producer scaling: shared cache lines, false sharing,
 *      memory bandwidth of the ring writes.
 *   B. real worker: stkr_init() with the flush worker (files in a temp
 *      dir). Producers only push; the worker wakes when a ring passes half
 *      full and drains/encodes/writes concurrently, competing with the
 *      producers for the machine's cores (2 here: with 2 producers the
 *      worker has no core of its own). Between trials we call stkr_flush()
 *      untimed so every trial starts with empty rings.
 *
 * Methodology
 * - Two persistent producer threads, pinned to CPUs 0 and 1 (see
 *   producer_main), each parked at the leaf of a 32-frame recursion (the
 *   walk sees 35 frames), attached and warmed up before
 *   measuring (their rings' pages faulted in). The main thread only
 *   controls and sleeps on a condition variable during trials, so it never
 *   takes a core from the producers.
 * - A trial: the active producers meet at a spin barrier, each records t0,
 *   pushes BATCH events, records t1; the trial's rate is
 *   (threads x BATCH) / (max t1 - min t0). In part A both then meet at a
 *   second barrier before draining, so no drain overlaps anyone's timed
 *   region.
 * - Machines are shared and noisy: 1-thread and 2-thread trials alternate
 *   (1,2,2,1,1,2,...) so noise hits both alike; we print medians (p25..p75)
 *   over all trials, the ratio of medians and the median of per-round
 *   paired ratios.
 *
 * Parts C-E (producers_capacity.c, issue 18): bursts, a 10 s loop and
 * RSS at 50/200 live threads with the default configuration.
 *
 * Usage: producers [rounds]   (default 1001)
 *        producers --capacity [loop seconds]   (parts C-E only; default 10)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder/stkr_internal.h"
#include "tools/bench/bench_util.h"

#define DEPTH 32
#define MAX_DEPTH 64           /* recorder max_depth: 35 frames fit */
#define RING_BYTES (4u << 20)  /* per thread */
#define BATCH 8000             /* events per thread per trial (~2.5 MB) */
#define NPROD 2

STKR_SITE_DEFINE(g_site, "bench.producers");

static void die(const char *msg) {
  fprintf(stderr, "producers: %s\n", msg);
  exit(1);
}

/* ---- control between main and the producers ----------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;    /* to producers */
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER; /* to main */
static uint64_t g_gen;          /* trial number, bumped by main */
static uint64_t g_start_gen;    /* g_gen when the producers were created */
static unsigned g_active;       /* producers taking part in this trial */
static bool g_self_drain;       /* part A: drain own ring after the batch */
static bool g_quit;
static unsigned g_done;         /* producers finished with this trial */
static uint64_t g_t0[NPROD], g_t1[NPROD];
static uint64_t g_fail[NPROD];  /* stkr_event != 0 */
static uint64_t g_frames[NPROD];/* depth of the last drained record */

/* Spin barriers among the active producers (each on its own core; main is
 * asleep). Generation-counted so they can be reused. */
static _Atomic unsigned g_bar_count[2];
static _Atomic uint64_t g_bar_gen[2];

static void spin_barrier(int which, unsigned n) {
  uint64_t gen = atomic_load(&g_bar_gen[which]);
  if (atomic_fetch_add(&g_bar_count[which], 1) + 1 == n) {
    atomic_store(&g_bar_count[which], 0);
    atomic_fetch_add(&g_bar_gen[which], 1);
    return;
  }
  while (atomic_load(&g_bar_gen[which]) == gen)
    __builtin_ia32_pause();
}

static uint64_t drain_own(unsigned *last_depth) {
  stkr__ring *r = &stkr__tls->ring;
  const stkr__record *rec;
  uint64_t n = 0;
  while ((rec = stkr__ring_peek(r)) != NULL) {
    if (!stkr__record_known(rec)) /* a known record has no PCs */
      *last_depth = rec->depth;
    stkr__ring_release(r, rec);
    n++;
  }
  return n;
}

/* The producer's life, at the leaf of its recursion: wait for a trial, run
 * it, report, repeat. */
static __attribute__((noinline)) void leaf(unsigned me) {
  uint64_t seen = g_start_gen; /* set before pthread_create */

  for (;;) {
    unsigned n, i, depth = 0;
    uint64_t t0, t1, fails = 0;
    bool drain;

    pthread_mutex_lock(&g_mu);
    while (!g_quit && (g_gen == seen || me >= g_active))
      pthread_cond_wait(&g_cv, &g_mu);
    if (g_quit) {
      pthread_mutex_unlock(&g_mu);
      return;
    }
    seen = g_gen;
    n = g_active;
    drain = g_self_drain;
    pthread_mutex_unlock(&g_mu);

    spin_barrier(0, n);
    t0 = bench_now_ns();
    for (i = 0; i < BATCH; i++)
      fails += stkr_event(&g_site, NULL, 0) != 0;
    t1 = bench_now_ns();
    if (drain) {
      spin_barrier(1, n); /* nobody drains while another is timed */
      if (drain_own(&depth) != BATCH)
        fails++;
    }

    pthread_mutex_lock(&g_mu);
    g_t0[me] = t0;
    g_t1[me] = t1;
    g_fail[me] += fails;
    if (drain && depth != 0) /* known records (depth 0) keep the last */
      g_frames[me] = depth;
    if (++g_done == n)
      pthread_cond_signal(&g_done_cv);
    pthread_mutex_unlock(&g_mu);
  }
}

static __attribute__((noinline)) void descend(unsigned n, unsigned me) {
  if (n <= 1)
    leaf(me);
  else
    descend(n - 1, me);
  __asm__ volatile("" ::: "memory"); /* not a tail call: keep the frame */
}

/* Producer i runs pinned to CPU i (mod the CPU count): otherwise the
 * scheduler sometimes wakes both producers onto one core after the condvar
 * broadcast, and a trial then measures timesharing, not scaling. */
static void *producer_main(void *arg) {
  unsigned me = (unsigned)(uintptr_t)arg;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;

  CPU_ZERO(&set);
  CPU_SET((int)(me % (unsigned)(ncpu > 0 ? ncpu : 1)), &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    fprintf(stderr, "producers: warning: could not pin producer %u\n", me);
  descend(DEPTH, me);
  return NULL;
}

/* Run one trial with n producers; returns aggregate events/s. */
static double trial(unsigned n, bool self_drain) {
  uint64_t t0 = UINT64_MAX, t1 = 0;
  unsigned i;

  pthread_mutex_lock(&g_mu);
  g_active = n;
  g_self_drain = self_drain;
  g_done = 0;
  g_gen++;
  pthread_cond_broadcast(&g_cv);
  while (g_done < n)
    pthread_cond_wait(&g_done_cv, &g_mu);
  for (i = 0; i < n; i++) {
    if (g_t0[i] < t0) t0 = g_t0[i];
    if (g_t1[i] > t1) t1 = g_t1[i];
  }
  pthread_mutex_unlock(&g_mu);
  return (double)n * BATCH / ((double)(t1 - t0) * 1e-9);
}

/* ---- trials -------------------------------------------------------------- */

/* Alternate 1- and 2-thread trials; print the table; true if the target
 * (2 threads >= 1.9x one) is met. after_trial (may be NULL) runs untimed
 * after each trial. */
static double g_ratio[2]; /* part A, part B */
static double g_ns1[2];   /* ns per event, 1 thread, part A / B */

static bool measure(int part, const char *title, unsigned rounds,
                    bool self_drain, void (*after_trial)(void)) {
  double *r1 = calloc(rounds, sizeof *r1), *r2 = calloc(rounds, sizeof *r2);
  double *pr = calloc(rounds, sizeof *pr), m1, m2, ratio, paired;
  unsigned r;
  bool ok;

  for (r = 0; r < 3; r++) { /* warm-up trials */
    trial(1, self_drain);
    if (after_trial) after_trial();
    trial(2, self_drain);
    if (after_trial) after_trial();
  }
  for (r = 0; r < rounds; r++) {
    bool one_first = r % 2 == 0;
    double a = trial(one_first ? 1 : 2, self_drain);
    if (after_trial) after_trial();
    double b = trial(one_first ? 2 : 1, self_drain);
    if (after_trial) after_trial();
    r1[r] = one_first ? a : b;
    r2[r] = one_first ? b : a;
    pr[r] = r2[r] / r1[r];
  }
  m1 = bench_quantile(r1, rounds, 0.5);
  m2 = bench_quantile(r2, rounds, 0.5);
  ratio = m2 / m1;
  paired = bench_quantile(pr, rounds, 0.5);
  ok = ratio >= 1.9;
  g_ratio[part] = ratio;
  g_ns1[part] = 1e9 / m1;
  printf("%s\n", title);
  printf("  %-12s %14s %22s %14s\n", "producers", "M events/s", "[p25..p75]",
         "ns/event/thr");
  printf("  %-12s %14.2f   [%7.2f..%7.2f]  %14.1f\n", "1 thread", m1 / 1e6,
         bench_quantile(r1, rounds, 0.25) / 1e6,
         bench_quantile(r1, rounds, 0.75) / 1e6,
         1e9 / m1);
  printf("  %-12s %14.2f   [%7.2f..%7.2f]  %14.1f\n", "2 threads", m2 / 1e6,
         bench_quantile(r2, rounds, 0.25) / 1e6,
         bench_quantile(r2, rounds, 0.75) / 1e6,
         2e9 / m2);
  printf("  2 threads / 1 thread = %.2fx (paired %.2fx), target >= 1.9x: %s\n\n",
         ratio, paired, ok ? "PASS" : "MISS");
  free(r1);
  free(r2);
  free(pr);
  return ok;
}

/* ---- part B helpers ------------------------------------------------------ */

static void flush_untimed(void) {
  if (stkr_flush() != 0)
    die("stkr_flush failed");
}

/* ---- main ---------------------------------------------------------------- */

int producers_capacity(unsigned loop_seconds, int *total);

/* Start the NPROD producer threads (they wait for trials). */
static void start_producers(pthread_t *th) {
  unsigned i;

  for (i = 0; i < NPROD; i++)
    if (pthread_create(&th[i], NULL, producer_main, (void *)(uintptr_t)i))
      die("pthread_create failed");
}

/* Let the producers exit and join them. */
static void stop_producers(pthread_t *th) {
  unsigned i;

  pthread_mutex_lock(&g_mu);
  g_quit = true;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  for (i = 0; i < NPROD; i++)
    pthread_join(th[i], NULL);
}

/* Part A: the recorder only, producers drain their own rings. @return
 * whether the scaling target is met. */
static bool part_a(unsigned rounds) {
  stkr__rconf rc = {.ring_bytes = RING_BYTES, .max_depth = MAX_DEPTH};
  pthread_t th[NPROD];
  unsigned i;
  bool ok;

  if (stkr__recorder_start(&rc, NULL, NULL, NULL) != 0)
    die("stkr__recorder_start failed");
  if (stkr_site_register(&g_site) != 0)
    die("site register failed");
  start_producers(th);
  for (i = 0; i < 2 * RING_BYTES / (BATCH * 300) + 1; i++)
    trial(2, true); /* fault in both rings: two laps */
  ok = measure(0, "A. self-drain (no worker; each producer drains its own "
                 "ring between trials, untimed)",
               rounds, true, NULL);
  for (i = 0; i < NPROD; i++)
    if (g_fail[i] != 0)
      die("part A: an event was dropped or a drain came up short");
  printf("  frames per event: %llu (thread 0), %llu (thread 1); drops: 0\n\n",
         (unsigned long long)g_frames[0], (unsigned long long)g_frames[1]);

  /* Park the producers, stop the bare recorder; they exit so that part B
   * gets fresh threads whose rings come from stkr_init's config. */
  stop_producers(th);
  stkr__recorder_stop();
  return ok;
}

/* Part B: the real flush worker. @return whether the target is met. */
static bool part_b(unsigned rounds, long ncpu) {
  char dir[] = "/tmp/stkr-bench-producers-XXXXXX";
  pthread_t th[NPROD];
  stkr_config cfg;
  stkr_stats st;
  unsigned i;
  bool ok;

  if (mkdtemp(dir) == NULL)
    die("mkdtemp failed");
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = RING_BYTES;
  cfg.max_depth = MAX_DEPTH;
  cfg.disk_cap_bytes = 256ull << 20;
  if (stkr_init(&cfg) != 0)
    die("stkr_init failed");
  g_quit = false;
  g_start_gen = g_gen;
  start_producers(th);
  for (i = 0; i < 2 * RING_BYTES / (BATCH * 300) + 1; i++) {
    trial(2, false);
    flush_untimed();
  }
  ok = measure(1, "B. real flush worker (stkr_init; the worker wakes at half "
               "a ring and competes for the cores; stkr_flush between "
               "trials, untimed)",
               rounds, false, flush_untimed);
  if (stkr_stats_get(&st) != 0)
    die("stkr_stats_get failed");
  printf("  worker stats: attempted %llu, written %llu, dropped %llu "
         "(ring full %llu), batches %llu, %.2f bytes/event on disk\n",
         (unsigned long long)st.attempted, (unsigned long long)st.written,
         (unsigned long long)st.dropped,
         (unsigned long long)st.dropped_ring_full,
         (unsigned long long)st.batches,
         st.written ? (double)st.bytes / (double)st.written : 0.0);
  printf("  1 thread: %.1f ns/event with the worker vs %.1f self-drain "
         "(+%.1f): the worker drains that ring concurrently from the other "
         "core once it passes half full\n",
         g_ns1[1], g_ns1[0], g_ns1[1] - g_ns1[0]);
  if (ncpu <= 2)
    printf("  note: %ld CPUs: in part B the worker has no core of its own "
           "once 2 producers run; it steals time from them.\n",
           ncpu);

  stop_producers(th);
  stkr_shutdown();
  bench_remove_dir(dir);
  return ok;
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 1001;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int cap_pass, cap_total;
  bool ok_a, ok_b;

  if (argc > 1 && strcmp(argv[1], "--capacity") == 0) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    cap_pass = producers_capacity(argc > 2 ? (unsigned)atoi(argv[2]) : 10,
                                  &cap_total);
    printf("\nverdict (C-E): %d of %d capacity goals met\n", cap_pass,
           cap_total);
    return 0;
  }
  if (rounds < 5)
    rounds = 5;
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("producers: %ld CPUs online; depth %u; %u events per thread per "
         "trial; ring %u KiB per thread; %u rounds of (1-thread, 2-thread)"
         " trials, alternating order\n\n",
         ncpu, DEPTH, BATCH, RING_BYTES >> 10, rounds);
  ok_a = part_a(rounds);
  ok_b = part_b(rounds, ncpu);
  cap_pass = producers_capacity(10, &cap_total);

  /* The target is about producer scaling, which part A isolates. Part B's
   * ratio is printed for what it is: its 1-thread baseline runs while the
   * worker drains the same ring from the other core (cross-core traffic on
   * the ring indices and records slows that producer), and its 2-thread
   * trials leave the worker no core, so B's ratio overstates scaling. */
  printf("\nverdict: %s: 2 threads / 1 thread, self-drain %.2fx (target >= "
         "1.9x, the scaling measure); with the real worker %.2fx (%s, but its "
         "1-thread baseline is slowed by the concurrently draining worker)\n",
         ok_a ? "PASS" : "MISS", g_ratio[0], g_ratio[1],
         ok_b ? "PASS" : "MISS");
  printf("verdict (C-E): %d of %d capacity goals met (burst 0 drops, loop "
         "<= 1%%, <= 16 MB at 200 threads)\n", cap_pass, cap_total);
  return 0;
}
