/*
 * agg.c: events aggregated by call stack (see agg.h for the design).
 *
 * Level 1 (per event): a hash table keyed by (session, site id, stack
 * id[, thread id]) of the process being read leads to the event's merged
 * stack, whose count goes up: one probe on small integers per event. Ids
 * restart in every recording session of a process (stkr_reader.h), hence
 * the session in the key. The table is emptied when the reader moves on to
 * the next process (it never comes back), so it never holds more than one
 * process's keys.
 * Level 2 (once per new level-1 key): the stack's frames are taken from the
 * reader (strings interned, so nothing depends on the reader afterwards)
 * and looked up by content (site name, frame labels[, thread name]) among
 * the stacks so far: the same content from any process, session or run is
 * one stack. Memory: the distinct stacks, plus one process's keys.
 * At the end the stacks are grouped by site and sorted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/agg_framelist.h"
#include "tools/stackrec/agg_learn.h"
#include "tools/stackrec/agg_marks.h"
#include "tools/stackrec/agg_runs.h"
#include "tools/stackrec/agg_stacks.h"
#include "tools/stackrec/filter.h"
#include "tools/stackrec/hangs.h"
#include "tools/stackrec/paytab.h"
#include "tools/stackrec/strtab.h"
#include "tools/stackrec/timeline.h"

/* ---- the builder ------------------------------------------------------------ */

/* Level 1, for the process being read: (session, site id, stack id,
 * thread id) -> its merged stack. The keys are in an array, found by
 * their hash (raw_hash) through a stkr_index. Emptied when the reader
 * moves on to the next process (it never comes back to one), so it holds
 * one process's keys at a time. */
typedef struct raw {
  uint32_t session, site_id, stack_id, thread_id;
  uint64_t phash; /* by_payload: the payload's hash (else 0) */
  size_t merged; /* index into a->stacks */
} raw;

/* Level 0, in front of level 1 when events key by ids alone (no by_thread,
 * no by_payload: the default): indexed by stack id, since the flush worker
 * numbers a session's stacks 1, 2, 3...; a hit costs one compare instead
 * of level 1's hash and probe. Ids past STKR_AGG_DENSE_MAX (a hostile or
 * odd file) just take level 1, so its size stays bounded. */
#define STKR_AGG_DENSE_MAX 65536
typedef struct dense_key {
  uint32_t session, site_id;
  size_t merged; /* index + 1 into a->stacks; 0 = empty */
} dense_key;

/* What the builder keeps per merged stack, beside a->stacks[i]. */
typedef struct stack_aux {
  /* Looked up once when the stack is made rather than per event (the
   * per-event site lookups were a sixth of report's time): its site's
   * timeline counters, and whether its site is the watchdog's. */
  uint64_t *tl;
  size_t list;         /* its frame list (agg_framelist.h) */
  uint32_t last_proc;  /* process + 1 it was last seen in */
  bool hangs;
} stack_aux;

typedef struct builder {
  const stkr_agg_opts *o;
  stkr_agg *a;
  stkr__strtab strs;
  size_t cur_process; /* the process being read (raws are its keys) */
  raw *raws;            /* level 1's keys (raw_n of them) */
  size_t raw_cap, raw_n;
  stkr_index raw_idx;   /* raw_hash -> index in raws */
  dense_key *dense; /* level 0, this process's */
  size_t dense_cap;
  /* Level 2: every distinct stack (a->stacks), indexed by content. */
  size_t stack_cap;
  stack_aux *aux;      /* per a->stacks[i] (stack_cap of them) */
  stkr__framelists *fl; /* == a->framelists_ */
  stkr_map pids;        /* by_process: pid -> processes of that pid */
  bool pids_counted;
  stkr_index cidx;     /* content hash -> index in a->stacks */
  stkr_frame *tmp;     /* the frames of the key being added */
  bool tmp_bare;       /* made from its PCs (stkr_agg_stack.bare) */
  size_t tmp_cap;
  stkr__filter filt;  /* --site, --thread, --from/--to (filter.h) */
  stkr__paytab *pay;  /* payloads per site (paytab.h) */
  stkr__timeline *tl; /* events per site over time (timeline.h) */
  stkr__agg_runs runs; /* their time line (agg_runs.h) */
  stkr_agg_images imgs; /* to place the PCs of unsymbolized stacks */
  stkr__agg_marks marks; /* the marks kept (agg_marks.h) */
  /* A bit by process index: an event of it passed the filters (for
   * a->n_processes_with_events). */
  uint8_t *proc_counted;
  size_t proc_counted_bytes;
  /* Frames by (process, image, offset), from symbolized stacks, for the
   * unsymbolized ones (agg_learn.h); b->borrow holds one stack's. */
  stkr__learned learned;
  stkr_frame *borrow;
  size_t borrow_cap;
} builder;

/* Frames f[0..n) (interned) into b->tmp, --app-only applied
 * (stkr_agg_app_frames). f may be b->tmp itself.
 * @return the number kept. */
static long keep_frames(builder *b, const stkr_frame *f, size_t n) {
  if (!b->o->app_only) {
    if (f != b->tmp) memcpy(b->tmp, f, n * sizeof *f);
    return (long)n;
  }
  return (long)stkr_agg_app_frames(f, n, b->tmp);
}

/* The raw frames in b->tmp[0..n) (one per PC, placed in images) with the
 * frames this process's symbolized stacks gave each of them, into
 * b->borrow (agg_learn.h: a recovered stack of an in-process recording).
 * @return their number, 0 when some PC was never resolved, or -ENOMEM. */
static long borrow_frames(builder *b, size_t process, size_t n) {
  size_t m = 0, i, c;

  for (i = 0; i < n; i++) {
    const stkr_frame *f = stkr__learned_find(
        &b->learned, process, b->tmp[i].image, b->tmp[i].offset,
        b->tmp[i].async, &c);
    if (f == NULL)
      return 0;
    if (stkr_grow((void **)&b->borrow, &b->borrow_cap, m + c,
                  sizeof *b->borrow) != 0)
      return -ENOMEM;
    memcpy(&b->borrow[m], f, c * sizeof *f);
    m += c;
  }
  return (long)m;
}

/* The current event's frames (app-only applied) into b->tmp.
 * @return the number of frames, or -ENOMEM. */
static long take_frames(builder *b, stkr_reader *r,
                        const stkr_event_view *ev) {
  const stkr_frame *f;
  size_t n, i;
  long m;

  b->tmp_bare = false;
  if (stkr_reader_frames(r, &f, &n) != 0)
    return -ENOMEM;
  if (stkr_grow((void **)&b->tmp, &b->tmp_cap, n ? n : ev->n_pcs,
           sizeof *b->tmp) != 0)
    return -ENOMEM;
  if (n == 0) {
    /* Unsymbolized (offline/none mode, or recovered): one frame per PC,
     * placed in its image when the recording's image list has it, so the
     * label (image+offset) is the same in every process and run of a
     * build. Whether a frame is the app's is not known: --app-only keeps
     * all. */
    for (i = 0; i < ev->n_pcs; i++) {
      /* An async resume PC carries a marker bit: the address is below. */
      const uint64_t pc = ev->pcs[i] & ~STKR_PC_ASYNC;
      const stkr_image_info *im =
          stkr_agg_image_of(&b->imgs, r, ev->process, pc);
      stkr_frame *c = &b->tmp[i];

      memset(c, 0, sizeof *c);
      c->pc = pc;
      c->offset = pc;
      c->async = (ev->pcs[i] & STKR_PC_ASYNC) != 0;
      if (im != NULL) {
        if ((c->image = stkr__strtab_intern(&b->strs, im->path)) == NULL)
          return -ENOMEM;
        c->offset = pc - im->load_address;
      }
    }
    /* Every PC resolved in an earlier stack of this process: its frames. */
    if ((m = borrow_frames(b, ev->process, ev->n_pcs)) < 0)
      return m;
    if (m == 0) {
      b->tmp_bare = ev->n_pcs > 0;
      return (long)ev->n_pcs;
    }
    /* More frames than PCs where calls were inlined. */
    if (stkr_grow((void **)&b->tmp, &b->tmp_cap, (size_t)m,
                  sizeof *b->tmp) != 0)
      return -ENOMEM;
    return keep_frames(b, b->borrow, (size_t)m);
  }
  for (i = 0; i < n; i++) {
    stkr_frame c = f[i];
    c.function = stkr__strtab_intern(&b->strs, c.function);
    c.file = stkr__strtab_intern(&b->strs, c.file);
    c.image = stkr__strtab_intern(&b->strs, c.image);
    if ((f[i].function && !c.function) || (f[i].file && !c.file) ||
        (f[i].image && !c.image))
      return -ENOMEM;
    b->tmp[i] = c;
  }
  if (stkr__learn_frames(&b->learned, ev->process, b->tmp, n) != 0)
    return -ENOMEM;
  return keep_frames(b, b->tmp, n);
}

/* Is pid the pid of more than one process of the reader (read once: the
 * reader knows its processes before the first event)? @return 1, 0, or
 * -ENOMEM. */
static int pid_shared(builder *b, stkr_reader *r, uint32_t pid) {
  uint64_t *v;
  size_t i, n = stkr_reader_process_count(r);

  if (!b->pids_counted) {
    for (i = 0; i < n; i++) {
      const stkr_process_info *p = stkr_reader_process(r, i);
      int err = stkr_map_add(&b->pids, p->pid, &v);
      if (err < 0)
        return err;
      (*v)++;
    }
    b->pids_counted = true;
  }
  v = stkr_map_find(&b->pids, pid);
  return v != NULL && *v > 1;
}

/* The merged stack (index) with the current event's content, made if new.
 * Runs once per new level-1 key, not per event. */
static int merged_stack(builder *b, stkr_reader *r, const stkr_event_view *ev,
                        size_t *out) {
  stkr_agg *a = b->a;
  const char *site = stkr__strtab_intern(&b->strs, ev->site), *thread = NULL;
  uint32_t proc = (uint32_t)ev->process + 1;
  stkr_agg_stack *s;
  long n = take_frames(b, r, ev);
  stkr__agg_extra x = {0};
  uint64_t h;
  size_t i, pos;

  if (site == NULL || n < 0)
    return -ENOMEM;
  if (b->o->by_thread && (thread = stkr__strtab_intern(&b->strs, ev->thread_name)) == NULL)
    return -ENOMEM;
  if (b->o->by_process) {
    /* The process by its reader index, named at the end: its name as read
     * so far changes at an exec ("bash", then "bash > git"), and named so
     * here one process made two rows (QA, session 29). */
    char key[32];
    int shared = pid_shared(b, r, ev->pid);
    snprintf(key, sizeof key, "%c%zu", STKR__AGG_PROC_KEY, ev->process);
    x.pid = ev->pid;
    if (shared < 0 || (x.process = stkr__strtab_intern(&b->strs, key)) == NULL ||
        (shared && ev->proc->dir != NULL &&
         (x.process_dir = stkr__strtab_intern(&b->strs, ev->proc->dir)) == NULL))
      return -ENOMEM;
  }
  if (b->o->by_payload) {
    x.payload = ev->payload;
    x.payload_len = ev->payload_len;
    x.payload_truncated = ev->payload_truncated;
  }
  h = stkr__agg_content_hash(site, thread, &x, b->tmp, (size_t)n,
                             b->o->granularity);
  for (size_t k = stkr_index_first(&b->cidx, h, &pos); k != STKR_INDEX_NONE;
       k = stkr_index_next(&b->cidx, h, &pos)) {
    s = &a->stacks[k];
    if (s->site != site || s->thread != thread ||
        s->n_frames != (size_t)n || !stkr__agg_extra_equal(s, &x) ||
        stkr__agg_cmp_frames(s->frames, s->n_frames, b->tmp, (size_t)n,
                             b->o->granularity) != 0)
      continue;
    if (stkr__agg_reconcile_needed(s->frames, b->tmp, (size_t)n)) {
      /* Changed for this stack alone: a list others share is copied. */
      if (stkr__framelists_own(b->fl, &b->aux[k].list) != 0)
        return -ENOMEM;
      s->frames = b->fl->lists[b->aux[k].list].v;
      stkr__agg_reconcile(b->fl->lists[b->aux[k].list].v, b->tmp, (size_t)n);
    }
    s->truncated = s->truncated || ev->stack_truncated;
    /* A tid names a thread within its process only: the same tid in two
     * processes (containers, pid namespaces, merged recordings) is two. */
    s->several_tids = s->several_tids ||
                      (b->o->by_thread &&
                       (s->tid != ev->tid || s->tid_proc != proc));
    /* The reader goes process by process: a process not seen last is new
     * to this stack. */
    if (b->aux[k].last_proc != proc) {
      b->aux[k].last_proc = proc;
      s->n_pids++;
    }
    *out = k;
    return 0;
  }
  i = a->n_stacks;
  if (i + 1 > b->stack_cap) {
    size_t cap = b->stack_cap;
    stack_aux *na;

    if (stkr_grow((void **)&a->stacks, &cap, i + 1, sizeof *a->stacks) != 0 ||
        (na = realloc(b->aux, cap * sizeof *na)) == NULL)
      return -ENOMEM;
    b->aux = na;
    b->stack_cap = cap;
  }
  s = &a->stacks[i];
  memset(s, 0, sizeof *s);
  if ((b->aux[i].list = stkr__framelists_get(b->fl, b->tmp, (size_t)n)) ==
      (size_t)-1)
    return -ENOMEM;
  s->frames = b->fl->lists[b->aux[i].list].v;
  s->n_frames = (size_t)n;
  s->site = site;
  s->thread = thread;
  s->pid = x.pid;
  s->process = x.process;
  s->process_dir = x.process_dir;
  s->payload_truncated = x.payload_truncated;
  if (x.payload_len > 0) {
    uint8_t *copy = malloc(x.payload_len);
    if (copy == NULL)
      return -ENOMEM;
    memcpy(copy, x.payload, x.payload_len);
    s->payload = copy;
    s->payload_len = x.payload_len;
  }
  s->tid = b->o->by_thread ? ev->tid : 0;
  s->tid_proc = b->o->by_thread ? proc : 0;
  s->n_pids = 1;
  s->truncated = ev->stack_truncated;
  s->bare = b->tmp_bare;
  b->aux[i].last_proc = proc;
  b->aux[i].tl = NULL;
  b->aux[i].hangs = stkr__hangs_site(site);
  if (!b->o->no_site_details &&
      (b->aux[i].tl = stkr__timeline_counters(b->tl, site)) == NULL)
    return -ENOMEM;
  a->n_stacks++;
  if (stkr_index_add(&b->cidx, h, i) != 0)
    return -ENOMEM;
  *out = i;
  return 0;
}

/* A level-1 key's hash (stkr_index spreads it with stkr_mix64). */
static uint64_t raw_hash(uint32_t session, uint32_t site, uint32_t stack,
                         uint32_t thread, uint64_t phash) {
  return ((uint64_t)site << 32 | stack) ^
         ((uint64_t)session << 32 | thread) * 0x9E3779B97F4A7C15ull ^ phash;
}

/* The reader moved on to another process: the last one's keys are never
 * seen again, so level 1 starts empty. */
static void new_process(builder *b, size_t process) {
  free(b->raws);
  b->raws = NULL;
  b->raw_cap = b->raw_n = 0;
  stkr_index_free(&b->raw_idx);
  free(b->dense);
  b->dense = NULL;
  b->dense_cap = 0;
  b->cur_process = process;
}

/* The event's payload and time go to its site's counts. */
static int count_payload(builder *b, size_t merged,
                         const stkr_event_view *ev) {
  uint64_t t_ns;
  int err;

  if (b->o->no_site_details)
    return 0;
  if (!stkr__agg_runs_offset(&b->runs, ev->process, ev->proc, ev->ts_ns,
                             &t_ns))
    t_ns = stkr__filter_offset(&b->filt, ev);
  stkr__timeline_count(b->tl, b->aux[merged].tl, t_ns);
  if (b->aux[merged].hangs && /* the watchdog's site (hangs.c) */
      (err = stkr__hangs_add(b->a->hangs_, ev, merged, t_ns)) != 0)
    return err;
  if (ev->payload_len == 0)
    return 0;
  return stkr__paytab_add(b->pay, b->a->stacks[merged].site, ev->payload,
                          ev->payload_len, ev->payload_truncated);
}

/* A level-1 key matches the event: same ids, and with by_payload the same
 * payload (its merged stack holds the bytes). */
static bool raw_matches(const builder *b, const raw *w, uint32_t session,
                        uint32_t site, uint32_t stack, uint32_t thread,
                        uint64_t phash, const stkr_event_view *ev) {
  const stkr_agg_stack *s;

  if (w->stack_id != stack || w->site_id != site || w->thread_id != thread ||
      w->session != session || w->phash != phash)
    return false;
  if (!b->o->by_payload)
    return true;
  s = &b->a->stacks[w->merged];
  return s->payload_len == ev->payload_len &&
         s->payload_truncated == ev->payload_truncated &&
         (ev->payload_len == 0 ||
          memcmp(s->payload, ev->payload, ev->payload_len) == 0);
}

/* Level 0 remembers (session, site) -> merged for `stack` (see dense_key;
 * the last key seen for a stack id wins: a session restart or another
 * site with the same id just takes level 1 again). */
static int dense_put(builder *b, uint32_t session, uint32_t site,
                     uint32_t stack, size_t merged) {
  if (stack >= b->dense_cap) {
    size_t old = b->dense_cap;

    if (stkr_grow((void **)&b->dense, &b->dense_cap, (size_t)stack + 1,
                  sizeof *b->dense) != 0)
      return -ENOMEM;
    memset(b->dense + old, 0, (b->dense_cap - old) * sizeof *b->dense);
  }
  b->dense[stack].session = session;
  b->dense[stack].site_id = site;
  b->dense[stack].merged = merged + 1;
  return 0;
}

/* Count the event: one hash probe on its ids, except for a new key. Its
 * merged stack's index goes to *merged. */
static int count_event(builder *b, stkr_reader *r, const stkr_event_view *ev,
                       size_t *merged) {
  /* Undefined ids key as 0: a file may hold any number of bogus ones. */
  uint32_t session = ev->proc->sessions;
  uint32_t site = ev->site_undefined ? 0 : ev->site_id;
  uint32_t stack = ev->stack_undefined ? 0 : ev->stack_id;
  uint32_t thread =
      b->o->by_thread && !ev->thread_undefined ? ev->thread_id : 0;
  uint64_t phash = 0, h;
  size_t ix, pos;
  raw *w;
  int err;

  bool dense = !b->o->by_thread && !b->o->by_payload &&
               stack < STKR_AGG_DENSE_MAX;

  if (dense && stack < b->dense_cap && b->dense[stack].merged != 0 &&
      b->dense[stack].session == session && b->dense[stack].site_id == site) {
    *merged = b->dense[stack].merged - 1;
    b->a->stacks[*merged].count++;
    return count_payload(b, *merged, ev);
  }
  if (b->o->by_payload && ev->payload_len > 0)
    phash = stkr_mix64(stkr_hash_bytes(ev->payload_truncated, ev->payload,
                             ev->payload_len)) | 1;
  h = raw_hash(session, site, stack, thread, phash);
  for (ix = stkr_index_first(&b->raw_idx, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&b->raw_idx, h, &pos)) {
    w = &b->raws[ix];
    if (raw_matches(b, w, session, site, stack, thread, phash, ev)) {
      *merged = w->merged;
      b->a->stacks[*merged].count++;
      if (dense && (err = dense_put(b, session, site, stack, *merged)) != 0)
        return err;
      return count_payload(b, *merged, ev);
    }
  }
  if ((err = merged_stack(b, r, ev, merged)) != 0)
    return err;
  b->a->stacks[*merged].count++;
  if ((err = count_payload(b, *merged, ev)) != 0)
    return err;
  if (stkr_grow((void **)&b->raws, &b->raw_cap, b->raw_n + 1,
                sizeof *b->raws) != 0 ||
      stkr_index_add(&b->raw_idx, h, b->raw_n) != 0)
    return -ENOMEM;
  w = &b->raws[b->raw_n++];
  w->phash = phash;
  w->session = session;
  w->site_id = site;
  w->stack_id = stack;
  w->thread_id = thread;
  w->merged = *merged;
  return dense ? dense_put(b, session, site, stack, *merged) : 0;
}

/* ---- build ---------------------------------------------------------------- */

/* Everything read: names, site groups, distinct counts, payload tables and
 * timelines attached, marks placed, process sums. @return 0 or -ENOMEM. */
static int finish(builder *b, stkr_reader *r) {
  int err = 0;

  if (b->o->by_process)
    err = stkr__agg_name_processes(b->a, r, &b->strs);
  if (err == 0)
    err = stkr__agg_group_sites(b->a);
  if (err == 0)
    err = stkr__agg_count_distinct(b->a);
  if (err == 0)
    err = stkr__paytab_attach(b->pay, b->a->sites, b->a->n_sites);
  if (err != 0)
    return err;
  stkr__timeline_attach(b->tl, b->a);
  stkr__agg_marks_resolve(&b->marks, b->a, r, b->cur_process);
  b->a->timeline_trees = stkr__agg_runs_trees(
      &b->runs, b->proc_counted, b->proc_counted_bytes, b->a->marks,
      b->a->n_marks);
  stkr__agg_sum_processes(b->a, r, &b->runs);
  return 0;
}

int stkr_agg_build(stkr_reader *r, const stkr_agg_opts *opts,
                   void (*progress)(uint64_t events, void *arg),
                   void *progress_arg, stkr_agg **out) {
  static const stkr_agg_opts none;
  builder b;
  stkr_event_view ev;
  int rc, err = 0;

  if (r == NULL || out == NULL)
    return -EINVAL;
  *out = NULL;
  memset(&b, 0, sizeof b);
  b.cur_process = SIZE_MAX;
  b.o = opts ? opts : &none;
  if (stkr__filter_init(&b.filt, b.o) != 0)
    return -EINVAL;
  if ((unsigned)b.o->granularity > STKR_AGG_BY_ADDRESS)
    return -EINVAL;
  b.a = calloc(1, sizeof *b.a);
  if (b.a == NULL)
    return -ENOMEM;
  b.a->granularity = b.o->granularity;
  b.a->filtered = b.o->site_glob || b.o->thread_glob || b.o->from_s > 0 ||
                  b.o->to_s > 0 || b.o->app_only;
  b.pay = stkr__paytab_create();
  b.tl = stkr__timeline_create();
  b.a->payloads_ = b.pay;
  b.a->timeline_ = b.tl;
  b.a->hangs_ = stkr__hangs_create();
  b.a->framelists_ = b.fl = calloc(1, sizeof *b.fl);
  if (b.pay == NULL || b.tl == NULL || b.a->hangs_ == NULL || b.fl == NULL) {
    stkr_agg_free(b.a);
    return -ENOMEM;
  }
  b.fl->share = b.o->by_thread || b.o->by_process || b.o->by_payload;
  if (!b.o->no_site_details && stkr__agg_runs_init(&b.runs, r) != 0) {
    stkr_agg_free(b.a);
    return -ENOMEM;
  }

  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    size_t merged;
    int pass;

    if (ev.process != b.cur_process) {
      stkr__agg_marks_resolve(&b.marks, b.a, r, b.cur_process);
      new_process(&b, ev.process);
    }
    if (ev.is_mark) {
      /* Not an event: no count, stack or payload row (the timelines show
       * marks apart, stkr_agg.marks). */
      if ((err = stkr__agg_marks_add(&b.marks, b.a, &b.strs, &ev)) != 0)
        break;
      if (b.o->on_event != NULL &&
          (err = b.o->on_event(b.o->on_event_arg, b.a, &ev, STKR_AGG_MARK)) != 0)
        break;
      continue;
    }
    b.a->events_read++;
    if (progress != NULL && (b.a->events_read & 0xFFFFF) == 0)
      progress(b.a->events_read, progress_arg);
    if ((pass = stkr__filter_pass(&b.filt, &ev)) < 0) {
      err = pass;
      break;
    }
    if (pass == 0)
      continue;
    b.a->events++;
    if ((pass = stkr_bit_set(&b.proc_counted, &b.proc_counted_bytes,
                             (uint32_t)ev.process)) < 0) {
      err = pass;
      break;
    }
    b.a->n_processes_with_events += (size_t)pass;
    if ((err = count_event(&b, r, &ev, &merged)) != 0)
      break;
    if (b.o->on_event != NULL &&
        (err = b.o->on_event(b.o->on_event_arg, b.a, &ev, merged)) != 0)
      break;
  }
  if (err == 0 && rc < 0)
    err = rc;
  if (err == 0)
    err = finish(&b, r);
  new_process(&b, SIZE_MAX); /* frees level 1 */
  stkr__filter_free(&b.filt);
  free(b.aux);
  stkr_map_free(&b.pids);
  stkr_index_free(&b.cidx);
  free(b.tmp);
  stkr_agg_images_free(&b.imgs);
  stkr__agg_marks_free(&b.marks);
  stkr__agg_runs_free(&b.runs);
  free(b.proc_counted);
  stkr__learned_free(&b.learned);
  free(b.borrow);
  /* The strings live as long as the aggregation: park the table in it. */
  if (err == 0 && (b.a->strs_ = malloc(sizeof b.strs)) == NULL)
    err = -ENOMEM;
  if (err != 0) {
    stkr_agg_free(b.a);
    stkr__strtab_free(&b.strs);
    return err;
  }
  memcpy(b.a->strs_, &b.strs, sizeof b.strs);
  *out = b.a;
  return 0;
}

void stkr_agg_free(stkr_agg *a) {
  if (a == NULL)
    return;
  STKR_FREE_EACH(a->sites, a->n_sites, stacks);
  STKR_FREE_EACH(a->stacks, a->n_stacks, payload);
  stkr__framelists_free(a->framelists_);
  stkr__paytab_free(a->payloads_);
  stkr__timeline_free(a->timeline_);
  stkr__hangs_free(a->hangs_);
  STKR_FREE_ALL(a->framelists_, a->marks, a->sites, a->stacks);
  if (a->strs_ != NULL) {
    stkr__strtab_free(a->strs_);
    free(a->strs_);
  }
  free(a);
}
