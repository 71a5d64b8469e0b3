/* stkr_swift.c: the recorder embedded in a Swift program
 * (tests/test-swift-async.sh builds AsyncChain.swift with -DEMBEDDED
 * against this library, //tests:libstkr_swift_embed.so). */
#include <stdio.h>
#include <string.h>

#include "recorder/stackrec.h"
#include "tests/swift_fixtures/StackrecC/stkr_swift.h"

STKR_SITE_DEFINE(g_site, "swift.async.leaf");

__attribute__((constructor)) static void stkr_swift_start(void) {
  stkr_config cfg;
  int err;

  memset(&cfg, 0, sizeof cfg); /* STACKREC_* environment, else defaults */
  err = stkr_init(&cfg);
  if (err != 0)
    fprintf(stderr, "stkr_swift: stkr_init: %s\n", stkr_strerror(err));
}

/* noinline: the event's first PC is then the Swift caller's return
 * address inside this function's frame record, as for any hook. */
__attribute__((noinline)) void stkr_swift_event(int i) {
  (void)i;
  (void)stkr_event(&g_site, NULL, 0);
  __asm__ volatile("" ::: "memory");
}

void stkr_swift_done(void) {
  int err = stkr_shutdown();
  if (err != 0)
    fprintf(stderr, "stkr_swift: stkr_shutdown: %s\n", stkr_strerror(err));
}
