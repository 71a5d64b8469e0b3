/*
 * agg_framelist.c: frame lists shared between merged stacks (see
 * agg_framelist.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/agg_framelist.h"

static uint64_t list_hash(const stkr_frame *f, size_t n) {
  uint64_t h = STKR_HASH_SEED ^ n;
  size_t i;

  for (i = 0; i < n; i++) {
    uint64_t v[7] = {f[i].pc,
                     (uint64_t)(uintptr_t)f[i].function,
                     (uint64_t)(uintptr_t)f[i].file,
                     (uint64_t)f[i].line << 32 | f[i].column,
                     (uint64_t)(uintptr_t)f[i].image,
                     f[i].offset,
                     (uint64_t)f[i].inlined | (uint64_t)f[i].is_app << 1 |
                         (uint64_t)f[i].async << 2};
    h = stkr_hash_bytes(h, v, sizeof v);
  }
  return stkr_mix64(h);
}

/* Field by field (never memcmp: padding). Strings are interned. */
static bool same_frames(const stkr_frame *x, const stkr_frame *y, size_t n) {
  size_t i;

  for (i = 0; i < n; i++)
    if (x[i].pc != y[i].pc || x[i].function != y[i].function ||
        x[i].file != y[i].file || x[i].line != y[i].line ||
        x[i].column != y[i].column || x[i].image != y[i].image ||
        x[i].offset != y[i].offset || x[i].inlined != y[i].inlined ||
        x[i].is_app != y[i].is_app || x[i].async != y[i].async)
      return false;
  return true;
}

/* Append a copy of f[0..n) as a new list (refs 1), not indexed.
 * @return its index or (size_t)-1. */
static size_t append(stkr__framelists *t, const stkr_frame *f, size_t n,
                     uint64_t h) {
  stkr__framelist *l;
  stkr_frame *v = NULL;

  if (stkr_grow((void **)&t->lists, &t->cap, t->n + 1, sizeof *t->lists) != 0)
    return (size_t)-1;
  if (n > 0) {
    if ((v = malloc(n * sizeof *v)) == NULL)
      return (size_t)-1;
    memcpy(v, f, n * sizeof *v);
  }
  l = &t->lists[t->n];
  l->v = v;
  l->n = n;
  l->h = h;
  l->refs = 1;
  return t->n++;
}

size_t stkr__framelists_get(stkr__framelists *t, const stkr_frame *f,
                            size_t n) {
  uint64_t h;
  size_t pos, ix;

  if (!t->share)
    return append(t, f, n, 0);
  h = list_hash(f, n);
  for (ix = stkr_index_first(&t->by_hash, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&t->by_hash, h, &pos)) {
    stkr__framelist *l = &t->lists[ix];
    if (l->n == n && same_frames(l->v, f, n)) {
      l->refs++;
      return ix;
    }
  }
  if (stkr_index_reserve(&t->by_hash, t->by_hash.n + 1) != 0)
    return (size_t)-1;
  ix = append(t, f, n, h);
  if (ix != (size_t)-1) /* room was reserved: cannot fail */
    (void)stkr_index_add(&t->by_hash, h, ix);
  return ix;
}

int stkr__framelists_own(stkr__framelists *t, size_t *idx) {
  size_t ix;

  if (t->lists[*idx].refs <= 1)
    return 0;
  /* Not indexed: its content is about to change, so no later stack
   * should find it by this hash (a lookup would only compare and miss). */
  ix = append(t, t->lists[*idx].v, t->lists[*idx].n, 0);
  if (ix == (size_t)-1)
    return -ENOMEM;
  t->lists[*idx].refs--;
  *idx = ix;
  return 0;
}

void stkr__framelists_free(stkr__framelists *t) {
  if (t == NULL)
    return;
  STKR_FREE_EACH(t->lists, t->n, v);
  free(t->lists);
  stkr_index_free(&t->by_hash);
  memset(t, 0, sizeof *t);
}
