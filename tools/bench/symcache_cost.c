/*
 * symcache_cost.c: per-address lookup cost from a dSYM's DWARF against the
 * per-build symbol cache, in process (no start-up, no printing), and the
 * cache build speed; side by side in one run (issue 10).
 *
 *   bazel run -c opt //tools/bench:symcache_cost -- DSYM ARCH [N]
 *
 * DSYM: a dSYM bundle or Mach-O file (tools/bench/atos_vs_llvm.sh builds
 * one: /tmp/stackrec-bench-macho/App.dSYM); N random addresses of its
 * __TEXT (default 100 000), the same for every contender. Prints medians
 * of 5 rounds: DWARF cold (a fresh open, indexes built on the way), DWARF
 * warm (the same addresses again), cache (mapped and checked, then the
 * lookups), the ratios against the goals, and the cache build in
 * MB of DWARF per second: from a fresh open (as `stackrec symcache build`
 * does: nothing of the DWARF read yet), open included, in wall and in CPU
 * seconds (the process's; on a machine shared with other jobs the wall
 * time also counts the time the build waited for a core). Always exits 0
 * unless the input cannot be read.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/symbolize.h"

#define ROUNDS 5

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v) {
  qsort(v, ROUNDS, sizeof *v, cmp_d);
  return v[ROUNDS / 2];
}

static size_t run(stkr__symfile *f, const uint64_t *a, size_t n) {
  stkr__symres out[STKR__SYM_MAX_INLINE];
  size_t frames = 0;
  for (size_t i = 0; i < n; i++)
    frames += stkr__symfile_lookup(f, a[i], out, STKR__SYM_MAX_INLINE);
  return frames;
}

int main(int argc, char **argv) {
  const char *dsym = argc > 1 ? argv[1] : "/tmp/stackrec-bench-macho/App.dSYM";
  const char *arch = argc > 2 ? argv[2] : "arm64";
  size_t n = argc > 3 ? strtoul(argv[3], NULL, 10) : 100000;
  double cold[ROUNDS], warm[ROUNDS], cache[ROUNDS], build[ROUNDS], build_cpu[ROUNDS];
  stkr__symfile *f, *c;
  stkr__symfile_info info;
  stkr__symcache_stats st;
  char err[1024], path[] = "/tmp/stackrec-symcache-bench.XXXXXX";
  uint64_t *a = malloc(n * sizeof *a), x = 42;
  size_t fr_dw = 0, fr_c = 0;
  int fd;

  if (!a || stkr__symfile_open(dsym, arch, NULL, &f, err, sizeof err) != 0) {
    fprintf(stderr, "symcache_cost: %s\n", a ? err : "out of memory");
    return 1;
  }
  stkr__symfile_get_info(f, &info);
  /* Random addresses in the code: the first 1 MB of __TEXT past the header
   * page is where the fixtures' code is; scale with the real range. */
  {
    stkr__symres r[STKR__SYM_MAX_INLINE];
    uint64_t lo = info.text_vmaddr, hi = lo;
    for (uint64_t p = lo; p < lo + (256u << 20); p += 4096)
      if (stkr__symfile_lookup(f, p, r, STKR__SYM_MAX_INLINE)) hi = p + 4096;
    for (size_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      a[i] = lo + (x >> 11) % (hi - lo + 1);
    }
  }
  stkr__symfile_free(f);
  if ((fd = mkstemp(path)) < 0) return 1;
  close(fd);
  for (int r = 0; r < ROUNDS; r++) {
    double t0, t1, t2;
    if (stkr__symfile_open(dsym, arch, NULL, &f, err, sizeof err) != 0) return 1;
    t0 = now();
    fr_dw = run(f, a, n);
    t1 = now();
    run(f, a, n);
    t2 = now();
    cold[r] = (t1 - t0) / (double)n;
    warm[r] = (t2 - t1) / (double)n;
    stkr__symfile_free(f);
    /* The build from a fresh open, as `stackrec symcache build` runs it. */
    double c0 = cpu_now();
    t0 = now();
    if (stkr__symfile_open(dsym, arch, NULL, &f, err, sizeof err) != 0) return 1;
    if (stkr__symcache_write(f, path, &st, err, sizeof err) != 0) {
      fprintf(stderr, "symcache_cost: %s\n", err);
      return 1;
    }
    stkr__symfile_free(f);
    build[r] = now() - t0;
    build_cpu[r] = cpu_now() - c0;
    t0 = now();
    if (stkr__symfile_open(path, NULL, NULL, &c, err, sizeof err) != 0) {
      fprintf(stderr, "symcache_cost: %s\n", err);
      return 1;
    }
    fr_c = run(c, a, n);
    cache[r] = (now() - t0) / (double)n;
    stkr__symfile_free(c);
  }
  unlink(path);
  double mc = median(cold), mw = median(warm), mk = median(cache),
         mb = median(build), mbc = median(build_cpu);
  printf("%s (%s): %.1f MB of DWARF; %zu random addresses of __TEXT; "
         "medians of %d rounds\n", dsym, arch, (double)st.dwarf_bytes / 1048576,
         n, ROUNDS);
  printf("  DWARF, cold (fresh open)   %8.3f us/address (%zu frames)\n", mc * 1e6, fr_dw);
  printf("  DWARF, warm (same addrs)   %8.3f us/address\n", mw * 1e6);
  printf("  symbol cache (open+check)  %8.3f us/address (%zu frames)%s\n",
         mk * 1e6, fr_c, fr_c == fr_dw ? "" : "  FRAME COUNTS DIFFER");
  printf("  cache vs DWARF cold: %.1fx faster (goal >= 10x: %s); vs warm %.1fx\n",
         mc / mk, mc / mk >= 10 ? "PASS" : "MISS", mw / mk);
  printf("  cache build (fresh open): %.3f s, %.1f MB of DWARF/s (goal >= "
         "100: %s); %.3f s of CPU, %.1f MB/s of CPU; %.1f MB cache, %llu "
         "ranges, %llu frames\n", mb, (double)st.dwarf_bytes / 1048576 / mb,
         (double)st.dwarf_bytes / 1048576 / mb >= 100 ? "PASS" : "MISS", mbc,
         (double)st.dwarf_bytes / 1048576 / mbc,
         (double)st.file_bytes / 1048576, (unsigned long long)st.ranges,
         (unsigned long long)st.frames);
  free(a);
  return 0;
}
