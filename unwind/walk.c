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
 * in [sp, CFA - 8], "CFA <= hi" proves both loads are inside the stack
 * (FP-based rows too, after a few checks on fp: fp_base_ok). Each cached
 * frame also predicts its caller (fast_body), which halves the chain where
 * it holds; the memo of the last walk removes it where the stack repeats;
 * and the stack key's hashes are folded on the way (stkr__uw_fold), in the
 * shadow of the loads. Figures: docs/UNWIND.md, "Performance".
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/stkr_hash.h"
#include "unwind/unwind.h"

_Atomic uint64_t stkr__uw_loads_hinted, stkr__uw_loads_covered; /* unwind.h */

/* A load announced and not yet covered (unwind.h): two relaxed loads, on
 * the fallback path only (a pc without a table). */
static inline bool loads_pending(void) {
  return atomic_load_explicit(&stkr__uw_loads_hinted, memory_order_relaxed) !=
         atomic_load_explicit(&stkr__uw_loads_covered, memory_order_relaxed);
}

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
/* fp_sp of a frame that leaves fp as it is: a multiple of 8 above any
 * real slot offset (<= 32767), so that the low 3 bits of fp_sp are free
 * for flags: UW_FP_BASED, and in n_fp_sp UW_WEAK. */
#define UW_FP_SAME 0xFFF8u
#define UW_FP_OFF(v) ((v) & ~7u)
#define UW_FP_BASED 2u /* a fast entry's offsets are from fp, not sp (CFA = fp + off) */
#define UW_INLINE static inline __attribute__((always_inline))
#define UW_WEAK 1u /* in n_fp_sp: the prediction `next` missed last time */
/* A return address's cache slot: its low bits, with no mixing, because
 * the fast loop computes it on the chain of dependent loads (a shift and
 * a mask, ~2 cycles, where pc ^ pc >> 9 took ~5); return addresses differ
 * in their low bits anyway (call sites at any byte). UW_ENTRY is that
 * slot's entry, addressed in bytes (entries are 32 bytes). */
#define UW_SLOT(pc) ((unsigned)(pc) & (STKR__UW_CACHE_SLOTS - 1))
#define UW_ENTRY(c, pc)                                                                     \
  ((__typeof__(&(c)->e[0]))(void *)((char *)(c)->e +                                       \
                                    (((uintptr_t)(pc) << 5) & ((STKR__UW_CACHE_SLOTS - 1) << 5))))
_Static_assert(sizeof(((stkr__uw_cache *)0)->e[0]) == 32, "UW_ENTRY scales by 32");


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

/* How many words above sp fp_record_skips looks at. */
#define UW_SKIP_SCAN_WORDS 64

/* Would the frame-pointer record at fp skip frames? For a pc no table row
 * covers (code built without unwind tables, assembly without CFI, a JIT
 * stub): if its function keeps no frame pointer, fp is an older frame's
 * and its record silently drops the frames between (QA, session 30:
 * ne_leaf < app_b < main for ne_leaf < ne_mid < ne_top < app_a < app_b <
 * main). Their return addresses lie between sp and that record: a word
 * there that returns into code a table covers (the byte before it has a
 * row) says frames would be skipped. Only the first UW_SKIP_SCAN_WORDS
 * words are looked at, where a skipped frame's return address usually is
 * (a frameless leaf's is at sp itself); the slow path of a rare frame. A
 * stale return address in a frame that does keep fp (its uninitialized
 * locals) gives a false "cut": a shorter stack, marked, never a wrong one. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
/* It reads any word of the frames it looks at, ASan's redzones among them
 * (only their values: nothing is read outside the thread's stack). */
__attribute__((no_sanitize_address))
#endif
#endif
static bool fp_record_skips(const stkr__uw_set *set, uintptr_t sp, uintptr_t fp,
                            uintptr_t lo, uintptr_t hi) {
  const stkr__uw_table *t = NULL;
  uintptr_t a = (sp + 7) & ~(uintptr_t)7, end = fp, code_lo, code_hi;
  if (set == NULL || set->n == 0) return false;
  /* Where any table's rows are (tables ascending, apart): a word outside
   * (a small integer, most pointers) costs no search. */
  code_lo = set->tables[0]->lo;
  code_hi = set->tables[set->n - 1]->hi;
  if (end - a > UW_SKIP_SCAN_WORDS * 8) end = a + UW_SKIP_SCAN_WORDS * 8;
  for (; a < end && word_ok(a, lo, hi); a += 8) {
    uintptr_t v = *(const uintptr_t *)a;
    if (v - 1 < code_lo || v - 1 >= code_hi) continue;
    if (row_at(set, &t, v - 1) != STKR__UW_FALLBACK) return true;
  }
  return false;
}

/* Cache key (a return address, or a first frame's pc | UW_FIRST_KEY) with
 * its row: "fast" when the row is SP-based with the return address (and
 * fp, if saved) in 8-aligned slots in [sp, CFA - 8] and a positive CFA
 * offset that is a multiple of 8, else "slow" (key | UW_SLOW_KEY). */
static void cache_fill(stkr__uw_cache *c, unsigned i, uintptr_t pc, uint32_t row) {
  unsigned off = STKR__UW_CFA_OFF(row), ra = STKR__UW_RA_SLOT(row), fps = STKR__UW_FP_SLOT(row);
  unsigned kind = STKR__UW_KIND(row);
  __typeof__(&c->e[0]) e = &c->e[i];

  e->key = pc | UW_SLOW_KEY;
  e->row = row;
  e->next = 0; /* no prediction yet */
  if ((kind != STKR__UW_SP && kind != STKR__UW_FP) || ra == 0 || off == 0 || (off & 7) != 0 ||
      8 * ra > off || 8 * fps > off)
    return;
  /* FP-based rows (code built with frame pointers: the recorder's own
   * frames and the hooks above every event) are fast too: the same offsets
   * from fp, after checks on fp that the loop makes (fp_base_ok). */
  e->key = pc;
  e->cfa_off = (uint16_t)off;
  e->ra_sp = (uint16_t)(off - 8 * ra);
  e->fp_sp = (uint16_t)((fps ? off - 8 * fps : UW_FP_SAME) | (kind == STKR__UW_FP ? UW_FP_BASED : 0));
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

/* The memo is the mn transitions recorded (pcs[0..mn - 1] are this walk's:
 * transition i leads to pcs[i + 1]); their hash folds are computed here,
 * once, so a walk the memo holds for need not fold those PCs again. */
static void memo_finish(stkr__uw_cache *c, uintptr_t pc0, unsigned mn, const uint64_t *pcs,
                        unsigned from, bool stop) {
  uint64_t h1 = STKR_STACK_HASH_SEED, h2 = STKR_KEY2_SEED;
  uint32_t m = 0;
  unsigned i;
  for (i = 0; i < mn; i++) {
    if (c->memo[i].ra_off > m) m = c->memo[i].ra_off;
    if (c->memo[i].fp_src != UW_FP_FIRST && c->memo[i].fp_src > m) m = c->memo[i].fp_src;
    if (i >= from) {
      h1 = stkr_stack_hash_step(h1, pcs[i]);
      h2 = stkr_stack_key2_step(h2, pcs[i]);
    }
    c->memo[i].h1 = h1;
    c->memo[i].h2 = h2;
  }
  c->memo_from = from;
  c->memo_stop = stop;
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
  pcs[0] = regs->pc;
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
    for (i = 0; i < STKR__UW_CACHE_SLOTS; i++) cache->e[i].key = 0;
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
UW_INLINE uint32_t row_lookup(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_table **t, uintptr_t pc, bool first) {
  unsigned i = UW_SLOT(pc);
  uint32_t row;
  if (cache == NULL) return row_at(set, t, first ? pc : pc - 1);
  /* (row is kept for fast entries too: a frame where the fast loop may
   * not run, e.g. with the sp unknown) */
  if (first) {
    if ((cache->e[i].key & ~UW_SLOW_KEY) == (pc | UW_FIRST_KEY)) return cache->e[i].row;
    row = row_at(set, t, pc);
    cache_fill(cache, i, pc | UW_FIRST_KEY, row);
    return row;
  }
  if ((cache->e[i].key & ~UW_SLOW_KEY) == pc) return cache->e[i].row;
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

/* The state of one walk, kept in one place so that the always-inline
 * helpers below can share it (after inlining it lives in registers). */
typedef struct uw_walk {
  uintptr_t pc, sp, fp, lr;
  uint64_t *pcs;
  unsigned n, max;
  unsigned from;   /* the fold's first index (stkr__uw_fold.from) */
  uint64_t h1, h2; /* the folds of pcs[from .. n) */
  /* Recording this walk's SP-based prefix into the cache's memo: rec while
   * it may, mn entries so far, fsrc where the current fp came from. */
  bool rec;
  unsigned mn;
  uint32_t fsrc;
  uintptr_t sp0;
} uw_walk;


/* pcs[n++] = pc, folded into the hashes when the walk folds (`folding` is
 * a constant in each entry point). */
UW_INLINE void uw_put(uw_walk *w, uintptr_t pc, const bool folding) {
  if (folding && w->n >= w->from) {
    w->h1 = stkr_stack_hash_step(w->h1, pc);
    w->h2 = stkr_stack_key2_step(w->h2, pc);
  }
  w->pcs[w->n++] = pc;
}

/* The last pc put is exact, not a return address: store it + 1 (see the
 * signal frame in walk_body), its step in the folds redone. A signal
 * frame is rare; the common path pays nothing for it. */
static void mark_exact(uw_walk *w, const bool folding) {
  uint64_t pc;
  if (w->n == 0) return;
  pc = w->pcs[w->n - 1]++;
  if (!folding || w->n <= w->from) return;
  w->h1 = stkr_stack_hash_step(stkr_stack_hash_unstep(w->h1, pc), pc + 1);
  w->h2 = stkr_stack_key2_step(stkr_stack_key2_unstep(w->h2, pc), pc + 1);
}

/* Use the memo for this walk if it holds (sets the state after the last
 * transition that held: pc, sp, fp, n, the folds; @return 1, or 2 when
 * all of it held and the memo's walk ended there: at a STOP row, which
 * depends on the pc alone, so this walk ends there too), and decide
 * whether this walk records: from where the memo stopped holding, or, with
 * no memo for this start, one walk in 64 (a recording walk costs several
 * times a plain one, measured by unwind_cost's "hybrid rows"; a repeating
 * stack is memoized within 64 walks). @return 0: no memo held. */
static int memo_start(stkr__uw_cache *c, const stkr__uw_regs *regs, uintptr_t lo, uintptr_t hi,
                      uw_walk *w, bool folding) {
  unsigned j = memo_check(c, regs, lo, hi, w->pcs, w->max), i;
  if (j == 0) {
    if ((++c->memo_misses & 63) != 0) w->rec = false;
    return 0;
  }
  w->pc = c->memo[j - 1].pc; /* the exact state after transition j */
  w->sp = regs->sp + c->memo[j - 1].sp_off;
  w->fsrc = c->memo[j - 1].fp_src;
  w->fp = w->fsrc == UW_FP_FIRST ? regs->fp : *(const uintptr_t *)(regs->sp + w->fsrc);
  w->n = j; /* pcs[0..j] are in place; the walk goes on by storing pcs[j] again */
  if (folding && c->memo_from == w->from) {
    w->h1 = c->memo[j - 1].h1; /* the folds of pcs[from .. j) */
    w->h2 = c->memo[j - 1].h2;
  } else if (folding) {
    for (i = w->from; i < j; i++) {
      w->h1 = stkr_stack_hash_step(w->h1, w->pcs[i]);
      w->h2 = stkr_stack_key2_step(w->h2, w->pcs[i]);
    }
  }
  if (j == c->memo_n) w->rec = false; /* all of it held: keep it as it is */
  else w->mn = j;                     /* record on from there */
  return j == c->memo_n && c->memo_stop ? 2 : 1;
}

/* The fast loop's state, in locals of fast_frames (not in uw_walk, whose
 * address memo_add sees: a store to pcs could then alias it, and the
 * hashes' chain went through memory). */
typedef struct uw_hot {
  uintptr_t sp, fp;
  uint64_t h1, h2;
  uint64_t *out, *end, *fold_at; /* next pc's place, pcs + max, pcs + from */
  uint32_t fsrc;
} uw_hot;

/* One frame by a fast entry's fields at h->sp (see cache_fill: cfa <= hi
 * is the one check it needs): stores its caller's return address and
 * returns it, or 0 when the walk ends. */
UW_INLINE uintptr_t fast_step(uw_hot *h, uw_walk *w, stkr__uw_cache *c, unsigned cfa_off,
                              unsigned ra_sp, unsigned fp_sp, uintptr_t hi, const bool folding,
                              const bool recording) {
  const bool fp_based = (fp_sp & UW_FP_BASED) != 0;
  const uintptr_t base = fp_based ? h->fp : h->sp;
  uint32_t chk_src = fp_based ? h->fsrc : UW_CHK_NONE; /* the memo checks the fp it used */
  uintptr_t chk_val = h->fp - w->sp0;
  uintptr_t cfa = base + cfa_off, ra_at = base + ra_sp, ra;
  if (cfa > hi) return 0;
  ra = *(const uintptr_t *)ra_at & UW_RA_MASK;
  if (UW_FP_OFF(fp_sp) != UW_FP_SAME) {
    uintptr_t fp_at = base + UW_FP_OFF(fp_sp);
    h->fp = *(const uintptr_t *)fp_at;
    if (recording && (fp_at < w->sp0 || fp_at - w->sp0 > UINT32_MAX / 2)) w->rec = false;
    if (recording) h->fsrc = (uint32_t)(fp_at - w->sp0);
  }
  h->sp = cfa;
  if (ra - 1 >= UW_ADDR_MAX || h->out == h->end) return 0; /* 0 or implausible */
  if (recording && w->rec)
    memo_add(c, &w->mn, &w->rec, w->sp0, ra_at, cfa, h->fsrc, chk_src, chk_val, ra);
  if (folding && h->out >= h->fold_at) {
    h->h1 = stkr_stack_hash_step(h->h1, ra);
    h->h2 = stkr_stack_key2_step(h->h2, ra);
  }
  *h->out++ = ra;
  return ra;
}

/* The fast loop: frames whose cache entry is "fast", from w->pc (already
 * stored). sp stays 8-aligned and >= lo (it only grows by multiples of 8),
 * so each frame needs one bounds check.
 *
 * A frame costs a chain of dependent loads: return address -> its entry
 * -> the next return address's slot. An entry also keeps the return
 * address found in its frame last time (`next`, its caller's) with a copy
 * of that one's fast fields: where the stack still holds it, the caller's
 * slot is at an address known from this entry alone, so its load does not
 * wait for the first one (the compare is a predicted branch, as in value
 * prediction), and two frames cost about one link of the chain. The copy
 * is exact (a row is a function of the return address, and the cache is
 * emptied with another set), so a wrong prediction costs a mispredicted
 * branch and a refill, never a wrong frame. @return false: the walk ends. */
/* May an FP-based fast entry with this CFA offset be used at this fp? The
 * CFA strictly above sp (the walk's progress), at most hi, 8-aligned, and
 * fp itself in [lo, CFA): then every slot (in [fp, CFA - 8]) is an aligned
 * word inside the stack. Otherwise the frame takes the general step, which
 * decides as it always did. */
UW_INLINE bool fp_base_ok(const uw_hot *h, unsigned cfa_off, uintptr_t lo, uintptr_t hi) {
  uintptr_t cfa = h->fp + cfa_off;
  return h->fp >= lo && h->fp < cfa && cfa <= hi && cfa > h->sp && (cfa & 7) == 0;
}

#define UW_FAST_END 0  /* the walk ends (a check failed, max reached) */
#define UW_FAST_GO 1   /* go on from w->pc by its row */
#define UW_FAST_STOP 2 /* the walk ends at w's last pc, whose row is a STOP */
UW_INLINE int fast_body(uw_walk *w, stkr__uw_cache *c, uintptr_t lo, uintptr_t hi, uintptr_t key,
                        const bool folding, const bool recording) {
  uw_hot h = {w->sp, w->fp, w->h1, w->h2, w->pcs + w->n, w->pcs + w->max, w->pcs + w->from,
              w->fsrc};
  uintptr_t pc = w->pc, ra;
  __typeof__(&c->e[0]) e = UW_ENTRY(c, pc), f;
  int go = UW_FAST_END;

  while (e->key == key) { /* the key compare is a branch, off the load chain */
    if ((e->fp_sp & UW_FP_BASED) && !fp_base_ok(&h, e->cfa_off, lo, hi)) break;
    ra = fast_step(&h, w, c, e->cfa_off, e->ra_sp, e->fp_sp, hi, folding, recording);
    if (ra == 0) goto out;
    pc = ra;
    if (ra == e->next) {
      unsigned nfp = e->n_fp_sp;
      if (nfp & UW_WEAK) e->n_fp_sp = (uint16_t)(nfp & ~UW_WEAK); /* it holds again */
      if (e->n_cfa_off == 0) { /* the caller's row is a STOP (the outermost frame) */
        go = UW_FAST_STOP;
        goto out;
      }
      if ((nfp & UW_FP_BASED) && !fp_base_ok(&h, e->n_cfa_off, lo, hi)) break;
      ra = fast_step(&h, w, c, e->n_cfa_off, e->n_ra_sp, nfp & ~UW_WEAK, hi, folding, recording);
      if (ra == 0) goto out;
      pc = ra;
    } else if (!(e->n_fp_sp & UW_WEAK) && e->next != 0) {
      /* Missed once: keep the prediction (a recursion's last frame, whose
       * caller differs, must not unlearn it for every other frame). */
      e->n_fp_sp |= UW_WEAK;
    } else if ((f = UW_ENTRY(c, ra))->key == ra) { /* learn the caller (fast ones only) */
      e->next = ra;
      e->n_cfa_off = f->cfa_off;
      e->n_ra_sp = f->ra_sp;
      e->n_fp_sp = f->fp_sp;
    } else if (f->key == (ra | UW_SLOW_KEY) && STKR__UW_KIND(f->row) == STKR__UW_STOP) {
      e->next = ra; /* ... or a STOP: n_cfa_off 0 (a fast entry's is never 0) */
      e->n_cfa_off = 0;
      e->n_fp_sp = UW_FP_SAME;
    }
    key = pc;
    e = UW_ENTRY(c, pc);
  }
  go = UW_FAST_GO; /* (also after a break: pc is the last one stored) */
out:
  w->pc = pc; /* (unused when the walk ends) */
  w->sp = h.sp;
  w->fp = h.fp;
  w->h1 = h.h1;
  w->h2 = h.h2;
  w->n = (unsigned)(h.out - w->pcs);
  w->fsrc = h.fsrc;
  return go;
}

/* The fast loop in functions of its own: inside the walk's big body the
 * compiler kept the hashes in stack slots, and the store-to-load
 * forwarding put ~1 ns a frame on their chain. */
static __attribute__((noinline)) int fast_plain(uw_walk *w, stkr__uw_cache *c, uintptr_t lo,
                                                uintptr_t hi, uintptr_t key) {
  return fast_body(w, c, lo, hi, key, false, false);
}
static __attribute__((noinline)) int fast_folded(uw_walk *w, stkr__uw_cache *c, uintptr_t lo,
                                                 uintptr_t hi, uintptr_t key) {
  return fast_body(w, c, lo, hi, key, true, false);
}
static __attribute__((noinline)) int fast_recording(uw_walk *w, stkr__uw_cache *c, uintptr_t lo,
                                                    uintptr_t hi, uintptr_t key, bool folding) {
  return folding ? fast_body(w, c, lo, hi, key, true, true)
                 : fast_body(w, c, lo, hi, key, false, true);
}

/* The fast loop from w->pc, whose entry has this key (pc, or a first
 * frame's pc | UW_FIRST_KEY): UW_FAST_*. */
UW_INLINE int fast_frames(uw_walk *w, stkr__uw_cache *c, uintptr_t lo, uintptr_t hi,
                          uintptr_t key, const bool folding) {
  if (w->rec) return fast_recording(w, c, lo, hi, key, folding);
  return folding ? fast_folded(w, c, lo, hi, key) : fast_plain(w, c, lo, hi, key);
}

/* One frame by its SP- or FP-based row (the general step: any offsets,
 * every load checked). @return the caller's return address, or 0: the
 * walk ends. */
UW_INLINE uintptr_t table_step(uw_walk *w, stkr__uw_cache *cache, uint32_t row, unsigned kind,
                               bool first, uintptr_t lo, uintptr_t hi) {
  uintptr_t cfa = (kind == STKR__UW_SP ? w->sp : w->fp) + STKR__UW_CFA_OFF(row);
  uintptr_t ra_at = 0, ra, addr;
  uint32_t chk_src = kind == STKR__UW_SP ? UW_CHK_NONE : w->fsrc; /* the fp this CFA used */
  uintptr_t chk_val = w->fp - w->sp0;
  unsigned slot = STKR__UW_RA_SLOT(row);

  /* The CFA is the caller's sp: above ours, except in an aarch64 leaf
   * that has not moved sp (CFA = sp, return address still in LR). */
  if (cfa > hi || cfa < w->sp || (cfa == w->sp && !first)) return 0;
  if (slot == 0) {
    if (!first) return 0; /* LR holds this frame's return address only in the first frame */
    ra = w->lr;
    w->rec = false;
  } else {
    ra_at = cfa - 8u * slot;
    if (!word_ok(ra_at, lo, hi)) return 0;
    ra = *(const uintptr_t *)ra_at;
  }
  slot = STKR__UW_FP_SLOT(row);
  if (slot != 0) {
    addr = cfa - 8u * slot;
    if (!word_ok(addr, lo, hi)) return 0;
    w->fp = *(const uintptr_t *)addr;
    if (addr < w->sp0 || addr - w->sp0 > UINT32_MAX / 2) w->rec = false;
    w->fsrc = (uint32_t)(addr - w->sp0);
  }
  w->sp = cfa;
  ra &= UW_RA_MASK;
  if (ra - 1 >= UW_ADDR_MAX) return 0;
  if (w->rec) memo_add(cache, &w->mn, &w->rec, w->sp0, ra_at, w->sp, w->fsrc, chk_src, chk_val, ra);
  return ra;
}

/* The walk, with or without the cache; `folding` (a constant in each entry
 * point) says whether it folds the stack key's hashes into *fold. */
UW_INLINE unsigned walk_body(const stkr__uw_set *set, stkr__uw_cache *cache,
                             const stkr__uw_regs *regs, uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                             unsigned max, stkr__uw_fold *fold, unsigned *fallbacks,
                             const bool folding) {
  /* The registers one word at a time: the caller has just stored them so
   * (the capture helpers), and the 16-byte loads the compiler otherwise
   * copies them with cannot be forwarded from two 8-byte stores: a stall
   * of ~20 cycles each, measured as ~10 ns a walk by unwind_cost. */
  uintptr_t r_pc = regs->pc, r_sp = regs->sp, r_fp = regs->fp, r_lr = regs->lr;
  __asm__("" : "+r"(r_pc), "+r"(r_sp), "+r"(r_fp), "+r"(r_lr));
  uw_walk w = {r_pc, r_sp, r_fp, r_lr, pcs, 0, max,
               folding ? fold->from : 0, STKR_STACK_HASH_SEED, STKR_KEY2_SEED,
               false, 0, UW_FP_FIRST, r_sp};
  const stkr__uw_table *t = NULL;
  unsigned fb = 0;
  int memo;
  bool first = true, rec_any = false, stopped = false;
  uintptr_t exact = 0; /* 1 right after a signal frame: see there */
  unsigned exact_n = 0; /* w.n after that frame's put */
  bool sp_known = true; /* false after an aarch64 FP step: the caller's sp is not fp + 16 there */

  cache = cache_sync(cache, set, hi);
  w.rec = cache != NULL && (regs->sp & 7) == 0; /* offsets stay multiples of 8 */
  memo = cache != NULL && max >= 2 ? memo_start(cache, regs, lo, hi, &w, folding) : 0;
  if (memo == 2) { /* the whole walk was the memo's, up to its STOP */
    uw_put(&w, w.pc, folding);
    goto done;
  }
  if (memo != 0) {
    first = false;
    w.lr = w.pc;
  }
  rec_any = w.rec;

  while (w.n < max) {
    uintptr_t ra;
    uint32_t row;
    unsigned kind;

    uw_put(&w, w.pc + exact, folding);
    if (exact) exact_n = w.n;
    exact = 0;
    /* The fast loop, also for a first frame (its entry is tagged: the row
     * at pc itself), unless its pc is not code (then the tag could match
     * another pc's entry). */
    if (cache != NULL && sp_known && w.sp >= lo && (w.sp & 7) == 0 &&
        (!first || w.pc <= UW_ADDR_MAX)) {
      unsigned n0 = w.n;
      int go = fast_frames(&w, cache, lo, hi, first ? w.pc | UW_FIRST_KEY : w.pc, folding);
      if (go != UW_FAST_GO) {
        stopped = go == UW_FAST_STOP;
        goto done;
      }
      if (w.n != n0) {
        first = false;
        w.lr = w.pc;
      }
    }
    if (first && w.pc > UW_ADDR_MAX) break; /* not code: nothing to look up */
    row = row_lookup(set, cache, &t, w.pc, first);
    kind = STKR__UW_KIND(row);
    if (kind == STKR__UW_STOP) {
      stopped = true;
      break;
    }
    const bool no_row = kind == STKR__UW_FALLBACK; /* (not a guess for sp) */
    if (kind == STKR__UW_SP && !sp_known) kind = STKR__UW_FALLBACK;
    /* (With the sp unknown, after an aarch64 FP step, the frame is not
     * found: the FP record below is the best left.) */
    if (sp_known && (row == STKR__UW_SIGNAL ||
                     (kind == STKR__UW_FALLBACK && !first && is_sigtramp(set, w.pc)))) {
      w.rec = false;
      /* Neither the trampoline's pc (the kernel "returns" to its first
       * byte) nor the interrupted one is a return address, yet every
       * reader looks a pc up at pc - 1 (StackDef.pcs): both are stored
       * + 1, as Apple's thread_stack_async_pcs stores its exact pcs. */
      if (w.n != exact_n) /* (a signal at the trampoline: stored + 1 once) */
        mark_exact(&w, folding);
      if (!signal_step(&w.pc, &w.sp, &w.fp, &w.lr, lo, hi)) break;
      first = true; /* the pc is where the thread was, not a return address */
      exact = 1;
      continue;
    }
    if (first && sp_known && STKR__UW_IS_PLT(row)) {
      /* Stopped in a PLT entry (unwind.h): the return address is on top
       * of the stack, or under the entry's push. */
      uintptr_t cfa = w.sp + 8 + ((w.pc & 15u) >= STKR__UW_PLT_K(row) ? 8 : 0);
      w.rec = false;
      if (!word_ok(cfa - 8, lo, hi)) break;
      ra = *(const uintptr_t *)(cfa - 8);
      w.sp = cfa;
    } else if (kind == STKR__UW_FALLBACK) {
      /* In an image loaded a moment ago (no table yet), fp may belong to
       * an older frame: stop rather than skip callers (unwind.h). */
      if (loads_pending() && stkr__unwind_set_find(set, first ? w.pc : w.pc - 1) == NULL) {
        if (folding) fold->cut = true; /* callers missing: not the stack's end */
        break;
      }
      /* The frame-pointer record {caller's fp, return address} at fp. */
      fb++;
      w.rec = false;
      if (w.fp < w.sp || !word_ok(w.fp, lo, hi) || !word_ok(w.fp + 8, lo, hi)) {
        /* 0 is the outermost frame's mark; any other value that is not a
         * record on this stack (a frameless function's scratch, ASan's
         * fake stack) leaves its callers unknown. */
        if (folding && w.fp != 0 && no_row) fold->cut = true;
        break;
      }
      if (no_row && sp_known && fp_record_skips(set, w.sp, w.fp, lo, hi)) {
        if (folding) fold->cut = true; /* callers missing: not the stack's end */
        break;
      }
      ra = *(const uintptr_t *)(w.fp + 8);
      w.sp = w.fp + 16;
      w.fp = *(const uintptr_t *)w.fp;
#if defined(__aarch64__)
      sp_known = false;
#endif
    } else {
      if ((ra = table_step(&w, cache, row, kind, first, lo, hi)) == 0) break;
      sp_known = true;
    }
    ra &= UW_RA_MASK;
    if (ra - 1 >= UW_ADDR_MAX) break; /* 0 or implausible */
    w.pc = w.lr = ra;
    first = false;
  }
done:
  if (cache != NULL && w.mn != 0 && rec_any)
    memo_finish(cache, regs->pc, w.mn, pcs, w.from, stopped && w.rec && w.n == w.mn + 1);
  if (fallbacks) *fallbacks = fb;
  if (folding) {
    fold->h1 = w.h1;
    fold->h2 = w.h2;
  }
  return w.n;
}

unsigned stkr__unwind_walk(const stkr__uw_set *set, const stkr__uw_regs *regs,
                           uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                           unsigned max, unsigned *fallbacks) {
  return walk_body(set, NULL, regs, lo, hi, pcs, max, NULL, fallbacks, false);
}

unsigned stkr__unwind_walk_cached(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_regs *regs, uintptr_t lo,
                                  uintptr_t hi, uint64_t *pcs, unsigned max,
                                  unsigned *fallbacks) {
  return walk_body(set, cache, regs, lo, hi, pcs, max, NULL, fallbacks, false);
}

unsigned stkr__unwind_walk_folded(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_regs *regs, uintptr_t lo,
                                  uintptr_t hi, uint64_t *pcs, unsigned max,
                                  stkr__uw_fold *fold, unsigned *fallbacks) {
  return walk_body(set, cache, regs, lo, hi, pcs, max, fold, fallbacks, true);
}
