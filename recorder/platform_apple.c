/*
 * platform_apple.c: clock, thread identity, stack bounds and pointer
 * authentication on iOS/macOS (arm64, arm64e, x86_64).
 *
 * NOT RUN ON A DEVICE: this machine is Linux; the file is compiled only for
 * __APPLE__ and syntax-checked on Linux against the declarations in
 * tests/apple_shim/ (see tests/BUILD, target apple_syntax).
 */
#if defined(__APPLE__)
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common/stkr_fpwalk.h" /* STKR_ARCH_NAME */
#include "recorder/stkr_internal.h"

uint64_t stkr__clock_mono_ns(void) {
  /* Commpage read, no kernel entry; does not advance while asleep, which
   * is what per-event durations want. */
  return clock_gettime_nsec_np(CLOCK_UPTIME_RAW);
}

uint64_t stkr__clock_wall_ns(void) {
  return clock_gettime_nsec_np(CLOCK_REALTIME);
}

uint64_t stkr__os_tid(void) {
  uint64_t tid = 0;
  pthread_threadid_np(pthread_self(), &tid);
  return tid;
}

int stkr__stack_bounds(uintptr_t *lo, uintptr_t *hi) {
  pthread_t self = pthread_self();
  /* As in Apple's thread_stack_pcs: stackaddr is the top (highest). */
  uintptr_t top = (uintptr_t)pthread_get_stackaddr_np(self);
  size_t size = pthread_get_stacksize_np(self);

  if (top == 0 || size == 0 || size > top)
    return -EINVAL;
  *lo = top - size;
  *hi = top;
  return 0;
}

void stkr__thread_name(char *buf, size_t len) {
  if (len == 0)
    return;
  if (pthread_getname_np(pthread_self(), buf, len) != 0)
    buf[0] = '\0';
  buf[len - 1] = '\0';
}

/* No membarrier on Darwin: producers use a real fence instead (a few ns
 * per event). FlushProcessWriteBuffers-style tricks exist but are not
 * worth their risk here. */
int stkr__membarrier_register(void) { return -ENOSYS; }
int stkr__membarrier(void) { return -ENOSYS; }

const char *stkr__arch_name(void) { return STKR_ARCH_NAME; }
#endif /* __APPLE__ */
