/*
 * agg_runs.c: one time line per directory for the timelines
 * (agg_runs.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/agg_runs.h"

typedef struct by_dir_ent {
  const char *dir;
  size_t i;
} by_dir_ent;

static int by_dir(const void *a, const void *b) {
  return strcmp(((const by_dir_ent *)a)->dir, ((const by_dir_ent *)b)->dir);
}

int stkr__agg_runs_init(stkr__agg_runs *u, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), i, j, k;
  by_dir_ent *v;
  int err;

  *u = (stkr__agg_runs){0};
  if (n < 2)
    return 0;
  if ((err = stkr_boots_init(&u->boots, r)) != 0)
    return err;
  u->origin = calloc(n, sizeof *u->origin);
  v = malloc(n * sizeof *v);
  if (u->origin == NULL || v == NULL) {
    free(v);
    stkr__agg_runs_free(u);
    return -ENOMEM;
  }
  for (i = 0; i < n; i++) {
    stkr_start_clock c;
    v[i] = (by_dir_ent){stkr_reader_process(r, i)->dir, i};
    if (stkr_reader_start_clock(r, i, &c) == 0 && c.mono_ns != 0)
      u->origin[i] = stkr_boots_place(&u->boots, i, NULL, c.mono_ns);
  }
  qsort(v, n, sizeof *v, by_dir);
  for (i = 0; i < n; i = j) { /* each directory's earliest start, to all */
    uint64_t first = 0;
    for (j = i; j < n && strcmp(v[j].dir, v[i].dir) == 0; j++)
      if (u->origin[v[j].i] != 0 &&
          (first == 0 || u->origin[v[j].i] < first))
        first = u->origin[v[j].i];
    for (k = i; k < j; k++)
      u->origin[v[k].i] = first;
  }
  free(v);
  u->on = true;
  return 0;
}

bool stkr__agg_runs_offset(stkr__agg_runs *u, size_t i,
                           const stkr_process_info *p, uint64_t ts,
                           uint64_t *t_ns) {
  uint64_t at;

  if (!u->on || i >= u->boots.n || u->origin[i] == 0)
    return false;
  at = stkr_boots_place(&u->boots, i, p, ts);
  *t_ns = at > u->origin[i] ? at - u->origin[i] : 0;
  return true;
}

void stkr__agg_runs_free(stkr__agg_runs *u) {
  if (u == NULL)
    return;
  stkr_boots_free(&u->boots);
  free(u->origin);
  *u = (stkr__agg_runs){0};
}
