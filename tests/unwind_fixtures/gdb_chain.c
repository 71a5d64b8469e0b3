/*
 * gdb_chain.c: the second oracle of test-unwind (gdb's backtrace). Walks
 * its own stack with the tables at a leaf under the chain (chain.c, built
 * -O2 -fomit-frame-pointer), writes the PCs, then calls uwg_stop(), where
 * the test's gdb has a breakpoint: gdb's frames from the leaf's caller on
 * must be the PCs written here.
 *
 *   gdb_chain OUT DEPTH:SHAPE...   one walk per argument, in order; walk k
 *                                  writes "walk k: pc pc ...\n" (hex, from
 *                                  the leaf's caller to the end) to OUT
 *                                  before it stops in uwg_stop.
 * Exit status: 0, 2 usage, 3 OUT cannot be written, 4 no tables.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/unwind_fixtures/chain.h"
#include "unwind/unwind.h"

#define MAXF 160

typedef struct walk_ctx {
  const stkr__uw_set *set;
  uintptr_t lo, hi;
  FILE *out;
  int k;
} walk_ctx;

/* gdb stops here (the test breaks on it): a real call, never inlined. */
__attribute__((noinline)) void uwg_stop(int k) {
  __asm__ volatile("" : : "r"(k) : "memory");
}

__attribute__((noinline)) static void leaf(void *arg) {
  walk_ctx *c = arg;
  uintptr_t r[4];
  uint64_t pcs[MAXF];
  stkr__uw_regs regs;
  unsigned n, i;

  uwc_capture(r);
  regs = (stkr__uw_regs){r[0], r[1], r[2], r[3]};
  n = stkr__unwind_walk(c->set, &regs, c->lo, c->hi, pcs, MAXF, NULL);
  fprintf(c->out, "walk %d:", c->k);
  for (i = 1; i < n; i++) fprintf(c->out, " %#llx", (unsigned long long)pcs[i]);
  fprintf(c->out, "\n");
  fflush(c->out);
  uwg_stop(c->k);
  __asm__ volatile("" ::: "memory"); /* no tail call: this frame stays for gdb */
}

int main(int argc, char **argv) {
  stkr__uw_set *set = NULL;
  walk_ctx c;
  pthread_attr_t a;
  void *addr;
  size_t size;
  int i;

  if (argc < 3) {
    fprintf(stderr, "usage: gdb_chain OUT DEPTH:SHAPE...\n");
    return 2;
  }
  c.out = fopen(argv[1], "w");
  if (c.out == NULL) {
    perror(argv[1]);
    return 3;
  }
  if (stkr__unwind_set_build_loaded(&set, NULL) != 0) return 4;
  if (pthread_getattr_np(pthread_self(), &a) != 0 || pthread_attr_getstack(&a, &addr, &size) != 0)
    return 4;
  pthread_attr_destroy(&a);
  c.set = set;
  c.lo = (uintptr_t)addr;
  c.hi = (uintptr_t)addr + size;
  for (i = 2; i < argc; i++) {
    int depth = 0;
    unsigned shape = 0;
    if (sscanf(argv[i], "%d:%u", &depth, &shape) != 2 || depth < 0 || depth > 100) {
      fprintf(stderr, "gdb_chain: bad DEPTH:SHAPE '%s'\n", argv[i]);
      return 2;
    }
    c.k = i - 2;
    uwc_run(depth, shape, leaf, &c);
  }
  fclose(c.out);
  stkr__unwind_set_free(set);
  return 0;
}
