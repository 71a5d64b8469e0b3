/*
 * inherit.c: the marks a forked child starts with (inherit.h).
 *
 * Each process read that matters to a child (own marks, an origin of its
 * own, or a lost head) leaves an entry: its own marks (a range of one
 * array: a process's marks arrive together) and its origin's entry with
 * the fork time. A child's inheritance is its origin's chain walked up,
 * each entry's marks taken up to the earliest fork below it, fed oldest
 * entry first (the tracker sorts by time; in order, it appends).
 */
#include "tools/stackrec/inherit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"

typedef struct inh_mark {
  uint64_t ts;
  const char *name; /* the reader's */
} inh_mark;

typedef struct inh_proc {
  size_t origin;    /* index + 1 of its origin's entry; 0: none */
  uint64_t fork_ns; /* when it copied its origin's memory */
  size_t first, n;  /* its own marks: marks[first, first + n) */
  bool head_lost;   /* its marks before those read are unknown */
} inh_proc;

typedef struct inh_link {
  size_t entry;
  uint64_t until;
} inh_link;

struct stkr_inherit {
  inh_mark *marks;
  size_t n_marks, cap_marks;
  inh_proc *procs;
  size_t n_procs, cap_procs;
  stkr_map by_process;   /* reader index -> procs index + 1 */
  stkr_map by_pid;       /* hash of (dir, pid) -> reader index + 1 */
  bool pids_indexed;
  inh_link *chain;       /* scratch of stkr_inherit_begin */
  size_t cap_chain;
  /* The process being read. */
  bool active;
  size_t cur_process, cur_origin, cur_first;
  uint64_t cur_fork_ns;
};

int stkr_inherit_create(stkr_inherit **out) {
  *out = calloc(1, sizeof(**out));
  return *out != NULL ? 0 : -ENOMEM;
}

void stkr_inherit_free(stkr_inherit *h) {
  if (h == NULL)
    return;
  free(h->marks);
  free(h->procs);
  free(h->chain);
  stkr_map_free(&h->by_process);
  stkr_map_free(&h->by_pid);
  free(h);
}

static uint64_t pid_key(const char *dir, uint32_t pid) {
  return stkr_hash_bytes(pid, dir != NULL ? dir : "",
                         dir != NULL ? strlen(dir) : 0);
}

static bool same_dir(const char *a, const char *b) {
  return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* The reader index of process `pid` of directory `dir`, or SIZE_MAX. The
 * index of every process is built once, at the first forked child. */
static int find_process(stkr_inherit *h, const stkr_reader *r,
                        const char *dir, uint32_t pid, size_t *out) {
  const stkr_process_info *p;
  uint64_t *v;
  size_t i, n = stkr_reader_process_count(r);

  if (!h->pids_indexed) {
    if (stkr_map_reserve(&h->by_pid, n) != 0)
      return -ENOMEM;
    for (i = n; i-- > 0;) { /* the first of a pid recorded twice wins */
      p = stkr_reader_process(r, i);
      if (stkr_map_put(&h->by_pid, pid_key(p->dir, p->pid), i + 1) != 0)
        return -ENOMEM;
    }
    h->pids_indexed = true;
  }
  *out = SIZE_MAX;
  if ((v = stkr_map_find(&h->by_pid, pid_key(dir, pid))) == NULL)
    return 0;
  p = stkr_reader_process(r, (size_t)*v - 1);
  if (p != NULL && p->pid == pid && same_dir(p->dir, dir))
    *out = (size_t)*v - 1; /* else a hash collision: unknown */
  return 0;
}

/* Feed the marks of entry e's chain (e first: its origin's, up to the fork
 * from it, and so on) at or before `until` into s. *lost: an entry of the
 * chain lost its head. */
static int feed_chain(stkr_inherit *h, size_t e, uint64_t until,
                      stkr_states *s, bool *lost) {
  size_t n = 0, i, k;
  int err;

  *lost = false;
  for (; e != 0; e = h->procs[e - 1].origin) {
    const inh_proc *p = &h->procs[e - 1];
    if (stkr_grow((void **)&h->chain, &h->cap_chain, n + 1,
                  sizeof(*h->chain)) != 0)
      return -ENOMEM;
    h->chain[n].entry = e - 1;
    h->chain[n++].until = until;
    *lost |= p->head_lost;
    if (p->origin != 0 && p->fork_ns < until)
      until = p->fork_ns;
  }
  while (n-- > 0) { /* the oldest ancestor first */
    const inh_proc *p = &h->procs[h->chain[n].entry];
    for (i = 0; i < p->n; i++) {
      k = p->first + i;
      if (h->marks[k].ts <= h->chain[n].until &&
          (err = stkr_states_mark(s, h->marks[k].ts, h->marks[k].name)) != 0)
        return err;
    }
  }
  return 0;
}

void stkr_inherit_begin(stkr_inherit *h, size_t process) {
  h->active = true;
  h->cur_process = process;
  h->cur_origin = 0;
  h->cur_fork_ns = 0;
  h->cur_first = h->n_marks;
}

int stkr_inherit_load(stkr_inherit *h, const stkr_reader *r,
                      stkr_states *states, stkr_inherit_from *from) {
  const size_t process = h->cur_process;
  const stkr_process_info *p = stkr_reader_process(r, process);
  size_t origin;
  uint64_t *v;
  bool lost;
  int err;

  *from = STKR_INHERIT_NONE;
  if (!h->active || p == NULL || p->fork_mono_ns == 0)
    return 0;
  *from = STKR_INHERIT_UNKNOWN;
  if (p->forked_from_pid == 0) /* merge could not place it */
    return 0;
  if ((err = find_process(h, r, p->dir, p->forked_from_pid, &origin)) != 0)
    return err;
  if (origin == SIZE_MAX || origin >= process)
    return 0; /* not in the recording, or not read yet (pids wrapped) */
  *from = STKR_INHERIT_KNOWN;
  if ((v = stkr_map_find(&h->by_process, origin)) == NULL)
    return 0; /* read: it had no marks */
  h->cur_origin = (size_t)*v;
  h->cur_fork_ns = p->fork_mono_ns;
  if ((err = feed_chain(h, h->cur_origin, p->fork_mono_ns, states, &lost)) !=
      0)
    return err;
  if (lost)
    *from = STKR_INHERIT_HEAD_LOST;
  return 0;
}

int stkr_inherit_mark(stkr_inherit *h, uint64_t ts_ns, const char *name) {
  if (!h->active)
    return 0;
  if (stkr_grow((void **)&h->marks, &h->cap_marks, h->n_marks + 1,
                sizeof(*h->marks)) != 0)
    return -ENOMEM;
  h->marks[h->n_marks].ts = ts_ns;
  h->marks[h->n_marks++].name = name;
  return 0;
}

int stkr_inherit_end(stkr_inherit *h, bool head_lost) {
  size_t own;
  inh_proc *e;

  if (!h->active)
    return 0;
  h->active = false;
  own = h->n_marks - h->cur_first;
  if (own == 0 && h->cur_origin == 0 && !head_lost)
    return 0; /* nothing a child of it could inherit */
  if (stkr_grow((void **)&h->procs, &h->cap_procs, h->n_procs + 1,
                sizeof(*h->procs)) != 0 ||
      stkr_map_put(&h->by_process, h->cur_process, h->n_procs + 1) != 0)
    return -ENOMEM;
  e = &h->procs[h->n_procs++];
  e->origin = h->cur_origin;
  e->fork_ns = h->cur_fork_ns;
  e->first = h->cur_first;
  e->n = own;
  e->head_lost = head_lost;
  return 0;
}
