/*
 * symbolize_cost.c: what it costs to turn stacks into names, side by side.
 *
 * Workload: 1,000 unique stacks captured from real code of this program,
 * ~40 frames deep, sharing most frames as real apps do: a common prefix of
 * 24 functions (main, "framework" layers), then 6 levels chosen among 4
 * variants each (4^6 paths, the first 1,000 used), every variant calling
 * the next through an always-inlined helper, so its PC expands to two
 * frames (the inlined call and the function). Built -O2 -g.
 *
 * Contenders, each over the same 1,000 stacks, per round:
 *  - stackrec inproc (symbolize/symbolize.h), new PCs: the frame cache with
 *    every PC forgotten, modules already open: what the worker pays for
 *    each PC new to the recording (function, file:line, column, inlined
 *    frames, demangling, interning);
 *  - stackrec inproc, repeats: the same stacks again, every PC cached
 *    (the worker does not even get here for a stack it has seen: the stack
 *    table answers first);
 *  - glibc backtrace_symbols() per stack (names only, no lines or inlines);
 *  - libdw, one Dwfl reused, per stack: addrname + getsrc + getscopes for
 *    every PC (what a straightforward libdw symbolizer does);
 *  - dladdr() per frame (names of exported symbols only).
 * The one-time costs (opening modules, a new Dwfl) are printed apart.
 *
 * Medians of ROUNDS interleaved rounds. Run with -c opt (fastbuild strips
 * the debug info the line lookups need):
 *   bazel --output_base=... run -c opt //tools/bench:symbolize_cost
 * SYMBOLIZE_COST_PROFILE=1 runs only the new-PC path, 5000 times, for perf.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flush/flush_internal.h"
#include "symbolize/symbolize.h"
#include "tools/bench/bench_util.h"

#define NSTACKS 1000
#define MAXD 64
#define ROUNDS 11
#define LEVELS 6
#define VARIANTS 4
#define PREFIX 24

static uint64_t g_pcs[NSTACKS][MAXD];
static int g_depth[NSTACKS];
static volatile int g_sink;

/* ---- the workload's code ------------------------------------------------- */

#define BAR __asm__ volatile("" ::: "memory")

static void step(unsigned idx, int level);

static __attribute__((noinline)) void leaf(unsigned idx) {
  void *buf[MAXD + 1];
  int n = backtrace(buf, MAXD + 1);
  /* buf[0] is inside leaf itself; keep the return addresses. */
  for (int i = 1; i < n; i++) g_pcs[idx][i - 1] = (uint64_t)(uintptr_t)buf[i];
  g_depth[idx] = n - 1;
  BAR;
}

/* A variant: a distinct function (the store keeps GCC's identical-code
 * folding away) whose call to the next level is inlined code. */
#define VARIANT(k, j)                                                      \
  static inline __attribute__((always_inline)) void inl_##k##_##j(         \
      unsigned idx, int l) {                                               \
    g_sink = (k) * 16 + (j);                                               \
    step(idx, l + 1);                                                      \
    BAR;                                                                   \
  }                                                                        \
  static __attribute__((noinline)) void v_##k##_##j(unsigned idx, int l) { \
    inl_##k##_##j(idx, l);                                                 \
    BAR;                                                                   \
  }
#define LEVEL(k) VARIANT(k, 0) VARIANT(k, 1) VARIANT(k, 2) VARIANT(k, 3)
LEVEL(0)
LEVEL(1)
LEVEL(2)
LEVEL(3)
LEVEL(4)
LEVEL(5)
#define ROW(k) {v_##k##_0, v_##k##_1, v_##k##_2, v_##k##_3}
static void (*const g_level[LEVELS][VARIANTS])(unsigned, int) = {
    ROW(0), ROW(1), ROW(2), ROW(3), ROW(4), ROW(5)};

static __attribute__((noinline)) void step(unsigned idx, int level) {
  unsigned d = idx;
  if (level == LEVELS) {
    leaf(idx);
    return;
  }
  for (int i = 0; i < level; i++) d /= VARIANTS;
  g_level[level][d % VARIANTS](idx, level);
  BAR;
}

/* The shared prefix: PREFIX distinct functions in a chain. */
#define PFX(k, next)                                                      \
  static __attribute__((noinline)) void p_##k(unsigned idx) {             \
    g_sink = 1000 + (k);                                                  \
    next;                                                                 \
    BAR;                                                                  \
  }
PFX(23, step(idx, 0))
PFX(22, p_23(idx)) PFX(21, p_22(idx)) PFX(20, p_21(idx)) PFX(19, p_20(idx))
PFX(18, p_19(idx)) PFX(17, p_18(idx)) PFX(16, p_17(idx)) PFX(15, p_16(idx))
PFX(14, p_15(idx)) PFX(13, p_14(idx)) PFX(12, p_13(idx)) PFX(11, p_12(idx))
PFX(10, p_11(idx)) PFX(9, p_10(idx)) PFX(8, p_9(idx)) PFX(7, p_8(idx))
PFX(6, p_7(idx)) PFX(5, p_6(idx)) PFX(4, p_5(idx)) PFX(3, p_4(idx))
PFX(2, p_3(idx)) PFX(1, p_2(idx)) PFX(0, p_1(idx))

/* ---- contenders ---------------------------------------------------------- */

static stkr__images g_imgs;

static stkr__symc *new_symc(void) {
  stkr__symbe *be = NULL;
  stkr__symc *c = NULL;
  stkr__symbe_opts o = {0};
  stkr__symimg *si = calloc(g_imgs.n, sizeof *si);
  if (!si || stkr__symbe_create(&o, &be) < 0 || stkr__symc_create(be, &c) < 0)
    abort();
  for (size_t i = 0; i < g_imgs.n; i++) {
    const Stackrec__Image *im = &g_imgs.imgs[i];
    si[i] = (stkr__symimg){im->path, im->load_address, im->text_start,
                           im->text_end, im->build_id.data, im->build_id.len,
                           i == 0};
  }
  if (stkr__symc_set_images(c, si, g_imgs.n) < 0) abort();
  free(si);
  return c;
}

static uint64_t run_symc(stkr__symc *c) {
  uint64_t t0 = bench_now_ns();
  for (int s = 0; s < NSTACKS; s++) {
    const uint32_t *f;
    uint32_t nf;
    if (stkr__symc_stack(c, g_pcs[s], (size_t)g_depth[s], &f, &nf) < 0)
      abort();
  }
  return bench_now_ns() - t0;
}

/* The distinct PCs of the workload, and a warm backend of its own: the
 * resolver's cost per new PC alone, without the cache's bookkeeping. */
static uint64_t g_upcs[NSTACKS * MAXD];
static size_t g_n_upcs;
static stkr__symbe *g_be;

static void unique_pcs_init(void) {
  for (int s = 0; s < NSTACKS; s++)
    for (int i = 0; i < g_depth[s]; i++) {
      size_t k = 0;
      while (k < g_n_upcs && g_upcs[k] != g_pcs[s][i]) k++;
      if (k == g_n_upcs) g_upcs[g_n_upcs++] = g_pcs[s][i];
    }
  stkr__symbe_opts o = {0};
  stkr__symimg *si = calloc(g_imgs.n, sizeof *si);
  bool removed;
  if (!si || stkr__symbe_create(&o, &g_be) < 0) abort();
  for (size_t i = 0; i < g_imgs.n; i++) {
    const Stackrec__Image *im = &g_imgs.imgs[i];
    si[i] = (stkr__symimg){im->path, im->load_address, im->text_start,
                           im->text_end, im->build_id.data, im->build_id.len,
                           i == 0};
  }
  if (stkr__symbe_set_images(g_be, si, g_imgs.n, &removed) < 0) abort();
  free(si);
}

static uint64_t run_backend(uint64_t *frames_out) {
  stkr__symres res[STKR__SYM_MAX_INLINE];
  const stkr__symimg *img;
  uint64_t frames = 0, t0 = bench_now_ns();
  for (size_t k = 0; k < g_n_upcs; k++)
    frames += stkr__symbe_resolve(g_be, g_upcs[k], &img, res,
                                  STKR__SYM_MAX_INLINE);
  if (frames_out) *frames_out = frames;
  return bench_now_ns() - t0;
}

static uint64_t run_backtrace_symbols(void) {
  uint64_t t0 = bench_now_ns();
  for (int s = 0; s < NSTACKS; s++) {
    void *buf[MAXD];
    for (int i = 0; i < g_depth[s]; i++) buf[i] = (void *)(uintptr_t)g_pcs[s][i];
    char **names = backtrace_symbols(buf, g_depth[s]);
    if (names) g_sink = names[0][0];
    free(names);
  }
  return bench_now_ns() - t0;
}

static uint64_t run_dladdr(void) {
  uint64_t t0 = bench_now_ns();
  for (int s = 0; s < NSTACKS; s++)
    for (int i = 0; i < g_depth[s]; i++) {
      Dl_info info;
      if (dladdr((void *)(uintptr_t)(g_pcs[s][i] - 1), &info) && info.dli_sname)
        g_sink = info.dli_sname[0];
    }
  return bench_now_ns() - t0;
}

static char *g_debuginfo_path;
static const Dwfl_Callbacks g_cb = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &g_debuginfo_path,
};

static Dwfl *new_dwfl(void) {
  Dwfl *d = dwfl_begin(&g_cb);
  if (!d) abort();
  dwfl_report_begin(d);
  if (dwfl_linux_proc_report(d, getpid()) != 0) abort();
  dwfl_report_end(d, NULL, NULL);
  return d;
}

/* What eu-addr2line -f -i -C does for one PC, without any cache of ours. */
static void dwfl_pc(Dwfl *d, uint64_t pc, char **dem, size_t *dem_cap) {
  Dwarf_Addr a = pc - 1, bias;
  Dwfl_Module *m = dwfl_addrmodule(d, a);
  int line = 0;
  if (!m) return;
  const char *name = dwfl_module_addrname(m, a);
  const char *dm = stkr__demangle(name, dem, dem_cap);
  g_sink = dm ? dm[0] : name ? name[0] : 0;
  Dwfl_Line *l = dwfl_module_getsrc(m, a);
  if (l && dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL)) g_sink = line;
  Dwarf_Die *cu = dwfl_module_addrdie(m, a, &bias), *scopes = NULL;
  if (!cu) return;
  int n = dwarf_getscopes(cu, a - bias, &scopes);
  for (int i = 0; i < n; i++)
    if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine) {
      Dwarf_Attribute at;
      Dwarf_Word v;
      const char *in = dwarf_diename(&scopes[i]);
      if (in) g_sink = in[0];
      if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &at), &v) == 0)
        g_sink = (int)v;
    }
  free(scopes);
}

static uint64_t run_dwfl(Dwfl *d) {
  char *dem = NULL;
  size_t cap = 0;
  uint64_t t0 = bench_now_ns();
  for (int s = 0; s < NSTACKS; s++)
    for (int i = 0; i < g_depth[s]; i++) dwfl_pc(d, g_pcs[s][i], &dem, &cap);
  uint64_t t = bench_now_ns() - t0;
  free(dem);
  return t;
}

/* ---- main ---------------------------------------------------------------- */

static double median(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_u64);
  return (double)v[n / 2];
}

enum { C_BACKEND, C_NEW, C_REPEAT, C_BTS, C_DWFL, C_DLADDR, C_N };

/* Sanity: the first stack's first frames, as a new cache resolves them. */
static void print_sanity(void) {
  stkr__symc *v = new_symc();
  const uint32_t *f;
  uint32_t nf;
  stkr__symdefs defs = {0};
  if (stkr__symc_stack(v, g_pcs[1], (size_t)g_depth[1], &f, &nf) < 0 ||
      stkr__symc_emit(v, f, nf, 1, &defs) < 0)
    abort();
  printf("stack 1: %d PCs -> %u frames; innermost:\n", g_depth[1], nf);
  for (uint32_t i = 0; i < nf && i < 4; i++) {
    const Stackrec__FrameDef *fd = NULL;
    for (size_t k = 0; k < defs.n_frames; k++)
      if (defs.frames[k]->id == f[i]) fd = defs.frames[k];
    const char *fn = "?", *file = "?";
    for (size_t k = 0; fd && k < defs.n_strings; k++) {
      if (defs.strings[k]->id == fd->function) fn = defs.strings[k]->value;
      if (defs.strings[k]->id == fd->file) file = defs.strings[k]->value;
    }
    printf("  %s (%s:%u)%s\n", fn, file, fd ? fd->line : 0,
           fd && fd->inlined ? " [inlined]" : "");
    if (i == 0 && (!fd || !fd->file))
      printf("  WARNING: no line info: build with -c opt (fastbuild "
             "strips debug info)\n");
  }
  stkr__symdefs_free(&defs);
  stkr__symc_free(v);
}

/* ROUNDS rounds of every contender, the order rotating every round, into
 * t. @return 0, or 1 if repeated stacks made the resolver work. */
static int run_rounds(uint64_t t[C_N][ROUNDS], stkr__symc *c, Dwfl *d) {
  for (int r = 0; r < ROUNDS; r++) {
    for (int k = 0; k < C_N; k++) {
      switch ((k + r) % C_N) { /* rotate the order every round */
      case C_BACKEND: t[C_BACKEND][r] = run_backend(NULL); break;
      case C_NEW:
        stkr__symc_forget_pcs(c);
        t[C_NEW][r] = run_symc(c);
        break;
      case C_REPEAT: {
        uint64_t before = stkr__symc_resolved(c);
        (void)run_symc(c); /* make sure every PC is cached */
        before = stkr__symc_resolved(c);
        t[C_REPEAT][r] = run_symc(c);
        if (stkr__symc_resolved(c) != before) {
          fprintf(stderr, "repeats did resolver work!\n");
          return 1;
        }
        break;
      }
      case C_BTS: t[C_BTS][r] = run_backtrace_symbols(); break;
      case C_DWFL: t[C_DWFL][r] = run_dwfl(d); break;
      case C_DLADDR: t[C_DLADDR][r] = run_dladdr(); break;
      }
    }
  }
  return 0;
}

int main(void) {
  uint64_t t[C_N][ROUNDS], frames = 0, unique_pcs, unique_frames;
  static const char *names[C_N] = {
      "stackrec resolver alone, per new PC",
      "stackrec inproc, new stacks + PCs (cache)",
      "stackrec inproc, repeated stacks",
      "backtrace_symbols (names only)",
      "libdw, reused Dwfl, per stack",
      "dladdr per frame (exported names only)"};

  for (unsigned i = 0; i < NSTACKS; i++) p_0(i);
  for (int s = 0; s < NSTACKS; s++) frames += (uint64_t)g_depth[s];
  if (stkr__images_refresh(&g_imgs) < 0) abort();

  /* One-time costs. */
  uint64_t t0 = bench_now_ns();
  stkr__symc *c = new_symc();
  (void)run_symc(c); /* opens the modules, builds their indexes */
  uint64_t first_all = bench_now_ns() - t0;
  unique_pcs = stkr__symc_resolved(c);
  unique_frames = stkr__symc_frames(c);
  unique_pcs_init();
  (void)run_backend(NULL); /* open its modules too */
  t0 = bench_now_ns();
  Dwfl *d = new_dwfl();
  { char *dem = NULL; size_t cap = 0; dwfl_pc(d, g_pcs[0][0], &dem, &cap); free(dem); }
  uint64_t new_dwfl_ns = bench_now_ns() - t0;

  print_sanity();

  if (getenv("SYMBOLIZE_COST_PROFILE")) {
    /* For a profiler: only the new-PC path, many times. */
    for (int r = 0; r < 5000; r++) {
      stkr__symc_forget_pcs(c);
      (void)run_symc(c);
    }
    return 0;
  }
  if (run_rounds(t, c, d) != 0)
    return 1;

  printf("\n%d unique stacks, %.1f PCs deep on average (%llu PCs), "
         "%llu unique PCs -> %llu frames with inlines; medians of %d rounds\n\n",
         NSTACKS, (double)frames / NSTACKS, (unsigned long long)frames,
         (unsigned long long)unique_pcs, (unsigned long long)unique_frames,
         ROUNDS);
  printf("%-44s %14s %16s %14s\n", "", "us / stack", "us / unique PC",
         "us / PC");
  double per_new_pc = 0, per_new_frame = 0;
  for (int k = 0; k < C_N; k++) {
    double m = median(t[k], ROUNDS) / 1000.0; /* us for all stacks */
    if (k == C_BACKEND) {
      per_new_pc = m / (double)g_n_upcs;
      per_new_frame = m / (double)unique_frames;
      printf("%-44s %14s %16.3f %14s\n", names[k], "-", per_new_pc, "-");
    } else if (k == C_NEW)
      printf("%-44s %14.3f %16.3f %14s\n", names[k], m / NSTACKS,
             m / (double)unique_pcs, "-");
    else if (k == C_REPEAT)
      printf("%-44s %14.3f %16s %14.4f\n", names[k], m / NSTACKS, "-",
             m / (double)frames);
    else
      printf("%-44s %14.3f %16s %14.3f\n", names[k], m / NSTACKS, "-",
             m / (double)frames);
  }
  printf("\none-time: first resolution of all stacks with a new symbolizer "
         "(opens modules, loads DWARF, indexes CUs): %.1f ms; a new Dwfl "
         "(dwfl_linux_proc_report + first PC): %.1f ms\n",
         (double)first_all / 1e6, (double)new_dwfl_ns / 1e6);
  printf("repeated stacks in the worker: 0 resolver calls (the stack table "
         "knows them; the cache is not even asked)\n");
  printf("the cache row divides everything a new stack costs (a hash "
         "probe per PC, its frame list, first touch of that memory) by the "
         "few unique PCs; per new stack it is the us / stack column\n");
  printf("\ntarget: <= 2 us per new unique frame with line info and "
         "inlines: %.3f us per PC (%.3f us per frame) -> %s\n",
         per_new_pc, per_new_frame, per_new_pc <= 2.0 ? "PASS" : "MISS");
  stkr__symbe_free(g_be);
  stkr__symc_free(c);
  dwfl_end(d);
  stkr__images_free(&g_imgs);
  return 0;
}
