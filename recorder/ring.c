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
 * - The consumer reads ahead of `tail` (c_read) and releases only once the
 *   batch holding what it read has gone through write(2): released space is
 *   what the recording no longer needs from memory, so `tail` in the ring
 *   file is a durable position for recovery after a crash.
 * - The indices live in the first page of the ring's mapping, a MAP_SHARED
 *   file of the recording session (ringfile.c): if the process dies, the
 *   page cache still holds every committed record and both indices, and
 *   recovery (proto/stkr_recover.c) reads them back. Stores into a shared
 *   mapping cost the same as into anonymous memory: no system call.
 * - Nothing here blocks, allocates or makes a system call after init, so a
 *   push is async-signal-safe as long as the caller prevents a signal
 *   handler on the same thread from pushing in the middle of a push (the
 *   caller's `busy` flag does that).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "recorder/stkr_internal.h"

static size_t ring_map_bytes(const stkr__ring *r) {
  return STKR_RINGFILE_HDR_BYTES + (size_t)(r->mask + 1);
}

size_t stkr__ring_round(size_t bytes) {
  size_t size = 4096;
  while (size < bytes && size < ((size_t)1 << 31))
    size <<= 1;
  return size;
}

int stkr__ring_init(stkr__ring *r, size_t bytes, uint32_t thread_id,
                    uint64_t os_tid, const char *name) {
  size_t size = stkr__ring_round(bytes);
  stkr__ring_ctl *c = NULL;
  uint64_t session = 0;

  if (stkr__ringfile_map(size, thread_id, os_tid, name, &c, &session) != 0) {
    /* No session, or no file: anonymous memory, as before ring files.
     * mmap, not malloc: the first event of a thread may run where malloc
     * is unsafe, and whole pages keep rings off the heap. */
    void *p = mmap(NULL, STKR_RINGFILE_HDR_BYTES + size,
                   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return -ENOMEM;
    c = p;
    session = 0;
  }
  /* Fresh pages are zero: head, tail and the private copies start at 0. */
  r->c = c;
  r->buf = (uint8_t *)c + STKR_RINGFILE_HDR_BYTES;
  r->mask = size - 1;
  r->session = session;
  return 0;
}

void stkr__ring_free(stkr__ring *r) {
  if (r->c != NULL && !stkr__ringfile_keep(r->c, r->session)) {
    uint32_t file_no = r->c->meta.file_no; /* 0 in anonymous rings */
    munmap(r->c, ring_map_bytes(r));
    stkr__ringfile_unlink(r->session, file_no, r->mask + 1);
  }
  r->c = NULL;
  r->buf = NULL;
}

int stkr__ring_privatize(stkr__ring *r) {
  void *p;

  if (r->c == NULL || r->session == 0)
    return 0; /* anonymous memory is private to us already */
  /* Same address, fresh private zero pages: the parent keeps its file. */
  p = mmap(r->c, ring_map_bytes(r), PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) {
    /* Cannot happen short of memory exhaustion; the ring must not write
     * into the parent's file: unmap it, the caller gives the thread up. */
    munmap(r->c, ring_map_bytes(r));
    r->c = NULL;
    r->buf = NULL;
    r->session = 0;
    return -ENOMEM;
  }
  r->session = 0;
  return 0;
}

void *stkr__ring_reserve_slow(stkr__ring *r, uint32_t size) {
  stkr__ring_ctl *c = r->c;
  uint64_t ring_size = r->mask + 1;
  uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
  uint64_t off = head & r->mask;
  uint64_t to_end = ring_size - off;
  uint64_t need = size;
  bool wrap = size > to_end, reuse = false;

  if (!wrap && head + size > c->p_check && stkr__ring_reuse_low(r, off, size)) {
    /* Acquire: as below; equal means every byte before head is released. */
    c->p_tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    wrap = reuse = c->p_tail == head;
  }
  if (wrap)
    need += to_end; /* the wrap marker eats the rest of the buffer */
  if (need > ring_size - (head - c->p_tail)) {
    /* Looks full by the cached tail: look at the real one. Acquire pairs
     * with the release store in stkr__ring_release_read(): once we see the
     * consumer's new tail, it has finished reading the bytes before it. */
    c->p_tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    if (need > ring_size - (head - c->p_tail))
      return NULL;
  }
  if (wrap) {
    stkr__record *marker = (stkr__record *)(r->buf + off);
    /* to_end is a multiple of 8 (every record is) and non-zero, and a
     * marker needs only its size and site_id fields: 8 bytes. */
    marker->size = (uint32_t)to_end;
    marker->site_id = 0;
    if (reuse) {
      c->p_skip_pos = head;
      c->p_skip_len = to_end;
    }
    head += to_end;
    off = 0;
  }
  if (head + size > c->p_check)
    c->p_check = stkr__ring_next_check(r, head + size);
  c->p_limit = c->p_tail + ring_size < c->p_check ? c->p_tail + ring_size
                                                   : c->p_check;
  c->p_start = head;
  c->p_reserved = size;
  return r->buf + off;
}

const stkr__record *stkr__ring_cursor_peek_slow(const stkr__ring *r,
                                                stkr__ring_cursor *cur) {
  stkr__ring_ctl *c = r->c;
  for (;;) {
    uint64_t pos = cur->pos;
    uint64_t head = cur->head;
    const stkr__record *rec;

    if (pos == head) {
      /* Looks empty by the cached head: look at the real one. Acquire
       * pairs with the release store in stkr__ring_commit(): every record
       * below the head we see is completely written. */
      head = cur->head = atomic_load_explicit(&c->head, memory_order_acquire);
      if (pos == head)
        return NULL;
    }
    /* Only below the head we saw: a line the producer is still writing
     * would be pulled away from it for nothing. */
    if (head - pos > STKR__RING_PREFETCH_BYTES)
      __builtin_prefetch(r->buf + ((pos + STKR__RING_PREFETCH_BYTES) & r->mask));
    rec = (const stkr__record *)(r->buf + (pos & r->mask));
    uint64_t hdr;
    if (rec->size < 8 || rec->size % 8 != 0 || rec->size > head - pos ||
        (rec->site_id != 0 &&
         (rec->size < sizeof(stkr__record) ||
          stkr_ringfile_record_check((const stkr_ringfile_record *)rec,
                                     &hdr) != NULL))) {
      /* Memory something else wrote: the app, or a child made by a raw
       * fork system call writing on in this ring. Skip what is there
       * rather than read garbage (never abort: this runs in the app); the
       * caller counts it, the producer carries on. */
      cur->corrupt += head - pos;
      cur->pos = head;
      continue;
    }
    if (rec->site_id != 0)
      return rec;
    cur->pos = pos + rec->size; /* wrap marker: look at offset 0 */
  }
}

const stkr__record *stkr__ring_peek(stkr__ring *r) {
  stkr__ring_cursor cur;
  const stkr__record *rec;

  stkr__ring_cursor_load(r, &cur);
  rec = stkr__ring_cursor_peek(r, &cur);
  stkr__ring_cursor_store(r, &cur);
  return rec;
}

void stkr__ring_consume(stkr__ring *r, const stkr__record *rec) {
  STKR__RING_CHECK((const uint8_t *)rec == r->buf + (r->c->c_read & r->mask));
  r->c->c_read += rec->size;
}

void stkr__ring_release(stkr__ring *r, const stkr__record *rec) {
  stkr__ring_consume(r, rec);
  stkr__ring_release_read(r);
}

void stkr__ring_release_read(stkr__ring *r) {
  /* Pairs with the acquire load of tail in stkr__ring_reserve(): we are
   * done with every record below c_read, the producer may overwrite it. */
  atomic_store_explicit(&r->c->tail, r->c->c_read, memory_order_release);
}

uint64_t stkr__ring_used(const stkr__ring *r) {
  /* A snapshot for high-water checks and stats; either side may call it. */
  uint64_t tail = atomic_load_explicit(&r->c->tail, memory_order_acquire);
  uint64_t head = atomic_load_explicit(&r->c->head, memory_order_acquire);
  return head - tail;
}

uint64_t stkr__ring_unread(const stkr__ring *r) {
  /* Acquire: as in stkr__ring_peek(). */
  return atomic_load_explicit(&r->c->head, memory_order_acquire) -
         r->c->c_read;
}

void stkr__ring_reset(stkr__ring *r) {
  /* Only when neither side is active (start, or a forked child). */
  stkr__ring_ctl *c = r->c;
  uint64_t head;

  if (c == NULL)
    return;
  head = atomic_load_explicit(&c->head, memory_order_relaxed);
  atomic_store_explicit(&c->tail, head, memory_order_relaxed);
  c->p_tail = head;
  c->p_skip_len = 0;
  c->p_check = 0;
  c->p_limit = 0;
  c->c_head = head;
  c->c_read = head;
  /* The worker that reads on knows none of the stacks sent so far. */
  memset(c->known, 0, sizeof c->known);
  memset(c->pknown, 0, sizeof c->pknown);
  stkr__ring_drops_clear(c);
}
