/* fixture_c.c: the C call chain of the symbolization fixture:
 *   run_c (external) -> static_mid (static) -> outer_c (external)
 *     -> inlined_helper (always inlined into outer_c) -> the event.
 * Built with -O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls;
 * the empty asm after each call keeps it from being a tail call. */
#include "recorder/stackrec.h"
#include "tests/symfixture/fixture.h"

volatile int g_line[L_COUNT];

static inline __attribute__((always_inline)) void inlined_helper(int i) {
  AT(L_INLINED, STKR_EVENT("sym.c", &i, sizeof i));
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void outer_c(int i) {
  AT(L_OUTER_C, inlined_helper(i));
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void static_mid(int i) {
  AT(L_STATIC_MID, outer_c(i));
  __asm__ volatile("" ::: "memory");
}

void run_c(int i) {
  AT(L_RUN_C, static_mid(i));
  __asm__ volatile("" ::: "memory");
}
