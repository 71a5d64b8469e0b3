/*
 * unwind_cost.c: what a full stack costs without frame pointers (issue 15),
 * side by side in one run, at depths 8, 32 and 64:
 *
 *   hybrid        stkr__unwind_walk_folded over compact tables (unwind/),
 *                 from captured registers, with the stack key's two hashes
 *                 folded in the walk and h1 finished (as stkr_event does):
 *                 the chain is built -O2 -fomit-frame-pointer
 *                 (//tests:unwind_chain)
 *                 and this thread's cache (stkr__uw_cache): here the stack
 *                 repeats, so its memo of the last walk holds (best case)
 *   hybrid rows    the same with the memo forgotten before each walk: the
 *                 row cache only (a stack that changes every time), with a
 *                 cache of its own. Its entries' caller predictions
 *                 (walk.c, fast_body) still hold here: each return
 *                 address of this chain has one caller; where a caller
 *                 changes, that frame costs a mispredicted branch more
 *   hybrid nocache the same without the cache (two binary searches a frame)
 *   unw_backtrace libunwind (UNW_LOCAL_ONLY fast trace), same chain
 *   glibc bt      glibc's backtrace() (libgcc's DWARF unwinder), same chain
 *   fp walk       the recorder's frame-pointer walk (stkr__walk, hash
 *                 included) on the same chain built WITH frame pointers
 *
 * and the time to build tables: every image of this process (from memory,
 * dl_iterate_phdr) and every executable image /usr/bin/python3 maps (from
 * their files, read beforehand: the parse and build only).
 *
 * Methodology as event_cost.c: each round runs one batch of every
 * contender at every depth, the starting contender rotating, on a shared
 * 2-core VM; medians over rounds, ratios of medians. Depth d = d recursive
 * frames above the chain's leaf; the DWARF walkers and the hybrid walk go
 * on through main, __libc_start_call_main, __libc_start_main and _start,
 * the FP walk stops at main's caller (libc has no frame pointers): ns per
 * frame is printed too. Goals: hybrid >= 2x faster than unw_backtrace,
 * <= 2x the FP walk; all images' tables <= 20 ms.
 *
 * Usage: unwind_cost [rounds]   (default 301)
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"
#include "tests/unwind_fixtures/chain.h"
#include "unwind/unwind.h"
#include "tools/bench/bench_util.h"

long uwc_run_fp(int depth, unsigned shape, uwc_leaf leaf, void *arg);

#define MAX_PCS 128
#define BATCH 200
enum { C_HYBRID, C_ROWS, C_NOCACHE, C_UNW, C_GLIBC, C_FP, NC };
static const char *const cname[NC] = {"hybrid", "hybrid rows", "hybrid nocache", "unw_backtrace",
                                      "glibc bt", "fp walk"};
/* This thread's row cache, as the recorder would keep per thread; "hybrid
 * rows" has one of its own, so that forgetting its memo before each walk
 * does not also take the repeated stack's memo away from "hybrid" (then a
 * third of each of its batches walked without one, until it recorded a
 * new memo: that measured the two contenders' interplay, not a thread). */
static stkr__uw_cache g_cache, g_cache_rows;
static const int depths[] = {8, 32, 64};
#define ND 3

static int (*g_glibc_backtrace)(void **, int);
static const stkr__uw_set *g_set;
static uintptr_t g_lo, g_hi;
static volatile uint64_t g_sink;

/* This thread's CPU time: on a shared machine (load average 20+ on 2 cores
 * here) wall time of a multi-millisecond build mostly measures waiting. */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The rest of a table walk from registers regs (captured by the caller,
 * in its own frame, straight into the struct as stkr__walk_tables does):
 * inlined into each contender so that every one walks from the same frame
 * layout. */
_Static_assert(sizeof(stkr__uw_regs) == 4 * sizeof(uintptr_t), "uwc_capture writes 4 words");
static inline __attribute__((always_inline)) unsigned
walk_and_hash(const stkr__uw_regs *regs, stkr__uw_cache *cache) {
  uint64_t pcs[MAX_PCS];
  stkr__uw_fold fold = {0, 0, 0, false};
  unsigned n = stkr__unwind_walk_folded(g_set, cache, regs, g_lo, g_hi, pcs,
                                        MAX_PCS, &fold, NULL);
  g_sink = stkr_stack_hash_final(fold.h1, n) ^ fold.h2;
  return n;
}

static __attribute__((noinline)) unsigned do_hybrid(void) {
  stkr__uw_regs r;
  uwc_capture((uintptr_t *)(void *)&r);
  return walk_and_hash(&r, &g_cache);
}

static __attribute__((noinline)) unsigned do_rows(void) {
  stkr__uw_regs r;
  g_cache_rows.memo_pc0 = 0; /* forget the last walk: rows only */
  uwc_capture((uintptr_t *)(void *)&r);
  return walk_and_hash(&r, &g_cache_rows);
}

static __attribute__((noinline)) unsigned do_nocache(void) {
  stkr__uw_regs r;
  uwc_capture((uintptr_t *)(void *)&r);
  return walk_and_hash(&r, NULL);
}

static __attribute__((noinline)) unsigned do_unw(void) {
  void *pcs[MAX_PCS];
  int n = unw_backtrace(pcs, MAX_PCS);
  g_sink = (uintptr_t)pcs[0];
  return (unsigned)n;
}

static __attribute__((noinline)) unsigned do_glibc(void) {
  void *pcs[MAX_PCS];
  int n = g_glibc_backtrace(pcs, MAX_PCS);
  g_sink = (uintptr_t)pcs[0];
  return (unsigned)n;
}

static __attribute__((noinline)) unsigned do_fp(void) {
  uint64_t pcs[MAX_PCS], hash;
  bool truncated;
  unsigned n = stkr__walk((uintptr_t)__builtin_frame_address(0), g_lo, g_hi, 0, pcs,
                          MAX_PCS, &hash, &truncated);
  g_sink = hash;
  return n;
}

typedef struct job {
  unsigned c;
  double ns;
  unsigned frames;
} job;

static void leaf(void *arg) {
  job *j = arg;
  unsigned (*fn)(void) = j->c == C_HYBRID ? do_hybrid : j->c == C_ROWS ? do_rows
                       : j->c == C_NOCACHE ? do_nocache
                       : j->c == C_UNW ? do_unw
                       : j->c == C_GLIBC ? do_glibc : do_fp;
  uint64_t t0, t1;
  unsigned i, n = 0;
  n = fn(); /* warm */
  t0 = bench_now_ns();
  for (i = 0; i < BATCH; i++) n = fn();
  t1 = bench_now_ns();
  j->ns = (double)(t1 - t0) / BATCH;
  j->frames = n;
}

static void find_glibc_backtrace(void) {
  void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *mine = h ? dlsym(h, "backtrace") : NULL;
  if (mine == NULL || mine == (void *)&unw_backtrace) {
    fprintf(stderr, "unwind_cost: glibc's backtrace not found apart from libunwind's\n");
    exit(1);
  }
  *(void **)&g_glibc_backtrace = mine;
}

/* Table building: this process (from memory) and python3's images. */
static void bench_build(void) {
  double t[21], c[21], mem_ms, py_ms, mem_cpu, py_cpu;
  unsigned i, k;
  stkr__uw_set *s;
  FILE *p;
  char line[4096], *paths[128];
  uint8_t *bufs[128];
  size_t lens[128];
  unsigned np = 0;
  uint64_t rows = 0, tb = 0, eb = 0;

  for (i = 0; i < 21; i++) {
    uint64_t t0 = bench_now_ns(), c0 = cpu_ns();
    if (stkr__unwind_set_build_loaded(&s, NULL) != 0) exit(1);
    c[i] = (double)(cpu_ns() - c0) / 1e6;
    t[i] = (double)(bench_now_ns() - t0) / 1e6;
    if (i == 0)
      printf("this process: %u images, %llu rows, %llu table bytes / %llu .eh_frame bytes = %.2fx\n",
             s->n, (unsigned long long)s->total.rows, (unsigned long long)s->total.table_bytes,
             (unsigned long long)s->total.eh_frame_bytes,
             (double)s->total.table_bytes / (double)s->total.eh_frame_bytes);
    stkr__unwind_set_free(s);
  }
  mem_ms = bench_median(t, 21);
  mem_cpu = bench_median(c, 21);

  p = popen("/usr/bin/python3 -c 'import ssl, json, sqlite3, decimal, ctypes, hashlib, zlib;"
            "print(open(\"/proc/self/maps\").read())' 2>/dev/null", "r");
  while (p && fgets(line, sizeof line, p) && np < 128) {
    char *path = strchr(line, '/'), *perm = strchr(line, ' ');
    if (path == NULL || perm == NULL || perm[3] != 'x') continue;
    path[strcspn(path, "\n")] = 0;
    for (k = 0; k < np; k++) if (strcmp(paths[k], path) == 0) break;
    if (k < np) continue;
    if (stkr__unwind_file_read(path, 512u << 20, &bufs[np], &lens[np]) != 0) continue;
    paths[np++] = strdup(path);
  }
  if (p) pclose(p);
  for (i = 0; i < 11; i++) {
    uint64_t t0 = bench_now_ns(), c0 = cpu_ns();
    for (k = 0; k < np; k++) {
      stkr__uw_src src;
      stkr__uw_table *tab;
      stkr__uw_stats st;
      if (stkr__unwind_src_elf(bufs[k], lens[k], &src) != 0) continue;
      if (stkr__unwind_table_build(&src, &tab, &st) == 0 && i == 0) {
        rows += st.rows;
        tb += st.table_bytes;
        eb += st.eh_frame_bytes;
      }
      stkr__unwind_table_free(tab);
    }
    c[i] = (double)(cpu_ns() - c0) / 1e6;
    t[i] = (double)(bench_now_ns() - t0) / 1e6;
  }
  py_ms = bench_median(t, 11);
  py_cpu = bench_median(c, 11);
  printf("python3 (%u images mapped after importing ssl, json, sqlite3, decimal, ctypes, hashlib, zlib): "
         "%llu rows, %llu table bytes / %llu .eh_frame bytes = %.2fx\n",
         np, (unsigned long long)rows, (unsigned long long)tb, (unsigned long long)eb,
         (double)tb / (double)eb);
  printf("table build, median: this process %.2f ms CPU (%.2f wall), python3's images %.2f ms CPU "
         "(%.2f wall) (goal <= 20 ms): %s\n",
         mem_cpu, mem_ms, py_cpu, py_ms, py_cpu <= 20 && mem_cpu <= 20 ? "PASS" : "MISS");
  for (k = 0; k < np; k++) { free(bufs[k]); free(paths[k]); }
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 301, r, c, d, k;
  double *ns[NC][ND];
  unsigned frames[NC][ND];
  stkr__uw_set *set;
  pthread_attr_t a;
  void *addr;
  size_t size;

  find_glibc_backtrace();
  if (stkr__unwind_set_build_loaded(&set, NULL) != 0) return 1;
  g_set = set;
  pthread_getattr_np(pthread_self(), &a);
  pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_destroy(&a);
  g_lo = (uintptr_t)addr;
  g_hi = (uintptr_t)addr + size;
  for (c = 0; c < NC; c++)
    for (d = 0; d < ND; d++) ns[c][d] = calloc(rounds, sizeof(double));

  for (r = 0; r < rounds; r++)
    for (k = 0; k < NC; k++) {
      c = (k + r) % NC;
      for (d = 0; d < ND; d++) {
        job j = {c, 0, 0};
        if (c == C_FP) uwc_run_fp(depths[d], 0, leaf, &j);
        else uwc_run(depths[d], 0, leaf, &j);
        ns[c][d][r] = j.ns;
        frames[c][d] = j.frames;
      }
    }

  printf("\n%-14s", "ns per walk");
  for (d = 0; d < ND; d++) printf("   depth %-2d (frames, ns/frame)", depths[d]);
  printf("\n");
  double med[NC][ND];
  for (c = 0; c < NC; c++) {
    printf("%-14s", cname[c]);
    for (d = 0; d < ND; d++) {
      med[c][d] = bench_median(ns[c][d], rounds);
      printf("   %9.1f (%3u, %5.2f)         ", med[c][d], frames[c][d],
             med[c][d] / frames[c][d]);
    }
    printf("\n");
  }
  printf("\nratios (per walk; per frame in brackets)\n");
  for (d = 0; d < ND; d++) {
    double fu = med[C_UNW][d] / med[C_HYBRID][d];
    double ff = med[C_HYBRID][d] / med[C_FP][d];
    double fuf = (med[C_UNW][d] / frames[C_UNW][d]) / (med[C_HYBRID][d] / frames[C_HYBRID][d]);
    double fff = (med[C_HYBRID][d] / frames[C_HYBRID][d]) / (med[C_FP][d] / frames[C_FP][d]);
    double ru = med[C_UNW][d] / med[C_ROWS][d];
    printf("depth %2d: unw_backtrace / hybrid = %.2fx [%.2fx] (goal >= 2): %s;  "
           "glibc / hybrid = %.1fx;  hybrid / fp walk = %.2fx [%.2fx] (goal <= 2): %s\n",
           depths[d], fu, fuf, fu >= 2 ? "PASS" : "MISS",
           med[C_GLIBC][d] / med[C_HYBRID][d], ff, fff, ff <= 2 ? "PASS" : "MISS");
    printf("          row cache only (memo forgotten): unw_backtrace / hybrid rows = %.2fx "
           "(goal >= 2): %s;  hybrid rows / fp walk = %.2fx [%.2fx per frame]\n",
           ru, ru >= 2 ? "PASS" : "MISS", med[C_ROWS][d] / med[C_FP][d],
           (med[C_ROWS][d] / frames[C_ROWS][d]) / (med[C_FP][d] / frames[C_FP][d]));
  }
  printf("\n");
  bench_build();
  stkr__unwind_set_free(set);
  return 0;
}
