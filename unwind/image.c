/*
 * image.c: where an image's .eh_frame is (in memory, through
 * PT_GNU_EH_FRAME; in a file, through its section headers), the set of
 * every loaded image's table, and its RCU-style publication.
 *
 * Everything here but stkr__unwind_set_find, stkr__unwind_publish and
 * stkr__unwind_set_current runs on the worker and may allocate.
 */
#define _GNU_SOURCE
/* ELF and the Linux loader: nothing of this file is built elsewhere (the
 * recorder uses tables on Linux only, unwind_tables.c). */
#if defined(__linux__)
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "unwind/unwind.h"
#include "unwind/uw_read.h"

/* .eh_frame_hdr: version 1, eh_frame_ptr_enc, fde_count_enc, table_enc,
 * then eh_frame_ptr, an encoded pointer (GNU ld writes pcrel|sdata4, 0x1b)
 * whose pcrel is relative to itself, at hdr + 4, and datarel to the hdr. */
int stkr__unwind_parse_hdr(const uint8_t *hdr, size_t len, uint64_t hdr_vaddr,
                           uint64_t *eh_frame_vaddr) {
  uw_cur c;

  if (hdr == NULL || len < 8 || hdr[0] != 1) return -EINVAL;
  c = (uw_cur){hdr + 4, hdr + len};
  return uw_rd_pointer(&c, hdr[1], hdr_vaddr + 4, hdr_vaddr, eh_frame_vaddr)
             ? 0
             : -EINVAL;
}

int stkr__unwind_src_loaded(const struct dl_phdr_info *info, stkr__uw_src *src) {
  const ElfW(Phdr) *eh = NULL;
  uint64_t ehf;
  int i;

  memset(src, 0, sizeof *src);
  for (i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) eh = &info->dlpi_phdr[i];
  if (eh == NULL) return -ENOENT;
  if (stkr__unwind_parse_hdr((const uint8_t *)(info->dlpi_addr + eh->p_vaddr),
                             eh->p_memsz, info->dlpi_addr + eh->p_vaddr, &ehf) != 0)
    return -EINVAL;
  /* .eh_frame has no size in the hdr: it ends at its zero terminator, and
   * in any case at the end of the PT_LOAD holding it (never read past
   * mapped memory). */
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    uint64_t lo = info->dlpi_addr + p->p_vaddr, hi = lo + p->p_filesz;
    if (p->p_type != PT_LOAD || ehf < lo || ehf >= hi) continue;
    src->eh_frame = (const uint8_t *)(uintptr_t)ehf;
    src->eh_frame_len = hi - ehf;
    src->eh_frame_vaddr = ehf;
    src->data_base = info->dlpi_addr + eh->p_vaddr;
    src->base = info->dlpi_addr;
    src->arch = STKR__UW_HOST;
    return 0;
  }
  return -EINVAL;
}

/* ---- files ----------------------------------------------------------------- */
static const Elf64_Shdr *find_section(const uint8_t *f, size_t n, const Elf64_Ehdr *eh,
                                      const char *name) {
  const Elf64_Shdr *sh, *str;
  unsigned i;

  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      eh->e_shoff > n || (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > n - eh->e_shoff ||
      eh->e_shstrndx >= eh->e_shnum)
    return NULL;
  sh = (const Elf64_Shdr *)(f + eh->e_shoff);
  str = &sh[eh->e_shstrndx];
  if (str->sh_offset > n || str->sh_size > n - str->sh_offset) return NULL;
  for (i = 0; i < eh->e_shnum; i++) {
    size_t len = strlen(name);
    if (sh[i].sh_name >= str->sh_size || str->sh_size - sh[i].sh_name <= len) continue;
    if (memcmp(f + str->sh_offset + sh[i].sh_name, name, len + 1) != 0) continue;
    if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_offset > n || sh[i].sh_size > n - sh[i].sh_offset)
      return NULL;
    return &sh[i];
  }
  return NULL;
}

int stkr__unwind_src_elf(const uint8_t *f, size_t n, stkr__uw_src *src) {
  Elf64_Ehdr eh;
  const Elf64_Shdr *ehf, *hdr;

  memset(src, 0, sizeof *src);
  if (n < sizeof eh) return -EINVAL;
  memcpy(&eh, f, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64))
    return -EINVAL;
  if ((uintptr_t)f % 8 != 0) return -EINVAL; /* Elf64_Shdr wants 8 (malloc and mmap give it) */
  ehf = find_section(f, n, &eh, ".eh_frame");
  hdr = find_section(f, n, &eh, ".eh_frame_hdr");
  if (ehf == NULL) return -ENOENT;
  src->eh_frame = f + ehf->sh_offset;
  src->eh_frame_len = ehf->sh_size;
  src->eh_frame_vaddr = ehf->sh_addr;
  src->data_base = hdr ? hdr->sh_addr : 0;
  src->base = 0;
  src->arch = eh.e_machine == EM_AARCH64 ? STKR__UW_AARCH64 : STKR__UW_X86_64;
  return 0;
}

int stkr__unwind_file_read(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
  int fd, rc;
  struct stat st;
  uint8_t *f;
  size_t got = 0;

  *buf = NULL;
  *len = 0;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (fstat(fd, &st) != 0) { rc = -errno; close(fd); return rc; }
  if (st.st_size <= 0 || (uint64_t)st.st_size > max_bytes) { close(fd); return -EFBIG; }
  f = malloc((size_t)st.st_size);
  if (f == NULL) { close(fd); return -ENOMEM; }
  rc = stkr_pread_all(fd, f, (size_t)st.st_size, 0, &got);
  if (rc == 0 && got < (size_t)st.st_size) rc = -EIO; /* it shrank */
  if (rc < 0) { free(f); close(fd); return rc; }
  close(fd);
  *buf = f;
  *len = got;
  return 0;
}

int stkr__unwind_table_from_file(const char *path, size_t max_bytes,
                                 stkr__uw_table **out, stkr__uw_stats *stats) {
  stkr__uw_src src;
  uint8_t *f;
  size_t n;
  int rc;

  *out = NULL;
  if (stats) memset(stats, 0, sizeof *stats);
  if ((rc = stkr__unwind_file_read(path, max_bytes, &f, &n)) != 0) return rc;
  rc = stkr__unwind_src_elf(f, n, &src);
  if (rc == 0) rc = stkr__unwind_table_build(&src, out, stats);
  free(f);
  return rc;
}

/* ---- the set of loaded images ----------------------------------------------- */
typedef struct set_acc {
  stkr__uw_table **t;
  size_t n, cap;
  int err;
  unsigned failed, nocfi;
  stkr__uw_stats total;
  uintptr_t vdso;       /* the vdso's ELF header (AT_SYSINFO_EHDR), 0: none */
  uintptr_t vdso_tramp; /* its signal trampoline, found by vdso_sigtramp */
  stkr__uw_table_fn make; /* NULL: stkr__unwind_table_build */
  void *make_arg;
} set_acc;

#define A64_MOV_X8_RT_SIGRETURN 0xd2801168u /* mov x8, #139 */
#define A64_SVC_0 0xd4000001u

uintptr_t stkr__unwind_find_sigtramp(const uint8_t *code, size_t len, uintptr_t addr) {
  size_t i = (4 - (addr & 3)) & 3; /* instructions are 4-aligned */
  for (; len >= 8 && i <= len - 8; i += 4) {
    uint32_t w[2];
    memcpy(w, code + i, sizeof w);
    if (w[0] == A64_MOV_X8_RT_SIGRETURN && w[1] == A64_SVC_0) return addr + i;
  }
  return 0;
}

/* aarch64: the vdso's __kernel_rt_sigreturn, where every handler installed
 * without SA_RESTORER returns. It has no CFI (Linux >= 5.10 commented it
 * out), so the builder finds it by its two instructions in the vdso's
 * executable segment: a few KiB, mapped for the life of the process. */
static void vdso_sigtramp(const struct dl_phdr_info *info, set_acc *a) {
#if defined(__aarch64__)
  uint16_t i;
  if (a->vdso == 0 || a->vdso_tramp != 0) return;
  for (i = 0; i < info->dlpi_phnum; i++) /* the vdso: the image whose first segment is at it */
    if (info->dlpi_phdr[i].p_type == PT_LOAD &&
        info->dlpi_addr + info->dlpi_phdr[i].p_vaddr - info->dlpi_phdr[i].p_offset == a->vdso)
      break;
  if (i == info->dlpi_phnum) return;
  for (i = 0; i < info->dlpi_phnum && a->vdso_tramp == 0; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_filesz <= (1u << 20))
      a->vdso_tramp = stkr__unwind_find_sigtramp(
          (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz,
          info->dlpi_addr + ph->p_vaddr);
  }
#else
  (void)info, (void)a; /* x86_64: glibc's __restore_rt has CFI ('S') */
#endif
}

static int add_image(struct dl_phdr_info *info, size_t size, void *arg) {
  set_acc *a = arg;
  stkr__uw_src src;
  stkr__uw_table *t;
  stkr__uw_stats st;
  int rc;

  (void)size;
  if (a->err) return 1;
  vdso_sigtramp(info, a);
  if (stkr__unwind_src_loaded(info, &src) != 0) { a->nocfi++; return 0; }
  rc = a->make ? a->make(a->make_arg, info, &src, &t, &st)
              : stkr__unwind_table_build(&src, &t, &st);
  a->total.cies += st.cies;
  a->total.fdes += st.fdes;
  a->total.fdes_bad += st.fdes_bad;
  a->total.rows_fallback += st.rows_fallback;
  a->total.eh_frame_bytes += st.eh_frame_bytes;
  if (rc == -ENOMEM) { a->err = rc; return 1; }
  if (rc != 0 || t->n == 0) { stkr__unwind_table_free(t); a->failed++; return 0; }
  if (stkr_grow((void **)&a->t, &a->cap, a->n + 1, sizeof *a->t) != 0) {
    stkr__unwind_table_free(t);
    a->err = -ENOMEM;
    return 1;
  }
  a->total.rows += st.rows;
  a->total.table_bytes += st.table_bytes;
  a->t[a->n++] = t;
  return 0;
}

static int cmp_table(const void *pa, const void *pb) {
  const stkr__uw_table *a = *(stkr__uw_table *const *)pa, *b = *(stkr__uw_table *const *)pb;
  return stkr_cmp_u64(a->lo, b->lo);
}

static _Atomic uint64_t g_set_gen; /* the last gen handed out */

int stkr__unwind_set_build_loaded(stkr__uw_set **out, unsigned *failed) {
  return stkr__unwind_set_build_loaded_with(NULL, NULL, out, failed);
}

int stkr__unwind_set_build_loaded_with(stkr__uw_table_fn fn, void *arg,
                                       stkr__uw_set **out, unsigned *failed) {
  set_acc a;
  stkr__uw_set *s;
  size_t i, k = 0;

  memset(&a, 0, sizeof a);
  a.make = fn;
  a.make_arg = arg;
  *out = NULL;
  a.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  dl_iterate_phdr(add_image, &a);
  s = calloc(1, sizeof *s);
  if (a.err || s == NULL) {
    for (i = 0; i < a.n; i++) stkr__unwind_table_free(a.t[i]);
    free(a.t);
    free(s);
    return -ENOMEM;
  }
  qsort(a.t, a.n, sizeof *a.t, cmp_table);
  for (i = 0; i < a.n; i++) { /* overlapping ranges: keep the first (never seen) */
    if (k > 0 && a.t[i]->lo < a.t[k - 1]->hi) { stkr__unwind_table_free(a.t[i]); a.failed++; continue; }
    a.t[k++] = a.t[i];
  }
  /* relaxed: only uniqueness matters (a cache tags its entries with it). */
  s->gen = atomic_fetch_add_explicit(&g_set_gen, 1, memory_order_relaxed) + 1;
  s->n = (uint32_t)k;
  s->tables = a.t;
  s->total = a.total;
  s->total.table_bytes += sizeof *s + k * sizeof *a.t;
  s->images_without_cfi = a.nocfi;
  if (a.vdso_tramp != 0) s->sigtramp[s->n_sigtramp++] = a.vdso_tramp;
  if (failed) *failed = a.failed;
  *out = s;
  return 0;
}

int stkr__unwind_set_add_sigtramp(stkr__uw_set *s, uintptr_t addr) {
  uint32_t i;
  if (s == NULL || addr == 0) return -EINVAL;
  for (i = 0; i < s->n_sigtramp; i++)
    if (s->sigtramp[i] == addr) return 0;
  if (s->n_sigtramp == STKR__UW_SIGTRAMP_MAX) return -ENOSPC;
  s->sigtramp[s->n_sigtramp++] = addr;
  return 0;
}

void stkr__unwind_set_free(stkr__uw_set *s) {
  uint32_t i;
  if (s == NULL) return;
  for (i = 0; i < s->n; i++) stkr__unwind_table_free(s->tables[i]);
  free(s->tables);
  free(s);
}

const stkr__uw_table *stkr__unwind_set_find(const stkr__uw_set *s, uintptr_t pc) {
  uint32_t lo = 0, hi;
  if (s == NULL || s->n == 0) return NULL;
  hi = s->n; /* last table with lo <= pc */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (s->tables[mid]->lo <= pc) lo = mid;
    else hi = mid;
  }
  return (pc >= s->tables[lo]->lo && pc < s->tables[lo]->hi) ? s->tables[lo] : NULL;
}

stkr__uw_set *stkr__unwind_publish(stkr__uw_slot *slot, stkr__uw_set *next) {
  /* release: pairs with the acquire in stkr__unwind_set_current, so a
   * producer that sees `next` sees every byte the builder wrote into it. */
  return atomic_exchange_explicit(&slot->cur, next, memory_order_acq_rel);
}

const stkr__uw_set *stkr__unwind_set_current(stkr__uw_slot *slot) {
  /* acquire: pairs with the release in stkr__unwind_publish. */
  return atomic_load_explicit(&slot->cur, memory_order_acquire);
}

#endif /* __linux__ */
