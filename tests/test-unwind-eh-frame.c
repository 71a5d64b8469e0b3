/* test-unwind-eh-frame.c: compact unwind tables built from the
 * .eh_frame of files (unwind/), apart from the walks of test-unwind.c:
 *
 *  - every image of a running python3 gets a table without error, and the
 *    table is no bigger than 1.5x its .eh_frame;
 *  - hostile .eh_frame bytes (python3's and libc's, truncated, bit-flipped,
 *    random) never crash (run it under --config=asan) and give a table or
 *    an error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/testlib.h"
#include "unwind/unwind.h"

/* Every executable image a python3 process maps, from its files. */
static void test_python3_images(void **state) {
  FILE *p;
  char line[4096];
  unsigned images = 0;
  uint64_t rows = 0, fb = 0, tb = 0, eb = 0;
  (void)state;

  p = popen("/usr/bin/python3 -c 'import ssl, json, sqlite3, decimal, ctypes, hashlib, zlib;"
            "print(open(\"/proc/self/maps\").read())' 2>/dev/null", "r");
  if (p == NULL) { skip(); return; }
  char seen[64][512];
  unsigned nseen = 0;
  while (fgets(line, sizeof line, p)) {
    char *path = strchr(line, '/'), *perm = strchr(line, ' ');
    unsigned j;
    stkr__uw_table *t;
    stkr__uw_stats st;
    int rc;
    if (path == NULL || perm == NULL || perm[3] != 'x') continue;
    path[strcspn(path, "\n")] = 0;
    for (j = 0; j < nseen; j++) if (strcmp(seen[j], path) == 0) break;
    if (j < nseen || nseen == 64) continue;
    snprintf(seen[nseen++], sizeof seen[0], "%s", path);
    rc = stkr__unwind_table_from_file(path, 512u << 20, &t, &st);
    if (rc != 0) fprintf(stderr, "%s: %s\n", path, strerror(-rc));
    assert_int_equal(rc, 0);
    assert_true(t->n > 0);
    assert_true(st.fdes_bad * 100 <= st.fdes); /* at most 1% refused */
    /* Rows strictly ascending. */
    for (j = 1; j < t->n; j++) assert_true(t->off[j] > t->off[j - 1]);
    images++;
    rows += st.rows;
    fb += st.rows_fallback;
    tb += st.table_bytes;
    eb += st.eh_frame_bytes;
    fprintf(stderr, "  %-48s %7llu rows %5llu fallback %5llu/%llu FDEs bad, %.2fx\n", path,
            (unsigned long long)st.rows, (unsigned long long)st.rows_fallback,
            (unsigned long long)st.fdes_bad, (unsigned long long)st.fdes,
            (double)st.table_bytes / (double)st.eh_frame_bytes);
    stkr__unwind_table_free(t);
  }
  assert_int_equal(pclose(p), 0);
  fprintf(stderr, "python3: %u images, %llu rows, %llu fallback, %llu table bytes / %llu "
          ".eh_frame bytes = %.2fx\n", images, (unsigned long long)rows,
          (unsigned long long)fb, (unsigned long long)tb, (unsigned long long)eb,
          (double)tb / (double)eb);
  assert_true(images >= 5);
  assert_true(tb * 2 <= eb * 3); /* goal: <= 1.5x */
}

/* Build from a malloc'd copy of exactly len bytes, so that ASan sees any
 * read past it; check the table's shape. */
static int build_copy(const uint8_t *bytes, size_t len, const stkr__uw_src *like) {
  uint8_t *copy = malloc(len ? len : 1);
  stkr__uw_src src = *like;
  stkr__uw_table *t = NULL;
  stkr__uw_stats st;
  uint32_t j;
  int rc;
  memcpy(copy, bytes, len);
  src.eh_frame = copy;
  src.eh_frame_len = len;
  rc = stkr__unwind_table_build(&src, &t, &st);
  if (rc == 0) {
    for (j = 1; j < t->n; j++) assert_true(t->off[j] > t->off[j - 1]);
    assert_true(st.table_bytes <= 128 + 10 * (uint64_t)len); /* bounded by the input */
  } else {
    assert_true(rc == -EINVAL || rc == -E2BIG);
    assert_null(t);
  }
  stkr__unwind_table_free(t);
  free(copy);
  return rc;
}

static void hostile_file(const char *path) {
  uint8_t *f;
  size_t n, i;
  stkr__uw_src src;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  unsigned ok = 0;

  if (stkr__unwind_file_read(path, 512u << 20, &f, &n) != 0) {
    fprintf(stderr, "%s: cannot read, skipped\n", path);
    return;
  }
  assert_int_equal(stkr__unwind_src_elf(f, n, &src), 0);
  assert_int_equal(build_copy(src.eh_frame, src.eh_frame_len, &src), 0);
  /* Truncated anywhere (a few hundred cut points). */
  for (i = 0; i < 300; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    ok += build_copy(src.eh_frame, (rng >> 20) % src.eh_frame_len, &src) == 0;
  }
  /* Bit flips and random bytes in a copy. */
  for (i = 0; i < 300; i++) {
    uint8_t *m = malloc(src.eh_frame_len);
    unsigned k;
    memcpy(m, src.eh_frame, src.eh_frame_len);
    for (k = 0; k < 1 + i % 64; k++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (rng >> 16) % src.eh_frame_len;
      if (i % 3 == 0) m[at] ^= (uint8_t)(1u << (rng >> 61));
      else m[at] = (uint8_t)(rng >> 40);
    }
    ok += build_copy(m, src.eh_frame_len, &src) == 0;
    free(m);
  }
  fprintf(stderr, "%s: %u of 600 damaged copies still gave a table\n", path, ok);
  free(f);
}

static void test_hostile_eh_frame(void **state) {
  Dl_info di;
  (void)state;
  hostile_file("/usr/bin/python3");
  assert_true(dladdr((void *)qsort, &di) && di.dli_fname);
  hostile_file(di.dli_fname);
}

TL_TEST_MAIN("unwind-eh-frame", NULL, NULL, test_python3_images,
             test_hostile_eh_frame)
