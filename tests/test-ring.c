/* test-ring.c: the per-thread SPSC ring (recorder/ring.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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
  rec = stkr__ring_reserve(&r, 32 + 8 * 64);
  assert_non_null(rec);
  rec->size = 32 + 8 * 2;
  rec->site_id = 7;
  rec->depth = 2;
  stkr__ring_commit(&r, rec->size);
  assert_int_equal(stkr__ring_used(&r), 48);
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

static void test_spsc_two_threads(void **state) {
  pthread_t th;
  uint32_t want = 1;
  (void)state;
  assert_int_equal(stkr__ring_init(&g_spsc, 4096, 0, 0, ""), 0);
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

TL_TEST_MAIN("ring", NULL, NULL, test_size_rounds_up_to_power_of_two,
             test_fifo_and_empty,
             test_full_ring_refuses_then_accepts_after_release,
             test_wrap_marker_keeps_records_contiguous,
             test_shorter_commit_than_reserve, test_spsc_two_threads)
