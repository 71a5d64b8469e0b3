/*
 * frame_text.c: how a frame is named in every output (agg.h): its label,
 * and its text at a merge granularity.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
