/*
 * symcache_walk.c: the answers of a whole Mach-O slice, interval by
 * interval, in one pass over its DWARF (stkr__dw_walk, for the symbol
 * cache build; see symbolize_dwarf.h).
 *
 * Why: the cache stores, for every interval between two addresses where an
 * answer may change, the frames stkr__symfile_lookup gives there. Asking
 * that per-address path once per interval made libdw walk every DIE tree
 * twice (boundaries, then scopes), re-find the CU, subprogram and line row
 * each time and take its per-call locks: 51-62 MB of DWARF per second.
 * Here each CU is read once: its DIE tree (one dwarf_child/siblingof walk
 * that gathers the boundaries, the CU's subprogram index and each
 * subprogram's scope tree of inlined calls and blocks, with names demangled
 * and interned once per DIE) and its line table (dwarf_getsrclines once,
 * file names joined and interned once per file). Then the intervals are
 * answered in address order from memory, with cursors that only move
 * forward.
 *
 * Same answers: every rule below repeats the per-address path's
 * (symbolize_dwarf.c, symbolize_macho.c's lookup_dwarf): the CU is the
 * nearest of the sorted CU ranges that holds the address (8 tries), the
 * subprogram the nearest of the CU's sorted subprogram ranges (8 tries),
 * the line row libdw's dwarf_getsrc_die would return (the last row at or
 * below the address, unless it ends a sequence), the inline chain the first
 * scope child in DIE order holding the address at each level (at most 64
 * levels, the outermost STKR__SYM_MAX_INLINE - 1 inlined calls), the same
 * depth limits for the boundary walk (64) and the subprogram index (32),
 * the innermost file joined to comp_dir twice as the lookup does (a no-op
 * unless comp_dir is relative), the symbol table where DWARF has no
 * function. tests/test-symcache.c compares a built cache with the
 * per-address path at every byte address of the fixtures.
 *
 * Only compiled where there is no dyld (like the other Linux backends).
 */
#if !defined(__APPLE__)

#include <dwarf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "symbolize/symbolize_dwarf.h"

#define NONE UINT32_MAX
#define MAX_SCOPE_DEPTH 64 /* inline_chain / stkr__dwscope: levels followed */
#define MAX_BOUND_DEPTH 64 /* the boundary walk's limit */
#define MAX_INDEX_DEPTH 32 /* the subprogram index's (collect) limit */
#define NEAR_TRIES 8       /* stkr__dw_cu_of / find_subprogram */

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

typedef struct walk {
  const stkr__symwalk_ops *ops;
  stkr__dwnames nb;  /* demangling and path buffers (no memo) */
  stkr_map sym_ids;  /* linkage or symbol name (by address) -> id */
  stkr_map name_ids; /* DW_AT_name (by address) -> id */
  stkr_map file_ids; /* this CU's file name (by address) -> ids (once<<32 | twice) */
  stkr_map origin_ids; /* referred DIE (offset) -> name id */
  Dwarf_Die cudie;
  Dwarf_Files *files; /* this CU's, for call_file; NULL: none */
  bool files_read;
  wk_node *nodes;
  size_t n_nodes, cap_nodes;
  wk_range *ranges;
  size_t n_ranges, cap_ranges;
  wk_sub *subs;
  size_t n_subs, cap_subs;
  wk_row *rows;
  size_t n_rows, cap_rows;
  wk_cu *cus;
  size_t n_cus, cap_cus;
  wk_curange *curanges;
  size_t n_curanges, cap_curanges, cur_cursor;
  stkr__addrs bounds;
  const stkr__symspan *syms;
  size_t n_syms, sym_cur;
  bool nomem;
} walk;

/* Room for one more element in arr (n used of cap); false (and nomem)
 * when out of memory. */
static bool grown(walk *w, int rc) {
  if (rc != 0) w->nomem = true;
  return rc == 0;
}
#define MORE(w, arr, n, cap) \
  grown(w, stkr_grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr)))

static uint32_t intern(walk *w, const char *s) {
  if (!s) return NONE;
  uint32_t id = w->ops->intern(w->ops->arg, s);
  if (id == NONE) w->nomem = true;
  return id;
}

/* A linkage or symbol name, demangled (stkr__dw_sym_name), interned once
 * per string of the mapped file. */
static uint32_t sym_id(walk *w, const char *s) {
  uint64_t *v;
  int r = stkr_map_add(&w->sym_ids, (uint64_t)(uintptr_t)s, &v);
  if (r < 0) {
    w->nomem = true;
    return NONE;
  }
  if (r == 1) *v = intern(w, stkr__dw_sym_name(&w->nb, s, 0));
  return (uint32_t)*v;
}

static uint32_t name_id(walk *w, const char *s) {
  uint64_t *v;
  int r;
  if (!s) return NONE;
  if ((r = stkr_map_add(&w->name_ids, (uint64_t)(uintptr_t)s, &v)) < 0) {
    w->nomem = true;
    return NONE;
  }
  if (r == 1) *v = intern(w, s);
  return (uint32_t)*v;
}

static uint32_t die_name_of(walk *w, Dwarf_Die *die);

/* A DIE's function name as symbolize_dwarf.c's die_name gives it. */
static uint32_t die_name_id(walk *w, Dwarf_Die *die) {
  Dwarf_Attribute at;
  Dwarf_Die target;
  uint64_t *v = NULL;
  /* A DIE with no name of its own (an inlined call, a concrete copy of an
   * inlined function, a C++ method defined outside its class) is named by
   * following DW_AT_abstract_origin, else DW_AT_specification: every DIE
   * referring to the same DIE that way gets the same name
   * (dwarf_attr_integrate takes the same steps from there), so it is
   * looked up once per referred DIE (by its offset: dsymutil's references
   * often cross CUs, DW_FORM_ref_addr). */
  if (!dwarf_hasattr(die, DW_AT_linkage_name) &&
      !dwarf_hasattr(die, DW_AT_MIPS_linkage_name) &&
      !dwarf_hasattr(die, DW_AT_name) &&
      (dwarf_attr(die, DW_AT_abstract_origin, &at) ||
       dwarf_attr(die, DW_AT_specification, &at)) &&
      dwarf_formref_die(&at, &target)) {
    int r = stkr_map_add(&w->origin_ids, dwarf_dieoffset(&target), &v);
    if (r < 0) {
      w->nomem = true;
      return NONE;
    }
    if (r == 0) return (uint32_t)*v;
  }
  uint32_t id = die_name_of(w, die);
  if (v) *v = id;
  return id;
}

static uint32_t die_name_of(walk *w, Dwarf_Die *die) {
  Dwarf_Attribute at;
  const char *ln =
      dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
  if (!ln)
    ln = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
  return ln ? sym_id(w, ln) : name_id(w, dwarf_diename(die));
}

/* A file name of this CU joined to comp_dir once (high half) and twice. */
static uint64_t file_ids(walk *w, const char *name) {
  uint64_t *v;
  int r;
  if (!name) return ((uint64_t)NONE << 32) | NONE;
  if ((r = stkr_map_add(&w->file_ids, (uint64_t)(uintptr_t)name, &v)) < 0) {
    w->nomem = true;
    return ((uint64_t)NONE << 32) | NONE;
  }
  if (r == 1) {
    /* as_compiled (ELF): libdw's name as the ELF backend shows it. */
    const char *once = w->ops->as_compiled
                           ? name
                           : stkr__dw_full_path(&w->nb, &w->cudie, name, 0);
    const char *twice = w->ops->as_compiled
                            ? name
                            : stkr__dw_full_path(&w->nb, &w->cudie, once, 1);
    *v = ((uint64_t)intern(w, once) << 32) | intern(w, twice);
  }
  return *v;
}

/* Append die's ranges (non-empty ones, as dwarf_haspc sees them) to
 * w->ranges. @return how many. */
static uint32_t read_ranges(walk *w, Dwarf_Die *die) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  uint32_t n = 0;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    if (!MORE(w, w->ranges, w->n_ranges, w->cap_ranges)) break;
    w->ranges[w->n_ranges++] = (wk_range){lo, hi};
    n++;
  }
  return n;
}

/* A node for die (its ranges: nr at r0). Names only where a frame shows
 * one: subprograms and inlined calls, not blocks. */
static uint32_t add_node(walk *w, Dwarf_Die *die, int tag, uint32_t r0,
                         uint32_t nr) {
  bool inlined = tag == DW_TAG_inlined_subroutine;
  Dwarf_Attribute at;
  Dwarf_Word v;
  if (!MORE(w, w->nodes, w->n_nodes, w->cap_nodes)) return NONE;
  wk_node nd = {NONE, NONE, r0, nr, NONE, NONE, 0, 0, inlined};
  if (inlined) {
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &at), &v) == 0) {
      if (!w->files_read) {
        size_t nfiles;
        w->files_read = true;
        if (dwarf_getsrcfiles(&w->cudie, &w->files, &nfiles) != 0) w->files = NULL;
      }
      if (w->files)
        nd.call_file = (uint32_t)(file_ids(w, dwarf_filesrc(w->files, v, NULL,
                                                            NULL)) >> 32);
    }
    /* As the DIE walk: (int)v, kept when > 0. */
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &at), &v) == 0 &&
        (int)v > 0)
      nd.call_line = (uint32_t)v;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &at), &v) == 0 &&
        (int)v > 0)
      nd.call_col = (uint32_t)v;
  }
  if (inlined || tag == DW_TAG_subprogram) nd.name = die_name_id(w, die);
  w->nodes[w->n_nodes] = nd;
  return (uint32_t)w->n_nodes++;
}

static bool is_code(int tag) {
  return tag == DW_TAG_subprogram || stkr__dw_is_scope(tag);
}

/* The children of `parent`, for up to three walks at once, each as the
 * per-address path does it alone: boundaries (db: depth, -1 off), the
 * CU's subprogram index (dc: depth, -1 off) and the scope tree of a
 * subprogram (sp: the parent node, NONE off; ds: its depth). */
static void walk_children(walk *w, Dwarf_Die *parent, int db, int dc,
                          uint32_t sp, int ds) {
  Dwarf_Die c;
  uint32_t last = NONE;
  if (dwarf_child(parent, &c) != 0) return;
  do {
    int tag = dwarf_tag(&c);
    bool holds = stkr__dw_holds_functions(tag);
    bool bound = db >= 0 && is_code(tag);
    bool sub = dc >= 0 && tag == DW_TAG_subprogram;
    bool scope = sp != NONE && stkr__dw_is_scope(tag);
    int cdb = db >= 0 && (bound || holds) && db + 1 <= MAX_BOUND_DEPTH ? db + 1 : -1;
    int cdc = dc >= 0 && holds && dc + 1 <= MAX_INDEX_DEPTH ? dc + 1 : -1;
    uint32_t csp = NONE, r0 = (uint32_t)w->n_ranges, nr = 0;
    int cds = 0;
    if (bound || sub || scope) nr = read_ranges(w, &c);
    if (bound)
      for (uint32_t k = 0; k < nr; k++) {
        stkr__addrs_add(&w->bounds, w->ranges[r0 + k].lo);
        stkr__addrs_add(&w->bounds, w->ranges[r0 + k].hi);
      }
    /* A scope without code never holds an address: neither it nor what is
     * inside it can be on a chain, so it gets no node. */
    if (nr && sub) {
      uint32_t node = add_node(w, &c, tag, r0, nr);
      if (node == NONE) return;
      for (uint32_t k = 0; k < nr; k++) {
        if (!MORE(w, w->subs, w->n_subs, w->cap_subs)) return;
        w->subs[w->n_subs++] =
            (wk_sub){w->ranges[r0 + k].lo, w->ranges[r0 + k].hi, node};
      }
      csp = node;
    } else if (nr && scope) {
      uint32_t node = add_node(w, &c, tag, r0, nr);
      if (node == NONE) return;
      if (last == NONE) w->nodes[sp].first_child = node;
      else w->nodes[last].next_sibling = node;
      last = node;
      if (ds + 1 < MAX_SCOPE_DEPTH) {
        csp = node;
        cds = ds + 1;
      }
    } else {
      w->n_ranges = r0; /* only needed for the boundaries */
    }
    if (w->nomem) return;
    if (cdb >= 0 || cdc >= 0 || csp != NONE) walk_children(w, &c, cdb, cdc, csp, cds);
  } while (dwarf_siblingof(&c, &c) == 0);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sort n addresses: LSD radix, 16 bits per pass, passes whose digit is
 * the same in every address skipped (addresses of one __TEXT share their
 * high bits). qsort took a tenth of a cache build. Falls back to qsort
 * when the scratch copy cannot be allocated. */
static void sort_u64(uint64_t *v, size_t n) {
  uint64_t *tmp = n > 1 ? malloc(n * sizeof *tmp) : NULL, *src = v, *dst = tmp;
  size_t *count = tmp ? malloc(65536 * sizeof *count) : NULL;
  uint64_t all_or = 0, all_and = ~0ull;
  if (!count) {
    free(tmp);
    if (n > 1) qsort(v, n, sizeof *v, cmp_u64);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    all_or |= v[i];
    all_and &= v[i];
  }
  for (unsigned shift = 0; shift < 64; shift += 16) {
    if ((((all_or ^ all_and) >> shift) & 0xffff) == 0) continue;
    memset(count, 0, 65536 * sizeof *count);
    for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & 0xffff]++;
    for (size_t d = 0, sum = 0; d < 65536; d++) {
      size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 0xffff]++] = src[i];
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != v) memcpy(v, src, n * sizeof *v);
  free(tmp);
  free(count);
}

static int cmp_sub(const void *a, const void *b) {
  const wk_sub *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

static int cmp_curange(const void *a, const void *b) {
  const wk_curange *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void read_lines(walk *w, wk_cu *cu) {
  Dwarf_Lines *lines;
  size_t nl;
  const char *last_name = NULL;
  uint64_t last_ids = 0;
  bool have_last = false;
  cu->row0 = w->n_rows;
  cu->rows_sorted = true;
  if (dwarf_getsrclines(&w->cudie, &lines, &nl) != 0) return;
  for (size_t i = 0; i < nl && !w->nomem; i++) {
    Dwarf_Line *l = dwarf_onesrcline(lines, i);
    Dwarf_Addr a;
    bool end = false;
    int line = 0, col = 0;
    if (!l || dwarf_lineaddr(l, &a) != 0) continue; /* never, in libdw */
    stkr__addrs_add(&w->bounds, a);
    if (!MORE(w, w->rows, w->n_rows, w->cap_rows)) return;
    (void)dwarf_lineendsequence(l, &end);
    (void)dwarf_lineno(l, &line);
    (void)dwarf_linecol(l, &col);
    /* Rows in a row mostly name the same file: the last one's ids. */
    const char *name = dwarf_linesrc(l, NULL, NULL);
    if (name != last_name || !have_last) {
      last_ids = file_ids(w, name);
      last_name = name;
      have_last = true;
    }
    uint64_t ids = last_ids;
    if (cu->n_rows && w->rows[w->n_rows - 1].addr > a) cu->rows_sorted = false;
    w->rows[w->n_rows++] = (wk_row){a, (uint32_t)(ids >> 32), (uint32_t)ids,
                                    line > 0 ? (uint32_t)line : 0,
                                    col > 0 ? (uint32_t)col : 0, end};
    _Static_assert(sizeof(wk_row) == 24, "wk_row: 24 bytes");
    cu->n_rows++;
  }
}

static void walk_cu(walk *w) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  if (!MORE(w, w->cus, w->n_cus, w->cap_cus)) return;
  wk_cu *cu = &w->cus[w->n_cus];
  memset(cu, 0, sizeof *cu);
  while ((off = dwarf_ranges(&w->cudie, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    stkr__addrs_add(&w->bounds, lo);
    stkr__addrs_add(&w->bounds, hi);
    if (!MORE(w, w->curanges, w->n_curanges, w->cap_curanges)) return;
    w->curanges[w->n_curanges++] = (wk_curange){lo, hi, w->n_cus};
  }
  stkr_map_clear(&w->file_ids); /* names are per CU: comp_dir is */
  w->files = NULL;
  w->files_read = false;
  cu->sub0 = w->n_subs;
  walk_children(w, &w->cudie, 0, 0, NONE, 0);
  cu = &w->cus[w->n_cus]; /* (not moved: cus only grows here) */
  cu->n_subs = w->n_subs - cu->sub0;
  if (cu->n_subs > 1)
    qsort(w->subs + cu->sub0, cu->n_subs, sizeof *w->subs, cmp_sub);
  read_lines(w, cu);
  w->n_cus++;
}

/* The nearest range at or below a that holds it, within NEAR_TRIES, as the
 * per-address searches do; *cur counts the ranges starting at or below a
 * (addresses come in increasing order). @return its index, or NONE. */
#define NEAREST(v, n, cur, a, out)                                     \
  do {                                                                 \
    while ((cur) < (n) && (v)[cur].lo <= (a)) (cur)++;                 \
    (out) = NONE;                                                      \
    for (size_t k_ = (cur), t_ = 0; k_ > 0 && t_ < NEAR_TRIES; k_--, t_++) \
      if ((a) < (v)[k_ - 1].hi) {                                      \
        (out) = (uint32_t)(k_ - 1);                                    \
        break;                                                         \
      }                                                                \
  } while (0)

/* The row dwarf_getsrc_die returns for a, or NULL. */
static const wk_row *row_at(walk *w, wk_cu *cu, uint64_t a) {
  const wk_row *r = w->rows + cu->row0;
  size_t l;
  if (!cu->n_rows) return NULL;
  if (cu->rows_sorted) {
    while (cu->row_cur < cu->n_rows && r[cu->row_cur].addr <= a) cu->row_cur++;
    l = cu->row_cur ? cu->row_cur - 1 : 0;
  } else { /* libdw's own search, as it is */
    size_t u = cu->n_rows - 1;
    l = 0;
    while (l < u) {
      size_t idx = u - (u - l) / 2;
      if (a < r[idx].addr) u = idx - 1;
      else l = idx;
    }
  }
  return !r[l].end_sequence && r[l].addr <= a ? &r[l] : NULL;
}

static bool node_holds(const walk *w, const wk_node *nd, uint64_t a) {
  for (uint32_t k = 0; k < nd->n_ranges; k++) {
    const wk_range *x = &w->ranges[nd->first_range + k];
    if (x->lo <= a && a < x->hi) return true;
  }
  return false;
}

/* The frames of a, as stkr__symfile_lookup gives them (lookup_dwarf, then
 * the symbol). @return how many. */
static size_t frames_at(walk *w, uint64_t a, stkr__symframe *out) {
  uint32_t cui, si, sym = NONE;
  /* The symbol holding a (sym_lookup's answer): its name is interned
   * only where a frame uses it. */
  while (w->sym_cur < w->n_syms && w->syms[w->sym_cur].lo <= a) w->sym_cur++;
  const char *sname = w->sym_cur && a < w->syms[w->sym_cur - 1].hi
                          ? w->syms[w->sym_cur - 1].name
                          : NULL;
  NEAREST(w->curanges, w->n_curanges, w->cur_cursor, a, cui);
  if (cui != NONE) {
    wk_cu *cu = &w->cus[w->curanges[cui].cu];
    const wk_row *row = row_at(w, cu, a);
    uint32_t line = row ? row->line : 0, col = row ? row->col : 0;
    NEAREST(w->subs + cu->sub0, cu->n_subs, cu->sub_cur, a, si);
    if (si != NONE) {
      const wk_node *root = &w->nodes[w->subs[cu->sub0 + si].node], *cur = root;
      const wk_node *chain[STKR__SYM_MAX_INLINE];
      uint32_t file = row ? row->file_twice : NONE;
      size_t nch = 0, n = 0;
      for (int depth = 0; depth < MAX_SCOPE_DEPTH; depth++) {
        uint32_t c = cur->first_child;
        while (c != NONE && !node_holds(w, &w->nodes[c], a))
          c = w->nodes[c].next_sibling;
        if (c == NONE) break;
        cur = &w->nodes[c];
        if (cur->inlined && nch < STKR__SYM_MAX_INLINE - 1) chain[nch++] = cur;
      }
      for (size_t k = nch; k-- > 0;) { /* innermost first */
        out[n++] = (stkr__symframe){chain[k]->name, file, line, col, true};
        file = chain[k]->call_file;
        line = chain[k]->call_line;
        col = chain[k]->call_col;
      }
      if (root->name == NONE && sname) sym = sym_id(w, sname);
      out[n++] = (stkr__symframe){root->name != NONE ? root->name : sym, file,
                                  line, col, false};
      return n;
    }
    if (sname) {
      out[0] = (stkr__symframe){sym_id(w, sname), row ? row->file_once : NONE,
                                line, col, false};
      return 1;
    }
  }
  if (!sname) return 0;
  out[0] = (stkr__symframe){sym_id(w, sname), NONE, 0, 0, false};
  return 1;
}

static void walk_free(walk *w) {
  stkr__dwnames_free(&w->nb);
  stkr_map_free(&w->sym_ids);
  stkr_map_free(&w->name_ids);
  stkr_map_free(&w->file_ids);
  stkr_map_free(&w->origin_ids);
  free(w->nodes);
  free(w->ranges);
  free(w->subs);
  free(w->rows);
  free(w->cus);
  free(w->curanges);
  free(w->bounds.v);
}

int stkr__dw_walk(Dwarf *dw, const stkr__symspan *syms, size_t n_syms,
                  uint64_t lo, uint64_t hi, const stkr__symwalk_ops *ops) {
  walk w;
  int rc = 0;
  memset(&w, 0, sizeof w);
  w.ops = ops;
  w.syms = syms;
  w.n_syms = n_syms;
  for (size_t i = 0; i < n_syms; i++) {
    stkr__addrs_add(&w.bounds, syms[i].lo);
    stkr__addrs_add(&w.bounds, syms[i].hi);
  }
  stkr__addrs_add(&w.bounds, lo);
  if (dw) {
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (!w.nomem &&
           dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
      if (dwarf_offdie(dw, off + hsize, &w.cudie)) walk_cu(&w);
      off = next;
    }
  }
  if (w.n_curanges > 1)
    qsort(w.curanges, w.n_curanges, sizeof *w.curanges, cmp_curange);
  if (w.nomem || w.bounds.nomem) {
    walk_free(&w);
    return -ENOMEM;
  }
  sort_u64(w.bounds.v, w.bounds.n);
  rc = ops->expect(ops->arg, w.bounds.n);
  stkr__symframe fr[2][STKR__SYM_MAX_INLINE];
  size_t prev_n = SIZE_MAX; /* none yet */
  for (size_t i = 0, cur = 0; i < w.bounds.n && rc == 0 && !w.nomem; i++) {
    uint64_t a = w.bounds.v[i];
    if (a < lo || (i > 0 && a == w.bounds.v[i - 1])) continue;
    if (a >= hi) break;
    size_t n = frames_at(&w, a, fr[cur]);
    /* About half the intervals answer as the one before (a line row
     * that repeats the line, a block boundary): the range before goes on. */
    if (n == prev_n && memcmp(fr[cur], fr[!cur], n * sizeof fr[0][0]) == 0)
      continue;
    if (!w.nomem) rc = ops->range(ops->arg, a, fr[cur], n);
    prev_n = n;
    cur = !cur;
  }
  if (w.nomem && rc == 0) rc = -ENOMEM;
  walk_free(&w);
  return rc;
}

#endif /* !__APPLE__ */
