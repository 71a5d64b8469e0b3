/*
 * async_cost.c: what a Swift async call chain adds to one stkr_event, at a
 * total of 32 recorded PCs, side by side in one run:
 *
 *   plain 32          32 frame-pointer frames, no Swift runtime (the
 *                     recorder's usual case)
 *   plain 32, task    the same stack with a Swift task "running" (the task
 *                     probe is set): a Swift app's synchronous code
 *   async 0           a Swift async frame ends the physical part, but its
 *                     context pointer is null: detection only, 32 PCs
 *   async 4 / 16      28 / 16 physical PCs, then 4 / 16 resume functions
 *                     from async contexts on the heap
 *
 * The async frame is real: a small assembly trampoline opens the same
 * extended frame record clang and swiftc emit for an async function
 * ([context, fp | 1 << 60, lr]: bts $60, %rbp; push %rbp; push context),
 * and calls on. The contexts are separate 64-byte heap blocks laid out like
 * the runtime's AsyncContext {Parent, ResumeParent}. The task probe is a
 * TLS read in this executable; the real swift_task_getCurrent on Linux
 * goes through __tls_get_addr, a few ns more per event that has an async
 * frame.
 *
 * Method as in event_cost.c: each round runs one batch of 1000 calls of
 * every contender, interleaved with the starting one rotating; medians over
 * the rounds, and the median of per-round ratios. This thread drains its
 * own ring between batches (outside timing), so nothing is dropped.
 *
 * Usage: async_cost [rounds]   (default 1001). x86_64 and aarch64.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recorder/stkr_internal.h"
#include "tools/bench/bench_util.h"

#define TOTAL 32      /* recorded PCs per event, every contender */
#define ITERS 1000    /* calls per batch */
#define WARM_ROUNDS 3

/* void async_frame(void *ctx, void (*fn)(void *), void *arg): fn(arg) below
 * an extended frame record holding ctx. */
void stkr_bench_async_frame(void *ctx, void (*fn)(void *), void *arg);
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl stkr_bench_async_frame\n"
        ".type stkr_bench_async_frame,@function\n"
        "stkr_bench_async_frame:\n"
        "  btsq $60, %rbp\n"
        "  pushq %rbp\n"
        "  pushq %rdi\n"            /* the context, at fp - 8 */
        "  leaq 8(%rsp), %rbp\n"
        "  subq $8, %rsp\n"         /* 16-byte alignment at the call */
        "  movq %rdx, %rdi\n"
        "  callq *%rsi\n"
        "  addq $16, %rsp\n"
        "  popq %rbp\n"
        "  btrq $60, %rbp\n"
        "  ret\n"
        ".size stkr_bench_async_frame, .-stkr_bench_async_frame\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl stkr_bench_async_frame\n"
        ".type stkr_bench_async_frame,%function\n"
        "stkr_bench_async_frame:\n"
        "  orr x29, x29, #0x1000000000000000\n"
        "  sub sp, sp, #32\n"
        "  stp x29, x30, [sp, #16]\n"
        "  add x29, sp, #16\n"
        "  str x0, [sp, #8]\n"      /* the context, at fp - 8 */
        "  mov x0, x2\n"
        "  blr x1\n"
        "  ldp x29, x30, [sp, #16]\n"
        "  and x29, x29, #0xefffffffffffffff\n"
        "  add sp, sp, #32\n"
        "  ret\n"
        ".size stkr_bench_async_frame, .-stkr_bench_async_frame\n");
#else
#error "async_cost: x86_64 or aarch64 only"
#endif

typedef struct actx {
  struct actx *parent;
  uint64_t resume;
} actx;

enum { C_PLAIN, C_PLAIN_TASK, C_ASYNC0, C_ASYNC4, C_ASYNC16, NC };
static const char *const cname[NC] = {"plain 32", "plain 32, task running",
                                      "async 0 (null context)", "async 4",
                                      "async 16"};
static const unsigned casync[NC] = {0, 0, 0, 4, 16};

STKR_SITE_DEFINE(g_site, "bench.async_cost");

static __thread int g_task_word;
static void *task_running(void) { return &g_task_word; }

static actx *g_chain[NC];       /* innermost context per contender */
static unsigned g_phys[NC];     /* descend() levels, calibrated */
static double *g_ns[NC];
static unsigned g_round;
static int g_cur;
static volatile uint64_t g_sink;

static void die(const char *what) {
  fprintf(stderr, "async_cost: %s\n", what);
  exit(1);
}

static unsigned drain(void) {
  stkr__ring *r = &stkr__tls->ring;
  const stkr__record *rec;
  unsigned depth = 0;

  while ((rec = stkr__ring_peek(r)) != NULL) {
    depth = rec->depth;
    stkr__ring_release(r, rec);
  }
  return depth;
}

/* The timed batch, at the top of the contender's stack. */
static __attribute__((noinline)) void leaf(void) {
  uint64_t t0 = bench_now_ns(), t1;
  unsigned i;

  for (i = 0; i < ITERS; i++)
    if (stkr_event(&g_site, NULL, 0) != 0)
      die("event dropped");
  t1 = bench_now_ns();
  if (g_ns[g_cur] != NULL)
    g_ns[g_cur][g_round] = (double)(t1 - t0) / ITERS;
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void descend(unsigned n) {
  if (n == 0)
    leaf();
  else
    descend(n - 1);
  __asm__ volatile("" ::: "memory"); /* never a tail call */
}

static void below_async(void *arg) {
  descend((unsigned)(uintptr_t)arg);
  __asm__ volatile("" ::: "memory");
}

/* One batch of contender c (its stack built first, outside timing). */
static __attribute__((noinline)) void run(int c) {
  stkr__walk_set_task_fn(c == C_PLAIN ? NULL : task_running);
  g_cur = c;
  if (c == C_PLAIN || c == C_PLAIN_TASK)
    descend(g_phys[c]);
  else
    stkr_bench_async_frame(c == C_ASYNC0 ? NULL : g_chain[c], below_async,
                           (void *)(uintptr_t)g_phys[c]);
  __asm__ volatile("" ::: "memory");
}

static void make_chain(int c, unsigned k) {
  actx *prev = NULL;
  unsigned i;

  /* Outermost first, so that each context's parent exists; separate
   * blocks, as the task allocator hands them out. */
  for (i = k; i-- > 0;) {
    actx *a = aligned_alloc(64, 64);
    if (a == NULL)
      die("out of memory");
    memset(a, 0, 64);
    a->parent = prev;
    a->resume = (uint64_t)(uintptr_t)&descend + 4 * i; /* text addresses */
    prev = a;
  }
  g_chain[c] = prev;
}

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1001;
  stkr__rconf rconf = {.ring_bytes = 4u << 20, .max_depth = 128,
                       .skip_frames = 0, .payload_max = 0};
  unsigned depth[NC], r, k;
  int c;

  if (rounds < 5)
    rounds = 5;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (stkr__recorder_start(&rconf, NULL, NULL, NULL) != 0)
    die("stkr__recorder_start failed");
  if (stkr_site_register(&g_site) != 0 || stkr_thread_attach() != 0)
    die("site register / thread attach failed");
  for (c = 0; c < NC; c++)
    make_chain(c, casync[c]);

  /* Calibrate the physical depth so that every event records TOTAL PCs
   * (depth is linear in descend() levels). */
  for (c = 0; c < NC; c++) {
    unsigned d0, d1;
    g_phys[c] = 0;
    run(c);
    d0 = drain();
    g_phys[c] = 1;
    run(c);
    d1 = drain();
    if (d1 != d0 + 1 || d0 > TOTAL)
      die("cannot calibrate the stack depth");
    g_phys[c] = TOTAL - d0;
    run(c);
    depth[c] = drain();
  }
  for (c = 0; c < NC; c++)
    if ((g_ns[c] = calloc(rounds, sizeof(double))) == NULL)
      die("out of memory");
  for (k = 0; k < WARM_ROUNDS + rounds; k++) {
    g_round = k < WARM_ROUNDS ? 0 : k - WARM_ROUNDS;
    for (c = 0; c < NC; c++) {
      run((int)((c + g_round) % NC));
      (void)drain();
    }
  }
  printf("async_cost: stkr_event at %u recorded PCs, ns per call, medians "
         "of %u interleaved rounds of %u calls\n\n", TOTAL, rounds, ITERS);
  printf("%-26s %5s %9s %9s %9s\n", "contender", "PCs", "median",
         "x plain", "paired");
  double plain = bench_median(g_ns[C_PLAIN], rounds);
  for (c = 0; c < NC; c++) {
    double m = bench_median(g_ns[c], rounds), *pr = malloc(rounds * sizeof *pr);
    if (pr == NULL)
      die("out of memory");
    for (r = 0; r < rounds; r++)
      pr[r] = g_ns[c][r] / g_ns[C_PLAIN][r];
    printf("%-26s %5u %9.1f %9.2f %9.2f\n", cname[c], depth[c], m, m / plain,
           bench_median(pr, rounds));
    free(pr);
  }
  {
    double worst = bench_median(g_ns[C_ASYNC16], rounds) / plain;
    printf("\nasync 16 vs plain at the same depth: %.2fx (goal <= 1.30x): %s\n",
           worst, worst <= 1.30 ? "PASS" : "MISS");
  }
  return 0;
}
