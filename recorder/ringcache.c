/*
 * ringcache.c: rings kept mapped for threads about to start (declared in
 * stkr_internal.h, used by ringfile.c and thread.c).
 *
 * A thread's first event takes a ring from here when there is one: the
 * ring of a thread that exited (empty and released), or one the worker
 * made ahead (stkr__ringfile_prefill). Taking one costs no file operation
 * on the program's thread, where creating, sizing and mapping a file costs
 * 0.1-1 ms on a journaling file system.
 *
 * Slots are claimed whole: the worker puts (CAS NULL -> ring, release),
 * starting threads take (exchange -> NULL, acquire: the ring's indices as
 * the worker left them are visible). An exchange claims a slot whole, so
 * there is no ABA. ringfile.c clears the cache when its session closes
 * (and a forked child's copy, without touching the parent's files).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "common/stkr_ringfile.h"
#include "recorder/stkr_internal.h"

/* The slots: written as above, by any thread. */
static stkr__ring_ctl *_Atomic g_cache[STKR_RINGFILE_CACHE];
/* The ring size of each slot's ring, stored (relaxed) after the put: only
 * a hint, for counting and choosing (the ring's own header may not be read
 * before it is claimed: a starting thread may take and unmap it
 * meanwhile). Rings come in several sizes (stkr__ring_tier). */
static _Atomic uint64_t g_cache_size[STKR_RINGFILE_CACHE];
/* The bytes of the mappings the slots hold: added (relaxed) before a put's
 * CAS, taken back after a take's exchange or a failed put, so it never
 * reads low. A cached ring is memory no thread is charged for (the cap of
 * thread.c): this keeps it within STKR_RINGFILE_CACHE_BYTES. A thread
 * pool that churns hands its exited threads' rings to new threads through
 * here: with 32 slots, 64 threads alive at a time sent half their rings to
 * be unlinked while new ones were made (QA, session 29). */
static _Atomic uint64_t g_cache_bytes;

size_t stkr__ringcache_bytes(const stkr__ring_ctl *c) {
  return STKR_RINGFILE_HDR_BYTES + (size_t)c->meta.ring_size;
}

void stkr__ringcache_drop(stkr__ring_ctl *c) {
  uint64_t sid = c->meta.session_id, size = c->meta.ring_size;
  uint32_t no = c->meta.file_no;
  munmap(c, stkr__ringcache_bytes(c)); /* before its file may go to the pool */
  stkr__ringfile_unlink(sid, no, size);
}

bool stkr__ringcache_put(stkr__ring_ctl *c) {
  /* Before the CAS: once c is in, a taker may claim and unmap it. */
  uint64_t size = c->meta.ring_size, bytes = stkr__ringcache_bytes(c);
  if (atomic_fetch_add_explicit(&g_cache_bytes, bytes, memory_order_relaxed) +
          bytes > STKR_RINGFILE_CACHE_BYTES) {
    atomic_fetch_sub_explicit(&g_cache_bytes, bytes, memory_order_relaxed);
    return false;
  }
  for (int i = 0; i < STKR_RINGFILE_CACHE; i++) {
    stkr__ring_ctl *expected = NULL;
    /* Release: the ring's indices, as we leave them, go with it. */
    if (atomic_compare_exchange_strong_explicit(&g_cache[i], &expected, c,
                                                memory_order_release,
                                                memory_order_relaxed)) {
      /* After the ring is in: a taker that sees the old hint skips it or
       * finds the size mismatch on the ring it claimed (take). */
      atomic_store_explicit(&g_cache_size[i], size, memory_order_relaxed);
      return true;
    }
  }
  atomic_fetch_sub_explicit(&g_cache_bytes, bytes, memory_order_relaxed);
  return false;
}

/* A ring taken out of its slot: its bytes leave the cache's count. */
static stkr__ring_ctl *taken(stkr__ring_ctl *c) {
  if (c != NULL)
    atomic_fetch_sub_explicit(&g_cache_bytes, stkr__ringcache_bytes(c),
                              memory_order_relaxed);
  return c;
}

/* Rings of this session but another size stay cached for the threads
 * that want them; only rings of another session (cannot be: the cache is
 * cleared at close) go. */
stkr__ring_ctl *stkr__ringcache_take(uint64_t ring_size, uint64_t session) {
  for (int i = 0; i < STKR_RINGFILE_CACHE; i++) {
    stkr__ring_ctl *c;
    if (atomic_load_explicit(&g_cache[i], memory_order_relaxed) == NULL ||
        atomic_load_explicit(&g_cache_size[i], memory_order_relaxed) !=
            ring_size)
      continue;
    /* Acquire: pairs with the release CAS in stkr__ringcache_put(). */
    c = taken(atomic_exchange_explicit(&g_cache[i], NULL, memory_order_acquire));
    if (c == NULL)
      continue;
    if (c->meta.ring_size == ring_size && c->meta.session_id == session)
      return c;
    /* The hint was stale (the slot changed hands since): back, or out. */
    if (c->meta.session_id != session || !stkr__ringcache_put(c))
      stkr__ringcache_drop(c);
  }
  return NULL;
}

int stkr__ringcache_wanted(uint64_t size, int want) {
  int have = 0, free_slots = 0, other = -1;

  for (int i = 0; i < STKR_RINGFILE_CACHE; i++) {
    if (atomic_load_explicit(&g_cache[i], memory_order_relaxed) == NULL)
      free_slots++;
    else if (atomic_load_explicit(&g_cache_size[i], memory_order_relaxed) == size)
      have++;
    else
      other = i;
  }
  if (have < want && free_slots == 0 && other >= 0) {
    /* Full of other sizes: make room (one a pass is enough). */
    stkr__ring_ctl *c = taken(atomic_exchange_explicit(
        &g_cache[other], NULL, memory_order_acquire));
    if (c != NULL) {
      stkr__ringcache_drop(c);
      free_slots++;
    }
  }
  return have >= want ? 0 : (want - have < free_slots ? want - have : free_slots);
}

void stkr__ringcache_clear(bool unlink_files) {
  for (int i = 0; i < STKR_RINGFILE_CACHE; i++) {
    stkr__ring_ctl *c = taken(
        atomic_exchange_explicit(&g_cache[i], NULL, memory_order_acquire));
    if (c == NULL)
      continue;
    if (unlink_files)
      stkr__ringcache_drop(c);
    else
      munmap(c, stkr__ringcache_bytes(c));
  }
}
