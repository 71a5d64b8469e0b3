/* test-flush-stacktable.c: the worker's stack dedup table (flush/stacktable.c),
 * driven directly: dedup, a forced hash collision that must never merge two
 * stacks, the truncated flag as part of identity, and growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flush/flush_internal.h"
#include "tests/testlib.h"

static void test_dedup_same_stack_same_id(void **state) {
  (void)state;
  stkr__stacktab t;
  uint64_t a[3] = {0x1000, 0x2000, 0x3000};
  uint64_t a_copy[3] = {0x1000, 0x2000, 0x3000};
  uint64_t b[2] = {0x1000, 0x2000};

  assert_int_equal(stkr__stacktab_init(&t), 0);
  uint32_t ia = stkr__stacktab_intern(&t, stkr__hash_pcs(a, 3), 1, a, 3, false);
  uint32_t ib = stkr__stacktab_intern(&t, stkr__hash_pcs(b, 2), 1, b, 2, false);
  assert_int_equal(ia, 1); /* ids from 1, in order of first sight */
  assert_int_equal(ib, 2);
  /* Same content from a different buffer: same id; the table kept a copy. */
  a[0] = 0xdead;
  assert_int_equal(
      stkr__stacktab_intern(&t, stkr__hash_pcs(a_copy, 3), 1, a_copy, 3, false), 1);
  assert_int_equal(t.count, 2);
  stkr__stack *s = stkr__stacktab_get(&t, 1);
  assert_int_equal(s->depth, 3);
  assert_int_equal(s->pcs[0], 0x1000);
  assert_int_equal(s->hash, stkr__hash_pcs(a_copy, 3));
  stkr__stacktab_free(&t);
}

/* A stack is a call chain as seen at one site: the same PCs at two sites
 * are two stacks (events then need no site column). */
static void test_same_pcs_at_two_sites_are_two_stacks(void **state) {
  (void)state;
  stkr__stacktab t;
  uint64_t a[3] = {0x1000, 0x2000, 0x3000};
  uint64_t h = stkr__hash_pcs(a, 3);

  assert_int_equal(stkr__stacktab_init(&t), 0);
  uint32_t at1 = stkr__stacktab_intern(&t, h, 1, a, 3, false);
  uint32_t at2 = stkr__stacktab_intern(&t, h, 2, a, 3, false);
  assert_int_not_equal(at1, at2);
  assert_int_equal(stkr__stacktab_intern(&t, h, 1, a, 3, false), at1);
  assert_int_equal(stkr__stacktab_intern(&t, h, 2, a, 3, false), at2);
  assert_int_equal(stkr__stacktab_get(&t, at1)->site, 1);
  assert_int_equal(stkr__stacktab_get(&t, at2)->site, 2);
  stkr__stacktab_free(&t);
}

static void test_forced_hash_collision_never_merges(void **state) {
  (void)state;
  stkr__stacktab t;
  const uint64_t H = 0x1234567890abcdefull; /* the same hash for all */
  uint64_t x[2] = {0xaaa0, 0xbbb0};
  uint64_t y[2] = {0xaaa0, 0xccc0}; /* same depth, one PC differs */
  uint64_t z[1] = {0xaaa0};         /* prefix of both */

  assert_int_equal(stkr__stacktab_init(&t), 0);
  uint32_t ix = stkr__stacktab_intern(&t, H, 1, x, 2, false);
  uint32_t iy = stkr__stacktab_intern(&t, H, 1, y, 2, false);
  uint32_t iz = stkr__stacktab_intern(&t, H, 1, z, 1, false);
  uint32_t ie = stkr__stacktab_intern(&t, H, 1, NULL, 0, false);
  uint32_t ixt = stkr__stacktab_intern(&t, H, 1, x, 2, true);
  assert_int_not_equal(ix, iy);
  assert_int_not_equal(ix, iz);
  assert_int_not_equal(iy, iz);
  assert_int_not_equal(ie, ix);
  assert_int_not_equal(ie, iz);
  /* Same PCs, but one walk stopped at max_depth: a different stack. */
  assert_int_not_equal(ixt, ix);
  assert_int_equal(t.count, 5);
  /* And each still finds itself. */
  assert_int_equal(stkr__stacktab_intern(&t, H, 1, y, 2, false), iy);
  assert_int_equal(stkr__stacktab_intern(&t, H, 1, x, 2, false), ix);
  assert_int_equal(stkr__stacktab_intern(&t, H, 1, z, 1, false), iz);
  assert_int_equal(stkr__stacktab_intern(&t, H, 1, NULL, 0, false), ie);
  assert_int_equal(stkr__stacktab_get(&t, iy)->pcs[1], 0xccc0);
  assert_int_equal(stkr__stacktab_get(&t, ix)->pcs[1], 0xbbb0);
  stkr__stacktab_free(&t);
}

/* Many stacks (forcing several slot-array doublings and arena blocks),
 * some of them sharing one hash: every one keeps its own id and PCs.
 * (Only a few share it: identical hashes degrade probing to a linear scan,
 * which is the price of correctness, not the case to time.) */
static void test_growth_keeps_every_stack(void **state) {
  (void)state;
  enum { N = 50000, D = 9 };
  stkr__stacktab t;
  uint64_t pcs[D];
  assert_int_equal(stkr__stacktab_init(&t), 0);
  for (uint32_t i = 0; i < N; i++) {
    unsigned depth = 1 + i % D;
    for (unsigned k = 0; k < depth; k++) pcs[k] = 0x400000 + i * 64 + k;
    uint64_t h = (i % 100 == 1) ? 42 : stkr__hash_pcs(pcs, depth);
    assert_int_equal(stkr__stacktab_intern(&t, h, 1, pcs, depth, false), i + 1);
  }
  assert_int_equal(t.count, N);
  assert_true(t.index.cap >= 2 * N);
  for (uint32_t i = 0; i < N; i++) {
    unsigned depth = 1 + i % D;
    for (unsigned k = 0; k < depth; k++) pcs[k] = 0x400000 + i * 64 + k;
    uint64_t h = (i % 100 == 1) ? 42 : stkr__hash_pcs(pcs, depth);
    assert_int_equal(stkr__stacktab_intern(&t, h, 1, pcs, depth, false), i + 1);
    stkr__stack *s = stkr__stacktab_get(&t, i + 1);
    assert_int_equal(s->depth, depth);
    assert_memory_equal(s->pcs, pcs, depth * sizeof *pcs);
  }
  assert_int_equal(t.count, N);
  stkr__stacktab_free(&t);
}

/* A stack of STKR_MAX_DEPTH PCs is larger than nothing in particular, but
 * the arena must serve it whatever the block fill. */
static void test_max_depth_stacks(void **state) {
  (void)state;
  stkr__stacktab t;
  uint64_t pcs[STKR_MAX_DEPTH];
  assert_int_equal(stkr__stacktab_init(&t), 0);
  for (uint32_t i = 0; i < 100; i++) {
    for (unsigned k = 0; k < STKR_MAX_DEPTH; k++) pcs[k] = i * 1000 + k;
    assert_int_equal(stkr__stacktab_intern(&t, i, 1, pcs, STKR_MAX_DEPTH, true),
                     i + 1);
  }
  for (uint32_t i = 0; i < 100; i++) {
    stkr__stack *s = stkr__stacktab_get(&t, i + 1);
    assert_int_equal(s->pcs[STKR_MAX_DEPTH - 1], i * 1000 + STKR_MAX_DEPTH - 1);
    assert_true(s->truncated);
  }
  stkr__stacktab_free(&t);
}

/* A renewal (the table past its cap): the kept stacks under new ids above
 * every id given, their frames kept and their definitions due again; the
 * others forgotten, and met again under yet newer ids; bytes and the
 * count of stacks met follow. */
static void test_renewal_keeps_what_is_marked(void **state) {
  (void)state;
  enum { N = 1000 };
  static const uint32_t frames[2] = {7, 9};
  stkr__stacktab t;
  uint64_t pcs[4];
  uint32_t keep[N] = {0};
  assert_int_equal(stkr__stacktab_init(&t), 0);
  for (uint32_t i = 0; i < N; i++) {
    for (unsigned k = 0; k < 4; k++) pcs[k] = 0x400000 + i * 64 + k;
    assert_int_equal(
        stkr__stacktab_intern(&t, stkr__hash_pcs(pcs, 4), 1, pcs, 4, false),
        i + 1);
  }
  uint64_t full = stkr__stacktab_bytes(&t);
  assert_true(full >= N * (sizeof(stkr__stack) + 4 * 8 + 2 * 4));
  stkr__stacktab_get(&t, 500)->frames = frames;
  stkr__stacktab_get(&t, 500)->n_frames = 2;
  stkr__stacktab_get(&t, 500)->epoch = 3;
  keep[499] = keep[10] = 1; /* ids 500 and 11 */
  assert_int_equal(stkr__stacktab_renew(&t, keep), 0);
  assert_int_equal(t.count, 2);
  assert_int_equal(t.id_base, N);
  assert_int_equal(stkr__stacktab_max_id(&t), N + 2);
  assert_true(stkr__stacktab_bytes(&t) < full);
  assert_int_equal(t.interned, N);
  /* In index order: old 11 first. */
  assert_int_equal(keep[10], N + 1);
  assert_int_equal(keep[499], N + 2);
  assert_int_equal(keep[0], 0);
  assert_false(stkr__stacktab_has(&t, 500));
  assert_false(stkr__stacktab_has(&t, 0));
  assert_true(stkr__stacktab_has(&t, N + 2));
  stkr__stack *s = stkr__stacktab_get(&t, N + 2);
  assert_int_equal(s->pcs[0], 0x400000 + 499 * 64);
  assert_ptr_equal(s->frames, frames);
  assert_int_equal(s->n_frames, 2);
  assert_int_equal(s->epoch, 0); /* defined again in the next batch */
  /* Kept: found by content under its new id. */
  for (unsigned k = 0; k < 4; k++) pcs[k] = 0x400000 + 499 * 64 + k;
  assert_int_equal(
      stkr__stacktab_intern(&t, stkr__hash_pcs(pcs, 4), 1, pcs, 4, false),
      N + 2);
  /* Forgotten: a new id, never one given before. */
  for (unsigned k = 0; k < 4; k++) pcs[k] = 0x400000 + 7 * 64 + k;
  assert_int_equal(
      stkr__stacktab_intern(&t, stkr__hash_pcs(pcs, 4), 1, pcs, 4, false),
      N + 3);
  assert_int_equal(t.interned, N + 1);
  /* Nothing kept: an empty generation, ids going on. */
  memset(keep, 0, sizeof keep);
  assert_int_equal(stkr__stacktab_renew(&t, keep), 0);
  assert_int_equal(t.count, 0);
  assert_int_equal(t.arena.bytes, 0);
  assert_int_equal(
      stkr__stacktab_intern(&t, stkr__hash_pcs(pcs, 4), 1, pcs, 4, false),
      N + 4);
  stkr__stacktab_free(&t);
}

TL_TEST_MAIN("flush-stacktable", NULL, NULL, test_dedup_same_stack_same_id,
             test_same_pcs_at_two_sites_are_two_stacks,
             test_forced_hash_collision_never_merges,
             test_growth_keeps_every_stack, test_max_depth_stacks,
             test_renewal_keeps_what_is_marked)
