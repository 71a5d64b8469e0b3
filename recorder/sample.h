/*
 * sample.h: shared by sample.c (portable part: registration, requests,
 * counters), sample_linux.c / sample_apple.c (how a stack is taken from
 * another thread) and watchdog.c. Internal to recorder/.
 *
 * A thread that may be sampled registers itself (stkr_thread_self) and
 * gets a slot in a fixed table; the handle names the slot and its
 * generation, so a handle of a thread that exited is refused (-ESRCH)
 * instead of reaching a reused slot.
 *
 * One request at a time per slot, through `req` (a futex word on Linux):
 *   IDLE -> CLAIMED (a sampler, CAS: excludes other samplers and the
 *   exiting thread) -> REQUESTED (release: the request fields are set) ->
 *   RUNNING (the target's handler, CAS) -> DONE (release: result and PCs)
 *   -> IDLE (the sampler, after reading them).
 * A sampler that times out takes REQUESTED back to IDLE (CAS), so a late
 * handler (the signal was blocked, then unblocked) finds IDLE and does
 * nothing; if the handler is already RUNNING it waits once more, bounded,
 * then marks the request ABANDONED and the handler ends it (IDLE).
 */
#ifndef STKR_SAMPLE_H
#define STKR_SAMPLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "recorder/stkr_internal.h"

#define STKR__SAMPLE_SLOTS 64
#define STKR__SAMPLE_PAYLOAD 256 /* a sample's payload is copied up to this */
#define STKR__SAMPLE_DEFAULT_TIMEOUT_MS 100

enum {
  STKR__REQ_IDLE = 0,
  STKR__REQ_CLAIMED = 1,
  STKR__REQ_REQUESTED = 2,
  STKR__REQ_RUNNING = 3,
  STKR__REQ_DONE = 4,
  STKR__REQ_ABANDONED = 5
};

/* What the target (or the sampler on Apple) does for a request. */
enum {
  STKR__MODE_PUSH = 1, /* walk, and push the stack at `site` */
  STKR__MODE_WALK = 2, /* walk into `pcs` only (the watchdog compares) */
  STKR__MODE_MAIL = 3  /* only take the mailbox (below) */
};

/* A record the watchdog hands to the target thread to push into the
 * target's own ring (the ring stays single-producer): one run of
 * identical hang stacks, and optionally the recovery. Written by the
 * watchdog while `mail` is EMPTY, published by the release store of FULL;
 * taken by the target (tick, or its signal handler) with a CAS FULL ->
 * TAKEN (acquire), released with EMPTY (release). */
enum {
  STKR__MAIL_EMPTY = 0,
  STKR__MAIL_FULL = 1,
  STKR__MAIL_TAKEN = 2,  /* the target is pushing it */
  STKR__MAIL_WRITING = 3 /* the watchdog appends to a full box (CAS) */
};
#define STKR__MAIL_RUNS 2
typedef struct stkr__mail_run {
  unsigned n;
  uint64_t pcs[STKR_MAX_DEPTH];
  char payload[96];
  unsigned payload_len;
} stkr__mail_run;
typedef struct stkr__mail {
  unsigned nruns;
  stkr__mail_run runs[STKR__MAIL_RUNS];
  bool recovered;           /* then also push watchdog.recovered */
  char rec_payload[96];
  unsigned rec_payload_len;
} stkr__mail;

typedef struct stkr__sslot {
  /* In use: set by the registering thread (CAS 0 -> 1, acquire), cleared
   * by its exit (release) once no request is in flight. */
  _Atomic int used;
  /* Bumped at each release of the slot; a handle carries the value it was
   * made with. Written by the owner thread, read by samplers (acquire). */
  _Atomic uint32_t gen;
  /* Set (seq_cst) by the owner's exit before it waits for `req` to be
   * IDLE; checked (seq_cst) by a sampler after its claim: one of the two
   * sees the other (Dekker). */
  _Atomic int dead;
  /* Set at registration (before the release store of `used`); read-only
   * after. The stack bounds are copied from the recorder's thread state,
   * which the handler must not touch once the thread's recorder TLS
   * destructor ran (it may be unmapped). */
  uint64_t os_tid;
  uintptr_t stack_lo, stack_hi;
  uintptr_t plat;      /* Apple: the thread's mach port */
  stkr__thread *t;     /* the recorder's state of the thread */
  /* The request word (see the top of this file). */
  _Atomic uint32_t req;
  /* 1 while the sampler sleeps (futex) on `req`: set (seq_cst) before it
   * reads `req` and sleeps, cleared after; read (seq_cst) by the handler
   * after its seq_cst CAS to DONE, which wakes the futex only then (Dekker:
   * one of the two sees the other). An answer usually comes while the
   * sampler still spins, and the wake is a syscall the target pays. */
  _Atomic uint32_t waiting;
  /* getpid() of the sampler: written (relaxed) before its release store
   * of REQUESTED, read by the handler after its acquire CAS: a signal on
   * our number from another process is told apart without the handler's
   * own getpid() syscall. */
  int sender_pid;
  /* Request: written by the sampler between CLAIMED and REQUESTED; read
   * by the handler after its CAS to RUNNING. */
  int mode;
  stkr_site *site;
  uint8_t payload[STKR__SAMPLE_PAYLOAD];
  unsigned payload_len;
  /* Answer: written by the handler before DONE; read by the sampler after
   * its acquire load of DONE. */
  int result;
  unsigned n;
  uint64_t hash;
  uint64_t pcs[STKR_MAX_DEPTH];
  /* Blocked-signal memo (sampler side, under CLAIMED): a thread that was
   * found blocking the signal is checked again before another signal is
   * queued to it. */
  bool blocked;
  /* The watchdog's mailbox (see stkr__mail). */
  _Atomic int mail;
  stkr__mail box;
  /* Heartbeat: bumped by the thread's stkr_watchdog_tick() (relaxed, one
   * writer), read by the watchdog (relaxed: only a change matters). Bit 0
   * set: the thread said it waits for input (stkr_watchdog_idle). */
  _Atomic uint64_t beat;
} stkr__sslot;

/* The slot of a handle, or NULL if the handle is stale or malformed;
 * *gen gets the handle's generation. */
stkr__sslot *stkr__sslot_of(uint64_t handle, uint32_t *gen);
/* The calling thread's slot, or NULL if it is not registered. */
stkr__sslot *stkr__sslot_self(void);

/* One request to `s` (mode, site, payload as described above), waited for
 * at most timeout_ms. The answer is in s->n/pcs/hash when it returns 0 and
 * the mode walked. Counts every outcome. Not on the target thread. */
int stkr__sample_request(stkr__sslot *s, uint32_t gen, int mode,
                         stkr_site *site, const void *payload, size_t len,
                         unsigned timeout_ms, uint64_t *pcs, unsigned *n,
                         uint64_t *hash);
/* The handle of slot s (its current generation). */
uint64_t stkr__sslot_handle(const stkr__sslot *s);
/* The stack of the target as it was interrupted (pc, frame pointer), into
 * s->pcs/n/hash, then per s->mode push it, after taking the mailbox. Runs
 * on the target (Linux: its signal handler) or on the sampler while the
 * target is suspended (Apple). Async-signal-safe, lock-free. */
void stkr__sample_serve(stkr__sslot *s, uint64_t pc, uintptr_t fp);
/* The answer is in s (result, n, pcs): RUNNING -> DONE, waking a sampler
 * that sleeps on it; a request the sampler abandoned meanwhile is ended
 * (IDLE) instead. On the target thread: its signal handler, or its exit. */
void stkr__sslot_answer(stkr__sslot *s);
/* Push what the mailbox holds, if anything, into s->t's ring. here/here_n:
 * the stack to record the recovery with (NULL: walk the caller's). */
void stkr__sample_take_mail(stkr__sslot *s, const uint64_t *here,
                            unsigned here_n);

/* ---- platform part --------------------------------------------------- */
/* Once per process: the signal (Linux). 0, -EBUSY (the app has a handler
 * on the signal), -EINVAL (bad STACKREC_SAMPLE_SIGNAL). */
int stkr__splat_setup(void);
/* Registration of the calling thread: fill s->os_tid and s->plat.
 * -EDEADLK when the thread blocks the signal (Linux). */
int stkr__splat_register(stkr__sslot *s);
/* Exit of the calling thread: block the signal so that no handler runs
 * once the slot is released. */
void stkr__splat_unregister(stkr__sslot *s);
/* Deliver the request published in s->req (REQUESTED) and wait for DONE
 * at most timeout_ms. 0: DONE seen (s->result holds the outcome); else
 * -ETIMEDOUT, -EDEADLK, -ESRCH, -EBUSY, with the request withdrawn. */
int stkr__splat_deliver(stkr__sslot *s, unsigned timeout_ms);
/* Sleep up to ms, or until *word != expect (a stop request). */
void stkr__splat_sleep(_Atomic uint32_t *word, uint32_t expect, unsigned ms);
void stkr__splat_wake(_Atomic uint32_t *word);
/* The calling thread blocks/unblocks the sampling signal (the watchdog
 * thread never takes one). No-op on Apple. */
void stkr__splat_block_self(void);

/* Counters (stkr_sample_stats): relaxed adds. */
typedef enum {
  STKR__SC_REQUESTED,
  STKR__SC_RECORDED,
  STKR__SC_WALKED,
  STKR__SC_TIMED_OUT,
  STKR__SC_BLOCKED,
  STKR__SC_EXITED,
  STKR__SC_BUSY,
  STKR__SC_DROPPED,
  STKR__SC_HANGS,
  STKR__SC_HANG_SAMPLES,
  STKR__SC_HANG_RUNS,
  STKR__SC_HANG_RUNS_LOST,
  STKR__SC_COUNT
} stkr__scount;
void stkr__sample_count(stkr__scount c);

extern stkr_site stkr__site_wd_hang, stkr__site_wd_recovered;

#endif /* STKR_SAMPLE_H */
