/*
 * stkr_readutil.c: the reader's small helpers (declared in stkr__reader.h):
 * growing arrays indexed by 32-bit ids, strdup of a maybe-NULL string, and
 * the id map (a pid's thread, site and stack ids to indexes). Split from
 * stkr_batch.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "proto/stkr__reader.h"

int stkr__grow(void *arr, size_t *cap, size_t need, size_t size) {
  return stkr_grow((void **)arr, cap, need, size);
}

int stkr__grow_indexed(void *arr, size_t *cap, size_t n, size_t size) {
  if (n >= UINT32_MAX - 1)
    return -ENOMEM;
  return stkr_grow((void **)arr, cap, n + 1, size);
}

void *stkr__grow_slot(void *arr, size_t *cap, size_t n, size_t size) {
  char *slot;

  if (stkr__grow_indexed(arr, cap, n, size) != 0)
    return NULL;
  slot = *(char **)arr + n * size;
  memset(slot, 0, size);
  return slot;
}

char *stkr__strdup0(const char *s) {
  return strdup(s ? s : "");
}

int stkr__idmap_put(stkr__idmap *m, uint32_t key, uint32_t val) {
  size_t i;

  if ((m->n + 1) * 2 > m->cap) { /* keep the load under 1/2 */
    stkr__idmap big = {0};
    size_t j;

    big.cap = m->cap ? m->cap * 2 : 64;
    big.keys = calloc(big.cap, sizeof(*big.keys));
    big.vals = calloc(big.cap, sizeof(*big.vals));
    if (big.keys == NULL || big.vals == NULL) {
      stkr__idmap_free(&big);
      return -ENOMEM;
    }
    for (j = 0; j < m->cap; j++) {
      if (m->vals[j] == 0)
        continue;
      for (i = stkr__idmap_hash(m->keys[j], big.cap); big.vals[i] != 0;
           i = (i + 1) & (big.cap - 1)) {
      }
      big.keys[i] = m->keys[j];
      big.vals[i] = m->vals[j];
    }
    big.n = m->n;
    stkr__idmap_free(m);
    *m = big;
  }
  for (i = stkr__idmap_hash(key, m->cap); m->vals[i] != 0;
       i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) {
      m->vals[i] = val + 1;
      return 0;
    }
  }
  m->keys[i] = key;
  m->vals[i] = val + 1;
  m->n++;
  return 0;
}

void stkr__idmap_free(stkr__idmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof(*m));
}
