/*
 * boots.c: one time line for processes on several monotonic clocks
 * (boots.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_boot.h"
#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "tools/stackrec/boots.h"

struct stkr_boot_rep {
  stkr_clock_id c;         /* the clock of the boot's earliest start */
  uint64_t mono_ns, wall_ns; /* that start on its clock and the wall clock */
};

typedef struct proc_clock {
  stkr_start_clock c;
  uint64_t boot_time; /* stkr_boot_time of its start, 0: not known */
  size_t i;           /* the process */
} proc_clock;

static stkr_clock_id clock_of(const stkr_start_clock *s) {
  stkr_clock_id c = {.have_boot = s->have_boot_id,
                     .mono_offset_ns = s->mono_offset_ns};

  memcpy(c.boot, s->boot_id, sizeof c.boot);
  return c;
}

/* The clock of p's current instance. */
static stkr_clock_id instance_clock(const stkr_process_info *p) {
  stkr_clock_id c = {.have_boot = p->have_header && p->instance_have_boot_id,
                     .mono_offset_ns = p->instance_mono_offset_ns};

  memcpy(c.boot, p->instance_boot_id, sizeof c.boot);
  return c;
}

/* Known boots first, each in one run, within it by clock (offset) and
 * start on the wall clock; then the unknown ones by boot time. */
static int by_clock(const void *a, const void *b) {
  const proc_clock *x = a, *y = b;
  int c = (int)y->c.have_boot_id - (int)x->c.have_boot_id;

  if (c == 0 && x->c.have_boot_id)
    c = memcmp(x->c.boot_id, y->c.boot_id, sizeof x->c.boot_id);
  if (c == 0 && x->c.have_boot_id)
    c = stkr_cmp_i64(x->c.mono_offset_ns, y->c.mono_offset_ns);
  if (c == 0 && !x->c.have_boot_id)
    c = stkr_cmp_u64(x->boot_time, y->boot_time);
  return c != 0 ? c : stkr_cmp_u64(x->c.wall_ns, y->c.wall_ns);
}

static bool same_boot(const proc_clock *x, const proc_clock *y) {
  return x->c.have_boot_id && y->c.have_boot_id &&
         memcmp(x->c.boot_id, y->c.boot_id, sizeof x->c.boot_id) == 0;
}

/* a - b, 0 if it does not fit. */
static int64_t diff_or_0(int64_t a, int64_t b) {
  int64_t d;
  return __builtin_sub_overflow(a, b, &d) ? 0 : d;
}

/* Count clock c among the distinct known ones (n_clocks); known_new: it
 * is not among them (init's sorted run). A failed allocation leaves it
 * uncounted: the count is said, never used. */
static void add_clock(stkr_boots *b, const stkr_clock_id *c, bool known_new) {
  size_t j;

  for (j = 0; !known_new && j < b->n_clocks; j++)
    if (stkr_clock_same_boot(&b->clocks[j], c) &&
        b->clocks[j].mono_offset_ns == c->mono_offset_ns)
      return;
  if (stkr_grow((void **)&b->clocks, &b->cap_clocks, b->n_clocks + 1,
                sizeof *b->clocks) == 0)
    b->clocks[b->n_clocks++] = *c;
}

/* The boot of known clock c: its earliest start, as found (reps[0], the
 * reference, first); a boot first seen in a later instance is added
 * with that instance's start. NULL: none, and none could be added. */
static const stkr_boot_rep *rep_of(stkr_boots *b, const stkr_clock_id *c,
                                   uint64_t mono_ns, uint64_t wall_ns) {
  size_t j;

  /* The last one found first: init asks in boot order, so a merge of
   * many devices costs one compare a process, not one a boot. */
  if (b->last_rep < b->n_reps && stkr_clock_same_boot(&b->reps[b->last_rep].c, c))
    return &b->reps[b->last_rep];
  for (j = 0; j < b->n_reps; j++)
    if (stkr_clock_same_boot(&b->reps[j].c, c))
      return &b->reps[b->last_rep = j];
  if (stkr_grow((void **)&b->reps, &b->cap_reps, b->n_reps + 1,
                sizeof *b->reps) != 0)
    return NULL;
  b->reps[b->n_reps] = (stkr_boot_rep){*c, mono_ns, wall_ns};
  b->last_rep = b->n_reps;
  return &b->reps[b->n_reps++];
}

/* What to add to a time on clock c (of a start at mono_ns, wall_ns): onto
 * its boot's earliest start's clock by the offsets (exact), then, for
 * another boot than the reference's, by one wall-clock shift for that
 * whole boot (so its namespaces keep their order). Unknown: 0. */
static int64_t shift_of(stkr_boots *b, const stkr_clock_id *c,
                        uint64_t mono_ns, uint64_t wall_ns) {
  const stkr_boot_rep *ref, *rep;
  int64_t s, wall = 0, t;

  if (!c->have_boot || b->n_reps == 0 ||
      (rep = rep_of(b, c, mono_ns, wall_ns)) == NULL)
    return 0;
  ref = &b->reps[0];
  s = diff_or_0(rep->c.mono_offset_ns, c->mono_offset_ns);
  if (rep != ref)
    (void)stkr_clock_shift(&rep->c, rep->mono_ns, rep->wall_ns, &ref->c,
                           ref->mono_ns, ref->wall_ns, &wall);
  return __builtin_add_overflow(s, wall, &t) ? s : t;
}

/* The boots' earliest starts of the known processes v[0, k) (sorted by
 * by_clock), the earliest of all (the reference) first. */
static void find_reps(stkr_boots *b, const proc_clock *v, size_t k) {
  size_t i = 0, j, rep;

  while (i < k && v[i].c.have_boot_id) {
    for (j = i, rep = i; j < k && same_boot(&v[j], &v[i]); j++)
      if (v[j].c.wall_ns < v[rep].c.wall_ns) rep = j;
    /* Each run is a boot of its own: appended, never looked up. */
    if (stkr_grow((void **)&b->reps, &b->cap_reps, b->n_reps + 1,
                  sizeof *b->reps) == 0) {
      b->reps[b->n_reps++] = (stkr_boot_rep){clock_of(&v[rep].c),
                                             v[rep].c.mono_ns, v[rep].c.wall_ns};
      if (b->reps[b->n_reps - 1].wall_ns < b->reps[0].wall_ns) {
        stkr_boot_rep t = b->reps[0];
        b->reps[0] = b->reps[b->n_reps - 1];
        b->reps[b->n_reps - 1] = t;
      }
    }
    i = j;
  }
}

int stkr_boots_init(stkr_boots *b, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), k = 0, i;
  uint32_t id = 0;
  proc_clock *v;

  *b = (stkr_boots){.n = n};
  v = malloc((n ? n : 1) * sizeof *v);
  b->shift = calloc(n ? n : 1, sizeof *b->shift);
  b->cur_shift = calloc(n ? n : 1, sizeof *b->cur_shift);
  b->inst = calloc(n ? n : 1, sizeof *b->inst);
  b->boot = malloc((n ? n : 1) * sizeof *b->boot);
  if (v == NULL || b->shift == NULL || b->cur_shift == NULL ||
      b->inst == NULL || b->boot == NULL) {
    free(v);
    stkr_boots_free(b);
    return -ENOMEM;
  }
  for (i = 0; i < n; i++) {
    proc_clock p = {.i = i};

    b->boot[i] = STKR_BOOT_UNKNOWN;
    (void)stkr_reader_start_clock(r, i, &p.c);
    p.boot_time = stkr_boot_time(p.c.mono_ns, p.c.wall_ns);
    if (p.c.mono_ns != 0)
      v[k++] = p;
  }
  qsort(v, k, sizeof *v, by_clock);
  /* Number the boots (unknown ones: chained by the wall clock) and count
   * the known clocks. */
  for (i = 0; i < k; i++) {
    const bool known = v[i].c.have_boot_id;
    if (i > 0 && (known ? !same_boot(&v[i], &v[i - 1])
                        : v[i - 1].c.have_boot_id ||
                              !stkr_boot_same(v[i].boot_time,
                                              v[i - 1].boot_time)))
      id++;
    b->boot[v[i].i] = id;
    if (known) {
      stkr_clock_id c = clock_of(&v[i].c);
      if (b->n_clocks == 0 || !same_boot(&v[i], &v[i - 1]) ||
          v[i].c.mono_offset_ns != v[i - 1].c.mono_offset_ns)
        add_clock(b, &c, true); /* sorted: a clock not seen yet */
    }
  }
  find_reps(b, v, k);
  for (i = 0; i < k; i++) {
    stkr_clock_id c = clock_of(&v[i].c);
    b->shift[v[i].i] = shift_of(b, &c, v[i].c.mono_ns, v[i].c.wall_ns);
  }
  free(v);
  return 0;
}

/* Process i is at instance p->instances (> 1): its clock's shift. */
static void retune(stkr_boots *b, size_t i, const stkr_process_info *p) {
  stkr_clock_id c = instance_clock(p);

  b->inst[i] = p->instances;
  b->cur_shift[i] = shift_of(b, &c, p->instance_start_mono_ns,
                             p->instance_start_wall_ns);
  if (c.have_boot)
    add_clock(b, &c, false);
}

uint64_t stkr_boots_place(stkr_boots *b, size_t i,
                          const stkr_process_info *p, uint64_t ts) {
  int64_t s = 0;

  if (i < b->n) {
    s = b->shift[i];
    if (p != NULL && p->instances > 1) {
      if (b->inst[i] != p->instances)
        retune(b, i, p);
      s = b->cur_shift[i];
    }
  }
  return stkr_clock_add(ts, s);
}

bool stkr_boots_mark_at(const stkr_mark_clock *m, const stkr_process_info *p,
                        uint64_t *ts) {
  stkr_clock_id from = {.have_boot = m->have_boot_id,
                        .mono_offset_ns = m->mono_offset_ns};
  stkr_clock_id to = instance_clock(p);
  int64_t shift;
  bool known;

  memcpy(from.boot, m->boot_id, sizeof from.boot);
  known = stkr_clock_shift(&from, m->set_ns, m->wall_ns, &to,
                           p->instance_start_mono_ns,
                           p->instance_start_wall_ns, &shift);
  *ts = stkr_clock_add(m->set_ns, shift);
  /* Unrelated: two known boots, no real wall clock to relate them. */
  return known || !from.have_boot || !to.have_boot;
}

uint64_t stkr_boots_origin(stkr_boots *b, const stkr_reader *r) {
  size_t i, n = stkr_reader_process_count(r);
  uint64_t origin = 0;

  for (i = 0; i < n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    uint64_t t = p->have_header && p->start_mono_ns ? p->start_mono_ns
                                                    : p->first_ts_ns;
    if (t == 0)
      continue; /* no start, no event */
    t = stkr_boots_place(b, i, NULL, t);
    if (origin == 0 || t < origin)
      origin = t;
  }
  return origin;
}

void stkr_boots_free(stkr_boots *b) {
  if (b == NULL)
    return;
  STKR_FREE_ALL(b->shift, b->cur_shift, b->inst, b->boot, b->reps, b->clocks);
  *b = (stkr_boots){0};
}
