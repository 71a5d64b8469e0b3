/*
 * breakdown.h: a report's events broken down by thread, process, payload
 * or module (`stackrec report --by`), from an aggregation.
 *
 * The module of a stack is the code responsible for it: the image of its
 * innermost frame that is not the system's, by base name (attrib.h says
 * which images are the system's and what a stack of system frames only
 * gets).
 *
 * Thread-safety: none.
 */
#ifndef STKR_BREAKDOWN_H
#define STKR_BREAKDOWN_H

#include <stddef.h>
#include <stdint.h>

#include "tools/stackrec/agg.h"

typedef enum stkr_agg_by {
  STKR_BY_SITE = 0, /* no breakdown: the sites themselves */
  STKR_BY_THREAD,   /* needs an agg built with by_thread */
  STKR_BY_PROCESS,  /* ... with by_process */
  STKR_BY_PAYLOAD,  /* ... with by_payload */
  STKR_BY_MODULE
} stkr_agg_by;

/* Their names, by value ("site", "thread", "process", "payload",
 * "module"), NULL-ended: the values of report --by
 * (stkr_cli_choice_parse). */
extern const char *const stkr_agg_by_names[];

/* The aggregation options a breakdown needs (sets the by_* flags). */
void stkr_agg_by_opts(stkr_agg_by by, stkr_agg_opts *o);

/* The module of a stack (see above): a base name inside the agg's strings,
 * or "?". */
const char *stkr_agg_stack_module(const stkr_agg_stack *s);

/* One row: a key's events, stacks and its most frequent site. */
typedef struct stkr_agg_row {
  char *key;             /* printable text, owned by the rows */
  uint64_t count;
  size_t n_stacks;
  size_t n_sites;
  const char *top_site;  /* the site with most of its events */
  uint64_t top_site_count;
} stkr_agg_row;

/* The rows of a by key, most events first (then by key).
 * @return 0, -EINVAL (by is STKR_BY_SITE) or -ENOMEM. Free with
 * stkr_agg_rows_free(). */
int stkr_agg_breakdown(const stkr_agg *a, stkr_agg_by by, stkr_agg_row **rows,
                       size_t *n);
void stkr_agg_rows_free(stkr_agg_row *rows, size_t n);

#endif /* STKR_BREAKDOWN_H */
