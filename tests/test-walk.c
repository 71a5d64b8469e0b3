/* test-walk.c: the frame-pointer walk over synthetic and real stacks, and
 * the stack hash (recorder/walk.c). Synthetic stacks are arrays in memory
 * whose words form frame records {saved fp, return address}; the walk is
 * given their bounds, so hostile chains can be built freely. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/auxv.h>
extern char **environ;
#include <unistd.h>

#include "recorder/stkr_internal.h"
#include "tests/testlib.h"

#define WORDS 512
static uint64_t g_mem[WORDS] __attribute__((aligned(16)));
#define LO ((uintptr_t)&g_mem[0])
#define HI ((uintptr_t)&g_mem[WORDS])
#define AT(word) ((uintptr_t)&g_mem[(word)])

/* Frame record at word w: {next fp, return address}. */
static void frame(unsigned w, uintptr_t next, uint64_t ret) {
  g_mem[w] = next;
  g_mem[w + 1] = ret;
}

/* A well-formed chain of n frames at words 0, 8, 16, ...; frame i returns
 * to 0x1000 + i; the last links to 0 (thread entry). */
static void chain(unsigned n) {
  unsigned i;
  memset(g_mem, 0, sizeof g_mem);
  for (i = 0; i < n; i++)
    frame(8 * i, i + 1 < n ? AT(8 * (i + 1)) : 0, 0x1000 + i);
}

static unsigned walk(uintptr_t fp, unsigned skip, uint64_t *pcs, unsigned max,
                     bool *trunc) {
  uint64_t h;
  unsigned n = stkr__walk(fp, LO, HI, skip, pcs, max, &h, trunc);
  assert_int_equal(h, stkr__hash_pcs(pcs, n));
  return n;
}

static void test_well_formed_chain(void **state) {
  uint64_t pcs[64];
  bool trunc;
  unsigned i, n;
  (void)state;
  chain(20);
  n = walk(AT(0), 0, pcs, 64, &trunc);
  assert_int_equal(n, 20);
  assert_false(trunc);
  for (i = 0; i < n; i++)
    assert_int_equal(pcs[i], 0x1000 + i);
}

static void test_skip_and_max_depth(void **state) {
  uint64_t pcs[64];
  bool trunc;
  unsigned n;
  (void)state;
  chain(20);
  n = walk(AT(0), 3, pcs, 64, &trunc);
  assert_int_equal(n, 17);
  assert_int_equal(pcs[0], 0x1003);
  n = walk(AT(0), 0, pcs, 5, &trunc);
  assert_int_equal(n, 5);
  assert_true(trunc);
  assert_int_equal(pcs[4], 0x1004);
  n = walk(AT(0), 0, pcs, 20, &trunc);
  assert_int_equal(n, 20);
  assert_false(trunc); /* exactly max, and nothing after: not truncated */
}

static void test_loop_ends_walk(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  chain(10);
  frame(32, AT(8), 0x1004);  /* frame 4 links back to frame 1 */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 5);
  frame(32, AT(32), 0x1004); /* self-loop */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 5);
}

static void test_out_of_bounds_ends_walk(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  chain(10);
  frame(16, HI, 0x1002);               /* just past the top */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  frame(16, HI - 8, 0x1002);           /* record would straddle the top */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  frame(16, (uintptr_t)0xFFFFFFFFFFFFFFF0ull, 0x1002);
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  /* Starting frame outside the bounds: nothing is read at all. */
  assert_int_equal(walk(LO - 16, 0, pcs, 64, &trunc), 0);
  assert_int_equal(walk(0, 0, pcs, 64, &trunc), 0);
}

static void test_misaligned_and_zero_links(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  chain(10);
  frame(16, AT(24) + 4, 0x1002);       /* misaligned next */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  chain(10);
  frame(16, 0, 0x1002);                /* zero link: outermost frame */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  chain(10);
  frame(16, AT(24), 0);                /* zero return address */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 2);
  chain(10);
  frame(16, AT(24), AT(100));          /* "return address" into the stack */
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 2);
  assert_int_equal(walk(AT(0) + 8 + 1, 0, pcs, 64, &trunc), 0);
}

static void test_swift_async_tag_ends_walk(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  chain(10);
  /* Saved fp tagged 0b0001 in bits 63:60: an async context pointer. The
   * frame's own return address is kept, then the walk stops. */
  frame(16, AT(24) | (1ull << 60), 0x1002);
  assert_int_equal(walk(AT(0), 0, pcs, 64, &trunc), 3);
  assert_int_equal(pcs[2], 0x1002);
  assert_false(trunc);
}

static void test_random_memory_never_faults(void **state) {
  uint64_t pcs[256];
  bool trunc;
  unsigned round, i;
  (void)state;
  srand(12345);
  for (round = 0; round < 20000; round++) {
    for (i = 0; i < WORDS; i++) {
      /* Mostly pointers into the buffer (some misaligned, some wild). */
      unsigned k = (unsigned)rand() % 4;
      g_mem[i] = k == 0   ? (uint64_t)rand() * (uint64_t)rand()
                 : k == 1 ? AT((unsigned)rand() % WORDS) + (unsigned)rand() % 16
                          : AT((unsigned)rand() % WORDS);
    }
    unsigned n = walk(AT((unsigned)rand() % (WORDS / 2) & ~1u), 0, pcs, 256,
                      &trunc);
    assert_true(n <= 256);
  }
}

static void test_hash_is_order_sensitive_and_keeps_repeats(void **state) {
  uint64_t a[] = {0x401000, 0x402000, 0x403000};
  uint64_t b[] = {0x402000, 0x401000, 0x403000};
  uint64_t c[] = {0x401000, 0x401000, 0x403000};
  uint64_t d[] = {0x403000};
  (void)state;
  assert_int_not_equal(stkr__hash_pcs(a, 3), stkr__hash_pcs(b, 3));
  /* XOR would cancel the repeated PC and equal {0x403000}. */
  assert_int_not_equal(stkr__hash_pcs(c, 3), stkr__hash_pcs(d, 1));
  assert_int_not_equal(stkr__hash_pcs(a, 2), stkr__hash_pcs(a, 3));
  assert_int_equal(stkr__hash_pcs(a, 3), stkr__hash_pcs(a, 3));
}

/* Real stack: f1 -> f2 -> f3 walk from f3's own frame; the PCs must be
 * exactly the return addresses each function saw. */
static uint64_t g_ret[3];
static uint64_t g_pcs[64];
static unsigned g_n;

static __attribute__((noinline)) void f3(void) {
  uintptr_t lo, hi;
  uint64_t h;
  bool trunc;
  g_ret[2] = (uint64_t)__builtin_return_address(0);
  assert_int_equal(stkr__stack_bounds(&lo, &hi), 0);
  g_n = stkr__walk((uintptr_t)__builtin_frame_address(0), lo, hi, 0, g_pcs,
                   64, &h, &trunc);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void f2(void) {
  g_ret[1] = (uint64_t)__builtin_return_address(0);
  f3();
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void f1(void) {
  g_ret[0] = (uint64_t)__builtin_return_address(0);
  f2();
  __asm__ volatile("" ::: "memory");
}

static void test_real_stack(void **state) {
  (void)state;
  f1();
  assert_true(g_n >= 3);
  assert_int_equal(g_pcs[0], g_ret[2]);
  assert_int_equal(g_pcs[1], g_ret[1]);
  assert_int_equal(g_pcs[2], g_ret[0]);
}

/* On the main thread, a word pointing into the argument area above the
 * stack glibc reports (argv/envp strings, auxv) is data, not a return
 * address: ssh-keygen's events each carried one such bogus frame (a saved
 * argv pointer read through a garbage frame pointer). */
static void test_argument_area_is_not_code(void **state) {
  uintptr_t lo, hi, fr[4] __attribute__((aligned(16)));
  uint64_t pcs[8], h;
  const char *execfn = (const char *)getauxval(AT_EXECFN);
  bool trunc;
  unsigned n;
  (void)state;
  assert_non_null(execfn);
  assert_int_equal(stkr__stack_bounds(&lo, &hi), 0); /* cmocka: main thread */
  /* Natively the area lies above what glibc reports (the case this test
   * is about); qemu-user lays the guest stack out so that it is inside. */
  if ((uintptr_t)execfn < hi)
    print_message("note: argument area inside the reported stack here\n");
  fr[0] = 0;
  fr[1] = (uintptr_t)execfn;
  n = stkr__walk((uintptr_t)fr, lo, hi, 0, pcs, 8, &h, &trunc);
  assert_int_equal(n, 0);
  fr[1] = (uintptr_t)environ[0];
  n = stkr__walk((uintptr_t)fr, lo, hi, 0, pcs, 8, &h, &trunc);
  assert_int_equal(n, 0);
  fr[1] = (uintptr_t)&test_argument_area_is_not_code; /* code still is */
  n = stkr__walk((uintptr_t)fr, lo, hi, 0, pcs, 8, &h, &trunc);
  assert_int_equal(n, 1);
}

TL_TEST_MAIN("walk", NULL, NULL, test_well_formed_chain,
             test_skip_and_max_depth, test_loop_ends_walk,
             test_out_of_bounds_ends_walk, test_misaligned_and_zero_links,
             test_swift_async_tag_ends_walk, test_random_memory_never_faults,
             test_hash_is_order_sensitive_and_keeps_repeats, test_real_stack,
             test_argument_area_is_not_code)
