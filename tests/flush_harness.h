/*
 * flush_harness.h: what the tests of the flush worker at work share
 * (test-flush.c, test-flush-payloads.c; each test runs in its own
 * directory, tl_dir, made by tl_make_dir): the teardown that ends a
 * recording a failed test left running, a push that waits out a full
 * ring, threads started at once. Include after <cmocka.h>.
 */
#ifndef STKR_TESTS_FLUSH_HARNESS_H
#define STKR_TESTS_FLUSH_HARNESS_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "recorder/stackrec.h"
#include "tests/testlib.h"

static int teardown(void **state) {
  (void)state;
  stkr_shutdown(); /* in case a test failed half-way */
  return tl_rm_rf(tl_dir);
}

/* Push until recorded: a full ring is waited out (each -EAGAIN is a
 * counted drop, which the identity covers). */
static void event_retry(stkr_site *site, const void *p, size_t len) {
  int rc, tries = 0;
  /* Bounded: a worker that never drains must fail the test, not hang it
   * (tests with a one-hour timer rely on the producers' wake-up). */
  while ((rc = stkr_event(site, p, len)) == -EAGAIN && ++tries < 100000)
    usleep(200);
  assert_int_equal(rc, 0);
}

/* Threads 0..n-1 run fn((void *)k) at once; returns when all ended. */
static void run_threads(int n, void *(*fn)(void *)) {
  pthread_t th[8];
  assert_true(n <= 8);
  for (int k = 0; k < n; k++)
    assert_int_equal(pthread_create(&th[k], NULL, fn, (void *)(intptr_t)k), 0);
  for (int k = 0; k < n; k++) pthread_join(th[k], NULL);
}

#endif
