/*
 * test-incomplete-views.c: every view says when the recording it reads is
 * incomplete (QA, session 22, which found export, dump, privacy-manifest,
 * diff and compliance's JUnit silent where verify exits 4), and two
 * smaller truths of the summaries: the processes a filtered report's events
 * came from, and a payload cut at payload_max marked in the HTML page.
 *
 * The recordings are the fixture's (tests/fixture.h): the standard one (14
 * events dropped: incomplete) of process 4242 plus one of process 4343
 * holding only the clean batches 3-4 (no event at late.site; its first
 * batches missing); the clean one alone (complete); and the standard one
 * cut in its last batch.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

static char g_two[4096];   /* std (4242, incomplete) + clean 3-4 (4343) */
static char g_clean[4096]; /* clean 0-5 (4242): complete */
static char g_cut[4096];   /* std, its last batch cut mid-write */
static char g_capped[4096]; /* clean 3-5 (4242) after its segment 1's
                               tombstone: the head the disk cap deleted */

static int write_clean(const char *dir, int from, int to, uint32_t pid) {
  stkr_fmt_buf buf = {0};
  int err = fx_clean_encode(from, to, pid, &buf);
  if (err == 0) err = fx_write_segment(dir, pid, 1, &buf);
  stkr_fmt_buf_free(&buf);
  return err;
}

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0) return -1;
  snprintf(g_two, sizeof g_two, "%s", fx_tmpdir("views-two"));
  snprintf(g_clean, sizeof g_clean, "%s", fx_tmpdir("views-clean"));
  snprintf(g_cut, sizeof g_cut, "%s", fx_tmpdir("views-cut"));
  if (fx_std_write(g_two, 4242) != 0 || write_clean(g_two, 3, 5, 4343) != 0 ||
      write_clean(g_clean, 0, 5, 4242) != 0 ||
      fx_std_write_live(g_cut, 4242, 10) != 0)
    return -1;
  snprintf(g_capped, sizeof g_capped, "%s", fx_tmpdir("views-capped"));
  {
    stkr_fmt_buf buf = {0};
    uint8_t tomb[STKR_FMT_TOMBSTONE_SIZE];
    int err = fx_clean_encode(3, 5, 4242, &buf);
    if (err == 0) err = fx_write_segment(g_capped, 4242, 2, &buf);
    stkr_fmt_buf_free(&buf);
    stkr_fmt_tombstone(tomb, 4242);
    if (err != 0 ||
        fx_write_segment_bytes(g_capped, 4242, 1, tomb, sizeof tomb) != 0)
      return -1;
  }
  return 0;
}

/* QA (session 28): a process whose earliest segments the disk cap deleted
 * had its consent mark deleted with them, and compliance called every
 * later event "before consent", a finding (exit 1). What a rule on marks
 * cannot know is now "not judged", said in text and JSON; no finding.
 * And no pass either (QA, session 31: "no findings", exit 0 and a green
 * JUnit case for a rule that left 2 212 events unjudged): the rule is not
 * checked, exit 1, an error in JUnit. */
static void test_compliance_of_a_capped_head(void **state) {
  static const char policy[] =
      "{\"rules\": [{\"id\": \"before-consent\", \"sites\": \"*\", "
      "\"before_mark\": \"consent.granted\"}]}\n";
  char path[4300];
  (void)state;

  snprintf(path, sizeof path, "%s/policy.json", g_capped);
  assert_int_equal(fx_write_file(path, policy, sizeof policy - 1), 0);
  if (cr_run("compliance --policy '%s' '%s'", path, g_capped) != 1)
    fail_msg("compliance: %s\n%s", cr_out, cr_err);
  cr_assert_has(cr_out, "of 1 process whose earliest segments the disk cap "
                        "deleted (or whose first batches are lost: damaged, "
                        "or never written) were not judged by rules on marks",
                "# NOT CHECKED: rule before-consent: 3 of its events, in "
                "processes whose earliest segments the disk cap deleted (or "
                "whose first batches are lost: damaged, or never written), "
                "could not be judged",
                "before consent 0", "\nno findings, but 1 rule not checked");
  assert_int_equal(cr_run("compliance --format json --policy '%s' '%s'", path,
                          g_capped),
                   1);
  cr_assert_has(cr_out, "\"unjudged_processes\":1,", "\"findings\":[]",
                "\"checked\":false");
  assert_int_equal(cr_run("compliance --format junit --policy '%s' '%s'",
                          path, g_capped),
                   1);
  cr_assert_has(cr_out, "name=\"events judged\">\n      <error message=\"3 of "
                        "its events");

  /* A typo in the same rule is said as well (review, session 31: hidden
   * behind the note). */
  static const char typo[] =
      "{\"rules\": [{\"id\": \"r\", \"sites\": [\"*\", \"identifiers.hostname\"], "
      "\"before_mark\": \"consent.granted\"}]}\n";
  assert_int_equal(fx_write_file(path, typo, sizeof typo - 1), 0);
  assert_int_equal(cr_run("compliance --policy '%s' '%s'", path, g_capped), 1);
  cr_assert_has(cr_out, "could not be judged: the mark it asks about may have "
                        "gone with them; and its sites pattern "
                        "identifiers.hostname matches no site");
}

/* info --json counts the segments the disk cap deleted as info's text and
 * verify do: a tombstone (any process's cap leaves one) counts, not only
 * the process's own counter (QA, session 31: "segments_deleted": 0 in
 * JSON where the text said 5). */
static void test_info_json_counts_tombstones(void **state) {
  (void)state;
  assert_int_equal(cr_run("info '%s'", g_capped), 0);
  cr_assert_has(cr_out, "1 older deleted by the disk cap");
  assert_int_equal(cr_run("info --json '%s'", g_capped), 0);
  cr_assert_has(cr_out, "\"segments_deleted\":1,");
}

/* "INCOMPLETE" said on stderr by export (each format), dump and
 * privacy-manifest, for the cut recording; nothing for the complete one. */
static void test_notes_on_stderr(void **state) {
  static const char *const cmds[] = {
      "export --format folded", "export --format jsonl",
      "export --format chrome", "export --format pprof -o /dev/null",
      "dump", "privacy-manifest -o /dev/null"};
  (void)state;

  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    assert_int_equal(cr_run("%s '%s' > /dev/null", cmds[i], g_cut), 0);
    if (strstr(cr_err, "note: the recording is INCOMPLETE: 1 of 1 process (pid 4242):") ==
            NULL ||
        strstr(cr_err, "1 session without a clean end") == NULL)
      fail_msg("%s said nothing of the cut batch: \"%s\"", cmds[i], cr_err);
    assert_int_equal(cr_run("%s '%s' > /dev/null", cmds[i], g_clean), 0);
    if (strstr(cr_err, "INCOMPLETE") != NULL)
      fail_msg("%s on a complete recording: \"%s\"", cmds[i], cr_err);
  }
  /* And in the files that carry the recorder's drops: chrome's otherData,
   * a pprof comment (QA, session 33: "6000 events of 6000 read", a
   * quarter of the run deleted by the disk cap). */
  assert_int_equal(cr_run("export --format chrome '%s'", g_cut), 0);
  cr_assert_has(cr_out, "\"incomplete\":\"INCOMPLETE: 1 of 1 process (pid "
                        "4242):");
  assert_int_equal(cr_run("export --format chrome '%s'", g_clean), 0);
  assert_null(strstr(cr_out, "\"incomplete\""));
  assert_int_equal(cr_run("export --format pprof -o - '%s' | gzip -dc | "
                          "grep -a -c 'INCOMPLETE: 1 of 1 process (pid 4242)'",
                          g_cut),
                   0);
  cr_assert_has(cr_out, "1\n");
}

/* diff: the incomplete side named at the top, the gate's verdict
 * qualified, JSON "complete": false with the line. */
static void test_diff(void **state) {
  (void)state;
  assert_int_equal(cr_run("diff '%s' '%s'", g_clean, g_cut), 0);
  assert_null(strstr(cr_out, "# BASE INCOMPLETE"));
  if (strstr(cr_out, "# NEW INCOMPLETE: 1 of 1 process (pid 4242):") == NULL ||
      strstr(cr_out, "1 session without a clean end") == NULL)
    fail_msg("diff's text: \"%s\"", cr_out);
  assert_non_null(strstr(cr_out, "PASS: no new path to a sensitive site (an "
                                 "input is INCOMPLETE: paths may be missing "
                                 "or their rates wrong)"));
  assert_int_equal(cr_run("diff --format json '%s' '%s'", g_clean, g_cut), 0);
  assert_non_null(strstr(cr_out, "\"base\":{"));
  assert_non_null(strstr(cr_out, "\"intact\":true,\"complete\":true,"));
  assert_non_null(strstr(cr_out, "\"intact\":true,\"complete\":false,"
                                 "\"incomplete\":\"INCOMPLETE: 1 of 1"));
  assert_int_equal(cr_run("diff '%s' '%s'", g_clean, g_clean), 0);
  assert_null(strstr(cr_out, "INCOMPLETE"));
}

/* A recording with no process at all (only a process that could not
 * record: a static program) checks no rule: NOT CHECKED, exit 1, never
 * "no findings" (QA, session 31: every rule passed, exit 0). */
static void test_compliance_of_no_process(void **state) {
  static const char policy[] =
      "{\"rules\": [{\"id\": \"no-ids\", \"sites\": \"identifiers.*\"}]}\n";
  const char *d = fx_tmpdir("views-none");
  char path[4300];
  (void)state;

  assert_int_equal(stkr_unrecorded_append(d, 77, "app", "statically linked"),
                   0);
  snprintf(path, sizeof path, "%s/policy.json", d);
  assert_int_equal(fx_write_file(path, policy, sizeof policy - 1), 0);
  assert_int_equal(cr_run("compliance --policy '%s' '%s' 2>&1", path, d), 1);
  cr_assert_has(cr_out, "# NOT CHECKED: rule no-ids: the recording holds "
                        "no process",
                "no findings, but 1 rule not checked");
  /* privacy-manifest says the same, not "no process watched reasons"
   * (review, session 31). */
  assert_int_equal(cr_run("privacy-manifest '%s'", d), 1);
  cr_assert_has(cr_err, "error: the recording holds no process");
  cr_assert_has(cr_out, "<!-- INCOMPLETE: the recording holds no process");
  assert_null(strstr(cr_err, "watched category"));
}

/* compliance: JUnit gets a failing "recording complete" case (errors="1");
 * the text says the consent and background figures assume no lost mark. */
static void test_compliance(void **state) {
  (void)state;
  assert_int_equal(cr_run("compliance --format junit '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, "tests=\"1\" failures=\"0\" errors=\"1\">"));
  if (strstr(cr_out, "name=\"recording complete\">\n      <error "
                     "message=\"INCOMPLETE: 2 of 2 processes (pids 4242, "
                     "4343): 14 events dropped") == NULL)
    fail_msg("JUnit: \"%s\"", cr_out);
  assert_int_equal(cr_run("compliance '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, "before-consent and background figures "
                                 "assume no mark was lost"));
  assert_int_equal(cr_run("compliance --format junit '%s'", g_clean), 0);
  assert_non_null(strstr(cr_out, "errors=\"0\">"));
  assert_null(strstr(cr_out, "recording complete"));
  /* A last batch cut off is named (QA, session 26: only "without a clean
   * end" was, where report said CUT OFF: 3 000 events gone, "no findings"). */
  assert_int_equal(cr_run("compliance '%s'", g_cut), 0);
  cr_assert_has(cr_out, "# INCOMPLETE: 1 of 1 process (pid 4242): ",
                "; 1 last batch cut off mid-write, not counted; ");
}

/* Events whose site was defined in a lost batch (here: a later session's
 * events without its first batch) are named in the INCOMPLETE line of
 * every view: no rule or site filter can select them. */
static void test_unresolved_named(void **state) {
  static const fx_ev eb[] = {{0, 1, 1, 1, "b", 1, false},
                             {10, 4, 3, 3, NULL, 0, false}};
  const fx_batch lost_header = {.seq = 2, .base_ts = 3000, .evs = eb,
                                .n_evs = 2};
  const char *d = fx_tmpdir("views-unresolved");
  stkr_fmt_buf buf = {0};
  (void)state;

  assert_int_equal(fx_std_encode(0, 3, 50, &buf), 0);
  assert_int_equal(fx_write_segment(d, 50, 1, &buf), 0);
  assert_int_equal(fx_encode(&lost_header, &buf), 0);
  assert_int_equal(fx_write_segment(d, 50, 2, &buf), 0);
  stkr_fmt_buf_free(&buf);
  assert_int_equal(cr_run("compliance '%s'", d), 1);
  cr_assert_has(cr_out, "# INCOMPLETE: 1 of 1 process (pid 50): 1 damaged (",
                ", 2 events unresolved)");
  assert_int_equal(cr_run("report '%s'", d), 1);
  cr_assert_has(cr_out, ", 2 events unresolved)");
}

/* report --site: "N events from P processes" counts the processes the
 * shown events came from (before: every process read). */
static void test_filtered_process_count(void **state) {
  (void)state;
  assert_int_equal(cr_run("report --site late.site '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, "# 1 event from 1 process, 1 site"));
  assert_int_equal(cr_run("report '%s'", g_two), 0);
  assert_non_null(strstr(cr_out, " from 2 processes, 4 sites"));
}

/* The fixture's "abcdefgh" was cut at payload_max: marked in the page's
 * payload table as in report's ("abcdefgh"...). */
static void test_truncated_payload_in_html(void **state) {
  (void)state;
  assert_int_equal(cr_run("report --html /dev/stdout '%s'", g_clean), 0);
  assert_non_null(strstr(cr_out, "abcdefgh<span class=\"trunc\""));
}

/* `symbolize` of dir, whose marks file has a line readers call damaged:
 * exit 1, stderr says `said`, and the copy (dir.sym) verifies damaged. */
static void symbolized_copy_says(const char *dir, const char *said) {
  char out[4300];

  snprintf(out, sizeof out, "%s.sym", dir);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", out, dir), 1);
  cr_assert_has(cr_err, "stackrec symbolize: ");
  cr_assert_has(cr_err, said);
  assert_int_equal(cr_run("verify '%s'", out), 1);
}

/* A damaged line of the marks file (a consent mark may have been it):
 * report, its HTML page and compliance say so at the top, as verify does
 * (QA, session 39: verify DAMAGED, the others clean). */
static void test_damaged_marks_file(void **state) {
  char d[4096];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("views-marks"));
  assert_int_equal(write_clean(d, 0, 5, 4242), 0);
  assert_int_equal(tl_system("echo 'm1 garbage' >> '%s/stackrec.marks'", d),
                   0);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  (void)cr_run("report '%s'", d);
  cr_assert_has(cr_out, "# INCOMPLETE: DAMAGED marks file: 1 problem reading it");
  (void)cr_run("report --html /dev/stdout '%s'", d);
  cr_assert_has(cr_out, "DAMAGED marks file: 1 problem reading it");
  (void)cr_run("compliance '%s'", d);
  cr_assert_has(cr_out, "DAMAGED marks file: 1 problem reading it");
  /* Its copies carry the line and say it, as merge does (session 41:
   * symbolize exited 0). */
  symbolized_copy_says(d, "stackrec.marks: offset ");
  char out[4200];
  snprintf(out, sizeof out, "%s.merged", d);
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 1);
  /* Two inputs, one damaged line each: two (review: the largest, one). */
  char d2[4096];
  snprintf(d2, sizeof d2, "%s", fx_tmpdir("views-marks2"));
  assert_int_equal(write_clean(d2, 0, 5, 4343), 0);
  assert_int_equal(tl_system("echo 'm1 junk' >> '%s/stackrec.marks'", d2),
                   0);
  (void)cr_run("report '%s' '%s'", d, d2);
  cr_assert_has(cr_out, "DAMAGED marks file: 2 problems reading it");
}

/* A marks file that cannot be read (a FIFO in its place) is damage to
 * the input's readers; a copy of the recording (`symbolize -o`, `merge
 * -o`) says it too, by an "l1" line in its own marks file (QA, session 40:
 * symbolize dropped it without a word, exit 0, and OUT verified intact). */
static void test_damaged_marks_file_copied(void **state) {
  char d[4096], out[4200], out2[4200];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("views-marks-fifo"));
  assert_int_equal(write_clean(d, 0, 5, 4242), 0);
  assert_int_equal(tl_system("rm -f '%s/stackrec.marks' && mkfifo "
                             "'%s/stackrec.marks'", d, d), 0);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  snprintf(out, sizeof out, "%s.sym", d);
  snprintf(out2, sizeof out2, "%s.merged", d);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", out, d), 1);
  cr_assert_has(cr_err, "stackrec.marks is damaged (not a regular file");
  assert_int_equal(cr_run("merge -o '%s' '%s'", out2, d), 1);
  assert_int_equal(cr_run("verify '%s'", out), 1);
  cr_assert_has(cr_out, "marks lost before this copy was made: the input's "
                        "marks file: not a regular file");
  assert_int_equal(cr_run("verify '%s'", out2), 1);
  cr_assert_has(cr_out, "marks lost before this copy was made");
  (void)cr_run("report '%s'", out);
  cr_assert_has(cr_out, "DAMAGED marks file: 1 problem reading it");
  /* A copy of the copy: its "l1" line is damage still (session 41:
   * symbolize of OUT exited 0 where merge of it exited 1). */
  symbolized_copy_says(out, "marks lost before this copy was made");
}

TL_TEST_MAIN("incomplete-views", setup, NULL, test_notes_on_stderr,
             test_info_json_counts_tombstones, test_compliance_of_no_process,
             test_compliance_of_a_capped_head, test_diff,
             test_unresolved_named,
             test_compliance, test_filtered_process_count,
             test_truncated_payload_in_html, test_damaged_marks_file,
             test_damaged_marks_file_copied)
