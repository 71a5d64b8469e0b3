/* Stand-in for the SDK's <mach/mach.h>: the Mach semaphore calls that
 * flush/wake_apple.c uses (mach/semaphore.h, mach/task.h, mach/clock_types.h,
 * mach/sync_policy.h, mach/kern_return.h). Signatures and values copied by
 * hand from the SDK headers; unverified on a device. */
#ifndef STKR_SHIM_MACH_MACH_H
#define STKR_SHIM_MACH_MACH_H
typedef int kern_return_t;
typedef unsigned int natural_t;
typedef natural_t mach_port_t;
typedef mach_port_t task_t;
typedef mach_port_t semaphore_t;
typedef int clock_res_t;
typedef struct mach_timespec {
  unsigned int tv_sec;
  clock_res_t tv_nsec;
} mach_timespec_t;
#define KERN_SUCCESS 0
#define KERN_ABORTED 14
#define KERN_OPERATION_TIMED_OUT 49
#define SYNC_POLICY_FIFO 0x0
extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_
kern_return_t semaphore_create(task_t task, semaphore_t *semaphore, int policy,
                               int value);
kern_return_t semaphore_destroy(task_t task, semaphore_t semaphore);
kern_return_t semaphore_signal(semaphore_t semaphore);
kern_return_t semaphore_timedwait(semaphore_t semaphore,
                                  mach_timespec_t wait_time);
#endif
