/*
 * test-verify.c: `stackrec verify` (//tools:stackrec) on intact, damaged,
 * truncated, live, inconsistent, newer-format, empty and foreign inputs:
 * the problem lines (file, offset, reason), the per-process lines, the
 * last line and the exit status (0 intact, 1 damaged, 2 usage, 3 cannot
 * open).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_ringfile.h"
#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

static int setup(void **state) {
  (void)state;
  return cr_setup();
}

/* Standard batches [from, to) as dir/stackrec-<pid>-<seq>.zst, the first
 * `cut` bytes only if cut is not 0. @return the file's size. */
static size_t write_seg(const char *dir, uint32_t pid, uint32_t seq, int from,
                        int to, size_t cut, char *path, size_t plen) {
  stkr_fmt_buf buf = {0};
  size_t len;

  assert_int_equal(fx_clean_encode(from, to, pid, &buf), 0);
  len = cut ? cut : buf.len;
  snprintf(path, plen, "%s/stackrec-%u-%06u.zst", dir, (unsigned)pid,
           (unsigned)seq);
  assert_int_equal(fx_write_file(path, buf.data, len), 0);
  stkr_fmt_buf_free(&buf);
  return len;
}

static size_t frame_end(int from, int to) {
  stkr_fmt_buf buf = {0};
  size_t n;

  assert_int_equal(fx_clean_encode(from, to, FX_PID, &buf), 0);
  n = buf.len;
  stkr_fmt_buf_free(&buf);
  return n;
}

/* len bytes of data written as dir/name. */
static void put_file(const char *dir, const char *name, const void *data,
                     size_t len) {
  char path[4200];

  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(fx_write_file(path, data, len), 0);
}

/* The clean recording (the standard batches without drops): batches 0..2
 * in segment 1, 3..4 in segment 2. @return 0, as fx_std_write (a failure
 * fails the test). */
static int write_clean(const char *dir, uint32_t pid) {
  char path[4200];

  write_seg(dir, pid, 1, 0, 3, 0, path, sizeof path);
  write_seg(dir, pid, 2, 3, 5, 0, path, sizeof path);
  return 0;
}

/* Cases that differ in their recording only: `stackrec verify` on it
 * exits with status, says nothing on stderr and prints exactly want (its
 * %s: the directory). */
typedef struct whole_case {
  const char *name;
  const char *tag;                             /* fx_tmpdir(tag) */
  int (*write)(const char *dir, uint32_t pid); /* the recording */
  int status;
  const char *want;
} whole_case;

static const whole_case g_whole[] = {
    /* The clean recording: intact, exit 0. */
    {"test_intact", "verify-ok", write_clean, 0,
     "process 4242 \"fixture\" in %s: 2 segments, 5 batches, 9 "
     "events: intact\n"
     "  accounting: attempted 9, written 9, dropped 0 (ring full "
     "0, reentrant 0, other 0, write error 0, exit 0), recovered "
     "0: adds up\n"
     "intact: 1 process, 2 segments, 9 events\n"},
    /* The standard recording counts drops: intact but incomplete, exit 4,
     * with the figures by reason. */
    {"test_drops_are_incomplete", "verify-drops", fx_std_write, 4,
     "process 4242 \"fixture\" in %s: 2 segments, 5 batches, 9 "
     "events: intact, INCOMPLETE\n"
     "  accounting: attempted 23, written 9, dropped 14 (ring full "
     "6, reentrant 2, other 4, write error 2, exit 0), recovered "
     "0: adds up\n"
     "incomplete: process 4242: 14 events dropped by the recorder "
     "(ring full 6, reentrant 2, other 4, write error 2, exit 0)\n"
     "INCOMPLETE: 1 finding in 1 of 1 process, 2 segments, 9 "
     "events read\n"},
};

static void test_whole_output(void **state) {
  const whole_case *c = *state;
  const char *d = fx_tmpdir(c->tag);

  assert_int_equal(c->write(d, FX_PID), 0);
  assert_int_equal(cr_run("verify '%s'", d), c->status);
  assert_string_equal(cr_err, "");
  cr_assert_text(cr_out, c->want, d);
}

/* A flipped bit in batch 1 of segment 1 (segment 2 follows). */
static void test_bit_flip(void **state) {
  const char *d = fx_tmpdir("verify-flip");
  char path[4200], p2[4200], want[4400];
  stkr_fmt_buf buf = {0};
  size_t end0 = frame_end(0, 1);
  (void)state;

  assert_int_equal(fx_clean_encode(0, 3, FX_PID, &buf), 0);
  buf.data[end0 + 30] ^= 0x08;
  snprintf(path, sizeof path, "%s/stackrec-%u-000001.zst", d, FX_PID);
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);
  write_seg(d, FX_PID, 2, 3, 5, 0, p2, sizeof p2);

  assert_int_equal(cr_run("verify '%s'", d), 1);
  snprintf(want, sizeof want, "damaged: %s: offset %zu: damaged batch (", path,
           end0);
  assert_memory_equal(cr_line(cr_out, 0), want, strlen(want));
  assert_non_null(strstr(cr_line(cr_out, 0), "skipped"));
  /* The lost batch's 2 events show in the accounting too. */
  cr_assert_text(cr_line(cr_out, 1),
                 "incomplete: %s: process 4242 session 1: 2 events attempted "
                 "but neither read nor counted as dropped (attempted 9, "
                 "written 7, dropped 0, recovered 0)", p2);
  snprintf(want, sizeof want,
           "process 4242 \"fixture\" in %s: 2 segments, 4 batches, 7 events: "
           "DAMAGED (1 batch lost)", d);
  cr_assert_lines(cr_out, 2, want,
                  "  accounting: attempted 9, written 7, dropped 0 (ring "
                  "full 0, reentrant 0, other 0, write error 0, exit 0), "
                  "recovered 0: 2 not accounted for",
                  "DAMAGED: 1 problem in 1 process, 2 segments");
  /* The damaged batch is not also "1 batch missing" (QA, session 44). */
  assert_int_equal(cr_count_lines(cr_out), 5);
  /* info calls it incomplete for its damage too, as verify does (QA,
   * session 47: "complete: yes" beside "damaged: 1 batch"). */
  (void)cr_run("info '%s'", d);
  cr_assert_has(cr_out, "  complete:    NO: damaged (see below); ");
  (void)cr_run("info --json '%s'", d);
  cr_assert_has(cr_out, "\"complete\":false,\"incomplete\":[\"damaged\",");
}

/* Segment 1 cut short, segment 2 after it: damage, not a live tail. */
static void test_truncated_before_a_later_segment(void **state) {
  const char *d = fx_tmpdir("verify-trunc");
  char path[4200], p2[4200];
  size_t end1 = frame_end(0, 2);
  (void)state;

  write_seg(d, FX_PID, 1, 0, 3, end1 + 10, path, sizeof path);
  write_seg(d, FX_PID, 2, 3, 5, 0, p2, sizeof p2);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_text(cr_line(cr_out, 0),
                 "damaged: %s: offset %zu: truncated batch (10 bytes), ignored",
                 path, end1);
  assert_non_null(strstr(cr_out, "DAMAGED (1 batch lost)\n"));
}

/* The last segment of a process that has not ended, cut short: a
 * recording still being written (or a writer killed mid-batch). The cut
 * batch is a note, not damage; the missing clean end makes it incomplete:
 * exit 4. "Still being written" only while its writer runs (QA: a dead
 * writer's torn file said so): pid 4242 runs no writer here; then the
 * same files of this process, holding the session file's lock as a
 * recorder does. */
static void test_live_tail_is_incomplete(void **state) {
  const char *d = fx_tmpdir("verify-live");
  char path[4200], p2[4200], name[STKR_RINGFILE_NAME_MAX];
  size_t end3 = frame_end(3, 4);
  uint32_t me = (uint32_t)getpid();
  int fd;
  (void)state;

  write_seg(d, FX_PID, 1, 0, 3, 0, path, sizeof path);
  write_seg(d, FX_PID, 2, 3, 5, end3 + 7, p2, sizeof p2);
  assert_int_equal(cr_run("verify '%s'", d), 4);
  assert_string_equal(cr_err, "");
  cr_assert_text(cr_line(cr_out, 0),
                 "note: %s: offset %zu: incomplete last batch (7 bytes): the "
                 "recording is still being written (or its writer stopped "
                 "mid-batch); not read", p2, end3);
  cr_assert_text(cr_line(cr_out, 1),
                 "incomplete: %s: process 4242 session 1: no clean end "
                 "read: its last batch was cut off mid-write (the process "
                 "died while writing it, the disk filled, or the file was "
                 "cut since), or the process was killed, crashed or called "
                 "_exit before it; 8 events read, no counters read", p2);
  assert_non_null(strstr(cr_out, " 4 batches, 8 events: intact, INCOMPLETE, "
                                 "last batch cut off mid-write\n"));
  assert_string_equal(cr_line(cr_out, 4),
                      "INCOMPLETE: 1 finding in 1 of 1 process, 2 segments, "
                      "8 events read");

  d = fx_tmpdir("verify-live-running");
  for (int seg = 1; seg <= 2; seg++) {
    stkr_fmt_buf buf = {0};
    size_t cut = 0;
    /* Segment 2: batch 3 whole, then 7 bytes of batch 4. */
    assert_int_equal(fx_clean_encode_session(seg == 1 ? 0 : 3, seg == 1 ? 3 : 4,
                                             me, 0x51, &buf), 0);
    if (seg == 2) {
      cut = buf.len + 7;
      assert_int_equal(fx_clean_encode_session(4, 5, me, 0x51, &buf), 0);
    }
    snprintf(path, sizeof path, "%s/stackrec-%u-%06d.zst", d, (unsigned)me,
             seg);
    assert_int_equal(fx_write_file(path, buf.data, cut ? cut : buf.len), 0);
    stkr_fmt_buf_free(&buf);
  }
  stkr_ringfile_name(name, me, 0x51, 0);
  snprintf(path, sizeof path, "%s/%s", d, name);
  assert_true((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  assert_int_equal(cr_run("verify '%s'", d), 4);
  assert_non_null(strstr(cr_out, " 4 batches, 8 events: intact, INCOMPLETE, "
                                 "still being written\n"));
  /* Alive with no batch being written (segment 2 ends whole): info says
   * "not yet", and its JSON "live" (it said "not clean", the word for a
   * process that died: QA, session 29). */
  {
    stkr_fmt_buf buf = {0};
    assert_int_equal(fx_clean_encode_session(3, 4, me, 0x51, &buf), 0);
    snprintf(p2, sizeof p2, "%s/stackrec-%u-%06d.zst", d, (unsigned)me, 2);
    assert_int_equal(fx_write_file(p2, buf.data, buf.len), 0);
    stkr_fmt_buf_free(&buf);
  }
  assert_int_equal(cr_run("info '%s'", d), 0);
  assert_non_null(strstr(cr_out, "end:         not yet (still recording"));
  assert_int_equal(cr_run("info --json '%s'", d), 0);
  assert_non_null(strstr(cr_out, "\"end\":\"live\""));
  close(fd);
}

/* Events whose ids have no definition: reported per batch, with offset. */
static void test_undefined_ids(void **state) {
  static const uint32_t s3[] = {1, 2, 3}, t2[] = {1, 2}, k3[] = {1, 2, 3};
  static const fx_ev e1[] = {{0, 1, 1, 9, NULL, 0, false},
                             {5, 1, 1, 1, NULL, 0, false},
                             {5, 7, 1, 1, NULL, 0, false}};
  static const fx_ev e2[] = {{0, 2, 5, 2, NULL, 0, false}};
  fx_batch b1 = {.seq = 1, .header = true, .segment_seq = 1, .sites = s3,
                 .n_sites = 3, .threads = t2, .n_threads = 2, .stacks = k3,
                 .n_stacks = 3, .base_ts = 5000, .evs = e1, .n_evs = 3};
  fx_batch b2 = {.seq = 2, .base_ts = 6000, .evs = e2, .n_evs = 1,
                 .last = true};
  const char *d = fx_tmpdir("verify-ids");
  char path[4200];
  stkr_fmt_buf buf = {0};
  size_t off2;
  (void)state;

  assert_int_equal(fx_encode(&b1, &buf), 0);
  off2 = buf.len;
  assert_int_equal(fx_encode(&b2, &buf), 0);
  snprintf(path, sizeof path, "%s/stackrec-%u-000001.zst", d, FX_PID);
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);

  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_text(cr_line(cr_out, 0),
                 "damaged: %s: offset 0: 2 events of this batch refer to ids "
                 "with no definition (the first: site 1, thread 1, stack 9)",
                 path);
  cr_assert_text(cr_line(cr_out, 1),
                 "damaged: %s: offset %zu: 1 event of this batch refers to ids "
                 "with no definition (the first: site 2, thread 5, stack 2)",
                 path, off2);
  assert_non_null(strstr(cr_line(cr_out, 2),
                         ": 1 segment, 2 batches, 4 events: 3 events with "
                         "undefined ids"));
  cr_assert_lines(cr_out, 3,
                  "  accounting: attempted 0, written 4, dropped 0 (ring "
                  "full 0, reentrant 0, other 0, write error 0, exit 0), "
                  "recovered 0 (no counters recorded)",
                  "DAMAGED: 2 problems in 1 process, 1 segment");
}

static void test_newer_format_and_inconsistent(void **state) {
  static const uint32_t s1[] = {1}, t1[] = {1}, k1[] = {1};
  static const fx_ev e[] = {{0, 1, 1, 1, NULL, 0, false}};
  fx_batch b = {.seq = 1, .header = true, .segment_seq = 1,
                .format_version = 2, .pid = 9, .sites = s1, .n_sites = 1,
                .threads = t1, .n_threads = 1, .stacks = k1, .n_stacks = 1,
                .base_ts = 5, .evs = e, .n_evs = 1};
  const char *d = fx_tmpdir("verify-ver");
  char path[4200];
  stkr_fmt_buf buf = {0};
  (void)state;

  assert_int_equal(fx_encode(&b, &buf), 0);
  snprintf(path, sizeof path, "%s/stackrec-9-000001.zst", d);
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  stkr_fmt_buf_free(&buf);
  /* pid 6's file holds batches whose headers say pid 5. */
  write_seg(d, 5, 1, 0, 3, 0, path, sizeof path);
  {
    char p6[4200];
    snprintf(p6, sizeof p6, "%s/stackrec-6-000001.zst", d);
    assert_int_equal(rename(path, p6), 0);
  }
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out,
                "inconsistent: ",
                "stackrec-6-000001.zst: offset 0: header "
                "says pid 5, file name says 6\n",
                "damaged: ",
                "stackrec-9-000001.zst: offset 0: format "
                "version 2 is newer",
                "process 9 \"\" in ",
                ": 1 segment, 0 batches, 0 events: NOT READ "
                "(newer format version)\n",
                "\nDAMAGED: 2 problems in 2 processes, 2 "
                "segments\n");
  /* The views say the misnamed file too (QA, session 44: info said
   * "complete: yes", report nothing at its top). Exit 1: the newer
   * format's process is not read. */
  assert_int_equal(cr_run("info '%s'", d), 1);
  cr_assert_has(cr_out, "  complete:    NO: ",
                "; 1 segment named for another process or number\n",
                "  misnamed:    1 segment whose header names another "
                "process or number");
  assert_int_equal(cr_run("report '%s'", d), 1);
  cr_assert_has(cr_out, "# INCONSISTENT: 1 segment file named for another "
                        "process or number than its header says");

  /* The misnamed file alone: the INCOMPLETE line of report and dump
   * names it (QA, session 47: "(pid 6):" and nothing after it). */
  d = fx_tmpdir("verify-misnamed-alone");
  write_seg(d, 5, 1, 0, 3, 0, path, sizeof path);
  {
    char p6[4200];
    snprintf(p6, sizeof p6, "%s/stackrec-6-000001.zst", d);
    assert_int_equal(rename(path, p6), 0);
  }
  (void)cr_run("report '%s'", d);
  cr_assert_has(cr_out, "# INCOMPLETE: 1 of 1 process (pid 6): ",
                "1 segment named for another process or number\n");
  (void)cr_run("dump '%s'", d);
  cr_assert_has(cr_err, "(pid 6): ", "1 segment named for another process "
                                     "or number; the dump may lack");
}

/* Unrelated files: a note. An empty segment (a writer that died before its
 * first flush, e.g. a pool worker ended by SIGTERM): incomplete, status 4.
 * A file that is not zstd at all: damage. */
static void test_notes_and_foreign_files(void **state) {
  const char *d = fx_tmpdir("verify-notes");
  (void)state;

  write_clean(d, FX_PID);
  put_file(d, "README", "x", 1);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  cr_assert_has(cr_out,
                "note: ",
                "ignored 1 entry",
                "\"README\"",
                "\nintact: 1 process, 2 segments, 9 "
                "events\n");
  put_file(d, "stackrec-77-000001.zst", NULL, 0);
  assert_int_equal(cr_run("verify '%s'", d), 4);
  cr_assert_has(cr_out,
                "\nincomplete: ",
                "stackrec-77-000001.zst: empty file, "
                "skipped: a segment without any batch (its "
                "writer ended before its first flush, or "
                "has just started)\n",
                "process 77 \"\" in ",
                ": 1 segment, 0 batches, 0 events: intact, "
                "INCOMPLETE\n  accounting: no batch read\n",
                "\nINCOMPLETE: 1 finding in 1 of 2 "
                "processes, 3 segments, 9 events read\n");

  put_file(d, "stackrec-78-000001.zst", "GIF89a....", 10);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out, "damaged: ", "stackrec-78-000001.zst: not a zstd file");
  /* Said once, as damage: not also as a segment whose writer ended before
   * its first batch (QA, session 46: `verify /etc/passwd`). */
  assert_null(strstr(cr_out, "process 78: segment 1 holds no intact batch"));
  /* One segment given by a name that is not a segment name. */
  {
    stkr_fmt_buf buf = {0};
    char f[4200];
    assert_int_equal(fx_clean_encode(0, 5, 31, &buf), 0);
    snprintf(f, sizeof f, "%s/copy.bin", fx_tmpdir("verify-anon"));
    assert_int_equal(fx_write_file(f, buf.data, buf.len), 0);
    stkr_fmt_buf_free(&buf);
    assert_int_equal(cr_run("verify '%s'", f), 0);
    assert_non_null(strstr(cr_out, "process 31 \"fixture\" in "));
  }
}

/* Entries named like segments that are no regular file (QA: they were
 * "ignored entries", verify said intact with exit 0, and their process
 * was gone): a FIFO, a directory, a socket, a dangling and a looping
 * symbolic link. Each is damage named by its path (exit 1), never opened
 * (a FIFO would block the reader), its process still listed, and the
 * segments beside it are read. A symbolic link to a segment is followed:
 * an intact recording. */
static void test_segment_names_that_are_not_files(void **state) {
  static const struct {
    const char *tag, *why;
  } k[] = {
      {"verify-nf-fifo", "a FIFO, not a regular file"},
      {"verify-nf-dir", "a directory, not a regular file"},
      {"verify-nf-sock", "a socket, not a regular file"},
      {"verify-nf-dangling", "a symbolic link: No such file or directory"},
      {"verify-nf-loop",
       "a symbolic link: Too many levels of symbolic links"},
  };
  char d[4096], bad[4200], seg[4200], kept[4200];
  size_t i;
  (void)state;

  for (i = 0; i < sizeof k / sizeof k[0]; i++) {
    snprintf(d, sizeof d, "%s", fx_tmpdir(k[i].tag));
    write_clean(d, FX_PID);
    snprintf(bad, sizeof bad, "%s/stackrec-77-000001.zst", d);
    if (i == 0)
      assert_int_equal(mkfifo(bad, 0600), 0);
    else if (i == 1)
      assert_int_equal(mkdir(bad, 0700), 0);
    else if (i == 2)
      assert_int_equal(mknod(bad, S_IFSOCK | 0600, 0), 0);
    else
      assert_int_equal(symlink(i == 3 ? "gone.zst" : "stackrec-77-000001.zst",
                               bad), 0);
    assert_int_equal(cr_run("verify '%s'", d), 1);
    assert_string_equal(cr_err, "");
    cr_assert_text(cr_out,
                   "damaged: %s: unreadable segment (%s), not read\n"
                   "process 77 \"\" in %s: 1 segment, 0 batches, 0 events: "
                   "1 segment unreadable\n"
                   "  accounting: no batch read\n"
                   "process 4242 \"fixture\" in %s: 2 segments, 5 batches, "
                   "9 events: intact\n"
                   "  accounting: attempted 9, written 9, dropped 0 (ring "
                   "full 0, reentrant 0, other 0, write error 0, exit 0), "
                   "recovered 0: adds up\n"
                   "DAMAGED: 1 problem in 2 processes, 3 segments\n",
                   bad, k[i].why, d, d);
    /* The other readers warn, name it and exit 1 (data lost). */
    cr_expect(1, "unreadable segment", "report '%s'", d);
    assert_non_null(strstr(cr_err, bad));
    assert_non_null(strstr(cr_out, "# 9 events from 2 processes"));
    /* symbolize reads segments itself: it waited forever on the FIFO.
     * Its OUT keeps the loss: a marker in the segment's place. */
    snprintf(seg, sizeof seg, "%s.sym", d);
    cr_expect(1, bad, "symbolize -o '%s' '%s'", seg, d);
    assert_int_equal(cr_run("verify '%s'", seg), 1);
    cr_assert_has(cr_out, "stackrec-77-000001.zst: offset 0: a segment lost "
                          "before this recording was made",
                  "process 4242 \"fixture\" in ");
    cr_assert_has(cr_out, "\nDAMAGED: 1 problem in 2 processes, 3 segments\n");
  }

  /* A symbolic link to a segment elsewhere is that segment. */
  snprintf(d, sizeof d, "%s", fx_tmpdir("verify-nf-link"));
  write_clean(d, FX_PID);
  snprintf(kept, sizeof kept, "%s/kept.bin", fx_tmpdir("verify-nf-target"));
  snprintf(seg, sizeof seg, "%s/stackrec-%u-000002.zst", d, FX_PID);
  assert_int_equal(rename(seg, kept), 0);
  assert_int_equal(symlink(kept, seg), 0);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  assert_string_equal(cr_err, "");
  cr_assert_has(cr_out, "\nintact: 1 process, 2 segments, 9 events\n");
}

/* FIFOs named like a session file and a ring file beside an intact
 * recording (QA: verify's dry run of recovery opened the session FIFO and
 * waited for a writer forever; recover too on the ring FIFO). The session
 * is named as not recovered, its process's segments are still read. */
static void test_ring_names_that_are_not_files(void **state) {
  char d[4096], sess[4200], ring[4200];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("verify-nf-ring"));
  write_clean(d, FX_PID);
  snprintf(sess, sizeof sess, "%s/stackrec-77-00000000000000ab.session", d);
  snprintf(ring, sizeof ring, "%s/stackrec-77-00000000000000ab-1.ring", d);
  assert_int_equal(mkfifo(sess, 0600), 0);
  assert_int_equal(mkfifo(ring, 0600), 0);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out, "not a regular file");
  cr_assert_has(cr_out, sess);
  cr_assert_has(cr_out, "process 4242 \"fixture\" in ");
  assert_int_equal(cr_run("recover '%s'", d), 1);
  cr_assert_has(cr_err, "not a regular file");
}

/* Recompress every frame of src without the content size in its header
 * (zstd allows it; the checksum stays on). */
static void strip_content_size(const stkr_fmt_buf *src, stkr_fmt_buf *dst) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  size_t off = 0;

  assert_non_null(c);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  while (off < src->len) {
    size_t cs = ZSTD_findFrameCompressedSize(src->data + off, src->len - off);
    unsigned long long ds = ZSTD_getFrameContentSize(src->data + off, cs);
    uint8_t *plain = malloc(ds + 1), *z = malloc(ZSTD_compressBound(ds));
    size_t n, zn;

    assert_non_null(plain);
    assert_non_null(z);
    n = ZSTD_decompress(plain, ds + 1, src->data + off, cs);
    assert_int_equal(n, ds);
    /* Streamed: a one-shot compress would know the size and write it. */
    {
      ZSTD_inBuffer ib = {plain, n, 0};
      ZSTD_outBuffer ob = {z, ZSTD_compressBound(ds), 0};
      assert_int_equal(ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_end), 0);
      zn = ob.pos;
    }
    assert_int_equal(ZSTD_getFrameContentSize(z, zn),
                     ZSTD_CONTENTSIZE_UNKNOWN);
    if (dst->len + zn > dst->cap) {
      dst->cap = (dst->len + zn) * 2;
      dst->data = realloc(dst->data, dst->cap);
      assert_non_null(dst->data);
    }
    memcpy(dst->data + dst->len, z, zn);
    dst->len += zn;
    free(plain);
    free(z);
    off += cs;
  }
  ZSTD_freeCCtx(c);
}

/* Frames without a content size: intact for verify AND for symbolize (one
 * rule, stkr_fmt_frame_check); issue 9 had symbolize call them damaged. */
static void test_frames_without_content_size(void **state) {
  const char *dd = fx_tmpdir("verify-nosize");
  char d[4096], path[4200], out[4200];
  stkr_fmt_buf buf = {0}, stripped = {0};
  (void)state;

  snprintf(d, sizeof d, "%s", dd);
  for (int seg = 1; seg <= 2; seg++) {
    buf.len = stripped.len = 0;
    assert_int_equal(fx_clean_encode(seg == 1 ? 0 : 3, seg == 1 ? 3 : 5,
                                     FX_PID, &buf), 0);
    strip_content_size(&buf, &stripped);
    snprintf(path, sizeof path, "%s/stackrec-%u-%06d.zst", d, FX_PID, seg);
    assert_int_equal(fx_write_file(path, stripped.data, stripped.len), 0);
  }
  stkr_fmt_buf_free(&buf);
  stkr_fmt_buf_free(&stripped);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  assert_non_null(strstr(cr_out, ": 2 segments, 5 batches, 9 events: "
                                 "intact\n"));
  snprintf(out, sizeof out, "%s", fx_tmpdir("verify-nosize-out"));
  rmdir(out);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", out, d), 0);
  assert_null(strstr(cr_err, "damaged"));
  assert_non_null(strstr(cr_out, "2 segment files, 5 batches, "));
  assert_int_equal(cr_run("verify '%s'", out), 0);
}

/* An empty directory is an empty recording (`record` of a program that
 * made no watched call leaves one: a process writes nothing until its
 * first): 0, said. A directory with other files and no segment is not a
 * recording: 1. */
static void test_no_recording_and_usage(void **state) {
  const char *d = fx_tmpdir("verify-empty");
  (void)state;

  assert_int_equal(cr_run("verify '%s'", d), 0);
  cr_assert_has(cr_out, "intact: 0 processes, an empty recording");
  assert_null(strstr(cr_out, "no segment files"));
  assert_int_equal(cr_run("info '%s'", d), 0);
  assert_non_null(strstr(cr_err, "an empty recording"));
  /* What a record killed at its start leaves, its probe of the directory
   * and its cache directory: still empty (QA, session 38: DAMAGED, 1). */
  put_file(d, ".stackrec-probe-Ab12Cd", "x", 1);
  {
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/.stackrec-cache", d);
    assert_int_equal(mkdir(cache, 0700), 0);
  }
  assert_int_equal(cr_run("verify '%s'", d), 0);
  cr_assert_has(cr_out, "intact: 0 processes, an empty recording");
  /* With a record's lock there (at work, or killed before its end, with
   * the names of processes that could not record): not called empty. */
  put_file(d, ".stackrec-cache/record.lock", "", 0);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  put_file(d, "notes.txt", "x", 1);
  assert_int_equal(cr_run("verify '%s'", d), 1);
  cr_assert_has(cr_out,
                "note: ",
                "no segment files",
                "\nDAMAGED: no recording found\n");
  assert_int_equal(cr_run("info '%s'", d), 1);
  cr_expect(3, "cannot open /nonexistent/rec", "verify /nonexistent/rec");
  assert_int_equal(cr_run("verify"), 2);
  assert_int_equal(cr_run("verify --bogus '%s'", d), 2);
  assert_int_equal(cr_run("verify --help"), 0);
  cr_assert_has(cr_out, "Usage: stackrec verify", "Exit status:");
}

/* "r1" lines (stkr_reader.h: processes still running when record
 * ended): this very process (alive: incomplete, 4), a line of its pid with
 * another start time (a later process got the pid: nothing said), one of
 * another boot (a note), and malformed ones (warned, skipped). */
static void test_running_processes(void **state) {
  const char *d = fx_tmpdir("verify-running");
  char path[4200], line[256];
  (void)state;

  assert_int_equal(write_clean(d, FX_PID), 0);
  assert_int_equal(stkr_running_append(d, (uint32_t)getpid(), "tester"), 0);
  /* The start time written is field 22 of /proc/self/stat, read here
   * another way (sscanf past the name; a review found field 23, vsize,
   * which changes as the process allocates). */
  {
    char stat[1024], marks[4200], want[64];
    unsigned long long start = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    assert_int_equal(sscanf(strrchr(stat, ')') + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%*u %*u %*d %*d %*d %*d %*d %*d %llu", &start),
                     1);
    snprintf(marks, sizeof marks, "%s/%s", d, STKR_MARKS_FILE);
    f = fopen(marks, "r");
    n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    snprintf(want, sizeof want, " %llu 74657374657200", start);
    want[strlen(want) - 2] = '\0'; /* " START <hex of tester>" */
    if (strstr(stat, want) == NULL)
      fail_msg("start time %llu not in the r1 line: %s", start, stat);
  }
  assert_int_equal(stkr_running_append(d, 0x7fffffffu, "x"), -ESRCH);
  assert_int_equal(stkr_running_append(NULL, 1, "x"), -EINVAL);
  assert_int_equal(cr_run("verify '%s'", d), 4);
  snprintf(line, sizeof line, "incomplete: process %u (tester) of the "
           "recorded tree is still running since stackrec record ended",
           (unsigned)getpid());
  cr_assert_has(cr_out, line);
  assert_int_equal(cr_run("report '%s'", d), 0);
  cr_assert_has(cr_out, "still running since record ended, which may "
                        "record more (process ");

  put_file(d, STKR_MARKS_FILE, "", 0);
  snprintf(path, sizeof path, "%s/%s", d, STKR_MARKS_FILE);
  snprintf(line, sizeof line, "r1 %u 0123456789abcdef0123456789abcdef 1 "
           "61\n", (unsigned)getpid());
  assert_int_equal(tl_append_file(path, line), 0);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  cr_assert_has(cr_out, "note: process ", " (a) was still running when "
                "stackrec record ended; whether it still is cannot be told "
                "here");
  /* The same pid and boot, another start time: not this process. */
  {
    char boot[64] = "", hex[33];
    size_t n = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null(f);
    assert_non_null(fgets(boot, sizeof boot, f));
    fclose(f);
    for (const char *q = boot; *q != '\0' && *q != '\n' && n < 32; q++)
      if (*q != '-') hex[n++] = *q;
    hex[n] = '\0';
    snprintf(line, sizeof line, "r1 %u %s 1 74\n", (unsigned)getpid(), hex);
  }
  put_file(d, STKR_MARKS_FILE, line, strlen(line));
  assert_int_equal(cr_run("verify '%s'", d), 0);
  assert_null(strstr(cr_out, "still running"));
  snprintf(line, sizeof line, "r1 12 - 1 -\nr1 x 0123456789abcdef0123456789"
           "abcdef 1 -\nr1 1\n");
  put_file(d, STKR_MARKS_FILE, line, strlen(line));
  assert_int_equal(cr_run("verify '%s' 2>&1", d), 1);
  cr_assert_has(cr_out, "boot id is not 32 lower-case hex digits",
                "pid is not a decimal number",
                "not 5 space-separated fields");
}

/* An "r1" process that has ended but is not reaped yet (a zombie: its
 * parent exec'd something that never waits) records nothing more: not
 * "still running" (QA, session 31). */
static void test_running_zombie(void **state) {
  const char *d = fx_tmpdir("verify-zombie");
  siginfo_t info;
  pid_t c;
  (void)state;

  assert_int_equal(write_clean(d, FX_PID), 0);
  if ((c = fork()) == 0) _exit(0);
  assert_true(c > 0);
  /* Ended, left unreaped (WNOWAIT) until the end of the test. */
  assert_int_equal(waitid(P_PID, (id_t)c, &info, WEXITED | WNOWAIT), 0);
  assert_int_equal(stkr_running_append(d, (uint32_t)c, "zombie"), 0);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  assert_null(strstr(cr_out, "still running"));
  assert_int_equal(waitpid(c, NULL, 0), c);
}

int main(void) {
  return TL_RUN_GROUP(
      "verify", setup, NULL, TL_TABLE(NULL, NULL, test_whole_output, g_whole),
      TL_CASES(NULL, NULL, test_bit_flip,
               test_truncated_before_a_later_segment,
               test_live_tail_is_incomplete, test_undefined_ids,
               test_newer_format_and_inconsistent,
               test_notes_and_foreign_files, test_running_zombie,
               test_segment_names_that_are_not_files,
               test_ring_names_that_are_not_files,
               test_frames_without_content_size,
               test_no_recording_and_usage, test_running_processes));
}
