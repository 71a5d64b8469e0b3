/*
 * symbolize_canon.h: `stackrec symbolize`'s one image list for every
 * process (see symbolize_canon.c for why). Split out of symbolize.c, its
 * only user.
 *
 * Ownership: a stkr__canon is zero-initialized by its owner and freed with
 * stkr__canon_free; the arrays it returns are its own.
 * Thread-safety: none.
 */
#ifndef STKR_SYMBOLIZE_CANON_H
#define STKR_SYMBOLIZE_CANON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stackrec.pb-c.h"

/* An image of any process, at its canonical address range. */
typedef struct stkr__canon_img {
  char *path;
  uint8_t build_id[64];
  size_t build_id_len;
  uint64_t load;             /* the real load address (the key without build-id) */
  uint64_t base;             /* canonical load address */
  uint64_t text_lo, text_hi; /* text range relative to the load address */
  bool app;
} stkr__canon_img;

typedef struct stkr__canon {
  stkr__canon_img *img; /* every image seen: the union, which only grows */
  size_t n_img, cap_img;
  uint64_t next_base;
  struct stkr__canon_map *map; /* the current process's images -> canonical */
  size_t n_map;
  uint64_t *pcs; /* scratch: one stack's PCs, moved */
  size_t cap_pcs;
} stkr__canon;

/* The current process's image list (a batch carries the whole list): add
 * its images to the union and map its PCs onto it. `same_process`: b's
 * list replaces an earlier list of the same process, whose images that
 * b's do not overlap stay mapped (up to STKR__CANON_KEEP of them): a
 * batch's stacks may have been recorded in a library that was unloaded
 * before the batch's list was taken (dlopen, call, dlclose between two
 * passes of the worker). @return 1 when the union grew (pass k->img to
 * the resolver again), 0, or -ENOMEM. */
#define STKR__CANON_KEEP 256
int stkr__canon_set_process(stkr__canon *k, const Stackrec__Batch *b,
                            bool same_process);

/* A process whose image list is unknown (its first batch damaged): its PCs
 * stay as they are (image+offset rather than another process's names). */
void stkr__canon_unknown_process(stkr__canon *k);

/* The n pcs moved onto the canonical ranges (in k's scratch, valid until
 * the next call). @return it, or NULL when out of memory. */
const uint64_t *stkr__canon_pcs(stkr__canon *k, const uint64_t *pcs, size_t n);

/* Free what k holds (k itself is the caller's). */
void stkr__canon_free(stkr__canon *k);

#endif /* STKR_SYMBOLIZE_CANON_H */
