/* test-api.c: the stable C API of issue 17: the run-time version matches
 * the header's, and stkr_config's size rules (stackrec.h, "ABI rules"):
 * 0 is the 0.3 layout, STKR_CONFIG_INIT / stkr_config_init declare the
 * caller's sizeof, a size below the 0.3 layout is -EINVAL, a larger struct
 * from a newer caller is accepted when the unknown bytes are zero and
 * refused with -E2BIG when one is set, and only `size` bytes are read. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "flush/flush_internal.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

static void test_version(void **state) {
  char want[32];
  (void)state;
  assert_int_equal(stkr_version(), STKR_VERSION_NUMBER);
  assert_int_equal(STKR_VERSION_NUMBER,
                   (STKR_VERSION_MAJOR << 16) | (STKR_VERSION_MINOR << 8) |
                       STKR_VERSION_PATCH);
  snprintf(want, sizeof want, "%d.%d.%d", STKR_VERSION_MAJOR,
           STKR_VERSION_MINOR, STKR_VERSION_PATCH);
  assert_string_equal(stkr_version_string(), want);
  assert_string_equal(STKR_VERSION_STRING, want);
}

static void test_config_init(void **state) {
  stkr_config a = STKR_CONFIG_INIT, b;
  (void)state;
  memset(&b, 0xff, sizeof b);
  stkr_config_init(&b);
  assert_int_equal(a.size, sizeof(stkr_config));
  assert_memory_equal(&a, &b, sizeof a);
  assert_null(a.dir);
  assert_int_equal(a.exit_ms, 0);
}

/* Every size the rules accept builds the same config as {0} plus the
 * fields set; a bad size never reaches the fields. */
static void test_size_rules(void **state) {
  stkr__fconfig c;
  stkr_config z = {0}, s = STKR_CONFIG_INIT;
  (void)state;
  unsetenv("STACKREC_DEPTH");
  unsetenv("STACKREC_EXIT_MS");
  z.max_depth = 7;
  s.max_depth = 7;
  assert_int_equal(stkr__config_build(&z, &c), 0);
  assert_int_equal(c.set.max_depth, 7);
  stkr__config_free(&c);
  assert_int_equal(stkr__config_build(&s, &c), 0);
  assert_int_equal(c.set.max_depth, 7);
  stkr__config_free(&c);

  /* Too small to hold the 0.3 fields (a caller that set garbage). */
  s.size = offsetof(stkr_config, exit_ms);
  assert_int_equal(stkr__config_build(&s, &c), -EINVAL);
  s.size = 1;
  assert_int_equal(stkr__config_build(&s, &c), -EINVAL);
}

/* A caller built against a newer header: its struct is longer. */
typedef struct newer_config {
  stkr_config known;
  uint64_t future_a;
  uint32_t future_b;
} newer_config;

static void test_newer_caller(void **state) {
  stkr__fconfig c;
  newer_config n;
  (void)state;
  unsetenv("STACKREC_EXIT_MS");
  memset(&n, 0, sizeof n);
  n.known.size = sizeof n;
  n.known.exit_ms = 1234;
  assert_int_equal(stkr__config_build(&n.known, &c), 0); /* unset: fine */
  assert_int_equal(c.set.exit_ms, 1234);
  stkr__config_free(&c);
  n.future_b = 1; /* a setting this library cannot honour */
  assert_int_equal(stkr__config_build(&n.known, &c), -E2BIG);
  assert_int_equal(stkr_init(&n.known), -E2BIG);
  assert_non_null(strstr(stkr_strerror(-E2BIG), "stkr_config.size"));
}

/* Only `size` bytes are read: a 0.3-layout struct (size 0) ending right
 * before an unreadable page loads fine, whatever the library's sizeof. */
static void test_reads_only_size(void **state) {
  long page = sysconf(_SC_PAGESIZE);
  size_t base = offsetof(stkr_config, exit_ms) + sizeof(unsigned);
  char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  stkr__fconfig c;
  stkr_config *at;
  (void)state;
  unsetenv("STACKREC_EXIT_MS");
  assert_true(m != MAP_FAILED);
  assert_int_equal(mprotect(m + page, (size_t)page, PROT_NONE), 0);
  /* Aligned for size_t, ending at most 7 bytes short of the guard page. */
  at = (stkr_config *)(void *)(m + page - ((base + 7) & ~(size_t)7));
  memset(at, 0, base);
  at->exit_ms = 55;
  assert_int_equal(stkr__config_build(at, &c), 0);
  assert_int_equal(c.set.exit_ms, 55);
  stkr__config_free(&c);
  munmap(m, 2 * (size_t)page);
}

/* Any int gets static text (QA, session 33: an unknown code's text was
 * strerror's buffer, freed by the next call; INT_MIN was negated). */
static void test_strerror_texts_are_static(void **state) {
  const char *a = stkr_strerror(-99999), *b;
  char keep[64];
  (void)state;

  snprintf(keep, sizeof keep, "%s", a);
  b = stkr_strerror(-99998);
  assert_string_equal(a, keep); /* still readable, unchanged */
  assert_string_equal(b, "unknown error");
  assert_string_equal(stkr_strerror(INT_MIN), "unknown error");
  assert_string_equal(stkr_strerror(12345), "unknown error");
  assert_non_null(strstr(stkr_strerror(-ENOENT), "No such file"));
  /* Both callers' meanings (QA, session 41: a failed stkr_init's EPERM
   * read as "the recorder's own thread"). */
  assert_non_null(strstr(stkr_strerror(-EPERM), "stkr_init: the recording "
                                               "directory"));
}

/* The environment helpers take odd arguments without a crash (QA, session
 * 39: stkr_config_env(NULL) died of SIGSEGV); why is always terminated. */
static void test_env_helpers_odd_arguments(void **state) {
  char why[1] = {'X'};
  int err;
  (void)state;

  assert_null(stkr_config_env(NULL));
  assert_null(stkr_config_env("STACKREC_NO_SUCH_VARIABLE"));
  err = stkr_config_check_env(why, 1);
  assert_true(err == 0 || err == -EINVAL);
  assert_int_equal(why[0], '\0');
  assert_true(stkr_config_check_env(NULL, 0) == err);
}

TL_TEST_MAIN("api", NULL, NULL, test_version, test_config_init, test_size_rules,
             test_newer_caller, test_reads_only_size,
             test_strerror_texts_are_static, test_env_helpers_odd_arguments)
