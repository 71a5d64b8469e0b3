/*
 * strtab.h: interned strings: one copy of each distinct string, so equal
 * strings are equal pointers (the aggregation compares names by pointer).
 * Private to //tools:stackrec_lib.
 *
 * Thread-safety: none.
 */
#ifndef STKR_STRTAB_H
#define STKR_STRTAB_H

#include <stddef.h>

#include "common/stkr_map.h"

typedef struct stkr__strtab {
  char **strs;    /* the n copies, in the order they were added */
  size_t n, cap;  /* cap: strs' capacity (stkr_grow) */
  stkr_index idx; /* a string's hash -> its index in strs */
} stkr__strtab;

/* The table's copy of s (NULL stays NULL; NULL also when out of memory,
 * which the caller tells apart by s != NULL). Zero-initialize the table
 * before the first call. */
const char *stkr__strtab_intern(stkr__strtab *t, const char *s);

/* Free every copy and the table's slots. */
void stkr__strtab_free(stkr__strtab *t);

#endif /* STKR_STRTAB_H */
