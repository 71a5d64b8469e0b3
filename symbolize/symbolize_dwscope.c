/*
 * symbolize_dwscope.c: the scope tree of one subprogram, read from libdw
 * once and walked from memory (see stkr__dwscope in symbolize_dwarf.h).
 *
 * Why: stkr__dw_frames finds an address's inline chain by walking the
 * subprogram's DIE children level by level (dwarf_child, dwarf_siblingof,
 * dwarf_tag, dwarf_haspc). Each of those calls decodes abbreviations and
 * takes libdw's locks; addresses asked in order (hundreds in a function
 * with many inlined calls) repeat that walk for each. (It was written for
 * the symbol cache build, which asked for every boundary address in turn;
 * that build now reads each CU once, symcache_walk.c.) Here the
 * subprogram's inlined_subroutine / lexical_block / try / catch DIEs are
 * read once into a first-child / next-sibling array with their ranges,
 * names and call sites; later addresses in the same subprogram walk the
 * array with the same rule as the DIE walk (at each level the first child,
 * in DIE order, whose ranges hold the address), so the answers are the
 * same frames.
 *
 * Only compiled where there is no dyld (symbolize_apple.c has Apple's).
 */
#if !defined(__APPLE__)

#include "symbolize/symbolize_dwarf.h"

#include <dwarf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"

#define NONE UINT32_MAX
#define MAX_DEPTH 64 /* as the DIE walk: deeper scopes are not followed */

struct stkr__dwscope_node {
  uint32_t first_child, next_sibling; /* NONE: none */
  uint32_t first_range, n_ranges;
  bool inlined;       /* DW_TAG_inlined_subroutine (a frame) */
  bool has_call_file;
  const char *linkage; /* mangled linkage name (libdw's), or NULL */
  Dwarf_Die die;       /* without a linkage name: named from it */
  Dwarf_Word call_file;
  uint32_t call_line, call_col;
};

struct stkr__dwscope_range {
  Dwarf_Addr lo, hi;
};

/* Append a node for `die` (its ranges, names, call site). @return its
 * index, or NONE when out of memory. */
static uint32_t add_node(stkr__dwscope *s, Dwarf_Die *die, bool inlined) {
  Dwarf_Attribute at;
  Dwarf_Addr base, lo, hi;
  Dwarf_Word v;
  ptrdiff_t off = 0;
  if (stkr_grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1,
                sizeof *s->nodes) != 0)
    return NONE;
  stkr__dwscope_node *nd = &s->nodes[s->n_nodes];
  memset(nd, 0, sizeof *nd);
  nd->first_child = nd->next_sibling = NONE;
  nd->first_range = (uint32_t)s->n_ranges;
  nd->inlined = inlined;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    if (stkr_grow((void **)&s->ranges, &s->cap_ranges, s->n_ranges + 1,
                  sizeof *s->ranges) != 0)
      return NONE;
    s->ranges[s->n_ranges++] = (stkr__dwscope_range){lo, hi};
    nd->n_ranges++;
  }
  nd->linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
  if (!nd->linkage)
    nd->linkage =
        dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
  if (!nd->linkage) nd->die = *die; /* (stkr__dw_plain_name, when asked) */
  if (inlined) {
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &at), &v) == 0) {
      nd->call_file = v;
      nd->has_call_file = true;
    }
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &at), &v) == 0)
      nd->call_line = (uint32_t)v;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &at), &v) == 0)
      nd->call_col = (uint32_t)v;
  }
  return (uint32_t)s->n_nodes++;
}

/* The scope children of `parent` (node index pi), recursively. */
static bool add_children(stkr__dwscope *s, Dwarf_Die *parent, uint32_t pi,
                         int depth) {
  Dwarf_Die c;
  uint32_t last = NONE;
  if (depth >= MAX_DEPTH || dwarf_child(parent, &c) != 0) return true;
  do {
    int tag = dwarf_tag(&c);
    if (!stkr__dw_is_scope(tag)) continue;
    uint32_t ci = add_node(s, &c, tag == DW_TAG_inlined_subroutine);
    if (ci == NONE) return false;
    if (last == NONE) s->nodes[pi].first_child = ci;
    else s->nodes[last].next_sibling = ci;
    last = ci;
    if (!add_children(s, &c, ci, depth + 1)) return false;
  } while (dwarf_siblingof(&c, &c) == 0);
  return true;
}

bool stkr__dwscope_load(stkr__dwscope *s, Dwarf_Die *sub) {
  Dwarf_Off off = dwarf_dieoffset(sub);
  if (s->valid && s->sub == off) return true;
  /* Loading reads the whole scope tree, the DIE walk only the path to one
   * address: worth it only for the second address in a row in the same
   * subprogram (addresses in order), not for random lookups (atos). */
  if (s->last_asked != off) {
    s->last_asked = off;
    return false;
  }
  s->valid = false;
  s->n_nodes = s->n_ranges = 0;
  if (add_node(s, sub, false) == NONE || !add_children(s, sub, 0, 0))
    return false; /* the caller walks the DIEs instead */
  s->sub = off;
  s->valid = true;
  return true;
}

static bool holds(const stkr__dwscope *s, const stkr__dwscope_node *nd,
                  Dwarf_Addr a) {
  for (uint32_t r = 0; r < nd->n_ranges; r++) {
    const stkr__dwscope_range *x = &s->ranges[nd->first_range + r];
    if (x->lo <= a && a < x->hi) return true;
  }
  return false;
}

size_t stkr__dwscope_chain(const stkr__dwscope *s, Dwarf_Addr a,
                           const stkr__dwscope_node **chain, size_t max) {
  uint32_t cur = 0;
  size_t n = 0;
  for (int depth = 0; depth < MAX_DEPTH; depth++) {
    uint32_t c = s->nodes[cur].first_child;
    while (c != NONE && !holds(s, &s->nodes[c], a)) c = s->nodes[c].next_sibling;
    if (c == NONE) break;
    if (s->nodes[c].inlined && n < max) chain[n++] = &s->nodes[c];
    cur = c;
  }
  return n;
}

const stkr__dwscope_node *stkr__dwscope_root(const stkr__dwscope *s) {
  return &s->nodes[0];
}

const char *stkr__dwscope_name(stkr__dwnames *nb, const stkr__dwscope_node *nd,
                               size_t slot) {
  Dwarf_Die die = nd->die;
  return nd->linkage ? stkr__dw_sym_name(nb, nd->linkage, slot)
                     : stkr__dw_plain_name(nb, &die, slot);
}

bool stkr__dwscope_call(const stkr__dwscope_node *nd, Dwarf_Word *file,
                        int *line, int *col) {
  *line = (int)nd->call_line;
  *col = (int)nd->call_col;
  *file = nd->call_file;
  return nd->has_call_file;
}

void stkr__dwscope_free(stkr__dwscope *s) {
  free(s->nodes);
  free(s->ranges);
  memset(s, 0, sizeof *s);
}

#endif /* !__APPLE__ */
