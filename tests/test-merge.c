/*
 * test-merge.c: `stackrec merge` (//tools:stackrec): recordings of two
 * "builds" (other addresses, same functions: tests/symrec.h) merged into
 * one directory whose counts add up and whose stacks merge by frames in
 * `report`; a pid taken twice (renumbered, headers rewritten, reads back
 * without a warning); intact batches copied byte for byte; damaged and
 * live inputs; a file not named as a segment; OUT refused when it is an
 * input or holds segments; usage; marks and parents that stay with their
 * own input's processes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/symrec.h"
#include "tests/testlib.h"

static int setup(void **state) {
  (void)state;
  return cr_setup();
}

/* A fresh directory path under the test's tmpdir that does not exist. */
static const char *out_path(const char *tag) {
  static char buf[4096];

  snprintf(buf, sizeof buf, "%s/out", fx_tmpdir(tag));
  return buf;
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  size_t n;

  if (f == NULL)
    fail_msg("cannot open %s", path);
  n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

static void assert_same_file(const char *a, const char *b) {
  static uint8_t x[1 << 16], y[1 << 16];
  size_t nx = read_file(a, x, sizeof x), ny = read_file(b, y, sizeof y);

  assert_int_equal(nx, ny);
  assert_memory_equal(x, y, nx);
}

typedef struct readback {
  uint64_t events, warnings;
  size_t processes;
  uint32_t pids[8];
  bool clean[8];
} readback;

static void count_warning(void *arg, const stkr_warning *w) {
  readback *rb = arg;
  rb->warnings++;
  fprintf(stderr, "  reading OUT: %s\n", w->message);
}

/* Read OUT with the reader: every event, and any warning counted. */
static readback read_out(const char *dir) {
  readback rb;
  stkr_reader_opts o = {.warn = count_warning, .warn_arg = &rb};
  stkr_reader *r;
  stkr_event_view ev;
  size_t i;
  int rc;

  memset(&rb, 0, sizeof rb);
  assert_int_equal(stkr_reader_create(&o, &r), 0);
  assert_int_equal(stkr_reader_add(r, dir), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    rb.events++;
  assert_int_equal(rc, 0);
  rb.processes = stkr_reader_process_count(r);
  for (i = 0; i < rb.processes && i < 8; i++) {
    rb.pids[i] = stkr_reader_process(r, i)->pid;
    rb.clean[i] = stkr_reader_process(r, i)->clean_end;
  }
  stkr_reader_free(r);
  return rb;
}

static const char *const k_sites[] = {"files.open", "network.connect"};
static const char *const k_threads[] = {"main"};
static const sr_frame k_open[] = {
    {"open_config", "app/config.c", 12, false, true},
    {"main", "app/main.c", 40, false, true},
};
static const sr_frame k_conn[] = {
    {NULL, NULL, 0, false, true}, /* unknown: app+offset */
    {"main", "app/main.c", 50, false, true},
};
static const sr_stack k_stacks[] = {{1, k_open, 2, false},
                                    {2, k_conn, 2, false}};
static const sr_event k_evs[] = {{1, 1, 0}, {1, 1, 5}, {1, 1, 5}, {2, 1, 5}};

static sr_rec k_rec(uint32_t pid, uint64_t base) {
  sr_rec r = {.pid = pid, .name = "app", .pc_base = base,
              .start_ns = 1000000000ull, .sites = k_sites, .n_sites = 2,
              .threads = k_threads, .n_threads = 1, .stacks = k_stacks,
              .n_stacks = 2, .evs = k_evs, .n_evs = 4, .last = true};
  return r;
}

/* r1 and r2 written into fresh directories d1 and d2 (tag-1, tag-2), and
 * the path of a merge's output into out (tag-out, not created). Each
 * buffer holds 4096 bytes. */
static void write_two(char *d1, const sr_rec *r1, char *d2, const sr_rec *r2,
                      char *out, const char *tag) {
  char t[64];

  snprintf(t, sizeof t, "%s-1", tag);
  snprintf(d1, 4096, "%s", fx_tmpdir(t));
  assert_int_equal(sr_write(d1, r1), 0);
  snprintf(t, sizeof t, "%s-2", tag);
  snprintf(d2, 4096, "%s", fx_tmpdir(t));
  assert_int_equal(sr_write(d2, r2), 0);
  snprintf(t, sizeof t, "%s-out", tag);
  snprintf(out, 4096, "%s", out_path(t));
}

/* write_two, then `merge -o out d1 d2`; its status. */
static int merge_two(char *d1, const sr_rec *r1, char *d2, const sr_rec *r2,
                     char *out, const char *tag) {
  write_two(d1, r1, d2, r2, out, tag);
  return cr_run("merge -o '%s' '%s' '%s'", out, d1, d2);
}

/* Two builds of one program on two devices: other pids, other addresses,
 * the same functions. */
static void test_two_builds_add_up_and_merge_by_frames(void **state) {
  char d1[4096], d2[4096], out[4096], a[4400], b[4400];
  sr_rec r1 = k_rec(100, 0x400000), r2 = k_rec(200, 0x55aa00000000ull);
  readback rb;
  (void)state;

  assert_int_equal(merge_two(d1, &r1, d2, &r2, out, "merge-b"), 0);
  assert_string_equal(cr_err, "");
  assert_non_null(strstr(cr_out, "merged 2 inputs: 2 processes, 2 segments, "
                                 "2 batches ("));
  /* Nothing renumbered: the batches are copied as they were. */
  snprintf(a, sizeof a, "%s/stackrec-100-000001.zst", d1);
  snprintf(b, sizeof b, "%s/stackrec-100-000001.zst", out);
  assert_same_file(a, b);
  snprintf(a, sizeof a, "%s/stackrec-200-000001.zst", d2);
  snprintf(b, sizeof b, "%s/stackrec-200-000001.zst", out);
  assert_same_file(a, b);

  rb = read_out(out);
  assert_int_equal(rb.events, 8);
  assert_int_equal(rb.warnings, 0);
  assert_int_equal(rb.processes, 2);

  /* report: the counts add up, each stack is one, seen in 2 processes. */
  assert_int_equal(cr_run("report '%s'", out), 0);
  cr_assert_has(cr_out,
                "# 8 events from 2 processes, 2 sites, 2 "
                "distinct stacks\n",
                "  files.open: 6 events, 75.00%, 1 stack\n"
                "    6 events, 100.00%, in 2 processes:\n"
                "        open_config (app/config.c:12)\n"
                "        main (app/main.c:40)\n",
                "    2 events, 100.00%, in 2 processes:\n"
                "        app+0x200\n"
                "        main (app/main.c:50)\n");
  assert_int_equal(cr_run("verify '%s'", out), 0);
}

/* The same pid in two recordings (two runs on two devices): the second
 * gets a synthetic pid, in its file names and its headers. */
static void test_pid_taken_twice(void **state) {
  char d1[4096], d2[4096], out[4096], want[4400];
  readback rb;
  (void)state;

  snprintf(d1, sizeof d1, "%s", fx_tmpdir("merge-p1"));
  snprintf(d2, sizeof d2, "%s", fx_tmpdir("merge-p2"));
  snprintf(out, sizeof out, "%s", out_path("merge-p-out"));
  assert_int_equal(fx_std_write(d1, FX_PID), 0);
  assert_int_equal(fx_std_write(d2, FX_PID), 0);
  /* d2's process could not record on (an exec'd image refused): its "u1"
   * line goes with it under its new pid (QA, session 21: OUT kept 4242,
   * which there is d1's process). */
  assert_int_equal(stkr_unrecorded_append(d2, FX_PID, "fixture",
                                          "exec refused"), 0);

  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, d1, d2), 0);
  assert_string_equal(cr_err, "");
  cr_assert_text(cr_line(cr_out, 0),
                 "process 4242 of %s written as process 10000000 (pid 4242 "
                 "was taken)", d2);
  assert_non_null(strstr(cr_out, "merged 2 inputs: 2 processes, 4 segments, "
                                 "10 batches ("));
  snprintf(want, sizeof want, "%s/stackrec-10000000-000002.zst", out);
  assert_int_equal(access(want, R_OK), 0);

  rb = read_out(out);
  assert_int_equal(rb.warnings, 0); /* headers say the new pid */
  assert_int_equal(rb.events, 18);
  assert_int_equal(rb.processes, 2);
  assert_int_equal(rb.pids[0], 4242);
  assert_int_equal(rb.pids[1], 10000000);
  assert_true(rb.clean[0] && rb.clean[1]);
  assert_int_equal(cr_run("verify '%s'", out), 4); /* its drops */
  assert_non_null(strstr(cr_out, "process 10000000 (fixture) recorded "
                                 "nothing"));
  assert_null(strstr(cr_out, "process 4242 (fixture) recorded nothing"));
  assert_int_equal(cr_run("report '%s'", out), 0);
  assert_non_null(strstr(cr_out, "# 18 events from 2 processes, 4 sites, 9 "
                                 "distinct stacks\n"
                                 "# DROPPED: 28 events were lost"));
  assert_int_equal(cr_run("info '%s'", out), 0);
  assert_non_null(strstr(cr_out, "\nprocess 10000000 \"fixture\" (x86_64)\n"));
  /* OUT (4242 and 10000000) first, then a third 4242: that one gets a pid
   * no input has; OUT's own keep theirs (QA, session 27: it took 10000000
   * and renumbered OUT's). */
  {
    char out2[4096];
    snprintf(out2, sizeof out2, "%s", out_path("merge-p-out2"));
    assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out2, out, d1), 0);
    cr_assert_text(cr_line(cr_out, 0),
                   "process 4242 of %s written as process 10000001 (pid "
                   "4242 was taken)", d1);
    assert_null(strstr(cr_out, "10000000 of"));
  }
}

/* Damaged input: the damage is named and left out (status 1), every
 * intact batch is merged, and each damaged batch leaves a lost marker in
 * OUT, so that OUT is damaged too (QA, session 39: verify OUT said
 * "intact, incomplete"). Three places: a batch between intact ones of its
 * file (pid FX_PID); the first batch of a file (FX_PID + 1: its marker
 * waits for the file's first intact batch); a file's only batch (FX_PID +
 * 2: a marker file in its place). */
static void test_damaged_input(void **state) {
  char d[4096], out[4096], want[4600];
  stkr_fmt_buf buf = {0};
  size_t end0;
  readback rb;
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-bad"));
  snprintf(out, sizeof out, "%s", out_path("merge-bad-out"));
  assert_int_equal(fx_std_encode(0, 1, FX_PID, &buf), 0);
  end0 = buf.len;
  assert_int_equal(fx_std_encode(1, 3, FX_PID, &buf), 0);
  buf.data[end0 + 25] ^= 0x10;
  assert_int_equal(fx_write_segment(d, FX_PID, 1, &buf), 0);
  assert_int_equal(fx_std_encode(3, 5, FX_PID, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 2, &buf), 0);
  assert_int_equal(fx_std_encode(0, 3, FX_PID + 1, &buf), 0);
  buf.data[25] ^= 0x10;
  assert_int_equal(fx_write_segment(d, FX_PID + 1, 1, &buf), 0);
  assert_int_equal(fx_std_encode(0, 1, FX_PID + 2, &buf), 0);
  buf.data[25] ^= 0x10;
  assert_int_equal(fx_write_segment(d, FX_PID + 2, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);

  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 1);
  snprintf(want, sizeof want,
           "stackrec merge: warning: %s/stackrec-%u-000001.zst: offset %zu: "
           "damaged batch (", d, FX_PID, end0);
  assert_non_null(strstr(cr_err, want));
  assert_non_null(strstr(cr_err, "(not merged)\n"));
  rb = read_out(out);
  assert_int_equal(rb.events, 7 + 3); /* 9 less batch 1's two; batches 1, 2 */
  /* The three markers, and FX_PID + 1's events that lost their
   * definitions with its first batch (as in the input). */
  assert_int_equal(rb.warnings, 4);
  assert_int_equal(cr_run("verify '%s'", out), 1);
  cr_assert_has(cr_out, "a batch lost before this copy was made",
                "\nDAMAGED: ");
  snprintf(want, sizeof want, "stackrec-%u-000001.zst: offset 0: a segment "
           "lost before this recording was made", FX_PID + 2);
  assert_non_null(strstr(cr_out, want));
}

/* A segment merge cannot read (a FIFO under a segment's name: the only
 * file of pid 5555): OUT keeps a marker in its place, and verify of OUT
 * names the loss (QA, session 25: OUT verified intact, pid 5555 gone). */
static void test_unreadable_segment_stays_lost(void **state) {
  char d[4096], out[4096], fifo[4200];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-fifo"));
  snprintf(out, sizeof out, "%s", out_path("merge-fifo-out"));
  assert_int_equal(fx_std_write(d, FX_PID), 0);
  snprintf(fifo, sizeof fifo, "%s/stackrec-5555-000001.zst", d);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 1);
  assert_non_null(strstr(cr_err, "a FIFO, not a regular file"));
  assert_int_equal(cr_run("verify '%s'", out), 1);
  cr_assert_has(cr_out, "stackrec-5555-000001.zst: offset 0: a segment lost "
                        "before this recording was made",
                "\nDAMAGED: ");
  /* A link to a device under a segment name of the input's process (QA,
   * session 40: the reader's "unreadable segment" is an I/O warning, and
   * merge left no marker: OUT verified intact). */
  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-devlink"));
  snprintf(out, sizeof out, "%s", out_path("merge-devlink-out"));
  assert_int_equal(fx_std_write(d, FX_PID), 0);
  snprintf(fifo, sizeof fifo, "%s/stackrec-%u-000009.zst", d, FX_PID);
  assert_int_equal(symlink("/dev/zero", fifo), 0);
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 1);
  assert_int_equal(cr_run("verify '%s'", out), 1);
  char want[64];
  snprintf(want, sizeof want, "stackrec-%u-000009.zst: offset 0: a segment",
           FX_PID);
  cr_assert_has(cr_out, want, "\nDAMAGED: ");
}

/* A recording still being written: its incomplete last batch is left out
 * quietly; OUT holds everything before it. */
static void test_live_input(void **state) {
  char d[4096], out[4096];
  readback rb;
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-live"));
  snprintf(out, sizeof out, "%s", out_path("merge-live-out"));
  assert_int_equal(fx_std_write_live(d, FX_PID, 11), 0);

  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 0);
  assert_string_equal(cr_err, "");
  assert_non_null(strstr(cr_out, "1 process was still being written: its "
                                 "last, incomplete batch was left out\n"));
  rb = read_out(out);
  assert_int_equal(rb.events, 8);
  assert_int_equal(rb.warnings, 0); /* OUT ends at a whole batch */
  assert_false(rb.clean[0]);
}

/* A segment given by a name that is not a segment name: its pid comes from
 * its header, its seq becomes 1 (headers rewritten to match). */
static void test_file_not_named_as_a_segment(void **state) {
  char f[4400], out[4096], want[4600];
  stkr_fmt_buf buf = {0};
  readback rb;
  (void)state;

  snprintf(f, sizeof f, "%s/pulled-from-device.bin", fx_tmpdir("merge-anon"));
  assert_int_equal(fx_std_encode(0, 5, 31, &buf), 0); /* 2 headers: seq 1, 2 */
  assert_int_equal(fx_write_file(f, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);
  snprintf(out, sizeof out, "%s", out_path("merge-anon-out"));
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, f), 0);
  snprintf(want, sizeof want, "%s/stackrec-31-000001.zst", out);
  assert_int_equal(access(want, R_OK), 0);
  rb = read_out(out);
  assert_int_equal(rb.events, 9);
  assert_int_equal(rb.warnings, 0);
  assert_int_equal(cr_run("verify '%s'", out), 4); /* its drops */
}

static void test_refusals(void **state) {
  char d[4096], out[4096], path[4500], keep[4400];
  uint8_t before[1 << 16], after[1 << 16];
  size_t nb, na;
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-ref"));
  assert_int_equal(fx_std_write(d, FX_PID), 0);
  /* OUT is an input. */
  cr_expect(2, "is the input", "merge -o '%s' '%s'", d, d);
  snprintf(path, sizeof path, "%s/stackrec-%u-000001.zst", d, FX_PID);
  assert_int_equal(cr_run("merge -o '%s' '%s'", d, path), 2);
  snprintf(path, sizeof path, "%s/.", d);
  assert_int_equal(cr_run("merge -o '%s' '%s'", path, d), 2);
  /* OUT inside an input (QA, session 40: merge wrote DIR/sub, symbolize
   * `.` wrote ./.-symbolized into the recording): refused, nothing made;
   * symbolize's default OUT for "DIR/." lies beside DIR. */
  snprintf(path, sizeof path, "%s/sub", d);
  cr_expect(2, "is inside the input", "merge -o '%s' '%s'", path, d);
  cr_expect(2, "is inside DIR", "symbolize -o '%s' '%s'", path, d);
  assert_int_not_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/.", d);
  assert_int_equal(cr_run("symbolize '%s'", path), 0);
  snprintf(path, sizeof path, "%s-symbolized", d);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/.-symbolized", d);
  assert_int_not_equal(access(path, F_OK), 0);
  /* OUT holds segment files: never overwritten. */
  snprintf(out, sizeof out, "%s", fx_tmpdir("merge-ref-out"));
  assert_int_equal(fx_std_write(out, FX_PID), 0);
  snprintf(keep, sizeof keep, "%s/stackrec-%u-000001.zst", out, FX_PID);
  nb = read_file(keep, before, sizeof before);
  cr_expect(2, "already holds segment files", "merge -o '%s' '%s'", out, d);
  na = read_file(keep, after, sizeof after);
  assert_int_equal(na, nb);
  assert_memory_equal(before, after, nb);
  /* OUT is a file, or a link to nowhere: the same usage error from merge
   * and symbolize (session 41: a link to nowhere gave 1, symbolize said
   * "cannot write" twice, a file gave symbolize 1 too). */
  cr_expect(2, "is not a directory", "merge -o '%s' '%s'", keep, d);
  cr_expect(2, "is not a directory", "symbolize -o '%s' '%s'", keep, d);
  snprintf(path, sizeof path, "%s-link", out);
  assert_int_equal(symlink("/nonexistent/stkr-out", path), 0);
  cr_expect(2, "leads nowhere", "merge -o '%s' '%s'", path, d);
  cr_expect(2, "leads nowhere", "symbolize -o '%s' '%s'", path, d);
  /* Usage and missing input (OUT then not created). */
  snprintf(out, sizeof out, "%s", out_path("merge-ref-new"));
  assert_int_equal(cr_run("merge -o '%s' /nonexistent/rec", out), 3);
  /* An OUT that cannot be created is an output failure (1), not an input
   * that cannot be opened (3). */
  snprintf(keep, sizeof keep, "%s/plainfile", fx_tmpdir("merge-ref-f"));
  assert_int_equal(fx_write_file(keep, "x", 1), 0);
  snprintf(path, sizeof path, "%s/sub", keep);
  cr_expect(1, "cannot create", "merge -o '%s' '%s'", path, d);
  assert_int_equal(access(out, F_OK), -1);
  cr_expect(2, "no -o OUT given", "merge '%s'", d);
  assert_int_equal(cr_run("merge -o '%s'", out), 2);
  assert_int_equal(cr_run("merge --help"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec merge -o OUT"));
  assert_non_null(strstr(cr_out, "Exit status:"));
}

/* An input named twice (QA: `merge -o OUT r2 r2` said "merged 2 inputs"
 * and held r2 once): a usage error naming the repeat, whatever path leads
 * to it (DIR/., a symbolic link, a segment file of an input directory, a
 * file twice); OUT is not created. Distinct inputs still merge. */
static void test_repeated_input(void **state) {
  char d[4096], other[4096], out[4096], alias[4200], link[4200], seg[4200];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-rep"));
  assert_int_equal(fx_std_write(d, FX_PID), 0);
  snprintf(other, sizeof other, "%s", fx_tmpdir("merge-rep-other"));
  assert_int_equal(fx_std_write(other, 77), 0);
  snprintf(out, sizeof out, "%s", out_path("merge-rep-out"));
  snprintf(alias, sizeof alias, "%s/.", d);
  snprintf(link, sizeof link, "%s/link", fx_tmpdir("merge-rep-link"));
  assert_int_equal(symlink(d, link), 0);
  snprintf(seg, sizeof seg, "%s/stackrec-%u-000001.zst", d, FX_PID);

  cr_expect(2, "give each input once", "merge -o '%s' '%s' '%s' '%s'", out,
            d, other, d);
  assert_non_null(strstr(cr_err, d));
  cr_expect(2, "give each input once", "merge -o '%s' '%s' '%s'", out, d,
            alias);
  assert_non_null(strstr(cr_err, alias));
  cr_expect(2, "give each input once", "merge -o '%s' '%s' '%s'", out, link,
            d);
  cr_expect(2, "give each input once", "merge -o '%s' '%s' '%s'", out, d,
            seg);
  assert_non_null(strstr(cr_err, seg));
  cr_expect(2, "give each input once", "merge -o '%s' '%s' '%s'", out, seg,
            seg);
  assert_int_equal(access(out, F_OK), -1);
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, d, other), 0);
  assert_non_null(strstr(cr_out, "merged 2 inputs: 2 processes"));
  assert_int_equal(read_out(out).events, 18);
}

/* Two copies of one recording (a device's directory pulled twice, or
 * OUT merged again with one of its inputs): the same session of the same
 * pid in two inputs. Merged, every event counted twice and verify said
 * intact (QA, session 31); refused, nothing written. */
static void test_copies_of_one_recording(void **state) {
  const fx_one one = {.pid = 12, .session_id = 0x5eed};
  char d[4096], copy[4096], out[4096];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-copy"));
  snprintf(copy, sizeof copy, "%s", fx_tmpdir("merge-copy-2"));
  snprintf(out, sizeof out, "%s", out_path("merge-copy-out"));
  assert_int_equal(fx_write_one(d, &one), 0);
  assert_int_equal(fx_write_one(copy, &one), 0);
  cr_expect(2, "hold the same recording session 0000000000005eed of pid 12",
            "merge -o '%s' '%s' '%s'", out, d, copy);
  assert_non_null(strstr(cr_err, copy));
  assert_int_equal(access(out, F_OK), -1); /* made, then removed */
}

/* Process pid of recording dir, read whole: its parent and its external
 * marks (fails when dir has no such process). */
typedef struct proc_seen {
  uint32_t parent_pid;
  uint64_t external_marks;
} proc_seen;

static proc_seen proc_in(const char *dir, uint32_t pid) {
  readback rb;
  stkr_reader_opts o = {.warn = count_warning, .warn_arg = &rb};
  stkr_reader *r;
  stkr_event_view ev;
  proc_seen ps = {0, 0};
  bool found = false;

  assert_int_equal(stkr_reader_create(&o, &r), 0);
  assert_int_equal(stkr_reader_add(r, dir), 0);
  while (stkr_reader_next(r, &ev) == 1)
    ;
  for (size_t i = 0; i < stkr_reader_process_count(r); i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    if (p->pid == pid) {
      ps = (proc_seen){p->parent_pid, p->external_marks};
      found = true;
    }
  }
  stkr_reader_free(r);
  if (!found)
    fail_msg("no process %u in %s", (unsigned)pid, dir);
  return ps;
}

/* A mark set in one input stays with that input's processes (QA: OUT
 * handed it to every process, and compliance saw consent in a run that
 * never had it), also through a second merge that renumbers. */
static void test_marks_stay_with_their_input(void **state) {
  char d1[4096], d2[4096], d3[4096], out[4096], out2[4096], path[4200];
  sr_rec a = k_rec(100, 0x400000), b = k_rec(200, 0x400000);
  uint8_t text[4096];
  size_t n;
  (void)state;

  snprintf(d1, sizeof d1, "%s", fx_tmpdir("merge-marks1"));
  snprintf(d2, sizeof d2, "%s", fx_tmpdir("merge-marks2"));
  snprintf(d3, sizeof d3, "%s", fx_tmpdir("merge-marks3"));
  snprintf(out, sizeof out, "%s", out_path("merge-marks-out"));
  snprintf(out2, sizeof out2, "%s", out_path("merge-marks-out2"));
  assert_int_equal(sr_write(d1, &a), 0);
  assert_int_equal(sr_write(d2, &b), 0);
  assert_int_equal(sr_write(d3, &a), 0); /* pid 100 again */
  assert_int_equal(cr_run("mark '%s' consent.granted", d1), 0);

  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, d1, d2), 0);
  assert_int_equal(proc_in(out, 100).external_marks, 1);
  assert_int_equal(proc_in(out, 200).external_marks, 0);
  snprintf(path, sizeof path, "%s/stackrec.marks", out);
  n = read_file(path, text, sizeof text - 1);
  text[n] = '\0';
  /* The line as set, its clock field (since session 35) included. */
  if (strstr((char *)text, "s1 pids=100\nm1 ") == NULL ||
      strstr((char *)text, " consent.granted - ") == NULL ||
      strstr((char *)text, "\ns1 -\n") == NULL)
    fail_msg("OUT's marks file:\n%s", (char *)text);

  /* OUT's scoped line through a merge that renumbers d3's pid 100. */
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out2, out, d3), 0);
  assert_int_equal(proc_in(out2, 100).external_marks, 1);
  assert_int_equal(proc_in(out2, 200).external_marks, 0);
  assert_int_equal(proc_in(out2, 10000000).external_marks, 0);
  assert_int_equal(cr_run("verify '%s'", out2), 0);
  if (strstr(cr_out, "intact: 3 processes, 3 segments, 12 events\n") ==
      NULL)
    fail_msg("verify said:\n%s", cr_out);
}

/* QA (session 28): after a merge of two inputs marked once each,
 * `report` showed one mark: a `stackrec mark` mark was kept from the first
 * process that read its marks file only, and OUT's one file scopes each
 * input's marks to that input's processes. Each mark now counts once, by
 * its file, time and name. */
static void test_both_inputs_marks_reported(void **state) {
  char d1[4096], d2[4096], out[4096];
  sr_rec a = k_rec(100, 0x400000), b = k_rec(200, 0x400000);
  (void)state;

  write_two(d1, &a, d2, &b, out, "merge-bothmarks");
  assert_int_equal(cr_run("mark '%s' consent.granted", d1), 0);
  assert_int_equal(cr_run("mark '%s' app.background", d2), 0);
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, d1, d2), 0);
  assert_int_equal(cr_run("report '%s'", out), 0);
  cr_assert_has(cr_out, "# marks (not counted as events): 2:");
  cr_assert_has(cr_out, "consent.granted (stackrec mark)");
  cr_assert_has(cr_out, "app.background (stackrec mark)");
}

/* QA (session 28): a `stackrec mark` mark set 5 s into a recording read
 * "0 s" in `report` when a process of a lower pid started after it: the
 * mark's time counted from the first process that read it (pid order), and
 * a negative time became 0. It counts from the earliest process it
 * reached now. */
static void test_mark_time_from_earliest_process(void **state) {
  static const char line[] = "m1 6000000000 1700000005000000000 1 "
                             "app.background -\n";
  (void)state;

  /* The late process with the lower pid (read first), then (QA, session
   * 29) the other order: the early process read first, a child started
   * after the mark read next. The child's start is not known when its
   * marks are handed over (before its Header), and taken as 0 it won:
   * "0 s" again. */
  for (int order = 0; order < 2; order++) {
    char d[4096], path[4200];
    sr_rec late = k_rec(order ? 200 : 100, 0x400000),
           early = k_rec(order ? 100 : 200, 0x400000);
    late.start_ns = 11000000000ull; /* starts 10 s after the other */
    snprintf(d, sizeof d, "%s",
             fx_tmpdir(order ? "merge-marktime-child" : "merge-marktime"));
    assert_int_equal(sr_write(d, &late), 0);
    assert_int_equal(sr_write(d, &early), 0);
    snprintf(path, sizeof path, "%s/stackrec.marks", d);
    assert_int_equal(fx_write_file(path, line, sizeof line - 1), 0);
    assert_int_equal(cr_run("report '%s'", d), 0);
    cr_assert_has(cr_out, "# marks (not counted as events): 1: 5 s "
                          "app.background (stackrec mark)");
  }
}

/* The reader's side of merge's scope lines ("s1 pids=..." before marks,
 * "s1 -" after): a mark goes to the processes its scope names only; a
 * malformed scope line is a warning and gives the marks after it to no
 * process (never to the wrong ones) until the next scope line. */
static void test_scope_lines(void **state) {
  char d[4096], path[4200];
  sr_rec a = k_rec(40, 0x400000), b = k_rec(41, 0x400000);
  const char *text = "m1 4 6 7 a.all -\n"           /* both */
                     "s1 pids=40\n"
                     "m1 5 6 7 a.one -\n"           /* 40 */
                     "s1 pids=1-3\n"
                     "m1 6 6 7 a.two -\n"           /* none */
                     "s1 pids=2,39-41,99\n"
                     "m1 7 6 7 a.three -\n"         /* both */
                     "s1 pids=0\n"                  /* malformed: */
                     "m1 8 6 7 a.none -\n"          /* none */
                     "s1 pids=\ns1 pids=5-3\ns1 pids=1,,2\n"
                     "s1 pids=4294967296\ns1 pids=1 2\ns1 pid=1\n"
                     "s1 -\n"
                     "m1 9 6 7 a.end -\n";          /* both */
  readback rb;
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-scoped"));
  assert_int_equal(sr_write(d, &a), 0);
  assert_int_equal(sr_write(d, &b), 0);
  snprintf(path, sizeof path, "%s/stackrec.marks", d);
  assert_int_equal(fx_write_file(path, text, strlen(text)), 0);
  assert_int_equal(proc_in(d, 40).external_marks, 4);
  assert_int_equal(proc_in(d, 41).external_marks, 3);
  rb = read_out(d);
  assert_int_equal(rb.warnings, 7);
  assert_int_equal(rb.events, 8 + 7); /* read_out counts marks too */
}

/* A forked child renumbered with its parent names the parent's new pid (QA:
 * it named the other input's process that kept the pid); a child whose
 * parent is not in its input, while another input has that pid, gets 0
 * (unknown) rather than a stranger. */
static void test_parent_follows_renumbering(void **state) {
  char d1[4096], d2[4096], d3[4096], out[4096];
  sr_rec parent = k_rec(300, 0x400000), child = k_rec(301, 0x400000);
  sr_rec orphan = k_rec(401, 0x400000);
  (void)state;

  child.parent_pid = 300;
  orphan.parent_pid = 300;
  snprintf(d1, sizeof d1, "%s", fx_tmpdir("merge-parent1"));
  snprintf(d2, sizeof d2, "%s", fx_tmpdir("merge-parent2"));
  snprintf(d3, sizeof d3, "%s", fx_tmpdir("merge-parent3"));
  snprintf(out, sizeof out, "%s", out_path("merge-parent-out"));
  for (int i = 0; i < 2; i++) {
    assert_int_equal(sr_write(i ? d2 : d1, &parent), 0);
    assert_int_equal(sr_write(i ? d2 : d1, &child), 0);
  }
  assert_int_equal(sr_write(d3, &orphan), 0);

  assert_int_equal(cr_run("merge -o '%s' '%s' '%s' '%s'", out, d1, d2, d3),
                   0);
  assert_int_equal(proc_in(out, 301).parent_pid, 300);
  assert_int_equal(proc_in(out, 10000000).parent_pid, 0);
  assert_int_equal(proc_in(out, 10000001).parent_pid, 10000000);
  assert_int_equal(proc_in(out, 401).parent_pid, 0);
  assert_int_equal(cr_run("verify '%s'", out), 0);
}

/* Review of the parent fix: a child read before its parent (a lower pid)
 * does not take the parent's pid out of turn (the first input keeps 500);
 * a parent in a file not named as a segment, and files named by two
 * paths to one directory, are still the same input. */
static void test_parent_corner_cases(void **state) {
  char d4[4096], d5[4096], out[4096], out2[4096], a[4300], b[4300];
  sr_rec p500 = k_rec(500, 0x400000), c301 = k_rec(301, 0x400000);
  sr_rec p300 = k_rec(300, 0x400000), c302 = k_rec(302, 0x400000);
  (void)state;

  c301.parent_pid = 500;
  c302.parent_pid = 300;
  snprintf(d4, sizeof d4, "%s", fx_tmpdir("merge-parent4"));
  assert_int_equal(sr_write(d4, &p500), 0);
  snprintf(d5, sizeof d5, "%s", fx_tmpdir("merge-parent5"));
  assert_int_equal(sr_write(d5, &p500), 0);
  assert_int_equal(sr_write(d5, &c301), 0);
  snprintf(out, sizeof out, "%s", out_path("merge-parent45"));
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, d4, d5), 0);
  cr_assert_text(cr_line(cr_out, 0),
                 "process 500 of %s written as process 10000000 (pid 500 "
                 "was taken)", d5);
  assert_int_equal(proc_in(out, 301).parent_pid, 10000000);

  /* d4: the parent's segment renamed (pid from its Header), the child
   * named through "/./". */
  assert_int_equal(sr_write(d4, &p300), 0);
  assert_int_equal(sr_write(d4, &c302), 0);
  snprintf(a, sizeof a, "%s/stackrec-300-000001.zst", d4);
  snprintf(b, sizeof b, "%s/parent.zst", d4);
  assert_int_equal(rename(a, b), 0);
  snprintf(a, sizeof a, "%s/./stackrec-302-000001.zst", d4);
  snprintf(out2, sizeof out2, "%s", out_path("merge-parent-file"));
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out2, b, a), 0);
  assert_int_equal(proc_in(out2, 302).parent_pid, 300);
}

/* A scope line is written once per input, not once per mark: 200
 * processes with scattered pids and 500 marks add one line of pids (the
 * file grew with marks x processes: 12,000 marks of 1,500 processes made
 * 90 MB, past what a reader reads). */
static void test_scope_written_once(void **state) {
  char d[4096], out[4096], path[4200], line[128];
  struct stat in_st, out_st;
  FILE *f;
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("merge-many-marks"));
  snprintf(out, sizeof out, "%s", out_path("merge-many-marks-out"));
  for (uint32_t pid = 2; pid <= 400; pid += 2) {
    sr_rec r = k_rec(pid, 0x400000);
    assert_int_equal(sr_write(d, &r), 0);
  }
  snprintf(path, sizeof path, "%s/stackrec.marks", d);
  assert_non_null(f = fopen(path, "w"));
  for (int i = 0; i < 500; i++) {
    snprintf(line, sizeof line, "m1 %d 6 7 screen.s%d -\n", 1000 + i, i);
    fputs(line, f);
  }
  fclose(f);
  assert_int_equal(stat(path, &in_st), 0);
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 0);
  snprintf(path, sizeof path, "%s/stackrec.marks", out);
  assert_int_equal(stat(path, &out_st), 0);
  /* 200 pids of up to 4 digits: ~1 KB of scope line. */
  assert_true(out_st.st_size < in_st.st_size + 1200);
  assert_int_equal(proc_in(out, 400).external_marks, 500);

  /* Two inputs whose marks together pass what a reader reads: said, exit
   * 1 (merge exited 0 and readers later ignored the tail: review). */
  snprintf(path, sizeof path, "%s/stackrec.marks", d);
  assert_non_null(f = fopen(path, "w"));
  for (int i = 0; i < 60000; i++)
    fprintf(f, "m1 %d 6 7 screen.s -\n", 1000 + i);
  fclose(f);
  snprintf(path, sizeof path, "%s-2", d);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(tl_system("cp -a '%s/.' '%s/'", d, path), 0);
  snprintf(out, sizeof out, "%s", out_path("merge-too-many-marks"));
  cr_expect(1, "what readers read", "merge -o '%s' '%s' '%s'", out, d,
            path);
}

/* `diff` of a run against the merge of it with a run three minutes later:
 * the recording time is the runs' 6 s each, not the gap between them, so
 * no rate changed (QA: every path's rate fell by 97%). */
static void test_diff_of_merged_runs(void **state) {
  static const sr_event slow[] = {{1, 1, 0},
                                  {1, 1, 2000000000},
                                  {1, 1, 2000000000},
                                  {2, 1, 2000000000}};
  char d1[4096], d2[4096], out[4096];
  sr_rec a = k_rec(100, 0x400000), b = k_rec(100, 0x400000);
  (void)state;

  a.evs = b.evs = slow;
  b.start_ns = a.start_ns + 180000000000ull;
  assert_int_equal(merge_two(d1, &a, d2, &b, out, "merge-diff"), 0);
  assert_int_equal(cr_run("diff --min-count 1 '%s' '%s'", d1, out), 0);
  if (strstr(cr_out, "RATE CHANGED: 0\n") == NULL)
    fail_msg("diff said:\n%s", cr_out);
  assert_non_null(strstr(cr_out, ": 4 events from 1 process, 0.1 min\n"));
  assert_non_null(strstr(cr_out, ": 8 events from 2 processes, 0.2 min\n"));
}

TL_TEST_MAIN("merge", setup, NULL, test_two_builds_add_up_and_merge_by_frames,
             test_unreadable_segment_stays_lost,
             test_pid_taken_twice, test_damaged_input, test_live_input,
             test_file_not_named_as_a_segment, test_refusals,
             test_repeated_input, test_copies_of_one_recording,
             test_marks_stay_with_their_input,
             test_both_inputs_marks_reported,
             test_mark_time_from_earliest_process,
             test_scope_lines, test_parent_follows_renumbering,
             test_parent_corner_cases, test_scope_written_once,
             test_diff_of_merged_runs)
