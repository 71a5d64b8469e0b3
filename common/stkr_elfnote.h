/*
 * stkr_elfnote.h: the GNU build-id note of an ELF image (libc only,
 * header-only), read from a PT_NOTE segment in memory. Shared by the
 * image list (flush/images_linux.c: the symbolizer's key) and the unwind
 * table cache (recorder/unwind_tables.c: the cache's key), which may not
 * depend on each other.
 *
 * Thread-safety: a pure function of the bytes it is given.
 */
#ifndef STKR_COMMON_ELFNOTE_H
#define STKR_COMMON_ELFNOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STKR_NT_GNU_BUILD_ID 3u

/* Find the NT_GNU_BUILD_ID note ("GNU") in the notes at p[0..len), whose
 * entries are aligned to `align` (4, or 8 when the PT_NOTE says so).
 * Every size is checked against len before it is used.
 * @return true and *id (pointing into p), *id_len; false if none. */
static inline bool stkr_elf_note_build_id(const uint8_t *p, size_t len,
                                          size_t align, const uint8_t **id,
                                          size_t *id_len) {
  while (len >= 12) { /* Elf32_Nhdr and Elf64_Nhdr: three 32-bit words */
    uint32_t w[3];
    size_t namesz, descsz, total;
    memcpy(w, p, sizeof w);
    namesz = ((size_t)w[0] + align - 1) & ~(align - 1);
    descsz = ((size_t)w[1] + align - 1) & ~(align - 1);
    if (namesz > len || descsz > len) return false;
    total = 12 + namesz + descsz;
    if (total > len) return false;
    if (w[2] == STKR_NT_GNU_BUILD_ID && w[0] == 4 &&
        memcmp(p + 12, "GNU", 4) == 0) {
      *id = p + 12 + namesz;
      *id_len = w[1];
      return true;
    }
    p += total;
    len -= total;
  }
  return false;
}

#if defined(__linux__)
#include <link.h>

/* The build-id of a loaded image (a dl_iterate_phdr entry), from its
 * PT_NOTE segments in memory (mapped with the image).
 * @return true and *id, *id_len (1..max_len bytes); false if none. */
static inline bool stkr_elf_image_build_id(const struct dl_phdr_info *info,
                                           size_t max_len, const uint8_t **id,
                                           size_t *id_len) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_NOTE &&
        stkr_elf_note_build_id(
            (const uint8_t *)(uintptr_t)(info->dlpi_addr + ph->p_vaddr),
            ph->p_filesz, ph->p_align == 8 ? 8 : 4, id, id_len))
      return *id_len > 0 && *id_len <= max_len;
  }
  return false;
}
#endif

#endif /* STKR_COMMON_ELFNOTE_H */
