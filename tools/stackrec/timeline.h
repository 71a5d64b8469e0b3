/*
 * timeline.h: events per site over time, for `report --timeline` and the
 * HTML strips. Private to //tools:stackrec_lib (agg.c fills it).
 *
 * Time is seconds since the start of the event's process tree: a forked
 * child counts from its root's start (agg_runs.h), so a child forked later
 * is drawn later and the marks fall where they were set; processes that
 * are no forked children (launches of an app, a merge's inputs) count
 * from their own starts and line up (the filter's origin, filter.h). Every site shares one bucket width: the
 * first STKR_TL_BUCKETS buckets are 1 ms wide, and whenever an event falls
 * past the last one, every site's buckets are merged in pairs and the
 * width doubles. Memory: STKR_TL_BUCKETS counters per site.
 */
#ifndef STKR_TIMELINE_H
#define STKR_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "tools/stackrec/agg.h"

typedef struct stkr__timeline stkr__timeline;

stkr__timeline *stkr__timeline_create(void);
void stkr__timeline_free(stkr__timeline *t); /* NULL is accepted */

/* The counters of `site` (interned pointer), made if new: owned by t,
 * at the same address until stkr__timeline_free (widening merges their
 * contents in place), so a caller may keep the pointer per stack and skip
 * the site lookup on every event. @return NULL when out of memory. */
uint64_t *stkr__timeline_counters(stkr__timeline *t, const char *site);

/* Count one event in `counters` (from stkr__timeline_counters of the same
 * t), t_ns after its origin. */
void stkr__timeline_count(stkr__timeline *t, uint64_t *counters,
                          uint64_t t_ns);

/* Both of the above. @return 0 or -ENOMEM. */
int stkr__timeline_add(stkr__timeline *t, const char *site, uint64_t t_ns);

/* Point each site's timeline at its buckets (owned by t) and set the agg's
 * bucket width and count (the buckets up to the last non-empty one). */
void stkr__timeline_attach(stkr__timeline *t, stkr_agg *a);

#endif /* STKR_TIMELINE_H */
