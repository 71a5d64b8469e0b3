/*
 * stkr_readutil.c: the reader's small helpers (declared in stkr__reader.h):
 * growing arrays indexed by 32-bit ids and strdup of a maybe-NULL string.
 * Split from stkr_batch.c.
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
