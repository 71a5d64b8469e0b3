/*
 * test-symcache-elf.c: the symbol cache of ELF builds (symbolize/
 * symcache_elf.c; `stackrec symcache build FILE.so`). A cache built from an
 * ELF file answers, at every byte address of its executable segments,
 * exactly what the ELF backend (symbolize_elf.c, the one `stackrec
 * snapshot` and `stackrec symbolize` run) answers from the DWARF, frame by
 * frame (function, file, line, column, inlined): on the snapshot fixture
 * (Bazel's, symbols only; and built with -g -O2: file:line, inlined
 * calls), and on libc with its separate debug file
 * (/usr/lib/debug/.build-id, package libc6-dbg) when that is installed —
 * thousands of inline chains, .cold parts, aliases and IFUNCs. The cache
 * is keyed by the build-id; the CLI names it <hex>.stkrsym and refuses an
 * ELF file without build-id (exit 3). `stackrec symbolize --symcache`
 * gives the same frames from the cache as from the DWARF, and refuses a
 * cache of another build.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbolize/symbolize.h"
#include "tests/testlib.h"

static char g_tmp[4096], g_fixture[4096], g_fixture_g[4096], g_tool[4096];
static const char *const g_libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";

/* The executable segments' span, as symcache_elf.c takes it. */
static void text_span(const char *path, uint64_t *lo, uint64_t *hi) {
  int fd = open(path, O_RDONLY);
  size_t n = 0;
  Elf *e;
  assert_true(fd >= 0);
  (void)elf_version(EV_CURRENT);
  assert_non_null(e = elf_begin(fd, ELF_C_READ, NULL));
  assert_int_equal(elf_getphdrnum(e, &n), 0);
  *lo = UINT64_MAX;
  *hi = 0;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
        !(ph.p_flags & PF_X))
      continue;
    if (ph.p_vaddr < *lo) *lo = ph.p_vaddr;
    if (ph.p_vaddr + ph.p_memsz > *hi) *hi = ph.p_vaddr + ph.p_memsz;
  }
  elf_end(e);
  close(fd);
  assert_true(*lo < *hi);
}

static uint64_t g_inlined; /* addresses answered with an inline chain */

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* Build path's cache with the library call, then compare it with the
 * backend at every `step`-th byte address. @return addresses with an
 * answer (the test fails on any difference). */
static uint64_t compare(const char *path, bool full_paths, unsigned step) {
  char out[4200], err[1024], name[80];
  uint8_t id[32];
  stkr__symfile *f;
  stkr__symcache_stats st;
  stkr__symcache *c;
  stkr__symbe *be;
  uint64_t lo, hi, answered = 0, bad = 0;
  size_t id_len;
  bool removed;
  int n = stkr__symelf_build_id(path, id, sizeof id), fd;

  assert_true(n > 0);
  stkr__symcache_elf_name(id, (size_t)n, name, sizeof name);
  snprintf(out, sizeof out, "%s/%s.stkrsym", g_tmp, name);
  assert_int_equal(stkr__symfile_open(path, NULL, NULL, &f, err, sizeof err), 0);
  if (stkr__symcache_write(f, out, &st, err, sizeof err) != 0)
    fail_msg("%s", err);
  stkr__symfile_free(f);
  assert_true((fd = open(out, O_RDONLY)) >= 0);
  if (stkr__symcache_open(fd, out, &c, err, sizeof err) != 0) fail_msg("%s", err);
  close(fd);
  const uint8_t *cid = stkr__symcache_id(c, &id_len);
  assert_int_equal(id_len, n);
  assert_memory_equal(cid, id, id_len);

  text_span(path, &lo, &hi);
  stkr__symbe_opts o = {.offline = true, .full_paths = full_paths};
  stkr__symimg im = {.path = path, .text_start = lo, .text_end = hi,
                     .build_id = id, .build_id_len = (size_t)n};
  assert_int_equal(stkr__symbe_create(&o, &be), 0);
  assert_int_equal(stkr__symbe_set_images(be, &im, 1, &removed), 0);
  for (uint64_t a = lo; a < hi; a += step) {
    stkr__symres want[STKR__SYM_MAX_INLINE], got[STKR__SYM_MAX_INLINE];
    const stkr__symimg *img;
    size_t nw = stkr__symbe_resolve(be, a + 1, &img, want, STKR__SYM_MAX_INLINE);
    size_t ng = stkr__symcache_lookup(c, a, got, STKR__SYM_MAX_INLINE);
    bool same = nw == ng;
    for (size_t k = 0; same && k < nw; k++)
      same = same_str(want[k].function, got[k].function) &&
             same_str(want[k].file, got[k].file) &&
             want[k].line == got[k].line && want[k].column == got[k].column &&
             want[k].inlined == got[k].inlined;
    answered += nw > 0;
    g_inlined += nw > 1;
    if (!same && bad++ < 10)
      print_message("%s+0x%llx: DWARF %zu frames (%s %s:%u:%u), cache %zu "
                    "(%s %s:%u:%u)\n", path, (unsigned long long)a, nw,
                    nw ? want[0].function : "", nw ? want[0].file : "",
                    nw ? want[0].line : 0, nw ? want[0].column : 0, ng,
                    ng ? got[0].function : "", ng ? got[0].file : "",
                    ng ? got[0].line : 0, ng ? got[0].column : 0);
  }
  print_message("%s: %llu ranges, %llu of %llu addresses answered, %llu "
                "different\n", path, (unsigned long long)st.ranges,
                (unsigned long long)answered,
                (unsigned long long)((hi - lo + step - 1) / step),
                (unsigned long long)bad);
  assert_int_equal(bad, 0);
  stkr__symbe_free(be);
  stkr__symcache_free(c);
  return answered;
}

static void test_fixture_equal(void **state) {
  (void)state;
  /* Bazel's fastbuild fixture: symbols only (linked with -Wl,-S). */
  assert_true(compare(g_fixture, false, 1) > 1000);
  /* The same code with -g -O2: file:line, inline chains. */
  g_inlined = 0;
  assert_true(compare(g_fixture_g, false, 1) > 1000);
  assert_true(g_inlined > 0);
  /* (Not equal to the backend with full_paths, atos's: it joins these
   * relative names to comp_dir; the backend takes no cache then.) */
}

/* Sanitizers slow the DWARF side ~5x: every 7th byte there. */
static unsigned libc_step(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 7;
#else
  return 1;
#endif
}

static bool libc_debug_present(void) {
  uint8_t id[32];
  char hexid[80], p[200];
  int n = stkr__symelf_build_id(g_libc, id, sizeof id);
  if (n <= 1) return false;
  stkr__symcache_elf_name(id, (size_t)n, hexid, sizeof hexid);
  snprintf(p, sizeof p, "/usr/lib/debug/.build-id/%.2s/%s.debug", hexid,
           hexid + 2);
  return access(p, R_OK) == 0;
}

static void test_libc_equal(void **state) {
  (void)state;
  if (!libc_debug_present()) {
    print_message("SKIP: libc's debug file is not installed (libc6-dbg)\n");
    skip();
  }
  assert_true(compare(g_libc, false, libc_step()) > 100000 / libc_step());
}

static void test_cli(void **state) {
  char cmd[13000], dir[4200], nobid[4200], out[4400];
  uint8_t id[32];
  char name[80];
  int n;
  (void)state;
  snprintf(dir, sizeof dir, "%s/cli", g_tmp);
  snprintf(cmd, sizeof cmd, "'%s' symcache build '%s' -o '%s' >/dev/null",
           g_tool, g_fixture, dir);
  assert_int_equal(tl_system("%s", cmd), 0);
  assert_true((n = stkr__symelf_build_id(g_fixture, id, sizeof id)) > 0);
  stkr__symcache_elf_name(id, (size_t)n, name, sizeof name);
  snprintf(out, sizeof out, "%s/%s.stkrsym", dir, name);
  assert_int_equal(access(out, R_OK), 0);
  /* Without a build-id no image could ever be matched with it. */
  snprintf(nobid, sizeof nobid, "%s/nobid", g_tmp);
  if (tl_system("objcopy --remove-section .note.gnu.build-id '%s' '%s'",
                g_fixture, nobid) != 0) {
    print_message("SKIP: objcopy failed\n");
    return;
  }
  assert_int_equal(tl_system("'%s' symcache build '%s' -o '%s' 2>/dev/null",
                             g_tool, nobid, dir), 3);
}

/* `stackrec symbolize --symcache CDIR` on an offline recording of a shell
 * (stacks through libc): the same frames as from libc's DWARF; a cache
 * of another build under libc's name is refused with a warning. */
static void test_symbolize_uses_cache(void **state) {
  char rec[4200], cdir[4200], o1[4200], o2[4200], name[80], bad[4400];
  char *d1, *d2;
  uint8_t id[32];
  int n;
  (void)state;
  if (!libc_debug_present()) {
    print_message("SKIP: libc's debug file is not installed (libc6-dbg)\n");
    skip();
  }
  snprintf(rec, sizeof rec, "%s/rec", g_tmp);
  snprintf(cdir, sizeof cdir, "%s/libc-cache", g_tmp);
  snprintf(o1, sizeof o1, "%s/dwarf", g_tmp);
  snprintf(o2, sizeof o2, "%s/cached", g_tmp);
#if defined(__SANITIZE_THREAD__)
  /* The TSan runtime cannot be preloaded into /bin/sh (built without it). */
  print_message("SKIP under TSan: the hooks cannot go into /bin/sh\n");
  skip();
#endif
  /* Under ASan the hooks (built with it) need its runtime first. */
  char rt[1024] = "";
#if defined(__SANITIZE_ADDRESS__)
  tl_asan_runtime(rt, sizeof rt);
#endif
  assert_int_equal(tl_system("%s%s%sSTACKREC_SYMBOLIZE=offline '%s' record -q "
                             "-o '%s' -- /bin/sh -c 'cat /etc/hostname; "
                             "uname' >/dev/null 2>&1", rt[0] ? "LD_PRELOAD='"
                             : "", rt, rt[0] ? "' " : "", g_tool, rec), 0);
  assert_int_equal(tl_system("'%s' symcache build '%s' -o '%s' >/dev/null",
                             g_tool, g_libc, cdir), 0);
  assert_int_equal(tl_system("'%s' symbolize '%s' -o '%s' 2>/dev/null && "
                             "'%s' dump --frames '%s' > '%s.txt'", g_tool, rec,
                             o1, g_tool, o1, o1), 0);
  assert_int_equal(tl_system("'%s' symbolize --symcache '%s' '%s' -o '%s' "
                             "2>/dev/null && '%s' dump --frames '%s' > "
                             "'%s.txt'", g_tool, cdir, rec, o2, g_tool, o2,
                             o2), 0);
  snprintf(bad, sizeof bad, "%s.txt", o1);
  d1 = tl_slurp_alloc(bad, NULL);
  snprintf(bad, sizeof bad, "%s.txt", o2);
  d2 = tl_slurp_alloc(bad, NULL);
  assert_non_null(d1);
  assert_non_null(d2);
  assert_non_null(strstr(d1, "sysdeps")); /* libc's file:line were there */
  assert_string_equal(d1, d2);
  free(d1);
  free(d2);
  /* The fixture's cache under libc's build-id: refused, said, not used. */
  assert_true((n = stkr__symelf_build_id(g_libc, id, sizeof id)) > 0);
  stkr__symcache_elf_name(id, (size_t)n, name, sizeof name);
  snprintf(bad, sizeof bad, "%s/%s.stkrsym", cdir, name);
  assert_int_equal(tl_system("'%s' symcache build '%s' -o '%s' >/dev/null && "
                             "mv '%s'/$(basename $(ls '%s'/*.stkrsym | grep -v "
                             "%s)) '%s'", g_tool, g_fixture, cdir, cdir, cdir,
                             name, bad), 0);
  assert_int_equal(tl_system("rm -rf '%s' && '%s' symbolize --symcache '%s' "
                             "'%s' -o '%s' 2>&1 | grep -q 'another build'", o2,
                             g_tool, cdir, rec, o2), 0);
}

int main(void) {
  const char *tmp = getenv("TEST_TMPDIR");
  snprintf(g_tmp, sizeof g_tmp, "%s/symcache-elf", tmp ? tmp : "/tmp");
  tl_rm_rf(g_tmp);
  if (tl_system("mkdir -p '%s'", g_tmp) != 0) return 1;
  tl_runfile(g_fixture, sizeof g_fixture, "tests/snapshot_fixture");
  tl_runfile(g_tool, sizeof g_tool, "tools/stackrec");
  tl_runfile(g_fixture_g, sizeof g_fixture_g, "tests/symcache_elf_fixture");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixture_equal),
      cmocka_unit_test(test_libc_equal),
      cmocka_unit_test(test_cli),
      cmocka_unit_test(test_symbolize_uses_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
