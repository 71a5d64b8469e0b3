/*
 * test-accounting.c: `stackrec verify` tells complete (0) from intact but
 * incomplete (4) from damaged (1), with exact figures: write errors (a full
 * disk), the first, a middle or the last segment deleted, segments deleted
 * by the disk cap, a recreated directory, a process killed before its last
 * flush (SIGKILL), a segment without any batch, recovered batches, counters
 * that overflow or do not add up. Recordings are written with the test
 * encoder (tests/fixture.c) setting the format fields directly, as the
 * recorder does (Header.session_id, session_first_seq, dir_recreated,
 * Counters by reason, Batch.recovered).
 */
#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

#define PID 4301u
#define SID 0x5e551011ull
#define EV_PER_BATCH 2

static int setup(void **state) {
  (void)state;
  return cr_setup();
}

/* One recording session: segments 1..nseg of one batch each (2 events),
 * batch seq k in segment k (+ seq_gap from segment gap_at on: batches
 * that failed to write keep their numbers). */
typedef struct sess {
  uint32_t nseg;
  unsigned skip;      /* bit k: segment k not written (deleted) */
  bool last;          /* the last segment's batch is last=true */
  /* Every segment's Counters as written, but for attempted and written
   * (set below) and base (write_sess's): the drop totals by reason and
   * segments_deleted. */
  Stackrec__Counters cnt;
  uint64_t extra;     /* attempted beyond events + drops (unflushed) */
  uint32_t recreated; /* segment whose header says dir_recreated */
  uint32_t gap_at, seq_gap;
  uint32_t recovered; /* segment whose batch is a recovered one */
  uint64_t attempted; /* non-zero: Counters.attempted, verbatim */
  unsigned tomb;      /* bit k: segment k is the disk cap's tombstone, */
  uint32_t tomb_by;   /* ... left by this process */
  bool tomb_by_seq;   /* ... or tombstone k by process tomb_by + k */
  uint32_t stray;     /* a tombstone at this seq, past the session */
  /* Non-zero: segment 1's tombstone (by tomb_by) says the run 1..run_last
   * (proto/stkr_format.h; run_claims instead, if not 0: a hostile one),
   * segments 2..run_last not written ... */
  uint32_t run_last, run_claims;
  bool run_stale;     /* ... but run_last's own tombstone (a writer died
                         between the run's steps) */
  uint32_t run_inner; /* ... and this seq's own, inside the run (a cap
                         without the lock put it back: flush/segment.c) */
  size_t cut;         /* bytes cut off the last segment's end */
} sess;

static void write_sess(const char *d, const sess *s) {
  static const Stackrec__Counters init = STACKREC__COUNTERS__INIT;
  static const uint32_t one[] = {1};
  static const fx_ev evs[EV_PER_BATCH] = {{0, 1, 1, 1, NULL, 0, false},
                                          {10, 1, 1, 1, NULL, 0, false}};
  uint64_t drops = s->cnt.dropped_ring_full + s->cnt.dropped_reentrant +
                   s->cnt.dropped_other + s->cnt.dropped_write_error +
                   s->cnt.dropped_exit;
  uint32_t k;

  for (k = 1; k <= (s->stray ? s->stray : s->nseg); k++) {
    Stackrec__Counters c = s->cnt;
    fx_batch b = {0};
    stkr_fmt_buf buf = {0};

    if (s->skip & (1u << k))
      continue;
    if (s->run_last != 0 && k <= s->run_last) {
      uint8_t t[STKR_FMT_TOMBSTONE_RUN_SIZE];
      size_t len = sizeof t;
      if (k == 1)
        stkr_fmt_tombstone_run(t, s->tomb_by,
                               s->run_claims ? s->run_claims : s->run_last);
      else if ((k == s->run_last && s->run_stale) || k == s->run_inner)
        stkr_fmt_tombstone(t, s->tomb_by), len = STKR_FMT_TOMBSTONE_SIZE;
      else
        continue;
      assert_int_equal(fx_write_segment_bytes(d, PID, k, t, len), 0);
      continue;
    }
    if (k > s->nseg && k != s->stray)
      continue;
    if (s->tomb & (1u << k) || k == s->stray) {
      uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
      stkr_fmt_tombstone(t, s->tomb_by + (s->tomb_by_seq ? k : 0));
      assert_int_equal(fx_write_segment_bytes(d, PID, k, t, sizeof t), 0);
      continue;
    }
    c.base = init.base;
    c.attempted = s->attempted ? s->attempted
                               : EV_PER_BATCH * s->nseg + drops + s->extra;
    c.written = EV_PER_BATCH * (k - 1);
    b.seq = k + (s->gap_at && k >= s->gap_at ? s->seq_gap : 0);
    b.header = true;
    b.pid = PID;
    b.segment_seq = k;
    b.session_id = SID;
    b.session_first_seq = 1;
    b.dir_recreated = k == s->recreated;
    b.recovered = k == s->recovered;
    b.sites = b.threads = b.stacks = one;
    b.n_sites = b.n_threads = b.n_stacks = 1;
    b.base_ts = 5000 + 1000 * k;
    b.evs = evs;
    b.n_evs = EV_PER_BATCH;
    b.cnt = &c;
    b.last = s->last && k == s->nseg;
    assert_int_equal(fx_encode(&b, &buf), 0);
    if (k == s->nseg && s->cut != 0) {
      assert_true(buf.len > s->cut);
      assert_int_equal(
          fx_write_segment_bytes(d, PID, k, buf.data, buf.len - s->cut), 0);
    } else {
      assert_int_equal(fx_write_segment(d, PID, k, &buf), 0);
    }
    stkr_fmt_buf_free(&buf);
  }
}

/* verify's exit status must be `want` and its output hold every line of
 * lines (NULL-ended). */
static void expect(const char *d, int want, const char *const *lines) {
  int rc = cr_run("verify '%s'", d);

  if (rc != want)
    fail_msg("verify exit %d, want %d:\n%s%s", rc, want, cr_out, cr_err);
  for (; *lines != NULL; lines++)
    if (strstr(cr_out, *lines) == NULL)
      fail_msg("no \"%s\" in:\n%s", *lines, cr_out);
}

/* A session written by write_sess, and what verify must say of it. */
typedef struct acct_case {
  const char *name;      /* the case (cmocka's name; its directory) */
  sess s;
  int want;              /* verify's exit status */
  const char *absent;    /* NULL, or a text its output must not hold */
  const char *lines[7];  /* each in its output */
} acct_case;

/* Three segments and a clean end, but segment k never written. */
#define WITHOUT_SEGMENT(k) .nseg = 3, .last = true, .skip = 1u << (k)

static const acct_case g_cases[] = {
    {"test_complete", {.nseg = 3, .last = true}, 0, NULL, {
      ": 3 segments, 3 batches, 6 events: intact\n",
      "  accounting: attempted 6, written 6, dropped 0 (ring full 0, "
      "reentrant 0, other 0, write error 0, exit 0), recovered 0: adds up\n",
      "\nintact: 1 process, 3 segments, 6 events\n"}},
    /* A full disk: batches that failed to write are counted as write
     * errors and leave gaps in the batch numbers. */
    {"test_write_errors",
     {.nseg = 3, .last = true, .cnt = {.dropped_write_error = 5},
      .gap_at = 3, .seq_gap = 2},
     4, NULL, {
      ": 3 segments, 3 batches, 6 events: intact, INCOMPLETE\n",
      "  accounting: attempted 11, written 6, dropped 5 (ring full 0, "
      "reentrant 0, other 0, write error 5, exit 0), recovered 0: adds up\n",
      "incomplete: process 4301: 5 events dropped by the recorder (ring "
      "full 0, reentrant 0, other 0, write error 5, exit 0)\n",
      "incomplete: process 4301: 2 batches missing (gaps in batch numbers",
      "\nINCOMPLETE: 2 findings in 1 of 1 process, 3 segments, 6 events "
      "read\n"}},
    {"test_first_segment_deleted", {WITHOUT_SEGMENT(1)}, 4, NULL, {
      "stackrec-4301-000002.zst: process 4301 session 000000005e551011: "
      "first segment 1 missing (the session starts at segment 1)\n",
      "incomplete: process 4301: 1 batch missing"}},
    {"test_middle_segment_deleted", {WITHOUT_SEGMENT(2)}, 4, NULL, {
      "incomplete: ", "stackrec-4301-000003.zst: offset 0: process 4301 "
      "session 000000005e551011: 1 segment (2..2) missing before this one\n",
      "stackrec-4301-000003.zst: process 4301 session 000000005e551011: "
      "2 events attempted but neither read nor counted as dropped "
      "(attempted 6, written 4, dropped 0, recovered 0)\n",
      "  accounting: attempted 6, written 4, dropped 0 (ring full 0, "
      "reentrant 0, other 0, write error 0, exit 0), recovered 0: 2 not "
      "accounted for\n",
      "incomplete: process 4301: 1 batch missing"}},
    /* The last segment deleted: the session has no clean end. */
    {"test_last_segment_deleted", {WITHOUT_SEGMENT(3)}, 4, NULL, {
      "stackrec-4301-000002.zst: process 4301 session 000000005e551011: "
      "no clean end (no last batch): the process was killed, crashed or "
      "called _exit, or its last segment is missing; 4 events read, 6 "
      "attempted by its last counters\n",
      "2 events attempted but neither read nor counted as dropped"}},
    {"test_disk_cap", {WITHOUT_SEGMENT(1), .cnt = {.segments_deleted = 1}},
     4, "first segment", {
      "stackrec-4301-000002.zst: process 4301 session 000000005e551011: "
      "segment 1 deleted by the disk cap\n"}},
    /* The cap of another process of the recording deleted segment 1 and
     * left its tombstone: said so, not "missing" (QA: the victim read
     * "first segments missing", the deleter "deleted while recording"). */
    {"test_disk_cap_of_another",
     {.nseg = 3, .last = true, .tomb = 1u << 1, .tomb_by = 4400}, 4,
     "missing (the session", {
      "stackrec-4301-000002.zst: process 4301 session 000000005e551011: "
      "segment 1 deleted by the disk cap, when process 4400 wrote\n",
      /* 2: a tombstone is not a segment of the process (it said 3). */
      ": 2 segments, 2 batches, 4 events: intact, INCOMPLETE\n"}},
    /* Several other processes' caps: each is named (it said "when other
     * processes wrote"), up to three. */
    {"test_disk_cap_of_two_others",
     {.nseg = 4, .last = true, .tomb = 3u << 1, .tomb_by = 4400,
      .tomb_by_seq = true}, 4, "other processes", {
      "segments 1..2 deleted by the disk cap, when processes 4401 and 4402 "
      "wrote\n"}},
    {"test_disk_cap_of_many_others",
     {.nseg = 6, .last = true, .tomb = 15u << 1, .tomb_by = 4400,
      .tomb_by_seq = true}, 4, "other processes", {
      "segments 1..4 deleted by the disk cap, when processes 4401, 4402, "
      "4403 and others wrote\n"}},
    /* Its own cap: the tombstone and its counter tell the same deletion
     * once. */
    {"test_disk_cap_tombstone",
     {.nseg = 3, .last = true, .tomb = 1u << 1, .tomb_by = 4301,
      .cnt = {.segments_deleted = 1}}, 4, "first segment", {
      "segment 1 deleted by the disk cap\n",
      "\nINCOMPLETE: "}},
    /* What the cap deleted is known from the first batch after it (its
     * Counters.written, its number): told once, as the cap's, not also
     * as events "neither read nor counted" and batches "missing" (QA,
     * session 23: one deletion told three ways). */
    {"test_disk_cap_accounted",
     {.nseg = 4, .last = true, .tomb = 3u << 1, .tomb_by = 4301,
      .cnt = {.segments_deleted = 2}}, 4, "missing", {
      "segments 1..2 deleted by the disk cap\n",
      "  accounting: attempted 8, written 4, dropped 0 (ring full 0, "
      "reentrant 0, other 0, write error 0, exit 0), recovered 0, in "
      "segments the disk cap deleted 4: adds up\n",
      "\nINCOMPLETE: 1 finding in 1 of 1 process"}},
    /* The same with failed writes before the first batch read: the events
     * are still the cap's (write errors are counted apart), but the gap in
     * batch numbers is not all the cap's: it stays "missing" (review,
     * session 23). */
    {"test_disk_cap_accounted_write_errors",
     {.nseg = 4, .last = true, .tomb = 3u << 1, .tomb_by = 4301,
      .cnt = {.segments_deleted = 2, .dropped_write_error = 5},
      .gap_at = 3, .seq_gap = 2}, 4, NULL, {
      "segments 1..2 deleted by the disk cap\n",
      "recovered 0, in segments the disk cap deleted 4: adds up\n",
      "incomplete: process 4301: 4 batches missing"}},
    /* A run of deletions said by one tombstone, at its first seq (QA,
     * session 33: one file each, a directory that grew without end): the
     * same as one each. */
    {"test_disk_cap_run",
     {.nseg = 4, .last = true, .run_last = 2, .tomb_by = 4301,
      .cnt = {.segments_deleted = 2}}, 4, "missing", {
      "segments 1..2 deleted by the disk cap\n",
      "recovered 0, in segments the disk cap deleted 4: adds up\n",
      "\nINCOMPLETE: 1 finding in 1 of 1 process"}},
    /* ... with its last segment's own tombstone left (the writer died
     * before removing it): each segment counted once. */
    {"test_disk_cap_run_stale",
     {.nseg = 4, .last = true, .run_last = 2, .run_stale = true,
      .tomb_by = 4301, .cnt = {.segments_deleted = 2}}, 4, "missing", {
      "segments 1..2 deleted by the disk cap\n",
      "recovered 0, in segments the disk cap deleted 4: adds up\n",
      "\nINCOMPLETE: 1 finding in 1 of 1 process"}},
    /* ... with a tombstone of its own inside the run (a cap that ran
     * without the lock while another carried the run on: session 37, a
     * flaky test; the run ended at it, and 3 was "missing"). */
    {"test_disk_cap_run_inner",
     {.nseg = 5, .last = true, .run_last = 3, .run_inner = 2,
      .tomb_by = 4400}, 4, "missing", {
      "segments 1..3 deleted by the disk cap, when process 4400 wrote\n",
      "recovered 0, in segments the disk cap deleted 6: adds up\n",
      "\nINCOMPLETE: 1 finding in 1 of 1 process"}},
    /* A hostile run that claims every seq, segments 3 and 4 too: it ends
     * before the next file that may hold data. */
    {"test_disk_cap_run_hostile",
     {.nseg = 4, .last = true, .run_last = 2, .run_claims = 0xFFFFFFFFu,
      .tomb_by = 4301, .cnt = {.segments_deleted = 2}}, 4, "among", {
      "segments 1..2 deleted by the disk cap\n",
      "recovered 0, in segments the disk cap deleted 4: adds up\n"}},
    /* Tombstones and absent files taking turns in the gap: each named by
     * its own seqs (QA, session 37: "segments 1..2 deleted", "first
     * segments 3..4 missing", counts laid out as two ranges). */
    {"test_first_gap_named_by_seq",
     {.nseg = 5, .last = true, .tomb = (1u << 1) | (1u << 3),
      .tomb_by = 4400, .skip = (1u << 2) | (1u << 4)}, 4, "1..2", {
      "segments 1, 3 deleted by the disk cap, when process 4400 wrote\n",
      "first segments 2, 4 missing (the session starts at segment 1)\n"}},
    /* The cap's own deletions its counter tells beyond its tombstones are
     * the oldest: seq 1 here, then the tombstone at 2, 3 missing. */
    {"test_first_gap_counter_takes_the_oldest",
     {.nseg = 4, .last = true, .tomb = 1u << 2, .tomb_by = 4301,
      .skip = (1u << 1) | (1u << 3), .cnt = {.segments_deleted = 2}}, 4,
     "1..3", {
      "segments 1..2 deleted by the disk cap\n",
      "first segment 3 missing (the session starts at segment 1)\n"}},
    /* More ranges than a line names: the first six, then ", ...". */
    {"test_first_gap_named_in_part",
     {.nseg = 16, .last = true, .tomb = 0x2AAAu, .tomb_by = 4400,
      .skip = 0x5554u}, 4, ", 13", {
      "segments 1, 3, 5, 7, 9, 11, ... deleted by the disk cap, when "
      "process 4400 wrote\n",
      "first segments 2, 4, 6, 8, 10, 12, ... missing (the session starts "
      "at segment 1)\n"}},
    /* A tombstone no session's first segments explain (QA review: such
     * deletions went unsaid, and verify could say intact). */
    {"test_disk_cap_stray_tombstone",
     {.nseg = 2, .last = true, .stray = 5, .tomb_by = 4400}, 4, NULL, {
      "process 4301: 1 segment among 5..5 deleted by the disk cap, when "
      "process 4400 wrote\n",
      ": 2 segments, "}},
    /* The directory was deleted mid-run: the recorder recreated it and
     * went on at segment 2. */
    {"test_recreated_directory", {WITHOUT_SEGMENT(1), .recreated = 2}, 4,
     NULL, {
      "incomplete: ", "stackrec-4301-000002.zst: offset 0: process 4301 "
      "session 000000005e551011: the recording directory was deleted and "
      "recreated before this segment (2): what the process wrote before "
      "was lost with it\n",
      "first segment 1 missing (the session starts at segment 1)\n"}},
    /* The last segment's one batch, the session's last, cut off
     * mid-write (a full disk at the end, a file cut since): said so, not
     * only "killed" (QA, session 46). */
    {"test_last_batch_cut", {.nseg = 3, .last = true, .cut = 5}, 4,
     "no last batch", {
      "no clean end read: its last batch was cut off mid-write (the "
      "process died while writing it, the disk filled, or the file was cut "
      "since), or the process was killed, crashed or called _exit before "
      "it; 4 events read, 6 attempted by its last counters\n"}},
    /* Killed (SIGKILL) before its last flush: 7 events accepted, never
     * written. */
    {"test_killed", {.nseg = 2, .extra = 7}, 4, NULL, {
      "no clean end (no last batch): the process was killed, crashed or "
      "called _exit, or its last segment is missing; 4 events read, 11 "
      "attempted by its last counters\n",
      "session 000000005e551011: 7 events attempted but neither read nor "
      "counted as dropped (attempted 11, written 4, dropped 0, recovered "
      "0)\n"}},
    /* Killed and recovered, then another process's cap deleted every
     * segment the writer wrote, leaving the recovered one: its Counters
     * say what was written before it, all in the cap's segments (QA,
     * session 26: "4 neither read nor counted", "no clean end", batches
     * "missing"). */
    {"test_recovered_after_cap",
     {.nseg = 3, .recovered = 3, .tomb = 3u << 1, .tomb_by = 4400}, 4,
     "neither read", {
      "segments 1..2 deleted by the disk cap, when process 4400 wrote\n",
      "  accounting: attempted 6, written 0, dropped 0 (ring full 0, "
      "reentrant 0, other 0, write error 0, exit 0), recovered 2, in "
      "segments the disk cap deleted 4: adds up\n",
      "\nINCOMPLETE: 1 finding in 1 of 1 process"}},
    /* Killed, but recovery wrote its unflushed events out: complete, with
     * a note (exit 0). */
    {"test_recovered", {.nseg = 3, .recovered = 3}, 0, NULL, {
      "  accounting: attempted 6, written 4, dropped 0 (ring full 0, "
      "reentrant 0, other 0, write error 0, exit 0), recovered 2: adds up\n",
      "note: process 4301: 2 events in 1 batch recovered from the ring "
      "files of a writer that died or ran out of time at its exit "
      "(complete thanks to recovery)\n"}},
};

/* After the session cases: a drop counter near 2^64 (the sum would wrap
 * to a small number), and a clean session whose counters claim more than
 * was read or dropped. */
static const acct_case g_damaged[] = {
    {"test_counter_overflow",
     {.nseg = 1, .last = true, .attempted = 2,
      .cnt = {.dropped_ring_full = UINT64_MAX - 1, .dropped_reentrant = 5}},
     1, NULL, {
      "damaged: ", "drop counters overflow 64 bits when added up (ring "
      "full 18446744073709551614, reentrant 5,",
      ": COUNTERS OVERFLOW\n", "\nDAMAGED: "}},
    {"test_accounting_mismatch", {.nseg = 2, .last = true, .attempted = 100},
     1, NULL, {
      "inconsistent: ", "process 4301 session 000000005e551011: "
      "accounting does not add up: attempted 100 != written 4 + dropped "
      "0 + recovered 0\n",
      ": DOES NOT ADD UP\n"}},
};

static void test_session(void **state) {
  const acct_case *c = *state;
  const char *d = fx_tmpdir(c->name);

  write_sess(d, &c->s);
  expect(d, c->want, c->lines);
  if (c->absent != NULL)
    assert_null(strstr(cr_out, c->absent));
}

/* `symbolize -o` and `merge -o` carry a tombstone over (before, OUT lost
 * it, and verify of OUT said nothing of the cap). */
static void test_outputs_keep_tombstones(void **state) {
  static const char *const lines[] = {
      "segment 1 deleted by the disk cap, when process 4400 wrote\n",
      NULL};
  static const char *const whole[] = {
      "process 4500: 2 segments among 1..2 deleted by the disk cap, when "
      "process 4301 wrote\n", NULL};
  const acct_case *c = &g_cases[6];
  const char *d = fx_tmpdir("acct-symbolize");
  char out[4200];
  (void)state;

  assert_string_equal(c->name, "test_disk_cap_of_another");
  write_sess(d, &c->s);
  /* A process the cap took whole (two tombstones, no segment left): merge
   * left it out, and OUT said nothing of it. */
  for (uint32_t seq = 1; seq <= 2; seq++) {
    uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
    stkr_fmt_tombstone(t, 4301);
    assert_int_equal(fx_write_segment_bytes(d, 4500, seq, t, sizeof t), 0);
  }
  expect(d, 4, whole);
  for (int k = 0; k < 2; k++) {
    snprintf(out, sizeof out, "%s-out%d", d, k);
    assert_int_equal(cr_run("%s -o '%s' '%s'", k ? "merge" : "symbolize", out,
                            d), 0);
    expect(out, 4, lines);
    expect(out, 4, whole);
  }
}

/* A run's tombstone (its first seq, naming its last) goes into merge's
 * and symbolize's outputs as it is, its deleter renamed if merge did. */
static void test_outputs_keep_runs(void **state) {
  const acct_case *c = NULL;
  const char *d = fx_tmpdir("acct-runs");
  char out[4200];
  (void)state;

  for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++)
    if (strcmp(g_cases[i].name, "test_disk_cap_run") == 0) c = &g_cases[i];
  assert_non_null(c);
  write_sess(d, &c->s);
  expect(d, 4, c->lines);
  for (int k = 0; k < 2; k++) {
    snprintf(out, sizeof out, "%s-out%d", d, k);
    assert_int_equal(cr_run("%s -o '%s' '%s'", k ? "merge" : "symbolize", out,
                            d), 0);
    expect(out, 4, c->lines);
  }
}

/* A live recording: the cap carries a run on over a segment after the
 * reader listed the directory (the segment's file gone). It is the run's,
 * not an unreadable segment (review, session 35: 18 of 40 verifies of a
 * recording in progress said "damaged"). */
static void test_run_grows_while_read(void **state) {
  const sess s = {.nseg = 4, .last = true, .tomb = 1u << 1, .tomb_by = PID,
                  .cnt = {.segments_deleted = 2}};
  const char *d = fx_tmpdir("acct-live-run");
  uint8_t t[STKR_FMT_TOMBSTONE_RUN_SIZE];
  stkr_reader_opts o = {.warn = NULL};
  const stkr_process_info *p;
  stkr_event_view ev;
  stkr_reader *r = NULL;
  char path[4200];
  int rc;
  (void)state;

  write_sess(d, &s);
  assert_int_equal(stkr_reader_open(d, &o, &r), 0); /* listed: 1..4 */
  stkr_fmt_tombstone_run(t, PID, 2);
  assert_int_equal(fx_write_segment_bytes(d, PID, 1, t, sizeof t), 0);
  snprintf(path, sizeof path, "%s/stackrec-%u-000002.zst", d, PID);
  assert_int_equal(unlink(path), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {}
  assert_int_equal(rc, 0);
  p = stkr_reader_process(r, 0);
  assert_int_equal(p->unreadable_segments, 0);
  assert_int_equal(p->damaged_batches, 0);
  assert_int_equal(p->segments_cap_deleted, 2);
  assert_int_equal(p->segments_missing, 0);
  assert_int_equal(p->segments, 2);
  stkr_reader_free(r);
}

/* QA (session 25): one byte flipped in a tombstone's "STKRCAP1" made it a
 * foreign skippable frame: verify said "segment 1 holds no intact batch:
 * its writer ended before its first flush completed", exit 4. Damage now,
 * named, exit 1; the intact tombstone beside it still counts as the cap's. */
static void test_damaged_tombstone(void **state) {
  static const char *const lines[] = {
      "stackrec-4500-000001.zst: offset 0: a damaged tombstone of the disk "
      "cap", "DAMAGED (1 batch lost)", NULL};
  const char *d = fx_tmpdir("acct-badtomb");
  (void)state;

  write_sess(d, &g_cases[6].s);
  for (uint32_t seq = 1; seq <= 2; seq++) {
    uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
    stkr_fmt_tombstone(t, 4301);
    if (seq == 1) t[10] ^= 0x41; /* inside "STKRCAP1" */
    assert_int_equal(fx_write_segment_bytes(d, 4500, seq, t, sizeof t), 0);
  }
  expect(d, 1, lines);
  if (strstr(cr_out, "holds no intact batch") != NULL)
    fail_msg("the damaged tombstone was taken for an empty segment:\n%s",
             cr_out);
}

/* Events still in the rings when the bounded exit's time ran out: report's
 * DROPPED line names them (it listed four reasons, not exit, and its sum
 * did not add up), as verify does. */
static void test_exit_drops_in_report(void **state) {
  const sess s = {.nseg = 2, .last = true, .cnt = {.dropped_exit = 3}};
  const char *d = fx_tmpdir("acct-exit");
  (void)state;

  write_sess(d, &s);
  assert_int_equal(cr_run("report '%s'", d), 0);
  if (strstr(cr_out, "# DROPPED: 3 events were lost by the recorder, not "
                     "counted below (ring full 0, reentrant 0, other 0, "
                     "write error 0, exit 3)\n") == NULL)
    fail_msg("report said:\n%s", cr_out);
}

/* A segment whose writer died in its first batch (a pool worker ended by
 * SIGTERM): header-less, not empty. */
static void test_segment_without_batch(void **state) {
  static const char *const lines[] = {
      "stackrec-4302-000001.zst: process 4302: segment 1 holds no intact "
      "batch: its writer ended before its first flush completed, and "
      "whatever it recorded is lost\n",
      ": 1 segment, 0 batches, 0 events: intact, INCOMPLETE", NULL};
  const char *d = fx_tmpdir("acct-headerless");
  stkr_fmt_buf buf = {0};
  (void)state;

  assert_int_equal(fx_clean_encode(0, 1, 4302, &buf), 0);
  assert_int_equal(fx_write_segment_bytes(d, 4302, 1, buf.data, buf.len / 2),
                   0);
  stkr_fmt_buf_free(&buf);
  expect(d, 4, lines);
}

int main(void) {
  return TL_RUN_GROUP("accounting", setup, NULL,
                      TL_TABLE(NULL, NULL, test_session, g_cases),
                      TL_CASES(NULL, NULL, test_segment_without_batch,
                               test_outputs_keep_tombstones,
                               test_outputs_keep_runs,
                               test_run_grows_while_read,
                               test_damaged_tombstone,
                               test_exit_drops_in_report),
                      TL_TABLE(NULL, NULL, test_session, g_damaged));
}
