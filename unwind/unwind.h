/*
 * unwind.h: compact unwind tables built from .eh_frame, and the hybrid
 * (table, else frame-pointer) stack walk that reads them (issue 15).
 *
 * Two halves with different rules:
 *  - Building (stkr__unwind_table_build*, stkr__unwind_set_*): runs on the
 *    flush worker or at start-up. Allocates, may take milliseconds. Input is
 *    untrusted (other images' memory, files, fuzzed bytes): every read is
 *    bounds-checked; bad input yields an error or "fallback" rows, never a
 *    crash, an unbounded loop or unbounded memory.
 *  - Walking (stkr__unwind_walk, stkr__unwind_set_current): the hot path.
 *    No malloc, no lock, no system call, async-signal-safe; every stack
 *    load is checked against [lo, hi) and alignment.
 *
 * Table format, fallback rules and the publication rule: docs/UNWIND.md.
 * libc only: recorder/ may depend on this package.
 */
#ifndef STKR_UNWIND_H
#define STKR_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one compact row (32 bits) -------------------------------------------
 *  bits 0-1   kind: STKR__UW_SP / _FP (CFA = that register + cfa_off),
 *             _FALLBACK (no row: use the frame-pointer record; with
 *             cfa_off 1: STKR__UW_SIGNAL), _STOP
 *             (return address undefined: outermost frame)
 *  bits 2-16  cfa_off, bytes (0..32767)
 *  bits 17-24 fp_slot: 0 = the caller's FP is this frame's FP ("same"),
 *             n = saved at CFA - 8 * n
 *  bits 25-31 ra_slot: 0 = the return address is in LR (aarch64),
 *             n = saved at CFA - 8 * n
 * One row holds from its start address up to the next row's. */
#define STKR__UW_SP 0u
#define STKR__UW_FP 1u
#define STKR__UW_FALLBACK 2u
#define STKR__UW_STOP 3u
#define STKR__UW_KIND(r) ((r) & 3u)
#define STKR__UW_CFA_OFF(r) (((r) >> 2) & 0x7FFFu)
#define STKR__UW_FP_SLOT(r) (((r) >> 17) & 0xFFu)
#define STKR__UW_RA_SLOT(r) ((r) >> 25)
#define STKR__UW_ROW(kind, cfa, fp, ra)                                      \
  ((uint32_t)(kind) | ((uint32_t)(cfa) << 2) | ((uint32_t)(fp) << 17) |      \
   ((uint32_t)(ra) << 25))
/* A signal trampoline (__restore_rt; its CIE has the 'S' augmentation):
 * the interrupted registers are in the kernel's ucontext at sp. A
 * FALLBACK kind with a non-zero field, so a walker that does not know it
 * falls back to the frame pointer. */
#define STKR__UW_SIGNAL STKR__UW_ROW(STKR__UW_FALLBACK, 1, 0, 0)
/* An x86_64 lazy PLT entry (build.c, plt_expr_k): CFA = sp + 8, plus 8
 * from byte k (0..15) of the pc's 16-byte entry on; the return address at
 * CFA - 8, fp untouched. Only a first frame (a pc where the thread was)
 * can be in one: nothing calls from a PLT. FALLBACK for walkers that do
 * not know it, as STKR__UW_SIGNAL. */
#define STKR__UW_PLT(k) STKR__UW_ROW(STKR__UW_FALLBACK, 2, (k), 0)
#define STKR__UW_IS_PLT(r) (((r) & ~(0xFu << 17)) == STKR__UW_PLT(0))
#define STKR__UW_PLT_K(r) STKR__UW_FP_SLOT(r)
#define STKR__UW_CFA_MAX 0x7FFFu
#define STKR__UW_FP_SLOT_MAX 0xFFu
#define STKR__UW_RA_SLOT_MAX 0x7Fu

/* The target's DWARF register numbers. */
typedef enum stkr__uw_arch {
  STKR__UW_X86_64 = 0,  /* sp 7, fp (rbp) 6, return address column 16 */
  STKR__UW_AARCH64 = 1, /* sp 31, fp (x29) 29, lr (x30) 30 */
} stkr__uw_arch;

#if defined(__aarch64__)
#define STKR__UW_HOST STKR__UW_AARCH64
#else
#define STKR__UW_HOST STKR__UW_X86_64
#endif

/* The layout of a built table (stkr__uw_table's arrays and what their
 * values mean). Tables stored on disk (the per-build-id cache of a
 * recording, unwind/store.c) carry it: bump it with any change to the
 * layout, the row encoding or the builder's output for the same input, so
 * that files of the old layout are rebuilt rather than used. */
#define STKR__UW_TABLE_FORMAT 2u /* 2: STKR__UW_PLT rows (session 25) */

/* What a build saw. Every count is of rows or FDEs in the input. */
typedef struct stkr__uw_stats {
  uint64_t cies, fdes;       /* parsed */
  uint64_t fdes_bad;         /* refused (malformed, unknown CIE, out of range): no rows */
  uint64_t rows;             /* rows in the table (after merging equal neighbours) */
  uint64_t rows_fallback;    /* rows a compact row cannot express (expressions,
                                registers other than SP/FP as CFA, big offsets):
                                the walk uses FP there */
  uint64_t rows_signal;      /* signal trampoline rows (STKR__UW_SIGNAL) */
  uint64_t table_bytes;      /* memory of the table (struct + arrays) */
  uint64_t eh_frame_bytes;   /* the input .eh_frame's size */
} stkr__uw_stats;

/* An immutable table for one image: rows sorted by start address.
 * Addresses are offsets from `base` (the image's load bias in memory; 0
 * for a table built from a file, whose addresses are link-time vaddrs).
 * Written once by the builder; read by any number of walkers after it is
 * published (what they read is never modified after). */
typedef struct stkr__uw_table {
  uintptr_t base;          /* load bias: runtime address = base + offset */
  uintptr_t lo, hi;        /* runtime addresses the rows cover: [lo, hi) */
  uint32_t n;              /* rows */
  uint32_t n_palette;      /* distinct rows (at most 65536) */
  uint32_t n_blocks;       /* block index entries: one per 2^block_shift bytes from off[0] */
  uint32_t block_shift;    /* 10 (1 KiB), more when rows are sparse */
  const uint32_t *off;     /* n start offsets, ascending */
  const uint16_t *idx;     /* n indexes into palette: 6 bytes a row in all */
  const uint32_t *palette; /* n_palette rows (STKR__UW_ROW) */
  const uint32_t *block;   /* n_blocks: block[j] = the last row starting at or
                              before off[0] + j KiB (where a search starts) */
  /* Not used by the walk (after its fields, off its cache lines' way). A
   * table may be in several sets (the set built after a dlopen takes the
   * unchanged images' tables of the published one): `shares` more sets
   * than the first hold it, and stkr__unwind_table_free frees it with the
   * last. Sets are built and freed by one thread (the worker). */
  uint32_t shares;
  /* Its image for a later set: a hash of the build-id (0: none known) and
   * what its build reported (recorder/unwind_tables.c fills both). */
  uint64_t image_key;
  stkr__uw_stats stats;
  bool from_cache; /* read from the recording's cache, not built */
} stkr__uw_table;

/* Row i of t. */
static inline uint32_t stkr__unwind_row(const stkr__uw_table *t, uint32_t i) {
  return t->palette[t->idx[i]];
}


/* Where an image's CFI lies, in memory or in a file's bytes. */
typedef struct stkr__uw_src {
  const uint8_t *eh_frame; /* the .eh_frame bytes */
  size_t eh_frame_len;     /* how many may be read (a zero terminator may end it sooner) */
  uint64_t eh_frame_vaddr; /* the address .eh_frame has in the image (for pcrel) */
  uint64_t data_base;      /* DW_EH_PE_datarel base (the .eh_frame_hdr's address), 0 if none */
  uintptr_t base;          /* load bias of the table (0: addresses are vaddrs) */
  stkr__uw_arch arch;
  /* DW_EH_PE_indirect is never followed (it would load through a pointer
   * of the input): it only appears for personality routines, which are
   * skipped; an FDE whose address is indirect is refused. */
} stkr__uw_src;

/* Build the table for one image's .eh_frame.
 * @return 0 and *out (free with stkr__unwind_table_free), or -EINVAL
 * (nothing usable: no CIE/FDE parsed), -ENOMEM, -E2BIG (addresses beyond
 * 4 GiB from base). *stats (may be NULL) is filled in either case.
 * Thread-safety: reentrant; reads only src. May allocate. */
int stkr__unwind_table_build(const stkr__uw_src *src, stkr__uw_table **out,
                             stkr__uw_stats *stats);

/* Parse an .eh_frame_hdr (version 1) at hdr[0..len), whose address in the
 * image is hdr_vaddr, for the address of .eh_frame.
 * @return 0 and *eh_frame_vaddr, or -EINVAL. */
int stkr__unwind_parse_hdr(const uint8_t *hdr, size_t len, uint64_t hdr_vaddr,
                           uint64_t *eh_frame_vaddr);

/* Where a loaded image's .eh_frame is: its PT_GNU_EH_FRAME (.eh_frame_hdr)
 * gives the address; the PT_LOAD holding it bounds the length. For
 * dl_iterate_phdr callbacks. @return 0 and *src (base = the load bias), or
 * -ENOENT (no PT_GNU_EH_FRAME), -EINVAL (a hdr it cannot read). */
struct dl_phdr_info;
int stkr__unwind_src_loaded(const struct dl_phdr_info *info, stkr__uw_src *src);

/* The .eh_frame (and .eh_frame_hdr address) of an ELF64 little-endian
 * x86_64/aarch64 file image f[0..n) (8-aligned), through its section
 * headers; src->eh_frame points into f. @return 0, -EINVAL (not such an
 * ELF file, or headers out of bounds), -ENOENT (no .eh_frame). */
int stkr__unwind_src_elf(const uint8_t *f, size_t n, stkr__uw_src *src);

/* Read a whole file (at most max_bytes) into a malloc'd buffer.
 * @return 0 and *buf (caller frees), or -errno, -EFBIG. */
int stkr__unwind_file_read(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);

/* Build the table of an ELF file's .eh_frame (section headers), e.g. to
 * check an image without loading it. Reads the whole file (bounded by
 * max_bytes). @return as stkr__unwind_table_build, or -errno of open/read. */
int stkr__unwind_table_from_file(const char *path, size_t max_bytes,
                                 stkr__uw_table **out, stkr__uw_stats *stats);

/* Free a table (NULL is fine), or drop one share of it (t->shares). */
void stkr__unwind_table_free(stkr__uw_table *t);
/* One more set holds t: @return t. */
static inline stkr__uw_table *stkr__unwind_table_share(stkr__uw_table *t) {
  t->shares++;
  return t;
}

/* Loads of images announced (stkr_images_changed, called by the hook
 * library's dlopen before the load) that the published set may not cover
 * yet. `hinted` counts announcements (any thread, release); `covered` is
 * the count the flush worker last saw covered (acquire, then stored with
 * release when its watch of the loader ended: the new images were listed
 * and their tables built, or nothing changed for a second). While the two
 * differ, the walk does not leave a pc that no table covers by its
 * frame-pointer record: in a library loaded a moment ago and built without
 * frame pointers, fp still points at an older frame, whose record would
 * skip the library's callers silently (a wrong stack that looks whole:
 * `d_probe < __libc_start_call_main`, main and d_call missing). It stops
 * there instead, a short stack as any walk that cannot go on. */
extern _Atomic uint64_t stkr__uw_loads_hinted, stkr__uw_loads_covered;

/* The row for runtime address pc, or STKR__UW_FALLBACK when pc lies in
 * no row. Hot path: a binary search, no allocation. */
uint32_t stkr__unwind_table_find(const stkr__uw_table *t, uintptr_t pc);

/* ---- the set of every loaded image's table -------------------------------
 * Immutable once built: an array of tables sorted by lo, with disjoint
 * ranges. Published through one atomic pointer (stkr__uw_slot). */
#define STKR__UW_SIGTRAMP_MAX 4
typedef struct stkr__uw_set {
  uint64_t gen;            /* unique per built set (stkr__uw_cache checks it) */
  uint32_t n;
  stkr__uw_table **tables; /* n, ascending lo, owned */
  stkr__uw_stats total;    /* sums over the tables */
  uint32_t images_without_cfi;
  /* aarch64: signal return trampolines that have no CFI (the kernel's
   * vdso __kernel_rt_sigreturn has none since Linux 5.10; other unwinders
   * recognise its two instructions), by the address a handler returns to.
   * The walk crosses them through the kernel's rt_sigframe as it does a
   * STKR__UW_SIGNAL row. Found in the vdso by the builder, or added with
   * stkr__unwind_set_add_sigtramp before the set is published. */
  uint32_t n_sigtramp;
  uintptr_t sigtramp[STKR__UW_SIGTRAMP_MAX];
} stkr__uw_set;

/* Build tables for every image loaded now (dl_iterate_phdr: each image's
 * PT_GNU_EH_FRAME and its executable PT_LOADs; on aarch64 also the vdso's
 * signal trampoline, stkr__uw_set.sigtramp). An image whose table fails
 * is left out (the walk uses FP there) and counted in *failed (may be NULL).
 * @return 0 and *out, or -ENOMEM. Worker only: may allocate, and calls
 * dl_iterate_phdr (which takes the loader's lock). */
int stkr__unwind_set_build_loaded(stkr__uw_set **out, unsigned *failed);

/* Where stkr__unwind_set_build_loaded_with gets each image's table: the
 * contract of stkr__unwind_table_build (0 and *out, or -errno; *stats
 * filled), given the image's loader entry as well (for its build-id). A
 * cache loads a stored table here instead of building one. */
typedef int (*stkr__uw_table_fn)(void *arg, const struct dl_phdr_info *info,
                                 const stkr__uw_src *src, stkr__uw_table **out,
                                 stkr__uw_stats *stats);
/* stkr__unwind_set_build_loaded with fn(arg, ...) making each table
 * (fn NULL: stkr__unwind_table_build). */
int stkr__unwind_set_build_loaded_with(stkr__uw_table_fn fn, void *arg,
                                       stkr__uw_set **out, unsigned *failed);

/* The address of the first aarch64 signal return sequence ("mov x8, #139"
 * (__NR_rt_sigreturn); "svc #0", 4-aligned) in code[0..len), which is at
 * runtime address addr; 0 if none. Pure: reads only code[0..len). */
uintptr_t stkr__unwind_find_sigtramp(const uint8_t *code, size_t len, uintptr_t addr);

/* Mark addr as a signal return trampoline without CFI (a sa_restorer the
 * program passed with SA_RESTORER, qemu-user's own page): see
 * stkr__uw_set.sigtramp. Only before the set is published (it is
 * immutable after). @return 0 (also when already there), -EINVAL (s NULL
 * or addr 0), -ENOSPC (STKR__UW_SIGTRAMP_MAX already). */
int stkr__unwind_set_add_sigtramp(stkr__uw_set *s, uintptr_t addr);

/* Free a set and its tables (NULL is fine). Only after the set was
 * unpublished and the grace period passed: see stkr__uw_slot. */
void stkr__unwind_set_free(stkr__uw_set *s);

/* The table covering pc, or NULL. Hot path: a binary search. */
const stkr__uw_table *stkr__unwind_set_find(const stkr__uw_set *s,
                                            uintptr_t pc);

/* ---- publication (RCU-style) ----------------------------------------------
 * One pointer that producers read and the worker swaps:
 *   worker:   old = stkr__unwind_publish(&slot, new_set);
 *             ... wait until every producer that may have loaded `old` has
 *             left its event (the recorder's in-flight event tracking) ...
 *             stkr__unwind_set_free(old);
 *   producer: (inside its event, i.e. while counted in flight)
 *             const stkr__uw_set *s = stkr__unwind_set_current(&slot);
 *             stkr__unwind_walk(s, ...);   (s is not used after the event)
 * The rule: a set is freed only after every producer has left the event in
 * which it might have loaded it. */
typedef struct stkr__uw_slot {
  /* Written by the worker (stkr__unwind_publish, release); read by every
   * producer (stkr__unwind_set_current, acquire): the acquire pairs with the
   * release so a producer sees the set's contents fully built. */
  stkr__uw_set *_Atomic cur;
} stkr__uw_slot;

/* Swap in `next` (may be NULL: walks use FP only). @return the previous
 * set, which the caller frees after the grace period. Worker only (one
 * publisher at a time). */
stkr__uw_set *stkr__unwind_publish(stkr__uw_slot *slot, stkr__uw_set *next);

/* The published set, or NULL. Any thread, async-signal-safe. */
const stkr__uw_set *stkr__unwind_set_current(stkr__uw_slot *slot);

/* ---- the hybrid walk ------------------------------------------------------ */
typedef struct stkr__uw_regs {
  uintptr_t pc; /* where the first frame is (its state is exactly sp/fp/lr) */
  uintptr_t sp;
  uintptr_t fp; /* rbp / x29 */
  uintptr_t lr; /* aarch64 x30 (ignored on x86_64) */
} stkr__uw_regs;

/* A per-thread cache of rows by return address (what makes unw_backtrace
 * fast too): a direct-mapped array the walk fills, valid for one set (by
 * its gen; emptied when another set is seen). ~23 KiB; owned by one
 * thread (the recorder's per-thread state), never shared. Zero-initialized
 * is empty. Layout private to walk.c. */
#define STKR__UW_CACHE_SLOTS 512
#define STKR__UW_MEMO_MAX 128
typedef struct stkr__uw_cache {
  uint64_t gen;                          /* the set's gen the entries belong to */
  struct {                               /* slot: 32 bytes, two to a cache line */
    uintptr_t key;                       /* a return address; bit 63: a "slow" entry, bit 62: a
                                            first frame's pc (row at pc itself); 0: empty */
    uint32_t row;                        /* the row at key - 1 (at key for a first frame's) */
    uint16_t cfa_off, ra_sp, fp_sp;      /* fast entries: CFA - sp, slots - sp (fp_sp 0xFFFF: fp stays) */
    uint16_t n_cfa_off, n_ra_sp, n_fp_sp; /* `next`'s fast entry, copied (see next) */
    uintptr_t next;                      /* fast entries: the return address found in this frame
                                            last time (its caller's), if that one is fast too:
                                            a prediction, checked against the stack (walk.c) */
  } e[STKR__UW_CACHE_SLOTS];
  /* The last walk's SP-based prefix, relative to its first sp: a walk from
   * the same first pc checks each saved return address against it with
   * independent loads (not a chain), see walk.c. */
  uintptr_t memo_pc0;                    /* 0: no memo */
  uint32_t memo_n, memo_max_off;
  uint32_t memo_misses;                  /* walks without a usable memo: one in 64 records a new one */
  uint32_t memo_from;                    /* the fold start (stkr__uw_fold.from) of memo[].h1/h2 */
  uint32_t memo_stop;                    /* the memo's walk ended at a STOP row after its last pc */
  struct {                               /* transition i: frame i -> frame i + 1 (48 bytes) */
    uint32_t ra_off;                     /* frame i+1's return address slot - first sp */
    uint32_t sp_off;                     /* frame i+1's sp - first sp */
    uint32_t fp_src;                     /* where frame i+1's fp was loaded - first sp; ~0: the first fp */
    uint32_t chk_src;                    /* FP-based: where the fp it used came from; ~1: none */
    uintptr_t chk_val;                   /* ... and that fp - first sp */
    uintptr_t pc;                        /* frame i+1's pc */
    uint64_t h1, h2;                     /* the folds of pcs[memo_from .. i] (frames 0..i) */
  } memo[STKR__UW_MEMO_MAX];
} stkr__uw_cache;

/* The stack key's two hashes folded during the walk, as the recorder's
 * frame-pointer walk folds them in its loop (common/stkr_hash.h:
 * stkr_stack_hash_step, stkr_stack_key2_step): a pass over the PCs after
 * the walk is a chain of multiplies (~1.2 ns a PC) that the walk's loads
 * would otherwise hide, and the memo keeps them too. */
typedef struct stkr__uw_fold {
  unsigned from; /* in: fold pcs[from .. n) (the recorder drops its own frames) */
  uint64_t h1;   /* out: stkr_stack_hash_step over them from STKR_STACK_HASH_SEED (not finalized) */
  uint64_t h2;   /* out: stkr_stack_key2_step over them from STKR_KEY2_SEED */
  bool cut;      /* out (set to true only): the walk stopped before the
                    stack's end (a frame in an image loaded a moment ago) */
} stkr__uw_fold;

/* Walk the stack from regs: pcs[0] = regs->pc, then each caller's return
 * address. Per frame, the row of the table (in `set`, may be NULL) that
 * covers the pc (looked up at pc - 1 for return addresses), else the
 * frame-pointer record. Every load lies in [lo, hi) and is 8-aligned; the
 * stack pointer strictly grows, so the walk ends. Stops at max, an
 * undefined return address (outermost frame), or the first check that
 * fails. *fallbacks (may be NULL) gets how many frames used FP.
 * @return the number of PCs stored (0..max).
 * Hot path: no allocation, no lock, no system call; async-signal-safe. */
unsigned stkr__unwind_walk(const stkr__uw_set *set, const stkr__uw_regs *regs,
                           uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                           unsigned max, unsigned *fallbacks);

/* The same walk with this thread's row cache (cache may be NULL). */
unsigned stkr__unwind_walk_cached(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_regs *regs, uintptr_t lo,
                                  uintptr_t hi, uint64_t *pcs, unsigned max,
                                  unsigned *fallbacks);

/* The same walk, folding the stack key's hashes of pcs[fold->from .. n)
 * into fold->h1, fold->h2 (see stkr__uw_fold). */
unsigned stkr__unwind_walk_folded(const stkr__uw_set *set, stkr__uw_cache *cache,
                                  const stkr__uw_regs *regs, uintptr_t lo,
                                  uintptr_t hi, uint64_t *pcs, unsigned max,
                                  stkr__uw_fold *fold, unsigned *fallbacks);

#ifdef __cplusplus
}
#endif
#endif /* STKR_UNWIND_H */
