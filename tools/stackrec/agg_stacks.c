/*
 * agg_stacks.c: the content of a merged stack (hash, comparison at a
 * granularity, reconciling occurrences), the final order of stacks and
 * sites, and the totals (see agg_stacks.h; agg.c builds the aggregation
 * with them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/agg_stacks.h"
#include "tools/stackrec/cli.h" /* stkr_cli_cap_deleted */

/* ---- content: hash and comparison ----------------------------------------- */

/* What identifies a frame beyond its label at granularity g, as a number
 * (strings are interned: equal text, equal pointer). */
static uint64_t frame_extra(const stkr_frame *f, stkr_agg_granularity g) {
  uint64_t h = 0;

  if (f->function == NULL || g == STKR_AGG_BY_FUNCTION)
    return 0;
  if (f->file != NULL && f->line != 0)
    h = stkr_mix64((uint64_t)(uintptr_t)f->file ^ (uint64_t)f->line << 40);
  if (g == STKR_AGG_BY_ADDRESS)
    h ^= stkr_mix64(f->image != NULL ? (uint64_t)(uintptr_t)f->image ^ f->offset
                                : f->pc);
  return h;
}

/* A frame's label, in order: bare PCs by value (their labels, "0x...",
 * come first as text too), then named frames by name, then frames placed
 * in an image by (image base name, offset). Equal
 * exactly when the labels are (stkr_agg_frame_label), without formatting
 * any: sorting a million stacks formatted labels tens of millions of
 * times (QA, session 27: most of report's time on an offline recording).
 * The kinds are ranked rather than their texts compared, so the order
 * stays total and transitive even for a function named like an
 * image+offset label (qsort requires it). */
static int frame_kind(const stkr_frame *f) {
  return f->function != NULL ? 1 : f->image != NULL ? 2 : 0;
}

static const char *image_base(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

static int cmp_label(const stkr_frame *x, const stkr_frame *y) {
  int kx = frame_kind(x), ky = frame_kind(y), c;

  if (kx != ky)
    return kx < ky ? -1 : 1;
  switch (kx) {
  case 1: /* interned: same pointer, same name */
    return x->function == y->function ? 0 : strcmp(x->function, y->function);
  case 2:
    if (x->image != y->image &&
        (c = strcmp(image_base(x->image), image_base(y->image))) != 0)
      return c;
    return stkr_cmp_u64(x->offset, y->offset);
  default:
    return stkr_cmp_u64(x->pc, y->pc);
  }
}

/* Frames equal by cmp_label and cmp_extra hash alike: what identifies a
 * label (its kind and fields), then frame_extra. */
static uint64_t hash_frame(uint64_t h, const stkr_frame *f,
                           stkr_agg_granularity g) {
  uint64_t v[2] = {(uint64_t)frame_kind(f), frame_extra(f, g)};
  const char *s = f->function;

  if (f->function == NULL && f->image != NULL)
    s = image_base(f->image);
  if (s != NULL)
    h = stkr_hash_bytes(h, s, strlen(s) + 1);
  else
    v[0] ^= stkr_mix64(f->pc) << 2;
  if (f->function == NULL && f->image != NULL)
    v[0] ^= stkr_mix64(f->offset) << 2;
  return stkr_hash_bytes(h, v, sizeof v);
}

bool stkr__agg_extra_equal(const stkr_agg_stack *s, const stkr__agg_extra *k) {
  return s->pid == k->pid && s->process == k->process &&
         s->process_dir == k->process_dir &&
         s->payload_len == k->payload_len &&
         s->payload_truncated == k->payload_truncated &&
         (k->payload_len == 0 ||
          memcmp(s->payload, k->payload, k->payload_len) == 0);
}

uint64_t stkr__agg_content_hash(const char *site, const char *thread,
                                const stkr__agg_extra *x, const stkr_frame *f,
                                size_t n, stkr_agg_granularity g) {
  uint64_t h = STKR_HASH_SEED;
  size_t i;

  h = stkr_hash_bytes(h, site, strlen(site) + 1);
  if (thread != NULL)
    h = stkr_hash_bytes(h, thread, strlen(thread) + 1);
  h = stkr_hash_bytes(h, &x->pid, sizeof x->pid);
  if (x->process_dir != NULL)
    h = stkr_hash_bytes(h, x->process_dir, strlen(x->process_dir) + 1);
  if (x->payload_len > 0)
    h = stkr_hash_bytes(h, x->payload, x->payload_len);
  for (i = 0; i < n; i++)
    h = hash_frame(h, &f[i], g);
  return stkr_mix64(h);
}

/* Compare one frame beyond its label: file and line at line granularity,
 * also image and offset at address granularity. */
static int cmp_extra(const stkr_frame *x, const stkr_frame *y,
                     stkr_agg_granularity g) {
  int c;

  if (g == STKR_AGG_BY_FUNCTION)
    return 0;
  if (x->file != y->file &&
      (c = strcmp(x->file ? x->file : "", y->file ? y->file : "")) != 0)
    return c;
  if ((c = stkr_cmp_u64(x->line, y->line)) != 0 || g != STKR_AGG_BY_ADDRESS)
    return c;
  if (x->image != y->image &&
      (c = strcmp(x->image ? x->image : "", y->image ? y->image : "")) != 0)
    return c;
  return stkr_cmp_u64(x->image ? x->offset : x->pc,
                      y->image ? y->offset : y->pc);
}

int stkr__agg_cmp_frames(const stkr_frame *x, size_t nx, const stkr_frame *y,
                         size_t ny, stkr_agg_granularity g) {
  size_t i;
  int c;

  for (i = 0; i < nx && i < ny; i++) {
    if ((c = cmp_label(&x[i], &y[i])) != 0)
      return c;
    /* An unnamed frame's label is its address already. */
    if (x[i].function != NULL && (c = cmp_extra(&x[i], &y[i], g)) != 0)
      return c;
  }
  return nx < ny ? -1 : nx > ny;
}

/* Occurrences merged into one stack may place a frame's function at other
 * lines (another call site in it, another build): never show a line that
 * is not true of every event. */
static void reconcile_one(stkr_frame *keep, const stkr_frame *other) {
  if (keep->file != other->file) {
    keep->file = NULL;
    keep->line = keep->column = 0;
  } else if (keep->line != other->line) {
    keep->line = keep->column = 0;
  } else if (keep->column != other->column) {
    keep->column = 0;
  }
  keep->inlined = keep->inlined && other->inlined;
  keep->is_app = keep->is_app || other->is_app;
}

bool stkr__agg_reconcile_needed(const stkr_frame *keep,
                                const stkr_frame *other, size_t n) {
  size_t i;

  for (i = 0; i < n; i++) {
    stkr_frame t = keep[i];
    reconcile_one(&t, &other[i]);
    if (t.file != keep[i].file || t.line != keep[i].line ||
        t.column != keep[i].column || t.inlined != keep[i].inlined ||
        t.is_app != keep[i].is_app)
      return true;
  }
  return false;
}

void stkr__agg_reconcile(stkr_frame *keep, const stkr_frame *other, size_t n) {
  size_t i;

  for (i = 0; i < n; i++)
    reconcile_one(&keep[i], &other[i]);
}

/* ---- the end: sites, in order ------------------------------------------- */

/* Site name, then most events first, then content: a total order, so the
 * output does not depend on qsort or on hash order. */
static int stack_order(const void *pa, const void *pb) {
  const stkr_agg_stack *x = *(const stkr_agg_stack *const *)pa;
  const stkr_agg_stack *y = *(const stkr_agg_stack *const *)pb;
  int c;

  if (x->site != y->site && (c = strcmp(x->site, y->site)) != 0)
    return c;
  if ((c = stkr_cmp_u64(y->count, x->count)) != 0)
    return c;
  if (x->thread != y->thread &&
      (c = strcmp(x->thread ? x->thread : "", y->thread ? y->thread : "")))
    return c;
  /* The finest comparison: a total order whatever the granularity. */
  if ((c = stkr__agg_cmp_frames(x->frames, x->n_frames, y->frames, y->n_frames,
                      STKR_AGG_BY_ADDRESS)) != 0)
    return c;
  return stkr_cmp_u64(x->tid, y->tid);
}

static int site_order(const void *pa, const void *pb) {
  const stkr_agg_site *x = pa, *y = pb;
  int c = stkr_cmp_u64(y->count, x->count);

  return c != 0 ? c : strcmp(x->name, y->name);
}

int stkr__agg_group_sites(stkr_agg *a) {
  const stkr_agg_stack **all;
  size_t i, j, k = 0, cap = 0;

  if (a->n_stacks == 0)
    return 0;
  all = malloc(a->n_stacks * sizeof *all);
  if (all == NULL)
    return -ENOMEM;
  for (i = 0; i < a->n_stacks; i++)
    all[i] = &a->stacks[i];
  qsort(all, a->n_stacks, sizeof *all, stack_order);
  for (i = 0; i < a->n_stacks; i = j) {
    stkr_agg_site *s;

    for (j = i + 1; j < a->n_stacks && all[j]->site == all[i]->site; j++)
      ;
    if (stkr_grow((void **)&a->sites, &cap, k + 1, sizeof *a->sites) != 0)
      goto nomem;
    s = &a->sites[k];
    memset(s, 0, sizeof *s);
    a->n_sites = ++k;
    s->name = all[i]->site;
    s->stacks = malloc((j - i) * sizeof *s->stacks);
    if (s->stacks == NULL)
      goto nomem;
    memcpy(s->stacks, all + i, (j - i) * sizeof *s->stacks);
    s->n_stacks = j - i;
    for (; i < j; i++)
      s->count += all[i]->count;
  }
  free(all);
  qsort(a->sites, a->n_sites, sizeof *a->sites, site_order);
  return 0;
nomem:
  free(all);
  return -ENOMEM;
}

/* ---- the totals: drops and losses over the processes, bare stacks -------- */

uint64_t stkr__agg_process_origin(const stkr_reader *r, size_t i) {
  const stkr_process_info *p = stkr_reader_process(r, i);
  return p == NULL                                 ? 0
         : p->have_header && p->start_mono_ns != 0 ? p->start_mono_ns
                                                   : p->first_ts_ns;
}

int stkr__agg_name_processes(stkr_agg *a, const stkr_reader *r,
                             stkr__strtab *strs) {
  for (size_t i = 0; i < a->n_stacks; i++) {
    stkr_agg_stack *s = &a->stacks[i];
    const stkr_process_info *p;
    if (s->process == NULL || s->process[0] != STKR__AGG_PROC_KEY)
      continue;
    p = stkr_reader_process(r, (size_t)strtoull(s->process + 1, NULL, 10));
    if ((s->process = stkr__strtab_intern(
             strs, p != NULL && p->process_name ? p->process_name : "")) ==
        NULL)
      return -ENOMEM;
  }
  return 0;
}

void stkr__agg_sum_processes(stkr_agg *a, const stkr_reader *r,
                             stkr__agg_runs *runs) {
  size_t i;

  for (i = 0; i < a->n_marks; i++) { /* on the timelines' line */
    stkr_agg_mark *k = &a->marks[i];
    uint64_t origin = stkr__agg_process_origin(r, k->process);
    if (!stkr__agg_runs_offset(runs, k->process, NULL, k->ts_ns, &k->t_ns))
      k->t_ns = k->ts_ns > origin ? k->ts_ns - origin : 0;
  }

  a->n_processes = stkr_reader_process_count(r);
  for (i = 0; i < a->n_processes; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    a->drops += p->drops;
    a->drops_ring_full += p->drops_ring_full;
    a->drops_reentrant += p->drops_reentrant;
    a->drops_other += p->drops_other;
    a->drops_write_error += p->drops_write_error;
    a->drops_exit += p->drops_exit;
    a->damaged_batches += p->damaged_batches;
    a->misnamed_segments += p->misnamed_segments;
    a->missing_batches += p->missing_batches;
    a->segments_deleted += stkr_cli_cap_deleted(p);
    a->cap_deleted_events += p->cap_deleted_events;
    a->unresolved_events += p->unresolved_events;
    a->live_processes += p->live_tail && p->live_sessions > 0;
    a->cut_processes += p->live_tail && p->live_sessions == 0;
    a->unsupported_processes += p->status != 0;
  }
  for (i = 0; i < a->n_stacks; i++)
    if (a->stacks[i].bare) {
      a->bare_events += a->stacks[i].count;
      a->bare_stacks++;
    }
}

/* ---- the count of distinct stacks ----------------------------------------- */

/* A stack with its content hash (site and frames only) and the
 * granularity to compare at, so that qsort needs no other context. */
typedef struct by_content {
  uint64_t h;
  const stkr_agg_stack *s;
  stkr_agg_granularity g;
} by_content;

/* Hash, then site, then frames: equal content sorts together, even when
 * two contents share a hash. */
static int content_order(const void *pa, const void *pb) {
  const by_content *x = pa, *y = pb;
  int c;

  if ((c = stkr_cmp_u64(x->h, y->h)) != 0)
    return c;
  if (x->s->site != y->s->site && (c = strcmp(x->s->site, y->s->site)) != 0)
    return c;
  return stkr__agg_cmp_frames(x->s->frames, x->s->n_frames, y->s->frames,
                              y->s->n_frames, x->g);
}

int stkr__agg_count_distinct(stkr_agg *a) {
  static const stkr__agg_extra none;
  by_content *v;
  size_t i, n = 0;

  for (i = 0; i < a->n_stacks; i++) {
    const stkr_agg_stack *s = &a->stacks[i];
    if (s->thread != NULL || s->process != NULL || s->pid != 0 ||
        s->process_dir != NULL ||
        s->payload_len != 0 || s->payload_truncated)
      break;
  }
  if (i == a->n_stacks) { /* nothing kept copies apart */
    a->n_distinct = a->n_stacks;
    return 0;
  }
  if ((v = malloc(a->n_stacks * sizeof *v)) == NULL)
    return -ENOMEM;
  for (i = 0; i < a->n_stacks; i++) {
    const stkr_agg_stack *s = &a->stacks[i];
    v[i].h = stkr__agg_content_hash(s->site, NULL, &none, s->frames,
                                    s->n_frames, a->granularity);
    v[i].s = s;
    v[i].g = a->granularity;
  }
  qsort(v, a->n_stacks, sizeof *v, content_order);
  for (i = 0; i < a->n_stacks; i++)
    n += i == 0 || content_order(&v[i - 1], &v[i]) != 0;
  free(v);
  a->n_distinct = n;
  return 0;
}
