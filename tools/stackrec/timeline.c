/*
 * timeline.c: events per site over time (timeline.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_hash.h"
#include "tools/stackrec/timeline.h"

typedef struct tl_site {
  const char *site; /* NULL: empty slot */
  uint64_t *b;      /* STKR_TL_BUCKETS counters */
} tl_site;

struct stkr__timeline {
  tl_site *s;
  size_t cap, n;
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
  size_t i;

  if (t == NULL)
    return;
  for (i = 0; i < t->cap; i++)
    free(t->s[i].b);
  free(t->s);
  free(t);
}

static size_t slot_of(const char *site, size_t cap) {
  return (size_t)stkr_mix64((uint64_t)(uintptr_t)site) & (cap - 1);
}

static tl_site *site_entry(stkr__timeline *t, const char *site) {
  size_t i, k;

  if (t->cap != 0)
    for (i = slot_of(site, t->cap); t->s[i].site != NULL;
         i = (i + 1) & (t->cap - 1))
      if (t->s[i].site == site)
        return &t->s[i];
  if ((t->n + 1) * 2 > t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 32;
    tl_site *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
      return NULL;
    for (k = 0; k < t->cap; k++) {
      if (t->s[k].site == NULL)
        continue;
      for (i = slot_of(t->s[k].site, ncap); ns[i].site != NULL;
           i = (i + 1) & (ncap - 1))
        ;
      ns[i] = t->s[k];
    }
    free(t->s);
    t->s = ns;
    t->cap = ncap;
  }
  for (i = slot_of(site, t->cap); t->s[i].site != NULL;
       i = (i + 1) & (t->cap - 1))
    ;
  if ((t->s[i].b = calloc(STKR_TL_BUCKETS, sizeof *t->s[i].b)) == NULL)
    return NULL;
  t->s[i].site = site;
  t->n++;
  return &t->s[i];
}

/* Double the bucket width: merge every site's buckets in pairs. */
static void widen(stkr__timeline *t) {
  size_t i, k;

  for (i = 0; i < t->cap; i++) {
    uint64_t *b = t->s[i].b;
    if (t->s[i].site == NULL)
      continue;
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
  tl_site *e = site_entry(t, site);
  return e != NULL ? e->b : NULL;
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
  size_t i, k;

  a->timeline_bucket_ns = t->width_ns;
  a->timeline_buckets = t->used;
  for (i = 0; i < a->n_sites; i++) {
    if (t->cap == 0)
      break;
    for (k = slot_of(a->sites[i].name, t->cap); t->s[k].site != NULL;
         k = (k + 1) & (t->cap - 1))
      if (t->s[k].site == a->sites[i].name) {
        a->sites[i].timeline = t->s[k].b;
        break;
      }
  }
}
