/*
 * test-filter.c: one event filter for every command (tools/stackrec/
 * filter.c). A recording with exactly known times, written through the
 * real encoder (tests/fixture.c), whose events are out of order the way
 * drained rings make them (a later thread's events first, an event before
 * the process's recording start, two processes with different starts), is
 * read by `report`, `export --format folded`, `jsonl` and `chrome` under
 * every filter; each must keep exactly the events this test computes on
 * its own from the definition of the window (seconds since the process's
 * Header.start_mono_ns) and the name filters.
 *
 * The regression this guards: the window once counted from the first event
 * *read*, and export's per-event formats had a second copy of the filter
 * that disagreed with report's on out-of-order input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

#define PID_A 4242u
#define PID_B 4243u
#define MS 1000000ll

/* Process B started recording 30 ms after A (Header.start_mono_ns). */
#define SHIFT_B (30 * MS)

typedef struct ev_def {
  uint32_t pid;
  int64_t at;    /* ns since its process's start (may be < 0) */
  uint32_t site; /* fx_site_name[] */
  uint32_t thread; /* fx_thread_name[] / fx_thread_tid[] */
} ev_def;

/* In read order: per process, thread 2's ring drained before thread 1's. */
static const ev_def k_evs[] = {
    {PID_A, 40 * MS, 2, 2},  {PID_A, 41 * MS, 3, 2},  {PID_A, 90 * MS, 2, 2},
    {PID_A, -1 * MS, 1, 1},  {PID_A, 5 * MS, 3, 1},   {PID_A, 12 * MS, 1, 1},
    {PID_A, 60 * MS, 3, 1},  {PID_A, 150 * MS, 2, 1}, {PID_B, 70 * MS, 3, 2},
    {PID_B, 2 * MS, 1, 1},   {PID_B, 8 * MS, 2, 1},   {PID_B, 45 * MS, 1, 1},
};
#define N_EVS (sizeof k_evs / sizeof k_evs[0])

typedef struct filt {
  const char *opts;                 /* command-line options */
  double from, to;                  /* window, to <= 0: none */
  const char *site_prefix;          /* NULL: any */
  uint32_t thread;                  /* 0: any */
} filt;

static const filt k_filters[] = {
    {"", 0, 0, NULL, 0},
    {"--to 0.01", 0, 0.01, NULL, 0},
    {"--from 0.01", 0.01, 0, NULL, 0},
    {"--from 0.005 --to 0.045", 0.005, 0.045, NULL, 0},
    {"--from 0.041 --to 0.0411", 0.041, 0.0411, NULL, 0},
    {"--to 0.000001", 0, 0.000001, NULL, 0},
    {"--site 'net.*'", 0, 0, "net.", 0},
    {"--site 'file.*' --to 0.05", 0, 0.05, "file.", 0},
    {"--thread main", 0, 0, NULL, 1},
    {"--thread 4243 --from 0.04", 0.04, 0, NULL, 2},
    {"--thread 'worker-*' --site net.connect --to 0.1", 0, 0.1, "net.", 2},
};
#define N_FILTERS (sizeof k_filters / sizeof k_filters[0])

static char g_dir[4096];

/* The events the definition keeps: time since the process's start,
 * clamped at 0 (an event before the start counts as time 0). */
static long expected(const filt *f) {
  long n = 0;
  size_t i;

  for (i = 0; i < N_EVS; i++) {
    const ev_def *e = &k_evs[i];
    double t = e->at > 0 ? (double)e->at / 1e9 : 0.0;
    if (t < f->from || (f->to > 0 && t >= f->to))
      continue;
    if (f->site_prefix != NULL &&
        strncmp(fx_site_name[e->site], f->site_prefix,
                strlen(f->site_prefix)) != 0)
      continue;
    if (f->thread != 0 && e->thread != f->thread)
      continue;
    n++;
  }
  return n;
}

static void write_process(uint32_t pid, uint64_t shift) {
  static const uint32_t sites[] = {1, 2, 3}, threads[] = {1, 2},
                        stacks[] = {1, 2, 3};
  fx_ev evs[N_EVS];
  size_t n = 0, i;
  int64_t prev = 0;
  stkr_fmt_buf buf = {0};
  uint64_t start = FX_START_MONO + shift;

  for (i = 0; i < N_EVS; i++) {
    if (k_evs[i].pid != pid)
      continue;
    evs[n] = (fx_ev){.delta = k_evs[i].at - prev, .site = k_evs[i].site,
                     .thread = k_evs[i].thread,
                     .stack = k_evs[i].site, /* stack i was seen at site i */
                     .payload = NULL};
    prev = k_evs[i].at;
    n++;
  }
  fx_batch b = {.seq = 1, .header = true, .pid = pid, .segment_seq = 1,
                .sites = sites, .n_sites = 3, .threads = threads,
                .n_threads = 2, .stacks = stacks, .n_stacks = 3,
                .base_ts = start, .evs = evs, .n_evs = n, .last = true,
                .start_shift = shift};
  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(g_dir, pid, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
}

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0)
    return -1;
  snprintf(g_dir, sizeof g_dir, "%s", fx_tmpdir("filter"));
  write_process(PID_A, 0);
  write_process(PID_B, SHIFT_B);
  return 0;
}

/* "# N events from ..." (report's first line). */
static long report_count(void) {
  unsigned long long n;
  return sscanf(cr_out, "# %llu event", &n) == 1 ? (long)n : -1;
}

/* folded: "frame;frame;... COUNT" per line. */
static long folded_count(void) {
  long n = 0;
  const char *line = cr_out;

  while (*line != '\0') {
    const char *nl = strchr(line, '\n'), *sp;
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    for (sp = line + len; sp > line && sp[-1] != ' '; sp--)
      ;
    if (len > 0)
      n += strtol(sp, NULL, 10);
    line += len + (nl != NULL);
  }
  return n;
}

static long count_substr(const char *hay, const char *needle) {
  long n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static void test_every_command_keeps_the_defined_events(void **state) {
  size_t i;
  (void)state;

  for (i = 0; i < N_FILTERS; i++) {
    const filt *f = &k_filters[i];
    long want = expected(f), got;

    assert_int_equal(cr_run("report %s '%s'", f->opts, g_dir), 0);
    if ((got = report_count()) != want)
      fail_msg("report %s: %ld events, want %ld\n%s", f->opts, got, want,
               cr_out);
    assert_int_equal(cr_run("export --format folded %s '%s'", f->opts, g_dir),
                     0);
    if ((got = folded_count()) != want)
      fail_msg("folded %s: %ld events, want %ld", f->opts, got, want);
    assert_int_equal(cr_run("export --format jsonl %s '%s'", f->opts, g_dir),
                     0);
    if ((got = count_substr(cr_out, "\"ts_ns\":")) != want)
      fail_msg("jsonl %s: %ld events, want %ld", f->opts, got, want);
    assert_int_equal(cr_run("export --format chrome %s '%s'", f->opts, g_dir),
                     0);
    if ((got = count_substr(cr_out, "\"ph\":\"i\"")) != want)
      fail_msg("chrome %s: %ld events, want %ld", f->opts, got, want);
  }
}

/* Chrome's ts is the recording's monotonic clock in microseconds: never
 * negative, whatever order the events are read in. */
static void test_chrome_ts_never_negative(void **state) {
  (void)state;
  assert_int_equal(cr_run("export --format chrome '%s'", g_dir), 0);
  assert_null(strstr(cr_out, "\"ts\":-"));
  /* Process A's event 1 ms before its start: FX_START_MONO - 1 ms. */
  assert_non_null(strstr(cr_out, "\"ts\":999000.000"));
}

/* report --timeline: net.connect's events at 8 (B), 40, 90 and 150 ms (A)
 * after their process's start; 150 ms needs 2 ms buckets (128 x 1 ms is
 * too short), so 76 of them, with an event in buckets 4, 20, 45 and 75. */
static void test_timeline(void **state) {
  char row[76 * 3 + 8], *p = row;
  size_t i;
  (void)state;

  for (i = 0; i < 76; i++) {
    if (i == 4 || i == 20 || i == 45 || i == 75)
      p += sprintf(p, "\u2588"); /* a peak of 1: full */
    else
      *p++ = ' ';
  }
  *p = '\0';
  assert_int_equal(cr_run("report --timeline --site net.connect '%s'",
                          g_dir), 0);
  assert_non_null(strstr(cr_out, "    timeline: 0-152 ms after start, 2 ms a "
                                 "character, peak 1 (500/s)\n"));
  if (strstr(cr_out, row) == NULL)
    fail_msg("want |%s| in:\n%s", row, cr_out);
}

/* report --timeline over every site: each site gets its own events' row
 * (the timeline keeps a table from site to counters), 2 ms buckets as
 * above. Buckets of each site's events (times after their process's
 * start; A's event at -1 ms counts at 0). */
static void test_timeline_per_site(void **state) {
  static const struct {
    const char *site;
    int buckets[4];
  } want[] = {
      {"privacy.clipboard.read", {0, 1, 6, 22}},
      {"net.connect", {4, 20, 45, 75}},
      {"file.open", {2, 20, 30, 35}},
  };
  size_t w, i, k;
  (void)state;

  assert_int_equal(cr_run("report --timeline '%s'", g_dir), 0);
  for (w = 0; w < sizeof want / sizeof want[0]; w++) {
    char row[76 * 3 + 8], *p = row;
    const char *at = strstr(cr_out, want[w].site), *line;

    if (at == NULL)
      fail_msg("no %s in:\n%s", want[w].site, cr_out);
    /* The row ("    |" then a character a bucket) up to the site's last
     * event: the first timeline row after the site's name. */
    for (i = 0; i <= (size_t)want[w].buckets[3]; i++) {
      for (k = 0; k < 4 && want[w].buckets[k] != (int)i; k++)
        ;
      if (k < 4)
        p += sprintf(p, "\u2588"); /* a peak of 1: full */
      else
        *p++ = ' ';
    }
    *p = '\0';
    line = strstr(at, "timeline: ");
    if (line == NULL || (line = strchr(line, '\n')) == NULL ||
        strncmp(line + 1, "    |", 5) != 0 ||
        strncmp(line + 6, row, strlen(row)) != 0)
      fail_msg("want |%s under %s in:\n%s", row, want[w].site, cr_out);
  }
}

/* A child forked 2 s into the run (Header.parent_pid) and a mark set at
 * 1.5 s: on the timeline the mark comes before the child's event, as
 * compliance orders them (QA, session 36: the child's event was drawn at
 * 0 s, before the mark). Processes that are no forked children (A and B
 * above: an exec'd program, an app's launches) still line up at their
 * own starts. */
static void test_timeline_runs_and_marks(void **state) {
  const char *d = fx_tmpdir("filter-runs");
  (void)state;

  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 10}), 0);
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 20, .shift = 2000 * MS,
                                             .parent_pid = 10}),
                   0);
  assert_int_equal(
      tl_system("printf 'm1 %llu %llu 1 consent.granted -\\n' "
                ">> '%s/stackrec.marks'",
                (unsigned long long)(FX_START_MONO + 1500 * MS),
                (unsigned long long)(FX_START_WALL + 1500 * MS), d),
      0);
  assert_int_equal(cr_run("report --timeline '%s'", d), 0);
  cr_assert_has(cr_out, "    timeline: 0-2.016 s after start, 16 ms a "
                        "character");
  {
    /* The row's characters (a full block is 3 bytes) up to its last
     * event, and the column of the mark's '^' on the line below. */
    const char *row = strstr(cr_out, "\n    |"), *marks, *caret;
    size_t last = 0, col = 0;
    assert_non_null(row);
    row += 6;
    for (const char *q = row; *q != '|' && *q != '\n'; col++)
      if (strncmp(q, "\u2588", 3) == 0) {
        last = col;
        q += 3;
      } else {
        q++;
      }
    marks = strchr(row, '\n') + 1;
    caret = strchr(marks, '^');
    assert_non_null(caret);
    assert_true(caret - marks > 5); /* not at 0 s */
    assert_true((size_t)(caret - marks - 5) < last); /* 93 < 125 */
  }
  /* A program exec'd 2 s in by a child of the root (its OS parent, no
   * fork followed: session 37; before, from its own start, "0-16 ms"):
   * from the root's start. One whose OS parent started after it (a pid
   * used again) is no child of it: from its own. */
  d = fx_tmpdir("filter-exec");
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 10}), 0);
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 21, .shift = 2000 * MS,
                                             .os_parent_pid = 10}),
                   0);
  assert_int_equal(cr_run("report --timeline '%s'", d), 0);
  cr_assert_has(cr_out, "    timeline: 0-2.016 s after start, 16 ms a "
                        "character");
  d = fx_tmpdir("filter-exec-later");
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 10, .shift = 2000 * MS}),
                   0);
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 21, .os_parent_pid = 10}),
                   0);
  assert_int_equal(cr_run("report --timeline '%s'", d), 0);
  cr_assert_has(cr_out, "    timeline: 0-1 ms after start, 1 ms a character, "
                        "peak 2 (2000/s)\n");
  /* Two launches of an app into one directory, 8 s apart, no fork
   * between them: each from its own start, as before (the review: the
   * first version drew a directory from its earliest start, 8 s wide). */
  d = fx_tmpdir("filter-launches");
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 10}), 0);
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 30, .shift = 8000 * MS}),
                   0);
  assert_int_equal(cr_run("report --timeline '%s'", d), 0);
  cr_assert_has(cr_out, "    timeline: 0-1 ms after start, 1 ms a character, "
                        "peak 2 (2000/s)\n");
}

TL_TEST_MAIN("filter", setup, NULL, test_every_command_keeps_the_defined_events,
             test_chrome_ts_never_negative, test_timeline,
             test_timeline_per_site, test_timeline_runs_and_marks)
