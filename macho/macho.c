/*
 * macho.c: the Mach-O reader (see macho.h). Layouts from Apple's
 * <mach-o/loader.h> and <mach-o/fat.h>, read field by field (little-endian
 * slices, big-endian fat headers) so that nothing depends on the host's
 * structs or alignment. Every read goes through in(), which checks an
 * (offset, size) pair against the bytes given without overflowing.
 */
#include "macho/macho.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAT_MAGIC 0xcafebabeu
#define FAT_MAGIC_64 0xcafebabfu
#define MH_MAGIC 0xfeedfaceu
#define MH_MAGIC_64 0xfeedfacfu
#define MH_CIGAM 0xcefaedfeu
#define MH_CIGAM_64 0xcffaedfeu
#define LC_SYMTAB 0x2u
#define LC_SEGMENT_64 0x19u
#define LC_UUID 0x1bu
#define HDR64 32u     /* sizeof(struct mach_header_64) */
#define SEG64 72u     /* sizeof(struct segment_command_64) */
#define SECT64 80u    /* sizeof(struct section_64) */
#define NLIST64 16u   /* sizeof(struct nlist_64) */
#define N_STAB 0xe0u
#define N_TYPE 0x0eu
#define N_SECT 0x0eu
#define SECTION_TYPE 0xffu
#define S_ZEROFILL 0x1u
#define S_GB_ZEROFILL 0xcu
#define S_THREAD_LOCAL_ZEROFILL 0x12u

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}
static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}
static uint64_t be64(const uint8_t *p) {
  return (uint64_t)be32(p) << 32 | (uint64_t)be32(p + 4);
}

/* Does [off, off+n) lie inside [0, len)? (No overflow.) */
static bool in(uint64_t off, uint64_t n, uint64_t len) {
  return off <= len && n <= len - off;
}

static int fail(char *err, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t cap, int code, const char *fmt, ...) {
  va_list ap;
  if (err && cap) {
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return code;
}

bool stkr_macho_is_macho(const uint8_t *d, size_t len) {
  uint32_t m;
  if (len < 8) return false;
  m = le32(d);
  if (m == MH_MAGIC_64 || m == MH_MAGIC || m == MH_CIGAM || m == MH_CIGAM_64)
    return true;
  m = be32(d);
  /* 0xcafebabe is also a Java class file's magic: a fat header has few
   * architectures where a class file has its version (>= 45) there. */
  return (m == FAT_MAGIC || m == FAT_MAGIC_64) && be32(d + 4) > 0 &&
         be32(d + 4) < 45;
}

int stkr_macho_slices(const uint8_t *d, size_t len, stkr_macho_slice *out,
                      size_t max, size_t *n, char *err, size_t cap) {
  uint32_t magic, nfat;
  uint64_t entsz;

  *n = 0;
  if (!stkr_macho_is_macho(d, len))
    return fail(err, cap, -EINVAL, "offset 0: not a Mach-O file");
  magic = be32(d);
  if (magic != FAT_MAGIC && magic != FAT_MAGIC_64) {
    if (len < 28) /* sizeof(struct mach_header), the 32-bit one */
      return fail(err, cap, -EINVAL,
                  "offset 0: %zu bytes: too short for a Mach-O header", len);
    if (max == 0) return 0;
    out[0] = (stkr_macho_slice){le32(d + 4), le32(d + 8), 0, len};
    *n = 1;
    return 0;
  }
  nfat = be32(d + 4);
  entsz = magic == FAT_MAGIC ? 20 : 32;
  if (!in(8, (uint64_t)nfat * entsz, len))
    return fail(err, cap, -EINVAL,
                "offset 4: %u fat architectures do not fit in %zu bytes",
                nfat, len);
  for (uint32_t i = 0; i < nfat && *n < max; i++) {
    const uint8_t *e = d + 8 + i * entsz;
    stkr_macho_slice s = {be32(e), be32(e + 4), 0, 0};
    if (magic == FAT_MAGIC) {
      s.offset = be32(e + 8);
      s.size = be32(e + 12);
    } else {
      s.offset = be64(e + 8);
      s.size = be64(e + 16);
    }
    if (!in(s.offset, s.size, len) || s.size < HDR64)
      return fail(err, cap, -EINVAL,
                  "offset %llu: fat architecture %u (offset %llu, size "
                  "%llu) lies outside the file (%zu bytes)",
                  (unsigned long long)(8 + i * entsz), i,
                  (unsigned long long)s.offset, (unsigned long long)s.size,
                  len);
    out[(*n)++] = s;
  }
  return 0;
}

static int add_sections(const uint8_t *c, uint32_t cmdsize, uint64_t coff,
                        const stkr_macho_slice *s, stkr_macho_image *im,
                        char *err, size_t cap) {
  uint32_t nsects = le32(c + 64);
  stkr_macho_section *ns;
  char segname[17];

  memcpy(segname, c + 8, 16);
  segname[16] = '\0';
  if ((uint64_t)nsects * SECT64 > cmdsize - SEG64)
    return fail(err, cap, -EINVAL,
                "offset %llu: segment %s: %u sections do not fit in its "
                "load command (%u bytes)",
                (unsigned long long)coff, segname, nsects, cmdsize);
  if (strcmp(segname, "__TEXT") == 0) {
    im->has_text = true;
    im->text_vmaddr = le64(c + 24);
    im->text_vmsize = le64(c + 32);
  }
  if (nsects == 0) return 0;
  ns = realloc(im->sects, (im->n_sects + nsects) * sizeof *ns);
  if (!ns) return -ENOMEM;
  im->sects = ns;
  for (uint32_t i = 0; i < nsects; i++) {
    const uint8_t *p = c + SEG64 + (uint64_t)i * SECT64;
    stkr_macho_section *o = &im->sects[im->n_sects++];
    uint32_t type = le32(p + 64) & SECTION_TYPE, off = le32(p + 48);
    memcpy(o->sectname, p, 16);
    o->sectname[16] = '\0';
    memcpy(o->segname, p + 16, 16);
    o->segname[16] = '\0';
    o->addr = le64(p + 32);
    o->size = le64(p + 40);
    o->offset = s->offset + off;
    o->has_data = type != S_ZEROFILL && type != S_GB_ZEROFILL &&
                  type != S_THREAD_LOCAL_ZEROFILL && off != 0 &&
                  in(off, o->size, s->size);
    /* A dSYM's DWARF is what we read: its sections must be there. */
    if (strcmp(segname, "__DWARF") == 0 && o->size && !o->has_data)
      return fail(err, cap, -EINVAL,
                  "offset %llu: section __DWARF,%s (offset %u, size %llu) "
                  "lies outside the file",
                  (unsigned long long)(coff + SEG64 + (uint64_t)i * SECT64),
                  o->sectname, off, (unsigned long long)o->size);
  }
  return 0;
}

static int parse_symtab(const uint8_t *c, uint64_t coff,
                        const stkr_macho_slice *s, stkr_macho_image *im,
                        char *err, size_t cap) {
  uint32_t symoff = le32(c + 8), nsyms = le32(c + 12);
  uint32_t stroff = le32(c + 16), strsize = le32(c + 20);
  if (!in(symoff, (uint64_t)nsyms * NLIST64, s->size))
    return fail(err, cap, -EINVAL,
                "offset %llu: symbol table (offset %u, %u entries) lies "
                "outside the file",
                (unsigned long long)coff, symoff, nsyms);
  if (!in(stroff, strsize, s->size))
    return fail(err, cap, -EINVAL,
                "offset %llu: string table (offset %u, %u bytes) lies "
                "outside the file",
                (unsigned long long)coff, stroff, strsize);
  im->has_symtab = true;
  im->symoff = s->offset + symoff;
  im->nsyms = nsyms;
  im->stroff = s->offset + stroff;
  im->strsize = strsize;
  return 0;
}

int stkr_macho_parse(const uint8_t *data, size_t len, const stkr_macho_slice *s,
                     stkr_macho_image *im, char *err, size_t cap) {
  const uint8_t *d;
  uint32_t magic, ncmds, sizeofcmds;
  uint64_t off;
  int rc = 0;

  memset(im, 0, sizeof *im);
  if (!in(s->offset, s->size, len) || s->size < HDR64)
    return fail(err, cap, -EINVAL,
                "offset %llu: no room for a Mach-O header (%llu bytes)",
                (unsigned long long)s->offset, (unsigned long long)s->size);
  d = data + s->offset;
  magic = le32(d);
  if (magic == MH_MAGIC || magic == MH_CIGAM || magic == MH_CIGAM_64)
    return fail(err, cap, -ENOTSUP,
                "offset %llu: a 32-bit or big-endian Mach-O slice (only "
                "64-bit little-endian ones are read)",
                (unsigned long long)s->offset);
  if (magic != MH_MAGIC_64)
    return fail(err, cap, -EINVAL, "offset %llu: bad Mach-O magic 0x%08x",
                (unsigned long long)s->offset, magic);
  im->cputype = le32(d + 4);
  im->cpusubtype = le32(d + 8);
  im->filetype = le32(d + 12);
  ncmds = le32(d + 16);
  sizeofcmds = le32(d + 20);
  if (!in(HDR64, sizeofcmds, s->size))
    return fail(err, cap, -EINVAL,
                "offset %llu: load commands (%u bytes) run past the end of "
                "the slice (%llu bytes)",
                (unsigned long long)(s->offset + 20), sizeofcmds,
                (unsigned long long)s->size);
  off = HDR64;
  for (uint32_t i = 0; i < ncmds && rc == 0; i++) {
    uint64_t coff = s->offset + off; /* for messages: offset in the file */
    const uint8_t *c = d + off;
    uint32_t cmd, cmdsize;
    if (!in(off, 8, HDR64 + (uint64_t)sizeofcmds)) {
      rc = fail(err, cap, -EINVAL,
                "offset %llu: load command %u of %u starts past the end of "
                "the load commands", (unsigned long long)coff, i, ncmds);
      break;
    }
    cmd = le32(c);
    cmdsize = le32(c + 4);
    if (cmdsize < 8 || !in(off, cmdsize, HDR64 + (uint64_t)sizeofcmds)) {
      rc = fail(err, cap, -EINVAL,
                "offset %llu: load command %u (0x%x) has size %u, outside "
                "the load commands", (unsigned long long)coff, i, cmd,
                cmdsize);
      break;
    }
    if (cmd == LC_SEGMENT_64) {
      if (cmdsize < SEG64)
        rc = fail(err, cap, -EINVAL,
                  "offset %llu: LC_SEGMENT_64 of %u bytes (< %u)",
                  (unsigned long long)coff, cmdsize, SEG64);
      else
        rc = add_sections(c, cmdsize, coff, s, im, err, cap);
    } else if (cmd == LC_UUID) {
      if (cmdsize < 24)
        rc = fail(err, cap, -EINVAL, "offset %llu: LC_UUID of %u bytes (< 24)",
                  (unsigned long long)coff, cmdsize);
      else {
        memcpy(im->uuid, c + 8, 16);
        im->has_uuid = true;
      }
    } else if (cmd == LC_SYMTAB) {
      if (cmdsize < 24)
        rc = fail(err, cap, -EINVAL,
                  "offset %llu: LC_SYMTAB of %u bytes (< 24)",
                  (unsigned long long)coff, cmdsize);
      else
        rc = parse_symtab(c, coff, s, im, err, cap);
    }
    off += cmdsize;
  }
  if (rc != 0) stkr_macho_image_free(im);
  return rc;
}

void stkr_macho_image_free(stkr_macho_image *im) {
  if (!im) return;
  free(im->sects);
  im->sects = NULL;
  im->n_sects = 0;
}

const stkr_macho_section *stkr_macho_section_find(const stkr_macho_image *im,
                                                  const char *seg,
                                                  const char *sect) {
  for (size_t i = 0; i < im->n_sects; i++)
    if (strcmp(im->sects[i].segname, seg) == 0 &&
        strcmp(im->sects[i].sectname, sect) == 0)
      return &im->sects[i];
  return NULL;
}

void stkr_macho_symbols(const uint8_t *data, const stkr_macho_image *im,
                        stkr_macho_sym_fn fn, void *arg, uint64_t *bad) {
  const char *strtab = (const char *)data + im->stroff;
  if (bad) *bad = 0;
  if (!im->has_symtab) return;
  for (uint64_t i = 0; i < im->nsyms; i++) {
    const uint8_t *e = data + im->symoff + i * NLIST64;
    uint32_t strx = le32(e);
    uint8_t type = e[4], sect = e[5];
    if ((type & N_STAB) || (type & N_TYPE) != N_SECT) continue;
    /* The name must start and end (NUL) inside the string table. */
    if (strx == 0 || strx >= im->strsize ||
        !memchr(strtab + strx, '\0', im->strsize - strx)) {
      if (bad) (*bad)++;
      continue;
    }
    fn(arg, strtab + strx, le64(e + 8), sect);
  }
}

const char *stkr_macho_arch_name(uint32_t t, uint32_t sub) {
  if (t == STKR_MACHO_CPU_ARM64)
    return (sub & 0xffffffu) == STKR_MACHO_SUB_ARM64E ? "arm64e" : "arm64";
  if (t == STKR_MACHO_CPU_X86_64)
    return (sub & 0xffffffu) == 8 ? "x86_64h" : "x86_64";
  return NULL;
}

int stkr_macho_arch_parse(const char *name, uint32_t *t, uint32_t *sub) {
  static const struct { const char *n; uint32_t t, s; } archs[] = {
      {"arm64", STKR_MACHO_CPU_ARM64, 0},
      {"arm64e", STKR_MACHO_CPU_ARM64, STKR_MACHO_SUB_ARM64E},
      {"x86_64", STKR_MACHO_CPU_X86_64, 3},
      {"x86_64h", STKR_MACHO_CPU_X86_64, 8}};
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
    if (strcmp(name, archs[i].n) == 0) {
      *t = archs[i].t;
      *sub = archs[i].s;
      return 0;
    }
  return -EINVAL;
}

bool stkr_macho_arch_match(uint32_t t, uint32_t sub, uint32_t wt, uint32_t ws) {
  const char *a = stkr_macho_arch_name(t, sub), *b = stkr_macho_arch_name(wt, ws);
  return a && b && strcmp(a, b) == 0;
}

void stkr_macho_uuid_str(const uint8_t u[16], char out[37]) {
  snprintf(out, 37,
           "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
           u[11], u[12], u[13], u[14], u[15]);
}
