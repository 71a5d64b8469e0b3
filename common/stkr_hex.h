/*
 * stkr_hex.h: bytes as lower-case hex (libc only, header-only): the one
 * spelling of an image's build-id in recordings' readers, symbol caches,
 * debug files' paths, pprof and the fleet tables.
 *
 * Thread-safety: a pure function of its arguments.
 */
#ifndef STKR_COMMON_HEX_H
#define STKR_COMMON_HEX_H

#include <stddef.h>
#include <stdint.h>

/* The bytes of id[0..len) that fit in out[cap] whole (two digits each),
 * and a NUL (cap 0: nothing written). @return the digits written. */
static inline size_t stkr_hex(char *out, size_t cap, const uint8_t *id,
                              size_t len) {
  static const char digits[] = "0123456789abcdef";
  size_t k;

  if (cap == 0)
    return 0;
  for (k = 0; k < len && 2 * k + 2 < cap; k++) {
    out[2 * k] = digits[id[k] >> 4];
    out[2 * k + 1] = digits[id[k] & 15];
  }
  out[2 * k] = '\0';
  return 2 * k;
}

#endif /* STKR_COMMON_HEX_H */
