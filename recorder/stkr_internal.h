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

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_ringfile.h"
#include "recorder/stackrec.h"
#include "recorder/stkr_ring.h" /* the ring and its cursor (ring.c) */
#include "recorder/stkr_session.h" /* session and ring files (ringfile.c) */

#if defined(__APPLE__) && defined(__has_include)
#if __has_include(<ptrauth.h>)
#include <ptrauth.h>
#endif
#endif

/* ---- the recorder's own descriptors (ownfd.c) -----------------------------
 * What stkr_fd_owned() answers from: the long-held descriptors, one slot
 * each. */
enum { STKR__OWN_SESSION, STKR__OWN_SEGMENT, STKR__OWN_N };
/* The recorder keeps `fd` for `slot` (-1: none any more), naming the file
 * of device `dev` and inode `ino`. Called by the slot's owner only;
 * async-signal-safe (atfork child handlers). */
void stkr__fd_own(unsigned slot, int fd, uint64_t dev, uint64_t ino);

/* STACKREC_SAMPLE_SIGNAL's value v (sample_linux.c: N, RTMIN+N or
 * RTMAX-N within the real-time signals): the signal, or -EINVAL. Apple
 * samples without a signal: any value, 0. For stkr_init's check of the
 * environment, which refuses what the sampler would. */
int stkr__sample_signal_parse(const char *v);

/* ---- hash (walk.c; the key's second half: common/stkr_hash.h) ---- */
uint64_t stkr__hash_pcs(const uint64_t *pcs, unsigned n);

/* ---- stack walk (walk.c) ------------------------------------------------
 * Walk a frame-pointer chain starting at frame record `fp`, inside
 * [lo, hi). Each frame record is {saved fp, return address}. Stops (never
 * faults) when the next frame is not strictly above the current one, not
 * 16-byte aligned (8 on x86_64 for tolerance of odd ABIs, see walk.c), or out
 * of bounds, when a return address is 0 or points into the stack itself
 * (a data word reached through code without frame pointers), or after max
 * PCs. At a Swift async frame (saved fp tagged 0b0001 in bits 63:60) with a
 * Swift task running on the thread, it continues along the task's async
 * context chain instead (see walk.c for what guards those heap loads): those
 * PCs are resume functions, stored with STKR__PC_ASYNC set. PCs have
 * pointer-authentication bits stripped; `skip` drops the first PCs, async
 * ones included. Returns the number of PCs stored;
 * *hash_out gets stkr__hash_pcs of them (the async ones with their bit);
 * *truncated is set when the walk stopped at max. */
unsigned stkr__walk(uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned skip,
                    uint64_t *pcs, unsigned max, uint64_t *hash_out,
                    bool *truncated);
/* The same walk, also folding the stack key's second half in the same
 * loop: *fold2_out gets the state that stkr_stack_key2_final() finishes
 * (common/stkr_hash.h). The hot path's walk. */
unsigned stkr__walk_keyed(uintptr_t fp, uintptr_t lo, uintptr_t hi,
                          unsigned skip, uint64_t *pcs, unsigned max,
                          uint64_t *hash_out, uint64_t *fold2_out,
                          bool *truncated);

/* Bit 63 of a recorded PC: a Swift async resume address (a function's
 * first instruction), not a return address; the address is the PC without
 * the bit, and symbolizers look it up as is, without subtracting 1. No
 * user-space address has bit 63 set. Same value as STKR_PC_ASYNC in
 * proto/stkr_reader.h and StackDef.pcs in proto/stackrec.proto. */
#define STKR__PC_ASYNC (1ull << 63)

/* The Swift runtime's swift_task_getCurrent (non-NULL while a task runs on
 * the calling thread), found with dlsym when the recorder is loaded; NULL
 * without the Swift runtime, and then async chains are never followed.
 * Tests replace it (returns the previous one); not thread-safe: call before
 * any walk runs concurrently. */
typedef void *(*stkr__task_fn)(void);
stkr__task_fn stkr__walk_set_task_fn(stkr__task_fn fn);

/* ---- the event clock (clock.c) -----------------------------------------
 * Events are stamped with a raw counter when one can be trusted (x86_64:
 * an invariant TSC, CPUID 0x80000007 EDX bit 8; aarch64: cntvct_el0 at
 * cntfrq_el0), ~9 ns instead of clock_gettime's ~21 on the test machine,
 * else with CLOCK_MONOTONIC; the flush worker converts ticks to
 * CLOCK_MONOTONIC ns (stkr_clock_to_ns, common/stkr_ringfile.h) with a
 * calibration it refines each pass, and writes it into the session file
 * for recovery. Files only ever hold CLOCK_MONOTONIC ns. */

/* Whether stkr__clock_event() reads the counter. Written by
 * stkr__clock_setup() at recorder start, before the release store of
 * RUNNING; read by producers after their acquire load of it. */
extern bool stkr__clock_counter;

static inline uint64_t stkr__clock_counter_read(void) {
#if defined(__x86_64__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

uint64_t stkr__clock_mono_ns(void);
/* A record's timestamp: ticks or ns, as the session's calibration says. */
static inline uint64_t stkr__clock_event(void) {
  return stkr__clock_counter ? stkr__clock_counter_read()
                             : stkr__clock_mono_ns();
}
/* Recorder start (no producer active): pick the session's clock (the
 * counter only if allow_counter and it passes the checks) and calibrate
 * it (~0.2 ms, or one anchor from an earlier calibration: clock.c); the
 * result goes into the session file too. */
void stkr__clock_setup(bool allow_counter);
/* The first anchor and rate a recording's first calibrated process
 * stores for the others (the shared cache's "clock", clock.c): host byte
 * order. check: stkr__clock_file_check of the rest. */
typedef struct stkr__clock_file {
  char magic[8]; /* "STKRCLK1" */
  uint64_t t0, ns0, mult;
  uint64_t check;
} stkr__clock_file;
uint64_t stkr__clock_file_check(const stkr__clock_file *f);
/* Tests: forget this process's calibration, as a freshly exec'd process
 * has none (the next setup uses the recording's file, or calibrates). */
void stkr__clock_forget(void);
/* The start's calibration, copied into *out unless its generation is
 * have_gen (the caller's copy is current); returns the generation. Any
 * thread; the worker keeps its own copy and refines it with
 * stkr__clock_recal(). */
uint32_t stkr__clock_cal_get(stkr_clock_cal *out, uint32_t have_gen);
/* Worker: a new anchor now, and the rate over the whole session so far. */
void stkr__clock_recal(stkr_clock_cal *cal);
/* In a forked child (atfork handler): reset the calibration's lock. */
void stkr__clock_forget_after_fork(void);
/* Tests: forbid (false) or allow (true, the default) the counter at the
 * next recorder start. */
void stkr__clock_allow_counter(bool allow);

/* ---- platform (platform_*.c) ---- */
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
/* The stop side of stkr_event's Dekker pair (its `busy` store, then its
 * loads): a full fence here, and every producer's too (membarrier(2) when
 * registered; else producers fence themselves). After a store that
 * producers must see (the state, a published set of unwind tables), call
 * it before loading their `busy`. */
void stkr__producers_fence(void);
/* Wake the flush worker for a pass now, on behalf of thread t (listed, not
 * exited; not inside one of its events): nothing when not recording.
 * Async-signal-safe. */
struct stkr__thread;
void stkr__thread_wake(struct stkr__thread *t);

/* The user virtual address bits of a pointer (what remains once a PAC or
 * a top-byte tag is cut off); the identity on x86_64. */
static inline uint64_t stkr__user_va(uint64_t p) {
#if defined(__APPLE__) && (defined(__arm64__) || defined(__aarch64__))
  return p & 0x00007FFFFFFFFFFFull;
#elif defined(__aarch64__)
  return p & 0x0000FFFFFFFFFFFFull;
#else
  return p;
#endif
}
/* Strip pointer-authentication bits from a saved return address before
 * anything else sees it. Inline: it runs once per frame of every walk.
 * arm64e: the intrinsic (xpaci). Other arm64 code can still meet signed
 * LRs (arm64e system frames; Linux pac-ret): the PAC, like a top-byte tag,
 * sits above the user virtual address bits (47 on Apple, 48 on Linux). */
#if defined(__APPLE__) && (defined(__arm64__) || defined(__aarch64__)) &&   \
    defined(__has_feature)
#if __has_feature(ptrauth_calls)
#define STKR__PTRAUTH_STRIP(p, key) ((uint64_t)ptrauth_strip((void *)(p), key))
#endif
#endif
#ifndef STKR__PTRAUTH_STRIP
#define STKR__PTRAUTH_STRIP(p, key) (p) /* no PAC instructions: the mask */
#endif
static inline uint64_t stkr__strip_pac(uint64_t pc) {
  return stkr__user_va(STKR__PTRAUTH_STRIP(pc, ptrauth_key_return_address));
}
/* The same for a signed data pointer (an async context's Parent, signed
 * with a data key on arm64e: xpacd rather than xpaci). */
static inline uint64_t stkr__strip_pac_data(uint64_t p) {
  return stkr__user_va(
      STKR__PTRAUTH_STRIP(p, ptrauth_key_process_dependent_data));
}
const char *stkr__arch_name(void);

/* ---- threads (thread.c) ---------------------------------------------------
 * A thread's recorder state. Allocated (mmap) at the thread's first event,
 * linked into the registry, marked exited by the TLS destructor, unlinked
 * and freed by the worker once its ring is drained. */
/* What keeps the thread state's groups of fields apart (below): the unit
 * the cores' caches exchange, 128 bytes on Apple's arm64 cores, 64 on the
 * others. Not STKR__CACHE_LINE, which also fixes the ring file's layout. */
#if defined(__APPLE__) && (defined(__aarch64__) || defined(__arm64__))
#define STKR__THREAD_LINE 128
#else
#define STKR__THREAD_LINE STKR__CACHE_LINE
#endif

/* Renames a thread may tell before the worker applies them (see rn). */
#define STKR__RENAMES 8

typedef struct stkr__thread {
  stkr__ring ring;

  /* Line written by the producer on every event (and read by it). */
  /* Inside stkr_event(). Written by this thread (and its signal handlers);
   * read by them for re-entrancy, and by stkr__threads_quiesce() (acquire,
   * pairs with the release store that ends an event; the Dekker pair with
   * stop is explained in stkr_event). */
  _Alignas(STKR__THREAD_LINE) _Atomic int busy;
  uintptr_t stack_lo, stack_hi; /* set at attach; producer only */
  /* Written by the producer (relaxed, single writer), read by stats
   * (relaxed): monotone counters. */
  _Atomic uint64_t pushed;
  _Atomic uint64_t dropped_ring_full;
  /* Incremented by nested (signal-handler) events, atomically: several
   * nested handlers may race. */
  _Atomic uint64_t dropped_reentrant;
  /* Producer only: for each set of the two-way known-stack and
   * known-payload tables, which way holds the newer key (bit `set`; the
   * victim of a miss is the other). Policy only: any value is correct
   * (event.c, stkr__known_find). */
  uint64_t known_newest, pknown_newest;

  /* Line shared by both sides, touched rarely. */
  /* Registry link. Written once before publication (producer) or by the
   * worker when unlinking; see thread.c. */
  _Alignas(STKR__THREAD_LINE) struct stkr__thread *_Atomic next;
  uint64_t tid;         /* OS thread id, set before publication */
  /* Recorder thread id, >= 1, set before publication. Not in the line
   * above: the worker reads it for every record it drains, and there it
   * shared the line that the producer writes at every event (busy,
   * pushed): each read was a transfer between the cores (perf: ~40% of
   * the worker's time with one producer looping). */
  uint32_t id;
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
  /* Renames the thread told (stkr_thread_renamed), a queue of
   * STKR__RENAMES: the thread writes rn[rn_count % STKR__RENAMES] (the
   * ring position from which its records carry the new name, and the
   * name), then rn_count (release). The worker, after reading a record,
   * loads rn_count (acquire: a rename told before the record's commit is
   * seen with it), applies those at or before the record, and stores
   * w_rn_done (release), which the thread loads (acquire) before it
   * reuses a slot. Both are reset at start (no producer, no worker). */
  struct {
    uint64_t pos;
    char name[32];
  } rn[STKR__RENAMES];
  _Atomic uint32_t rn_count;
  _Atomic uint32_t w_rn_done;
  /* Renames not told (the queue full): written by the thread (relaxed),
   * read by the worker, which says so once per thread. */
  _Atomic uint32_t rn_lost;
  /* The thread's name as last told (its attach name until a rename):
   * written by the thread under `busy`, read at start, which waits for
   * every thread to be idle, to name the thread anew. */
  char cur_name[32];

  /* Worker-only bookkeeping (flush/ owns these). */
  _Alignas(STKR__THREAD_LINE) uint64_t w_consumed;
  /* Records consumed but not yet released (their batch not written). */
  uint64_t w_unreleased;
  /* Bytes this thread holds of the ring memory cap (ring + state); set at
   * attach, given back when reaped. */
  uint64_t ring_charge;
  uint64_t w_reported_full, w_reported_reentrant;
  /* The ring's drops as stkr__threads_counts_mark saw them, before the
   * counters of the batch being written were read: its counted_* once
   * that batch is written (stkr__threads_drops_commit). */
  uint64_t w_cnt_full, w_cnt_reentrant;
  uint32_t w_defined_seg;  /* segment in which ThreadDef was last emitted */
  /* Renames applied (w_rn_done's value); the thread id of the events since
   * the last one (a new id per rename; 0: none yet, `id`) and their name. */
  uint32_t w_rn_applied;
  bool w_rn_lost_said;
  /* Still inside stkr_event() when a session started, past the start's
   * wait (a longjmp out of an event, a handler that blocks): its ring and
   * tables are left as they are, since its push may still go on. Written
   * and read by the starting control call, under the reap lock. */
  bool stuck_at_start;
  /* Exited, every record read and its final ThreadDef in the batch being
   * built: reaped once that batch is written and the ring released (the
   * same pass, flush/drain.c). */
  bool w_reap_after_write;
  uint32_t w_ev_id;
  char w_name[32];
  /* The worker's mirror of the ring's known-stack table: the stack id
   * (flush/'s table) of the latest full record read for each slot; 0: none
   * (or no memory for it: its known records get stack id 0). Cleared with
   * the table (start, fork); a fresh state is zero. */
  uint32_t w_slot_stack[STKR__KNOWN_SLOTS];
  /* The worker's mirror of the known-payload table (flush/'s type,
   * allocated by the worker at the thread's first PAYLOAD_NEW record and
   * freed by it before the reap; NULL: none yet), and whether it went
   * stale: set where the tables are cleared (start, fork: no worker
   * active, and recorder/ does not free flush/'s memory), cleared by the
   * worker once it emptied the mirror. */
  struct stkr__pmirror *w_payloads;
  bool w_payloads_stale;

  /* The thread's unwind row cache (unwind.h), mapped at attach when the
   * session walks with tables, else NULL. Producer only (its walks);
   * unmapped with the state. */
  _Alignas(STKR__THREAD_LINE) struct stkr__uw_cache *uw_cache;
} stkr__thread;
/* The id stays out of the producer's line (see there). */
_Static_assert(offsetof(stkr__thread, id) / STKR__THREAD_LINE !=
                   offsetof(stkr__thread, busy) / STKR__THREAD_LINE,
               "stkr__thread.id shares the producer's cache line");

/* A new recorder thread id (>= 1), as attach takes: for a thread's events
 * after it renamed itself (flush/). Any thread. */
uint32_t stkr__threads_new_id(void);

/* Sentinels in stkr__tls besides NULL (not attached yet). */
#define STKR__THREAD_DEAD ((stkr__thread *)1)
#define STKR__THREAD_ATTACHING ((stkr__thread *)2)
#define STKR__THREAD_IGNORED ((stkr__thread *)3) /* the recorder's own */
/* Not attached: the process-wide cap on ring memory was reached (its
 * events are dropped as dropped_other until live threads free some). */
#define STKR__THREAD_CAPPED ((stkr__thread *)4)
#define STKR__THREAD_SENTINEL_MAX ((uintptr_t)4)
extern __thread stkr__thread *stkr__tls;

/* Never record the calling thread (the flush worker: with hooked libc
 * calls, its own writes would otherwise record and feed themselves). Its
 * events return -EPERM and are not counted at all. Call before the thread's
 * first event. */
void stkr__thread_ignore(void);

/* The calling thread, whose state is t (attached, outside any event), may
 * have renamed itself: if its name changed, retire t as at its exit (its
 * events so far keep the name they were made under) so that its next
 * event attaches a state under the new name. Not async-signal-safe
 * (pthread_setspecific). */
void stkr__thread_renamed(stkr__thread *t);

/* Allocate and register the calling thread's state (first event).
 * -ENOSPC (and stkr__tls = STKR__THREAD_CAPPED) when the ring would pass
 * the process-wide cap on ring memory (stkr__threads_ring_cap). */
int stkr__thread_attach(size_t ring_bytes, stkr__thread **out);
/* The process-wide cap on the memory of live threads' rings and states,
 * in bytes (default, or 0: STKR__RING_MEM_CAP, raised to 8 rings of the
 * configured size if those are bigger): a thread whose ring would pass it
 * records nothing (its events count as dropped_other) until threads that
 * exit free enough. Set before recording (tests); any thread. */
#define STKR__RING_MEM_CAP ((uint64_t)32 << 20)
void stkr__threads_set_ring_cap(uint64_t bytes);
/* May a capped thread try to attach again (ring memory was freed)? One
 * relaxed load: cheap enough for every event of a capped thread. */
bool stkr__threads_ring_room(size_t ring_bytes);
/* Memory tiers (issue 18): the ring a thread attaching now gets, for the
 * configured `ring_bytes`, the smallest ring `min_bytes` that holds four
 * maximal records, `live` bytes of rings and states already charged and a
 * cap of `cap` (never more than configured):
 *   - the configured size while that ring fits under an eighth of the cap
 *     (4 MiB by default: the first 15 threads with 256 KiB rings, where
 *     an app's busiest threads usually are, keep the room for bursts and
 *     the inproc worker's first-symbolization stall);
 *   - else a quarter of it, at least STKR__RING_SMALL_BYTES, while that
 *     fits under 7/32 of the cap (7 MiB: 44 threads more with 64 KiB, so
 *     that 50 threads all have 64 KiB or more);
 *   - else a sixteenth of it, at least STKR__RING_TINY_BYTES (1,365
 *     known-stack events), and at least min_bytes rounded up to 2^n.
 * Each tier ends later if 4 of its rings would not fit (a large
 * configured ring, e.g. 4 MiB: 4 of them, 4 of 1 MiB, then 256 KiB), at
 * most at half and three quarters of the cap. Pure (tests call it); the
 * figures behind the tiers are at its definition (thread.c). */
#define STKR__RING_SMALL_BYTES ((size_t)64 << 10)
#define STKR__RING_TINY_BYTES ((size_t)32 << 10)
size_t stkr__ring_tier(size_t ring_bytes, size_t min_bytes, uint64_t live,
                       uint64_t cap);
/* The configured ring size and the floor of the smallest tier (see
 * stkr__ring_tier): before recording starts. */
void stkr__threads_set_ring_conf(size_t ring_bytes, size_t min_bytes);
/* The ring a thread attaching now would get for the configured
 * ring_bytes (stkr__ring_tier at the current charge; the worker's prefill
 * makes rings of that size). */
size_t stkr__threads_next_ring(size_t ring_bytes);
/* Bytes of rings and states charged now (a snapshot; tests, stats). */
uint64_t stkr__threads_ring_live(void);

typedef struct stkr__counts {
  uint64_t pushed;            /* records committed to rings */
  uint64_t dropped_ring_full;
  uint64_t dropped_reentrant;
  uint64_t dropped_other;
  uint64_t dropped_late;      /* calls while an exit ended the session */
  uint64_t threads;           /* threads attached since start */
} stkr__counts;
/* Sum of every thread's producer counters, reaped threads included. Any
 * thread; takes the reap lock (never called on the hot path). */
void stkr__threads_counts(stkr__counts *out);
/* The ring files' drops for recovery (common/stkr_ringfile.h, "drops").
 * Worker only. stkr__threads_counts_mark: stkr__threads_counts for a
 * batch's counters, noting each thread's drops (and dropped_other) as it
 * reads them. _pend(seq): before the write of that batch, seq: the noted
 * values, where they differ from counted, become the rings' (and the
 * session file's) pending drops of seq, which recovery takes as counted
 * when it finds that batch. _commit: after that batch was written: the
 * noted values become the rings' (and the session file's) counted.
 * worker_drops: the flush worker's own drops (stkr_stats.dropped_other
 * beyond the producers'), which the batch's dropped_other counts too.
 * stkr__thread_drops_settle: for the thread about to be reaped: what its
 * ring's counted lacks goes to the session file's retired drops, and
 * counted = drops, so that the ring is handed on owing nothing (worker). */
void stkr__threads_counts_mark(stkr__counts *out, uint64_t worker_drops);
void stkr__threads_drops_pend(uint64_t seq);
void stkr__threads_drops_commit(void);
void stkr__thread_drops_settle(stkr__thread *t);
void stkr__count_dropped_other(void);
/* Calls while an exit ends the session (thread.c, g_count_late): _calls
 * turns their counting on (the exit's stop) or off (a start, a fork
 * child); late_call counts one refused for the recorder being off, when
 * on (stkr_event's not-running paths), as dropped_exit. */
void stkr__count_late_calls(bool on);
void stkr__late_call(const stkr_site *site);
/* Zero counters and empty rings (recorder start; no producer active).
 * Threads whose ring is not a file of the current session get a new one
 * (a thread attached in an earlier session, or a forked child's). */
void stkr__threads_reset_counts(void);
/* After the final drain (no producer, no consumer): does any ring still
 * hold records that are not written out? Then the session ends with
 * leftovers (stkr__session_close(true)) and recovery writes them. */
bool stkr__threads_rings_leftover(void);
/* In a forked child: free every other thread's state. */
void stkr__threads_forget_after_fork(void);

/* fork_start.c: a followed fork child's start (event.c). The thread that
 * runs it calls stkr__start_begin before announcing it (the CAS to its
 * STARTING state) and stkr__start_end once that state is over; another
 * thread's event waits in stkr__start_wait until *state is no longer
 * `starting` or the start's deadline (1 s after its begin) passed, and
 * never on the starting thread itself (its signal handlers). @return the
 * state seen last (`starting`: gave up). It sleeps (nanosleep) and reads
 * the clock, both async-signal-safe. A forked child's atfork handler calls
 * stkr__start_after_fork: its start is its own (a fork from a handler that
 * interrupted a start left the flag set on the child's thread, and the
 * parent's deadline would cut the child's wait short). */
void stkr__start_begin(void);
void stkr__start_end(void);
void stkr__start_after_fork(void);
int stkr__start_wait(_Atomic int *state, int starting);

/* pin_image.c: keep this code's image mapped for the rest of the process
 * (dlopen RTLD_NOLOAD | RTLD_NODELETE of itself; not in the hook library):
 * threads that recorded carry thread-exit callbacks into it. Once, at the
 * first start, on a control thread (dlopen takes the loader's lock). */
void stkr__pin_image(void);

/* Iterate the registry (worker). The list may grow at the head while
 * iterating; new threads are seen on the next pass. */
stkr__thread *stkr__threads_first(void);
stkr__thread *stkr__threads_next(stkr__thread *t);
/* Unlink an exited, fully drained thread and free it. Worker only. prev:
 * the thread before t in the registry, or NULL: the unlink then walks the
 * list from its head (quadratic over thousands of exited threads). */
void stkr__thread_reap(stkr__thread *t, stkr__thread *prev);
/* Wait until no thread is inside stkr_event(), at most max_ms in all. */
void stkr__threads_quiesce(unsigned max_ms);
/* Wait until no thread is inside stkr_event(), for at most max_ms: a new
 * recording (stkr__recorder_start) rewrites the configuration those events
 * read. A thread still inside past it (a longjmp out of an event leaves
 * its guard set for good; a signal handler that blocks) is marked
 * stuck_at_start, and the start leaves its ring alone (QA, session 33:
 * stkr_init waited for ever). Not for exit paths. */
void stkr__threads_wait_idle(unsigned max_ms);
/* For fork's prepare and parent handlers (flush/worker.c's, after the
 * loader scan lock: the order the worker takes them in): the reap lock is
 * held across the fork, so that no child is made in the middle of a ring's
 * swap (QA, session 33: a child forked while stkr_init ran on another
 * thread died in its atfork handler). Bounded: past 2 s the fork goes
 * ahead; at once when this thread holds it (a fork from a signal handler
 * that interrupted the holder). */
void stkr__threads_atfork_prepare(void);
void stkr__threads_atfork_parent(void);

/* ---- sites (site.c) ---- */
/* The site's id, registering it on first use; 0 if it cannot be had now
 * (being registered by an interrupted context, the table is full, or its
 * name is refused: stkr__site_refused). */
uint32_t stkr__site_id(stkr_site *site);
/* In a fork's child (its atfork handler): sites whose claim was in flight
 * in another thread of the parent are unclaimed again, that thread being
 * gone (site.c, g_claims). */
void stkr__sites_after_fork(void);
/* Was the site's name refused for good (a "mark:" name of the app's)? */
bool stkr__site_refused(const stkr_site *site);
/* stkr_site_register for mark.c's own sites ("mark:" names). */
int stkr__site_register_mark(stkr_site *site);
/* Dropped marks (mark.c's g_marks_dropped), by site or id (site.c's). */
void stkr__mark_drop_note(const stkr_site *site);
void stkr__mark_drop_note_id(uint32_t site_id);
bool stkr__site_is_mark(uint32_t id);
uint64_t stkr__marks_dropped(void);
uint32_t stkr__site_count(void);             /* ids are 1..count */
/* The recorder's copy of the name (the site's struct may be gone with a
 * dlclose'd library); NULL if unknown. */
const char *stkr__site_name(uint32_t id);

/* ---- control (event.c) --------------------------------------------------- */
typedef struct stkr__rconf {
  size_t ring_bytes;
  unsigned max_depth;
  unsigned skip_frames;
  unsigned payload_max;
  /* Walk with the published unwind tables when there are any
   * (STKR_UNWIND_TABLES; see unwind_tables.c). */
  bool unwind_tables;
} stkr__rconf;

/* ---- unwind tables on the hot path (unwind_tables.c) ---------------------
 * With STKR_UNWIND_TABLES the worker publishes compact tables of every
 * loaded image and stkr_event walks with them; see unwind_tables.c for the
 * publication and grace-period rules. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define STKR__HAVE_UNWIND_TABLES 1
#else
#define STKR__HAVE_UNWIND_TABLES 0
#endif
/* PCs a record reserves beyond max_depth + skip_frames for a table walk:
 * our own two frames and the one that tells truncation. */
#define STKR__UW_EXTRA 3u
/* How long the worker waits for producers to leave the events in which
 * they may hold a replaced set before it keeps that set for good. */
#define STKR__UW_GRACE_MS 50u
/* Whether this session walks with tables (rconf.unwind_tables). Written
 * before the release store of RUNNING, read by producers after acquiring
 * it (as g_conf). */
extern bool stkr__unwind_wanted;
/* A Swift concurrency runtime is loaded (set by the table updates): the
 * table walk does not follow Swift async context chains, so a producer
 * walks with frame pointers first and keeps that walk when it went through
 * an async frame (PCs with STKR_PC_ASYNC). Written by whoever updates the
 * tables, read by producers (relaxed). */
extern bool stkr__uw_swift_async;
/* Whether a walk went through a Swift async frame. */
static inline bool stkr__pcs_any_async(const uint64_t *pcs, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (pcs[i] & STKR__PC_ASYNC)
      return true;
  return false;
}
/* The published set (an opaque stkr__uw_set *), or NULL. Producer, inside
 * its event. */
const void *stkr__unwind_tables_current(void);
/* Walk the calling event's stack with `set` (from
 * stkr__unwind_tables_current in the same event): up to max PCs of the
 * hook's caller chain, after skipping `skip`, into pcs, which must have
 * room for max + skip + STKR__UW_EXTRA, within the stack [lo, hi) (the
 * thread's, or the alternate signal stack a handler runs on). Called only
 * from stkr_event (stkr__push inlined): the frames it drops are its own and
 * stkr_event's. @return the PCs stored; *hash: stkr__hash_pcs of them,
 * *fold2: the stack key's second half unfinished (as stkr__walk_keyed
 * gives them, folded during the walk); *truncated: more frames were left,
 * or the walk could not go on. */
unsigned stkr__walk_tables(stkr__thread *t, const void *set, unsigned skip,
                           uint64_t *pcs, unsigned max, uint64_t *hash,
                           uint64_t *fold2, bool *truncated, uintptr_t lo,
                           uintptr_t hi);
/* What a table update built. */
typedef struct stkr__unwind_update {
  uint32_t images, failed; /* tables built; images left to frame pointers */
  uint32_t without_cfi;    /* images with no .eh_frame */
  uint64_t rows, rows_fallback, table_bytes;
  /* The recording's table cache (unwind_tables.c): tables read from it,
   * tables built and stored into it, files refused (damaged, another
   * format or image) and rebuilt. */
  uint32_t cache_loaded, cache_saved, cache_rejected;
  bool kept_old; /* the replaced set stayed allocated (grace bound passed) */
  bool unchanged; /* the loaded images are those of the published set (the
                     figures are then that set's) */
} stkr__unwind_update;
/* Build tables for every loaded image and publish them, unless the
 * loader's image counts are those of the published set. stkr_init (before
 * the worker starts, so that the first events walk with them), then the
 * worker when the image list changes: never two at once.
 * @return 0, -ENOMEM, or -ENOSYS where tables are not supported. */
int stkr__unwind_tables_update(stkr__unwind_update *out);
/* Image loads announced and not yet covered by the published tables
 * (unwind/unwind.h, stkr__uw_loads_*): a walk does not leave a pc without
 * a table by its frame-pointer record meanwhile. hint: any thread
 * (stkr_images_changed); hinted and covered: the flush worker, covered
 * with a count read from hinted before its watch of the loader began. */
void stkr__unwind_loads_hint(void);
uint64_t stkr__unwind_loads_hinted(void);
void stkr__unwind_loads_covered(uint64_t hinted);
/* Announcements up to `hinted` not covered yet. */
uint64_t stkr__unwind_loads_open(uint64_t hinted);
/* A thread's row cache, at attach; freed with its state. 0 or -ENOMEM. */
int stkr__uw_cache_alloc(stkr__thread *t);
void stkr__uw_cache_free(stkr__thread *t);
/* Worker: wait until every thread that is inside an event now has left
 * it (seen outside an event, or its counters moved on), for at most
 * max_ms. @return true if all did. */
bool stkr__threads_wait_events_left(unsigned max_ms);

typedef void (*stkr__wake_fn)(void *arg);
typedef void (*stkr__fork_fn)(void);

/* Start accepting events. wake(arg) is called (async-signal-safely) by a
 * producer whose ring passes half full; on_fork_child, if not NULL, is called
 * by the first event in a forked child (follow mode) to start recording
 * there; NULL means the child stays disabled. */
int stkr__recorder_start(const stkr__rconf *rc, stkr__wake_fn wake,
                         void *wake_arg, stkr__fork_fn on_fork_child);
/* Stop accepting events (later calls return -ENOTCONN). _for_exit: the
 * process is ending (exit, _exit, exec): later calls are counted as
 * dropped_exit until the next start, as its threads still make them. */
void stkr__recorder_stop(void);
void stkr__recorder_stop_for_exit(void);
bool stkr__recorder_running(void);
/* Called in a forked child (by the atfork handler): forget every other
 * thread, empty the surviving thread's ring. */
void stkr__recorder_forget_after_fork(void);


/* A spin-wait hint (pause / yield): for bounded waits on another thread. */
static inline void stkr__cpu_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm64__)
  __asm__ volatile("yield");
#endif
}

/* ---- pushing a given stack (event.c) ------------------------------------
 * Push one record with the given PCs (not walked here) at `site` into the
 * ring of `t` (NULL: the calling thread's, which must be attached). The
 * caller guarantees it is the ring's only producer for the call: t's own
 * thread (or a signal handler on it: an interrupted event is seen through
 * `busy` and counted as dropped_reentrant), or a sampler while t is
 * suspended (Apple). The site should already be registered when t is not
 * the calling thread (registration scans the site table). Returns as
 * stkr_event(). */
int stkr__record_stack(stkr__thread *t, stkr_site *site, const uint64_t *pcs,
                     unsigned n, const void *payload, size_t payload_len);

/* ---- sampling another thread (sample.c, sample_linux.c, sample_apple.c) */
/* Stop the watchdog, if one runs (stkr_shutdown and _for_exit call it
 * before recording stops). Bounded: see watchdog.c. */
void stkr__watchdog_stop_for_shutdown(bool for_exit);
/* In a forked child (sample.c's atfork handler): no watchdog runs here. */
void stkr__watchdog_forget_after_fork(void);
/* The calling thread is exiting (its recorder state's TLS destructor):
 * it can no longer be sampled, and a sample sent to it already is
 * answered -ESRCH. Nothing for a thread never registered. */
void stkr__sample_going(void);

#endif /* STKR_INTERNAL_H */
