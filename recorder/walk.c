/*
 * walk.c: frame-pointer stack walk and the stack hash.
 *
 * A frame record is two words at the frame pointer: {saved caller fp,
 * return address}, on x86_64 (push rbp; mov rbp, rsp) and on aarch64
 * (stp x29, x30, [sp, #-16]!; mov x29, sp) alike. The checks follow Apple's
 * thread_stack_pcs: a frame is followed only if it lies inside the thread's
 * stack, is aligned, and is strictly above the previous one (stacks grow
 * down, so callers live at higher addresses). Those three checks are what
 * make the walk safe on a chain it cannot trust: every load is inside
 * memory the thread owns, and the walk cannot loop.
 */
#include "recorder/stkr_internal.h"

#if defined(__aarch64__) || defined(__arm64__)
#define STKR__FP_ALIGN 16u /* AAPCS64: sp, and so every frame record */
#else
/* x86_64 frames are 16-byte aligned by the ABI, but hand-written or
 * -mstackrealign code can leave rbp 8-aligned; 8 still rules out a torn
 * load and costs nothing in safety because bounds are checked too. */
#define STKR__FP_ALIGN 8u
#endif


/* Multiply-rotate mixing in the spirit of xxHash64: order-sensitive, and a
 * repeated PC does not cancel itself (the seed's XOR did both wrong). */
#define STKR__P1 0x9E3779B185EBCA87ull
#define STKR__P2 0xC2B2AE3D27D4EB4Full
#define STKR__SEED 0x27D4EB2F165667C5ull

static inline uint64_t stkr__rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

static inline uint64_t stkr__mix(uint64_t h, uint64_t pc) {
  return stkr__rotl(h ^ (pc * STKR__P2), 31) * STKR__P1;
}

static inline uint64_t stkr__final(uint64_t h, unsigned n) {
  h ^= (uint64_t)n * STKR__P1;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

uint64_t stkr__hash_pcs(const uint64_t *pcs, unsigned n) {
  uint64_t h = STKR__SEED;
  unsigned i;

  for (i = 0; i < n; i++)
    h = stkr__mix(h, pcs[i]);
  return stkr__final(h, n);
}

/* Is there a whole frame record at fp inside [lo, hi)? */
static inline bool stkr__frame_ok(uintptr_t fp, uintptr_t lo, uintptr_t hi) {
  return fp >= lo && hi >= 2 * sizeof(uintptr_t) &&
         fp <= hi - 2 * sizeof(uintptr_t) && (fp & (STKR__FP_ALIGN - 1)) == 0;
}

/* The walk may read any word inside the thread's stack, including ones ASan
 * has poisoned (redzones of a frame without a frame pointer whose rbp holds
 * garbage that happens to point into the stack): that is by design and
 * bounded by the checks above, so ASan must not instrument it. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
__attribute__((no_sanitize_address))
#endif
#endif
unsigned stkr__walk(uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned skip,
                    uint64_t *pcs, unsigned max, uint64_t *hash_out,
                    bool *truncated) {
  uint64_t h = STKR__SEED;
  unsigned n = 0;

  *truncated = false;
  if (stkr__frame_ok(fp, lo, hi)) {
    /* From here on each check is one unsigned compare; the loop runs at
     * the latency of its loads (~1.4 ns a frame). */
    const uint64_t span = (uint64_t)(hi - lo);
    const uintptr_t top = hi - 2 * sizeof(uintptr_t); /* last record start */

    for (;;) {
      const uintptr_t *frame = (const uintptr_t *)fp;
      uintptr_t next = frame[0];
      uint64_t pc = stkr__strip_pac((uint64_t)frame[1]);

      /* 0 ends the outermost frame (thread entry). A "return address" on
       * the stack itself means the chain went through code without frame
       * pointers (libffi, an interpreter) and reached a saved data word. */
      if (pc == 0 || pc - lo < span)
        break;
      if (skip > 0) {
        skip--;
      } else {
        if (n == max) {
          *truncated = true;
          break;
        }
        pcs[n++] = pc;
        h = stkr__mix(h, pc);
      }
      /* next must be strictly above fp (no loops) and leave room for a
       * whole record below hi: next - fp - 1 < top - fp in one compare
       * (next <= fp wraps around to a huge value). A Swift async frame's
       * tagged link (0b0001 in bits 63:60: an async context on the heap)
       * is far above any stack and ends the walk here too. */
      if ((uint64_t)(next - fp - 1) >= (uint64_t)(top - fp) ||
          (next & (STKR__FP_ALIGN - 1)) != 0)
        break;
      fp = next;
    }
  }
  *hash_out = stkr__final(h, n);
  return n;
}
