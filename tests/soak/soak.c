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

int main(int argc, char **argv) {
  double seconds = 60, warm, t0, t_warm_end = 0;
  const char *dir = "soak-out";
  unsigned threads = 4, max_sites = 512, epoch = 0, i;
  size_t ring = 16 << 10;
  bool rss_check = true, ok = true;
  uint64_t created = 0, seed = 0x5EED, rss_warm = 0, rss_end, rss_max = 0;
  uint64_t identity_checks = 0;
  stkr_config cfg;
  stkr_stats st;
  int err;

#if defined(__SANITIZE_ADDRESS__)
  rss_check = false; /* ASan's quarantine and shadow grow RSS by design */
#endif
  for (i = 1; i < (unsigned)argc; i++) {
    if (strcmp(argv[i], "--no-rss-check") == 0) {
      rss_check = false;
      continue;
    }
    if (i + 1 >= (unsigned)argc)
      usage();
    if (strcmp(argv[i], "--seconds") == 0)
      seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0)
      dir = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0)
      threads = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--ring") == 0)
      ring = (size_t)atol(argv[++i]);
    else if (strcmp(argv[i], "--sites") == 0)
      max_sites = (unsigned)atoi(argv[++i]);
    else
      usage();
  }
  if (seconds <= 0 || threads == 0 || threads > 256 || max_sites == 0 ||
      max_sites > MAX_SITES)
    usage();
  warm = seconds / 4 < 3 ? 3 : seconds / 4;
  if (warm > seconds)
    warm = seconds;

  for (i = 0; i < MAX_SITES; i++) {
    snprintf(g_names[i], sizeof g_names[i], "soak.site.%u", i);
    g_sites[i].name = g_names[i];
    g_sites[i].id = 0;
  }
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = ring;
  cfg.max_depth = 32;
  cfg.flush_interval_ms = 50;
  cfg.segment_bytes = 4 << 20;
  cfg.disk_cap_bytes = 64 << 20; /* hours of soak must not fill the disk */
  cfg.payload_max = 32;
  err = stkr_init(&cfg);
  if (err != 0) {
    fprintf(stderr, "soak: stkr_init(%s): %s\n", dir, stkr_strerror(err));
    printf("0 passed, 1 failed\n");
    return 1;
  }

  t0 = now_s();
  while (now_s() - t0 < seconds) {
    double e0 = now_s(), elapsed = e0 - t0;
    pthread_t th[256];
    worker_arg args[256];

    /* Sites grow linearly through warm-up, then stay. */
    unsigned want = elapsed >= warm ? max_sites
                                    : 1 + (unsigned)((max_sites - 1) * elapsed / warm);
    for (i = atomic_load(&g_nsites); i < want; i++)
      if (stkr_site_register(&g_sites[i]) != 0)
        ok = false;
    atomic_store_explicit(&g_nsites, want, memory_order_release);

    /* One epoch: batches of `threads` threads, born and gone. */
    while (now_s() - e0 < 1.0 && now_s() - t0 < seconds) {
      unsigned k, started = 0;

      for (k = 0; k < threads; k++) {
        args[k].seed = xorshift(&seed);
        if (pthread_create(&th[k], NULL, churn_thread, &args[k]) == 0)
          started++;
        else
          break;
      }
      for (k = 0; k < started; k++)
        pthread_join(th[k], NULL);
      created += started;
    }
    /* Every event before this point is on disk or counted as dropped. */
    if (stkr_flush() != 0) {
      fprintf(stderr, "soak: epoch %u: stkr_flush failed\n", epoch);
      ok = false;
    }
    stkr_stats_get(&st);
    identity_checks++;
    if (st.attempted != st.written + st.dropped ||
        st.attempted != atomic_load(&g_calls)) {
      fprintf(stderr,
              "soak: epoch %u: attempted %llu, written %llu + dropped %llu, "
              "calls %llu\n",
              epoch, (unsigned long long)st.attempted,
              (unsigned long long)st.written, (unsigned long long)st.dropped,
              (unsigned long long)atomic_load(&g_calls));
      ok = false;
    }
    uint64_t rss = rss_bytes();
    if (rss > rss_max)
      rss_max = rss;
    if (rss_warm == 0 && now_s() - t0 >= warm) {
      rss_warm = rss;
      t_warm_end = now_s() - t0;
    }
    epoch++;
  }
  rss_end = rss_bytes();
  stkr_stats_get(&st);
  if (stkr_shutdown() != 0)
    ok = false;
  {
    stkr_stats fin;
    stkr_stats_get(&fin);
    if (fin.attempted != fin.written + fin.dropped)
      ok = false;
    st = fin;
  }
  if (atomic_load(&g_rc_bad) != 0) {
    fprintf(stderr, "soak: %llu events returned an unexpected error\n",
            (unsigned long long)atomic_load(&g_rc_bad));
    ok = false;
  }
  if (rss_warm == 0)
    rss_warm = rss_end;
  if (rss_check && rss_end > rss_warm + rss_warm / 10 + (4u << 20)) {
    fprintf(stderr, "soak: RSS grew after warm-up: %.1f -> %.1f MiB\n",
            rss_warm / 1048576.0, rss_end / 1048576.0);
    ok = false;
  }

  printf("soak: %.1f s (warm-up %.1f s), %u epochs, %llu threads created "
         "(%llu recorded)\n",
         now_s() - t0, t_warm_end, epoch, (unsigned long long)created,
         (unsigned long long)st.threads);
  printf("soak: events attempted %llu = written %llu + dropped %llu "
         "(ring full %llu, re-entrant %llu, write error %llu, other %llu); "
         "identity held at %llu flushes and at shutdown\n",
         (unsigned long long)st.attempted, (unsigned long long)st.written,
         (unsigned long long)st.dropped,
         (unsigned long long)st.dropped_ring_full,
         (unsigned long long)st.dropped_reentrant,
         (unsigned long long)st.dropped_write_error,
         (unsigned long long)st.dropped_other,
         (unsigned long long)identity_checks);
  printf("soak: sites %llu, stacks %llu, batches %llu, %.1f MiB in %llu "
         "segments (%llu deleted by the disk cap), write errors %llu\n",
         (unsigned long long)st.sites, (unsigned long long)st.stacks,
         (unsigned long long)st.batches, st.bytes / 1048576.0,
         (unsigned long long)st.segments,
         (unsigned long long)st.segments_deleted,
         (unsigned long long)st.write_errors);
  printf("soak: RSS %.1f MiB after warm-up, %.1f MiB at the end, %.1f MiB "
         "max (%s)\n",
         rss_warm / 1048576.0, rss_end / 1048576.0, rss_max / 1048576.0,
         rss_check ? "checked: flat within 10% + 4 MiB" : "not checked");
  printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
