/*
 * inherit.c: the marks a forked child starts with (inherit.h).
 *
 * The links come from the reader's process summaries (each Header's
 * forked_from_pid and fork_mono_ns, its head_lost and its count of own
 * marks), so that a process the filters or its lack of marks kept from
 * being visited still links a grandchild to its origin (review, session
 * 32). What this module keeps is each visited process's own marks (a range
 * of one array: a process's marks arrive together). A child's inheritance
 * is its chain of origins walked up, each one's marks taken up to the
 * earliest fork below it, fed oldest origin first (the tracker sorts by
 * time; in order, it appends). An origin whose own marks are not all here
 * (filtered out, over the cap) makes the inheritance unknown.
 */
#include "tools/stackrec/inherit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "tools/stackrec/strtab.h"

/* Bounds on what a recording can make this keep and do: marks kept for
 * children (16 bytes each), and origins walked for one child. Past them,
 * the child's inheritance is unknown. */
#define STKR__INHERIT_MAX_MARKS 1000000u
#define STKR__INHERIT_MAX_DEPTH 64u
/* Marks looked at over all children: a parent of many marks and many
 * children (or a hostile file) costs marks x children. */
#define STKR__INHERIT_MAX_WORK 20000000u

typedef struct inh_mark {
  uint64_t ts;
  const char *name; /* interned in strs: outlives the reader */
} inh_mark;

typedef struct inh_proc {
  size_t first, n;  /* its own marks: marks[first, first + n) */
} inh_proc;

typedef struct inh_link {
  size_t process;   /* reader index of an origin */
  uint64_t until;   /* its marks up to this time */
} inh_link;

struct stkr_inherit {
  stkr__strtab strs;     /* mark names (a second read has its own reader) */
  inh_mark *marks;
  size_t n_marks, cap_marks;
  inh_proc *procs;
  size_t n_procs, cap_procs;
  stkr_map by_process;   /* reader index -> procs index + 1 */
  stkr_map by_pid;       /* hash of (dir, pid) -> reader index + 1 */
  bool pids_indexed;
  inh_link *chain;       /* scratch of stkr_inherit_load */
  size_t cap_chain;
  /* The process being read. */
  bool active, over;     /* over: its own marks passed the cap */
  size_t cur_process, cur_first;
  uint64_t work;         /* marks looked at so far (MAX_WORK) */
  size_t later;          /* children whose origin was read after them */
  /* After stkr_inherit_complete: the first read's links of every process
   * (reader index), for a second read; NULL before. */
  struct inh_link_info *links;
  size_t n_links;
};

int stkr_inherit_create(stkr_inherit **out) {
  *out = calloc(1, sizeof(**out));
  return *out != NULL ? 0 : -ENOMEM;
}

void stkr_inherit_free(stkr_inherit *h) {
  if (h == NULL)
    return;
  stkr__strtab_free(&h->strs);
  stkr_map_free(&h->by_process);
  stkr_map_free(&h->by_pid);
  STKR_FREE_ALL(h->links, h->marks, h->procs, h->chain, h);
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

/* What the walk needs of one process: its origin (reader index), when it
 * was forked from it, whether its own earliest marks are unknown, and
 * whether all its own marks are here. From the reader's summary while
 * reading; in a second read, from the first read's (links[]), which knows
 * processes this read has not reached. */
typedef struct inh_link_info {
  uint32_t pid;     /* who it is (a second read checks it is the same) */
  bool forked;      /* a forked child (it has an origin, maybe unknown) */
  size_t origin;    /* SIZE_MAX: not in the recording, or not placed */
  uint64_t fork_ns;
  bool head_lost;
  bool marks_dropped; /* it dropped a mark (when, not known) */
  bool marks_all;   /* every own mark of it is in h->marks */
  bool reused;      /* its pid held more than one process in turn */
} inh_link_info;

static int link_of(stkr_inherit *h, const stkr_reader *r, size_t i,
                   inh_link_info *out) {
  const stkr_process_info *p;
  uint64_t *v;
  int err;

  p = stkr_reader_process(r, i);
  if (h->links != NULL) {
    /* The same process at the same index, or the recording changed
     * between the reads (a live one): then nothing is known of it. */
    if (i < h->n_links && p != NULL && h->links[i].pid == p->pid) {
      *out = h->links[i];
    } else {
      memset(out, 0, sizeof *out);
      out->forked = true;
      out->origin = SIZE_MAX;
    }
    return 0;
  }
  out->pid = p->pid;
  out->marks_dropped = p->marks_dropped > 0;
  out->forked = p->fork_mono_ns != 0;
  out->fork_ns = p->fork_mono_ns;
  out->head_lost = p->head_lost;
  out->reused = p->instances > 1;
  out->origin = SIZE_MAX;
  v = stkr_map_find(&h->by_process, i);
  out->marks_all = (v == NULL ? 0 : h->procs[*v - 1].n) == p->marks;
  if (out->forked && p->forked_from_pid != 0 &&
      (err = find_process(h, r, p->dir, p->forked_from_pid, &out->origin)) !=
          0)
    return err;
  return 0;
}

/* The chain of origins of process `process` (not included) into
 * h->chain, nearest first, each with the time its marks count up to.
 * @return STKR_INHERIT_KNOWN, _HEAD_LOST (an origin's earliest marks are
 * unknown), _MARKS_LOST (an origin dropped a mark), _UNKNOWN (an origin
 * not in the recording, not read yet, or whose own marks are not all
 * here; a chain too long; the recording changed between two reads), or
 * -ENOMEM. */
static int walk_chain(stkr_inherit *h, const stkr_reader *r, size_t process,
                      size_t *n_out) {
  inh_link_info lk;
  uint64_t until;
  int verdict = STKR_INHERIT_KNOWN, err;
  size_t n = 0, o;

  *n_out = 0;
  if ((err = link_of(h, r, process, &lk)) != 0)
    return err;
  until = lk.fork_ns;
  while (lk.forked) {
    if (n == STKR__INHERIT_MAX_DEPTH || lk.origin == SIZE_MAX)
      return STKR_INHERIT_UNKNOWN; /* too deep; not in it, not placed */
    o = lk.origin;
    /* Read after the child (pids wrapped, or renumbered by merge): its
     * marks are not known yet, in a first read. */
    if (o >= h->cur_process && h->links == NULL) {
      h->later++;
      return STKR_INHERIT_UNKNOWN;
    }
    if ((err = link_of(h, r, o, &lk)) != 0)
      return err;
    if (!lk.marks_all)
      return STKR_INHERIT_UNKNOWN; /* over the cap */
    /* Its marks are those of every process that held the pid, which the
     * tracker does not tell apart (review, session 33: a later launch's
     * child got the earlier launch's consent). */
    if (lk.reused)
      return STKR_INHERIT_UNKNOWN;
    if (lk.head_lost && verdict == STKR_INHERIT_KNOWN)
      verdict = STKR_INHERIT_HEAD_LOST;
    /* A mark it dropped may have been before the fork (review, session
     * 32: a child forked after a dropped app.foreground was "in the
     * background"). */
    if (lk.marks_dropped)
      verdict = STKR_INHERIT_MARKS_LOST;
    if (stkr_grow((void **)&h->chain, &h->cap_chain, n + 1,
                  sizeof(*h->chain)) != 0)
      return -ENOMEM;
    h->chain[n].process = o;
    h->chain[n++].until = until;
    if (lk.forked && lk.fork_ns < until)
      until = lk.fork_ns;
    *n_out = n;
  }
  return verdict;
}

void stkr_inherit_begin(stkr_inherit *h, size_t process) {
  if (h == NULL)
    return;
  h->active = true;
  h->over = false;
  h->cur_process = process;
  h->cur_first = h->n_marks;
}

int stkr_inherit_load(stkr_inherit *h, const stkr_reader *r,
                      stkr_states *states, stkr_inherit_from *from) {
  const stkr_process_info *p;
  size_t n, i, k;
  uint64_t *v;
  int verdict, err;

  *from = STKR_INHERIT_NONE;
  if (h == NULL || !h->active ||
      (p = stkr_reader_process(r, h->cur_process)) == NULL ||
      p->fork_mono_ns == 0)
    return 0;
  if ((verdict = walk_chain(h, r, h->cur_process, &n)) < 0)
    return verdict;
  *from = (stkr_inherit_from)verdict;
  if (verdict == STKR_INHERIT_UNKNOWN)
    return 0;
  uint64_t work = 0;
  for (i = 0; i < n; i++)
    if ((v = stkr_map_find(&h->by_process, h->chain[i].process)) != NULL)
      work += h->procs[*v - 1].n;
  if (h->work + work > STKR__INHERIT_MAX_WORK) {
    *from = STKR_INHERIT_UNKNOWN;
    return 0;
  }
  h->work += work;
  while (n-- > 0) { /* the oldest origin first */
    if ((v = stkr_map_find(&h->by_process, h->chain[n].process)) == NULL)
      continue; /* no marks of its own */
    const inh_proc *e = &h->procs[*v - 1];
    for (i = 0; i < e->n; i++) {
      k = e->first + i;
      if (h->marks[k].ts <= h->chain[n].until &&
          (err = stkr_states_mark(states, h->marks[k].ts, h->marks[k].name)) !=
              0)
        return err;
    }
  }
  return 0;
}

size_t stkr_inherit_later_origins(const stkr_inherit *h) {
  return h != NULL ? h->later : 0;
}

int stkr_inherit_complete(stkr_inherit *h, const stkr_reader *r) {
  size_t i, n = stkr_reader_process_count(r);
  inh_link_info *links;
  int err;

  if (h == NULL || h->links != NULL)
    return 0;
  if ((links = calloc(n ? n : 1, sizeof *links)) == NULL)
    return -ENOMEM;
  for (i = 0; i < n; i++) /* from r: h->links is set only after */
    if ((err = link_of(h, r, i, &links[i])) != 0) {
      free(links);
      return err;
    }
  h->links = links;
  h->n_links = n;
  h->active = false;
  h->work = 0;
  h->later = 0;
  return 0;
}

int stkr_inherit_mark(stkr_inherit *h, uint64_t ts_ns, const char *name) {
  if (h == NULL || !h->active || h->over || h->links != NULL)
    return 0;
  if (h->n_marks >= STKR__INHERIT_MAX_MARKS) {
    h->over = true; /* its children: unknown (walk_chain's count check) */
    return 0;
  }
  if (stkr_grow((void **)&h->marks, &h->cap_marks, h->n_marks + 1,
                sizeof(*h->marks)) != 0 ||
      (name = stkr__strtab_intern(&h->strs, name)) == NULL)
    return -ENOMEM;
  h->marks[h->n_marks].ts = ts_ns;
  h->marks[h->n_marks++].name = name;
  return 0;
}

int stkr_inherit_end(stkr_inherit *h) {
  size_t own;
  inh_proc *e;

  if (h == NULL || !h->active || h->links != NULL)
    return 0;
  h->active = false;
  own = h->n_marks - h->cur_first;
  if (own == 0)
    return 0; /* nothing of its own a child of it could inherit */
  if (stkr_grow((void **)&h->procs, &h->cap_procs, h->n_procs + 1,
                sizeof(*h->procs)) != 0 ||
      stkr_map_put(&h->by_process, h->cur_process, h->n_procs + 1) != 0)
    return -ENOMEM;
  e = &h->procs[h->n_procs++];
  e->first = h->cur_first;
  e->n = own;
  return 0;
}
