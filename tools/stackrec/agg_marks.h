/*
 * agg_marks.h: the marks an aggregation keeps (agg.c), for the timelines,
 * the report's header and the HTML page.
 *
 * A process's own marks (stkr_mark: a thread, a stack) are kept as read. A
 * `stackrec mark` mark lives in its directory's marks file (or a merge's,
 * scoped to each input's processes) and reaches every process that reads
 * that file: it is kept once, by (file, line, name), under the process that
 * started first, so that its time counts from the recording's start (its
 * time as that process read it: each puts it on its own clock, so the
 * times of one line differ between processes of other clocks). Which
 * one that is is known only once each process's Header is read, and the
 * reader hands a process's marks over before its first file: so a process
 * notes the marks it sees again, and stkr__agg_marks_resolve compares
 * starts when the reader has moved on to the next process.
 *
 * Strings are interned in the aggregation's string table. Private to
 * //tools:stackrec_lib; no thread-safety (the aggregation's one thread).
 */
#ifndef STKR_AGG_MARKS_H
#define STKR_AGG_MARKS_H

#include <stddef.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/strtab.h"

typedef struct stkr__agg_marks {
  /* `stackrec mark` marks kept: hash of (file, line, name) -> index in
   * path[], off[] and the agg's marks. */
  stkr_index index;
  const char **path; /* by mark index: its marks file; NULL: a process's own */
  uint64_t *off;     /* ... and its line's offset there */
  size_t cap_path, cap_off;
  /* Such marks seen again by the process being read: the mark's index and
   * its time as that process read it. */
  struct stkr__agg_seen { size_t i; uint64_t ts; } *seen;
  size_t n_seen, cap_seen;
} stkr__agg_marks;

/* Keep (or note again) the mark ev into a->marks; its t_ns is set later,
 * by stkr__agg_sum_processes. @return 0 or -ENOMEM. */
int stkr__agg_marks_add(stkr__agg_marks *m, stkr_agg *a, stkr__strtab *strs,
                        const stkr_event_view *ev);
/* The reader has finished with process `process` (SIZE_MAX: none): the
 * marks it saw again go to it if it started earlier than their holder. */
void stkr__agg_marks_resolve(stkr__agg_marks *m, stkr_agg *a,
                             const stkr_reader *r, size_t process);
/* Free m's own memory (the agg keeps the marks). Accepts a zeroed m. */
void stkr__agg_marks_free(stkr__agg_marks *m);

#endif
