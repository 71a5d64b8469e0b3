/*
 * sample.c: sampling another thread of this process, the portable part:
 * the table of registered threads, requests and their outcomes, what the
 * target does with a request (stkr__sample_serve) and the watchdog's
 * mailbox. How a request reaches the target is in sample_linux.c (a
 * real-time signal) and sample_apple.c (thread_suspend).
 *
 * Where a sample goes: into the *target's* ring, pushed on the target
 * thread (its signal handler, or its stkr_watchdog_tick), so every ring
 * keeps exactly one producer and the event carries the target's thread id.
 * On Apple the sampler pushes while the target is suspended (and not
 * inside an event): still one producer at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "recorder/sample.h"

static stkr__sslot g_slots[STKR__SAMPLE_SLOTS];
/* The calling thread's slot. initial-exec: the signal handler reads it and
 * must not trigger a lazy TLS allocation. */
static __thread stkr__sslot *g_self __attribute__((tls_model("initial-exec")));
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
/* Written once under g_once, read after it (pthread_once orders it). */
static int g_setup_err;
static _Atomic uint64_t g_counts[STKR__SC_COUNT];

stkr_site stkr__site_wd_hang = STKR_SITE_INIT("watchdog.hang");
stkr_site stkr__site_wd_recovered = STKR_SITE_INIT("watchdog.recovered");

void stkr__sample_count(stkr__scount c) {
  atomic_fetch_add_explicit(&g_counts[c], 1, memory_order_relaxed);
}

static void stkr__slot_exit(void *arg);

/* In a forked child only the forking thread exists: every other slot is
 * released (no request can be in flight for them here), the survivor's
 * request and mailbox are reset and its thread id is the child's. */
static void stkr__sample_atfork_child(void) {
  for (unsigned i = 0; i < STKR__SAMPLE_SLOTS; i++) {
    stkr__sslot *s = &g_slots[i];
    if (s == g_self || !atomic_load_explicit(&s->used, memory_order_relaxed))
      continue;
    atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
    atomic_store_explicit(&s->used, 0, memory_order_relaxed);
  }
  if (g_self != NULL) {
    atomic_store_explicit(&g_self->req, STKR__REQ_IDLE, memory_order_relaxed);
    atomic_store_explicit(&g_self->mail, STKR__MAIL_EMPTY, memory_order_relaxed);
    g_self->os_tid = stkr__os_tid();
  }
  stkr__watchdog_forget_after_fork();
}

static void stkr__sample_once(void) {
  if (pthread_key_create(&g_key, stkr__slot_exit) != 0) {
    g_setup_err = -EAGAIN;
    return;
  }
  pthread_atfork(NULL, NULL, stkr__sample_atfork_child);
  g_setup_err = stkr__splat_setup();
}

uint64_t stkr__sslot_handle(const stkr__sslot *s) {
  uint32_t gen = atomic_load_explicit(&s->gen, memory_order_acquire);
  return ((uint64_t)gen << 8) | (uint64_t)(s - g_slots + 1);
}

stkr__sslot *stkr__sslot_of(uint64_t handle, uint32_t *gen) {
  uint64_t idx = handle & 0xff;
  stkr__sslot *s;

  if (idx == 0 || idx > STKR__SAMPLE_SLOTS || (handle >> 40) != 0)
    return NULL;
  s = &g_slots[idx - 1];
  *gen = (uint32_t)(handle >> 8);
  /* Acquire pairs with the release store of `used` at registration: the
   * slot's identity fields are visible. The generation is checked again
   * after the claim (stkr__sample_request). */
  if (!atomic_load_explicit(&s->used, memory_order_acquire) ||
      atomic_load_explicit(&s->gen, memory_order_acquire) != *gen)
    return NULL;
  return s;
}

stkr__sslot *stkr__sslot_self(void) { return g_self; }

int stkr_thread_self(stkr_thread_handle *out) {
  stkr__sslot *s = NULL;
  int err;

  if (out == NULL)
    return -EINVAL;
  if (g_self != NULL) {
    /* A forked child that does not record keeps the slot, not the
     * recording (QA, session 33: 0 and a handle no sample took); one in
     * follow mode starts its recording here, as an attach does. */
    if (!stkr__recorder_running() && (err = stkr_thread_attach()) != 0)
      return err;
    *out = stkr__sslot_handle(g_self);
    return 0;
  }
  if ((err = stkr_thread_attach()) != 0)
    return err;
  pthread_once(&g_once, stkr__sample_once);
  if (g_setup_err != 0)
    return g_setup_err;
  for (unsigned i = 0; i < STKR__SAMPLE_SLOTS && s == NULL; i++) {
    int expect = 0;
    /* Acquire pairs with the release store of 0 by the last owner's exit:
     * its last writes to the slot come before ours. */
    if (atomic_compare_exchange_strong_explicit(&g_slots[i].used, &expect, 2,
                                                memory_order_acquire,
                                                memory_order_relaxed))
      s = &g_slots[i];
  }
  if (s == NULL)
    return -ENOSPC;
  s->t = stkr__tls;
  s->stack_lo = s->t->stack_lo;
  s->stack_hi = s->t->stack_hi;
  s->blocked = false;
  atomic_store_explicit(&s->dead, 0, memory_order_relaxed);
  atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_relaxed);
  atomic_store_explicit(&s->mail, STKR__MAIL_EMPTY, memory_order_relaxed);
  atomic_store_explicit(&s->beat, 0, memory_order_relaxed);
  if ((err = stkr__splat_register(s)) != 0 ||
      (err = -pthread_setspecific(g_key, s)) != 0) {
    atomic_store_explicit(&s->used, 0, memory_order_release);
    return err;
  }
  g_self = s;
  /* Release: pairs with the acquire load in stkr__sslot_of; samplers see
   * the fields above. `used` 2 while registering keeps the slot invisible
   * to samplers (they test for 1). */
  atomic_store_explicit(&s->used, 1, memory_order_release);
  *out = stkr__sslot_handle(s);
  return 0;
}

void stkr__sslot_answer(stkr__sslot *s) {
  uint32_t expect = STKR__REQ_RUNNING;

  /* Release (seq_cst) pairs with the sampler's acquire load of DONE: the
   * answer; seq_cst also with its store of `waiting` (Dekker, below). */
  if (!atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                               STKR__REQ_DONE,
                                               memory_order_seq_cst,
                                               memory_order_relaxed)) {
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    return; /* abandoned: nobody waits */
  }
  /* seq_cst: pairs with the sampler's seq_cst store of `waiting` before
   * its last look at `req`. A sampler still spinning sees DONE by itself:
   * no futex wake (a syscall) on the target. The slot is static: waking it
   * after the sampler moved on is harmless. */
  if (atomic_load_explicit(&s->waiting, memory_order_seq_cst))
    stkr__splat_wake(&s->req);
}

/* No sample of this thread from here on: the signal blocked (no handler
 * runs on this thread any more), `dead` said (Dekker with the claim in
 * stkr__sample_request: a later request gets -ESRCH), and a request whose
 * signal was sent already, which no handler will take now, answered
 * -ESRCH at once (QA: the sampler waited out its whole timeout and then
 * found the signal blocked, -EDEADLK; or the handler, in the exit, got
 * -ENOTCONN or -EAGAIN from a state being torn down). On Apple no request
 * waits in REQUESTED (the sampler serves it itself, checking `exited`).
 * Idempotent: the recorder's exit calls it first, the slot's exit again. */
static void stkr__slot_going(stkr__sslot *s) {
  uint32_t expect = STKR__REQ_REQUESTED;

  stkr__splat_unregister(s);
  /* seq_cst store of `dead`, then seq_cst read of `req` (the CAS, also on
   * failure): the Dekker pair with the sampler's seq_cst store of
   * REQUESTED then load of `dead` (stkr__splat_deliver), and with the
   * claim's CAS then load of `dead` (stkr__sample_request). One of us sees
   * the other: we REQUESTED, or it `dead`. Success also acquires the
   * request's fields. */
  atomic_store_explicit(&s->dead, 1, memory_order_seq_cst);
  if (atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                              STKR__REQ_RUNNING,
                                              memory_order_seq_cst,
                                              memory_order_seq_cst)) {
    s->n = 0;
    s->result = -ESRCH;
    stkr__sslot_answer(s);
  }
}

void stkr__sample_going(void) {
  if (g_self != NULL)
    stkr__slot_going(g_self);
}

/* The thread's exit (TLS destructor): no request may be in flight once the
 * slot is released, so say we are going (stkr__slot_going), and wait out a
 * request under way: bounded, a sampler withdraws by its timeout; one that
 * outlives 250 ms leaves the slot unused for good rather than make this
 * exit wait. */
static void stkr__slot_exit(void *arg) {
  stkr__sslot *s = arg;

  stkr__slot_going(s);
  for (unsigned i = 0; i < 250; i++) {
    if (atomic_load_explicit(&s->req, memory_order_seq_cst) ==
        STKR__REQ_IDLE)
      break;
    _Atomic uint32_t never = 0;
    stkr__splat_sleep(&never, 0, 1);
  }
  /* The hang's last runs, if the watchdog left any for this thread. The
   * recorder's own state may be gone already: then they are lost, and
   * counted. */
  stkr__sample_take_mail(s, NULL, 0);
  g_self = NULL;
  if (atomic_load_explicit(&s->req, memory_order_seq_cst) != STKR__REQ_IDLE)
    return; /* a stuck request: never reuse this slot */
  atomic_fetch_add_explicit(&s->gen, 1, memory_order_release);
  /* Release: pairs with the acquire CAS of the next registration. */
  atomic_store_explicit(&s->used, 0, memory_order_release);
}

static void stkr__count_result(int mode, int err) {
  switch (err) {
  case 0:
    stkr__sample_count(mode == STKR__MODE_PUSH ? STKR__SC_RECORDED
                                               : STKR__SC_WALKED);
    break;
  case -EAGAIN:
    stkr__sample_count(STKR__SC_DROPPED);
    break;
  case -ETIMEDOUT:
    stkr__sample_count(STKR__SC_TIMED_OUT);
    break;
  case -EDEADLK:
    stkr__sample_count(STKR__SC_BLOCKED);
    break;
  case -ESRCH:
    stkr__sample_count(STKR__SC_EXITED);
    break;
  case -EBUSY:
  case -EALREADY:
    stkr__sample_count(STKR__SC_BUSY);
    break;
  default:
    break;
  }
}

int stkr__sample_request(stkr__sslot *s, uint32_t gen, int mode,
                         stkr_site *site, const void *payload, size_t len,
                         unsigned timeout_ms, uint64_t *pcs, unsigned *n,
                         uint64_t *hash) {
  uint32_t expect = STKR__REQ_IDLE;
  int err;

  stkr__sample_count(STKR__SC_REQUESTED);
  /* seq_cst: the Dekker pair with stkr__slot_exit (its store of `dead`
   * then load of `req`; our CAS of `req` then load of `dead`). */
  if (!atomic_compare_exchange_strong_explicit(&s->req, &expect,
                                               STKR__REQ_CLAIMED,
                                               memory_order_seq_cst,
                                               memory_order_relaxed)) {
    err = -EALREADY;
    goto out;
  }
  if (atomic_load_explicit(&s->dead, memory_order_seq_cst) ||
      atomic_load_explicit(&s->used, memory_order_acquire) != 1 ||
      atomic_load_explicit(&s->gen, memory_order_acquire) != gen) {
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    err = -ESRCH;
    goto out;
  }
  /* Registration scans the site table (lock-free, but a strcmp per site):
   * done here, so that the target's handler, or the time the target is
   * suspended, only ever meets registered sites. */
  if (site != NULL)
    (void)stkr_site_register(site);
  (void)stkr_site_register(&stkr__site_wd_hang);
  (void)stkr_site_register(&stkr__site_wd_recovered);
  if (payload == NULL)
    len = 0;
  if (len > STKR__SAMPLE_PAYLOAD)
    len = STKR__SAMPLE_PAYLOAD;
  s->mode = mode;
  s->site = site;
  if (len != 0)
    memcpy(s->payload, payload, len);
  s->payload_len = (unsigned)len;
  s->result = -EAGAIN;
  s->n = 0;
  err = stkr__splat_deliver(s, timeout_ms);
  if (err == 0) {
    /* DONE, acquired by stkr__splat_deliver: the answer is ours to read
     * until we store IDLE. */
    err = s->result;
    if (pcs != NULL && err == 0) {
      memcpy(pcs, s->pcs, 8u * s->n);
      *n = s->n;
      *hash = s->hash;
    }
    /* Release: the next claimer's writes come after our reads. */
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
  }
out:
  stkr__count_result(mode, err);
  return err;
}

int stkr_thread_sample(stkr_thread_handle target, stkr_site *site,
                       const void *payload, size_t payload_len,
                       unsigned timeout_ms) {
  stkr__sslot *s;
  uint32_t gen;

  /* A site whose name stkr_site_register refuses ("mark:..."): refused
   * here, before the target is signalled (review, session 23). */
  if (site == NULL || stkr_site_register(site) == -EINVAL)
    return -EINVAL;
  if (!stkr__recorder_running())
    return -ENOTCONN;
  s = stkr__sslot_of(target, &gen);
  if (s == NULL) {
    stkr__sample_count(STKR__SC_EXITED);
    return -ESRCH;
  }
  if (s == g_self)
    return -EINVAL;
  return stkr__sample_request(s, gen, STKR__MODE_PUSH, site, payload,
                              payload_len,
                              timeout_ms ? timeout_ms
                                         : STKR__SAMPLE_DEFAULT_TIMEOUT_MS,
                              NULL, NULL, NULL);
}

void stkr__sample_serve(stkr__sslot *s, uint64_t pc, uintptr_t fp) {
  uint64_t h;
  bool truncated;
  unsigned n = 0;

  /* The interrupted PC itself first, then the caller chain. It is not a
   * return address, and every reader looks a PC up at PC - 1 (StackDef.pcs:
   * at a function's first byte that is the function before it, elsewhere
   * the instruction before, often another line): stored + 1. */
  pc = stkr__strip_pac(pc);
  if (pc != 0)
    s->pcs[n++] = pc + 1;
  n += stkr__walk(fp, s->stack_lo, s->stack_hi, 0, s->pcs + n,
                  STKR_MAX_DEPTH - n, &h, &truncated);
  s->n = n;
  s->hash = stkr__hash_pcs(s->pcs, n);
  stkr__sample_take_mail(s, s->pcs, n);
  if (s->mode == STKR__MODE_PUSH)
    s->result = stkr__record_stack(s == g_self ? NULL : s->t, s->site,
                                 s->pcs, n, s->payload, s->payload_len);
  else
    s->result = 0;
}

void stkr__sample_take_mail(stkr__sslot *s, const uint64_t *here,
                            unsigned here_n) {
  int expect = STKR__MAIL_FULL;
  stkr__mail *m = &s->box;
  /* On the target thread, push through its own state (NULL), which says
   * -ENOTCONN once its recorder state is gone; the Apple sampler pushes
   * through s->t while the target is suspended. */
  stkr__thread *t = (s == g_self) ? NULL : s->t;

  /* Acquire pairs with the watchdog's release store of FULL: the box. */
  if (!atomic_compare_exchange_strong_explicit(&s->mail, &expect,
                                               STKR__MAIL_TAKEN,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return;
  for (unsigned i = 0; i < m->nruns; i++) {
    const stkr__mail_run *r = &m->runs[i];
    int err = stkr__record_stack(t, &stkr__site_wd_hang, r->pcs, r->n,
                               r->payload, r->payload_len);
    stkr__sample_count(err == 0 ? STKR__SC_HANG_RUNS : STKR__SC_HANG_RUNS_LOST);
  }
  if (m->recovered) {
    if (here != NULL)
      (void)stkr__record_stack(t, &stkr__site_wd_recovered, here, here_n,
                             m->rec_payload, m->rec_payload_len);
    else if (t == NULL)
      (void)stkr_event(&stkr__site_wd_recovered, m->rec_payload,
                       m->rec_payload_len);
  }
  m->nruns = 0;
  m->recovered = false;
  /* Release: pairs with the watchdog's acquire CAS from EMPTY. */
  atomic_store_explicit(&s->mail, STKR__MAIL_EMPTY, memory_order_release);
}

int stkr_sample_stats_get(stkr_sample_stats *out) {
  if (out == NULL)
    return -EINVAL;
  memset(out, 0, sizeof *out);
#define STKR__C(f, c) out->f = atomic_load_explicit(&g_counts[c], memory_order_relaxed)
  STKR__C(requested, STKR__SC_REQUESTED);
  STKR__C(recorded, STKR__SC_RECORDED);
  STKR__C(walked, STKR__SC_WALKED);
  STKR__C(timed_out, STKR__SC_TIMED_OUT);
  STKR__C(blocked, STKR__SC_BLOCKED);
  STKR__C(exited, STKR__SC_EXITED);
  STKR__C(busy, STKR__SC_BUSY);
  STKR__C(dropped, STKR__SC_DROPPED);
  STKR__C(hangs, STKR__SC_HANGS);
  STKR__C(hang_samples, STKR__SC_HANG_SAMPLES);
  STKR__C(hang_runs, STKR__SC_HANG_RUNS);
  STKR__C(hang_runs_lost, STKR__SC_HANG_RUNS_LOST);
#undef STKR__C
  return 0;
}
