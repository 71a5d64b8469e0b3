/*
 * test-rate.c: the sliding-window peak rate of `stackrec compliance`
 * (tools/stackrec/rate.h): bursts, steady rates per second and minute,
 * events out of order within a window, late ones, reuse after finish.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/testlib.h"
#include "tools/stackrec/rate.h"

#define MS 1000000ull
#define SEC 1000000000ull

static void test_rate(void **state) {
  stkr_rate r;
  uint64_t i;
  (void)state;

  /* 40 events 10 ms apart: 40 in a second. */
  stkr_rate_init(&r, SEC);
  for (i = 0; i < 40; i++)
    stkr_rate_add(&r, 5 * SEC + i * 10 * MS);
  stkr_rate_finish(&r);
  assert_int_equal(r.peak, 40);
  assert_int_equal(r.late, 0);

  /* 2 per second for 100 s: peak 2/s, 120/min (windows on 1/32 steps). */
  stkr_rate_init(&r, SEC);
  {
    stkr_rate m;
    stkr_rate_init(&m, 60 * SEC);
    for (i = 0; i < 200; i++) {
      stkr_rate_add(&r, 1000 * SEC + i * 500 * MS);
      stkr_rate_add(&m, 1000 * SEC + i * 500 * MS);
    }
    stkr_rate_finish(&r);
    stkr_rate_finish(&m);
    assert_int_equal(r.peak, 2);
    assert_int_equal(m.peak, 120);
  }

  /* Out of order within a window (two threads drained one after the
   * other): all counted in the peak. */
  stkr_rate_init(&r, SEC);
  for (i = 0; i < 10; i++)
    stkr_rate_add(&r, 10 * SEC + 400 * MS + i * MS);
  for (i = 0; i < 10; i++)
    stkr_rate_add(&r, 10 * SEC + 100 * MS + i * MS);
  stkr_rate_finish(&r);
  assert_int_equal(r.peak, 20);

  /* An event older than a closed window is late, not in the peak. */
  stkr_rate_init(&r, SEC);
  stkr_rate_add(&r, 100 * SEC);
  stkr_rate_add(&r, 105 * SEC);
  stkr_rate_add(&r, 100 * SEC + 1);
  stkr_rate_finish(&r);
  assert_int_equal(r.late, 1);
  assert_int_equal(r.peak, 1);

  /* Two bursts a long pause apart; finish and reuse (a new process). */
  stkr_rate_init(&r, SEC);
  for (i = 0; i < 5; i++)
    stkr_rate_add(&r, SEC + i);
  for (i = 0; i < 7; i++)
    stkr_rate_add(&r, 3600 * SEC + i);
  stkr_rate_finish(&r);
  for (i = 0; i < 3; i++)
    stkr_rate_add(&r, 2 * SEC + i);
  stkr_rate_finish(&r);
  assert_int_equal(r.peak, 7);
}

TL_TEST_MAIN("rate", NULL, NULL, test_rate)
