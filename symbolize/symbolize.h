/*
 * symbolize.h: turning recorded PCs into frames (function, file:line,
 * inlined calls), once per unique PC. Used by the flush worker (inproc mode,
 * on the worker thread only: never on a hook's thread, never per event) and
 * by `stackrec symbolize` (offline mode, after the run).
 *
 * Two layers:
 *  - a backend resolves one PC against an image list (symbolize_elf.c with
 *    elfutils libdw; symbolize_apple.c with _NSCallStackArray / dladdr);
 *  - the frame cache (symbolize.c) calls the backend once per unique PC,
 *    interns every string, numbers frames, and hands each stack its list of
 *    frame ids. It also knows which StringDefs / FrameDefs a segment
 *    ("epoch", see flush/drain.c) still lacks, so that every segment is
 *    self-contained like the site/thread/stack definitions.
 *
 * Thread-safety: none; one thread owns a cache and its backend.
 */
#ifndef STKR_SYMBOLIZE_H
#define STKR_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stackrec.pb-c.h"

/* Most frames one PC may expand to (inlined calls + the real one); deeper
 * inline chains keep their innermost STKR__SYM_MAX_INLINE - 1 calls and the
 * containing function. */
#define STKR__SYM_MAX_INLINE 16

/* Bits of a user-space address on Apple arm64 (47); the bits above are
 * pointer authentication's on arm64e (atos clears them). Not Linux
 * aarch64's: its user space may use bit 47. */
#define STKR__USER_VA_BITS 47

/* One image to resolve PCs in. Strings and bytes are borrowed for the
 * duration of stkr__symbe_set_images() only (the backend copies). The
 * addresses may be moved from the recorded ones by one delta (`stackrec
 * symbolize` puts each image in a range of its own): ELF PCs are looked
 * up at the file's address PC - load_address, in a PIE or shared library
 * and in a non-PIE (ET_EXEC) file alike (recorded with a load bias of 0). */
typedef struct stkr__symimg {
  const char *path;
  uint64_t load_address; /* ELF: the load bias; Mach-O: the slid __TEXT */
  uint64_t text_start, text_end;
  const uint8_t *build_id;
  size_t build_id_len;
  bool app;
} stkr__symimg;

/* One frame as the backend resolved it. Strings stay valid until the next
 * call on the backend (the cache copies them at once). */
typedef struct stkr__symres {
  const char *function; /* demangled; NULL: unknown */
  const char *file;     /* NULL: unknown */
  uint32_t line, column;
  bool inlined;
} stkr__symres;

/* Called once per image the backend cannot use (no file with the right
 * build-id, unreadable, ...): `why` names the file and the reason. Frames
 * in that image keep image+offset, never a guessed name. */
typedef void (*stkr__sym_warn_fn)(void *arg, const char *why);

/* ---- backend ------------------------------------------------------------ */
typedef struct stkr__symbe stkr__symbe;

typedef struct stkr__symbe_opts {
  /* Extra directories holding separate debug files (<dir>/.build-id/xx/
   * yyyy.debug, or by .gnu_debuglink name) and binaries by build-id
   * (<dir>/.build-id/xx/yyyy, or <dir>/<basename of the image>), searched
   * before the image's own path and /usr/lib/debug. */
  const char *const *debug_dirs;
  size_t n_debug_dirs;
  /* Offline: a file at the recorded path is used only if its build-id
   * matches; the recording process's own images are trusted as mapped
   * (but still checked when they have a build-id). */
  bool offline;
  stkr__sym_warn_fn warn; /* NULL: no warnings */
  void *warn_arg;
  /* Relative source file names get the CU's DW_AT_comp_dir in front (as
   * llvm-symbolizer prints them; `stackrec atos`). Default: as compiled. */
  bool full_paths;
  /* Never look for separate debug files (/usr/lib/debug, debug dirs,
   * debuginfod): names come from the images' symbol tables, file:line
   * only where an image carries its own DWARF. Decompressing a system
   * library's debug info costs tens of milliseconds (libc: ~50 ms);
   * `stackrec snapshot --fast` skips it. */
  bool no_separate_debug;
  /* A directory of symbol caches (<hex build-id>.stkrsym, symcache.c):
   * an ELF image whose build-id has one there is answered from it, its
   * DWARF never read (the answers are the same). A damaged cache or one
   * of another build is refused with a warning, and the DWARF used. Not
   * with full_paths (caches hold file names as compiled). NULL: none. */
  const char *symcache_dir;
  /* A directory the images' paths are seen from (`stackrec snapshot`:
   * /proc/PID/root, the target's own view in a container): an image's
   * file is tried there first, after the debug dirs, its build-id checked
   * as at its own path (QA, session 39: a container's binaries were
   * looked for at the host's path, and got no names). NULL: none. */
  const char *root;
} stkr__symbe_opts;

/* @return 0, -ENOMEM, or -ENOTSUP where no backend exists. *out owned by
 * the caller; free with stkr__symbe_free (NULL accepted). */
int stkr__symbe_create(const stkr__symbe_opts *opts, stkr__symbe **out);
void stkr__symbe_free(stkr__symbe *be);
/* Replace the image list. Images seen before (same path, load address and
 * build-id) keep their loaded symbols. @return 0 or -ENOMEM (old list kept).
 * *removed is set when an image of the old list is gone (PCs cached for it
 * may mean something else now). */
int stkr__symbe_set_images(stkr__symbe *be, const stkr__symimg *imgs, size_t n,
                           bool *removed);
/* The ELF images this backend answered from their DWARF (a file found,
 * DWARF in it or in a debug file, no symbol cache), for filling a cache
 * directory: fn(arg, image, the file read) for each. */
void stkr__symbe_each_from_dwarf(stkr__symbe *be,
                                 void (*fn)(void *arg, const stkr__symimg *img,
                                            const char *file),
                                 void *arg);
/* Images answered from a symbol cache so far. */
size_t stkr__symbe_cached(const stkr__symbe *be);
/* Resolve the return address `pc`: the image containing it (NULL: none) and
 * up to `max` frames, innermost first (inlined calls, then the containing
 * function). @return the number of frames (0: no symbol information; the
 * caller records image+offset). */
size_t stkr__symbe_resolve(stkr__symbe *be, uint64_t pc,
                           const stkr__symimg **img, stkr__symres *out,
                           size_t max);
/* Is pc in no image, or in one the backend has opened already (its file
 * found, its symbols or debug info loaded)? Then resolving it costs
 * lookups only, never a load: what the flush worker may still do while a
 * session ends (flush/drain_pass.c). */
bool stkr__symbe_opened(const stkr__symbe *be, uint64_t pc);

/* ---- one file by itself: Mach-O (and dSYMs), or ELF (symbolize_macho.c) -- */
/* Used by `stackrec atos` and, for images recorded on Apple platforms
 * (Image.build_id = LC_UUID), by the backend above in offline mode. A
 * Mach-O slice's DWARF (a dSYM's __DWARF sections) is read with libdw
 * through an in-memory ELF image; its symbol table gives names when there
 * is no DWARF. Addresses are the file's own (unslid: __TEXT vmaddr based
 * for Mach-O, p_vaddr for ELF). */
typedef struct stkr__symfile stkr__symfile;

typedef struct stkr__symfile_info {
  bool macho;
  const char *arch;      /* Mach-O: "arm64", "arm64e", "x86_64"; ELF: NULL */
  bool has_uuid;
  uint8_t uuid[16];      /* Mach-O LC_UUID */
  uint64_t text_vmaddr;  /* Mach-O: __TEXT vmaddr; ELF: 0 */
  bool has_dwarf;
  const char *path;      /* the file actually read (inside a .dSYM) */
} stkr__symfile_info;

/* Open `path`: a Mach-O file (thin or universal), a .dSYM bundle
 * directory, or an ELF file. In a universal file the slice is chosen by
 * `uuid` (16 bytes; NULL: any), then by `arch` (NULL: the only slice).
 * @return 0; -ENOENT (no such file, or no slice with that UUID / arch:
 * `err` lists the slices), -EINVAL (malformed: `err` names the offset),
 * -ENOMEM. `err` always names the file. */
int stkr__symfile_open(const char *path, const char *arch, const uint8_t *uuid,
                       stkr__symfile **out, char *err, size_t err_cap);
void stkr__symfile_free(stkr__symfile *f);
void stkr__symfile_get_info(const stkr__symfile *f, stkr__symfile_info *info);
/* The frames of the instruction at `addr` (exact: a return address must be
 * passed as PC - 1), innermost first. @return 0: no symbol there. */
size_t stkr__symfile_lookup(stkr__symfile *f, uint64_t addr,
                            stkr__symres *out, size_t max);
/* A hint, some lookups before stkr__symfile_lookup(f, addr): start
 * loading what that lookup reads. From a large symbol cache a lookup is
 * a chain of cache misses, each needing the one before: step 0 loads the
 * index slot, step 1 the ranges it points at, step 2 the range's frames
 * (each step a few lookups after the one before, when its data has
 * arrived; the lookup then loads the strings). A caller with many
 * addresses in hand (atos on stdin) overlaps their misses instead of
 * waiting for each. Nothing for DWARF. */
void stkr__symfile_prefetch(const stkr__symfile *f, uint64_t addr, int step);

/* ---- the per-build symbol cache (symcache.c, docs/SYMCACHE.md) ---------- */
/* A file <UUID>.stkrsym: the answers of one Mach-O slice's DWARF and
 * symbol table, as sorted address ranges -> frames, read with mmap and
 * checked whole on load. stkr__symfile_open() opens one like a dSYM. */
typedef struct stkr__symcache_stats {
  uint64_t ranges, frames, string_bytes, file_bytes;
  uint64_t dwarf_bytes; /* of the source's __DWARF sections */
  /* "" or a separate debug file found for it but not used, and why (cut
   * short): its DWARF is then missing from the cache (for a warning). */
  char debug_not_used[600];
} stkr__symcache_stats;
/* Write the cache of `f` (a Mach-O symfile, or an ELF file: its DWARF
 * and symbols as the ELF backend reads them, symcache_elf.c) to `path`
 * (created 0644, via a temporary file renamed into place). @return 0,
 * -ENOTSUP (a cache given as input; an ELF file without build-id),
 * -errno; err says what. */
int stkr__symcache_write(stkr__symfile *f, const char *path,
                         stkr__symcache_stats *st, char *err, size_t err_cap);
/* How the build walks the DWARF (symcache_stream.c), for tests that
 * check every way gives the same file: 0 (default) each CU answered as it
 * is read, in two threads, where the DWARF allows, else the whole file
 * first; 1 always the whole file first; 2 as 0, then restarted as 1 after
 * the last CU (the restart path); 3 as 0 in one thread. Not thread-safe:
 * set it before building. After a build, stkr__dw_walk_streamed says how
 * the answers that were kept came: 2 streamed in two threads, 1 in one,
 * 0 from the whole file. */
extern int stkr__dw_walk_mode, stkr__dw_walk_streamed;
/* (Tests) How many frames a cache build keeps in memory before writing
 * them out (and forgetting their chains): 2^18. Not thread-safe: set it
 * before building. */
extern size_t stkr__symcache_frames_kept;
/* The GNU build-id of the ELF file at path into id (cap bytes; 32 is
 * enough). @return its length, -EINVAL (not ELF), -ENOENT (none, or
 * longer than cap), -errno. An ELF build's cache is "<hex id>.stkrsym". */
int stkr__symelf_build_id(const char *path, uint8_t *id, size_t cap);
/* "<hex id>" (no extension) into out (cap >= 2 * len + 1). */
void stkr__symcache_elf_name(const uint8_t *id, size_t len, char *out,
                             size_t cap);
/* The checksum a cache file of len bytes must hold at offset
 * STKR__SYMCACHE_SUM_OFF (docs/SYMCACHE.md); the fuzz target writes it
 * into mutated files. */
uint64_t stkr__symcache_checksum(const uint8_t *file, size_t len);
#define STKR__SYMCACHE_SUM_OFF 96
/* Cache file extension, and the name for an image: "<UUID>.stkrsym". */
#define STKR__SYMCACHE_EXT ".stkrsym"
#define STKR__SYMCACHE_MAGIC "STKRSYM\0"

/* The reader, behind stkr__symfile (and fuzzed alone). */
typedef struct stkr__symcache stkr__symcache;
/* Map and check the whole file open on fd (the caller may close fd
 * after). @return 0, -EINVAL (err names the file, the offset and what is
 * wrong; or that fd is no regular file), -errno. */
int stkr__symcache_open(int fd, const char *path, stkr__symcache **out,
                        char *err, size_t err_cap);
void stkr__symcache_free(stkr__symcache *c);
/* has_uuid/uuid (the build's id), text_vmaddr, arch, has_dwarf. */
void stkr__symcache_info(const stkr__symcache *c, stkr__symfile_info *info);
/* The build's id as stored (a Mach-O UUID: 16 bytes; an ELF build-id;
 * *len 0: none), in the mapped file. */
const uint8_t *stkr__symcache_id(const stkr__symcache *c, size_t *len);
/* The frames stored for addr (a file address), innermost first. */
size_t stkr__symcache_lookup(const stkr__symcache *c, uint64_t addr,
                             stkr__symres *out, size_t max);
/* stkr__symfile_prefetch's work for a cache. */
void stkr__symcache_prefetch(const stkr__symcache *c, uint64_t addr, int step);

/* The Mach-O files (dSYM bundles, .xcarchive/dSYMs, loose and universal
 * binaries) under some directories, indexed by UUID: scanned once. */
typedef struct stkr__machodir stkr__machodir;
/* @return 0 or -ENOMEM. Unreadable entries are skipped. */
int stkr__machodir_scan(const char *const *dirs, size_t n,
                        stkr__machodir **out);
void stkr__machodir_free(stkr__machodir *d);
/* The file for an image with this UUID: a dSYM first, else a binary with
 * it (its symbol table), else the recorded path if it carries the UUID.
 * @return 0; -ENOENT with `why` saying what was found instead (a file of
 * the image's name with another UUID: "UUID mismatch"). */
int stkr__machodir_open(stkr__machodir *d, const char *image_path,
                        const uint8_t uuid[16], stkr__symfile **out,
                        char *why, size_t why_cap);

/* ---- definitions a batch must carry ------------------------------------ */
typedef struct stkr__symdefs {
  Stackrec__StringDef **strings;
  size_t n_strings, cap_strings;
  Stackrec__FrameDef **frames;
  size_t n_frames, cap_frames;
  size_t est_bytes; /* rough encoded size of what was added */
} stkr__symdefs;

void stkr__symdefs_reset(stkr__symdefs *d);
void stkr__symdefs_free(stkr__symdefs *d);

/* ---- frame cache --------------------------------------------------------- */
typedef struct stkr__symc stkr__symc;

/* The cache takes ownership of `be` (freed with the cache). @return 0 or
 * -ENOMEM (be is freed then too). */
int stkr__symc_create(stkr__symbe *be, stkr__symc **out);
void stkr__symc_free(stkr__symc *c);
/* Pass a new image list on to the backend; forgets cached PCs if an image
 * went away (frames already numbered stay valid). 0 or -ENOMEM. */
int stkr__symc_set_images(stkr__symc *c, const stkr__symimg *imgs, size_t n);
/* The frame ids of a stack (see StackDef.frames), in memory owned by the
 * cache that stays valid and unchanged for the cache's life; a list equal
 * to one given before is that same memory (kept once: the cache grows
 * with distinct lists, not calls). Each PC not seen before is resolved
 * (one backend call); known PCs cost a hash lookup.
 * @return 0 or -ENOMEM. */
int stkr__symc_stack(stkr__symc *c, const uint64_t *pcs, size_t n_pcs,
                     const uint32_t **frames, uint32_t *n_frames);
/* Would stkr__symc_stack on these PCs load nothing: is each one cached,
 * or in an image already opened (stkr__symbe_opened)? */
bool stkr__symc_ready(const stkr__symc *c, const uint64_t *pcs, size_t n_pcs);
/* Append to `out` the StringDefs and FrameDefs of `frames` not yet emitted
 * in `epoch`, and mark them emitted. The messages live in the cache: they
 * stay valid while the cache does. @return 0 or -ENOMEM. */
int stkr__symc_emit(stkr__symc *c, const uint32_t *frames, uint32_t n_frames,
                    uint32_t epoch, stkr__symdefs *out);
/* Forget every cached PC (frames already numbered stay valid): the next
 * stacks resolve their PCs again. Used when images go away, and by the
 * benchmark to time fresh resolutions with the modules already open. */
void stkr__symc_forget_pcs(stkr__symc *c);
/* PCs resolved (backend calls) by this cache. */
uint64_t stkr__symc_resolved(const stkr__symc *c);
/* ... of which a function was named for (the others stay image+offset:
 * no file for their image, another build's, a stripped one). */
uint64_t stkr__symc_named(const stkr__symc *c);
/* Distinct frames numbered so far. */
uint64_t stkr__symc_frames(const stkr__symc *c);
/* Does frame `id` (of stkr__symc_stack) name its function? (false for
 * image+offset, and for an id the cache never gave) */
bool stkr__symc_frame_named(const stkr__symc *c, uint32_t id);
/* Does it name its source file? */
bool stkr__symc_frame_has_file(const stkr__symc *c, uint32_t id);

/* PCs resolved by every cache of this process, ever (relaxed counter; the
 * worker's stkr_flush() barrier makes it exact for tests). */
uint64_t stkr__sym_resolved_total(void);

/* ---- Apple's backtrace lines (backtrace_line.c) -------------------------- */
/* The function name in one line of Libc's backtrace format ("<index>
 * <image> 0x<address> <symbol> + <offset>", as _NSCallStackArray writes
 * it), copied into buf (cap bytes). @return buf, or NULL when the line
 * names no function: what Libc writes in a symbol's place when dladdr
 * found none (the image's name, its UUID, "<redacted>", an address, a
 * stripped image's _mh_execute_header), or a name of cap bytes or more.
 * Portable and thread-safe (buf is the caller's). */
const char *stkr__backtrace_line_symbol(const char *line, char *buf,
                                        size_t cap);
/* Is s[0..len) the symbol of a Mach-O header (_mh_execute_header, ...),
 * which dladdr gives for any address of a stripped image? */
bool stkr__backtrace_header_symbol(const char *s, size_t len);

/* ---- demangling (symbolize.c) -------------------------------------------- */
/* Demangle an Itanium C++ name ("_Z...") or a Swift one ("$s", "_$s", "$S",
 * "_T0") into buf. @return buf, or NULL if `name` is not mangled or no
 * demangler is available (libstdc++'s __cxa_demangle, looked up at run
 * time so C apps need not link it; the Swift runtime's swift_demangle,
 * see below). */
const char *stkr__demangle(const char *name, char **buf, size_t *cap);
/* Let stkr__demangle load the Swift runtime (libswiftCore.so: the path in
 * STACKREC_SWIFT_RUNTIME, /opt/swift/usr/lib/swift/linux, the library
 * path). Without this call (the recorder) only a runtime the process has
 * already loaded is used. Call before the first lookup; not thread-safe. */
void stkr__demangle_swift_enable(void);
/* Swift names left mangled because no runtime was found, so far. */
uint64_t stkr__demangle_swift_missed(void);
/* The runtime used ("(loaded)" if the process had one), or NULL. */
const char *stkr__demangle_swift_runtime(void);

#endif /* STKR_SYMBOLIZE_H */
