/*
 * paytab.c: payloads per site (paytab.h).
 *
 * The distinct (site, payload) pairs with their events, found through a
 * stkr_index (common/stkr_map.h: hash -> index, the bytes compared), and
 * per site, through a stkr_map from the site's name, how many distinct
 * payloads it holds and what it could not keep.
 * A payload's bytes are copied once, when first seen.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "tools/stackrec/paytab.h"

typedef struct pent {
  const char *site;
  uint8_t *data;
  size_t len;
  uint64_t count;
  bool truncated;
} pent;

typedef struct sent {
  size_t distinct;
  uint64_t events, more_events;
  stkr_agg_payload *list; /* attach: the site's payloads */
  size_t fill;
} sent;

struct stkr__paytab {
  pent *p;          /* pn payloads in the order first seen */
  size_t pcap, pn;
  stkr_index pay_ix; /* hash of (site, payload) -> index in p[] */
  stkr_map site_ix; /* site name (by pointer) -> its index in s[] */
  sent *s;          /* sn sites in the order first seen */
  size_t scap, sn;
};

/* Finished by the index (stkr_index mixes every hash). */
static uint64_t hash_payload(const char *site, const uint8_t *p, size_t n) {
  return stkr_hash_bytes(STKR_HASH_SEED ^ (uint64_t)(uintptr_t)site, p, n);
}

stkr__paytab *stkr__paytab_create(void) {
  return calloc(1, sizeof(stkr__paytab));
}

void stkr__paytab_free(stkr__paytab *t) {
  if (t == NULL)
    return;
  STKR_FREE_EACH(t->p, t->pn, data);
  stkr_index_free(&t->pay_ix);
  STKR_FREE_EACH(t->s, t->sn, list);
  free(t->p);
  free(t->s);
  stkr_map_free(&t->site_ix);
  free(t);
}

/* The site's entry, added if new; NULL when out of memory. */
static sent *site_entry(stkr__paytab *t, const char *site) {
  uint64_t *ix;
  int rc;

  if (stkr_grow((void **)&t->s, &t->scap, t->sn + 1, sizeof *t->s) != 0 ||
      (rc = stkr_map_add(&t->site_ix, (uint64_t)(uintptr_t)site, &ix)) < 0)
    return NULL;
  if (rc == 1) { /* new: the next entry of s[] */
    *ix = t->sn;
    memset(&t->s[t->sn++], 0, sizeof *t->s);
  }
  return &t->s[*ix];
}

int stkr__paytab_add(stkr__paytab *t, const char *site, const uint8_t *p,
                     size_t n, bool truncated) {
  uint64_t h = hash_payload(site, p, n) ^ truncated;
  sent *se = site_entry(t, site);
  size_t pos, i;

  if (se == NULL)
    return -ENOMEM;
  se->events++;
  for (i = stkr_index_first(&t->pay_ix, h, &pos); i != STKR_INDEX_NONE;
       i = stkr_index_next(&t->pay_ix, h, &pos))
    if (t->p[i].site == site && t->p[i].len == n &&
        t->p[i].truncated == truncated && memcmp(t->p[i].data, p, n) == 0) {
      t->p[i].count++;
      return 0;
    }
  if (se->distinct >= STKR_AGG_MAX_PAYLOADS) {
    se->more_events++;
    return 0;
  }
  if (stkr_grow((void **)&t->p, &t->pcap, t->pn + 1, sizeof *t->p) != 0 ||
      stkr_index_reserve(&t->pay_ix, t->pn + 1) != 0)
    return -ENOMEM;
  i = t->pn;
  if ((t->p[i].data = malloc(n)) == NULL)
    return -ENOMEM;
  memcpy(t->p[i].data, p, n);
  t->p[i].site = site;
  t->p[i].len = n;
  t->p[i].count = 1;
  t->p[i].truncated = truncated;
  (void)stkr_index_add(&t->pay_ix, h, t->pn++); /* reserved above */
  se->distinct++;
  return 0;
}

static int by_count(const void *pa, const void *pb) {
  const stkr_agg_payload *x = pa, *y = pb;
  int c = stkr_cmp_u64(y->count, x->count); /* most first */

  return c != 0 ? c : stkr_cmp_bytes(x->data, x->len, y->data, y->len);
}

/* The site's entry, or NULL when it has none. */
static sent *site_find(const stkr__paytab *t, const char *site) {
  const uint64_t *ix = stkr_map_find(&t->site_ix, (uint64_t)(uintptr_t)site);

  return ix != NULL ? &t->s[*ix] : NULL;
}

int stkr__paytab_attach(stkr__paytab *t, stkr_agg_site *sites, size_t n) {
  size_t i;

  /* One pass over the payloads, each into its site's list. */
  for (i = 0; i < t->sn; i++) {
    sent *se = &t->s[i];
    if (se->list != NULL)
      continue;
    se->list = calloc(se->distinct ? se->distinct : 1, sizeof *se->list);
    if (se->list == NULL)
      return -ENOMEM;
  }
  for (i = 0; i < t->pn; i++) {
    const pent *pe = &t->p[i];
    sent *se;
    if ((se = site_find(t, pe->site)) == NULL)
      continue;
    se->list[se->fill++] =
        (stkr_agg_payload){pe->data, pe->len, pe->count, pe->truncated};
  }
  for (i = 0; i < n; i++) {
    sent *se = site_find(t, sites[i].name);
    if (se == NULL)
      continue;
    qsort(se->list, se->fill, sizeof *se->list, by_count);
    sites[i].payloads = se->list;
    sites[i].n_payloads = se->fill;
    sites[i].more_payload_events = se->more_events;
    sites[i].payload_events = se->events;
  }
  return 0;
}
