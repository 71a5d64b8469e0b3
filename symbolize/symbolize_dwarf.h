/*
 * symbolize_dwarf.h: the DWARF lookups shared by the ELF backend
 * (symbolize_elf.c, DWARF found by libdwfl) and the Mach-O one
 * (symbolize_macho.c, a dSYM's __DWARF sections presented to libdw as an
 * in-memory ELF image): the per-CU index of subprogram ranges and the
 * inline chain of one address. Internal to //symbolize.
 *
 * Thread-safety: none; one thread owns an index and its name buffers.
 */
#ifndef STKR_SYMBOLIZE_DWARF_H
#define STKR_SYMBOLIZE_DWARF_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>

#include "common/stkr_map.h"
#include "symbolize/symbolize.h"

/* Is the ELF file open on fd whole: its program and section header tables
 * and every section with contents in the file within its size? A file cut
 * short (a copy or download interrupted) still reads as ELF and yields
 * fewer symbols or none, without a word (QA, session 26: `symcache build`
 * wrote an empty cache that then hid the real debug info; atos printed
 * bare addresses, exit 0). @return 0, -ENOEXEC (not ELF at all), or
 * -EINVAL with why (what lies past the end) in why. */
int stkr__elf_whole(int fd, char *why, size_t cap);

/* ---- separate debug files ----------------------------------------------
 * libdwfl's find_debuginfo callback, for every libdwfl user of ours (the
 * ELF backend in every mode, the symbol cache build): what
 * dwfl_standard_find_debuginfo does, locally only and regular files only.
 * In order: <dir>/.build-id/xx/yyyy.debug for every debug dir, then
 * /usr/lib/debug; then the .gnu_debuglink name next to the binary, in its
 * .debug/, and under every debug dir and /usr/lib/debug followed by the
 * binary's directory. A file found by name must carry the module's
 * build-id. Not done: asking debuginfod servers (DEBUGINFOD_URLS) over the
 * network, which must never happen inside a recorded app (and made a tool
 * run wait on the network); and opening anything but a regular file: a
 * FIFO among those paths blocked libdw's own open forever.
 * The module's userdata (dwfl_module_info's) must point to a
 * stkr__debug_dirs, or be NULL: no debug dirs. */
typedef struct stkr__debug_dirs {
  char **dirs;
  size_t n;
  /* NULL, or where the first debug file found but not used (cut short) is
   * named, with why: `symcache build` warns of it. */
  char *not_used;
  size_t not_used_cap;
} stkr__debug_dirs;
int stkr__find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **out);

typedef struct stkr__dwfn stkr__dwfn;
typedef struct stkr__dwcu stkr__dwcu;

/* Subprogram ranges of the CUs looked at so far, built once per CU. */
typedef struct stkr__dwcurange stkr__dwcurange;

typedef struct stkr__dwidx {
  Dwarf *dw;
  stkr__dwcu *cus; /* sorted by CU offset */
  size_t n_cus, cap_cus;
  /* Every CU's address ranges, sorted by start (stkr__dw_cu_of), built on
   * first use: for DWARF without .debug_aranges (dSYMs, clang and swiftc
   * output), where libdw's dwarf_addrdie finds nothing. */
  stkr__dwcurange *ranges;
  size_t n_ranges;
  bool ranges_built;
  /* The last answer of stkr__dw_find_subprogram and the addresses of its
   * CU that get the same one ([hit_lo, hit_hi)): addresses asked in order
   * skip the search and dwarf_offdie. (Written for the symbol cache
   * build's lookups; the build now walks each CU once, symcache_walk.c.) */
  bool hit_valid;
  Dwarf_Off hit_cu;
  Dwarf_Addr hit_lo, hit_hi;
  Dwarf_Die hit_die;
} stkr__dwidx;

/* The scope tree of the last subprogram looked up, kept in memory
 * (symbolize_dwscope.c): consecutive addresses of one subprogram walk it
 * instead of the DIEs. */
typedef struct stkr__dwscope_node stkr__dwscope_node;
typedef struct stkr__dwscope_range stkr__dwscope_range;
typedef struct stkr__dwscope {
  Dwarf_Off sub; /* the subprogram DIE it holds, when valid */
  bool valid;
  Dwarf_Off last_asked; /* the subprogram of the previous lookup */
  stkr__dwscope_node *nodes; /* [0] is the subprogram */
  size_t n_nodes, cap_nodes;
  stkr__dwscope_range *ranges;
  size_t n_ranges, cap_ranges;
} stkr__dwscope;

/* The demangled names of the current resolve, one buffer per frame slot. */
typedef struct stkr__dwnames {
  char *buf[STKR__SYM_MAX_INLINE];
  size_t cap[STKR__SYM_MAX_INLINE];
  char *path[STKR__SYM_MAX_INLINE]; /* file names joined to comp_dir */
  size_t path_cap[STKR__SYM_MAX_INLINE];
  /* With memo set (the Mach-O files: their strings are mapped for the
   * handle's life), demangled names are kept by the address of the mangled
   * one: each distinct function is demangled once. */
  bool memo;
  stkr_map memo_tab; /* mangled (by address) -> its demangled copy (char *),
                       * 0 when not mangled (the name as it is) */
  /* Also only with memo (one Dwarf per stkr__dwnames, so a DIE offset
   * names one subprogram; the libdw strings it points to stay mapped). */
  stkr__dwscope scope;
} stkr__dwnames;

void stkr__dwidx_free(stkr__dwidx *ix);  /* not dw itself */
void stkr__dwnames_free(stkr__dwnames *nb);

/* The CU whose ranges contain DWARF address a (from the CU DIEs' low_pc /
 * high_pc / DW_AT_ranges, not .debug_aranges). @return false: none. */
bool stkr__dw_cu_of(stkr__dwidx *ix, Dwarf_Addr a, Dwarf_Die *cudie);

/* The line table row of DWARF address a in the CU: file (joined to
 * comp_dir if join_comp_dir), line, column; NULL / 0 when unknown. */
const char *stkr__dw_line(stkr__dwnames *nb, Dwarf_Die *cudie, Dwarf_Addr a,
                          bool join_comp_dir, int *line, int *col);

/* The subprogram DIE whose code contains DWARF address a, in the CU
 * `cudie`. @return false: none (or out of memory). */
bool stkr__dw_find_subprogram(stkr__dwidx *ix, Dwarf_Die *cudie,
                              Dwarf_Addr a, Dwarf_Die *out);

/* The frames of DWARF address a inside subprogram `sub`: the inlined
 * calls containing it, innermost first, then `sub` itself; the innermost
 * gets (file, line, col) (the line table's row for a), each outer one the
 * call site of the one inside it. out[n-1].function is NULL when the
 * subprogram has no name (the caller may ask its symbol table). With
 * join_comp_dir, relative file names get the CU's DW_AT_comp_dir in front
 * (as llvm-symbolizer does; dsymutil writes relative include directories).
 * Strings live in nb and libdw until the next call. @return n (1..max). */
size_t stkr__dw_frames(stkr__dwnames *nb, Dwarf_Die *cudie, Dwarf_Die *sub,
                       Dwarf_Addr a, const char *file, int line, int col,
                       bool join_comp_dir, stkr__symres *out, size_t max);

/* `file` with the CU's comp_dir in front if it is relative (in nb's path
 * slot), else itself. */
const char *stkr__dw_full_path(stkr__dwnames *nb, Dwarf_Die *cudie,
                               const char *file, size_t slot);

/* A symbol name demangled into nb's slot (C++, Swift), else itself. */
const char *stkr__dw_sym_name(stkr__dwnames *nb, const char *n, size_t slot);
/* The name of a function DIE without a linkage name: DW_AT_name, and for a
 * C++ member defined from its declaration (DW_AT_specification) the
 * declaration's namespaces and classes before it: GCC gives no linkage
 * name to what has internal linkage, so `(anonymous namespace)::Camera::
 * read()` and `Contacts::read()` were both "read" (QA, session 30). In nb's
 * slot, or a string of the DWARF; NULL: no name. */
const char *stkr__dw_plain_name(stkr__dwnames *nb, Dwarf_Die *die, size_t slot);

/* Load the scope tree of subprogram `sub` (kept until another is loaded)
 * when the previous lookup was in `sub` too. @return false when it was
 * not, or when out of memory: the caller walks the DIEs. */
bool stkr__dwscope_load(stkr__dwscope *s, Dwarf_Die *sub);
/* The inlined calls holding a, outermost first (the DIE walk's rule).
 * @return how many (at most max). */
size_t stkr__dwscope_chain(const stkr__dwscope *s, Dwarf_Addr a,
                           const stkr__dwscope_node **chain, size_t max);
const stkr__dwscope_node *stkr__dwscope_root(const stkr__dwscope *s);
/* A node's function name as die_name() gives it (demangled via nb). */
const char *stkr__dwscope_name(stkr__dwnames *nb, const stkr__dwscope_node *nd,
                               size_t slot);
/* An inlined call's call site. @return whether it names a file. */
bool stkr__dwscope_call(const stkr__dwscope_node *nd, Dwarf_Word *file,
                        int *line, int *col);
void stkr__dwscope_free(stkr__dwscope *s);

/* A growable list of addresses (symbol cache build). */
typedef struct stkr__addrs {
  uint64_t *v;
  size_t n, cap;
  bool nomem;
} stkr__addrs;
void stkr__addrs_add(stkr__addrs *a, uint64_t x);

/* stkr_grow for the symbol cache build's large arrays (tens of MB on a
 * 100 MB dSYM): also asks the kernel for transparent huge pages over the
 * array (madvise, a hint; nothing if refused), so that filling it takes
 * one page fault per 2 MB instead of one per 4 KB and random accesses
 * (the chain table) miss the TLB less. @return as stkr_grow. */
int stkr__grow_big(void **p, size_t *cap, size_t need, size_t size);
/* The same hint for an array allocated elsewhere (bytes from p). */
void stkr__huge_hint(void *p, size_t bytes);

/* Tags the DIE walks share (symbolize_dwarf.c): a scope that may hold
 * functions (namespaces, classes), and a scope inside a function that an
 * inline chain goes through (inlined calls, blocks). */
bool stkr__dw_holds_functions(int tag);
bool stkr__dw_is_scope(int tag);

/* ---- the symbol cache build (symcache_walk.c) ---- */

/* A symbol of a Mach-O slice: [lo, hi), its name (no leading '_'). */
typedef struct stkr__symspan {
  uint64_t lo, hi;
  const char *name;
} stkr__symspan;

/* A frame with its strings interned (ids from ops->intern; UINT32_MAX:
 * unknown). */
typedef struct stkr__symframe {
  uint32_t function, file, line, column;
  uint32_t inlined; /* 1: an inlined call (a word: no padding, so frames
                     * compare with memcmp) */
} stkr__symframe;

typedef struct stkr__symwalk_ops {
  /* s (not NULL) -> its id; UINT32_MAX when out of memory. s is only
   * valid during the call. */
  uint32_t (*intern)(void *arg, const char *s);
  /* The frames of [start, next start) (n may be 0), in address order;
   * an interval that answers as the one before is not given (that one
   * goes on). @return 0, or a negative errno that stops the walk. */
  int (*range)(void *arg, uint64_t start, const stkr__symframe *fr, size_t n);
  /* Called once before the first range: about n ranges will come (a
   * hint for sizing tables). @return 0 or a negative errno. */
  int (*expect)(void *arg, size_t n);
  void *arg;
  /* Forget every range given so far: the walk starts again from the
   * first (then calls expect again). NULL: the walk never restarts, and
   * reads the whole file before the first range (more memory). @return 0
   * or a negative errno that stops the walk. */
  int (*restart)(void *arg);
  /* File names as libdw gives them (what the ELF backend shows without
   * full_paths: `snapshot`, `symbolize`), not joined to comp_dir as the
   * Mach-O lookup joins them (twice; a no-op unless comp_dir is relative,
   * as in Debian's libc: "./csu"). */
  bool as_compiled;
  /* Optional (NULL: intern only). intern with s's length and its
   * stkr_hash_bytes(STKR_HASH_SEED, s, len), computed by the caller; and
   * a hint that a string of hash h comes soon (its table slot is
   * prefetched). In threads, the readers hash their strings, and the
   * answering thread interns each CU's new ones ahead, prefetching. */
  uint32_t (*intern_hashed)(void *arg, const char *s, size_t len, uint64_t h);
  void (*intern_soon)(void *arg, uint64_t h);
} stkr__symwalk_ops;

/* Cut [lo, hi) at every address where an answer of stkr__symfile_lookup
 * may change (each line-table row and end of sequence, both ends of every
 * range of every CU, subprogram, inlined subroutine and block, every
 * symbol's start and end) and give each interval's frames, the ones that
 * lookup gives at any address in it, to ops->range: one pass over the
 * DWARF (dw may be NULL: symbols only). @return 0, -ENOMEM, or what
 * ops->range returned. */
int stkr__dw_walk(Dwarf *dw, const stkr__symspan *syms, size_t n_syms,
                  uint64_t lo, uint64_t hi, const stkr__symwalk_ops *ops);

/* stkr__dw_walk over a Mach-O symfile (symbolize_macho.c): its DWARF and
 * symbols over its __TEXT; *hi: the end of __TEXT. @return as
 * stkr__dw_walk, or -ENOTSUP (not a Mach-O file). */
int stkr__symfile_walk(stkr__symfile *f, const stkr__symwalk_ops *ops,
                       uint64_t *hi);

/* The function symbols of a libdwfl module (symbolize_elf.c): named,
 * sized, defined STT_FUNC / STT_GNU_IFUNC, at absolute addresses, sorted
 * by start (the larger first at equal starts). *out malloc'd (NULL when
 * none). @return 0 or -ENOMEM. */
struct Dwfl_Module;
int stkr__dwfl_func_syms(struct Dwfl_Module *mod, stkr__symspan **out,
                         size_t *n);
/* The ELF backend's symbol for address a among those: the first of the
 * nearest 8 starting at or below a that contains it. NULL: none. */
const char *stkr__symspan_find(const stkr__symspan *s, size_t n, uint64_t a);

/* What stkr__symelf_walk found (symcache_elf.c). */
typedef struct stkr__symelf_out {
  uint8_t id[32]; /* the GNU build-id */
  size_t id_len;
  uint64_t lo, hi; /* the executable segments' span (file addresses) */
  uint64_t dwarf_bytes; /* of the .debug_ sections, as stored */
  bool has_dwarf;
  char debug_not_used[600]; /* as stkr__symcache_stats' */
} stkr__symelf_out;

/* stkr__dw_walk over the ELF file at path, its DWARF found as the ELF
 * backend finds it (in the file, or a separate debug file by build-id or
 * .gnu_debuglink) and its symbol table cut so that the walk answers as
 * the backend does. @return as stkr__dw_walk, or -ENOTSUP (no build-id,
 * no executable segment), -EINVAL (not ELF), -errno; err says what. */
int stkr__symelf_walk(const char *path, const stkr__symwalk_ops *ops,
                      stkr__symelf_out *out, char *err, size_t err_cap);

/* Bytes of a Mach-O symfile's __DWARF sections (0 otherwise). */
uint64_t stkr__symfile_dwarf_bytes(const stkr__symfile *f);

/* Has the backend opened any of its images? (symbolize_elf.c; used by
 * stkr__symfile_open to tell an ELF file from an unreadable one.) */
bool stkr__symbe_usable(const stkr__symbe *be);

#endif /* STKR_SYMBOLIZE_DWARF_H */
