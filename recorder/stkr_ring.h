/*
 * stkr_ring.h: the per-thread ring and its cursor (ring.c), the part of
 * recorder/'s internals that both sides of a ring share: producers on the
 * hot path (event.c, sample.c) and the flush worker that drains them.
 * Not public; stkr_internal.h includes it, so its users need not name it.
 * Split from stkr_internal.h to keep each header under the ~800-line limit.
 */
#ifndef STKR_RING_H
#define STKR_RING_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_ringfile.h"
#include "recorder/stackrec.h"

/* ---- ring (ring.c) --------------------------------------------------------
 * One single-producer/single-consumer byte ring per thread; see ring.c for
 * the design. Records are 8-byte aligned and never split across the end. */

/* A record as it sits in the ring (common/stkr_ringfile.h, "Records"):
 * 24 bytes, then for a full record (STKR__REC_KNOWN clear) the rest of
 * stkr__record_full (its stack's key and the key its slot held before),
 * the PCs and the payload; for a known record the payload only. `size`
 * counts the whole record (padding to 8 included). A record with
 * site_id == 0 is a wrap marker: the consumer skips to the ring's start. */
typedef struct stkr__record {
  uint32_t size;
  uint32_t site_id;
  uint64_t ts_ns;
  uint16_t depth;      /* number of PCs that follow (full records only) */
  uint16_t payload_len;
  uint8_t flags;       /* STKR__REC_* */
  uint8_t slot;        /* the stack's slot in the known-stack table */
  uint8_t pslot;       /* the payload's slot (STKR__REC_PAYLOAD_* set) */
  uint8_t reserved;
} stkr__record;

typedef struct stkr__record_full {
  stkr__record h;
  uint64_t key[2];     /* {stkr__hash_pcs, stkr_stack_key2} */
  uint64_t evicted[2]; /* the slot's key before this record, {0,0}: none */
  /* uint64_t pcs[depth]; then payload_len bytes; then padding */
} stkr__record_full;

/* The ring's invariants, checked in the sanitizer builds only (.bazelrc's
 * asan and tsan configs define STKR_DEBUG_CHECKS, and CI runs every test
 * under both): DEVELOPERS.md allows no assert on a path the app reaches,
 * and a ring's control block lives in a shared file that something else
 * may write into (a raw-fork child; test-stuck-start's zeroed ring, before
 * its fix, was an abort() in every assert-enabled build). */
#ifdef STKR_DEBUG_CHECKS
#define STKR__RING_CHECK(x) assert(x)
#else
#define STKR__RING_CHECK(x) ((void)0)
#endif

#define STKR__REC_PAYLOAD_TRUNCATED STKR_RINGREC_PAYLOAD_TRUNCATED
#define STKR__REC_STACK_TRUNCATED STKR_RINGREC_STACK_TRUNCATED
#define STKR__REC_KNOWN STKR_RINGREC_KNOWN
#define STKR__KNOWN_SLOTS STKR_RINGFILE_KNOWN_SLOTS
#define STKR__REC_PAYLOAD_NEW STKR_RINGREC_PAYLOAD_NEW
#define STKR__REC_PAYLOAD_KNOWN STKR_RINGREC_PAYLOAD_KNOWN
#define STKR__PKNOWN_SLOTS STKR_RINGFILE_PKNOWN_SLOTS
/* Bytes a PAYLOAD_NEW record carries before its payload: the key its
 * payload slot held before. */
#define STKR__PEVICTED_BYTES 16u

static inline bool stkr__record_known(const stkr__record *r) {
  return (r->flags & STKR__REC_KNOWN) != 0;
}
/* A full record's header (only when !stkr__record_known(r)). */
static inline const stkr__record_full *stkr__record_as_full(
    const stkr__record *r) {
  return (const stkr__record_full *)(const void *)r;
}
/* The PCs of a full record (r->depth of them; none in a known record). */
static inline const uint64_t *stkr__record_pcs(const stkr__record *r) {
  return (const uint64_t *)(const void *)(stkr__record_as_full(r) + 1);
}
/* Where the record's payload part starts (after its stack part). */
static inline const uint8_t *stkr__record_ppart(const stkr__record *r) {
  if (stkr__record_known(r))
    return (const uint8_t *)(r + 1);
  return (const uint8_t *)(stkr__record_pcs(r) + r->depth);
}
/* The payload bytes the record carries: NULL for a PAYLOAD_KNOWN record
 * (its bytes are those of the latest PAYLOAD_NEW record of its pslot). */
static inline const uint8_t *stkr__record_payload(const stkr__record *r) {
  if (r->flags & STKR__REC_PAYLOAD_KNOWN)
    return NULL;
  return stkr__record_ppart(r) +
         ((r->flags & STKR__REC_PAYLOAD_NEW) ? STKR__PEVICTED_BYTES : 0);
}
/* Bytes of a full record with `depth` PCs and `payload` bytes of payload
 * part (the payload, plus STKR__PEVICTED_BYTES if PAYLOAD_NEW), and of a
 * known record. */
static inline uint32_t stkr__record_full_bytes(unsigned depth, size_t payload) {
  return (uint32_t)((sizeof(stkr__record_full) + 8u * depth + payload + 7u) &
                    ~7u);
}
static inline uint32_t stkr__record_known_bytes(size_t payload) {
  return (uint32_t)((sizeof(stkr__record) + payload + 7u) & ~7u);
}

#define STKR__CACHE_LINE 64

/* The ring's indices, in the first page of the ring's mapping (the ring
 * file's header, see common/stkr_ringfile.h), so that they persist with the
 * records when the process dies. Two cache lines at fixed file offsets: one
 * written by the producer, one by the consumer. Each side keeps a private
 * copy of the other's index and reloads it only when the ring looks full
 * (producer) or empty (consumer), so in steady state neither side reads the
 * other's line on every record. */
typedef struct stkr__ring_ctl {
  stkr_ringfile_meta meta; /* written at create, read-only after */
  uint8_t pad0[STKR_RINGFILE_HEAD_OFF - sizeof(stkr_ringfile_meta)];
  /* Written by the producer only (release, pairs with the consumer's
   * acquire load in stkr__ring_peek). Byte offset, free-running. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t head;
  /* Producer only: the last tail it loaded (<= the real tail), and where
   * the reserved record starts and how big it may be, between
   * stkr__ring_reserve() and stkr__ring_commit(). */
  uint64_t p_tail;
  uint64_t p_start;
  uint32_t p_reserved;
  /* Producer only: the latest reuse marker (stkr__ring_reserve, "low
   * pages"): where it starts (free-running) and its size. While it is not
   * released (p_tail <= p_skip_pos) it is free space in all but name, and
   * stkr__ring_past_half does not count it. */
  uint64_t p_skip_pos;
  uint64_t p_skip_len;
  /* Producer only: the position whose first use calls for the reuse
   * check (a page start of the upper half, or the half of the next lap),
   * so that an event pays one compare for it. */
  uint64_t p_check;
  /* Producer only: min(p_tail + ring size, p_check), the one bound the
   * fast path of stkr__ring_reserve compares with (0: look). */
  uint64_t p_limit;

  /* Written by the consumer only (release, pairs with the producer's
   * acquire load in stkr__ring_reserve). Byte offset, free-running: every
   * byte below it is written out (or counted lost) and may be reused. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t tail;
  /* Consumer only: the last head it loaded (<= the real head), and where
   * it reads next (tail <= c_read <= head): records in [tail, c_read) are
   * in a batch that is not written yet, and stay in the ring until it is. */
  uint64_t c_head;
  uint64_t c_read;

  /* Drops (common/stkr_ringfile.h, [384, 416)): the owner's, written by
   * it (drops_full: its single writer, a load and a store; reentrant: an
   * atomic add, nested handlers race), each equal to the thread's own
   * counter of the same name since both start at 0 when the ring gets
   * its owner; and how many of them the latest written batch counted,
   * written by the worker after the write, and only when that changed
   * (stkr__threads_drops_commit), and at the owner's reap
   * (stkr__thread_drops_settle). Read by recovery after the process died.
   * A line of their own: written only when events drop, and after. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t drops_full;
  _Atomic uint64_t drops_reentrant;
  _Atomic uint64_t counted_full;
  _Atomic uint64_t counted_reentrant;

  /* Pending drops (common/stkr_ringfile.h, [448, 472)): what the batch
   * pend_seq counts, stored by the worker before its write, when it
   * differs from counted (stkr__threads_drops_pend); pend_seq 0 at the
   * owner's reap. A line apart from the producer's drops: the worker's
   * stores here never pull that line from the producer. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t pend_seq;
  _Atomic uint64_t pend_full;
  _Atomic uint64_t pend_reentrant;

  /* The known-stack table (common/stkr_ringfile.h, "Records"): the key of
   * the stack whose full record each slot last carried. Written by the
   * producer only (after the commit of that record), read by the producer
   * and, after the process died, by recovery; cleared (no producer
   * active) when the ring is reset or gets a new owner. The worker never
   * reads it: it follows the records in ring order instead. */
  uint8_t pad1[STKR_RINGFILE_KNOWN_OFF - STKR_RINGFILE_PEND_OFF - 24];
  uint64_t known[STKR__KNOWN_SLOTS][2];
  /* The known-payload table: the same rules, payload keys by pslot. */
  uint64_t pknown[STKR__PKNOWN_SLOTS][2];
} stkr__ring_ctl;

/* The control page is the ring file's header: each field at its offset. */
#define STKR__RING_AT(field, off)                                              \
  _Static_assert(offsetof(stkr__ring_ctl, field) == (off),                     \
                 "ring file offset of " #field)
STKR__RING_AT(head, STKR_RINGFILE_HEAD_OFF);
STKR__RING_AT(tail, STKR_RINGFILE_TAIL_OFF);
STKR__RING_AT(drops_full, STKR_RINGFILE_DROPS_OFF);
STKR__RING_AT(pend_seq, STKR_RINGFILE_PEND_OFF);
STKR__RING_AT(known, STKR_RINGFILE_KNOWN_OFF);
STKR__RING_AT(pknown, STKR_RINGFILE_PKNOWN_OFF);
#undef STKR__RING_AT
_Static_assert(sizeof(stkr__ring_ctl) <= STKR_RINGFILE_HDR_BYTES,
               "ring control page");
_Static_assert(sizeof(stkr__record) == sizeof(stkr_ringfile_record) &&
                   offsetof(stkr__record, depth) ==
                       offsetof(stkr_ringfile_record, depth) &&
                   offsetof(stkr__record, slot) ==
                       offsetof(stkr_ringfile_record, slot) &&
                   offsetof(stkr__record, pslot) ==
                       offsetof(stkr_ringfile_record, pslot) &&
                   sizeof(stkr__record_full) == sizeof(stkr_ringfile_full),
               "ring record layout");
_Static_assert(STKR_RINGREC_MAX_DEPTH == STKR_MAX_DEPTH,
               "the records' depth cap is the recorder's");

/* A thread's handle on its ring: where the mapping is. Set when the ring
 * is mapped (attach, or a new session re-backing it while no producer and
 * no consumer is active); read-only otherwise, read by both sides. */
typedef struct stkr__ring {
  stkr__ring_ctl *c; /* start of the mapping; NULL: no ring */
  uint8_t *buf;      /* (uint8_t *)c + STKR_RINGFILE_HDR_BYTES */
  uint64_t mask;     /* size - 1; size is a power of two */
  /* Non-zero: the mapping is a file of session `session` (unlinked when
   * the ring is freed); 0: anonymous memory (no session, or the file
   * could not be had). */
  uint64_t session;
} stkr__ring;

/* Map a ring of at least `bytes`: a file of the current session (see
 * ringfile.c) when there is one, else anonymous memory. thread_id/os_tid
 * /name go into the file's header. 0 or -errno; never leaves r half set. */
int stkr__ring_init(stkr__ring *r, size_t bytes, uint32_t thread_id,
                    uint64_t os_tid, const char *name);
/* The ring size stkr__ring_init() makes for `bytes`: a power of two. */
size_t stkr__ring_round(size_t bytes);
/* Done with the ring (its thread exited, everything in it is written
 * out): keep it for the next thread of the session (stkr__ringfile_keep),
 * or unmap it and unlink its file. Worker, or a forked child. */
void stkr__ring_free(stkr__ring *r);
/* Forked child: the mapping is shared with the parent's file; give this
 * process a private, empty ring of the same size at the same address.
 * 0, or -ENOMEM (the ring is then unmapped, r->c NULL). */
int stkr__ring_privatize(stkr__ring *r);
/* Low pages (memory that follows use): a ring the worker keeps empty would
 * still have every page touched after one lap, since head only runs
 * forward (200 threads x 64 KiB rings: 13.6 MB resident for a few KiB of
 * records each). So when a record is about to touch a page of the ring's
 * upper half and the ring is empty and released (tail == head, all read
 * and written), the producer writes a wrap marker over the rest and starts
 * again at offset 0: a ring that keeps up stays in its lower half. The
 * marker is a wrap marker like any other (readers and recovery skip it);
 * it holds at most half the ring until the worker's next pass releases it,
 * and the producer still has the other half. The check reloads tail once
 * per page crossing in the upper half, not per event. The rule (for a
 * record of `size` bytes at offset `off`; tests follow it): */
static inline bool stkr__ring_reuse_low(const stkr__ring *r, uint64_t off,
                                        uint32_t size) {
  /* The page test first: false but once a page, so one branch an event.
   * Its first and last bytes in different pages (off == 0 included). */
  return ((off - 1) ^ (off + size - 1)) >= 4096 && off >= ((r->mask + 1) >> 1);
}
/* ... and where the producer looks next, after a record ending at `end`
 * (free-running): a record that reaches that byte may be the rule's. */
static inline uint64_t stkr__ring_next_check(const stkr__ring *r,
                                             uint64_t end) {
  uint64_t half = (r->mask + 1) >> 1, off_end = end & r->mask;
  if (off_end < half)
    return end - off_end + half;
  return (end + 4095) & ~(uint64_t)4095;
}

/* Producer: stkr__ring_reserve's slow path (ring.c): a wrap, a ring that
 * looks full by the cached tail, or a record that reaches p_check. */
void *stkr__ring_reserve_slow(stkr__ring *r, uint32_t size);
/* Producer: room for `size` bytes (multiple of 8)? Returns the slot or NULL
 * when full. Does not publish. */
/* Inline, as commit and past_half: the three run on every event, and a
 * call each cost ~1 ns of stkr_event's fixed part. The common case is two
 * compares: no wrap, and below p_limit (the cached tail's room and the
 * next reuse check in one bound: a separate compare for the check cost
 * 1.2 ns of stkr_event at depth 8, measured). */
static inline void *stkr__ring_reserve(stkr__ring *r, uint32_t size) {
  stkr__ring_ctl *c = r->c;
  /* Own counter: only this thread writes head. */
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  uint64_t off = head & r->mask;

  STKR__RING_CHECK(size % 8 == 0 && size >= sizeof(stkr__record));
  if (__builtin_expect(size > r->mask + 1 - off || head + size > c->p_limit,
                       0))
    return stkr__ring_reserve_slow(r, size);
  c->p_start = head;
  c->p_reserved = size;
  return r->buf + off;
}
/* Producer: make the reserved record visible to the consumer. */
static inline void stkr__ring_commit(stkr__ring *r, uint32_t size) {
  stkr__ring_ctl *c = r->c;
  /* reserve() made room for p_reserved bytes at p_start; a record may end up
   * shorter (fewer frames than max_depth), never longer. */
  STKR__RING_CHECK(size <= c->p_reserved && size % 8 == 0);
  /* Pairs with the acquire load of head in stkr__ring_peek(): the consumer
   * that sees this head also sees every byte of the record (and of a wrap
   * marker written before it). */
  atomic_store_explicit(&c->head, c->p_start + size, memory_order_release);
}
/* A pending-drops record (common/stkr_ringfile.h, "pending"): *seq 0,
 * then the values, then seq, so that a death in between leaves 0 (none)
 * or a complete record. Release: the stores stay in this order (a process
 * that dies leaves every store it made in the page cache). c may be
 * NULL. The flush pass's owner only. */
static inline void stkr__pending_store(_Atomic uint64_t *seq_field,
                                       uint64_t seq, _Atomic uint64_t *a,
                                       uint64_t va, _Atomic uint64_t *b,
                                       uint64_t vb, _Atomic uint64_t *c,
                                       uint64_t vc) {
  atomic_store_explicit(seq_field, 0, memory_order_relaxed);
  atomic_store_explicit(a, va, memory_order_release);
  atomic_store_explicit(b, vb, memory_order_release);
  if (c != NULL) atomic_store_explicit(c, vc, memory_order_release);
  atomic_store_explicit(seq_field, seq, memory_order_release);
}
/* The ring's drop counters (a new owner, or a reset: no producer active,
 * its thread's own counters 0 too). */
static inline void stkr__ring_drops_clear(stkr__ring_ctl *c) {
  atomic_store_explicit(&c->drops_full, 0, memory_order_relaxed);
  atomic_store_explicit(&c->drops_reentrant, 0, memory_order_relaxed);
  atomic_store_explicit(&c->counted_full, 0, memory_order_relaxed);
  atomic_store_explicit(&c->counted_reentrant, 0, memory_order_relaxed);
  atomic_store_explicit(&c->pend_seq, 0, memory_order_relaxed);
  atomic_store_explicit(&c->pend_full, 0, memory_order_relaxed);
  atomic_store_explicit(&c->pend_reentrant, 0, memory_order_relaxed);
}
/* Consumer: the oldest unread record, or NULL when none. Stays valid until
 * its space is released. */
const stkr__record *stkr__ring_peek(stkr__ring *r);
/* Consumer: a read position kept in the consumer's own memory for a run
 * of reads, stored into the ring's control page only at the run's end.
 * Why: c_read shares its cache line with `tail`, which a producer whose
 * ring is full reloads on every event it drops; storing c_read once per
 * record bounced that line between the two cores for every record (perf:
 * the drain's biggest cost with one producer looping). Between load and
 * store nothing else may read or move the ring's read position
 * (stkr__ring_read_pos, stkr__ring_release_read, stkr__ring_unread,
 * stkr__ring_pending see the stored one). */
typedef struct stkr__ring_cursor {
  uint64_t pos;  /* c_read of the run */
  uint64_t head; /* c_head of the run: the last head loaded */
  uint64_t corrupt; /* bytes skipped at records that failed the checks */
} stkr__ring_cursor;
static inline void stkr__ring_cursor_load(const stkr__ring *r,
                                          stkr__ring_cursor *cur) {
  cur->pos = r->c->c_read;
  cur->head = r->c->c_head;
  cur->corrupt = 0;
}
static inline void stkr__ring_cursor_store(stkr__ring *r,
                                           const stkr__ring_cursor *cur) {
  r->c->c_read = cur->pos;
  r->c->c_head = cur->head;
}
/* How far ahead of the read position the consumer asks for the ring's
 * lines: the records it reads were written on another core, and asking a
 * few lines early overlaps those transfers instead of waiting for each. */
#define STKR__RING_PREFETCH_BYTES 512u
/* stkr__ring_cursor_peek's slow path (ring.c): a head to reload, a wrap
 * marker to skip, or a record that fails the checks (its size, then
 * stkr_ringfile_record_check): the rest up to the head is skipped and
 * counted in cur->corrupt, never read. */
const stkr__record *stkr__ring_cursor_peek_slow(const stkr__ring *r,
                                                stkr__ring_cursor *cur);
/* The oldest unread record at cur (skipping wrap markers), or NULL.
 * Inline: the worker calls it once per record, and as a call it was ~2%
 * of the worker's time (flush_throughput); the common case is a record
 * below the head already seen that passes the checks. */
static inline const stkr__record *
stkr__ring_cursor_peek(const stkr__ring *r, stkr__ring_cursor *cur) {
  uint64_t pos = cur->pos, head = cur->head;

  if (pos != head) {
    const stkr__record *rec =
        (const stkr__record *)(const void *)(r->buf + (pos & r->mask));
    if (head - pos > STKR__RING_PREFETCH_BYTES)
      __builtin_prefetch(r->buf +
                         ((pos + STKR__RING_PREFETCH_BYTES) & r->mask));
    uint64_t hdr;
    if (rec->site_id != 0 && rec->size >= sizeof(stkr__record) &&
        rec->size % 8 == 0 && rec->size <= head - pos &&
        stkr_ringfile_record_check((const stkr_ringfile_record *)rec,
                                   &hdr) == NULL)
      return rec;
  }
  return stkr__ring_cursor_peek_slow(r, cur);
}
/* Done reading rec, the record stkr__ring_cursor_peek returned. */
static inline void stkr__ring_cursor_next(stkr__ring_cursor *cur,
                                          const stkr__record *rec) {
  cur->pos += rec->size;
}
/* Consumer: done reading rec; moves the read position only, the space
 * stays taken until stkr__ring_release_read() (the flush worker: after the
 * batch holding rec was written). */
void stkr__ring_consume(stkr__ring *r, const stkr__record *rec);
/* Consumer: consume rec and release its space at once (tests, benches). */
void stkr__ring_release(stkr__ring *r, const stkr__record *rec);
/* Consumer: everything read so far is written out: hand it back to the
 * producer (and make it the durable position in the ring file). */
void stkr__ring_release_read(stkr__ring *r);
/* Consumer: the read position (free-running), and whether read records
 * wait for release. */
static inline uint64_t stkr__ring_read_pos(const stkr__ring *r) {
  return r->c->c_read;
}
static inline bool stkr__ring_pending(const stkr__ring *r) {
  return r->c->c_read !=
         atomic_load_explicit(&r->c->tail, memory_order_relaxed);
}
/* Consumer: the release position, below which everything is handed back
 * (relaxed: the consumer is tail's only writer). */
static inline uint64_t stkr__ring_tail(const stkr__ring *r) {
  return atomic_load_explicit(&r->c->tail, memory_order_relaxed);
}
/* head - tail: bytes not yet released. Either side (a snapshot). */
uint64_t stkr__ring_used(const stkr__ring *r);
/* Consumer: head - c_read, bytes not yet read. */
uint64_t stkr__ring_unread(const stkr__ring *r);
/* Producer: is the ring more than half full? Uses the cached tail and
 * reloads it only when the cached view says yes. */
static inline bool stkr__ring_past_half(stkr__ring *r) {
  stkr__ring_ctl *c = r->c;
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  uint64_t half = (r->mask + 1) >> 1;
  uint64_t skip;

  if (head - c->p_tail <= half)
    return false; /* the cached tail overstates use: surely not past half */
  /* An unreleased reuse marker is not use (see stkr__ring_reuse_low):
   * without this, every event after one would reload tail until the
   * worker's next pass. */
  skip = c->p_tail <= c->p_skip_pos ? c->p_skip_len : 0;
  if (head - c->p_tail - skip <= half)
    return false;
  /* Acquire: as in stkr__ring_reserve(). */
  c->p_tail = atomic_load_explicit(&c->tail, memory_order_acquire);
  skip = c->p_tail <= c->p_skip_pos ? c->p_skip_len : 0;
  return head - c->p_tail - skip > half;
}
/* Discard everything unread and clear the known-stack table. Only while
 * neither side is active. */
void stkr__ring_reset(stkr__ring *r);
static inline uint64_t stkr__ring_size(const stkr__ring *r) { return r->mask + 1; }

#endif /* STKR_RING_H */
