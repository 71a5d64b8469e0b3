/*
 * boots.c: one time line for processes of several boots (boots.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/stkr_boot.h"
#include "common/stkr_cmp.h"
#include "tools/stackrec/boots.h"

typedef struct proc_boot {
  uint64_t time; /* stkr_boot_time of its start, 0: not known */
  uint64_t wall; /* its start, wall clock */
  size_t i;      /* the process */
} proc_boot;

static int by_time(const void *a, const void *b) {
  return stkr_cmp_u64(((const proc_boot *)a)->time,
                      ((const proc_boot *)b)->time);
}

int stkr_boots_init(stkr_boots *b, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), k = 0, i, first = SIZE_MAX;
  uint64_t prev = 0, ref = 0, earliest = 0;
  proc_boot *v;

  *b = (stkr_boots){.n = n};
  v = malloc((n ? n : 1) * sizeof *v);
  b->shift = calloc(n ? n : 1, sizeof *b->shift);
  b->boot = malloc((n ? n : 1) * sizeof *b->boot);
  if (v == NULL || b->shift == NULL || b->boot == NULL) {
    free(v);
    stkr_boots_free(b);
    return -ENOMEM;
  }
  for (i = 0; i < n; i++) {
    uint64_t mono = 0, wall = 0;

    b->boot[i] = STKR_BOOT_UNKNOWN;
    (void)stkr_reader_start_clock(r, i, &mono, &wall);
    if (stkr_boot_time(mono, wall) != 0)
      v[k++] = (proc_boot){stkr_boot_time(mono, wall), wall, i};
  }
  /* Boots in order of their time; the reference is the boot of the
   * earliest start. */
  qsort(v, k, sizeof *v, by_time);
  for (i = 0; i < k; i++) {
    if (i == 0 || !stkr_boot_same(v[i].time, prev))
      b->n_boots++;
    prev = v[i].time;
    b->boot[v[i].i] = (uint32_t)(b->n_boots - 1);
    if (first == SIZE_MAX || v[i].wall < earliest) {
      first = i;
      earliest = v[i].wall;
    }
  }
  if (b->n_boots > 1) {
    /* One shift a boot: that of its first (earliest-booted) process. */
    uint64_t *bt = malloc(b->n_boots * sizeof *bt);
    if (bt == NULL) {
      free(v);
      stkr_boots_free(b);
      return -ENOMEM;
    }
    for (i = k; i-- > 0;)
      bt[b->boot[v[i].i]] = v[i].time;
    ref = bt[b->boot[v[first].i]];
    for (i = 0; i < k; i++)
      b->shift[v[i].i] = (int64_t)(bt[b->boot[v[i].i]] - ref);
    free(bt);
  }
  free(v);
  return 0;
}

uint64_t stkr_boots_place(const stkr_boots *b, size_t i, uint64_t ts) {
  int64_t s = i < b->n ? b->shift[i] : 0;

  /* A boot before the reference's: its events before that boot's mono 0
   * (none that began after the earliest start) stay at 0. */
  if (s < 0 && ts < (uint64_t)-s)
    return 0;
  return ts + (uint64_t)s;
}

void stkr_boots_free(stkr_boots *b) {
  if (b == NULL)
    return;
  free(b->shift);
  free(b->boot);
  *b = (stkr_boots){0};
}
