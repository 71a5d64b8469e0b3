/*
 * agg_framelist.h: frame lists shared between merged stacks.
 *
 * Stacks kept apart only by thread, process or payload (--by, pprof's
 * labels) carry the same frames: one file path opened from one call site
 * a million times made a million copies of that site's frames (QA,
 * session 26: 1.1 GB for pprof of a 2.3 MB recording). Here each distinct
 * list (equal in every field; strings interned, so compared by pointer) is
 * kept once and counted; a stack whose frames must change (reconciled
 * with another occurrence) gets a copy of its own first if the list is
 * shared. Private to //tools:stackrec_lib (agg.c).
 *
 * Thread-safety: none.
 */
#ifndef STKR_AGG_FRAMELIST_H
#define STKR_AGG_FRAMELIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h" /* stkr_frame */

typedef struct stkr__framelist {
  stkr_frame *v;
  size_t n;
  uint64_t h;    /* of the content when made (a list changed in place by
                    its only owner keeps it: lookups compare content) */
  size_t refs;   /* stacks using it */
} stkr__framelist;

typedef struct stkr__framelists {
  stkr__framelist *lists;
  size_t n, cap;
  stkr_index by_hash; /* h -> index into lists */
  bool share;         /* look lists up (set by the caller: only stacks
                         kept apart by thread, process or payload can
                         have equal frames) */
} stkr__framelists;

/* The list equal to f[0..n) in every field (with t->share; else always
 * a new one), made if new; its refs go up.
 * @return its index into t->lists, or (size_t)-1 on ENOMEM (n == 0 is a
 * list too, with v NULL). */
size_t stkr__framelists_get(stkr__framelists *t, const stkr_frame *f,
                            size_t n);

/* Make list *idx writable for one owner: if others use it too, a copy
 * (refs 1) replaces it in *idx. @return 0 or -ENOMEM (*idx unchanged). */
int stkr__framelists_own(stkr__framelists *t, size_t *idx);

/* Free every list (the stacks' frames pointers die with them). */
void stkr__framelists_free(stkr__framelists *t);

#endif /* STKR_AGG_FRAMELIST_H */
