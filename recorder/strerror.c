/*
 * strerror.c: stkr_strerror, the recorder's texts for its error codes
 * (recorder/stackrec.h), apart from the hot path in event.c.
 */
#define _GNU_SOURCE /* strerror_r's GNU form */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "recorder/stackrec.h"

/* The recorder's own texts; anything else is strerror's. A table rather
 * than a switch: clang makes a switch of this size a jump table in the text
 * section on x86_64, whose trailing padding test-apple-build's re-assembly
 * comparison cannot tell from code once the table's size changes. */
static const struct {
  int err;
  const char *text;
} k_errors[] = {
    {0, "success"},
    /* Two callers each, as -EAGAIN below (QA, session 37: a second
     * watchdog start read "already recording"). */
    {-ENOTCONN, "not recording (stkr_init has not run, or stkr_shutdown "
                "has; stkr_watchdog_stop: no watchdog runs)"},
    {-EALREADY, "already recording (stkr_init; stkr_watchdog_start: a "
                "watchdog runs already)"},
    /* Two callers, two meanings (QA: a failed start under `ulimit -v`
     * was reported as a dropped event). */
    {-EAGAIN, "resource temporarily unavailable (stkr_event: the event was "
              "dropped, ring full or re-entered from a signal handler; "
              "stkr_init: no thread could be started, address space or "
              "thread limit)"},
    {-ENOSPC, "no space (site table full, disk full, or the process's cap on "
              "ring memory reached)"},
    {-EINVAL, "invalid argument or configuration value"},
    /* Two callers (QA, session 41: a directory mkdir could not make read
     * as the recorder's thread). */
    {-EPERM, "operation not permitted (stkr_event: not recorded, the "
             "recorder's own thread; stkr_init: the recording directory or "
             "a file in it, not allowed)"},
    {-E2BIG, "stkr_config sets a field this library version does not know "
             "(stkr_config.size)"},
    /* Sampling another thread (sample.c) */
    {-ESRCH, "no such thread (not registered with stkr_thread_self, or "
             "exited)"},
    /* Two callers each, two meanings (as -EAGAIN above). */
    {-ETIMEDOUT, "timed out (stkr_thread_sample: the thread did not answer "
                 "the sampling request; stkr_flush_timeout: the deadline "
                 "passed, the events are written later)"},
    {-EDEADLK, "would wait for itself (stkr_thread_sample: the thread blocks "
               "the sampling signal; stkr_flush: called on the recorder's "
               "own thread)"},
    {-EBUSY, "the sampling signal has another handler (see "
             "STACKREC_SAMPLE_SIGNAL)"},
};

const char *stkr_strerror(int err) {
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
    if (k_errors[i].err == err)
      return k_errors[i].text;
  /* Static text only: strerror's for a number it does not know is a
   * per-thread buffer that its next call frees (QA, session 33: the first
   * of two texts in one printf was freed memory), and -INT_MIN overflows. */
#if defined(__GLIBC__)
  /* GNU strerror_r: a known number's static text, else buf (filled with
   * "Unknown error N", cut to its size): then ours. */
  char buf[1];
  const char *text =
      err < 0 && err > -4096 ? strerror_r(-err, buf, sizeof buf) : buf;
  return text != buf ? text : "unknown error";
#else
  /* Elsewhere (Apple's libc) a known number's text is static. */
#if defined(ELAST)
  return err < 0 && err >= -ELAST ? strerror(-err) : "unknown error";
#else
  return err < 0 && err > -256 ? strerror(-err) : "unknown error";
#endif
#endif
}
