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

/* The first half of a stack's key, h1 (stkr__hash_pcs; the recorder's
 * walks fold it frame by frame: recorder/walk.c and, for the table walk,
 * unwind/walk.c): multiply-rotate mixing in the spirit of xxHash64,
 * order-sensitive, and a repeated PC does not cancel itself. Here so that
 * both walks fold the same function (unwind/ may not depend on recorder/). */
#define STKR_STACK_HASH_SEED 0x27D4EB2F165667C5ull
#define STKR_STACK_HASH_P1 0x9E3779B185EBCA87ull
#define STKR_STACK_HASH_P2 0xC2B2AE3D27D4EB4Full
/* P1 is odd, so it has an inverse mod 2^64: a walk takes back its last PC
 * in O(1) (a Swift async frame; the one frame walked past max to tell a
 * truncated stack). */
#define STKR_STACK_HASH_P1_INV 0x0887493432BADB37ull

static inline uint64_t stkr_stack_hash_step(uint64_t h, uint64_t pc) {
  uint64_t x = h ^ (pc * STKR_STACK_HASH_P2);
  return ((x << 31) | (x >> 33)) * STKR_STACK_HASH_P1;
}
static inline uint64_t stkr_stack_hash_unstep(uint64_t h, uint64_t pc) {
  uint64_t x = h * STKR_STACK_HASH_P1_INV;
  return ((x >> 31) | (x << 33)) ^ (pc * STKR_STACK_HASH_P2);
}
static inline uint64_t stkr_stack_hash_final(uint64_t h, unsigned n) {
  return stkr_mix64(h ^ (uint64_t)n * STKR_STACK_HASH_P1);
}

/* The second half of a stack's key (common/stkr_ringfile.h, "Records"):
 * a 64-bit hash of the PCs independent of the walk's own hash (h1), which
 * also covers the depth, the site and the truncation flag. The recorder
 * folds it inside the frame walk (stkr__walk_keyed: one xor and one
 * multiply a frame, a chain independent of h1's, hidden behind the walk's
 * loads), then finishes it once per event; recovery (proto/) recomputes it
 * from StackDefs with stkr_stack_key2(). The two must agree bit for bit.
 * Each step is a bijection of the state for a given PC, so two stacks that
 * differ in one PC always differ in the fold. Not a defence against chosen
 * input; with h1 it makes an accidental 128-bit key collision, the only
 * way two stacks of one thread could be merged, negligible. Never 0, so
 * that {0, 0} marks an empty table entry. */
#define STKR_KEY2_SEED 0x243F6A8885A308D3ull
#define STKR_KEY2_P 0x9FB21C651E98DF25ull     /* odd */
#define STKR_KEY2_P_INV 0x02AB9C720D1024ADull /* its inverse mod 2^64 */

static inline uint64_t stkr_stack_key2_step(uint64_t s, uint64_t pc) {
  return (s ^ pc) * STKR_KEY2_P;
}
/* The step taken back (the walk gives back a frame's PC when it turns out
 * to be a Swift async frame). */
static inline uint64_t stkr_stack_key2_unstep(uint64_t s, uint64_t pc) {
  return (s * STKR_KEY2_P_INV) ^ pc;
}
/* No finalizer: the key is only ever compared whole (every bit of the
 * fold counts), and the slot is taken from its high bits through one
 * multiply (stkr_stack_key2_slot); a full mix here sat on the hot path's
 * critical path (~4 ns an event). */
static inline uint64_t stkr_stack_key2_final(uint64_t s, unsigned n,
                                             uint32_t site,
                                             unsigned truncated) {
  uint64_t h = s ^ ((uint64_t)n << 48) ^
               ((uint64_t)site << 1 | (truncated ? 1u : 0u));
  return h ? h : 1;
}
/* The known-stack table slot of a key2 (slots: a power of two <= 256). */
static inline unsigned stkr_stack_key2_slot(uint64_t key2, unsigned slots) {
  return (unsigned)((key2 * 0x9E3779B97F4A7C15ull) >> 56) & (slots - 1);
}
static inline uint64_t stkr_stack_key2(const uint64_t *pcs, unsigned n,
                                       uint32_t site, unsigned truncated) {
  uint64_t s = STKR_KEY2_SEED;
  for (unsigned i = 0; i < n; i++)
    s = stkr_stack_key2_step(s, pcs[i]);
  return stkr_stack_key2_final(s, n, site, truncated);
}

/* A payload's key (common/stkr_ringfile.h, "Payloads"): two independent
 * 64-bit hashes of the bytes, folded in one loop (different seeds,
 * multipliers and shifts), both covering the length. Recorded on the hot
 * path (a 15-byte path: two words, ~3 ns) and recomputed by recovery from
 * the payloads in segments: both sides must agree bit for bit, so unlike
 * stkr_hash_bytes these values are part of the ring file format. key[1]
 * is never 0, so that {0, 0} marks an empty table entry. */
#define STKR_PKEY_SEED1 0x6A09E667F3BCC908ull
#define STKR_PKEY_SEED2 0xBB67AE8584CAA73Bull
static inline void stkr_payload_key(const void *p, size_t n, uint64_t key[2]) {
  const unsigned char *c = (const unsigned char *)p;
  uint64_t a = STKR_PKEY_SEED1 ^ n, b = STKR_PKEY_SEED2 + n, w;
  size_t i;
  for (i = 0; i + 8 <= n; i += 8) {
    memcpy(&w, c + i, 8);
    a = (a ^ w) * 0x9E3779B97F4A7C15ull;
    a ^= a >> 29;
    b = (b + w) * 0xC2B2AE3D27D4EB4Full;
    b ^= b >> 31;
  }
  if (i < n) {
    for (w = 0; i < n; i++) w = (w << 8) | c[i];
    a = (a ^ w) * 0x9E3779B97F4A7C15ull;
    b = (b + w) * 0xC2B2AE3D27D4EB4Full;
  }
  key[0] = stkr_mix64(a);
  b ^= b >> 32;
  b *= 0xD6E8FEB86659FD93ull;
  b ^= b >> 32;
  key[1] = b ? b : 1;
}
/* The payload table slot of a key (slots: a power of two <= 256). */
static inline unsigned stkr_payload_key_slot(const uint64_t key[2],
                                             unsigned slots) {
  return (unsigned)(key[0] >> 56) & (slots - 1);
}

#endif /* STKR_COMMON_HASH_H */
