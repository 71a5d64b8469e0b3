/*
 * symcache_walk.c: the answers of a Mach-O slice, interval by interval,
 * from one pass over each CU of its DWARF (for the symbol cache build's
 * stkr__dw_walk, driven by symcache_stream.c: this file reads one CU into
 * arrays and answers addresses from them).
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
 * forward (as each CU is read, or once the whole file is: symcache_stream.c).
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
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "symbolize/symcache_walk.h"
#include "symbolize/symbolize_dwarf.h"


bool stkr__wk_grown(walk *w, int rc) {
  if (rc != 0) w->nomem = true;
  return rc == 0;
}

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
  if (r == 1) {
    /* Demangling's global state (the demangler looked up on first use,
     * Swift's runtime and counters) is used under dm. A C++ name needs it
     * only the first time: then __cxa_demangle is looked up (under dm,
     * which orders that for this thread too) and is thread-safe. The two
     * readers waited on each other here (futex sleeps and wake-ups). */
    bool cxx = s[0] == '_' && s[1] == 'Z';
    bool lock = w->dm && !(cxx && w->cxx_ready);
    if (lock) pthread_mutex_lock(w->dm);
    *v = intern(w, stkr__dw_sym_name(&w->nb, s, 0));
    if (lock) pthread_mutex_unlock(w->dm);
    if (lock && cxx) w->cxx_ready = true;
  }
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

/* The ULEB128 at *p, before end; *p moves past it. @return false when it
 * runs to end (or past 64 bits). */
static bool read_uleb(const unsigned char **p, const unsigned char *end,
                      uint64_t *v) {
  uint64_t x = 0;
  for (unsigned shift = 0; end && *p + shift / 7 < end && shift < 64; shift += 7) {
    unsigned char b = (*p)[shift / 7];
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *p += shift / 7 + 1;
      *v = x;
      return true;
    }
  }
  return false;
}

/* The offset of the DIE a reference names, read from the attribute alone:
 * dwarf_formref_die finds the CU of a DW_FORM_ref_addr in a search tree
 * (a tenth of a reader's CPU on a 100 MB dSYM, where dsymutil's
 * references cross CUs). (Dwarf_Off)-1 for the forms not read here
 * (other files' references: dwz, type units) or an unknown CU. */
static Dwarf_Off ref_offset(const walk *w, Dwarf_Attribute *at) {
  const unsigned char *p = at->valp, *e = w->cu_end;
  Dwarf_Off off = 0, base = w->cu_off; /* (ref1-8, ref_udata: in the CU) */
  size_t n;
  switch (at->form) {
  case DW_FORM_ref1: n = 1; break;
  case DW_FORM_ref2: n = 2; break;
  case DW_FORM_ref4: n = 4; break;
  case DW_FORM_ref8: n = 8; break;
  case DW_FORM_ref_addr: /* in .debug_info */
    n = w->version == 2 ? w->addr_size : w->off_size;
    base = 0;
    break;
  case DW_FORM_ref_udata:
    return read_uleb(&p, e, &off) ? base + off : (Dwarf_Off)-1;
  default:
    return (Dwarf_Off)-1;
  }
  if (!e || (n != 1 && n != 2 && n != 4 && n != 8) || p >= e ||
      n > (size_t)(e - p))
    return (Dwarf_Off)-1;
  for (size_t i = 0; i < n; i++) /* (in the file's byte order) */
    off |= (Dwarf_Off)p[w->big_endian ? n - 1 - i : i] << (8 * i);
  return base + off;
}

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
  bool ref = !dwarf_hasattr(die, DW_AT_linkage_name) &&
             !dwarf_hasattr(die, DW_AT_MIPS_linkage_name) &&
             !dwarf_hasattr(die, DW_AT_name) &&
             (dwarf_attr(die, DW_AT_abstract_origin, &at) ||
              dwarf_attr(die, DW_AT_specification, &at));
  if (ref) { /* (each referred DIE's entry is stored under its offset below) */
    Dwarf_Off key = ref_offset(w, &at);
    if (key != (Dwarf_Off)-1 && (v = stkr_map_find(&w->origin_ids, key)))
      return (uint32_t)*v;
    v = NULL;
  }
  if (ref && dwarf_formref_die(&at, &target)) {
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
  if (ln) return sym_id(w, ln);
  /* (A name of the DWARF by its address; one made with scopes by value.) */
  const char *n = stkr__dw_plain_name(&w->nb, die, 0);
  return n == dwarf_diename(die) ? name_id(w, n) : intern(w, n);
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
 * w->a.ranges. @return how many. */
static uint32_t read_ranges(walk *w, Dwarf_Die *die) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  uint32_t n = 0;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    if (!MORE(w, w->a.ranges, w->a.n_ranges, w->a.cap_ranges)) break;
    w->a.ranges[w->a.n_ranges++] = (wk_range){lo, hi};
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
  if (!MORE(w, w->a.nodes, w->a.n_nodes, w->a.cap_nodes)) return NONE;
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
  w->a.nodes[w->a.n_nodes] = nd;
  return (uint32_t)w->a.n_nodes++;
}

static bool is_code(int tag) {
  return tag == DW_TAG_subprogram || stkr__dw_is_scope(tag);
}

/* Siblings without parsing a subtree twice. clang and dsymutil write no
 * DW_AT_sibling, so libdw's dwarf_siblingof finds the sibling of a DIE
 * with children by parsing every DIE below it again (each one's
 * abbreviation looked up in libdw's hash, under a rwlock): a DIE nested
 * n scopes deep was parsed n + 1 times, and dwarf_siblingof was a fifth
 * of a build's CPU on a 100 MB dSYM. The walk has just gone through the
 * children it entered, so it knows where they end: walk_children returns
 * where its parent's subtree ends, and the parent's sibling starts there
 * (libdw's rule: unless that byte is the null ending the list, or past
 * the CU). libdw still finds the sibling of every DIE not entered (types,
 * parameters). Where the end is not known (a form not sized here, a last
 * child not entered that has children of its own), dwarf_siblingof
 * answers as before. */

/* Where a value of at's form ends (libdw's __libdw_form_val_len), NULL
 * when not sized here or past the CU. */
static const unsigned char *value_end(const walk *w, Dwarf_Attribute *at) {
  const unsigned char *p = at->valp, *e = w->cu_end;
  Dwarf_Block b;
  uint64_t v;
  size_t n;
  switch (at->form) {
  case DW_FORM_flag_present: n = 0; break;
  case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag:
  case DW_FORM_strx1: case DW_FORM_addrx1: n = 1; break;
  case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2:
  case DW_FORM_addrx2: n = 2; break;
  case DW_FORM_strx3: case DW_FORM_addrx3: n = 3; break;
  case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_strx4:
  case DW_FORM_addrx4: case DW_FORM_ref_sup4: n = 4; break;
  case DW_FORM_data8: case DW_FORM_ref8: case DW_FORM_ref_sig8:
  case DW_FORM_ref_sup8: n = 8; break;
  case DW_FORM_data16: n = 16; break;
  case DW_FORM_addr: n = w->addr_size; break;
  case DW_FORM_ref_addr: n = w->version == 2 ? w->addr_size : w->off_size; break;
  case DW_FORM_strp: case DW_FORM_line_strp: case DW_FORM_sec_offset:
  case DW_FORM_strp_sup: case DW_FORM_GNU_ref_alt: case DW_FORM_GNU_strp_alt:
    n = w->off_size;
    break;
  case DW_FORM_sdata: case DW_FORM_udata: case DW_FORM_ref_udata:
  case DW_FORM_strx: case DW_FORM_addrx: case DW_FORM_loclistx:
  case DW_FORM_rnglistx: case DW_FORM_GNU_addr_index: case DW_FORM_GNU_str_index:
    return read_uleb(&p, e, &v) ? p : NULL;
  case DW_FORM_string:
    p = p < e ? memchr(p, 0, (size_t)(e - p)) : NULL;
    return p ? p + 1 : NULL;
  case DW_FORM_block: case DW_FORM_block1: case DW_FORM_block2:
  case DW_FORM_block4: case DW_FORM_exprloc:
    if (dwarf_formblock(at, &b) != 0 || b.data < p || b.data > e ||
        b.length > (size_t)(e - b.data))
      return NULL;
    return b.data + b.length;
  default: /* (DW_FORM_indirect, vendor forms) */
    return NULL;
  }
  return n && (p >= e || n > (size_t)(e - p)) ? NULL : p + n;
}

typedef struct attrs_end {
  const walk *w;
  const unsigned char *end; /* past the last value read; NULL: unknown */
} attrs_end;

static int attr_end_cb(Dwarf_Attribute *at, void *arg) {
  attrs_end *ae = arg;
  if (at->form == DW_FORM_implicit_const) return DWARF_CB_OK; /* (in the abbreviation) */
  ae->end = value_end(ae->w, at);
  return ae->end ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* Where a DIE without children ends (after its abbreviation code and
 * values), or NULL when not known. */
static const unsigned char *leaf_end(const walk *w, Dwarf_Die *die) {
  const unsigned char *p = die->addr;
  uint64_t code;
  attrs_end ae = {w, read_uleb(&p, w->cu_end, &code) ? p : NULL};
  if (!ae.end || dwarf_getattrs(die, attr_end_cb, &ae, 0) != 1) return NULL;
  return ae.end;
}

/* c's tag, its abbreviation taken from w->abbrevs when this CU has met
 * its code before. libdw finds a DIE's abbreviation in a hash under a
 * rwlock (dwarf_tag, the first call on each DIE): a tenth of a reader's
 * time on a 100 MB dSYM. The pointer is the one libdw gave for the same
 * code in the same CU (Dwarf_Die.abbrev, a public field; libdw fills it
 * the same way and keeps what it points to until dwarf_end). */
static int die_tag(walk *w, Dwarf_Die *c) {
  const unsigned char *p = c->addr;
  uint64_t code;
  if (c->abbrev || !read_uleb(&p, w->cu_end, &code) || code == 0 ||
      code >= WK_ABBREVS)
    return dwarf_tag(c);
  if (w->abbrevs[code]) {
    c->abbrev = w->abbrevs[code];
    return dwarf_tag(c);
  }
  int tag = dwarf_tag(c);
  if (c->abbrev && c->abbrev != DWARF_END_ABBREV) w->abbrevs[code] = c->abbrev;
  return tag;
}

/* The children of `parent`, for up to three walks at once, each as the
 * per-address path does it alone: boundaries (db: depth, -1 off), the
 * CU's subprogram index (dc: depth, -1 off) and the scope tree of a
 * subprogram (sp: the parent node, NONE off; ds: its depth). @return
 * where parent's subtree ends (past the null ending its children; at or
 * past w->cu_end: nothing follows in the CU), NULL when not known. */
static const unsigned char *walk_children(walk *w, Dwarf_Die *parent, int db,
                                          int dc, uint32_t sp, int ds) {
  Dwarf_Die c;
  uint32_t last = NONE;
  if (dwarf_child(parent, &c) != 0) return NULL;
  for (;;) {
    int tag = die_tag(w, &c);
    bool holds = stkr__dw_holds_functions(tag);
    bool bound = db >= 0 && is_code(tag);
    bool sub = dc >= 0 && tag == DW_TAG_subprogram;
    bool scope = sp != NONE && stkr__dw_is_scope(tag);
    int cdb = db >= 0 && (bound || holds) && db + 1 <= MAX_BOUND_DEPTH ? db + 1 : -1;
    int cdc = dc >= 0 && holds && dc + 1 <= MAX_INDEX_DEPTH ? dc + 1 : -1;
    uint32_t csp = NONE, r0 = (uint32_t)w->a.n_ranges, nr = 0;
    int cds = 0;
    if (bound || sub || scope) nr = read_ranges(w, &c);
    if (bound)
      for (uint32_t k = 0; k < nr; k++) {
        stkr__addrs_add(&w->a.bounds, w->a.ranges[r0 + k].lo);
        stkr__addrs_add(&w->a.bounds, w->a.ranges[r0 + k].hi);
      }
    /* A scope without code never holds an address: neither it nor what is
     * inside it can be on a chain, so it gets no node. */
    if (nr && sub) {
      uint32_t node = add_node(w, &c, tag, r0, nr);
      if (node == NONE) return NULL;
      for (uint32_t k = 0; k < nr; k++) {
        if (!MORE(w, w->a.subs, w->a.n_subs, w->a.cap_subs)) return NULL;
        w->a.subs[w->a.n_subs++] =
            (wk_sub){w->a.ranges[r0 + k].lo, w->a.ranges[r0 + k].hi, node};
      }
      csp = node;
    } else if (nr && scope) {
      uint32_t node = add_node(w, &c, tag, r0, nr);
      if (node == NONE) return NULL;
      if (last == NONE) w->a.nodes[sp].first_child = node;
      else w->a.nodes[last].next_sibling = node;
      last = node;
      if (ds + 1 < MAX_SCOPE_DEPTH) {
        csp = node;
        cds = ds + 1;
      }
    } else {
      w->a.n_ranges = r0; /* only needed for the boundaries */
    }
    if (w->nomem) return NULL;
    const unsigned char *end = NULL; /* where c's subtree ends */
    if ((cdb >= 0 || cdc >= 0 || csp != NONE) && dwarf_haschildren(&c) > 0)
      end = walk_children(w, &c, cdb, cdc, csp, cds);
    if (!end) { /* libdw's sibling; past the last one, c's end if a leaf */
      int r = dwarf_siblingof(&c, &c);
      if (r == 0) continue;
      if (r < 0 || dwarf_haschildren(&c) != 0 || !(end = leaf_end(w, &c)) ||
          (end < w->cu_end && *end != 0)) /* (not where libdw ended) */
        return NULL;
    }
    if (end >= w->cu_end) return end;
    if (*end == 0) return end + 1; /* c was the last child */
    Dwarf_Die next = {.addr = (void *)end, .cu = c.cu}; /* as dwarf_siblingof */
    c = next;
  }
}

/* Sort n addresses: LSD radix, 16 bits per pass (8 below 64 Ki
 * addresses: a streamed CU's batch), passes whose digit is the same in
 * every address skipped (addresses of one __TEXT share their high bits);
 * nothing to do when already in order (a CU's line rows mostly are).
 * qsort took a tenth of a cache build. Falls back to qsort when the
 * scratch copy cannot be allocated. */
void stkr__wk_sort(uint64_t *v, size_t n) {
  size_t i = 1;
  while (i < n && v[i - 1] <= v[i]) i++;
  if (i >= n) return;
  unsigned bits = n >= 65536 ? 16 : 8;
  size_t digits = (size_t)1 << bits, mask = digits - 1;
  uint64_t *tmp = malloc(n * sizeof *tmp), *src = v, *dst = tmp;
  size_t *count = tmp ? malloc(digits * sizeof *count) : NULL;
  uint64_t all_or = 0, all_and = ~0ull;
  if (!count) {
    free(tmp);
    qsort(v, n, sizeof *v, stkr_qsort_u64);
    return;
  }
  stkr__huge_hint(tmp, n * sizeof *tmp);
  for (i = 0; i < n; i++) {
    all_or |= v[i];
    all_and &= v[i];
  }
  for (unsigned shift = 0; shift < 64; shift += bits) {
    if ((((all_or ^ all_and) >> shift) & mask) == 0) continue;
    memset(count, 0, digits * sizeof *count);
    for (i = 0; i < n; i++) count[(src[i] >> shift) & mask]++;
    for (size_t d = 0, sum = 0; d < digits; d++) {
      size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (i = 0; i < n; i++) dst[count[(src[i] >> shift) & mask]++] = src[i];
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
  return stkr_cmp_u64(x->lo, y->lo);
}

int stkr__wk_cmp_curange(const void *a, const void *b) {
  const wk_curange *x = a, *y = b;
  return stkr_cmp_u64(x->lo, y->lo);
}

static void read_lines(walk *w, wk_cu *cu) {
  Dwarf_Lines *lines;
  size_t nl;
  const char *last_name = NULL;
  uint64_t last_ids = 0;
  bool have_last = false;
  cu->row0 = w->a.n_rows;
  cu->rows_sorted = true;
  if (dwarf_getsrclines(&w->cudie, &lines, &nl) != 0) return;
  for (size_t i = 0; i < nl && !w->nomem; i++) {
    Dwarf_Line *l = dwarf_onesrcline(lines, i);
    Dwarf_Addr a;
    bool end = false;
    int line = 0, col = 0;
    if (!l || dwarf_lineaddr(l, &a) != 0) continue; /* never, in libdw */
    stkr__addrs_add(&w->a.bounds, a);
    if (!MORE(w, w->a.rows, w->a.n_rows, w->a.cap_rows)) return;
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
    if (cu->n_rows && w->a.rows[w->a.n_rows - 1].addr > a) cu->rows_sorted = false;
    w->a.rows[w->a.n_rows++] = (wk_row){a, (uint32_t)(ids >> 32), (uint32_t)ids,
                                    line > 0 ? (uint32_t)line : 0,
                                    col > 0 ? (uint32_t)col : 0, end};
    _Static_assert(sizeof(wk_row) == 24, "wk_row: 24 bytes");
    cu->n_rows++;
  }
}

/* w->cudie's CU: where its DIEs end, its sizes (for walk_children's
 * siblings; cu_end NULL when not known). */
static void cu_bounds(walk *w) {
  Dwarf_Half version;
  uint8_t unit_type;
  Dwarf_Off die_off = dwarf_dieoffset(&w->cudie), in_cu = dwarf_cuoffset(&w->cudie);
  Dwarf_Off next;
  size_t hsize;
  Dwarf *dw = dwarf_cu_getdwarf(w->cudie.cu);
  w->cu_end = NULL;
  if (!dw || die_off == (Dwarf_Off)-1 || in_cu == (Dwarf_Off)-1 || in_cu > die_off ||
      dwarf_cu_info(w->cudie.cu, &version, &unit_type, NULL, NULL, NULL,
                    &w->addr_size, &w->off_size) != 0 ||
      dwarf_nextcu(dw, die_off - in_cu, &next, &hsize, NULL, NULL, NULL) != 0 ||
      next <= die_off)
    return;
  w->version = version;
  w->cu_off = die_off - in_cu;
  Elf *elf = dwarf_getelf(dw);
  const char *ident = elf ? elf_getident(elf, NULL) : NULL;
  w->big_endian = ident && ident[EI_DATA] == ELFDATA2MSB;
  /* (the CU's first byte is in_cu bytes before its DIE) */
  w->cu_end = (const unsigned char *)w->cudie.addr + (next - die_off);
}

void stkr__wk_cu(walk *w) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  if (!MORE(w, w->cus, w->n_cus, w->cap_cus)) return;
  wk_cu *cu = &w->cus[w->n_cus];
  memset(cu, 0, sizeof *cu);
  while (!w->stream && /* (streamed: read before, cu_ranges) */
         (off = dwarf_ranges(&w->cudie, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    stkr__addrs_add(&w->a.bounds, lo);
    stkr__addrs_add(&w->a.bounds, hi);
    if (!MORE(w, w->curanges, w->n_curanges, w->cap_curanges)) return;
    w->curanges[w->n_curanges++] = (wk_curange){lo, hi, w->n_cus};
  }
  cu_bounds(w);
  memset(w->abbrevs, 0, sizeof w->abbrevs); /* (a CU's own) */
  stkr_map_clear(&w->file_ids); /* names are per CU: comp_dir is */
  w->files = NULL;
  w->files_read = false;
  cu->sub0 = w->a.n_subs;
  walk_children(w, &w->cudie, 0, 0, NONE, 0);
  cu = &w->cus[w->n_cus]; /* (not moved: cus only grows here) */
  cu->n_subs = w->a.n_subs - cu->sub0;
  if (cu->n_subs > 1)
    qsort(w->a.subs + cu->sub0, cu->n_subs, sizeof *w->a.subs, cmp_sub);
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
  const wk_row *r = w->a.rows + cu->row0;
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
    const wk_range *x = &w->a.ranges[nd->first_range + k];
    if (x->lo <= a && a < x->hi) return true;
  }
  return false;
}

/* The frames of a, as stkr__symfile_lookup gives them (lookup_dwarf, then
 * the symbol). @return how many. */
/* The reader's id as an id of w's (two threads; else id itself). */
static uint32_t tr(walk *w, uint32_t id) {
  if (!w->local || id == NONE) return id;
  if (id >= w->n_tr) {
    size_t old = w->n_tr;
    if (stkr_grow((void **)&w->tr, &w->n_tr, (size_t)id + 1, sizeof *w->tr) != 0) {
      w->nomem = true;
      return NONE;
    }
    memset(w->tr + old, 0xff, (w->n_tr - old) * sizeof *w->tr); /* NONE */
  }
  if (w->tr[id] == NONE)
    w->tr[id] = intern(w, w->local->table[id >> 16][id & 0xffff]);
  return w->tr[id];
}

size_t stkr__wk_frames(walk *w, uint64_t a, stkr__symframe *out) {
  uint32_t cui, si, sym = NONE;
  /* The symbol holding a (sym_lookup's answer): its name is interned
   * only where a frame uses it. */
  while (w->sym_cur < w->n_syms && w->syms[w->sym_cur].lo <= a) w->sym_cur++;
  const char *sname = w->sym_cur && a < w->syms[w->sym_cur - 1].hi
                          ? w->syms[w->sym_cur - 1].name
                          : NULL;
  NEAREST(w->curanges, w->n_curanges, w->cur_cursor, a, cui);
  if (cui != NONE && w->stream && w->curanges[cui].cu + 1 != w->n_cus) {
    w->restart = true; /* not the CU just read (never with checked ranges) */
    return 0;
  }
  if (cui != NONE) {
    wk_cu *cu = &w->cus[w->curanges[cui].cu];
    const wk_row *row = row_at(w, cu, a);
    uint32_t line = row ? row->line : 0, col = row ? row->col : 0;
    NEAREST(w->a.subs + cu->sub0, cu->n_subs, cu->sub_cur, a, si);
    if (si != NONE) {
      const wk_node *root = &w->a.nodes[w->a.subs[cu->sub0 + si].node], *cur = root;
      const wk_node *chain[STKR__SYM_MAX_INLINE];
      uint32_t file = row ? tr(w, row->file_twice) : NONE;
      size_t nch = 0, n = 0;
      for (int depth = 0; depth < MAX_SCOPE_DEPTH; depth++) {
        uint32_t c = cur->first_child;
        while (c != NONE && !node_holds(w, &w->a.nodes[c], a))
          c = w->a.nodes[c].next_sibling;
        if (c == NONE) break;
        cur = &w->a.nodes[c];
        if (cur->inlined && nch < STKR__SYM_MAX_INLINE - 1) chain[nch++] = cur;
      }
      for (size_t k = nch; k-- > 0;) { /* innermost first */
        out[n++] = (stkr__symframe){tr(w, chain[k]->name), file, line, col, true};
        file = tr(w, chain[k]->call_file);
        line = chain[k]->call_line;
        col = chain[k]->call_col;
      }
      if (root->name == NONE && sname) sym = sym_id(w, sname);
      out[n++] = (stkr__symframe){root->name != NONE ? tr(w, root->name) : sym,
                                  file, line, col, false};
      return n;
    }
    if (sname) {
      out[0] = (stkr__symframe){sym_id(w, sname), row ? tr(w, row->file_once) : NONE,
                                line, col, false};
      return 1;
    }
  }
  if (!sname) return 0;
  out[0] = (stkr__symframe){sym_id(w, sname), NONE, 0, 0, false};
  return 1;
}

void stkr__wk_free(walk *w) {
  stkr__dwnames_free(&w->nb);
  stkr_map_free(&w->sym_ids);
  stkr_map_free(&w->name_ids);
  stkr_map_free(&w->file_ids);
  stkr_map_free(&w->origin_ids);
  STKR_FREE_ALL(w->a.nodes, w->a.ranges, w->a.subs, w->a.rows, w->cus,
                w->curanges, w->a.bounds.v, w->up.v, w->carry.v, w->batch.v,
                w->batch_end, w->tr);
}

#endif /* !__APPLE__ */
