/*
 * omitfp.c: a program built without frame pointers (-fomit-frame-pointer,
 * as Debian builds its packages), for tests/test-unwind-record.c. Run under
 * the hooks by `stackrec record`.
 *
 *   omitfp chain          main -> uw_outer -> uw_middle -> uw_inner ->
 *                         gethostname (hooked), once
 *   omitfp dlopen LIB N   then load LIB (omitfp_lib.c) and call its chain
 *                         lib_outer -> lib_inner -> gethostname N times,
 *                         50 ms apart (the recorder's worker builds the
 *                         new image's table on one of its passes meanwhile)
 *
 * uw_middle and lib_outer zero the frame-pointer register before they call
 * on: a frame-pointer walk from the hook stops there, a walk with the
 * images' unwind tables (.eh_frame) goes on to main.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "omitfp.h"

static volatile int g_sink;

OMITFP_LEAF(uw_inner, g_sink)
OMITFP_LINK(uw_middle, uw_inner, 1, g_sink)
OMITFP_LINK(uw_outer, uw_middle, 0, g_sink)

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "chain") == 0)
    return uw_outer() == 2 ? 0 : 1;
  if (argc >= 4 && strcmp(argv[1], "dlopen") == 0) {
    void *h = dlopen(argv[2], RTLD_NOW);
    int (*outer)(void) = h ? (int (*)(void))dlsym(h, "lib_outer") : NULL;
    if (outer == NULL) {
      fprintf(stderr, "omitfp: %s\n", dlerror());
      return 2;
    }
    for (int i = atoi(argv[3]); i > 0; i--) {
      struct timespec ts = {0, 50 * 1000 * 1000};
      if (outer() != 1)
        return 1;
      nanosleep(&ts, NULL);
    }
    return 0;
  }
  fprintf(stderr, "usage: omitfp chain | dlopen LIB N\n");
  return 2;
}
