/*
 * images_linux.c: the loaded images, for mapping recorded PCs to files.
 *
 * dl_iterate_phdr gives every loaded object with its load bias (dlpi_addr)
 * and program headers: the text range is the PF_X PT_LOAD segments, the
 * build-id is the NT_GNU_BUILD_ID note in a PT_NOTE segment (read from
 * memory; notes are mapped with the image). The loader also counts objects
 * added and removed (dlpi_adds/dlpi_subs): when neither moved since the last
 * scan, the list is unchanged and we skip the scan, so the worker can call
 * refresh before every drain cheaply.
 *
 * Only compiled where there is no dyld (see images_apple.c).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_elfnote.h"
#include "common/stkr_grow.h"
#include "flush/flush_internal.h"

typedef struct scan {
  Stackrec__Image *imgs;
  size_t n, cap;
  int err;
} scan;

static int collect(struct dl_phdr_info *info, size_t size, void *arg) {
  scan *sc = arg;
  static const Stackrec__Image img0 = STACKREC__IMAGE__INIT;
  Stackrec__Image im = img0;
  uint64_t lo = UINT64_MAX, hi = 0;
  const uint8_t *bid = NULL;
  size_t bid_len = 0;
  char exe[PATH_MAX];
  const char *path = info->dlpi_name;
  (void)size;

  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      if (start < lo) lo = start;
      if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE && !bid) {
      (void)stkr_elf_note_build_id((const uint8_t *)(uintptr_t)start, ph->p_filesz,
                          ph->p_align == 8 ? 8 : 4, &bid, &bid_len);
    }
  }
  if (lo == UINT64_MAX) lo = hi = 0;

  /* The main executable comes first, with an empty name. */
  if (sc->n == 0 && (!path || !*path)) {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = '\0';
      /* An executable removed since it started reads "PATH (deleted)":
       * its path is PATH (the build-id tells whether a file found there
       * later is that build; QA, session 40: "app (deleted)" was a module
       * of its own, and symbolize looked for that name). */
      if (n > 10 && strcmp(exe + n - 10, " (deleted)") == 0)
        exe[n - 10] = '\0';
      path = exe;
    }
  }

  if (stkr_grow((void **)&sc->imgs, &sc->cap, sc->n + 1, sizeof *sc->imgs))
    goto nomem;
  im.path = strdup(path ? path : "");
  if (!im.path) goto nomem;
  im.load_address = (uint64_t)info->dlpi_addr;
  im.text_start = lo;
  im.text_end = hi;
  if (bid && bid_len) {
    im.build_id.data = malloc(bid_len);
    if (!im.build_id.data) {
      free(im.path);
      goto nomem;
    }
    memcpy(im.build_id.data, bid, bid_len);
    im.build_id.len = bid_len;
  }
  sc->imgs[sc->n++] = im;
  return 0;
nomem:
  sc->err = -ENOMEM;
  return 1; /* stop iterating */
}

typedef struct counts {
  unsigned long long adds, subs;
  bool have;
} counts;

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg) {
  counts *c = arg;
  /* dlpi_adds/subs exist only in newer loaders: check the struct size. */
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
    c->have = true;
  }
  return 1; /* the first object is enough: the counters are global */
}

static bool same_list(const stkr__images *im, const scan *sc) {
  if (im->n != sc->n) return false;
  for (size_t i = 0; i < sc->n; i++) {
    const Stackrec__Image *a = &im->imgs[i], *b = &sc->imgs[i];
    if (a->load_address != b->load_address || a->text_start != b->text_start ||
        a->text_end != b->text_end || strcmp(a->path, b->path) != 0 ||
        a->build_id.len != b->build_id.len ||
        (a->build_id.len &&
         memcmp(a->build_id.data, b->build_id.data, a->build_id.len) != 0))
      return false;
  }
  return true;
}

/* Does im hold the list the loader had at counts c? */
static bool counts_match(const stkr__images *im, const counts *c) {
  return im->scanned && c->have && c->adds == im->adds && c->subs == im->subs;
}

/* Is image i named by a relative path (the loader keeps dlopen's)? A
 * name without a slash names no file ("linux-vdso.so.1": the kernel's);
 * taken for one, it made every recording process read /proc/self/maps at
 * its start (~6% of a forked child's cost; session 28). */
static bool relative_name(const Stackrec__Image *im) {
  return im->path[0] != '\0' && im->path[0] != '/' && im->text_start != 0 &&
         strchr(im->path, '/') != NULL;
}

/* A library loaded by a relative path (dlopen("./plugin.so")) is named so
 * by the loader, and nothing could open it by that name later, from
 * another directory (QA, session 23: its frames stayed image+offset in
 * inproc mode, and for `record`'s symbolization): named by the file the
 * kernel mapped there instead, from one read of /proc/self/maps (a
 * " (deleted)" mark dropped; a path with a newline, which the kernel
 * writes as \012, is left as the loader named it). */
static void absolute_paths(scan *sc) {
  char line[PATH_MAX + 128];
  size_t i, left = 0;
  FILE *f;

  for (i = 1; i < sc->n; i++) left += relative_name(&sc->imgs[i]);
  if (left == 0 || (f = fopen("/proc/self/maps", "re")) == NULL) return;
  while (left > 0 && fgets(line, sizeof line, f) != NULL) {
    unsigned long long lo, hi;
    int at = 0;
    char *path, *del;
    if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &lo, &hi, &at) != 2 ||
        at == 0 || line[at] != '/' || strstr(line + at, "\\012") != NULL)
      continue;
    path = line + at;
    path[strcspn(path, "\n")] = '\0';
    if ((del = strstr(path, " (deleted)")) != NULL && del[10] == '\0')
      *del = '\0';
    for (i = 1; i < sc->n; i++) {
      Stackrec__Image *im = &sc->imgs[i];
      char *abs;
      if (!relative_name(im) || im->text_start < lo || im->text_start >= hi ||
          (abs = strdup(path)) == NULL)
        continue;
      free(im->path);
      im->path = abs;
      left--;
    }
  }
  fclose(f);
}

bool stkr__images_stale(const stkr__images *im) {
  counts c = {0, 0, false};
  dl_iterate_phdr(read_counts, &c);
  return !counts_match(im, &c);
}

int stkr__images_refresh(stkr__images *im) {
  counts c = {0, 0, false};
  scan sc = {NULL, 0, 0, 0};

  dl_iterate_phdr(read_counts, &c);
  if (counts_match(im, &c))
    return 0;

  dl_iterate_phdr(collect, &sc);
  if (sc.err) {
    stkr__images_free_list(sc.imgs, sc.n);
    return sc.err;
  }
  absolute_paths(&sc);
  /* A dlopen between the two iterations is caught by the next refresh:
   * the counters we store are the ones read before the scan. */
  im->adds = c.adds;
  im->subs = c.subs;
  im->scanned = true;
  if (same_list(im, &sc)) {
    stkr__images_free_list(sc.imgs, sc.n);
    return 0;
  }
  Stackrec__Image **ptrs = realloc(im->ptrs, (sc.n ? sc.n : 1) * sizeof *ptrs);
  if (!ptrs) {
    stkr__images_free_list(sc.imgs, sc.n);
    im->scanned = false;
    return -ENOMEM;
  }
  im->ptrs = ptrs; /* realloc'd: the old array is gone */
  stkr__images_install(im, sc.imgs, sc.n, sc.cap, ptrs);
  return 0;
}

#endif /* !__APPLE__ */
