/* Darwin stand-in (tests/apple_shim/sdk/README): the thread calls of
 * <mach/mach.h> that recorder/sample_apple.c uses (mach/thread_act.h,
 * mach/thread_status.h, mach/arm/thread_status.h,
 * mach/i386/thread_status.h). Flavors and counts as in the SDK headers;
 * the arm64 accessors stand in for <mach/arm/thread_status.h>'s
 * arm_thread_state64_get_pc/_fp (on arm64e the real ones authenticate the
 * signed fields of an opaque struct). Unverified against a real SDK. */
#ifndef STKR_SHIM_SDK_MACH_MACH_H
#define STKR_SHIM_SDK_MACH_MACH_H
#include <stdint.h>
typedef int kern_return_t;
typedef unsigned int natural_t;
typedef natural_t mach_port_t;
typedef mach_port_t thread_act_t;
typedef mach_port_t ipc_space_t;
typedef natural_t mach_msg_type_number_t;
typedef natural_t *thread_state_t;
typedef int thread_state_flavor_t;
#define KERN_SUCCESS 0
extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_
mach_port_t mach_thread_self(void);
kern_return_t mach_port_deallocate(ipc_space_t task, mach_port_t name);
kern_return_t thread_suspend(thread_act_t target_act);
kern_return_t thread_resume(thread_act_t target_act);
kern_return_t thread_get_state(thread_act_t target_act,
                               thread_state_flavor_t flavor,
                               thread_state_t old_state,
                               mach_msg_type_number_t *old_state_count);
#if defined(__arm64__) || defined(__aarch64__)
#define ARM_THREAD_STATE64 6
typedef struct {
  uint64_t __x[29];
  uint64_t __fp, __lr, __sp, __pc;
  uint32_t __cpsr, __pad;
} arm_thread_state64_t;
#define ARM_THREAD_STATE64_COUNT \
  ((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(natural_t)))
#define arm_thread_state64_get_pc(ts) ((uintptr_t)(ts).__pc)
#define arm_thread_state64_get_fp(ts) ((uintptr_t)(ts).__fp)
#elif defined(__x86_64__)
#define x86_THREAD_STATE64 4
typedef struct {
  uint64_t __rax, __rbx, __rcx, __rdx, __rdi, __rsi, __rbp, __rsp;
  uint64_t __r8, __r9, __r10, __r11, __r12, __r13, __r14, __r15;
  uint64_t __rip, __rflags, __cs, __fs, __gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64_COUNT \
  ((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(int)))
#endif
#endif
