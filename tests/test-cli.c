/*
 * test-cli.c: the `stackrec` tool (//tools:stackrec, a data dependency) on
 * recordings written by the fixture: info, dump (text and JSON), escaping,
 * damaged input and exit statuses.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stackrec.h" /* STKR_VERSION_* */
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

static char rec[4096]; /* the standard recording */

static int setup(void **state) {
  const char *dir;
  (void)state;

  if (cr_setup() != 0)
    return -1;
  dir = fx_tmpdir("cli");
  if (dir == NULL)
    return -1;
  snprintf(rec, sizeof(rec), "%s", dir);
  return fx_std_write(rec, FX_PID);
}

static void test_info(void **state) {
  const char *a, *b, *c, *d;
  (void)state;

  assert_int_equal(cr_run("info '%s'", rec), 0);
  assert_string_equal(cr_err, "");
  assert_string_equal(cr_line(cr_out, 0), "process 4242 \"fixture\" (x86_64)");
  cr_assert_has(cr_out,
                "\n  start:       "
                "2023-11-14T22:13:21.000000000Z\n",
                "\n  duration:    0.000212345 s\n",
                "\n  events:      9\n",
                "\n  stacks:      3\n",
                "\n  sites:       4\n",
                "\n  threads:     3\n",
                "\n  drops:       14 (ring full 6, reentrant "
                "2, other 4, write error 2, exit 0)\n"
                "  accounting:  attempted 23 = written 9 + "
                "dropped 14 + recovered 0\n"
                "  complete:    NO: events dropped\n",
                "\n  segments:    2 (seq 1-2)\n",
                "\n  batches:     5\n",
                " per event)\n",
                "\n  damaged:     0 batches\n",
                "\n  end:         clean\n");
  /* Sites by events, most first (ties by name). */
  a = strstr(cr_out, "         3  net.connect\n");
  b = strstr(cr_out, "         3  privacy.clipboard.read\n");
  c = strstr(cr_out, "         2  file.open\n");
  d = strstr(cr_out, "         1  late.site\n");
  assert_true(a && b && c && d && a < b && b < c && c < d);
}

/* info --json: the same facts as one JSON document that python3's strict
 * parser accepts; the figures checked field by field. */
static void test_info_json(void **state) {
  char path[4200];
  (void)state;

  assert_int_equal(cr_run("info --json '%s'", rec), 0);
  /* Not in the recording: a foreign file there is (rightly) a warning. */
  snprintf(path, sizeof path, "%s.info.json", rec);
  assert_int_equal(tl_write_file(path, cr_out), 0);
  assert_int_equal(
      tl_system("python3 -c 'import json,sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "p = d[\"processes\"][0]\n"
                "assert d[\"processes_count\"] == 1 and d[\"events\"] == 9\n"
                "assert (p[\"pid\"], p[\"name\"], p[\"arch\"]) == "
                "(4242, \"fixture\", \"x86_64\")\n"
                "assert (p[\"events\"], p[\"stacks\"], p[\"threads\"]) == "
                "(9, 3, 3)\n"
                "assert [s[\"name\"] for s in p[\"sites\"]] == "
                "[\"net.connect\", \"privacy.clipboard.read\", "
                "\"file.open\", \"late.site\"]\n"
                "assert p[\"drops\"] == {\"ring_full\": 6, \"reentrant\": 2, "
                "\"other\": 4, \"write_error\": 2, \"exit\": 0, "
                "\"total\": 14}\n"
                "a = p[\"accounting\"]\n"
                "assert (a[\"attempted\"], a[\"written\"], a[\"dropped\"], "
                "a[\"recovered\"], a[\"adds_up\"]) == (23, 9, 14, 0, True)\n"
                "assert p[\"complete\"] is False and p[\"incomplete\"] == "
                "[\"events dropped\"]\n"
                "assert (p[\"segments\"], p[\"batches\"], p[\"end\"]) == "
                "(2, 5, \"clean\")\n' '%s'",
                path),
      0);
}

static void test_dump_text(void **state) {
  (void)state;

  assert_int_equal(cr_run("dump '%s'", rec), 0);
  /* The fixture's drops, said on stderr (QA, session 22: dump was silent
   * on what verify calls incomplete). */
  assert_non_null(strstr(cr_err, "stackrec dump: note: 14 events were "
                                 "dropped by the recorder"));
  assert_int_equal(cr_count_lines(cr_out), 9);
  cr_assert_lines(cr_out, 0,
                  "2000000000 privacy.clipboard.read 4242(main) \"hello\" "
                  "stack=0x401000,0x401100,0x401200",
                  "2000001000 net.connect 4243(worker-1) - "
                  "stack=0x7f0000002000",
                  /* A negative delta, and non-printable bytes as \xNN. */
                  "2000000700 privacy.clipboard.read 4243(worker-1) "
                  "\"\\x00\\x01bin\\xff\\x7f\\x1b\" "
                  "stack=0x403000,0x403010,0x403020,0x403030 [truncated]",
                  "2000010005 file.open 4242(main) \"abcdefgh\"[truncated] "
                  "stack=0x401000,0x401100,0x401200");
  assert_string_equal(cr_line(cr_out, 6),
                      "2000100000 net.connect 4242(main) \"q\\\"b\\\\s\\x0a\""
                      " stack=0x403000,0x403010,0x403020,0x403030 "
                      "[truncated]");

  assert_int_equal(cr_run("dump --limit 2 '%s'", rec), 0);
  assert_int_equal(cr_count_lines(cr_out), 2);
  /* Cut short: it says that whether the rest is complete is not known
   * (QA, session 27: an incomplete recording's peek said nothing). */
  cr_assert_has(cr_err, "stopped after --limit 2 events: the rest of the "
                        "recording was not read");
  assert_int_equal(cr_run("dump --limit 1000 '%s'", rec), 0);
  assert_null(strstr(cr_err, "stopped after"));
  assert_int_equal(cr_run("dump -n 0 '%s'", rec), 0);
  assert_string_equal(cr_out, "");
  /* It says so too (QA, session 29: nothing at all). */
  cr_assert_has(cr_err, "stopped after --limit 0 events");
  /* A segment file given directly. */
  assert_int_equal(cr_run("dump '%s/stackrec-4242-000002.zst'", rec), 0);
  assert_int_equal(cr_count_lines(cr_out), 3);
  /* The filters every command takes (QA, session 25: dump refused them,
   * though the README says every command applies the same filter). */
  assert_int_equal(cr_run("dump --site 'net.*' '%s'", rec), 0);
  assert_int_equal(cr_count_lines(cr_out), 3);
  assert_int_equal(tl_count(cr_out, " net.connect "), 3);
  assert_int_equal(cr_run("dump --site 'net.*' --limit 1 '%s'", rec), 0);
  assert_int_equal(cr_count_lines(cr_out), 1);
  assert_int_equal(tl_count(cr_out, " net.connect "), 1);
  assert_int_equal(cr_run("dump --from 1000 '%s'", rec), 0);
  assert_string_equal(cr_out, "");
  assert_int_equal(cr_run("dump --from 2 --to 1 '%s'", rec), 2);
}

static void test_dump_json(void **state) {
  (void)state;

  assert_int_equal(cr_run("dump --json '%s'", rec), 0);
  assert_int_equal(cr_count_lines(cr_out), 9);
  assert_string_equal(
      cr_line(cr_out, 1),
      "{\"ts_ns\":2000001000,\"pid\":4242,\"site\":\"net.connect\","
      "\"tid\":4243,\"thread\":\"worker-1\",\"payload\":null,"
      "\"payload_truncated\":false,\"stack\":[\"0x7f0000002000\"],"
      "\"stack_truncated\":false}");
  assert_string_equal(
      cr_line(cr_out, 2),
      "{\"ts_ns\":2000000700,\"pid\":4242,\"site\":\"privacy.clipboard."
      "read\",\"tid\":4243,\"thread\":\"worker-1\",\"payload\":"
      "\"\\u0000\\u0001bin\\u00ff\\u007f\\u001b\",\"payload_truncated\":"
      "false,\"stack\":[\"0x403000\",\"0x403010\",\"0x403020\","
      "\"0x403030\"],\"stack_truncated\":true}");
  assert_non_null(strstr(cr_line(cr_out, 3), "\"payload\":\"abcdefgh\","
                                       "\"payload_truncated\":true,"));
  assert_non_null(strstr(cr_line(cr_out, 6), "\"payload\":\"q\\\"b\\\\s\\n\","));
  /* Valid UTF-8 is kept as is. */
  assert_non_null(
      strstr(cr_line(cr_out, 7), "\"thread\":\"\",\"payload\":\"\xc3\xa9t\xc3\xa9\""));
}

/* JSON escaping of UTF-8 edge cases, through a recording of its own. */
static void test_json_utf8(void **state) {
  static const char p[] =
      "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xf0\x9f\x98\x80|\xe2\x82|"
      "\xe2\x82\xac|\x7f\x08\x0c\t\r";
  const fx_ev ev[] = {{1, 1, 1, 1, p, sizeof(p) - 1, false}};
  static const uint32_t one[] = {1};
  const fx_batch b = {.seq = 1, .header = true, .pid = 8, .segment_seq = 1,
                      .sites = one, .n_sites = 1, .threads = one,
                      .n_threads = 1, .stacks = one, .n_stacks = 1,
                      .base_ts = 10, .evs = ev, .n_evs = 1};
  const char *dir = fx_tmpdir("utf8");
  stkr_fmt_buf buf = {0};
  (void)state;

  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(dir, 8, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
  assert_int_equal(cr_run("dump --json '%s'", dir), 0);
  assert_non_null(strstr(cr_out,
                         "\"payload\":\"\\u00c0\\u00af|"
                         "\\u00ed\\u00a0\\u0080|"
                         "\\u00f4\\u0090\\u0080\\u0080|"
                         "\xf0\x9f\x98\x80|"
                         "\\u00e2\\u0082|"
                         "\xe2\x82\xac|"
                         "\\u007f\\b\\f\\t\\r\","));
}

static void test_damaged_and_empty(void **state) {
  const char *dir = fx_tmpdir("cli-bad"), *empty;
  char d[4096], src[4200], dst[4200], want[4300];
  stkr_fmt_buf buf = {0};
  size_t cut;
  (void)state;

  snprintf(d, sizeof(d), "%s", dir);
  /* Segment 1 cut 10 bytes into its third batch. */
  assert_int_equal(fx_std_encode(0, 2, FX_PID, &buf), 0);
  cut = buf.len;
  assert_int_equal(fx_std_encode(2, 3, FX_PID, &buf), 0);
  snprintf(dst, sizeof(dst), "%s/stackrec-%u-000001.zst", d, FX_PID);
  assert_int_equal(fx_write_file(dst, buf.data, cut + 10), 0);
  stkr_fmt_buf_free(&buf);

  /* The cut is at the end of the process's last segment, which has not
   * ended: the batch a live recorder is writing (the live-tail rule), or
   * one its writer never finished (no writer runs here: it is said so).
   * Not read, not damage; dump says the recording is incomplete (QA,
   * session 22), as verify does. */
  assert_int_equal(cr_run("dump '%s'", d), 0);
  assert_int_equal(cr_count_lines(cr_out), 5);
  assert_non_null(strstr(cr_err, "stackrec dump: note: the recording is "
                                 "INCOMPLETE: 1 of 1 process (pid 4242): 1 session "
                                 "without a clean end"));
  assert_int_equal(cr_run("info '%s'", d), 0);
  assert_non_null(strstr(cr_out, "\n  damaged:     0 batches\n"));
  assert_non_null(strstr(cr_out, "\n  end:         not clean: its last batch "
                                 "ends mid-write (not read), and no writer "
                                 "runs here\n"));
  /* With a later segment after it, the same cut is damage. */
  assert_int_equal(fx_std_encode(3, 5, FX_PID, &buf), 0);
  snprintf(src, sizeof(src), "%s/stackrec-%u-000002.zst", d, FX_PID);
  assert_int_equal(fx_write_file(src, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);
  assert_int_equal(cr_run("dump '%s'", d), 1);
  assert_int_equal(cr_count_lines(cr_out), 8);
  snprintf(want, sizeof(want),
           "stackrec: warning: %s: offset %zu: truncated batch (10 bytes), "
           "ignored\n", dst, cut);
  /* The warning first, then the notes (the recording is incomplete). */
  assert_int_equal(strncmp(cr_err, want, strlen(want)), 0);
  assert_non_null(strstr(cr_err, "note: the recording is INCOMPLETE: 1 of 1 "
                                 "process (pid 4242): 1 damaged (1 batch "
                                 "lost)"));
  assert_int_equal(cr_run("info '%s'", d), 1);
  assert_non_null(strstr(cr_out, "\n  damaged:     1 batch\n"));

  /* An empty directory: an empty recording (no process made a watched
   * call), status 0; unrelated files only: nothing recorded, status 1. */
  empty = fx_tmpdir("cli-empty");
  assert_int_equal(cr_run("info '%s'", empty), 0);
  assert_non_null(strstr(cr_err, "an empty recording"));
  /* symbolize too (it said "no segment files", exit 1): OUT is as empty,
   * and reads as such. */
  snprintf(src, sizeof(src), "%s-sym", empty);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", src, empty), 0);
  assert_non_null(strstr(cr_out, "an empty recording (no process made a "
                                 "watched call): nothing to symbolize"));
  assert_int_equal(cr_run("verify '%s'", src), 0);
  /* Again into the same OUT, with a mark: refused (it appended the marks
   * a second time: review). */
  assert_int_equal(cr_run("mark '%s' consent.granted", empty), 0);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", src, empty), 0);
  cr_expect(2, "already holds stackrec.marks", "symbolize -o '%s' '%s'", src,
            empty);
  snprintf(src, sizeof(src), "%s/stackrec.marks", empty);
  assert_int_equal(unlink(src), 0);
  snprintf(src, sizeof(src), "%s/notes.txt", empty);
  assert_int_equal(fx_write_file(src, "x", 1), 0);
  cr_expect(1, "no segment files", "info '%s'", empty);
  assert_non_null(strstr(cr_err, "no recording found"));
  cr_expect(1, "no segment files", "symbolize '%s'", empty);
}

static void test_usage(void **state) {
  (void)state;

  cr_expect(2, "missing command", "%s", ""); /* no command at all */
  /* A one-value option given twice: refused (the last one won, silently);
   * a repeatable one (--debug-dir, --sensitive) is not. */
  cr_expect(2, "--from given twice", "report --from 1 --from 2 '%s'", rec);
  cr_expect(2, "--format (-f) given twice",
            "export --format folded -f jsonl '%s'", rec);
  cr_expect(2, "--output (-o) given twice", "merge -o a -o b '%s'", rec);
  cr_expect(2, "unknown command 'frobnicate'", "frobnicate '%s'", rec);
  assert_int_equal(cr_run("--bogus"), 2);
  cr_expect(2, "stackrec dump: no DIR or FILE given", "dump");
  assert_int_equal(cr_run("info"), 2);
  cr_expect(2, "--limit wants a number, not 'x'", "dump --limit x '%s'", rec);
  assert_int_equal(cr_run("dump --limit -1 '%s'", rec), 2);
  cr_expect(2, "needs a value", "dump --limit");
  cr_expect(2, "unknown option '--frob'", "dump --frob '%s'", rec);
  assert_int_equal(cr_run("info -x '%s'", rec), 2);
  assert_string_equal(cr_out, "");

  assert_int_equal(cr_run("--help"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec COMMAND"));
  assert_non_null(strstr(cr_out, "Exit status:"));
  for (int i = 0; i < 2; i++) { /* the tool's version and its library's */
    char want[64];
    snprintf(want, sizeof want, "stackrec %d.%d.%d (library %d.%d.%d)\n",
             STKR_VERSION_MAJOR, STKR_VERSION_MINOR, STKR_VERSION_PATCH,
             STKR_VERSION_MAJOR, STKR_VERSION_MINOR, STKR_VERSION_PATCH);
    assert_int_equal(cr_run(i ? "-V" : "--version"), 0);
    assert_string_equal(cr_out, want);
  }
  /* push: a password never as an argument, nor printed: an abbreviation
   * of --password-file is refused, its value unsaid (QA, session 23:
   * `--password S3cretPW` was taken for --password-file and the error
   * named the "file"). */
  const char *pw[] = {"--password S3cretPW", "--pass=S3cretPW",
                      "--password-fil S3cretPW"};
  for (size_t i = 0; i < sizeof pw / sizeof pw[0]; i++) {
    assert_int_equal(cr_run("push --url http://127.0.0.1:1 %s '%s'", pw[i],
                            rec), 2);
    assert_non_null(strstr(cr_err, "unknown option '--pass"));
    assert_null(strstr(cr_err, "S3cretPW"));
  }
  assert_int_equal(cr_run("info --help"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec info"));
  assert_int_equal(cr_run("dump -h"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec dump"));

  cr_expect(3, "cannot open /nonexistent-stackrec-dir: ",
            "info /nonexistent-stackrec-dir");
  cr_expect(3, "/dev/null: not a directory or regular",
            "dump '%s' /dev/null", rec);
  assert_string_equal(cr_out, ""); /* nothing printed before the error */
}

/* A warning names its path, and a path may hold a newline: each warning
 * stays one line, the newline written \x0a (QA, session 25: a directory
 * named with one split the warning in two). As verify's lines. */
static void test_warning_one_line(void **state) {
  char dir[4200];
  (void)state;

  snprintf(dir, sizeof dir, "%s-line\nbreak", rec);
  assert_int_equal(tl_system("rm -rf '%s' && cp -r '%s' '%s' && "
                             "echo x > '%s/foreign'", dir, rec, dir, dir), 0);
  assert_int_equal(cr_run("dump '%s'", dir), 0);
  assert_non_null(strstr(cr_err, "-line\\x0abreak: ignored 1 entry"));
  assert_null(strstr(cr_err, "\nbreak")); /* no line starts in the name */
  assert_int_equal(cr_run("verify '%s'", dir), 4);
  assert_non_null(strstr(cr_out, "note: "));
  assert_null(strstr(cr_out, "-line\nbreak"));
  /* Recovery's messages too, and a terminal's escape sequence in the
   * name (QA, session 40: recover and verify's ring lines printed it raw,
   * a window title set and the screen cleared). */
  char esc[4200];
  snprintf(esc, sizeof esc, "%s-\x1b]0;PWNED\x07\x1b[2J", rec);
  assert_int_equal(tl_system("rm -rf '%s' && cp -r '%s' '%s' && echo x > "
                             "'%s/stackrec-3999999-00000000000000aa-1.ring'", esc,
                             rec, esc, esc), 0);
  assert_int_equal(cr_run("verify '%s'", esc), 1);
  assert_non_null(strstr(cr_out, "without its session file"));
  assert_null(strchr(cr_out, '\x1b'));
  assert_null(strchr(cr_err, '\x1b'));
  assert_int_equal(cr_run("recover '%s'", esc), 1);
  assert_non_null(strstr(cr_out, "1 unusable file"));
  assert_null(strchr(cr_out, '\x1b'));
  assert_null(strchr(cr_err, '\x1b'));
  /* A copy says that ring's loss too (QA, session 40: merge, exit 0). */
  char copy[4300];
  snprintf(copy, sizeof copy, "%s.merged", rec);
  assert_int_equal(cr_run("merge -o '%s' '%s'", copy, esc), 1);
  assert_non_null(strstr(cr_err, "ring files in the directory that no "
                                 "recovery can read now"));
  assert_null(strchr(cr_err, '\x1b'));
}

/* QA (session 25): `export -o REC/stackrec-P-000001.zst REC` exited 0 with
 * the segment overwritten by the export (verify: DAMAGED); report --html,
 * compliance, privacy-manifest and diff too. Every command that writes a
 * file refuses (2) an output that is an input, or a recording's file name
 * in an input directory, and an empty one; the segment stays as it was. A
 * foreign name in the directory (readers note and skip it) is fine. */
static void test_output_onto_input(void **state) {
  static const char *const cmds[] = {
      "export --format jsonl -o", "report --html", "compliance -o",
      "privacy-manifest -o", "diff -o"};
  char seg[4300], fresh[4300], out[4400];
  size_t len0, len1;
  (void)state;

  snprintf(seg, sizeof seg, "%s/stackrec-%d-000001.zst", rec, FX_PID);
  snprintf(fresh, sizeof fresh, "%s/stackrec-99-000001.zst", rec);
  free(tl_slurp_alloc(seg, &len0));
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    bool diff = strncmp(cmds[i], "diff", 4) == 0;
    const char *opt = strchr(cmds[i], ' ') + 1;
    opt = strrchr(opt, ' ') ? strrchr(opt, ' ') + 1 : opt;
    cr_expect(2, "is the same file as the input", "%s '%s' '%s'%s%s", cmds[i],
              seg, seg, diff ? " " : "", diff ? rec : "");
    cr_expect(2, "is a file of the input", "%s '%s' '%s'%s%s", cmds[i], seg,
              rec, diff ? " " : "", diff ? rec : "");
    cr_expect(2, "is a file of the input", "%s '%s' '%s'%s%s", cmds[i], fresh,
              rec, diff ? " " : "", diff ? rec : "");
    snprintf(out, sizeof out, "%s: empty file name", opt);
    cr_expect(2, out, "%s '' '%s'%s%s", cmds[i], rec, diff ? " " : "",
              diff ? rec : "");
  }
  /* Review (session 25): the marks file the reader takes from the
   * directory, a file beside an input file (the same recording), and an
   * input given by option. */
  cr_expect(2, "is a file of the input", "export --format folded -o "
            "'%s/stackrec.marks' '%s'", rec, rec);
  snprintf(out, sizeof out, "%s/stackrec-%d-000002.zst", rec, FX_PID);
  cr_expect(2, "is a file of the recording of the input",
            "export --format folded -o '%s' '%s'", out, seg);
  snprintf(out, sizeof out, "%s.policy", rec);
  assert_int_equal(tl_write_file(out, "{}"), 0);
  cr_expect(2, "is the same file as the input", "compliance --policy '%s' "
            "-o '%s' '%s'", out, out, rec);
  free(tl_slurp_alloc(seg, &len1));
  assert_int_equal(len1, len0);
  assert_int_equal(access(fresh, F_OK), -1);
  /* Beside them, under a name no reader takes: written. */
  snprintf(out, sizeof out, "%s/export.jsonl", rec);
  assert_int_not_equal(cr_run("export --format jsonl -o '%s' '%s'", out, rec), 2);
  assert_int_equal(access(out, F_OK), 0);
  unlink(out);
}

TL_TEST_MAIN("cli", setup, NULL, test_info, test_info_json, test_dump_text,
             test_dump_json, test_json_utf8, test_damaged_and_empty, test_usage,
             test_output_onto_input, test_warning_one_line)
