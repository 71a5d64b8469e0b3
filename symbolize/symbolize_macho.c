/*
 * symbolize_macho.c: one file by itself (see symbolize.h, stkr__symfile):
 * a Mach-O slice (a dSYM's DWARF, else the symbol table) or an ELF file.
 *
 * libdw reads DWARF from ELF files only. A dSYM's __DWARF sections are the
 * same DWARF, so the file is mapped right after one page of our own that
 * holds an ELF header, section headers named ".debug_*" pointing at the
 * Mach-O sections' bytes, and their names; libelf's elf_memory() takes the
 * two as one image and dwarf_begin_elf() reads it. Nothing is copied: a
 * 1 GB dSYM costs its mapping and libdw's own tables. DWARF addresses in a
 * dSYM are the linked (unslid) ones, so no relocation is needed.
 *
 * The lookups (subprogram, inline chain, names) are the ELF backend's own
 * (symbolize_dwarf.c), with the CU found in our own table of CU ranges
 * (dSYMs need not carry .debug_aranges).
 *
 * Only compiled where there is no dyld (symbolize_apple.c has Apple's).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"

#define MAX_DEBUG_SECTS 32

/* lo, hi, name: in the mapped string table, leading '_' dropped (while
 * indexing, hi holds the section number). */
typedef stkr__symspan msym;

struct stkr__symfile {
  stkr__symfile_info info;
  char *path;
  /* Mach-O: [hdr page(s)][file] mapped as one range. */
  uint8_t *map;
  size_t map_len, hdr_len;
  const uint8_t *data; /* = map + hdr_len */
  size_t len;
  stkr_macho_image im;
  Elf *elf;
  stkr__dwidx ix; /* ix.dw: NULL without DWARF */
  msym *syms;
  size_t n_syms;
  stkr__dwnames names;
  /* ELF: the backend with this one image. */
  stkr__symbe *be;
  /* A symbol cache file (symcache.c). */
  stkr__symcache *cache;
};

/* ".debug_X" for a Mach-O "__debug_X" (names are cut at 16 bytes). */
static void elf_name(const char *sect, char *out, size_t cap) {
  if (strcmp(sect, "__debug_str_offs") == 0)
    snprintf(out, cap, ".debug_str_offsets");
  else
    snprintf(out, cap, ".%s", sect + 2);
}

/* The ELF header page in front of the file: a header, section headers for
 * the slice's __DWARF,__debug_* sections, and their names. */
static int build_elf(stkr__symfile *f, char *err, size_t cap) {
  Elf64_Ehdr *eh = (Elf64_Ehdr *)f->map;
  Elf64_Shdr *sh = (Elf64_Shdr *)(f->map + sizeof *eh);
  char *names = (char *)(sh + MAX_DEBUG_SECTS + 2);
  size_t nl = 1, k = 1;

  names[0] = '\0';
  for (size_t i = 0; i < f->im.n_sects && k <= MAX_DEBUG_SECTS; i++) {
    const stkr_macho_section *s = &f->im.sects[i];
    if (strcmp(s->segname, "__DWARF") != 0 ||
        strncmp(s->sectname, "__debug_", 8) != 0 || !s->has_data)
      continue;
    elf_name(s->sectname, names + nl, 32);
    sh[k] = (Elf64_Shdr){.sh_name = (Elf64_Word)nl, .sh_type = SHT_PROGBITS,
                         .sh_offset = f->hdr_len + s->offset,
                         .sh_size = s->size, .sh_addralign = 1};
    nl += strlen(names + nl) + 1;
    k++;
  }
  if (k == 1) return 0; /* no DWARF: the symbol table only */
  sh[k] = (Elf64_Shdr){.sh_name = (Elf64_Word)nl, .sh_type = SHT_STRTAB,
                       .sh_offset = (Elf64_Off)((uint8_t *)names - f->map),
                       .sh_size = nl + sizeof ".shstrtab", .sh_addralign = 1};
  memcpy(names + nl, ".shstrtab", sizeof ".shstrtab");
  memcpy(eh->e_ident, ELFMAG, SELFMAG);
  eh->e_ident[EI_CLASS] = ELFCLASS64;
  eh->e_ident[EI_DATA] = ELFDATA2LSB; /* arm64 and x86_64 Mach-O */
  eh->e_ident[EI_VERSION] = EV_CURRENT;
  eh->e_type = ET_EXEC;
  eh->e_machine = f->im.cputype == STKR_MACHO_CPU_X86_64 ? EM_X86_64
                                                          : EM_AARCH64;
  eh->e_version = EV_CURRENT;
  eh->e_ehsize = sizeof *eh;
  eh->e_shoff = sizeof *eh;
  eh->e_shentsize = sizeof *sh;
  eh->e_shnum = (Elf64_Half)(k + 1);
  eh->e_shstrndx = (Elf64_Half)k;
  f->elf = elf_memory((char *)f->map, f->map_len);
  if (f->elf) f->ix.dw = dwarf_begin_elf(f->elf, DWARF_C_READ, NULL);
  if (!f->ix.dw) {
    snprintf(err, cap, "%s: cannot read its DWARF: %s", f->path,
             dwarf_errmsg(-1));
    return -EINVAL;
  }
  f->info.has_dwarf = true;
  return 0;
}

typedef struct symcol {
  stkr__symfile *f;
  size_t cap;
  int err;
} symcol;

static void add_sym(void *arg, const char *name, uint64_t addr, uint8_t sect) {
  symcol *c = arg;
  stkr__symfile *f = c->f;
  /* Code only: a symbol in a section of the __TEXT segment. */
  if (sect == 0 || sect > f->im.n_sects ||
      strcmp(f->im.sects[sect - 1].segname, "__TEXT") != 0)
    return;
  if (stkr_grow((void **)&f->syms, &c->cap, f->n_syms + 1, sizeof *f->syms) !=
      0) {
    c->err = -ENOMEM;
    return;
  }
  /* C symbols carry a leading '_' on Apple platforms ("_main", "__Z...",
   * "_$s..."); Objective-C methods ("-[Class sel]") do not. */
  f->syms[f->n_syms++] = (msym){addr, sect, name[0] == '_' ? name + 1 : name};
}

static int cmp_msym(const void *a, const void *b) {
  const msym *x = a, *y = b;
  return stkr_cmp_u64(x->lo, y->lo);
}

/* Sorted by address; each symbol ends where the next begins, or at the end
 * of its section (nlist has no sizes). */
static int index_syms(stkr__symfile *f) {
  symcol c = {f, 0, 0};
  stkr_macho_symbols(f->data, &f->im, add_sym, &c, NULL);
  if (c.err) return c.err;
  qsort(f->syms, f->n_syms, sizeof *f->syms, cmp_msym);
  /* Each symbol ends at the next address a symbol starts at, or at its
   * section's end. Aliases (one address, several names) are one run,
   * walked once: a file of 400,000 names at one address took 50 s when
   * each looked past all the others (QA, session 30). */
  for (size_t i = 0, j; i < f->n_syms; i = j) {
    j = i + 1;
    while (j < f->n_syms && f->syms[j].lo == f->syms[i].lo) j++;
    for (size_t k = i; k < j; k++) {
      const stkr_macho_section *s = &f->im.sects[f->syms[k].hi - 1];
      uint64_t end = s->addr + s->size;
      if (j < f->n_syms && f->syms[j].lo < end) end = f->syms[j].lo;
      f->syms[k].hi = end;
    }
  }
  return 0;
}

static const char *sym_lookup(const stkr__symfile *f, uint64_t a) {
  size_t lo = 0, hi = f->n_syms;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (f->syms[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && a < f->syms[lo - 1].hi ? f->syms[lo - 1].name : NULL;
}

/* Map the file behind `hdr` bytes of our own. */
static int map_file(stkr__symfile *f, int fd, size_t len) {
  long pg = sysconf(_SC_PAGESIZE);
  size_t need = sizeof(Elf64_Ehdr) + (MAX_DEBUG_SECTS + 2) * sizeof(Elf64_Shdr) +
                (MAX_DEBUG_SECTS + 1) * 32 + 16;
  f->hdr_len = (need + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
  f->map_len = f->hdr_len + len;
  f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (f->map == MAP_FAILED) {
    f->map = NULL;
    return -errno;
  }
  /* Private and writable, as libelf may expect of an elf_memory image;
   * the file's pages are only read (no copy is made). */
  if (len && mmap(f->map + f->hdr_len, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
    return -errno;
  f->data = f->map + f->hdr_len;
  f->len = len;
  return 0;
}

/* Choose the slice: by UUID, else by arch, else the only one. */
static int pick_slice(stkr__symfile *f, const char *arch, const uint8_t *uuid,
                      char *err, size_t cap) {
  stkr_macho_slice sl[STKR_MACHO_MAX_SLICES];
  char list[512] = "", e[256] = "";
  uint32_t wt = 0, ws = 0;
  size_t n, ll = 0;
  int rc = stkr_macho_slices(f->data, f->len, sl, STKR_MACHO_MAX_SLICES, &n,
                             e, sizeof e);
  if (rc < 0) {
    snprintf(err, cap, "%s: %s", f->path, e);
    return rc;
  }
  if (arch && stkr_macho_arch_parse(arch, &wt, &ws) < 0) {
    snprintf(err, cap, "unknown architecture '%s' (arm64, arm64e, x86_64)",
             arch);
    return -EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    stkr_macho_image im;
    const char *an = stkr_macho_arch_name(sl[i].cputype, sl[i].cpusubtype);
    char u[37] = "no UUID";
    rc = stkr_macho_parse(f->data, f->len, &sl[i], &im, e, sizeof e);
    if (rc == -ENOMEM) return rc;
    if (rc < 0) {
      if (n == 1 || rc == -EINVAL) {
        snprintf(err, cap, "%s: %s", f->path, e);
        return rc;
      }
      continue; /* a 32-bit slice of a universal file */
    }
    if (im.has_uuid) stkr_macho_uuid_str(im.uuid, u);
    ll += (size_t)snprintf(list + ll, ll < sizeof list ? sizeof list - ll : 0,
                           "%s%s (%s)", ll ? ", " : "", an ? an : "?", u);
    if (ll >= sizeof list) ll = sizeof list - 1;
    if ((uuid ? im.has_uuid && memcmp(im.uuid, uuid, 16) == 0
              : arch ? stkr_macho_arch_match(im.cputype, im.cpusubtype, wt, ws)
                     : n == 1) &&
        (!uuid || !arch ||
         stkr_macho_arch_match(im.cputype, im.cpusubtype, wt, ws))) {
      f->im = im;
      f->info.arch = an;
      f->info.has_uuid = im.has_uuid;
      memcpy(f->info.uuid, im.uuid, 16);
      f->info.text_vmaddr = im.text_vmaddr;
      return 0;
    }
    stkr_macho_image_free(&im);
  }
  if (uuid) {
    char u[37];
    stkr_macho_uuid_str(uuid, u);
    snprintf(err, cap, "%s: no slice with UUID %s%s%s (it has: %s)", f->path,
             u, arch ? " and architecture " : "", arch ? arch : "", list);
  } else if (arch) {
    snprintf(err, cap, "%s: no %s slice (it has: %s)", f->path, arch, list);
  } else {
    snprintf(err, cap, "%s: a universal file: choose a slice with -arch "
             "(it has: %s)", f->path, list);
  }
  return -ENOENT;
}

static int open_macho(stkr__symfile *f, int fd, size_t len, const char *arch,
                      const uint8_t *uuid, char *err, size_t cap) {
  int rc = map_file(f, fd, len);
  if (rc < 0) {
    snprintf(err, cap, "%s: cannot map: %s", f->path, strerror(-rc));
    return rc;
  }
  f->info.macho = true;
  if ((rc = pick_slice(f, arch, uuid, err, cap)) < 0) return rc;
  if (!f->im.has_text && f->im.text_vmaddr == 0) {
    /* A dSYM has __TEXT too (no data); a file without is not an image. */
    snprintf(err, cap, "%s: no __TEXT segment", f->path);
    return -EINVAL;
  }
  if ((rc = build_elf(f, err, cap)) < 0) return rc;
  return index_syms(f);
}

/* The one regular file in DWARF directory p (dot files passed over), or
 * NULL with err saying there is none or naming the several. */
static char *only_dwarf_file(const char *dir, const char *p, char *err,
                             size_t cap) {
  DIR *d = opendir(p);
  struct dirent *e;
  char first[4096 + 256] = "", names[512] = "";
  size_t n = 0, used = 0;

  while (d != NULL && (e = readdir(d)) != NULL) {
    char q[4096 + 256];
    struct stat st;
    if (e->d_name[0] == '.') continue;
    snprintf(q, sizeof q, "%s/%s", p, e->d_name);
    if (stat(q, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (n++ == 0) snprintf(first, sizeof first, "%s", q);
    if (used < sizeof names - 1) {
      int k = snprintf(names + used, sizeof names - used, "%s%s",
                       used ? ", " : "", e->d_name);
      used += k > 0 ? (size_t)k : 0;
    }
  }
  if (d == NULL) {
    snprintf(err, cap, "%s: cannot read %s: %s", dir, p, strerror(errno));
    return NULL;
  }
  closedir(d);
  if (n == 1) return strdup(first);
  if (n == 0)
    snprintf(err, cap, "%s: a .dSYM bundle whose Contents/Resources/DWARF "
             "holds no file", dir);
  else
    snprintf(err, cap, "%s: a .dSYM bundle with %zu DWARF files (%s): name "
             "the one to use (%s/<file>)", dir, n, names, p);
  return NULL;
}

/* A .dSYM directory: its Contents/Resources/DWARF/<name> (the bundle's
 * name), else the one file there. NULL: err says why. */
static char *dsym_file(const char *dir, char *err, size_t cap) {
  char p[4096];
  snprintf(p, sizeof p, "%s/Contents/Resources/DWARF", dir);
  int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    snprintf(err, cap, "%s: not a file, nor a .dSYM bundle with "
             "Contents/Resources/DWARF/<name>", dir);
    return NULL;
  }
  close(dfd);
  const char *base = strrchr(dir, '/');
  base = base ? base + 1 : dir;
  size_t bl = strlen(base);
  while (bl && base[bl - 1] == '/') bl--;
  if (bl > 5 && strncmp(base + bl - 5, ".dSYM", 5) == 0) {
    /* App.dSYM holds DWARF/App (App.app.dSYM: DWARF/App, not App.app). */
    char name[1024];
    snprintf(name, sizeof name, "%.*s", (int)(bl - 5), base);
    char *dot = strrchr(name, '.');
    char q[4096 + 1024];
    snprintf(q, sizeof q, "%s/%s", p, name);
    if (access(q, R_OK) != 0 && dot) {
      *dot = '\0';
      snprintf(q, sizeof q, "%s/%s", p, name);
    }
    if (access(q, R_OK) == 0) return strdup(q);
  }
  /* Another name (a renamed bundle; QA: two files in one bundle gave "not
   * a .dSYM bundle"). */
  return only_dwarf_file(dir, p, err, cap);
}

int stkr__symfile_open(const char *path, const char *arch, const uint8_t *uuid,
                       stkr__symfile **out, char *err, size_t cap) {
  stkr__symfile *f = calloc(1, sizeof *f);
  struct stat st;
  uint8_t magic[8];
  int fd = -1, rc;

  *out = NULL;
  if (!f) return -ENOMEM;
  (void)elf_version(EV_CURRENT);
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    if ((f->path = dsym_file(path, err, cap)) == NULL) {
      free(f);
      return -ENOENT;
    }
  } else if ((f->path = strdup(path)) == NULL) {
    free(f);
    return -ENOMEM;
  }
  f->info.path = f->path;
  /* Mangled names live in the mapping (DWARF strings, the symbol table)
   * for the handle's life: demangle each once. */
  f->names.memo = true;
  fd = stkr_open_regular_high(f->path, 0);
  if (fd < 0 || fstat(fd, &st) != 0) {
    rc = fd < 0 ? fd : -errno;
    snprintf(err, cap, "%s: %s", f->path,
             rc == -EINVAL ? "not a regular file" : strerror(-rc));
    goto fail;
  }
  if (pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
      stkr_macho_is_macho(magic, sizeof magic)) {
    rc = open_macho(f, fd, (size_t)st.st_size, arch, uuid, err, cap);
  } else if (memcmp(magic, STKR__SYMCACHE_MAGIC, 8) == 0) {
    rc = stkr__symcache_open(fd, f->path, &f->cache, err, cap);
    if (rc == 0) {
      stkr__symcache_info(f->cache, &f->info);
      f->info.path = f->path;
      if (uuid && (!f->info.has_uuid || memcmp(f->info.uuid, uuid, 16) != 0)) {
        char u[37];
        stkr_macho_uuid_str(uuid, u);
        snprintf(err, cap, "%s: a symbol cache of another build (not UUID %s)",
                 f->path, u);
        rc = -ENOENT;
      }
    }
  } else if (memcmp(magic, ELFMAG, SELFMAG) == 0 &&
             (rc = stkr__elf_whole(fd, err, cap)) != 0) {
    /* Cut short: say what lies past the end (the backend would only find
     * it unusable, or answer bare addresses from what is left). */
    char why[128];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, cap, "%s: an ELF file cut short: %s", f->path, why);
  } else {
    /* ELF: the backend, with this one file as its only image at bias 0
     * (it reads only absolute paths; no build-id to check: the user named
     * the file). */
    char *abs = realpath(f->path, NULL);
    if (abs) {
      free(f->path);
      f->info.path = f->path = abs;
    }
    stkr__symimg im = {.path = f->path, .text_end = UINT64_MAX};
    bool removed;
    stkr__symbe_opts o = {.full_paths = true};
    const stkr__symimg *got;
    stkr__symres r;
    rc = stkr__symbe_create(&o, &f->be);
    if (rc == 0) rc = stkr__symbe_set_images(f->be, &im, 1, &removed);
    if (rc == 0) {
      (void)stkr__symbe_resolve(f->be, 1, &got, &r, 1); /* opens it */
      if (!stkr__symbe_usable(f->be)) {
        snprintf(err, cap, "%s: neither a Mach-O nor a readable ELF file",
                 f->path);
        rc = -EINVAL;
      }
    }
  }
  if (rc < 0) goto fail;
  close(fd);
  *out = f;
  return 0;
fail:
  if (fd >= 0) close(fd);
  stkr__symfile_free(f);
  return rc;
}

void stkr__symfile_free(stkr__symfile *f) {
  if (!f) return;
  if (f->ix.dw) dwarf_end(f->ix.dw);
  stkr__dwidx_free(&f->ix);
  if (f->elf) elf_end(f->elf);
  stkr_macho_image_free(&f->im);
  if (f->map) munmap(f->map, f->map_len);
  stkr__symbe_free(f->be);
  stkr__symcache_free(f->cache);
  stkr__dwnames_free(&f->names);
  free(f->syms);
  free(f->path);
  free(f);
}

void stkr__symfile_get_info(const stkr__symfile *f, stkr__symfile_info *info) {
  *info = f->info;
}

static size_t lookup_dwarf(stkr__symfile *f, uint64_t a, stkr__symres *out,
                           size_t max) {
  Dwarf_Die cudie, sub;
  const char *file, *s;
  int line, col;
  size_t n;

  if (!stkr__dw_cu_of(&f->ix, a, &cudie)) return 0;
  file = stkr__dw_line(&f->names, &cudie, a, true, &line, &col);
  if (stkr__dw_find_subprogram(&f->ix, &cudie, a, &sub)) {
    n = stkr__dw_frames(&f->names, &cudie, &sub, a, file, line, col, true, out,
                        max);
    if (!out[n - 1].function) {
      s = sym_lookup(f, a);
      out[n - 1].function = s ? stkr__dw_sym_name(&f->names, s, n - 1) : NULL;
    }
    return n;
  }
  /* In a CU but in no subprogram DIE: the symbol, with the line. */
  if (!(s = sym_lookup(f, a))) return 0;
  out[0] = (stkr__symres){stkr__dw_sym_name(&f->names, s, 0), file,
                          line > 0 ? (uint32_t)line : 0,
                          col > 0 ? (uint32_t)col : 0, false};
  return 1;
}

size_t stkr__symfile_lookup(stkr__symfile *f, uint64_t addr, stkr__symres *out,
                            size_t max) {
  const stkr__symimg *img;
  const char *s;
  size_t n = 0;
  if (max == 0) return 0;
  if (f->cache) return stkr__symcache_lookup(f->cache, addr, out, max);
  if (f->be) /* the backend looks up return addresses, at PC - 1 */
    return addr == UINT64_MAX ? 0
                              : stkr__symbe_resolve(f->be, addr + 1, &img, out, max);
  if (f->ix.dw) n = lookup_dwarf(f, addr, out, max);
  if (n == 0 && (s = sym_lookup(f, addr)) != NULL) {
    out[0] = (stkr__symres){stkr__dw_sym_name(&f->names, s, 0), NULL, 0, 0,
                            false};
    n = 1;
  }
  return n;
}

void stkr__symfile_prefetch(const stkr__symfile *f, uint64_t addr, int step) {
  if (f->cache) stkr__symcache_prefetch(f->cache, addr, step);
}

int stkr__symfile_walk(stkr__symfile *f, const stkr__symwalk_ops *ops,
                       uint64_t *hi) {
  /* A symbol cache holds answers, not DWARF: converting it again would
   * write an empty cache (over itself, given its own directory). */
  if (!f->info.macho || f->cache) return -ENOTSUP;
  *hi = f->im.text_vmaddr + f->im.text_vmsize;
  return stkr__dw_walk(f->ix.dw, f->syms, f->n_syms, f->im.text_vmaddr, *hi,
                       ops);
}

uint64_t stkr__symfile_dwarf_bytes(const stkr__symfile *f) {
  uint64_t n = 0;
  for (size_t i = 0; i < f->im.n_sects; i++)
    if (strcmp(f->im.sects[i].segname, "__DWARF") == 0 && f->im.sects[i].has_data)
      n += f->im.sects[i].size;
  return n;
}

#endif /* !__APPLE__ */
