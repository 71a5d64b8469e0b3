/*
 * hook_cost.c: what the LD_PRELOAD hooks add to a libc call, at stack depth
 * 32, beside glibc backtrace() in the same hook as the reference, side by
 * side in one run.
 *
 * Design
 * - Two builds of the very same hook sources (preload/) are loaded with
 *   dlopen(RTLD_NOW | RTLD_LOCAL), so neither interposes anything in this
 *   process: we call their exported `getenv` and `open` through pointers,
 *   exactly the code an app's PLT call would reach under LD_PRELOAD.
 *     product    //preload:libstackrec_preload.so: its constructor starts
 *                the recorder and its flush worker (configured by the
 *                environment, as under `stackrec record`);
 *     reference  //tools/bench:libhook_bt.so: the same hooks compiled with
 *                STKR_PRELOAD_CAPTURE_BACKTRACE: glibc backtrace() (libgcc's
 *                DWARF unwinder) into a stack buffer instead of stkr_event.
 *   The baseline is libc's own getenv/open, called directly: "without the
 *   hooks". Added cost = hooked median - baseline median.
 * - A cheap hooked function: getenv of a watched name (an environment scan,
 *   ~tens of ns) and of an unwatched one (the hooks' miss path: a
 *   first-byte test). Also open() of a missing sensitive path (a failing
 *   system call: ~1 us, noisier) and of a missing ordinary path (miss).
 * - A recursive noinline function builds 32 frames; at the leaf each
 *   sample times CALLS calls of one variant between two clock reads.
 *   Rounds interleave all variants (the starting one rotates), so a noisy
 *   stretch of this shared 2-core VM hits them alike; we print medians
 *   [p25..p75] over the rounds.
 * - The recorder runs for real, its flush worker on the other core. The
 *   loop is a firehose (millions of events/s from one thread), far beyond
 *   any real app's sensitive calls: with the default 256 KiB ring the
 *   worker falls behind and some 10% of events are dropped (cheaper: no
 *   walk), so we use a 4 MiB ring (about 1% dropped; STACKREC_RING_BYTES
 *   overrides). A much larger ring (64 MiB) is slower per event: records
 *   land in memory that is no longer in any cache. After the run the
 *   product library is closed (its destructor shuts the recorder down) and
 *   the recording is read back to report events, drops and the frames each
 *   stack captured (~36 at depth 32: the walk stops in glibc's start code,
 *   which has no frame pointers).
 *
 * Usage: hook_cost [rounds] [product.so reference.so]
 *   (default 1001 rounds; the libraries are found next to this binary)
 * Run: bazel run -c opt //tools/bench:hook_cost
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/stkr_reader.h"
#include "tools/bench/bench_util.h"

#define DEPTH 32
#define CALLS 200
#define TARGET_NS 150.0

typedef char *(*getenv_fn)(const char *);
typedef int (*open_fn)(const char *, int, ...);

enum {
  V_GETENV_LIBC,
  V_GETENV_MISS,
  V_GETENV_HIT,
  V_GETENV_BT,
  V_OPEN_LIBC,
  V_OPEN_MISS,
  V_OPEN_HIT,
  V_OPEN_BT,
  V_COUNT
};

static const char *const k_names[V_COUNT] = {
    "getenv, libc (no hooks)",
    "getenv, hooked, unwatched name (miss)",
    "getenv, hooked, watched: stkr_event",
    "getenv, hooked, watched: backtrace()",
    "open missing file, libc (no hooks)",
    "open, hooked, ordinary path (miss)",
    "open, hooked, sensitive: stkr_event",
    "open, hooked, sensitive: backtrace()",
};
/* The baseline each row is compared with. */
static const int k_base[V_COUNT] = {-1, V_GETENV_LIBC, V_GETENV_LIBC,
                                    V_GETENV_LIBC, -1, V_OPEN_LIBC,
                                    V_OPEN_LIBC, V_OPEN_LIBC};

static getenv_fn g_getenv[V_COUNT];
static open_fn g_open[V_COUNT];
static char g_sensitive[256], g_ordinary[256];

/* One sample of variant v: ns per call over CALLS calls. */
static __attribute__((noinline)) double leaf(int v) {
  uint64_t t0, t1;
  int i;

  t0 = bench_now_ns();
  if (v <= V_GETENV_BT) {
    getenv_fn fn = g_getenv[v];
    const char *name =
        v == V_GETENV_MISS ? "STKR_BENCH_OTHER" : "STKR_BENCH_WATCHED";
    for (i = 0; i < CALLS; i++) {
      char *volatile r = fn(name);
      (void)r;
    }
  } else {
    open_fn fn = g_open[v];
    const char *path = v == V_OPEN_MISS ? g_ordinary : g_sensitive;
    for (i = 0; i < CALLS; i++) {
      volatile int fd = fn(path, O_RDONLY);
      (void)fd;
    }
  }
  t1 = bench_now_ns();
  __asm__ volatile("" ::: "memory");
  return (double)(t1 - t0) / CALLS;
}

/* d frames, then one sample of every variant, starting at `first`. */
static __attribute__((noinline)) void descend(int d, int first,
                                              double *out) {
  int k;

  if (d > 0) {
    descend(d - 1, first, out);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return;
  }
  for (k = 0; k < V_COUNT; k++) {
    int v = (first + k) % V_COUNT;
    out[v] = leaf(v);
  }
}

static double quantile(double *v, size_t n, double q) {
  qsort(v, n, sizeof *v, bench_cmp_double);
  return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

static void *load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "hook_cost: %s\n", dlerror());
    exit(1);
  }
  return h;
}

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (p == NULL) {
    fprintf(stderr, "hook_cost: no %s: %s\n", name, dlerror());
    exit(1);
  }
  return p;
}

/* Events, drops and mean frames per event of the recording. */
static void report_recording(const char *dir) {
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t events = 0, frames = 0, drops = 0;
  size_t i;

  if (stkr_reader_open(dir, NULL, &r) != 0) {
    printf("recording: cannot open %s\n", dir);
    return;
  }
  while (stkr_reader_next(r, &ev) == 1) {
    events++;
    frames += ev.n_pcs;
  }
  for (i = 0; i < stkr_reader_process_count(r); i++)
    drops += stkr_reader_process(r, i)->drops;
  printf("recording: %llu events written, %llu dropped, %.1f frames per "
         "stack\n",
         (unsigned long long)events, (unsigned long long)drops,
         events ? (double)frames / (double)events : 0.0);
  stkr_reader_free(r);
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1001;
  char exe[4096], product[4200], reference[4200], dir[] = "/tmp/hook_cost-XXXXXX";
  double *ns[V_COUNT], med[V_COUNT], lo[V_COUNT], hi[V_COUNT], sample[V_COUNT];
  void *hp, *hb;
  ssize_t n;
  unsigned r;
  int v, i;

  if (rounds < 11)
    rounds = 11;
  n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (strrchr(exe, '/'))
    *strrchr(exe, '/') = '\0';
  if (argc > 3) {
    snprintf(product, sizeof product, "%s", argv[2]);
    snprintf(reference, sizeof reference, "%s", argv[3]);
  } else {
    snprintf(product, sizeof product, "%s/../../preload/libstackrec_preload.so",
             exe);
    snprintf(reference, sizeof reference, "%s/libhook_bt.so", exe);
  }
  if (mkdtemp(dir) == NULL) {
    perror("hook_cost: mkdtemp");
    return 1;
  }
  snprintf(g_sensitive, sizeof g_sensitive, "%s/.ssh/missing", dir);
  snprintf(g_ordinary, sizeof g_ordinary, "%s/missing", dir);
  /* The hooks' configuration, as `stackrec record` would pass it. */
  setenv("STACKREC_DIR", dir, 1);
  setenv("STACKREC_ENV_NAMES", "STKR_BENCH_WATCHED", 1);
  setenv("STACKREC_RING_BYTES", "4M", 0); /* unless set: try others */
  setenv("HOME", dir, 1);
  setenv("STKR_BENCH_WATCHED", "1", 1);

  hp = load(product);
  hb = load(reference);
  g_getenv[V_GETENV_LIBC] = getenv;
  g_getenv[V_GETENV_MISS] = g_getenv[V_GETENV_HIT] = (getenv_fn)sym(hp, "getenv");
  g_getenv[V_GETENV_BT] = (getenv_fn)sym(hb, "getenv");
  g_open[V_OPEN_LIBC] = (open_fn)open;
  g_open[V_OPEN_MISS] = g_open[V_OPEN_HIT] = (open_fn)sym(hp, "open");
  g_open[V_OPEN_BT] = (open_fn)sym(hb, "open");
  /* The hooks must return what libc returns. */
  if (g_getenv[V_GETENV_HIT]("STKR_BENCH_WATCHED") != getenv("STKR_BENCH_WATCHED") ||
      g_getenv[V_GETENV_BT]("STKR_BENCH_WATCHED") != getenv("STKR_BENCH_WATCHED") ||
      g_open[V_OPEN_HIT](g_sensitive, O_RDONLY) != -1 || errno != ENOENT) {
    fprintf(stderr, "hook_cost: the hooks do not return libc's results\n");
    return 1;
  }

  for (v = 0; v < V_COUNT; v++) {
    ns[v] = calloc(rounds, sizeof(double));
    if (ns[v] == NULL)
      return 1;
  }
  /* Warm-up: libgcc_s is dlopen'ed by the first backtrace(), the rings'
   * pages get touched, the recorder's sites registered. */
  for (i = 0; i < 20; i++)
    descend(DEPTH, i % V_COUNT, sample);
  for (r = 0; r < rounds; r++) {
    descend(DEPTH, (int)(r % V_COUNT), sample);
    for (v = 0; v < V_COUNT; v++)
      ns[v][r] = sample[v];
  }
  dlclose(hb);
  dlclose(hp); /* destructor: stkr_shutdown(), the last events land */

  for (v = 0; v < V_COUNT; v++) {
    lo[v] = quantile(ns[v], rounds, 0.25);
    med[v] = quantile(ns[v], rounds, 0.5);
    hi[v] = quantile(ns[v], rounds, 0.75);
  }
  printf("hook_cost: ns per call at stack depth %d; medians [p25..p75] of "
         "%u interleaved rounds of %d calls\n\n",
         DEPTH, rounds, CALLS);
  printf("%-40s %9s %21s %9s\n", "", "ns/call", "[p25..p75]", "added");
  for (v = 0; v < V_COUNT; v++) {
    char range[64];
    snprintf(range, sizeof range, "[%.1f..%.1f]", lo[v], hi[v]);
    printf("%-40s %9.1f %21s", k_names[v], med[v], range);
    if (k_base[v] >= 0)
      printf(" %9.1f", med[v] - med[k_base[v]]);
    printf("\n");
    if (v == V_GETENV_BT)
      printf("\n");
  }
  printf("\ntarget: a recorded hooked call adds <= %.0f ns at depth %d\n",
         TARGET_NS, DEPTH);
  printf("  getenv: %.1f ns added  %s;  backtrace() in the same hook adds "
         "%.1f ns (%.1fx)\n",
         med[V_GETENV_HIT] - med[V_GETENV_LIBC],
         med[V_GETENV_HIT] - med[V_GETENV_LIBC] <= TARGET_NS ? "PASS" : "MISS",
         med[V_GETENV_BT] - med[V_GETENV_LIBC],
         (med[V_GETENV_BT] - med[V_GETENV_LIBC]) /
             (med[V_GETENV_HIT] - med[V_GETENV_LIBC]));
  printf("  open:   %.1f ns added  %s (a system call's noise included)\n",
         med[V_OPEN_HIT] - med[V_OPEN_LIBC],
         med[V_OPEN_HIT] - med[V_OPEN_LIBC] <= TARGET_NS ? "PASS" : "MISS");
  report_recording(dir);
  bench_remove_dir(dir); /* only needed for the report */
  return 0;
}
