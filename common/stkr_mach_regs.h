/*
 * A suspended Mach thread's registers, for the two readers of another
 * thread's stack: recorder/sample_apple.c (a thread of this process) and
 * `stackrec snapshot`'s tools/stackrec/snapshot_apple.c (a thread of
 * another process). Apple-only; empty elsewhere.
 *
 * The registers come from thread_get_state()'s raw fields, with pointer
 * authentication stripped, never authenticated: the SDK's
 * arm_thread_state64_get_pc() would authenticate with this process's keys,
 * which did not sign another process's state. Stripping gives the same
 * address for a thread of this process, so one rule serves both.
 *
 * Depends on nothing but the platform's libc and Mach headers (common/).
 * Thread-safety: stateless.
 */
#ifndef STKR_MACH_REGS_H
#define STKR_MACH_REGS_H

#if defined(__APPLE__)
#include <errno.h>
#include <mach/mach.h>
#include <stdint.h>

#if defined(__arm64e__) && defined(__has_include)
#if __has_include(<ptrauth.h>)
#include <ptrauth.h>
/* xpaci for code pointers, xpacd for data pointers (they differ in where
 * the PAC field ends: the top byte is ignored for data, not for code). */
#define STKR__MACH_STRIP_CODE(p) \
  ((uint64_t)(uintptr_t)ptrauth_strip((void *)(uintptr_t)(p), ptrauth_key_asia))
#define STKR__MACH_STRIP_DATA(p) \
  ((uint64_t)(uintptr_t)ptrauth_strip((void *)(uintptr_t)(p), ptrauth_key_asda))
#endif
#endif
#ifndef STKR__MACH_STRIP_CODE
#define STKR__MACH_STRIP_CODE(p) ((uint64_t)(uintptr_t)(p))
#define STKR__MACH_STRIP_DATA(p) ((uint64_t)(uintptr_t)(p))
#endif

#if defined(__arm64__) || defined(__aarch64__)
typedef arm_thread_state64_t stkr__mach_state;
#define STKR__MACH_FLAVOR ARM_THREAD_STATE64
#define STKR__MACH_COUNT ARM_THREAD_STATE64_COUNT
/* What is left of a stripped pointer: the 47-bit user address space
 * (macOS; iOS uses less of it). */
#define STKR__MACH_USER_VA(p) ((p) & 0x00007FFFFFFFFFFFull)
#if defined(__arm64e__)
#define STKR__MACH_REG(st, r) ((uint64_t)(uintptr_t)(st).__opaque_##r)
#else
#define STKR__MACH_REG(st, r) ((uint64_t)(st).__##r)
#endif
#else
typedef x86_thread_state64_t stkr__mach_state;
#define STKR__MACH_FLAVOR x86_THREAD_STATE64
#define STKR__MACH_COUNT x86_THREAD_STATE64_COUNT
#endif

/* The interrupted pc, return address (lr; 0 on x86_64, where it is on the
 * stack), frame pointer and stack pointer of `th`, which the caller has
 * suspended.
 * @return 0, or -ESRCH when thread_get_state() fails (the thread ended). */
typedef struct stkr_mach_regs {
  uint64_t pc, lr, fp, sp;
} stkr_mach_regs;

static inline int stkr_mach_thread_regs(thread_act_t th, stkr_mach_regs *r) {
  stkr__mach_state st;
  mach_msg_type_number_t n = STKR__MACH_COUNT;

  if (thread_get_state(th, STKR__MACH_FLAVOR, (thread_state_t)&st, &n) !=
      KERN_SUCCESS)
    return -ESRCH;
#if defined(__arm64__) || defined(__aarch64__)
  r->pc = STKR__MACH_USER_VA(STKR__MACH_STRIP_CODE(STKR__MACH_REG(st, pc)));
  r->lr = STKR__MACH_USER_VA(STKR__MACH_STRIP_CODE(STKR__MACH_REG(st, lr)));
  r->fp = STKR__MACH_USER_VA(STKR__MACH_STRIP_DATA(STKR__MACH_REG(st, fp)));
  r->sp = STKR__MACH_USER_VA(STKR__MACH_STRIP_DATA(STKR__MACH_REG(st, sp)));
#else
  r->pc = st.__rip;
  r->lr = 0;
  r->fp = st.__rbp;
  r->sp = st.__rsp;
#endif
  return 0;
}

#endif /* __APPLE__ */
#endif /* STKR_MACH_REGS_H */
