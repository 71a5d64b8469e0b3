/*
 * compliance_finish.c: the end of `stackrec compliance`'s read
 * (compliance_builder.h): each group's and rule's rates closed, each
 * group's example stack picked, the groups sorted (site, then events,
 * then module) and the findings listed by rule.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "tools/stackrec/compliance_builder.h"

static const stkr_comp_group *g_sort_groups; /* for the qsort below */

static int group_order(const void *pa, const void *pb) {
  const stkr_comp_group *x = &g_sort_groups[*(const size_t *)pa];
  const stkr_comp_group *y = &g_sort_groups[*(const size_t *)pb];
  int c = strcmp(x->site, y->site);

  if (c == 0) c = stkr_cmp_u64(y->count, x->count);
  return c != 0 ? c : strcmp(x->module, y->module);
}

static bool rule_broken(const stkr_rule *r, const rule_state *s) {
  if (s->count == 0)
    return false;
  if (s->rate == NULL)
    return true;
  return (r->max_per_second >= 0 &&
          (double)s->rate[0].peak > r->max_per_second) ||
         (r->max_per_minute >= 0 &&
          (double)s->rate[1].peak > r->max_per_minute);
}

static double secs(const stkr_comp *c, uint64_t ts) {
  return ts > c->origin_ns ? (double)(ts - c->origin_ns) / 1e9 : 0.0;
}

/* Rates closed, examples picked, groups sorted, findings listed. */
int stkr__comp_finish(builder *b) {
  stkr_comp *c = b->c;
  const stkr_agg *a = c->agg;
  size_t *order = NULL, *rank = NULL, i, r, nf = 0;
  stkr_comp_group *sorted = NULL;
  int err = -ENOMEM;

  for (i = 0; i < a->n_stacks && i < b->stack_group_cap; i++) {
    const long gi = known_group(b, i);
    stkr_comp_group *g;
    if (gi < 0)
      continue;
    g = &c->groups[gi];
    if (g->n_stacks == 0 || a->stacks[i].count > a->stacks[g->example].count)
      g->example = i;
    g->n_stacks++;
  }
  for (i = 0; i < c->n_groups; i++) {
    group_state *gs = &b->gs[i];
    stkr_rate_finish(&gs->per_s);
    stkr_rate_finish(&gs->per_min);
    c->groups[i].peak_per_second = gs->per_s.peak;
    c->groups[i].peak_per_minute = gs->per_min.peak;
    c->groups[i].late = gs->per_s.late;
    c->groups[i].first_s = secs(c, c->groups[i].first_ts);
    c->groups[i].last_s = secs(c, c->groups[i].last_ts);
    for (r = 0; r < b->n_rules; r++) {
      rule_state *s = &b->rs[i * b->n_rules + r];
      if (s->rate != NULL) {
        stkr_rate_finish(&s->rate[0]);
        stkr_rate_finish(&s->rate[1]);
      }
    }
  }
  if (c->n_groups == 0)
    return 0;
  order = malloc(c->n_groups * sizeof *order);
  rank = malloc(c->n_groups * sizeof *rank);
  sorted = malloc(c->n_groups * sizeof *sorted);
  if (b->n_rules > 0 &&
      (c->findings = calloc(c->n_groups * b->n_rules, sizeof *c->findings)) ==
          NULL)
    goto out;
  if (order == NULL || rank == NULL || sorted == NULL)
    goto out;
  for (i = 0; i < c->n_groups; i++)
    order[i] = i;
  g_sort_groups = c->groups;
  qsort(order, c->n_groups, sizeof *order, group_order);
  for (i = 0; i < c->n_groups; i++) {
    sorted[i] = c->groups[order[i]];
    rank[order[i]] = i;
  }
  memcpy(c->groups, sorted, c->n_groups * sizeof *sorted);
  /* Findings by rule, then in group order. */
  for (r = 0; r < b->n_rules; r++) {
    const stkr_rule *rule = &b->o->policy->rules[r];
    for (i = 0; i < c->n_groups; i++) {
      const size_t gi = order[i];
      const rule_state *s = &b->rs[gi * b->n_rules + r];
      stkr_comp_finding *f;

      if (b->gs[gi].rules & (1ull << r))
        c->rule_groups[r]++;
      if (!rule_broken(rule, s)) {
        if (s->rate != NULL) { /* a peak it could not see in full */
          uint64_t ls = rule->max_per_second >= 0 ? s->rate[0].late : 0;
          uint64_t lm = rule->max_per_minute >= 0 ? s->rate[1].late : 0;
          c->rule_late[r] += ls > lm ? ls : lm;
        }
        continue;
      }
      f = &c->findings[nf++];
      f->rule = rule;
      f->group = rank[gi];
      f->count = s->count;
      f->first_ts = s->first_ts;
      f->first_s = secs(c, s->first_ts);
      f->stack = s->stack;
      if (s->rate != NULL) {
        f->peak_per_second = s->rate[0].peak;
        f->peak_per_minute = s->rate[1].peak;
      }
    }
  }
  c->n_findings = nf;
  err = 0;
out:
  free(order);
  free(rank);
  free(sorted);
  return err;
}
