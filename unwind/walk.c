/*
 * walk.c: the hybrid stack walk — a table row when the pc's image has one,
 * else the frame-pointer record — on the hot path.
 *
 * No allocation, no lock, no system call: a binary search over the image
 * set, one over the image's rows (or one probe of the thread's row cache),
 * and at most two stack loads per frame. Safety is the frame-pointer
 * walk's (recorder/walk.c): every load is an aligned word inside the
 * thread's stack [lo, hi), and the stack pointer strictly grows from frame
 * to frame, so a hostile or stale stack can end the walk early or give
 * wrong PCs, never fault or loop.
 *
 * Speed. A walk is a chain of dependent loads (pc -> row -> stack slot ->
 * next pc), and at a few ns a frame the number of branches per frame
 * matters as much. Frames whose row is "CFA = sp + off, return address and
 * fp saved below the CFA" (nearly all x86_64 frames) are cached in a form
 * that needs one bounds check: with sp >= lo and 8-aligned, and every slot
 * in [sp, CFA - 8], "CFA <= hi" proves both loads are inside the stack.
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

/* The highest plausible user address: a "return address" above it (or 0)
 * ends the walk. It also keeps the cache's tag bits (62, 63) out of every
 * pc the cache is asked about. */
#if defined(__aarch64__)
#define UW_ADDR_MAX 0x0000FFFFFFFFFFFFull
#else
#define UW_ADDR_MAX 0x00FFFFFFFFFFFFFFull /* 57-bit user space (5-level paging) and below */
#endif
#define UW_SLOW_KEY ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1)) /* no user pc has it */
#define UW_FIRST_KEY ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 2)) /* the row at pc itself */
#define UW_FP_SAME 0xFFFFu
#define UW_SLOT(pc) ((unsigned)((pc) ^ ((pc) >> 9)) & (STKR__UW_CACHE_SLOTS - 1))


unsigned stkr__unwind_walk(const stkr__uw_set *set, const stkr__uw_regs *regs,
                           uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                           unsigned max, unsigned *fallbacks) {
  return stkr__unwind_walk_cached(set, NULL, regs, lo, hi, pcs, max, fallbacks);
}

/* Is [addr, addr + 8) an aligned word inside [lo, hi)? */
static inline bool word_ok(uintptr_t addr, uintptr_t lo, uintptr_t hi) {
  return addr >= lo && hi >= 8 && addr <= hi - 8 && (addr & 7) == 0;
}

/* The row for address at, by the two binary searches; *t remembers the
 * last image, which the next frame is often in too. */
static inline uint32_t row_at(const stkr__uw_set *set, const stkr__uw_table **t,
                              uintptr_t at) {
  if (*t == NULL || at < (*t)->lo || at >= (*t)->hi) *t = stkr__unwind_set_find(set, at);
  return *t != NULL ? stkr__unwind_table_find(*t, at) : STKR__UW_FALLBACK;
}

/* Cache return address pc with its row: "fast" when the row is SP-based
 * with the return address (and fp, if saved) in 8-aligned slots in
 * [sp, CFA - 8] and a positive CFA offset that is a multiple of 8. */
static void cache_fill(stkr__uw_cache *c, unsigned i, uintptr_t pc, uint32_t row) {
  unsigned off = STKR__UW_CFA_OFF(row), ra = STKR__UW_RA_SLOT(row), fps = STKR__UW_FP_SLOT(row);

  c->key[i] = pc | UW_SLOW_KEY;
  c->row[i] = row;
  if (STKR__UW_KIND(row) != STKR__UW_SP || ra == 0 || off == 0 || (off & 7) != 0 ||
      8 * ra > off || 8 * fps > off)
    return;
  c->key[i] = pc;
  c->fast[i].cfa_off = (uint16_t)off;
  c->fast[i].ra_sp = (uint16_t)(off - 8 * ra);
  c->fast[i].fp_sp = fps ? (uint16_t)(off - 8 * fps) : UW_FP_SAME;
}

/* ---- the memo: the last walk, relative to its first sp --------------------
 * A hook is called from a few call sites with the same stacks again and
 * again. From the same first pc, a transition by an SP-based row is a
 * function of (pc, sp) alone: the next sp and the return address slot are
 * fixed offsets from the first sp. A transition by an FP-based row is one
 * too once the fp it uses is known: the memo keeps where that fp came
 * from and its value relative to the first sp, and checks it. So if every
 * remembered slot still holds the remembered value, the walk is, by
 * induction, the remembered one — and those loads do not depend on each
 * other, so they overlap instead of forming a chain of dependent loads.
 * At the first difference the walk goes on normally from the exact state
 * before it. Every slot lies in [sp0, sp0 + memo_max_off], checked
 * against [lo, hi) once. */
#define UW_FP_FIRST 0xFFFFFFFFu
#define UW_CHK_NONE 0xFFFFFFFEu

/* Append transition *mn (or stop recording when it does not fit). */
static inline void memo_add(stkr__uw_cache *c, unsigned *mn, bool *rec, uintptr_t sp0,
                            uintptr_t ra_at, uintptr_t sp, uint32_t fsrc, uint32_t chk_src,
                            uintptr_t chk_val, uintptr_t ra) {
  __typeof__(&c->memo[0]) e;
  if (*mn >= STKR__UW_MEMO_MAX || ra_at < sp0 || sp - sp0 > UINT32_MAX / 2) {
    *rec = false;
    return;
  }
  e = &c->memo[*mn];
  e->ra_off = (uint32_t)(ra_at - sp0);
  e->sp_off = (uint32_t)(sp - sp0);
  e->fp_src = fsrc;
  e->chk_src = chk_src;
  e->chk_val = chk_val;
  e->pc = ra;
  (*mn)++;
}

static void memo_finish(stkr__uw_cache *c, uintptr_t pc0, unsigned mn) {
  uint32_t m = 0;
  unsigned i;
  for (i = 0; i < mn; i++) {
    if (c->memo[i].ra_off > m) m = c->memo[i].ra_off;
    if (c->memo[i].fp_src != UW_FP_FIRST && c->memo[i].fp_src > m) m = c->memo[i].fp_src;
  }
  c->memo_n = mn;
  c->memo_max_off = m;
  c->memo_pc0 = pc0;
}

/* How many memo transitions still hold on this stack (0: none, or no
 * memo for this start). pcs[1..j] get their pcs. */
static unsigned memo_check(const stkr__uw_cache *c, const stkr__uw_regs *regs, uintptr_t lo,
                           uintptr_t hi, uint64_t *pcs, unsigned max) {
  uintptr_t sp0 = regs->sp;
  unsigned k, i;

  if (c->memo_pc0 != regs->pc || c->memo_n == 0 || regs->pc > UW_ADDR_MAX || sp0 < lo ||
      (sp0 & 7) != 0 || hi < 8 || sp0 > hi - 8 || c->memo_max_off > hi - 8 - sp0)
    return 0;
  k = c->memo_n < max - 1 ? c->memo_n : max - 1;
  for (i = 0; i < k; i++) { /* independent loads: no chain */
    uint32_t cs = c->memo[i].chk_src;
    if (cs != UW_CHK_NONE) {
      uintptr_t f = cs == UW_FP_FIRST ? regs->fp : *(const uintptr_t *)(sp0 + cs);
      if (f - sp0 != c->memo[i].chk_val) break;
    }
    if ((*(const uintptr_t *)(sp0 + c->memo[i].ra_off) & UW_RA_MASK) != c->memo[i].pc) break;
    pcs[i + 1] = c->memo[i].pc;
  }
  return i;
}

/* The cache to use for this walk (NULL: none), emptied when it belongs to
 * another set: its rows may differ (an image unloaded, another loaded). */
static stkr__uw_cache *cache_sync(stkr__uw_cache *cache, const stkr__uw_set *set, uintptr_t hi) {
  unsigned i;
  if (cache == NULL || set == NULL || hi > UINTPTR_MAX - 0x10000u) return NULL;
  if (cache->gen != set->gen) {
    for (i = 0; i < STKR__UW_CACHE_SLOTS; i++) cache->key[i] = 0;
    cache->memo_pc0 = 0;
    cache->gen = set->gen;
  }
  return cache;
}

/* The row for pc: at pc itself for the first frame (where the registers
 * were taken: a hook's call site, the same few every time, so cached under
 * its own tag), else at pc - 1 (a return address is the instruction after
 * the call: its row may already be the next function's, after a noreturn
 * call). From the thread's cache when it has it. */
static inline uint32_t row_lookup(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_table **t, uintptr_t pc, bool first) {
  unsigned i = UW_SLOT(pc);
  uint32_t row;
  if (cache == NULL) return row_at(set, t, first ? pc : pc - 1);
  if (first) {
    if (cache->key[i] == (pc | UW_FIRST_KEY)) return cache->row[i];
    row = row_at(set, t, pc);
    cache->key[i] = pc | UW_FIRST_KEY;
    cache->row[i] = row;
    return row;
  }
  if (cache->key[i] == (pc | UW_SLOW_KEY) || cache->key[i] == pc)
    return cache->row[i]; /* kept for fast entries too (a frame where the fast loop may not run) */
  row = row_at(set, t, pc - 1);
  cache_fill(cache, i, pc, row);
  return row;
}

/* A signal trampoline's frame: sp points at the kernel's frame, and the
 * interrupted registers are in its ucontext's uc_mcontext.
 *  - x86_64 (__restore_rt): sp is the ucontext (struct rt_sigframe after
 *    its popped pretcode); uc_mcontext at +40, rbp/rsp/rip at +80/+120/+128
 *    of it (asm/sigcontext.h).
 *  - aarch64 (__kernel_rt_sigreturn): sp is struct rt_sigframe: siginfo
 *    (128 bytes), then the ucontext, whose uc_mcontext is at +176
 *    (asm/ucontext.h: flags, link, stack, sigmask padded to 128 bytes,
 *    16-aligned): fault_address, regs[31], sp, pc; x29/x30/sp/pc at
 *    +240/+248/+256/+264 of it. qemu-user writes the same layout.
 * The interrupted sp must lie above on the same stack (a sigaltstack
 * handler or a hostile frame ends the walk). @return false to stop. */
#if defined(__x86_64__)
#define UW_SIG_MC 40u
#define UW_SIG_FP 80u
#define UW_SIG_SP 120u
#define UW_SIG_PC 128u
#else
#define UW_SIG_MC (128u + 176u)
#define UW_SIG_FP (8u + 29u * 8u)
#define UW_SIG_LR (8u + 30u * 8u)
#define UW_SIG_SP (8u + 31u * 8u)
#define UW_SIG_PC (8u + 32u * 8u)
#endif
static bool signal_step(uintptr_t *pc, uintptr_t *sp, uintptr_t *fp, uintptr_t *lr, uintptr_t lo,
                        uintptr_t hi) {
  uintptr_t mc = *sp + UW_SIG_MC, nsp;
  if (mc < *sp || !word_ok(mc + UW_SIG_FP, lo, hi) || !word_ok(mc + UW_SIG_SP, lo, hi) ||
      !word_ok(mc + UW_SIG_PC, lo, hi))
    return false;
  nsp = *(const uintptr_t *)(mc + UW_SIG_SP);
  if (nsp <= *sp || nsp > hi) return false;
  *fp = *(const uintptr_t *)(mc + UW_SIG_FP);
#if defined(UW_SIG_LR)
  *lr = *(const uintptr_t *)(mc + UW_SIG_LR) & UW_RA_MASK; /* an interrupted leaf's caller */
#else
  (void)lr;
#endif
  *pc = *(const uintptr_t *)(mc + UW_SIG_PC);
  *sp = nsp;
  return *pc - 1 < UW_ADDR_MAX;
}

/* Is pc (a return address) a signal trampoline without CFI (aarch64: the
 * vdso's, see stkr__uw_set.sigtramp)? Asked only where the pc has no row. */
static inline bool is_sigtramp(const stkr__uw_set *set, uintptr_t pc) {
#if defined(__aarch64__)
  uint32_t i;
  for (i = 0; set != NULL && i < set->n_sigtramp; i++)
    if (set->sigtramp[i] == pc) return true;
#else
  (void)set, (void)pc;
#endif
  return false;
}

/* Use the memo for this walk if it holds (sets the state after the last
 * transition that held: *pc, *sp, *fp, *n; @return true), and decide
 * whether this walk records: from where the memo stopped holding, or, with
 * no memo for this start, one walk in 64 (a recording walk costs several
 * times a plain one, measured by unwind_cost's "hybrid rows"; a repeating
 * stack is memoized within 64 walks). */
static bool memo_start(stkr__uw_cache *c, const stkr__uw_regs *regs, uintptr_t lo, uintptr_t hi,
                       uint64_t *pcs, unsigned max, uintptr_t *pc, uintptr_t *sp, uintptr_t *fp,
                       unsigned *n, unsigned *mn, uint32_t *fsrc, bool *rec) {
  unsigned j = memo_check(c, regs, lo, hi, pcs, max);
  if (j == 0) {
    if ((++c->memo_misses & 63) != 0) *rec = false;
    return false;
  }
  *pc = c->memo[j - 1].pc; /* the exact state after transition j */
  *sp = regs->sp + c->memo[j - 1].sp_off;
  *fsrc = c->memo[j - 1].fp_src;
  *fp = *fsrc == UW_FP_FIRST ? regs->fp : *(const uintptr_t *)(regs->sp + *fsrc);
  *n = j;
  if (j == c->memo_n) *rec = false; /* all of it held: keep it as it is */
  else *mn = j;                     /* record on from there */
  return true;
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
  /* Recording this walk's SP-based prefix into the cache's memo: rec while
   * it may, mn entries so far, fsrc where the current fp came from. */
  bool rec = cache != NULL && (regs->sp & 7) == 0; /* offsets stay multiples of 8 */
  bool rec_any = false;
  unsigned mn = 0;
  uint32_t fsrc = UW_FP_FIRST;
  const uintptr_t sp0 = regs->sp;

  cache = cache_sync(cache, set, hi);

  if (cache != NULL && max >= 2 &&
      memo_start(cache, regs, lo, hi, pcs, max, &pc, &sp, &fp, &n, &mn, &fsrc, &rec)) {
    first = false;
    lr = pc;
  }
  rec_any = rec;

  while (n < max) {
    uintptr_t cfa, ra, addr;
    uint32_t row;
    unsigned kind, slot;

    pcs[n++] = pc;
    if (cache != NULL && !first && sp_known && sp >= lo && (sp & 7) == 0) {
      /* The fast loop: frames whose cache entry is "fast". sp stays
       * 8-aligned and >= lo (it only grows by multiples of 8), so
       * cfa <= hi is the one check each frame needs (see cache_fill). */
      unsigned i = UW_SLOT(pc);
      uintptr_t ra_at, fp_at;
      while (cache->key[i] == pc) { /* the key compare is a branch, off the load chain */
        cfa = sp + cache->fast[i].cfa_off;
        if (cfa > hi) goto done;
        ra_at = sp + cache->fast[i].ra_sp;
        ra = *(const uintptr_t *)ra_at & UW_RA_MASK;
        if (cache->fast[i].fp_sp != UW_FP_SAME) {
          fp_at = sp + cache->fast[i].fp_sp;
          fp = *(const uintptr_t *)fp_at;
          fsrc = (uint32_t)(fp_at - sp0);
        }
        sp = cfa;
        if (ra - 1 >= UW_ADDR_MAX || n == max) goto done; /* 0 or implausible */
        if (rec) memo_add(cache, &mn, &rec, sp0, ra_at, sp, fsrc, UW_CHK_NONE, 0, ra);
        pcs[n++] = pc = ra;
        i = UW_SLOT(pc);
      }
      lr = pc;
    }
    if (first && pc > UW_ADDR_MAX) break; /* not code: nothing to look up */
    row = row_lookup(set, cache, &t, pc, first);
    kind = STKR__UW_KIND(row);
    if (kind == STKR__UW_STOP) break;
    if (kind == STKR__UW_SP && !sp_known) kind = STKR__UW_FALLBACK;
    /* (With the sp unknown, after an aarch64 FP step, the frame is not
     * found: the FP record below is the best left.) */
    if (sp_known &&
        (row == STKR__UW_SIGNAL || (kind == STKR__UW_FALLBACK && !first && is_sigtramp(set, pc)))) {
      rec = false;
      if (!signal_step(&pc, &sp, &fp, &lr, lo, hi)) break;
      first = true; /* the pc is where the thread was, not a return address */
      continue;
    }
    if (kind == STKR__UW_FALLBACK) {
      /* The frame-pointer record {caller's fp, return address} at fp. */
      fb++;
      rec = false;
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
      uintptr_t ra_at = 0;
      slot = STKR__UW_RA_SLOT(row);
      uint32_t chk_src = kind == STKR__UW_SP ? UW_CHK_NONE : fsrc; /* the fp this CFA used */
      uintptr_t chk_val = fp - sp0;
      if (slot == 0) {
        if (!first) break; /* LR holds this frame's return address only in the first frame */
        ra = lr;
        rec = false;
      } else {
        ra_at = cfa - 8u * slot;
        if (!word_ok(ra_at, lo, hi)) break;
        ra = *(const uintptr_t *)ra_at;
      }
      slot = STKR__UW_FP_SLOT(row);
      if (slot != 0) {
        addr = cfa - 8u * slot;
        if (!word_ok(addr, lo, hi)) break;
        fp = *(const uintptr_t *)addr;
        if (addr < sp0 || addr - sp0 > UINT32_MAX / 2) rec = false;
        fsrc = (uint32_t)(addr - sp0);
      }
      sp = cfa;
      sp_known = true;
      ra &= UW_RA_MASK;
      if (ra - 1 >= UW_ADDR_MAX) break;
      if (rec) memo_add(cache, &mn, &rec, sp0, ra_at, sp, fsrc, chk_src, chk_val, ra);
    }
    ra &= UW_RA_MASK;
    if (ra - 1 >= UW_ADDR_MAX) break; /* 0 or implausible */
    pc = lr = ra;
    first = false;
  }
done:
  if (cache != NULL && mn != 0 && rec_any) memo_finish(cache, regs->pc, mn);
  if (fallbacks) *fallbacks = fb;
  return n;
}
