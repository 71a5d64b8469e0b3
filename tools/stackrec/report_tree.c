/*
 * report_tree.c: `stackrec report --tree`: each site's stacks as a
 * caller -> callee tree, outermost frame first, each node with its events
 * and share of the site. Nodes are frames at the report's granularity (a
 * function at two lines is two nodes by default, as in the stack lists);
 * the events whose stacks end at a node that has callees are a "(here)"
 * line under it, so that every event of a node is shown somewhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"

#include "tools/stackrec/report.h"

/* ---- tree: caller -> callee ------------------------------------------------ */

/* Frames of k in the tree: a stack the walk cut short has
 * stkr_agg_cut_frame above its outermost kept frame (QA, session 27: that
 * frame was drawn as a root, beside _start). */
static size_t tree_depth(const stkr_agg_stack *k) {
  return k->n_frames + (k->truncated && k->n_frames > 0);
}

/* Frame d of k counted from the outermost, or NULL past its end. */
static const stkr_frame *root_at(const stkr_agg_stack *k, size_t d) {
  size_t n = tree_depth(k);

  if (d >= n)
    return NULL;
  if (n > k->n_frames && d == 0)
    return &stkr_agg_cut_frame;
  return &k->frames[n - 1 - d];
}

/* The granularity of the tree being sorted (qsort has no argument). */
static stkr_agg_granularity g_gran;

/* Frame d of x against frame d of y at granularity g (a missing frame
 * first): the order of the tree's nodes. */
static int cmp_label_at(const stkr_agg_stack *x, const stkr_agg_stack *y,
                        size_t d, stkr_agg_granularity g) {
  const stkr_frame *fx = root_at(x, d), *fy = root_at(y, d);
  char lx[1024], ly[1024];

  if (fx == NULL || fy == NULL)
    return (fx != NULL) - (fy != NULL);
  if (g == STKR_AGG_BY_FUNCTION && fx->function != NULL &&
      fy->function != NULL)
    return fx->function == fy->function ? 0 /* interned by agg.c */
                                        : strcmp(fx->function, fy->function);
  return strcmp(stkr_agg_frame_text(fx, g, lx, sizeof lx),
                stkr_agg_frame_text(fy, g, ly, sizeof ly));
}

/* Root-first, frame by frame: equal call paths become neighbours. */
static int cmp_root_first(const void *pa, const void *pb) {
  const stkr_agg_stack *x = *(const stkr_agg_stack *const *)pa;
  const stkr_agg_stack *y = *(const stkr_agg_stack *const *)pb;
  size_t d;
  int c;

  for (d = 0; d < tree_depth(x) || d < tree_depth(y); d++)
    if ((c = cmp_label_at(x, y, d, g_gran)) != 0)
      return c;
  return 0;
}

typedef struct tgroup {
  size_t lo, hi; /* range of the sorted stacks */
  uint64_t count;
} tgroup;

static int group_order(const void *pa, const void *pb) {
  const tgroup *x = pa, *y = pb;

  /* The most events first, then label order. */
  return stkr_cmp_u64_pair(y->count, x->count, x->lo, y->lo);
}

typedef struct tctx {
  const stkr_agg_stack **v;
  uint64_t site_count;
  int width; /* digits of site_count */
  int ind;
  size_t top;
  stkr_agg_granularity gran;
} tctx;

/* The nodes at depth d for stacks [lo, hi) (which share frames 0..d-1).
 * @return 0 or -ENOMEM. */
static int tree_level(const tctx *t, size_t lo, size_t hi, size_t d) {
  tgroup *g;
  size_t ng = 0, i, j, shown;
  uint64_t rest = 0, here = 0;
  int err = 0;

  g = malloc((hi - lo) * sizeof *g);
  if (g == NULL)
    return -ENOMEM;
  for (i = lo; i < hi; i = j) {
    for (j = i + 1;
         j < hi && cmp_label_at(t->v[i], t->v[j], d, t->gran) == 0; j++)
      ;
    if (root_at(t->v[i], d) == NULL && d > 0) {
      for (; i < j; i++) /* stacks that end at the parent: its "(here)" */
        here += t->v[i]->count;
      continue;
    }
    g[ng].lo = i;
    g[ng].hi = j;
    g[ng].count = 0;
    for (; i < j; i++)
      g[ng].count += t->v[i]->count;
    ng++;
  }
  qsort(g, ng, sizeof *g, group_order);
  shown = t->top && ng > t->top ? t->top : ng;
  for (i = 0; i < shown && err == 0; i++) {
    const stkr_frame *f = root_at(t->v[g[i].lo], d);
    bool same_file = true, same_line = true, inlined = true;

    printf("%*s%7.2f%%  %*llu  %*s", t->ind, "", stkr__report_pct(g[i].count, t->site_count),
           t->width, (unsigned long long)g[i].count, (int)(2 * d), "");
    if (f == NULL) {
      fputs("(no stack)\n", stdout);
      continue;
    }
    /* File and line only where every stack of the node agrees. */
    for (j = g[i].lo; j < g[i].hi; j++) {
      const stkr_frame *o = root_at(t->v[j], d);
      same_file = same_file && o->file == f->file;
      same_line = same_line && o->line == f->line;
      inlined = inlined && o->inlined;
    }
    stkr__report_put_frame(f, same_file, same_line, inlined,
                           t->gran == STKR_AGG_BY_ADDRESS);
    putchar('\n');
    err = tree_level(t, g[i].lo, g[i].hi, d + 1);
  }
  for (i = shown; i < ng; i++)
    rest += g[i].count;
  if (shown < ng && err == 0) {
    printf("%*s%7.2f%%  %*llu  %*s... %zu more\n", t->ind, "",
           stkr__report_pct(rest, t->site_count), t->width, (unsigned long long)rest,
           (int)(2 * d), "", ng - shown);
  }
  /* The parent's own calls, beside its callees (a leaf's are all its). */
  if (here != 0 && ng != 0 && err == 0)
    printf("%*s%7.2f%%  %*llu  %*s(here)\n", t->ind, "",
           stkr__report_pct(here, t->site_count), t->width,
           (unsigned long long)here, (int)(2 * d), "");
  free(g);
  return err;
}

int stkr__report_tree(const stkr_agg_site *s, const report_opts *o, int ind) {
  tctx t;
  char digits[32];
  int err;

  if (s->n_stacks == 0)
    return 0;
  t.v = malloc(s->n_stacks * sizeof *t.v);
  if (t.v == NULL)
    return -ENOMEM;
  memcpy(t.v, s->stacks, s->n_stacks * sizeof *t.v);
  g_gran = o->agg.granularity;
  qsort(t.v, s->n_stacks, sizeof *t.v, cmp_root_first);
  t.site_count = s->count;
  t.width = snprintf(digits, sizeof digits, "%llu",
                     (unsigned long long)s->count);
  t.ind = ind;
  t.top = o->top;
  t.gran = o->agg.granularity;
  err = tree_level(&t, 0, s->n_stacks, 0);
  free(t.v);
  return err;
}

/* ---- sites and categories --------------------------------------------------- */

