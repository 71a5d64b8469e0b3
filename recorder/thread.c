/*
 * thread.c: per-thread recorder state and the registry of threads.
 *
 * A thread gets its state (struct + ring, both mmap'd; the ring is a file
 * of the recording session, see ringfile.c) at its first event
 * and pushes it onto the registry, a singly linked list whose head is
 * swapped in by compare-and-swap: producers only ever insert at the head,
 * and only the flush worker removes, so removal needs no lock against
 * producers. Removal does take g_reap_lock, against stkr__threads_counts()
 * callers (any thread) that walk the list and must not touch a state that
 * is being unmapped. The TLS destructor marks a thread exited; the worker
 * reaps it once its ring is empty.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "recorder/stkr_internal.h"

/* The calling thread's state; STKR__THREAD_DEAD once its TLS destructor
 * ran (later events on it are dropped). initial-exec: no lazy TLS
 * allocation (which could malloc) inside a hook or a signal handler. */
__thread stkr__thread *stkr__tls __attribute__((tls_model("initial-exec")));

/* Pairs: release CAS in stkr__thread_attach() with the acquire load in
 * stkr__threads_first(), so the worker sees a fully built state. */
static stkr__thread *_Atomic g_head;
static _Atomic uint32_t g_next_id;
static _Atomic uint64_t g_attached;
/* Events that could not be attributed to a live ring (thread exiting, no
 * memory for a ring, site table busy): any thread adds, relaxed. */
static _Atomic uint64_t g_dropped_other;
/* Calls refused while an exit ended the session (stkr__late_call): any
 * thread adds, relaxed. */
static _Atomic uint64_t g_dropped_late;
/* Totals of reaped threads, so counts survive reaping. Under g_reap_lock. */
static stkr__counts g_retired;
static pthread_mutex_t g_reap_lock = PTHREAD_MUTEX_INITIALIZER;
/* Its holder (set after taking it, cleared before letting it go), for
 * fork's prepare handler: a fork from a signal handler that interrupted
 * the holder must not wait for itself. Read by that handler only. */
static _Atomic bool g_reap_held;
static _Atomic(pthread_t) g_reap_owner;

static void reap_took(void) {
  atomic_store_explicit(&g_reap_owner, pthread_self(), memory_order_relaxed);
  atomic_store_explicit(&g_reap_held, true, memory_order_release);
}

static void reap_lock(void) {
  pthread_mutex_lock(&g_reap_lock);
  reap_took();
}

static void reap_unlock(void) {
  atomic_store_explicit(&g_reap_held, false, memory_order_relaxed);
  pthread_mutex_unlock(&g_reap_lock);
}

static pthread_key_t g_key;
/* Ring memory (rings + states) of attached, not yet reaped threads, and
 * its cap: any thread adds at attach (relaxed RMW: a budget, nothing is
 * published through it), the worker subtracts when reaping. */
static _Atomic uint64_t g_ring_live;
/* 0: the default, max(STKR__RING_MEM_CAP, 8 rings of the configured size),
 * so that a large configured ring still serves a few threads. */
static _Atomic uint64_t g_ring_cap;
/* The smallest ring that holds four maximal records of this session's
 * configuration, and the configured ring size (stkr__recorder_start sets
 * them; relaxed: set before RUNNING is released to producers). The
 * smallest tier never goes below the floor. */
static _Atomic size_t g_ring_floor, g_ring_conf;

static uint64_t ring_cap(uint64_t charge) {
  uint64_t cap = atomic_load_explicit(&g_ring_cap, memory_order_relaxed);
  if (cap == 0)
    cap = STKR__RING_MEM_CAP > 8 * charge ? STKR__RING_MEM_CAP : 8 * charge;
  return cap;
}

void stkr__threads_set_ring_cap(uint64_t bytes) {
  atomic_store_explicit(&g_ring_cap, bytes, memory_order_relaxed);
}

static uint64_t ring_charge(size_t ring_bytes) {
  return STKR_RINGFILE_HDR_BYTES + stkr__ring_round(ring_bytes) +
         ((sizeof(stkr__thread) + 4095u) & ~(size_t)4095u);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* stkr_internal.h says what the tiers are. So 200 live threads hold at
 * most ~12.5 MiB of rings and states (was ~24: the capacity bench's
 * 200-thread RSS added 13-15 MB, was 22-23), and ~690 fit under the cap.
 * With the second tier up to 6 MiB, the 50-thread run dropped 8,310 and
 * 25,703 of 250,000 events with 16 KiB last-tier rings, 0 and 828 with
 * 32 KiB ones; up to 7 MiB, 0-34. */
size_t stkr__ring_tier(size_t ring_bytes, size_t min_bytes, uint64_t live,
                       uint64_t cap) {
  size_t mid = (size_t)max_u64(ring_bytes / 4, STKR__RING_SMALL_BYTES);
  size_t tiny = (size_t)max_u64(max_u64(ring_bytes / 16, STKR__RING_TINY_BYTES),
                                stkr__ring_round(min_bytes));
  /* The tiers' ends: a share of the cap, or room for 4 rings of the tier
   * if that is more (a large configured ring), within half and three
   * quarters of the cap. */
  uint64_t end1 = max_u64(cap / 8, min_u64(4 * ring_charge(ring_bytes), cap / 2));
  uint64_t end2 = max_u64(cap / 32 * 7,
                          min_u64(end1 + 4 * ring_charge(mid), cap / 4 * 3));
  size_t want = ring_bytes;

  if (live + ring_charge(ring_bytes) > end1)
    want = live + ring_charge(mid) <= end2 ? mid : tiny;
  return want < ring_bytes ? want : ring_bytes;
}

void stkr__threads_set_ring_conf(size_t ring_bytes, size_t min_bytes) {
  atomic_store_explicit(&g_ring_floor, min_bytes, memory_order_relaxed);
  atomic_store_explicit(&g_ring_conf, ring_bytes, memory_order_relaxed);
}

uint64_t stkr__threads_ring_live(void) {
  return atomic_load_explicit(&g_ring_live, memory_order_relaxed);
}

/* The ring a thread attaching now would get, and its charge. */
static size_t ring_for_new(size_t ring_bytes, uint64_t *charge,
                           uint64_t *cap) {
  *cap = ring_cap(ring_charge(ring_bytes)); /* of the configured size */
  ring_bytes = stkr__ring_tier(
      ring_bytes, atomic_load_explicit(&g_ring_floor, memory_order_relaxed),
      atomic_load_explicit(&g_ring_live, memory_order_relaxed), *cap);
  *charge = ring_charge(ring_bytes);
  return ring_bytes;
}

size_t stkr__threads_next_ring(size_t ring_bytes) {
  uint64_t charge, cap;
  return ring_for_new(ring_bytes, &charge, &cap);
}

bool stkr__threads_ring_room(size_t ring_bytes) {
  uint64_t charge, cap;
  (void)ring_for_new(ring_bytes, &charge, &cap);
  return atomic_load_explicit(&g_ring_live, memory_order_relaxed) + charge <=
         cap;
}
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void stkr__thread_exit(void *arg) {
  stkr__thread *t = arg;
  size_t conf = atomic_load_explicit(&g_ring_conf, memory_order_relaxed);

  /* First: a sample's handler from here on would meet a state being torn
   * down (busy under the wake below: -EAGAIN; gone: -ENOTCONN). */
  stkr__sample_going();
  /* Past the first tier (a new thread would get less than the configured
   * ring), an exited thread's ring is memory that new threads are tiered
   * down or refused for until the worker reaps it: have it pass now
   * (thread pools that churn: QA, session 17, 10,000 short-lived threads
   * at 20 alive lost 78% of their events). While t is still listed. */
  if (conf != 0 && stkr__threads_next_ring(conf) < conf)
    stkr__thread_wake(t);
  stkr__thread_name(t->exit_name, sizeof t->exit_name);
  /* From here on this thread must never touch t again: the worker may
   * unmap it as soon as it sees `exited` and an empty ring. */
  stkr__tls = STKR__THREAD_DEAD;
  /* Release pairs with the worker's acquire load of `exited`: the name
   * above and every record committed before are visible to it. */
  atomic_store_explicit(&t->exited, 1, memory_order_release);
}

static void stkr__key_create(void) {
  if (pthread_key_create(&g_key, stkr__thread_exit) != 0)
    g_key = (pthread_key_t)-1;
}

static size_t stkr__state_bytes(void) {
  return (sizeof(stkr__thread) + 4095u) & ~(size_t)4095u;
}

static int thread_attach(size_t ring_bytes, stkr__thread **out);

int stkr__thread_attach(size_t ring_bytes, stkr__thread **out) {
  int cs, err;

  /* Not cancelled half-way: the ring file's open is a cancellation point,
   * and a thread cancelled there left a descriptor and a half-made ring
   * file for good (QA, session 23). */
  (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
  err = thread_attach(ring_bytes, out);
  (void)pthread_setcancelstate(cs, NULL);
  return err;
}

static int thread_attach(size_t ring_bytes, stkr__thread **out) {
  stkr__thread *t;
  stkr__thread *old;
  int err;

  /* Until the state is ready, an event from a signal handler on this
   * thread sees ATTACHING and drops instead of attaching a second time. */
  stkr__tls = STKR__THREAD_ATTACHING;
  atomic_signal_fence(memory_order_seq_cst);
  uint64_t charge, cap;
  /* Past an eighth of the cap, smaller rings (stkr__ring_tier): more
   * threads record, in less memory, before any is refused. */
  ring_bytes = ring_for_new(ring_bytes, &charge, &cap);
  if (atomic_fetch_add_explicit(&g_ring_live, charge, memory_order_relaxed) +
          charge >
      cap) {
    atomic_fetch_sub_explicit(&g_ring_live, charge, memory_order_relaxed);
    stkr__tls = STKR__THREAD_CAPPED;
    return -ENOSPC;
  }
  pthread_once(&g_key_once, stkr__key_create);
  t = mmap(NULL, stkr__state_bytes(), PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) {
    atomic_fetch_sub_explicit(&g_ring_live, charge, memory_order_relaxed);
    stkr__tls = NULL;
    return -ENOMEM;
  }
  t->ring_charge = charge;
  /* mmap'd memory is zeroed: every counter and flag starts at 0. */
  t->tid = stkr__os_tid();
  t->id = atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
  stkr__thread_name(t->name, sizeof t->name);
  memcpy(t->cur_name, t->name, sizeof t->cur_name);
  /* A file of the current session when there is one (the id is used up
   * even if this fails: ids are never reused). From here until t is in the
   * list, a session close waits for us (stkr__ringfile_enter). */
  stkr__ringfile_enter();
  err = stkr__ring_init(&t->ring, ring_bytes, t->id, t->tid, t->name);
  if (err != 0) {
    stkr__ringfile_leave();
    munmap(t, stkr__state_bytes());
    atomic_fetch_sub_explicit(&g_ring_live, charge, memory_order_relaxed);
    stkr__tls = NULL;
    return err;
  }
  if (stkr__stack_bounds(&t->stack_lo, &t->stack_hi) != 0)
    t->stack_lo = t->stack_hi = 0; /* walk will record no frames */
  /* Without its row cache the thread walks with frame pointers. */
  if (stkr__unwind_wanted)
    (void)stkr__uw_cache_alloc(t);
  if (g_key != (pthread_key_t)-1)
    pthread_setspecific(g_key, t);
  stkr__tls = t;
  old = atomic_load_explicit(&g_head, memory_order_relaxed);
  do {
    atomic_store_explicit(&t->next, old, memory_order_relaxed);
    /* Release: publishes the fields above to the worker (see g_head). */
  } while (!atomic_compare_exchange_weak_explicit(
      &g_head, &old, t, memory_order_release, memory_order_relaxed));
  stkr__ringfile_leave();
  atomic_fetch_add_explicit(&g_attached, 1, memory_order_relaxed);
  *out = t;
  return 0;
}

uint32_t stkr__threads_new_id(void) {
  return atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
}

void stkr__thread_ignore(void) {
  if (stkr__tls == NULL)
    stkr__tls = STKR__THREAD_IGNORED;
}

stkr__thread *stkr__threads_first(void) {
  return atomic_load_explicit(&g_head, memory_order_acquire);
}

stkr__thread *stkr__threads_next(stkr__thread *t) {
  /* A node's next is written before it is published (release CAS on
   * g_head) or by the worker itself when unlinking. */
  return atomic_load_explicit(&t->next, memory_order_acquire);
}

static void stkr__counts_add(stkr__counts *acc, const stkr__thread *t) {
  /* max(pushed, consumed): the producer counts `pushed` after its commit,
   * so the worker may have read (and written) a record the producer has
   * not counted yet: descheduled in between, or ended there by _exit (seen:
   * "attempted 74630 < written 74631" at load 30). Each record the worker
   * consumed was committed, so attempted; the max counts it once either
   * way and makes attempted >= written hold by construction. Relaxed: a
   * count; the worker's relaxed store in flush/drain.c is the other side
   * (the reset in stkr__threads_reset_counts runs under g_reap_lock, as
   * every caller of this does). */
  uint64_t pushed = atomic_load_explicit(&t->pushed, memory_order_relaxed);
  uint64_t consumed = __atomic_load_n(&t->w_consumed, __ATOMIC_RELAXED);
  acc->pushed += pushed > consumed ? pushed : consumed;
  acc->dropped_ring_full +=
      atomic_load_explicit(&t->dropped_ring_full, memory_order_relaxed);
  acc->dropped_reentrant +=
      atomic_load_explicit(&t->dropped_reentrant, memory_order_relaxed);
}

void stkr__thread_reap(stkr__thread *t, stkr__thread *prev) {
  stkr__thread *next = atomic_load_explicit(&t->next, memory_order_relaxed);
  stkr__thread *expected = t;

  reap_lock();
  stkr__counts_add(&g_retired, t);
  /* t at the head: swing the head, unless a producer just pushed. */
  if (!atomic_compare_exchange_strong_explicit(
          &g_head, &expected, next, memory_order_acq_rel,
          memory_order_acquire)) {
    /* Not the head: producers never modify non-head links, so the
     * predecessor's link is ours to rewrite. The caller's prev, when it
     * still links to t (only the worker unlinks), else a walk. */
    stkr__thread *p =
        prev != NULL && atomic_load_explicit(&prev->next, memory_order_relaxed) == t
            ? prev
            : expected;
    while (p != NULL && atomic_load_explicit(&p->next, memory_order_relaxed) != t)
      p = atomic_load_explicit(&p->next, memory_order_relaxed);
    if (p != NULL)
      atomic_store_explicit(&p->next, next, memory_order_release);
  }
  reap_unlock();
  atomic_fetch_sub_explicit(&g_ring_live, t->ring_charge, memory_order_relaxed);
  stkr__ring_free(&t->ring);
  stkr__uw_cache_free(t);
  munmap(t, stkr__state_bytes());
}

void stkr__threads_counts(stkr__counts *out) {
  stkr__thread *t;

  reap_lock();
  *out = g_retired;
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t))
    stkr__counts_add(out, t);
  reap_unlock();
  out->dropped_other =
      atomic_load_explicit(&g_dropped_other, memory_order_relaxed);
  out->dropped_late =
      atomic_load_explicit(&g_dropped_late, memory_order_relaxed);
  out->threads = atomic_load_explicit(&g_attached, memory_order_relaxed);
}

void stkr__count_dropped_other(void) {
  atomic_fetch_add_explicit(&g_dropped_other, 1, memory_order_relaxed);
  stkr__session_drop_other();
}

/* Set when an exit, _exit or exec ends the session (stkr__recorder_stop_
 * for_exit), cleared by a start and in a forked child: calls that find the
 * recorder off meanwhile are counted as dropped ("exit"), since the
 * threads that run on until the process is gone still make them (QA,
 * session 44: 12-44 a run uncounted, up to 1.8 M in a tight loop, verify
 * "complete"). Not after stkr_shutdown, whose caller asked for the stop.
 * Relaxed: read on the not-running path only; a call that misses the set
 * loaded the state before the stop, so the stop's quiesce waits for it or
 * it is recorded. */
static _Atomic bool g_count_late;

void stkr__count_late_calls(bool on) {
  atomic_store_explicit(&g_count_late, on, memory_order_relaxed);
}

void stkr__late_call(const stkr_site *site) {
  /* Into the session file too while it is mapped, for recovery if the
   * process dies before its last batch (flush/drain.c,
   * stkr__drain_end_late, counts those after that batch's counters). */
  if (!atomic_load_explicit(&g_count_late, memory_order_relaxed))
    return;
  atomic_fetch_add_explicit(&g_dropped_late, 1, memory_order_relaxed);
  stkr__session_drop_late();
  stkr__mark_drop_note(site);
}

/* ---- drops in the ring files, for recovery --------------------------------
 * A ring's drops equal its thread's counters (the producer stores the same
 * count in both: event.c); the session file's drops_other equals
 * g_dropped_other (both rebased to 0 at the start, added to together)
 * plus the flush worker's drops of records it released
 * (stkr__session_drops_worker), as a batch's dropped_other counts both;
 * its retired drops are what reaped threads' rings had not had counted,
 * which g_retired's totals include. So the values a batch's counters read
 * are what they count of the files' drops, exactly (common/
 * stkr_ringfile.h, "drops"). */
static stkr__sess_drops g_sess_noted; /* the drain pass's owner only */

void stkr__threads_counts_mark(stkr__counts *out, uint64_t worker_drops) {
  reap_lock();
  *out = g_retired;
  /* Mark, settle, reap and commit all run in the drain pass's owner (the
   * worker, or an exiting thread that took the pass over): the retired
   * drops read here are those of exactly the threads g_retired holds. */
  stkr__session_drops_note(&g_sess_noted);
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    stkr__counts one = {0};
    stkr__counts_add(&one, t);
    t->w_cnt_full = one.dropped_ring_full;
    t->w_cnt_reentrant = one.dropped_reentrant;
    out->pushed += one.pushed;
    out->dropped_ring_full += one.dropped_ring_full;
    out->dropped_reentrant += one.dropped_reentrant;
  }
  reap_unlock();
  out->dropped_other =
      atomic_load_explicit(&g_dropped_other, memory_order_relaxed);
  /* The session file's drops_other has the worker's drops of released
   * records too (stkr__session_drops_worker): counted is what the
   * batch's dropped_other says, both kinds. */
  g_sess_noted.other = out->dropped_other + worker_drops;
  out->dropped_late =
      atomic_load_explicit(&g_dropped_late, memory_order_relaxed);
  out->threads = atomic_load_explicit(&g_attached, memory_order_relaxed);
}

/* Store v into *field unless it holds it already: the drops line is the
 * producer's too (it writes there when its ring is full), and a store per
 * batch would pull the line away from it for nothing. */
static void store_if_new(_Atomic uint64_t *field, uint64_t v) {
  if (atomic_load_explicit(field, memory_order_relaxed) != v)
    atomic_store_explicit(field, v, memory_order_relaxed);
}

void stkr__threads_drops_pend(uint64_t seq) {
  /* The pass's owner, between mark and the write (as commit). Only rings
   * whose counted changes: the others' counted holds whether or not the
   * batch reaches the disk. */
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    stkr__ring_ctl *c = t->ring.c;
    if (c == NULL ||
        (atomic_load_explicit(&c->counted_full, memory_order_relaxed) ==
             t->w_cnt_full &&
         atomic_load_explicit(&c->counted_reentrant, memory_order_relaxed) ==
             t->w_cnt_reentrant))
      continue;
    stkr__pending_store(&c->pend_seq, seq, &c->pend_full, t->w_cnt_full,
                        &c->pend_reentrant, t->w_cnt_reentrant, NULL, 0);
  }
  stkr__session_drops_pend(&g_sess_noted, seq);
}

void stkr__threads_drops_commit(void) {
  /* The pass's owner, as the reaps that change the list: no lock needed
   * to walk it here (as stkr__drain_release_all in flush/drain_batch.c). */
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    stkr__ring_ctl *c = t->ring.c;
    if (c == NULL) continue;
    store_if_new(&c->counted_full, t->w_cnt_full);
    store_if_new(&c->counted_reentrant, t->w_cnt_reentrant);
  }
  stkr__session_drops_commit(&g_sess_noted);
}

void stkr__thread_drops_settle(stkr__thread *t) {
  stkr__ring_ctl *c = t->ring.c;
  uint64_t full, reent, cf, cr;

  if (c == NULL) return;
  full = atomic_load_explicit(&c->drops_full, memory_order_relaxed);
  reent = atomic_load_explicit(&c->drops_reentrant, memory_order_relaxed);
  cf = atomic_load_explicit(&c->counted_full, memory_order_relaxed);
  cr = atomic_load_explicit(&c->counted_reentrant, memory_order_relaxed);
  /* The pass's owner, as mark and commit: none of them runs between this
   * and the reap that moves the thread's counters to g_retired. */
  /* No pending values: what no batch counted is the retired drops' now. */
  atomic_store_explicit(&c->pend_seq, 0, memory_order_relaxed);
  stkr__session_drops_retire(full > cf ? full - cf : 0,
                             reent > cr ? reent - cr : 0);
  atomic_store_explicit(&c->counted_full, full, memory_order_relaxed);
  atomic_store_explicit(&c->counted_reentrant, reent, memory_order_relaxed);
}

/* The back-off of the waits below (for a thread to leave stkr_event(), for
 * the reap lock): a sleep rather than a spin, since whoever is waited for
 * may need this CPU to go on, and short, since an event lasts well under a
 * microsecond. */
static void pause_briefly(void) {
  struct timespec ts = {0, 200000};
  nanosleep(&ts, NULL);
}

void stkr__threads_wait_idle(unsigned max_ms) {
  stkr__thread *t;
  uint64_t until = stkr__clock_mono_ns() + (uint64_t)max_ms * 1000000u;

  reap_lock();
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t)) {
    /* Acquire: pairs with the release store that ends an event, so the
     * event's reads of the old configuration happen before our writes.
     * Not the caller's own thread: a forked child in follow mode starts
     * its recording from inside its first event. */
    while (t != stkr__tls &&
           atomic_load_explicit(&t->busy, memory_order_acquire) &&
           stkr__clock_mono_ns() < until)
      pause_briefly();
    t->stuck_at_start =
        t != stkr__tls && atomic_load_explicit(&t->busy, memory_order_acquire);
  }
  reap_unlock();
}

/* Whether the prepare handler took the reap lock. Forks with atfork
 * handlers run one at a time (glibc holds its atfork lock from prepare to
 * parent/child). */
static bool g_reap_fork_taken;

void stkr__threads_atfork_prepare(void) {
  uint64_t until = stkr__clock_mono_ns() + 2000000000u;

  /* Tried, not waited for, and not at all from a signal handler that
   * interrupted this thread's own hold: it would wait for itself. */
  g_reap_fork_taken = false;
  if (atomic_load_explicit(&g_reap_held, memory_order_acquire) &&
      pthread_equal(atomic_load_explicit(&g_reap_owner, memory_order_relaxed),
                    pthread_self()))
    return;
  while (pthread_mutex_trylock(&g_reap_lock) != 0) {
    if (stkr__clock_mono_ns() >= until)
      return;
    pause_briefly();
  }
  g_reap_fork_taken = true;
}

void stkr__threads_atfork_parent(void) {
  if (g_reap_fork_taken)
    pthread_mutex_unlock(&g_reap_lock);
}

void stkr__threads_quiesce(unsigned max_ms) {
  stkr__thread *t;
  uint64_t until = stkr__clock_mono_ns() + (uint64_t)max_ms * 1000000u;

  /* A producer that saw the recorder running may still be inside
   * stkr_event(); give it a moment to finish its push so the final drain
   * counts it. Bounded by max_ms of clock time in all (the caller's share
   * of the exit budget; not a count of sleeps, which take far longer than
   * asked on a starved CPU): a thread stopped in a debugger, or
   * descheduled, must not hold up the exit. The reap lock likewise: the
   * worker may hold it while starved of CPU by the app's busy threads, so
   * it is tried until the deadline rather than waited for. */
  while (pthread_mutex_trylock(&g_reap_lock) != 0) {
    if (stkr__clock_mono_ns() >= until)
      return; /* the final drain then simply sees fewer late events */
    pause_briefly();
  }
  reap_took();
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t)) {
    /* Not the calling thread's own: it is here, so no event of it can
     * move on while we wait (one it left by longjmp never ends: QA,
     * session 27, every later shutdown waited the whole 2 s for it).
     * Acquire: pairs with the release store that ends an event, so the
     * final drain sees the record it committed. */
    if (t == stkr__tls)
      continue;
    while (atomic_load_explicit(&t->busy, memory_order_acquire) &&
           stkr__clock_mono_ns() < until) {
      pause_briefly();
    }
  }
  reap_unlock();
}

bool stkr__threads_wait_events_left(unsigned max_ms) {
  stkr__thread *t;
  uint64_t until = stkr__clock_mono_ns() + (uint64_t)max_ms * 1000000u;
  bool all = true;

  /* Worker only, never on the stop path: the reap lock is the worker's. */
  reap_lock();
  for (t = stkr__threads_first(); t != NULL && all; t = stkr__threads_next(t)) {
    /* A thread's events run one after another (a nested one from a signal
     * handler drops before it walks), so once it is seen outside an event,
     * or a later event of it has ended (pushed or a drop count moved), the
     * event it was in is over. Acquire: pairs with the release store of
     * busy that ends an event, and with the release stores of the two
     * counts (event.c), so that what the event read happens before what
     * the caller does next (free a replaced set of unwind tables; TSan
     * reported the free against a walk's read while the counts were
     * relaxed). */
    uint64_t seen = atomic_load_explicit(&t->pushed, memory_order_acquire) +
                    atomic_load_explicit(&t->dropped_ring_full,
                                         memory_order_acquire);
    while (atomic_load_explicit(&t->busy, memory_order_acquire)) {
      uint64_t now_seen =
          atomic_load_explicit(&t->pushed, memory_order_acquire) +
          atomic_load_explicit(&t->dropped_ring_full, memory_order_acquire);
      if (now_seen != seen)
        break;
      if (stkr__clock_mono_ns() >= until) {
        all = false;
        break;
      }
      sched_yield();
    }
  }
  reap_unlock();
  return all;
}

/* Give t a ring file of the current session, if it has none. The old ring
 * is empty or about to be discarded (start: no producer, no consumer). */
static void reback(stkr__thread *t, size_t ring_bytes) {
  stkr__ring fresh = {0};
  uint64_t session = stkr__session_current(), charge, cap;

  if (session == 0 || t->ring.session == session || ring_bytes == 0)
    return;
  /* The size this session's configuration gives a thread now (its tier),
   * charged anew: a thread living across sessions kept the size of the
   * first one's, so a new session's larger rings never reached it (QA,
   * session 23: ~90% dropped as ring full with 16 MiB configured). Over
   * the cap, it keeps its size and charge. */
  atomic_fetch_sub_explicit(&g_ring_live, t->ring_charge, memory_order_relaxed);
  ring_bytes = ring_for_new(ring_bytes, &charge, &cap);
  if (atomic_fetch_add_explicit(&g_ring_live, charge, memory_order_relaxed) +
          charge > cap && t->ring.c != NULL) {
    atomic_fetch_sub_explicit(&g_ring_live, charge, memory_order_relaxed);
    ring_bytes = stkr__ring_size(&t->ring);
    charge = t->ring_charge;
    atomic_fetch_add_explicit(&g_ring_live, charge, memory_order_relaxed);
  }
  if (stkr__ring_init(&fresh, ring_bytes, t->id, t->tid, t->name) != 0 ||
      fresh.session == 0) {
    if (fresh.c != NULL && fresh.session == 0)
      stkr__ring_free(&fresh);
    /* keep the old ring (and its charge): recording goes on, not
     * crash-proof */
    atomic_fetch_sub_explicit(&g_ring_live, charge, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_ring_live, t->ring_charge,
                              memory_order_relaxed);
    return;
  }
  stkr__ring_free(&t->ring);
  t->ring = fresh;
  t->ring_charge = charge;
}

void stkr__threads_reset_counts(void) {
  stkr__thread *t, *next, *prev = NULL;
  size_t ring_bytes = stkr__session_ring_bytes();

  /* Threads that exited while no worker looked (after the last session's
   * end): freed now, not at the new worker's first pass, by which time
   * the threads that attach first had been given smaller rings, their
   * ring memory still counted (stkr__ring_tier; QA, session 37: 3 threads
   * of a second recording after 3 had exited, 1 MiB rings configured, 2
   * of them got 256 KiB and dropped 3 822 of 9 000 events). Dead: their
   * rings were read by that session's end, or stay on disk for recovery;
   * no worker runs, and a producer only pushes in front of them. */
  for (t = stkr__threads_first(); t != NULL; t = next) {
    next = stkr__threads_next(t);
    /* Acquire: pairs with stkr__thread_exit's release store of `exited`,
     * after which the thread never touches t again. */
    if (!t->stuck_at_start &&
        atomic_load_explicit(&t->exited, memory_order_acquire) != 0)
      stkr__thread_reap(t, prev);
    else
      prev = t;
  }
  reap_lock();
  memset(&g_retired, 0, sizeof g_retired);
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t)) {
    atomic_store_explicit(&t->pushed, 0, memory_order_relaxed);
    atomic_store_explicit(&t->dropped_ring_full, 0, memory_order_relaxed);
    atomic_store_explicit(&t->dropped_reentrant, 0, memory_order_relaxed);
    t->w_consumed = t->w_reported_full = t->w_reported_reentrant = 0;
    t->w_cnt_full = t->w_cnt_reentrant = 0; /* counted: the last session's */
    t->w_unreleased = 0; /* a memory ring's count of the last worker's */
    t->w_defined_seg = 0;
    /* Named as it is now (renamed between sessions, or in a forked child
     * before its start: stkr_thread_renamed), its renames applied. */
    memcpy(t->name, t->cur_name, sizeof t->name);
    t->name[sizeof t->name - 1] = '\0';
    atomic_store_explicit(&t->rn_count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->w_rn_done, 0, memory_order_relaxed);
    atomic_store_explicit(&t->rn_lost, 0, memory_order_relaxed);
    t->w_rn_applied = t->w_ev_id = 0;
    t->w_rn_lost_said = false;
    if (t->stuck_at_start) {
      /* Its push may go on: its ring and its producer's tables are left
       * alone, so it goes on sending the last session's stacks as known.
       * The mirror held that session's ids, which the new worker's table
       * gives to other stacks (test-stuck-start: another chain's stack,
       * silently); emptied, those events are written as stack 0,
       * "unknown", until the thread's next start clears its table. Its
       * payload mirror stays: it still matches the producer's table. */
      memset(t->w_slot_stack, 0, sizeof t->w_slot_stack);
      continue;
    }
    if (atomic_load_explicit(&t->exited, memory_order_acquire) == 0) {
      reback(t, ring_bytes);
      /* Attached in a session that walked with frame pointers: its row
       * cache now, or it would keep doing so (test-offstack). */
      if (stkr__unwind_wanted && t->uw_cache == NULL)
        (void)stkr__uw_cache_alloc(t);
    }
    /* A new worker knows no stack: the producer's table (reset below)
     * and the worker's mirror start empty together. */
    stkr__ring_reset(&t->ring);
    memset(t->w_slot_stack, 0, sizeof t->w_slot_stack);
    t->w_payloads_stale = true;
  }
  atomic_store_explicit(&g_dropped_other, 0, memory_order_relaxed);
  atomic_store_explicit(&g_dropped_late, 0, memory_order_relaxed);
  stkr__session_drops_reset(); /* with g_dropped_other and g_retired */
  atomic_store_explicit(&g_attached, 0, memory_order_relaxed);
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t))
    atomic_fetch_add_explicit(&g_attached, 1, memory_order_relaxed);
  reap_unlock();
}

void stkr__threads_forget_after_fork(void) {
  stkr__thread *self = stkr__tls;
  stkr__thread *t, *next;

  /* Only the forking thread exists in the child; the others' states are
   * ours to unmap. munmap is async-signal-safe, as an atfork child handler
   * requires. The reap lock: ours, taken by the prepare handler (released
   * here, the same thread), or, when that gave up, held by a thread that
   * does not exist here (re-initialized). */
  if (g_reap_fork_taken)
    pthread_mutex_unlock(&g_reap_lock);
  else
    pthread_mutex_init(&g_reap_lock, NULL);
  atomic_store_explicit(&g_reap_held, false, memory_order_relaxed);
  stkr__session_forget_after_fork();
  for (t = atomic_load_explicit(&g_head, memory_order_relaxed); t != NULL;
       t = next) {
    next = atomic_load_explicit(&t->next, memory_order_relaxed);
    if (t == self)
      continue;
    /* Unmap only: the files are the parent's (privatize clears session
     * so that free does not unlink them). */
    t->ring.session = 0;
    stkr__ring_free(&t->ring);
    stkr__uw_cache_free(t);
    munmap(t, stkr__state_bytes());
  }
  memset(&g_retired, 0, sizeof g_retired);
  atomic_store_explicit(&g_dropped_other, 0, memory_order_relaxed);
  atomic_store_explicit(&g_dropped_late, 0, memory_order_relaxed);
  atomic_store_explicit(&g_next_id, 0, memory_order_relaxed);
  /* Only our own ring is left to count against the cap. */
  atomic_store_explicit(&g_ring_live,
                        (uintptr_t)self > STKR__THREAD_SENTINEL_MAX
                            ? self->ring_charge
                            : 0,
                        memory_order_relaxed);
  if ((uintptr_t)self > STKR__THREAD_SENTINEL_MAX) {
    atomic_store_explicit(&self->next, NULL, memory_order_relaxed);
    /* The ring holds the parent's events (in the parent's file): the
     * parent writes those. Ours becomes private and empty. */
    if (stkr__ring_privatize(&self->ring) != 0) {
      /* No private memory for it: this thread records nothing here
       * (its state is leaked, like the parent's other threads' are not). */
      stkr__tls = STKR__THREAD_DEAD;
      atomic_store_explicit(&g_head, NULL, memory_order_relaxed);
      atomic_store_explicit(&g_attached, 0, memory_order_relaxed);
      return;
    }
    stkr__ring_reset(&self->ring);
    atomic_store_explicit(&self->pushed, 0, memory_order_relaxed);
    atomic_store_explicit(&self->dropped_ring_full, 0, memory_order_relaxed);
    atomic_store_explicit(&self->dropped_reentrant, 0, memory_order_relaxed);
    atomic_store_explicit(&self->wake_sent, 0, memory_order_relaxed);
    self->w_consumed = self->w_reported_full = self->w_reported_reentrant = 0;
    self->w_unreleased = 0; /* the parent worker's count, not ours */
    self->w_defined_seg = 0;
    memset(self->w_slot_stack, 0, sizeof self->w_slot_stack);
    self->w_payloads_stale = true;
    atomic_store_explicit(&self->busy, 0, memory_order_relaxed);
    self->tid = stkr__os_tid();
    self->id = atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
    atomic_store_explicit(&g_head, self, memory_order_relaxed);
    atomic_store_explicit(&g_attached, 1, memory_order_relaxed);
  } else {
    atomic_store_explicit(&g_head, NULL, memory_order_relaxed);
    atomic_store_explicit(&g_attached, 0, memory_order_relaxed);
  }
}

bool stkr__threads_rings_leftover(void) {
  bool left = false;

  reap_lock();
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c != NULL &&
        (stkr__ring_unread(&t->ring) != 0 || stkr__ring_pending(&t->ring)))
      left = true;
  reap_unlock();
  return left;
}
