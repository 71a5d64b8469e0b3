/*
 * ring.c: one single-producer/single-consumer byte ring per thread.
 *
 * Design (after Linux's circ_buf.h and circular-buffers.rst):
 * - The buffer is a power of two bytes; `head` and `tail` are free-running
 *   64-bit byte counters (they never wrap in practice), masked on use, so
 *   "used" is simply head - tail and a full ring needs no spare slot.
 * - The producer (the recording thread) is the only writer of `head`: it
 *   writes a record into the free space, then release-stores head. The
 *   consumer (the flush worker) is the only writer of `tail`: it
 *   acquire-loads head, reads records, then release-stores tail once it no
 *   longer needs them, which hands the space back to the producer.
 * - A record is never split across the end of the buffer: when it does not
 *   fit before the end, the producer writes a wrap marker (a record with
 *   site_id 0) over the rest and starts the record at offset 0. This keeps
 *   the consumer's view of a record one contiguous, directly usable struct.
 * - Nothing here blocks, allocates or makes a system call after init, so a
 *   push is async-signal-safe as long as the caller prevents a signal
 *   handler on the same thread from pushing in the middle of a push (the
 *   caller's `busy` flag does that).
 */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "recorder/stkr_internal.h"

int stkr__ring_init(stkr__ring *r, size_t bytes) {
  size_t size = 4096;
  void *p;

  while (size < bytes && size < ((size_t)1 << 40))
    size <<= 1;
  /* mmap, not malloc: the first event of a thread may run in a context
   * where malloc is unsafe, and whole pages keep rings off the heap. */
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
           -1, 0);
  if (p == MAP_FAILED)
    return -ENOMEM;
  r->buf = p;
  r->mask = size - 1;
  r->p_start = 0;
  r->p_reserved = 0;
  r->p_tail = 0;
  r->c_head = 0;
  atomic_store_explicit(&r->head, 0, memory_order_relaxed);
  atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
  return 0;
}

void stkr__ring_free(stkr__ring *r) {
  if (r->buf != NULL)
    munmap(r->buf, (size_t)(r->mask + 1));
  r->buf = NULL;
}

void *stkr__ring_reserve(stkr__ring *r, uint32_t size) {
  uint64_t ring_size = r->mask + 1;
  /* Own counter: only this thread writes head. */
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t off = head & r->mask;
  uint64_t to_end = ring_size - off;
  uint64_t need = size;

  assert(size % 8 == 0 && size >= sizeof(stkr__record));
  if (size > to_end)
    need += to_end; /* the wrap marker eats the rest of the buffer */
  if (need > ring_size - (head - r->p_tail)) {
    /* Looks full by the cached tail: look at the real one. Acquire pairs
     * with the release store in stkr__ring_release(): once we see the
     * consumer's new tail, it has finished reading the bytes before it. */
    r->p_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (need > ring_size - (head - r->p_tail))
      return NULL;
  }
  if (size > to_end) {
    stkr__record *marker = (stkr__record *)(r->buf + off);
    /* to_end is a multiple of 8 (every record is) and non-zero, and a
     * marker needs only its size and site_id fields: 8 bytes. */
    marker->size = (uint32_t)to_end;
    marker->site_id = 0;
    head += to_end;
    off = 0;
  }
  r->p_start = head;
  r->p_reserved = size;
  return r->buf + off;
}

void stkr__ring_commit(stkr__ring *r, uint32_t size) {
  /* reserve() made room for p_reserved bytes at p_start; a record may end up
   * shorter (fewer frames than max_depth), never longer. */
  assert(size <= r->p_reserved && size % 8 == 0);
  /* Pairs with the acquire load of head in stkr__ring_peek(): the consumer
   * that sees this head also sees every byte of the record (and of a wrap
   * marker written before it). */
  atomic_store_explicit(&r->head, r->p_start + size, memory_order_release);
}

const stkr__record *stkr__ring_peek(stkr__ring *r) {
  for (;;) {
    /* Own counter: only the consumer writes tail. */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = r->c_head;
    const stkr__record *rec;

    if (tail == head) {
      /* Looks empty by the cached head: look at the real one. Acquire
       * pairs with the release store in stkr__ring_commit(): every record
       * below the head we see is completely written. */
      head = r->c_head = atomic_load_explicit(&r->head, memory_order_acquire);
      if (tail == head)
        return NULL;
    }
    rec = (const stkr__record *)(r->buf + (tail & r->mask));
    if (rec->size < 8 || rec->size % 8 != 0 || rec->size > head - tail ||
        (rec->site_id != 0 && rec->size < sizeof(stkr__record))) {
      /* Cannot happen unless memory was scribbled on by the app. Drop what
       * is there rather than read garbage; the producer carries on. */
      assert(!"corrupt ring record");
      atomic_store_explicit(&r->tail, head, memory_order_release);
      continue;
    }
    if (rec->site_id != 0)
      return rec;
    /* Wrap marker: hand its bytes back and look at offset 0. Release pairs
     * with the acquire load of tail in stkr__ring_reserve(). */
    atomic_store_explicit(&r->tail, tail + rec->size, memory_order_release);
  }
}

void stkr__ring_release(stkr__ring *r, const stkr__record *rec) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  assert((const uint8_t *)rec == r->buf + (tail & r->mask));
  /* Pairs with the acquire load of tail in stkr__ring_reserve(): we are
   * done reading the record, the producer may overwrite it. */
  atomic_store_explicit(&r->tail, tail + rec->size, memory_order_release);
}

uint64_t stkr__ring_used(const stkr__ring *r) {
  /* A snapshot for high-water checks and stats; either side may call it. */
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  return head - tail;
}

bool stkr__ring_past_half(stkr__ring *r) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t half = (r->mask + 1) >> 1;

  if (head - r->p_tail <= half)
    return false; /* the cached tail overstates use: surely not past half */
  /* Acquire: as in stkr__ring_reserve(). */
  r->p_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  return head - r->p_tail > half;
}

void stkr__ring_reset(stkr__ring *r) {
  /* Only when neither side is active (start, or a forked child). */
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  atomic_store_explicit(&r->tail, head, memory_order_relaxed);
  r->p_tail = head;
  r->c_head = head;
}
