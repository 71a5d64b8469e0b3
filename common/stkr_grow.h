/*
 * stkr_grow.h: the one grow-by-doubling helper for arrays (libc only,
 * header-only).
 *
 * stkr_grow(&p, &cap, need, size): make *p (an array of *cap elements of
 * `size` bytes, possibly NULL/0) hold at least `need` elements, doubling
 * from 16 so that n appends cost O(n). Overflow of the byte count is
 * refused, never wrapped.
 * @return 0, or -ENOMEM with *p and *cap unchanged.
 * And stkr_bit_set, the one growing bitmap ("seen this id before?"), and
 * STKR_FREE_EACH, the one loop that frees what each element of an array
 * owns, and STKR_FREE_ALL, a struct's arrays freed in one list.
 */
#ifndef STKR_COMMON_GROW_H
#define STKR_COMMON_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int stkr_grow(void **p, size_t *cap, size_t need, size_t size) {
  size_t n = *cap ? *cap : 16;
  void *q;

  if (need <= *cap)
    return 0;
  while (n < need) {
    if (n > SIZE_MAX / 2 / size)
      return -ENOMEM;
    n *= 2;
  }
  if (n > SIZE_MAX / size)
    return -ENOMEM;
  q = realloc(*p, n * size);
  if (q == NULL)
    return -ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

/* stkr_bit_set(&bits, &bytes, id): set bit id of a bitmap of *bytes bytes
 * (possibly NULL/0) that grows, zero-filled, by doubling from 64 bytes.
 * @return 1 when the bit was clear, 0 when it was already set, or -ENOMEM
 * with the bitmap unchanged. */
static inline int stkr_bit_set(uint8_t **bits, size_t *bytes, uint32_t id) {
  size_t byte = id / 8;

  if (byte >= *bytes) {
    size_t nb = *bytes ? *bytes : 64;
    uint8_t *p;

    while (nb <= byte) nb *= 2; /* id < 2^32: nb stays below 2^30 */
    if ((p = (uint8_t *)realloc(*bits, nb)) == NULL) return -ENOMEM;
    memset(p + *bytes, 0, nb - *bytes);
    *bits = p;
    *bytes = nb;
  }
  if ((*bits)[byte] & (1u << (id % 8))) return 0;
  (*bits)[byte] |= (uint8_t)(1u << (id % 8));
  return 1;
}

/* STKR_FREE_EACH(arr, n, field): free() the `field` pointer of each of
 * the n elements of arr, for the arrays whose elements own one allocation
 * each (the array itself is the caller's to free after). arr may be NULL
 * when n is 0; a const field is freed through a cast, as its owner may. */
#define STKR_FREE_EACH(arr, n, field)                                     \
  do {                                                                    \
    for (size_t stkr_i_ = 0; stkr_i_ < (size_t)(n); stkr_i_++)            \
      free((void *)(arr)[stkr_i_].field);                                 \
  } while (0)

/* STKR_FREE_ALL(a, b, ...): free() each pointer given, in order (NULL
 * ones included: free's own rule). A teardown names the arrays a struct
 * owns in one list, so that adding a field means adding one name, not
 * another line among a run of free() calls that every struct repeats.
 * The arguments are evaluated once each (sizeof evaluates nothing). */
#define STKR_FREE_ALL(...)                                                \
  stkr_free_all_((void *const[]){__VA_ARGS__},                            \
                 sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))
static inline void stkr_free_all_(void *const *p, size_t n) {
  for (size_t i = 0; i < n; i++) free(p[i]);
}

#endif /* STKR_COMMON_GROW_H */
