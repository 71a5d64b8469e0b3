/*
 * agg_stacks.h: what makes two merged stacks one (content hash and
 * comparison at a granularity) and the final order of stacks and sites.
 * Split out of agg.c, which builds the aggregation with them. Private to
 * //tools:stackrec_lib.
 *
 * Strings in frames and stacks are interned (strtab.h): equal text, equal
 * pointer, which the comparisons use as a shortcut.
 *
 * Thread-safety: none (pure functions, except group_sites on its agg).
 */
#ifndef STKR_AGG_STACKS_H
#define STKR_AGG_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/agg_runs.h"
#include "tools/stackrec/strtab.h"

/* What, besides site, thread and frames, keeps stacks apart: the process
 * (by_process) and the payload (by_payload). */
typedef struct stkr__agg_extra {
  uint32_t pid;
  const char *process;
  const char *process_dir; /* interned; see stkr_agg_stack.process_dir */
  const uint8_t *payload;
  size_t payload_len;
  bool payload_truncated;
} stkr__agg_extra;

/* @return whether stack s has the extra key k. */
bool stkr__agg_extra_equal(const stkr_agg_stack *s, const stkr__agg_extra *k);

/* The content hash of a stack (site, thread or NULL, extra key, the n
 * frames f at granularity g): equal content, equal hash. */
uint64_t stkr__agg_content_hash(const char *site, const char *thread,
                                const stkr__agg_extra *x, const stkr_frame *f,
                                size_t n, stkr_agg_granularity g);

/* Compare two frame lists at granularity g, frame by frame from the
 * innermost (as stored). @return <0, 0, >0. */
int stkr__agg_cmp_frames(const stkr_frame *x, size_t nx, const stkr_frame *y,
                         size_t ny, stkr_agg_granularity g);

/* Fold the n frames of another occurrence into keep (same content): a
 * file, line or column that differs is dropped. */
void stkr__agg_reconcile(stkr_frame *keep, const stkr_frame *other, size_t n);

/* @return whether stkr__agg_reconcile(keep, other, n) would change keep. */
bool stkr__agg_reconcile_needed(const stkr_frame *keep,
                                const stkr_frame *other, size_t n);

/* Group a->stacks by site into a->sites, each site's stacks in a total
 * order, the sites most events first. @return 0 or -ENOMEM. */
int stkr__agg_group_sites(stkr_agg *a);

/* The totals over r's processes (drops, losses, live and cut ones) and
 * the events of bare stacks into a; marks' times from their process
 * tree's start (agg_runs.h), else their process's. After the last event. */
void stkr__agg_sum_processes(stkr_agg *a, const stkr_reader *r,
                             stkr__agg_runs *runs);
/* Where process i's times count from: its first stkr_init (the Header's
 * start), else its first event. */
uint64_t stkr__agg_process_origin(const stkr_reader *r, size_t i);
/* by_process: while events are read, a stack's process is the key
 * STKR__AGG_PROC_KEY followed by the reader index in decimal; once every
 * event is read, its final name (stkr_process_info.process_name, the
 * chain of an exec'd process). @return 0 or -ENOMEM. */
#define STKR__AGG_PROC_KEY '\x01'
int stkr__agg_name_processes(stkr_agg *a, const stkr_reader *r,
                             stkr__strtab *strs);

/* Set a->n_distinct: a->stacks counted by site and frames at
 * a->granularity alone (copies kept apart by thread, process or payload
 * count once). @return 0 or -ENOMEM. */
int stkr__agg_count_distinct(stkr_agg *a);

#endif /* STKR_AGG_STACKS_H */
