/*
 * images.c: what the image lists of images_linux.c and images_apple.c have
 * in common: freeing a list, and making a freshly scanned one current.
 */
#include <stdlib.h>
#include <string.h>

#include "flush/flush_internal.h"

void stkr__images_free_list(Stackrec__Image *imgs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(imgs[i].path);
    free(imgs[i].build_id.data);
  }
  free(imgs);
}

void stkr__images_install(stkr__images *im, Stackrec__Image *imgs, size_t n,
                          size_t cap, Stackrec__Image **ptrs) {
  stkr__images_free_list(im->imgs, im->n);
  if (im->ptrs != ptrs) free(im->ptrs);
  im->imgs = imgs;
  im->ptrs = ptrs;
  im->n = n;
  im->cap = cap;
  for (size_t i = 0; i < n; i++) im->ptrs[i] = &im->imgs[i];
  im->gen++;
}

void stkr__images_free(stkr__images *im) {
  stkr__images_free_list(im->imgs, im->n);
  free(im->ptrs);
  memset(im, 0, sizeof *im);
}
