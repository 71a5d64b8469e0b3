/* Stand-in for the SDK's <mach/mach.h>: the task, thread and VM calls of
 * tools/stackrec/snapshot_apple.c and recorder/sample_apple.c (mach/task.h, mach/thread_act.h,
 * mach/mach_vm.h, mach/thread_info.h, mach/arm/_structs.h,
 * mach/i386/_structs.h, mach/vm_region.h). Types, flavors and counts
 * copied by hand from the SDK headers (counts are sizeof / sizeof(natural_t)
 * as the SDK computes them); unverified against a real SDK or device. */
#ifndef STKR_SHIM_MACH_MACH_H
#define STKR_SHIM_MACH_MACH_H
#include <stdint.h>
#include <sys/types.h>

typedef int kern_return_t;
typedef unsigned int natural_t;
typedef int integer_t;
typedef natural_t mach_port_t;
typedef mach_port_t task_t;
typedef mach_port_t thread_act_t;
typedef thread_act_t *thread_act_array_t;
typedef natural_t mach_msg_type_number_t;
typedef natural_t *thread_state_t;
typedef integer_t *thread_info_t;
typedef int *vm_region_info_t;
typedef int thread_state_flavor_t;
typedef natural_t thread_flavor_t;
typedef int vm_region_flavor_t;
typedef uint64_t mach_vm_address_t;
typedef uint64_t mach_vm_size_t;
typedef uintptr_t vm_address_t;
typedef uintptr_t vm_size_t;
typedef int vm_prot_t;
typedef unsigned int vm_inherit_t;
typedef unsigned int vm_behavior_t;
typedef unsigned long long memory_object_offset_t;
typedef int boolean_t;

#define KERN_SUCCESS 0
#define MACH_PORT_NULL ((mach_port_t)0)

extern mach_port_t mach_task_self_;
#define mach_task_self() mach_task_self_

/* mach/arm/_structs.h: __darwin_arm_thread_state64. arm64e keeps pc, lr,
 * sp and fp signed ("opaque") under __opaque_*. */
typedef struct {
  uint64_t __x[29];
#if defined(__arm64e__)
  void *__opaque_fp;
  void *__opaque_lr;
  void *__opaque_sp;
  void *__opaque_pc;
  uint32_t __cpsr;
  uint32_t __opaque_flags;
#else
  uint64_t __fp;
  uint64_t __lr;
  uint64_t __sp;
  uint64_t __pc;
  uint32_t __cpsr;
  uint32_t __pad;
#endif
} arm_thread_state64_t;
#define ARM_THREAD_STATE64 6
/* mach/arm/thread_status.h's accessors (on arm64e the real ones
 * authenticate the signed fields; recorder/sample_apple.c strips them). */
#if defined(__arm64e__)
#define arm_thread_state64_get_pc(ts) ((uintptr_t)(ts).__opaque_pc)
#define arm_thread_state64_get_fp(ts) ((uintptr_t)(ts).__opaque_fp)
#else
#define arm_thread_state64_get_pc(ts) ((uintptr_t)(ts).__pc)
#define arm_thread_state64_get_fp(ts) ((uintptr_t)(ts).__fp)
#endif
#define ARM_THREAD_STATE64_COUNT \
  ((mach_msg_type_number_t)(sizeof(arm_thread_state64_t) / sizeof(uint32_t)))

/* mach/i386/_structs.h: __darwin_x86_thread_state64. */
typedef struct {
  uint64_t __rax, __rbx, __rcx, __rdx, __rdi, __rsi, __rbp, __rsp;
  uint64_t __r8, __r9, __r10, __r11, __r12, __r13, __r14, __r15;
  uint64_t __rip, __rflags, __cs, __fs, __gs;
} x86_thread_state64_t;
#define x86_THREAD_STATE64 4
#define x86_THREAD_STATE64_COUNT \
  ((mach_msg_type_number_t)(sizeof(x86_thread_state64_t) / sizeof(int)))

/* mach/thread_info.h */
typedef struct thread_identifier_info {
  uint64_t thread_id;
  uint64_t thread_handle;
  uint64_t dispatch_qaddr;
} thread_identifier_info_data_t;
#define THREAD_IDENTIFIER_INFO 4
#define THREAD_IDENTIFIER_INFO_COUNT \
  ((mach_msg_type_number_t)(sizeof(thread_identifier_info_data_t) / sizeof(natural_t)))
#define MAXTHREADNAMESIZE 64
typedef struct thread_extended_info {
  uint64_t pth_user_time;
  uint64_t pth_system_time;
  int32_t pth_cpu_usage;
  int32_t pth_policy;
  int32_t pth_run_state;
  int32_t pth_flags;
  int32_t pth_sleep_time;
  int32_t pth_curpri;
  int32_t pth_priority;
  int32_t pth_maxpriority;
  char pth_name[MAXTHREADNAMESIZE];
} thread_extended_info_data_t;
#define THREAD_EXTENDED_INFO 5
#define THREAD_EXTENDED_INFO_COUNT \
  ((mach_msg_type_number_t)(sizeof(thread_extended_info_data_t) / sizeof(natural_t)))

/* mach/vm_region.h (packed(4) in the SDK) */
#pragma pack(push, 4)
typedef struct vm_region_basic_info_64 {
  vm_prot_t protection;
  vm_prot_t max_protection;
  vm_inherit_t inheritance;
  boolean_t shared;
  boolean_t reserved;
  memory_object_offset_t offset;
  vm_behavior_t behavior;
  unsigned short user_wired_count;
} vm_region_basic_info_data_64_t;
#pragma pack(pop)
#define VM_REGION_BASIC_INFO_64 9
#define VM_REGION_BASIC_INFO_COUNT_64 \
  ((mach_msg_type_number_t)(sizeof(vm_region_basic_info_data_64_t) / sizeof(int)))

kern_return_t task_for_pid(mach_port_t target_tport, int pid, mach_port_t *t);
kern_return_t task_threads(task_t target_task, thread_act_array_t *act_list,
                           mach_msg_type_number_t *act_listCnt);
kern_return_t thread_suspend(thread_act_t target_act);
kern_return_t thread_resume(thread_act_t target_act);
kern_return_t thread_get_state(thread_act_t target_act,
                               thread_state_flavor_t flavor,
                               thread_state_t old_state,
                               mach_msg_type_number_t *old_stateCnt);
kern_return_t thread_info(thread_act_t target_act, thread_flavor_t flavor,
                          thread_info_t thread_info_out,
                          mach_msg_type_number_t *thread_info_outCnt);
kern_return_t mach_vm_region(task_t target_task, mach_vm_address_t *address,
                             mach_vm_size_t *size, vm_region_flavor_t flavor,
                             vm_region_info_t info,
                             mach_msg_type_number_t *infoCnt,
                             mach_port_t *object_name);
kern_return_t mach_vm_read_overwrite(task_t target_task,
                                     mach_vm_address_t address,
                                     mach_vm_size_t size,
                                     mach_vm_address_t data,
                                     mach_vm_size_t *outsize);
kern_return_t mach_port_deallocate(task_t task, mach_port_t name);
typedef mach_port_t ipc_space_t;
mach_port_t mach_thread_self(void);
kern_return_t vm_deallocate(task_t target_task, vm_address_t address,
                            vm_size_t size);
#endif
