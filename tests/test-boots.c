/*
 * test-boots.c: processes of several boots on one time line
 * (tools/stackrec/boots.h, common/stkr_boot.h; QA, session 33, F10): two
 * devices' recordings merged, or a program in a time namespace, whose
 * CLOCK_MONOTONIC readings are unrelated. Before: compliance said
 * last_s 999 999 s of a 1-second recording, the chrome trace spanned 11.6
 * days, and a `stackrec mark` set after a namespaced program ended was
 * read as set before its events.
 *
 * On fixture recordings (tests/fixture.h): pid 10 starts at mono 1 s,
 * wall W, its one event 1 us later; pid 20 starts 0.5 s later on the wall
 * clock, its event 1 us after its start, either in the same boot (mono
 * 1.5 s) or in a boot whose monotonic clock is 10^6 s ahead.
 */
#define _GNU_SOURCE
#include <inttypes.h>
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

#define HALF_S 500000000ull
#define AHEAD 1000000000000000ull /* 10^6 s: another boot */

/* g_one: pids 10 and 20 of one boot; g_two: of two boots; g_ns: pid 20
 * alone, of the boot ahead (a program in a time namespace). */
static char g_one[4096], g_two[4096], g_ns[4096];

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0) return -1;
  snprintf(g_one, sizeof g_one, "%s", fx_tmpdir("boots-one"));
  snprintf(g_two, sizeof g_two, "%s", fx_tmpdir("boots-two"));
  snprintf(g_ns, sizeof g_ns, "%s", fx_tmpdir("boots-ns"));
  if (fx_write_one(g_one, &(fx_one){.pid = 10}) != 0 ||
      fx_write_one(g_one, &(fx_one){.pid = 20, .shift = HALF_S}) != 0 ||
      fx_write_one(g_two, &(fx_one){.pid = 10}) != 0 ||
      fx_write_one(g_two, &(fx_one){.pid = 20, .shift = HALF_S,
                                    .mono_ahead = AHEAD}) != 0 ||
      fx_write_one(g_ns, &(fx_one){.pid = 20, .shift = HALF_S,
                                   .mono_ahead = AHEAD}) != 0)
    return -1;
  return 0;
}

/* The largest "last_s" in compliance's JSON of dir. */
static double compliance_last_s(const char *dir) {
  double last = -1;
  const char *p;

  assert_int_equal(cr_run("compliance --format json '%s'", dir), 0);
  for (p = cr_out; (p = strstr(p, "\"last_s\":")) != NULL; p++) {
    double v = strtod(p + 9, NULL);
    if (v > last) last = v;
  }
  return last;
}

static void test_compliance_one_time_line(void **state) {
  double last;
  (void)state;

  /* Two boots: pid 20's event 0.5 s after pid 10's start, as the wall
   * clock says (before: 1 000 000.5 s). */
  last = compliance_last_s(g_two);
  assert_true(last > 0.49 && last < 0.51);
  assert_non_null(strstr(cr_out, "\"boots\":2"));
  assert_int_equal(cr_run("compliance '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, "# BOOTS: processes of 2 boots"));
  /* One boot: the same figures, on its own clock, and nothing said. */
  last = compliance_last_s(g_one);
  assert_true(last > 0.49 && last < 0.51);
  assert_non_null(strstr(cr_out, "\"boots\":1"));
  assert_int_equal(cr_run("compliance '%s'", g_one), 0);
  assert_null(strstr(cr_out, "BOOTS"));
}

static void test_chrome_one_time_line(void **state) {
  (void)state;

  /* pid 10's event at mono 1 s + 1 us; pid 20's 0.5 s later, on pid 10's
   * boot's clock (before: 1 000 001 500 001 us). */
  assert_int_equal(cr_run("export --format chrome '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, "\"ts\":1000001.000"));
  assert_non_null(strstr(cr_out, "\"ts\":1500001.000"));
  assert_null(strstr(cr_out, "\"ts\":1000001500001"));
  assert_non_null(strstr(cr_out, "\"boots\":2"));
  /* One boot: times exactly as recorded. */
  assert_int_equal(cr_run("export --format chrome '%s'", g_one), 0);
  assert_non_null(strstr(cr_out, "\"ts\":1000001.000"));
  assert_non_null(strstr(cr_out, "\"ts\":1500001.000"));
  assert_non_null(strstr(cr_out, "\"boots\":1"));
}

/* Append a mark line, read on the clocks (mono, wall) of its setter. */
static void put_mark(const char *dir, uint64_t mono, uint64_t wall,
                     const char *name) {
  assert_int_equal(tl_system("printf 'm1 %" PRIu64 " %" PRIu64 " 1 %s -\\n' "
                             ">> '%s/stackrec.marks'",
                             mono, wall, name, dir),
                   0);
}

static uint64_t before_consent(const char *dir) {
  const char *p;

  assert_int_equal(cr_run("compliance --format json '%s'", dir), 0);
  p = strstr(cr_out, "\"before_consent\":");
  assert_non_null(p);
  return strtoull(p + 17, NULL, 10);
}

static void test_mark_of_another_boot(void **state) {
  const uint64_t event_wall = FX_START_WALL + HALF_S + 1000;
  char dir[4200];
  (void)state;

  /* consent.granted set from the host 1 s after the namespaced program's
   * event (by the wall clock): its event is before consent. Before, the
   * mark's host monotonic time (2.5 s) lay far before the event's
   * (10^6 s) and the event counted after consent. */
  snprintf(dir, sizeof dir, "%s", g_ns);
  put_mark(dir, FX_START_MONO + HALF_S + 1000000000ull, event_wall + 1000000000ull,
           "consent.granted");
  assert_int_equal(before_consent(dir), 1);
  assert_int_equal(cr_run("dump --json '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "\"ts_ns\":1000001500001000"));

  /* A mark of the program's own boot keeps its monotonic time, exact,
   * though the wall clock moved 1.5 s meanwhile (within the slack): set
   * 1 ns before the event, so the event is after consent. */
  snprintf(dir, sizeof dir, "%s", fx_tmpdir("boots-same"));
  assert_int_equal(fx_write_one(dir, &(fx_one){.pid = 20, .shift = HALF_S,
                                               .mono_ahead = AHEAD}),
                   0);
  put_mark(dir, FX_START_MONO + HALF_S + AHEAD + 999,
           event_wall + 1500000000ull, "consent.granted");
  assert_int_equal(before_consent(dir), 0);
}

int main(void) {
  return TL_RUN_GROUP("boots", setup, NULL,
                      TL_CASES(NULL, NULL, test_compliance_one_time_line,
                               test_chrome_one_time_line,
                               test_mark_of_another_boot));
}
