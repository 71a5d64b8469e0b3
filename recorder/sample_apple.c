/*
 * sample_apple.c: how a sample is taken from another thread on iOS/macOS.
 *
 * NOT RUN ON A DEVICE: this machine is Linux. The file is compiled for
 * arm64/arm64e iOS and x86_64 macOS against stand-in SDK headers
 * (tests/apple_shim/sdk, tests/test-apple-build.sh); that the SDK's
 * declarations match and that it works on a device is unverified.
 *
 * thread_suspend, thread_get_state (ARM_THREAD_STATE64: pc, fp; arm64e:
 * the accessors authenticate, stkr__strip_pac strips what is left;
 * x86_THREAD_STATE64: rip, rbp), the bounded walk of the suspended thread's
 * stack (stkr__walk: every frame checked against the stack bounds taken
 * at registration), the push into the target's ring while it is suspended
 * (it is not inside an event, or `busy` says so and the sample is dropped
 * and counted: one producer at a time), thread_resume.
 *
 * While the target is suspended nothing may take a lock it could hold:
 * no malloc, no ObjC runtime, no dyld, no printf. What runs then: the
 * walk (loads inside the stack bounds), the site id (registered before the
 * suspension, stkr__sample_request), the ring (lock-free), the clock
 * (commpage) and the worker's wake-up (a Mach semaphore signal). The
 * mailbox push (watchdog runs) is the same code.
 *
 * Residual risks: the target may be inside its TLS destructors, past the
 * recorder's (its ring state may be reaped by the worker meanwhile): a
 * target whose state says `exited` is not pushed to, but the check and the
 * push are not atomic against the worker. A Swift async frame is followed
 * only when a task runs on the *sampler* thread (the task probe reads the
 * calling thread): the watchdog thread never runs one.
 *
 * Timeouts do not apply (suspension is synchronous); a thread that exited
 * gives an invalid port and -ESRCH.
 */
#if defined(__APPLE__)
#include <errno.h>
#include <mach/mach.h>
#include <pthread.h>
#include <time.h>

#include "common/stkr_mach_regs.h"
#include "recorder/sample.h"

static pthread_mutex_t g_sleep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sleep_cv = PTHREAD_COND_INITIALIZER;

int stkr__splat_setup(void) { return 0; }

int stkr__sample_signal_parse(const char *v) {
  (void)v;
  return 0;
}

int stkr__splat_register(stkr__sslot *s) {
  s->os_tid = stkr__os_tid();
  /* The port is owned by the pthread: no reference taken or dropped. */
  s->plat = (uintptr_t)pthread_mach_thread_np(pthread_self());
  return 0;
}

void stkr__splat_unregister(stkr__sslot *s) { (void)s; }
void stkr__splat_block_self(void) {}

void stkr__splat_sleep(_Atomic uint32_t *word, uint32_t expect, unsigned ms) {
  struct timespec rel = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

  pthread_mutex_lock(&g_sleep_mu);
  if (atomic_load_explicit(word, memory_order_acquire) == expect)
    (void)pthread_cond_timedwait_relative_np(&g_sleep_cv, &g_sleep_mu, &rel);
  pthread_mutex_unlock(&g_sleep_mu);
}

void stkr__splat_wake(_Atomic uint32_t *word) {
  (void)word;
  pthread_mutex_lock(&g_sleep_mu);
  pthread_cond_broadcast(&g_sleep_cv);
  pthread_mutex_unlock(&g_sleep_mu);
}

int stkr__splat_deliver(stkr__sslot *s, unsigned timeout_ms) {
  thread_act_t th = (thread_act_t)s->plat;
  stkr_mach_regs r;
  int err;

  (void)timeout_ms;
  atomic_store_explicit(&s->req, STKR__REQ_RUNNING, memory_order_relaxed);
  if (thread_suspend(th) != KERN_SUCCESS) {
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    return -ESRCH;
  }
  /* From here to thread_resume: nothing that can take a lock. */
  err = stkr_mach_thread_regs(th, &r);
  if (err == 0 && atomic_load_explicit(&s->t->exited, memory_order_acquire))
    err = -ESRCH;
  if (err == 0)
    stkr__sample_serve(s, r.pc, (uintptr_t)r.fp); /* walks, mailbox, push */
  (void)thread_resume(th);
  if (err != 0) {
    atomic_store_explicit(&s->req, STKR__REQ_IDLE, memory_order_release);
    return err;
  }
  /* The sampler is its own "handler": DONE for stkr__sample_request. */
  atomic_store_explicit(&s->req, STKR__REQ_DONE, memory_order_release);
  return 0;
}
#endif /* __APPLE__ */
