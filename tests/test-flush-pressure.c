/* test-flush-pressure.c: when the flush worker drains back to back
 * (flush/drain.c, stkr__drain_under_pressure; the timer in flush/timer.c):
 * a ring an eighth full puts it under pressure; once under pressure, a
 * sixty-fourth keeps it there (hysteresis); less lets it go back to the
 * tick. The rule on real rings filled with 24-byte records, the size of a
 * known stack's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "flush/worker.h"
#include "tests/testlib.h"

/* Push records of 24 bytes until `bytes` are unread. */
static void fill_to(stkr__ring *r, uint64_t bytes) {
  while (stkr__ring_unread(r) + 24 <= bytes) {
    stkr__record *rec = stkr__ring_reserve(r, 24);
    assert_non_null(rec);
    rec->size = 24;
    rec->site_id = 1;
    rec->depth = 0;
    rec->payload_len = 0;
    rec->flags = 0;
    rec->slot = 0;
    stkr__ring_commit(r, 24);
  }
}

static void test_enter_at_an_eighth_stay_at_a_sixty_fourth(void **state) {
  static const size_t sizes[] = {64u << 10, 256u << 10};
  (void)state;

  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    stkr__ring r;
    uint64_t size;

    assert_int_equal(stkr__ring_init(&r, sizes[k], 0, 0, ""), 0);
    size = stkr__ring_size(&r);
    /* Empty: never. */
    assert_false(stkr__drain_under_pressure(false, &r));
    assert_false(stkr__drain_under_pressure(true, &r));
    /* Just under a sixty-fourth: not even to stay. */
    fill_to(&r, size / 64 - 24);
    assert_false(stkr__drain_under_pressure(true, &r));
    /* A sixty-fourth: stays, but does not enter. */
    fill_to(&r, size / 64 + 24);
    assert_true(stkr__drain_under_pressure(true, &r));
    assert_false(stkr__drain_under_pressure(false, &r));
    /* Just under an eighth: the same. */
    fill_to(&r, size / 8 - 24);
    assert_true(stkr__drain_under_pressure(true, &r));
    assert_false(stkr__drain_under_pressure(false, &r));
    /* An eighth: enters. */
    fill_to(&r, size / 8 + 24);
    assert_true(stkr__drain_under_pressure(false, &r));
    assert_true(stkr__drain_under_pressure(true, &r));
    stkr__ring_free(&r);
  }
}

TL_TEST_MAIN("flush-pressure", NULL, NULL,
             test_enter_at_an_eighth_stay_at_a_sixty_fourth)
