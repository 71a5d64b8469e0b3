/*
 * hostile.h: fixtures for tests/test-hostile.c: code that calls
 * stkr_event() with a frame-pointer register it does not control.
 *
 * nofp.c is compiled with -fomit-frame-pointer -O2 (tests/BUILD), as
 * system libraries and third-party code often are: there the frame-pointer
 * register is a general register holding data. fpcall.c holds a tiny
 * assembly trampoline (x86_64, aarch64) that makes that precise.
 */
#ifndef STKR_TEST_HOSTILE_H
#define STKR_TEST_HOSTILE_H

#include <stdint.h>

/* Call fn(arg) with the frame-pointer register (rbp / x29) set to `fp`;
 * restores it afterwards. @return fn's return value. */
int hostile_call_with_fp(uintptr_t fp, int (*fn)(void *), void *arg);

/* Built without frame pointers: record one event at site
 * "hostile.nofp" and return stkr_event()'s result. */
int hostile_nofp_leaf(void *arg);

/* Built without frame pointers, with more values live across the
 * stkr_event() call than there are callee-saved registers, so the
 * compiler puts data derived from `seed` in rbp / x29. */
int hostile_nofp_pressure(uint64_t seed);

/* Bounds of hostile_nofp_leaf / hostile_nofp_pressure's code, roughly:
 * the function's address and 512 bytes after it. */
#define HOSTILE_CODE_SPAN 512

#endif
