/*
 * stkr_cmp.h: the one three-way comparison of integers, for qsort and
 * bsearch comparators (libc only, header-only).
 *
 * A comparator orders by keys in turn: the first key that differs decides.
 * Written as `c = stkr_cmp_u64(x->a, y->a); if (c == 0) c = ...` it states
 * each key once, instead of the `if (x->a != y->a) return x->a < y->a ? -1
 * : 1;` pair every comparator used to repeat. Subtraction is no shortcut:
 * it overflows for 64-bit keys and truncates into the int returned.
 * Descending order: swap the arguments.
 */
#ifndef STKR_COMMON_CMP_H
#define STKR_COMMON_CMP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* @return -1, 0 or 1 as a <, ==, > b. */
static inline int stkr_cmp_u64(uint64_t a, uint64_t b) {
  return (a > b) - (a < b);
}

/* Two keys in order: (a1, a2) against (b1, b2), the first deciding. A
 * descending key passes its pair swapped (b for a). */
static inline int stkr_cmp_u64_pair(uint64_t a1, uint64_t b1, uint64_t a2,
                                    uint64_t b2) {
  int c = stkr_cmp_u64(a1, b1);
  return c != 0 ? c : stkr_cmp_u64(a2, b2);
}

/* The same for signed keys (times, offsets). */
static inline int stkr_cmp_i64(int64_t a, int64_t b) {
  return (a > b) - (a < b);
}

/* qsort/bsearch comparator of an array of uint64_t, ascending. */
static inline int stkr_qsort_u64(const void *a, const void *b) {
  return stkr_cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

/* Byte strings (keys, names, payloads of known length): the common prefix
 * as memcmp orders it, then the shorter first. NULL is fine with length 0.
 * @return <0, 0 or >0. */
static inline int stkr_cmp_bytes(const void *a, size_t na, const void *b,
                                 size_t nb) {
  size_t n = na < nb ? na : nb;
  int c = n != 0 ? memcmp(a, b, n) : 0;

  return c != 0 ? c : stkr_cmp_u64(na, nb);
}

#endif /* STKR_COMMON_CMP_H */
