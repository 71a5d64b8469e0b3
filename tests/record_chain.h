/*
 * record_chain.h: call chains that record, for tests that read back the
 * frames of what they recorded (test-agg.c, test-report.c; build them with
 * -fno-optimize-sibling-calls). Header-only.
 *
 *   RC_FRAME(read_config, &g_open)
 *
 * defines read_config(), a frame of its own whose call of rc_record()
 * records one event at g_open: read back, the stack starts rc_record,
 * read_config, then read_config's caller.
 */
#ifndef STKR_TEST_RECORD_CHAIN_H
#define STKR_TEST_RECORD_CHAIN_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stackrec.h"

/* The leaf: one event at s without a payload, waiting while the ring is
 * full (the worker drains it) so that none is dropped. */
static __attribute__((noinline, unused)) void rc_record(stkr_site *s) {
  while (stkr_event(s, NULL, 0) == -EAGAIN)
    usleep(100);
  __asm__ volatile("" ::: "memory"); /* not a tail call: a frame of its own */
}

#define RC_FRAME(fn, site)                      \
  static __attribute__((noinline)) void fn(void) { \
    rc_record(site);                            \
    __asm__ volatile("" ::: "memory");          \
  }

/* Fork: the child records into dir (cfg, its dir set here) by running
 * body, then shuts the recorder down; the parent waits for it, which must
 * exit 0 (2: stkr_init failed, 3: stkr_shutdown did). */
static __attribute__((unused)) void rc_record_in_child(const char *dir,
                                                       stkr_config cfg,
                                                       void (*body)(void)) {
  pid_t pid = fork();
  int st;

  assert_true(pid >= 0);
  if (pid == 0) {
    cfg.dir = dir;
    if (stkr_init(&cfg) != 0)
      _exit(2);
    body();
    _exit(stkr_shutdown() == 0 ? 0 : 3);
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

#endif
