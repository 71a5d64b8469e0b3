/*
 * report_throughput.c: events per second through the analysis tools on a
 * recording of >= 50 M events, and the peak RSS of each.
 *
 * Target: >= 20 M events/s for `report` (no symbolization work).
 *
 * Methodology
 * - The recording is made by the recorder itself (stkr_init, 2 producer
 *   threads, 64 MiB rings, flush every 100 ms, symbolize = inproc so the
 *   exports have names to write), into a temp dir, or into --dir DIR,
 *   which is kept and reused by later runs (a DIR that already holds
 *   segment files is read as it is). 512 distinct call stacks: a common
 *   prefix of PREFIX frames, then 9 levels each through one of two
 *   functions (2^9 paths), at 8 sites (site = stack % 8); each event's
 *   stack is drawn from a Zipf(1) distribution (hot paths dominate, as at
 *   real hook sites); no payload. Each producer calls stkr_flush() every
 *   PACE events so that it never overruns its ring; should a ring still
 *   be full, the producer retries, so every event is recorded (a retry
 *   counts as a ring-full drop in the recording; the count is printed).
 * - Each measurement runs in a child process of its own (fork, or
 *   fork+exec for the CLI), so its peak RSS is its own: wait4()'s
 *   ru_maxrss. Wall time is measured around the whole child (for the CLI
 *   this includes exec and writing the output; for the in-process rows,
 *   from opening the reader to the aggregation being complete).
 *     reader      stkr_reader_next() over every event, lazy_frames: the
 *                 floor every tool pays (decompress, decode, deliver)
 *     agg         stkr_agg_build() over a lazy_frames reader, no options:
 *                 what `report` does before printing (frames taken once
 *                 per distinct stack, no symbol lookups)
 *     report      `stackrec report DIR > /dev/null` (the built binary)
 *     report html `stackrec report --html FILE DIR > /dev/null`
 *     pprof       `stackrec export --format pprof -o FILE DIR`
 *     diff        `stackrec diff DIR DIR > /dev/null`: both inputs read
 *                 (its rate counts the events of both), every path
 *                 compared (none differs: the work without the output)
 *     compliance  `stackrec compliance DIR > /dev/null` (issue 13: per
 *                 site and module, rates, before consent, background)
 *     compliance --policy
 *                 the same with 3 rules on every site (before_mark,
 *                 in_state, max_per_minute), every rule tested per event
 *   Producer 0 sets marks while it records (consent.granted a quarter of
 *   the way, app.background / app.foreground every 2^22 of its events), so
 *   the compliance rows answer state queries on real marks.
 *   Rows run interleaved (reader, agg, report, html, pprof, reader, ...),
 *   ROUNDS rounds (default 5); the table shows the median time and rate
 *   and the largest peak RSS over the rounds.
 * - The page cache: the recording is read once before measuring, so every
 *   round reads it from memory (its size is printed; it fits easily).
 * - Machine: a shared 2-core VM; other work on it shows as noise.
 *
 * Usage: report_throughput [--dir DIR] [--events N] [--rounds N]
 *                          [--stackrec PATH]
 *   --events   events to record when a recording is made (default 50 M)
 *   --stackrec the CLI binary (default: tools/stackrec in the runfiles)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tools/stackrec/agg.h"
#include "tools/bench/bench_util.h"

#define TARGET_REPORT 20e6 /* events/s */
#define PRODUCERS 2
#define NSITES 8
#define CHOICE_LEVELS 9 /* 512 stacks */
#define NSTACKS (1u << CHOICE_LEVELS)
#define PREFIX 8

static stkr_site g_sites[NSITES] = {
    STKR_SITE_INIT("bench.report.open"),    STKR_SITE_INIT("bench.report.read"),
    STKR_SITE_INIT("bench.report.connect"), STKR_SITE_INIT("bench.report.getenv"),
    STKR_SITE_INIT("bench.report.uname"),   STKR_SITE_INIT("bench.report.stat"),
    STKR_SITE_INIT("bench.report.ioctl"),   STKR_SITE_INIT("bench.report.mac")};
static double g_zipf_cdf[NSTACKS];
static unsigned g_zipf_perm[NSTACKS];

static void die(const char *what, int err) {
  fprintf(stderr, "report_throughput: %s: %s\n", what,
          err < 0 ? strerror(-err) : err ? strerror(err) : "failed");
  exit(1);
}

/* ---- the recording ------------------------------------------------------
 * Stack k: PREFIX frames of prefix(), then CHOICE_LEVELS frames, path_a or
 * path_b by one bit of k; the two functions' call sites differ, so each k
 * is a different PC sequence. */
static __attribute__((noinline)) void path_a(unsigned level, unsigned k);
static __attribute__((noinline)) void path_b(unsigned level, unsigned k);

static inline void step(unsigned level, unsigned k) {
  if (level == 0) {
    /* Ring full: wait for the worker rather than lose the event. */
    while (stkr_event(&g_sites[k % NSITES], NULL, 0) == -EAGAIN)
      sched_yield();
  } else if ((k >> (level - 1)) & 1u) {
    path_b(level - 1, k);
  } else {
    path_a(level - 1, k);
  }
}
/* Different bodies, so that -O2 does not fold the two into one function
 * (identical code folding would give every path the same frame names and
 * merge the 512 stacks into 8 in every report). */
static volatile unsigned g_sink_a, g_sink_b;
static __attribute__((noinline)) void path_a(unsigned level, unsigned k) {
  step(level, k);
  g_sink_a = k; /* keep the frame: no tail call */
}
static __attribute__((noinline)) void path_b(unsigned level, unsigned k) {
  step(level, k);
  g_sink_b = level;
}

static unsigned pick(uint64_t *rng) {
  return bench_zipf_draw(g_zipf_cdf, g_zipf_perm, NSTACKS, bench_xorshift(rng));
}

static void zipf_setup(void) {
  uint64_t rng = 0x9E3779B97F4A7C15ull;

  (void)bench_zipf_init(g_zipf_cdf, g_zipf_perm, NSTACKS, &rng);
}

typedef struct producer {
  uint64_t n, rng;
  bool marks;         /* this producer sets the marks */
  uint64_t marks_set;
} producer;

/* Events between two stkr_flush() barriers: 128 Ki records (~25 MiB at
 * this depth) fit the 64 MiB ring, so the producers wait for the worker
 * instead of overrunning it, and (almost) nothing is dropped. */
#define PACE (1u << 17)

#define MARK_EVERY (1u << 22)

static __attribute__((noinline)) void produce_leaf(producer *p) {
  uint64_t i;
  for (i = 0; i < p->n; i++) {
    step(CHOICE_LEVELS, pick(&p->rng));
    if ((i + 1) % PACE == 0)
      (void)stkr_flush();
    if (p->marks && i == p->n / 4 && stkr_mark("consent.granted", NULL, 0) == 0)
      p->marks_set++;
    if (p->marks && (i + 1) % MARK_EVERY == 0 &&
        stkr_mark((i + 1) / MARK_EVERY % 2 ? "app.background"
                                           : "app.foreground",
                  NULL, 0) == 0)
      p->marks_set++;
  }
}
static __attribute__((noinline)) void prefix(unsigned depth, producer *p) {
  if (depth <= 1)
    produce_leaf(p);
  else
    prefix(depth - 1, p);
  __asm__ volatile("" ::: "memory");
}
static void *producer_main(void *arg) {
  prefix(PREFIX, arg);
  return NULL;
}

static void record(const char *dir, uint64_t events) {
  stkr_config cfg;
  stkr_stats st;
  pthread_t th[PRODUCERS];
  producer p[PRODUCERS];
  double t0, t1;
  int i, err;

  zipf_setup();
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = 64u << 20;
  cfg.max_depth = 64;
  cfg.flush_interval_ms = 100;
  cfg.disk_cap_bytes = 64ull << 30; /* never delete a segment */
  cfg.symbolize = STKR_SYMBOLIZE_INPROC;
  if ((err = stkr_init(&cfg)) != 0)
    die("stkr_init", err);
  printf("recording %" PRIu64 " events (%d threads, %u stacks, %d sites, "
         "Zipf(1), symbolize inproc) into %s ...\n",
         events, PRODUCERS, NSTACKS, NSITES, dir);
  t0 = bench_now_s();
  for (i = 0; i < PRODUCERS; i++) {
    p[i].n = events / PRODUCERS + (i == 0 ? events % PRODUCERS : 0);
    p[i].marks = i == 0;
    p[i].marks_set = 0;
    p[i].rng = 0x2545F4914F6CDD1Dull * (uint64_t)(i + 1);
    if (pthread_create(&th[i], NULL, producer_main, &p[i]) != 0)
      die("pthread_create", errno);
  }
  for (i = 0; i < PRODUCERS; i++)
    pthread_join(th[i], NULL);
  if ((err = stkr_flush()) != 0)
    die("stkr_flush", err);
  t1 = bench_now_s();
  if ((err = stkr_stats_get(&st)) != 0)
    die("stkr_stats_get", err);
  if ((err = stkr_shutdown()) != 0)
    die("stkr_shutdown", err);
  printf("recorded: %" PRIu64 " events written, %" PRIu64 " stacks, %" PRIu64
         " ring-full retries (counted as drops), %.1f MB in %" PRIu64
         " segments, %.1f s (%.1f M events/s)\n",
         st.written, st.stacks, st.dropped_ring_full, (double)st.bytes / 1e6,
         st.segments, t1 - t0, (double)st.written / (t1 - t0) / 1e6);
  /* A mark is recorded as an event of its own reserved site. */
  printf("marks set: %" PRIu64 "\n", p[0].marks_set);
  if (st.written != events + p[0].marks_set)
    die("not every event was written", EIO);
}

/* Bytes of the segment files in dir, read once so they are in the page
 * cache; *files gets their number. */
static uint64_t warm_dir(const char *dir, unsigned *files) {
  DIR *d = opendir(dir);
  struct dirent *e;
  uint64_t sum = 0;
  static char buf[1 << 20];

  *files = 0;
  if (d == NULL)
    return 0;
  while ((e = readdir(d)) != NULL) {
    char path[4096];
    int fd;
    ssize_t n;
    if (strncmp(e->d_name, "stackrec-", 9) != 0)
      continue;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
            sizeof path ||
        (fd = open(path, O_RDONLY)) < 0)
      continue;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      sum += (uint64_t)n;
    close(fd);
    (*files)++;
  }
  closedir(d);
  return sum;
}

/* ---- measurements ------------------------------------------------------- */

enum { M_READER, M_AGG, M_REPORT, M_HTML, M_PPROF, M_DIFF, M_COMP, M_COMP_POLICY, NM };
static const char *const mname[NM] = {
    "reader (stkr_reader_next, lazy_frames)",
    "agg (stkr_agg_build, as report)",
    "stackrec report DIR",
    "stackrec report --html FILE DIR",
    "stackrec export --format pprof",
    "stackrec diff DIR DIR (reads it twice)",
    "stackrec compliance DIR",
    "stackrec compliance --policy P DIR"};
/* Events each row reads, in recordings: diff reads BASE and NEW. */
static const unsigned mreads[NM] = {1, 1, 1, 1, 1, 2, 1, 1};

/* The compliance row's policy: every rule selects every site. */
static const char k_policy[] =
    "{\"rules\": [\n"
    " {\"id\": \"before-consent\", \"sites\": \"bench.*\", "
    "\"before_mark\": \"consent.granted\"},\n"
    " {\"id\": \"background\", \"sites\": \"bench.*\", "
    "\"in_state\": \"app.background\"},\n"
    " {\"id\": \"too-often\", \"sites\": \"bench.*\", "
    "\"max_per_minute\": 1000}]}\n";

typedef struct result {
  double secs;
  uint64_t events; /* counted by the in-process rows; else the recording's */
  long maxrss_kb;
  int status;
} result;

static void quiet_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  fprintf(stderr, "warning: %s\n", w->message);
}

/* In the child: the in-process rows. Writes the event count to fd. */
static int child_inproc(int m, const char *dir, int fd) {
  stkr_reader_opts ro = {.warn = quiet_warn, .lazy_frames = true};
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t n = 0;
  int rc;

  if ((rc = stkr_reader_open(dir, &ro, &r)) != 0)
    return 2;
  if (m == M_READER) {
    while ((rc = stkr_reader_next(r, &ev)) == 1)
      n++;
    if (rc < 0)
      return 3;
  } else {
    stkr_agg *a;
    if (stkr_agg_build(r, NULL, NULL, NULL, &a) != 0)
      return 3;
    n = a->events;
    stkr_agg_free(a);
  }
  stkr_reader_free(r);
  return write(fd, &n, sizeof n) == (ssize_t)sizeof n ? 0 : 4;
}

static result measure(int m, const char *dir, const char *cli,
                      const char *tmp, uint64_t recorded) {
  int pfd[2];
  result res = {0};
  struct rusage ru;
  double t0;
  pid_t pid;
  int st;

  if (pipe(pfd) != 0)
    die("pipe", errno);
  t0 = bench_now_s();
  pid = fork();
  if (pid < 0)
    die("fork", errno);
  if (pid == 0) {
    char out[4200];
    close(pfd[0]);
    if (m == M_READER || m == M_AGG)
      _exit(child_inproc(m, dir, pfd[1]));
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0 || dup2(devnull, 1) < 0)
      _exit(126);
    if (m == M_REPORT) {
      execl(cli, cli, "report", dir, (char *)NULL);
    } else if (m == M_HTML) {
      snprintf(out, sizeof out, "%s/report.html", tmp);
      execl(cli, cli, "report", "--html", out, dir, (char *)NULL);
    } else if (m == M_COMP) {
      execl(cli, cli, "compliance", dir, (char *)NULL);
    } else if (m == M_COMP_POLICY) {
      snprintf(out, sizeof out, "%s/policy.json", tmp);
      execl(cli, cli, "compliance", "--policy", out, dir, (char *)NULL);
    } else if (m == M_PPROF) {
      snprintf(out, sizeof out, "%s/profile.pb.gz", tmp);
      execl(cli, cli, "export", "--format", "pprof", "-o", out, dir,
            (char *)NULL);
    } else {
      execl(cli, cli, "diff", dir, dir, (char *)NULL);
    }
    _exit(127);
  }
  close(pfd[1]);
  if (wait4(pid, &st, 0, &ru) != pid)
    die("wait4", errno);
  res.secs = bench_now_s() - t0;
  res.maxrss_kb = ru.ru_maxrss;
  res.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  res.events = recorded;
  if (m == M_READER || m == M_AGG) {
    uint64_t n = 0;
    if (read(pfd[0], &n, sizeof n) == (ssize_t)sizeof n)
      res.events = n;
    else
      res.status = res.status ? res.status : 5;
  }
  close(pfd[0]);
  return res;
}

/* The CLI: --stackrec, else tools/stackrec in the runfiles (bazel run
 * starts us in the runfiles directory), else beside argv[0]'s runfiles. */
static bool is_program(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         access(path, X_OK) == 0;
}

static const char *find_cli(const char *given, const char *argv0) {
  static char path[4096];

  if (given != NULL)
    return is_program(given) ? given : NULL;
  if (is_program("tools/stackrec"))
    return realpath("tools/stackrec", path) ? path : "tools/stackrec";
  snprintf(path, sizeof path, "%s.runfiles/stackrec/tools/stackrec", argv0);
  if (is_program(path))
    return path;
  return NULL;
}

/* One run: the inputs, and per measure its samples and results. */
typedef struct bench_run {
  const char *cli; /* the stackrec binary, or NULL: CLI rows skipped */
  const char *tmp; /* our temporary directory */
  char dir[4096];  /* the recording */
  uint64_t recorded, bytes;
  unsigned rounds;
  double secs[NM][64];
  double rate[NM]; /* M events/s of the median round, 0 if failed */
  long rss[NM];
  int bad[NM];
} bench_run;

/* Every measure once per round, interleaved. */
static void run_rounds(bench_run *x) {
  unsigned r;
  int m;

  for (r = 0; r < x->rounds; r++) {
    for (m = 0; m < NM; m++) {
      result res;
      if (m >= M_REPORT && x->cli == NULL)
        continue;
      res = measure(m, x->dir, x->cli, x->tmp, x->recorded);
      if (m == M_READER && x->recorded == 0)
        x->recorded = res.events; /* a reused recording: count it */
      if (res.status != 0 && res.status != 1) {
        fprintf(stderr, "%s: exit status %d\n", mname[m], res.status);
        x->bad[m] = 1;
      }
      x->secs[m][r] = res.secs;
      if (res.maxrss_kb > x->rss[m])
        x->rss[m] = res.maxrss_kb;
      printf("  round %u: %-40s %7.2f s  %6.1f MB RSS\n", r + 1, mname[m],
             res.secs, (double)res.maxrss_kb / 1024);
    }
  }
}

/* The table of medians (and the rates the verdicts use). */
static void print_table(bench_run *x) {
  int m;

  printf("\n%" PRIu64 " events, %.1f bytes/event on disk; medians of %u "
         "rounds, peak RSS the largest\n\n", x->recorded,
         x->recorded ? (double)x->bytes / (double)x->recorded : 0, x->rounds);
  printf("| %-40s | %9s | %12s | %13s |\n", "", "time (s)", "M events/s",
         "peak RSS (MB)");
  printf("| %.40s | --------: | -----------: | ------------: |\n",
         "---------------------------------------------");
  for (m = 0; m < NM; m++) {
    double med;
    if (m >= M_REPORT && x->cli == NULL) {
      printf("| %-40s | %9s | %12s | %13s |\n", mname[m], "-", "-", "-");
      continue;
    }
    qsort(x->secs[m], x->rounds, sizeof(double), bench_cmp_double);
    med = x->secs[m][x->rounds / 2];
    x->rate[m] = x->bad[m] ? 0 : (double)x->recorded * mreads[m] / med / 1e6;
    printf("| %-40s | %9.2f | %12.1f | %13.1f |%s\n", mname[m], med,
           x->rate[m], (double)x->rss[m] / 1024,
           x->bad[m] ? " (FAILED)" : "");
  }
}

/* The rates against the targets. */
static void print_verdicts(const bench_run *x) {
  const double *rate = x->rate;
  const long *rss = x->rss;
  const int *bad = x->bad;
  int m, rm = x->cli && !bad[M_REPORT] ? M_REPORT : M_AGG;
  double rep = rate[rm];

  printf("\nTarget: >= %.0f M events/s for report (no symbolization).\n",
         TARGET_REPORT / 1e6);
  printf("report: %.1f M events/s (%s) -> %s\n", rep,
         rm == M_REPORT ? "the CLI, end to end" : "the aggregation in-process",
         bad[rm] ? "NO RESULT (failed)"
                    : rep * 1e6 >= TARGET_REPORT ? "PASS" : "MISS");
  if (rate[M_AGG] > 0 && rate[M_READER] > 0)
    printf("reading alone takes %.0f%% of the aggregation's time (%.1f vs "
           "%.1f M events/s): the reader %s the main cost.\n",
           100 * rate[M_AGG] / rate[M_READER], rate[M_READER], rate[M_AGG],
           rate[M_AGG] > 0.5 * rate[M_READER] ? "is" : "is not");
  printf("peak RSS: report %.1f MB and pprof %.1f MB for a %.1f MB "
         "recording (memory grows with distinct stacks, not events).\n",
         (double)rss[x->cli ? M_REPORT : M_AGG] / 1024,
         (double)rss[M_PPROF] / 1024, (double)x->bytes / 1e6);
  if (x->cli != NULL)
    printf("diff: %.1f M events/s over both inputs (%.2fx report's rate; "
           "target >= %.0f) -> %s; peak RSS %.1f MB.\n",
           rate[M_DIFF], rate[M_REPORT] > 0 ? rate[M_DIFF] / rate[M_REPORT] : 0,
           TARGET_REPORT / 1e6,
           bad[M_DIFF] ? "NO RESULT (failed)"
                   : rate[M_DIFF] * 1e6 >= TARGET_REPORT ? "PASS" : "MISS",
           (double)rss[M_DIFF] / 1024);
  if (x->cli != NULL && rate[M_REPORT] > 0)
    for (m = M_COMP; m <= M_COMP_POLICY; m++)
      printf("%s: %.1f M events/s, %.2fx report's time, peak RSS %.1f MB "
             "-> %s (target >= %.0f M events/s)\n",
             mname[m], rate[m], rate[m] > 0 ? rate[M_REPORT] / rate[m] : 0,
             (double)rss[m] / 1024,
             bad[m] ? "NO RESULT (failed)"
                : rate[m] * 1e6 >= TARGET_REPORT ? "PASS" : "MISS",
             TARGET_REPORT / 1e6);
}

/* Remove what we wrote into tmp (and the recording unless it was the
 * caller's --dir, keep_dir). */
static void clean_up(const char *tmp, const char *keep_dir) {
  char dir[4200];

  /* Our temp dir: the CLI outputs, and the recording unless --dir. */
  snprintf(dir, sizeof dir, "%s/report.html", tmp);
  unlink(dir);
  snprintf(dir, sizeof dir, "%s/profile.pb.gz", tmp);
  unlink(dir);
  snprintf(dir, sizeof dir, "%s/policy.json", tmp);
  unlink(dir);
  if (keep_dir == NULL) {
    snprintf(dir, sizeof dir, "%s/rec", tmp);
    bench_remove_dir(dir);
  }
  rmdir(tmp);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"dir", required_argument, NULL, 'd'},
      {"events", required_argument, NULL, 'e'},
      {"rounds", required_argument, NULL, 'r'},
      {"stackrec", required_argument, NULL, 's'},
      {NULL, 0, NULL, 0}};
  static bench_run run;
  bench_run *x = &run;
  const char *dir_arg = NULL, *cli_arg = NULL;
  uint64_t events = 50000000;
  static char tmp[] = "/tmp/stkr-bench-report-XXXXXX";
  unsigned files;
  int c;

  setvbuf(stdout, NULL, _IOLBF, 0);
  x->rounds = 5;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'd': dir_arg = optarg; break;
    case 'e': events = strtoull(optarg, NULL, 0); break;
    case 'r': x->rounds = (unsigned)atoi(optarg); break;
    case 's': cli_arg = optarg; break;
    default:
      fprintf(stderr, "usage: report_throughput [--dir DIR] [--events N] "
              "[--rounds N] [--stackrec PATH]\n");
      return 2;
    }
  }
  if (x->rounds < 1 || x->rounds > 64 || events < 1000) {
    fprintf(stderr, "report_throughput: --rounds 1..64, --events >= 1000\n");
    return 2;
  }
  if (mkdtemp(tmp) == NULL)
    die("mkdtemp", errno);
  x->tmp = tmp;
  x->cli = find_cli(cli_arg, argv[0]);
  if (cli_arg != NULL && x->cli == NULL) {
    fprintf(stderr, "report_throughput: --stackrec %s: not an executable "
            "file\n", cli_arg);
    return 2;
  }
  snprintf(x->dir, sizeof x->dir, "%s", dir_arg ? dir_arg : tmp);
  if (dir_arg == NULL)
    snprintf(x->dir, sizeof x->dir, "%s/rec", tmp);
  printf("report_throughput: %ld CPUs online; CLI %s\n",
         sysconf(_SC_NPROCESSORS_ONLN), x->cli ? x->cli : "(not found: CLI "
         "rows skipped; pass --stackrec)");
  if (stkr_fmt_dir_has_segments(x->dir) == 1) {
    printf("reusing the recording in %s\n", x->dir);
  } else {
    record(x->dir, events);
    x->recorded = events;
  }
  {
    char path[4200];
    FILE *f;
    snprintf(path, sizeof path, "%s/policy.json", tmp);
    if ((f = fopen(path, "w")) == NULL || fputs(k_policy, f) < 0 ||
        fclose(f) != 0)
      die("writing the policy", errno);
  }
  x->bytes = warm_dir(x->dir, &files);
  printf("recording: %.1f MB in %u segment files (read once: page cache "
         "warm)\n\n", (double)x->bytes / 1e6, files);
  run_rounds(x);
  print_table(x);
  print_verdicts(x);
  clean_up(tmp, dir_arg);
  return 0;
}
