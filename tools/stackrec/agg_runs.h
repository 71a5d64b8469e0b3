/*
 * agg_runs.h: the time line of the timelines, their marks and the hangs
 * (agg.c): a process forked from another (Header.parent_pid, follow
 * mode), or started by another as its OS parent (Header.os_parent_pid,
 * since session 37: a program a shell exec'd in a child), counts from the
 * start of its tree's root, on the same boot, other clocks placed by
 * boots.h, when the parent records into the same directory and started
 * no later. Before (QA, session 36), each event counted from its own
 * process's start: a child forked 2 s into a run had its burst drawn at
 * 0 s, before a consent mark set at 1.5 s that compliance rightly put
 * before it. Processes without such a parent (every launch of an app
 * into one directory, each input of a merge, an older writer's exec'd
 * program) still count from their own starts, and so line up; so does a
 * process whose start is not known. Time windows (--from/--to, filter.h)
 * stay per process.
 *
 * One process alone needs none of this: nothing is looked at then.
 * Private to //tools:stackrec_lib; no thread-safety (the aggregation's
 * one thread).
 */
#ifndef STKR_AGG_RUNS_H
#define STKR_AGG_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_reader.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/boots.h"

typedef struct stkr__agg_runs {
  bool on;          /* several processes: the fields below are set */
  stkr_boots boots;
  uint64_t *origin; /* per process: its tree root's start on the boots
                       line; 0: its own start not known */
} stkr__agg_runs;

/* Look at every process's start and parent (stkr_reader_start_clock: its
 * first batch, before reading) when there are several. Zeroed u: off.
 * @return 0 or -ENOMEM. */
int stkr__agg_runs_init(stkr__agg_runs *u, stkr_reader *r);

/* Time ts of process i (of p's current instance; p NULL: of its first) as
 * an offset from its tree root's start into *t_ns (0 before it).
 * @return false when no start is known (one process, or its own start
 * lost): the caller counts from the process's own start. */
bool stkr__agg_runs_offset(stkr__agg_runs *u, size_t i,
                           const stkr_process_info *p, uint64_t ts,
                           uint64_t *t_ns);

/* How many process trees (distinct origins) the processes whose bit is
 * set in with[0, with_bytes) (by reader index) and those of marks[0,
 * n_marks) lie on: each is drawn from its own start, so a mark (on its
 * own tree's line) stands beside the others' events only by that
 * convention. @return 1 when off, 0 when out of memory (not said). */
size_t stkr__agg_runs_trees(const stkr__agg_runs *u, const uint8_t *with,
                            size_t with_bytes, const stkr_agg_mark *marks,
                            size_t n_marks);
void stkr__agg_runs_free(stkr__agg_runs *u); /* zeroed or initialized */

#endif /* STKR_AGG_RUNS_H */
