/*
 * walk.c: the hybrid stack walk — a table row when the pc's image has one,
 * else the frame-pointer record — on the hot path.
 *
 * No allocation, no lock, no system call: a binary search over the image
 * set, one over the image's rows, and at most two stack loads per frame.
 * Safety is the frame-pointer walk's (recorder/walk.c): every load is an
 * aligned word inside the thread's stack [lo, hi), and the stack pointer
 * strictly grows from frame to frame, so a hostile or stale stack can end
 * the walk early or give wrong PCs, never fault or loop.
 */
#include <stdbool.h>
#include <stdint.h>

#include "unwind/unwind.h"

#if defined(__aarch64__)
/* Pointer authentication: a signed return address carries its PAC in the
 * bits above the 48-bit VA (negate_ra_state in the CFI); strip them as
 * xpaclri would, without needing the instruction. */
#define UW_RA_MASK 0x0000FFFFFFFFFFFFull
#else
#define UW_RA_MASK (~(uintptr_t)0)
#endif

/* Is [addr, addr + 8) an aligned word inside [lo, hi)? */
static inline bool word_ok(uintptr_t addr, uintptr_t lo, uintptr_t hi) {
  return addr >= lo && hi >= 8 && addr <= hi - 8 && (addr & 7) == 0;
}

unsigned stkr__unwind_walk(const stkr__uw_set *set, const stkr__uw_regs *regs,
                           uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                           unsigned max, unsigned *fallbacks) {
  return stkr__unwind_walk_cached(set, NULL, regs, lo, hi, pcs, max, fallbacks);
}

/* The row for address at, by the two binary searches; *t remembers the
 * last image, which the next frame is often in too. */
static inline uint32_t row_at(const stkr__uw_set *set, const stkr__uw_table **t,
                              uintptr_t at) {
  if (*t == NULL || at < (*t)->lo || at >= (*t)->hi) *t = stkr__unwind_set_find(set, at);
  return *t != NULL ? stkr__unwind_table_find(*t, at) : STKR__UW_FALLBACK;
}

/* A cache entry for return address pc and its row; the fast fields only
 * for an SP-based row with a saved return address and a positive CFA
 * offset (the walk then needs no other check to move up). */
static inline void cache_fill(__typeof__(&((stkr__uw_cache *)0)->e[0]) ce, uintptr_t pc,
                              uint32_t row) {
  unsigned off = STKR__UW_CFA_OFF(row), ra = STKR__UW_RA_SLOT(row), fps = STKR__UW_FP_SLOT(row);
  ce->pc = pc;
  ce->row = row;
  ce->ra_sp = INT16_MIN;
  ce->fp_sp = INT16_MIN;
  if (STKR__UW_KIND(row) != STKR__UW_SP || ra == 0 || off == 0) return;
  ce->ra_sp = (int16_t)((int)off - 8 * (int)ra);
  if (fps != 0) ce->fp_sp = (int16_t)((int)off - 8 * (int)fps);
}

unsigned stkr__unwind_walk_cached(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_regs *regs, uintptr_t lo,
                                  uintptr_t hi, uint64_t *pcs, unsigned max,
                                  unsigned *fallbacks) {
  uintptr_t pc = regs->pc, sp = regs->sp, fp = regs->fp, lr = regs->lr;
  const stkr__uw_table *t = NULL;
  unsigned n = 0, fb = 0;
  bool first = true;
  bool sp_known = true; /* false after an aarch64 FP step: the caller's sp is not fp + 16 there */

  if (cache != NULL && (set == NULL || cache->gen != set->gen)) {
    if (set == NULL) {
      cache = NULL;
    } else { /* another set: its rows may differ (an image unloaded, another loaded) */
      unsigned i;
      for (i = 0; i < STKR__UW_CACHE_SLOTS; i++) cache->e[i].pc = 0;
      cache->gen = set->gen;
    }
  }

  while (n < max) {
    uintptr_t cfa, ra, addr;
    uint32_t row;
    unsigned kind, slot;

    pcs[n++] = pc;
    /* A return address is the instruction after the call: its row may
     * already be the next function's (a noreturn call ends a function).
     * The cache is keyed by the return address itself and indexed by its
     * low bits: one cheap step on the walk's critical path (pc -> row ->
     * cfa -> next pc), which is what bounds its speed. */
    if (first) {
      row = row_at(set, &t, pc);
    } else if (cache != NULL) {
      __typeof__(&cache->e[0]) ce = &cache->e[pc & (STKR__UW_CACHE_SLOTS - 1)];
      if (ce->pc == pc) {
        row = ce->row;
        if (ce->ra_sp != INT16_MIN && sp_known) {
          /* The fast path: the slots precomputed relative to sp, so the
           * critical path is pc -> entry -> sp + ra_sp -> next pc. */
          uintptr_t ra_at = sp + (uintptr_t)(intptr_t)ce->ra_sp;
          cfa = sp + STKR__UW_CFA_OFF(row);
          if (cfa > hi || !word_ok(ra_at, lo, hi)) break;
          ra = *(const uintptr_t *)ra_at;
          if (ce->fp_sp != INT16_MIN) {
            addr = sp + (uintptr_t)(intptr_t)ce->fp_sp;
            if (!word_ok(addr, lo, hi)) break;
            fp = *(const uintptr_t *)addr;
          }
          sp = cfa;
          goto next;
        }
      } else {
        row = row_at(set, &t, pc - 1);
        cache_fill(ce, pc, row);
      }
    } else {
      row = row_at(set, &t, pc - 1);
    }
    kind = STKR__UW_KIND(row);
    if (kind == STKR__UW_STOP) break;
    if (kind == STKR__UW_SP && !sp_known) kind = STKR__UW_FALLBACK;
    if (kind == STKR__UW_FALLBACK) {
      /* The frame-pointer record {caller's fp, return address} at fp. */
      fb++;
      if (fp < sp || !word_ok(fp, lo, hi) || !word_ok(fp + 8, lo, hi)) break;
      ra = *(const uintptr_t *)(fp + 8);
      sp = fp + 16;
      fp = *(const uintptr_t *)fp;
#if defined(__aarch64__)
      sp_known = false;
#endif
    } else {
      cfa = (kind == STKR__UW_SP ? sp : fp) + STKR__UW_CFA_OFF(row);
      /* The CFA is the caller's sp: above ours, except in an aarch64 leaf
       * that has not moved sp (CFA = sp, return address still in LR). */
      if (cfa > hi || cfa < sp || (cfa == sp && !first)) break;
      slot = STKR__UW_RA_SLOT(row);
      if (slot == 0) {
        if (!first) break; /* LR holds this frame's return address only in the first frame */
        ra = lr;
      } else {
        addr = cfa - 8u * slot;
        if (!word_ok(addr, lo, hi)) break;
        ra = *(const uintptr_t *)addr;
      }
      slot = STKR__UW_FP_SLOT(row);
      if (slot != 0) {
        addr = cfa - 8u * slot;
        if (!word_ok(addr, lo, hi)) break;
        fp = *(const uintptr_t *)addr;
      }
      sp = cfa;
      sp_known = true;
    }
  next:
    ra &= UW_RA_MASK;
    if (ra == 0) break;
    pc = lr = ra;
    first = false;
  }
  if (fallbacks) *fallbacks = fb;
  return n;
}
