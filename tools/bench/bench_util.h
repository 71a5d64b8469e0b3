/*
 * bench_util.h: the clock, the random numbers and the order statistics
 * every benchmark of tools/bench used to write again (header-only, libc
 * only, so a benchmark of the recorder links nothing else).
 *
 * Thread-safety: every function is reentrant; a xorshift state belongs to
 * one thread.
 */
#ifndef STKR_BENCH_UTIL_H
#define STKR_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Marsaglia's xorshift64: cheap, and the same sequence on every run for a
 * given seed (*state must not be 0). @return the next number. */
static inline uint64_t bench_xorshift(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* qsort comparators, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline int bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile (0..1, nearest rank) of n > 0 values; v is not changed
 * (a sorted copy is made). @return it, or 0 when out of memory. */
static inline double bench_quantile(const double *v, size_t n, double q) {
  double *s = malloc(n * sizeof *s), r;
  if (s == NULL)
    return 0;
  memcpy(s, v, n * sizeof *s);
  qsort(s, n, sizeof *s, bench_cmp_double);
  r = s[(size_t)(q * (double)(n - 1) + 0.5)];
  free(s);
  return r;
}

/* The median (nearest rank, the upper one of an even count) of n > 0
 * values; v is not changed. */
static inline double bench_median(const double *v, size_t n) {
  return bench_quantile(v, n, 0.5);
}

#endif /* STKR_BENCH_UTIL_H */
