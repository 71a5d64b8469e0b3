/*
 * export.h: `stackrec export` internals shared by the format writers.
 *
 * export.c parses the options, opens the input and the output and calls
 * one writer:
 *   export_pprof.c   aggregated (tools/stackrec/agg.h), gzipped profile.proto
 *   export_folded.c  aggregated, collapsed stacks
 *   export_chrome.c  per event, Trace Event Format JSON
 *   export_jsonl.c   per event, one JSON object per line
 * The aggregated writers grow only with distinct stacks; the per-event ones
 * hold one batch (the reader's) plus tables that grow with distinct
 * threads and stacks, never with events. Every writer filters with
 * the one stkr__filter (filter.h), the one stkr_agg_build() uses, so every
 * format shows the same events.
 *
 * Thread-safety: none; the tool is single-threaded.
 */
#ifndef STKR_EXPORT_H
#define STKR_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/filter.h"

/* One export run, set up by export.c. */
typedef struct stkr__export {
  stkr_reader *r;         /* not read from yet when a writer starts */
  stkr_agg_opts filt;     /* --site, --thread, --from, --to, --app-only
                             (by_thread is the writer's business) */
  FILE *out;              /* where the writer writes; errors are checked
                             by export.c (ferror, fclose) */
  const char *out_name;   /* the -o path, or "stdout", for messages */
  stkr_cli_progress progress; /* see stkr__progress */
  uint64_t events_out;    /* events written (per-event writers) or
                             aggregated (the others), for the summary */
} stkr__export;

/*
 * The writers. Each reads x->r to the end and writes to x->out.
 * @return 0, -ENOMEM, or the reader's hard error (negative errno).
 */
int stkr__export_pprof(stkr__export *x);
int stkr__export_folded(stkr__export *x);
int stkr__export_chrome(stkr__export *x);
int stkr__export_jsonl(stkr__export *x);

/* The progress line (stkr_cli_progress_update: only on a terminal, after
 * a second); call it about every million events. Also the progress
 * callback of stkr_agg_build() (arg: the stkr__export). */
void stkr__progress(uint64_t events, void *arg);
/* Erase the progress line, if one was shown. */
void stkr__progress_end(stkr__export *x);

/*
 * The frames an event shows with --app-only, as in stkr_agg_build()
 * (stkr_agg_app_frames: the app's, or when there is none the innermost
 * PC's). Without app_only, f itself. *out points into f or into *scratch
 * (grown with realloc; free it when done).
 * @return 0 or -ENOMEM.
 */
int stkr__app_frames(const stkr_frame *f, size_t n, bool app_only,
                     stkr_frame **scratch, size_t *scratch_cap,
                     const stkr_frame **out, size_t *n_out);

/* ---- a hash map from byte strings to uint64 ------------------------- */

typedef struct stkr__map_ent {
  char *key;              /* NUL-terminated copy (len bytes + '\0') */
  size_t len;
  uint64_t val;
} stkr__map_ent;

typedef struct stkr__map {
  stkr__map_ent *v;       /* n entries, in the order added */
  size_t n, cap;
  stkr_index ix;          /* hash of the key's bytes -> index into v */
} stkr__map;

/*
 * Look key up. Found: *val = its value, @return 1. Not found: insert it
 * with the value *val, @return 0. -ENOMEM when it cannot be inserted.
 * *key_copy (if not NULL) receives the map's NUL-terminated copy of the
 * key, valid until stkr__map_free().
 */
int stkr__map_put(stkr__map *m, const void *key, size_t len, uint64_t *val,
                  const char **key_copy);
/* Look key up without inserting. @return 1 (*val set) or 0 (absent). */
int stkr__map_get(const stkr__map *m, const void *key, size_t len,
                  uint64_t *val);
void stkr__map_free(stkr__map *m);

#endif /* STKR_EXPORT_H */
