/*
 * agg_learn.c: frames learned from symbolized stacks, for the unsymbolized
 * stacks of the same process (agg_learn.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/agg_learn.h"

static uint64_t key_hash(size_t process, const char *image, uint64_t offset,
                         bool async) {
  return stkr_mix64(stkr_mix64((uint64_t)process * 2 + async) ^
                    (uint64_t)(uintptr_t)image ^ stkr_mix64(offset));
}

static size_t find(const stkr__learned *l, uint64_t h, size_t process,
                   const char *image, uint64_t offset, bool async) {
  size_t pos, i;
  for (i = stkr_index_first(&l->ix, h, &pos); i != STKR_INDEX_NONE;
       i = stkr_index_next(&l->ix, h, &pos)) {
    const stkr__learn_span *s = &l->spans[i];
    if (s->process == process && s->image == image && s->offset == offset &&
        s->async == async)
      return i;
  }
  return STKR_INDEX_NONE;
}

int stkr__learn_frames(stkr__learned *l, size_t process, const stkr_frame *f,
                       size_t n) {
  size_t i = 0;

  while (i < n) {
    size_t j = i;
    /* One PC's frames: its inlined calls, then the frame itself. */
    while (j + 1 < n && f[j].inlined && f[j + 1].pc == f[i].pc) j++;
    const stkr_frame *own = &f[j];
    size_t count = j - i + 1;
    if (own->image != NULL && count < 256 &&
        l->n_frames + count <= UINT32_MAX) {
      uint64_t h = key_hash(process, own->image, own->offset, own->async);
      if (find(l, h, process, own->image, own->offset, own->async) ==
          STKR_INDEX_NONE) {
        if (stkr_grow((void **)&l->spans, &l->cap_spans, l->n_spans + 1,
                      sizeof *l->spans) != 0 ||
            stkr_grow((void **)&l->frames, &l->cap_frames,
                      l->n_frames + count, sizeof *l->frames) != 0 ||
            stkr_index_reserve(&l->ix, l->n_spans + 1) != 0)
          return -ENOMEM;
        memcpy(&l->frames[l->n_frames], &f[i], count * sizeof *f);
        l->spans[l->n_spans] = (stkr__learn_span){
            process, own->image, own->offset, own->async,
            (uint32_t)l->n_frames, (uint32_t)count};
        (void)stkr_index_add(&l->ix, h, l->n_spans++); /* reserved */
        l->n_frames += count;
      }
    }
    i = j + 1;
  }
  return 0;
}

const stkr_frame *stkr__learned_find(const stkr__learned *l, size_t process,
                                     const char *image, uint64_t offset,
                                     bool async, size_t *count) {
  size_t i;
  if (image == NULL || l->n_spans == 0) return NULL;
  i = find(l, key_hash(process, image, offset, async), process, image, offset,
           async);
  if (i == STKR_INDEX_NONE) return NULL;
  *count = l->spans[i].count;
  return &l->frames[l->spans[i].start];
}

void stkr__learned_free(stkr__learned *l) {
  stkr_index_free(&l->ix);
  free(l->spans);
  free(l->frames);
  memset(l, 0, sizeof *l);
}
