/*
 * preload_read.c: prints what a recording made by the hook library under
 * qemu-aarch64 holds, one line per event, for tests/aarch64/preload.sh
 * (built for aarch64 with the reader; no CLI there):
 *
 *   event <site> <n_pcs> <image of each PC, innermost first, by base name>
 *   accounting <attempted> <written> <drops> <recovered> <unaccounted>
 *
 * A PC in no image of the recording's image lists prints as "?": the
 * recording (offline mode) must carry every image its PCs lie in.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "proto/stkr_reader.h"

/* The base name of the image holding pc, or "?". */
static const char *image_of(const stkr_reader *r, size_t proc, uint64_t pc) {
  const stkr_image_info *im;
  size_t n;
  if (stkr_reader_images(r, proc, &im, &n) != 0)
    return "?";
  for (size_t k = 0; k < n; k++)
    if (pc >= im[k].text_start && pc < im[k].text_end) {
      const char *slash = strrchr(im[k].path, '/');
      return slash ? slash + 1 : im[k].path;
    }
  return "?";
}

int main(int argc, char **argv) {
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int rc;

  if (argc != 2) {
    fprintf(stderr, "usage: preload_read DIR\n");
    return 2;
  }
  if ((rc = stkr_reader_open(argv[1], NULL, &r)) != 0) {
    fprintf(stderr, "preload_read: %s: %s\n", argv[1], strerror(-rc));
    return 1;
  }
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (ev.is_mark)
      continue;
    printf("event %s %zu", ev.site, ev.n_pcs);
    for (size_t k = 0; k < ev.n_pcs; k++)
      printf(" %s", image_of(r, ev.process, ev.pcs[k]));
    printf("\n");
  }
  for (size_t i = 0; rc == 0; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    if (p == NULL)
      break;
    printf("accounting %llu %llu %llu %llu %llu\n",
           (unsigned long long)p->attempted, (unsigned long long)p->written,
           (unsigned long long)p->drops, (unsigned long long)p->recovered,
           (unsigned long long)p->unaccounted);
  }
  stkr_reader_free(r);
  return rc == 0 ? 0 : 1;
}
