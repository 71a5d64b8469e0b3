/*
 * strtab.c: interned strings (strtab.h), open addressing on the strings'
 * hashes, grown at half full.
 */
#include <stdlib.h>
#include <string.h>

#include "common/stkr_hash.h"
#include "tools/stackrec/strtab.h"

static size_t slot_of(const char *s, size_t cap) {
  return (size_t)stkr_mix64(stkr_hash_bytes(STKR_HASH_SEED, s, strlen(s))) &
         (cap - 1);
}

const char *stkr__strtab_intern(stkr__strtab *t, const char *s) {
  size_t i;
  char *c;

  if (s == NULL)
    return NULL;
  if ((t->n + 1) * 2 > t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 256, k;
    char **ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
      return NULL;
    for (k = 0; k < t->cap; k++) {
      if (t->slot[k] == NULL)
        continue;
      for (i = slot_of(t->slot[k], ncap); ns[i] != NULL; i = (i + 1) & (ncap - 1))
        ;
      ns[i] = t->slot[k];
    }
    free(t->slot);
    t->slot = ns;
    t->cap = ncap;
  }
  for (i = slot_of(s, t->cap); t->slot[i] != NULL; i = (i + 1) & (t->cap - 1))
    if (strcmp(t->slot[i], s) == 0)
      return t->slot[i];
  if ((c = strdup(s)) == NULL)
    return NULL;
  t->slot[i] = c;
  t->n++;
  return c;
}

void stkr__strtab_free(stkr__strtab *t) {
  size_t i;

  for (i = 0; i < t->cap; i++)
    free(t->slot[i]);
  free(t->slot);
  t->slot = NULL;
  t->cap = t->n = 0;
}
