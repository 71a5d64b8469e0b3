/*
 * batch.c: one Stackrec__Batch built from drained records.
 *
 * The builder owns growable arrays for the event columns and the
 * definitions; stkr__batch_reset() empties them without freeing, so in the
 * steady state the worker does no allocation per event (only amortized
 * growth when a batch is bigger than every earlier one). Definitions point
 * into memory that outlives the batch (StackDef PCs into the stack table's
 * arena, SiteDef names into the recorder's site table), except thread names,
 * which are copied because a reaped thread's memory is gone by the time the
 * batch is encoded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_notify.h"
#include "flush/flush_internal.h"

void stkr__batch_init(stkr__batchb *b) {
  memset(b, 0, sizeof *b);
  stkr__batch_reset(b);
}

void stkr__batch_free(stkr__batchb *b) {
  STKR_FREE_ALL(b->ts_delta, b->site_id, b->thread_id, b->stack_id,
                b->payload_len, b->ptrunc, b->pdata, b->sites, b->site_ptrs,
                b->threads, b->thread_ptrs, b->stacks, b->stack_ptrs, b->drops,
                b->drop_ptrs, b->ring_pos, b->ring_pos_ptrs);
  stkr__symdefs_free(&b->symdefs);
  memset(b, 0, sizeof *b);
}

void stkr__batch_reset(stkr__batchb *b) {
  static const Stackrec__Batch batch0 = STACKREC__BATCH__INIT;
  static const Stackrec__Header header0 = STACKREC__HEADER__INIT;
  static const Stackrec__Config config0 = STACKREC__CONFIG__INIT;
  static const Stackrec__ClockSync clock0 = STACKREC__CLOCK_SYNC__INIT;
  static const Stackrec__Events events0 = STACKREC__EVENTS__INIT;
  static const Stackrec__Counters counters0 = STACKREC__COUNTERS__INIT;
  b->batch = batch0;
  b->header = header0;
  b->config = config0;
  b->clock = clock0;
  b->events = events0;
  b->counters = counters0;
  b->n = 0;
  b->n_ptrunc = 0;
  b->pdata_len = 0;
  b->any_payload = false;
  b->any_unsited = false;
  b->last_ts = 0;
  b->est_bytes = 64;
  b->n_sites = b->n_threads = b->n_stacks = b->n_drops = 0;
  b->n_ring_pos = 0;
  stkr__symdefs_reset(&b->symdefs);
}

bool stkr__batch_nonempty(const stkr__batchb *b) {
  return b->n || b->n_threads || b->n_drops || b->n_sites || b->n_stacks;
}

int stkr__batch_grow(stkr__batchb *b, size_t len, bool truncated) {
  size_t need = b->n + 1, cap = b->cap;
  /* All columns share one capacity; grow them together. */
  if (need > cap) {
    void **cols[] = {(void **)&b->ts_delta, (void **)&b->site_id,
                     (void **)&b->thread_id, (void **)&b->stack_id,
                     (void **)&b->payload_len};
    const size_t sizes[] = {sizeof *b->ts_delta, sizeof *b->site_id,
                            sizeof *b->thread_id, sizeof *b->stack_id,
                            sizeof *b->payload_len};
    size_t c = cap;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
      c = cap;
      if (stkr_grow(cols[i], &c, need, sizes[i])) return -ENOMEM;
    }
    b->cap = c;
  }
  if (stkr_grow((void **)&b->pdata, &b->pdata_cap, b->pdata_len + len, 1))
    return -ENOMEM;
  if (truncated && stkr_grow((void **)&b->ptrunc, &b->cap_ptrunc,
                             b->n_ptrunc + 1, sizeof *b->ptrunc))
    return -ENOMEM;
  return 0;
}

/* Room for `need` entries in a list protobuf-c wants twice: the messages
 * (defs, elements of def_size bytes) and the pointers to them (ptrs),
 * which share one capacity *cap. @return 0 or -ENOMEM (then *cap is
 * unchanged; an array that did grow is only larger than it says). */
static int grow_pair(void **defs, void **ptrs, size_t *cap, size_t need,
                     size_t def_size) {
  size_t c = *cap;

  if (stkr_grow(defs, &c, need, def_size) != 0) return -ENOMEM;
  c = *cap;
  if (stkr_grow(ptrs, &c, need, sizeof(void *)) != 0) return -ENOMEM;
  *cap = c;
  return 0;
}

/* Append one message to such a list: grow both arrays, count it in *n,
 * and set it to `init` (def_size bytes: the message's __INIT value).
 * @return the new element, or NULL when out of memory (nothing appended).
 * The pointers are filled in by stkr__batch_finish: the array may move. */
static void *push_def(void **defs, void **ptrs, size_t *cap, size_t *n,
                      size_t def_size, const void *init) {
  void *d;

  if (grow_pair(defs, ptrs, cap, *n + 1, def_size) != 0) return NULL;
  d = (char *)*defs + (*n)++ * def_size;
  memcpy(d, init, def_size);
  return d;
}

/* push_def on the batch's list `list` (b->list, b->ptrs, b->cap_list,
 * b->n_list), whose messages start as *init. */
#define PUSH_DEF(b, list, ptrs, init)                                          \
  push_def((void **)&(b)->list, (void **)&(b)->ptrs, &(b)->cap_##list,        \
           &(b)->n_##list, sizeof *(b)->list, (init))

int stkr__batch_add_site(stkr__batchb *b, uint32_t id, const char *name) {
  static const Stackrec__SiteDef def0 = STACKREC__SITE_DEF__INIT;
  Stackrec__SiteDef *d = PUSH_DEF(b, sites, site_ptrs, &def0);
  if (d == NULL) return -ENOMEM;
  d->id = id;
  d->name = (char *)(name ? name : "");
  b->est_bytes += 16 + strlen(d->name);
  return 0;
}

int stkr__batch_add_thread(stkr__batchb *b, uint32_t id, uint64_t tid,
                           const char *name, bool exited) {
  static const stkr__tdef def0 = {.def = STACKREC__THREAD_DEF__INIT};
  stkr__tdef *t = PUSH_DEF(b, threads, thread_ptrs, &def0);
  if (t == NULL) return -ENOMEM;
  t->def.id = id;
  t->def.tid = tid;
  snprintf(t->name, sizeof t->name, "%s", name ? name : "");
  t->def.exited = exited;
  /* def.name is pointed at t->name in stkr__batch_finish: the array may
   * still move when it grows. */
  b->est_bytes += 32 + sizeof t->name;
  return 0;
}

int stkr__batch_add_stack(stkr__batchb *b, uint32_t id, const stkr__stack *st) {
  static const Stackrec__StackDef def0 = STACKREC__STACK_DEF__INIT;
  Stackrec__StackDef *d = PUSH_DEF(b, stacks, stack_ptrs, &def0);
  if (d == NULL) return -ENOMEM;
  d->id = id;
  d->n_pcs = st->depth;
  d->pcs = (uint64_t *)st->pcs; /* arena memory, stable; never written */
  d->hash = st->hash;
  d->truncated = st->truncated;
  d->site_id = st->site;
  d->n_frames = st->n_frames;
  d->frames = (uint32_t *)st->frames; /* the symbolizer's, stable */
  b->est_bytes += 24 + (size_t)st->depth * 10 + (size_t)st->n_frames * 4;
  return 0;
}

int stkr__batch_add_ring_pos(stkr__batchb *b, uint32_t thread_id,
                             uint64_t end) {
  static const Stackrec__RingPos pos0 = STACKREC__RING_POS__INIT;
  Stackrec__RingPos *p = PUSH_DEF(b, ring_pos, ring_pos_ptrs, &pos0);
  if (p == NULL) return -ENOMEM;
  p->thread_id = thread_id;
  p->end = end;
  return 0;
}

int stkr__batch_add_drops(stkr__batchb *b, uint32_t thread_id,
                          uint64_t ring_full, uint64_t reentrant,
                          uint64_t other) {
  static const Stackrec__Drops def0 = STACKREC__DROPS__INIT;
  Stackrec__Drops *d = PUSH_DEF(b, drops, drop_ptrs, &def0);
  if (d == NULL) return -ENOMEM;
  d->thread_id = thread_id;
  d->ring_full = ring_full;
  d->reentrant = reentrant;
  d->other = other;
  b->est_bytes += 40;
  return 0;
}

void stkr__batch_finish(stkr__batchb *b) {
  Stackrec__Events *e = &b->events;
  for (size_t i = 0; i < b->n_sites; i++) b->site_ptrs[i] = &b->sites[i];
  for (size_t i = 0; i < b->n_threads; i++) {
    b->threads[i].def.name = b->threads[i].name;
    b->thread_ptrs[i] = &b->threads[i].def;
  }
  for (size_t i = 0; i < b->n_stacks; i++) b->stack_ptrs[i] = &b->stacks[i];
  for (size_t i = 0; i < b->n_drops; i++) b->drop_ptrs[i] = &b->drops[i];
  for (size_t i = 0; i < b->n_ring_pos; i++)
    b->ring_pos_ptrs[i] = &b->ring_pos[i];
  b->batch.n_ring_pos = b->n_ring_pos;
  b->batch.ring_pos = b->ring_pos_ptrs;
  b->batch.n_sites = b->n_sites;
  b->batch.sites = b->site_ptrs;
  b->batch.n_threads = b->n_threads;
  b->batch.threads = b->thread_ptrs;
  b->batch.n_stacks = b->n_stacks;
  b->batch.stacks = b->stack_ptrs;
  b->batch.n_drops = b->n_drops;
  b->batch.drops = b->drop_ptrs;
  b->batch.n_strings = b->symdefs.n_strings;
  b->batch.strings = b->symdefs.strings;
  b->batch.n_frames = b->symdefs.n_frames;
  b->batch.frames = b->symdefs.frames;

  e->n_ts_delta_ns = b->n;
  e->ts_delta_ns = b->ts_delta;
  /* Every stack is keyed by its site (stacktable.c), so the site column is
   * redundant unless some event has no stack (worker out of memory). */
  e->n_site_id = b->any_unsited ? b->n : 0;
  e->site_id = b->site_id;
  e->n_thread_id = b->n;
  e->thread_id = b->thread_id;
  e->n_stack_id = b->n;
  e->stack_id = b->stack_id;
  /* The schema: an empty payload_len column means "no payloads at all",
   * which saves one varint per event in the common payload-less case. */
  e->n_payload_len = b->any_payload ? b->n : 0;
  e->payload_len = b->payload_len;
  e->payload_data.len = b->pdata_len;
  e->payload_data.data = b->pdata_len ? b->pdata : NULL;
  e->n_payload_truncated = b->n_ptrunc;
  e->payload_truncated = b->ptrunc;
  b->batch.events = b->n ? e : NULL;
}

const char *stkr__symbolize_mode_name(stkr_symbolize_mode m) {
  switch (m) {
  case STKR_SYMBOLIZE_INPROC: return "inproc";
  case STKR_SYMBOLIZE_OFFLINE: return "offline";
  case STKR_SYMBOLIZE_NONE: return "none";
  }
  return "";
}

bool stkr__app_path_match(const char *prefixes, const char *path) {
  const char *p = prefixes;
  if (!p || !path) return false;
  while (*p) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len && strncmp(path, p, len) == 0) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

void stkr__process_name(char *buf, size_t len) {
  if (len == 0) return;
  buf[0] = '\0';
#ifdef __linux__
  extern char *program_invocation_short_name; /* glibc and musl */
  /* /proc/self/comm is what `ps` shows (and follows prctl(PR_SET_NAME) on
   * the main thread), as in record's notes; else argv[0]'s basename. */
  stkr_notify_comm(buf, len);
  if (buf[0]) return;
  snprintf(buf, len, "%s",
           program_invocation_short_name ? program_invocation_short_name : "");
#else
  snprintf(buf, len, "%s", getprogname() ? getprogname() : "");
#endif
}
