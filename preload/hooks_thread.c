/*
 * hooks_thread.c: pthread_setname_np and prctl(PR_SET_NAME), watched (not
 * recorded): a thread that renames itself tells the recorder
 * (stkr_thread_renamed), so that its later events carry the new name and
 * its earlier ones keep the old (QA: a thread named "alpha" that renamed
 * itself "beta" had all its events under "alpha"). A rename of another
 * thread (pthread_setname_np with another thread's handle) changes nothing
 * here: that thread keeps its old name in the recording until it renames
 * itself or exits (README, "Recording any Linux program").
 *
 * Not in TSan builds (the tests' only), as sigaction (hooks_signal.c): the
 * TSan runtime intercepts both itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/preload.h"

#if !defined(__SANITIZE_THREAD__)
static void renamed(void) {
  int saved = errno;

  stkr_thread_renamed();
  errno = saved;
}

int pthread_setname_np(pthread_t th, const char *name) {
  int (*fn)(pthread_t, const char *) = (int (*)(pthread_t, const char *))
      stkr__pl_real(STKR__PL_R_pthread_setname_np);
  int rc;

  if (fn == NULL)
    return ENOSYS;
  rc = fn(th, name);
  if (rc == 0 && pthread_equal(th, pthread_self()))
    renamed();
  return rc;
}

/* prctl takes up to four more arguments, as unsigned longs (glibc's reads
 * four whatever the option). */
int prctl(int option, ...) {
  int (*fn)(int, ...) = (int (*)(int, ...))stkr__pl_real(STKR__PL_R_prctl);
  unsigned long a[4];
  va_list ap;
  int rc;

  va_start(ap, option);
  for (int i = 0; i < 4; i++)
    a[i] = va_arg(ap, unsigned long);
  va_end(ap);
#if defined(__x86_64__) /* (elsewhere PR_SET_TSC fails: EINVAL) */
  if (option == PR_SET_TSC && a[0] == PR_TSC_SIGSEGV)
    stkr__pl_before_sandbox("prctl(PR_SET_TSC, PR_TSC_SIGSEGV)", true);
  else
#endif
  if (option == PR_SET_SECCOMP)
    stkr__pl_before_sandbox("prctl(PR_SET_SECCOMP)", a[0] == 1 /* strict */);
  rc = fn != NULL ? fn(option, a[0], a[1], a[2], a[3])
                  : (int)syscall(SYS_prctl, option, a[0], a[1], a[2], a[3]);
  if (rc == 0 && option == PR_SET_NAME)
    renamed();
  return rc;
}
#endif
