/*
 * soak.c: the recorder under sustained abuse, for a set time.
 *
 *   soak [--seconds N] [--dir DIR] [--threads K] [--ring BYTES]
 *        [--sites N] [--no-rss-check]
 *
 * What runs, in epochs of about one second:
 * - thread churn: K threads at a time are created, each fires one burst of
 *   events and exits; a new batch of K starts as soon as they are joined
 *   (some threads exit without any event, some attach first);
 * - bursts beyond ring capacity: bursts of up to 4000 back-to-back events
 *   into rings of --ring bytes (default 16 KiB, ~60 records), so rings
 *   overflow and drop;
 * - growing site and stack counts: during warm-up (the first quarter of
 *   the run, at least 3 s) new sites are registered up to --sites (default
 *   512), and each site is hit from 8 call depths, so distinct stacks grow
 *   to sites x 8 and then stay;
 * - at the end of every epoch all threads are joined, stkr_flush() runs
 *   and attempted == written + dropped must hold exactly.
 * After warm-up, resident memory (RSS) must stay flat: at the end at most
 * 10% + 4 MiB above its value when warm-up ended (skipped with
 * --no-rss-check, and under ASan, whose quarantine grows RSS by design).
 * Leaks: build with --config=asan (LeakSanitizer checks at exit; the run
 * ends with stkr_shutdown() and frees everything it allocated).
 *
 * Prints its figures (duration, events, threads, drops, RSS) and the
 * closing line "1 passed, 0 failed" or "0 passed, 1 failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder/stackrec.h"

#define MAX_SITES 1024
#define DEPTHS 8

static stkr_site g_sites[MAX_SITES];
static char g_names[MAX_SITES][32];
static _Atomic unsigned g_nsites; /* sites usable so far (registered) */
static _Atomic uint64_t g_calls;  /* stkr_event() calls made */
static _Atomic uint64_t g_rc_bad; /* results other than 0 / -EAGAIN */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;

  if (f == NULL)
    return 0;
  if (fscanf(f, "%lu %lu", &size, &res) != 2)
    res = 0;
  fclose(f);
  return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* Distinct call depths give distinct stacks for the same site. */
static __attribute__((noinline)) void fire(unsigned depth, stkr_site *site,
                                           const char *p, size_t len) {
  if (depth > 0) {
    fire(depth - 1, site, p, len);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return;
  }
  int rc = stkr_event(site, p, len);
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  if (rc != 0 && rc != -EAGAIN)
    atomic_fetch_add_explicit(&g_rc_bad, 1, memory_order_relaxed);
}

typedef struct worker_arg {
  uint64_t seed;
} worker_arg;

static void *churn_thread(void *arg) {
  worker_arg *w = arg;
  uint64_t s = w->seed | 1;
  unsigned kind = (unsigned)(xorshift(&s) % 16), n, i;
  unsigned nsites = atomic_load_explicit(&g_nsites, memory_order_acquire);
  char payload[48];

  if (kind == 0 || nsites == 0)
    return NULL; /* a thread that never records */
  if (kind == 1)
    (void)stkr_thread_attach();
  /* Mostly short bursts; one in four overflows the ring by far. */
  n = kind < 5 ? 1000 + (unsigned)(xorshift(&s) % 3000)
               : 1 + (unsigned)(xorshift(&s) % 200);
  for (i = 0; i < n; i++) {
    unsigned site = (unsigned)(xorshift(&s) % nsites);
    unsigned depth = (unsigned)(xorshift(&s) % DEPTHS);
    int len = 0;

    if (i % 3 != 0)
      len = snprintf(payload, sizeof payload, "t%llx-%u",
                     (unsigned long long)w->seed, i);
    fire(depth, &g_sites[site], len ? payload : NULL, (size_t)len);
  }
  return NULL;
}

static void usage(void) {
  fprintf(stderr, "usage: soak [--seconds N] [--dir DIR] [--threads K] "
                  "[--ring BYTES] [--sites N] [--no-rss-check]\n");
  exit(2);
}

typedef struct soak_opts {
  double seconds;
  const char *dir;
  unsigned threads, max_sites;
  size_t ring;
  bool rss_check;
} soak_opts;

static void parse_args(int argc, char **argv, soak_opts *o) {
  unsigned i;

  *o = (soak_opts){.seconds = 60, .dir = "soak-out", .threads = 4,
                   .max_sites = 512, .ring = 16 << 10, .rss_check = true};
#if defined(__SANITIZE_ADDRESS__)
  o->rss_check = false; /* ASan's quarantine and shadow grow RSS by design */
#endif
  for (i = 1; i < (unsigned)argc; i++) {
    if (strcmp(argv[i], "--no-rss-check") == 0) {
      o->rss_check = false;
      continue;
    }
    if (i + 1 >= (unsigned)argc)
      usage();
    if (strcmp(argv[i], "--seconds") == 0)
      o->seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0)
      o->dir = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0)
      o->threads = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--ring") == 0)
      o->ring = (size_t)atol(argv[++i]);
    else if (strcmp(argv[i], "--sites") == 0)
      o->max_sites = (unsigned)atoi(argv[++i]);
    else
      usage();
  }
  if (o->seconds <= 0 || o->threads == 0 || o->threads > 256 ||
      o->max_sites == 0 || o->max_sites > MAX_SITES)
    usage();
}

/* What the epochs found, for the summary. */
typedef struct soak_run {
  double t0, warm, t_warm_end;
  unsigned epoch;
  uint64_t seed, created, identity_checks, rss_warm, rss_max;
  bool ok;
} soak_run;

/* One epoch (about a second): the sites grow linearly through warm-up,
 * then stay; batches of o->threads threads are born and gone; then every
 * event so far must be on disk or counted as dropped, and RSS is sampled. */
static void run_epoch(const soak_opts *o, soak_run *run) {
  double e0 = now_s(), elapsed = e0 - run->t0;
  pthread_t th[256];
  worker_arg args[256];
  stkr_stats st;
  unsigned i;
  unsigned want = elapsed >= run->warm
                      ? o->max_sites
                      : 1 + (unsigned)((o->max_sites - 1) * elapsed / run->warm);

  for (i = atomic_load(&g_nsites); i < want; i++)
    if (stkr_site_register(&g_sites[i]) != 0)
      run->ok = false;
  atomic_store_explicit(&g_nsites, want, memory_order_release);
  while (now_s() - e0 < 1.0 && now_s() - run->t0 < o->seconds) {
    unsigned k, started = 0;

    for (k = 0; k < o->threads; k++) {
      args[k].seed = xorshift(&run->seed);
      if (pthread_create(&th[k], NULL, churn_thread, &args[k]) == 0)
        started++;
      else
        break;
    }
    for (k = 0; k < started; k++)
      pthread_join(th[k], NULL);
    run->created += started;
  }
  if (stkr_flush() != 0) {
    fprintf(stderr, "soak: epoch %u: stkr_flush failed\n", run->epoch);
    run->ok = false;
  }
  stkr_stats_get(&st);
  run->identity_checks++;
  if (st.attempted != st.written + st.dropped ||
      st.attempted != atomic_load(&g_calls)) {
    fprintf(stderr,
            "soak: epoch %u: attempted %llu, written %llu + dropped %llu, "
            "calls %llu\n",
            run->epoch, (unsigned long long)st.attempted,
            (unsigned long long)st.written, (unsigned long long)st.dropped,
            (unsigned long long)atomic_load(&g_calls));
    run->ok = false;
  }
  uint64_t rss = rss_bytes();
  if (rss > run->rss_max)
    run->rss_max = rss;
  if (run->rss_warm == 0 && now_s() - run->t0 >= run->warm) {
    run->rss_warm = rss;
    run->t_warm_end = now_s() - run->t0;
  }
  run->epoch++;
}

static void print_summary(const soak_opts *o, const soak_run *run,
                          const stkr_stats *st, uint64_t rss_end) {
  printf("soak: %.1f s (warm-up %.1f s), %u epochs, %llu threads created "
         "(%llu recorded)\n",
         now_s() - run->t0, run->t_warm_end, run->epoch,
         (unsigned long long)run->created, (unsigned long long)st->threads);
  printf("soak: events attempted %llu = written %llu + dropped %llu "
         "(ring full %llu, re-entrant %llu, write error %llu, other %llu); "
         "identity held at %llu flushes and at shutdown\n",
         (unsigned long long)st->attempted, (unsigned long long)st->written,
         (unsigned long long)st->dropped,
         (unsigned long long)st->dropped_ring_full,
         (unsigned long long)st->dropped_reentrant,
         (unsigned long long)st->dropped_write_error,
         (unsigned long long)st->dropped_other,
         (unsigned long long)run->identity_checks);
  printf("soak: sites %llu, stacks %llu, batches %llu, %.1f MiB in %llu "
         "segments (%llu deleted by the disk cap), write errors %llu\n",
         (unsigned long long)st->sites, (unsigned long long)st->stacks,
         (unsigned long long)st->batches, st->bytes / 1048576.0,
         (unsigned long long)st->segments,
         (unsigned long long)st->segments_deleted,
         (unsigned long long)st->write_errors);
  printf("soak: RSS %.1f MiB after warm-up, %.1f MiB at the end, %.1f MiB "
         "max (%s)\n",
         run->rss_warm / 1048576.0, rss_end / 1048576.0,
         run->rss_max / 1048576.0,
         o->rss_check ? "checked: flat within 10% + 4 MiB" : "not checked");
}

int main(int argc, char **argv) {
  soak_opts o;
  soak_run run = {.seed = 0x5EED, .ok = true};
  uint64_t rss_end;
  stkr_config cfg;
  stkr_stats st;
  unsigned i;
  int err;

  parse_args(argc, argv, &o);
  run.warm = o.seconds / 4 < 3 ? 3 : o.seconds / 4;
  if (run.warm > o.seconds)
    run.warm = o.seconds;
  for (i = 0; i < MAX_SITES; i++) {
    snprintf(g_names[i], sizeof g_names[i], "soak.site.%u", i);
    g_sites[i].name = g_names[i];
    g_sites[i].id = 0;
  }
  cfg = (stkr_config){.dir = o.dir, .ring_bytes = o.ring, .max_depth = 32,
                      .flush_interval_ms = 50, .segment_bytes = 4 << 20,
                      /* hours of soak must not fill the disk */
                      .disk_cap_bytes = 64 << 20, .payload_max = 32};
  err = stkr_init(&cfg);
  if (err != 0) {
    fprintf(stderr, "soak: stkr_init(%s): %s\n", o.dir, stkr_strerror(err));
    printf("0 passed, 1 failed\n");
    return 1;
  }
  run.t0 = now_s();
  while (now_s() - run.t0 < o.seconds)
    run_epoch(&o, &run);
  rss_end = rss_bytes();
  if (stkr_shutdown() != 0)
    run.ok = false;
  stkr_stats_get(&st);
  if (st.attempted != st.written + st.dropped)
    run.ok = false;
  if (atomic_load(&g_rc_bad) != 0) {
    fprintf(stderr, "soak: %llu events returned an unexpected error\n",
            (unsigned long long)atomic_load(&g_rc_bad));
    run.ok = false;
  }
  if (run.rss_warm == 0)
    run.rss_warm = rss_end;
  if (o.rss_check && rss_end > run.rss_warm + run.rss_warm / 10 + (4u << 20)) {
    fprintf(stderr, "soak: RSS grew after warm-up: %.1f -> %.1f MiB\n",
            run.rss_warm / 1048576.0, rss_end / 1048576.0);
    run.ok = false;
  }
  print_summary(&o, &run, &st, rss_end);
  printf("%d passed, %d failed\n", run.ok ? 1 : 0, run.ok ? 0 : 1);
  return run.ok ? 0 : 1;
}
