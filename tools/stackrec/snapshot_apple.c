/*
 * snapshot_apple.c: the Apple backend of `stackrec snapshot PID`
 * (snapshot_backend.h). COMPILED FOR APPLE TARGETS ONLY, NEVER RUN: it is
 * built for arm64/arm64e iOS and x86_64 macOS against the Darwin stand-in
 * headers of tests/apple_shim/sdk by tests/test-apple-build.sh; no Mac or
 * device has run it.
 *
 * Per thread, as on Linux one at a time so each is stopped only while it
 * is read:
 *   task_for_pid(PID) once, task_threads() for the thread list,
 *   thread_info(THREAD_IDENTIFIER_INFO / THREAD_EXTENDED_INFO): id, name,
 *   thread_suspend()                          -- the stop begins
 *   thread_get_state(ARM_THREAD_STATE64 / x86_THREAD_STATE64): pc, sp, fp,
 *     lr (arm64e: signed with the target's keys; stripped here, never
 *     authenticated: this process does not share them)
 *   mach_vm_region() at sp, then mach_vm_read_overwrite() of [sp, end of
 *     the region) into our buffer, at most STKR_SNAP_STACK_MAX
 *   thread_resume()                           -- the stop ends
 * and the walk runs afterwards over the copy, as on Linux. Nothing here
 * can wait for a lock the suspended thread holds: it is another process
 * (the in-process sampler of issue 12 has that rule; this one does not
 * need it).
 *
 * Entitlement: task_for_pid of another process needs root, or the
 * com.apple.security.cs.debugger entitlement (macOS) and a target that
 * allows it (not hardened, or signed with get-task-allow); on iOS only
 * development builds (get-task-allow) can be inspected, from a debugger.
 * Without it task_for_pid fails (KERN_FAILURE): "permission denied".
 *
 * Unlike ptrace, a Mach suspension is not undone when the suspender dies:
 * a stackrec killed (SIGKILL) between thread_suspend and thread_resume
 * would leave that one thread suspended. The catchable signals are held
 * for the few microseconds of each stop (as on Linux), which leaves only
 * SIGKILL; task_suspend2's token (released when its holder dies) exists
 * for whole tasks, not threads.
 *
 * stackshot: Apple's own tools (spindump, tailspin, the hang reporter)
 * take every thread's stack inside the kernel at one instant, without
 * suspending anything from user space, with stack_snapshot_with_config
 * (private SPI, root only; libktrace/kperf wrap it). Where it is
 * available that is the better way; this backend uses only public calls.
 */
#if defined(__APPLE__)
#include <errno.h>
#include <mach/mach.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/stkr_fpwalk.h" /* STKR_ARCH_NAME */
#include "common/stkr_mach_regs.h"
#include "tools/stackrec/snapshot_backend.h"

const char *stkr_snap_arch(void) { return STKR_ARCH_NAME; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int get_regs(thread_act_t th, stkr_snap_regs *r) {
  stkr_mach_regs m;
  int err = stkr_mach_thread_regs(th, &m);
  if (err != 0)
    return err;
  r->pc = m.pc;
  r->lr = m.lr;
  r->fp = m.fp;
  r->sp = m.sp;
  return 0;
}

/* Copy [sp, end of its region) (at most STKR_SNAP_STACK_MAX) into buf. */
static uint64_t read_stack(task_t task, uint64_t sp, uint8_t *buf) {
  mach_vm_address_t addr = sp;
  mach_vm_size_t size = 0, got = 0;
  vm_region_basic_info_data_64_t info;
  mach_msg_type_number_t n = VM_REGION_BASIC_INFO_COUNT_64;
  mach_port_t obj = MACH_PORT_NULL;
  uint64_t len = STKR_SNAP_STACK_MAX;

  if (mach_vm_region(task, &addr, &size, VM_REGION_BASIC_INFO_64,
                     (vm_region_info_t)&info, &n, &obj) == KERN_SUCCESS &&
      addr <= sp && sp - addr < size && addr + size - sp < len)
    len = addr + size - sp;
  if (mach_vm_read_overwrite(task, sp, len, (mach_vm_address_t)(uintptr_t)buf,
                             &got) != KERN_SUCCESS)
    return 0;
  return got;
}

int stkr_snap_exec_id(pid_t pid, uint8_t *buf, size_t cap) {
  (void)pid;
  (void)buf;
  (void)cap;
  return 0; /* not checked on Apple platforms */
}

static void thread_meta(thread_act_t th, stkr_snap_thread *t) {
  thread_identifier_info_data_t id;
  thread_extended_info_data_t ext;
  mach_msg_type_number_t n = THREAD_IDENTIFIER_INFO_COUNT;
  if (thread_info(th, THREAD_IDENTIFIER_INFO, (thread_info_t)&id, &n) ==
      KERN_SUCCESS)
    t->tid = (pid_t)id.thread_id; /* a 64-bit id: shown cut to pid_t */
  n = THREAD_EXTENDED_INFO_COUNT;
  if (thread_info(th, THREAD_EXTENDED_INFO, (thread_info_t)&ext, &n) ==
      KERN_SUCCESS)
    snprintf(t->name, sizeof t->name, "%s", ext.pth_name);
}

static void hold_signals(sigset_t *old) {
  static const int sigs[] = {STKR_SNAP_HELD_SIGNALS};
  sigset_t hold;
  sigemptyset(&hold);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&hold, sigs[i]);
  sigprocmask(SIG_BLOCK, &hold, old);
}

int stkr_snap_take(pid_t pid, const stkr_snap_map *maps, size_t n_maps,
                   stkr_snap *out, char *err, size_t err_cap) {
  task_t task = MACH_PORT_NULL;
  thread_act_array_t list = NULL;
  mach_msg_type_number_t n = 0;
  uint8_t *scratch = NULL;
  kern_return_t kr;
  int rc = 0;
  (void)maps; /* the kernel says where each stack's region ends */
  (void)n_maps;

  memset(out, 0, sizeof *out);
  out->pid = pid;
  out->mono_ns = now_ns();
  kr = task_for_pid(mach_task_self(), pid, &task);
  if (kr != KERN_SUCCESS) {
    snprintf(err, err_cap, "process %d: %s", (int)pid,
             kill(pid, 0) != 0 && errno == ESRCH
                 ? "no such process"
                 : "permission denied: task_for_pid needs root or the "
                   "com.apple.security.cs.debugger entitlement, and a "
                   "target that allows it (get-task-allow)");
    return kill(pid, 0) != 0 && errno == ESRCH ? -ESRCH : -EPERM;
  }
  if (task_threads(task, &list, &n) != KERN_SUCCESS) {
    mach_port_deallocate(mach_task_self(), task);
    snprintf(err, err_cap, "process %d exited during the snapshot", (int)pid);
    return -ESRCH;
  }
  out->threads = calloc(n ? n : 1, sizeof *out->threads);
  scratch = malloc(STKR_SNAP_STACK_MAX);
  if (!out->threads || !scratch) {
    snprintf(err, err_cap, "process %d: out of memory", (int)pid);
    rc = -ENOMEM;
  }
  for (mach_msg_type_number_t i = 0; i < n && rc == 0; i++) {
    stkr_snap_thread *t = &out->threads[out->n_threads];
    sigset_t old;
    uint64_t t0, t1;
    int e;

    thread_meta(list[i], t);
    hold_signals(&old);
    t0 = now_ns();
    if (thread_suspend(list[i]) != KERN_SUCCESS) {
      sigprocmask(SIG_SETMASK, &old, NULL);
      out->vanished++; /* it ended since task_threads */
      continue;
    }
    t1 = now_ns();
    e = get_regs(list[i], &t->regs);
    if (e == 0) t->stack_len = read_stack(task, t->regs.sp, scratch);
    /* A full window: the region may go on past it (snapshot_backend.h). */
    t->stack_cut = t->stack_len == STKR_SNAP_STACK_MAX;
    thread_resume(list[i]);
    t->stop_ns = now_ns() - t0;
    t->held_ns = now_ns() - t1;
    sigprocmask(SIG_SETMASK, &old, NULL);
    t->ts_mono_ns = t0;
    if (e != 0) {
      out->vanished++;
      continue;
    }
    if (t->stack_len && !(t->stack = malloc(t->stack_len))) {
      snprintf(err, err_cap, "process %d: out of memory", (int)pid);
      rc = -ENOMEM;
      break;
    }
    if (t->stack) memcpy(t->stack, scratch, t->stack_len);
    if (t->stop_ns > out->max_stop_ns) out->max_stop_ns = t->stop_ns;
    out->n_threads++;
  }
  for (mach_msg_type_number_t i = 0; i < n; i++)
    mach_port_deallocate(mach_task_self(), list[i]);
  if (list)
    vm_deallocate(mach_task_self(), (vm_address_t)(uintptr_t)list,
                  n * sizeof list[0]);
  mach_port_deallocate(mach_task_self(), task);
  free(scratch);
  out->wall_time_ns = now_ns() - out->mono_ns;
  if (rc == 0 && out->n_threads == 0) {
    snprintf(err, err_cap, "process %d exited during the snapshot", (int)pid);
    rc = -ESRCH;
  }
  return rc;
}
#endif /* __APPLE__ */
