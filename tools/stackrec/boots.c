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
#include "tools/stackrec/boots.h"

typedef struct proc_clock {
  stkr_start_clock c;
  uint64_t boot_time; /* stkr_boot_time of its start, 0: not known */
  size_t i;           /* the process */
} proc_clock;

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

/* A wall-clock time that can be a real one (2001..2200): a device whose
 * clock was never set (1970) tells nothing of when its boot was. */
static bool plausible_wall(uint64_t wall_ns) {
  return wall_ns > 978307200ull * 1000000000ull &&
         wall_ns < 7258118400ull * 1000000000ull;
}

/* a - b, 0 if it does not fit. */
static int64_t diff_or_0(int64_t a, int64_t b) {
  int64_t d;
  return __builtin_sub_overflow(a, b, &d) ? 0 : d;
}

/* The shift of each known process (v[0, k) sorted by by_clock): onto the
 * clock of ref, its boot's earliest start. Within a boot, by the offsets
 * (exact); another boot B first onto its own earliest start's clock, then
 * by one wall-clock shift for all of B (so B's namespaces keep their
 * order). */
static void shifts(stkr_boots *b, const proc_clock *v, size_t k,
                   size_t ref) {
  size_t i = 0, j, rep;

  while (i < k && v[i].c.have_boot_id) {
    int64_t wall = 0;
    for (j = i, rep = i; j < k && same_boot(&v[j], &v[i]); j++)
      if (v[j].c.wall_ns < v[rep].c.wall_ns) rep = j;
    if (!same_boot(&v[rep], &v[ref]) && plausible_wall(v[rep].c.wall_ns) &&
        plausible_wall(v[ref].c.wall_ns) && v[rep].boot_time != 0 &&
        v[ref].boot_time != 0 && v[rep].boot_time < INT64_MAX &&
        v[ref].boot_time < INT64_MAX)
      wall = diff_or_0((int64_t)v[rep].boot_time, (int64_t)v[ref].boot_time);
    for (; i < j; i++) {
      const proc_clock *to = same_boot(&v[i], &v[ref]) ? &v[ref] : &v[rep];
      int64_t s = diff_or_0(to->c.mono_offset_ns, v[i].c.mono_offset_ns), t;
      b->shift[v[i].i] = __builtin_add_overflow(s, wall, &t) ? s : t;
    }
  }
}

int stkr_boots_init(stkr_boots *b, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), k = 0, i, ref = SIZE_MAX;
  uint32_t id = 0;
  proc_clock *v;

  *b = (stkr_boots){.n = n};
  v = malloc((n ? n : 1) * sizeof *v);
  b->shift = calloc(n ? n : 1, sizeof *b->shift);
  b->boot = malloc((n ? n : 1) * sizeof *b->boot);
  if (v == NULL || b->shift == NULL || b->boot == NULL) {
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
   * the known clocks; the reference is the earliest known start. */
  for (i = 0; i < k; i++) {
    const bool known = v[i].c.have_boot_id;
    if (i > 0 && (known ? !same_boot(&v[i], &v[i - 1])
                        : v[i - 1].c.have_boot_id ||
                              !stkr_boot_same(v[i].boot_time,
                                              v[i - 1].boot_time)))
      id++;
    b->boot[v[i].i] = id;
    if (known && (i == 0 || !same_boot(&v[i], &v[i - 1]) ||
                  v[i].c.mono_offset_ns != v[i - 1].c.mono_offset_ns))
      b->n_clocks++;
    if (known && (ref == SIZE_MAX || v[i].c.wall_ns < v[ref].c.wall_ns))
      ref = i;
  }
  if (b->n_clocks > 1)
    shifts(b, v, k, ref);
  free(v);
  return 0;
}

uint64_t stkr_boots_place(const stkr_boots *b, size_t i, uint64_t ts) {
  int64_t s = i < b->n ? b->shift[i] : 0;

  if (s < 0) {
    uint64_t u = (uint64_t)(-(s + 1)) + 1;
    return ts > u ? ts - u : 1;
  }
  return UINT64_MAX - ts >= (uint64_t)s ? ts + (uint64_t)s : UINT64_MAX;
}

uint64_t stkr_boots_origin(const stkr_boots *b, const stkr_reader *r) {
  size_t i, n = stkr_reader_process_count(r);
  uint64_t origin = 0;

  for (i = 0; i < n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    uint64_t t = p->have_header && p->start_mono_ns ? p->start_mono_ns
                                                    : p->first_ts_ns;
    if (t == 0)
      continue; /* no start, no event */
    t = stkr_boots_place(b, i, t);
    if (origin == 0 || t < origin)
      origin = t;
  }
  return origin;
}

void stkr_boots_free(stkr_boots *b) {
  if (b == NULL)
    return;
  free(b->shift);
  free(b->boot);
  *b = (stkr_boots){0};
}
