/* test-event-skip.c: stkr_event_skip, the event of a language binding whose
 * own frames stand between the app's hook and the recorder (the Swift API
 * passes 1): its stack is stkr_event's from the same place with `skip`
 * more innermost frames left out, on top of the config's skip_frames;
 * a skip past the stack's depth leaves an empty stack, never a crash.
 * The Swift side: swift/Tests/StackrecTests (testStackStartsAtTheCaller). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_plain, "skip.plain");
STKR_SITE_DEFINE(g_one, "skip.one");
STKR_SITE_DEFINE(g_two, "skip.two");
STKR_SITE_DEFINE(g_all, "skip.all");

static volatile int g_sink;

/* All four events from one frame of leaf: the same callers. */
static __attribute__((noinline)) void leaf(void) {
  assert_int_equal(stkr_event(&g_plain, NULL, 0), 0);
  assert_int_equal(stkr_event_skip(&g_one, "p", 1, 1), 0);
  assert_int_equal(stkr_event_skip(&g_two, NULL, 0, 2), 0);
  assert_int_equal(stkr_event_skip(&g_all, NULL, 0, 100000), 0);
  g_sink++;
}

static __attribute__((noinline)) void middle(void) {
  leaf();
  g_sink++;
}

static __attribute__((noinline)) void outer(void) {
  middle();
  g_sink++;
}

typedef struct stack {
  uint64_t pcs[64];
  size_t n;
} stack;

/* Record through outer() with skip_frames = config_skip; read each site's
 * one stack back. */
static void record(unsigned config_skip, stack out[4]) {
  stkr_config cfg = {.dir = tl_dir, .skip_frames = config_skip,
                     .symbolize = STKR_SYMBOLIZE_NONE};
  static const char *const sites[4] = {"skip.plain", "skip.one", "skip.two",
                                       "skip.all"};
  stkr_reader *r;
  stkr_event_view v;

  assert_int_equal(tl_rm_dir(NULL), 0);
  assert_int_equal(tl_make_dir(NULL), 0);
  cfg.dir = tl_dir;
  assert_int_equal(stkr_init(&cfg), 0);
  outer();
  assert_int_equal(stkr_shutdown(), 0);
  memset(out, 0, 4 * sizeof *out);
  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &v) == 1)
    for (int i = 0; i < 4; i++)
      if (strcmp(v.site, sites[i]) == 0) {
        out[i].n = v.n_pcs < 64 ? v.n_pcs : 64;
        if (out[i].n) memcpy(out[i].pcs, v.pcs, out[i].n * sizeof *v.pcs);
      }
  stkr_reader_free(r);
}

/* b is a with its first k PCs left out. */
static void assert_dropped(const stack *a, const stack *b, size_t k,
                           const char *what) {
  if (a->n < k + 2 || b->n != a->n - k ||
      memcmp(b->pcs, a->pcs + k, b->n * sizeof *b->pcs) != 0)
    fail_msg("%s: %zu PCs against stkr_event's %zu, not its last %zu", what,
             b->n, a->n, a->n - k);
}

static void test_skip_on_top_of_the_config(void **state) {
  stack s[4];
  (void)state;

  for (unsigned config = 0; config < 2; config++) {
    record(config, s);
    assert_dropped(&s[0], &s[1], 1, "skip 1");
    assert_dropped(&s[0], &s[2], 2, "skip 2");
    assert_int_equal(s[3].n, 0); /* past the stack: none left */
  }
}

TL_TEST_MAIN("event-skip", tl_make_dir, tl_rm_dir,
             test_skip_on_top_of_the_config)
