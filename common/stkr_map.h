/*
 * stkr_map.h: the one open-addressing map of the project (libc only,
 * header-only), from a 64-bit key to a 64-bit value, so that tables of
 * sites, stacks and hashes do not each grow their own probe loop.
 *
 * Keys: any 64-bit value, 0 included (key 0 lives outside the slots, as
 * slot key 0 marks an empty slot). Pointers go in as (uintptr_t); keys are
 * spread with stkr_mix64, so pointers, small ids and already-mixed hashes
 * all index well. Values: 64 bits, enough for a count, a content hash, an
 * index into the caller's dense array or a pointer (uintptr_t), which
 * covers every caller so far; a caller that needs more keeps its records
 * in an array of its own and stores the index.
 *
 * Layout: one array of {key, value} slots (a lookup touches one cache
 * line), linear probing from stkr_mix64(key) & (cap - 1). The capacity is
 * 0 or a power of two from 16; the load factor stays at most 1/2: an
 * insert that would pass it doubles the array first and re-inserts every
 * key (so n inserts cost O(n) amortized). No deletion (no caller needs
 * it; stkr_map_clear empties the whole map and keeps its memory).
 *
 * Memory: only stkr_map_put, stkr_map_add and stkr_map_reserve allocate
 * (when they grow); a lookup never allocates. A failed growth returns
 * -ENOMEM and leaves the map as it was.
 *
 * Hostile keys: the keys are trusted to be spread by stkr_mix64 (which is
 * not keyed). Keys that all land in one slot make probes linear in the
 * size of the map but never wrong: a probe always ends at an empty slot,
 * since at most half the slots are taken.
 *
 * Thread-safety: none. A map is used by one thread at a time; lookups
 * from several threads are safe only while nobody inserts.
 *
 * Usage: zero-initialize (stkr_map m = {0}), free with stkr_map_free.
 *
 * stkr_index (below) is the same table for records compared by their
 * contents: hash -> the record's index in the caller's array, hashes may
 * repeat, the caller compares.
 */
#ifndef STKR_COMMON_MAP_H
#define STKR_COMMON_MAP_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_hash.h"

typedef struct stkr_map_slot {
  uint64_t key; /* 0: empty */
  uint64_t val;
} stkr_map_slot;

typedef struct stkr_map {
  stkr_map_slot *slot; /* cap slots, or NULL */
  size_t cap;          /* 0 or a power of two */
  size_t n;            /* keys in slot[] (key 0 not counted) */
  int has_zero;        /* key 0 is in the map, with value zero_val */
  uint64_t zero_val;
} stkr_map;

#define STKR_MAP_MIN_CAP 16
#define STKR__MAP_TOUCH_BYTES ((size_t)64 << 10) /* see stkr__slots_reserve */

/* Where key is, or the empty slot where it would go (cap != 0). */
static inline size_t stkr__map_probe(const stkr_map_slot *s, size_t cap,
                                     uint64_t key) {
  size_t i = (size_t)stkr_mix64(key) & (cap - 1);

  while (s[i].key != 0 && s[i].key != key)
    i = (i + 1) & (cap - 1);
  return i;
}

/* Mark all cap slots empty (key 0 and val 0: empty for both tables). */
static inline void stkr__slots_clear(stkr_map_slot *s, size_t cap) {
  if (cap != 0)
    memset(s, 0, cap * sizeof *s);
}

/* The first empty slot of key's probe (an empty slot: key 0 for a
 * stkr_map, value 0 for a stkr_index, by_val). Since a stkr_map's keys are
 * unique, that is where stkr__map_probe finds the key once put there. */
static inline size_t stkr__slots_empty(const stkr_map_slot *s, size_t cap,
                                       uint64_t key, int by_val) {
  size_t i = (size_t)stkr_mix64(key) & (cap - 1);

  while ((by_val ? s[i].val : s[i].key) != 0)
    i = (i + 1) & (cap - 1);
  return i;
}

/* Make room for n entries in *slot (*cap slots, 0 or a power of two)
 * within the load factor, re-inserting every entry into a doubled array.
 * An entry is a slot whose key (stkr_map) or value (stkr_index, by_val)
 * is not 0. @return 0, or -ENOMEM with the array unchanged. */
static inline int stkr__slots_reserve(stkr_map_slot **slot, size_t *cap,
                                      size_t n, int by_val) {
  size_t ncap = *cap ? *cap : STKR_MAP_MIN_CAP, i;
  stkr_map_slot *s;

  if (n > SIZE_MAX / 2)
    return -ENOMEM;
  while (ncap < 2 * n) {
    if (ncap > SIZE_MAX / 2 / sizeof *s)
      return -ENOMEM;
    ncap *= 2;
  }
  if (ncap == *cap)
    return 0;
  if ((s = (stkr_map_slot *)calloc(ncap, sizeof *s)) == NULL)
    return -ENOMEM;
  /* A large array is fresh zero pages (glibc maps it), and every probe
   * reads a slot before writing it: the read maps the shared zero page,
   * the write takes a second fault to copy it, and in a threaded process
   * that copy flushes the other cores' TLBs (an IPI each, dear in a VM:
   * 5-7 % of a symbol cache build's reader and answering threads). Written
   * first, each page takes one fault. (Through a volatile pointer: GCC
   * drops a memset of zeros after calloc, and turns malloc + memset into
   * calloc.) */
  if (ncap * sizeof *s >= STKR__MAP_TOUCH_BYTES) {
    volatile unsigned char *b = (volatile unsigned char *)s;
    for (i = 0; i < ncap * sizeof *s; i += 4096)
      b[i] = 0;
  }
  for (i = 0; i < *cap; i++)
    if ((by_val ? (*slot)[i].val : (*slot)[i].key) != 0)
      s[stkr__slots_empty(s, ncap, (*slot)[i].key, by_val)] = (*slot)[i];
  free(*slot);
  *slot = s;
  *cap = ncap;
  return 0;
}

/* Make room for n keys (besides key 0) within the load factor.
 * @return 0, or -ENOMEM with the map unchanged. */
static inline int stkr_map_reserve(stkr_map *m, size_t n) {
  return stkr__slots_reserve(&m->slot, &m->cap, n, 0);
}

/* @return a pointer to key's value, or NULL when key is not in the map.
 * The pointer stays valid until the next insert (put, add, reserve) or
 * clear. */
static inline uint64_t *stkr_map_find(const stkr_map *m, uint64_t key) {
  size_t i;

  if (key == 0)
    return m->has_zero ? (uint64_t *)&m->zero_val : NULL;
  if (m->cap == 0)
    return NULL;
  i = stkr__map_probe(m->slot, m->cap, key);
  return m->slot[i].key == key ? &m->slot[i].val : NULL;
}

/* Find key, adding it with value 0 when new; *val points at its value
 * (valid as for stkr_map_find).
 * @return 1 when added, 0 when found, or -ENOMEM (map unchanged, *val
 * untouched). */
static inline int stkr_map_add(stkr_map *m, uint64_t key, uint64_t **val) {
  size_t i;
  int err;

  if (key == 0) {
    int added = !m->has_zero;
    if (added)
      m->zero_val = 0;
    m->has_zero = 1;
    *val = &m->zero_val;
    return added;
  }
  if (m->cap != 0) {
    i = stkr__map_probe(m->slot, m->cap, key);
    if (m->slot[i].key == key) {
      *val = &m->slot[i].val;
      return 0;
    }
  }
  if (2 * (m->n + 1) > m->cap && (err = stkr_map_reserve(m, m->n + 1)) != 0)
    return err;
  i = stkr__map_probe(m->slot, m->cap, key);
  m->slot[i].key = key;
  m->slot[i].val = 0;
  m->n++;
  *val = &m->slot[i].val;
  return 1;
}

/* Set key's value, adding key when new. @return 0 or -ENOMEM (map
 * unchanged). */
static inline int stkr_map_put(stkr_map *m, uint64_t key, uint64_t val) {
  uint64_t *v;
  int rc = stkr_map_add(m, key, &v);

  if (rc < 0)
    return rc;
  *v = val;
  return 0;
}

/* How many keys the map holds (key 0 included). */
static inline size_t stkr_map_size(const stkr_map *m) {
  return m->n + (m->has_zero ? 1 : 0);
}

/* Visit every key once, in no particular order: start with *pos = 0.
 * Values may be changed during the walk; inserts may not.
 * @return 1 with *key and *val set (val may be NULL), 0 at the end. */
static inline int stkr_map_next(const stkr_map *m, size_t *pos,
                                uint64_t *key, uint64_t **val) {
  stkr_map *w = (stkr_map *)m; /* the caller owns the map */

  if (*pos == 0) {
    *pos = 1;
    if (m->has_zero) {
      *key = 0;
      if (val != NULL)
        *val = &w->zero_val;
      return 1;
    }
  }
  for (; *pos - 1 < m->cap; (*pos)++)
    if (m->slot[*pos - 1].key != 0) {
      *key = m->slot[*pos - 1].key;
      if (val != NULL)
        *val = &w->slot[*pos - 1].val;
      (*pos)++;
      return 1;
    }
  return 0;
}

/* Empty the map, keeping its memory for the next fill. */
static inline void stkr_map_clear(stkr_map *m) {
  stkr__slots_clear(m->slot, m->cap);
  m->n = 0;
  m->has_zero = 0;
}

/* Free the map's memory and leave it empty (zero-initialized); NULL ok. */
static inline void stkr_map_free(stkr_map *m) {
  if (m == NULL)
    return;
  free(m->slot);
  memset(m, 0, sizeof *m);
}

/*
 * stkr_index: the same table for records keyed by their contents (strings,
 * stacks, frame chains): an index from a 64-bit hash of a record to its
 * position in the caller's own array. Hashes may repeat (two records of
 * equal hash are both kept), so a lookup yields every candidate of that
 * hash and the caller compares the contents:
 *
 *   size_t pos, ix;
 *   for (ix = stkr_index_first(x, h, &pos); ix != STKR_INDEX_NONE;
 *        ix = stkr_index_next(x, h, &pos))
 *     if (equal(&recs[ix], key)) return ix;
 *   stkr_index_add(x, h, n_recs);   (then append the record)
 *
 * Slots are stkr_map_slots {hash, index + 1} (val 0: empty, so any hash,
 * 0 included, may be stored); probing, load factor, growth, memory and
 * thread-safety as for stkr_map above. The hash is spread with stkr_mix64
 * again, so a weak hash only costs probes; it is kept in the slot, so
 * growth never calls back into the caller.
 */
typedef struct stkr_index {
  stkr_map_slot *slot; /* cap slots, or NULL */
  size_t cap;          /* 0 or a power of two */
  size_t n;            /* entries */
} stkr_index;

#define STKR_INDEX_NONE SIZE_MAX

/* Make room for n entries within the load factor.
 * @return 0, or -ENOMEM with the index unchanged. */
static inline int stkr_index_reserve(stkr_index *x, size_t n) {
  return stkr__slots_reserve(&x->slot, &x->cap, n, 1);
}

/* The next candidate of hash h from probe position *pos on, or
 * STKR_INDEX_NONE at the end of the run. */
static inline size_t stkr_index_next(const stkr_index *x, uint64_t h,
                                     size_t *pos) {
  size_t i = *pos;

  if (x->cap == 0)
    return STKR_INDEX_NONE;
  for (; x->slot[i].val != 0; i = (i + 1) & (x->cap - 1))
    if (x->slot[i].key == h) {
      *pos = (i + 1) & (x->cap - 1);
      return (size_t)(x->slot[i].val - 1);
    }
  *pos = i;
  return STKR_INDEX_NONE;
}

/* The first candidate of hash h (then stkr_index_next with the same pos),
 * or STKR_INDEX_NONE. Never allocates. */
static inline size_t stkr_index_first(const stkr_index *x, uint64_t h,
                                      size_t *pos) {
  *pos = x->cap ? (size_t)stkr_mix64(h) & (x->cap - 1) : 0;
  return stkr_index_next(x, h, pos);
}

/* Add record ix (< SIZE_MAX - 1) under hash h; the caller has checked that
 * no equal record is there. @return 0 or -ENOMEM (index unchanged). */
static inline int stkr_index_add(stkr_index *x, uint64_t h, size_t ix) {
  size_t i;
  int err;

  if (2 * (x->n + 1) > x->cap && (err = stkr_index_reserve(x, x->n + 1)) != 0)
    return err;
  i = stkr__slots_empty(x->slot, x->cap, h, 1);
  x->slot[i].key = h;
  x->slot[i].val = (uint64_t)ix + 1;
  x->n++;
  return 0;
}

/* Empty the index, keeping its memory. */
static inline void stkr_index_clear(stkr_index *x) {
  stkr__slots_clear(x->slot, x->cap);
  x->n = 0;
}

/* Free the index's memory and leave it empty; NULL ok. */
static inline void stkr_index_free(stkr_index *x) {
  if (x == NULL)
    return;
  free(x->slot);
  memset(x, 0, sizeof *x);
}

#endif /* STKR_COMMON_MAP_H */
