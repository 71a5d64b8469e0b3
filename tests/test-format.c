/*
 * test-format.c: segment names and batch encoding (proto/stkr_format.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_format.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

static void test_segment_name(void **state) {
  char buf[STKR_FMT_SEGMENT_NAME_MAX], small[10];
  (void)state;

  assert_int_equal(stkr_fmt_segment_name(buf, sizeof(buf), 4242, 1), 0);
  assert_string_equal(buf, "stackrec-4242-000001.zst");
  assert_int_equal(stkr_fmt_segment_name(buf, sizeof(buf), 0, 999999), 0);
  assert_string_equal(buf, "stackrec-0-999999.zst");
  assert_int_equal(stkr_fmt_segment_name(buf, sizeof(buf), 7, 1234567), 0);
  assert_string_equal(buf, "stackrec-7-1234567.zst");
  /* The longest name fits STKR_FMT_SEGMENT_NAME_MAX exactly. */
  assert_int_equal(
      stkr_fmt_segment_name(buf, sizeof(buf), UINT32_MAX, UINT32_MAX), 0);
  assert_string_equal(buf, "stackrec-4294967295-4294967295.zst");
  assert_int_equal(strlen(buf) + 1, STKR_FMT_SEGMENT_NAME_MAX);
  assert_int_equal(
      stkr_fmt_segment_name(buf, sizeof(buf) - 1, UINT32_MAX, UINT32_MAX),
      -ENAMETOOLONG);
  assert_string_equal(buf, "");
  assert_int_equal(stkr_fmt_segment_name(small, sizeof(small), 1, 1),
                   -ENAMETOOLONG);
  assert_string_equal(small, "");
  assert_int_equal(stkr_fmt_segment_name(NULL, 0, 1, 1), -ENAMETOOLONG);
}

static void test_segment_parse(void **state) {
  static const char *const bad[] = {
      "", "stackrec-", "stackrec-1-1.zst", "stackrec-01-000001.zst",
      "stackrec-1-000000.zst", "stackrec-1-000001.zst.tmp",
      "stackrec--000001.zst", "stackrec-4294967296-000001.zst",
      "stackrec-1-000001.zs", "stackrec-+1-000001.zst",
      "stackrec- 1-000001.zst", "Stackrec-1-000001.zst",
      "stackrec-1-0000001.zst", "stackrec-1-4294967296.zst",
      "xstackrec-1-000001.zst", "stackrec-1_000001.zst",
      "stackrec-1-000001", "stackrec-1-00000a.zst"};
  uint32_t pid = 0, seq = 0;
  size_t i;
  (void)state;

  assert_int_equal(stkr_fmt_segment_parse("stackrec-4242-000001.zst", &pid,
                                          &seq), 0);
  assert_int_equal(pid, 4242);
  assert_int_equal(seq, 1);
  assert_int_equal(stkr_fmt_segment_parse("stackrec-0-1234567.zst", &pid,
                                          &seq), 0);
  assert_int_equal(pid, 0);
  assert_int_equal(seq, 1234567);
  assert_int_equal(stkr_fmt_segment_parse(
                       "stackrec-4294967295-4294967295.zst", &pid, &seq), 0);
  assert_int_equal(pid, UINT32_MAX);
  assert_int_equal(seq, UINT32_MAX);
  assert_int_equal(stkr_fmt_segment_parse("stackrec-5-000002.zst", NULL,
                                          NULL), 0);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    pid = seq = 77;
    if (stkr_fmt_segment_parse(bad[i], &pid, &seq) != -EINVAL)
      fail_msg("accepted \"%s\"", bad[i]);
    assert_int_equal(pid, 77); /* untouched on failure */
    assert_int_equal(seq, 77);
  }
  assert_int_equal(stkr_fmt_segment_parse(NULL, &pid, &seq), -EINVAL);
}

/* Decode the concatenated frames of buf with streaming decompression, as
 * `zstd -t` / `zstd -d` would; returns the total decompressed size. */
static size_t stream_decompress_all(const uint8_t *data, size_t len) {
  ZSTD_DCtx *d = ZSTD_createDCtx();
  ZSTD_inBuffer in = {data, len, 0};
  uint8_t out[4096];
  size_t total = 0, ret = 1;

  assert_non_null(d);
  while (in.pos < in.size) {
    ZSTD_outBuffer ob = {out, sizeof(out), 0};

    ret = ZSTD_decompressStream(d, &ob, &in);
    if (ZSTD_isError(ret))
      fail_msg("zstd: %s", ZSTD_getErrorName(ret));
    total += ob.pos;
  }
  assert_int_equal(ret, 0); /* ended on a frame boundary */
  ZSTD_freeDCtx(d);
  return total;
}

static void test_encode_roundtrip(void **state) {
  stkr_fmt_buf buf = {0};
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  size_t off = 0, total = 0;
  int i;
  (void)state;

  assert_non_null(cctx);
  for (i = 0; i < FX_STD_BATCHES; i++) {
    size_t before = buf.len;

    assert_int_equal(fx_encode(&fx_std[i], &buf), 0);
    assert_true(buf.len > before);
  }
  /* The same batch through a caller-owned, reused context. */
  {
    Stackrec__Batch b = STACKREC__BATCH__INIT;

    b.seq = 99;
    b.last = true;
    assert_int_equal(stkr_fmt_encode_batch(&b, cctx, 19, &buf), 0);
    assert_int_equal(stkr_fmt_encode_batch(&b, cctx, 1, &buf), 0);
  }

  /* Every frame: one Batch, content size in the header, checksum flag on. */
  for (i = 0; off < buf.len; i++) {
    size_t fsz = ZSTD_findFrameCompressedSize(buf.data + off, buf.len - off);
    unsigned long long csz;
    uint8_t *dec;
    Stackrec__Batch *b;

    assert_false(ZSTD_isError(fsz));
    csz = ZSTD_getFrameContentSize(buf.data + off, fsz);
    assert_true(csz != ZSTD_CONTENTSIZE_UNKNOWN &&
                csz != ZSTD_CONTENTSIZE_ERROR);
    assert_true(buf.data[off + 4] & 0x04); /* Content_Checksum_flag */
    dec = malloc(csz + 1);
    assert_int_equal(ZSTD_decompress(dec, csz + 1, buf.data + off, fsz), csz);
    b = stackrec__batch__unpack(NULL, csz, dec);
    assert_non_null(b);
    if (i < FX_STD_BATCHES) {
      const fx_batch *fb = &fx_std[i];
      size_t k;

      assert_int_equal(b->seq, fb->seq);
      assert_int_equal(b->header != NULL, fb->header);
      if (fb->header) {
        assert_int_equal(b->header->format_version, STKR_FORMAT_VERSION);
        assert_int_equal(b->header->pid, FX_PID);
        assert_string_equal(b->header->process_name, "fixture");
        assert_int_equal(b->header->segment_seq, fb->segment_seq);
      }
      assert_int_equal(b->n_sites, fb->n_sites);
      for (k = 0; k < fb->n_sites; k++)
        assert_string_equal(b->sites[k]->name, fx_site_name[fb->sites[k]]);
      assert_int_equal(b->events->n_ts_delta_ns, fb->n_evs);
      for (k = 0; k < fb->n_evs; k++) {
        assert_int_equal(b->events->ts_delta_ns[k], fb->evs[k].delta);
        assert_int_equal(b->events->site_id[k], fb->evs[k].site);
      }
      assert_int_equal(b->last, fb->last);
    } else {
      assert_int_equal(b->seq, 99);
      assert_true(b->last);
    }
    stackrec__batch__free_unpacked(b, NULL);
    free(dec);
    off += fsz;
    total += csz;
  }
  assert_int_equal(i, FX_STD_BATCHES + 2);
  assert_int_equal(stream_decompress_all(buf.data, buf.len), total);

  /* And the real tool agrees, when installed. */
  if (access("/usr/bin/zstd", X_OK) == 0) {
    const char *dir = fx_tmpdir("fmt");
    char path[4200], cmd[4400];

    assert_non_null(dir);
    snprintf(path, sizeof(path), "%s/stackrec-1-000001.zst", dir);
    assert_int_equal(fx_write_file(path, buf.data, buf.len), 0);
    snprintf(cmd, sizeof(cmd), "/usr/bin/zstd -q -t '%s'", path);
    assert_int_equal(system(cmd), 0);
  }
  ZSTD_freeCCtx(cctx);
  stkr_fmt_buf_free(&buf);
}

static void test_encode_limits(void **state) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Events ev = STACKREC__EVENTS__INIT;
  stkr_fmt_buf buf = {0};
  uint8_t *big;
  size_t keep;
  (void)state;

  assert_int_equal(stkr_fmt_encode_batch(NULL, NULL, 3, &buf), -EINVAL);
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, NULL), -EINVAL);

  /* An earlier frame is kept when a later batch is refused. */
  b.seq = 1;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), 0);
  keep = buf.len;
  big = calloc(STKR_FMT_MAX_BATCH_BYTES, 1);
  assert_non_null(big);
  ev.payload_data.data = big;
  ev.payload_data.len = STKR_FMT_MAX_BATCH_BYTES; /* + tags: over the limit */
  b.events = &ev;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), -EFBIG);
  assert_int_equal(buf.len, keep);
  /* Just under the limit is fine (and compresses well). */
  ev.payload_data.len = STKR_FMT_MAX_BATCH_BYTES - 16;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), 0);
  assert_int_equal(stream_decompress_all(buf.data, buf.len),
                   stackrec__batch__get_packed_size(&b) + 2);
  free(big);

  /* Columns whose bound is far past the limit though they pack small (16 M
   * zero deltas: 16 MiB, bound 160): packed exactly instead, and kept. */
  {
    size_t n = STKR_FMT_MAX_BATCH_BYTES / 4, before = buf.len;
    int64_t *ts = calloc(n, sizeof *ts);
    assert_non_null(ts);
    ev.payload_data.len = 0;
    ev.n_ts_delta_ns = n;
    ev.ts_delta_ns = ts;
    assert_true(stkr_fmt_events_packed_max(&ev) > 2 * STKR_FMT_MAX_BATCH_BYTES);
    assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), 0);
    assert_int_equal(stream_decompress_all(buf.data + before, buf.len - before),
                     stackrec__batch__get_packed_size(&b));
    free(ts);
  }

  stkr_fmt_buf_free(&buf);
  assert_null(buf.data);
  assert_int_equal(buf.cap, 0);
  stkr_fmt_buf_free(&buf); /* twice is fine */
  stkr_fmt_buf_free(NULL);
}

/* A value for a column, biased towards the varint size boundaries (and
 * the extremes) where an encoder is most likely wrong. */
static uint64_t edgy(uint64_t *x) {
  static const unsigned bits[] = {0, 1, 7, 8, 14, 15, 21, 28, 31, 32,
                                  35, 42, 49, 56, 63, 64};
  unsigned b;
  uint64_t v;

  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17; /* xorshift64 */
  b = bits[*x % (sizeof bits / sizeof bits[0])];
  v = b == 64 ? ~0ull : (1ull << b);
  switch ((*x >> 8) % 4) {
  case 0: return v - 1;
  case 1: return v;
  case 2: return v + 1;
  default: return (*x >> 11) & (v | (v - 1));
  }
}

/* stkr_fmt_events_pack against protobuf-c's own packing of the same
 * Events, byte for byte, for random columns of random lengths (empty ones
 * included: proto3 leaves them out), and a whole batch: what the encoder
 * writes decodes to a Batch that protobuf-c packs exactly as it packs the
 * original. */
static void test_events_pack_matches_protobuf_c(void **state) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  (void)state;

  for (int round = 0; round < 3000; round++) {
    Stackrec__Events e = STACKREC__EVENTS__INIT;
    Stackrec__Batch b = STACKREC__BATCH__INIT;
    Stackrec__SiteDef site = STACKREC__SITE_DEF__INIT, *sitep = &site;
    Stackrec__Counters cnt = STACKREC__COUNTERS__INIT;
    size_t n[6];
    int64_t *ts;
    uint32_t *col[5];
    uint8_t *mine, *theirs, pdata[300];
    size_t len, plen;
    stkr_fmt_buf buf = {0};
    Stackrec__Batch *back;
    uint8_t *dec;

    for (int k = 0; k < 6; k++)
      n[k] = round < 64 ? (size_t)((round >> k) & 1) * (size_t)(round % 7 + 1)
                        : (size_t)(edgy(&x) % 300);
    ts = malloc((n[0] + 1) * sizeof *ts);
    assert_non_null(ts);
    for (size_t i = 0; i < n[0]; i++) ts[i] = (int64_t)edgy(&x);
    for (int k = 0; k < 5; k++) {
      col[k] = malloc((n[k + 1] + 1) * sizeof **col);
      assert_non_null(col[k]);
      for (size_t i = 0; i < n[k + 1]; i++) col[k][i] = (uint32_t)edgy(&x);
    }
    plen = (size_t)(edgy(&x) % sizeof pdata);
    for (size_t i = 0; i < plen; i++) pdata[i] = (uint8_t)edgy(&x);
    e.base_ts_ns = round % 5 == 0 ? 0 : edgy(&x);
    e.n_ts_delta_ns = n[0], e.ts_delta_ns = ts;
    e.n_site_id = n[1], e.site_id = col[0];
    e.n_thread_id = n[2], e.thread_id = col[1];
    e.n_stack_id = n[3], e.stack_id = col[2];
    e.n_payload_len = n[4], e.payload_len = col[3];
    e.n_payload_truncated = n[5], e.payload_truncated = col[4];
    e.payload_data.len = plen;
    e.payload_data.data = plen ? pdata : NULL;

    len = stackrec__events__get_packed_size(&e);
    assert_true(stkr_fmt_events_packed_max(&e) >= len);
    mine = malloc(len + 1);
    theirs = malloc(len + 1);
    assert_non_null(mine);
    assert_non_null(theirs);
    assert_int_equal(stkr_fmt_events_pack(&e, mine), len);
    assert_int_equal(stackrec__events__pack(&e, theirs), len);
    assert_memory_equal(mine, theirs, len);

    /* In a batch, with fields on both sides of field 8. */
    b.seq = edgy(&x) | 1;
    site.id = 3;
    site.name = "privacy.test";
    b.n_sites = 1, b.sites = &sitep;
    cnt.attempted = edgy(&x);
    b.counters = &cnt;
    b.last = round & 1;
    b.events = &e;
    assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), 0);
    dec = malloc(stackrec__batch__get_packed_size(&b) + 1);
    assert_non_null(dec);
    len = ZSTD_decompress(dec, stackrec__batch__get_packed_size(&b) + 1,
                          buf.data, buf.len);
    assert_int_equal(len, stackrec__batch__get_packed_size(&b));
    back = stackrec__batch__unpack(NULL, len, dec);
    assert_non_null(back);
    free(mine);
    free(theirs);
    len = stackrec__batch__get_packed_size(back);
    assert_int_equal(len, stackrec__batch__get_packed_size(&b));
    mine = malloc(len + 1);
    theirs = malloc(len + 1);
    assert_non_null(mine);
    assert_non_null(theirs);
    assert_int_equal(stackrec__batch__pack(back, mine), len);
    assert_int_equal(stackrec__batch__pack(&b, theirs), len);
    assert_memory_equal(mine, theirs, len);

    stackrec__batch__free_unpacked(back, NULL);
    free(dec);
    free(mine);
    free(theirs);
    stkr_fmt_buf_free(&buf);
    free(ts);
    for (int k = 0; k < 5; k++) free(col[k]);
  }
}

/* stkr_fmt_events_packed_max only reads the column lengths: a bound that
 * wraps (n * 10 past SIZE_MAX, as on a 32-bit size_t from 429 M deltas,
 * or the sum of the columns) would pass the limit check and size the
 * buffer too small for stkr_fmt_events_pack. It saturates instead. */
static void test_events_packed_max_saturates(void **state) {
  Stackrec__Events e = STACKREC__EVENTS__INIT;
  (void)state;

  e.n_ts_delta_ns = SIZE_MAX / 10 + 1; /* 10 * n wraps to 4 */
  assert_int_equal(stkr_fmt_events_packed_max(&e), SIZE_MAX);
  e.n_ts_delta_ns = 0;
  e.n_stack_id = SIZE_MAX / 5 + 1; /* 5 * n wraps to 3 */
  assert_int_equal(stkr_fmt_events_packed_max(&e), SIZE_MAX);
  /* Each column's bound fits, their sum does not. */
  e.n_ts_delta_ns = e.n_site_id = e.n_thread_id = e.n_stack_id =
      e.n_payload_len = e.n_payload_truncated = SIZE_MAX / 16;
  assert_int_equal(stkr_fmt_events_packed_max(&e), SIZE_MAX);
  e.n_ts_delta_ns = e.n_site_id = e.n_thread_id = e.n_stack_id =
      e.n_payload_len = e.n_payload_truncated = 0;
  e.payload_data.len = SIZE_MAX - 4;
  assert_int_equal(stkr_fmt_events_packed_max(&e), SIZE_MAX);
  /* Small ones are exact arithmetic still. */
  e.payload_data.len = 0;
  e.n_ts_delta_ns = 3;
  assert_int_equal(stkr_fmt_events_packed_max(&e), 11 + 1 + 1 + 30);
}

/* A batch over the limit is refused before its buffer is reserved (as
 * when protobuf-c sized the whole batch first): merge re-encodes batches
 * of other writers, and a refused one must not cost several times the
 * limit in memory first. Both when the events are too big and when the
 * rest of the batch is. */
static void test_encode_refuses_before_reserving(void **state) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Events ev = STACKREC__EVENTS__INIT;
  Stackrec__StringDef sd = STACKREC__STRING_DEF__INIT, *sdp = &sd;
  stkr_fmt_buf buf = {0};
  char *big;
  (void)state;

  big = calloc(STKR_FMT_MAX_BATCH_BYTES + 1, 1);
  assert_non_null(big);
  b.seq = 1;
  b.events = &ev;
  ev.payload_data.data = (uint8_t *)big;
  ev.payload_data.len = STKR_FMT_MAX_BATCH_BYTES;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), -EFBIG);
  assert_int_equal(buf.len, 0);
  assert_int_equal(buf.cap, 0);

  ev.payload_data.len = 0;
  ev.payload_data.data = NULL;
  memset(big, 'x', STKR_FMT_MAX_BATCH_BYTES);
  sd.id = 1;
  sd.value = big;
  b.n_strings = 1;
  b.strings = &sdp;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), -EFBIG);
  assert_int_equal(buf.len, 0);
  assert_int_equal(buf.cap, 0);
  b.events = NULL; /* no events: protobuf-c packs it all */
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 1, &buf), -EFBIG);
  assert_int_equal(buf.len, 0);
  assert_int_equal(buf.cap, 0);
  free(big);
  stkr_fmt_buf_free(&buf);
}

TL_TEST_MAIN("format", NULL, NULL, test_segment_name, test_segment_parse,
             test_encode_roundtrip, test_encode_limits,
             test_events_pack_matches_protobuf_c,
             test_events_packed_max_saturates,
             test_encode_refuses_before_reserving)
