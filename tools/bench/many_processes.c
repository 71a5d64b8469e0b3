/*
 * many_processes.c: reading a recording of many small processes must be
 * linear in their number, with memory that does not grow with it (issue 9:
 * 8 k process files took 0.14 s, 32 k took 1.94 s and 170 MB).
 *
 * Writes recordings of N one-batch processes (N = 2 k, 8 k, 32 k), then
 * reads each in a child process (stkr_reader over every event, then every
 * process summary, as `stackrec info` and `report` do) and prints wall
 * time and peak RSS per N side by side, with the ratios from one N to the
 * next: linear time is ~4x per 4x; memory grows only by the summary each
 * process keeps (KiB per process printed).
 *
 *   bazel run -c opt //tools/bench:many_processes [-- DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "tools/bench/bench_util.h"

/* One process: one segment, one batch (header, a site, a thread, a stack,
 * one event, counters that add up, last). */
static int write_process(const char *dir, uint32_t pid) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h = STACKREC__HEADER__INIT;
  Stackrec__SiteDef sd = STACKREC__SITE_DEF__INIT, *sdp = &sd;
  Stackrec__ThreadDef td = STACKREC__THREAD_DEF__INIT, *tdp = &td;
  Stackrec__StackDef kd = STACKREC__STACK_DEF__INIT, *kdp = &kd;
  Stackrec__Events ev = STACKREC__EVENTS__INIT;
  Stackrec__Counters c = STACKREC__COUNTERS__INIT;
  uint64_t pcs[4] = {0x401000, 0x401100, 0x401200, 0x401300};
  int64_t delta = 0;
  uint32_t one = 1;
  stkr_fmt_buf buf = {0};
  char name[STKR_FMT_SEGMENT_NAME_MAX], path[4096];
  FILE *f;
  int err;

  h.format_version = STKR_FORMAT_VERSION;
  h.pid = pid;
  h.process_name = "tiny";
  h.start_mono_ns = 1000;
  h.start_wall_ns = 1700000000000000000ull;
  h.segment_seq = 1;
  h.session_id = 0x1000 + pid;
  h.session_first_seq = 1;
  sd.id = 1;
  sd.name = "files.open";
  td.id = 1;
  td.tid = pid;
  td.name = "main";
  kd.id = 1;
  kd.pcs = pcs;
  kd.n_pcs = 4;
  kd.site_id = 1;
  ev.base_ts_ns = 2000;
  ev.n_ts_delta_ns = ev.n_thread_id = ev.n_stack_id = 1;
  ev.ts_delta_ns = &delta;
  ev.thread_id = &one;
  ev.stack_id = &one;
  c.attempted = 1;
  b.seq = 1;
  b.header = &h;
  b.sites = &sdp;
  b.n_sites = 1;
  b.threads = &tdp;
  b.n_threads = 1;
  b.stacks = &kdp;
  b.n_stacks = 1;
  b.events = &ev;
  b.counters = &c;
  b.last = true;
  if ((err = stkr_fmt_encode_batch(&b, NULL, 1, &buf)) != 0)
    return err;
  stkr_fmt_segment_name(name, sizeof name, pid, 1);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(buf.data, 1, buf.len, f) != buf.len) {
    if (f)
      fclose(f);
    stkr_fmt_buf_free(&buf);
    return -EIO;
  }
  fclose(f);
  stkr_fmt_buf_free(&buf);
  return 0;
}

static void quiet(void *arg, const stkr_warning *w) {
  (void)arg;
  (void)w;
}

/* The child: read everything, touch every summary. */
static int read_all(const char *dir) {
  stkr_reader_opts o = {.warn = quiet, .lazy_frames = true};
  stkr_event_view ev;
  stkr_reader *r;
  uint64_t events = 0, sum = 0;
  size_t i, n;
  int rc;

  if (stkr_reader_open(dir, &o, &r) != 0)
    return 1;
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    events++;
  n = stkr_reader_process_count(r);
  for (i = 0; i < n; i++)
    sum += stkr_reader_process(r, i)->events;
  stkr_reader_free(r);
  return rc == 0 && sum == events ? 0 : 1;
}

typedef struct result {
  double wall;
  long rss_kib;
} result;

static int measure(const char *dir, result *res) {
  struct rusage ru;
  double t0 = bench_now_s();
  int ws;
  pid_t pid = fork();

  if (pid < 0)
    return -errno;
  if (pid == 0)
    _exit(read_all(dir));
  if (wait4(pid, &ws, 0, &ru) != pid || !WIFEXITED(ws) ||
      WEXITSTATUS(ws) != 0)
    return -EIO;
  res->wall = bench_now_s() - t0;
  res->rss_kib = ru.ru_maxrss;
  return 0;
}

int main(int argc, char **argv) {
  static const unsigned ns[] = {2000, 8000, 32000};
  const char *base = argc > 1 ? argv[1] : "/tmp/stkr-many-processes";
  result best[3];
  unsigned k, i, round;

  mkdir(base, 0700);
  for (k = 0; k < 3; k++) {
    char dir[4096];

    snprintf(dir, sizeof dir, "%s/n%u", base, ns[k]);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
      perror(dir);
      return 1;
    }
    for (i = 0; i < ns[k]; i++)
      if (write_process(dir, 100000 + i) != 0) {
        fprintf(stderr, "cannot write into %s\n", dir);
        return 1;
      }
  }
  /* Interleaved rounds; the best of 5 per N (the machine is shared). */
  for (round = 0; round < 5; round++)
    for (k = 0; k < 3; k++) {
      char dir[4096];
      result r;

      snprintf(dir, sizeof dir, "%s/n%u", base, ns[k]);
      if (measure(dir, &r) != 0) {
        fprintf(stderr, "reading %s failed\n", dir);
        return 1;
      }
      if (round == 0 || r.wall < best[k].wall)
        best[k].wall = r.wall;
      if (round == 0 || r.rss_kib < best[k].rss_kib)
        best[k].rss_kib = r.rss_kib;
    }
  printf("reading N one-batch processes (best of 5, each in its own "
         "process)\n");
  printf("%8s %10s %12s %12s %12s\n", "N", "wall s", "peak RSS KiB",
         "time ratio", "RSS ratio");
  for (k = 0; k < 3; k++) {
    printf("%8u %10.3f %12ld", ns[k], best[k].wall, best[k].rss_kib);
    if (k > 0)
      printf(" %12.2f %12.2f", best[k].wall / best[k - 1].wall,
             (double)best[k].rss_kib / (double)best[k - 1].rss_kib);
    putchar('\n');
  }
  {
    /* Memory per process: the slope from 8 k to 32 k (what stays is the
     * summary each process gets, stkr_process_info and its sites). */
    double slope = (double)(best[2].rss_kib - best[1].rss_kib) /
                   (double)(ns[2] - ns[1]);
    double tr = best[2].wall / best[1].wall;

    printf("memory per process: %.2f KiB (target <= 2.5: the summary, not "
           "the definitions)\n", slope);
    printf("linear time: ~4.0 per step (N x4), target <= 5.5\n");
    printf("verdict: %s\n", tr <= 5.5 && slope <= 2.5 ? "PASS" : "MISS");
  }
  return 0;
}
