/*
 * report.h: what report.c shares with report_tree.c (the --tree view).
 * Private to the `report` command.
 */
#ifndef STKR_REPORT_H
#define STKR_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/breakdown.h"

typedef enum { SORT_EVENTS, SORT_STACKS, SORT_NAME } sort_key;

typedef struct report_opts {
  stkr_agg_opts agg;
  bool timeline;
  sort_key sort;
  stkr_agg_by by;
  bool tree;
  size_t top;
  const char *html;
} report_opts;

/* Output helpers (report.c), all to stdout. */
void stkr__report_put_str(const char *s);         /* escaped */
void stkr__report_put_events(uint64_t n);         /* "N event(s)" */
double stkr__report_pct(uint64_t part, uint64_t whole);
/* One frame: FUNCTION (FILE:LINE), IMAGE+0xOFF or 0xPC; file and line
 * only if show_file / show_line; show_addr (--granularity address): a
 * named frame's [IMAGE+0xOFF] too. */
void stkr__report_put_frame(const stkr_frame *f, bool show_file,
                            bool show_line, bool inlined, bool show_addr);

/* --tree: a caller->callee tree of the site's stacks (report_tree.c).
 * @return 0 or -ENOMEM. */
int stkr__report_tree(const stkr_agg_site *s, const report_opts *o, int ind);

#endif /* STKR_REPORT_H */
