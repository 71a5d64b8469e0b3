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

/* The second half of a stack's key (common/stkr_ringfile.h, "Records"):
 * a 64-bit hash of the PCs independent of the walk's own hash (h1), which
 * also covers the site and the truncation flag. The recorder computes it
 * once per event, after the walk, so it must be cheap: a multilinear
 * (NH-style) sum of products of PC pairs offset by per-position constants,
 * one multiply per two PCs and no dependency chain through the multiplies
 * (about 0.2 ns a PC), then a finalizer. Not a defence against chosen
 * input (return addresses are not chosen by an attacker who would gain
 * anything); with h1 it makes an accidental 128-bit key collision, the
 * only way two stacks of one thread could be merged, negligible. Never 0,
 * so that {0, 0} marks an empty table entry. Recovery (proto/) recomputes
 * it from StackDefs; the two must agree bit for bit. */
static inline uint64_t stkr_stack_key2(const uint64_t *pcs, unsigned n,
                                       uint32_t site, unsigned truncated) {
  const uint64_t step = 0x9E3779B97F4A7C15ull;
  uint64_t k = 0x243F6A8885A308D3ull, acc0 = 0, acc1 = 0;
  unsigned i = 0;

  for (; i + 4 <= n; i += 4) {
    acc0 += (pcs[i] + k) * (pcs[i + 1] + (k + step));
    acc1 += (pcs[i + 2] + (k + 2 * step)) * (pcs[i + 3] + (k + 3 * step));
    k += 4 * step;
  }
  for (; i < n; i++) {
    acc0 += (pcs[i] + k) * (k ^ 0xC2B2AE3D27D4EB4Full);
    k += step;
  }
  uint64_t h = stkr_mix64(acc0 ^ stkr_mix64(acc1 + n) ^
                          ((uint64_t)site << 1 | (truncated ? 1u : 0u)));
  return h ? h : 1;
}

#endif /* STKR_COMMON_HASH_H */
