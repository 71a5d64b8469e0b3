/*
 * timeline.c: events per site over time (timeline.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_map.h"
#include "tools/stackrec/timeline.h"

struct stkr__timeline {
  stkr_map sites;    /* site name (by pointer) -> its STKR_TL_BUCKETS counters */
  uint64_t width_ns; /* of one bucket: 1 ms << width_shift */
  unsigned width_shift;
  size_t used;       /* buckets up to the last non-empty one, any site */
};

stkr__timeline *stkr__timeline_create(void) {
  stkr__timeline *t = calloc(1, sizeof *t);
  if (t != NULL)
    t->width_ns = 1000000; /* 1 ms */
  return t;
}

void stkr__timeline_free(stkr__timeline *t) {
  size_t pos = 0;
  uint64_t site, *b;

  if (t == NULL)
    return;
  while (stkr_map_next(&t->sites, &pos, &site, &b))
    free((uint64_t *)(uintptr_t)*b);
  stkr_map_free(&t->sites);
  free(t);
}

/* The site's counters, added (zeroed) if new; NULL when out of memory. */
static uint64_t *site_counters(stkr__timeline *t, const char *site) {
  uint64_t key = (uint64_t)(uintptr_t)site, *v, *b;

  if ((v = stkr_map_find(&t->sites, key)) != NULL)
    return (uint64_t *)(uintptr_t)*v;
  if ((b = calloc(STKR_TL_BUCKETS, sizeof *b)) == NULL)
    return NULL;
  if (stkr_map_put(&t->sites, key, (uint64_t)(uintptr_t)b) != 0) {
    free(b);
    return NULL;
  }
  return b;
}

/* Double the bucket width: merge every site's buckets in pairs. */
static void widen(stkr__timeline *t) {
  size_t pos = 0, k;
  uint64_t site, *v;

  while (stkr_map_next(&t->sites, &pos, &site, &v)) {
    uint64_t *b = (uint64_t *)(uintptr_t)*v;
    for (k = 0; k < STKR_TL_BUCKETS / 2; k++)
      b[k] = b[2 * k] + b[2 * k + 1];
    memset(b + STKR_TL_BUCKETS / 2, 0,
           (STKR_TL_BUCKETS - STKR_TL_BUCKETS / 2) * sizeof *b);
  }
  t->used = (t->used + 1) / 2;
  t->width_ns *= 2;
  t->width_shift++;
}

uint64_t *stkr__timeline_counters(stkr__timeline *t, const char *site) {
  return site_counters(t, site);
}

void stkr__timeline_count(stkr__timeline *t, uint64_t *counters,
                          uint64_t t_ns) {
  /* Per event: a division by a constant (a multiply) and a shift, since
   * the width is always 1 ms times a power of two. */
  uint64_t ms = t_ns / 1000000;
  size_t k;

  while ((ms >> t->width_shift) >= STKR_TL_BUCKETS)
    widen(t);
  k = (size_t)(ms >> t->width_shift);
  counters[k]++;
  if (k + 1 > t->used)
    t->used = k + 1;
}

int stkr__timeline_add(stkr__timeline *t, const char *site, uint64_t t_ns) {
  uint64_t *counters = stkr__timeline_counters(t, site);

  if (counters == NULL)
    return -ENOMEM;
  stkr__timeline_count(t, counters, t_ns);
  return 0;
}

void stkr__timeline_attach(stkr__timeline *t, stkr_agg *a) {
  size_t i;

  a->timeline_bucket_ns = t->width_ns;
  a->timeline_buckets = t->used;
  for (i = 0; i < a->n_sites; i++) {
    const uint64_t *b =
        stkr_map_find(&t->sites, (uint64_t)(uintptr_t)a->sites[i].name);
    if (b != NULL)
      a->sites[i].timeline = (uint64_t *)(uintptr_t)*b;
  }
}
