/*
 * stkr_internal.h: what recorder/ offers flush/ (and tests). Not public.
 *
 * recorder/ owns the hot path: per-thread rings, the thread registry, the
 * site table, the stack walk and the clock. It knows nothing of libuv, zstd
 * or protobuf; flush/ drains what recorder/ produced. The one way back from
 * recorder/ to flush/ is the wake callback (a producer past the ring's
 * high-water mark) and the fork-restart callback.
 */
#ifndef STKR_INTERNAL_H
#define STKR_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recorder/stackrec.h"

#if defined(__APPLE__) && defined(__has_include)
#if __has_include(<ptrauth.h>)
#include <ptrauth.h>
#endif
#endif

/* ---- ring (ring.c) --------------------------------------------------------
 * One single-producer/single-consumer byte ring per thread; see ring.c for
 * the design. Records are 8-byte aligned and never split across the end. */

/* A record as it sits in the ring. `size` counts the whole record (header,
 * PCs, payload, padding to 8). A record with site_id == 0 is a wrap marker:
 * the consumer skips to the ring's start. */
typedef struct stkr__record {
  uint32_t size;
  uint32_t site_id;
  uint64_t ts_ns;
  uint64_t hash;       /* stkr__hash_pcs(pcs, depth) */
  uint16_t depth;      /* number of PCs that follow */
  uint16_t payload_len;
  uint16_t flags;      /* STKR__REC_* */
  uint16_t reserved;
  /* uint64_t pcs[depth]; then payload_len bytes; then padding */
} stkr__record;

#define STKR__REC_PAYLOAD_TRUNCATED 1u
#define STKR__REC_STACK_TRUNCATED 2u

static inline const uint64_t *stkr__record_pcs(const stkr__record *r) {
  return (const uint64_t *)(r + 1);
}
static inline const uint8_t *stkr__record_payload(const stkr__record *r) {
  return (const uint8_t *)(stkr__record_pcs(r) + r->depth);
}

#define STKR__CACHE_LINE 64

/* Three cache lines, so that the producer's per-event writes and the
 * consumer's per-record writes never share a line: one written by the
 * producer, one by the consumer, one read-only after init. Each side keeps
 * a private copy of the other's index and reloads it only when the ring
 * looks full (producer) or empty (consumer), so in steady state neither
 * side reads the other's line on every record. */
typedef struct stkr__ring {
  /* Written by the producer only (release, pairs with the consumer's
   * acquire load in stkr__ring_peek). Byte offset, free-running. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t head;
  /* Producer only: the last tail it loaded (<= the real tail), and where
   * the reserved record starts and how big it may be, between
   * stkr__ring_reserve() and stkr__ring_commit(). */
  uint64_t p_tail;
  uint64_t p_start;
  uint32_t p_reserved;

  /* Written by the consumer only (release, pairs with the producer's
   * acquire load in stkr__ring_reserve). Byte offset, free-running. */
  _Alignas(STKR__CACHE_LINE) _Atomic uint64_t tail;
  /* Consumer only: the last head it loaded (<= the real head). */
  uint64_t c_head;

  /* Set at init, read-only after: both sides read them. */
  _Alignas(STKR__CACHE_LINE) uint8_t *buf;
  uint64_t mask; /* size - 1; size is a power of two */
} stkr__ring;

int stkr__ring_init(stkr__ring *r, size_t bytes); /* mmap; 0 or -errno */
void stkr__ring_free(stkr__ring *r);
/* Producer: room for `size` bytes (multiple of 8)? Returns the slot or NULL
 * when full. Does not publish. */
void *stkr__ring_reserve(stkr__ring *r, uint32_t size);
/* Producer: make the reserved record visible to the consumer. */
void stkr__ring_commit(stkr__ring *r, uint32_t size);
/* Consumer: the oldest record, or NULL when empty. Stays valid until
 * stkr__ring_release(). */
const stkr__record *stkr__ring_peek(stkr__ring *r);
void stkr__ring_release(stkr__ring *r, const stkr__record *rec);
uint64_t stkr__ring_used(const stkr__ring *r);
/* Producer: is the ring more than half full? Uses the cached tail and
 * reloads it only when the cached view says yes. */
bool stkr__ring_past_half(stkr__ring *r);
/* Discard everything unread. Only while neither side is active. */
void stkr__ring_reset(stkr__ring *r);
static inline uint64_t stkr__ring_size(const stkr__ring *r) { return r->mask + 1; }

/* ---- hash (walk.c) ---- */
uint64_t stkr__hash_pcs(const uint64_t *pcs, unsigned n);

/* ---- stack walk (walk.c) ------------------------------------------------
 * Walk a frame-pointer chain starting at frame record `fp`, inside
 * [lo, hi). Each frame record is {saved fp, return address}. Stops (never
 * faults) when the next frame is not strictly above the current one, not
 * 16-byte aligned (8 on x86_64 for tolerance of odd ABIs, see walk.c), or out
 * of bounds, when a return address is 0 or points into the stack itself
 * (a data word reached through code without frame pointers), or after max
 * PCs. PCs have
 * pointer-authentication bits stripped. Returns the number of PCs stored;
 * *hash_out gets stkr__hash_pcs of them; *truncated is set when the walk
 * stopped at max. */
unsigned stkr__walk(uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned skip,
                    uint64_t *pcs, unsigned max, uint64_t *hash_out,
                    bool *truncated);

/* ---- platform (platform_*.c) ---- */
uint64_t stkr__clock_mono_ns(void);
uint64_t stkr__clock_wall_ns(void);
uint64_t stkr__os_tid(void);
/* Bounds of the calling thread's stack: [*lo, *hi). 0 or -errno. */
int stkr__stack_bounds(uintptr_t *lo, uintptr_t *hi);
/* Name of the calling thread (NUL-terminated, may be empty). */
void stkr__thread_name(char *buf, size_t len);
/* Process-wide memory barrier (Linux membarrier(2), private expedited):
 * register once, then stkr__membarrier() acts as a full fence on every
 * running thread of the process. 0, or -errno where unavailable (Apple,
 * old kernels, seccomp), and callers then fall back to real fences. */
int stkr__membarrier_register(void);
int stkr__membarrier(void);

/* Strip pointer-authentication bits from a saved return address before
 * anything else sees it. Inline: it runs once per frame of every walk.
 * arm64e: the intrinsic (xpaci). Other arm64 code can still meet signed
 * LRs (arm64e system frames; Linux pac-ret): the PAC, like a top-byte tag,
 * sits above the user virtual address bits (47 on Apple, 48 on Linux). */
static inline uint64_t stkr__strip_pac(uint64_t pc) {
#if defined(__APPLE__) && (defined(__arm64__) || defined(__aarch64__))
#if defined(__has_feature) && __has_feature(ptrauth_calls)
  pc = (uint64_t)ptrauth_strip((void *)pc, ptrauth_key_return_address);
#endif
  return pc & 0x00007FFFFFFFFFFFull;
#elif defined(__aarch64__)
  return pc & 0x0000FFFFFFFFFFFFull;
#else
  return pc;
#endif
}
const char *stkr__arch_name(void);

/* ---- threads (thread.c) ---------------------------------------------------
 * A thread's recorder state. Allocated (mmap) at the thread's first event,
 * linked into the registry, marked exited by the TLS destructor, unlinked
 * and freed by the worker once its ring is drained. */
typedef struct stkr__thread {
  stkr__ring ring;

  /* Line written by the producer on every event (and read by it). */
  /* Inside stkr_event(). Written by this thread (and its signal handlers);
   * read by them for re-entrancy, and by stkr__threads_quiesce() (acquire,
   * pairs with the release store that ends an event; the Dekker pair with
   * stop is explained in stkr_event). */
  _Alignas(STKR__CACHE_LINE) _Atomic int busy;
  uint32_t id;          /* recorder thread id, >= 1, set before publication */
  uintptr_t stack_lo, stack_hi; /* set at attach; producer only */
  /* Written by the producer (relaxed, single writer), read by stats
   * (relaxed): monotone counters. */
  _Atomic uint64_t pushed;
  _Atomic uint64_t dropped_ring_full;
  /* Incremented by nested (signal-handler) events, atomically: several
   * nested handlers may race. */
  _Atomic uint64_t dropped_reentrant;

  /* Line shared by both sides, touched rarely. */
  /* Registry link. Written once before publication (producer) or by the
   * worker when unlinking; see thread.c. */
  _Alignas(STKR__CACHE_LINE) struct stkr__thread *_Atomic next;
  uint64_t tid;         /* OS thread id, set before publication */
  /* Set by the producer when it passed the high-water mark and woke the
   * worker; cleared by the worker after draining (release/acquire pair). */
  _Atomic int wake_sent;
  /* Written by the TLS destructor (release), read by the worker (acquire):
   * once set, the producer will never push again. */
  _Atomic int exited;
  /* Written at attach, before publication; read by the worker any time. */
  char name[32];
  /* Written by the TLS destructor before the release store of `exited`;
   * read by the worker only after acquiring `exited` (a thread may have
   * been renamed since attach; a separate field keeps the worker's reads
   * of `name` race-free). */
  char exit_name[32];

  /* Worker-only bookkeeping (flush/ owns these). */
  _Alignas(STKR__CACHE_LINE) uint64_t w_consumed;
  uint64_t w_reported_full, w_reported_reentrant;
  uint32_t w_defined_seg;  /* segment in which ThreadDef was last emitted */
} stkr__thread;

/* Sentinels in stkr__tls besides NULL (not attached yet). */
#define STKR__THREAD_DEAD ((stkr__thread *)1)
#define STKR__THREAD_ATTACHING ((stkr__thread *)2)
#define STKR__THREAD_IGNORED ((stkr__thread *)3) /* the recorder's own */
#define STKR__THREAD_SENTINEL_MAX ((uintptr_t)3)
extern __thread stkr__thread *stkr__tls;

/* Never record the calling thread (the flush worker: with hooked libc
 * calls, its own writes would otherwise record and feed themselves). Its
 * events return -EPERM and are not counted at all. Call before the thread's
 * first event. */
void stkr__thread_ignore(void);

/* Allocate and register the calling thread's state (first event). */
int stkr__thread_attach(size_t ring_bytes, stkr__thread **out);

typedef struct stkr__counts {
  uint64_t pushed;            /* records committed to rings */
  uint64_t dropped_ring_full;
  uint64_t dropped_reentrant;
  uint64_t dropped_other;
  uint64_t threads;           /* threads attached since start */
} stkr__counts;
/* Sum of every thread's producer counters, reaped threads included. Any
 * thread; takes the reap lock (never called on the hot path). */
void stkr__threads_counts(stkr__counts *out);
void stkr__count_dropped_other(void);
/* Zero counters and empty rings (recorder start; no producer active). */
void stkr__threads_reset_counts(void);
/* In a forked child: free every other thread's state. */
void stkr__threads_forget_after_fork(void);

/* Iterate the registry (worker). The list may grow at the head while
 * iterating; new threads are seen on the next pass. */
stkr__thread *stkr__threads_first(void);
stkr__thread *stkr__threads_next(stkr__thread *t);
/* Unlink an exited, fully drained thread and free it. Worker only. */
void stkr__thread_reap(stkr__thread *t);
/* Wait until no thread is inside stkr_event(), at most max_ms in all. */
void stkr__threads_quiesce(unsigned max_ms);

/* ---- sites (site.c) ---- */
/* The site's id, registering it on first use; 0 if it cannot be had now
 * (being registered by an interrupted context, or the table is full). */
uint32_t stkr__site_id(stkr_site *site);
uint32_t stkr__site_count(void);             /* ids are 1..count */
const char *stkr__site_name(uint32_t id);    /* NULL if unknown */

/* ---- control (event.c) --------------------------------------------------- */
typedef struct stkr__rconf {
  size_t ring_bytes;
  unsigned max_depth;
  unsigned skip_frames;
  unsigned payload_max;
} stkr__rconf;

typedef void (*stkr__wake_fn)(void *arg);
typedef void (*stkr__fork_fn)(void);

/* Start accepting events. wake(arg) is called (async-signal-safely) by a
 * producer whose ring passes half full; on_fork_child, if not NULL, is called
 * by the first event in a forked child (follow mode) to start recording
 * there; NULL means the child stays disabled. */
int stkr__recorder_start(const stkr__rconf *rc, stkr__wake_fn wake,
                         void *wake_arg, stkr__fork_fn on_fork_child);
/* Stop accepting events (later calls return -ENOTCONN). */
void stkr__recorder_stop(void);
bool stkr__recorder_running(void);
/* Called in a forked child (by the atfork handler): forget every other
 * thread, empty the surviving thread's ring. */
void stkr__recorder_forget_after_fork(void);

#endif /* STKR_INTERNAL_H */
