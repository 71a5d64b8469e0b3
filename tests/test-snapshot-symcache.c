/*
 * test-snapshot-symcache.c: `stackrec snapshot --symcache DIR` (issue 12)
 * against tests/snapshot_fixture.c: cold, warm, damaged and --no-symcache
 * runs give the same frames. Apart from test-snapshot.c so that each
 * target stays within the suite's 120 s under TSan on a loaded machine.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/snapshot_harness.h"
#include "tests/testlib.h"

/* cr_out without what changes from run to run: each thread's stop
 * times, and the busy threads' stacks (they run). Into a malloc'd copy. */
static char *stable_text(void) {
  size_t cap = strlen(cr_out) + 1, n = 0;
  char *out = malloc(cap);
  bool skip = false;
  assert_non_null(out);
  for (const char *p = cr_out; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) + 1 : strlen(p), keep = len;
    if (strncmp(p, "TID ", 4) == 0) { /* "TID n (name): stopped ..." */
      const char *paren = memchr(p, ')', len);
      skip = memmem(p, len, "(snap-busy", 10) != NULL;
      if (paren) keep = (size_t)(paren - p) + 1;
    } else if (skip) {
      keep = 0;
    }
    memcpy(out + n, p, keep);
    n += keep;
    p += len;
  }
  out[n] = '\0';
  return out;
}

/* libc's separate debug file (libc6-dbg): the images snapshot reads from
 * DWARF, and so fills caches for. */
static bool libc_debug_present(void) {
  return tl_system("ls /usr/lib/debug/.build-id/*/*.debug >/dev/null 2>&1 "
                   "&& ldd /bin/true | grep -q libc.so.6") == 0;
}

/* --symcache DIR: the first snapshot answers from DWARF and writes the
 * caches after printing; the next answers from them, the same frames; a
 * damaged cache is refused with a note (same frames again, and written
 * anew); --no-symcache neither reads nor writes; the default directory is
 * $XDG_CACHE_HOME/stackrec/symcache. */
static void test_symcache_same_answers(void **state) {
  char dir[4200], xdg[4200], file[4300] = "", cached[80];
  char *plain, *cold, *warm, *damaged;
  fixture f;
  int n;
  (void)state;
  snprintf(dir, sizeof dir, "%s/symcache", g_tmp);
  snprintf(xdg, sizeof xdg, "%s/xdg", g_tmp);
  tl_rm_rf(dir);
  tl_rm_rf(xdg);
  setenv("XDG_CACHE_HOME", xdg, 1);
  fixture_start(&f, 10, "");
  assert_int_equal(cr_run("snapshot --no-symcache %d", (int)f.pid), 0);
  plain = stable_text();
  assert_int_not_equal(access(xdg, F_OK), 0); /* nothing written */
  assert_int_equal(cr_run("snapshot --symcache '%s' %d", dir, (int)f.pid), 0);
  cold = stable_text();
  assert_string_equal(plain, cold);
  if (!libc_debug_present()) {
    print_message("SKIP (in part): no separate debug files installed "
                  "(libc6-dbg): nothing read from DWARF to cache\n");
    goto out;
  }
  /* libc (and the loader, where a stack shows it: its debug file is in
   * the same package) */
  if (!strstr(cr_err, "symbol cache") || !strstr(cr_err, "wrote "))
    fail_msg("no cache written:\n%s", cr_err);
  /* A slow machine (sanitizers) may leave some for the next runs (the
   * fill starts none after 2 s): until one writes nothing, each gives the
   * same frames. */
  for (int run = 0; run < 8; run++) {
    assert_int_equal(cr_run("snapshot --symcache '%s' %d", dir, (int)f.pid),
                     0);
    warm = stable_text();
    assert_string_equal(plain, warm);
    free(warm);
    if (!strstr(cr_err, "wrote")) break;
  }
  assert_null(strstr(cr_err, "wrote")); /* nothing left to write */
  n = tl_count_files(dir, ".stkrsym");
  assert_true(n >= 1);
  snprintf(cached, sizeof cached, "%d image%s answered from symbol caches",
           n, n == 1 ? "" : "s");
  if (!strstr(cr_err, cached)) fail_msg("wanted \"%s\":\n%s", cached, cr_err);
  /* A byte of its first range changed: refused by its checksum, the
   * DWARF read, the same frames, and the cache written again. */
  tl_find_file(dir, ".stkrsym", file, sizeof file);
  assert_int_equal(tl_system("printf 'X' | dd of='%s' bs=1 seek=100 "
                             "conv=notrunc status=none", file), 0);
  assert_int_equal(cr_run("snapshot --symcache '%s' %d", dir, (int)f.pid), 0);
  damaged = stable_text();
  assert_string_equal(plain, damaged);
  free(damaged);
  assert_non_null(strstr(cr_err, "symbol cache refused"));
  assert_non_null(strstr(cr_err, "checksum"));
  assert_non_null(strstr(cr_err, "wrote 1 symbol cache"));
  assert_int_equal(cr_run("snapshot --symcache '%s' %d", dir, (int)f.pid), 0);
  if (!strstr(cr_err, cached)) fail_msg("wanted \"%s\":\n%s", cached, cr_err);
  assert_null(strstr(cr_err, "refused"));
  /* The default directory (one run: all of them, or what 2 s allowed). */
  assert_int_equal(cr_run("snapshot %d", (int)f.pid), 0);
  snprintf(file, sizeof file, "%s/stackrec/symcache", xdg);
  assert_true(tl_count_files(file, ".stkrsym") >= 1);
  cr_expect(2, "exclude each other", "snapshot --symcache /tmp "
            "--no-symcache 1");
out:
  unsetenv("XDG_CACHE_HOME");
  free(plain);
  free(cold);
  fixture_expect_ok(&f);
}

int main(void) {
  return TL_RUN_GROUP("snapshot-symcache", setup, NULL,
                      TL_CASES(NULL, teardown, test_symcache_same_answers));
}
