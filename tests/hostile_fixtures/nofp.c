/*
 * nofp.c: code built WITHOUT frame pointers (tests/BUILD compiles this file
 * with -fomit-frame-pointer -O2) that calls stkr_event(); see hostile.h.
 */
#include "tests/hostile_fixtures/hostile.h"

#include "recorder/stackrec.h"

STKR_SITE_DEFINE(g_nofp_site, "hostile.nofp");
/* Stored after the call, one by one: each value must survive it. */
volatile uint64_t hostile_sink[10];

__attribute__((noinline)) int hostile_nofp_leaf(void *arg) {
  int rc;

  (void)arg;
  rc = stkr_event(&g_nofp_site, NULL, 0);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return rc;
}

/* Opaque to the optimizer, so the values below stay live across it. */
__attribute__((noinline)) static uint64_t mix(uint64_t x) {
  __asm__ volatile("" : "+r"(x));
  return x * 0x9E3779B97F4A7C15ull + 1;
}

__attribute__((noinline)) int hostile_nofp_pressure(uint64_t seed) {
  uint64_t a = mix(seed), b = mix(a), c = mix(b), d = mix(c), e = mix(d);
  uint64_t f = mix(e), g = mix(f), h = mix(g), i = mix(h), j = mix(i);
  int rc = stkr_event(&g_nofp_site, NULL, 0);

  /* Every value is needed after the call: 10 live values, 6 (x86_64) or
   * 10 (aarch64) callee-saved registers, so rbp / x29 carry data. */
  hostile_sink[0] = a, hostile_sink[1] = b, hostile_sink[2] = c;
  hostile_sink[3] = d, hostile_sink[4] = e, hostile_sink[5] = f;
  hostile_sink[6] = g, hostile_sink[7] = h, hostile_sink[8] = i;
  hostile_sink[9] = j;
  return rc;
}
