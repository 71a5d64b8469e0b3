/*
 * test-report.c: `stackrec report` (//tools:stackrec) on recordings with
 * known content: the whole text output of the fixture's standard
 * recording (drop line, categories, stacks, percentages, order); a
 * symbolized recording (tests/symrec.h) flat and as a tree, with --top;
 * the filters; sites without categories; --html; damaged, live and empty
 * inputs; usage errors; and a recording made by the recorder in a child
 * process of this test, whose function names must show.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pty.h>

#include "recorder/stackrec.h"
#include "tests/cli_run.h"
#include "tools/stackrec/cli.h"
#include "tests/fixture.h"
#include "tests/symrec.h"
#include "tests/record_chain.h"
#include "tests/testlib.h"

static char g_std[4096]; /* the standard recording */
static char g_sym[4096]; /* sr_std(100, 0x400000) */

static int setup(void **state) {
  const char *sym;
  (void)state;

  if (cr_setup() != 0)
    return -1;
  snprintf(g_std, sizeof g_std, "%s", fx_tmpdir("report-std"));
  if (fx_std_write(g_std, FX_PID) != 0)
    return -1;
  if ((sym = sr_std_dir("report-sym", 100, 0x400000)) == NULL)
    return -1;
  snprintf(g_sym, sizeof g_sym, "%s", sym);
  return 0;
}

/* The standard recording's three stacks (fixture.c), one event each in a
 * site of three events, as report prints them (net.connect and
 * privacy.clipboard.read both have them). */
#define STD_THREE_STACKS                                                   \
  "    1 event, 33.33%:\n"                                                 \
  "        0x7f0000002000\n"                                               \
  "    1 event, 33.33%:\n"                                                 \
  "        fixture+0x1000\n"                                               \
  "        fixture+0x1100\n"                                               \
  "        fixture+0x1200\n"                                               \
  "    1 event, 33.33%, stack cut short (outer callers missing):\n"                      \
  "        fixture+0x3000\n"                                               \
  "        fixture+0x3010\n"                                               \
  "        fixture+0x3020\n"                                               \
  "        fixture+0x3030\n"

static const char k_std_report[] =
    "# INCOMPLETE: 1 of 1 process (pid 4242): 14 events dropped (ring full 6, "
    "reentrant 2, other 4, write error 2, exit 0)\n"
    "# 9 events from 1 process, 4 sites, 9 distinct stacks\n"
    "# DROPPED: 14 events were lost by the recorder, not counted below "
    "(ring full 6, reentrant 2, other 4, write error 2, exit 0)\n"
    "# NOT SYMBOLIZED: 9 events of 9 stacks with PCs only (image+offset: "
    "recorded offline, or first seen as the recording ended); 'stackrec "
    "symbolize' names them\n"
    "# percentages: categories and sites of all 9 events shown, stacks of "
    "their site\n"
    "\n"
    "net: 3 events, 33.33%, 1 site\n"
    "  net.connect: 3 events, 33.33%, 3 stacks\n"
    STD_THREE_STACKS
    "    payloads: 2 distinct, in 2 of its events\n"
    "             1   33.33%  \"bye\"\n"
    "             1   33.33%  \"q\\\"b\\\\s\\x0a\"\n"
    "\n"
    "privacy: 3 events, 33.33%, 1 site\n"
    "  privacy.clipboard.read: 3 events, 33.33%, 3 stacks\n"
    STD_THREE_STACKS
    "    payloads: 3 distinct, in 3 of its events\n"
    "             1   33.33%  \"\\x00\\x01bin\\xff\\x7f\\x1b\"\n"
    "             1   33.33%  \"hello\"\n"
    "             1   33.33%  \"\\xc3\\xa9t\\xc3\\xa9\"\n"
    "\n"
    "file: 2 events, 22.22%, 1 site\n"
    "  file.open: 2 events, 22.22%, 2 stacks\n"
    "    1 event, 50.00%:\n"
    "        0x7f0000002000\n"
    "    1 event, 50.00%:\n"
    "        fixture+0x1000\n"
    "        fixture+0x1100\n"
    "        fixture+0x1200\n"
    "    payloads: 1 distinct, in 1 of its events\n"
    "             1   50.00%  \"abcdefgh\"...\n"
    "\n"
    "late: 1 event, 11.11%, 1 site\n"
    "  late.site: 1 event, 11.11%, 1 stack\n"
    "    1 event, 100.00%:\n"
    "        fixture+0x1000\n"
    "        fixture+0x1100\n"
    "        fixture+0x1200\n"
    "    payloads: 1 distinct, in 1 of its events\n"
    "             1  100.00%  \"x\"\n";

static void test_std_whole_output(void **state) {
  (void)state;

  assert_int_equal(cr_run("report '%s'", g_std), 0);
  assert_string_equal(cr_err, "");
  assert_string_equal(cr_out, k_std_report);
}

/* --top 1: the first stack of each site, then one line for the rest. */
static void test_top(void **state) {
  (void)state;

  cr_report_has("--top 1", g_std,
             "  net.connect: 3 events, 33.33%, 3 stacks\n"
             "    1 event, 33.33%:\n"
             "        0x7f0000002000\n"
             "    ... 2 more stacks: 2 events, 66.67%\n"
             "    payloads: 2 distinct, in 2 of its events\n"
             "             1   33.33%  \"bye\"\n"
             "             1   33.33%  (1 other payloads)\n"
             "\nprivacy: ");
  assert_non_null(strstr(cr_out, "  late.site: 1 event, 11.11%, 1 stack\n"
                                 "    1 event, 100.00%:\n"
                                 "        fixture+0x1000\n"
                                 "        fixture+0x1100\n"
                                 "        fixture+0x1200\n"));
  assert_null(strstr(cr_out, "late.site: 1 event, 11.11%, 1 stack\n    ..."));
  assert_int_equal(cr_run("report --top 0 '%s'", g_std), 0);
  assert_string_equal(cr_out, k_std_report);
}

static void test_symbolized_flat(void **state) {
  (void)state;

  assert_int_equal(cr_run("report '%s'", g_sym), 0);
  assert_string_equal(cr_err, "");
  assert_string_equal(
      cr_out,
      "# 8 events from 1 process, 3 sites, 4 distinct stacks\n"
      "# percentages: categories and sites of all 8 events shown, stacks "
      "of their site\n"
      "\n"
      "files: 6 events, 75.00%, 2 sites\n"
      "  files.open: 5 events, 62.50%, 2 stacks\n"
      "    4 events, 80.00%:\n"
      "        open_config (app/config.c:12)\n"
      "        libc_wrapper\n"
      "        load (app/load.c:30) [inlined]\n"
      "        main (app/main.c:40)\n"
      "    1 event, 20.00%:\n"
      "        __libc_open\n"
      "        __libc_start\n"
      "  files.stat: 1 event, 12.50%, 1 stack\n"
      "    1 event, 100.00%, stack cut short (outer callers missing):\n"
      "        stat_it (app/stat.c:7)\n"
      "        main (app/main.c:44)\n"
      "\n"
      "network: 2 events, 25.00%, 1 site\n"
      "  network.connect: 2 events, 25.00%, 1 stack\n"
      "    2 events, 100.00%:\n"
      "        app+0x400\n"
      "        main (app/main.c:50)\n");
}

/* r written into a fresh directory (tag) and `stackrec report ARGS DIR` run
 * on it, exit 0 asserted (its output in cr_out). @return the directory. */
static const char *report_of(const char *tag, const sr_rec *r,
                             const char *args) {
  const char *d = sr_dir(tag, r);

  assert_non_null(d);
  assert_int_equal(cr_run("report %s '%s'", args, d), 0);
  return d;
}

/* A tree: main reached at two lines (two nodes, as in the stack lists; one
 * node without a line under --granularity function), a shared mid with two
 * callees; main's own calls beside its callee are "(here)". */
static void test_tree(void **state) {
  static const char *const sites[] = {"s"};
  static const char *const threads[] = {"t"};
  static const sr_frame fa[] = {{"a", "a.c", 1, false, true},
                                {"mid", "mid.c", 5, false, true},
                                {"main", "main.c", 10, false, true}};
  static const sr_frame fb[] = {{"b", "b.c", 2, false, true},
                                {"mid", "mid.c", 5, false, true},
                                {"main", "main.c", 10, false, true}};
  static const sr_frame fc[] = {{"c", "c.c", 3, false, true},
                                {"main", "main.c", 20, false, true}};
  static const sr_stack st[] = {{1, fa, 3, false}, {1, fb, 3, false},
                                {1, fc, 2, false}, {1, fb + 2, 1, false}};
  static const sr_event ev[] = {{1, 1, 0}, {1, 1, 1}, {1, 1, 1}, {2, 1, 1},
                                {3, 1, 1}, {3, 1, 1}};
  sr_rec r = {.pid = 7, .pc_base = 0x400000, .start_ns = 1, .sites = sites,
              .n_sites = 1, .threads = threads, .n_threads = 1,
              .stacks = st, .n_stacks = 3, .evs = ev, .n_evs = 6,
              .last = true};
  const char *d;
  (void)state;

  d = report_of("report-tree", &r, "--tree");
  assert_string_equal(
      cr_out,
      "# 6 events from 1 process, 1 site, 3 distinct stacks\n"
      "# percentages: categories and sites of all 6 events shown, tree "
      "nodes of their site\n"
      "\n"
      "s: 6 events, 100.00%, 3 stacks\n"
      "    66.67%  4  main (main.c:10)\n"
      "    66.67%  4    mid (mid.c:5)\n"
      "    50.00%  3      a (a.c:1)\n"
      "    16.67%  1      b (b.c:2)\n"
      "    33.33%  2  main (main.c:20)\n"
      "    33.33%  2    c (c.c:3)\n");
  cr_report_has("--tree --top 1", d,
             "    66.67%  4  main (main.c:10)\n"
             "    66.67%  4    mid (mid.c:5)\n"
             "    50.00%  3      a (a.c:1)\n"
             "    16.67%  1      ... 1 more\n"
             "    33.33%  2  ... 1 more\n");
  /* --granularity address: named frames show their address, which is
   * what tells such stacks apart (QA, session 22). */
  assert_int_equal(cr_run("report --granularity address '%s'", d), 0);
  assert_non_null(strstr(cr_out, "      mid (mid.c:5) [app+0x110]\n"));
  assert_non_null(strstr(cr_out, "      mid (mid.c:5) [app+0x210]\n"));
  cr_report_has("--tree --granularity function", d,
             "   100.00%  6  main (main.c)\n"
             "    66.67%  4    mid (mid.c:5)\n"
             "    50.00%  3      a (a.c:1)\n"
             "    16.67%  1      b (b.c:2)\n"
             "    33.33%  2    c (c.c:3)\n");
  /* Two of main:10's events made by main itself (stack 4): beside its
   * callee mid, a "(here)" line (they were in main's count only). */
  r.n_stacks = 4;
  r.evs = (const sr_event[]){{1, 1, 0}, {3, 1, 1}, {4, 1, 1}, {4, 1, 1}};
  r.n_evs = 4;
  d = report_of("report-tree-here", &r, "--tree");
  if (strstr(cr_out, "    75.00%  3  main (main.c:10)\n"
                     "    25.00%  1    mid (mid.c:5)\n"
                     "    25.00%  1      a (a.c:1)\n"
                     "    50.00%  2    (here)\n"
                     "    25.00%  1  main (main.c:20)\n"
                     "    25.00%  1    c (c.c:3)\n") == NULL)
    fail_msg("no (here) in:\n%s", cr_out);
  /* A stack the walk cut short hangs from "[truncated]", not from its
   * outermost kept frame as if that were an entry point (QA, session 27). */
  r.stacks = (const sr_stack[]){{1, fa, 3, false}, {1, fc, 2, true}};
  r.n_stacks = 2;
  r.evs = (const sr_event[]){{1, 1, 0}, {2, 1, 1}};
  r.n_evs = 2;
  d = report_of("report-tree-cut", &r, "--tree");
  if (strstr(cr_out, "    50.00%  1  [truncated]\n"
                     "    50.00%  1    main (main.c:20)\n"
                     "    50.00%  1      c (c.c:3)\n") == NULL)
    fail_msg("no [truncated] root in:\n%s", cr_out);
}

static void test_tree_symbolized(void **state) {
  (void)state;

  cr_report_has("--tree --site 'files.*'", g_sym,
             "  files.open: 5 events, 83.33%, 2 stacks\n"
             "      80.00%  4  main (app/main.c:40)\n"
             "      80.00%  4    load (app/load.c:30) [inlined]\n"
             "      80.00%  4      libc_wrapper\n"
             "      80.00%  4        open_config (app/config.c:12)\n"
             "      20.00%  1  __libc_start\n"
             "      20.00%  1    __libc_open\n");
}

static void test_filters(void **state) {
  (void)state;

  assert_int_equal(cr_run("report --site 'files.*' '%s'", g_sym), 0);
  cr_assert_lines(cr_out, 0,
                  "# 6 events from 1 process, 2 sites, 3 distinct stacks",
                  "# filters: site files.*: 6 of 8 events");
  assert_null(strstr(cr_out, "network"));

  assert_int_equal(cr_run("report --thread io '%s'", g_sym), 0);
  assert_string_equal(cr_line(cr_out, 1),
                      "# filters: thread io: 2 of 8 events");
  assert_non_null(strstr(cr_out, "  files.open: 1 event, 50.00%, 1 stack\n"));
  assert_int_equal(cr_run("report --thread 1001 '%s'", g_sym), 0); /* main */
  assert_string_equal(cr_line(cr_out, 1),
                      "# filters: thread 1001: 6 of 8 events");

  /* Events at 0, 10, ..., 70 ns after the first. */
  assert_int_equal(cr_run("report --from 0.000000025 --to 0.000000065 '%s'",
                          g_sym), 0);
  assert_string_equal(cr_line(cr_out, 1),
                      "# filters: time [0.000000025 s, 0.000000065 s): "
                      "4 of 8 events");
  assert_non_null(strstr(cr_out, "  network.connect: 2 events, 50.00%"));
  assert_int_equal(cr_run("report --from 0.000000045 '%s'", g_sym), 0);
  assert_string_equal(cr_line(cr_out, 1),
                      "# filters: time [0.000000045 s, end): 3 of 8 events");

  assert_int_equal(cr_run("report --app-only '%s'", g_sym), 0);
  assert_string_equal(cr_line(cr_out, 1),
                      "# filters: app-only: 8 of 8 events");
  assert_non_null(strstr(cr_out, "    4 events, 80.00%:\n"
                                 "        open_config (app/config.c:12)\n"
                                 "        load (app/load.c:30) [inlined]\n"
                                 "        main (app/main.c:40)\n"
                                 "    1 event, 20.00%:\n"
                                 "        __libc_open\n"
                                 "  files.stat"));

  cr_report_has("--site nothing", g_sym, "\n# no event matches the filters\n");
}

/* Site names without a category prefix: no category level. */
static void test_no_categories(void **state) {
  static const char *const sites[] = {"alpha", "beta"};
  static const char *const threads[] = {"t"};
  static const sr_frame f[] = {{"f", NULL, 0, false, true}};
  static const sr_stack st[] = {{1, f, 1, false}, {2, f, 1, false}};
  static const sr_event ev[] = {{1, 1, 0}, {2, 1, 1}, {2, 1, 1}};
  sr_rec r = {.pid = 8, .pc_base = 0x400000, .start_ns = 1, .sites = sites,
              .n_sites = 2, .threads = threads, .n_threads = 1,
              .stacks = st, .n_stacks = 2, .evs = ev, .n_evs = 3,
              .last = true, .ring_full = 1};
  (void)state;

  report_of("report-nocat", &r, "");
  assert_string_equal(
      cr_out,
      "# INCOMPLETE: 1 of 1 process (pid 8): 1 event dropped (ring full 1, "
      "reentrant 0, other 0, write error 0, exit 0)\n"
      "# 3 events from 1 process, 2 sites, 2 distinct stacks\n"
      "# DROPPED: 1 event was lost by the recorder, not counted below (ring "
      "full 1, reentrant 0, other 0, write error 0, exit 0)\n"
      "# percentages: categories and sites of all 3 events shown, stacks "
      "of their site\n"
      "\n"
      "beta: 2 events, 66.67%, 1 stack\n"
      "  2 events, 100.00%:\n"
      "      f\n"
      "\n"
      "alpha: 1 event, 33.33%, 1 stack\n"
      "  1 event, 100.00%:\n"
      "      f\n");
}

static void test_html(void **state) {
  char path[4200], html[1 << 16];
  (void)state;

  snprintf(path, sizeof path, "%s/r.html", fx_tmpdir("report-html"));
  assert_int_equal(cr_run("report --html '%s' '%s'", path, g_sym), 0);
  assert_string_equal(cr_err, "");
  assert_non_null(strstr(cr_out, "# HTML report written to "));
  assert_null(strstr(cr_out, "open_config")); /* no text stacks */
  tl_slurp(path, html, sizeof html);
  assert_non_null(strstr(html, "<html"));
  assert_non_null(strstr(html, "files.open"));
  assert_non_null(strstr(html, "open_config"));
  /* g_sym is complete: no banner. The standard recording counts drops:
   * the page says so before anything else. */
  assert_null(strstr(html, "class=\"incomplete\""));
  assert_int_equal(cr_run("report --html '%s' '%s'", path, g_std), 0);
  tl_slurp(path, html, sizeof html);
  assert_non_null(strstr(html, "</h1>\n<p class=\"incomplete\" role=\"alert\">"
                               "<strong>INCOMPLETE: 1 of 1 process (pid 4242): 14 events "
                               "dropped (ring full 6, reentrant 2, other 4, "
                               "write error 2, exit 0)</strong></p>\n"));
  /* An unwritable place: a clear error, status 1, said before the
   * recording is read (QA, session 46: after the whole reading, the
   * report's header printed first). Nothing is left behind. */
  assert_int_equal(cr_run("report --html /nonexistent/dir/r.html '%s'",
                          g_sym), 1);
  assert_non_null(strstr(cr_err, "cannot create /nonexistent/dir/r.html"));
  assert_string_equal(cr_out, "");
  snprintf(path, sizeof path, "%s/r.html", fx_tmpdir("report-html-dir"));
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(cr_run("report --html '%s' '%s'", path, g_sym), 1);
  assert_non_null(strstr(cr_err, "Is a directory"));
  assert_string_equal(cr_out, "");
}

/* A damaged batch: named on stderr, counted at the top, the rest used. */
static void test_damaged_input(void **state) {
  const char *d = fx_tmpdir("report-bad");
  char path[4200], want[4400];
  stkr_fmt_buf buf = {0};
  size_t end0;
  (void)state;

  assert_int_equal(fx_std_encode(0, 1, FX_PID, &buf), 0);
  end0 = buf.len;
  assert_int_equal(fx_std_encode(1, 3, FX_PID, &buf), 0);
  buf.data[end0 + 20] ^= 0x40; /* inside batch 1 */
  snprintf(path, sizeof path, "%s/stackrec-%u-000001.zst", d, FX_PID);
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);

  assert_int_equal(cr_run("report '%s'", d), 1);
  snprintf(want, sizeof want, "stackrec: warning: %s: offset %zu: damaged "
                              "batch (", path, end0);
  assert_memory_equal(cr_err, want, strlen(want));
  /* Said first: damaged, and what else is missing. */
  assert_string_equal(cr_line(cr_out, 0),
                      "# INCOMPLETE: 1 of 1 process (pid 4242): 1 damaged (1 batch "
                      "lost); 8 events dropped (ring full 3, reentrant 1, "
                      "other 2, write error 2, exit 0); 1 session without a "
                      "clean end (killed, crashed or _exit); 88 events "
                      "unaccounted for (never written, or in missing "
                      "segments)");
  assert_string_equal(cr_line(cr_out, 1),
                      "# 4 events from 1 process, 3 sites, 4 distinct stacks");
  assert_non_null(strstr(cr_out, "\n# DAMAGED: 1 batch could not be read "
                                 "(named on stderr); their events are not "
                                 "counted\n"));
  /* The damaged batch is not also a gap (QA, session 44). */
  assert_null(strstr(cr_out, "\n# MISSING:"));
}

/* A recording whose last batch is cut off and whose writer does not run
 * here (pid 4242): not LIVE (QA: a dead writer's torn file said so), but
 * CUT OFF. Quiet, status 0, and said at the top. (The live case, a writer
 * holding its session file's lock: test-verify.c.) */
static void test_live_recording(void **state) {
  const char *d = fx_tmpdir("report-live");
  (void)state;

  assert_int_equal(fx_std_write_live(d, FX_PID, 9), 0);

  assert_int_equal(cr_run("report '%s'", d), 0);
  assert_string_equal(cr_err, "");
  assert_string_equal(cr_line(cr_out, 0),
                      "# INCOMPLETE: 1 of 1 process (pid 4242): 8 events dropped (ring "
                      "full 3, reentrant 1, other 2, write error 2, exit 0); "
                      "1 session without a clean end (killed, crashed or "
                      "_exit); 1 last batch cut off mid-write, not counted; "
                      "84 events unaccounted for (never written, or in "
                      "missing segments)");
  assert_string_equal(cr_line(cr_out, 1),
                      "# 8 events from 1 process, 4 sites, 8 distinct stacks");
  assert_non_null(strstr(cr_out, "\n# CUT OFF: 1 process's last batch ends "
                                 "mid-write and is not counted; no writer "
                                 "runs here (it stopped mid-batch, or the "
                                 "files were copied while it wrote)\n"));
  assert_null(strstr(cr_out, "LIVE"));
  assert_null(strstr(cr_out, "DAMAGED"));
  /* info says so too. */
  assert_int_equal(cr_run("info '%s'", d), 0);
  assert_string_equal(cr_err, "");
  assert_non_null(strstr(cr_out, "\n  end:         not clean: its last batch "
                                 "ends mid-write"));
}

static void test_empty_and_missing_inputs(void **state) {
  const char *d = fx_tmpdir("report-empty");
  char path[4200];
  (void)state;

  /* An empty directory: an empty recording (record of a program that
   * made no watched call), 0; unrelated files only: 1. */
  assert_int_equal(cr_run("report '%s'", d), 0);
  assert_non_null(strstr(cr_err, "an empty recording"));
  assert_non_null(strstr(cr_out, "# no events\n"));
  snprintf(path, sizeof path, "%s/notes.txt", d);
  assert_int_equal(fx_write_file(path, "x", 1), 0);
  cr_expect(1, "no segment files", "report '%s'", d);
  assert_non_null(strstr(cr_err, "no recording found"));
  assert_int_equal(unlink(path), 0);
  /* Zero-length and unrelated files next to a good segment: the good
   * data is reported, status 0. */
  snprintf(path, sizeof path, "%s/stackrec-5-000001.zst", d);
  assert_int_equal(fx_write_file(path, NULL, 0), 0);
  snprintf(path, sizeof path, "%s/notes.txt", d);
  assert_int_equal(fx_write_file(path, "hello", 5), 0);
  assert_int_equal(fx_std_write(d, FX_PID), 0);
  assert_int_equal(cr_run("report '%s'", d), 0);
  cr_assert_lines(cr_out, 0,
                  "# INCOMPLETE: 2 of 2 processes (pids 5, 4242): 14 events "
                  "dropped (ring "
                  "full 6, reentrant 2, other 4, write error 2, exit 0); 1 "
                  "segment without any batch",
                  "# 9 events from 2 processes, 4 sites, 9 distinct stacks");
  assert_non_null(strstr(cr_err, "notes.txt"));
  assert_non_null(strstr(cr_err, "empty file"));
  /* Wrong format: a clear message, nothing crashes. */
  snprintf(path, sizeof path, "%s/stackrec-6-000001.zst", d);
  assert_int_equal(fx_write_file(path, "not a recording at all", 22), 0);
  cr_expect(1, "stackrec-6-000001.zst: not a zstd file", "report '%s'", d);
  cr_expect(3, "cannot open /nonexistent/recording",
            "report /nonexistent/recording");
}

static void test_usage(void **state) {
  (void)state;

  cr_expect(2, "no DIR or FILE given", "report");
  cr_expect(2, "--top 'x' is not a count", "report --top x '%s'", g_std);
  assert_int_equal(cr_run("report --top -1 '%s'", g_std), 2);
  assert_int_equal(cr_run("report --from -1 '%s'", g_std), 2);
  assert_int_equal(cr_run("report --from 0x10 '%s'", g_std), 2);
  assert_int_equal(cr_run("report --to ' 1' '%s'", g_std), 2);
  assert_int_equal(cr_run("report --to 0 '%s'", g_std), 2);
  cr_expect(2, "--to 1 is not after --from 2",
            "report --from 2 --to 1 '%s'", g_std);
  assert_int_equal(cr_run("report --bogus '%s'", g_std), 2);
  cr_expect(2, "needs a value", "report --site");
  cr_expect(2, "--by module does not go with --app-only",
            "report --by module --app-only '%s'", g_std);
  assert_int_equal(cr_run("report --help"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec report"));
  assert_non_null(strstr(cr_out, "Exit status:"));
  assert_int_equal(cr_run("--help"), 0);
  assert_non_null(strstr(cr_out, "  report "));
}

/* ---- progress ---------------------------------------------------------------- */

/* The progress line (tools/stackrec/progress.c, compiled in): only on a
 * terminal, only after about a second, erased at the end. */
static void test_progress_only_on_a_terminal(void **state) {
  int master, slave, saved = dup(2), fd;
  char got[256] = "";
  ssize_t n;
  stkr_cli_progress p;
  (void)state;

  assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
  dup2(slave, 2);
  stkr_cli_progress_init(&p, "report");
  stkr_cli_progress_update(&p, 1000000, NULL); /* too early: nothing */
  p.start -= 2.0; /* as if started 2 s ago */
  p.last -= 2.0;
  stkr_cli_progress_update(&p, 12300000, NULL);
  stkr_cli_progress_done(&p);
  dup2(saved, 2);
  {
    /* The pty may hand the bytes over in more than one read. */
    static const char want[] = "\rstackrec report: 12.3 M events read (2 s)"
                               "\033[K\r\033[K";
    size_t have = 0;
    struct pollfd pfd = {master, POLLIN, 0};

    while (have < sizeof want - 1 && poll(&pfd, 1, 2000) == 1) {
      n = read(master, got + have, sizeof got - 1 - have);
      if (n <= 0)
        break;
      have += (size_t)n;
    }
    got[have] = '\0';
    assert_string_equal(got, want);
  }
  close(master);
  close(slave);

  /* Not a terminal: nothing at all. */
  fd = open(fx_tmpdir("report-prog"), O_RDONLY | O_DIRECTORY);
  assert_true(fd >= 0);
  fd = openat(fd, "err", O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  dup2(fd, 2);
  stkr_cli_progress_init(&p, "report");
  p.start -= 2.0;
  p.last -= 2.0;
  stkr_cli_progress_update(&p, 12300000, NULL);
  stkr_cli_progress_done(&p);
  dup2(saved, 2);
  assert_int_equal(lseek(fd, 0, SEEK_END), 0);
  close(fd);
  close(saved);
}

/* ---- a real recording ------------------------------------------------------ */

STKR_SITE_DEFINE(g_open, "files.open");
STKR_SITE_DEFINE(g_env, "environment.getenv");

RC_FRAME(rep_read_config, &g_open)
RC_FRAME(rep_read_home, &g_env)

/* Do the 3 frame lines at p name fns, each alone or with its file and
 * line: " (./tests/record_chain.h:LINE)" (the header as included) for the
 * first (rc_record), then " (tests/test-report.c:LINE)"? */
static bool frames_are(const char *p, const char *const fns[3]) {
  int i;

  for (i = 0; i < 3; i++) {
    const char *file = i == 0 ? " (./tests/record_chain.h:"
                              : " (tests/test-report.c:";
    size_t n = strlen(fns[i]);

    if (strncmp(p, "        ", 8) != 0 || strncmp(p + 8, fns[i], n) != 0)
      return false;
    p += 8 + n;
    if (strncmp(p, file, strlen(file)) == 0)
      p = strchr(p, ')') + 1;
    if (*p++ != '\n')
      return false;
  }
  return true;
}

/* rc_record_in_child's body: 30 events at files.open, 10 at getenv. */
static void rep_child(void) {
  for (int i = 0; i < 30; i++)
    rep_read_config();
  for (int i = 0; i < 10; i++)
    rep_read_home();
}

static void test_recorded_in_a_child(void **state) {
  char dir[4096];
  const char *a, *b, *c;
  (void)state;

  snprintf(dir, sizeof dir, "%s", fx_tmpdir("report-rec"));
  rc_record_in_child(dir, (stkr_config){0}, rep_child);

  assert_int_equal(cr_run("report --app-only '%s'", dir), 0);
  assert_string_equal(cr_err, "");
  assert_string_equal(cr_line(cr_out, 0),
                      "# 40 events from 1 process, 2 sites, 2 distinct "
                      "stacks");
  /* Per category and API, the stack with its function names (and, when
   * built with debug info, their file:line). */
  a = strstr(cr_out, "\nfiles: 30 events, 75.00%, 1 site\n"
                     "  files.open: 30 events, 75.00%, 1 stack\n"
                     "    30 events, 100.00%:\n");
  b = strstr(cr_out, "\nenvironment: 10 events, 25.00%, 1 site\n"
                     "  environment.getenv: 10 events, 25.00%, 1 stack\n"
                     "    10 events, 100.00%:\n");
  if (a == NULL || b == NULL ||
      !frames_are(strstr(a, "%:\n") + 3,
                  (const char *const[]){"rc_record", "rep_read_config",
                                        "rep_child"}) ||
      !frames_are(strstr(b, "%:\n") + 3,
                  (const char *const[]){"rc_record", "rep_read_home",
                                        "rep_child"}))
    fail_msg("unexpected report:\n%s", cr_out);
  assert_true(a < b);
  c = strstr(cr_out, "libc");
  assert_null(c); /* --app-only */
}

/* Three threads named "pool" making the same call: one row by thread (a
 * pool's workers), named as several threads, not by the first one's tid
 * (QA, session 17: "fair (tid 15604)" for three threads' events). */
static void *pool_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "pool");
  for (int i = 0; i < 5; i++)
    rep_read_home();
  return NULL;
}

static void pool_child(void) {
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    if (pthread_create(&th[i], NULL, pool_thread, NULL) != 0) _exit(9);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
}

static void test_by_thread_pool(void **state) {
  char dir[4096];
  (void)state;

  snprintf(dir, sizeof dir, "%s", fx_tmpdir("report-pool"));
  rc_record_in_child(dir, (stkr_config){0}, pool_child);
  assert_int_equal(cr_run("report --by thread '%s'", dir), 0);
  cr_assert_has(cr_out, "pool (several threads) (environment.getenv: 15)");
  assert_null(strstr(cr_out, "pool (tid "));
}

/* ---- one --app-only, and one thread count, in every view ---------------- */

static const char *const vw_sites[] = {"files.open"};
static const char *const vw_threads[] = {"worker", "worker-2", "main"};
static const uint64_t vw_tids[] = {7, 7, 8}; /* the worker renamed */
static const sr_frame vw_lib[] = {
    {"helper", NULL, 0, true, false}, /* inlined into lib_worker */
    {"lib_worker", NULL, 0, false, false},
    {"start_thread", NULL, 0, false, false},
};
static const sr_stack vw_stacks[] = {{1, vw_lib, 3, false}};
static const sr_event vw_evs[] = {{1, 1, 0}, {1, 2, 10}, {1, 3, 10}};

/* A stack with no app frame whose innermost PC has an inlined call: with
 * --app-only every view keeps that PC's frames, helper and lib_worker
 * (QA, session 36: jsonl and chrome kept helper alone, dump printed
 * stack=- and no frame). A renamed thread is one thread to info (it said
 * 3 of 2). Unsymbolized PCs are named image+offset in the chrome trace,
 * as elsewhere (it said 0xPC, category "unknown"). */
static void test_one_app_only_in_every_view(void **state) {
  static const char *const cmds[] = {
      "report --app-only", "export -f folded --app-only",
      "export -f jsonl --app-only", "export -f chrome --app-only",
      "dump --app-only --frames"};
  sr_rec r = {.pid = 300, .name = "app", .pc_base = 0x400000,
              .start_ns = 1000000000ull, .sites = vw_sites, .n_sites = 1,
              .threads = vw_threads, .tids = vw_tids, .n_threads = 3,
              .stacks = vw_stacks, .n_stacks = 1, .evs = vw_evs, .n_evs = 3,
              .last = true};
  const char *d = sr_dir("report-views", &r);
  (void)state;

  assert_non_null(d);
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    assert_int_equal(cr_run("%s '%s'", cmds[i], d), 0);
    if (strstr(cr_out, "helper") == NULL ||
        strstr(cr_out, "lib_worker") == NULL ||
        strstr(cr_out, "start_thread") != NULL ||
        strstr(cr_out, " stack=-") != NULL)
      fail_msg("%s:\n%s", cmds[i], cr_out);
  }
  assert_int_equal(cr_run("info '%s'", d), 0);
  cr_assert_has(cr_out, "  threads:     2 (3 by name and session)\n");
  assert_int_equal(cr_run("export -f chrome '%s'", g_std), 0);
  cr_assert_has(cr_out, "\"name\":\"fixture+0x1000\",\"category\":\"fixture\"");
}

TL_TEST_MAIN("report", setup, NULL, test_std_whole_output, test_top,
             test_symbolized_flat,
             test_tree, test_tree_symbolized, test_filters, test_no_categories,
             test_html, test_damaged_input, test_live_recording,
             test_empty_and_missing_inputs, test_usage,
             test_progress_only_on_a_terminal, test_recorded_in_a_child,
             test_by_thread_pool, test_one_app_only_in_every_view)
