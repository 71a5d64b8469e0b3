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
 * Layout: open addressing with linear probing over a slot array of
 * indexes (4 bytes a slot, kept at most half full so probes stay short),
 * the stack descriptors in a dense array, and the PCs in an append-only
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

/* Where a key's probe starts: the PC hash with the site folded in, then
 * the common finalizer: the producer's hash may be weak in its low bits
 * (or, in tests, chosen on purpose); mixing keeps the probe start uniform. */
static inline uint64_t key_hash(uint64_t hash, uint32_t site) {
  return stkr_mix64(hash ^ ((uint64_t)site * 0x9E3779B97F4A7C15ull));
}

int stkr__stacktab_init(stkr__stacktab *t) {
  memset(t, 0, sizeof *t);
  t->nslots = 1024;
  t->slots = calloc(t->nslots, sizeof *t->slots);
  return t->slots ? 0 : -ENOMEM;
}

void stkr__stacktab_free(stkr__stacktab *t) {
  stkr_arena_free(&t->arena);
  free(t->slots);
  free(t->stacks);
  memset(t, 0, sizeof *t);
}

static int grow_slots(stkr__stacktab *t) {
  size_t n = t->nslots * 2;
  uint32_t *s = calloc(n, sizeof *s);
  if (!s) return -ENOMEM;
  for (size_t k = 0; k < t->count; k++) {
    const stkr__stack *st = &t->stacks[k];
    size_t i = (size_t)key_hash(st->hash, st->site) & (n - 1);
    while (s[i]) i = (i + 1) & (n - 1);
    s[i] = (uint32_t)k + 1;
  }
  free(t->slots);
  t->slots = s;
  t->nslots = n;
  return 0;
}

uint32_t stkr__stacktab_intern(stkr__stacktab *t, uint64_t hash, uint32_t site,
                               const uint64_t *pcs, unsigned depth,
                               bool truncated) {
  size_t mask, i;
  uint32_t k;

  /* Keep the load factor <= 1/2 so probes stay short. Growth failing is
   * not fatal: lookups still work, and an insert is refused only when it
   * would leave no empty slot (which would make probing loop forever). */
  if ((t->count + 1) * 2 > t->nslots) (void)grow_slots(t);
  mask = t->nslots - 1;
  i = (size_t)key_hash(hash, site) & mask;

  for (; (k = t->slots[i]) != 0; i = (i + 1) & mask) {
    const stkr__stack *s = &t->stacks[k - 1];
    if (s->hash == hash && s->site == site && s->depth == depth &&
        s->truncated == truncated &&
        (depth == 0 || memcmp(s->pcs, pcs, depth * sizeof *pcs) == 0))
      return t->id_base + k;
  }

  if (t->count + 2 > t->nslots) return 0;

  /* New stack. Ids are 32-bit in the format and never given twice in a
   * session, renewals included: an app whose every event is a new stack
   * (stack_table's 400,000 a second here) would use them up in about
   * three hours, a real app's new stacks in far longer. Past that a new
   * stack is refused like one without memory (its event keeps stack 0,
   * "unknown"), never given an id that means another stack. */
  if (t->id_base + t->count >= UINT32_MAX - 1) return 0;
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
  t->count++;
  t->slots[i] = (uint32_t)t->count;
  t->interned++;
  return t->id_base + (uint32_t)t->count;
}

int stkr__stacktab_renew(stkr__stacktab *t, uint32_t *keep) {
  stkr__stacktab n;
  size_t k, kept = 0;

  for (k = 0; k < t->count; k++) kept += keep[k] != 0;
  memset(&n, 0, sizeof n);
  for (n.nslots = 1024; n.nslots < 2 * (kept + 1);) n.nslots *= 2;
  n.id_base = stkr__stacktab_max_id(t);
  if ((n.slots = calloc(n.nslots, sizeof *n.slots)) == NULL ||
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
