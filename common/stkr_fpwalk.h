/*
 * stkr_fpwalk.h: the bounds rules of a frame-pointer walk, shared by the
 * recorder's in-process walk (recorder/walk.c, the hot path) and the
 * snapshot of another process's threads over a copy of their stacks
 * (tools/stackrec/snapshot_unwind.c). Header only, libc only.
 *
 * A frame record is two words at the frame pointer: {saved caller fp,
 * return address} (x86_64: push rbp; mov rbp, rsp. aarch64: stp x29, x30,
 * [sp, #-16]!; mov x29, sp). A record is followed only if it lies whole
 * inside the stack [lo, hi), is aligned, and the next one is strictly
 * above it (callers live at higher addresses). Those checks make the walk
 * safe on a chain it cannot trust: every load is inside the stack, and it
 * cannot loop. A "return address" inside the stack itself means the chain
 * went through code without frame pointers and reached a data word.
 *
 * All addresses are integers: the recorder passes its own stack, the
 * snapshot the target's addresses (and reads them from its copy).
 */
#ifndef STKR_FPWALK_H
#define STKR_FPWALK_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__aarch64__) || defined(__arm64__)
#define STKR_FP_ALIGN 16u /* AAPCS64: sp, and so every frame record */
#else
/* x86_64 frames are 16-byte aligned by the ABI, but hand-written or
 * -mstackrealign code can leave rbp 8-aligned; 8 still rules out a torn
 * load and costs nothing in safety because bounds are checked too. */
#define STKR_FP_ALIGN 8u
#endif

/* The architecture whose frames these are, as a segment's Header.arch and
 * the session file name it: the recorder's and the snapshot's (which
 * records its own architecture's processes) must agree. arm64e is arm64
 * with pointer authentication (return addresses carry a signature). */
#if defined(__APPLE__) && (defined(__arm64__) || defined(__aarch64__))
#if defined(__arm64e__)
#define STKR_ARCH_NAME "arm64e"
#elif defined(__has_feature)
#if __has_feature(ptrauth_calls)
#define STKR_ARCH_NAME "arm64e"
#endif
#endif
#ifndef STKR_ARCH_NAME
#define STKR_ARCH_NAME "arm64"
#endif
#elif defined(__x86_64__)
#define STKR_ARCH_NAME "x86_64"
#elif defined(__aarch64__)
#define STKR_ARCH_NAME "aarch64"
#else
#define STKR_ARCH_NAME "unknown"
#endif

/* The size of a frame record: {saved fp, return address}. */
#define STKR_FP_RECORD 16u

/* The rules as expressions (macros, so that recorder/walk.c's hot loop
 * compiles to exactly the code it had before they were shared), and as
 * functions for everyone else. Arguments are evaluated more than once. */

/* Is there a whole, aligned frame record at fp inside [lo, hi)? */
#define STKR_FP_RECORD_OK(fp, lo, hi)                                          \
  ((fp) >= (lo) && (hi) >= STKR_FP_RECORD && (fp) <= (hi) - STKR_FP_RECORD && \
   ((fp) & (STKR_FP_ALIGN - 1)) == 0)

/* Is `next` (the saved fp of the record at fp) NOT a record to follow? It
 * must be strictly above fp, aligned, and leave room for a whole record
 * at or below top = hi - STKR_FP_RECORD. fp <= top (the record at fp
 * passed the rules): two compares against fp and top, each fused with its
 * branch. They replaced next - fp - 1 < top - fp (one compare, the same
 * answer for fp <= top), whose two subtractions and the copies they need
 * cost the keyed walk's loop three more instructions a frame and
 * stkr_event ~1 ns at depth 32 (event_cost, interleaved). */
#define STKR_FP_LAST(next, fp, top)                                            \
  ((uint64_t)(next) <= (uint64_t)(fp) || (uint64_t)(next) > (uint64_t)(top) || \
   ((next) & (STKR_FP_ALIGN - 1)) != 0)

/* Can pc be a return address? Not 0 (the outermost frame's end) and not
 * inside the stack [lo, lo + span) (a saved data word). */
#define STKR_FP_PC_OK(pc, lo, span) ((pc) != 0 && (pc) - (lo) >= (span))

/* A saved fp whose bits 63:60 read 0b0001: the frame of a Swift async
 * function (its "extended frame"; recorder/walk.c follows the task's
 * context from it). */
static inline bool stkr_fp_async_tagged(uint64_t fp) {
  return (fp >> 60) == 1;
}
/* The frame pointer the tag marks, without it (the physical caller's). */
#define STKR_FP_TAG_MASK (0xFull << 60)

static inline bool stkr_fp_record_ok(uint64_t fp, uint64_t lo, uint64_t hi) {
  return STKR_FP_RECORD_OK(fp, lo, hi);
}

/* fp must have passed stkr_fp_record_ok. */
static inline bool stkr_fp_last(uint64_t next, uint64_t fp, uint64_t top) {
  return STKR_FP_LAST(next, fp, top);
}

static inline bool stkr_fp_pc_ok(uint64_t pc, uint64_t lo, uint64_t span) {
  return STKR_FP_PC_OK(pc, lo, span);
}

#endif /* STKR_FPWALK_H */
