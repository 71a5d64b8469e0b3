/* omitfp.h: for omitfp.c and omitfp_lib.c. */
#ifndef STKR_TEST_OMITFP_H
#define STKR_TEST_OMITFP_H

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

#endif
