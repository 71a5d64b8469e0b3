/*
 * log.c: the recorder's notes ("stackrec: ..."), rate-limited per kind, to
 * record's notice socket or to the program's stderr while it is still the
 * file it was at stkr_init (flush_internal.h). Split from worker.c, which
 * calls stkr__log_target_take from stkr_init.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_io.h"
#include "common/stkr_notify.h"
#include "flush/flush_internal.h"

#define STKR__LOG_INTERVAL_S 60

/* Rate-limit state per kind. Plain atomics: racing loggers may both print
 * or both suppress once, which is harmless. Relaxed: no data is published
 * through them. */
static _Atomic uint64_t g_log_last[STKR__LOG_KINDS];
static _Atomic uint64_t g_log_suppressed[STKR__LOG_KINDS];

/* Where notes go, taken by stkr_init (stkr__log_target_take) before any thread
 * of this recording can log, and read by every logger after: record's
 * notice socket when STACKREC_NOTIFY names one (the note then goes into
 * record's summary, not the program's stderr), else descriptor 2 while it
 * is still the file it was at stkr_init. A program that closes 2 and opens
 * a file of its own there (daemons, `os.close(2)`) must never find our
 * notes in it: a note we cannot place is dropped, which loses no event. */
static char g_log_notify[108];
static struct {
  bool taken; /* by a stkr_init: before any, notes go to fd 2 as it is */
  bool ok;    /* fd 2 was open then */
  dev_t dev;
  ino_t ino;
} g_log_fd2;

void stkr__log_limits_reset(void) {
  /* A new recording, or a forked child (its own notes), starts with no note
   * held back: a child inherited its parent's times, and its first notes
   * went unsaid for a minute (QA, session 22: of a tree on a full disk only
   * the parent's notes reached record). */
  for (int k = 0; k < STKR__LOG_KINDS; k++) {
    atomic_store_explicit(&g_log_last[k], 0, memory_order_relaxed);
    atomic_store_explicit(&g_log_suppressed[k], 0, memory_order_relaxed);
  }
}

void stkr__log_target_take(void) {
  const char *v = stkr_config_env("STACKREC_NOTIFY");
  struct stat st;

  snprintf(g_log_notify, sizeof g_log_notify, "%s", v ? v : "");
  stkr__log_limits_reset();
  g_log_fd2.taken = true;
  g_log_fd2.ok = fstat(STDERR_FILENO, &st) == 0;
  g_log_fd2.dev = g_log_fd2.ok ? st.st_dev : 0;
  g_log_fd2.ino = g_log_fd2.ok ? st.st_ino : 0;
}

/* May a note go to fd 2? Before any stkr_init (a configuration checked on
 * its own), yes: there is no program's file to tell it from. */
static bool log_fd2_unchanged(void) {
  struct stat st;

  if (!g_log_fd2.taken)
    return true;
  return g_log_fd2.ok && fstat(STDERR_FILENO, &st) == 0 &&
         st.st_dev == g_log_fd2.dev && st.st_ino == g_log_fd2.ino;
}

/* One note: to record's socket (with err: 0 for a note, else why the
 * process records nothing), else to fd 2 if it is still ours. */
static void log_send(int err, const char *fmt, va_list ap, uint64_t sup) {
  char buf[512], text[4096 + 512]; /* a PATH_MAX path and its reason */
  int n, prefix, len;

  n = prefix = snprintf(buf, sizeof buf, "stackrec: ");
  len = vsnprintf(text, sizeof text, fmt, ap);
  if (len < 0) len = 0;
  if (len >= (int)sizeof text) len = (int)sizeof text - 1;
  n += stkr_notify_squeeze(buf + n, sizeof buf - 64 - (size_t)n, text,
                           (size_t)len);
  if (sup)
    n += snprintf(buf + n, sizeof buf - (size_t)n,
                  " (%llu similar messages suppressed)", (unsigned long long)sup);
  /* To record without waiting (this may be the flush worker); when that
   * fails under record, nothing goes to stderr (below). */
  if (stkr_notify_send(g_log_notify, err, buf + prefix, 0))
    return;
  /* Under record, never the program's stderr, whatever became of record
   * (gone, its queue full, no descriptor left for a socket): QA, session
   * 33: a full descriptor table put these lines into the program's
   * stderr, and a dead pipe there killed it by SIGPIPE. */
  if (g_log_notify[0] != '\0') {
    if (err != 0) /* it records nothing: said in the recording */
      (void)stkr_notify_unrecorded_line(stkr_config_env("STACKREC_DIR"),
                                        (long)getpid(), NULL, buf + prefix);
    return;
  }
  if (!log_fd2_unchanged())
    return;
  buf[n++] = '\n';
  /* stderr's fd directly: no stdio lock shared with the app, and nothing
   * ever goes to stdout. */
  (void)stkr_write_all(STDERR_FILENO, buf, (size_t)n);
}

void stkr__log(int kind, const char *fmt, ...) {
  va_list ap;
  uint64_t sup, now = stkr__clock_mono_ns() / 1000000000u + 1; /* never 0 */

  if (kind < 0 || kind >= STKR__LOG_KINDS) kind = STKR__LOG_OTHER;
  if (kind != STKR__LOG_CONFIG) {
    uint64_t last = atomic_load_explicit(&g_log_last[kind], memory_order_relaxed);
    if (last && now - last < STKR__LOG_INTERVAL_S) {
      atomic_fetch_add_explicit(&g_log_suppressed[kind], 1, memory_order_relaxed);
      return;
    }
    atomic_store_explicit(&g_log_last[kind], now, memory_order_relaxed);
  }
  sup = atomic_exchange_explicit(&g_log_suppressed[kind], 0,
                                 memory_order_relaxed);
  va_start(ap, fmt);
  log_send(0, fmt, ap, sup);
  va_end(ap);
}

void stkr__log_unrecorded(int err, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  log_send(err > 0 ? err : EIO, fmt, ap, 0);
  va_end(ap);
}
