/*
 * chain.c: see chain.h. Built -O2 -fomit-frame-pointer: rbp is an ordinary
 * callee-saved register here, as in Debian's binaries. Each call is
 * followed by an empty asm with a memory clobber so it is never a tail call
 * (a folded frame would still unwind, but the chain's depth would lie).
 */
#include "tests/unwind_fixtures/chain.h"

#include <alloca.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define KEEP() __asm__ volatile("" ::: "memory")
#define UWC_SA_RESTORER 0x04000000 /* asm-generic/signal-defs.h; glibc's headers hide it */

typedef struct uwc_ctx {
  uwc_leaf leaf;
  void *arg;
  int depth;
  unsigned shape;
  int fired;
} uwc_ctx;

static long descend(uwc_ctx *c, int d);

static uwc_ctx *g_sig_ctx; /* a signal handler has no user argument */

static void on_signal(int sig) {
  (void)sig;
  g_sig_ctx->leaf(g_sig_ctx->arg);
  KEEP();
}

__attribute__((noinline)) static long at_bottom(uwc_ctx *c) {
  if (c->shape & 8) { /* the leaf runs in a handler: through __restore_rt */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
#if defined(__aarch64__)
    /* Return through uwc_sigtramp, a copy of the kernel's vdso
     * trampoline: qemu-user 7.2 has no vdso, and its own page is in no
     * image (see chain.h). */
    sa.sa_flags = UWC_SA_RESTORER;
    sa.sa_restorer = uwc_sigtramp;
#endif
    g_sig_ctx = c;
    sigaction(SIGUSR2, &sa, &old);
    raise(SIGUSR2);
    sigaction(SIGUSR2, &old, NULL);
  } else {
    c->leaf(c->arg);
  }
  KEEP();
  return c->depth;
}

static uwc_ctx *g_sort_ctx; /* qsort has no user argument */

__attribute__((noinline)) static int cmp_cb(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  if (!g_sort_ctx->fired) { /* once, from inside libc's sort */
    g_sort_ctx->fired = 1;
    at_bottom(g_sort_ctx);
    KEEP();
  }
  return (x > y) - (x < y);
}

__attribute__((noinline)) static long via_qsort(uwc_ctx *c) {
  int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
  g_sort_ctx = c;
  c->fired = 0;
  qsort(v, 8, sizeof v[0], cmp_cb);
  KEEP();
  return v[0] + v[7];
}

/* A variable-size frame: gcc addresses it from rbp, so the CFA rule is
 * rbp-based even with -fomit-frame-pointer. */
__attribute__((noinline)) static long with_alloca(uwc_ctx *c, int n) {
  volatile char *p = alloca((size_t)n + 16);
  long r;
  memset((char *)p, n, (size_t)n + 16);
  r = (c->shape & 4) ? via_qsort(c) : at_bottom(c);
  KEEP();
  return r + p[n / 2];
}

/* Keeps many values live across the call: every callee-saved register
 * pushed, so the CFA offset changes at each push. */
__attribute__((noinline)) static long many_saved(uwc_ctx *c, long a, long b, long d,
                                                 long e, long f) {
  long g = a * 3 + b, h = b * 5 + d, i = d * 7 + e, j = e * 11 + f, k = f * 13 + a;
  long r;
  KEEP();
  r = (c->shape & 1) ? with_alloca(c, (int)(a & 63) + 24)
                     : (c->shape & 4) ? via_qsort(c) : at_bottom(c);
  KEEP();
  return r + g * h + i * j + k;
}

__attribute__((noinline)) static long descend(uwc_ctx *c, int d) {
  long r;
  if (d > 0) {
    r = descend(c, d - 1);
  } else if (c->shape & 2) {
    r = many_saved(c, d + 1, d + 2, d + 3, d + 4, d + 5);
  } else if (c->shape & 1) {
    r = with_alloca(c, 40);
  } else if (c->shape & 4) {
    r = via_qsort(c);
  } else {
    r = at_bottom(c);
  }
  KEEP();
  return r + 1;
}

long uwc_run(int depth, unsigned shape, uwc_leaf leaf, void *arg) {
  uwc_ctx c = {leaf, arg, depth, shape, 0};
  long r = descend(&c, depth);
  KEEP();
  return r;
}

/* UWC_NO_CAPTURE: the frame-pointer copy of this file (tools/bench) reuses
 * the first copy's uwc_capture. */
#if defined(UWC_NO_CAPTURE)
#elif defined(__x86_64__)
__asm__(".text\n.globl uwc_capture\n.type uwc_capture,@function\nuwc_capture:\n"
        ".cfi_startproc\n"
        "  movq (%rsp), %rax\n  movq %rax, 0(%rdi)\n"
        "  leaq 8(%rsp), %rax\n  movq %rax, 8(%rdi)\n"
        "  movq %rbp, 16(%rdi)\n  movq $0, 24(%rdi)\n  ret\n"
        ".cfi_endproc\n.size uwc_capture, .-uwc_capture\n");
#elif defined(__aarch64__)
/* The kernel's __kernel_rt_sigreturn (arch/arm64/kernel/vdso/sigreturn.S)
 * as it is since Linux 5.10: a nop (for unwinders that look up the return
 * address - 1), then the rt_sigreturn call, and no CFI (commented out
 * there: libgcc, libunwind and gdb recognise the two instructions). */
__asm__(".text\n.p2align 3\n  nop\n.globl uwc_sigtramp\n.type uwc_sigtramp,%function\n"
        "uwc_sigtramp:\n  mov x8, #139\n  svc #0\n.size uwc_sigtramp, .-uwc_sigtramp\n");
__asm__(".text\n.globl uwc_capture\n.type uwc_capture,%function\nuwc_capture:\n"
        ".cfi_startproc\n"
        "  str x30, [x0]\n  mov x1, sp\n  str x1, [x0, #8]\n"
        "  str x29, [x0, #16]\n  str x30, [x0, #24]\n  ret\n"
        ".cfi_endproc\n.size uwc_capture, .-uwc_capture\n");
#endif
