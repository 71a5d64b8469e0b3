/*
 * test-map.c: common/stkr_map.h, the one open-addressing map: insert,
 * lookup, replace, growth past many doublings, key 0, keys that collide
 * in the low bits, and a hostile sequence whose keys all land in one slot;
 * stkr_index, the same table for records compared by their contents.
 * Each case checks every key against a reference (a plain array).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/stkr_map.h"
#include "tests/testlib.h"

/* stkr_mix64 undone (its multipliers' inverses mod 2^64; x ^= x >> 33 is
 * its own inverse), so that a test can choose where keys land. */
#define MIX_C1 0xFF51AFD7ED558CCDull
#define MIX_C2 0xC4CEB9FE1A85EC53ull
#define MIX_C1_INV 0x4F74430C22A54005ull
#define MIX_C2_INV 0x9CB4B2F8129337DBull

static uint64_t unmix64(uint64_t h) {
  h ^= h >> 33;
  h *= MIX_C2_INV;
  h ^= h >> 33;
  h *= MIX_C1_INV;
  h ^= h >> 33;
  return h;
}

static void unmix_is_the_inverse(void **state) {
  uint64_t x = 0x0123456789ABCDEFull;
  int i;

  (void)state;
  assert_int_equal(MIX_C1 * MIX_C1_INV, 1);
  assert_int_equal(MIX_C2 * MIX_C2_INV, 1);
  for (i = 0; i < 1000; i++, x = x * 6364136223846793005ull + 1)
    assert_int_equal(stkr_mix64(unmix64(x)), x);
}

/* Every key of keys[0..n) maps to vals[i], and the map holds n keys. */
static void check_all(const stkr_map *m, const uint64_t *keys,
                      const uint64_t *vals, size_t n) {
  size_t i, pos = 0, seen = 0;
  uint64_t k, *v;

  assert_int_equal(stkr_map_size(m), n);
  for (i = 0; i < n; i++) {
    v = stkr_map_find(m, keys[i]);
    assert_non_null(v);
    assert_int_equal(*v, vals[i]);
  }
  /* The walk visits each key once, with its value. */
  while (stkr_map_next(m, &pos, &k, &v)) {
    for (i = 0; i < n && keys[i] != k; i++)
      ;
    assert_true(i < n);
    assert_int_equal(*v, vals[i]);
    seen++;
  }
  assert_int_equal(seen, n);
}

static void empty_map(void **state) {
  stkr_map m = {0};
  size_t pos = 0;
  uint64_t k, *v;

  (void)state;
  assert_null(stkr_map_find(&m, 1));
  assert_null(stkr_map_find(&m, 0));
  assert_int_equal(stkr_map_size(&m), 0);
  assert_int_equal(stkr_map_next(&m, &pos, &k, &v), 0);
  stkr_map_free(&m);
  stkr_map_free(NULL);
}

static void insert_lookup_replace_grow(void **state) {
  enum { N = 5000 };
  static uint64_t keys[N], vals[N];
  stkr_map m = {0};
  uint64_t *v;
  size_t i;

  (void)state;
  for (i = 0; i < N; i++) {
    keys[i] = (i + 1) * 0x10001ull; /* spread, never 0 */
    vals[i] = i * 3;
    assert_int_equal(stkr_map_put(&m, keys[i], vals[i]), 0);
    /* Load factor <= 1/2 at every size; the capacity a power of two. */
    assert_true(2 * m.n <= m.cap);
    assert_int_equal(m.cap & (m.cap - 1), 0);
    assert_null(stkr_map_find(&m, keys[i] + 1)); /* never inserted */
  }
  assert_true(m.cap >= 2 * N); /* grew through many doublings */
  check_all(&m, keys, vals, N);

  /* Replace: the size stays, the values change. */
  for (i = 0; i < N; i += 2) {
    vals[i] = ~vals[i];
    assert_int_equal(stkr_map_put(&m, keys[i], vals[i]), 0);
  }
  check_all(&m, keys, vals, N);

  /* add: 0 and the current value for a known key, 1 and 0 for a new one. */
  assert_int_equal(stkr_map_add(&m, keys[7], &v), 0);
  assert_int_equal(*v, vals[7]);
  assert_int_equal(stkr_map_add(&m, 0xABCDEFull << 20, &v), 1);
  assert_int_equal(*v, 0);
  *v = 42;
  assert_int_equal(*stkr_map_find(&m, 0xABCDEFull << 20), 42);
  assert_int_equal(stkr_map_size(&m), N + 1);

  /* clear keeps the memory and forgets every key. */
  i = m.cap;
  stkr_map_clear(&m);
  assert_int_equal(m.cap, i);
  assert_int_equal(stkr_map_size(&m), 0);
  assert_null(stkr_map_find(&m, keys[0]));
  assert_int_equal(stkr_map_put(&m, keys[1], 5), 0);
  assert_int_equal(*stkr_map_find(&m, keys[1]), 5);
  stkr_map_free(&m);
  assert_null(m.slot);
  assert_int_equal(m.cap, 0);
}

static void key_zero(void **state) {
  stkr_map m = {0};
  uint64_t keys[3] = {0, 1, UINT64_MAX}, vals[3] = {7, 8, 9}, *v;
  size_t i;

  (void)state;
  /* Key 0 is an ordinary key, although slots use it to mean empty. */
  assert_null(stkr_map_find(&m, 0));
  assert_int_equal(stkr_map_add(&m, 0, &v), 1);
  assert_int_equal(*v, 0);
  assert_int_equal(stkr_map_size(&m), 1);
  assert_null(stkr_map_find(&m, 1));
  for (i = 0; i < 3; i++)
    assert_int_equal(stkr_map_put(&m, keys[i], vals[i]), 0);
  check_all(&m, keys, vals, 3);
  assert_int_equal(stkr_map_add(&m, 0, &v), 0);
  assert_int_equal(*v, 7);
  stkr_map_clear(&m);
  assert_null(stkr_map_find(&m, 0));
  assert_int_equal(stkr_map_size(&m), 0);
  stkr_map_free(&m);
}

/* Put keys[i] = the key whose mixed hash is mixed(i), with vals[i], for
 * i < n, then check that the map finds every one. */
static void put_by_mixed_hash(stkr_map *m, uint64_t (*mixed)(size_t),
                              uint64_t *keys, const uint64_t *vals, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    keys[i] = unmix64(mixed(i));
    assert_true(stkr_mix64(keys[i]) == mixed(i));
    assert_int_equal(stkr_map_put(m, keys[i], vals[i]), 0);
  }
  check_all(m, keys, vals, n);
}

/* Mixed hashes ending in 0xFFD, 0xFFE or 0xFFF: in a map of at most 4096
 * slots they all start in the last three slots, so every probe runs
 * through other keys' slots and across the wrap to slot 0. */
static uint64_t ends_in_fff(size_t i) {
  return ((uint64_t)(i + 1) << 12) | (0xFFF - (i % 3));
}

/* The hostile sequence: every key's mixed hash has its low 32 bits zero,
 * so at every capacity every key starts its probe at slot 0. Lookups are
 * slow (linear) but every one must still be right, and absent keys of the
 * same shape must still end at an empty slot. */
static uint64_t low_half_zero(size_t i) { return (uint64_t)(i + 1) << 32; }

/* Keys that collide by their mixed hashes: n keys put by mixed(i), key i
 * with the value i (flip: UINT64_MAX - i), each found; then (replace)
 * every third key's value replaced by i in the middle of the run and all
 * found again; last, `absent` keys of the same shape never put,
 * mixed(n + 3 j) for j < absent, not found. */
typedef struct colliding_case {
  const char *name;
  uint64_t (*mixed)(size_t);
  size_t n;
  bool flip, replace;
  size_t absent;
} colliding_case;

#define MAX_COLLIDING 2000
static const colliding_case g_colliding[] = {
    {"colliding_keys", ends_in_fff, 1500, false, false, 1500},
    {"hostile_one_slot", low_half_zero, MAX_COLLIDING, true, true, 1},
};

static void colliding(void **state) {
  const colliding_case *c = *state;
  static uint64_t keys[MAX_COLLIDING], vals[MAX_COLLIDING];
  stkr_map m = {0};
  size_t i;

  for (i = 0; i < c->n; i++)
    vals[i] = c->flip ? UINT64_MAX - i : i;
  put_by_mixed_hash(&m, c->mixed, keys, vals, c->n);
  if (c->replace) {
    for (i = 0; i < c->n; i += 3) {
      vals[i] = i;
      assert_int_equal(stkr_map_put(&m, keys[i], vals[i]), 0);
    }
    check_all(&m, keys, vals, c->n);
  }
  for (i = 0; i < c->absent; i++)
    assert_null(stkr_map_find(&m, unmix64(c->mixed(c->n + 3 * i))));
  stkr_map_free(&m);
}

static void reserve_then_fill(void **state) {
  stkr_map m = {0};
  size_t i, cap;

  (void)state;
  assert_int_equal(stkr_map_reserve(&m, 1000), 0);
  cap = m.cap;
  assert_true(cap >= 2000);
  for (i = 1; i <= 1000; i++)
    assert_int_equal(stkr_map_put(&m, i, i * i), 0);
  assert_int_equal(m.cap, cap); /* reserved: no growth while filling */
  for (i = 1; i <= 1000; i++)
    assert_int_equal(*stkr_map_find(&m, i), i * i);
  /* An impossible size is refused, the map left as it was. */
  assert_int_equal(stkr_map_reserve(&m, SIZE_MAX / 4), -ENOMEM);
  assert_int_equal(m.cap, cap);
  assert_int_equal(*stkr_map_find(&m, 500), 250000);
  stkr_map_free(&m);
}

/* stkr_index: records keyed by contents. Strings whose hashes are forced
 * equal in pairs (and all into one probe start) are each found as their
 * own record; absent ones are not; growth keeps every entry. */
static void index_of_records(void **state) {
  enum { N = 3000 };
  static char recs[N][16];
  stkr_index x = {0};
  size_t i, pos, ix, cands;
  char probe[16];

  (void)state;
  for (i = 0; i < N; i++) {
    snprintf(recs[i], sizeof recs[i], "rec-%zu", i);
    /* A deliberately bad hash: i / 2, mixed back to the same start for
     * every record (low 32 bits 0), so pairs share a hash and all runs
     * overlap; hash 0 (records 0 and 1) is allowed. */
    assert_int_equal(stkr_index_add(&x, unmix64((uint64_t)(i / 2) << 32), i),
                     0);
    assert_true(2 * x.n <= x.cap);
  }
  for (i = 0; i < N; i++) {
    uint64_t h = unmix64((uint64_t)(i / 2) << 32);
    size_t found = STKR_INDEX_NONE;
    cands = 0;
    for (ix = stkr_index_first(&x, h, &pos); ix != STKR_INDEX_NONE;
         ix = stkr_index_next(&x, h, &pos)) {
      assert_true(ix < N);
      cands++;
      if (strcmp(recs[ix], recs[i]) == 0)
        found = ix;
    }
    assert_int_equal(cands, 2); /* the pair of equal hash, no more */
    assert_int_equal(found, i);
  }
  /* A string never added, under a hash in use and under a new one. */
  snprintf(probe, sizeof probe, "absent");
  for (ix = stkr_index_first(&x, unmix64(5ull << 32), &pos);
       ix != STKR_INDEX_NONE; ix = stkr_index_next(&x, unmix64(5ull << 32), &pos))
    assert_string_not_equal(recs[ix], probe);
  assert_int_equal(stkr_index_first(&x, unmix64((uint64_t)N << 32), &pos),
                   STKR_INDEX_NONE);
  stkr_index_clear(&x);
  assert_int_equal(x.n, 0);
  assert_int_equal(stkr_index_first(&x, 0, &pos), STKR_INDEX_NONE);
  stkr_index_free(&x);
  stkr_index_free(NULL);
  {
    stkr_index e = {0}; /* never filled: no slots, lookups still answer */
    assert_int_equal(stkr_index_first(&e, 7, &pos), STKR_INDEX_NONE);
  }
}

int main(void) {
  return TL_RUN_GROUP(
      "map", NULL, NULL,
      TL_CASES(NULL, NULL, unmix_is_the_inverse, empty_map,
               insert_lookup_replace_grow, key_zero),
      TL_TABLE(NULL, NULL, colliding, g_colliding),
      TL_CASES(NULL, NULL, reserve_then_fill, index_of_records));
}
