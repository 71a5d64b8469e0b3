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
#include <unistd.h>

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

#endif
