/* test-symc.c: the symbolizer's frame cache (symbolize/symbolize.c) keeps
 * each stack's frame list once by its content: a stack resolved again
 * takes the list it had (review, session 44: the worker's bounded stack
 * table re-resolves every stack it forgot and meets again, and each call
 * used to copy a new list into the cache's arena, never freed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "symbolize/symbolize.h"
#include "tests/testlib.h"

static void test_equal_lists_kept_once(void **state) {
  static const uint64_t a[3] = {0x1000, 0x2000, 0x3000};
  static const uint64_t a2[3] = {0x1000, 0x2000, 0x3000};
  static const uint64_t b[2] = {0x1000, 0x2000};
  const uint32_t *fa, *fa2, *fb, *fe, *fe2;
  uint32_t na, na2, nb, ne, ne2;
  stkr__symc *c = NULL;
  (void)state;

  /* No backend: every PC one image+offset frame. */
  assert_int_equal(stkr__symc_create(NULL, &c), 0);
  assert_int_equal(stkr__symc_stack(c, a, 3, &fa, &na), 0);
  assert_int_equal(na, 3);
  /* The same PCs from another buffer, after another stack: the same list,
   * unchanged. */
  assert_int_equal(stkr__symc_stack(c, b, 2, &fb, &nb), 0);
  assert_int_equal(stkr__symc_stack(c, a2, 3, &fa2, &na2), 0);
  assert_ptr_equal(fa2, fa);
  assert_int_equal(na2, 3);
  /* A prefix is another list (its own length), whose ids agree. */
  assert_int_equal(nb, 2);
  assert_ptr_not_equal(fb, fa);
  assert_memory_equal(fb, fa, 2 * sizeof *fa);
  /* The empty stack too. */
  assert_int_equal(stkr__symc_stack(c, NULL, 0, &fe, &ne), 0);
  assert_int_equal(stkr__symc_stack(c, NULL, 0, &fe2, &ne2), 0);
  assert_int_equal(ne, 0);
  assert_ptr_equal(fe, fe2);
  /* Many calls, few lists: each answered from the first. */
  for (int i = 0; i < 100000; i++) {
    assert_int_equal(stkr__symc_stack(c, (i & 1) ? a : b, (i & 1) ? 3 : 2,
                                      &fe, &ne), 0);
    assert_ptr_equal(fe, (i & 1) ? fa : fb);
  }
  assert_int_equal(stkr__symc_resolved(c), 3); /* each PC once */
  stkr__symc_free(c);
}

TL_TEST_MAIN("symc", NULL, NULL, test_equal_lists_kept_once)
