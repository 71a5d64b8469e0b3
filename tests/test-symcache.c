/*
 * test-symcache.c: the per-build symbol cache (symbolize/symcache.c,
 * docs/SYMCACHE.md; `stackrec symcache build`). On the Mach-O fixtures
 * (tests/apple/fixtures.sh): a cache per slice of a universal dSYM
 * answers llvm-symbolizer's frames at every byte address (arm64, arm64e,
 * x86_64, DWARF 5), and the per-address DWARF path's (the one atos runs on
 * a dSYM) at every byte, frame by frame, so that the build's one-pass
 * walk (symbolize/symcache_walk.c) cannot get an inline chain, a call
 * site, a line, a column or a file wrong anywhere; atos --symcache picks it, but not a cache of another
 * build under this build's name (test-symbolize-apple.c resolves a
 * recording with caches only); and a
 * damaged cache (truncated anywhere, any header field changed, a byte
 * flipped anywhere, another version) is refused with its file and offset,
 * never used.
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

#include "symbolize/symbolize.h"
#include "tests/apple/macho_test.h"
#include "tests/testlib.h"

static char g_cache[4200];

static void uuid_of(const char *name, const char *arch, char out[64]) {
  char path[4200], n[64], a[32];
  FILE *f;
  snprintf(path, sizeof path, "%s/uuids", mt_fx);
  out[0] = '\0';
  assert_non_null(f = fopen(path, "r"));
  while (fscanf(f, "%63s %31s %63s", n, a, out) == 3)
    if (strcmp(n, name) == 0 && strcmp(a, arch) == 0) break;
  fclose(f);
}

/* The arm64 UUIDs of the two fixtures the caches are built from. */
static void app_and_d5_uuids(char app[64], char d5[64]) {
  uuid_of("App", "arm64", app);
  uuid_of("D5-arm64", "arm64", d5);
}

static int setup(void **state) {
  (void)state;
  if (mt_state != 0) return 0;
  snprintf(g_cache, sizeof g_cache, "%s/caches", mt_tmp);
  return mt_sh("'%s' symcache build '%s/App.dSYM' '%s/D5-arm64.dSYM' -o '%s'",
               mt_tool, mt_fx, mt_fx, g_cache) == 0 ? 0 : -1;
}

static void test_equal_to_llvm_symbolizer(void **state) {
  static const char *const archs[] = {"arm64", "arm64e", "x86_64"};
  char u[64];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  for (int k = 0; k < 3; k++) {
    uuid_of("App", archs[k], u);
    assert_int_equal(mt_sh("python3 '%s/tests/apple/compare.py' '%s' "
                           "'%s/App.dSYM/Contents/Resources/DWARF/App' %s 1 "
                           "--ours-obj '%s/%s.stkrsym'", mt_src, mt_tool, mt_fx,
                           archs[k], g_cache, u), 0);
    fprintf(stderr, "%s", mt_out);
  }
  uuid_of("D5-arm64", "arm64", u);
  assert_int_equal(mt_sh("python3 '%s/tests/apple/compare.py' '%s' "
                         "'%s/D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64' - 1 "
                         "--ours-obj '%s/%s.stkrsym'", mt_src, mt_tool, mt_fx,
                         g_cache, u), 0);
  fprintf(stderr, "%s", mt_out);
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* Counts over every byte address of one slice. */
typedef struct walk_counts {
  uint64_t addrs, answered, inlined, deep; /* deep: >= 2 inlined calls */
} walk_counts;

/* Build the cache of one slice in process, then compare it with the DWARF
 * path at every byte address of its __TEXT (the cache's end marker). */
static void compare_slice(const char *input, const char *arch,
                          walk_counts *wc) {
  stkr__symfile *f, *c;
  stkr__symcache_stats st;
  stkr__symfile_info info;
  char err[1024], cache[4200];
  uint8_t hdr[104], last[4];
  FILE *fp;
  snprintf(cache, sizeof cache, "%s/walk-%s.stkrsym", mt_tmp, arch ? arch : "-");
  if (stkr__symfile_open(input, arch, NULL, &f, err, sizeof err) != 0)
    fail_msg("%s", err);
  if (stkr__symcache_write(f, cache, &st, err, sizeof err) != 0)
    fail_msg("%s", err);
  if (stkr__symfile_open(cache, NULL, NULL, &c, err, sizeof err) != 0)
    fail_msg("%s", err);
  stkr__symfile_get_info(f, &info);
  /* The end marker: the last range's start is the end of __TEXT. */
  assert_non_null(fp = fopen(cache, "rb"));
  assert_int_equal(fread(hdr, 1, sizeof hdr, fp), sizeof hdr);
  uint32_t nranges, nframes, end;
  uint64_t lo, hi, base;
  memcpy(&nranges, hdr + 56, 4);
  memcpy(&nframes, hdr + 60, 4);
  assert_true(nranges >= 2);
  /* (the header, 16-byte frames, 8-byte ranges: u32 start - base first) */
  assert_int_equal(fseek(fp, 104 + 16 * (long)nframes + 8 * ((long)nranges - 1),
                         SEEK_SET), 0);
  assert_int_equal(fread(last, 1, sizeof last, fp), sizeof last);
  fclose(fp);
  memcpy(&lo, hdr + 72, 8);
  memcpy(&base, hdr + 88, 8);
  memcpy(&end, last, 4);
  hi = base + end;
  assert_true(lo == info.text_vmaddr && hi > lo && hi - lo < (64u << 20));
  for (uint64_t a = lo; a < hi; a++) {
    stkr__symres d[STKR__SYM_MAX_INLINE], k[STKR__SYM_MAX_INLINE];
    size_t nd = stkr__symfile_lookup(f, a, d, STKR__SYM_MAX_INLINE);
    size_t nk = stkr__symfile_lookup(c, a, k, STKR__SYM_MAX_INLINE);
    wc->addrs++;
    if (nd != nk)
      fail_msg("%s %s 0x%llx: %zu frames from DWARF, %zu from the cache",
               input, arch ? arch : "", (unsigned long long)a, nd, nk);
    for (size_t i = 0; i < nd; i++)
      if (!same_str(d[i].function, k[i].function) ||
          !same_str(d[i].file, k[i].file) || d[i].line != k[i].line ||
          d[i].column != k[i].column || d[i].inlined != k[i].inlined)
        fail_msg("%s %s 0x%llx frame %zu: DWARF %s %s:%u:%u%s, cache %s "
                 "%s:%u:%u%s", input, arch ? arch : "", (unsigned long long)a,
                 i, d[i].function, d[i].file, d[i].line, d[i].column,
                 d[i].inlined ? " (inlined)" : "", k[i].function, k[i].file,
                 k[i].line, k[i].column, k[i].inlined ? " (inlined)" : "");
    wc->answered += nd > 0;
    wc->inlined += nd > 1;
    wc->deep += nd > 2;
  }
  stkr__symfile_free(c);
  stkr__symfile_free(f);
}

static void test_equal_to_dwarf_path(void **state) {
  static const char *const archs[] = {"arm64", "arm64e", "x86_64"};
  char in[4200];
  walk_counts wc = {0};
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(in, sizeof in, "%s/App.dSYM", mt_fx);
  for (int k = 0; k < 3; k++) compare_slice(in, archs[k], &wc);
  snprintf(in, sizeof in, "%s/D5-arm64.dSYM", mt_fx); /* DWARF 5 */
  compare_slice(in, NULL, &wc);
  snprintf(in, sizeof in, "%s/Other-arm64.dSYM", mt_fx); /* -O1 */
  compare_slice(in, NULL, &wc);
  snprintf(in, sizeof in, "%s/Objc-arm64.dSYM", mt_fx); /* -[Probe bump:] */
  compare_slice(in, NULL, &wc);
  snprintf(in, sizeof in, "%s/App-x86_64", mt_fx); /* no DWARF: symbols */
  compare_slice(in, NULL, &wc);
  /* Frames written out every few chains (a large dSYM's way, 2^18 frames
   * at a time): a repeat of a chain written out is stored again, and
   * every answer stays the same. */
  size_t kept = stkr__symcache_frames_kept;
  stkr__symcache_frames_kept = 8;
  snprintf(in, sizeof in, "%s/App.dSYM", mt_fx);
  compare_slice(in, "arm64", &wc);
  snprintf(in, sizeof in, "%s/Other-arm64.dSYM", mt_fx);
  compare_slice(in, NULL, &wc);
  stkr__symcache_frames_kept = kept;
  fprintf(stderr, "%llu addresses: %llu answered, %llu in inlined calls, %llu "
          "in two or more\n", (unsigned long long)wc.addrs,
          (unsigned long long)wc.answered, (unsigned long long)wc.inlined,
          (unsigned long long)wc.deep);
  /* The fixtures have inline chains several deep: the comparison above
   * covered them (a fixture change that loses them fails here). */
  assert_true(wc.answered > wc.addrs / 2);
  assert_true(wc.inlined > wc.addrs / 20);
  assert_true(wc.deep > 1000);
}

/* The bytes of the cache of one slice built with stkr__dw_walk_mode =
 * mode; *streamed: how the kept answers came. */
static uint8_t *build_with(const char *input, const char *arch, int mode,
                           size_t *len, int *streamed) {
  stkr__symfile *f;
  stkr__symcache_stats st;
  char err[1024], cache[4200];
  uint8_t *p;
  FILE *fp;
  snprintf(cache, sizeof cache, "%s/mode%d.stkrsym", mt_tmp, mode);
  if (stkr__symfile_open(input, arch, NULL, &f, err, sizeof err) != 0)
    fail_msg("%s", err);
  stkr__dw_walk_mode = mode;
  int rc = stkr__symcache_write(f, cache, &st, err, sizeof err);
  stkr__dw_walk_mode = 0;
  *streamed = stkr__dw_walk_streamed;
  stkr__symfile_free(f);
  if (rc != 0) fail_msg("%s", err);
  assert_non_null(fp = fopen(cache, "rb"));
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  rewind(fp);
  assert_non_null(p = malloc(*len ? *len : 1));
  assert_int_equal(fread(p, 1, *len, fp), *len);
  fclose(fp);
  return p;
}

/* Every way of walking the DWARF writes the same file: each CU answered as
 * it is read in two threads (streamed: the default, which the fixtures
 * allow), the whole file first, a streamed build restarted as a whole file
 * after its last CU (every range given forgotten), and streamed in one
 * thread. */
static void test_walk_modes_same_file(void **state) {
  static const struct {
    const char *in, *arch;
    bool streams; /* with DWARF: streamed by default */
  } slices[] = {{"App.dSYM", "arm64", true},   {"App.dSYM", "arm64e", true},
                {"App.dSYM", "x86_64", true},  {"D5-arm64.dSYM", NULL, true},
                {"Other-arm64.dSYM", NULL, true}, {"Objc-arm64.dSYM", NULL, true},
                {"App-x86_64", NULL, false}};
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  for (size_t i = 0; i < sizeof slices / sizeof slices[0]; i++) {
    char in[4200];
    size_t len[4];
    int streamed[4];
    uint8_t *p[4];
    snprintf(in, sizeof in, "%s/%s", mt_fx, slices[i].in);
    for (int m = 0; m < 4; m++)
      p[m] = build_with(in, slices[i].arch, m, &len[m], &streamed[m]);
    if (streamed[0] != (slices[i].streams ? 2 : 0) || streamed[1] ||
        streamed[2] || streamed[3] != (slices[i].streams ? 1 : 0))
      fail_msg("%s %s: streamed %d %d %d %d", slices[i].in,
               slices[i].arch ? slices[i].arch : "", streamed[0], streamed[1],
               streamed[2], streamed[3]);
    for (int m = 1; m < 4; m++)
      if (len[m] != len[0] || memcmp(p[m], p[0], len[0]) != 0)
        fail_msg("%s %s: mode %d wrote another file (%zu against %zu bytes)",
                 slices[i].in, slices[i].arch ? slices[i].arch : "", m, len[m],
                 len[0]);
    for (int m = 0; m < 4; m++) free(p[m]);
  }
  /* A restart after frames were written out (every few chains here)
   * writes them again from the start: the same file as without. */
  char in[4200];
  size_t len[2], kept = stkr__symcache_frames_kept;
  int streamed[2];
  uint8_t *p[2];
  snprintf(in, sizeof in, "%s/App.dSYM", mt_fx);
  stkr__symcache_frames_kept = 8;
  p[0] = build_with(in, "arm64", 0, &len[0], &streamed[0]);
  p[1] = build_with(in, "arm64", 2, &len[1], &streamed[1]);
  stkr__symcache_frames_kept = kept;
  assert_int_equal(streamed[0], 2);
  assert_int_equal(streamed[1], 0);
  if (len[1] != len[0] || memcmp(p[1], p[0], len[0]) != 0)
    fail_msg("frames written out, restarted: another file (%zu against %zu "
             "bytes)", len[1], len[0]);
  free(p[0]);
  free(p[1]);
}

/* A cache given as the input of a build: refused (it holds no DWARF), and
 * the cache itself is left as it was. */
static void test_cache_not_an_input(void **state) {
  char u[64], src[4200], before[64], after[64];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  uuid_of("D5-arm64", "arm64", u);
  snprintf(src, sizeof src, "%s/%s.stkrsym", g_cache, u);
  assert_int_equal(mt_sh("cksum < '%s'", src), 0);
  snprintf(before, sizeof before, "%s", mt_out);
  assert_int_equal(mt_sh("'%s' symcache build '%s' -o '%s'", mt_tool, src,
                         g_cache), 3);
  assert_non_null(strstr(mt_err, "not a Mach-O file or dSYM"));
  assert_int_equal(mt_sh("cksum < '%s'", src), 0);
  snprintf(after, sizeof after, "%s", mt_out);
  assert_string_equal(before, after);
}

/* A .dSYM bundle holding two DWARF files (a merged bundle): `symcache
 * build` of the bundle converts both, each under its own UUID (it took the
 * one named after the bundle and said nothing of the other). */
static void test_bundle_with_two_files(void **state) {
  char u_app[64], u_d5[64], out[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  app_and_d5_uuids(u_app, u_d5);
  snprintf(out, sizeof out, "%s/two-caches", mt_tmp);
  assert_int_equal(
      mt_sh("rm -rf '%s/Two.dSYM' '%s' && mkdir -p '%s/Two.dSYM/Contents/"
            "Resources/DWARF' && cp '%s/App.dSYM/Contents/Resources/DWARF/App'"
            " '%s/Two.dSYM/Contents/Resources/DWARF/Two' && cp '%s/D5-arm64."
            "dSYM/Contents/Resources/DWARF/D5-arm64' '%s/Two.dSYM/Contents/"
            "Resources/DWARF/' && '%s' symcache build '%s/Two.dSYM' -o '%s'",
            mt_tmp, out, mt_tmp, mt_fx, mt_tmp, mt_fx, mt_tmp, mt_tool, mt_tmp,
            out),
      0);
  assert_int_equal(mt_sh("test -s '%s/%s.stkrsym' && test -s '%s/%s.stkrsym'",
                         out, u_app, out, u_d5), 0);
  /* -arch: the files that have the slice (App's x86_64, not D5-arm64,
   * which has none: no error for it); an error only if none has it. */
  assert_int_equal(mt_sh("'%s' symcache build -arch x86_64 '%s/Two.dSYM' "
                         "-o '%s'", mt_tool, mt_tmp, out), 0);
  assert_string_equal(mt_err, "");
  assert_int_equal(
      mt_sh("d='%s/D5twice.dSYM/Contents/Resources/DWARF' && rm -rf '%s/"
            "D5twice.dSYM' && mkdir -p \"$d\" && cp '%s/D5-arm64.dSYM/Contents/"
            "Resources/DWARF/D5-arm64' \"$d/a\" && cp \"$d/a\" \"$d/b\" && "
            "'%s' symcache build -arch x86_64 '%s/D5twice.dSYM' -o '%s'",
            mt_tmp, mt_tmp, mt_fx, mt_tool, mt_tmp, out),
      3);
  assert_non_null(strstr(mt_err, "none of its 2 DWARF files has a x86_64 "
                                 "slice"));
}

static void test_atos_symcache_dir(void **state) {
  char a[4096];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("'%s' atos -o '%s/App.dSYM' -arch arm64 -i 0x100004100 "
                         "0x100004404", mt_tool, mt_fx), 0);
  snprintf(a, sizeof a, "%s", mt_out);
  /* The same answers through the cache (every byte: the test above). */
  assert_int_equal(mt_sh("'%s' atos --symcache '%s' -o '%s/App.dSYM' -arch "
                         "arm64 -i 0x100004100 0x100004404", mt_tool, g_cache,
                         mt_fx), 0);
  assert_string_equal(mt_out, a);
  assert_string_equal(mt_err, "");
}

/* A cache under the name of another build: refused (its UUID is in its
 * header), the DWARF answers instead, and a note says why. */
static void test_wrong_build_not_used(void **state) {
  char u_app[64], u_d5[64], a[4096];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  app_and_d5_uuids(u_app, u_d5);
  assert_int_equal(mt_sh("'%s' atos -o '%s/App.dSYM' -arch arm64 -i 0x100004100",
                         mt_tool, mt_fx), 0);
  snprintf(a, sizeof a, "%s", mt_out);
  assert_int_equal(mt_sh("rm -rf '%s/wrong' && mkdir '%s/wrong' && cp "
                         "'%s/%s.stkrsym' '%s/wrong/%s.stkrsym' && '%s' atos "
                         "--symcache '%s/wrong' -o '%s/App.dSYM' -arch arm64 -i "
                         "0x100004100", mt_tmp, mt_tmp, g_cache, u_d5, mt_tmp,
                         u_app, mt_tool, mt_tmp, mt_fx), 0);
  assert_string_equal(mt_out, a);
  assert_non_null(strstr(mt_err, "symbol cache not used"));
  assert_non_null(strstr(mt_err, "another build"));
}

/* Damage: every way must be refused, naming the file and an offset. */
static void test_damaged_refused(void **state) {
  char u[64], src[4200], dst[4200];
  FILE *f;
  long size;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  uuid_of("D5-arm64", "arm64", u);
  snprintf(src, sizeof src, "%s/%s.stkrsym", g_cache, u);
  snprintf(dst, sizeof dst, "%s/bad.stkrsym", mt_tmp);
  assert_non_null(f = fopen(src, "rb"));
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fclose(f);
  /* Truncated: at 0, in the header, at a quarter, half, end - 1. */
  const long cuts[] = {0, 7, 50, 95, 96, size / 4, size / 2, size - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    assert_int_equal(mt_sh("head -c %ld '%s' > '%s' && '%s' atos -o '%s' 0x1",
                           cuts[i], src, dst, mt_tool, dst), 3);
    if (!strstr(mt_err, "bad.stkrsym") ||
        (cuts[i] >= 8 && !strstr(mt_err, ": offset ")))
      fail_msg("cut %ld: %s", cuts[i], mt_err);
  }
  /* One byte changed anywhere: header fields, ranges, frames, strings. */
  for (long off = 8; off < size; off += (off < 96 ? 4 : size / 50 + 1)) {
    assert_int_equal(
        mt_sh("cp '%s' '%s' && printf '\\x5a' | dd of='%s' bs=1 seek=%ld "
              "conv=notrunc status=none && '%s' atos -o '%s' 0x100004000",
              src, dst, dst, off, mt_tool, dst),
        3);
    if (!strstr(mt_err, "bad.stkrsym: offset "))
      fail_msg("byte %ld: %s", off, mt_err);
  }
}

MT_TEST_MAIN("symcache", 6, 12, setup, test_equal_to_llvm_symbolizer,
             test_equal_to_dwarf_path, test_walk_modes_same_file,
             test_cache_not_an_input, test_bundle_with_two_files,
             test_atos_symcache_dir, test_wrong_build_not_used,
             test_damaged_refused)
