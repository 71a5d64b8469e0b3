/*
 * walk_body.h: the frame-pointer walk's loop (recorder/walk.c has the rules
 * it follows, the Swift async chains and the argument area), as an inline
 * body for walk.c's two entry points and for stkr_event itself
 * (recorder/event.c), which inlines it: the call, with nine arguments,
 * three of them out-pointers to the caller's stack, cost 1.0-2.3 ns of
 * each event (event_cost, interleaved). Not where ASan instruments
 * stkr_event: the body may not be instrumented (see below), and GCC does
 * not inline across the attribute; event.c calls stkr__walk_keyed there.
 */
#ifndef STKR_WALK_BODY_H
#define STKR_WALK_BODY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/stkr_fpwalk.h"
#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"

/* A saved fp whose bits 63:60 read 0b0001: a Swift async frame (walk.c). */
#define STKR__ASYNC_TAG_SHIFT 60
#define STKR__ASYNC_TAG 1u
/* The main thread's argument area above its stack (walk.c): the walk's PC
 * check covers it when the stack ends at most this far below its top. */
#define STKR__ARGS_MAX (8u << 20) /* argv+envp are capped at 6 MiB */
extern uintptr_t stkr__main_stack_top;

/* The walk's running state, handed to the async part by copy: passing the
 * addresses of the frame loop's own variables would keep them in memory
 * instead of registers for the whole loop (~10% on a plain walk). */
typedef struct stkr__walkst {
  unsigned n, skip;
  uint64_t h, h2;
  bool truncated;
} stkr__walkst;

/* Follow the async chain from the tagged frame record at fp (checked to be
 * inside [lo, hi)); append resume PCs after pcs[st->n]. Returns false when
 * the chain must not be followed (no running task, implausible first
 * context): the caller then treats the frame as an ordinary last frame.
 * Cold, in walk.c: only Swift async stacks get there. */
bool stkr__walk_async(uintptr_t fp, uintptr_t lo, uint64_t span,
                      stkr__walkst *st, uint64_t *pcs, unsigned max);

/* h1's and key2's steps (common/stkr_hash.h), bit for bit, for the frame
 * loop below. On x86_64 the multipliers are memory operands: the keyed
 * loop has more live values than the 14 registers left beside rbp, and GCC
 * then rematerialized all three 64-bit constants with a 10-byte movabs on
 * every frame. A memory operand takes no register and no instruction (the
 * load folds into the imul, off the hash chains, from an L1-hot line):
 * stkr_event at depth 32 got 3.6 ns faster (event_cost, interleaved). */
#if defined(__x86_64__)
static inline uint64_t stkr__mul_mem(uint64_t x, const uint64_t *k) {
  __asm__("imulq %1, %0" : "+r"(x) : "m"(*k));
  return x;
}
static inline uint64_t stkr__loop_hash_step(uint64_t h, uint64_t pc) {
  static const uint64_t p1 = STKR_STACK_HASH_P1, p2 = STKR_STACK_HASH_P2;
  uint64_t x = h ^ stkr__mul_mem(pc, &p2);
  return stkr__mul_mem((x << 31) | (x >> 33), &p1);
}
static inline uint64_t stkr__loop_key2_step(uint64_t s, uint64_t pc) {
  static const uint64_t p = STKR_KEY2_P;
  return stkr__mul_mem(s ^ pc, &p);
}
#else /* aarch64 has registers to spare */
#define stkr__loop_hash_step stkr_stack_hash_step
#define stkr__loop_key2_step stkr_stack_key2_step
#endif

/* The walk may read any word inside the thread's stack, including ones ASan
 * has poisoned (redzones of a frame without a frame pointer whose rbp holds
 * garbage that happens to point into the stack): that is by design and
 * bounded by the frame record rules (walk.c), so ASan must not instrument
 * it.
 *
 * One body, two entry points: stkr__walk (the PCs' hash h1 only) and
 * stkr__walk_keyed, which also folds the stack key's second half
 * (stkr_stack_key2_step, common/stkr_hash.h) in the same loop: its chain
 * is independent of h1's, so it runs in the shadow of the loads and costs
 * next to nothing, where a second pass over the PCs after the walk cost
 * ~0.3 ns a frame. `keyed` is a constant in each caller. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
__attribute__((no_sanitize_address))
#endif
#endif
static inline __attribute__((always_inline)) unsigned
stkr__walk_body(uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned skip,
                uint64_t *pcs, unsigned max, uint64_t *hash_out,
                uint64_t *fold2_out, bool *truncated, const bool keyed) {
  uint64_t h = STKR_STACK_HASH_SEED, h2 = STKR_KEY2_SEED;
  unsigned n = 0;

  *truncated = false;
  if (STKR_FP_RECORD_OK(fp, lo, hi)) {
    /* From here on each check is one unsigned compare; the loop runs at
     * the latency of its loads (~1.4 ns a frame). */
    const uint64_t span = (uint64_t)(hi - lo);
    const uintptr_t top = hi - 2 * sizeof(uintptr_t); /* last record start */
    /* Where a PC cannot be (see stkr__main_stack_top): the stack, and on the
     * main thread also its argument area above hi. */
    const uint64_t pc_span = stkr__main_stack_top >= hi &&
                                     stkr__main_stack_top - hi <= STKR__ARGS_MAX
                                 ? (uint64_t)(stkr__main_stack_top - lo)
                                 : span;

    /* next must be strictly above fp (no loops) and leave room for a whole
     * record below hi: next - fp - 1 < top - fp in one compare (next <= fp
     * wraps around to a huge value). A Swift async frame's tagged link
     * fails it too: only then is the tag looked at, off the hot loop. */
#define STKR__LAST(next, fp) STKR_FP_LAST(next, fp, top)
#define STKR__TAGGED(next)                                                     \
  (((uint64_t)(next) >> STKR__ASYNC_TAG_SHIFT) == STKR__ASYNC_TAG)

    /* Skipped frames first, so that the main loop has no skip test. */
    for (; skip > 0; skip--) {
      const uintptr_t *frame = (const uintptr_t *)fp;
      uintptr_t next = frame[0];
      uint64_t pc = stkr__strip_pac((uint64_t)frame[1]);

      if (!STKR_FP_PC_OK(pc, lo, pc_span))
        goto done;
      if (STKR__LAST(next, fp)) {
        if (STKR__TAGGED(next)) {
          stkr__walkst st = {0, skip, h, h2, false};
          if (stkr__walk_async(fp, lo, pc_span, &st, pcs, max)) {
            n = st.n;
            h = st.h;
            h2 = st.h2;
            *truncated = st.truncated;
          }
        }
        goto done;
      }
      fp = next;
    }
    /* A cursor and an end instead of a count and max: two fewer live
     * values in the loop. */
    uint64_t *out = pcs, *const end = pcs + max;
    for (;;) {
      const uintptr_t *frame = (const uintptr_t *)fp;
      uintptr_t next = frame[0];
      uint64_t pc = stkr__strip_pac((uint64_t)frame[1]);

      /* 0 ends the outermost frame (thread entry). A "return address" on
       * the stack itself means the chain went through code without frame
       * pointers (libffi, an interpreter) and reached a saved data word. */
      if (!STKR_FP_PC_OK(pc, lo, pc_span))
        break;
      if (out == end) {
        *truncated = true;
        break;
      }
      *out++ = pc;
      h = stkr__loop_hash_step(h, pc);
      if (keyed)
        h2 = stkr__loop_key2_step(h2, pc);
      if (STKR__LAST(next, fp)) {
        if (__builtin_expect(STKR__TAGGED(next), 0))
          goto async_frame;
        break;
      }
      fp = next;
    }
    n = (unsigned)(out - pcs);
    goto done;

    /* A Swift async frame at fp: its own return address (the PC just
     * taken) leads into the executor, the awaiting callers are in its
     * context chain; as in Apple's walker, that PC is given back. Out of
     * the loop, so that the call does not cost the loop registers. */
  async_frame:
    n = (unsigned)(out - pcs);
    {
      stkr__walkst st = {n - 1, 0, stkr_stack_hash_unstep(h, pcs[n - 1]),
                         keyed ? stkr_stack_key2_unstep(h2, pcs[n - 1]) : 0,
                         false};
      if (stkr__walk_async(fp, lo, pc_span, &st, pcs, max)) {
        n = st.n;
        h = st.h;
        h2 = st.h2;
        *truncated = st.truncated;
      }
    }
#undef STKR__LAST
#undef STKR__TAGGED
  }
done:
  *hash_out = stkr_stack_hash_final(h, n);
  if (keyed)
    *fold2_out = h2;
  return n;
}

#endif /* STKR_WALK_BODY_H */
