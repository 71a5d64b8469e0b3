/*
 * test-damage.c: the reader on damaged input: truncation at every byte, bit
 * flips, empty and garbage files, batches that decode but do not validate,
 * oversized frames. The rule under test: never crash, never loop, deliver
 * every intact batch, and name the file and offset of what was lost.
 */
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/reader_util.h"
#include "tests/testlib.h"

/* One segment holding standard batches 0..2; frame_end[i] is the offset
 * just past batch i's frame. */
static stkr_fmt_buf seg3(size_t frame_end[3]) {
  stkr_fmt_buf buf = {0};
  int i;

  for (i = 0; i < 3; i++) {
    assert_int_equal(fx_std_encode(i, i + 1, FX_PID, &buf), 0);
    frame_end[i] = buf.len;
  }
  return buf;
}

/* Standard batches [from, to) of process pid, in a buffer of their own
 * (the caller frees it). */
static stkr_fmt_buf std_batches(int from, int to, uint32_t pid) {
  stkr_fmt_buf buf = {0};

  assert_int_equal(fx_std_encode(from, to, pid, &buf), 0);
  return buf;
}

/* Expected events of batches [0, nb) in order, compared to got[]. */
static void check_batches(const ru_ev *got, int n, int nb) {
  fx_expect x[RU_MAX_EV];
  size_t nx = fx_std_expect(x, RU_MAX_EV), i;
  int k = 0;

  for (i = 0; i < nx; i++) {
    if (x[i].batch >= nb)
      continue;
    assert_true(k < n);
    if (!ru_match(&got[k], &x[i], FX_PID))
      fail_msg("event %d differs", k);
    k++;
  }
  assert_int_equal(k, n);
}

/* Every cut of a 3-batch segment. Alone (the last segment of a recording
 * that has not ended: a live one, or its writer died), the cut-off batch
 * is the one being written: a quiet LIVE_TAIL note, no data lost. With a
 * later segment after it (`later`), the same cut is damage: TRUNCATED. */
static void truncate_every_byte(bool later) {
  size_t end[3], cut;
  stkr_fmt_buf buf = seg3(end);
  const char *d = fx_tmpdir(later ? "trunc-later" : "trunc");
  char path[4200], want[4600];

  snprintf(path, sizeof(path), "%s/stackrec-%u-000001.zst", d, FX_PID);
  if (later) {
    /* Batches 3 and 4 (4 is last=true): 3 more events. */
    stkr_fmt_buf b2 = std_batches(3, 5, FX_PID);

    assert_int_equal(fx_write_segment(d, FX_PID, 2, &b2), 0);
    stkr_fmt_buf_free(&b2);
  }
  for (cut = 0; cut <= buf.len; cut++) {
    int complete = (cut >= end[0]) + (cut >= end[1]) + (cut >= end[2]);
    size_t start = complete ? end[complete - 1] : 0;
    ru_reading rd;
    int n;

    assert_int_equal(fx_write_file(path, buf.data, cut), 0);
    ru_read_path(&rd, later ? d : path);
    n = rd.n;
    if (n < 0)
      fail_msg("cut %zu: error %d", cut, n);
    if (later)
      n -= 3; /* segment 2's events come after (checked by count only) */
    check_batches(rd.got, n, complete);
    assert_int_equal(stkr_reader_process(rd.r, 0)->batches,
                     complete + (later ? 2 : 0));
    assert_false(stkr_reader_process(rd.r, 0)->live_tail && later);
    if (cut == 0) {
      assert_int_equal(rd.log.n, 1);
      assert_int_equal(rd.log.w[0].kind, STKR_WARN_EMPTY_FILE);
      assert_false(rd.log.w[0].data_lost);
    } else if (cut == start) {
      if (rd.log.n != 0) {
        ru_dump_log(&rd.log);
        fail_msg("cut %zu at a frame boundary warned", cut);
      }
    } else if (later) {
      if (rd.log.n != 1 || rd.log.w[0].kind != STKR_WARN_TRUNCATED) {
        ru_dump_log(&rd.log);
        fail_msg("cut %zu: expected one truncation warning", cut);
      }
      snprintf(want, sizeof(want),
               "%s: offset %zu: truncated batch (%zu bytes), ignored", path,
               start, cut - start);
      assert_string_equal(rd.log.w[0].msg, want);
      assert_int_equal(rd.log.w[0].offset, start);
      assert_true(rd.log.w[0].data_lost);
      /* The cut batch and those after it in the file (segment 2 begins
       * with batch 4): one truncation, its batches told as damaged. */
      assert_int_equal(stkr_reader_process(rd.r, 0)->damaged_batches,
                       complete == 0 ? 1 : 3 - complete);
    } else {
      if (rd.log.n != 1 || rd.log.w[0].kind != STKR_WARN_LIVE_TAIL) {
        ru_dump_log(&rd.log);
        fail_msg("cut %zu: expected one live-tail note", cut);
      }
      snprintf(want, sizeof(want),
               "%s: offset %zu: incomplete last batch (%zu bytes): the "
               "recording is still being written (or its writer stopped "
               "mid-batch); not read",
               path, start, cut - start);
      assert_string_equal(rd.log.w[0].msg, want);
      assert_int_equal(rd.log.w[0].offset, start);
      assert_false(rd.log.w[0].data_lost);
      assert_int_equal(stkr_reader_process(rd.r, 0)->damaged_batches, 0);
      assert_true(stkr_reader_process(rd.r, 0)->live_tail);
      {
        stkr_reader_counts c;
        stkr_reader_get_counts(rd.r, &c);
        assert_int_equal(c.data_lost, 0);
      }
    }
    if (cut == start || cut == 0)
      assert_false(stkr_reader_process(rd.r, 0)->live_tail);
    stkr_reader_free(rd.r);
  }
  stkr_fmt_buf_free(&buf);
}

/* flag: truncate_every_byte's `later`. */
static const tl_flag_case g_cuts[] = {
    {"test_truncate_every_byte", false},
    {"test_truncate_every_byte_before_a_later_segment", true},
};

static void test_truncate(void **state) {
  truncate_every_byte(tl_flag(state));
}

/* A batch cut off after the recording ended cleanly in the same file is
 * not one being written: damage. */
static void test_truncated_after_clean_end_is_damage(void **state) {
  const char *d = fx_tmpdir("trunc-clean");
  char path[4200];
  stkr_fmt_buf buf = std_batches(3, 5, FX_PID); /* 4: last */
  size_t clean = buf.len;
  ru_reading rd;
  (void)state;

  assert_int_equal(fx_std_encode(0, 1, FX_PID, &buf), 0);
  snprintf(path, sizeof(path), "%s/stackrec-%u-000002.zst", d, FX_PID);
  assert_int_equal(fx_write_file(path, buf.data, clean + 20), 0);
  ru_read_path(&rd, path);
  assert_int_equal(rd.n, 3);
  assert_int_equal(rd.log.n, 1);
  assert_int_equal(rd.log.w[0].kind, STKR_WARN_TRUNCATED);
  assert_true(rd.log.w[0].data_lost);
  assert_int_equal(rd.log.w[0].offset, (int64_t)clean);
  assert_false(stkr_reader_process(rd.r, 0)->live_tail);
  assert_true(stkr_reader_process(rd.r, 0)->clean_end);
  stkr_reader_free(rd.r);
  stkr_fmt_buf_free(&buf);
}

/* Flip bits in every byte of the middle frame: batches 0 and 2 always come
 * back whole; the middle one comes back whole or not at all, and if not, a
 * warning names an offset inside it. */
static void test_bit_flips(void **state) {
  static const uint8_t masks[] = {0x01, 0x80, 0xff};
  size_t end[3], pos, m;
  stkr_fmt_buf buf = seg3(end);
  const char *d = fx_tmpdir("flip");
  char path[4200];
  int lost = 0;
  (void)state;

  snprintf(path, sizeof(path), "%s/stackrec-%u-000001.zst", d, FX_PID);
  for (pos = end[0]; pos < end[1]; pos++) {
    for (m = 0; m < sizeof(masks); m++) {
      fx_expect x[RU_MAX_EV];
      size_t nx = fx_std_expect(x, RU_MAX_EV), i;
      ru_reading rd;
      int k = 0, mid = 0, w;

      buf.data[pos] ^= masks[m];
      assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
      buf.data[pos] ^= masks[m];
      ru_read_path(&rd, path);
      assert_true(rd.n >= 0);
      for (i = 0; i < nx && x[i].batch < 3; i++) {
        if (k < rd.n && ru_match(&rd.got[k], &x[i], FX_PID)) {
          k++;
          mid += x[i].batch == 1;
        } else if (x[i].batch != 1) {
          fail_msg("flip %#x at %zu: batch %d event lost", masks[m], pos,
                   x[i].batch);
        }
      }
      assert_int_equal(k, rd.n); /* nothing delivered that was not recorded */
      assert_true(mid == 0 || mid == 2);
      if (mid == 0) {
        lost++;
        for (w = 0; w < rd.log.n; w++)
          if (rd.log.w[w].kind == STKR_WARN_DAMAGED &&
              rd.log.w[w].offset >= (int64_t)end[0] &&
              rd.log.w[w].offset < (int64_t)end[1] &&
              strstr(rd.log.w[w].msg, path) != NULL)
            break;
        if (w == rd.log.n) {
          ru_dump_log(&rd.log);
          fail_msg("flip %#x at %zu: no warning naming the offset",
                   masks[m], pos);
        }
      }
      stkr_reader_free(rd.r);
    }
  }
  assert_true(lost > 0);
  stkr_fmt_buf_free(&buf);
}

/* A byte in the middle of the middle frame: a checksum or zstd error at
 * that frame's offset, then the third batch. */
static void test_flip_middle_exact(void **state) {
  size_t end[3];
  stkr_fmt_buf buf = seg3(end);
  const char *d = fx_tmpdir("flip1");
  char path[4200], want[4300];
  ru_reading rd;
  (void)state;

  snprintf(path, sizeof(path), "%s/stackrec-%u-000001.zst", d, FX_PID);
  buf.data[end[1] - 6] ^= 0x10; /* in the last block, before the checksum */
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  ru_read_path(&rd, path);
  assert_int_equal(rd.n, 4); /* 3 + 1 */
  assert_int_equal(rd.got[3].v.site_id, 4);
  assert_int_equal(rd.log.n, 1);
  snprintf(want, sizeof(want), "%s: offset %zu: damaged batch (", path,
           end[0]);
  assert_memory_equal(rd.log.w[0].msg, want, strlen(want));
  assert_non_null(strstr(rd.log.w[0].msg, "skipped"));
  assert_int_equal(stkr_reader_process(rd.r, 0)->damaged_batches, 1);
  assert_int_equal(stkr_reader_process(rd.r, 0)->batches, 2);
  /* Not also missing: the gap in numbers is the damaged batch. */
  assert_int_equal(stkr_reader_process(rd.r, 0)->missing_batches, 0);
  stkr_reader_free(rd.r);
  stkr_fmt_buf_free(&buf);
}

/* Damage from the middle of batch 1 into the middle of batch 2 (of five):
 * one stretch skipped, two batches in it. Told once, as two damaged
 * batches (QA, session 44, find 4: "DAMAGED (1 batch lost)" beside "2
 * batches missing"; and a single damaged batch read as 1 damaged and 1
 * missing before). */
static void test_damage_over_two_frames(void **state) {
  size_t end[5];
  stkr_fmt_buf buf = {0};
  const char *d = fx_tmpdir("flip2");
  char path[4200];
  ru_reading rd;
  (void)state;

  for (int i = 0; i < 5; i++) {
    assert_int_equal(fx_std_encode(i, i + 1, FX_PID, &buf), 0);
    end[i] = buf.len;
  }
  snprintf(path, sizeof(path), "%s/stackrec-%u-000001.zst", d, FX_PID);
  memset(buf.data + (end[0] + end[1]) / 2, 0xa5,
         (end[1] + end[2]) / 2 - (end[0] + end[1]) / 2);
  assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
  ru_read_path(&rd, path);
  const stkr_process_info *p = stkr_reader_process(rd.r, 0);
  assert_int_equal(p->batches, 3);
  assert_int_equal(p->damaged_batches, 2);
  assert_int_equal(p->missing_batches, 0);
  stkr_reader_free(rd.r);
  stkr_fmt_buf_free(&buf);
}

/* Segments 1 (frames 0-2) and 2 (frames 3-4) of the standard recording
 * into a directory, frames a..b overwritten but for their first and last
 * 10 bytes; read into *rd. */
static void damaged_pair(const char *tag, int a, int b, ru_reading *rd) {
  stkr_fmt_buf buf = {0};
  const char *d = fx_tmpdir(tag);
  size_t end[5], cut, from, to;

  for (int i = 0; i < 5; i++) {
    assert_int_equal(fx_std_encode(i, i + 1, FX_PID, &buf), 0);
    end[i] = buf.len;
  }
  from = (a == 0 ? 0 : end[a - 1]) + 10;
  to = end[b] - 10;
  memset(buf.data + from, 0xa5, to - from);
  cut = end[2];
  assert_int_equal(fx_write_segment_bytes(d, FX_PID, 1, buf.data, cut), 0);
  assert_int_equal(
      fx_write_segment_bytes(d, FX_PID, 2, buf.data + cut, buf.len - cut), 0);
  stkr_fmt_buf_free(&buf);
  ru_read_path(rd, d);
}

/* rd's one process read `batches` batches and lost `damaged` to damage,
 * none missing, no segment missing; rd freed. */
static void assert_lost_to_damage(ru_reading *rd, uint64_t batches,
                                  uint64_t damaged) {
  const stkr_process_info *p = stkr_reader_process(rd->r, 0);
  assert_int_equal(p->batches, batches);
  assert_int_equal(p->damaged_batches, damaged);
  assert_int_equal(p->missing_batches, 0);
  assert_int_equal(p->segments_missing, 0);
  stkr_reader_free(rd->r);
}

/* Damage over a segment's first frames, which carry its Header: told as
 * damaged batches, and the segment, read but for them, is not "missing"
 * (QA, session 46: "first segment 1 missing" beside 1 damaged and 2
 * missing batches; "1 segment (2..2) missing" for a damaged Header of
 * segment 2). */
static void test_damage_at_a_segments_head(void **state) {
  ru_reading rd;
  (void)state;

  /* Segment 1's first two frames. */
  damaged_pair("head1", 0, 1, &rd);
  assert_lost_to_damage(&rd, 3, 2);
  /* A session of three segments (Headers naming session 77 from segment
   * 1), segment 2's first frame, its Header, damaged, its second read:
   * when segment 3's Header comes, segment 2 is there (read, damaged),
   * not missing. */
  const char *d = fx_tmpdir("head2");
  for (uint32_t seg = 1; seg <= 3; seg++) {
    stkr_fmt_buf buf = {0};
    size_t first_end = 0;
    for (int i = seg == 1 ? 0 : 3; i < (seg == 1 ? 3 : 5); i++) {
      fx_batch b = fx_std[i];
      b.session_id = 77;
      b.session_first_seq = 1;
      b.last = seg == 3 && i == 4;
      b.seq += seg == 3 ? 2 : 0;
      b.segment_seq = b.header ? seg : 0;
      assert_int_equal(fx_encode(&b, &buf), 0);
      if (first_end == 0) first_end = buf.len;
    }
    if (seg == 2) memset(buf.data + 10, 0xa5, first_end - 20);
    assert_int_equal(fx_write_segment(d, FX_PID, seg, &buf), 0);
    stkr_fmt_buf_free(&buf);
  }
  ru_read_path(&rd, d);
  assert_lost_to_damage(&rd, 6, 1);
}

static void test_empty_and_garbage_files(void **state) {
  const char *d = fx_tmpdir("garbage");
  uint8_t junk[3000];
  ru_reading rd;
  size_t i;
  (void)state;

  for (i = 0; i < sizeof(junk); i++)
    junk[i] = (uint8_t)(i * 131 + 7 + (i >> 3));
  assert_int_equal(fx_write_segment_bytes(d, 1, 1, NULL, 0), 0);
  assert_int_equal(fx_write_segment_bytes(d, 2, 1, junk, sizeof(junk)), 0);
  /* pid 3: a zstd magic number cut short */
  assert_int_equal(fx_write_segment_bytes(d, 3, 1, "\x28\xb5", 2), 0);
  /* pid 4: garbage, then the standard batches 0..2. */
  {
    stkr_fmt_buf buf = std_batches(0, 3, 4);
    uint8_t *both = malloc(100 + buf.len);

    memcpy(both, junk, 100);
    memcpy(both + 100, buf.data, buf.len);
    assert_int_equal(fx_write_segment_bytes(d, 4, 1, both, 100 + buf.len), 0);
    free(both);
    stkr_fmt_buf_free(&buf);
  }

  ru_read_path(&rd, d);
  assert_int_equal(rd.n, 6);
  for (i = 0; i < 6; i++)
    assert_int_equal(rd.got[i].v.pid, 4);
  ru_dump_log(&rd.log);
  assert_int_equal(rd.log.n, 4);
  assert_int_equal(rd.log.w[0].kind, STKR_WARN_EMPTY_FILE);
  assert_int_equal(rd.log.w[0].pid, 1);
  assert_int_equal(rd.log.w[1].kind, STKR_WARN_NOT_ZSTD);
  assert_int_equal(rd.log.w[1].pid, 2);
  assert_non_null(
      strstr(rd.log.w[1].msg, "stackrec-2-000001.zst: not a zstd"));
  /* pid 3: its only segment is a cut-off magic number: the first batch
   * of a recording still being written (live-tail rule), not damage. */
  assert_int_equal(rd.log.w[2].kind, STKR_WARN_LIVE_TAIL);
  assert_false(rd.log.w[2].data_lost);
  assert_int_equal(rd.log.w[2].pid, 3);
  assert_int_equal(rd.log.w[3].kind, STKR_WARN_DAMAGED);
  assert_non_null(strstr(rd.log.w[3].msg, "offset 0: damaged batch (no zstd "
                                          "frame here), skipped 100 bytes"));
  stkr_reader_free(rd.r);
}

/* A segment that is a hole of 64 GiB (0 bytes on disk), then the standard
 * batches 0..2: the reader jumps over the hole (QA, session 33: a 16 GiB
 * hole took every reader 23-39 s, time in the file's apparent size, 64 GiB
 * this test's timeout) and reads the batches after it. */
static void test_hole_skipped(void **state) {
  const char *d = fx_tmpdir("hole");
  const uint64_t hole = 64ull << 30;
  char path[4200];
  stkr_fmt_buf buf = std_batches(0, 3, 5);
  ru_reading rd;
  int fd;
  (void)state;

  snprintf(path, sizeof(path), "%s/stackrec-5-000001.zst", d);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  if (pwrite(fd, buf.data, buf.len, (off_t)hole) != (ssize_t)buf.len) {
    close(fd); /* a file system without files this large: nothing to try */
    stkr_fmt_buf_free(&buf);
    skip();
  }
  close(fd);
  stkr_fmt_buf_free(&buf);
  ru_read_path(&rd, d);
  assert_int_equal(rd.n, 6);
  assert_int_equal(rd.log.n, 1);
  assert_int_equal(rd.log.w[0].kind, STKR_WARN_DAMAGED);
  assert_non_null(strstr(rd.log.w[0].msg, "skipped 68719476736 bytes"));
  stkr_reader_free(rd.r);
  assert_int_equal(unlink(path), 0);
}

static int reserve(stkr_fmt_buf *b, size_t extra) {
  if (b->len + extra > b->cap) {
    uint8_t *p = realloc(b->data, b->len + extra);

    if (p == NULL)
      return -ENOMEM;
    b->data = p;
    b->cap = b->len + extra;
  }
  return 0;
}

/* Write frames (raw bytes) as one segment of pid 1 and read it. */
static int read_frames(const uint8_t *data, size_t len, ru_ev *got,
                       ru_log *log) {
  const char *d = fx_tmpdir("frames");
  char path[4200];
  stkr_reader *r;
  int n;

  snprintf(path, sizeof(path), "%s/stackrec-1-000001.zst", d);
  assert_int_equal(fx_write_file(path, data, len), 0);
  r = ru_open(path, log);
  assert_non_null(r);
  n = ru_read_all(r, got);
  stkr_reader_free(r);
  return n;
}

/* Frames that decompress fine but hold no valid or consistent Batch. */
static void test_invalid_batches(void **state) {
  stkr_fmt_buf buf = std_batches(0, 1, 1);
  ru_ev got[RU_MAX_EV];
  ru_log log;
  size_t z;
  uint8_t tmp[256];
  (void)state;

  /* 1: not protobuf (a field with wire type 7), checksummed frame. */
  {
    ZSTD_CCtx *c = ZSTD_createCCtx();

    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    assert_int_equal(reserve(&buf, 256), 0);
    z = ZSTD_compress2(c, tmp, sizeof(tmp), "\x0f\x0f\x0f\x0f", 4);
    assert_false(ZSTD_isError(z));
    memcpy(buf.data + buf.len, tmp, z);
    buf.len += z;
    ZSTD_freeCCtx(c);
  }
  /* 2: event columns of different lengths. */
  {
    Stackrec__Batch b = STACKREC__BATCH__INIT;
    Stackrec__Events e = STACKREC__EVENTS__INIT;
    int64_t dl[2] = {1, 2};
    uint32_t ids[2] = {1, 1}, bad_index = 2;

    e.n_ts_delta_ns = 2;
    e.ts_delta_ns = dl;
    e.n_site_id = 1;
    e.site_id = ids;
    e.n_thread_id = e.n_stack_id = 2;
    e.thread_id = e.stack_id = ids;
    b.seq = 2;
    b.events = &e;
    assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), 0);
    /* 3: payload lengths not adding up. */
    e.n_site_id = 2;
    e.n_payload_len = 2;
    e.payload_len = ids; /* 1 + 1 bytes, but 3 given */
    e.payload_data.data = (uint8_t *)"abc";
    e.payload_data.len = 3;
    b.seq = 3;
    assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), 0);
    /* 4: truncated index out of range. */
    e.payload_data.len = 2;
    e.n_payload_truncated = 1;
    e.payload_truncated = &bad_index;
    b.seq = 4;
    assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), 0);
  }
  /* 5: a skippable frame (ignored silently), then batch 1 again. */
  assert_int_equal(reserve(&buf, 16), 0);
  memcpy(buf.data + buf.len, "\x50\x2a\x4d\x18\x04\x00\x00\x00zzzz", 12);
  buf.len += 12;
  assert_int_equal(fx_std_encode(1, 2, 1, &buf), 0);

  assert_int_equal(read_frames(buf.data, buf.len, got, &log), 5);
  ru_dump_log(&log);
  assert_int_equal(log.n, 4);
  assert_non_null(strstr(log.w[0].msg, "not a valid Batch message"));
  assert_non_null(strstr(log.w[1].msg, "event columns differ in length"));
  assert_non_null(strstr(log.w[2].msg, "payload lengths do not add up"));
  assert_non_null(strstr(log.w[3].msg, "payload_truncated index out of"));
  stkr_fmt_buf_free(&buf);
}

/* A frame header declaring more than the batch limit is refused before any
 * allocation; a frame without a content size is decoded by capped growth. */
static void test_frame_sizes(void **state) {
  /* magic, FHD: FCS 8 bytes + single segment, FCS = 100 MiB, one empty
   * last raw block. */
  static const uint8_t huge[] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0x00, 0x00,
                                 0x40, 0x06, 0x00, 0x00, 0x00, 0x00, 0x01,
                                 0x00, 0x00};
  stkr_fmt_buf buf = {0};
  ru_ev got[RU_MAX_EV];
  ru_log log;
  (void)state;

  memset(&log, 0, sizeof(log));
  assert_int_equal(read_frames(huge, sizeof(huge), got, &log), 0);
  assert_int_equal(log.n, 1);
  assert_non_null(strstr(log.w[0].msg, "over the batch limit"));

  /* Standard batch 0 re-compressed without the content size. */
  {
    stkr_fmt_buf one = std_batches(0, 1, 1);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    uint8_t raw[4096], z[4096];
    size_t rl, zl;

    rl = ZSTD_decompress(raw, sizeof(raw), one.data, one.len);
    assert_false(ZSTD_isError(rl));
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    zl = ZSTD_compress2(c, z, sizeof(z), raw, rl);
    assert_false(ZSTD_isError(zl));
    assert_int_equal(ZSTD_getFrameContentSize(z, zl),
                     ZSTD_CONTENTSIZE_UNKNOWN);
    assert_int_equal(read_frames(z, zl, got, &log), 3);
    assert_int_equal(log.n, 0);
    ZSTD_freeCCtx(c);
    stkr_fmt_buf_free(&one);
  }
  stkr_fmt_buf_free(&buf);
}

int main(void) {
  return TL_RUN_GROUP(
      "damage", NULL, NULL, TL_TABLE(NULL, NULL, test_truncate, g_cuts),
      TL_CASES(NULL, NULL, test_truncated_after_clean_end_is_damage,
               test_damage_over_two_frames, test_damage_at_a_segments_head,
               test_bit_flips, test_flip_middle_exact,
               test_empty_and_garbage_files, test_hole_skipped,
               test_invalid_batches, test_frame_sizes));
}
