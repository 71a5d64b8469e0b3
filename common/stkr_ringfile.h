/*
 * stkr_ringfile.h: the on-disk layout of ring files and session files, the
 * files that make a recording survive SIGKILL, crashes and jetsam.
 *
 * recorder/ writes these files (through MAP_SHARED mappings: the hot path
 * stores into the page cache, no system call) and proto/stkr_recover.c reads
 * them back after the writer died. Neither may depend on the other, so the
 * layout lives here, libc only, header only.
 *
 * Files (in the recording directory, next to the segments):
 *   stackrec-<pid>-<session>.session           one per recording session
 *   stackrec-<pid>-<session>-<n>.ring          one per recording thread
 * <pid> decimal, <session> 16 lower-case hex digits (Header.session_id),
 * <n> decimal, the recorder thread id (ThreadDef.id) of the ring's first
 * owner; the ring's header names its current owner (see file_no).
 *
 * One file per thread rather than regions of one session file: a thread's
 * ring is created at its first event by that thread alone, with no
 * allocator shared between threads and no growing of a mapped file. An
 * exited thread's ring, once written out, is kept (mapped, at most
 * STKR_RINGFILE_CACHE of them) for the next thread that starts, and the
 * worker makes a few ahead: creating and deleting a file per thread costs
 * far more than the thread itself on a journaling file system.
 *
 * Byte order and types are the writer's host's (little-endian on every
 * platform stackrec supports); `version` changes with any layout change,
 * and a reader rejects versions it does not know. Every field is
 * hostile input for a reader: it checks each against the file's size.
 *
 * Ring file:
 *   [0, 256)          stkr_ringfile_meta (written at create, then read-only)
 *   [256, 264)        head: u64, free-running byte count the producer has
 *                     committed (the ring's producer index, in the mapping)
 *   [320, 328)        tail: u64, free-running byte count the consumer has
 *                     released. The flush worker releases a record only
 *                     after the batch holding it went through write(2)
 *                     (or was counted lost), so [tail, head) is exactly
 *                     what the segments may lack.
 *   [384, 416)        drops: four u64 (since session 21; zero in older
 *                     files, which then tell nothing here). drops_full and
 *                     drops_reentrant: the events the ring's current owner
 *                     dropped (ring full; a signal handler interrupting an
 *                     event) since it took the ring, written by that
 *                     thread (and its handlers). counted_full and
 *                     counted_reentrant: how many of those the Counters of
 *                     the session's latest written batch include, written
 *                     by the flush worker after that batch's write(2). So
 *                     drops - counted is what a writer that died dropped
 *                     after its last batch: recovery adds it to the
 *                     session's drops (it was lost before: QA, session 21,
 *                     189 000 ring-full drops of a SIGKILLed app gone, and
 *                     verify called the recording complete). When
 *                     the worker reaps the owner (its thread ended), what
 *                     counted lacks moves to the session file's retired
 *                     drops (below) and counted = drops: the ring is handed
 *                     on owing nothing. Zeroed, all four, when the ring gets
 *                     a new owner.
 *   [448, 472)        pending (since session 22; zero in older files):
 *                     pend_seq, pend_full, pend_reentrant, u64. What the
 *                     Counters of batch pend_seq count of this ring's
 *                     drops, stored by the flush worker before that
 *                     batch's write (pend_seq 0 first, then the values,
 *                     then pend_seq), and only when they differ from
 *                     counted. Recovery takes them as counted when it
 *                     finds batch pend_seq (or a later one) of the session
 *                     in the segments: a death between the write and the
 *                     store of counted would otherwise count that batch's
 *                     new drops twice (a CI run: 476 too many in 1 of 5
 *                     kills right after a burst). pend_seq 0: none. Zeroed
 *                     with the drops, and pend_seq at the owner's reap.
 *   [1024, 3072)      the known-stack table: STKR_RINGFILE_KNOWN_SLOTS
 *                     entries of two u64 (the stack key, see below), by
 *                     slot; {0, 0} = empty. Written by the producer only,
 *                     read by recovery only (the worker never reads it).
 *   [3072, 4096)      the known-payload table (version 3):
 *                     STKR_RINGFILE_PKNOWN_SLOTS entries of two u64 (the
 *                     payload key, stkr_payload_key), by slot; the same
 *                     rules as the stack table.
 *   [hdr_bytes, hdr_bytes + ring_size)   the ring buffer: records at
 *                     offset (pos & (ring_size - 1)), 8-byte aligned, never
 *                     split across the end (a wrap marker, site_id 0,
 *                     fills the rest of the buffer instead).
 *
 * Records (version 2; payloads interned since version 3): stacks are sent
 * once per thread. Every record starts with the 24-byte
 * stkr_ringfile_record. A *full* record (flag STKR_RINGREC_KNOWN clear)
 * continues with stkr_ringfile_full's key and evicted fields (32 bytes),
 * then depth u64 PCs, then its payload part (see "Payloads" below: the
 * evicted payload key and payload_len bytes, or nothing), then padding to
 * `size` (a multiple of 8). A *known* record (STKR_RINGREC_KNOWN set,
 * depth 0) has its payload part right after the 24 bytes: its stack is
 * the one of the latest full record of the same ring with the same `slot`
 * before it.
 *
 * The stack key is {h1, h2}: h1 the recorder's 64-bit hash of the PCs
 * (StackDef.hash), h2 = stkr_stack_key2(pcs, depth, site, truncated)
 * (common/stkr_hash.h), an independent hash that also covers the site and
 * the truncation flag. The table is two-way set associative: a key's slot
 * is one of the two of its set, set = stkr_stack_key2_slot(h2, slots / 2),
 * slots 2·set and 2·set + 1, as the producer chooses (an empty way, else
 * the older); nothing that reads a ring file recomputes a slot from a key,
 * it follows the slots the records carry. The producer sends a known record only when the slot's table entry equals
 * the key of the stack it just walked, and it writes the entry only after
 * the full record that carries the key was committed (head stored): so a
 * known record's full record is always earlier in the same ring, either
 * still in [tail, head) or already released (written to a segment).
 * A dropped full record (ring full) never enters the table.
 *
 * Recovery resolves a known record at pos in [tail, head) thus: the latest
 * full record with that slot in [tail, pos) if there is one; otherwise the
 * key the slot held at `tail`, which is the `evicted` key of the first full
 * record with that slot in [tail, head), or, when there is none, the
 * table's entry; that key's stack was written to one of the session's
 * segments before the crash (StackDef with hash h1 and a matching h2), where
 * recovery looks it up. A key found nowhere (its segment deleted by the
 * disk cap) gives the event stack id 0 ("unknown"), counted and reported.
 * The table is cleared whenever the ring gets a new owner or is reset.
 *
 * Payloads (version 3) are interned per thread the same way, in a table of
 * their own: key = stkr_payload_key(bytes, payload_len) (common/
 * stkr_hash.h), in a two-way table like the stacks' (set =
 * stkr_payload_key_slot(key, PKNOWN_SLOTS / 2)), its slot stored in the
 * record's `pslot`. A record with a payload (payload_len > 0) has one
 * of two flags:
 *   STKR_RINGREC_PAYLOAD_NEW: it carries the bytes, preceded by the key
 *     its payload slot held before (16 bytes, {0, 0}: none), right after
 *     the stack part (the 24 bytes of a known record, or the full header
 *     and PCs); after its commit the table holds its key.
 *   STKR_RINGREC_PAYLOAD_KNOWN: it carries nothing of the payload:
 *     payload_len bytes equal to those of the latest PAYLOAD_NEW record of
 *     the same ring with the same pslot before it.
 * So a known stack with a known payload is 24 bytes. Recovery resolves a
 * PAYLOAD_KNOWN record as it does a known stack: from the ring, else from
 * the key the slot held at the tail (the first PAYLOAD_NEW record's
 * evicted key for the slot, else the table's entry), looked up among the
 * payloads of the session's segments (their keys recomputed); a payload
 * found nowhere gives the event an empty payload marked truncated, counted
 * and reported.
 *
 * Session file:
 *   [0, 4096)         stkr_sessfile_hdr
 *   [slots_off, +8 * (site_cap + 1))  site slots, u64 each, by site id:
 *                     (name offset in the names area << 32) | name length,
 *                     0 = no name stored
 *   [names_off, names_off + names_cap)  site names (not NUL-terminated)
 *
 * Liveness: the writing process holds flock(LOCK_EX) on the session file
 * for the life of the session (a close-on-exec descriptor: the kernel
 * releases it when the process dies or execs). A reader that obtains the
 * lock with LOCK_NB knows the writer is gone; one that cannot must leave
 * the files alone.
 */
#ifndef STKR_RINGFILE_H
#define STKR_RINGFILE_H

#include <stddef.h>
#include <stdint.h>

#define STKR_RINGFILE_MAGIC "STKRRING" /* 8 bytes, no NUL in the file */
#define STKR_SESSFILE_MAGIC "STKRSESS"
#define STKR_RINGFILE_VERSION 3u
#define STKR_SESSFILE_VERSION 2u

#define STKR_RINGFILE_HEAD_OFF 256u
#define STKR_RINGFILE_TAIL_OFF 320u
#define STKR_RINGFILE_DROPS_OFF 384u
#define STKR_RINGFILE_PEND_OFF 448u
#define STKR_RINGFILE_KNOWN_OFF 1024u
#define STKR_RINGFILE_KNOWN_SLOTS 128u /* power of two, <= 256 */
#define STKR_RINGFILE_PKNOWN_OFF 3072u
#define STKR_RINGFILE_PKNOWN_SLOTS 64u /* power of two, <= 256 */
#define STKR_RINGFILE_HDR_BYTES 4096u /* the buffer starts here */
#define STKR_RINGFILE_MAX_RING ((uint64_t)1 << 30) /* the writer's limit */

/* Rings kept mapped for threads about to start: exited threads' rings (up
 * to CACHE, and CACHE_BYTES of mappings in all), and rings made ahead by
 * the worker (up to PREFILL: each costs a ring's size of disk, in every
 * recording process). */
#define STKR_RINGFILE_CACHE 128
#define STKR_RINGFILE_CACHE_BYTES ((uint64_t)8 << 20)
#define STKR_RINGFILE_PREFILL 4

#define STKR_SESSFILE_HDR_BYTES 4096u
#define STKR_SESSFILE_NAMES_CAP (256u << 10)

/* The ring file's first 256 bytes. */
typedef struct stkr_ringfile_meta {
  char magic[8];        /* STKR_RINGFILE_MAGIC */
  uint32_t version;     /* STKR_RINGFILE_VERSION */
  uint32_t hdr_bytes;   /* offset of the ring buffer */
  uint64_t ring_size;   /* bytes, a power of two */
  uint64_t session_id;  /* the session file's session_id */
  uint32_t pid;
  uint32_t thread_id;   /* recorder thread id (ThreadDef.id), >= 1 */
  uint64_t os_tid;      /* ThreadDef.tid */
  uint32_t record_hdr;  /* sizeof(stkr_ringfile_record): 24 */
  /* The <n> of the file name: the thread id of the ring's first owner. A
   * ring file outlives its thread: the next thread of the session to
   * start reuses it (no file created, none deleted), so thread_id, os_tid
   * and name are the current owner's. Every record in [tail, head) is the
   * current owner's: a ring is handed on only empty and released. */
  uint32_t file_no;
  char name[32];        /* thread name at attach, NUL-padded */
} stkr_ringfile_meta;

/* A record as it sits in the ring (recorder/ uses the same layout as
 * stkr__record and checks it at compile time): 24 bytes. */
typedef struct stkr_ringfile_record {
  uint32_t size;        /* whole record, multiple of 8; >= 8 */
  uint32_t site_id;     /* 0: wrap marker (only size is meaningful) */
  uint64_t ts_ns;       /* CLOCK_MONOTONIC */
  uint16_t depth;       /* PCs that follow the full header (0 if KNOWN) */
  uint16_t payload_len;
  uint8_t flags;        /* STKR_RINGREC_* */
  uint8_t slot;         /* known-stack table slot of the record's stack */
  uint8_t pslot;        /* known-payload table slot (PAYLOAD_* flags) */
  uint8_t reserved;
} stkr_ringfile_record;

/* A full record's header: the common 24 bytes, then its stack's key and
 * the key its slot held before (what known records before this one in
 * [tail, pos) refer to; {0, 0}: none). */
typedef struct stkr_ringfile_full {
  stkr_ringfile_record h;
  uint64_t key[2];
  uint64_t evicted[2];
} stkr_ringfile_full;

#define STKR_RINGREC_PAYLOAD_TRUNCATED 1u
#define STKR_RINGREC_STACK_TRUNCATED 2u
#define STKR_RINGREC_KNOWN 4u /* no PCs: the slot's stack (see above) */
#define STKR_RINGREC_PAYLOAD_NEW 8u    /* evicted payload key + bytes */
#define STKR_RINGREC_PAYLOAD_KNOWN 16u /* no bytes: the pslot's payload */
/* Most PCs a record carries (recorder/stackrec.h's STKR_MAX_DEPTH). */
#define STKR_RINGREC_MAX_DEPTH 256u

/* The rule a record's own fields meet, for every reader of a ring: the
 * flush worker of the process writing it, and recovery from a dead
 * writer's file. A ring is shared memory something else may have written
 * (a child made by a raw fork system call, which glibc's atfork handlers
 * never see, writes on in its parent's ring: the worker then copied a
 * "depth" of 37 450 PCs out of the ring and crashed the app, QA). h: the
 * record's header, whose size the caller has checked (>= the header, a
 * multiple of 8, within what it may read) and whose site_id is not 0 (a
 * wrap marker). *hdr: the size of its header (full or known). @return
 * NULL, or why it is refused. */
static inline const char *stkr_ringfile_record_check(
    const stkr_ringfile_record *h, uint64_t *hdr) {
  unsigned pflags =
      h->flags & (STKR_RINGREC_PAYLOAD_NEW | STKR_RINGREC_PAYLOAD_KNOWN);
  uint64_t pbytes = 0;
  int known = (h->flags & STKR_RINGREC_KNOWN) != 0;

  if (h->slot >= STKR_RINGFILE_KNOWN_SLOTS ||
      h->pslot >= STKR_RINGFILE_PKNOWN_SLOTS ||
      (h->flags & ~(unsigned)(STKR_RINGREC_PAYLOAD_TRUNCATED |
                              STKR_RINGREC_STACK_TRUNCATED |
                              STKR_RINGREC_KNOWN | STKR_RINGREC_PAYLOAD_NEW |
                              STKR_RINGREC_PAYLOAD_KNOWN)) != 0)
    return "bad record slot or flags";
  /* A payload is either carried (NEW) or the slot's (KNOWN), never both;
   * an empty one neither. */
  if (pflags == (STKR_RINGREC_PAYLOAD_NEW | STKR_RINGREC_PAYLOAD_KNOWN) ||
      (pflags != 0) != (h->payload_len != 0))
    return "bad record payload flags";
  if (pflags == STKR_RINGREC_PAYLOAD_NEW)
    pbytes = 16u + h->payload_len;
  else if (pflags == 0)
    pbytes = h->payload_len;
  *hdr = known ? sizeof(stkr_ringfile_record) : sizeof(stkr_ringfile_full);
  if (known && h->depth != 0)
    return "known record with PCs";
  if (h->depth > STKR_RINGREC_MAX_DEPTH)
    return "record with more PCs than a stack can have";
  if (*hdr + 8u * (uint64_t)h->depth + pbytes > h->size)
    return "record's PCs and payload do not fit its size";
  return NULL;
}

/* The event clock's calibration (recorder/clock.c). Records' ts are
 * CLOCK_MONOTONIC nanoseconds when kind is STKR_CLOCK_MONO, else raw
 * counter ticks (x86_64 invariant TSC, aarch64 cntvct_el0) that
 * stkr_clock_to_ns() turns into CLOCK_MONOTONIC nanoseconds: anchored at
 * the latest (t1, ns1) pair read back to back, at `mult` ns per tick
 * (32.32 fixed point) measured from the session's first anchor (t0, ns0),
 * so its error shrinks as the session gets older. */
#define STKR_CLOCK_MONO 0u
#define STKR_CLOCK_COUNTER 1u

typedef struct stkr_clock_cal {
  uint32_t kind;
  uint32_t reserved;
  uint64_t t0, ns0;
  uint64_t t1, ns1;
  uint64_t mult; /* ns per tick << 32 */
} stkr_clock_cal;

static inline uint64_t stkr_clock_to_ns(const stkr_clock_cal *c, uint64_t ts) {
  if (c->kind != STKR_CLOCK_COUNTER)
    return ts;
  /* Signed: a record may be older than the anchor. */
  __int128 d = (__int128)(int64_t)(ts - c->t1) * (__int128)c->mult;
  return c->ns1 + (uint64_t)(int64_t)(d >> 32);
}

/* Session states (stkr_sessfile_hdr.state). */
#define STKR_SESS_RUNNING 0u
/* Since session 31: ended with everything written (its last batch is in a
 * segment), set before its files go. Files left in this state are ones the
 * writer could not remove (it dropped its privileges after its start, QA
 * session 31): recovery removes them, with nothing to recover. */
#define STKR_SESS_ENDED_CLEAN 1u
#define STKR_SESS_ENDED_LEFTOVERS 2u /* ended with records left in rings */

/* The settings a session file, Header.config (stackrec.proto's Config)
 * and stkr_config all carry under these names: one list, for the copies
 * between them (flush/config.c, proto/stkr_format.c). */
#define STKR_SESS_CONFIG_FIELDS(X)                                             \
  X(ring_bytes) X(segment_bytes) X(disk_cap_bytes) X(max_depth)                \
  X(skip_frames) X(flush_interval_ms) X(payload_max)

typedef struct stkr_sessfile_hdr {
  char magic[8];        /* STKR_SESSFILE_MAGIC */
  uint32_t version;     /* STKR_SESSFILE_VERSION */
  uint32_t hdr_bytes;   /* STKR_SESSFILE_HDR_BYTES */
  uint64_t session_id;  /* Header.session_id, non-zero */
  uint32_t pid, parent_pid;
  uint64_t start_mono_ns, start_wall_ns;
  char process_name[64];
  char arch[16];
  char symbolize[16];   /* Config.symbolize */
  uint64_t ring_bytes, segment_bytes, disk_cap_bytes;
  uint32_t max_depth, skip_frames, flush_interval_ms, payload_max;
  uint32_t site_cap;    /* highest site id with a slot */
  uint32_t slots_off;   /* file offset of the slot array */
  uint32_t names_off;   /* file offset of the names area */
  uint32_t names_cap;   /* its size */
  /* Written by whichever thread registers a site (atomic fetch-add in the
   * writer): bytes of the names area handed out so far (may exceed
   * names_cap: those names did not fit), and names that did not fit. */
  uint32_t names_used;
  uint32_t names_overflow;
  uint32_t state;       /* STKR_SESS_* */
  /* Written by the flush worker after each batch's write (or failed
   * attempt): the highest stack id and Batch.seq the session has used, so
   * that recovery's batches continue after them without reading every
   * segment (a batch written but not yet noted is in the newest segment,
   * which recovery reads). */
  uint32_t max_stack_id;
  uint64_t max_batch_seq;
  /* The event clock's calibration (version 2), written at start and after
   * every drain pass by the flush worker: the slot clock_idx & 1 is
   * complete (the other is written first, then clock_idx, so a death
   * mid-update leaves the previous one). Recovery converts the ring
   * files' ts with it. */
  stkr_clock_cal clock[2];
  uint32_t clock_idx;
  /* Since session 21 (zero in older files): the session's drops that no
   * ring holds (stkr_stats.dropped_other: no site id, no ring), counted
   * by the thread that drops (atomic add), and how many of them the
   * Counters of the latest written batch include (the flush worker, after
   * that batch's write). As in a ring file's drops (above): recovery adds
   * drops_other - counted_other. Since session 28, drops_other also has
   * the flush worker's own drops (records it read but could not hold, the
   * rest of stkr_stats.dropped_other), added right before their records
   * are released from the rings (until then recovery reads the records
   * themselves), and counted_other is the Counters' dropped_other, both
   * kinds: before, a kill before the next written batch lost them. */
  uint64_t drops_other;
  uint64_t counted_other;
  /* The same for the drops of reaped threads that no written batch
   * counted when their ring was handed on (ring full, reentrant): added by
   * the worker at the reap, counted after a batch's write. */
  uint64_t retired_full, retired_reentrant;
  uint64_t counted_retired_full, counted_retired_reentrant;
  /* Since session 22 (zero in older files): the counted_* values of the
   * three above that batch pend_seq's Counters count, stored by the flush
   * worker before that batch's write, as a ring file's pending drops
   * (above, [448, 472)): recovery takes them as counted when it finds
   * batch pend_seq or a later one. pend_seq 0: none. */
  uint64_t pend_seq;
  uint64_t pend_other, pend_retired_full, pend_retired_reentrant;
  /* Since session 22 (zero in older files): the events of batches that
   * could not be written (stkr_stats.dropped_write_error, cumulative),
   * stored by the flush worker at each failure. Their records are released
   * from the rings and the count lived in its memory only: a kill before
   * the next written batch lost them from the accounting (attempted read
   * back without them, verify complete). Recovery takes the larger of
   * this and the segments' Counters. */
  uint64_t dropped_write_error;
  /* Since session 26 (zero in older files): stkr_config.watched, NUL-
   * terminated (STKR_WATCHED_MAX bytes), the Header's `watched`. */
  char watched[128];
  /* Since session 31 (zero in older files): threads of the session whose
   * ring is in memory, because no ring file could be made for them (a full
   * disk, no descriptor): added (atomic) by the thread that falls back.
   * What such a ring holds unflushed dies with a killed process, and
   * nothing counts it: recovery says so (Counters.memory_rings_lost). */
  uint32_t memory_rings;
  /* Since session 32 (zero in older files): Header.forked_from_pid and
   * Header.fork_mono_ns of a followed fork child, set at its start. */
  uint32_t forked_from_pid;
  uint64_t fork_mono_ns;
  /* Since session 32 (zero in older files): marks of this session whose
   * event was refused (Counters.marks_dropped), added (atomic) by the
   * thread that dropped it: a kill before the next batch loses the
   * worker's count, not this one (recovery writes it). */
  uint64_t marks_dropped;
  /* Since session 33 (zero in older files): Header.process_start, set at
   * the session's start. */
  uint64_t process_start;
  /* Since session 35 (zero in older files): Header.boot_id (all zero:
   * unknown) and Header.mono_offset_ns, set at the session's start
   * (common/stkr_boot.h). */
  uint8_t boot_id[16];
  int64_t mono_offset_ns;
  /* Since session 37 (zero in older files): Header.os_parent_pid, set at
   * the session's start. */
  uint32_t os_parent_pid;
  /* Since session 46 (zero in older files): calls refused while an exit,
   * _exit or exec ended the session (the threads that run on until the
   * process is gone), added (atomic) by the calling thread, cumulative
   * since the session's start. For a writer that dies during its end
   * (killed, or out of time): recovery writes Counters.dropped_exit as the
   * larger of this and what the segments' Counters say. */
  uint64_t drops_late;
} stkr_sessfile_hdr;

_Static_assert(sizeof(stkr_sessfile_hdr) <= STKR_SESSFILE_HDR_BYTES,
               "session header overlaps the site slots");

_Static_assert(sizeof(stkr_ringfile_meta) <= STKR_RINGFILE_HEAD_OFF,
               "ring meta overlaps head");
_Static_assert(sizeof(stkr_ringfile_record) == 24, "record layout");
_Static_assert(sizeof(stkr_ringfile_full) == 56, "full record layout");
_Static_assert(STKR_RINGFILE_KNOWN_OFF + 16u * STKR_RINGFILE_KNOWN_SLOTS <=
                   STKR_RINGFILE_HDR_BYTES,
               "known-stack table overlaps the buffer");
_Static_assert(STKR_RINGFILE_PKNOWN_OFF >=
                       STKR_RINGFILE_KNOWN_OFF + 16u * STKR_RINGFILE_KNOWN_SLOTS &&
                   STKR_RINGFILE_PKNOWN_OFF + 16u * STKR_RINGFILE_PKNOWN_SLOTS <=
                       STKR_RINGFILE_HDR_BYTES,
               "known-payload table overlaps");
/* The drop fields are u64s in a row, drops_other first,
 * dropped_write_error last: the recorder resets them as one range. */
_Static_assert(offsetof(stkr_sessfile_hdr, dropped_write_error) -
                       offsetof(stkr_sessfile_hdr, drops_other) ==
                   10 * sizeof(uint64_t),
               "session drop fields in a row");
_Static_assert(sizeof(stkr_sessfile_hdr) <= STKR_SESSFILE_HDR_BYTES,
               "session header too big");

/* Append the decimal digits of v to p; returns the new end. No libc (the
 * recorder builds names at a thread's first event, possibly inside a
 * signal handler, where snprintf is not safe). */
static inline char *stkr_ringfile_put_dec(char *p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

static inline char *stkr_ringfile_put_hex16(char *p, uint64_t v) {
  for (int i = 15; i >= 0; i--) *p++ = "0123456789abcdef"[(v >> (4 * i)) & 15];
  return p;
}

/* A subdirectory of the recording directory holding what processes of one
 * recording share to start faster, never recording data: unwind tables by
 * build-id ("<build-id hex>.uwt", recorder/unwind_tables.c, format in
 * unwind/uw_store.h) and the event clock's first anchor ("clock",
 * recorder/clock.c). Any file there may be missing, damaged or stale: a
 * writer validates it before use and rebuilds. Readers, recovery, merge
 * and the disk cap skip it; `stackrec record` removes it at its end. */
#define STKR_CACHE_DIR ".stackrec-cache"

/* A ring or session file being made (or claimed from the pool) lives in
 * STKR_CACHE_DIR as STKR_RINGFILE_NEW + its name until sized and given its
 * header (a session file: and locked), then is renamed to its name
 * (recorder/ringfile.c): a file under its own name is always whole.
 * Recovery removes the rings of a dead session; `stackrec record` removes
 * the directory. */
#define STKR_RINGFILE_NEW "new-"

/* Longest base name, with NUL: "stackrec-" 10 "-" 16 "-" 10 ".session". */
#define STKR_RINGFILE_NAME_MAX 64

/* "stackrec-<pid>-<session>" + ("-<thread>.ring" when thread != 0, else
 * ".session") into buf (STKR_RINGFILE_NAME_MAX bytes), NUL-terminated. */
static inline void stkr_ringfile_name(char *buf, uint32_t pid,
                                      uint64_t session, uint32_t thread) {
  static const char pre[] = "stackrec-";
  char *p = buf;
  for (size_t i = 0; i < sizeof pre - 1; i++) *p++ = pre[i];
  p = stkr_ringfile_put_dec(p, pid);
  *p++ = '-';
  p = stkr_ringfile_put_hex16(p, session);
  const char *ext = thread ? ".ring" : ".session";
  if (thread) {
    *p++ = '-';
    p = stkr_ringfile_put_dec(p, thread);
  }
  while (*ext) *p++ = *ext++;
  *p = '\0';
}

#endif /* STKR_RINGFILE_H */
