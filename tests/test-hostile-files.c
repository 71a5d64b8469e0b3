/*
 * test-hostile-files.c: corruption properties of the reader on a
 * multi-batch segment shaped like the flush worker's (definitions only in
 * the first batch, 16 batches of 8 events with payloads), beyond
 * test-damage.c (every truncation of 3 small batches, flips in one frame):
 *
 *   - every truncation point of the 16-batch segment;
 *   - thousands of random single-bit flips anywhere in the file, random
 *     byte swaps, bursts of several flips at once, and zeroed 16-byte runs
 *     (a torn sector).
 *
 * After each mutation, with the reader: it returns (the test would time out
 * on a loop); every event delivered is one that was recorded, exactly
 * (timestamp, ids, payload), never twice; every batch whose bytes were not
 * touched is delivered whole; a touched batch is delivered whole or not at
 * all; and every lost batch is covered by a data-loss warning naming the
 * file and an offset between the last good data before it and its start.
 * The figures (points, flips, swaps) are printed and kept in
 * docs/TESTING.md.
 */
#include <errno.h>
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

#define NB 16 /* batches */
#define NE 8  /* events per batch */

typedef struct seg {
  stkr_fmt_buf buf;
  size_t end[NB]; /* offset just past batch k's frame */
  uint64_t ts[NB][NE];
} seg;

/* Batch k: ids cycle through the fixture's definitions (batch 0 defines
 * them), payload "bKK-eI" names the event. */
static void build(seg *s) {
  static const uint32_t sites[] = {1, 2, 3}, threads[] = {1, 2},
                        stacks[] = {1, 2, 3};
  static char pay[NB][NE][8];
  int k, i;

  memset(s, 0, sizeof(*s));
  for (k = 0; k < NB; k++) {
    fx_ev ev[NE];
    fx_batch b;
    uint64_t ts = 3000000000ull + (uint64_t)k * 1000000u;

    memset(&b, 0, sizeof b);
    for (i = 0; i < NE; i++) {
      snprintf(pay[k][i], sizeof pay[k][i], "b%02d-e%d", k, i);
      ev[i].delta = i == 0 ? 0 : 100 + 7 * i;
      ev[i].site = (uint32_t)(k + i) % 3 + 1;
      ev[i].thread = (uint32_t)i % 2 + 1;
      ev[i].stack = (uint32_t)(k * 3 + i) % 3 + 1;
      ev[i].payload = pay[k][i];
      ev[i].plen = 6;
      ev[i].trunc = false;
      ts += (uint64_t)ev[i].delta;
      s->ts[k][i] = ts;
    }
    b.seq = (uint64_t)k + 1;
    b.base_ts = 3000000000ull + (uint64_t)k * 1000000u;
    b.evs = ev;
    b.n_evs = NE;
    if (k == 0) {
      b.header = true;
      b.segment_seq = 1;
      b.sites = sites;
      b.n_sites = 3;
      b.threads = threads;
      b.n_threads = 2;
      b.stacks = stacks;
      b.n_stacks = 3;
    }
    b.counters = k == NB - 1;
    b.last = k == NB - 1;
    assert_int_equal(fx_encode(&b, &s->buf), 0);
    s->end[k] = s->buf.len;
  }
}

static size_t start_of(const seg *s, int k) { return k ? s->end[k - 1] : 0; }

/* The outcome of reading one mutated file. */
typedef struct outcome {
  int got[NB]; /* events of batch k delivered (each exactly once) */
  ru_log log;
  uint64_t damaged;
  bool clean_end;
  /* Events delivered from frames whose checksum flag the mutation
   * cleared: their content is not verified by anyone (see below). */
  unsigned unverified;
} outcome;

/* Frames whose Content_Checksum_flag (bit 2 of the frame header
 * descriptor, the byte after the magic) the mutation cleared. Nothing
 * would verify their content, so the reader must refuse them as damaged:
 * an event delivered from one is counted (and must never happen). */
static bool g_unprot[NB];

static char g_path[4200];

/* Write data as the segment, read it all, check every delivered event is
 * a recorded one, exactly, at most once. */
static void read_back(const seg *s, const uint8_t *data, size_t len,
                      outcome *o) {
  bool seen[NB][NE];
  stkr_event_view ev;
  stkr_reader *r;
  int rc;

  memset(o, 0, sizeof(*o));
  memset(seen, 0, sizeof seen);
  assert_int_equal(fx_write_file(g_path, data, len), 0);
  r = ru_open(g_path, &o->log);
  assert_non_null(r);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    int k, i;
    char p[8];

    for (k = 0; k < NB; k++)
      if (g_unprot[k] && ev.batch_offset == start_of(s, k))
        break;
    if (k < NB) {
      o->unverified++;
      continue;
    }

    if (ev.payload_len != 6)
      fail_msg("event with a %zu-byte payload", ev.payload_len);
    memcpy(p, ev.payload, 6);
    p[6] = '\0';
    if (sscanf(p, "b%2d-e%1d", &k, &i) != 2 || k < 0 || k >= NB || i < 0 ||
        i >= NE)
      fail_msg("event never recorded: payload \"%s\"", p);
    if (seen[k][i])
      fail_msg("event b%02d-e%d delivered twice", k, i);
    seen[k][i] = true;
    if (ev.ts_ns != s->ts[k][i]) {
      ru_dump_log(&o->log);
      fail_msg("event b%02d-e%d: ts %llu, recorded %llu (batch at %llu)", k, i,
               (unsigned long long)ev.ts_ns, (unsigned long long)s->ts[k][i],
               (unsigned long long)ev.batch_offset);
    }
    assert_int_equal(ev.thread_id, (uint32_t)i % 2 + 1);
    assert_int_equal(ev.stack_id, (uint32_t)(k * 3 + i) % 3 + 1);
    assert_int_equal(ev.site_id, (uint32_t)(k + i) % 3 + 1);
    assert_false(ev.payload_truncated);
    o->got[k]++;
  }
  assert_int_equal(rc, 0);
  o->damaged = stkr_reader_process(r, 0)->damaged_batches;
  o->clean_end = stkr_reader_process(r, 0)->clean_end;
  stkr_reader_free(r);
}

/* The properties, given which bytes [lo[j], hi[j]) were changed. */
static void check(const seg *s, const outcome *o, const size_t *lo,
                  const size_t *hi, int nchanged, const char *what) {
  size_t good_end = 0; /* end of the last batch delivered so far */
  int k, j, w, lost = 0;

  for (k = 0; k < NB; k++) {
    bool touched = false;

    if (g_unprot[k])
      continue;
    for (j = 0; j < nchanged; j++)
      touched |= lo[j] < s->end[k] && hi[j] > start_of(s, k);
    if (o->got[k] != 0 && o->got[k] != NE)
      fail_msg("%s: batch %d half delivered (%d events)", what, k, o->got[k]);
    if (o->got[k] == NE) {
      good_end = s->end[k];
      continue;
    }
    if (!touched) {
      ru_dump_log(&o->log);
      fail_msg("%s: intact batch %d lost", what, k);
    }
    lost++;
    /* Covered by a warning between the good data before it and its start,
     * naming the file. The segment is the last of a recording that has not
     * ended cleanly (its last=true batch is lost or cut), so a batch cut
     * off by the end of the file is, by the live-tail rule, the one being
     * written: a LIVE_TAIL note (not data_lost) covers it. A mutation that
     * makes the last frame claim more bytes than the file holds looks
     * exactly like that and is reported the same way. */
    for (w = 0; w < o->log.n; w++)
      if ((o->log.w[w].data_lost ||
           o->log.w[w].kind == STKR_WARN_LIVE_TAIL) &&
          o->log.w[w].offset >= (int64_t)good_end &&
          o->log.w[w].offset <= (int64_t)start_of(s, k) &&
          strstr(o->log.w[w].msg, g_path) != NULL)
        break;
    if (w == o->log.n) {
      ru_dump_log(&o->log);
      fail_msg("%s at %zu: lost batch %d (bytes %zu..%zu) not reported", what,
               lo[0], k, start_of(s, k), s->end[k]);
    }
  }
  /* A live tail is the end: nothing after its offset was delivered. */
  for (w = 0; w < o->log.n; w++)
    if (o->log.w[w].kind == STKR_WARN_LIVE_TAIL) {
      assert_false(o->log.w[w].data_lost);
      for (k = 0; k < NB; k++)
        if (s->end[k] > (size_t)o->log.w[w].offset && o->got[k] != 0)
          fail_msg("%s: batch %d delivered after a live tail at %lld", what,
                   k, (long long)o->log.w[w].offset);
    }
  if (lost > 0)
    assert_true(o->damaged >= 1 || ru_count(&o->log, STKR_WARN_LIVE_TAIL) == 1);
}

static void set_path(void) {
  snprintf(g_path, sizeof g_path, "%s/stackrec-%u-000001.zst",
           fx_tmpdir("hostile-files"), FX_PID);
}

static void test_truncate_every_byte_of_16_batches(void **state) {
  static seg s;
  outcome o;
  size_t cut, lo, hi;
  (void)state;

  build(&s);
  set_path();
  for (cut = 1; cut <= s.buf.len; cut++) {
    int k, complete = 0;

    read_back(&s, s.buf.data, cut, &o);
    for (k = 0; k < NB; k++)
      complete += s.end[k] <= cut;
    for (k = 0; k < NB; k++)
      if (o.got[k] != (k < complete ? NE : 0))
        fail_msg("cut %zu: batch %d: %d events", cut, k, o.got[k]);
    if (complete < NB && cut == start_of(&s, complete)) {
      /* Cut between frames: nothing in the file is damaged, and only
       * the missing last=true batch tells the recording did not end. */
      assert_int_equal(o.log.n, 0);
      assert_false(o.clean_end);
      continue;
    }
    /* "Changed" bytes: everything from the cut on. */
    lo = cut;
    hi = s.buf.len;
    check(&s, &o, &lo, &hi, 1, "truncation");
    /* The only segment, not ended: the cut-off batch is a live tail. */
    assert_int_equal(ru_count(&o.log, STKR_WARN_TRUNCATED), 0);
    if (complete < NB)
      assert_int_equal(ru_count(&o.log, STKR_WARN_LIVE_TAIL), 1);
    else
      assert_true(o.clean_end);
  }
  print_message("truncation: %zu points over a %zu-byte, %d-batch segment\n",
                s.buf.len, s.buf.len, NB);
  stkr_fmt_buf_free(&s.buf);
}

static void test_random_flips_swaps_and_torn_runs(void **state) {
  static seg s;
  uint8_t *m;
  outcome o;
  size_t lo[8], hi[8], n = 0;
  unsigned trial, flips = 0, swaps = 0, bursts = 0, runs = 0, lost = 0;
  unsigned unverified = 0, live = 0;
  (void)state;

  build(&s);
  set_path();
  n = s.buf.len;
  m = malloc(n);
  srand(20261122);
  for (trial = 0; trial < 9000; trial++) {
    int kind = trial < 5000 ? 0 : trial < 7000 ? 1 : trial < 8500 ? 2 : 3;
    int nch = 0, j, b;
    const char *what;

    memcpy(m, s.buf.data, n);
    if (kind == 0) { /* one bit */
      size_t p = (size_t)rand() % n;
      m[p] ^= (uint8_t)(1u << (rand() % 8));
      lo[0] = p, hi[0] = p + 1, nch = 1;
      what = "bit flip";
      flips++;
    } else if (kind == 1) { /* swap two different bytes */
      size_t p, q;
      uint8_t t;
      do {
        p = (size_t)rand() % n;
        q = (size_t)rand() % n;
      } while (m[p] == m[q]);
      t = m[p], m[p] = m[q], m[q] = t;
      lo[0] = p, hi[0] = p + 1, lo[1] = q, hi[1] = q + 1, nch = 2;
      what = "byte swap";
      swaps++;
    } else if (kind == 2) { /* 2..8 bits at once */
      nch = 2 + rand() % 7;
      for (j = 0; j < nch; j++) {
        size_t p = (size_t)rand() % n;
        m[p] ^= (uint8_t)(1u << (rand() % 8));
        lo[j] = p, hi[j] = p + 1;
      }
      what = "flip burst";
      bursts++;
      flips += (unsigned)nch;
    } else { /* a torn sector: 16 bytes zeroed */
      size_t p = (size_t)rand() % (n - 16);
      memset(m + p, 0, 16);
      lo[0] = p, hi[0] = p + 16, nch = 1;
      what = "zeroed run";
      runs++;
    }
    for (b = 0; b < NB; b++) {
      size_t fhd = start_of(&s, b) + 4;
      g_unprot[b] = (s.buf.data[fhd] & 4) && !(m[fhd] & 4);
    }
    read_back(&s, m, n, &o);
    check(&s, &o, lo, hi, nch, what);
    unverified += o.unverified;
    live += (unsigned)ru_count(&o.log, STKR_WARN_LIVE_TAIL);
    for (b = 0; b < NB; b++)
      lost += o.got[b] == 0;
  }
  print_message("mutations of a %zu-byte, %d-batch segment: %u bit flips "
                "(%u bursts of 2-8), %u byte swaps, %u zeroed 16-byte runs; "
                "%u batches lost in all (%u of them the last batch, cut "
                "short and so reported as a live tail); %u events "
                "delivered from frames whose checksum flag was cleared "
                "(unverified)\n",
                n, NB, flips, bursts, swaps, runs, lost, live, unverified);
  memset(g_unprot, 0, sizeof g_unprot);
  assert_true(lost > 0); /* the mutations did hit something */
  assert_int_equal(unverified, 0); /* unchecked frames are refused */
  free(m);
  stkr_fmt_buf_free(&s.buf);
}

/* A tiny, valid zstd frame whose Batch decodes into an enormous message:
 * 3.5 M empty StackDefs (2 bytes each on the wire, ~90 bytes each once
 * protobuf-c has allocated them). The reader must refuse it by its decode
 * budget (STKR_FMT_MAX_DECODED_BYTES), report it with file and offset, and
 * go on to read the intact batch after it. */
static void test_decode_bomb_is_refused_and_reading_goes_on(void **state) {
  const size_t n = 3500000;
  uint8_t *raw = malloc(2 * n);
  stkr_fmt_buf out = {0};
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  size_t bound = ZSTD_compressBound(2 * n), clen;
  fx_batch good = {.seq = 2};
  fx_ev ev = {.delta = 5, .site = 1, .thread = 1, .stack = 1};
  const uint32_t ids[] = {1};
  stkr_reader *r;
  stkr_event_view e;
  ru_log log;
  int events = 0, w, found = 0;
  (void)state;

  assert_non_null(raw);
  set_path();
  for (size_t i = 0; i < n; i++) {
    raw[2 * i] = (5 << 3) | 2; /* Batch.stacks, length-delimited */
    raw[2 * i + 1] = 0;        /* an empty StackDef */
  }
  out.data = malloc(bound);
  out.cap = bound;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  clen = ZSTD_compress2(cctx, out.data, bound, raw, 2 * n);
  assert_false(ZSTD_isError(clen));
  out.len = clen;
  free(raw);
  ZSTD_freeCCtx(cctx);
  /* Then an intact batch with one event. */
  good.header = true;
  good.sites = good.threads = good.stacks = ids;
  good.n_sites = good.n_threads = good.n_stacks = 1;
  good.evs = &ev;
  good.n_evs = 1;
  assert_int_equal(fx_encode(&good, &out), 0);
  assert_int_equal(fx_write_file(g_path, out.data, out.len), 0);

  r = ru_open(g_path, &log);
  assert_non_null(r);
  while (stkr_reader_next(r, &e) == 1)
    events++;
  for (w = 0; w < log.n; w++)
    if (log.w[w].kind == STKR_WARN_DAMAGED && log.w[w].offset == 0 &&
        strstr(log.w[w].msg, "to decode") != NULL &&
        strstr(log.w[w].msg, g_path) != NULL)
      found++;
  assert_int_equal(found, 1);
  assert_int_equal(events, 1);
  assert_int_equal(stkr_reader_process(r, 0)->damaged_batches, 1);
  stkr_reader_free(r);
  print_message("decode bomb: %zu-byte frame (%zu bytes decompressed) "
                "refused by the decode budget\n", clen, 2 * n);
  stkr_fmt_buf_free(&out);
}

TL_TEST_MAIN("hostile-files", NULL, NULL,
             test_truncate_every_byte_of_16_batches,
             test_random_flips_swaps_and_torn_runs,
             test_decode_bomb_is_refused_and_reading_goes_on)
