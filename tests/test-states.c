/*
 * test-states.c: the state table marks make (tools/stackrec/states.h,
 * issue 13): a state starts and ends at its marks' times, a screen.* mark
 * ends the previous screen, marks that arrive late are placed by their
 * time, "seen" means ever before, reset forgets, and each name's role.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/testlib.h"
#include "tools/stackrec/states.h"

/* At ns, is the process in a state matching pattern? */
typedef struct state_at {
  uint64_t ns;
  const char *pattern;
  bool in;
} state_at;

/* After the marks of test_states (100 consent.granted, 200 app.background,
 * 300 screen.Home, 400 screen.Checkout, 500 app.foreground, 600
 * consent.revoked, 650 custom.thing). */
static const state_at in_state[] = {
    {99, "consent.granted", false},
    {100, "consent.granted", true}, /* the same ns as the mark: after it */
    {100, "app.background", false},
    {250, "app.background", true},
    {250, "screen.*", false},
    {350, "screen.Home", true},
    {350, "screen.*", true},
    {450, "screen.Home", false}, /* the next screen.* ends the previous */
    {450, "screen.Checkout", true},
    {550, "app.background", false},
    {550, "consent.granted", true},
    {700, "consent.granted", false},
    {700, "screen.Checkout", true},
    {700, "custom.thing", false}, /* not a state */
    {150, "consent.granted", true},
    {150, "app.background", false},
};

static void test_states(void **state) {
  stkr_states *s;
  const stkr_state_snap *x;
  stkr_mark_role role;

  (void)state;
  assert_int_equal(stkr_states_create(&s), 0);
  assert_int_equal(stkr_states_mark(s, 100, "consent.granted"), 0);
  assert_int_equal(stkr_states_mark(s, 200, "app.background"), 0);
  assert_int_equal(stkr_states_mark(s, 300, "screen.Home"), 0);
  assert_int_equal(stkr_states_mark(s, 400, "screen.Checkout"), 0);
  assert_int_equal(stkr_states_mark(s, 500, "app.foreground"), 0);
  assert_int_equal(stkr_states_mark(s, 600, "consent.revoked"), 0);
  assert_int_equal(stkr_states_mark(s, 650, "custom.thing"), 0);

  /* In order of time, then backwards (another thread's events): still
   * right. */
  for (size_t i = 0; i < sizeof in_state / sizeof in_state[0]; i++) {
    const state_at *w = &in_state[i];
    if (stkr_state_snap_in(stkr_states_at(s, w->ns), w->pattern) != w->in)
      fail_msg("at %llu ns: in %s should be %d", (unsigned long long)w->ns,
               w->pattern, w->in);
  }
  assert_false(stkr_states_seen(s, "consent.granted", 99));
  assert_true(stkr_states_seen(s, "consent.granted", 100));
  assert_true(stkr_states_seen(s, "consent.granted", 700)); /* ever */
  assert_true(stkr_states_seen(s, "custom.*", 650));
  /* A mark that arrives late is placed by its time. */
  assert_int_equal(stkr_states_mark(s, 120, "app.background"), 0);
  x = stkr_states_at(s, 150);
  assert_true(stkr_state_snap_in(x, "app.background"));
  x = stkr_states_at(s, 550);
  assert_false(stkr_state_snap_in(x, "app.background"));
  /* Reset: the next process knows nothing. */
  stkr_states_reset(s);
  x = stkr_states_at(s, 700);
  assert_false(stkr_state_snap_in(x, "screen.*"));
  assert_false(stkr_states_seen(s, "consent.granted", 700));
  assert_int_equal(stkr_states_overflow(s), 0);
  stkr_states_free(s);
  stkr_states_free(NULL);

  assert_int_equal(stkr_states_row("consent.granted", &role), 0);
  assert_int_equal(role, STKR_MARK_STARTS);
  assert_int_equal(stkr_states_row("app.foreground", &role), 1);
  assert_int_equal(role, STKR_MARK_ENDS);
  assert_int_equal(stkr_states_row("screen.X", &role), 2);
  assert_int_equal(role, STKR_MARK_STARTS);
  assert_int_equal(stkr_states_row("other", &role), -1);
  assert_int_equal(role, STKR_MARK_OTHER);
}

/* Which names are states, globs included, and whether a mark of a state's
 * row was seen: what compliance asks of a process whose head is gone
 * before it can judge an in_state rule (review, session 31). */
static void test_rows_and_names(void **state) {
  stkr_states *s;
  (void)state;

  assert_true(stkr_states_is_state("app.background"));
  assert_true(stkr_states_is_state("app.*"));
  assert_true(stkr_states_is_state("*"));
  assert_true(stkr_states_is_state("screen.Checkout"));
  assert_true(stkr_states_is_state("screen.Check*"));
  assert_true(stkr_states_is_state("scr*"));
  assert_false(stkr_states_is_state("app.backgrond"));
  assert_false(stkr_states_is_state("app.foreground")); /* an end, no state */
  assert_false(stkr_states_is_state("screen."));
  assert_int_equal(stkr_states_create(&s), 0);
  assert_int_equal(stkr_states_mark(s, 10, "consent.granted"), 0);
  assert_false(stkr_states_row_seen(s, "app.background", 20));
  assert_true(stkr_states_row_seen(s, "consent.*", 20));
  assert_int_equal(stkr_states_mark(s, 30, "app.foreground"), 0);
  assert_false(stkr_states_row_seen(s, "app.background", 25));
  assert_true(stkr_states_row_seen(s, "app.background", 40));
  assert_true(stkr_states_row_seen(s, "app.*", 40));
  assert_false(stkr_states_row_seen(s, "screen.Check*", 40));
  assert_int_equal(stkr_states_mark(s, 50, "screen.Home"), 0);
  assert_true(stkr_states_row_seen(s, "screen.Check*", 60));
  stkr_states_free(s);
}

TL_TEST_MAIN("states", NULL, NULL, test_states, test_rows_and_names)
