/* test-ring.c: the per-thread SPSC ring (recorder/ring.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "recorder/stkr_internal.h"
#include "tests/testlib.h"

/* Push one record of `depth` fake PCs, each = seq * 1000 + i. */
static int push(stkr__ring *r, uint32_t seq, unsigned depth) {
  uint32_t size = stkr__record_full_bytes(depth, 0);
  stkr__record *rec = stkr__ring_reserve(r, size);
  unsigned i;

  if (rec == NULL)
    return 0;
  rec->size = size;
  rec->site_id = seq;
  rec->depth = (uint16_t)depth;
  rec->payload_len = 0;
  rec->flags = 0;
  rec->slot = 0;
  for (i = 0; i < depth; i++)
    ((uint64_t *)(void *)((stkr__record_full *)(void *)rec + 1))[i] =
        (uint64_t)seq * 1000 + i;
  stkr__ring_commit(r, size);
  return 1;
}

static void check(const stkr__record *rec, uint32_t seq, unsigned depth) {
  unsigned i;
  assert_non_null(rec);
  assert_int_equal(rec->site_id, seq);
  assert_int_equal(rec->depth, depth);
  for (i = 0; i < depth; i++)
    assert_int_equal(stkr__record_pcs(rec)[i], (uint64_t)seq * 1000 + i);
}

static void test_size_rounds_up_to_power_of_two(void **state) {
  stkr__ring r;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, 5000, 0, 0, ""), 0);
  assert_int_equal(stkr__ring_size(&r), 8192);
  stkr__ring_free(&r);
}

static void test_fifo_and_empty(void **state) {
  stkr__ring r;
  uint32_t s;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, 4096, 0, 0, ""), 0);
  assert_null(stkr__ring_peek(&r));
  for (s = 1; s <= 10; s++)
    assert_true(push(&r, s, s));
  for (s = 1; s <= 10; s++) {
    const stkr__record *rec = stkr__ring_peek(&r);
    check(rec, s, s);
    stkr__ring_release(&r, rec);
  }
  assert_null(stkr__ring_peek(&r));
  assert_int_equal(stkr__ring_used(&r), 0);
  stkr__ring_free(&r);
}

static void test_full_ring_refuses_then_accepts_after_release(void **state) {
  stkr__ring r;
  uint32_t s, pushed = 0;
  const stkr__record *rec;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, 4096, 0, 0, ""), 0);
  /* 56 + 8*9 = 128 bytes: exactly 32 fit in 4096. */
  for (s = 1; s <= 40; s++)
    pushed += (uint32_t)push(&r, s, 9);
  assert_int_equal(pushed, 32);
  assert_int_equal(stkr__ring_used(&r), 4096);
  rec = stkr__ring_peek(&r);
  check(rec, 1, 9);
  stkr__ring_release(&r, rec);
  assert_true(push(&r, 99, 9));
  stkr__ring_free(&r);
}

static void test_wrap_marker_keeps_records_contiguous(void **state) {
  stkr__ring r;
  uint32_t s;
  const stkr__record *rec;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, 4096, 0, 0, ""), 0);
  /* 3 records of 56+8*150 = 1256 bytes: 3768 used, 328 left at the end. */
  for (s = 1; s <= 3; s++)
    assert_true(push(&r, s, 150));
  rec = stkr__ring_peek(&r);
  stkr__ring_release(&r, rec);
  /* Needs 1256 contiguous bytes: only 328 remain before the end, so it
   * must wrap to offset 0 (where record 1 was freed). */
  assert_true(push(&r, 4, 150));
  for (s = 2; s <= 4; s++) {
    rec = stkr__ring_peek(&r);
    check(rec, s, 150);
    assert_ptr_equal(rec, s == 4 ? (void *)r.buf : (void *)rec);
    stkr__ring_release(&r, rec);
  }
  assert_null(stkr__ring_peek(&r));
  /* A reservation that cannot wrap because the start is still in use. */
  stkr__ring_free(&r);
}

static void test_shorter_commit_than_reserve(void **state) {
  stkr__ring r;
  stkr__record *rec;
  const stkr__record *got;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, 4096, 0, 0, ""), 0);
  rec = stkr__ring_reserve(&r, stkr__record_full_bytes(64, 0));
  assert_non_null(rec);
  /* A well-formed full record of 2 PCs (the readers check that its PCs
   * fit its size). */
  rec->size = stkr__record_full_bytes(2, 0);
  rec->site_id = 7;
  rec->depth = 2;
  stkr__ring_commit(&r, rec->size);
  assert_int_equal(stkr__ring_used(&r), stkr__record_full_bytes(2, 0));
  got = stkr__ring_peek(&r);
  assert_int_equal(got->site_id, 7);
  stkr__ring_release(&r, got);
  stkr__ring_free(&r);
}

/* One producer thread, one consumer thread, 2 M records of varying size
 * through a small ring: the consumer must see every record, in order,
 * intact. Run under TSan this also checks the memory ordering. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SPSC_N 200000u /* ~50x slower under sanitizers */
#else
#define SPSC_N 2000000u
#endif
/* A ring its consumer keeps empty stays in its lower half plus one page
 * (stkr__ring_reuse_low): after one lap the upper half is never touched
 * again, which is what keeps an idle thread's ring resident memory small. */
static void test_empty_ring_reuses_low_pages(void **state) {
  stkr__ring r;
  const size_t size = 64u << 10;
  unsigned at_zero = 0;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, size, 0, 0, ""), 0);
  for (uint32_t s = 1; s <= 20000; s++) {
    const stkr__record *rec;
    assert_int_equal(push(&r, s, 4), 1);
    rec = stkr__ring_peek(&r);
    check(rec, s, 4);
    size_t off = (size_t)((const uint8_t *)rec - r.buf);
    if (off >= size / 2 + 4096)
      fail_msg("record %u at offset %zu: past the lower half's page", s, off);
    at_zero += off == 0;
    /* The marker is no use, so never past half. */
    assert_false(stkr__ring_past_half(&r));
    stkr__ring_release(&r, rec);
  }
  /* 20,000 records of 64 bytes are ~39 laps of the lower half. */
  assert_true(at_zero >= 30);
  assert_null(stkr__ring_peek(&r));
  stkr__ring_free(&r);
}

static uint64_t ring_head_off(const stkr__ring *r) {
  return atomic_load_explicit(&r->c->head, memory_order_relaxed) & r->mask;
}

/* Not released (the worker behind, or its batch not written): no reuse, the
 * producer goes on into the upper half and the whole ring stays usable. */
static void test_ring_behind_uses_upper_half(void **state) {
  stkr__ring r;
  const size_t size = 64u << 10;
  const uint32_t sz = stkr__record_full_bytes(4, 0);
  uint32_t s = 1;
  bool upper = false;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, size, 0, 0, ""), 0);
  /* Lap once, released record by record, until the next record is the
   * last that starts below half. */
  do {
    assert_int_equal(push(&r, s, 4), 1);
    const stkr__record *rec = stkr__ring_peek(&r);
    check(rec, s++, 4);
    stkr__ring_release(&r, rec);
  } while (s < 1000 || !(ring_head_off(&r) < size / 2 &&
                         ring_head_off(&r) + sz >= size / 2));
  /* Now fill without reading: every byte of the ring takes records. */
  uint32_t first = s, n = 0;
  while (push(&r, s, 4)) {
    s++;
    n++;
  }
  assert_true((uint64_t)n * sz > size - 2 * sz);
  for (uint32_t i = first; i < s; i++) {
    const stkr__record *rec = stkr__ring_peek(&r);
    check(rec, i, 4);
    upper |= (size_t)((const uint8_t *)rec - r.buf) >= size / 2 + 4096;
    stkr__ring_consume(&r, rec);
  }
  assert_true(upper);
  stkr__ring_release_read(&r);
  stkr__ring_free(&r);
}

/* After a reuse marker the producer has everything below the marker to
 * write before the marker's release, and the marker does not count as use
 * (no wake for it). */
static void test_reuse_marker_leaves_half(void **state) {
  stkr__ring r;
  const size_t size = 64u << 10;
  const uint32_t sz = stkr__record_full_bytes(4, 0);
  uint32_t s = 1, n = 0;
  uint64_t off;
  (void)state;
  assert_int_equal(stkr__ring_init(&r, size, 0, 0, ""), 0);
  /* Walk head up, released record by record, to where the next record
   * would touch a new page of the upper half. */
  while (!stkr__ring_reuse_low(&r, off = ring_head_off(&r), sz)) {
    assert_true(s < 10000); /* half a lap is ~450 records */
    assert_int_equal(push(&r, s, 4), 1);
    const stkr__record *rec = stkr__ring_peek(&r);
    check(rec, s++, 4);
    stkr__ring_release(&r, rec);
  }
  assert_true(off >= size / 2);
  /* The next record restarts at 0 behind a marker over [off, end); then
   * fill without releasing. */
  while (push(&r, s, 4)) {
    if (n == 0)
      assert_ptr_equal(stkr__ring_peek(&r), (const void *)r.buf);
    n++;
    if ((uint64_t)n * sz <= size / 2)
      assert_false(stkr__ring_past_half(&r));
    s++;
  }
  assert_int_equal(n, off / sz);
  stkr__ring_free(&r);
}

static stkr__ring g_spsc;
static void *producer(void *arg) {
  uint32_t s = 1;
  (void)arg;
  while (s <= SPSC_N) {
    if (push(&g_spsc, s, s % 17))
      s++;
  }
  return NULL;
}

/* Both sides at full speed, in a one-page ring (wraps only) and in a 64 KiB
 * one (the producer's low-page reuse races with the consumer's release). */
static void spsc_two_threads(size_t ring_bytes) {
  pthread_t th;
  uint32_t want = 1;
  assert_int_equal(stkr__ring_init(&g_spsc, ring_bytes, 0, 0, ""), 0);
  assert_int_equal(pthread_create(&th, NULL, producer, NULL), 0);
  while (want <= SPSC_N) {
    const stkr__record *rec = stkr__ring_peek(&g_spsc);
    unsigned i, depth;
    if (rec == NULL)
      continue;
    depth = want % 17;
    if (rec->site_id != want || rec->depth != depth)
      fail_msg("record %u: got site %u depth %u", want, rec->site_id,
               rec->depth);
    for (i = 0; i < depth; i++)
      if (stkr__record_pcs(rec)[i] != (uint64_t)want * 1000 + i)
        fail_msg("record %u: pc %u corrupt", want, i);
    stkr__ring_release(&g_spsc, rec);
    want++;
  }
  pthread_join(th, NULL);
  assert_null(stkr__ring_peek(&g_spsc));
  stkr__ring_free(&g_spsc);
}

static void test_spsc_two_threads(void **state) {
  (void)state;
  spsc_two_threads(4096);
  spsc_two_threads(64u << 10);
}

/* Records something else wrote (QA: a child made by a raw fork system call
 * writes on in its parent's shared ring; the worker then copied a "depth"
 * of 37 450 PCs and crashed the app, and a debug build aborted): each
 * field a reader uses is checked, the rest up to the head is skipped and
 * counted, never returned. Fails without stkr_ringfile_record_check. */
static void test_records_written_by_another_are_skipped(void **state) {
  static const struct {
    uint16_t depth, payload_len;
    uint8_t flags, slot;
  } bad[] = {
      {60000, 0, 0, 0},                          /* PCs past the record */
      {0, 0, STKR__REC_KNOWN, 200},              /* slot out of the table */
      {0, 0, 0x80, 0},                           /* unknown flag */
      {3, 0, STKR__REC_KNOWN, 0},                /* known, with PCs */
      {0, 9, STKR__REC_PAYLOAD_KNOWN | STKR__REC_PAYLOAD_NEW, 0},
  };
  (void)state;

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    stkr__ring r;
    stkr__ring_cursor cur;
    stkr__record *rec;

    assert_int_equal(stkr__ring_init(&r, 4096, 0, 0, ""), 0);
    assert_true(push(&r, 1, 2));
    assert_true(push(&r, 2, 2));
    rec = (stkr__record *)(void *)(r.buf + stkr__record_full_bytes(2, 0));
    rec->depth = bad[i].depth;
    rec->payload_len = bad[i].payload_len;
    rec->flags = bad[i].flags;
    rec->slot = bad[i].slot;
    assert_true(push(&r, 3, 2)); /* behind the bad one: skipped too */
    stkr__ring_cursor_load(&r, &cur);
    check(stkr__ring_cursor_peek(&r, &cur), 1, 2);
    stkr__ring_cursor_next(&cur, stkr__ring_cursor_peek(&r, &cur));
    assert_null(stkr__ring_cursor_peek(&r, &cur));
    assert_int_equal(cur.corrupt, 2 * stkr__record_full_bytes(2, 0));
    stkr__ring_cursor_store(&r, &cur);
    stkr__ring_free(&r);
  }
}

TL_TEST_MAIN("ring", NULL, NULL, test_size_rounds_up_to_power_of_two,
             test_fifo_and_empty,
             test_full_ring_refuses_then_accepts_after_release,
             test_wrap_marker_keeps_records_contiguous,
             test_shorter_commit_than_reserve,
             test_empty_ring_reuses_low_pages,
             test_ring_behind_uses_upper_half, test_reuse_marker_leaves_half,
             test_spsc_two_threads,
             test_records_written_by_another_are_skipped)
