/* test-arena.c: the one block arena (common/stkr_arena.h) that the flush
 * worker's stack table and the symbolizer keep their lists in: pointers
 * stay valid and untouched while later allocations open new blocks, a
 * request larger than a block gets a block of its own, every pointer is
 * 8-byte aligned, n == 0 gives distinct non-NULL pointers, and a size
 * that would overflow is refused without changing the arena. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/stkr_arena.h"
#include "tests/testlib.h"

#define BLOCK 256u

static void test_pointers_stay_valid_across_blocks(void **state) {
  (void)state;
  stkr_arena a = {0};
  uint32_t *p[200];

  /* 200 lists of 1..7 words, 4-byte words: many blocks of 256 bytes. */
  for (uint32_t i = 0; i < 200; i++) {
    uint32_t n = 1 + i % 7;
    p[i] = (uint32_t *)stkr_arena_alloc(&a, n * sizeof(uint32_t), BLOCK);
    assert_non_null(p[i]);
    assert_int_equal((uintptr_t)p[i] % 8, 0);
    for (uint32_t k = 0; k < n; k++) p[i][k] = i * 100 + k;
  }
  for (uint32_t i = 0; i < 200; i++)
    for (uint32_t k = 0; k < 1 + i % 7; k++)
      assert_int_equal(p[i][k], i * 100 + k);
  /* 200 lists of at most 32 bytes rounded up to 8: more than one block,
   * and only whole blocks are counted. */
  assert_true(a.bytes > BLOCK);
  assert_int_equal(a.bytes % BLOCK, 0);
  stkr_arena_free(&a);
  assert_null(a.head);
  assert_int_equal(a.bytes, 0);
}

static void test_large_request_gets_its_own_block(void **state) {
  (void)state;
  stkr_arena a = {0};
  uint8_t *small = (uint8_t *)stkr_arena_alloc(&a, 8, BLOCK);
  uint8_t *big = (uint8_t *)stkr_arena_alloc(&a, 10 * BLOCK + 3, BLOCK);

  assert_non_null(small);
  assert_non_null(big);
  memset(big, 0xAB, 10 * BLOCK + 3); /* ASan: the whole request is usable */
  assert_int_equal(a.bytes, BLOCK + 10 * BLOCK + 8);
  assert_int_equal(big[10 * BLOCK + 2], 0xAB);
  stkr_arena_free(&a);
}

static void test_zero_bytes_distinct_non_null(void **state) {
  (void)state;
  stkr_arena a = {0};
  void *x = stkr_arena_alloc(&a, 0, BLOCK);
  void *y = stkr_arena_alloc(&a, 0, BLOCK);

  assert_non_null(x);
  assert_non_null(y);
  assert_ptr_not_equal(x, y);
  stkr_arena_free(&a);
}

static void test_overflow_refused_arena_unchanged(void **state) {
  (void)state;
  stkr_arena a = {0};
  uint64_t *p = (uint64_t *)stkr_arena_alloc(&a, 8, BLOCK);

  assert_non_null(p);
  *p = 42;
  stkr_arena_blk *head = a.head;
  size_t bytes = a.bytes;
  assert_null(stkr_arena_alloc(&a, SIZE_MAX, BLOCK));
  assert_null(stkr_arena_alloc(&a, SIZE_MAX - 7, BLOCK));
  assert_ptr_equal(a.head, head);
  assert_int_equal(a.bytes, bytes);
  assert_int_equal(*p, 42);
  stkr_arena_free(&a);
  stkr_arena_free(&a); /* an empty arena: nothing to do */
}

TL_TEST_MAIN("arena", NULL, NULL, test_pointers_stay_valid_across_blocks,
             test_large_request_gets_its_own_block,
             test_zero_bytes_distinct_non_null,
             test_overflow_refused_arena_unchanged)
