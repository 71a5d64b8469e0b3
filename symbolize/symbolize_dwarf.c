/*
 * symbolize_dwarf.c: DWARF lookups shared by the ELF and Mach-O backends,
 * and the check that an ELF file is whole (see symbolize_dwarf.h).
 *
 * Why our own per-CU index of subprogram ranges: libdw's dwarf_getscopes
 * would walk every top-level DIE of the CU, including whole C++
 * namespaces, for every PC. The index is built once per CU; then one
 * binary search finds the subprogram, and the walk goes down only through
 * the inlined_subroutine (and block) DIEs that contain the address: one
 * frame per inlined call, innermost first, each with the call site of the
 * one inside it (DW_AT_call_file/line/column). Names are demangled linkage
 * names when present, else DW_AT_name (following abstract_origin and
 * specification).
 *
 * Only compiled where there is no dyld (symbolize_apple.c has Apple's).
 */
#if !defined(__APPLE__)

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "symbolize/symbolize_dwarf.h"

#include <dwarf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct stkr__dwfn {
  Dwarf_Addr lo, hi; /* DWARF addresses */
  Dwarf_Off die;     /* the subprogram DIE */
};

struct stkr__dwcu {
  Dwarf_Off cu;
  stkr__dwfn *r;
  size_t n;
};

struct stkr__dwcurange {
  Dwarf_Addr lo, hi;
  Dwarf_Off cu; /* the CU DIE */
};

typedef struct growr {
  stkr__dwfn *r;
  size_t n, cap;
} growr;

void stkr__dwidx_free(stkr__dwidx *ix) {
  Dwarf *dw = ix->dw; /* not the index's: it stays */

  STKR_FREE_EACH(ix->cus, ix->n_cus, r);
  free(ix->cus);
  free(ix->ranges);
  memset(ix, 0, sizeof *ix);
  ix->dw = dw;
}

static int cmp_curange(const void *a, const void *b) {
  const stkr__dwcurange *x = a, *y = b;
  return stkr_cmp_u64(x->lo, y->lo);
}

static void build_cu_ranges(stkr__dwidx *ix) {
  Dwarf_Off off = 0, next;
  size_t hsize, cap = 0;
  ix->ranges_built = true;
  while (dwarf_nextcu(ix->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
    Dwarf_Die cudie;
    Dwarf_Addr base, lo, hi;
    ptrdiff_t r = 0;
    if (dwarf_offdie(ix->dw, off + hsize, &cudie)) {
      while ((r = dwarf_ranges(&cudie, r, &base, &lo, &hi)) > 0) {
        if (hi <= lo) continue;
        if (stkr_grow((void **)&ix->ranges, &cap, ix->n_ranges + 1,
                      sizeof *ix->ranges) != 0)
          return; /* the CUs so far: fewer answers, no wrong one */
        ix->ranges[ix->n_ranges++] = (stkr__dwcurange){lo, hi, off + hsize};
      }
    }
    off = next;
  }
  if (ix->n_ranges)
    qsort(ix->ranges, ix->n_ranges, sizeof *ix->ranges, cmp_curange);
}

bool stkr__dw_cu_of(stkr__dwidx *ix, Dwarf_Addr a, Dwarf_Die *cudie) {
  size_t lo = 0, hi;
  if (!ix->dw) return false;
  if (!ix->ranges_built) build_cu_ranges(ix);
  hi = ix->n_ranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ix->ranges[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* Nearest first; CUs rarely overlap. */
  for (size_t k = lo, tries = 0; k > 0 && tries < 8; k--, tries++)
    if (a < ix->ranges[k - 1].hi)
      return dwarf_offdie(ix->dw, ix->ranges[k - 1].cu, cudie) != NULL;
  return false;
}

const char *stkr__dw_line(stkr__dwnames *nb, Dwarf_Die *cudie, Dwarf_Addr a,
                          bool join_comp_dir, int *line, int *col) {
  Dwarf_Line *l = dwarf_getsrc_die(cudie, a);
  const char *file;
  *line = *col = 0;
  if (!l) return NULL;
  file = dwarf_linesrc(l, NULL, NULL);
  (void)dwarf_lineno(l, line);
  (void)dwarf_linecol(l, col);
  return join_comp_dir ? stkr__dw_full_path(nb, cudie, file, 0) : file;
}

void stkr__dwnames_free(stkr__dwnames *nb) {
  stkr__dwscope_free(&nb->scope);
  size_t pos = 0;
  uint64_t mangled, *demangled;
  while (stkr_map_next(&nb->memo_tab, &pos, &mangled, &demangled))
    free((char *)(uintptr_t)*demangled);
  stkr_map_free(&nb->memo_tab);
  for (size_t i = 0; i < STKR__SYM_MAX_INLINE; i++) {
    free(nb->buf[i]);
    free(nb->path[i]);
    nb->buf[i] = nb->path[i] = NULL;
    nb->cap[i] = nb->path_cap[i] = 0;
  }
}

const char *stkr__dw_full_path(stkr__dwnames *nb, Dwarf_Die *cudie,
                               const char *file, size_t slot) {
  Dwarf_Attribute at;
  const char *dir;
  size_t need;
  if (!file || file[0] == '/') return file;
  dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &at));
  if (!dir || !*dir) return file;
  need = strlen(dir) + 1 + strlen(file) + 1;
  if (need > nb->path_cap[slot]) {
    char *p = realloc(nb->path[slot], need);
    if (!p) return file;
    nb->path[slot] = p;
    nb->path_cap[slot] = need;
  }
  snprintf(nb->path[slot], need, "%s/%s", dir, file);
  return nb->path[slot];
}

static void add_ranges(growr *g, Dwarf_Die *die) {
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (hi <= lo) continue;
    if (stkr_grow((void **)&g->r, &g->cap, g->n + 1, sizeof *g->r) != 0)
      return;
    g->r[g->n++] = (stkr__dwfn){lo, hi, dwarf_dieoffset(die)};
  }
}

/* A scope that is not code but may hold functions (C++ namespaces and
 * member functions, Fortran modules): the index below and the symbol
 * cache's walk descend into it, so that they agree on which subprograms
 * they see. */
bool stkr__dw_holds_functions(int tag) {
  switch (tag) {
  case DW_TAG_namespace:
  case DW_TAG_class_type:
  case DW_TAG_structure_type:
  case DW_TAG_union_type:
  case DW_TAG_module:
    return true;
  default:
    return false;
  }
}

/* Collect the subprograms with code under `parent`, descending through
 * scopes that may hold them (namespaces, classes) but not into functions. */
static void collect(growr *g, Dwarf_Die *parent, int depth) {
  Dwarf_Die c;
  if (depth > 32 || dwarf_child(parent, &c) != 0) return;
  do {
    int tag = dwarf_tag(&c);
    if (tag == DW_TAG_subprogram)
      add_ranges(g, &c);
    else if (stkr__dw_holds_functions(tag))
      collect(g, &c, depth + 1);
  } while (dwarf_siblingof(&c, &c) == 0);
}

static int cmp_range(const void *a, const void *b) {
  const stkr__dwfn *x = a, *y = b;
  return stkr_cmp_u64(x->lo, y->lo);
}

static stkr__dwcu *cu_index(stkr__dwidx *ix, Dwarf_Die *cudie) {
  Dwarf_Off off = dwarf_dieoffset(cudie);
  size_t lo = 0, hi = ix->n_cus;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ix->cus[mid].cu == off) return &ix->cus[mid];
    if (ix->cus[mid].cu < off) lo = mid + 1;
    else hi = mid;
  }
  if (stkr_grow((void **)&ix->cus, &ix->cap_cus, ix->n_cus + 1,
                sizeof *ix->cus) != 0)
    return NULL;
  growr g = {NULL, 0, 0};
  collect(&g, cudie, 0);
  qsort(g.r, g.n, sizeof *g.r, cmp_range);
  memmove(&ix->cus[lo + 1], &ix->cus[lo], (ix->n_cus - lo) * sizeof *ix->cus);
  ix->cus[lo] = (stkr__dwcu){off, g.r, g.n};
  ix->n_cus++;
  return &ix->cus[lo];
}

bool stkr__dw_find_subprogram(stkr__dwidx *ix, Dwarf_Die *cudie,
                              Dwarf_Addr a, Dwarf_Die *out) {
  stkr__dwcu *ci = cu_index(ix, cudie);
  size_t lo = 0, hi;
  if (!ci) return false;
  if (ix->hit_valid && ix->hit_cu == ci->cu && ix->hit_lo <= a &&
      a < ix->hit_hi) {
    *out = ix->hit_die;
    return true;
  }
  hi = ci->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ci->r[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* Nearest ranges first; nested or overlapping ones are rare. */
  for (size_t k = lo, tries = 0; k > 0 && tries < 8; k--, tries++) {
    if (a >= ci->r[k - 1].hi) continue;
    if (!dwarf_offdie(ix->dw, ci->r[k - 1].die, out)) return false;
    /* The nearest range itself: every address from its start up to its
     * end or the next range's start gets the same answer. */
    ix->hit_valid = tries == 0;
    if (ix->hit_valid) {
      ix->hit_cu = ci->cu;
      ix->hit_lo = ci->r[k - 1].lo;
      ix->hit_hi = ci->r[k - 1].hi;
      if (k < ci->n && ci->r[k].lo < ix->hit_hi) ix->hit_hi = ci->r[k].lo;
      ix->hit_die = *out;
    }
    return true;
  }
  return false;
}

/* The memo's answer for n, computing it on first use. @return false when
 * the memo cannot grow (the caller demangles without it). */
static bool memo_get(stkr__dwnames *nb, const char *n, size_t slot,
                     const char **out) {
  const uint64_t key = (uint64_t)(uintptr_t)n;
  const uint64_t *v = stkr_map_find(&nb->memo_tab, key);
  const char *d;
  if (!v) {
    d = stkr__demangle(n, &nb->buf[slot], &nb->cap[slot]);
    char *copy = d ? strdup(d) : NULL;
    if (d && !copy) return false;
    if (stkr_map_put(&nb->memo_tab, key, (uint64_t)(uintptr_t)copy) != 0) {
      free(copy);
      return false;
    }
    *out = copy ? copy : n;
    return true;
  }
  d = (const char *)(uintptr_t)*v;
  *out = d ? d : n;
  return true;
}

const char *stkr__dw_sym_name(stkr__dwnames *nb, const char *n, size_t slot) {
  const char *d;
  if (nb->memo && memo_get(nb, n, slot, &d)) return d;
  d = stkr__demangle(n, &nb->buf[slot], &nb->cap[slot]);
  return d ? d : n;
}

static bool cxx_cu(Dwarf_Die *die) {
  Dwarf_Die cu;
  if (dwarf_diecu(die, &cu, NULL, NULL) == NULL) return false;
  switch (dwarf_srclang(&cu)) {
  case DW_LANG_C_plus_plus:
  case DW_LANG_C_plus_plus_03:
  case DW_LANG_C_plus_plus_11:
  case DW_LANG_C_plus_plus_14:
  case DW_LANG_ObjC_plus_plus:
    return true;
  default:
    return false;
  }
}

/* Append s (n bytes) to nb's slot buffer at *len. @return false: no memory. */
static bool slot_put(stkr__dwnames *nb, size_t slot, size_t *len,
                     const char *s, size_t n) {
  if (stkr__grow_big((void **)&nb->buf[slot], &nb->cap[slot], *len + n + 1, 1))
    return false;
  memcpy(nb->buf[slot] + *len, s, n);
  *len += n;
  nb->buf[slot][*len] = '\0';
  return true;
}

const char *stkr__dw_plain_name(stkr__dwnames *nb, Dwarf_Die *die,
                                size_t slot) {
  const char *name = dwarf_diename(die);
  Dwarf_Attribute at;
  Dwarf_Die cur = *die, decl, *scopes = NULL;
  bool declared = false;
  size_t len = 0;
  int n;

  if (name == NULL) return NULL;
  /* The DIE that carries the name, past abstract_origin (an inlined or
   * concrete copy) and specification (a definition of a declaration). */
  for (int hop = 0; hop < 8 && !dwarf_hasattr(&cur, DW_AT_name); hop++) {
    bool spec = !dwarf_attr(&cur, DW_AT_abstract_origin, &at);
    /* An inlined or concrete copy (abstract_origin): left bare, as the
     * scopes cost a walk of the CU each and such copies are many (a C++
     * file's inlined constructors: its cache built 3x slower). */
    if (!spec || !dwarf_attr(&cur, DW_AT_specification, &at) ||
        dwarf_formref_die(&at, &decl) == NULL)
      return name;
    declared = true;
    cur = decl;
  }
  /* Only a member declared in its class or namespace: what the scopes
   * add; dwarf_getscopes_die walks the CU up to the DIE. */
  if (!declared || !cxx_cu(&cur) || (n = dwarf_getscopes_die(&cur, &scopes)) <= 1) {
    free(scopes);
    return name;
  }
  for (int i = n - 1; i >= 0; i--) {
    const char *part;
    switch (dwarf_tag(&scopes[i])) {
    case DW_TAG_namespace:
      part = dwarf_diename(&scopes[i]);
      if (part == NULL) part = "(anonymous namespace)";
      break;
    case DW_TAG_class_type:
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
      part = dwarf_diename(&scopes[i]);
      break;
    default:
      part = NULL;
    }
    if (part != NULL && (!slot_put(nb, slot, &len, part, strlen(part)) ||
                         !slot_put(nb, slot, &len, "::", 2))) {
      free(scopes);
      return name;
    }
  }
  free(scopes);
  if (len == 0 || !slot_put(nb, slot, &len, name, strlen(name))) return name;
  return nb->buf[slot];
}

/* A DIE's function name: the demangled linkage name, else DW_AT_name
 * (following abstract_origin/specification) with its C++ scopes
 * (stkr__dw_plain_name). Stored in nb's slot. */
static const char *die_name(stkr__dwnames *nb, Dwarf_Die *die, size_t slot) {
  Dwarf_Attribute at;
  const char *ln = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
  if (!ln)
    ln = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
  if (ln) return stkr__dw_sym_name(nb, ln, slot);
  return stkr__dw_plain_name(nb, die, slot);
}

bool stkr__dw_is_scope(int tag) {
  return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* Walk from the subprogram down through the scopes containing a; collect
 * the inlined_subroutine DIEs, outermost first. */
static size_t inline_chain(Dwarf_Die *sub, Dwarf_Addr a, Dwarf_Die *chain,
                           size_t max) {
  Dwarf_Die cur = *sub, c;
  size_t n = 0;
  for (int depth = 0; depth < 64; depth++) {
    bool down = false;
    if (dwarf_child(&cur, &c) != 0) break;
    do {
      int tag = dwarf_tag(&c);
      if (stkr__dw_is_scope(tag) && dwarf_haspc(&c, a) == 1) {
        if (tag == DW_TAG_inlined_subroutine && n < max) chain[n++] = c;
        cur = c;
        down = true;
        break;
      }
    } while (dwarf_siblingof(&c, &c) == 0);
    if (!down) break;
  }
  return n;
}

/* stkr__dw_frames from the scope tree in memory (see stkr__dwscope). */
static size_t frames_from_scope(stkr__dwnames *nb, Dwarf_Die *cudie,
                                Dwarf_Addr a, const char *file, int line,
                                int col, bool join_comp_dir, stkr__symres *out,
                                size_t max) {
  const stkr__dwscope_node *chain[STKR__SYM_MAX_INLINE];
  Dwarf_Files *files = NULL;
  size_t nfiles = 0, nch, n = 0;

  nch = stkr__dwscope_chain(&nb->scope, a, chain, max - 1);
  if (nch) (void)dwarf_getsrcfiles(cudie, &files, &nfiles);
  for (size_t k = nch; k-- > 0;) {
    Dwarf_Word v;
    if (join_comp_dir) file = stkr__dw_full_path(nb, cudie, file, n);
    out[n] = (stkr__symres){stkr__dwscope_name(nb, chain[k], n), file,
                            line > 0 ? (uint32_t)line : 0,
                            col > 0 ? (uint32_t)col : 0, true};
    n++;
    file = NULL;
    if (stkr__dwscope_call(chain[k], &v, &line, &col) && files)
      file = dwarf_filesrc(files, v, NULL, NULL);
  }
  if (join_comp_dir) file = stkr__dw_full_path(nb, cudie, file, n);
  out[n] = (stkr__symres){stkr__dwscope_name(nb, stkr__dwscope_root(&nb->scope), n),
                          file, line > 0 ? (uint32_t)line : 0,
                          col > 0 ? (uint32_t)col : 0, false};
  return n + 1;
}

size_t stkr__dw_frames(stkr__dwnames *nb, Dwarf_Die *cudie, Dwarf_Die *sub,
                       Dwarf_Addr a, const char *file, int line, int col,
                       bool join_comp_dir, stkr__symres *out, size_t max) {
  Dwarf_Die chain[STKR__SYM_MAX_INLINE];
  Dwarf_Files *files = NULL;
  size_t nfiles = 0, nch, n = 0;

  if (max > STKR__SYM_MAX_INLINE) max = STKR__SYM_MAX_INLINE;
  if (nb->memo && stkr__dwscope_load(&nb->scope, sub))
    return frames_from_scope(nb, cudie, a, file, line, col, join_comp_dir, out,
                             max);
  nch = inline_chain(sub, a, chain, max - 1);
  if (nch) (void)dwarf_getsrcfiles(cudie, &files, &nfiles);
  /* Innermost first: chain[nch-1] is the innermost inlined call; its code
   * is where a is (the line table's line); its call site is the line in
   * the function around it, and so on out to the subprogram. */
  for (size_t k = nch; k-- > 0;) {
    Dwarf_Attribute at;
    Dwarf_Word v;
    if (join_comp_dir) file = stkr__dw_full_path(nb, cudie, file, n);
    out[n] = (stkr__symres){die_name(nb, &chain[k], n), file,
                            line > 0 ? (uint32_t)line : 0,
                            col > 0 ? (uint32_t)col : 0, true};
    n++;
    file = NULL;
    line = col = 0;
    if (dwarf_formudata(dwarf_attr(&chain[k], DW_AT_call_file, &at), &v) == 0 &&
        files)
      file = dwarf_filesrc(files, v, NULL, NULL);
    if (dwarf_formudata(dwarf_attr(&chain[k], DW_AT_call_line, &at), &v) == 0)
      line = (int)v;
    if (dwarf_formudata(dwarf_attr(&chain[k], DW_AT_call_column, &at), &v) == 0)
      col = (int)v;
  }
  if (join_comp_dir) file = stkr__dw_full_path(nb, cudie, file, n);
  out[n] = (stkr__symres){die_name(nb, sub, n), file,
                          line > 0 ? (uint32_t)line : 0,
                          col > 0 ? (uint32_t)col : 0, false};
  return n + 1;
}

/* ---- the symbol cache build's address list ---------------------------- */

void stkr__addrs_add(stkr__addrs *a, uint64_t x) {
  if (a->n == a->cap &&
      stkr__grow_big((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v) != 0) {
    a->nomem = true;
    return;
  }
  a->v[a->n++] = x;
}

#define HUGE_PAGE ((size_t)2 << 20)

void stkr__huge_hint(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  /* Only the whole 2 MB pages inside the array: glibc serves an array this
   * large from an mmap of its own, so nothing else shares them. */
  uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
  if (bytes >= 2 * HUGE_PAGE && hi > lo)
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

int stkr__grow_big(void **p, size_t *cap, size_t need, size_t size) {
  size_t old = *cap;
  int rc = stkr_grow(p, cap, need, size);
  if (rc == 0 && *cap != old) stkr__huge_hint(*p, *cap * size);
  return rc;
}

/* ---- whole files (symbolize_dwarf.h) ------------------------------------- */

int stkr__elf_whole(int fd, char *why, size_t cap) {
  struct stat st;
  GElf_Ehdr eh;
  Elf_Scn *scn = NULL;
  size_t shnum = 0;
  uint64_t size;
  Elf *e;
  int rc = -EINVAL;

  if (fstat(fd, &st) != 0) return -errno;
  size = (uint64_t)st.st_size;
  (void)elf_version(EV_CURRENT);
  e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (e == NULL || elf_kind(e) != ELF_K_ELF || gelf_getehdr(e, &eh) == NULL) {
    snprintf(why, cap, "not an ELF file");
    rc = -ENOEXEC;
  } else if (eh.e_phnum != 0 &&
           (eh.e_phoff > size ||
            (uint64_t)eh.e_phnum * eh.e_phentsize > size - eh.e_phoff))
    snprintf(why, cap, "its program headers end past its %llu bytes", (unsigned long long)size);
  /* The header's own count (libelf counts no section of a table outside
   * the file); 0 with a table: extended numbering, section 0 holds it. */
  else if ((shnum = eh.e_shnum) == 0 && eh.e_shoff != 0 &&
           elf_getshdrnum(e, &shnum) != 0)
    snprintf(why, cap, "its section count lies past its end");
  else if (eh.e_shoff != 0 &&
           (eh.e_shoff > size ||
            (uint64_t)(shnum ? shnum : 1) * eh.e_shentsize >
                size - eh.e_shoff))
    snprintf(why, cap, "its section headers end past its %llu bytes", (unsigned long long)size);
  else {
    rc = 0;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type == SHT_NOBITS)
        continue;
      if (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset) {
        snprintf(why, cap, "section %zu ends past its %llu bytes",
                 elf_ndxscn(scn), (unsigned long long)size);
        rc = -EINVAL;
        break;
      }
    }
  }
  if (e != NULL) elf_end(e);
  return rc;
}

#endif /* !__APPLE__ */
