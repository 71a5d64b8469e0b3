/*
 * test-boots.c: processes on several monotonic clocks on one time line
 * (tools/stackrec/boots.h, common/stkr_boot.h; QA, session 33, F10): two
 * devices' recordings merged, or a program in a time namespace. Before:
 * compliance said last_s 999 999 s of a 1-second recording, the chrome
 * trace spanned 11.6 days, and a `stackrec mark` set after a namespaced
 * program ended was read as set before its events. And what must not
 * move (review, session 35): one boot across a sleep, which stops
 * CLOCK_MONOTONIC, and recordings whose boot is not known.
 *
 * On fixture recordings (tests/fixture.h): pid 10 starts at mono 1 s,
 * wall W, its one event 1 us later; pid 20 starts 0.5 s later on both
 * clocks, its event 1 us after its start, on a clock as each case says
 * (Header.boot_id: 16 bytes of a tag; mono_offset_ns).
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
#define AHEAD 1000000000000000ull /* 10^6 s */
#define BOOT_A 0xa1
#define BOOT_B 0xb2

/* Two processes as above, pid 20's with o (its shift set here). */
static const char *two(const char *tag, uint8_t boot10, uint64_t ahead10,
                       fx_one o) {
  static char d[4096];

  snprintf(d, sizeof d, "%s", fx_tmpdir(tag));
  o.pid = 20;
  o.shift = HALF_S;
  if (fx_write_one(d, &(fx_one){.pid = 10, .boot = boot10,
                                .mono_ahead = ahead10}) != 0 ||
      fx_write_one(d, &o) != 0)
    fail_msg("cannot write %s", d);
  return d;
}

static int setup(void **state) {
  (void)state;
  return cr_setup();
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

/* Chrome's trace of dir holds these two event times and this count. */
static void chrome_has(const char *dir, const char *ts10, const char *ts20,
                       const char *clocks) {
  assert_int_equal(cr_run("export --format chrome '%s'", dir), 0);
  cr_assert_has(cr_out, ts10);
  cr_assert_has(cr_out, ts20);
  cr_assert_has(cr_out, clocks);
}

/* Two devices: pid 20's monotonic clock 10^6 s ahead, another boot id.
 * Placed 0.5 s after pid 10's start, as the wall clock says. */
static void test_two_boots(void **state) {
  const char *d = two("boots-two", BOOT_A, 0,
                      (fx_one){.boot = BOOT_B, .mono_ahead = AHEAD});
  double last = compliance_last_s(d);
  (void)state;

  assert_true(last > 0.49 && last < 0.51); /* 1 000 000.5 before */
  cr_assert_has(cr_out, "\"clocks\":2");
  assert_int_equal(cr_run("compliance '%s'", d), 0);
  cr_assert_has(cr_out, "# CLOCKS: processes on 2 monotonic clocks");
  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1500001.000",
             "\"clocks\":2");
}

/* One boot, two processes: nothing moves, nothing said. */
static void test_one_boot(void **state) {
  const char *d = two("boots-one", BOOT_A, 0, (fx_one){.boot = BOOT_A});
  double last = compliance_last_s(d);
  (void)state;

  assert_true(last > 0.49 && last < 0.51);
  cr_assert_has(cr_out, "\"clocks\":1");
  assert_int_equal(cr_run("compliance '%s'", d), 0);
  assert_null(strstr(cr_out, "CLOCKS"));
  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1500001.000",
             "\"clocks\":1");
}

/* One boot and a sleep of 60 s between the two starts (CLOCK_MONOTONIC
 * stopped, the wall clock not: wall - mono moved by 60 s). Its monotonic
 * times stay as recorded: pid 10's event at 61 s, pid 20's at 1.5 s (the
 * wall clock's guess split the boot in two and put pid 20 after pid 10's
 * later events: review, session 35). */
static void test_sleep_is_one_boot(void **state) {
  const char *d = two("boots-sleep", BOOT_A, 60000000000ull,
                      (fx_one){.boot = BOOT_A});
  (void)state;

  chrome_has(d, "\"ts\":61000001.000", "\"ts\":1500001.000",
             "\"clocks\":1");
}

/* Older writers (no boot id): never moved, whatever the wall clock says. */
static void test_boot_not_known(void **state) {
  const char *d = two("boots-old", 0, 0, (fx_one){.mono_ahead = AHEAD});
  (void)state;

  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1000001500001.000",
             "\"clocks\":0");
}

/* A time namespace of the same boot (offset 10^6 s): moved back by the
 * offset, exactly. `info` says which clock each process is on. */
static void test_time_namespace(void **state) {
  const char *d =
      two("boots-ns", BOOT_A, 0,
          (fx_one){.boot = BOOT_A, .mono_ahead = AHEAD, .mono_offset = AHEAD});
  (void)state;

  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1500001.000",
             "\"clocks\":2");
  assert_int_equal(cr_run("info '%s'", d), 0);
  cr_assert_has(cr_out, "  clock:       boot a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\n",
                "  clock:       boot a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1, time "
                "namespace offset +1000000.000000000 s\n");
  assert_int_equal(cr_run("info --json '%s'", d), 0);
  cr_assert_has(cr_out, "\"boot_id\":\"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\","
                        "\"mono_offset_ns\":1000000000000000");
  d = two("boots-ns-old", 0, 0, (fx_one){0});
  assert_int_equal(cr_run("info '%s'", d), 0);
  assert_null(strstr(cr_out, "clock:"));
}

/* Append a mark line, read on the setter's clocks (wall: as it says). */
static void put_mark_at(const char *dir, uint64_t mono, uint64_t wall,
                        const char *name, const char *clock) {
  assert_int_equal(
      tl_system("printf 'm1 %" PRIu64 " %" PRIu64 " 1 %s -%s%s\\n' "
                ">> '%s/stackrec.marks'",
                mono, wall, name, clock ? " " : "", clock ? clock : "", dir),
      0);
}

/* The same, at wall-clock time FX_START_WALL. */
static void put_mark(const char *dir, uint64_t mono, const char *name,
                     const char *clock) {
  put_mark_at(dir, mono, FX_START_WALL, name, clock);
}

static uint64_t before_consent(const char *dir) {
  const char *p;

  assert_int_equal(cr_run("compliance --format json '%s'", dir), 0);
  p = strstr(cr_out, "\"before_consent\":");
  assert_non_null(p);
  return strtoull(p + 17, NULL, 10);
}

/* pid 20 alone in a time namespace of boot A (offset 10^6 s). */
static const char *ns_process(const char *tag) {
  static char d[4096];

  snprintf(d, sizeof d, "%s", fx_tmpdir(tag));
  assert_int_equal(fx_write_one(d, &(fx_one){.pid = 20, .shift = HALF_S,
                                             .mono_ahead = AHEAD,
                                             .boot = BOOT_A,
                                             .mono_offset = AHEAD}),
                   0);
  return d;
}

#define CLOCK_A "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
#define CLOCK_B "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
/* The host's monotonic time 1 s after the namespaced event. */
#define HOST_AFTER (FX_START_MONO + HALF_S + 1000 + 1000000000ull)

static void test_mark_of_another_namespace(void **state) {
  const char *d = ns_process("boots-nsmark");
  (void)state;

  /* consent.granted set from the host (boot A, offset 0) 1 s after the
   * event: moved by the offset, the event before consent (after before:
   * the host's 2.5 s lay before the event's 10^6 s). */
  put_mark(d, HOST_AFTER, "consent.granted", CLOCK_A ":0");
  assert_int_equal(before_consent(d), 1);
  assert_int_equal(cr_run("dump --json '%s'", d), 0);
  cr_assert_has(cr_out, "\"ts_ns\":1000002500001000");
}

static void test_marks_left_as_set(void **state) {
  const char *d;
  (void)state;

  /* Without its clock (an older `stackrec mark`): the setter's
   * monotonic time, as before. */
  d = ns_process("boots-nsmark-old");
  put_mark(d, HOST_AFTER, "consent.granted", NULL);
  assert_int_equal(before_consent(d), 0);
  /* Of another boot: placed by the wall clocks, 0.5 s before the
   * process's start (a consent given before a reboot counts for the
   * launch after it; review, session 36). */
  d = ns_process("boots-nsmark-other");
  put_mark(d, HOST_AFTER, "consent.granted", CLOCK_B ":0");
  assert_int_equal(before_consent(d), 0);
  /* ... unless a wall clock cannot be real (1970): no relation known,
   * not applied (the review: applied as set, "after consent"). */
  d = ns_process("boots-nsmark-1970");
  put_mark_at(d, HOST_AFTER, 5100000000ull, "consent.granted", CLOCK_B ":0");
  assert_int_equal(before_consent(d), 1);
  /* ... which is said (QA, session 35: a consent set after a reboot lay
   * before every event, unsaid): inconsistent, verify exit 1. */
  cr_assert_has(cr_err, "mark consent.granted was set in another boot than "
                        "process 20's");
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out, "inconsistent: ");
  /* Of its own clock: exact, 1 ns before the event. */
  d = ns_process("boots-nsmark-same");
  put_mark(d, FX_START_MONO + HALF_S + AHEAD + 999, "consent.granted",
           CLOCK_A ":1000000000000000");
  assert_int_equal(before_consent(d), 0);
  /* A malformed clock: the line is skipped, named, as damage. */
  put_mark(d, 5, "app.background", "xyz");
  assert_int_equal(cr_run("dump '%s'", d), 1);
  cr_assert_has(cr_err, "clock is not");
}

/* pid 20 launched twice into one directory (a container's pid 1
 * restarted): at mono 1 s on boot A's host clock, then, 0.5 s later, a
 * second process (Header.process_start) on the clock `second` says. */
static const char *relaunched_first(const char *tag, fx_one first,
                                    fx_one second) {
  static char d[4096];

  snprintf(d, sizeof d, "%s", fx_tmpdir(tag));
  first.pid = second.pid = 20;
  first.boot = BOOT_A;
  first.process_start = 100;
  second.shift = HALF_S;
  second.process_start = 200;
  if (fx_write_launch(d, first, 0) != 0 || fx_write_launch(d, second, 1) != 0)
    fail_msg("cannot write %s", d);
  return d;
}

static const char *relaunched(const char *tag, fx_one second) {
  return relaunched_first(tag, (fx_one){0}, second);
}

/* The second launch under a time namespace of the same boot (offset
 * 10^6 s): placed by its own clock, and a consent set from the host 500
 * ns after its start is before its event (QA, session 35: by the first
 * launch's clock, 10^6 s apart, and the consent after it). */
static void test_pid_used_again_in_a_namespace(void **state) {
  const char *d = relaunched(
      "boots-again-ns",
      (fx_one){.boot = BOOT_A, .mono_ahead = AHEAD, .mono_offset = AHEAD});
  double last = compliance_last_s(d);
  (void)state;

  assert_true(last > 0.49 && last < 0.51);
  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1500001.000",
             "\"clocks\":2");
  /* The pid's summary and time windows on the first launch's clock. */
  assert_int_equal(cr_run("info '%s'", d), 0);
  cr_assert_has(cr_out, "  duration:    0.500000000 s\n");
  cr_assert_has(cr_out, "  last clock:  boot " CLOCK_A
                        ", time namespace offset +1000000.000000000 s\n");
  assert_int_equal(cr_run("report --from 0.6 '%s'", d), 0);
  cr_assert_has(cr_out, "# filters: time [0.6 s, end): 0 of 2 events\n");
  /* Two processes held the pid, each with its thread of tid 4242: two
   * OS threads (the review: one). */
  assert_int_equal(cr_run("info '%s'", d), 0);
  cr_assert_has(cr_out, "  threads:     2\n");
  put_mark(d, FX_START_MONO + HALF_S + 500, "consent.granted", CLOCK_A ":0");
  assert_int_equal(before_consent(d), 1); /* the first launch's event */
}

/* The first launch recorded nothing: a host's mark, handed out at the
 * second launch's first event on its clock (namespaced), still counts from
 * the pid's start in report's marks, as its events do (the review: at
 * 1000000.5 s, its events at 0.5 s). One mark line read by two processes
 * of other clocks is one mark (the review: counted once per clock). */
static void test_mark_of_a_silent_first_launch(void **state) {
  const char *d = relaunched_first(
      "boots-again-silent", (fx_one){.silent = true},
      (fx_one){.boot = BOOT_A, .mono_ahead = AHEAD, .mono_offset = AHEAD});
  (void)state;

  put_mark(d, FX_START_MONO + HALF_S + 500, "consent.granted", CLOCK_A ":0");
  assert_int_equal(cr_run("report '%s'", d), 0);
  cr_assert_has(cr_out, "# marks (not counted as events): 1: 0.5000005 s "
                        "consent.granted");
  d = two("boots-two-read", BOOT_A, 0,
          (fx_one){.boot = BOOT_A, .mono_ahead = AHEAD, .mono_offset = AHEAD});
  put_mark(d, HOST_AFTER, "consent.granted", CLOCK_A ":0");
  assert_int_equal(cr_run("report '%s'", d), 0);
  cr_assert_has(cr_out, "# marks (not counted as events): 1: ");
}

/* The second launch after a reboot (boot B, its clock 10^6 s ahead):
 * placed by the wall clock, and a consent set in boot B 500 ns after its
 * start is exact for it and, by the wall clocks, after the first launch's
 * event; no inconsistency (session 35 said one), and the chrome trace
 * puts the mark there too (the review: 11.6 days away). */
static void test_pid_used_again_after_a_reboot(void **state) {
  const char *d = relaunched("boots-again-boot",
                             (fx_one){.boot = BOOT_B, .mono_ahead = AHEAD});
  (void)state;

  chrome_has(d, "\"ts\":1000001.000", "\"ts\":1500001.000",
             "\"clocks\":2");
  put_mark_at(d, FX_START_MONO + HALF_S + AHEAD + 500,
              FX_START_WALL + HALF_S + 500, "consent.granted", CLOCK_B ":0");
  assert_int_equal(before_consent(d), 1); /* the first launch's event */
  assert_null(strstr(cr_err, "another boot"));
  assert_int_equal(cr_run("verify '%s'", d), 0);
  chrome_has(d, "\"ts\":1500000.500", "\"ts\":1500001.000",
             "\"clocks\":2");
}

/* A pid launched on 5 boots (a container's pid 1 across reboots), and a
 * mark of a sixth: still said (the review: past 4 boots the first version
 * kept none and said nothing). */
static void test_mark_of_none_of_many_boots(void **state) {
  const char *d = fx_tmpdir("boots-many");
  (void)state;

  for (uint32_t k = 0; k < 5; k++)
    assert_int_equal(fx_write_launch(d, (fx_one){.pid = 20,
                                                 .boot = (uint8_t)(0x11 + k),
                                                 .shift = k * HALF_S,
                                                 .process_start = 100 + k},
                                     k),
                     0);
  put_mark(d, HOST_AFTER, "consent.granted", CLOCK_B ":0");
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out, "inconsistent: ");
  cr_assert_has(cr_out, "another boot than process 20's");
}

TL_TEST_MAIN("boots", setup, NULL, test_two_boots, test_one_boot,
             test_sleep_is_one_boot, test_boot_not_known, test_time_namespace,
             test_mark_of_another_namespace, test_marks_left_as_set,
             test_pid_used_again_in_a_namespace,
             test_mark_of_a_silent_first_launch,
             test_pid_used_again_after_a_reboot,
             test_mark_of_none_of_many_boots)
