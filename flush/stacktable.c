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
 * Layout: open addressing with linear probing over a slot array of ids
 * (4 bytes a slot, kept at most half full so probes stay short), the stack
 * descriptors in a dense array indexed by id - 1, and the PCs in an
 * append-only arena of blocks so that their addresses stay stable (the
 * batch's StackDefs point straight at them, without copying).
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
  for (size_t id = 1; id <= t->count; id++) {
    const stkr__stack *st = &t->stacks[id - 1];
    size_t i = (size_t)key_hash(st->hash, st->site) & (n - 1);
    while (s[i]) i = (i + 1) & (n - 1);
    s[i] = (uint32_t)id;
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
  uint32_t id;

  /* Keep the load factor <= 1/2 so probes stay short. Growth failing is
   * not fatal: lookups still work, and an insert is refused only when it
   * would leave no empty slot (which would make probing loop forever). */
  if ((t->count + 1) * 2 > t->nslots) (void)grow_slots(t);
  mask = t->nslots - 1;
  i = (size_t)key_hash(hash, site) & mask;

  for (; (id = t->slots[i]) != 0; i = (i + 1) & mask) {
    const stkr__stack *s = &t->stacks[id - 1];
    if (s->hash == hash && s->site == site && s->depth == depth &&
        s->truncated == truncated &&
        (depth == 0 || memcmp(s->pcs, pcs, depth * sizeof *pcs) == 0))
      return id;
  }

  if (t->count + 2 > t->nslots) return 0;

  /* New stack. Ids are 32-bit in the format; 4 G distinct stacks would need
   * far more memory than the process has, so overflow is not a concern. */
  if (stkr_grow((void **)&t->stacks, &t->cap, t->count + 1,
                sizeof *t->stacks) != 0)
    return 0;
  uint64_t *copy = (uint64_t *)stkr_arena_alloc(
      &t->arena, (size_t)depth * sizeof *copy, ARENA_BLOCK);
  if (!copy) return 0;
  if (depth) memcpy(copy, pcs, depth * sizeof *pcs); /* pcs may be NULL */

  id = (uint32_t)(t->count + 1);
  t->stacks[t->count] = (stkr__stack){
      .hash = hash, .site = site, .pcs = copy, .depth = (uint16_t)depth,
      .truncated = truncated, .epoch = 0};
  t->count++;
  t->slots[i] = id;
  return id;
}
