/*
 * snapshot_signals.c: the end signals of a `stackrec snapshot` series
 * (snapshot_signals.h; split from snapshot.c). On Linux they are
 * blocked for the whole run and taken (sigtimedwait) only where a series
 * may end: before each snapshot and in the wait between two. No handler
 * runs at an unknown point, so none is deferred or lost: under TSan, which
 * runs a handler at the thread's next interceptor, a SIGTERM once left a
 * series running for ever and another ended one by its default action with
 * no clean end (CI, session 43). Elsewhere (Apple: no sigtimedwait, and
 * sigpending sees only the calling thread's, while main.c may run the
 * command on a thread of its own) a handler notes the signal, and the wait
 * sleeps in slices. Either way a signal ignored or blocked by whoever
 * started us (nohup, `trap '' PIPE`, a blocked mask) is left so: it would
 * not have ended us.
 */
#if defined(__linux__)
#define _GNU_SOURCE /* sigtimedwait */
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tools/stackrec/snapshot_backend.h"
#include "tools/stackrec/snapshot_signals.h"

#if !defined(__linux__)
static volatile sig_atomic_t g_end_signal;
static void on_end_signal(int sig) {
  if (g_end_signal == 0) g_end_signal = sig;
}
#endif

void stkr_snap_end_signals_hold(stkr_snap_end_signals *es) {
  static const int sigs[] = {STKR_SNAP_END_SIGNALS};
  struct sigaction old;
  sigemptyset(&es->set);
  es->taken = 0;
  sigprocmask(SIG_BLOCK, NULL, &es->old);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    if ((sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_IGN) &&
        sigismember(&es->old, sigs[i]) != 1)
      sigaddset(&es->set, sigs[i]);
#if defined(__linux__)
  sigprocmask(SIG_BLOCK, &es->set, NULL);
#else
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_end_signal;
  sigemptyset(&sa.sa_mask);
  for (int k = 1; k < NSIG; k++)
    if (sigismember(&es->set, k) == 1) sigaction(k, &sa, NULL);
#endif
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int stkr_snap_end_signal_wait(stkr_snap_end_signals *es, int64_t wait_ns) {
  int64_t deadline = mono_ns() + wait_ns;
  while (!es->taken) {
    int64_t left = deadline - mono_ns();
    if (left < 0) left = 0;
#if defined(__linux__)
    struct timespec ts = {(time_t)(left / 1000000000),
                          (long)(left % 1000000000)};
    int sig = sigtimedwait(&es->set, NULL, &ts);
    if (sig > 0) es->taken = sig;
    else if (errno != EINTR || left == 0) break; /* EAGAIN: none in time */
#else
    if ((es->taken = g_end_signal) != 0 || left == 0) break;
    /* A signal cuts the slice short (EINTR). */
    nanosleep(&(struct timespec){0, (long)(left < 10000000 ? left
                                                  : 10000000)}, NULL);
#endif
  }
  return es->taken;
}

/* The default action lets the caller see the signal it sent. */
void stkr_snap_end_signals_release(stkr_snap_end_signals *es) {
  if (es->taken) {
    sigset_t others = es->set;
    fflush(NULL);
    sigdelset(&others, es->taken);
    sigprocmask(SIG_BLOCK, &others, NULL);
    signal(es->taken, SIG_DFL);
    raise(es->taken); /* pending until the mask below lets it in */
    for (int k = 1; k < NSIG; k++)
      if (sigismember(&others, k) == 1) sigaddset(&es->old, k);
  }
  sigprocmask(SIG_SETMASK, &es->old, NULL);
}
