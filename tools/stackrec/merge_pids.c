/*
 * merge_pids.c: the pids of `stackrec merge`'s output (merge_pids.h).
 */
#include "common/stkr_cmp.h"

#include "tools/stackrec/merge_pids.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool taken(const stkr__mpids *m, uint32_t pid) {
  return stkr_map_find(&m->taken, pid) != NULL;
}

int stkr__mpids_assign(stkr__mpids *m, size_t ix, uint32_t pid) {
  stkr__mproc *p = &m->p[ix];
  uint32_t out = pid;

  if (p->assigned)
    return 0;
  if (pid == 0 || taken(m, pid)) {
    /* Never a pid a named process has and may still keep (QA, session
     * 27: a synthetic 10000000 given first renumbered an input's own
     * process 10000000, read later). */
    while (taken(m, m->next_pid) || stkr_map_find(&m->named, m->next_pid))
      m->next_pid++;
    out = m->next_pid++;
  }
  if (stkr_map_put(&m->taken, out, 1) != 0)
    return -ENOMEM;
  p->out_pid = out;
  p->renumbered = out != pid;
  p->assigned = true;
  return 0;
}

/* m->order by pid, then index (for stkr__mpids_parent's binary search):
 * each as one key, pid << 32 | index, so one integer sort does both.
 * @return 0 or -ENOMEM. */
static int sort_order(stkr__mpids *m) {
  uint64_t *v = malloc((m->n_order ? m->n_order : 1) * sizeof *v);
  size_t i;

  if (v == NULL)
    return -ENOMEM;
  for (i = 0; i < m->n_order; i++)
    v[i] = (uint64_t)stkr_reader_process(m->r, m->order[i])->pid << 32 |
           m->order[i];
  qsort(v, m->n_order, sizeof *v, stkr_qsort_u64);
  for (i = 0; i < m->n_order; i++)
    m->order[i] = (uint32_t)v[i];
  free(v);
  return 0;
}

int stkr__mpids_init(stkr__mpids *m, const stkr_reader *r) {
  size_t i;

  memset(m, 0, sizeof *m);
  m->r = r;
  m->n = stkr_reader_process_count(r);
  m->next_pid = STKR__MERGE_PID_BASE;
  m->p = calloc(m->n ? m->n : 1, sizeof *m->p);
  m->order = malloc((m->n ? m->n : 1) * sizeof *m->order);
  m->unnamed = malloc((m->n ? m->n : 1) * sizeof *m->unnamed);
  if (m->p == NULL || m->order == NULL || m->unnamed == NULL)
    return -ENOMEM;
  for (i = 0; i < m->n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    struct stat st;

    if (p->dir != NULL && stat(p->dir, &st) == 0) {
      m->p[i].dev = st.st_dev;
      m->p[i].ino = st.st_ino;
    }
    if (p->pid != 0) {
      m->order[m->n_order++] = (uint32_t)i;
      if (stkr_map_put(&m->named, p->pid, 1) != 0)
        return -ENOMEM;
    } else
      m->unnamed[m->n_unnamed++] = (uint32_t)i;
  }
  /* The reader's order is by pid, then input: taking the pids in it now
   * is what taking them batch by batch did, and a parent's pid is known
   * before any child of it is written. */
  for (i = 0; i < m->n_order; i++)
    if (stkr__mpids_assign(m, m->order[i],
                           stkr_reader_process(r, m->order[i])->pid) != 0)
      return -ENOMEM;
  return sort_order(m);
}

void stkr__mpids_free(stkr__mpids *m) {
  free(m->p);
  free(m->order);
  free(m->unnamed);
  stkr_map_free(&m->taken);
  stkr_map_free(&m->named);
  memset(m, 0, sizeof *m);
}

static bool same_dir(const stkr__mproc *a, const stkr__mproc *b) {
  return a->ino != 0 && a->dev == b->dev && a->ino == b->ino;
}

uint32_t stkr__mpids_parent(const stkr__mpids *m, size_t ix,
                            uint32_t parent) {
  size_t lo = 0, hi = m->n_order, i;
  bool elsewhere = false;

  if (parent == 0)
    return 0;
  while (lo < hi) { /* the first named process with pid >= parent */
    size_t mid = lo + (hi - lo) / 2;
    if (stkr_reader_process(m->r, m->order[mid])->pid < parent)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < m->n_order &&
         stkr_reader_process(m->r, m->order[lo])->pid == parent;
       lo++) {
    if (same_dir(&m->p[m->order[lo]], &m->p[ix]))
      return m->p[m->order[lo]].out_pid;
    elsewhere = true;
  }
  /* Files not named as segments: their pid is their Header's (rare;
   * read first, as pid 0 sorts first, so known by now). */
  for (i = 0; i < m->n_unnamed; i++) {
    uint32_t u = m->unnamed[i];
    if (!m->p[u].assigned || stkr_reader_process(m->r, u)->pid != parent)
      continue;
    if (same_dir(&m->p[u], &m->p[ix]))
      return m->p[u].out_pid;
    elsewhere = true;
  }
  return elsewhere || taken(m, parent) ? 0 : parent;
}

size_t stkr__mpids_of_dir(const stkr__mpids *m, dev_t dev, ino_t ino,
                          stkr_pid_map *map) {
  stkr__mproc d = {.dev = dev, .ino = ino};
  size_t i, n = 0;

  for (i = 0; i < m->n; i++)
    if (m->p[i].wrote && same_dir(&m->p[i], &d))
      map[n++] = (stkr_pid_map){stkr_reader_process(m->r, i)->pid,
                                m->p[i].out_pid};
  return n;
}
