/*
 * test-recover-torn.c: crash-proof rings, files a writer died in the
 * middle of making (helpers: recover_util.h). A segment whose last frame
 * was cut in its write(2), after intact frames or alone; ring files left
 * full size without their magic, or half made under their temporary name
 * in the cache directory, beside a killed child's ring. Recovery writes
 * every event once, says nothing of what holds nothing recorded, and
 * removes only the dead session's leftovers. Split from test-recover.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
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

#include "common/stkr_ringfile.h"
#include "proto/stkr_recover.h"
#include "tests/recover_util.h"
#include "tests/testlib.h"

/* A writer that died inside its write(2) (issue 9: an _exit while the
 * flush worker was past its exit budget, mid-write, left 8192 bytes of a
 * frame): the segment ends in a torn frame whose events were never
 * released from the ring. Recovery writes them and removes the fragment,
 * so that the recording reads back whole and undamaged (before, the
 * fragment sat before the recovered segment and read as a truncated
 * batch: data lost, `stackrec verify` exit 1). `whole`: the torn frame
 * follows intact ones (the file is cut back to them), else it is the
 * file's only frame (the file goes): the session's first batch (Header
 * and image list, written at init) torn 16 bytes in. */
static void torn_last_batch(bool whole) {
  char dir[300], path[600];
  stkr_recover_stats st;
  readback rb;
  msgs ms;
  size_t len;

  run_child_die(dir, sizeof dir, 300, 200, true);
  if (events_in_segments(dir) != 300) {
    /* A pressured pass ran after the flush (a loaded machine): the last
     * frame's events were released, so this is not the case at hand. */
    skip();
  }
  tl_find_file(dir, ".zst", path, sizeof path);
  char *frame = tl_slurp_alloc(path, &len); /* the first batch, then 300 */
  assert_non_null(frame);
  assert_true(len > 64);
  int fd = open(path, O_WRONLY | O_APPEND);
  assert_true(fd >= 0);
  if (whole) /* a second frame, cut short: (a copy of) the first's half */
    assert_int_equal(write(fd, frame, len / 2), (ssize_t)(len / 2));
  else
    assert_int_equal(ftruncate(fd, 16), 0);
  close(fd);
  free(frame);
  recover(dir, false, &st, &ms);
  /* Rewound: the whole ring is recovered, less what the intact frame
   * holds (its RingPos). */
  assert_int_equal(st.events, whole ? 200 : 500);
  assert_non_null(strstr(ms.last, "torn last batch"));
  assert_int_equal(tl_count_files(dir, ".zst"), whole ? 2 : 1);
  read_dir(dir, &rb, 500);
  assert_int_equal(rb.events, 500);
  for (int i = 0; i < 500; i++) assert_int_equal(rb.seen[i], 1);
  assert_int_equal(rb.warnings_lost, 0);
  rb_free(&rb);
}

static void test_torn_last_batch(void **state) {
  (void)state;
  torn_last_batch(true);
  torn_last_batch(false);
}

/* ---- ring files that hold nothing recorded, beside a dead session ---- */

/* The dead session of run_child_die(dir, cap, 0, 500, false): a copy of
 * its ring file's bytes (malloc'd, *len of them) and its rings' path
 * prefix "DIR/stackrec-<pid>-<sid>" in prefix, for made-up ring files. */
static char *dead_session_ring(char *dir, size_t cap, char *prefix,
                               size_t prefix_cap, size_t *len) {
  char *ring;

  run_child_die(dir, cap, 0, 500, false);
  tl_find_file(dir, ".ring", prefix, prefix_cap);
  ring = tl_slurp_alloc(prefix, len);
  assert_non_null(ring);
  *strrchr(prefix, '-') = '\0';
  return ring;
}

/* Recovery of dead_session_ring's directory with made-up ring files in it
 * (in dir or cache): dry, as verify runs it, it removes nothing; neither
 * run says anything or counts an orphan; the real one writes the session's
 * 500 events, once each, and leaves no ring file in dir. */
static void recover_quietly(const char *dir, const char *cache) {
  stkr_recover_stats st;
  msgs ms;
  int in_dir = tl_count_files(dir, ".ring");
  int in_cache = tl_count_files(cache, ".ring");

  recover(dir, true, &st, &ms);
  assert_int_equal(ms.n, 0);
  assert_int_equal(st.orphans, 0);
  assert_int_equal(tl_count_files(dir, ".ring"), in_dir);
  assert_int_equal(tl_count_files(cache, ".ring"), in_cache);
  recover(dir, false, &st, &ms);
  assert_int_equal(ms.n, 0);
  assert_int_equal(st.orphans, 0);
  assert_int_equal(st.events, 500);
  assert_int_equal(tl_count_files(dir, ".ring"), 0);
  assert_read_once(dir, 500, 500);
}

/* Ring files whose writer died creating them (issue 9: an _exit under
 * load left one in 1 run of 4): full size, no magic yet (the writer
 * stores it last), as fallocate left it or with a pooled file's header
 * half cleared. Nothing was recorded in them: recovery and verify's dry
 * run say nothing and count no unusable file (before: "not a ring file
 * (bad magic)", verify DAMAGED, recover exit 1). */
static void test_ring_file_never_set_up(void **state) {
  char dir[300], pre[600], other[620], cache[620];
  size_t len;
  char *ring = dead_session_ring(dir, sizeof dir, pre, sizeof pre, &len);
  (void)state;

  assert_true(len >= STKR_RINGFILE_HDR_BYTES);
  /* 98: the header written but for the magic; 99: all zeros */
  for (int i = 0; i < 2; i++) {
    memset(ring, 0, i == 0 ? 8 : len);
    snprintf(other, sizeof other, "%s-%d.ring", pre, 98 + i);
    assert_int_equal(tl_write_bytes(other, ring, len), 0);
  }
  free(ring);
  snprintf(cache, sizeof cache, "%s/" STKR_CACHE_DIR, dir);
  recover_quietly(dir, cache);
}

/* A ring file its writer died making, or claiming from the pool, before it
 * was renamed to its name (recorder/ringfile.c create_ring): 0 bytes, or
 * full size with the header of the pool's last owner. Both wait in the
 * cache directory under STKR_RINGFILE_NEW names; recovery says nothing of
 * them (before, under the ring's name, both read as damage: "shorter than
 * a ring file header", "header does not match the file name") and removes
 * them with their dead session, and only theirs. */
static void test_ring_file_being_made(void **state) {
  char dir[300], path[600], cache[620], pre[700], f[3][800];
  size_t len;
  char *ring = dead_session_ring(dir, sizeof dir, path, sizeof path, &len);
  (void)state;

  snprintf(cache, sizeof cache, "%s/" STKR_CACHE_DIR, dir);
  /* The writer renamed its rings into place: none is left half made. */
  assert_int_equal(tl_count_files(cache, ".ring"), 0);
  /* "stackrec-<pid>-<sid>", the dead session's prefix */
  snprintf(pre, sizeof pre, "%s/" STKR_RINGFILE_NEW "%s", cache,
           strrchr(path, '/') + 1);
  (void)mkdir(cache, 0700);
  snprintf(f[0], sizeof f[0], "%s-98.ring", pre);    /* created, not sized */
  snprintf(f[1], sizeof f[1], "%s-99.ring", pre);    /* claimed, not cleared */
  snprintf(f[2], sizeof f[2], "%s7-5.ring", pre);    /* another session's */
  for (int i = 0; i < 3; i++)
    assert_int_equal(tl_write_bytes(f[i], ring, i > 0 ? len : 0), 0);
  free(ring);
  assert_int_equal(tl_count_files(cache, ".ring"), 3);
  recover_quietly(dir, cache);
  assert_int_equal(tl_count_files(cache, ".ring"), 1);
  assert_int_equal(access(f[2], F_OK), 0);
}

TL_TEST_MAIN("recover-torn", recover_group_setup, NULL, test_torn_last_batch,
             test_ring_file_never_set_up, test_ring_file_being_made)
