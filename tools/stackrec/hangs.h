/*
 * hangs.h: the hang watchdog's events (recorder/watchdog.c) gathered for
 * `stackrec report` (a "Hangs" section) and the HTML page (hangs on the
 * timeline). Private to //tools:stackrec_lib; agg.c feeds it.
 *
 * What the recorder writes (see stkr_watchdog_start in stackrec.h):
 *   watchdog.hang       one run of identical stacks of one hang:
 *                       "hang=ID ms=D samples=N first_ms=F"
 *   watchdog.recovered  the end of hang ID: "hang=ID ms=TOTAL samples=N"
 * A hang is keyed by (process, thread, ID). Its start is the recovery's
 * time minus TOTAL; a hang that never recovered (the recording ended
 * inside it) lasts at least its longest run's D, and starts D before
 * that run's event.
 */
#ifndef STKR_HANGS_H
#define STKR_HANGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/stkr_reader.h"
#include "tools/stackrec/agg.h"

typedef struct stkr__hangs stkr__hangs;

stkr__hangs *stkr__hangs_create(void);
void stkr__hangs_free(stkr__hangs *h); /* NULL is accepted */

/* Is `site` one of the watchdog's? */
bool stkr__hangs_site(const char *site);

/* One watchdog event that passed the filters; `stack` is its merged
 * stack's index in the agg, t_ns its time on the timelines' line
 * (agg_runs.h).
 * @return 0 or -ENOMEM. */
int stkr__hangs_add(stkr__hangs *h, const stkr_event_view *ev, size_t stack,
                    uint64_t t_ns);

/* The "Hangs" section of `report` (nothing when there were none), to
 * stdout: hangs grouped by stack (samples, hangs seen in, durations), then
 * each hang. top: stacks shown. @return 0 or -ENOMEM. */
int stkr__hangs_print(const stkr_agg *a, size_t top);

/* A JSON array of the hangs for the HTML page:
 * [{"pid","thread","start_ms","ms","samples","recovered","stacks":[i..]}]
 * with stack indexes into a->stacks. */
void stkr__hangs_json(const stkr_agg *a, FILE *out);

#endif /* STKR_HANGS_H */
