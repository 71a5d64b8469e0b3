/*
 * paytab.h: payloads per site, counted for the aggregation (agg.c): which
 * files, variables or addresses a site touched, and how often. Private to
 * //tools:stackrec_lib.
 *
 * Memory: at most STKR_AGG_MAX_PAYLOADS distinct payloads per site are
 * kept (each at most the recording's payload_max bytes); the events of
 * later new payloads are only counted.
 */
#ifndef STKR_PAYTAB_H
#define STKR_PAYTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/stackrec/agg.h"

typedef struct stkr__paytab stkr__paytab;

/* @return a new table, or NULL (out of memory). */
stkr__paytab *stkr__paytab_create(void);
/* Free the table and every payload list it attached. NULL is accepted. */
void stkr__paytab_free(stkr__paytab *t);

/* Count one event at `site` (an interned pointer: equal names, equal
 * pointers) with payload p[0..n), n > 0, `truncated` if it was cut at
 * payload_max (a row of its own: the bytes are only a prefix).
 * @return 0 or -ENOMEM. */
int stkr__paytab_add(stkr__paytab *t, const char *site, const uint8_t *p,
                     size_t n, bool truncated);

/* Fill each site's payloads (most events first), n_payloads,
 * more_payload_events and payload_events. The lists stay owned by t.
 * @return 0 or -ENOMEM. */
int stkr__paytab_attach(stkr__paytab *t, stkr_agg_site *sites, size_t n);

#endif /* STKR_PAYTAB_H */
