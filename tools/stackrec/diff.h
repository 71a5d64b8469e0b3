/*
 * diff.h: `stackrec diff BASE NEW` (diff.c builds and compares, diff_out.c
 * prints): the call paths of two recordings (two builds' soak runs),
 * those NEW adds, those gone in NEW, and those whose rate changed.
 *
 * A call path is a site, the module responsible for the stack
 * (tools/stackrec/attrib.h, stkr_attrib_module) and the stack's frames, each
 * compared by its function name and source file base name (not line, not
 * address), so that two builds of one program match; a frame without a
 * function name is compared by image base name + offset (an unsymbolized
 * recording matches only the same build). Marks are not call paths.
 * Rates are events per minute of recording time: from the earliest process
 * start to the latest event of the recording (at least one second).
 *
 * Memory: the distinct stacks of both recordings (two aggregations) and
 * their distinct paths; never the events.
 */
#ifndef STKR_DIFF_H
#define STKR_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/stkr_map.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/attrib.h"

enum { STKR_DIFF_BASE = 0, STKR_DIFF_NEW = 1 };

typedef struct stkr_diff_path {
  const char *site;
  const char *module;
  const stkr_frame *frames; /* of one of its stacks (for display) */
  size_t n_frames;
  uint64_t count[2];        /* events in BASE, NEW */
  double per_min[2];        /* count / recording minutes */
  bool sensitive;           /* its site matches --sensitive */
  const uint8_t *key;       /* what identifies it (owned) */
  size_t key_len;
} stkr_diff_path;

typedef struct stkr_diff_side {
  const char *input;        /* the directory or file given */
  uint64_t events;          /* events (marks not counted) */
  size_t processes;
  double minutes;           /* recording time */
  int status;               /* stkr_cli_status of its reader */
  /* Its INCOMPLETE line (stkr_cli_incomplete_line), "" when complete: a
   * side that lost events shows paths as gone or changed in rate that are
   * not (QA, session 22: a cut-off NEW gave 5 "gone", 5 "changed" and
   * PASS). */
  char incomplete[1024]; /* as stkr_cli_incomplete_line's callers size it */
  /* Segments (and their events) the disk cap deleted: their paths and
   * times are unknown, so no rate of this side is right (QA, session 28:
   * a capped run's rates read 70% below an uncapped one's of the same
   * work): rates are then not compared (stkr_diff.rates_unknown). */
  uint64_t cap_segments, cap_events;
  /* Events whose stacks were never symbolized (stkr_agg.bare_events): a
   * path of them matches only image+offset of the same build. */
  uint64_t bare_events;
} stkr_diff_side;

typedef struct stkr_diff {
  stkr_diff_side side[2];
  stkr_diff_path *paths;
  size_t n_paths, cap_paths;
  stkr_index path_ix;       /* key hash -> index into paths */
  /* Results, sorted for output (pointers into paths): */
  stkr_diff_path **added, **gone, **changed;
  size_t n_added, n_gone, n_changed, n_added_sensitive;
  bool rates_unknown;       /* a side lost segments to the disk cap */
  /* Options: */
  double threshold_pct;     /* --threshold (default 50) */
  uint64_t min_count;       /* --min-count (default 5) */
  const char **sensitive;   /* --sensitive globs; none: every site */
  size_t n_sensitive;
} stkr_diff;

/* Add every stack of agg `a` (side BASE or NEW) to d's paths, attributed
 * with map (NULL: image names). @return 0 or -ENOMEM. */
int stkr_diff_add(stkr_diff *d, int side, const stkr_agg *a,
                  const stkr_modmap *map);
/* Rates, sensitivity, and the three sorted lists. @return 0 or -ENOMEM. */
int stkr_diff_compare(stkr_diff *d);
void stkr_diff_free(stkr_diff *d);

/* diff_out.c: the result as text, JSON or HTML on f. */
void stkr_diff_put_text(FILE *f, const stkr_diff *d);
void stkr_diff_put_json(FILE *f, const stkr_diff *d);
void stkr_diff_put_html(FILE *f, const stkr_diff *d);

#endif /* STKR_DIFF_H */
