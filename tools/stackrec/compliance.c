/*
 * compliance.c: the per-event statistics of `stackrec compliance`
 * (compliance.h), kept through the aggregation's on_event hook.
 *
 * Per event: the merged stack's index leads to its (site, module) group
 * through an array (the module is computed once per distinct stack);
 * the group's counters and rate windows are updated, and each rule that
 * selects the group (a bit mask, computed once per group) tests its
 * conditions. Marks go to the states tracker of the process being read
 * (states.h, reset at each new process, then given the marks a forked
 * child inherited: inherit.h); events of a process without marks skip
 * the state queries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "tools/stackrec/boots.h"
#include "tools/stackrec/compliance_builder.h"
#include "tools/stackrec/rate.h"

/* ---- groups ------------------------------------------------------------------ */

/* Finished by the index (stkr_index mixes every hash). */
static uint64_t group_hash(const char *site, const char *module) {
  return stkr_hash_bytes((uint64_t)(uintptr_t)site, module, strlen(module));
}

/* A new group: its arrays grown, its rules matched, indexed under hash h
 * (room reserved by the caller). */
static int group_add(builder *b, const char *site, const char *module,
                     uint64_t h) {
  stkr_comp *c = b->c;
  size_t gi = c->n_groups, cap = b->group_cap, r;
  group_state *g;

  if (gi + 1 > cap) {
    size_t ncap = cap;
    void *p;
    if (stkr_grow((void **)&c->groups, &ncap, gi + 1, sizeof *c->groups) != 0)
      return -ENOMEM;
    if ((p = realloc(b->gs, ncap * sizeof *b->gs)) == NULL)
      return -ENOMEM;
    b->gs = p;
    if (b->n_rules > 0) {
      if ((p = realloc(b->rs, ncap * b->n_rules * sizeof *b->rs)) == NULL)
        return -ENOMEM;
      b->rs = p;
    }
    b->group_cap = ncap;
  }
  memset(&c->groups[gi], 0, sizeof c->groups[gi]);
  c->groups[gi].site = site;
  c->groups[gi].module = module;
  g = &b->gs[gi];
  memset(g, 0, sizeof *g);
  stkr_rate_init(&g->per_s, NS_PER_S);
  stkr_rate_init(&g->per_min, 60 * NS_PER_S);
  /* Counted now, so that a failure below frees what was made. */
  (void)stkr_index_add(&b->group_ix, h, gi); /* reserved: cannot fail */
  c->n_groups++;
  for (r = 0; r < b->n_rules; r++)
    memset(&b->rs[gi * b->n_rules + r], 0, sizeof *b->rs);
  for (r = 0; r < b->n_rules; r++) {
    const stkr_rule *rule = &b->o->policy->rules[r];
    rule_state *s = &b->rs[gi * b->n_rules + r];
    if (rule->n_modules > 0 && stkr_rule_matches_site(rule, site))
      g->rules_by_site |= 1ull << r;
    if (!stkr_rule_matches(rule, site, module))
      continue;
    g->rules |= 1ull << r;
    if (stkr_rule_has_rate(rule)) {
      if ((s->rate = malloc(2 * sizeof *s->rate)) == NULL)
        return -ENOMEM;
      stkr_rate_init(&s->rate[0], NS_PER_S);
      stkr_rate_init(&s->rate[1], 60 * NS_PER_S);
    }
  }
  return 0;
}


/* Are all of s's frames (one at least) in system images (STACK_SYSONLY)?
 * A frame in no known image (JIT code) is not one: not "in a library". */
static bool all_system(const stkr_agg_stack *s) {
  for (size_t i = 0; i < s->n_frames; i++)
    if (s->frames[i].image == NULL ||
        !stkr_attrib_system_image(s->frames[i].image))
      return false;
  return s->n_frames > 0;
}

/* The group of agg stack `stack` (made on first sight); *flags: why its
 * module may be a guess (STACK_UNNAMED, STACK_SYSONLY), or 0. */
static long group_of(builder *b, const stkr_agg *a, size_t stack,
                     uint32_t *flags) {
  const stkr_agg_stack *s = &a->stacks[stack];
  const char *module;
  size_t pos, gi;
  uint64_t h;
  int err;

  bool unnamed;

  if ((gi = (size_t)known_group(b, stack)) != (size_t)-1) {
    *flags = b->stack_group[stack] & STACK_FLAGS;
    return (long)gi;
  }
  if (stack >= b->stack_group_cap) {
    size_t old = b->stack_group_cap;
    if (stkr_grow((void **)&b->stack_group, &b->stack_group_cap, stack + 1,
                  sizeof *b->stack_group) != 0)
      return -ENOMEM;
    memset(b->stack_group + old, 0,
           (b->stack_group_cap - old) * sizeof *b->stack_group);
  }
  module = stkr_attrib_module(b->o->modmap, s->frames, s->n_frames, &unnamed);
  /* Only a stack never symbolized: one resolved without a name (a
   * stripped binary, JIT code) would stay so (review, session 34). */
  *flags = (unnamed && s->bare ? STACK_UNNAMED : 0) |
           (all_system(s) ? STACK_SYSONLY : 0);
  if (stkr_index_reserve(&b->group_ix, b->c->n_groups + 1) != 0)
    return -ENOMEM;
  h = group_hash(s->site, module);
  for (gi = stkr_index_first(&b->group_ix, h, &pos); gi != STKR_INDEX_NONE;
       gi = stkr_index_next(&b->group_ix, h, &pos)) {
    const stkr_comp_group *g = &b->c->groups[gi];
    if (g->site == s->site && strcmp(g->module, module) == 0)
      break;
  }
  if (gi == STKR_INDEX_NONE) {
    gi = b->c->n_groups;
    if (gi + 1 >= STACK_SYSONLY)
      return -E2BIG;
    if ((err = group_add(b, s->site, module, h)) != 0)
      return err;
  }
  b->stack_group[stack] = ((uint32_t)gi + 1) | *flags;
  return (long)gi;
}

/* ---- per process ------------------------------------------------------------- */

/* Did the process (or launch) read so far see its consent? Not if every
 * consent.granted it was given came after its clean end: a `stackrec
 * mark` reaches every process of the directory, ended or not (QA, session
 * 41: a forked child that had ended first was counted). Its own and
 * inherited marks come before its end. The end known is its last
 * launch's, on its first launch's clock (stkr_process_info.end_ts_ns);
 * the marks are on the launch's own. */
static bool saw_consent(const builder *b) {
#if HAVE_STATES
  const stkr_process_info *p = stkr_reader_process(b->r, b->cur_process);

  if (b->proc_consent && p != NULL && p->clean_end && p->end_ts_ns != 0 &&
      b->proc_instance >= p->instances && p->instance_shift_ns != INT64_MIN)
    return stkr_states_seen(b->states, STKR_COMP_CONSENT_MARK,
                            stkr_clock_add(p->end_ts_ns,
                                           -p->instance_shift_ns));
#endif
  return b->proc_consent;
}

/* The process (or launch of a pid) read so far is counted. */
static void count_process(builder *b) {
  b->c->consent_processes += b->proc_events && saw_consent(b);
  b->c->unjudged_processes += b->proc_unjudged;
  b->c->head_lost_processes += b->proc_unjudged && b->proc_head_lost;
}

/* The process read so far is done (its marks are all in). */
static int end_process(builder *b) {
  count_process(b);
#if HAVE_STATES
  return stkr_inherit_end(b->inherit);
#else
  return 0;
#endif
}

#if HAVE_STATES
/* The current process's inherited marks, once its Header is read (its
 * `stackrec mark` marks come before: they are in the tracker already). */
static int load_inherited(builder *b, const stkr_process_info *p) {
  stkr_inherit_from from;
  int err;

  if (p == NULL || !p->have_header)
    return 0; /* not yet */
  b->proc_inherit_due = false;
  if ((err = stkr_inherit_load(b->inherit, b->r, b->states, &from)) != 0)
    return err;
  if (from == STKR_INHERIT_NONE)
    return 0;
  b->version++;
  if (from == STKR_INHERIT_UNKNOWN || from == STKR_INHERIT_HEAD_LOST)
    b->proc_head_lost = true;
  if (from == STKR_INHERIT_MARKS_LOST && !b->proc_marks_lost) {
    b->proc_marks_lost = true; /* from its start */
    b->c->marks_lost_processes++;
  }
  b->c->unknown_origin_processes += from == STKR_INHERIT_UNKNOWN;
  b->proc_marks = stkr_states_count(b->states) > 0;
  b->proc_consent =
      b->proc_consent ||
      (b->proc_marks &&
       stkr_states_seen(b->states, STKR_COMP_CONSENT_MARK, UINT64_MAX));
  return 0;
}

static void ext_forget(builder *b) {
  for (size_t i = 0; i < b->n_ext; i++)
    free(b->ext[i].name);
  b->n_ext = 0;
}

static int ext_keep(builder *b, const stkr_event_view *ev) {
  char *name;

  if (stkr_grow((void **)&b->ext, &b->cap_ext, b->n_ext + 1,
                sizeof *b->ext) != 0 ||
      (name = strdup(ev->site)) == NULL)
    return -ENOMEM;
  const stkr_mark_clock *set = stkr_reader_mark_clock(b->r);
  b->ext[b->n_ext++] = (struct ext_mark){
      set ? *set : (stkr_mark_clock){.set_ns = ev->ts_ns}, name};
  return 0;
}
#endif

/* The pid was taken by another process (stkr_process_info.instances;
 * QA, session 33: a restarted container app's events were judged by the
 * marks of the launch before it, "after consent"). Counted as a process
 * of its own; its marks start with the `stackrec mark` ones set after its
 * start, on its clock (QA, session 35: by the first launch's, a consent
 * set after its events came before them). One forked from another is not
 * followed: not judged. */
static int new_instance(builder *b, const stkr_process_info *p) {
  count_process(b);
  b->proc_instance = p->instances;
  b->proc_drops_base = p->marks_dropped; /* the earlier launches' */
  b->proc_marks = b->proc_consent = b->proc_events = false;
  b->proc_head_lost = b->proc_unjudged = b->proc_marks_lost = false;
#if HAVE_STATES
  stkr_states_reset(b->states);
  b->version++;
  b->proc_inherit_due = false;
  if (p->instance_forked_from_pid != 0) {
    b->proc_head_lost = true;
    b->c->unknown_origin_processes++;
  }
  for (size_t i = 0; i < b->n_ext; i++) {
    uint64_t ts;
    if (stkr_boots_mark_at(&b->ext[i].set, p, &ts) &&
        ts >= p->instance_start_mono_ns) {
      int err = stkr_states_mark(b->states, ts, b->ext[i].name);
      if (err != 0)
        return err;
      b->proc_marks = true;
      b->proc_consent |= strcmp(b->ext[i].name, STKR_COMP_CONSENT_MARK) == 0;
    }
  }
#endif
  return 0;
}

static int new_process(builder *b, const stkr_event_view *ev) {
  const stkr_process_info *p = stkr_reader_process(b->r, ev->process);
  int err = end_process(b);

  b->cur_process = ev->process;
  b->proc_marks = b->proc_consent = b->proc_events = false;
  b->proc_head_lost = p != NULL && p->head_lost;
  b->proc_unjudged = b->proc_marks_lost = false;
  b->proc_instance = p != NULL && p->instances > 1 ? p->instances : 1;
  b->proc_drops_base = 0;
#if HAVE_STATES
  ext_forget(b);
  stkr_states_reset(b->states);
  b->version++;
  stkr_inherit_begin(b->inherit, ev->process);
  b->proc_inherit_due = true;
  if (err == 0)
    err = load_inherited(b, p);
#endif
  return err;
}

/* The windows of the last process are closed before another's events
 * (rates are per process). */
static inline void rate_add(stkr_rate *ps, stkr_rate *pm, uint32_t *owner,
                            uint32_t proc, uint64_t ts) {
  if (*owner != proc) {
    stkr_rate_finish(ps);
    stkr_rate_finish(pm);
    *owner = proc;
  }
  stkr_rate_add(ps, ts);
  stkr_rate_add(pm, ts);
}

#if HAVE_STATES
static int on_mark(builder *b, const stkr_event_view *ev) {
  const bool external = stkr_agg_mark_external(ev);
  int err;

  /* A `stackrec mark` mark reaches the process's children by itself. */
  if (external ? (err = ext_keep(b, ev)) != 0
               : (err = stkr_inherit_mark(b->inherit, ev->ts_ns,
                                          ev->site)) != 0)
    return err;
  /* External marks come at the pid's first event, which may be a later
   * launch's (the first one recorded none): that launch has those set
   * after its start only, as new_instance gives them (review, session
   * 35: a consent of the launch before counted for it). None of another
   * boot that cannot be placed (boots.h; review, session 36). */
  const stkr_mark_clock *set = external ? stkr_reader_mark_clock(b->r) : NULL;
  uint64_t at;
  if (external && ev->proc != NULL &&
      ((set != NULL && !stkr_boots_mark_at(set, ev->proc, &at)) ||
       (b->proc_instance > 1 &&
        ev->ts_ns < ev->proc->instance_start_mono_ns)))
    return 0;
  b->version++;
  b->proc_marks = true;
  if (strcmp(ev->site, STKR_COMP_CONSENT_MARK) == 0)
    b->proc_consent = true;
  return stkr_states_mark(b->states, ev->ts_ns, ev->site);
}
#endif

/* Does this event pass rule ri's conditions (before_mark, in_state)?
 * @return 1 yes, 0 no, -1 unknown: a process whose head the disk cap
 * deleted, before its first kept mark of what the rule asks about (the
 * mark it asks about not seen yet; for a state, no mark at all yet); or
 * after a mark it dropped (then a state is never known, and a mark asked
 * about only once seen). */
static int selected(builder *b, size_t ri, const stkr_rule *r, uint64_t ts,
                    const void *snap) {
  const bool lost = b->proc_head_lost || b->proc_marks_lost;
  (void)snap;
  (void)ts;
  (void)ri;
  if (r->before_mark == NULL && r->in_state == NULL)
    return 1;
  /* Before any mark no state is active: not_in_state holds. */
  if (!b->proc_marks)
    return lost ? -1 : r->in_state == NULL || r->not_in_state;
#if HAVE_STATES
  if (r->before_mark != NULL &&
      stkr_states_seen_cached(b->states, b->version, &b->rule_seen[ri],
                              r->before_mark, ts))
    return 0;
  if (lost && r->before_mark != NULL)
    return -1; /* not seen in what is left: maybe in what went */
  if (b->proc_marks_lost && r->in_state != NULL)
    return -1; /* the dropped mark may have started or ended it */
  /* Nor whether it was in the state before a mark of that state's row
   * (its start may have gone with the head; review, session 31: judged
   * "not in state", the rule passed). */
  if (b->proc_head_lost && r->in_state != NULL &&
      !stkr_states_row_seen(b->states, r->in_state, ts))
    return -1;
  if (r->in_state != NULL &&
      stkr_state_snap_in_cached(snap, b->version, &b->rule_in[ri],
                                r->in_state) == r->not_in_state)
    return 0;
  return 1;
#else
  return r->in_state == NULL || r->not_in_state;
#endif
}

static int on_event(void *arg, const stkr_agg *a, const stkr_event_view *ev,
                    size_t stack) {
  builder *b = arg;
  const uint32_t proc = (uint32_t)ev->process + 1;
  const uint64_t ts = ev->ts_ns;
  const uint64_t at = stkr_boots_place(&b->boots, ev->process, ev->proc, ts);
  const void *snap = NULL;
  stkr_comp_group *g;
  group_state *gs;
  uint64_t rules;
  uint32_t guess;
  bool unjudged;
  long gi;

  if (ev->process != b->cur_process && (gi = new_process(b, ev)) != 0)
    return (int)gi;
  if (ev->proc != NULL && ev->proc->instances > b->proc_instance &&
      (gi = new_instance(b, ev->proc)) != 0)
    return (int)gi;
  /* Its first batches found lost once the first one left is read, after
   * the marks `stackrec mark` gave it (stkr_process_info.head_lost). */
  if (ev->proc != NULL && ev->proc->head_lost && ev->proc->instances <= 1)
    b->proc_head_lost = true;
#if HAVE_STATES
  if (b->proc_inherit_due && (gi = load_inherited(b, ev->proc)) != 0)
    return (int)gi;
  if (stack == STKR_AGG_MARK)
    return on_mark(b, ev);
#endif
  if ((gi = group_of(b, a, stack, &guess)) < 0)
    return (int)gi;
  g = &b->c->groups[gi];
  gs = &b->gs[gi];
  if (!b->proc_events) {
    b->proc_events = true;
    b->c->processes_with_events++;
  }
  if (g->count == 0 || at < g->first_ts)
    g->first_ts = at;
  if (g->count == 0 || at > g->last_ts)
    g->last_ts = at;
  g->count++;
  if (gs->last_proc != proc) {
    gs->last_proc = proc;
    g->n_pids++;
  }
  rate_add(&gs->per_s, &gs->per_min, &gs->rate_proc, proc, ts);
  if (guess & STACK_UNNAMED) {
    b->c->unnamed++;
    for (rules = gs->rules_by_site; rules != 0; rules &= rules - 1)
      b->c->rule_unnamed[__builtin_ctzll(rules)]++;
  }
  if ((guess & STACK_SYSONLY) && ev->stack_truncated) {
    /* A rule whose modules took the group judged it; the others may have
     * missed their own module's call. */
    b->c->cut++;
    for (rules = gs->rules_by_site & ~gs->rules; rules != 0;
         rules &= rules - 1)
      b->c->rule_cut[__builtin_ctzll(rules)]++;
  }
  /* Before consent is unknown too in a process whose head went, until its
   * consent.granted is seen in what is left; and after a dropped mark,
   * until then, as the background is. */
  if (ev->proc != NULL && ev->proc->marks_dropped > b->proc_drops_base &&
      !b->proc_marks_lost) {
    b->proc_marks_lost = true;
    b->c->marks_lost_processes++;
  }
  unjudged = b->proc_head_lost && !b->proc_consent;
  if (!b->proc_marks) {
    g->before_consent += !b->proc_head_lost && !b->proc_marks_lost;
    unjudged |= b->proc_marks_lost;
  } else {
#if HAVE_STATES
    snap = stkr_states_at(b->states, ts);
    const bool after = stkr_states_seen_cached(
        b->states, b->version, &b->consent, STKR_COMP_CONSENT_MARK, ts);
    g->before_consent += !after && !b->proc_head_lost && !b->proc_marks_lost;
    if (b->proc_marks_lost)
      unjudged = true; /* its background, at least, is not known */
    else
      g->background += stkr_state_snap_in_cached(
          snap, b->version, &b->background, STKR_COMP_BACKGROUND_STATE);
#endif
  }
  for (rules = gs->rules; rules != 0; rules &= rules - 1) {
    const size_t r = (size_t)__builtin_ctzll(rules);
    const stkr_rule *rule = &b->o->policy->rules[r];
    rule_state *rs = &b->rs[(size_t)gi * b->n_rules + r];

    int sel = selected(b, r, rule, ts, snap);
    if (sel < 0) {
      unjudged = true;
      b->c->rule_unjudged[r]++;
      continue;
    }
    if (sel == 0)
      continue;
    if (rs->count == 0 || at < rs->first_ts) {
      rs->first_ts = at;
      rs->stack = stack;
    }
    rs->count++;
    if (rs->rate != NULL)
      rate_add(&rs->rate[0], &rs->rate[1], &rs->rate_proc, proc, ts);
  }
  if (unjudged) {
    b->c->unjudged++;
    b->proc_unjudged = true;
  }
  return 0;
}

int stkr_comp_build(stkr_reader *r, const stkr_comp_opts *o,
                    void (*progress)(uint64_t events, void *arg),
                    void *progress_arg, stkr_comp **out) {
  stkr_agg_opts ao;
  builder b;
  int err;

  *out = NULL;
  memset(&b, 0, sizeof b);
  b.o = o;
  b.r = r;
  b.cur_process = SIZE_MAX;
  b.n_rules = o->policy != NULL ? o->policy->n_rules : 0;
  if (b.n_rules > STKR_POLICY_MAX_RULES)
    return -EINVAL;
  if ((b.c = calloc(1, sizeof *b.c)) == NULL)
    return -ENOMEM;
  b.c->marks_supported = HAVE_STATES;
  b.c->policy = o->policy;
  if (b.n_rules > 0 &&
      ((b.c->rule_groups = calloc(b.n_rules, sizeof *b.c->rule_groups)) ==
           NULL ||
       (b.c->rule_unjudged = calloc(b.n_rules, sizeof *b.c->rule_unjudged)) ==
           NULL ||
       (b.c->rule_unnamed = calloc(b.n_rules, sizeof *b.c->rule_unnamed)) ==
           NULL ||
       (b.c->rule_cut = calloc(b.n_rules, sizeof *b.c->rule_cut)) == NULL ||
       (b.c->rule_late = calloc(b.n_rules, sizeof *b.c->rule_late)) == NULL))
    err = -ENOMEM;
  else
    err = 0;
#if HAVE_STATES
  if (err == 0)
    err = stkr_states_create(&b.states);
  if (err == 0)
    err = o->inherit != NULL ? 0 : stkr_inherit_create(&b.inherit);
  if (o->inherit != NULL)
    b.inherit = o->inherit;
  if (err == 0 && b.n_rules > 0 &&
      ((b.rule_seen = calloc(b.n_rules, sizeof *b.rule_seen)) == NULL ||
       (b.rule_in = calloc(b.n_rules, sizeof *b.rule_in)) == NULL))
    err = -ENOMEM;
  b.version = 1; /* the caches start out of date */
#endif
  if (err == 0)
    err = stkr_boots_init(&b.boots, r);
  ao = o->agg;
  ao.on_event = on_event;
  ao.on_event_arg = &b;
  if (err == 0)
    err = stkr_agg_build(r, &ao, progress, progress_arg, &b.c->agg);
  if (end_process(&b) != 0 && err == 0)
    err = -ENOMEM;
  b.c->origin_ns = stkr_boots_origin(&b.boots, r);
  b.c->clocks = b.boots.n_clocks;
  if (err == 0)
    err = stkr__comp_finish(&b);
#if HAVE_STATES
  ext_forget(&b);
  free(b.ext);
  stkr_states_free(b.states);
  if (o->inherit == NULL && err == 0 &&
      (b.c->later_origins = stkr_inherit_later_origins(b.inherit)) > 0)
    b.c->inherit = b.inherit; /* for a second read */
  else if (o->inherit == NULL)
    stkr_inherit_free(b.inherit);
  free(b.rule_seen);
  free(b.rule_in);
#endif
  stkr_boots_free(&b.boots);
  free(b.stack_group);
  free(b.gs);
  if (b.rs != NULL)
    STKR_FREE_EACH(b.rs, b.c->n_groups * b.n_rules, rate);
  free(b.rs);
  stkr_index_free(&b.group_ix);
  if (err != 0) {
    stkr_comp_free(b.c);
    return err;
  }
  /* A `stackrec mark` mark reaches every process of its directory: counted
   * once, as report counts it (QA, session 22: 5 against report's 4). */
  b.c->marks = b.c->agg->marks_read;
  *out = b.c;
  return 0;
}

struct stkr_inherit *stkr_comp_take_inherit(stkr_comp *c) {
  struct stkr_inherit *h = c->inherit;
  c->inherit = NULL;
  return h;
}

void stkr_comp_free(stkr_comp *c) {
  if (c == NULL)
    return;
#if HAVE_STATES
  stkr_inherit_free(c->inherit);
#endif
  stkr_agg_free(c->agg);
  free(c->groups);
  free(c->findings);
  free(c->rule_groups);
  if (c->rule_notes != NULL)
    for (size_t i = 0; c->policy != NULL && i < c->policy->n_rules; i++)
      free(c->rule_notes[i]);
  STKR_FREE_ALL(c->rule_notes, c->rule_unchecked, c->rule_case,
                c->rule_unjudged, c->rule_unnamed, c->rule_cut, c->rule_late,
                c);
}
