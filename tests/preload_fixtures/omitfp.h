/* omitfp.h: for omitfp.c and omitfp_lib.c. */
#ifndef STKR_TEST_OMITFP_H
#define STKR_TEST_OMITFP_H

#include <unistd.h>

/* Zero the frame-pointer register for the rest of the function (the
 * compiler saves and restores it around, as a clobbered callee-saved
 * register): a frame-pointer walk that reaches this frame ends. */
#if defined(__x86_64__)
#define OMITFP_CLEAR_FP() __asm__ volatile("xorl %%ebp, %%ebp" ::: "rbp")
#elif defined(__aarch64__)
#define OMITFP_CLEAR_FP() __asm__ volatile("mov x29, xzr" ::: "x29")
#else
#define OMITFP_CLEAR_FP() ((void)0)
#endif

/* The links of a chain, the same in the program and in the library: the
 * leaf calls the hooked gethostname; a link with clear_fp zeroes the frame
 * pointer before it calls on. Each adds to `sink` after its call, so that
 * no call is a tail call. */
#define OMITFP_LEAF(name, sink)                                                \
  __attribute__((noinline)) int name(void) {                                   \
    char host[256];                                                            \
    int rc = gethostname(host, sizeof host);                                   \
    sink += host[0];                                                           \
    return rc;                                                                 \
  }
#define OMITFP_LINK(name, callee, clear_fp, sink)                              \
  __attribute__((noinline)) int name(void) {                                   \
    if (clear_fp)                                                              \
      OMITFP_CLEAR_FP();                                                       \
    int rc = callee();                                                         \
    sink += rc;                                                                \
    return rc + 1;                                                             \
  }

#endif
