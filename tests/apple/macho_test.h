/*
 * macho_test.h: what the Mach-O tests share (test-macho.c, test-atos.c,
 * test-symbolize-apple.c, test-symcache.c): building the fixtures
 * (tests/apple/fixtures.sh) once per test binary into $TEST_TMPDIR, their
 * UUIDs, running commands, main(). Header-only (static functions) so each
 * test stays one source file.
 */
#ifndef STKR_TEST_MACHO_TEST_H
#define STKR_TEST_MACHO_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testlib.h"

static char mt_src[4096], mt_fx[4096], mt_tool[4096], mt_tmp[4096];
static char mt_out[1 << 20], mt_err[1 << 16];
static int mt_state = -1; /* fixtures.sh's exit status: 0 built, 77 a tool
                              is missing */

static const tl_capture mt_capture = {mt_out, sizeof mt_out, mt_err,
                                      sizeof mt_err, mt_tmp, false, -1};
/* Run a shell command; stdout/stderr into mt_out/mt_err. @return its exit
 * status (or -1 if it died). */
#define mt_sh(...) tl_sh(&mt_capture, __VA_ARGS__)

/* Build the fixtures (NFILES x FUNCS generated functions). @return 0, 77
 * when a tool is missing (the caller skips, saying so), else fails. */
static int mt_setup(int nfiles, int nfuncs) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  const char *tmp = getenv("TEST_TMPDIR");
  int rc;
  snprintf(mt_src, sizeof mt_src, "%s/%s", src ? src : ".", ws ? ws : ".");
  snprintf(mt_tmp, sizeof mt_tmp, "%s", tmp ? tmp : "/tmp");
  snprintf(mt_fx, sizeof mt_fx, "%s/fx", mt_tmp);
  snprintf(mt_tool, sizeof mt_tool, "%s/tools/stackrec", mt_src);
  rc = mt_sh("'%s/tests/apple/fixtures.sh' '%s' %d %d", mt_src, mt_fx, nfiles,
             nfuncs);
  if (rc != 0) fprintf(stderr, "fixtures.sh: exit %d\n%s", rc, mt_err);
  mt_state = rc;
  return rc;
}

/* main() of a Mach-O test: the fixtures built (NFILES x NFUNCS; a tool
 * missing makes each test skip, saying so), then the group run as
 * TL_TEST_MAIN runs it (tests/testlib.h). */
#define MT_TEST_MAIN(group, nfiles, nfuncs, group_setup, ...)                 \
  int main(void) {                                                            \
    mt_setup(nfiles, nfuncs);                                                 \
    return TL_RUN_GROUP(group, group_setup, NULL,                             \
                        TL_CASES(NULL, NULL, __VA_ARGS__));                   \
  }

/* The UUID (16 bytes) of fixture NAME's ARCH slice, from OUT/uuids. */
static __attribute__((unused)) bool mt_uuid(const char *name,
                                            const char *arch, uint8_t out[16]) {
  char path[4200], n[64], a[32], u[64];
  FILE *f;
  bool ok = false;
  snprintf(path, sizeof path, "%s/uuids", mt_fx);
  if (!(f = fopen(path, "r"))) return false;
  while (!ok && fscanf(f, "%63s %31s %63s", n, a, u) == 3) {
    if (strcmp(n, name) != 0 || strcmp(a, arch) != 0) continue;
    for (int i = 0, k = 0; i < 16 && u[k]; k++) {
      unsigned v;
      if (u[k] == '-') continue;
      if (sscanf(u + k, "%2x", &v) != 1) break;
      out[i++] = (uint8_t)v;
      k++;
      ok = i == 16;
    }
  }
  fclose(f);
  return ok;
}

#define MT_SKIP_IF_NO_FIXTURES()                                              \
  do {                                                                        \
    if (mt_state == 77) {                                                     \
      fprintf(stderr, "SKIP: Mach-O fixtures not built (needs lld-14, "       \
                      "llvm-14 and the Swift toolchain's clang)\n");          \
      skip();                                                                 \
    }                                                                         \
    if (mt_state != 0) fail_msg("building the Mach-O fixtures failed");       \
  } while (0)

#endif
