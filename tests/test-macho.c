/*
 * test-macho.c: the Mach-O reader (macho/) on real files built by
 * tests/apple/fixtures.sh (clang + ld64.lld-14 + dsymutil-14): thin and
 * universal files, arm64 / arm64e / x86_64 slices, UUIDs as llvm-dwarfdump
 * prints them, __TEXT and __DWARF, the symbol table; and on damaged copies:
 * every load command's size, section and symbol counts made absurd, fat
 * headers pointing outside the file, truncation at every load command and
 * inside every __DWARF section, single bytes flipped all over the headers.
 * Each must give an error naming the byte offset (or parse), never read
 * outside the bytes given (run under ASan by tools/test.sh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "macho/macho.h"
#include "tests/apple/macho_test.h"
#include "tests/testlib.h"

static uint8_t *load(const char *name, size_t *len) {
  char path[4200];
  FILE *f;
  uint8_t *d;
  long n;
  snprintf(path, sizeof path, "%s/%s", mt_fx, name);
  f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  d = malloc((size_t)n);
  assert_non_null(d);
  assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return d;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Parse the only slice of a thin file. @return the parse result. */
static int parse_thin(const uint8_t *d, size_t len, stkr_macho_image *im,
                      char *err, size_t cap) {
  stkr_macho_slice s;
  size_t n;
  int rc = stkr_macho_slices(d, len, &s, 1, &n, err, cap);
  if (rc != 0) return rc;
  assert_int_equal(n, 1);
  return stkr_macho_parse(d, len, &s, im, err, cap);
}

static void test_universal(void **state) {
  stkr_macho_slice sl[STKR_MACHO_MAX_SLICES];
  const char *want[] = {"arm64", "arm64e", "x86_64"};
  bool seen[3] = {false, false, false};
  char err[256];
  size_t len, n;
  uint8_t *d;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  d = load("App", &len);
  assert_true(stkr_macho_is_macho(d, len));
  assert_int_equal(stkr_macho_slices(d, len, sl, STKR_MACHO_MAX_SLICES, &n,
                                     err, sizeof err), 0);
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++) {
    stkr_macho_image im;
    uint8_t u[16];
    const char *a = stkr_macho_arch_name(sl[i].cputype, sl[i].cpusubtype);
    assert_non_null(a);
    assert_int_equal(stkr_macho_parse(d, len, &sl[i], &im, err, sizeof err), 0);
    for (int k = 0; k < 3; k++)
      if (strcmp(a, want[k]) == 0) seen[k] = true;
    assert_true(mt_uuid("App", a, u));
    assert_true(im.has_uuid);
    assert_memory_equal(im.uuid, u, 16); /* as llvm-dwarfdump --uuid says */
    assert_true(im.has_text);
    assert_int_equal(im.text_vmaddr, 0x100000000ull);
    assert_non_null(stkr_macho_section_find(&im, "__TEXT", "__text"));
    assert_true(im.has_symtab);
    stkr_macho_image_free(&im);
  }
  assert_true(seen[0] && seen[1] && seen[2]);
  free(d);
}

typedef struct symseen {
  int entry, cstatic, tmpl;
} symseen;

static void on_sym(void *arg, const char *name, uint64_t addr, uint8_t sect) {
  symseen *s = arg;
  (void)sect;
  assert_true(addr >= 0x100000000ull);
  if (strcmp(name, "_entry") == 0) s->entry++;
  if (strcmp(name, "_cstatic") == 0) s->cstatic++;
  if (strcmp(name, "__ZN4app05tmpl0IiEET_S1_") == 0) s->tmpl++;
}

static void test_thin_and_dsym(void **state) {
  stkr_macho_image im;
  symseen s = {0, 0, 0};
  uint64_t bad = 1;
  char err[256], u1[37], u2[37];
  size_t len;
  uint8_t *d = NULL, uuid[16];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  d = load("App-arm64", &len);
  assert_int_equal(parse_thin(d, len, &im, err, sizeof err), 0);
  assert_int_equal(im.cputype, STKR_MACHO_CPU_ARM64);
  stkr_macho_symbols(d, &im, on_sym, &s, &bad);
  assert_int_equal(bad, 0);
  assert_int_equal(s.entry, 1);
  assert_int_equal(s.cstatic, 1); /* static functions are in the symtab */
  assert_int_equal(s.tmpl, 1);
  memcpy(uuid, im.uuid, 16);
  assert_null(stkr_macho_section_find(&im, "__DWARF", "__debug_info"));
  stkr_macho_image_free(&im);
  free(d);
  /* The dSYM: same UUID, DWARF sections with data. */
  d = load("App-arm64.dSYM/Contents/Resources/DWARF/App-arm64", &len);
  assert_int_equal(parse_thin(d, len, &im, err, sizeof err), 0);
  stkr_macho_uuid_str(im.uuid, u1);
  stkr_macho_uuid_str(uuid, u2);
  assert_string_equal(u1, u2);
  const stkr_macho_section *info =
      stkr_macho_section_find(&im, "__DWARF", "__debug_info");
  assert_non_null(info);
  assert_true(info->has_data && info->size > 1000);
  assert_non_null(stkr_macho_section_find(&im, "__DWARF", "__debug_line"));
  stkr_macho_image_free(&im);
  free(d);
  /* arm64e: its subtype. */
  d = load("App-arm64e", &len);
  assert_int_equal(parse_thin(d, len, &im, err, sizeof err), 0);
  assert_string_equal(stkr_macho_arch_name(im.cputype, im.cpusubtype), "arm64e");
  stkr_macho_image_free(&im);
  free(d);
}

static void test_arch_names(void **state) {
  uint32_t t, s;
  (void)state;
  assert_int_equal(stkr_macho_arch_parse("arm64e", &t, &s), 0);
  assert_true(stkr_macho_arch_match(STKR_MACHO_CPU_ARM64, 0x80000002u, t, s));
  assert_false(stkr_macho_arch_match(STKR_MACHO_CPU_ARM64, 0, t, s));
  assert_int_equal(stkr_macho_arch_parse("arm64", &t, &s), 0);
  assert_true(stkr_macho_arch_match(STKR_MACHO_CPU_ARM64, 0, t, s));
  assert_false(stkr_macho_arch_match(STKR_MACHO_CPU_ARM64, 2, t, s));
  assert_int_equal(stkr_macho_arch_parse("ppc", &t, &s), -EINVAL);
  /* Not Mach-O: a Java class file shares the fat magic. */
  const uint8_t cls[8] = {0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52};
  assert_false(stkr_macho_is_macho(cls, sizeof cls));
}

/* Offsets of the load commands of a thin file. */
static size_t cmd_offsets(const uint8_t *d, size_t *offs, size_t max) {
  uint32_t ncmds = get32(d + 16);
  size_t off = 32, n = 0;
  for (uint32_t i = 0; i < ncmds && n < max; i++) {
    offs[n++] = off;
    off += get32(d + off + 4);
  }
  return n;
}

static void expect_error_at(const uint8_t *d, size_t len, size_t at) {
  stkr_macho_image im;
  char err[512], want[64];
  int rc = parse_thin(d, len, &im, err, sizeof err);
  assert_int_equal(rc, -EINVAL);
  snprintf(want, sizeof want, "offset %zu:", at);
  if (!strstr(err, want)) fail_msg("wanted '%s' in: %s", want, err);
}

static void test_absurd_counts(void **state) {
  size_t len, offs[256], n;
  uint8_t *orig, *d;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  orig = load("App-arm64.dSYM/Contents/Resources/DWARF/App-arm64", &len);
  d = malloc(len);
  n = cmd_offsets(orig, offs, 256);
  assert_true(n >= 4);
  for (size_t i = 0; i < n; i++) {
    uint32_t cmd = get32(orig + offs[i]);
    /* Its size: past the load commands. */
    memcpy(d, orig, len);
    put32(d + offs[i] + 4, 0x7ffffff0u);
    expect_error_at(d, len, offs[i]);
    /* Zero: would loop forever if accepted. */
    put32(d + offs[i] + 4, 0);
    expect_error_at(d, len, offs[i]);
    if (cmd == 0x19) { /* LC_SEGMENT_64: nsects */
      memcpy(d, orig, len);
      put32(d + offs[i] + 64, 0x10000000u);
      expect_error_at(d, len, offs[i]);
    } else if (cmd == 0x2) { /* LC_SYMTAB: nsyms, strsize */
      memcpy(d, orig, len);
      put32(d + offs[i] + 12, 0xfffffff0u);
      expect_error_at(d, len, offs[i]);
      memcpy(d, orig, len);
      put32(d + offs[i] + 20, 0xfffffff0u);
      expect_error_at(d, len, offs[i]);
    }
  }
  /* ncmds larger than sizeofcmds holds. */
  memcpy(d, orig, len);
  put32(d + 16, 100000);
  {
    stkr_macho_image im;
    char err[512];
    assert_int_equal(parse_thin(d, len, &im, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "offset "));
  }
  /* sizeofcmds larger than the file. */
  memcpy(d, orig, len);
  put32(d + 20, 0xfffffff0u);
  expect_error_at(d, len, 20);
  free(d);
  free(orig);
}

static void test_truncated(void **state) {
  size_t len, offs[256], n;
  stkr_macho_image im, full;
  char err[512];
  uint8_t *d;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  d = load("App-arm64.dSYM/Contents/Resources/DWARF/App-arm64", &len);
  n = cmd_offsets(d, offs, 256);
  /* Cut inside the load commands: at every command, and one byte in. */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < 2; k++) {
      int rc = parse_thin(d, offs[i] + k, &im, err, sizeof err);
      assert_int_equal(rc, -EINVAL);
      assert_non_null(strstr(err, "offset "));
    }
  /* Cut inside each __DWARF section: the section is named. */
  assert_int_equal(parse_thin(d, len, &full, err, sizeof err), 0);
  for (size_t i = 0; i < full.n_sects; i++) {
    const stkr_macho_section *s = &full.sects[i];
    char want[64];
    if (strcmp(s->segname, "__DWARF") != 0 || s->size < 2) continue;
    assert_int_equal(parse_thin(d, s->offset + s->size / 2, &im, err, sizeof err),
                     -EINVAL);
    snprintf(want, sizeof want, "__DWARF,%s", s->sectname);
    if (!strstr(err, want)) fail_msg("wanted '%s' in: %s", want, err);
  }
  stkr_macho_image_free(&full);
  free(d);
}

static void test_fat_header(void **state) {
  stkr_macho_slice sl[STKR_MACHO_MAX_SLICES];
  char err[512];
  size_t len, n;
  uint8_t *d;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  d = load("App", &len);
  /* Second architecture's offset (big-endian) past the end. */
  uint8_t save[4];
  memcpy(save, d + 8 + 20 + 8, 4);
  d[8 + 20 + 8] = 0x7f;
  assert_int_equal(stkr_macho_slices(d, len, sl, STKR_MACHO_MAX_SLICES, &n,
                                     err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "offset 28:"));
  memcpy(d + 8 + 20 + 8, save, 4);
  /* More architectures than the bytes hold. */
  d[7] = 40;
  assert_int_equal(stkr_macho_slices(d, 200, sl, STKR_MACHO_MAX_SLICES, &n,
                                     err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "offset 4:"));
  /* A count of 45 or more: a Java class file's version, not Mach-O. */
  d[6] = 0x7f;
  assert_false(stkr_macho_is_macho(d, len));
  /* Cut after the fat header: every slice lies outside. */
  d[7] = 3;
  d[6] = 0;
  assert_int_equal(stkr_macho_slices(d, 200, sl, STKR_MACHO_MAX_SLICES, &n,
                                     err, sizeof err), -EINVAL);
  free(d);
}

/* Every header byte set to 0xff and to 0 in turn: errors or results, never
 * a read outside (ASan), never a hang. */
static void test_flip_every_header_byte(void **state) {
  size_t len, cmds_end;
  uint8_t *orig, *d;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  orig = load("App-arm64.dSYM/Contents/Resources/DWARF/App-arm64", &len);
  d = malloc(len);
  cmds_end = 32 + get32(orig + 20);
  memcpy(d, orig, len);
  for (size_t i = 0; i < cmds_end; i++)
    for (int v = 0; v < 2; v++) {
      stkr_macho_image im;
      char err[512];
      uint8_t keep = d[i];
      d[i] = v ? 0xff : 0;
      if (parse_thin(d, len, &im, err, sizeof err) == 0) {
        stkr_macho_symbols(d, &im, on_sym, &(symseen){0, 0, 0}, NULL);
        stkr_macho_image_free(&im);
      } else {
        assert_true(err[0] != '\0');
      }
      d[i] = keep;
    }
  free(d);
  free(orig);
}

MT_TEST_MAIN("macho", 2, 4, NULL, test_arch_names, test_universal,
             test_thin_and_dsym, test_absurd_counts, test_truncated,
             test_fat_header, test_flip_every_header_byte)
