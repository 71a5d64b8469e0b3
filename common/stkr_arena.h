/*
 * stkr_arena.h: the one append-only block arena (libc only, header-only),
 * for tables that hand out pointers into their storage which must stay
 * valid for the table's life: the flush worker's stack table (PCs that
 * the batch's StackDefs point at without copying) and the symbolizer's
 * per-stack frame lists. Nothing is freed singly; everything goes at once.
 *
 * stkr_arena a = {0};  zero-initialized is empty.
 *
 * stkr_arena_alloc(&a, n, block): n bytes, 8-byte aligned, never moved,
 * from a block of `block` bytes (or, for a larger n, a block of its own
 * of n rounded up to 8). n == 0 gets a distinct non-NULL pointer, so that
 * callers can tell "empty" from "failed". Memory is not zeroed.
 * @return the pointer, owned by the arena, or NULL when out of memory or
 * when n would overflow (the arena is unchanged then).
 *
 * stkr_arena_free(&a): free every block; a is empty again. Accepts an
 * empty arena.
 *
 * a.bytes counts the bytes of all blocks (what the arena holds of the
 * heap, for memory accounting).
 * Thread-safety: none; one owner.
 */
#ifndef STKR_COMMON_ARENA_H
#define STKR_COMMON_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct stkr_arena_blk {
  struct stkr_arena_blk *next;
  size_t used, size; /* bytes */
  uint64_t data[];   /* uint64_t: 8-byte alignment for every allocation */
} stkr_arena_blk;

typedef struct stkr_arena {
  stkr_arena_blk *head; /* the block being filled; older ones follow */
  size_t bytes;
} stkr_arena;

static inline void *stkr_arena_alloc(stkr_arena *a, size_t n, size_t block) {
  stkr_arena_blk *b = a->head;

  if (n == 0) n = 1; /* keep pointers distinct and non-NULL */
  if (n > SIZE_MAX - 7 - sizeof *b) return NULL;
  n = (n + 7) & ~(size_t)7;
  if (b == NULL || b->size - b->used < n) {
    size_t size = n > block ? n : block;
    if ((b = (stkr_arena_blk *)malloc(sizeof *b + size)) == NULL) return NULL;
    b->next = a->head;
    b->used = 0;
    b->size = size;
    a->head = b;
    a->bytes += size;
  }
  void *p = (unsigned char *)b->data + b->used;
  b->used += n;
  return p;
}

static inline void stkr_arena_free(stkr_arena *a) {
  for (stkr_arena_blk *b = a->head, *next; b != NULL; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
  a->bytes = 0;
}

#endif /* STKR_COMMON_ARENA_H */
