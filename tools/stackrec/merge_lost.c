/*
 * merge_lost.c: the batches `stackrec merge` could not copy (merge_lost.h).
 * A handful of files at most in practice: found by a linear scan.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/merge_lost.h"

static stkr__mlost_file *find(stkr__mlost *l, const char *path) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i].path, path) == 0) return &l->v[i];
  return NULL;
}

int stkr__mlost_note(stkr__mlost *l, const char *path) {
  stkr__mlost_file *f = find(l, path);

  if (f == NULL) {
    char *copy = strdup(path);
    if (copy == NULL ||
        stkr_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v) != 0) {
      free(copy);
      return -ENOMEM;
    }
    f = &l->v[l->n++];
    *f = (stkr__mlost_file){.path = copy};
  }
  f->pending++;
  return 0;
}

uint32_t stkr__mlost_take(stkr__mlost *l, const char *path,
                          const char *out_path) {
  stkr__mlost_file *f = find(l, path);
  uint32_t n;

  if (f == NULL) return 0;
  if (f->out_path == NULL && (f->out_path = strdup(out_path)) == NULL)
    return 0;
  n = f->pending;
  f->pending = 0;
  return n;
}

void stkr__mlost_free(stkr__mlost *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].path);
    free(l->v[i].out_path);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}
