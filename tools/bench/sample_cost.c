/*
 * sample_cost.c: what sampling another thread and the hang watchdog cost,
 * side by side in one run (issue 12 goals: <= 5 us per sample of another
 * thread at depth 32; watchdog idle overhead <= 0.1% of a core).
 *
 * Part A, per sample (stkr_thread_sample, the whole round trip as the
 * sampler sees it: tgkill, the target's handler walking 32+ frames and
 * pushing into its ring, the futex wake, the sampler's wake-up), against a
 * target parked at depth 32:
 *   blocked   the target waits in a futex (the usual hang: a lock, I/O)
 *   busy      the target spins at depth 32 (on the other core)
 * beside the floor of the mechanism (a bare signal round trip: tgkill to
 * a blocked thread whose handler only answers through a futex, waited for
 * the same way: spin 10 us, then sleep), stkr_event at depth 32 on the
 * sampling thread itself (what the same record costs when a thread
 * records its own stack), and the CPU
 * time the blocked target spends per sample (its handler), from its
 * thread CPU clock, beside the floor target's per bare signal (the
 * figure a loaded machine leaves stable). Batches of 1000 samples,
 * interleaved; medians.
 *
 * Part B, the watchdog idle: a thread ticks every 1 ms for 5 s while the
 * watchdog (defaults: 250 ms threshold, 50 ms interval) watches it; the
 * watchdog thread's own CPU time (schedstat, ns) over wall time is its
 * share of a core. Beside it: the cost of one stkr_watchdog_tick() and of
 * an empty call.
 *
 * Usage: sample_cost [rounds]   (default 30). Linux.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recorder/stackrec.h"
#include "tools/bench/bench_util.h"

#define DEPTH 32
#define BATCH 1000

STKR_SITE_DEFINE(g_site, "bench.sample");
STKR_SITE_DEFINE(g_self_site, "bench.self");

static uint64_t cpu_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct target {
  int busy;
  pthread_t th;
  _Atomic uint64_t handle;
  _Atomic uint32_t stop;
  _Atomic int ready;
} target;

__attribute__((noinline)) static void park(target *t) {
  while (!atomic_load_explicit(&t->stop, memory_order_relaxed)) {
    if (!t->busy)
      syscall(SYS_futex, &t->stop, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  }
}

__attribute__((noinline)) static void descend(target *t, int n) {
  if (n <= 1)
    park(t);
  else
    descend(t, n - 1);
  __asm__ volatile("" ::: "memory");
}

static void *target_main(void *p) {
  target *t = p;
  stkr_thread_handle h;

  if (stkr_thread_self(&h) != 0)
    return NULL;
  atomic_store(&t->handle, h);
  atomic_store(&t->ready, 1);
  descend(t, DEPTH - 2); /* + park + target_main... = 32+ frames */
  return NULL;
}

__attribute__((noinline)) static void self_event(int n) {
  if (n <= 1)
    (void)stkr_event(&g_self_site, NULL, 0);
  else
    self_event(n - 1);
  __asm__ volatile("" ::: "memory");
}

static uint64_t median(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_u64);
  return v[n / 2];
}

/* ns per sample of t over one batch; *fails counts non-zero results. */
static uint64_t sample_batch(target *t, uint64_t *fails) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < BATCH; i++)
    if (stkr_thread_sample(atomic_load(&t->handle), &g_site, NULL, 0, 1000) != 0)
      (*fails)++;
  return (bench_now_ns() - t0) / BATCH;
}

/* The floor: a bare signal round trip to a thread blocked in a futex. */
static _Atomic uint32_t g_floor_ack;
static _Atomic pid_t g_floor_tid;
static void floor_handler(int sig) {
  (void)sig;
  atomic_store_explicit(&g_floor_ack, 1, memory_order_release);
  syscall(SYS_futex, &g_floor_ack, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void *floor_main(void *p) {
  target *t = p;
  atomic_store(&g_floor_tid, (pid_t)syscall(SYS_gettid));
  atomic_store(&t->ready, 1);
  park(t);
  return NULL;
}
static uint64_t floor_batch(void) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < BATCH; i++) {
    atomic_store(&g_floor_ack, 0);
    syscall(SYS_tgkill, getpid(), atomic_load(&g_floor_tid), SIGRTMIN + 1);
    uint64_t spin_end = bench_now_ns() + 10000;
    while (!atomic_load_explicit(&g_floor_ack, memory_order_acquire)) {
      if (bench_now_ns() < spin_end)
        continue;
      syscall(SYS_futex, &g_floor_ack, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
  }
  return (bench_now_ns() - t0) / BATCH;
}

static uint64_t event_batch(void) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < BATCH; i++)
    self_event(DEPTH - 1);
  return (bench_now_ns() - t0) / BATCH;
}

__attribute__((noinline)) static void empty_call(void) {
  __asm__ volatile("" ::: "memory");
}

static void *ticker(void *p) {
  _Atomic int *stop = p;
  stkr_thread_handle h;
  stkr_watchdog_opts o = {0, 0, 0};

  stkr_thread_self(&h);
  if (stkr_watchdog_start(&o) != 0) {
    fprintf(stderr, "sample_cost: watchdog did not start\n");
    return NULL;
  }
  while (!atomic_load(stop)) {
    stkr_watchdog_tick();
    usleep(1000);
  }
  stkr_watchdog_stop();
  return NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Part A's samples, one per round each (ns, or CPU ns per sample). */
typedef struct part_a {
  int rounds;
  uint64_t *blocked, *busy, *self, *handler, *floor_v, *floor_cpu;
  uint64_t *sampler_cpu, *floor_sampler_cpu; /* this thread's, per sample */
  uint64_t fails;
} part_a;

/* Warm up, then the rounds: each contender once per round, the first
 * rotating. tb blocks, tz is busy, tf takes the floor's signals. */
static void measure_a(part_a *x, target *tb, target *tz, const target *tf) {
  clockid_t cb, cf;

  pthread_getcpuclockid(tb->th, &cb);
  pthread_getcpuclockid(tf->th, &cf);
  for (int w = 0; w < 2; w++) { /* warm-up */
    sample_batch(tb, &x->fails);
    sample_batch(tz, &x->fails);
    event_batch();
    floor_batch();
  }
  x->fails = 0;
  for (int r = 0; r < x->rounds; r++) {
    for (int k = 0; k < 4; k++) {
      switch ((r + k) % 4) {
      case 0: {
        uint64_t c0 = cpu_ns(cb), s0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        x->blocked[r] = sample_batch(tb, &x->fails);
        x->sampler_cpu[r] = (cpu_ns(CLOCK_THREAD_CPUTIME_ID) - s0) / BATCH;
        x->handler[r] = (cpu_ns(cb) - c0) / BATCH;
        break;
      }
      case 1:
        x->busy[r] = sample_batch(tz, &x->fails);
        break;
      case 2: {
        uint64_t c0 = cpu_ns(cf), s0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        x->floor_v[r] = floor_batch();
        x->floor_sampler_cpu[r] =
            (cpu_ns(CLOCK_THREAD_CPUTIME_ID) - s0) / BATCH;
        x->floor_cpu[r] = (cpu_ns(cf) - c0) / BATCH;
        break;
      }
      default:
        x->self[r] = event_batch();
        break;
      }
    }
    stkr_flush(); /* drain between rounds, outside timing */
  }
}

/* Part A's table against its goal. */
static void print_a(part_a *x, const stkr_sample_stats *ss,
                    const stkr_stats *st) {
  int rounds = x->rounds;
  uint64_t mb = median(x->blocked, rounds), mz = median(x->busy, rounds),
           me = median(x->self, rounds), mh = median(x->handler, rounds),
           mf = median(x->floor_v, rounds), mfc = median(x->floor_cpu, rounds),
           ms = median(x->sampler_cpu, rounds),
           mfs = median(x->floor_sampler_cpu, rounds);

  printf("sample_cost: %d rounds x %d samples, depth %d, on %ld CPUs\n\n",
         x->rounds, BATCH, DEPTH, sysconf(_SC_NPROCESSORS_ONLN));
  printf("A. per sample of another thread (median ns)\n");
  printf("  %-44s %8s %10s %10s\n", "", "ns", "vs event", "vs floor");
  printf("  %-44s %8lu %9.1fx %9.2fx\n",
         "stkr_thread_sample, target blocked (futex)", (unsigned long)mb,
         (double)mb / (double)me, (double)mb / (double)mf);
  printf("  %-44s %8lu %9.1fx %9.2fx\n", "stkr_thread_sample, target busy",
         (unsigned long)mz, (double)mz / (double)me, (double)mz / (double)mf);
  printf("  %-44s %8lu %9.1fx %9.2fx\n",
         "floor: bare signal round trip (blocked)", (unsigned long)mf,
         (double)mf / (double)me, 1.0);
  printf("  %-44s %8lu %9.1fx %9.2fx\n",
         "  the blocked target's CPU per sample", (unsigned long)mh,
         (double)mh / (double)me, (double)mh / (double)mfc);
  printf("  %-44s %8lu %9.1fx %9.2fx\n", "  the floor target's CPU per signal",
         (unsigned long)mfc, (double)mfc / (double)me, 1.0);
  printf("  %-44s %8lu %9.1fx %9.2fx\n",
         "  the sampler's CPU per sample (blocked)", (unsigned long)ms,
         (double)ms / (double)me, (double)ms / (double)mfs);
  printf("  %-44s %8lu %9.1fx %9.2fx\n", "  the floor sender's CPU per signal",
         (unsigned long)mfs, (double)mfs / (double)me, 1.0);
  printf("  %-44s %8lu %9.1fx\n", "stkr_event on the sampler itself",
         (unsigned long)me, 1.0);
  printf("  goal <= 5000 ns: blocked %.2fx of goal (%s), busy %.2fx (%s)\n",
         mb / 5000.0, mb <= 5000 ? "PASS" : "MISS", mz / 5000.0,
         mz <= 5000 ? "PASS" : "MISS");
  printf("  samples: %lu recorded, %lu dropped, %lu failed; events written "
         "%lu of %lu attempted\n\n",
         (unsigned long)ss->recorded, (unsigned long)ss->dropped,
         (unsigned long)x->fails, (unsigned long)st->written,
         (unsigned long)st->attempted);
}

/* Part B: the watchdog idle. */
static void watchdog_idle(void) {
  _Atomic int stop = 0;
  pthread_t th;
  uint64_t w0, c0, c1, w1, t0, tick_ns, empty_ns;
  const int secs = 5;

  pthread_create(&th, NULL, ticker, &stop);
  usleep(200000);
  c0 = bench_thread_cpu_ns("stkr-watchdog");
  w0 = bench_now_ns();
  usleep((useconds_t)secs * 1000000u);
  c1 = bench_thread_cpu_ns("stkr-watchdog");
  w1 = bench_now_ns();
  atomic_store(&stop, 1);
  pthread_join(th, NULL);

  /* tick and an empty call, side by side, on this thread (registered) */
  stkr_thread_handle h;
  stkr_thread_self(&h);
  uint64_t tk[15], em[15];
  for (int r = 0; r < 15; r++) {
    t0 = bench_now_ns();
    for (int i = 0; i < 100000; i++)
      stkr_watchdog_tick();
    tk[r] = bench_now_ns() - t0;
    t0 = bench_now_ns();
    for (int i = 0; i < 100000; i++)
      empty_call();
    em[r] = bench_now_ns() - t0;
  }
  tick_ns = median(tk, 15) / 100;   /* in 1/1000 ns */
  empty_ns = median(em, 15) / 100;
  double share = c1 > c0 ? (double)(c1 - c0) / (double)(w1 - w0) : 0.0;
  printf("B. watchdog idle (thread ticking every 1 ms, defaults 250/50 ms)\n");
  printf("  watchdog thread CPU: %.3f ms in %.2f s = %.4f%% of a core "
         "(goal <= 0.1%%: %.2fx of goal, %s)\n",
         (double)(c1 - c0) / 1e6, (double)(w1 - w0) / 1e9, share * 100,
         share / 0.001, share <= 0.001 ? "PASS" : "MISS");
  printf("  stkr_watchdog_tick: %.2f ns; an empty call: %.2f ns (%.1fx)\n",
         tick_ns / 1000.0, empty_ns / 1000.0,
         empty_ns ? (double)tick_ns / (double)empty_ns : 0.0);
}

int main(int argc, char **argv) {
  char dir[] = "/tmp/sample_cost-XXXXXX";
  stkr_config cfg = {0};
  target tb = {0}, tz = {0}, tf = {0};
  part_a x = {.rounds = argc > 1 ? atoi(argv[1]) : 30};
  stkr_sample_stats ss;
  stkr_stats st;

  if (x.rounds < 3)
    x.rounds = 3;
  if (mkdtemp(dir) == NULL)
    return 1;
  cfg.dir = dir;
  cfg.ring_bytes = 8u << 20;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  if (stkr_init(&cfg) != 0)
    return 1;
  tz.busy = 1;
  signal(SIGRTMIN + 1, floor_handler);
  pthread_create(&tf.th, NULL, floor_main, &tf);
  pthread_create(&tb.th, NULL, target_main, &tb);
  pthread_create(&tz.th, NULL, target_main, &tz);
  while (!atomic_load(&tb.ready) || !atomic_load(&tz.ready) ||
         !atomic_load(&tf.ready))
    usleep(1000);
  x.blocked = calloc((size_t)x.rounds, 8);
  x.busy = calloc((size_t)x.rounds, 8);
  x.self = calloc((size_t)x.rounds, 8);
  x.handler = calloc((size_t)x.rounds, 8);
  x.floor_v = calloc((size_t)x.rounds, 8);
  x.floor_cpu = calloc((size_t)x.rounds, 8);
  x.sampler_cpu = calloc((size_t)x.rounds, 8);
  x.floor_sampler_cpu = calloc((size_t)x.rounds, 8);
  measure_a(&x, &tb, &tz, &tf);
  atomic_store(&tb.stop, 1);
  atomic_store(&tz.stop, 1);
  atomic_store(&tf.stop, 1);
  syscall(SYS_futex, &tb.stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  syscall(SYS_futex, &tf.stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(tf.th, NULL);
  pthread_join(tb.th, NULL);
  pthread_join(tz.th, NULL);
  stkr_sample_stats_get(&ss);
  stkr_flush();
  stkr_stats_get(&st);

  print_a(&x, &ss, &st);
  watchdog_idle();
  stkr_shutdown();
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* the recording */
  return 0;
}
