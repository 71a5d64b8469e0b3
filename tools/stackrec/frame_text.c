/*
 * frame_text.c: how a frame is named in every output (agg.h): its label,
 * and its text at a merge granularity; which frames --app-only keeps;
 * in which image a raw PC lies.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "tools/stackrec/agg.h"

const stkr_frame stkr_agg_cut_frame = {.function = "[truncated]"};

const char *stkr_agg_frame_label(const stkr_frame *f, char *buf, size_t len) {
  if (f->function != NULL) {
    snprintf(buf, len, "%s", f->function);
  } else if (f->image != NULL) {
    const char *base = strrchr(f->image, '/');
    snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : f->image,
             f->offset);
  } else {
    snprintf(buf, len, "0x%" PRIx64, f->pc);
  }
  return buf;
}

static int img_by_start(const void *pa, const void *pb) {
  const stkr_image_info *x = *(const stkr_image_info *const *)pa;
  const stkr_image_info *y = *(const stkr_image_info *const *)pb;

  return stkr_cmp_u64(x->text_start, y->text_start);
}

const stkr_image_info *stkr_agg_image_of(stkr_agg_images *m, stkr_reader *r,
                                         size_t process, uint64_t pc) {
  const stkr_image_info *imgs, *im;
  size_t n, lo, hi, i;

  if (stkr_reader_images(r, process, &imgs, &n) != 0 || n == 0)
    return NULL;
  if (m->process != process || m->n != n || m->of != imgs) {
    if (stkr_grow((void **)&m->sorted, &m->cap, n, sizeof *m->sorted) != 0)
      return NULL;
    for (i = 0; i < n; i++)
      m->sorted[i] = &imgs[i];
    qsort(m->sorted, n, sizeof *m->sorted, img_by_start);
    m->process = process;
    m->n = n;
    m->of = imgs;
  }
  lo = 0;
  hi = n; /* first image with text_start > pc */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->sorted[mid]->text_start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  im = m->sorted[lo - 1];
  /* A return address may sit just past the last instruction. */
  return pc <= im->text_end ? im : NULL;
}

void stkr_agg_images_free(stkr_agg_images *m) {
  free(m->sorted);
  *m = (stkr_agg_images){0};
}

size_t stkr_agg_app_frames(const stkr_frame *f, size_t n, stkr_frame *out) {
  size_t i, k = 0, keep = 0;

  for (i = 0; i < n; i++)
    keep += f[i].is_app;
  for (i = 0; i < n; i++) { /* forward, so in place is safe (k <= i) */
    if (keep > 0 && !f[i].is_app)
      continue;
    out[k++] = f[i];
    if (keep == 0 && !f[i].inlined)
      break; /* no app frame at all: the innermost PC's frames */
  }
  return k;
}

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

const char *stkr_agg_frame_text(const stkr_frame *f, stkr_agg_granularity g,
                                char *buf, size_t len) {
  size_t n;

  stkr_agg_frame_label(f, buf, len);
  if (f->function == NULL || g == STKR_AGG_BY_FUNCTION)
    return buf; /* an unnamed frame's label is its address already */
  n = strlen(buf);
  if (f->file != NULL && f->line != 0 && n < len)
    n += (size_t)snprintf(buf + n, len - n, " %s:%u", base_name(f->file),
                          (unsigned)f->line);
  if (g == STKR_AGG_BY_ADDRESS && n < len) {
    if (f->image != NULL)
      snprintf(buf + n, len - n, " %s+0x%" PRIx64, base_name(f->image),
               f->offset);
    else
      snprintf(buf + n, len - n, " 0x%" PRIx64, f->pc);
  }
  return buf;
}

const char *const stkr_agg_granularity_names[] = {"line", "function",
                                                   "address", NULL};
