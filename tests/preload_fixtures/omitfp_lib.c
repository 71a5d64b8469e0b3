/*
 * omitfp_lib.c: a library built without frame pointers that omitfp loads
 * with dlopen after recording started (tests/test-unwind-record.c): its
 * image has no unwind table until the recorder's worker sees it.
 */
#include <unistd.h>

#include "omitfp.h"

static volatile int g_lib_sink;

__attribute__((noinline)) int lib_inner(void) {
  char host[256];
  int rc = gethostname(host, sizeof host);
  g_lib_sink += host[0];
  return rc;
}

__attribute__((noinline)) int lib_outer(void) {
  OMITFP_CLEAR_FP();
  int rc = lib_inner();
  g_lib_sink += rc;
  return rc + 1;
}
