/*
 * platform_linux.c: clock, thread identity and stack bounds on Linux
 * (x86_64, aarch64). Apple's versions live in platform_apple.c.
 */
#if !defined(__APPLE__)
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_fpwalk.h" /* STKR_ARCH_NAME */
#include "recorder/stkr_internal.h"

uint64_t stkr__clock_mono_ns(void) {
  struct timespec ts;
  /* vDSO: no kernel entry. CLOCK_MONOTONIC rather than _RAW because the
   * latter is not vDSO-accelerated on every kernel. */
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t stkr__clock_wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t stkr__os_tid(void) { return (uint64_t)syscall(SYS_gettid); }

int stkr__stack_bounds(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t attr;
  void *addr = NULL;
  size_t size = 0;
  int err;

  /* On the main thread glibc parses /proc/self/maps here (~50 us): this
   * runs once per thread, never per event. */
  err = pthread_getattr_np(pthread_self(), &attr);
  if (err != 0)
    return -err;
  err = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (err != 0)
    return -err;
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
  return 0;
}

void stkr__thread_name(char *buf, size_t len) {
  char name[17] = {0};

  /* PR_GET_NAME is a plain syscall on the calling thread: no /proc read. */
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0)
    name[0] = '\0';
  if (len == 0)
    return;
  strncpy(buf, name, len - 1);
  buf[len - 1] = '\0';
}

int stkr__membarrier_register(void) {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
    return -ENOSYS;
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
              0) != 0)
    return -errno;
  return 0;
}

int stkr__membarrier(void) {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0
             ? 0
             : -errno;
}

const char *stkr__arch_name(void) { return STKR_ARCH_NAME; }
#endif /* !__APPLE__ */
