/*
 * stkr_grow.h: the one grow-by-doubling helper for arrays (libc only,
 * header-only).
 *
 * stkr_grow(&p, &cap, need, size): make *p (an array of *cap elements of
 * `size` bytes, possibly NULL/0) hold at least `need` elements, doubling
 * from 16 so that n appends cost O(n). Overflow of the byte count is
 * refused, never wrapped.
 * @return 0, or -ENOMEM with *p and *cap unchanged.
 */
#ifndef STKR_COMMON_GROW_H
#define STKR_COMMON_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

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

#endif /* STKR_COMMON_GROW_H */
