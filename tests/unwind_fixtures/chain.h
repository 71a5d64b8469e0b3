/*
 * chain.h: a call chain built -O2 -fomit-frame-pointer (tests/BUILD,
 * tools/bench/BUILD), for the unwind oracle test and benchmark: functions
 * of several frame shapes between the caller and a leaf callback, so a
 * table walk must get every CFA rule right, and a frame-pointer walk
 * cannot cross them.
 */
#ifndef STKR_TESTS_UNWIND_CHAIN_H
#define STKR_TESTS_UNWIND_CHAIN_H

#include <stdint.h>

typedef void (*uwc_leaf)(void *arg);

/* Call leaf(arg) under `depth` recursive frames (>= 0). shape picks the
 * frames between (bit 0: an alloca'd frame with an rbp-based CFA; bit 1: a
 * frame that saves every callee-saved register; bit 2: through libc's
 * qsort, the leaf running inside its comparison callback; bit 3: the leaf
 * runs in a SIGUSR2 handler, raised at the bottom: through the signal
 * trampoline, glibc's __restore_rt on x86_64, uwc_sigtramp on aarch64).
 * @return a value computed along the way (keeps the frames from folding). */
long uwc_run(int depth, unsigned shape, uwc_leaf leaf, void *arg);

/* The registers of the caller at the instruction after the call (pc =
 * that return address, sp = its stack pointer, fp = rbp/x29, lr = x30).
 * out: 4 words {pc, sp, fp, lr}. Written in assembly: touches no stack. */
void uwc_capture(uintptr_t out[4]);

#if defined(__aarch64__)
/* aarch64: a copy of the kernel's vdso signal trampoline (no CFI), which
 * shape bit 3's handler returns through (SA_RESTORER): qemu-user 7.2 has
 * no vdso, and its own trampoline page is in no image. A walk finds it
 * only once it is added to the set (stkr__unwind_set_add_sigtramp), as the
 * builder finds the vdso's. */
void uwc_sigtramp(void);
#endif

#endif
