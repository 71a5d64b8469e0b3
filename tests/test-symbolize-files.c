/*
 * test-symbolize-files.c: symbolization when a file is not what the
 * symbolizer looks for (helpers: tests/symbolize_harness.h). The fixture
 * program recorded offline, then another build at its path (a flipped
 * build-id: offsets and a warning, never a name); FIFOs where the image,
 * a debug directory's build-id and by-name entries, a .gnu_debuglink's
 * debug file or the in-process symbol cache's file are looked for (passed
 * over, never a read that waits for a writer); a FIFO and a sparse
 * 100 GiB file named as segments (left out in bounded memory, marked lost
 * in the output). Split from test-symbolize.c.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/symbolize_harness.h"
#include "tests/testlib.h"

/* A FIFO under the app's cache name (the directory may be shared, anyone's
 * to write into): the in-process reader refuses it and reads the DWARF.
 * Before, its open() waited for a writer forever and the app hung in its
 * first flush (a regression shows here as the test's timeout). */
static void test_inproc_symcache_fifo(void **state) {
  char full[4200], fifo[4200], env[4400], dir[4200];
  (void)state;
  mkpath(full, sizeof full, "symcache-fifo-src");
  mkpath(fifo, sizeof fifo, "symcache-fifo");
  if (sh("'%s' symcache build '%s' -o '%s' && mkdir -p '%s' && "
         "for f in '%s'/*.stkrsym; do mkfifo \"%s/${f##*/}\" || exit 1; done",
         g_tool, g_fixture, full, fifo, full, fifo) != 0)
    fail_msg("fifo under the cache's name: %s", g_err);
  snprintf(env, sizeof env, "STACKREC_SYMCACHE='%s'", fifo);
  mkpath(dir, sizeof dir, "symcache-inproc-fifo");
  run_fixture(g_fixture, env, dir);
  check_recording(dir, "symfixture", true, NULL);
}

/* Flip the first byte of the GNU build-id of the ELF file at path. */
static void flip_build_id(const char *path) {
  uint8_t id[64], *data;
  size_t n = 0, len;
  FILE *f;
  assert_int_equal(sh("readelf -n '%s' | sed -n 's/.*Build ID: *//p'", path), 0);
  for (const char *p = g_out; n < sizeof id && sscanf(p, "%2hhx", &id[n]) == 1;
       p += 2)
    n++;
  assert_true(n >= 8);
  assert_non_null(f = fopen(path, "r+b"));
  fseek(f, 0, SEEK_END);
  len = (size_t)ftell(f);
  rewind(f);
  assert_non_null(data = malloc(len));
  assert_int_equal(fread(data, 1, len, f), len);
  uint8_t *at = memmem(data, len, id, n);
  assert_non_null(at);
  fseek(f, (long)(at - data), SEEK_SET);
  fputc(at[0] ^ 0xff, f);
  assert_int_equal(fclose(f), 0);
  free(data);
}

static void test_mismatched_binary(void **state) {
  char app[4200], dir[4200], out[4200];
  (void)state;
  mkpath(app, sizeof app, "rebuilt-app");
  mkpath(out, sizeof out, "mismatch-sym");
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", g_fixture, app, app), 0);
  record_offline(app, "mismatch", dir, sizeof dir);
  /* Another build at the same path: same code, a different build-id (its
   * first byte flipped in the note). */
  flip_build_id(app);
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out, dir), 0);
  assert_non_null(strstr(g_err, "build-id mismatch"));
  assert_non_null(strstr(g_err, "rebuilt-app"));
  /* Offsets, never a name from the wrong binary. */
  check_recording(out, "rebuilt-app", false, NULL);
}

/* A FIFO where a file is looked for (the recorded image's path, a debug
 * dir's build-id and by-name entries) is passed over, never opened for a
 * read that waits for a writer: symbolize ends (bounded by `timeout` here:
 * before the fix it blocked forever) and says the image was not found. */
static void test_fifo_in_place_of_files(void **state) {
  char app[4200], dbg[4200], dir[4200], out[4200], bid[128];
  (void)state;
  mkpath(app, sizeof app, "fifo-app");
  mkpath(dbg, sizeof dbg, "fifo-dbg");
  mkpath(out, sizeof out, "fifo-sym");
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", g_fixture, app, app), 0);
  record_offline(app, "fifo-rec", dir, sizeof dir);
  assert_int_equal(sh("readelf -n '%s' | sed -n 's/.*Build ID: *//p'", app), 0);
  snprintf(bid, sizeof bid, "%.40s", g_out);
  assert_true(strlen(bid) >= 8);
  assert_int_equal(sh("rm '%s' && mkfifo '%s' && mkdir -p '%s/.build-id/%.2s' "
                      "&& mkfifo '%s/.build-id/%.2s/%s' "
                      "'%s/.build-id/%.2s/%s.debug' '%s/fifo-app'",
                      app, app, dbg, bid, dbg, bid, bid + 2, dbg, bid,
                      bid + 2, dbg), 0);
  assert_int_equal(sh("timeout -s KILL 120 '%s' symbolize --debug-dir '%s' "
                      "-o '%s' '%s'", g_tool, dbg, out, dir), 0);
  assert_non_null(strstr(g_err, "fifo-app: no file with build-id"));
  check_recording(out, "fifo-app", false, NULL);
}

/* A segment symbolize cannot read (a FIFO under a segment's name): OUT
 * holds a "lost" marker in its place, so that verify of OUT says damaged
 * (it said intact, exit 0, the process gone), and the readable process
 * is symbolized as ever. */
static void test_unreadable_segment_marked_lost(void **state) {
  char dir[4200], out[4200];
  (void)state;
  mkpath(out, sizeof out, "lost-sym");
  record_offline(g_fixture, "lost-rec", dir, sizeof dir);
  assert_int_equal(sh("mkfifo '%s/stackrec-4242-000001.zst'", dir), 0);
  /* A sparse 100 GiB file, too (QA, session 40: read whole, it took all
   * memory; out of memory, the run left OUT a partial copy that verified
   * intact): left out quickly, in bounded memory, and marked lost. */
  assert_int_equal(sh("truncate -s 100G '%s/stackrec-4243-000001.zst'", dir),
                   0);
  assert_int_equal(sh("timeout -s KILL 120 '%s' symbolize "
                      "-o '%s' '%s'", g_tool, out, dir), 1);
  assert_non_null(strstr(g_err, "stackrec-4242-000001.zst: not a regular file"));
  assert_non_null(strstr(g_err, "stackrec-4243-000001.zst: larger than the 1 "
                                "GiB symbolize reads"));
  assert_int_equal(sh("'%s' verify '%s'", g_tool, out), 1);
  assert_non_null(strstr(g_out, "stackrec-4242-000001.zst: offset 0: a "
                                "segment lost before this recording was made"));
  assert_non_null(strstr(g_out, "stackrec-4243-000001.zst: offset 0: a "
                                "segment lost before this recording was made"));
  assert_int_equal(sh("rm '%s/stackrec-4242-000001.zst' "
                      "'%s/stackrec-4243-000001.zst'", out, out), 0);
  assert_int_equal(check_recording(out, "symfixture", true, NULL), 2002);
}

/* The same for the separate debug file that libdw's callback looks for by
 * .gnu_debuglink (stkr__find_debuginfo, in every libdwfl user of ours):
 * `symcache build` of a binary whose debug file in .debug/ is a FIFO ends
 * (it blocked in libdw's own open before), with the symbols alone; with the
 * real file there, the cache has its frames. */
static void test_fifo_debuglink(void **state) {
  char app[4200], dbg[4200], out[4200];
  (void)state;
  mkpath(app, sizeof app, "dl/app");
  mkpath(out, sizeof out, "dl-caches");
  snprintf(dbg, sizeof dbg, "%s", app);
  *strrchr(dbg, '/') = '\0';
  assert_int_equal(sh("mkdir -p '%s/.debug' && cp '%s' '%s' && chmod u+w '%s' "
                      "&& objcopy --only-keep-debug '%s' '%s/.debug/app.dbg' "
                      "&& strip --strip-debug '%s' && "
                      "objcopy --add-gnu-debuglink='%s/.debug/app.dbg' '%s'",
                      dbg, g_fixture, app, app, app, dbg, app, dbg, app), 0);
  int frames[2] = {-1, -1};
  for (int k = 0; k < 2; k++) {
    const char *p;
    if (k == 1)
      assert_int_equal(sh("rm '%s/.debug/app.dbg' && "
                          "mkfifo '%s/.debug/app.dbg'", dbg, dbg), 0);
    assert_int_equal(sh("timeout -s KILL 120 '%s' symcache build -o '%s/%d' "
                        "'%s'", g_tool, out, k, app), 0);
    /* "...: N ranges, N frames, ..." */
    assert_non_null(p = strstr(g_out, " ranges, "));
    frames[k] = atoi(p + strlen(" ranges, "));
  }
  /* With the debug file: inlined calls and lines, far more frames than
   * the symbol table alone gives without it. */
  if (!(frames[0] > frames[1] && frames[1] >= 0))
    fail_msg("frames with the debug file %d, with a FIFO %d", frames[0],
             frames[1]);
}

TL_TEST_MAIN("symbolize-files", setup, NULL, test_inproc_symcache_fifo,
             test_mismatched_binary, test_fifo_in_place_of_files,
             test_unreadable_segment_marked_lost, test_fifo_debuglink)
