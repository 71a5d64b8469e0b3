/*
 * images_apple.c: the loaded images on Apple platforms (see images_linux.c
 * for the contract).
 *
 * dyld lists images by index: header address, ASLR slide and path. From the
 * 64-bit Mach-O load commands we take the __TEXT segment (its slid address
 * is the image's load address and its range the text range) and LC_UUID
 * (the build id that symbol files are matched by). dyld has no add/remove
 * counters like dl_iterate_phdr; instead the add/remove callbacks bump a
 * generation, and we rescan only when it moved. The callbacks run under
 * dyld's lock and do nothing but that atomic increment.
 *
 * Compiled only on Apple; syntax-checked elsewhere against declarations
 * standing in for the SDK's.
 */
#if defined(__APPLE__)

#include <errno.h>
#include <mach-o/dyld.h>
#include <mach-o/loader.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "flush/flush_internal.h"

/* Bumped by dyld's callbacks (relaxed: a hint to rescan; the scan itself
 * reads dyld's own, consistent, list). */
static _Atomic unsigned long long g_dyld_gen;
static pthread_once_t g_dyld_once = PTHREAD_ONCE_INIT;

static void on_image(const struct mach_header *mh, intptr_t slide) {
  (void)mh;
  (void)slide;
  atomic_fetch_add_explicit(&g_dyld_gen, 1, memory_order_relaxed);
}

static void register_callbacks(void) {
  _dyld_register_func_for_add_image(on_image);
  _dyld_register_func_for_remove_image(on_image);
}

/* Fill im from one image's load commands. 0, or -ENOMEM. */
static int describe(uint32_t i, Stackrec__Image *im) {
  static const Stackrec__Image img0 = STACKREC__IMAGE__INIT;
  const struct mach_header *mh = _dyld_get_image_header(i);
  intptr_t slide = _dyld_get_image_vmaddr_slide(i);
  const char *name = _dyld_get_image_name(i);

  *im = img0;
  im->load_address = (uint64_t)(uintptr_t)mh;
  if (mh && mh->magic == MH_MAGIC_64) {
    const uint8_t *p = (const uint8_t *)mh + sizeof(struct mach_header_64);
    for (uint32_t k = 0; k < mh->ncmds; k++) {
      const struct load_command *lc = (const void *)p;
      if (lc->cmd == LC_SEGMENT_64) {
        const struct segment_command_64 *seg = (const void *)p;
        if (strncmp(seg->segname, "__TEXT", sizeof seg->segname) == 0) {
          im->load_address = seg->vmaddr + (uint64_t)slide;
          im->text_start = im->load_address;
          im->text_end = im->text_start + seg->vmsize;
        }
      } else if (lc->cmd == LC_UUID) {
        const struct uuid_command *u = (const void *)p;
        im->build_id.data = malloc(sizeof u->uuid);
        if (!im->build_id.data) return -ENOMEM;
        memcpy(im->build_id.data, u->uuid, sizeof u->uuid);
        im->build_id.len = sizeof u->uuid;
      }
      if (lc->cmdsize == 0) break; /* malformed: do not loop forever */
      p += lc->cmdsize;
    }
  }
  im->path = strdup(name ? name : "");
  if (!im->path) {
    free(im->build_id.data);
    return -ENOMEM;
  }
  return 0;
}

bool stkr__images_stale(const stkr__images *im) {
  pthread_once(&g_dyld_once, register_callbacks);
  return !im->scanned ||
         atomic_load_explicit(&g_dyld_gen, memory_order_relaxed) != im->adds;
}

int stkr__images_refresh(stkr__images *im) {
  unsigned long long gen;
  uint32_t n;
  Stackrec__Image *imgs;
  Stackrec__Image **ptrs;

  pthread_once(&g_dyld_once, register_callbacks);
  gen = atomic_load_explicit(&g_dyld_gen, memory_order_relaxed);
  if (im->scanned && gen == im->adds) return 0;

  n = _dyld_image_count();
  imgs = calloc(n ? n : 1, sizeof *imgs);
  ptrs = calloc(n ? n : 1, sizeof *ptrs);
  if (!imgs || !ptrs) {
    free(imgs);
    free(ptrs);
    return -ENOMEM;
  }
  /* An image unloaded while we scan leaves a NULL header: skipped. */
  size_t got = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!_dyld_get_image_header(i)) continue;
    if (describe(i, &imgs[got]) < 0) {
      stkr__images_free_list(imgs, got);
      free(ptrs);
      return -ENOMEM;
    }
    got++;
  }
  stkr__images_install(im, imgs, got, n, ptrs);
  im->adds = gen; /* the generation this list reflects */
  im->subs = 0;
  im->scanned = true;
  return 0;
}

#endif /* __APPLE__ */
