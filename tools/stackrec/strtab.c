/*
 * strtab.c: interned strings (strtab.h): the copies in an array, found by
 * their hashes through a stkr_index (common/stkr_map.h).
 */
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/strtab.h"

const char *stkr__strtab_intern(stkr__strtab *t, const char *s) {
  uint64_t h;
  size_t pos, ix;
  char *c;

  if (s == NULL)
    return NULL;
  h = stkr_hash_bytes(STKR_HASH_SEED, s, strlen(s));
  for (ix = stkr_index_first(&t->idx, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&t->idx, h, &pos))
    if (strcmp(t->strs[ix], s) == 0)
      return t->strs[ix];
  if (stkr_grow((void **)&t->strs, &t->cap, t->n + 1, sizeof *t->strs) != 0 ||
      (c = strdup(s)) == NULL)
    return NULL;
  if (stkr_index_add(&t->idx, h, t->n) != 0) {
    free(c);
    return NULL;
  }
  t->strs[t->n++] = c;
  return c;
}

void stkr__strtab_free(stkr__strtab *t) {
  size_t i;

  for (i = 0; i < t->n; i++)
    free(t->strs[i]);
  free(t->strs);
  stkr_index_free(&t->idx);
  t->strs = NULL;
  t->n = t->cap = 0;
}
