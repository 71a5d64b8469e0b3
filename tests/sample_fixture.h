/*
 * sample_fixture.h: threads parked in known call chains, for the sampling
 * and watchdog tests. Every function is noinline, built with frame
 * pointers and without sibling calls (tests/BUILD), and each chain ends in
 * a leaf of our own that makes its system call with an inline `syscall` /
 * `svc` instruction: the interrupted PC is then inside the leaf and the
 * frame pointer is the leaf's, so the whole chain is exact. (Through
 * Debian's libc, built without frame pointers, the caller of the libc
 * function would be missing: see README, "Sampling another thread".)
 *
 * Chains (innermost first):
 *   sf_park_poll  < sf_poll_c  < sf_poll_b  < sf_poll_a   < sf_thread
 *   sf_park_pause < sf_pause_c < sf_pause_b < sf_pause_a  < sf_thread
 *   sf_park_futex < sf_futex_c < sf_futex_b < sf_futex_a  < sf_thread
 *   sf_park_busy  < sf_busy_c  < sf_busy_b  < sf_busy_a   < sf_thread
 */
#ifndef STKR_TEST_SAMPLE_FIXTURE_H
#define STKR_TEST_SAMPLE_FIXTURE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

#define SF_NOINLINE __attribute__((noinline))

/* A raw system call with up to 4 arguments, made right here. */
static inline __attribute__((always_inline)) long sf_sys(long n, long a,
                                                         long b, long c,
                                                         long d) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                   : "memory");
  return x0;
#else
#error "sample_fixture.h: x86_64 or aarch64"
#endif
}

enum { SF_POLL, SF_PAUSE, SF_FUTEX, SF_BUSY, SF_KINDS };
static const char *const sf_kind_name[SF_KINDS] = {"poll", "pause", "futex",
                                                   "busy"};
/* Expected function names, innermost first. */
static const char *const sf_chain[SF_KINDS][5] = {
    {"sf_park_poll", "sf_poll_c", "sf_poll_b", "sf_poll_a", "sf_thread"},
    {"sf_park_pause", "sf_pause_c", "sf_pause_b", "sf_pause_a", "sf_thread"},
    {"sf_park_futex", "sf_futex_c", "sf_futex_b", "sf_futex_a", "sf_thread"},
    {"sf_park_busy", "sf_busy_c", "sf_busy_b", "sf_busy_a", "sf_thread"},
};

typedef struct sf_thread_arg {
  int kind;
  pthread_t thread;
  _Atomic uint64_t handle; /* set once registered */
  _Atomic int reg_err;     /* stkr_thread_self's result, 1 until then */
  _Atomic uint32_t stop;   /* futex word: 1 ends the park */
  _Atomic uint64_t iters;  /* busy: iterations done */
  uint64_t sum;            /* busy: checksum of its iterations */
} sf_thread_arg;

/* One step of the busy loop's checksum (xorshift64*). */
static inline __attribute__((always_inline)) uint64_t sf_step(uint64_t x) {
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  return x * 0x2545F4914F6CDD1Dull;
}

/* ThreadSanitizer defers an asynchronous signal that arrives outside one
 * of its interceptors until the thread next enters one (then it runs the
 * handler with the context saved at arrival). Our parks make raw system
 * calls, so each round also calls an intercepted function: without it,
 * under TSan, no sample would ever be answered. Only under TSan: a sample
 * that lands inside clock_gettime (the vDSO) would have another leaf. */
#if defined(__SANITIZE_THREAD__)
#define SF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SF_TSAN 1
#endif
#endif
static inline __attribute__((always_inline)) void sf_tsan_point(void) {
#ifdef SF_TSAN
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
}

SF_NOINLINE static void sf_park_poll(sf_thread_arg *a) {
  while (!atomic_load(&a->stop)) {
    sf_tsan_point();
#if defined(__x86_64__)
    (void)sf_sys(SYS_poll, 0, 0, 20, 0); /* EINTR: go round */
#else
    struct timespec ts = {0, 20000000};
    (void)sf_sys(SYS_ppoll, 0, 0, (long)&ts, 0);
#endif
  }
}

SF_NOINLINE static void sf_park_pause(sf_thread_arg *a) {
  while (!atomic_load(&a->stop)) {
    sf_tsan_point();
#if defined(__x86_64__)
    (void)sf_sys(SYS_pause, 0, 0, 0, 0); /* any handler ends it */
#else
    (void)sf_sys(SYS_ppoll, 0, 0, 0, 0);
#endif
  }
}

/* What a contended mutex does: wait on a futex word (20 ms at a time: a
 * futex wait is restarted after a handler, so TSan would not see the
 * signal otherwise). */
SF_NOINLINE static void sf_park_futex(sf_thread_arg *a) {
  struct timespec ts = {0, 20000000};
  while (!atomic_load(&a->stop)) {
    sf_tsan_point();
    (void)sf_sys(SYS_futex, (long)&a->stop, FUTEX_WAIT_PRIVATE, 0, (long)&ts);
  }
}

/* Not instrumented by TSan: its memory accesses would be calls into TSan's
 * runtime (frameless), where most samples would land. */
#ifdef SF_TSAN
__attribute__((no_sanitize("thread")))
#endif
SF_NOINLINE static void sf_park_busy(sf_thread_arg *a) {
  uint64_t x = 88172645463325252ull, n = 0;
  while (!atomic_load_explicit(&a->stop, memory_order_relaxed)) {
    x = sf_step(x);
    n++;
    if ((n & 1023) == 0)
      atomic_store_explicit(&a->iters, n, memory_order_relaxed);
    if ((n & 65535) == 0)
      sf_tsan_point(); /* rare: a sample could land in it (see above) */
  }
  a->sum = x;
  atomic_store(&a->iters, n);
}

#define SF_LEVEL(kind, lvl, next)                                              \
  SF_NOINLINE static void sf_##kind##_##lvl(sf_thread_arg *a) {                \
    next(a);                                                                   \
    __asm__ volatile("" ::: "memory"); /* not a tail call */                  \
  }
#define SF_CHAIN(kind)                                                         \
  SF_LEVEL(kind, c, sf_park_##kind)                                            \
  SF_LEVEL(kind, b, sf_##kind##_c)                                             \
  SF_LEVEL(kind, a, sf_##kind##_b)
SF_CHAIN(poll)
SF_CHAIN(pause)
SF_CHAIN(futex)
SF_CHAIN(busy)

SF_NOINLINE static void *sf_thread(void *p) {
  sf_thread_arg *a = p;
  stkr_thread_handle h = 0;
  int err = stkr_thread_self(&h);

  atomic_store(&a->handle, h);
  atomic_store(&a->reg_err, err);
  if (err == 0) {
    switch (a->kind) {
    case SF_POLL: sf_poll_a(a); break;
    case SF_PAUSE: sf_pause_a(a); break;
    case SF_FUTEX: sf_futex_a(a); break;
    default: sf_busy_a(a); break;
    }
  }
  __asm__ volatile("" ::: "memory");
  return NULL;
}

/* Start a parked thread and wait until it registered. 0 or its error. */
static inline int sf_start(sf_thread_arg *a, int kind) {
  memset(a, 0, sizeof *a);
  a->kind = kind;
  atomic_store(&a->reg_err, 1);
  if (pthread_create(&a->thread, NULL, sf_thread, a) != 0)
    return -EAGAIN;
  while (atomic_load(&a->reg_err) == 1) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&a->reg_err);
}

/* End the park and join. A thread in pause() needs a signal to notice:
 * samples at `site` interrupt it until it is gone (one could land just
 * before its pause). */
static inline void sf_stop(sf_thread_arg *a, stkr_site *site) {
  atomic_store(&a->stop, 1);
  (void)sf_sys(SYS_futex, (long)&a->stop, FUTEX_WAKE_PRIVATE, 1, 0);
  for (;;) {
    struct timespec ts;
    if (a->kind == SF_PAUSE && atomic_load(&a->reg_err) == 0)
      (void)stkr_thread_sample(atomic_load(&a->handle), site, "stop", 4, 100);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    if (pthread_timedjoin_np(a->thread, NULL, &ts) == 0)
      return;
  }
}

/* Does the recorded chain `got` (function names of the first n
 * non-inlined frames, innermost first; images alongside) match `want`?
 * Under TSan one exception: the leaf may be a function of TSan's runtime
 * (an instrumentation call or an interceptor, built without frame
 * pointers) that the park called; its caller, the park, is then missing
 * from the walk: the frameless-callee limitation of every frame-pointer
 * walk, which only instrumented builds meet here. */
static inline bool sf_chain_equal(const char *const *got,
                                  const char *const *img,
                                  const char *const *want, size_t n) {
  size_t i;
  bool same = true;

  for (i = 0; i < n && same; i++)
    same = got[i] != NULL && strcmp(got[i], want[i]) == 0;
  if (same)
    return true;
#ifdef SF_TSAN
  if ((got[0] != NULL && (strncmp(got[0], "__tsan", 6) == 0 ||
                          strncmp(got[0], "__interceptor", 13) == 0 ||
                          strstr(got[0], "clock_gettime") != NULL)) ||
      (img[0] != NULL && strstr(img[0], "libtsan") != NULL)) {
    for (i = 1; i < n; i++)
      if (got[i] == NULL || strcmp(got[i], want[i]) != 0)
        return false;
    return true;
  }
#else
  (void)img;
#endif
  return false;
}

/* Does ev's stack begin with the n names of `want` (sf_chain_equal)? The
 * names found go into text, for the failure message. */
static inline bool sf_event_chain(const stkr_event_view *ev,
                                  const char *const *want, size_t n,
                                  char *text, size_t len) {
  const char *fn[8] = {0}, *img[8] = {0};
  size_t k, got = 0, used = 0;

  text[0] = '\0';
  for (k = 0; k < ev->n_frames && got < n && got < 8; k++) {
    const stkr_frame *f = &ev->frames[k];
    if (f->inlined)
      continue;
    fn[got] = f->function;
    img[got] = f->image;
    used += (size_t)snprintf(text + used, len - used, "%s%s", got ? " " : "",
                             f->function ? f->function : "?");
    if (used >= len)
      used = len - 1;
    got++;
  }
  return got == n && sf_chain_equal(fn, img, want, n);
}

/* Under TSan only: true when a sample was taken inside TSan's own runtime.
 * A signal that arrives inside an interceptor (sf_tsan_point's
 * clock_gettime) can be answered there; the runtime keeps no frame
 * pointers, so the walk ends within it (seen: "? __tsan::
 * ScopedInterceptor::~ScopedInterceptor()", about one sample in 300).
 * Always false without TSan, so the strict check stands there. */
static inline __attribute__((unused)) bool sf_caught_in_tsan(const stkr_event_view *ev) {
#ifdef SF_TSAN
  /* TSan's own frames, or those of its runtime's image: a sample can land
   * in glibc's clock_gettime called by the runtime's signal and clock
   * code (CI, session 44: "hang stack: __GI___clock_gettime"). */
  for (size_t k = 0; k < ev->n_frames && k < 4; k++) {
    const char *f = ev->frames[k].function, *img = ev->frames[k].image;
    if ((f != NULL && (strncmp(f, "__tsan", 6) == 0 ||
                       strncmp(f, "__sanitizer", 11) == 0)) ||
        (img != NULL && strstr(img, "libtsan") != NULL))
      return true;
  }
  return false;
#else
  (void)ev;
  return false;
#endif
}

/* ---- the recording both tests make --------------------------------------- */

/* CLOCK_MONOTONIC in ms. */
static inline __attribute__((unused)) uint64_t sf_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Start recording into a fresh directory $TEST_TMPDIR/<tag>-XXXXXX, its
 * path into dir (cap bytes); ring_bytes 0: the default.
 * @return stkr_init's result, or -errno. */
static inline __attribute__((unused)) int sf_start_rec(char *dir, size_t cap,
                                                       const char *tag,
                                                       size_t ring_bytes) {
  stkr_config cfg;

  if (tl_mkdtemp(dir, cap, tag) != 0)
    return -errno;
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = ring_bytes;
  return stkr_init(&cfg);
}

#endif
