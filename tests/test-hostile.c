/*
 * test-hostile.c: stkr_event() from places where the stack cannot be
 * trusted, on real stacks (test-walk.c covers synthetic chains): code built
 * without frame pointers (a frame-pointer register holding data), signal
 * handlers on an alternate stack, threads with the smallest stacks libc
 * allows, a thread stack fenced by PROT_NONE guard pages, 100 000 frames of
 * recursion, and saved return addresses carrying pointer-authentication
 * bits. The rule: the event is recorded (or dropped and counted), the walk
 * ends early, nothing faults, and max_depth is a hard cap.
 *
 * Like test-event.c, no flush worker runs: the test reads the rings itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stkr_internal.h"
#include "tests/hostile_fixtures/hostile.h"
#include "tests/ring_harness.h"
#include "tests/testlib.h"

#define MAX_DEPTH 64

STKR_SITE_DEFINE(g_site, "hostile.test");

static int setup(void **state) {
  (void)state;
  return rh_start(1 << 20, MAX_DEPTH, 16);
}

/* A record copied out of a ring. */
typedef struct rec_copy {
  stkr__record hdr;
  uint64_t pcs[STKR_MAX_DEPTH];
} rec_copy;

/* The stacks each ring's known records refer to, as the worker keeps
 * them (by slot, in ring order): a known record gets its slot's PCs. */
#define MIRRORS 16
static struct {
  const stkr__ring_ctl *c;
  rec_copy slot[STKR__KNOWN_SLOTS];
} g_mirror[MIRRORS];
static pthread_mutex_t g_mirror_mu = PTHREAD_MUTEX_INITIALIZER;

static rec_copy *mirror_of(const stkr__ring *r, unsigned slot) {
  int i;
  pthread_mutex_lock(&g_mirror_mu);
  for (i = 0; i < MIRRORS && g_mirror[i].c != r->c && g_mirror[i].c; i++) {
  }
  assert_true(i < MIRRORS);
  g_mirror[i].c = r->c;
  pthread_mutex_unlock(&g_mirror_mu);
  return &g_mirror[i].slot[slot];
}

/* Drain ring r; copy its last record into *out (a known record with its
 * slot's PCs). @return records drained. */
static unsigned drain_last(stkr__ring *r, rec_copy *out) {
  const stkr__record *rec;
  unsigned n = 0;

  while ((rec = stkr__ring_peek(r)) != NULL) {
    rec_copy *m = mirror_of(r, rec->slot);
    assert_true(rec->depth <= STKR_MAX_DEPTH);
    if (stkr__record_known(rec)) {
      assert_int_equal(m->hdr.site_id, rec->site_id);
      *out = *m;
      out->hdr.ts_ns = rec->ts_ns;
      out->hdr.payload_len = rec->payload_len;
    } else {
      assert_int_equal(stkr__record_as_full(rec)->key[0],
                       stkr__hash_pcs(stkr__record_pcs(rec), rec->depth));
      out->hdr = *rec;
      memcpy(out->pcs, stkr__record_pcs(rec), rec->depth * sizeof(uint64_t));
      *m = *out;
    }
    stkr__ring_release(r, rec);
    n++;
  }
  return n;
}

static int in_code(uint64_t pc, const void *fn) {
  return pc > (uint64_t)(uintptr_t)fn &&
         pc < (uint64_t)(uintptr_t)fn + HOSTILE_CODE_SPAN;
}

/* ---- code without frame pointers ---------------------------------------- */

/* Call hostile_nofp_leaf with the frame-pointer register set to fp; check
 * the event was recorded with the leaf as its first PC. @return depth. */
static unsigned event_with_fp(uintptr_t fp, rec_copy *rc_out) {
  int rc = hostile_call_with_fp(fp, hostile_nofp_leaf, NULL);

  assert_int_equal(rc, 0);
  assert_int_equal(drain_last(rh_ring(), rc_out), 1);
  assert_true(rc_out->hdr.depth >= 1 && rc_out->hdr.depth <= MAX_DEPTH);
  assert_true(in_code(rc_out->pcs[0], (const void *)hostile_nofp_leaf));
  return rc_out->hdr.depth;
}

/* The frame-pointer register holds whatever code without frame pointers
 * left in it when that code calls stkr_event(). The walk takes the first
 * PC (stkr_event's own return address) and then follows the hostile value
 * only if it is a frame inside the stack, aligned and above: otherwise it
 * stops right there. */
static void test_nofp_code_with_hostile_frame_pointers(void **state) {
  /* A fake chain in this frame (above the trampoline's): two records, the
   * second linking back down, which must end the walk. */
  uint64_t fake[16] __attribute__((aligned(16)));
  const uintptr_t f = (uintptr_t)fake;
  uintptr_t lo, hi, below;
  void *heap = malloc(64);
  rec_copy r;
  unsigned i;
  (void)state;

  assert_int_equal(stkr_thread_attach(), 0);
  lo = stkr__tls->stack_lo;
  hi = stkr__tls->stack_hi;
  below = (uintptr_t)__builtin_frame_address(0) - 4096;
  assert_true(lo < f && f < hi);
  {
    const uintptr_t stops[] = {
        0, 1, 8, 16, f + 4 /* misaligned */, (uintptr_t)&g_site /* data */,
        (uintptr_t)heap, hi, hi - 8 /* straddles the top */, lo,
        below & ~(uintptr_t)15 /* in the stack, below our frames */,
        (uintptr_t)0x8000000000000000ull, (uintptr_t)0xFFFF800000000000ull,
        UINTPTR_MAX & ~(uintptr_t)15, f | ((uintptr_t)1 << 60) /* async */};

    for (i = 0; i < sizeof stops / sizeof stops[0]; i++)
      if (event_with_fp(stops[i], &r) != 1)
        fail_msg("fp %#lx: walk went on (%u PCs)", (unsigned long)stops[i],
                 (unsigned)r.hdr.depth);
  }
  /* A valid fake chain is followed, exactly, and its loop ends it. */
  memset(fake, 0, sizeof fake);
  fake[0] = (uint64_t)(f + 64);
  fake[1] = 0x1111;
  fake[8] = (uint64_t)f; /* back down to the first record */
  fake[9] = 0x2222;
  __asm__ volatile("" ::: "memory");
  assert_int_equal(event_with_fp(f, &r), 3);
  assert_int_equal(r.pcs[1], 0x1111);
  assert_int_equal(r.pcs[2], 0x2222);
  free(heap);
}

/* Under ASan, a walk that follows garbage into the live stack reads words
 * ASan poisons (redzones between locals): in bounds for the recorder, so
 * recorder/walk.c is built no_sanitize_address and these cases run under
 * ASan too. */

/* Random values, and random addresses in the live stack above us. */
static void test_nofp_random_frame_pointers(void **state) {
  uint64_t top[4];
  const uintptr_t f = (uintptr_t)top;
  uintptr_t hi;
  rec_copy r;
  unsigned i;
  (void)state;

  assert_int_equal(stkr_thread_attach(), 0);
  hi = stkr__tls->stack_hi;
  srand(4242);
  for (i = 0; i < 3000; i++) {
    uintptr_t v = i % 2 ? ((uintptr_t)rand() << 33) ^ ((uintptr_t)rand() << 7) ^
                              (uintptr_t)rand()
                        : f + (uintptr_t)rand() % (hi - f);
    (void)event_with_fp(v, &r);
  }
}

/* Real code built with -fomit-frame-pointer that keeps its own data in
 * rbp / x29 across the call (see nofp.c). */
static void test_nofp_register_pressure(void **state) {
  rec_copy r;
  unsigned i, longest = 0;
  (void)state;

  for (i = 0; i < 2000; i++) {
    assert_int_equal(hostile_nofp_pressure((uint64_t)i * 0x9E3779B97F4A7C15ull), 0);
    assert_int_equal(drain_last(rh_ring(), &r), 1);
    assert_true(in_code(r.pcs[0], (const void *)hostile_nofp_pressure));
    if (r.hdr.depth > longest)
      longest = r.hdr.depth;
  }
  assert_true(longest <= MAX_DEPTH);
}

/* ---- signal handlers on an alternate stack ------------------------------- */

STKR_SITE_DEFINE(g_sig_site, "hostile.altstack");
/* TSan defers asynchronous signals and runs the handler later on the
 * thread's own stack: such events use this site instead. */
STKR_SITE_DEFINE(g_sig_site_main, "hostile.signal.mainstack");
static uint8_t *g_alt;
static size_t g_alt_size;
static volatile sig_atomic_t g_sig_calls, g_sig_on_alt, g_sig_rc_bad;

static void on_signal(int sig) {
  int saved = errno, rc;
  uint8_t here;
  (void)sig;

  g_sig_calls++;
  if (&here >= g_alt && &here < g_alt + g_alt_size) {
    g_sig_on_alt++;
    rc = stkr_event(&g_sig_site, "alt", 3);
  } else {
    rc = stkr_event(&g_sig_site_main, "alt", 3);
  }
  if (rc != 0 && rc != -EAGAIN)
    g_sig_rc_bad++;
  errno = saved;
}

/* On the alternate stack: walked within its bounds (the handler's frames;
 * the guard pages around it fault on any read past them). */
static uint32_t g_storm_sig_id;
static void check_alt_record(const stkr__record *rec) {
  /* A stack sent before comes as its hash alone (STKR__REC_KNOWN). */
  if (rec->site_id == g_storm_sig_id && !(rec->flags & STKR__REC_KNOWN))
    assert_true(rec->depth >= 1);
}

/* The alternate stack lies outside the thread's stack bounds: events from
 * it are walked within the alternate stack's own (sigaltstack), never past
 * them: it has guard pages on both sides (before session 23 they were
 * recorded with no PCs). A storm of them while the thread records too:
 * every attempt accounted for. */
static void test_sigaltstack_handler_events(void **state) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  struct sigaction sa;
  struct itimerval it = {{0, 50}, {0, 50}};
  stack_t ss, old_ss;
  stkr__counts c0, c1;
  uint32_t sig_id = stkr__site_id(&g_sig_site);
  const stkr__record *rec;
  uint8_t *map;
  (void)state;

  /* Guard pages on both sides of the alternate stack. */
  g_alt_size = 16 * page;
  map = mmap(NULL, g_alt_size + 2 * page, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(map != MAP_FAILED);
  g_alt = map + page;
  assert_int_equal(mprotect(g_alt, g_alt_size, PROT_READ | PROT_WRITE), 0);
  ss.ss_sp = g_alt;
  ss.ss_size = g_alt_size;
  ss.ss_flags = 0;
  assert_int_equal(sigaltstack(&ss, &old_ss), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK | SA_RESTART;
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
  assert_int_equal(stkr_thread_attach(), 0);

  /* One, synchronously. */
  g_sig_calls = g_sig_on_alt = 0;
  assert_int_equal(raise(SIGUSR1), 0);
  assert_int_equal(g_sig_calls, 1);
  assert_int_equal(g_sig_on_alt, 1);
  rec = stkr__ring_peek(rh_ring());
  assert_non_null(rec);
  assert_int_equal(rec->site_id, sig_id);
  assert_true(rec->depth >= 1);
  assert_int_equal(rec->payload_len, 3);
  stkr__ring_release(rh_ring(), rec);

  /* A storm, interrupting the thread's own events. */
  g_sig_on_alt = 0;
  g_storm_sig_id = sig_id;
  storm_run(&g_site, NULL, 0, 200000, &it, &g_sig_calls, check_alt_record,
            &c0, &c1);
  assert_int_equal(g_sig_rc_bad, 0);
  assert_true(g_sig_calls > 0);
  print_message("altstack storm: %d handler events (%d on the alternate "
                "stack), %llu dropped re-entrant\n",
                (int)g_sig_calls, (int)g_sig_on_alt,
                (unsigned long long)(c1.dropped_reentrant - c0.dropped_reentrant));
  assert_int_equal(sigaltstack(&old_ss, NULL), 0);
  munmap(map, g_alt_size + 2 * page);
}

/* Whatever happened above: no timer, no handler left for later tests. */
static int teardown_signals(void **state) {
  struct itimerval off;

  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_IGN); /* one may still be pending */
  signal(SIGUSR1, SIG_DFL);
  return rh_stop(state);
}

/* ---- threads with small and fenced stacks ------------------------------- */

typedef struct thr_run {
  unsigned nest;     /* frames of our own between the thread and the event */
  unsigned events;
  int (*body)(struct thr_run *);
  stkr__thread *state; /* the thread's recorder state, for the test */
  int bad;
  uintptr_t lo, hi;  /* the stack bounds the recorder read */
  bool random;       /* guarded stack: also random frame pointers */
} thr_run;

static __attribute__((noinline)) int nest_then(thr_run *t, unsigned n) {
  int rc;

  if (n == 0)
    return t->body(t);
  rc = nest_then(t, n - 1);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return rc;
}

static void *thr_main(void *arg) {
  thr_run *t = arg;

  t->bad = nest_then(t, t->nest);
  return NULL;
}

/* Run t on a new thread with the given attributes; then check its ring:
 * t->events records, each with at least t->nest PCs. */
static void run_thread(thr_run *t, pthread_attr_t *attr) {
  pthread_t th;
  const stkr__record *rec;
  unsigned n = 0;

  assert_int_equal(pthread_create(&th, attr, thr_main, t), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(t->bad, 0);
  assert_non_null(t->state);
  while ((rec = stkr__ring_peek(&t->state->ring)) != NULL) {
    assert_true(stkr__record_known(rec) ||
                (rec->depth >= t->nest && rec->depth <= MAX_DEPTH));
    stkr__ring_release(&t->state->ring, rec);
    n++;
  }
  assert_int_equal(n, t->events);
  stkr__thread_reap(t->state, NULL);
}

static int body_events(thr_run *t) {
  unsigned i;

  for (i = 0; i < t->events; i++)
    if (stkr_event(&g_site, "tiny", 4) != 0)
      return 1;
  t->state = stkr__tls;
  t->lo = t->state->stack_lo;
  t->hi = t->state->stack_hi;
  return 0;
}

/* The smallest stack libc allows: the first event attaches (mmap, stack
 * bounds) and walks on it without overflowing. */
static void test_tiny_thread_stack(void **state) {
  pthread_attr_t attr;
  size_t min = (size_t)sysconf(_SC_THREAD_STACK_MIN);
  thr_run t = {5, 100, body_events, NULL, 0, 0, 0, false};
  (void)state;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* Sanitizer runtimes need their own room on every thread stack. */
  if (min < 65536)
    min = 65536;
#endif
  if (min < (size_t)PTHREAD_STACK_MIN)
    min = (size_t)PTHREAD_STACK_MIN;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, min), 0);
  run_thread(&t, &attr);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  assert_true(t.hi - t.lo <= min + 65536); /* it really was that small */
#endif
  pthread_attr_destroy(&attr);
  print_message("tiny stack: %zu bytes\n", min);
}

/* A thread stack of our own, with PROT_NONE guard pages right below and
 * above it: any read outside the bounds the recorder validated would fault.
 * From that thread: hostile frame pointers aimed at and around the guards,
 * and random ones anywhere in [lo - 16 KiB, hi + 16 KiB). */
static size_t g_page;

static int body_guarded(thr_run *t) {
  uintptr_t lo, hi;
  rec_copy r;
  unsigned i;

  if (stkr_thread_attach() != 0)
    return 1;
  t->state = stkr__tls;
  lo = t->lo = t->state->stack_lo;
  hi = t->hi = t->state->stack_hi;
  {
    const uintptr_t edge[] = {hi, hi - 8, hi + 8, hi + g_page, lo - 16,
                              lo - g_page, lo, lo + 8};
    for (i = 0; i < sizeof edge / sizeof edge[0]; i++) {
      if (hostile_call_with_fp(edge[i], hostile_nofp_leaf, NULL) != 0)
        return 2;
      if (drain_last(&t->state->ring, &r) != 1 || r.hdr.depth != 1)
        return 3;
    }
  }
  if (!t->random)
    return 0;
  srand(777);
  for (i = 0; i < 20000; i++) {
    uintptr_t span = hi - lo + 32768;
    uintptr_t v = lo - 16384 + ((uintptr_t)rand() * 2654435761u) % span;

    if (i % 4 != 0)
      v &= ~(uintptr_t)7; /* mostly aligned, so chains get followed */
    if (hostile_call_with_fp(v, hostile_nofp_leaf, NULL) != 0)
      return 4;
    if (drain_last(&t->state->ring, &r) != 1 || r.hdr.depth > MAX_DEPTH)
      return 5;
  }
  return 0; /* every record was drained above: t->events stays 0 */
}

static void guarded(bool random) {
#if defined(__SANITIZE_THREAD__)
  const size_t size = 4u << 20; /* TSan keeps ~1 MiB of each thread stack */
#else
  const size_t size = 256 << 10;
#endif
  pthread_attr_t attr;
  thr_run t = {3, 0, body_guarded, NULL, 0, 0, 0, random};
  uint8_t *map;

  g_page = (size_t)sysconf(_SC_PAGESIZE);
  map = mmap(NULL, size + 2 * g_page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
  assert_true(map != MAP_FAILED);
  assert_int_equal(mprotect(map + g_page, size, PROT_READ | PROT_WRITE), 0);
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstack(&attr, map + g_page, size), 0);
  run_thread(&t, &attr);
  /* The bounds the recorder used are exactly the fenced region. */
  assert_int_equal(t.lo, (uintptr_t)(map + g_page));
  assert_int_equal(t.hi, (uintptr_t)(map + g_page + size));
  pthread_attr_destroy(&attr);
  munmap(map, size + 2 * g_page);
}

/* flag: guarded's `random`. */
static const tl_flag_case g_guards[] = {
    {"test_guarded_thread_stack_edges", false},
    {"test_guarded_thread_stack_random", true},
};

/* setup (rh_start) leaves the state alone: it is the row. */
static void test_guarded(void **state) {
  guarded(tl_flag(state));
}

/* ---- very deep recursion ------------------------------------------------ */

#if defined(__SANITIZE_THREAD__)
/* TSan's shadow call stack holds 64 Ki frames per thread: deeper kills
 * the process inside TSan, whatever the code under test does. */
#define DEEP 50000u
#else
#define DEEP 100000u
#endif
static unsigned g_deep_max;

static int body_deep(thr_run *t) {
  rec_copy r;

  (void)t;
  if (stkr_event(&g_site, NULL, 0) != 0)
    return 1;
  t->state = stkr__tls;
  if (drain_last(&t->state->ring, &r) != 1)
    return 2;
  /* Capped at max_depth, and marked truncated. */
  if (r.hdr.depth != g_deep_max ||
      !(r.hdr.flags & STKR__REC_STACK_TRUNCATED))
    return 3;
  return 0;
}

static void deep(unsigned max_depth) {
  stkr__rconf rc = {.ring_bytes = 1 << 20, .max_depth = max_depth,
                    .payload_max = 16};
  pthread_attr_t attr;
  thr_run t = {DEEP, 0, body_deep, NULL, 0, 0, 0, false};

  stkr__recorder_stop();
  assert_int_equal(stkr__recorder_start(&rc, NULL, NULL, NULL), 0);
  g_deep_max = max_depth;
  assert_int_equal(pthread_attr_init(&attr), 0);
  /* 100 000 frames of a few dozen bytes (a few hundred under ASan). */
  assert_int_equal(pthread_attr_setstacksize(&attr, 256u << 20), 0);
  run_thread(&t, &attr);
  pthread_attr_destroy(&attr);
}

static void test_deep_recursion_capped(void **state) {
  (void)state;
  deep(MAX_DEPTH);
  deep(STKR_MAX_DEPTH);
}

/* ---- pointer-authentication bits ---------------------------------------- */

/* Return addresses signed by arm64e / Linux pac-ret code carry a PAC in
 * their top bits: stripped on arm64 before anything sees them. Checked on
 * a chain in this thread's own stack, through the real walk. */
static void test_pac_bits_stripped(void **state) {
  uint64_t chain[8] __attribute__((aligned(16)));
  const uint64_t pac[3] = {0x0012000000401000ull, 0x7F80000000402000ull,
                           0x8000000000403000ull};
  uint64_t pcs[8], h;
  uintptr_t lo, hi;
  bool trunc;
  unsigned n, i;
  (void)state;

  assert_int_equal(stkr__stack_bounds(&lo, &hi), 0);
  chain[0] = (uint64_t)(uintptr_t)&chain[2];
  chain[1] = pac[0];
  chain[2] = (uint64_t)(uintptr_t)&chain[4];
  chain[3] = pac[1];
  chain[4] = 0;
  chain[5] = pac[2];
  __asm__ volatile("" ::: "memory");
  n = stkr__walk((uintptr_t)chain, lo, hi, 0, pcs, 8, &h, &trunc);
  assert_int_equal(n, 3);
  for (i = 0; i < 3; i++) {
    assert_int_equal(pcs[i], stkr__strip_pac(pac[i]));
#if defined(__aarch64__)
    assert_int_equal(pcs[i], pac[i] & 0x0000FFFFFFFFFFFFull);
#else
    assert_int_equal(pcs[i], pac[i]); /* x86_64: nothing to strip */
#endif
  }
}

int main(void) {
  return TL_RUN_GROUP(
      "hostile", NULL, NULL,
      TL_CASES(setup, rh_stop, test_nofp_code_with_hostile_frame_pointers,
               test_nofp_random_frame_pointers, test_nofp_register_pressure),
      TL_CASES(setup, teardown_signals, test_sigaltstack_handler_events),
      TL_CASES(setup, rh_stop, test_tiny_thread_stack),
      TL_TABLE(setup, rh_stop, test_guarded, g_guards),
      TL_CASES(setup, rh_stop, test_deep_recursion_capped,
               test_pac_bits_stripped));
}
