/*
 * stacktable.c: stack dedup for the worker.
 *
 * Every record carries the 64-bit hash of its PCs (computed by the producer,
 * so the worker does not rehash). The table maps (site, depth, truncated,
 * PCs) to a recording-global id, from 1: a stack is a call chain as seen at
 * one site, so that events need not store their site (stackrec.proto). The hash only picks the probe start
 * and short-cuts comparisons: two different stacks with the same hash always
 * get two ids, because equality compares the PCs themselves. Dedup must never
 * merge stacks, or an event would be attributed to a call chain it never ran.
 *
 * Layout: the common stkr_index (common/stkr_map.h: open addressing, at
 * most half full, each slot the key's hash and the stack's index), the
 * stack descriptors in a dense array, and the PCs in an append-only
 * arena of blocks so that their addresses stay stable (the batch's
 * StackDefs point straight at them, without copying).
 *
 * Bounded: a table past its cap (stkr_config.stack_table_bytes) is renewed
 * between batches, keeping only the stacks the threads' mirrors still name
 * (drain_batch.c). An app whose stacks keep changing for days would
 * otherwise grow with them; a forgotten stack met again is defined again
 * under a new id, which readers merge by content, so nothing is lost but
 * a few bytes on disk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_arena.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "flush/flush_internal.h"

#define ARENA_BLOCK (64u * 1024u)

/* The index's key: the PC hash with the site folded in (a stack is a
 * call chain as seen at one site); stkr_index mixes it again, so a weak
 * producer hash (or, in tests, one chosen on purpose) costs probes only. */
static inline uint64_t key_hash(uint64_t hash, uint32_t site) {
  return hash ^ ((uint64_t)site * 0x9E3779B97F4A7C15ull);
}

int stkr__stacktab_init(stkr__stacktab *t) {
  memset(t, 0, sizeof *t);
  return stkr_index_reserve(&t->index, 512);
}

void stkr__stacktab_free(stkr__stacktab *t) {
  stkr_arena_free(&t->arena);
  stkr_index_free(&t->index);
  free(t->stacks);
  memset(t, 0, sizeof *t);
}

uint32_t stkr__stacktab_intern(stkr__stacktab *t, uint64_t hash, uint32_t site,
                               const uint64_t *pcs, unsigned depth,
                               bool truncated) {
  const uint64_t key = key_hash(hash, site);
  size_t pos, ix;

  for (ix = stkr_index_first(&t->index, key, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&t->index, key, &pos)) {
    const stkr__stack *s = &t->stacks[ix];
    if (s->hash == hash && s->site == site && s->depth == depth &&
        s->truncated == truncated &&
        (depth == 0 || memcmp(s->pcs, pcs, depth * sizeof *pcs) == 0))
      return t->id_base + (uint32_t)ix + 1;
  }

  /* New stack. Ids are 32-bit in the format and never given twice in a
   * session, renewals included: an app whose every event is a new stack
   * (stack_table's 400,000 a second here) would use them up in about
   * three hours, a real app's new stacks in far longer. Past that a new
   * stack is refused like one without memory (its event keeps stack 0,
   * "unknown"), never given an id that means another stack. */
  if (t->id_base + t->count >= UINT32_MAX - 1) return 0;
  /* Room first, so that the add below cannot fail once the PCs are
   * copied. A failed growth refuses only this stack; lookups still work. */
  if (stkr_index_reserve(&t->index, t->count + 1) != 0) return 0;
  if (stkr_grow((void **)&t->stacks, &t->cap, t->count + 1,
                sizeof *t->stacks) != 0)
    return 0;
  uint64_t *copy = (uint64_t *)stkr_arena_alloc(
      &t->arena, (size_t)depth * sizeof *copy, ARENA_BLOCK);
  if (!copy) return 0;
  if (depth) memcpy(copy, pcs, depth * sizeof *pcs); /* pcs may be NULL */

  t->stacks[t->count] = (stkr__stack){
      .hash = hash, .site = site, .pcs = copy, .depth = (uint16_t)depth,
      .truncated = truncated, .epoch = 0};
  (void)stkr_index_add(&t->index, key, t->count); /* reserved above */
  t->count++;
  t->interned++;
  return t->id_base + (uint32_t)t->count;
}

int stkr__stacktab_renew(stkr__stacktab *t, uint32_t *keep) {
  stkr__stacktab n;
  size_t k, kept = 0;

  for (k = 0; k < t->count; k++) kept += keep[k] != 0;
  memset(&n, 0, sizeof n);
  n.id_base = stkr__stacktab_max_id(t);
  if (stkr_index_reserve(&n.index, kept + 1) != 0 ||
      (kept != 0 && stkr_grow((void **)&n.stacks, &n.cap, kept,
                              sizeof *n.stacks) != 0))
    goto fail;
  for (k = 0; k < t->count; k++) {
    const stkr__stack *s = &t->stacks[k];
    stkr__stack *c;
    if (keep[k] == 0) continue;
    keep[k] = stkr__stacktab_intern(&n, s->hash, s->site, s->pcs, s->depth,
                                    s->truncated);
    if (keep[k] == 0) goto fail;
    c = stkr__stacktab_get(&n, keep[k]);
    c->frames = s->frames; /* the symbolizer's: they stay valid */
    c->n_frames = s->n_frames;
  }
  n.interned = t->interned; /* the kept ones were counted when first met */
  stkr__stacktab_free(t);
  *t = n;
  return 0;
fail:
  stkr__stacktab_free(&n);
  return -ENOMEM;
}
