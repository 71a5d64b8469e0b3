/*
 * symcache_elf.c: ELF input for the symbol cache build (symcache.c,
 * docs/SYMCACHE.md): the answers of one ELF file's DWARF and symbol table,
 * read where the ELF backend (symbolize_elf.c) reads them, fed to the same
 * one-pass walk (symcache_walk.c, stkr__dw_walk) that the Mach-O build
 * uses. Keyed by the file's GNU build-id.
 *
 * Why: `stackrec snapshot` (and `symbolize`) spend most of their CPU
 * reading system libraries' separate debug files (libc's: ~50 ms of
 * decompression and DIE walking per run); a cache turns that into one
 * mmap and a binary search per PC.
 *
 * Same answers as the backend: the file is opened with libdwfl exactly as
 * symbolize_elf.c opens it (dwfl_report_elf at bias 0, the standard
 * find_debuginfo with the same debuginfo path: a separate debug file by
 * build-id under /usr/lib/debug/.build-id/xx/yyyy.debug or by
 * .gnu_debuglink), so the Dwarf and the symbol table are the ones it would
 * use. The symbol table is flattened before the walk: the backend answers
 * an address with the first of the nearest 8 symbols starting at or below
 * it that contains it (sorted by start, larger first), the walk with the
 * last symbol starting at or below it; cut at every symbol boundary and
 * given the backend's answer per piece, the two agree.
 * tests/test-symcache-elf.c compares a cache with the backend at every
 * byte address of the snapshot fixture and of libc (with its debug file).
 *
 * Only compiled where there is no dyld (like the other Linux backends).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_hex.h"
#include "common/stkr_io.h"
#include "symbolize/symbolize_dwarf.h"

/* The module's function symbols as the backend takes them, cut into spans
 * that do not overlap, each with the backend's answer
 * (stkr__symspan_find). @return 0 or -ENOMEM. */
static int flat_syms(Dwfl_Module *m, stkr__symspan **out, size_t *n_out) {
  stkr__symspan *s = NULL, *sp = NULL;
  uint64_t *pts = NULL;
  size_t ns = 0, np = 0, nsp = 0;
  *out = NULL;
  *n_out = 0;
  if (stkr__dwfl_func_syms(m, &s, &ns) != 0) return -ENOMEM;
  if (ns == 0) { /* symbols, none a function (a stripped binary's .dynsym) */
    free(s);
    return 0;
  }
  pts = malloc(2 * ns * sizeof *pts);
  if (!pts || !(sp = malloc(2 * ns * sizeof *sp))) goto nomem;
  for (size_t i = 0; i < ns; i++) {
    pts[np++] = s[i].lo;
    pts[np++] = s[i].hi;
  }
  qsort(pts, np, sizeof *pts, stkr_qsort_u64);
  for (size_t i = 0; i + 1 < np; i++) {
    if (pts[i] == pts[i + 1]) continue;
    const char *name = stkr__symspan_find(s, ns, pts[i]);
    if (!name) continue;
    if (nsp && sp[nsp - 1].hi == pts[i] && sp[nsp - 1].name == name)
      sp[nsp - 1].hi = pts[i + 1]; /* the same answer goes on */
    else
      sp[nsp++] = (stkr__symspan){pts[i], pts[i + 1], name};
  }
  free(s);
  free(pts);
  *out = sp;
  *n_out = nsp;
  return 0;
nomem:
  free(s);
  free(pts);
  free(sp);
  return -ENOMEM;
}

/* [lo, hi): from the lowest executable PT_LOAD to the end of the highest
 * (the addresses a PC of this image can have). @return false: none. */
static bool text_range(Elf *e, uint64_t *lo, uint64_t *hi) {
  size_t n = 0;
  *lo = UINT64_MAX;
  *hi = 0;
  if (elf_getphdrnum(e, &n) != 0) return false;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
        !(ph.p_flags & PF_X) || ph.p_memsz == 0)
      continue;
    if (ph.p_vaddr < *lo) *lo = ph.p_vaddr;
    if (ph.p_vaddr + ph.p_memsz > *hi) *hi = ph.p_vaddr + ph.p_memsz;
  }
  return *lo < *hi;
}

/* Bytes of the DWARF sections as stored (compressed if they are). */
static uint64_t dwarf_bytes(Dwarf *dw) {
  Elf *e = dw ? dwarf_getelf(dw) : NULL;
  Elf_Scn *scn = NULL;
  size_t shstrndx;
  uint64_t n = 0;
  if (!e || elf_getshdrstrndx(e, &shstrndx) != 0) return 0;
  while ((scn = elf_nextscn(e, scn)) != NULL) {
    GElf_Shdr sh;
    const char *name;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    name = elf_strptr(e, shstrndx, sh.sh_name);
    if (name && (strncmp(name, ".debug_", 7) == 0 ||
                 strncmp(name, ".zdebug_", 8) == 0))
      n += sh.sh_size;
  }
  return n;
}

void stkr__symcache_elf_name(const uint8_t *id, size_t len, char *out,
                             size_t cap) {
  (void)stkr_hex(out, cap, id, len);
}

int stkr__symelf_build_id(const char *path, uint8_t *id, size_t cap) {
  int fd = stkr_open_regular(path, 0), len = -ENOENT;
  const void *got = NULL;
  Elf *e;
  ssize_t n;
  if (fd < 0) return fd;
  (void)elf_version(EV_CURRENT);
  e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!e || elf_kind(e) != ELF_K_ELF) len = -EINVAL;
  else if ((n = dwelf_elf_gnu_build_id(e, &got)) > 0 && (size_t)n <= cap) {
    memcpy(id, got, (size_t)n);
    len = (int)n;
  }
  if (e) elf_end(e);
  close(fd);
  return len;
}

int stkr__symelf_walk(const char *path, const stkr__symwalk_ops *ops,
                      stkr__symelf_out *out, char *err, size_t cap) {
  /* symbolize_elf.c's debuginfo path without debug dirs. */
  static char debug_path[] = ".debug:/usr/lib/debug";
  char *dp = debug_path;
  const Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf,
                             .find_debuginfo = stkr__find_debuginfo,
                             .section_address = dwfl_offline_section_address,
                             .debuginfo_path = &dp};
  const unsigned char *bits = NULL;
  GElf_Addr vaddr, bias = 0;
  Dwarf_Addr dwbias = 0;
  stkr__symspan *spans = NULL;
  size_t n_spans = 0;
  stkr__debug_dirs dd = {.not_used = out->debug_not_used,
                         .not_used_cap = sizeof out->debug_not_used};
  Dwfl *dwfl = NULL;
  Dwfl_Module *m;
  Dwarf *dw;
  Elf *elf;
  int fd, len, rc;

  stkr__symwalk_ops eops = *ops;
  eops.as_compiled = true; /* the answers of the backend without full_paths */
  memset(out, 0, sizeof *out);
  (void)elf_version(EV_CURRENT);
  if ((fd = stkr_open_regular(path, 0)) < 0) {
    snprintf(err, cap, "%s: %s", path,
             fd == -EINVAL ? "not a regular file" : strerror(-fd));
    return fd;
  }
  {
    char why[128];
    if ((rc = stkr__elf_whole(fd, why, sizeof why)) != 0) {
      snprintf(err, cap, rc == -ENOEXEC ? "%s: %s" : "%s: an ELF file cut "
               "short: %s", path, why);
      close(fd);
      return -EINVAL;
    }
  }
  if (!(dwfl = dwfl_begin(&cb))) {
    close(fd);
    snprintf(err, cap, "%s: out of memory", path);
    return -ENOMEM;
  }
  dwfl_report_begin(dwfl);
  m = dwfl_report_elf(dwfl, path, path, fd, 0, true); /* owns fd */
  dwfl_report_end(dwfl, NULL, NULL);
  if (!m) {
    snprintf(err, cap, "%s: not a readable ELF file: %s", path,
             dwfl_errmsg(-1));
    close(fd);
    rc = -EINVAL;
    goto out;
  }
  len = dwfl_module_build_id(m, &bits, &vaddr);
  if (len <= 0 || (size_t)len > sizeof out->id) {
    snprintf(err, cap, "%s: no GNU build-id: a cache could never be "
             "matched", path);
    rc = -ENOTSUP;
    goto out;
  }
  memcpy(out->id, bits, (size_t)len);
  out->id_len = (size_t)len;
  elf = dwfl_module_getelf(m, &bias);
  if (!elf || bias != 0 || !text_range(elf, &out->lo, &out->hi)) {
    snprintf(err, cap, "%s: no executable segment%s", path,
             bias ? " at its link-time address" : "");
    rc = -ENOTSUP;
    goto out;
  }
  {
    /* The debug file search may name a file it did not use. */
    void **slot = NULL;
    dwfl_module_info(m, &slot, NULL, NULL, NULL, NULL, NULL, NULL);
    if (slot != NULL) *slot = &dd;
  }
  dw = dwfl_module_getdwarf(m, &dwbias); /* NULL: symbols only */
  if (dw && dwbias != 0) {
    /* The walk gives DWARF addresses: they must be the file's. */
    snprintf(err, cap, "%s: its debug file is linked at another address "
             "(bias 0x%llx)", path, (unsigned long long)dwbias);
    rc = -ENOTSUP;
    goto out;
  }
  out->dwarf_bytes = dwarf_bytes(dw);
  out->has_dwarf = dw != NULL;
  if ((rc = flat_syms(m, &spans, &n_spans)) == 0)
    rc = stkr__dw_walk(dw, spans, n_spans, out->lo, out->hi, &eops);
  if (rc < 0)
    snprintf(err, cap, "%s: %s", path, strerror(-rc));
out:
  free(spans);
  dwfl_end(dwfl);
  return rc;
}

#endif /* !__APPLE__ */
