/*
 * agg_marks.c: the marks an aggregation keeps (agg_marks.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/stkr_boot.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/agg_marks.h"
#include "tools/stackrec/agg_stacks.h"

/* ev's time on its process's first instance's clock, as its events'
 * (stkr_process_info.instance_shift_ns; filter.h). */
static uint64_t mark_ts(const stkr_event_view *ev) {
  return ev->proc != NULL && ev->proc->instance_shift_ns != 0
             ? stkr_clock_add(ev->ts_ns, ev->proc->instance_shift_ns)
             : ev->ts_ns;
}

/* A `stackrec mark` mark kept already (the same file, line and name), read
 * again by another process: noted for stkr__agg_marks_resolve. Before (QA,
 * session 28) it was kept under the first process that read its file's
 * marks only: after a merge, whose file scopes its marks to each input's
 * processes, every other input's marks were dropped, and a mark read first
 * by a process that started after it showed at "0 s". Then the starts were
 * compared as the mark was read, before the reading process's Header: its
 * start, taken as 0, won every comparison, and a mark read by a later
 * child showed at "0 s" again (QA, session 29). @return 1 if kept already,
 * 0 if not, -ENOMEM. */
static int seen_again(stkr__agg_marks *m, stkr_agg *a,
                      const stkr_event_view *ev, const char *name,
                      uint64_t h) {
  size_t pos;
  for (size_t i = stkr_index_first(&m->index, h, &pos); i != STKR_INDEX_NONE;
       i = stkr_index_next(&m->index, h, &pos)) {
    const stkr_agg_mark *k = &a->marks[i];
    if (m->path[i] != ev->path || m->off[i] != ev->batch_offset ||
        k->name != name)
      continue;
    if (stkr_grow((void **)&m->seen, &m->cap_seen, m->n_seen + 1,
                  sizeof *m->seen) != 0)
      return -ENOMEM;
    m->seen[m->n_seen++] = (struct stkr__agg_seen){i, mark_ts(ev)};
    return 1;
  }
  return 0;
}

int stkr__agg_marks_add(stkr__agg_marks *m, stkr_agg *a, stkr__strtab *strs,
                        const stkr_event_view *ev) {
  bool external = stkr_agg_mark_external(ev);
  const char *name;
  stkr_agg_mark *k;
  uint64_t h = 0;

  if ((name = stkr__strtab_intern(strs, ev->site)) == NULL)
    return -ENOMEM;
  if (external) {
    int seen;
    /* By its line, not its time: a process of another clock reads the
     * same line at another time (review, session 36: counted twice). */
    h = stkr_mix64((uint64_t)(uintptr_t)ev->path ^ ev->batch_offset ^
                   stkr_mix64((uint64_t)(uintptr_t)name));
    if ((seen = seen_again(m, a, ev, name, h)) != 0)
      return seen < 0 ? seen : 0;
  }
  a->marks_read++;
  if (a->n_marks >= STKR_AGG_MAX_MARKS) {
    a->marks_not_kept++;
    return 0;
  }
  if (stkr_grow((void **)&a->marks, &a->cap_marks, a->n_marks + 1,
                sizeof(*a->marks)) != 0 ||
      stkr_grow((void **)&m->path, &m->cap_path, a->n_marks + 1,
                sizeof(*m->path)) != 0 ||
      stkr_grow((void **)&m->off, &m->cap_off, a->n_marks + 1,
                sizeof(*m->off)) != 0 ||
      (external && stkr_index_add(&m->index, h, a->n_marks) != 0))
    return -ENOMEM;
  m->path[a->n_marks] = external ? ev->path : NULL;
  m->off[a->n_marks] = ev->batch_offset;
  k = &a->marks[a->n_marks++];
  k->name = name;
  k->ts_ns = mark_ts(ev);
  k->t_ns = 0;
  k->process = ev->process;
  k->pid = ev->pid;
  k->external = external;
  return 0;
}

void stkr__agg_marks_resolve(stkr__agg_marks *m, stkr_agg *a,
                             const stkr_reader *r, size_t process) {
  const stkr_process_info *p =
      process == SIZE_MAX ? NULL : stkr_reader_process(r, process);
  /* A process without a Header nor an event has no start to compare. */
  uint64_t origin = p != NULL ? stkr__agg_process_origin(r, process) : 0;

  for (size_t i = 0; origin != 0 && i < m->n_seen; i++) {
    stkr_agg_mark *k = &a->marks[m->seen[i].i];
    uint64_t held = stkr__agg_process_origin(r, k->process);
    if (held == 0 || origin < held) {
      k->process = process;
      k->pid = p->pid;
      k->ts_ns = m->seen[i].ts; /* on this process's clock */
    }
  }
  m->n_seen = 0;
}

void stkr__agg_marks_free(stkr__agg_marks *m) {
  stkr_index_free(&m->index);
  free(m->path);
  free(m->off);
  free(m->seen);
}
