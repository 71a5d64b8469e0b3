/*
 * stkr_hash.h: the one hash mixer and byte hash of the project (libc only,
 * header-only), so that hash tables do not each grow their own.
 *
 * stkr_mix64: a 64-bit finalizer (MurmurHash3's fmix64): every input bit
 * affects every output bit, so the low bits of the result can index a
 * power-of-two table even when the input is a pointer or a small id.
 * stkr_hash_bytes: FNV-1a over n bytes, seeded with h; finish with
 * stkr_mix64 before indexing (FNV's low bits are weak).
 *
 * Thread-safety: pure functions.
 */
#ifndef STKR_COMMON_HASH_H
#define STKR_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define STKR_HASH_SEED 0xCBF29CE484222325ull /* FNV-1a offset basis */

static inline uint64_t stkr_mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

static inline uint64_t stkr_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = (const unsigned char *)p;
  size_t i;

  for (i = 0; i < n; i++)
    h = (h ^ c[i]) * 0x100000001B3ull;
  return h;
}

#endif /* STKR_COMMON_HASH_H */
