/* test-flush-pressure.c: when the flush worker drains back to back
 * (flush/drain.c, stkr__drain_under_pressure; the timer in flush/timer.c):
 * a ring an eighth full puts it under pressure; once under pressure, a
 * sixty-fourth keeps it there (hysteresis); less lets it go back to the
 * tick. The rule on real rings filled with 24-byte records, the size of a
 * known stack's. And a long read of one ring hands its space back midway:
 * a batch is written once half the ring is read and held (drain_ring). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "flush/worker.h"
#include "recorder/stackrec.h"
#include "tests/flush_util.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_held_site, "pressure.held");

/* Push records of 24 bytes until `bytes` are unread. */
static void fill_to(stkr__ring *r, uint64_t bytes) {
  while (stkr__ring_unread(r) + 24 <= bytes) {
    stkr__record *rec = stkr__ring_reserve(r, 24);
    assert_non_null(rec);
    rec->size = 24;
    rec->site_id = 1;
    rec->depth = 0;
    rec->payload_len = 0;
    rec->flags = 0;
    rec->slot = 0;
    stkr__ring_commit(r, 24);
  }
}

static void test_enter_at_an_eighth_stay_at_a_sixty_fourth(void **state) {
  static const size_t sizes[] = {64u << 10, 256u << 10};
  (void)state;

  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    stkr__ring r;
    uint64_t size;

    assert_int_equal(stkr__ring_init(&r, sizes[k], 0, 0, ""), 0);
    size = stkr__ring_size(&r);
    /* Empty: never. */
    assert_false(stkr__drain_under_pressure(false, &r));
    assert_false(stkr__drain_under_pressure(true, &r));
    /* Just under a sixty-fourth: not even to stay. */
    fill_to(&r, size / 64 - 24);
    assert_false(stkr__drain_under_pressure(true, &r));
    /* A sixty-fourth: stays, but does not enter. */
    fill_to(&r, size / 64 + 24);
    assert_true(stkr__drain_under_pressure(true, &r));
    assert_false(stkr__drain_under_pressure(false, &r));
    /* Just under an eighth: the same. */
    fill_to(&r, size / 8 - 24);
    assert_true(stkr__drain_under_pressure(true, &r));
    assert_false(stkr__drain_under_pressure(false, &r));
    /* An eighth: enters. */
    fill_to(&r, size / 8 + 24);
    assert_true(stkr__drain_under_pressure(false, &r));
    assert_true(stkr__drain_under_pressure(true, &r));
    stkr__ring_free(&r);
  }
}

/* The most events any one batch of this process holds, and their sum. */
static uint64_t max_batch_events(uint64_t *total) {
  uint32_t seqs[64];
  size_t nseg = tf_segments(tl_dir, (uint32_t)getpid(), seqs, 64), most = 0;

  *total = 0;
  for (size_t i = 0; i < nseg; i++) {
    char path[512];
    Stackrec__Batch **b;
    size_t nb;
    snprintf(path, sizeof path, "%s/stackrec-%u-%06u.zst", tl_dir,
             (unsigned)getpid(), seqs[i]);
    assert_int_equal(tf_load(path, &b, &nb), 0);
    for (size_t k = 0; k < nb; k++) {
      size_t n = b[k]->events ? b[k]->events->n_ts_delta_ns : 0;
      *total += n;
      if (n > most) most = n;
    }
    tf_free(b, nb);
  }
  return most;
}

/* The worker held at the start of its pass (the loader scan lock every pass
 * takes first) while this thread fills seven eighths of a 64 KiB ring with
 * 24-byte records; let go, it reads them all in one run. Records read keep
 * their space until their batch is written, so without a write midway the
 * producer would find the ring full of records already read for the whole
 * run: no batch may hold more than half the ring's records (+1: the one
 * read when half was reached). */
static void test_long_read_writes_at_half_the_ring(void **state) {
  enum { RING = 64 << 10, REC = 24, PUSHED = (RING / REC) * 7 / 8 };
  stkr_config cfg = {.dir = tl_dir, .ring_bytes = RING,
                     .flush_interval_ms = 3600 * 1000,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  stkr_stats st;
  uint64_t total;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  /* The stack's full record first, read: the rest are known records. */
  assert_int_equal(stkr_event(&g_held_site, NULL, 0), 0);
  assert_int_equal(stkr_flush(), 0);
  stkr__loader_scan_begin();
  for (int i = 0; i < PUSHED; i++)
    assert_int_equal(stkr_event(&g_held_site, NULL, 0), 0);
  stkr__loader_scan_end();
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(st.written, PUSHED + 1);
  uint64_t most = max_batch_events(&total);
  assert_int_equal(total, PUSHED + 1);
  assert_true(most <= (RING / 2) / REC + 1);
}

TL_TEST_MAIN("flush-pressure", tl_make_dir, tl_rm_dir,
             test_enter_at_an_eighth_stay_at_a_sixty_fourth,
             test_long_read_writes_at_half_the_ring)
