/*
 * test-report-by.c: `stackrec report --by thread|process|payload|module`
 * and --sort (//tools:stackrec) on fixture recordings with known content:
 * each table's rows and counts, a payload repeated across batches, and
 * that a --by table never hides the distinct stacks of the lists below
 * it. Split from test-report.c.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

static char g_std[4096]; /* the standard recording (fixture.c) */

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0)
    return -1;
  snprintf(g_std, sizeof g_std, "%s", fx_tmpdir("report-by-std"));
  return fx_std_write(g_std, FX_PID) != 0 ? -1 : 0;
}

/* The same payload at one site again and again is one payload with its
 * count (paytab.c finds it by its bytes); equal bytes at another site are
 * that site's own; "a" and "a\0" differ. */
static void test_repeated_payloads(void **state) {
  static const uint32_t sites[] = {1, 2}, threads[] = {1}, stacks[] = {1, 2};
  static const struct {
    uint32_t site;
    const char *p;
    uint32_t len;
  } k[] = {{1, "a", 1}, {1, "bb", 2}, {1, "a", 1}, {2, "a", 1},
           {1, "a", 1}, {1, "bb", 2}, {1, "a\0", 2}};
  fx_ev evs[sizeof k / sizeof k[0]];
  const char *d = fx_tmpdir("report-paydup");
  stkr_fmt_buf buf = {0};
  size_t i;
  (void)state;

  for (i = 0; i < sizeof k / sizeof k[0]; i++)
    evs[i] = (fx_ev){.delta = 1000, .site = k[i].site, .thread = 1,
                     .stack = k[i].site, .payload = k[i].p,
                     .plen = k[i].len};
  fx_batch b = {.seq = 1, .header = true, .pid = FX_PID, .segment_seq = 1,
                .sites = sites, .n_sites = 2, .threads = threads,
                .n_threads = 1, .stacks = stacks, .n_stacks = 2,
                .base_ts = FX_START_MONO, .evs = evs,
                .n_evs = sizeof k / sizeof k[0], .last = true};
  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);

  assert_int_equal(cr_run("report '%s'", d), 0);
  if (strstr(cr_out, "    payloads: 3 distinct, in 6 of its events\n"
                     "             3   50.00%  \"a\"\n"
                     "             2   33.33%  \"bb\"\n"
                     "             1   16.67%  \"a\\x00\"\n") == NULL ||
      strstr(cr_out, "    payloads: 1 distinct, in 1 of its events\n"
                     "             1  100.00%  \"a\"\n") == NULL)
    fail_msg("payload counts wrong in:\n%s", cr_out);
}

/* --by: events per thread, process, payload or module, most first, each
 * with its stacks, sites and most frequent site; --sort re-ranks. */
static void test_by_and_sort(void **state) {
  (void)state;

  cr_report_has("--by thread", g_std,
             "\nthread: 3 distinct\n"
             "      events        %  stacks  sites  key (most frequent "
             "site)\n"
             "           4   44.44%       4      3  main (tid 4242) "
             "(file.open: 2)\n"
             "           3   33.33%       3      2  worker-1 (tid 4243) "
             "(net.connect: 2)\n"
             "           2   22.22%       2      2  ? (tid 5000) (late.site: "
             "1)\n");
  cr_report_has("--by process", g_std,
             "           9  100.00%       9      4  "
             "fixture (pid 4242) (net.connect: 3)\n");
  cr_report_has("--by payload --top 2", g_std,
             "\npayload: 8 distinct\n"
             "      events        %  stacks  sites  key (most frequent "
             "site)\n"
             "           2   22.22%       2      2  (no payload) "
             "(file.open: 1)\n"
             "           1   11.11%       1      1  "
             "\"\\x00\\x01bin\\xff\\x7f\\x1b\" (privacy.clipboard.read: 1)\n"
             "           6   66.67%  ... 6 more\n");
  cr_report_has("--by module", g_std, "  fixture (net.connect: 2)\n");
  cr_report_has("--by thread --sort name", g_std,
             "  ? (tid 5000) (late.site: 1)\n"
             "           4   44.44%       4      3  main");
  /* Sites by name: file, late, net, privacy. */
  assert_int_equal(cr_run("report --sort name '%s'", g_std), 0);
  {
    const char *f = strstr(cr_out, "\nfile: "), *l = strstr(cr_out, "\nlate: ");
    const char *n = strstr(cr_out, "\nnet: "), *p = strstr(cr_out, "\nprivacy: ");
    assert_true(f && l && n && p && f < l && l < n && n < p);
  }
  assert_int_equal(cr_run("report --by nope '%s'", g_std), 2);
  assert_int_equal(cr_run("report --sort nope '%s'", g_std), 2);
  assert_int_equal(cr_run("report --by module --tree '%s'", g_std), 2);
}

/* "N distinct stacks" is one number in every view (QA: --by process
 * printed the stacks summed over processes, 17 where report said 4): two
 * processes, one stack each, seen on two threads with two payloads. Split
 * by thread, process or payload, that is still one stack; the rows count
 * their own. */
static void test_by_keeps_the_distinct_stacks(void **state) {
  static const uint32_t sites[] = {1}, threads[] = {1, 2}, stacks[] = {1};
  static const fx_ev evs[] = {{1000, 1, 1, 1, "a", 1, false},
                              {1000, 1, 2, 1, "b", 1, false}};
  static const char *const by[] = {"", "--by thread", "--by process",
                                   "--by payload", "--by module"};
  const char *d = fx_tmpdir("report-by-stacks");
  stkr_fmt_buf buf = {0};
  uint32_t pid;
  size_t i;
  (void)state;

  for (pid = 10; pid <= 11; pid++) {
    fx_batch b = {.seq = 1, .header = true, .pid = pid, .segment_seq = 1,
                  .sites = sites, .n_sites = 1, .threads = threads,
                  .n_threads = 2, .stacks = stacks, .n_stacks = 1,
                  .base_ts = FX_START_MONO, .evs = evs, .n_evs = 2,
                  .last = true};
    assert_int_equal(fx_encode(&b, &buf), 0);
    assert_int_equal(fx_write_segment(d, pid, 1, &buf), 0);
  }
  stkr_fmt_buf_free(&buf);
  for (i = 0; i < sizeof by / sizeof by[0]; i++)
    cr_report_has(by[i], d, "# 4 events from 2 processes, 1 site, 1 distinct "
                         "stack\n");
  cr_report_has("--by process", d,
             "           2   50.00%       1      1  fixture (pid 10) "
             "(privacy.clipboard.read: 2)\n");
  /* Both processes' "main" is tid 4242: two threads, not one tid. */
  cr_report_has("--by thread", d,
             "           2   50.00%       1      1  main (several threads) "
             "(privacy.clipboard.read: 2)\n");
}

/* A process that exec'd (two sessions of one pid, "sh" then "git") is one
 * row of --by process, named as the process is ("sh > git"): named as it
 * was at each event, it made two rows and "2 distinct" (QA, session 29). */
static void test_by_process_after_exec(void **state) {
  const char *d = fx_tmpdir("report-by-exec");
  (void)state;

  assert_int_equal(
      fx_write_launch(d, (fx_one){.pid = 12, .process_name = "sh"}, 0), 0);
  assert_int_equal(fx_write_launch(d, (fx_one){.pid = 12,
                                               .shift = 1000000000ull,
                                               .process_name = "git"}, 1),
                   0);
  cr_report_has("--by process", d, "\nprocess: 1 distinct\n");
  cr_report_has("--by process", d,
                "           2  100.00%       1      1  sh > git (pid 12) "
                "(privacy.clipboard.read: 2)\n");
  /* The chrome trace names its track so too (QA, session 31: "sh", the
   * name when its first event was written). */
  assert_int_equal(cr_run("export --format chrome '%s'", d), 0);
  cr_assert_has(cr_out, "\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,"
                        "\"pid\":12,\"tid\":12,\"args\":{\"name\":\"sh > git\"}}");
}

TL_TEST_MAIN("report-by", setup, NULL, test_by_and_sort,
             test_by_keeps_the_distinct_stacks, test_repeated_payloads,
             test_by_process_after_exec)
