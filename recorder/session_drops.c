/*
 * session_drops.c: the session file's drop counters, for recovery
 * (common/stkr_ringfile.h, stkr_sessfile_hdr: drops_other, retired_*,
 * counted_*, pend_*, dropped_write_error), and the worker's other notes
 * into it (the ids used, the clock). The ring files' own are in thread.c,
 * next to the thread counters they equal.
 *
 * The header's mapping (stkr__session_hdr) stays mapped while the worker
 * runs; close unmaps it after the worker's end, once no producer holding
 * `busy` runs and no stkr__session_add_u64 is in flight (ringfile.c).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_ringfile.h"
#include "recorder/stkr_internal.h"

void stkr__session_drop_other(void) {
  /* Any thread, with or without a ring (then no `busy` holds the close
   * off): through ringfile.c's guard of the mapping. */
  stkr__session_add_u64(offsetof(stkr_sessfile_hdr, drops_other), 1);
}

void stkr__session_drop_late(void) {
  stkr__session_add_u64(offsetof(stkr_sessfile_hdr, drops_late), 1);
}

void stkr__session_mark_dropped(void) {
  stkr__session_add_u64(offsetof(stkr_sessfile_hdr, marks_dropped), 1);
}

void stkr__session_drops_worker(uint64_t n) {
  /* The worker, while producers may add (an atomic add, as theirs). */
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h != NULL && n != 0)
    __atomic_fetch_add(&h->drops_other, n, __ATOMIC_RELAXED);
}

void stkr__session_drops_retire(uint64_t full, uint64_t reentrant) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h == NULL || (full == 0 && reentrant == 0))
    return;
  /* Worker only: plain adds, relaxed (read by recovery after we died). */
  __atomic_store_n(&h->retired_full, h->retired_full + full, __ATOMIC_RELAXED);
  __atomic_store_n(&h->retired_reentrant, h->retired_reentrant + reentrant,
                   __ATOMIC_RELAXED);
}

void stkr__session_drops_note(stkr__sess_drops *out) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  out->retired_full = h ? __atomic_load_n(&h->retired_full, __ATOMIC_RELAXED) : 0;
  out->retired_reentrant =
      h ? __atomic_load_n(&h->retired_reentrant, __ATOMIC_RELAXED) : 0;
}

void stkr__session_drops_commit(const stkr__sess_drops *noted) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h == NULL)
    return;
  __atomic_store_n(&h->counted_other, noted->other, __ATOMIC_RELAXED);
  __atomic_store_n(&h->counted_retired_full, noted->retired_full,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&h->counted_retired_reentrant, noted->retired_reentrant,
                   __ATOMIC_RELAXED);
}

void stkr__session_drops_pend(const stkr__sess_drops *noted, uint64_t seq) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h == NULL ||
      (__atomic_load_n(&h->counted_other, __ATOMIC_RELAXED) == noted->other &&
       __atomic_load_n(&h->counted_retired_full, __ATOMIC_RELAXED) ==
           noted->retired_full &&
       __atomic_load_n(&h->counted_retired_reentrant, __ATOMIC_RELAXED) ==
           noted->retired_reentrant))
    return;
  /* Worker only, before the write of batch seq (common/stkr_ringfile.h,
   * "pending"). */
  stkr__pending_store((_Atomic uint64_t *)&h->pend_seq, seq,
                      (_Atomic uint64_t *)&h->pend_other, noted->other,
                      (_Atomic uint64_t *)&h->pend_retired_full,
                      noted->retired_full,
                      (_Atomic uint64_t *)&h->pend_retired_reentrant,
                      noted->retired_reentrant);
}

void stkr__session_write_errors(uint64_t total) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  /* Worker only; relaxed: read by recovery after we died. */
  if (h != NULL) __atomic_store_n(&h->dropped_write_error, total, __ATOMIC_RELAXED);
}

void stkr__session_drops_reset(void) {
  /* At the start, no producer active: the file's counters start with
   * g_dropped_other and g_retired (a new session's file is zero anyway;
   * this rebases one a drop reached between its open and this reset). */
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h == NULL)
    return;
  /* Every drop field, drops_other through dropped_write_error: u64s in a
   * row (stkr_sessfile_hdr), so a field added among them is reset too.
   * Atomic stores, as every other access to them. */
  for (size_t off = offsetof(stkr_sessfile_hdr, drops_other);
       off < offsetof(stkr_sessfile_hdr, dropped_write_error) + 8; off += 8)
    __atomic_store_n((uint64_t *)((char *)h + off), 0, __ATOMIC_RELAXED);
  __atomic_store_n(&h->drops_late, 0, __ATOMIC_RELAXED);
}

void stkr__session_note(uint32_t max_stack_id, uint64_t batch_seq) {
  /* Worker only, while the session is open (close runs after the worker
   * is joined). Relaxed: read by recovery after we died. */
  stkr_sessfile_hdr *h = stkr__session_hdr();
  if (h == NULL)
    return;
  __atomic_store_n(&h->max_stack_id, max_stack_id, __ATOMIC_RELAXED);
  __atomic_store_n(&h->max_batch_seq, batch_seq, __ATOMIC_RELAXED);
}

void stkr__session_clock(const stkr_clock_cal *cal) {
  /* Worker (or the start, before any producer), while the session is
   * open. The slot not in use first, then the index: recovery after a
   * death mid-update reads the previous, complete slot. */
  stkr_sessfile_hdr *h = stkr__session_hdr();
  uint32_t next;
  if (h == NULL)
    return;
  next = (__atomic_load_n(&h->clock_idx, __ATOMIC_RELAXED) + 1) & 1;
  h->clock[next] = *cal;
  __atomic_store_n(&h->clock_idx, next, __ATOMIC_RELEASE);
}
