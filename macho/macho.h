/*
 * macho.h: a reader of Mach-O files (libc only), for symbolizing Apple
 * recordings on any platform: thin and universal ("fat") files, 64-bit
 * slices (arm64, arm64e, x86_64), the image UUID (LC_UUID), segments and
 * sections (LC_SEGMENT_64: the __TEXT vmaddr, the __DWARF sections of a
 * dSYM) and the symbol table (LC_SYMTAB, nlist_64).
 *
 * These files come from elsewhere (a device, a build server): every
 * offset, size and count is checked against the bytes given before it is
 * used, and every error message names the byte offset (the caller adds
 * the file name). Nothing is allocated but the section list; the caller
 * owns the bytes (typically an mmap of the file) and keeps them while it
 * uses the results.
 *
 * Thread-safety: none needed (no shared state).
 */
#ifndef STKR_MACHO_H
#define STKR_MACHO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STKR_MACHO_CPU_X86_64 0x01000007u
#define STKR_MACHO_CPU_ARM64 0x0100000cu
#define STKR_MACHO_SUB_ARM64E 2u /* low 24 bits; the top byte holds ABI flags */
#define STKR_MACHO_MAX_SLICES 16

/* One architecture of a file: the whole file when it is thin. */
typedef struct stkr_macho_slice {
  uint32_t cputype, cpusubtype;
  uint64_t offset, size; /* bytes of the file, checked to lie inside it */
} stkr_macho_slice;

typedef struct stkr_macho_section {
  char segname[17], sectname[17]; /* NUL-terminated copies */
  uint64_t addr, size;
  uint64_t offset;  /* from the start of the FILE (not the slice) */
  bool has_data;    /* offset..offset+size lies in the slice (not zerofill) */
} stkr_macho_section;

/* A parsed 64-bit slice. */
typedef struct stkr_macho_image {
  uint32_t cputype, cpusubtype, filetype;
  bool has_uuid;
  uint8_t uuid[16];
  bool has_text;         /* a __TEXT segment */
  uint64_t text_vmaddr, text_vmsize;
  stkr_macho_section *sects; /* in load-command order: n_sect of an nlist
                                is 1 + an index into this */
  size_t n_sects;
  bool has_symtab;
  uint64_t symoff, nsyms, stroff, strsize; /* from the start of the file,
                                              checked */
} stkr_macho_image;

/* Is this a Mach-O file (thin 32/64-bit, or universal)? */
bool stkr_macho_is_macho(const uint8_t *data, size_t len);

/* The slices of a file: a thin file is one slice. @return 0, or -EINVAL
 * (not Mach-O, or a fat header that points outside the file: err says
 * where). */
int stkr_macho_slices(const uint8_t *data, size_t len, stkr_macho_slice *out,
                      size_t max, size_t *n, char *err, size_t err_cap);

/* Parse the 64-bit Mach-O at data[s->offset .. + s->size]. @return 0,
 * -ENOTSUP (32-bit or big-endian slice), -EINVAL (malformed: err names
 * the offset), -ENOMEM. Free with stkr_macho_image_free. */
int stkr_macho_parse(const uint8_t *data, size_t len, const stkr_macho_slice *s,
                     stkr_macho_image *out, char *err, size_t err_cap);
void stkr_macho_image_free(stkr_macho_image *im);

/* The section (segname, sectname), or NULL. */
const stkr_macho_section *stkr_macho_section_find(const stkr_macho_image *im,
                                                  const char *seg,
                                                  const char *sect);

/* Call fn for every defined, non-debugging symbol in a section of the
 * image (n_type N_SECT, no N_STAB), with its name (NUL-terminated inside
 * the string table, checked) and value; entries with a bad string index
 * are skipped and counted in *bad (may be NULL). */
typedef void (*stkr_macho_sym_fn)(void *arg, const char *name, uint64_t addr,
                                  uint8_t sect);
void stkr_macho_symbols(const uint8_t *data, const stkr_macho_image *im,
                        stkr_macho_sym_fn fn, void *arg, uint64_t *bad);

/* "arm64", "arm64e", "x86_64", or NULL for another CPU. */
const char *stkr_macho_arch_name(uint32_t cputype, uint32_t cpusubtype);
/* The CPU type and subtype (low 24 bits) of an -arch name. @return 0 or
 * -EINVAL. */
int stkr_macho_arch_parse(const char *name, uint32_t *cputype,
                          uint32_t *cpusubtype);
/* Does the slice have this arch? (subtype compared on its low 24 bits;
 * "arm64" does not match arm64e.) */
bool stkr_macho_arch_match(uint32_t cputype, uint32_t cpusubtype,
                           uint32_t want_type, uint32_t want_sub);

/* The UUID as Apple prints it: 8-4-4-4-12 upper-case hex (37 bytes). */
void stkr_macho_uuid_str(const uint8_t uuid[16], char out[37]);

#endif /* STKR_MACHO_H */
