/*
 * bench_util.h: the clock, the random numbers, the order statistics and
 * the clean-up of a recording directory and a thread's CPU time that every
 * benchmark of tools/bench used to write again (header-only, libc
 * only, so a benchmark of the recorder links nothing else).
 *
 * Thread-safety: every function is reentrant; a xorshift state belongs to
 * one thread.
 */
#ifndef STKR_BENCH_UTIL_H
#define STKR_BENCH_UTIL_H

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Zipf(1) over n ranks (rank r drawn with probability ~ 1/r: hot paths
 * dominate), each rank mapped to a shuffled item: fills the caller's cdf
 * and perm (n entries each; the shuffle draws from *rng). Needs -lm.
 * @return the entropy of a draw, in bits. */
static inline double bench_zipf_init(double *cdf, unsigned *perm, unsigned n,
                                     uint64_t *rng) {
  double sum = 0, acc = 0, h = 0;
  unsigned i;

  for (i = 0; i < n; i++)
    sum += 1.0 / (i + 1);
  for (i = 0; i < n; i++) {
    double p = 1.0 / (i + 1) / sum;
    acc += p;
    cdf[i] = acc;
    h -= p * log2(p);
    perm[i] = i;
  }
  cdf[n - 1] = 1.0;
  for (i = n - 1; i > 0; i--) { /* Fisher-Yates */
    unsigned j = (unsigned)(bench_xorshift(rng) % (i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  return h;
}

/* The item of a Zipf draw for the random number x (bench_zipf_init's
 * tables): the first rank whose CDF exceeds x's top 53 bits as [0, 1). */
static inline unsigned bench_zipf_draw(const double *cdf, const unsigned *perm,
                                       unsigned n, uint64_t x) {
  double u = (double)(x >> 11) * 0x1.0p-53;
  unsigned lo = 0, hi = n - 1;

  while (lo < hi) {
    unsigned mid = (lo + hi) / 2;
    if (cdf[mid] > u)
      hi = mid;
    else
      lo = mid + 1;
  }
  return perm[lo];
}

/* The median (nearest rank, the upper one of an even count) of n > 0
 * values; v is not changed. */
static inline double bench_median(const double *v, size_t n) {
  return bench_quantile(v, n, 0.5);
}

/* Remove a recording directory the benchmark made: every entry in it (a
 * recording has no subdirectories), then the directory itself. */
static inline void bench_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[4200];

  if (d != NULL) {
    while ((e = readdir(d)) != NULL)
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
          (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) <
              sizeof path)
        unlink(path);
    closedir(d);
  }
  rmdir(dir);
}

/* CPU ns the thread of this process named `name` has run so far (its
 * /proc schedstat; the sum if several share the name), or 0 where /proc
 * has no such thread. A thread's own CPU time is the figure that survives
 * a loaded machine, where wall-clock rates mostly measure the scheduler. */
static inline uint64_t bench_thread_cpu_ns(const char *name) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  uint64_t v = 0;

  while (d != NULL && (e = readdir(d)) != NULL) {
    char path[300], buf[64] = "";
    unsigned long long ns;
    FILE *f;
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    if ((f = fopen(path, "r")) == NULL)
      continue;
    if (fgets(buf, sizeof buf, f) == NULL)
      buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    if (strcmp(buf, name) != 0)
      continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    if ((f = fopen(path, "r")) != NULL) {
      if (fscanf(f, "%llu", &ns) == 1)
        v += ns;
      fclose(f);
    }
  }
  if (d != NULL)
    closedir(d);
  return v;
}

#endif /* STKR_BENCH_UTIL_H */
