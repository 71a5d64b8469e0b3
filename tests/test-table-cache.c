/*
 * test-table-cache.c: issue 9, the unwind tables of a recording built once
 * per build-id (recorder/unwind_tables.c, unwind/uw_store.h).
 *
 *  - Every loaded image's table, stored as bytes and read back, answers
 *    every lookup as the built one does, with the same stats.
 *  - Damaged or hostile bytes are refused: any flipped byte (checksum), a
 *    truncation, another image, architecture or .eh_frame, and arrays that
 *    would send the walk out of bounds even with a valid checksum.
 *  - End to end: under `stackrec record`, a later process reads its tables
 *    from the cache (counted in `info`), walks through code without frame
 *    pointers with them, and the cache is gone once record ends; a damaged
 *    cache file is counted, rebuilt and replaced.
 */
#include "tests/preload_run.h" /* first: it defines _GNU_SOURCE */

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>

#include "common/stkr_elfnote.h"
#include "tests/testlib.h"
#include "unwind/uw_store.h"

/* ---- stored bytes ------------------------------------------------------- */

static bool build_id_of(const struct dl_phdr_info *info, const uint8_t **id,
                        size_t *len) {
  return stkr_elf_image_build_id(info, STKR__UW_BUILD_ID_MAX, id, len);
}

/* Same answer for every address a lookup can be asked: each row's start,
 * the byte before it and the byte after it, and past both ends. */
static void assert_same_table(const stkr__uw_table *a, const stkr__uw_table *b) {
  assert_int_equal(a->n, b->n);
  assert_int_equal(a->lo, b->lo);
  assert_int_equal(a->hi, b->hi);
  for (uint32_t i = 0; i < a->n; i++) {
    uintptr_t pc = a->base + a->off[i];
    assert_int_equal(stkr__unwind_table_find(a, pc), stkr__unwind_table_find(b, pc));
    assert_int_equal(stkr__unwind_table_find(a, pc - 1), stkr__unwind_table_find(b, pc - 1));
    assert_int_equal(stkr__unwind_table_find(a, pc + 1), stkr__unwind_table_find(b, pc + 1));
  }
  assert_int_equal(stkr__unwind_table_find(b, a->hi + 64), STKR__UW_FALLBACK);
  assert_int_equal(stkr__unwind_table_find(b, a->lo - 1), STKR__UW_FALLBACK);
}

typedef struct rt_state {
  unsigned images, stored;
} rt_state;

/* stkr__uw_table_fn: build, store, read back, compare; the set gets the
 * table read back. */
static int round_trip(void *arg, const struct dl_phdr_info *info,
                      const stkr__uw_src *src, stkr__uw_table **out,
                      stkr__uw_stats *stats) {
  rt_state *s = arg;
  stkr__uw_table *built, *back;
  stkr__uw_stats st_built, st_back;
  const uint8_t *id;
  size_t id_len, len;
  uint8_t *buf;
  int rc = stkr__unwind_table_build(src, &built, &st_built);

  s->images++;
  if (rc != 0 || !build_id_of(info, &id, &id_len) || built->n == 0) {
    *out = built;
    *stats = st_built;
    return rc;
  }
  assert_int_equal(stkr__unwind_table_encode(built, &st_built, src, id, id_len, &buf, &len), 0);
  assert_int_equal(stkr__unwind_table_decode(buf, len, src, id, id_len, &back, &st_back), 0);
  assert_same_table(built, back);
  assert_memory_equal(&st_built, &st_back, sizeof st_built);
  free(buf);
  stkr__unwind_table_free(built);
  s->stored++;
  *out = back;
  *stats = st_back;
  return 0;
}

static void test_stored_tables_answer_as_built(void **state) {
  rt_state s = {0};
  stkr__uw_set *set = NULL;
  unsigned failed = 0;
  (void)state;

  assert_int_equal(stkr__unwind_set_build_loaded_with(round_trip, &s, &set, &failed), 0);
  /* This test, libc, the loader, libcmocka at least have build-ids. */
  if (s.stored < 3)
    fail_msg("only %u of %u images stored and read back", s.stored, s.images);
  /* The set made of tables read back finds this very function. */
  assert_non_null(stkr__unwind_set_find(set, (uintptr_t)&test_stored_tables_answer_as_built));
  stkr__unwind_set_free(set);
}

/* The table, bytes and source of the image holding this test's code. */
typedef struct one {
  stkr__uw_src src;
  uint8_t id[STKR__UW_BUILD_ID_MAX];
  size_t id_len;
  stkr__uw_table *t;
  stkr__uw_stats st;
  bool found;
} one;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
  one *o = arg;
  const uint8_t *id;
  (void)size;
  if (o->found || stkr__unwind_src_loaded(info, &o->src) != 0 ||
      !build_id_of(info, &id, &o->id_len) || o->id_len > sizeof o->id)
    return 0;
  if (stkr__unwind_table_build(&o->src, &o->t, &o->st) != 0) return 0;
  if (stkr__unwind_table_find(o->t, (uintptr_t)&find_self) == STKR__UW_FALLBACK &&
      !((uintptr_t)&find_self >= o->t->lo && (uintptr_t)&find_self < o->t->hi)) {
    stkr__unwind_table_free(o->t);
    o->t = NULL;
    return 0;
  }
  memcpy(o->id, id, o->id_len);
  return o->found = true;
}

static int decode(const one *o, const uint8_t *buf, size_t len) {
  stkr__uw_table *t = NULL;
  int rc = stkr__unwind_table_decode(buf, len, &o->src, o->id, o->id_len, &t, NULL);
  stkr__unwind_table_free(t);
  return rc;
}

static void test_damaged_bytes_are_refused(void **state) {
  one o = {0};
  uint8_t *buf, *b2;
  size_t len, i, step;
  (void)state;

  dl_iterate_phdr(find_self, &o);
  assert_true(o.found);
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), 0);
  b2 = malloc(len);
  assert_non_null(b2);
  /* Every header byte, then ~4000 payload bytes spread over the file. */
  step = (len - sizeof(stkr__uw_file_hdr)) / 4000 + 1;
  for (i = 0; i < len; i += i < sizeof(stkr__uw_file_hdr) ? 1 : step) {
    memcpy(b2, buf, len);
    b2[i] ^= (uint8_t)(1u << (i % 8));
    if (decode(&o, b2, len) != -EINVAL)
      fail_msg("a flipped bit at byte %zu of %zu was accepted", i, len);
  }
  /* Truncated, or a byte longer. */
  for (i = 0; i < len; i += len / 97 + 1)
    assert_int_equal(decode(&o, buf, i), -EINVAL);
  memcpy(b2, buf, len);
  assert_int_equal(decode(&o, buf, len - 1), -EINVAL);
  /* Another image: build-id, .eh_frame size, architecture. */
  {
    one x = o;
    x.id[0] ^= 1;
    assert_int_equal(decode(&x, buf, len), -EINVAL);
    x = o;
    x.id_len--;
    assert_int_equal(decode(&x, buf, len), -EINVAL);
    x = o;
    x.src.eh_frame_len += 8;
    assert_int_equal(decode(&x, buf, len), -EINVAL);
    x = o;
    x.src.arch = x.src.arch == STKR__UW_X86_64 ? STKR__UW_AARCH64 : STKR__UW_X86_64;
    assert_int_equal(decode(&x, buf, len), -EINVAL);
  }
  free(buf);
  free(b2);
  stkr__unwind_table_free(o.t);
}

/* Arrays that would take the walk's search out of bounds, in a file whose
 * checksum is right (the encoder seals whatever it is given): refused. */
static void test_hostile_arrays_are_refused(void **state) {
  one o = {0};
  uint8_t *buf;
  size_t len;
  (void)state;

  dl_iterate_phdr(find_self, &o);
  assert_true(o.found);
  assert_true(o.t->n > 2);
  uint16_t *idx = (uint16_t *)o.t->idx;
  uint32_t *blk = (uint32_t *)o.t->block, *off = (uint32_t *)o.t->off;

  uint16_t keep16 = idx[1];
  idx[1] = (uint16_t)o.t->n_palette; /* past the palette */
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), -EINVAL);
  free(buf);
  idx[1] = keep16;

  uint32_t keep = blk[o.t->n_blocks - 1];
  blk[o.t->n_blocks - 1] = o.t->n; /* a block starting past the rows */
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), -EINVAL);
  free(buf);
  blk[o.t->n_blocks - 1] = keep;

  keep = off[1];
  off[1] = off[0]; /* offsets not ascending */
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), -EINVAL);
  free(buf);
  off[1] = keep;

  o.t->n_blocks++; /* more blocks than the range has */
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), -EINVAL);
  free(buf);
  o.t->n_blocks--;

  /* And untouched, it is accepted: the refusals above are the edits'. */
  assert_int_equal(stkr__unwind_table_encode(o.t, &o.st, &o.src, o.id, o.id_len, &buf, &len), 0);
  assert_int_equal(decode(&o, buf, len), 0);
  free(buf);
  stkr__unwind_table_free(o.t);
}

/* ---- end to end ----------------------------------------------------------- */

/* The "unwind" object of process `nth` (0-based, in info --json's order)
 * named `name`: images and images_cached, cache_rejected. */
static bool unwind_of(const char *json, const char *name, int nth,
                      unsigned *images, unsigned *cached, unsigned *rejected) {
  char key[128];
  const char *p = json;
  snprintf(key, sizeof key, "\"name\":\"%s\"", name);
  for (int k = 0; (p = strstr(p, key)) != NULL; k++, p++) {
    if (k < nth) continue;
    const char *u = strstr(p, "\"unwind\":{\"images\":");
    const char *next = strstr(p + 1, "\"name\":");
    if (u == NULL || (next != NULL && u > next)) return false;
    *images = (unsigned)atoi(u + strlen("\"unwind\":{\"images\":"));
    const char *c = strstr(u, "\"images_cached\":");
    const char *r = strstr(u, "\"cache_rejected\":");
    if (c == NULL || r == NULL) return false;
    *cached = (unsigned)atoi(c + strlen("\"images_cached\":"));
    *rejected = (unsigned)atoi(r + strlen("\"cache_rejected\":"));
    return true;
  }
  return false;
}

/* The gethostname event of every omitfp process holds the whole chain
 * uw_inner < uw_middle < uw_outer < main: walked with the tables (a
 * frame-pointer walk stops at uw_middle, test-unwind-record.c). */
static void assert_chains(const char *dir, size_t want) {
  static const char *const fns[] = {"uw_inner", "uw_middle", "uw_outer", "main"};
  stkr_reader *rd;
  stkr_event_view v;
  size_t events = 0;
  rec r;
  int rc;

  rec_load(&r, dir); /* for the image lists; events read again with every PC */
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while ((rc = stkr_reader_next(rd, &v)) == 1) {
    const stkr_process_info *p = stkr_reader_process(rd, v.process);
    if (strcmp(v.site, "identifiers.gethostname") != 0 ||
        p == NULL || p->process_name == NULL ||
        strcmp(p->process_name, "omitfp") != 0)
      continue; /* hostname's own, where a test runs it first */
    events++;
    for (size_t f = 0; f < 4; f++) {
      bool seen = false;
      for (size_t i = 0; i < v.n_pcs && !seen; i++)
        seen = pc_in(&r, v.process, v.pcs[i], "omitfp", fns[f]);
      if (!seen)
        fail_msg("pid %u: %s is not on the stack (%zu frames)", v.pid, fns[f],
                 v.n_pcs);
    }
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(rd);
  rec_free(&r);
  assert_int_equal(events, want);
}

static void test_record_builds_each_table_once(void **state) {
  char dir[4096], cache[4200];
  unsigned images, cached, rejected;
  struct stat st;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  /* The TSan runtime cannot be preloaded into /bin/sh (preload_run.h);
   * test_damaged_cache_is_rebuilt reads the cache under TSan too. */
  skip();
#endif
  snprintf(dir, sizeof dir, "%s", fresh("once"));
  /* sh itself is not ours to check for leaks under ASan (as the probes of
   * test-preload). */
  if (sh("%s'%s' record -q -o '%s' -- sh -c \"hostname >/dev/null && "
         "'%s/omitfp' chain && '%s/omitfp' chain\"",
         SANITIZED ? "ASAN_OPTIONS=detect_leaks=0 " : "", g_bin, dir, g_fx_dir,
         g_fx_dir) != 0)
    fail_msg("record failed: %s", g_err);
  assert_chains(dir, 2);
  if (sh("'%s' info --json '%s'", g_bin, dir) != 0) fail_msg("info: %s", g_err);
  /* The first omitfp builds its own image's table, and reads those of
   * libc, the loader, the hook library... that hostname built (its
   * gethostname started its recording; sh makes no watched call and
   * builds nothing); the second reads every one. */
  if (!unwind_of(g_out, "omitfp", 0, &images, &cached, &rejected))
    fail_msg("no unwind figures for the first omitfp: %s", g_out);
  assert_true(images >= 4);
  if (cached == 0 || cached >= images)
    fail_msg("first omitfp: %u of %u tables from the cache", cached, images);
  assert_int_equal(rejected, 0);
  if (!unwind_of(g_out, "omitfp", 1, &images, &cached, &rejected))
    fail_msg("no unwind figures for the second omitfp: %s", g_out);
  if (cached != images)
    fail_msg("second omitfp: %u of %u tables from the cache", cached, images);
  assert_int_equal(rejected, 0);
  /* record removed the cache: it is not part of the recording. */
  snprintf(cache, sizeof cache, "%s/.stackrec-cache", dir);
  assert_int_equal(stat(cache, &st), -1);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 0);
}

/* An image without a build-id (libomitfp_nobid.so, linked
 * --build-id=none) is cached under a key from its file: the second
 * process that loads it reads its table (QA, session 21: rustc's
 * librustc_driver, which has none, was built again by every rustc of a
 * cargo build, ~0.7 s each). */
static void test_image_without_build_id_cached(void **state) {
  char dir[4096], lib[4300];
  unsigned images, cached, rejected, cached1;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  skip(); /* as above: sh cannot host the TSan runtime */
#endif
  snprintf(dir, sizeof dir, "%s", fresh("nobid"));
  snprintf(lib, sizeof lib, "%s/libomitfp_nobid.so", g_fx_dir);
  if (sh("%s'%s' record -q -o '%s' -- sh -c \"hostname >/dev/null && "
         "'%s/omitfp' dlopen '%s' 1 && '%s/omitfp' dlopen '%s' 1\"",
         SANITIZED ? "ASAN_OPTIONS=detect_leaks=0 " : "", g_bin, dir, g_fx_dir,
         lib, g_fx_dir, lib) != 0)
    fail_msg("record failed: %s", g_err);
  if (sh("'%s' info --json '%s'", g_bin, dir) != 0) fail_msg("info: %s", g_err);
  if (!unwind_of(g_out, "omitfp", 0, &images, &cached1, &rejected) ||
      !unwind_of(g_out, "omitfp", 1, &images, &cached, &rejected))
    fail_msg("no unwind figures for the two omitfp: %s", g_out);
  /* The second reads every table, the library's among them; the first
   * built the library's (more than the first could read). */
  if (cached != images || cached1 >= cached)
    fail_msg("omitfp: %u then %u of %u tables from the cache", cached1,
             cached, images);
  assert_int_equal(rejected, 0);
}

/* Flip one byte in the middle of every *.uwt file of dir's cache.
 * @return how many files. */
static unsigned damage_tables(const char *dir) {
  char cache[4200], p[4500];
  struct dirent *e;
  unsigned n = 0;
  DIR *d;

  snprintf(cache, sizeof cache, "%s/.stackrec-cache", dir);
  assert_non_null(d = opendir(cache));
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    uint8_t b;
    int fd;
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".uwt") != 0) continue;
    snprintf(p, sizeof p, "%s/%s", cache, e->d_name);
    assert_true((fd = open(p, O_RDWR)) >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(pread(fd, &b, 1, st.st_size / 2), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, st.st_size / 2), 1);
    close(fd);
    n++;
  }
  closedir(d);
  return n;
}

/* Without record (the hook library alone), the cache stays: damage every
 * file of it, and the next process counts each, rebuilds and replaces it;
 * the one after reads them all again. verify ignores the cache. */
static void test_damaged_cache_is_rebuilt(void **state) {
  char dir[4096];
  unsigned images, cached, rejected, files;
  (void)state;

  snprintf(dir, sizeof dir, "%s", fresh("damaged"));
  for (int run = 0; run < 3; run++) {
    if (run == 1) {
      /* Flip a byte in the middle of every stored table. */
      files = damage_tables(dir);
      assert_true(files >= 4);
    }
    assert_int_equal(sh("env %sLD_PRELOAD='%s%s%s' STACKREC_DIR='%s' "
                        "STACKREC_UNWIND=tables STACKREC_SYMBOLIZE=offline "
                        "'%s/omitfp' chain",
                        SANITIZED ? "ASAN_OPTIONS=detect_leaks=0 " : "",
                        getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "",
                        getenv("LD_PRELOAD") ? ":" : "", g_lib, dir, g_fx_dir), 0);
  }
  assert_chains(dir, 3);
  assert_int_equal(sh("'%s' info --json '%s'", g_bin, dir), 0);
  assert_true(unwind_of(g_out, "omitfp", 0, &images, &cached, &rejected));
  assert_int_equal(cached, 0); /* an empty cache: all built */
  assert_true(unwind_of(g_out, "omitfp", 1, &images, &cached, &rejected));
  assert_int_equal(cached, 0);
  assert_int_equal(rejected, files); /* each damaged file seen, none used */
  assert_true(unwind_of(g_out, "omitfp", 2, &images, &cached, &rejected));
  assert_int_equal(cached, files); /* the rebuilt ones replaced them */
  assert_int_equal(rejected, 0);
  /* The cache is there (no record to remove it): readers skip it, no
   * "ignored entries" warning. */
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 0);
  if (strstr(g_out, "ignored") != NULL || strstr(g_err, "ignored") != NULL)
    fail_msg("verify saw the cache: %s%s", g_out, g_err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stored_tables_answer_as_built),
      cmocka_unit_test(test_damaged_bytes_are_refused),
      cmocka_unit_test(test_hostile_arrays_are_refused),
      cmocka_unit_test(test_record_builds_each_table_once),
      cmocka_unit_test(test_damaged_cache_is_rebuilt),
      cmocka_unit_test(test_image_without_build_id_cached),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
