/*
 * event.c: the hot path (stkr_event) and the recorder's on/off switch.
 *
 * stkr_event() does, in order: one relaxed load of the state word, the TLS
 * load of this thread's state, a re-entrancy check, the site id (already
 * registered: one acquire load), a reservation in the thread's ring large
 * enough for max_depth frames, the clock, the frame-pointer walk straight
 * into the reserved record (hashing as it goes), the stack's key and its
 * slot in the thread's known-stack table, the payload copy, and the
 * release store that publishes the record. No lock, no malloc, no system
 * call but the clock.
 *
 * Stacks once per thread (common/stkr_ringfile.h, "Records"): a stack
 * whose key the table holds is sent as a 24-byte known record (the worker
 * keeps its PCs); a new one as a full record, after whose commit the table
 * learns its key. The walk writes the PCs into the reservation either way
 * (no copy for a new stack); a known record then simply ends before them.
 * Payloads likewise ("Payloads" there): a payload the thread's payload
 * table holds is sent as its slot, without bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"
#include "recorder/walk_body.h"

enum {
  STKR__OFF = 0,
  STKR__RUNNING = 1,
  STKR__FORK_PENDING = 2, /* forked child, follow mode, not started yet */
  STKR__STARTING = 3      /* forked child, restart in progress */
};

/* Written by the controlling thread (start/stop) and the atfork child
 * handler. g_conf and the callbacks are written before the release store
 * of RUNNING; stkr_event acquire-loads the state before reading them (an
 * acquire load is a plain load on x86_64 and an ldar on arm64). */
static _Atomic int g_state;
static stkr__rconf g_conf;
bool stkr__unwind_wanted; /* g_conf.unwind_tables where supported */
static stkr__wake_fn g_wake;
static void *g_wake_arg;
static stkr__fork_fn g_on_fork;
/* Whether producers need a real fence for the Dekker pair with stop (no
 * membarrier(2): Apple, old kernels, seccomp). Written at start while no
 * producer records; relaxed: it only picks which fence to use, and a
 * producer that read it from a previous session sees the same value. */
static _Atomic bool g_producer_fence;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void stkr__atfork_child(void) {
  int state = atomic_load_explicit(&g_state, memory_order_relaxed);

  /* The parent's worker does not exist here, and its wake channel (an
   * eventfd shared with the parent) must never be poked from the child. */
  g_wake = NULL;
  g_wake_arg = NULL;
  stkr__start_after_fork();
  stkr__sites_after_fork();
  stkr__clock_forget_after_fork();
  stkr__threads_forget_after_fork();
  stkr__count_late_calls(false);
  /* A child that has not recorded yet (FORK_PENDING) passes follow mode
   * on to its own children: a double-forked daemon's events were lost. */
  if ((state == STKR__RUNNING || state == STKR__FORK_PENDING) &&
      g_on_fork != NULL)
    atomic_store_explicit(&g_state, STKR__FORK_PENDING, memory_order_release);
  else
    atomic_store_explicit(&g_state, STKR__OFF, memory_order_release);
}

/* Once per process, at its first start (a control thread, never a hook's:
 * dlopen takes the loader's lock). */
static void stkr__atfork_install(void) {
  /* The reap lock is held across a fork by flush/'s handlers, after its
   * scan lock (stkr__threads_atfork_prepare); this child handler releases
   * it (stkr__threads_forget_after_fork). */
  pthread_atfork(NULL, NULL, stkr__atfork_child);
  stkr__pin_image();
}

int stkr__recorder_start(const stkr__rconf *rc, stkr__wake_fn wake,
                         void *wake_arg, stkr__fork_fn on_fork_child) {
  size_t min_ring;
  int state = atomic_load_explicit(&g_state, memory_order_acquire);

  if (state == STKR__RUNNING)
    return -EALREADY;
  if (rc->max_depth == 0 || rc->max_depth > STKR_MAX_DEPTH ||
      rc->payload_max > STKR_MAX_PAYLOAD)
    return -EINVAL;
  /* A ring must hold several maximal records, or one event could never
   * fit and would be dropped forever. */
  min_ring = 4 * (sizeof(stkr__record_full) + 8u * rc->max_depth +
                  rc->payload_max + STKR__PEVICTED_BYTES + 8);
  if (rc->ring_bytes < min_ring)
    return -EINVAL;
  stkr__threads_set_ring_conf(rc->ring_bytes, min_ring);
  pthread_once(&g_atfork_once, stkr__atfork_install);
  /* A producer of the previous session may have outlived its bounded
   * quiesce (an exit budget) and still be reading g_conf. */
  stkr__threads_wait_idle(2000); /* as stkr_shutdown's wait */
  /* The session's clock, before RUNNING is released to producers. */
  stkr__clock_setup(true);
  g_conf = *rc;
  g_conf.unwind_tables = STKR__HAVE_UNWIND_TABLES && rc->unwind_tables;
  stkr__unwind_wanted = g_conf.unwind_tables;
  g_wake = wake;
  g_wake_arg = wake_arg;
  g_on_fork = on_fork_child;
  stkr__threads_reset_counts();
  stkr__count_late_calls(false);
  atomic_store_explicit(&g_producer_fence, stkr__membarrier_register() != 0,
                        memory_order_relaxed);
  /* Release: g_conf and the callbacks are visible to every producer that
   * acquire-loads RUNNING (stkr_event's slow path, stkr__event_conf). */
  atomic_store_explicit(&g_state, STKR__RUNNING, memory_order_release);
  return 0;
}

/* Take t's busy flag outside an event, as an event's push does (the
 * Dekker pair with stkr__recorder_stop(), explained in stkr_event): stop
 * quiesces busy threads before the worker goes, and a start waits for them
 * (stkr__threads_wait_idle). @return the recorder's state (acquire), or -1
 * when t is busy already (inside an event: a signal handler), the flag
 * then not taken. The caller clears busy (release) when done. */
static int stkr__busy_enter(stkr__thread *t) {
  if (atomic_load_explicit(&t->busy, memory_order_relaxed))
    return -1;
  atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
  if (atomic_load_explicit(&g_producer_fence, memory_order_relaxed))
    atomic_thread_fence(memory_order_seq_cst);
  else
    atomic_signal_fence(memory_order_seq_cst);
  return atomic_load_explicit(&g_state, memory_order_acquire);
}

void stkr__thread_wake(stkr__thread *t) {
  /* Under busy, the worker and its wake channel are still there, and
   * g_wake is read after the acquire of RUNNING that publishes it. Inside
   * an event (a signal handler's exit? never mind): no wake. */
  int state = stkr__busy_enter(t);

  if (state < 0)
    return;
  if (state == STKR__RUNNING && g_wake != NULL)
    g_wake(g_wake_arg); /* a semaphore post: async-signal-safe */
  atomic_store_explicit(&t->busy, 0, memory_order_release);
}

void stkr__producers_fence(void) {
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(&g_producer_fence, memory_order_relaxed))
    (void)stkr__membarrier(); /* registered at start: cannot fail */
}

void stkr__recorder_stop(void) {
  /* seq_cst, then the process-wide barrier: the other half of the Dekker
   * pair in stkr_event (see there). After this returns, every producer
   * either sees OFF or has a `busy` that stkr__threads_quiesce() sees. */
  atomic_store_explicit(&g_state, STKR__OFF, memory_order_seq_cst);
  stkr__producers_fence();
}

void stkr__recorder_stop_for_exit(void) {
  stkr__count_late_calls(true); /* before: a call that sees OFF counts */
  stkr__recorder_stop();
}

bool stkr__recorder_running(void) {
  return atomic_load_explicit(&g_state, memory_order_acquire) == STKR__RUNNING;
}

/* Slow path of the state check: not running. In a forked child in follow
 * mode, the first event starts the child's own recording; an event of
 * another thread meanwhile waits for that start (QA, session 39: 4
 * threads of a child starting together, 3 got -ENOTCONN for all of their
 * 2000 events, counted nowhere, and verify said complete). errno may
 * change (callers keep the app's). */
static __attribute__((noinline)) int stkr__not_running(int state) {
  int expected = STKR__FORK_PENDING;
  stkr__fork_fn fn;

  if (state == STKR__STARTING)
    return stkr__start_wait(&g_state, STKR__STARTING) == STKR__RUNNING
               ? 0
               : -ENOTCONN;
  if (state != STKR__FORK_PENDING)
    return -ENOTCONN;
  /* Read only now: FORK_PENDING was set (release) after g_on_fork, by the
   * atfork handler in this very process. */
  fn = g_on_fork;
  if (fn == NULL)
    return -ENOTCONN;
  stkr__start_begin(); /* before STARTING is announced (release) */
  if (!atomic_compare_exchange_strong_explicit(&g_state, &expected,
                                               STKR__STARTING,
                                               memory_order_acq_rel,
                                               memory_order_relaxed)) {
    stkr__start_end();
    /* Another thread won the start: wait for it (or it is over). */
    if (expected == STKR__STARTING)
      expected = stkr__start_wait(&g_state, STKR__STARTING);
    return expected == STKR__RUNNING ? 0 : -ENOTCONN;
  }
  fn(); /* calls stkr__recorder_start() on success */
  /* Failed: off. A CAS, not a load and a store: a stkr_init of another
   * thread may have started a session meanwhile (review, session 39). */
  expected = STKR__STARTING;
  (void)atomic_compare_exchange_strong_explicit(
      &g_state, &expected, STKR__OFF, memory_order_release,
      memory_order_relaxed);
  stkr__start_end();
  return stkr__recorder_running() ? 0 : -ENOTCONN;
}

void stkr_thread_renamed(void) {
  stkr__thread *t = stkr__tls;
  char now[sizeof t->cur_name] = {0}; /* compared whole, as cur_name */
  int state;

  if ((uintptr_t)t <= STKR__THREAD_SENTINEL_MAX)
    return; /* no state yet: its first event reads the name */
  /* Under busy: inside an event (a signal handler renaming its thread)
   * it is left alone; a start waits for it before it reads cur_name, or
   * is seen as STARTING here. */
  if ((state = stkr__busy_enter(t)) < 0)
    return;
  stkr__thread_name(now, sizeof now);
  if (memcmp(now, t->cur_name, sizeof now) == 0) {
    /* nothing changed */
  } else if (state == STKR__OFF || state == STKR__FORK_PENDING) {
    /* No worker (between sessions, or a followed fork child before its
     * start): the next start names the state after cur_name. */
    memcpy(t->cur_name, now, sizeof now);
  } else if (state == STKR__RUNNING) {
    uint32_t n = atomic_load_explicit(&t->rn_count, memory_order_relaxed);
    /* Acquire: the worker has copied the slot it gives back. A full
     * queue (the worker behind by STKR__RENAMES renames): this one is
     * not told, and the events until the next keep the last name told. */
    if (n - atomic_load_explicit(&t->w_rn_done, memory_order_acquire) <
        STKR__RENAMES) {
      t->rn[n % STKR__RENAMES].pos =
          t->ring.c != NULL
              ? atomic_load_explicit(&t->ring.c->head, memory_order_relaxed)
              : 0;
      memcpy(t->rn[n % STKR__RENAMES].name, now, sizeof now);
      memcpy(t->cur_name, now, sizeof now);
      /* The ring file names the thread for recovery after a crash: its
       * unflushed records are most likely the latest name's. */
      if (t->ring.c != NULL)
        memcpy(t->ring.c->meta.name, now, sizeof t->ring.c->meta.name);
      atomic_store_explicit(&t->rn_count, n + 1, memory_order_release);
    } else {
      atomic_fetch_add_explicit(&t->rn_lost, 1, memory_order_relaxed);
    }
  } /* STARTING: the start reads the name it has now */
  atomic_store_explicit(&t->busy, 0, memory_order_release);
}

int stkr_thread_attach(void) {
  stkr__thread *t;
  /* Acquire: as in stkr_event, pairs with the release stores of g_state
   * (start, the atfork child handler's FORK_PENDING). */
  int state = atomic_load_explicit(&g_state, memory_order_acquire);

  /* A followed fork child not started yet starts here (stackrec.h), even
   * with this thread's state inherited from the parent's. */
  if (state == STKR__FORK_PENDING || state == STKR__STARTING) {
    const int e0 = errno; /* the start makes files; the wait sleeps */
    const int nr = stkr__not_running(state);
    errno = e0;
    if (nr != 0)
      return -ENOTCONN;
  }
  t = stkr__tls;

  if (t == STKR__THREAD_IGNORED)
    return -EPERM;
  if (t == STKR__THREAD_DEAD || t == STKR__THREAD_ATTACHING)
    return -EAGAIN;
  /* Not recording: -ENOTCONN, also for a thread still attached from the
   * session before (QA, session 27: 0 after stkr_shutdown). */
  if (!stkr__recorder_running())
    return -ENOTCONN;
  if (t == STKR__THREAD_CAPPED) {
    if (!stkr__threads_ring_room(g_conf.ring_bytes))
      return -EAGAIN; /* as stkr_event: ring memory used up */
    stkr__tls = t = NULL; /* room again: try */
  }
  if (t != NULL)
    return 0;
  {
    const int e0 = errno; /* as stkr_event: the app's errno kept */
    int err = stkr__thread_attach(g_conf.ring_bytes, &t);
    errno = e0;
    return err == -ENOSPC ? -EAGAIN : err;
  }
}

/* The known-stack and known-payload tables are two-way set associative:
 * a key may sit in either slot of its set (slots 2·set and 2·set + 1), so
 * that two stacks (or payloads) a thread alternates between keep both.
 * Direct-mapped, keys that shared a slot evicted each other at every
 * event: with 100 stacks in 128 slots about 30% of the events were full
 * records again (flush_throughput's uniform workload), with 30 about 10%.
 * A key missing from its set goes to an empty way, else to the older of
 * the two (FIFO: `newest` has a bit a set, the way filled last). Which
 * way is policy only: records carry their slot, and the worker and
 * recovery follow slots, never keys.
 * @return the key's slot (*hit) or the slot to fill (!*hit). */
static inline unsigned stkr__known_find(uint64_t (*tab)[2], unsigned set,
                                        uint64_t k0, uint64_t k1,
                                        uint64_t newest, bool *hit) {
  unsigned slot = 2 * set;

  *hit = true;
  if (tab[slot][0] == k0 && tab[slot][1] == k1)
    return slot;
  if (tab[slot + 1][0] == k0 && tab[slot + 1][1] == k1)
    return slot + 1;
  *hit = false;
  if ((tab[slot][0] | tab[slot][1]) == 0)
    return slot;
  if ((tab[slot + 1][0] | tab[slot + 1][1]) == 0)
    return slot + 1;
  return slot + (unsigned)!((newest >> set) & 1);
}

_Static_assert(STKR__KNOWN_SLOTS / 2 <= 64 && STKR__PKNOWN_SLOTS / 2 <= 64,
               "known_newest, pknown_newest: a bit a set");

/* `slot` was just filled: its way is now its set's newest. */
static inline void stkr__known_filled(uint64_t *newest, unsigned slot) {
  unsigned set = slot / 2;
  *newest = (*newest & ~(1ull << set)) | (uint64_t)(slot & 1) << set;
}

/* The payload part of a record at ppart (common/stkr_ringfile.h,
 * "Payloads"), for payload_len > 0: PAYLOAD_KNOWN and nothing when the
 * thread's payload table holds its key, else PAYLOAD_NEW, the slot's old
 * key and the bytes, and *learn = the table entry to set to key once the
 * record is committed. Returns the bytes written. */
static inline uint32_t stkr__payload_put(stkr__thread *t, stkr__record *rec,
                                         uint8_t *ppart, const void *payload,
                                         size_t payload_len, uint8_t *flags,
                                         uint64_t **learn, uint64_t key[2]) {
  unsigned pslot;
  uint64_t *pknown;
  bool hit;

  stkr_payload_key(payload, payload_len, key);
  pslot = stkr__known_find(t->ring.c->pknown,
                           stkr_payload_key_slot(key, STKR__PKNOWN_SLOTS / 2),
                           key[0], key[1], t->pknown_newest, &hit);
  rec->pslot = (uint8_t)pslot;
  pknown = t->ring.c->pknown[pslot];
  if (hit) {
    *flags |= STKR__REC_PAYLOAD_KNOWN;
    return 0;
  }
  *flags |= STKR__REC_PAYLOAD_NEW;
  memcpy(ppart, pknown, STKR__PEVICTED_BYTES);
  memcpy(ppart + STKR__PEVICTED_BYTES, payload, payload_len);
  *learn = pknown;
  return STKR__PEVICTED_BYTES + (uint32_t)payload_len;
}

/* Finish the record reserved at rec, whose PCs (depth of them, hash h1 by
 * stkr__hash_pcs, key2 fold `fold2`) are in place after the full header,
 * and commit it: a known record when the thread's table holds the stack's
 * key, else a full one, after which the table does. The payload likewise
 * (stkr__payload_put). A key enters a table only once the record that
 * carries its PCs (or bytes) is committed, so that every known record has
 * its full record before it in this ring (the worker reads in order;
 * recovery after a death between the two stores finds the old key in
 * `evicted`). The caller holds `busy`. */
static inline __attribute__((always_inline)) void stkr__record_finish(stkr__thread *t, stkr__record *rec,
                                       uint32_t site_id, unsigned depth,
                                       uint64_t h1, uint64_t fold2,
                                       uint8_t flags, const void *payload,
                                       size_t payload_len) {
  stkr__record_full *full = (stkr__record_full *)(void *)rec;
  uint64_t *pcs = (uint64_t *)(void *)(full + 1);
  uint64_t h2 = stkr_stack_key2_final(fold2, depth, site_id,
                                      flags & STKR__REC_STACK_TRUNCATED);
  bool hit;
  unsigned slot = stkr__known_find(
      t->ring.c->known, stkr_stack_key2_slot(h2, STKR__KNOWN_SLOTS / 2), h1,
      h2, t->known_newest, &hit);
  uint64_t *known = t->ring.c->known[slot];
  uint64_t *learn = NULL, pkey[2];
  uint32_t pbytes = 0;

  rec->site_id = site_id;
  rec->payload_len = (uint16_t)payload_len;
  rec->slot = (uint8_t)slot;
  rec->pslot = 0;
  rec->reserved = 0;
  if (hit) {
    rec->depth = 0;
    if (payload_len == 0) { /* the common case first, as short as it was */
      rec->size = stkr__record_known_bytes(0);
      rec->flags = (uint8_t)(flags | STKR__REC_KNOWN);
      stkr__ring_commit(&t->ring, rec->size);
      return;
    }
    flags |= STKR__REC_KNOWN;
    /* over the PCs, no longer needed */
    pbytes = stkr__payload_put(t, rec, (uint8_t *)(rec + 1), payload,
                               payload_len, &flags, &learn, pkey);
    rec->flags = flags;
    rec->size = stkr__record_known_bytes(pbytes);
    stkr__ring_commit(&t->ring, rec->size);
  } else {
    rec->depth = (uint16_t)depth;
    full->key[0] = h1;
    full->key[1] = h2;
    full->evicted[0] = known[0];
    full->evicted[1] = known[1];
    if (payload_len != 0)
      pbytes = stkr__payload_put(t, rec, (uint8_t *)(pcs + depth), payload,
                                 payload_len, &flags, &learn, pkey);
    rec->flags = flags;
    rec->size = stkr__record_full_bytes(depth, pbytes);
    stkr__ring_commit(&t->ring, rec->size);
    known[0] = h1; /* only now: see above */
    known[1] = h2;
    stkr__known_filled(&t->known_newest, slot);
  }
  if (learn != NULL) {
    learn[0] = pkey[0];
    learn[1] = pkey[1];
    stkr__known_filled(&t->pknown_newest, rec->pslot);
  }
}

/* The frame-pointer walk of an event: walk_body.h's loop inlined, except
 * under ASan, whose instrumented stkr_event may not inline the
 * uninstrumented body (GCC refuses). */
#if defined(__SANITIZE_ADDRESS__)
#define STKR__EVENT_WALK_INLINE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STKR__EVENT_WALK_INLINE 0
#endif
#endif
#ifndef STKR__EVENT_WALK_INLINE
#define STKR__EVENT_WALK_INLINE 1
#endif
#if STKR__EVENT_WALK_INLINE
#define STKR__EVENT_WALK(fp, lo, hi, skip, pcs, max, hash, fold2, truncated)  \
  stkr__walk_body(fp, lo, hi, skip, pcs, max, hash, fold2, truncated, true)
#else
#define STKR__EVENT_WALK stkr__walk_keyed
#endif

/* An event whose frame is not on the thread's stack (fp outside
 * [stack_lo, stack_hi), so the walk stored nothing): on the alternate
 * signal stack a handler runs on (SA_ONSTACK, as crash handlers do), or on
 * a stack of the app's own (a coroutine's: makecontext). The first is
 * walked the same way (frame pointers, or unwind tables: a handler built
 * without frame pointers kept only its innermost frame before, QA session
 * 24) within that stack's bounds (one system call, on this path only), up
 * to the handler's outermost frame; the other cannot be walked safely.
 * Either way the stack is marked truncated (the interrupted code's frames,
 * or all of them, are missing), never left as if whole (QA, session 23:
 * "stack":[], verify intact). A thread whose events keep coming from
 * stacks of its own (a coroutine runtime) stops asking after
 * STKR__OFFSTACK_ASKS answers that it is not on its alternate stack:
 * marked truncated at once, no system call per event (review). SS_AUTODISARM
 * stacks say SS_DISABLE inside the handler: marked truncated too.
 * @return true with the alternate stack's bounds in [*lo, *hi) when the
 * event is on it. */
#define STKR__OFFSTACK_ASKS 16
/* initial-exec, as stkr__tls: read in signal handlers, where a lazily
 * allocated TLS block would call malloc. */
static __thread unsigned t_offstack_misses
    __attribute__((tls_model("initial-exec")));
static __attribute__((noinline, cold)) bool
stkr__altstack_bounds(const stkr__thread *t, uintptr_t fp, uintptr_t *lo,
                      uintptr_t *hi) {
  stack_t ss;

  if (t->stack_hi == 0 || t_offstack_misses >= STKR__OFFSTACK_ASKS ||
      sigaltstack(NULL, &ss) != 0)
    return false; /* bounds unknown, or no more asking */
  if (!(ss.ss_flags & SS_ONSTACK) || fp < (uintptr_t)ss.ss_sp ||
      fp >= (uintptr_t)ss.ss_sp + ss.ss_size) {
    t_offstack_misses++;
    return false;
  }
  *lo = (uintptr_t)ss.ss_sp;
  *hi = (uintptr_t)ss.ss_sp + ss.ss_size;
  return true;
}

/* fp (stkr_event's frame) is not on the thread's own stack. */
static inline bool stkr__off_stack(const stkr__thread *t, uintptr_t fp) {
  return fp < t->stack_lo || fp >= t->stack_hi;
}

/* The event's stack into pcs (the reserved record's PC area), with its
 * hash h1 and the stack key's fold: walked from `fp` with frame pointers,
 * or with the unwind tables `uw_set` (room reserved for the frames that
 * walk drops), or copied from `given`. Inlined into stkr__push, so that a
 * table walk is called from stkr_event itself (it drops that frame). */
static inline __attribute__((always_inline)) unsigned
stkr__push_walk(stkr__thread *t, uint64_t *pcs, uintptr_t fp, unsigned skip,
                const uint64_t *given, unsigned given_n, const void *uw_set,
                uint64_t *hash, uint64_t *fold2, bool *truncated) {
  unsigned depth;
  uintptr_t lo, hi;

  if (__builtin_expect(uw_set != NULL, 0) &&
      __atomic_load_n(&stkr__uw_swift_async, __ATOMIC_RELAXED)) {
    /* Swift async chains: only the frame-pointer walk follows them; it is
     * kept when it went through one. */
    depth = stkr__walk_keyed(fp, t->stack_lo, t->stack_hi,
                             skip, pcs, g_conf.max_depth, hash,
                             fold2, truncated);
    if (stkr__pcs_any_async(pcs, depth))
      return depth;
  }
  if (__builtin_expect(uw_set != NULL, 0)) { /* folds both hashes as it walks */
    depth = stkr__walk_tables(t, uw_set, skip, pcs,
                              g_conf.max_depth, hash, fold2, truncated,
                              t->stack_lo, t->stack_hi);
    if (__builtin_expect(depth == 0, 0) && stkr__off_stack(t, fp)) {
      /* (called from here, so that it drops the same frames) */
      if (stkr__altstack_bounds(t, fp, &lo, &hi))
        depth = stkr__walk_tables(t, uw_set, skip, pcs,
                                  g_conf.max_depth, hash, fold2, truncated,
                                  lo, hi);
      *truncated = true;
    }
    return depth;
  }
  if (given == NULL) { /* inlined where allowed: recorder/walk_body.h */
    depth = STKR__EVENT_WALK(fp, t->stack_lo, t->stack_hi, skip,
                             pcs, g_conf.max_depth, hash, fold2, truncated);
    if (__builtin_expect(depth == 0, 0) && stkr__off_stack(t, fp)) {
      if (stkr__altstack_bounds(t, fp, &lo, &hi))
        depth = stkr__walk_keyed(fp, lo, hi, skip, pcs,
                                 g_conf.max_depth, hash, fold2, truncated);
      *truncated = true;
    }
    return depth;
  }
  *truncated = given_n > g_conf.max_depth;
  depth = *truncated ? g_conf.max_depth : given_n;
  memcpy(pcs, given, 8u * depth);
  *hash = stkr__hash_pcs(given, depth);
  *fold2 = STKR_KEY2_SEED;
  for (unsigned i = 0; i < depth; i++)
    *fold2 = stkr_stack_key2_step(*fold2, pcs[i]);
  return depth;
}

/* The push shared by stkr_event() and stkr__record_stack(): re-entrancy
 * check, the Dekker pair with stop, reservation, the stack (walked from
 * `fp`, or copied from `given`), clock, payload, commit. Inlined into both,
 * so that stkr_event's walk still starts at its own frame. Returns 0,
 * -errno, or 1: not running any more but a forked child just started
 * recording (stkr_event retries). */
static inline __attribute__((always_inline)) int
stkr__push(stkr__thread *t, stkr_site *site, const void *payload,
           size_t payload_len, uintptr_t fp, unsigned extra_skip,
           const uint64_t *given, unsigned given_n) {
  int state;
  stkr__record *rec;
  uint32_t site_id, max_bytes;
  unsigned depth;
  bool stack_truncated;
  uint64_t hash, fold2;
  uint8_t flags = 0;
  stkr__wake_fn wake;

  /* Same-thread re-entrancy (a signal handler interrupting an event): only
   * this thread and its signal handlers write `busy`, so the test and the
   * set need no atomic RMW; a handler that runs between them completes its
   * whole event before we go on, which is harmless. */
  if (atomic_load_explicit(&t->busy, memory_order_relaxed)) {
    if ((state = atomic_load_explicit(&g_state, memory_order_relaxed)) !=
        STKR__RUNNING) {
      if (state == STKR__OFF) stkr__late_call(site);
      return -ENOTCONN;
    }
    /* Atomic RMW: nested handlers may race on this counter. */
    atomic_fetch_add_explicit(&t->dropped_reentrant, 1, memory_order_relaxed);
    /* The ring file's copy (recovery). A thread's ring is made before
     * its state is published (a handler in the middle of that counts an
     * "other" drop instead), so c is set here; checked all the same. */
    stkr__ring_ctl *rc = t->ring.c;
    if (rc != NULL)
      atomic_fetch_add_explicit(&rc->drops_reentrant, 1, memory_order_release);
    stkr__mark_drop_note(site);
    return -EAGAIN;
  }
  atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
  /* Dekker pair with stkr__recorder_stop(): we store busy then load the
   * state; stop stores the state then (after a barrier) loads busy. One of
   * us must see the other's store, or an event could pass the state check,
   * go unseen by the shutdown's quiesce, and be pushed after the final
   * drain. The store->load order needs a full fence on both sides; our
   * side gets it for free from membarrier(2) on the stop side (an IPI
   * fences every running thread), else from a real fence here. */
  if (atomic_load_explicit(&g_producer_fence, memory_order_relaxed))
    atomic_thread_fence(memory_order_seq_cst);
  else
    atomic_signal_fence(memory_order_seq_cst);
  state = atomic_load_explicit(&g_state, memory_order_acquire);
  if (__builtin_expect(state != STKR__RUNNING, 0)) {
    const int e0 = errno; /* a forked child's start makes files */
    atomic_store_explicit(&t->busy, 0, memory_order_release);
    const int nr = stkr__not_running(state);
    if (nr != 0 && state == STKR__OFF) stkr__late_call(site);
    errno = e0;
    return nr != 0 ? -ENOTCONN : 1;
  }

  /* g_conf is read once RUNNING was seen (the acquire load above: the
   * start's writes happen before), never before (TSan: a race with a
   * start, when stkr_event_skip read skip_frames first). */
  const unsigned skip =
      extra_skip == 0 /* stkr_event's: a constant, folded */
          ? g_conf.skip_frames
          : g_conf.skip_frames + extra_skip < STKR_MAX_DEPTH
                ? g_conf.skip_frames + extra_skip
                : STKR_MAX_DEPTH;
  site_id = stkr__site_id(site);
  if (__builtin_expect(site_id == 0, 0)) {
    if (stkr__site_refused(site)) { /* the app's misuse: no event */
      atomic_store_explicit(&t->busy, 0, memory_order_release);
      return -EINVAL;
    }
    stkr__count_dropped_other();
    goto drop_unbusy;
  }
  if (payload == NULL)
    payload_len = 0;
  if (payload_len > g_conf.payload_max) {
    payload_len = g_conf.payload_max;
    flags |= STKR__REC_PAYLOAD_TRUNCATED;
  }
  /* A table walk (stkr__walk_tables) needs room for the frames it drops. */
  const void *uw_set = NULL;
  /* g_conf's flag, not stkr__unwind_wanted: its line is loaded already. */
  if (__builtin_expect(g_conf.unwind_tables, 0) && given == NULL &&
      t->uw_cache != NULL)
    uw_set = stkr__unwind_tables_current();
  max_bytes = stkr__record_full_bytes(
      g_conf.max_depth +
          (uw_set != NULL ? skip + STKR__UW_EXTRA : 0),
      payload_len ? payload_len + STKR__PEVICTED_BYTES : 0);
  rec = stkr__ring_reserve(&t->ring, max_bytes);
  if (__builtin_expect(rec == NULL, 0)) {
    /* Single writer: only the thread holding `busy` gets here, so a
     * load and a store suffice (no locked RMW on the hot path). */
    /* Release: see pushed below. */
    uint64_t full =
        atomic_load_explicit(&t->dropped_ring_full, memory_order_relaxed) + 1;
    atomic_store_explicit(&t->dropped_ring_full, full, memory_order_release);
    /* And in the ring file, for recovery if the process dies before the
     * worker counts it (common/stkr_ringfile.h, "drops"). */
    atomic_store_explicit(&t->ring.c->drops_full, full, memory_order_release);
    /* By id: the site pointer need not live on past the id (the keyed
     * walk below is short of registers). */
    stkr__mark_drop_note_id(site_id);
    goto drop_unbusy;
  }
  /* The timestamp (ticks or ns: clock.c) before the walk, not after: rdtsc
   * is not serializing, so it executes in the shadow of the walk's loads
   * instead of after them (~30 cycles here); the event's time moves by the
   * walk's few tens of ns, well inside the conversion's error. */
  rec->ts_ns = stkr__clock_event();
  depth = stkr__push_walk(t, (uint64_t *)(void *)((stkr__record_full *)(void *)rec + 1),
                          fp, skip, given, given_n, uw_set, &hash, &fold2,
                          &stack_truncated);
  if (stack_truncated)
    flags |= STKR__REC_STACK_TRUNCATED;
  stkr__record_finish(t, rec, site_id, depth, hash, fold2, flags, payload,
                      payload_len);
  /* After the commit, so a record is never counted that was not
   * committed. The worker may consume it before this store (we may be
   * descheduled, or end by _exit, in between): the stats take
   * max(pushed, consumed) per thread (recorder/thread.c stkr__counts_add).
   * Release: pairs with the acquire loads in stkr__threads_wait_events_left
   * (thread.c), which take a moved count as the end of the event that was
   * walking a replaced set of unwind tables; everything this event read
   * of it happens before the worker frees it (a plain store on x86_64). */
  atomic_store_explicit(
      &t->pushed, atomic_load_explicit(&t->pushed, memory_order_relaxed) + 1,
      memory_order_release);

  /* Past half full: wake the worker once; it clears wake_sent (release)
   * after draining, pairing with this acquire load. */
  wake = g_wake;
  if (wake != NULL && stkr__ring_past_half(&t->ring) &&
      !atomic_load_explicit(&t->wake_sent, memory_order_acquire)) {
    atomic_store_explicit(&t->wake_sent, 1, memory_order_relaxed);
    wake(g_wake_arg); /* a semaphore post: async-signal-safe */
  }
  /* Release: pairs with the acquire load of busy in
   * stkr__threads_quiesce(); whoever sees 0 there also sees our commit. */
  atomic_store_explicit(&t->busy, 0, memory_order_release);
  return 0;

drop_unbusy:
  atomic_store_explicit(&t->busy, 0, memory_order_release);
  return -EAGAIN;
}

/* stkr_event's and stkr_event_skip's body, inlined into each with its own
 * frame (fp), where the walk starts. */
static inline __attribute__((always_inline)) int
stkr__event(stkr_site *site, const void *payload, size_t payload_len,
            unsigned extra_skip, uintptr_t fp) {
  int state, err;
  stkr__thread *t;

  if (__builtin_expect(site == NULL, 0))
    return -EINVAL; /* QA, session 23: SIGSEGV while recording */
again:
  t = stkr__tls;
  if (__builtin_expect((uintptr_t)t <= STKR__THREAD_SENTINEL_MAX, 0)) {
    /* The slow path makes system calls (a forked child's start, a
     * thread's ring from the pool: renames that may fail): the app's
     * errno is kept across them (QA, session 27: ENOENT after a thread's
     * first event; the README promises errno is never set). */
    const int e0 = errno;
    if (t == STKR__THREAD_IGNORED)
      return -EPERM; /* the recorder's own thread: not an app event */
    state = atomic_load_explicit(&g_state, memory_order_acquire);
    if (state != STKR__RUNNING) {
      err = stkr__not_running(state);
      if (err != 0 && state == STKR__OFF) stkr__late_call(site);
      errno = e0;
      if (err != 0)
        return err;
      goto again; /* a forked child just started recording */
    }
    if (t == STKR__THREAD_CAPPED &&
        stkr__threads_ring_room(g_conf.ring_bytes)) {
      stkr__tls = t = NULL; /* threads exited: ring memory to be had */
    } else if (t != NULL) {
      /* DEAD: a hook called from a later TLS destructor. ATTACHING: a
       * signal handler interrupted this thread's first event. CAPPED:
       * the process's ring memory is used up by live threads. */
      stkr__count_dropped_other();
      stkr__mark_drop_note(site);
      return -EAGAIN;
    }
    err = stkr__thread_attach(g_conf.ring_bytes, &t);
    errno = e0;
    if (err != 0) {
      stkr__count_dropped_other();
      stkr__mark_drop_note(site);
      /* The process's ring memory used up (-ENOSPC): -EAGAIN, as the
       * header says (QA, session 27: -ENOMEM); else out of memory. */
      return err == -ENOSPC ? -EAGAIN : -ENOMEM;
    }
  }
  err = stkr__push(t, site, payload, payload_len, fp, extra_skip, NULL, 0);
  if (__builtin_expect(err == 1, 0))
    goto again;
  return err;
}

__attribute__((noinline)) int stkr_event(stkr_site *site, const void *payload,
                                         size_t payload_len) {
  return stkr__event(site, payload, payload_len, 0,
                     (uintptr_t)__builtin_frame_address(0));
}

__attribute__((noinline)) int stkr_event_skip(stkr_site *site,
                                              const void *payload,
                                              size_t payload_len,
                                              unsigned skip) {
  /* (skip_frames added after the state check, in stkr__push; a walk skips
   * at most STKR_MAX_DEPTH frames) */
  return stkr__event(site, payload, payload_len,
                     skip < STKR_MAX_DEPTH ? skip : STKR_MAX_DEPTH,
                     (uintptr_t)__builtin_frame_address(0));
}

int stkr__record_stack(stkr__thread *t, stkr_site *site, const uint64_t *pcs,
                     unsigned n, const void *payload, size_t payload_len) {
  if (t == NULL)
    t = stkr__tls;
  if ((uintptr_t)t <= STKR__THREAD_SENTINEL_MAX)
    return t == STKR__THREAD_IGNORED ? -EPERM : -ENOTCONN;
  int err = stkr__push(t, site, payload, payload_len, 0, 0, pcs, n);
  return err == 1 ? -ENOTCONN : err;
}
