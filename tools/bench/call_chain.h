/*
 * call_chain.h: 2^n distinct call stacks on demand, for the benchmarks and
 * tests of what distinct stacks cost (tools/bench/stack_table.c,
 * tests/test-flush-stackcap.c). call_chain(n, bits, leaf) reaches leaf(bits)
 * through n levels, each through one of two call sites picked by a bit of
 * `bits`, so each value of bits below 2^n has a stack of its own.
 * Build with frame pointers and no sibling calls (BENCH_COPTS,
 * WALK_COPTS), or levels fold away. Header-only (libc only).
 */
#ifndef STKR_BENCH_CALL_CHAIN_H
#define STKR_BENCH_CALL_CHAIN_H

#include <stdint.h>

typedef int (*call_chain_leaf)(uint32_t bits);

static int call_chain(int n, uint32_t bits, call_chain_leaf leaf);
/* "+ 1", "+ 2": work after each call, so that no call is a tail call. */
static __attribute__((noinline, unused)) int call_chain_left(
    int n, uint32_t bits, call_chain_leaf leaf) {
  return call_chain(n - 1, bits, leaf) + 1;
}
static __attribute__((noinline, unused)) int call_chain_right(
    int n, uint32_t bits, call_chain_leaf leaf) {
  return call_chain(n - 1, bits, leaf) + 2;
}
static __attribute__((noinline, unused)) int call_chain(int n, uint32_t bits,
                                                        call_chain_leaf leaf) {
  if (n == 0) return leaf(bits);
  return ((bits >> (n - 1)) & 1u) ? call_chain_right(n, bits, leaf)
                                  : call_chain_left(n, bits, leaf);
}

#endif /* STKR_BENCH_CALL_CHAIN_H */
