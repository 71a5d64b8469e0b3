/*
 * symcache_walk.h: the symbol cache build's walk, shared by its two files
 * (internal to //symbolize): symcache_walk.c reads one CU (its DIE tree
 * and line table) into arrays and answers an address from them;
 * symcache_stream.c drives it over the whole file, each CU answered as
 * soon as it is read (streamed, in threads: two read, one answers)
 * or the whole file first.
 *
 * Thread-safety: a walk belongs to one thread. When streamed in threads,
 * each reader has a walk of its own (its ids are its own: see wk_local)
 * and hands each CU's arrays over (symcache_stream.c).
 */
#ifndef STKR_SYMBOLIZE_SYMCACHE_WALK_H
#define STKR_SYMBOLIZE_SYMCACHE_WALK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "symbolize/symbolize_dwarf.h"

#define NONE UINT32_MAX
#define MAX_SCOPE_DEPTH 64 /* inline_chain / stkr__dwscope: levels followed */
#define MAX_BOUND_DEPTH 64 /* the boundary walk's limit */
#define MAX_INDEX_DEPTH 32 /* the subprogram index's (collect) limit */
#define NEAR_TRIES 8       /* stkr__dw_cu_of / find_subprogram */
#define WK_ABBREVS 512     /* abbreviation codes remembered per CU */

typedef struct wk_range {
  Dwarf_Addr lo, hi;
} wk_range;

/* A subprogram (the root of its tree) or a scope inside one. */
typedef struct wk_node {
  uint32_t first_child, next_sibling; /* NONE: none */
  uint32_t first_range, n_ranges;     /* in walk.ranges */
  uint32_t name;                      /* interned; NONE: none (or a block) */
  uint32_t call_file;                 /* interned, joined; NONE: unknown */
  uint32_t call_line, call_col;
  bool inlined;
} wk_node;

/* One range of a subprogram; the layout of symbolize_dwarf.c's stkr__dwfn
 * (sorted with the same comparison, so ties come out in the same order). */
typedef struct wk_sub {
  Dwarf_Addr lo, hi;
  uint64_t node;
} wk_sub;

/* One line-table row, with its file joined and interned (24 bytes: there
 * is one per row of every CU, millions in a large dSYM). */
typedef struct wk_row {
  uint64_t addr;
  uint32_t file_once, file_twice; /* joined to comp_dir once / twice */
  uint32_t line;
  uint32_t col : 31; /* as kept by the lookup: > 0, else 0 */
  uint32_t end_sequence : 1;
} wk_row;

typedef struct wk_cu {
  size_t sub0, n_subs, sub_cur; /* sub_cur: subs starting at or below a */
  size_t row0, n_rows, row_cur;
  bool rows_sorted;
} wk_cu;

/* The layout of symbolize_dwarf.c's stkr__dwcurange (see wk_sub). */
typedef struct wk_curange {
  Dwarf_Addr lo, hi;
  uint64_t cu;
} wk_curange;

/* What a CU's walk gathers (streamed, in two threads, handed from the
 * reader to the answering thread). */
typedef struct wk_arrays {
  wk_node *nodes;
  size_t n_nodes, cap_nodes;
  wk_range *ranges;
  size_t n_ranges, cap_ranges;
  wk_sub *subs;
  size_t n_subs, cap_subs;
  wk_row *rows;
  size_t n_rows, cap_rows;
  stkr__addrs bounds; /* where an answer may change */
} wk_arrays;

typedef struct walk {
  const stkr__symwalk_ops *ops;
  stkr__dwnames nb;  /* demangling and path buffers (no memo) */
  stkr_map sym_ids;  /* linkage or symbol name (by address) -> id */
  stkr_map name_ids; /* DW_AT_name (by address) -> id */
  stkr_map file_ids; /* this CU's file name (by address) -> ids (once<<32 | twice) */
  stkr_map origin_ids; /* referred DIE (offset) -> name id */
  Dwarf_Die cudie;
  /* This CU's DIE bytes end (NULL: unknown, then every sibling is
   * libdw's), its sizes (die_end). */
  const unsigned char *cu_end;
  Dwarf_Off cu_off; /* its offset in .debug_info */
  uint8_t addr_size, off_size;
  uint16_t version;
  bool big_endian;
  Dwarf_Abbrev *abbrevs[WK_ABBREVS]; /* by code, this CU's (die_tag) */
  Dwarf_Files *files; /* this CU's, for call_file; NULL: none */
  bool files_read;
  wk_arrays a; /* whole file: all CUs'; streamed: this CU's */
  wk_cu *cus;
  size_t n_cus, cap_cus;
  wk_curange *curanges;
  size_t n_curanges, cap_curanges, cur_cursor;
  const stkr__symspan *syms;
  size_t n_syms, sym_cur;
  uint64_t lo, hi; /* __TEXT */
  /* Streamed (see walk_streamed): the bounds known before any DIE is read
   * (symbols, CU ranges, lo), sorted, up_i answered; those of walked CUs
   * beyond their batch (carry); each CU's batch end (by ordinal); the
   * first address not yet answered. */
  bool stream, restart;
  stkr__addrs up, carry, batch;
  size_t up_i;
  uint64_t carry_min, frontier, *batch_end;
  /* The answering, carried from one batch to the next. */
  stkr__symframe fr[2][STKR__SYM_MAX_INLINE];
  size_t prev_n;
  int fcur, rc;
  bool nomem;
  /* Threads (symcache_stream.c): a reader's ids are ordinals of
   * `local` (its strings), translated to ops->intern's by the answering
   * thread (tr: local id -> id, NONE: not yet). dm: held around
   * demangling (its Swift runtime lookup and counters are global). */
  const struct wk_local *local;
  uint32_t *tr;
  size_t n_tr;
  pthread_mutex_t *dm;
  bool cxx_ready; /* a C++ name was demangled under dm (sym_id) */
  struct wk_pipe *pipe; /* a reader's: where each CU read goes */
  size_t reader_id;     /* which reader (CUs are dealt out in turn) */
  pthread_mutex_t *em;  /* readers: held around dwarf_begin_elf/_end */
  size_t n_all_cus;     /* streamed: CUs seen by cu_ranges */
  bool two_threads;     /* streamed: in two threads */
} walk;

/* Room for one more element in arr (n used of cap); false (and nomem)
 * when out of memory. */
#define MORE(w, arr, n, cap) \
  stkr__wk_grown(w, stkr__grow_big((void **)&(arr), &(cap), (n) + 1, sizeof *(arr)))
bool stkr__wk_grown(walk *w, int rc);

/* Read w->cudie's CU into w's arrays (a wk_cu appended to w->cus). */
void stkr__wk_cu(walk *w);
/* The frames of a (addresses in increasing order), as
 * stkr__symfile_lookup gives them. @return how many. */
size_t stkr__wk_frames(walk *w, uint64_t a, stkr__symframe *out);
/* Sort n addresses. */
void stkr__wk_sort(uint64_t *v, size_t n);
int stkr__wk_cmp_curange(const void *a, const void *b);
/* Free everything w holds (not w). */
void stkr__wk_free(walk *w);

/* The reader's strings (two threads): each interned string copied once
 * per call, numbered; table[id >> 16][id & 0xffff] its copy, hash[...]
 * its stkr_hash_bytes (for ops->intern_hashed). Written by the reader
 * only; an id reaches the answering thread with the CU that uses it
 * (under the hand-over's lock), after its entries were written. */
typedef struct wk_local {
  const char **table[4096];
  uint64_t *hash[4096];
  uint32_t n;
  char *blk;
  size_t blk_used, blk_cap;
  char **blocks;
  size_t n_blocks, cap_blocks;
} wk_local;

#endif /* STKR_SYMBOLIZE_SYMCACHE_WALK_H */
