/*
 * skip_main.c: runs a cmocka test binary whose main() was renamed to
 * stkr__test_main (-Dmain=stkr__test_main), with the cases matching
 * $STKR_SKIP (a cmocka pattern) reported as skipped. For tests/aarch64:
 * qemu-user cannot run threads in a child forked from a multi-threaded
 * guest (qemu asserts in its TCG core), which fork-follow tests do; those
 * cases are skipped there and run natively on x86_64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* Built with the test's -Dmain=stkr__test_main: this one is the real main. */
#undef main
int stkr__test_main(void);

int main(void) {
  const char *skip = getenv("STKR_SKIP");

  if (skip != NULL && skip[0] != '\0') {
    printf("aarch64: skipping %s (qemu-user: threads after fork in a "
           "multi-threaded process)\n", skip);
    cmocka_set_skip_filter(skip);
  }
  return stkr__test_main();
}
