/*
 * stkr_hash.h: the one hash mixer and byte hash of the project (libc only,
 * header-only), so that hash tables do not each grow their own.
 *
 * stkr_mix64: a 64-bit finalizer (MurmurHash3's fmix64): every input bit
 * affects every output bit, so the low bits of the result can index a
 * power-of-two table even when the input is a pointer or a small id.
 * stkr_hash_bytes: n bytes, 8 at a time (a multiply per word where FNV-1a
 * did one per byte: strings of 60-byte paths and long C++ names are hashed
 * millions of times when a symbol cache is built), seeded with h; finish
 * with stkr_mix64 before indexing (the low bits are weak). For in-memory
 * tables only: the values may change between versions, so nothing on disk
 * may depend on them.
 *
 * Thread-safety: pure functions.
 */
#ifndef STKR_COMMON_HASH_H
#define STKR_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
  uint64_t w;
  size_t i;
  for (i = 0; i + 8 <= n; i += 8) {
    memcpy(&w, c + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  for (w = 0; i < n; i++) w = (w << 8) | c[i];
  h = (h ^ w ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}
#endif /* STKR_COMMON_HASH_H */
