/*
 * stack_table.c: what the flush worker's table of distinct stacks costs an
 * app whose stacks keep changing, with its cap (stkr_config.
 * stack_table_bytes, default 8 MiB) and without one (1 GiB, the largest
 * setting, which this run never reaches): the RSS the recorder adds, the
 * bytes written per event and the wall time, side by side in one run.
 *
 * Each run is a child process that records 2^LEVELS distinct stacks (a
 * call chain per number: call_chain.h), each
 * ROUNDS times, in offline mode, with a stkr_flush barrier every 128
 * events (so no event is dropped for a full ring: the table is what is
 * measured). RSS: VmRSS after the last barrier, before stkr_shutdown,
 * minus VmRSS before stkr_init. The two settings alternate, ROUNDS_RUN
 * runs each (default 3); the table shows medians.
 *
 * Goal (issue 18, "memory that fits a phone"): the capped table adds
 * at most its cap plus a few MiB however many stacks the app makes, and
 * loses no event.
 *
 * Usage: stack_table [--levels N] [--runs N]   (N levels: 2^N stacks;
 * default 17, 131,072 stacks). Prints the table; exits 0.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include "recorder/stackrec.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/call_chain.h"

#define ROUNDS 2
#define MAX_RUNS 21

STKR_SITE_DEFINE(g_site, "bench.stack_table");

static int record(uint32_t bits) {
  (void)bits;
  return stkr_event(&g_site, NULL, 0);
}

static double rss_mb(void) {
  char line[256];
  double kb = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atof(line + 6);
  fclose(f);
  return kb / 1024.0;
}

typedef struct result {
  double rss_mb, bytes_per_event, seconds;
  unsigned long long written, dropped, stacks;
} result;

/* One run, in this (child) process: the figures into *out. */
static int run_one(int levels, uint64_t cap, const char *dir, result *out) {
  stkr_config cfg = STKR_CONFIG_INIT;
  stkr_stats st;
  double rss0 = rss_mb(), t0;
  uint32_t n = 1u << levels, done = 0;

  cfg.dir = dir;
  cfg.symbolize = STKR_SYMBOLIZE_OFFLINE;
  cfg.stack_table_bytes = cap;
  if (stkr_init(&cfg) != 0) return -1;
  t0 = bench_now_s();
  for (int r = 0; r < ROUNDS; r++)
    for (uint32_t b = 0; b < n; b++) {
      (void)call_chain(levels, b, record);
      if (++done % 128 == 0) (void)stkr_flush();
    }
  (void)stkr_flush();
  out->seconds = bench_now_s() - t0;
  out->rss_mb = rss_mb() - rss0;
  if (stkr_stats_get(&st) != 0) return -1;
  (void)stkr_shutdown();
  out->written = st.written;
  out->dropped = st.dropped;
  out->stacks = st.stacks;
  out->bytes_per_event = st.written ? (double)st.bytes / (double)st.written : 0;
  return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path) == 0 ? 0 : 0; /* best effort */
}

/* Fork a run; its result comes back through a pipe. */
static int run_child(int levels, uint64_t cap, result *out) {
  char dir[] = "/tmp/stkr-stack-table-XXXXXX";
  int fds[2], st;
  pid_t p;

  if (mkdtemp(dir) == NULL || pipe(fds) != 0) return -1;
  if ((p = fork()) == 0) {
    result r;
    int ok = run_one(levels, cap, dir, &r) == 0;
    if (ok && write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  ssize_t got = p > 0 ? read(fds[0], out, sizeof *out) : -1;
  close(fds[0]);
  if (p > 0) waitpid(p, &st, 0);
  /* The recording and its .stackrec-cache subdirectory. */
  (void)nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  return got == (ssize_t)sizeof *out ? 0 : -1;
}

int main(int argc, char **argv) {
  static const uint64_t caps[2] = {8ull << 20, 1ull << 30};
  static const char *const names[2] = {"capped (8 MiB, the default)",
                                       "uncapped (1 GiB)"};
  int levels = 17, runs = 3;
  double rss[2][MAX_RUNS], bpe[2][MAX_RUNS], secs[2][MAX_RUNS];
  result last[2];

  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--levels") == 0) levels = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
  }
  if (levels < 4 || levels > 22 || runs < 1 || runs > MAX_RUNS) {
    fprintf(stderr, "usage: stack_table [--levels 4..22] [--runs 1..%d]\n",
            MAX_RUNS);
    return 2;
  }
  printf("stack_table: %u distinct stacks x %d rounds, offline, %d runs "
         "each, alternating\n", 1u << levels, ROUNDS, runs);
  for (int k = 0; k < runs; k++)
    for (int c = 0; c < 2; c++) {
      int i = (k % 2) ? 1 - c : c; /* ABBA: neither always goes first */
      if (run_child(levels, caps[i], &last[i]) != 0) {
        fprintf(stderr, "stack_table: run failed\n");
        return 1;
      }
      rss[i][k] = last[i].rss_mb;
      bpe[i][k] = last[i].bytes_per_event;
      secs[i][k] = last[i].seconds;
    }
  printf("%-30s %12s %12s %10s %10s %10s\n", "", "RSS added", "bytes/event",
         "seconds", "written", "dropped");
  for (int i = 0; i < 2; i++)
    printf("%-30s %9.1f MB %12.2f %10.3f %10llu %10llu\n", names[i],
           bench_median(rss[i], (size_t)runs), bench_median(bpe[i], (size_t)runs),
           bench_median(secs[i], (size_t)runs), last[i].written,
           last[i].dropped);
  double ratio = bench_median(rss[0], (size_t)runs) /
                 bench_median(rss[1], (size_t)runs);
  printf("capped / uncapped: RSS %.2fx, bytes per event %.2fx, time %.2fx\n",
         ratio,
         bench_median(bpe[0], (size_t)runs) / bench_median(bpe[1], (size_t)runs),
         bench_median(secs[0], (size_t)runs) /
             bench_median(secs[1], (size_t)runs));
  bool pass = bench_median(rss[0], (size_t)runs) <= 8.0 + 4.0 &&
              last[0].dropped == 0 &&
              last[0].written == (unsigned long long)ROUNDS << levels;
  printf("goal: capped adds <= cap + 4 MB and loses no event: %s\n",
         pass ? "PASS" : "MISS");
  return 0;
}
