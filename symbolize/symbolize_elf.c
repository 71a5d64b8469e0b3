/*
 * symbolize_elf.c: the ELF backend of the symbolizer (see symbolize.h),
 * with elfutils libdw.
 *
 * Per PC (a return address, so everything is looked up at PC - 1):
 *  1. the image containing it (binary search of the image list);
 *  2. that image's module, opened on first use: its file is found by
 *     build-id (debug dirs' .build-id/xx/yyyy[.debug], a file of the same
 *     name there, then the recorded path) and used only when its build-id
 *     matches the recorded one, so a rebuilt or replaced binary never gives
 *     a wrong name; libdw then finds the DWARF in it, or in a separate
 *     debug file by build-id or .gnu_debuglink;
 *  3. with DWARF (symbolize_dwarf.c, shared with the Mach-O backend): the
 *     CU by address (libdw's aranges), then our own per-CU
 *     index of subprogram ranges (built once per CU; libdw's
 *     dwarf_getscopes would walk every top-level DIE of the CU, including
 *     whole C++ namespaces, for every PC), then down the one matching
 *     subprogram through the inlined_subroutine DIEs that contain the PC:
 *     one frame per inlined call, innermost first, each with the call site
 *     of the one inside it (DW_AT_call_file/line/column), the innermost with
 *     the line table's file:line;
 *  4. without DWARF (stripped, no debug file): the symbol table (.symtab,
 *     else .dynsym / MiniDebugInfo as libdw finds them), sorted once per
 *     module and binary-searched (libdw's dwfl_module_addrname scans it
 *     linearly).
 * Names are demangled C++ linkage names when present, else DW_AT_name.
 *
 * Only compiled where there is no dyld (symbolize_apple.c has Apple's).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdarg.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hex.h"
#include "common/stkr_io.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"

typedef struct mod {
  stkr__symimg img;  /* path and build_id owned */
  bool tried, usable;
  Dwfl *dwfl;
  Dwfl_Module *m;
  Dwarf *dw;
  Dwarf_Addr dwbias;
  /* Image address - module address: what every PC loses before libdw sees
   * it. 0 but for an ET_EXEC file given a load address of its own: libdw
   * places an ET_EXEC module at its link-time addresses whatever base it
   * is reported at, while `stackrec symbolize` moves every image to a
   * canonical range (tools/stackrec/symbolize_canon.c), so the PCs of a
   * non-PIE main program (Debian's python3.11) arrive 2^62 above it. */
  uint64_t shift;
  /* Function symbols: absolute addresses; names in libdw's string table,
   * stable for the module. */
  stkr__symspan *syms;
  size_t n_syms;
  bool syms_built;
  stkr__dwidx ix; /* subprogram ranges per CU (symbolize_dwarf.c) */
  /* An image recorded on an Apple platform (build_id = LC_UUID), found
   * as a dSYM or Mach-O file by symbolize_machodir.c; NULL: ELF. */
  stkr__symfile *mf;
  uint64_t mf_text_vmaddr;
  /* The image's symbol cache (opts.symcache_dir), or NULL. */
  stkr__symcache *cache;
  char *file; /* the ELF file read (for stkr__symbe_each_from_dwarf) */
} mod;

struct stkr__symbe {
  mod **mods; /* sorted by text_start */
  size_t n;
  char *debug_path; /* libdw's debuginfo_path */
  Dwfl_Callbacks cb;
  char **dirs;
  size_t n_dirs;
  stkr__debug_dirs dd; /* dirs, n_dirs: stkr__find_debuginfo's userdata */
  bool offline, full_paths;
  stkr__sym_warn_fn warn;
  void *warn_arg;
  stkr__dwnames names; /* demangled names of the current resolve */
  stkr__machodir *machodir; /* the debug dirs' Mach-O files, scanned once */
  bool machodir_scanned;
  char *symcache_dir; /* opts.symcache_dir, or NULL */
  char *root;         /* opts.root, or NULL */
};

static void warnf(stkr__symbe *be, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warnf(stkr__symbe *be, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  if (!be->warn) return;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  be->warn(be->warn_arg, buf);
}

/* ---- separate debug files, locally only ---------------------------------- */

/* Does the ELF file open on fd carry build-id (bid, len)? */
static bool fd_has_build_id(int fd, const uint8_t *bid, size_t len) {
  const void *got = NULL;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  ssize_t n = e ? dwelf_elf_gnu_build_id(e, &got) : -1;
  bool ok = n == (ssize_t)len && len > 0 && memcmp(got, bid, len) == 0;
  if (e) elf_end(e);
  return ok;
}

static int try_debug(const stkr__debug_dirs *dd, const char *path,
                     const uint8_t *bid, size_t len, char **found) {
  char why[128];
  int fd = stkr_open_regular_high(path, 0);
  if (fd < 0) return -1;
  if (stkr__elf_whole(fd, why, sizeof why) != 0) { /* not this one */
    if (dd != NULL && dd->not_used != NULL && dd->not_used[0] == '\0')
      snprintf(dd->not_used, dd->not_used_cap, "%s: cut short: %s", path,
               why);
    close(fd);
    return -1;
  }
  /* A debug file by name must still be the one for this build. */
  if (len && !fd_has_build_id(fd, bid, len)) {
    close(fd);
    return -1;
  }
  *found = strdup(path);
  return fd;
}

int stkr__find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **out) {
  const stkr__debug_dirs *dd = userdata ? *userdata : NULL;
  size_t n_dirs = dd ? dd->n : 0;
  const unsigned char *bits = NULL;
  GElf_Addr vaddr;
  int len = dwfl_module_build_id(mod, &bits, &vaddr), fd = -1;
  char path[4096], hexid[2 * 64 + 1] = "", dir[2048] = ".";
  (void)modname;
  (void)base;
  (void)debuglink_crc;
  if (len > 0) stkr_hex(hexid, sizeof hexid, bits, (size_t)len);
  if (file_name) {
    const char *slash = strrchr(file_name, '/');
    if (slash)
      snprintf(dir, sizeof dir, "%.*s", (int)(slash - file_name), file_name);
  }
  for (size_t i = 0; len > 1 && fd < 0 && i <= n_dirs; i++) {
    snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug",
             i < n_dirs ? dd->dirs[i] : "/usr/lib/debug", hexid, hexid + 2);
    fd = try_debug(dd, path, bits, (size_t)len, out);
  }
  for (size_t k = 0; fd < 0 && debuglink_file && k < 3 + n_dirs; k++) {
    if (k < 2)
      snprintf(path, sizeof path, k ? "%s/.debug/%s" : "%s/%s", dir,
               debuglink_file);
    else /* a debug root, then the binary's absolute directory */
      snprintf(path, sizeof path, "%s%s/%s",
               k - 2 < n_dirs ? dd->dirs[k - 2] : "/usr/lib/debug", dir,
               debuglink_file);
    if (file_name && strcmp(path, file_name) == 0) continue; /* itself */
    fd = try_debug(dd, path, bits, len > 0 ? (size_t)len : 0, out);
  }
  return fd;
}

/* ---- create / free ------------------------------------------------------- */

static void mod_free(mod *m) {
  if (!m) return;
  if (m->dwfl) dwfl_end(m->dwfl);
  free((char *)m->img.path);
  free((uint8_t *)m->img.build_id);
  free(m->syms);
  stkr__dwidx_free(&m->ix);
  stkr__symfile_free(m->mf);
  stkr__symcache_free(m->cache);
  free(m->file);
  free(m);
}

/* stkr__symbe_opts.no_separate_debug: no debug file is ever found. */
static int no_find_debuginfo(Dwfl_Module *mod, void **userdata,
                             const char *modname, Dwarf_Addr base,
                             const char *file_name,
                             const char *debuglink_file,
                             GElf_Word debuglink_crc, char **out) {
  (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
  (void)debuglink_file, (void)debuglink_crc;
  *out = NULL;
  return -1;
}

int stkr__symbe_create(const stkr__symbe_opts *o, stkr__symbe **out) {
  stkr__symbe *be = calloc(1, sizeof *be);
  static const char tail[] = ":.debug:/usr/lib/debug";
  size_t len = sizeof tail;

  *out = NULL;
  if (!be) return -ENOMEM;
  (void)elf_version(EV_CURRENT);
  if (o) {
    be->offline = o->offline;
    be->full_paths = o->full_paths;
    be->warn = o->warn;
    be->warn_arg = o->warn_arg;
    if (o->symcache_dir && !o->full_paths &&
        !(be->symcache_dir = strdup(o->symcache_dir)))
      goto nomem;
    if (o->root && !(be->root = strdup(o->root)))
      goto nomem;
    if (o->n_debug_dirs) {
      be->dirs = calloc(o->n_debug_dirs, sizeof *be->dirs);
      if (!be->dirs) goto nomem;
      for (size_t i = 0; i < o->n_debug_dirs; i++) {
        if (!(be->dirs[i] = strdup(o->debug_dirs[i]))) goto nomem;
        be->n_dirs++;
        len += strlen(o->debug_dirs[i]) + 1;
      }
    }
  }
  /* "dir1:dir2::.debug:/usr/lib/debug": libdw looks for build-id files
   * under every absolute element, for .gnu_debuglink names in the binary's
   * own directory (the empty element), ./.debug and /usr/lib/debug. */
  if (!(be->debug_path = malloc(len))) goto nomem;
  be->debug_path[0] = '\0';
  for (size_t i = 0; i < be->n_dirs; i++) {
    strcat(be->debug_path, be->dirs[i]);
    strcat(be->debug_path, ":");
  }
  strcat(be->debug_path, tail + (be->n_dirs ? 0 : 1));
  /* find_elf is never used: every module is reported with its open file. */
  be->cb.find_elf = dwfl_build_id_find_elf;
  be->dd.dirs = be->dirs;
  be->dd.n = be->n_dirs;
  be->cb.find_debuginfo = o && o->no_separate_debug ? no_find_debuginfo
                                                    : stkr__find_debuginfo;
  be->cb.section_address = dwfl_offline_section_address;
  be->cb.debuginfo_path = &be->debug_path;
  *out = be;
  return 0;
nomem:
  stkr__symbe_free(be);
  return -ENOMEM;
}

void stkr__symbe_free(stkr__symbe *be) {
  if (!be) return;
  for (size_t i = 0; i < be->n; i++) mod_free(be->mods[i]);
  free(be->mods);
  for (size_t i = 0; i < be->n_dirs; i++) free(be->dirs[i]);
  stkr__dwnames_free(&be->names);
  stkr__machodir_free(be->machodir);
  STKR_FREE_ALL(be->dirs, be->debug_path, be->symcache_dir, be->root, be);
}

static bool same_img(const stkr__symimg *a, const stkr__symimg *b) {
  return a->load_address == b->load_address && a->text_start == b->text_start &&
         a->text_end == b->text_end && strcmp(a->path, b->path) == 0 &&
         a->build_id_len == b->build_id_len &&
         (a->build_id_len == 0 ||
          memcmp(a->build_id, b->build_id, a->build_id_len) == 0);
}

static int cmp_mod(const void *a, const void *b) {
  const mod *x = *(mod *const *)a, *y = *(mod *const *)b;
  return x->img.text_start < y->img.text_start ? -1
         : x->img.text_start > y->img.text_start ? 1 : 0;
}

int stkr__symbe_set_images(stkr__symbe *be, const stkr__symimg *imgs, size_t n,
                           bool *removed) {
  mod **nm = calloc(n ? n : 1, sizeof *nm);
  bool *kept = calloc(be->n ? be->n : 1, sizeof *kept);
  size_t k = 0;

  *removed = false;
  if (!nm || !kept) goto nomem;
  for (size_t i = 0; i < n; i++) {
    const stkr__symimg *im = &imgs[i];
    mod *m = NULL;
    if (im->text_end <= im->text_start) continue; /* nothing to resolve in */
    for (size_t j = 0; j < be->n; j++)
      if (!kept[j] && same_img(&be->mods[j]->img, im)) {
        m = be->mods[j];
        kept[j] = true;
        m->img.app = im->app;
        break;
      }
    if (!m) {
      if (!(m = calloc(1, sizeof *m))) goto nomem;
      m->img = *im;
      m->img.path = strdup(im->path ? im->path : "");
      m->img.build_id = NULL;
      if (im->build_id_len) {
        uint8_t *b = malloc(im->build_id_len);
        if (b) memcpy(b, im->build_id, im->build_id_len);
        m->img.build_id = b;
      }
      if (!m->img.path || (im->build_id_len && !m->img.build_id)) {
        mod_free(m);
        goto nomem;
      }
    }
    nm[k++] = m;
  }
  for (size_t j = 0; j < be->n; j++)
    if (!kept[j]) {
      mod_free(be->mods[j]);
      *removed = true;
    }
  qsort(nm, k, sizeof *nm, cmp_mod);
  free(be->mods);
  free(kept);
  be->mods = nm;
  be->n = k;
  return 0;
nomem:
  /* Undo: new modules (not in the old list) are freed; old ones stay. */
  if (nm)
    for (size_t i = 0; i < k; i++) {
      bool old = false;
      for (size_t j = 0; j < be->n && !old; j++) old = be->mods[j] == nm[i];
      if (!old) mod_free(nm[i]);
    }
  free(nm);
  free(kept);
  return -ENOMEM;
}

/* ---- opening a module ---------------------------------------------------- */

typedef enum { BID_MATCH, BID_NOFILE, BID_MISMATCH, BID_NONE, BID_CUT } bidres;

/* Open `path` and compare its build-id with the image's. On BID_MATCH (or
 * BID_NONE when the image has no build-id to compare) *fd is the open
 * file. */
static bidres check_file(const mod *m, const char *path, int *fd, char *got,
                         size_t got_cap) {
  const void *bid = NULL;
  ssize_t len;
  Elf *e;

  *fd = stkr_open_regular_high(path, 0);
  if (*fd < 0) return BID_NOFILE;
  switch (stkr__elf_whole(*fd, got, got_cap)) { /* why, in got */
  case 0: break;
  case -ENOEXEC: close(*fd); return BID_NOFILE; /* (a Mach-O file) */
  default: close(*fd); return BID_CUT;
  }
  e = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
  if (!e || elf_kind(e) != ELF_K_ELF) {
    if (e) elf_end(e);
    close(*fd);
    return BID_NOFILE;
  }
  len = dwelf_elf_gnu_build_id(e, &bid);
  if (m->img.build_id_len == 0) {
    elf_end(e);
    return BID_NONE;
  }
  if (len == (ssize_t)m->img.build_id_len &&
      memcmp(bid, m->img.build_id, (size_t)len) == 0) {
    elf_end(e);
    return BID_MATCH;
  }
  stkr_hex(got, got_cap, bid, len > 0 ? (size_t)len : 0);
  elf_end(e);
  close(*fd);
  return BID_MISMATCH;
}

/* The first file of another build, said in the mismatch warning (QA,
 * session 40: "has build-id ;" for a file that has none). */
static void note_mismatch(char *mism, size_t cap, const char *path,
                          const char *got) {
  if (mism[0] == '\0')
    snprintf(mism, cap, "%.900s has %s%s", path,
             got[0] ? "build-id " : "no build-id", got);
}

/* Find the file for m: by build-id in the debug dirs, by name there, then
 * the recorded path. @return an open fd, or -1 (warned). */
static int find_file(stkr__symbe *be, mod *m, const char *also,
                     char **found) {
  char want[2 * 64 + 1], got[2 * 64 + 1] = "", mism[1100] = "";
  char path[4096];
  const char *base = strrchr(m->img.path, '/');
  int fd;
  bidres r;

  base = base ? base + 1 : m->img.path;
  /* The vDSO is no file (`snapshot` lists the target's as "[vdso]", for
   * its CFI): its frames keep image+offset, said nowhere, as the same
   * kernel code in every process would make a note at every run. */
  if (strcmp(m->img.path, "[vdso]") == 0) return -1;
  stkr_hex(want, sizeof want, m->img.build_id, m->img.build_id_len);
  for (size_t i = 0; i < be->n_dirs; i++) {
    static const char *const fmt[] = {"%s/.build-id/%.2s/%s", "%s/.build-id/%.2s/%s.debug"};
    for (int f = 0; f < 3; f++) {
      if (f < 2) {
        if (m->img.build_id_len < 2) continue;
        snprintf(path, sizeof path, fmt[f], be->dirs[i], want, want + 2);
      } else {
        snprintf(path, sizeof path, "%s/%s", be->dirs[i], base);
      }
      r = check_file(m, path, &fd, got, sizeof got);
      if (r == BID_MATCH) goto ok;
      if (r == BID_NONE) close(fd); /* by name without build-id: no proof */
      if (r == BID_CUT) warnf(be, "%s: cut short: %s; not used", path, got);
      if (r == BID_MISMATCH && !mism[0])
        note_mismatch(mism, sizeof mism, path, got);
    }
  }
  if (be->root != NULL && m->img.path[0] == '/') {
    /* The target's own view first (a container's file at that path). */
    snprintf(path, sizeof path, "%s%s", be->root, m->img.path);
    r = check_file(m, path, &fd, got, sizeof got);
    if (r == BID_MATCH || (r == BID_NONE && !be->offline)) goto ok;
    if (r == BID_NONE) close(fd);
    if (r == BID_MISMATCH && !mism[0])
      note_mismatch(mism, sizeof mism, path, got);
  }
  if (m->img.path[0] == '/') {
    r = check_file(m, m->img.path, &fd, got, sizeof got);
    snprintf(path, sizeof path, "%s", m->img.path);
    if (r == BID_MATCH) goto ok;
    if (r == BID_CUT) {
      warnf(be, "%s: cut short: %s; its frames keep image+offset",
            m->img.path, got);
      return -1;
    }
    if (r == BID_NONE) {
      /* No build-id recorded: the recording process's own mapped file is
       * what it ran; after the fact there is no way to tell. */
      if (!be->offline) goto ok;
      close(fd);
      warnf(be, "%s: no build-id recorded, cannot verify the file; its "
                "frames keep image+offset", m->img.path);
      return -1;
    }
    if (r == BID_MISMATCH && !mism[0])
      note_mismatch(mism, sizeof mism, path, got);
  } else if (!be->offline || m->img.path[0] == '\0') {
    return -1; /* the vdso, or an anonymous image: nothing on disk */
  }
  if (also)
    warnf(be, "%s: %s; its frames keep image+offset", m->img.path, also);
  else if (mism[0])
    warnf(be, "%s: build-id mismatch: recorded %s, but %s; its frames keep "
              "image+offset", m->img.path, want, mism);
  else
    warnf(be, "%s: no file with build-id %s found%s; its frames keep "
              "image+offset", m->img.path, want[0] ? want : "(none)",
          be->n_dirs ? " in the debug dirs or at that path" : "");
  return -1;
ok:
  *found = strdup(path);
  if (!*found) {
    close(fd);
    return -1;
  }
  return fd;
}

static void build_syms(mod *m);

/* An image with a 16-byte build-id may be a Mach-O one (LC_UUID): look
 * for its dSYM or binary first. @return true: m->mf is open. On failure
 * *why says what was found instead (used if no ELF file matches either). */
static bool macho_open(stkr__symbe *be, mod *m, char *why, size_t cap) {
  stkr__symfile_info info;
  if (!be->machodir_scanned) {
    be->machodir_scanned = true;
    if (stkr__machodir_scan((const char *const *)be->dirs, be->n_dirs,
                            &be->machodir) < 0)
      warnf(be, "out of memory while indexing the Mach-O files of the debug "
                "dirs");
  }
  if (stkr__machodir_open(be->machodir, m->img.path, m->img.build_id, &m->mf,
                          why, cap) != 0)
    return false;
  stkr__symfile_get_info(m->mf, &info);
  m->mf_text_vmaddr = info.text_vmaddr;
  return true;
}

/* The image's cache in opts.symcache_dir, if there is one of this build.
 * @return true: m->cache is open. */
static bool cache_open(stkr__symbe *be, mod *m) {
  char hexid[2 * 64 + 1], path[4200], err[1200];
  const uint8_t *id;
  size_t len;
  int fd, rc;
  if (!be->symcache_dir || m->img.build_id_len == 0) return false;
  stkr__symcache_elf_name(m->img.build_id, m->img.build_id_len, hexid,
                          sizeof hexid);
  snprintf(path, sizeof path, "%s/%s" STKR__SYMCACHE_EXT, be->symcache_dir,
           hexid);
  /* A FIFO under the cache's name (a directory anyone may write into)
   * must not block this open forever, in the CLI's finish (its signals
   * held) or in an embedded app's flush: stkr_open_regular. */
  if ((fd = stkr_open_regular_high(path, 0)) < 0) {
    if (fd == -EINVAL) /* there, but no file to read */
      warnf(be, "symbol cache refused, reading the DWARF instead: %s: not a "
                "regular file", path);
    return false; /* none */
  }
  rc = stkr__symcache_open(fd, path, &m->cache, err, sizeof err);
  close(fd);
  if (rc < 0) {
    warnf(be, "symbol cache refused, reading the DWARF instead: %s", err);
    return false;
  }
  id = stkr__symcache_id(m->cache, &len);
  if (len != m->img.build_id_len || memcmp(id, m->img.build_id, len) != 0) {
    warnf(be, "%s: symbol cache of another build, reading the DWARF "
              "instead", path);
    stkr__symcache_free(m->cache);
    m->cache = NULL;
    return false;
  }
  return true;
}

static bool mod_open(stkr__symbe *be, mod *m) {
  char *file = NULL, why[1024] = "";
  bool apple = be->offline && m->img.build_id_len == 16;
  int fd;

  if (m->tried) return m->usable;
  m->tried = true;
  if (apple && macho_open(be, m, why, sizeof why)) return m->usable = true;
  if (cache_open(be, m)) return m->usable = true;
  if ((fd = find_file(be, m, apple ? why : NULL, &file)) < 0) return false;
  if (!(m->dwfl = dwfl_begin(&be->cb))) {
    close(fd);
    free(file);
    return false;
  }
  dwfl_report_begin(m->dwfl);
  /* ET_DYN: placed at the load bias (add_p_vaddr); ET_EXEC: as linked,
   * whatever the load address says (mod.shift). */
  m->m = dwfl_report_elf(m->dwfl, m->img.path, file, fd, m->img.load_address,
                         true);
  dwfl_report_end(m->dwfl, NULL, NULL);
  if (!m->m) {
    warnf(be, "%s: cannot read %s: %s", m->img.path, file, dwfl_errmsg(-1));
    close(fd);
    free(file);
    return false;
  }
  m->file = file;
  {
    GElf_Addr bias = 0; /* where libdw actually put it (see mod.shift) */
    if (dwfl_module_getelf(m->m, &bias)) m->shift = m->img.load_address - bias;
  }
  {
    void **slot = NULL; /* the module's userdata: stkr__find_debuginfo's */
    dwfl_module_info(m->m, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
    if (slot) *slot = &be->dd;
  }
  m->dw = dwfl_module_getdwarf(m->m, &m->dwbias); /* NULL: no DWARF */
  m->ix.dw = m->dw;
  if (!m->dw && be->offline) {
    build_syms(m);
    if (m->n_syms == 0)
      warnf(be, "%s: no function symbols and no debug info found%s; its "
                "frames keep image+offset", m->img.path,
            be->n_dirs ? "" : " (a --debug-dir may hold them)");
  }
  m->usable = true;
  return true;
}

/* ---- symbol table -------------------------------------------------------- */

static int cmp_sym(const void *a, const void *b) {
  const stkr__symspan *x = a, *y = b;
  return stkr_cmp_u64_pair(x->lo, y->lo, y->hi, x->hi); /* larger first */
}

int stkr__dwfl_func_syms(struct Dwfl_Module *mod, stkr__symspan **out,
                         size_t *n_out) {
  int n = dwfl_module_getsymtab(mod);
  stkr__symspan *v;
  size_t k = 0, sized;
  *out = NULL;
  *n_out = 0;
  if (n <= 0) return 0;
  if (!(v = malloc((size_t)n * sizeof *v))) return -ENOMEM;
  for (int pass = 0; pass < 2; pass++) {
    sized = k;
    for (int i = 0; i < n; i++) {
      GElf_Sym sym;
      GElf_Addr addr;
      const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL,
                                                 NULL, NULL);
      int type = GELF_ST_TYPE(sym.st_info);
      if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
          (sym.st_size == 0) != (pass == 1) ||
          (type != STT_FUNC && type != STT_GNU_IFUNC))
        continue;
      /* Pass 1: a function of size 0 (a stub in assembly: glibc's signal
       * trampoline __restore_rt, where a handler's stack passes) names
       * its one first byte, the pc a walk stores for it, unless a sized
       * function holds that byte (QA, session 30: "libc.so.6+0x3c051"). */
      if (pass == 1 && stkr__symspan_find(v, sized, addr) != NULL) continue;
      v[k++] = (stkr__symspan){addr, addr + (sym.st_size ? sym.st_size : 1),
                               name};
    }
    qsort(v, k, sizeof *v, cmp_sym); /* (pass 1 looks its spans up) */
  }
  *out = v;
  *n_out = k;
  return 0;
}

const char *stkr__symspan_find(const stkr__symspan *s, size_t n, uint64_t a) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* first symbol starting above a */
    size_t mid = (lo + hi) / 2;
    if (s[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* Symbols may nest (aliases, a function and its .cold part): the nearest
   * few starting at or below a are checked for containment. */
  for (size_t k = lo, tries = 0; k > 0 && tries < 8; k--, tries++)
    if (a < s[k - 1].hi) return s[k - 1].name;
  return NULL;
}

static void build_syms(mod *m) {
  m->syms_built = true;
  (void)stkr__dwfl_func_syms(m->m, &m->syms, &m->n_syms); /* none: names
                                                           * from DWARF only */
}

static const char *sym_lookup(mod *m, uint64_t a) {
  if (!m->syms_built) build_syms(m);
  return stkr__symspan_find(m->syms, m->n_syms, a);
}

/* ---- DWARF (the lookups themselves: symbolize_dwarf.c) -------------------- */

static const char *sym_name(stkr__symbe *be, const char *n, size_t slot) {
  return stkr__dw_sym_name(&be->names, n, slot);
}

/* The CU libdw finds for address a (module addresses) through
 * .debug_aranges, if its own ranges hold a: a cgo Go binary's aranges list
 * only its gcc-compiled C units, and libdw then answered a C unit for
 * every Go function (QA, session 21: main.main at gcc_mmap.c:37, where
 * `go tool addr2line` says main.go:10). NULL: none, or a wrong one. */
static Dwarf_Die *cu_covering(mod *m, uint64_t a, Dwarf_Addr *bias) {
  Dwarf_Die *cudie = dwfl_module_addrdie(m->m, a, bias);
  return cudie != NULL && dwarf_haspc(cudie, a - *bias) > 0 ? cudie : NULL;
}

static size_t resolve_dwarf(stkr__symbe *be, mod *m, uint64_t a,
                            stkr__symres *out, size_t max) {
  Dwarf_Addr bias;
  Dwarf_Die *cudie = cu_covering(m, a, &bias), sub, own;
  const char *file = NULL;
  int line = 0, col = 0;
  size_t n;

  if (!cudie) {
    /* No .debug_aranges (clang, swiftc): the CU from the CU DIEs' own
     * ranges, in the tools and in the recording process alike (QA: an
     * embedded Swift app got no file:line nor inlined frames where
     * `stackrec symbolize` of the same stacks had them). */
    bias = m->dwbias;
    if (!stkr__dw_cu_of(&m->ix, a - bias, &own) ||
        !stkr__dw_find_subprogram(&m->ix, &own, a - bias, &sub))
      return 0;
    cudie = &own;
    file = stkr__dw_line(&be->names, cudie, a - bias, be->full_paths, &line,
                         &col);
  } else {
    if (!cudie || !stkr__dw_find_subprogram(&m->ix, cudie, a - bias, &sub))
      return 0;
    Dwfl_Line *l = dwfl_module_getsrc(m->m, a);
    if (l) file = dwfl_lineinfo(l, NULL, &line, &col, NULL, NULL);
  }
  n = stkr__dw_frames(&be->names, cudie, &sub, a - bias, file, line, col,
                      be->full_paths, out, max);
  if (!out[n - 1].function) { /* anonymous DIE: the symbol table may know */
    const char *s = sym_lookup(m, a);
    out[n - 1].function = s ? sym_name(be, s, n - 1) : NULL;
  }
  return n;
}

/* The module whose text holds address a, or NULL. */
static mod *mod_at(const stkr__symbe *be, uint64_t a) {
  size_t lo = 0, hi = be->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (be->mods[mid]->img.text_start <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 || a >= be->mods[lo - 1]->img.text_end ? NULL
                                                        : be->mods[lo - 1];
}

bool stkr__symbe_opened(const stkr__symbe *be, uint64_t pc) {
  const mod *m = pc ? mod_at(be, pc - 1) : NULL;
  return m == NULL || m->tried;
}

size_t stkr__symbe_resolve(stkr__symbe *be, uint64_t pc,
                           const stkr__symimg **img, stkr__symres *out,
                           size_t max) {
  uint64_t a = pc - 1; /* a return address: the call is just before it */
  size_t n = 0;
  mod *m;

  *img = NULL;
  if (max == 0 || pc == 0 || (m = mod_at(be, a)) == NULL) return 0;
  *img = &m->img;
  if (!mod_open(be, m)) return 0;
  if (m->mf) /* Mach-O: the file's address = PC - load address + __TEXT */
    return stkr__symfile_lookup(m->mf, a - m->img.load_address +
                                           m->mf_text_vmaddr, out, max);
  if (m->cache) /* ELF: the file's address = PC - load address */
    return stkr__symcache_lookup(m->cache, a - m->img.load_address, out, max);
  a -= m->shift; /* from here on, the module's addresses */
  if (m->dw) n = resolve_dwarf(be, m, a, out, max);
  if (n == 0) {
    const char *s = sym_lookup(m, a);
    Dwfl_Line *l;
    int line = 0, col = 0;
    const char *file = NULL;
    Dwarf_Addr bias;
    Dwarf_Die own;
    if (!s) return 0;
    /* The line through the same check (dwfl_module_getsrc looks its CU up
     * through .debug_aranges too); without those (swiftc), from the CU its
     * own ranges name: a Swift closure's subprogram is nested in its
     * parent's, which the index skips, and had no line (QA, session 27;
     * its symbol cache, built from the line table, had it). */
    if (m->dw && cu_covering(m, a, &bias) != NULL &&
        (l = dwfl_module_getsrc(m->m, a)))
      file = dwfl_lineinfo(l, NULL, &line, &col, NULL, NULL);
    else if (m->dw && stkr__dw_cu_of(&m->ix, a - m->dwbias, &own))
      file = stkr__dw_line(&be->names, &own, a - m->dwbias, be->full_paths,
                           &line, &col);
    out[0] = (stkr__symres){sym_name(be, s, 0), file,
                            line > 0 ? (uint32_t)line : 0,
                            col > 0 ? (uint32_t)col : 0, false};
    n = 1;
  }
  return n;
}

void stkr__symbe_each_from_dwarf(stkr__symbe *be,
                                 void (*fn)(void *arg, const stkr__symimg *img,
                                            const char *file),
                                 void *arg) {
  for (size_t i = 0; i < be->n; i++) {
    const mod *m = be->mods[i];
    if (m->dw && m->file && m->img.build_id_len) fn(arg, &m->img, m->file);
  }
}

size_t stkr__symbe_cached(const stkr__symbe *be) {
  size_t n = 0;
  for (size_t i = 0; i < be->n; i++) n += be->mods[i]->cache != NULL;
  return n;
}

bool stkr__symbe_usable(const stkr__symbe *be) {
  for (size_t i = 0; i < be->n; i++)
    if (be->mods[i]->usable) return true;
  return false;
}

#endif /* !__APPLE__ */
