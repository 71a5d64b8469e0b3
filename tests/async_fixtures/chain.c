/*
 * chain.c: Swift async frames made by the compiler, without Swift. Built by
 * tests/test-async-walk.c at run time (clang: gcc has no swiftasynccall)
 *
 *   clang-14 -O1 -fPIC -shared -fno-omit-frame-pointer
 *            -fno-optimize-sibling-calls -fswift-async-fp=always
 *
 * Every swiftasynccall function then opens with the extended frame record a
 * Swift async function has: [context, saved fp | 1 << 60, return address]
 * (x86_64: bts $60, %rbp; push %rbp; push %r14; aarch64: orr x29, x29,
 * #1<<60; stp x29, x30; str x22 below). The contexts are the test's own,
 * laid out like the runtime's AsyncContext {Parent, ResumeParent}.
 *
 * fx_run(ctx, probe, arg) calls fx_async_outer(ctx[2]) -> fx_async_mid
 * (ctx[1]) -> fx_async_inner(ctx[0]) -> fx_sync (plain C) -> probe(arg):
 * probe sees, innermost first, its return into fx_sync, fx_sync's return
 * into fx_async_inner (kept in fx_ret_into_inner), then the walk must leave
 * the physical stack at fx_async_inner's tagged record and follow ctx[0]'s
 * chain of resume functions. */
#include <stddef.h>

typedef struct fx_ctx {
  struct fx_ctx *parent;
  void (*resume)(void);
} fx_ctx;

typedef void (*fx_probe_fn)(void *arg);

#define FX_ASYNC __attribute__((swiftasynccall, noinline))
#define FX_CTX __attribute__((swift_async_context))

void *volatile fx_ret_into_inner;
volatile int fx_sink;
/* clang emits the extended record only in a function that uses its
 * context: fx_async_inner stores it here. */
fx_ctx *volatile fx_inner_ctx;

/* Stand-ins for resume partial functions: distinct bodies, so that no
 * folding makes two of them one address. */
__attribute__((noinline)) void fx_resume_1(void) { fx_sink = 1; }
__attribute__((noinline)) void fx_resume_2(void) { fx_sink = 2; }
__attribute__((noinline)) void fx_resume_3(void) { fx_sink = 3; }
__attribute__((noinline)) void fx_resume_4(void) { fx_sink = 4; }

__attribute__((noinline)) static void fx_sync(fx_probe_fn probe, void *arg) {
  fx_ret_into_inner = __builtin_return_address(0);
  probe(arg);
  __asm__ volatile("" ::: "memory"); /* not a tail call: keep our frame */
}

/* The probe travels in globals: a swiftasynccall function has no other
 * parameters to spare here. */
static fx_probe_fn g_probe;
static void *g_arg;

FX_ASYNC static void fx_async_inner(FX_CTX fx_ctx *ctx) {
  fx_inner_ctx = ctx; /* a context the function uses: see above */
  fx_sync(g_probe, g_arg);
  __asm__ volatile("" ::: "memory");
}

FX_ASYNC static void fx_async_mid(FX_CTX fx_ctx *ctx) {
  fx_async_inner(ctx - 1);
  __asm__ volatile("" ::: "memory");
}

FX_ASYNC static void fx_async_outer(FX_CTX fx_ctx *ctx) {
  fx_async_mid(ctx - 1);
  __asm__ volatile("" ::: "memory");
}

/* ctx: an array of at least 3 contexts; fx_async_outer gets &ctx[2],
 * fx_async_mid &ctx[1], fx_async_inner &ctx[0]. */
void fx_run(fx_ctx *ctx, fx_probe_fn probe, void *arg) {
  g_probe = probe;
  g_arg = arg;
  fx_async_outer(&ctx[2]);
  __asm__ volatile("" ::: "memory");
}
