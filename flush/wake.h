/*
 * wake.h: the flush worker's wake-up: a descriptor-free, async-signal-safe
 * "post" for producers and control requests, and a wait with a deadline for
 * the worker. One platform file implements it (wake_linux.c, wake_apple.c).
 *
 * Why not a pipe, an eventfd or an event loop: the recorder lives inside
 * someone else's process. Any descriptor it owns can be closed, dup2'ed over
 * or inherited by the app (closerange(3, ...), daemons closing every fd), and
 * a library that aborts when that happens (libuv does) takes the app down.
 * A POSIX unnamed semaphore (Linux) or a Mach semaphore (Apple) is kernel
 * state reachable through no descriptor number, and posting it is
 * async-signal-safe (sem_post is on POSIX's list; semaphore_signal is a trap).
 *
 * Posts coalesce: `pending` is set by the first post and cleared by the
 * worker when it wakes, so a burst of posts costs one extra wake at most.
 *
 * Fork: a child must never use an inherited stkr__wake (a sem_t may be in a
 * state only the parent's threads can resolve; a Mach port name does not
 * survive fork at all). The child initializes a new one.
 */
#ifndef STKR_FLUSH_WAKE_H
#define STKR_FLUSH_WAKE_H

#include <stdatomic.h>
#include <stdint.h>

#if defined(__APPLE__)
typedef struct stkr__wake {
  unsigned int sem; /* semaphore_t (a Mach port name) */
  /* Set by the first post since the worker last woke (exchange, seq_cst),
   * cleared by the worker when it wakes (seq_cst): pairs the two so that a
   * post after the clear always signals again. */
  _Atomic int pending;
} stkr__wake;
#else
#include <semaphore.h>
typedef struct stkr__wake {
  sem_t sem;
  _Atomic int pending; /* as above */
} stkr__wake;
#endif

/* 0 or -errno. */
int stkr__wake_init(stkr__wake *w);
/* Only once nobody can post or wait any more. */
void stkr__wake_destroy(stkr__wake *w);
/* Wake the waiter (or make its next wait return at once). Async-signal-safe,
 * lock-free, never blocks; any thread. */
void stkr__wake_post(stkr__wake *w);
/* Worker only: wait until posted or until CLOCK_MONOTONIC (the recorder's
 * stkr__clock_mono_ns) reaches deadline_ns. @return 0 when posted,
 * -ETIMEDOUT when the deadline passed first. */
int stkr__wake_wait(stkr__wake *w, uint64_t deadline_ns);

#endif /* STKR_FLUSH_WAKE_H */
