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

/* Known clocks first, each in one run (boot id, then offset), then the
 * unknown ones by boot time; within a run by start on the wall clock. */
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

static bool same_clock(const proc_clock *x, const proc_clock *y) {
  return x->c.have_boot_id && y->c.have_boot_id &&
         memcmp(x->c.boot_id, y->c.boot_id, sizeof x->c.boot_id) == 0 &&
         x->c.mono_offset_ns == y->c.mono_offset_ns;
}

/* A wall-clock time that can be a real one (2001..2200): a device whose
 * clock was never set (1970) tells nothing of when its boot was. */
static bool plausible_wall(uint64_t wall_ns) {
  return wall_ns > 978307200ull * 1000000000ull &&
         wall_ns < 7258118400ull * 1000000000ull;
}

/* The shift from clock x (its first start) onto the reference ref. */
static int64_t shift_onto(const proc_clock *x, const proc_clock *ref) {
  int64_t d = 0;

  if (x->c.have_boot_id && ref->c.have_boot_id &&
      memcmp(x->c.boot_id, ref->c.boot_id, sizeof x->c.boot_id) == 0) {
    /* One boot, two namespaces: mono = boot's mono + offset, exactly. */
    if (__builtin_sub_overflow(ref->c.mono_offset_ns, x->c.mono_offset_ns, &d))
      d = 0;
    return d;
  }
  if (!plausible_wall(x->c.wall_ns) || !plausible_wall(ref->c.wall_ns) ||
      x->boot_time == 0 || ref->boot_time == 0 ||
      __builtin_sub_overflow((int64_t)x->boot_time, (int64_t)ref->boot_time,
                             &d))
    return 0;
  return d;
}

int stkr_boots_init(stkr_boots *b, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), k = 0, i, ref = SIZE_MAX, first;
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
  /* Number the clocks; the reference is the known clock of the earliest
   * start. A run's first entry is its earliest start. */
  for (i = 0, first = 0; i < k; i++) {
    bool known = v[i].c.have_boot_id;
    if (i > 0 && (known ? !same_clock(&v[i], &v[first])
                        : v[first].c.have_boot_id ||
                              !stkr_boot_same(v[i].boot_time,
                                              v[i - 1].boot_time))) {
      id++;
      first = i;
    }
    b->boot[v[i].i] = id;
    if (known && first == i) {
      b->n_clocks++;
      if (ref == SIZE_MAX || v[i].c.wall_ns < v[ref].c.wall_ns) ref = i;
    }
  }
  if (b->n_clocks > 1) {
    int64_t s = 0;
    for (i = 0, first = 0; i < k && v[i].c.have_boot_id; i++) {
      if (i == 0 || !same_clock(&v[i], &v[first])) {
        first = i;
        s = shift_onto(&v[i], &v[ref]);
      }
      b->shift[v[i].i] = s;
    }
  }
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

void stkr_boots_free(stkr_boots *b) {
  if (b == NULL)
    return;
  free(b->shift);
  free(b->boot);
  *b = (stkr_boots){0};
}
