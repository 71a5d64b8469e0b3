/*
 * test-unwind-record.c: issue 15 end to end: `stackrec record` walks the
 * stacks of a program built without frame pointers with unwind tables
 * (STACKREC_UNWIND=tables, record's default), through every frame to
 * main, where a frame-pointer walk (STACKREC_UNWIND=fp) stops; an image
 * loaded by dlopen after recording started gets its table on a later
 * worker pass, and at once when the hook library's dlopen tells the
 * worker, and a walk never skips callers through a library too new for
 * its table; Python's interpreter frames are walked to its entry.
 */
#include "tests/preload_run.h"
#include "tests/testlib.h"

/* Does the stack of e hold the fixture's functions fns[0..n) (innermost
 * first) as consecutive frames? */
static bool has_chain(const rec *r, const stkr_event_view *v,
                      const char *const *images, const char *const *fns,
                      size_t n) {
  for (size_t i = 0; i + n <= v->n_pcs; i++) {
    size_t k = 0;
    while (k < n && pc_in(r, v->process, v->pcs[i + k], images[k], fns[k]))
      k++;
    if (k == n)
      return true;
  }
  return false;
}

/* The stacks of the gethostname events of a recording: how many events,
 * and how many of them hold the chain. *last_has: the last one does. */
static void chain_counts(const char *dir, const char *const *images,
                         const char *const *fns, size_t n, size_t *events,
                         size_t *with_chain, bool *last_has) {
  rec r;
  stkr_event_view v;
  int rc;

  rec_load(&r, dir); /* for the image lists; events read again below */
  *events = *with_chain = 0;
  *last_has = false;
  stkr_reader *rd;
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while ((rc = stkr_reader_next(rd, &v)) == 1) {
    if (strcmp(v.site, "identifiers.gethostname") != 0)
      continue;
    (*events)++;
    *last_has = has_chain(&r, &v, images, fns, n);
    *with_chain += *last_has;
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(rd);
  rec_free(&r);
}

static const char *const k_chain_img[] = {"omitfp", "omitfp", "omitfp",
                                          "omitfp"};
static const char *const k_chain_fn[] = {"uw_inner", "uw_middle", "uw_outer",
                                         "main"};

/* `omitfp chain` recorded with STACKREC_UNWIND=unwind (NULL: record's
 * default): how many of its one event's stacks hold the whole chain. */
static size_t chain_recorded(const char *tag, const char *unwind) {
  char dir[4096];
  size_t events, full;
  bool last;

  snprintf(dir, sizeof dir, "%s", fresh(tag));
  if (unwind != NULL)
    setenv("STACKREC_UNWIND", unwind, 1);
  int rc = record(dir, "-q", "omitfp", "chain");
  unsetenv("STACKREC_UNWIND");
  assert_int_equal(rc, 0);
  chain_counts(dir, k_chain_img, k_chain_fn, 4, &events, &full, &last);
  assert_int_equal(events, 1);
  /* The recording says what the walk had: `info` shows the tables (the
   * program, libc, the loader, the hook library at least), or nothing. */
  assert_int_equal(sh("'%s' info --json '%s'", g_bin, dir), 0);
  const char *u = strstr(g_out, "\"unwind\":{\"images\":");
  if (unwind == NULL) {
    if (u == NULL || atoi(u + strlen("\"unwind\":{\"images\":")) < 4)
      fail_msg("info --json: no unwind tables for 4 images or more: %s", g_out);
  } else if (u != NULL) {
    fail_msg("info --json: unwind tables with STACKREC_UNWIND=%s", unwind);
  }
  return full;
}

static void test_tables_walk_through_code_without_frame_pointers(void **state) {
  (void)state;
  if (chain_recorded("tables", NULL) != 1)
    fail_msg("the stack does not hold uw_inner < uw_middle < uw_outer < "
             "main (tables)");
}

/* The same program with frame pointers only: the walk stops where
 * uw_middle zeroed the frame pointer, so the chain is not there. Without
 * this the first test could pass without the tables doing anything. */
static void test_fp_walk_stops_there(void **state) {
  (void)state;
  assert_int_equal(chain_recorded("fp", "fp"), 0);
}

/* `omitfp dlopen LIB 40` recorded with passes every flush_ms: 40 events
 * of the library's chain, 50 ms apart, the last of which must hold the
 * chain to main (the library walked with its table by then); else fail,
 * saying `when` and how many held it. */
static void expect_dlopen_walked(const char *tag, const char *lib,
                                 const char *flush_ms, const char *when) {
  char dir[4096], args[4200];
  static const char *const img[] = {"libomitfp_lib.so", "libomitfp_lib.so",
                                    "omitfp"};
  static const char *const fn[] = {"lib_inner", "lib_outer", "main"};
  size_t events, full;
  bool last;

  snprintf(dir, sizeof dir, "%s", fresh(tag));
  snprintf(args, sizeof args, "dlopen '%s' 40", lib);
  setenv("STACKREC_FLUSH_MS", flush_ms, 1);
  int rc = record(dir, "-q", "omitfp", args);
  unsetenv("STACKREC_FLUSH_MS");
  assert_int_equal(rc, 0);
  chain_counts(dir, img, fn, 3, &events, &full, &last);
  assert_int_equal(events, 40);
  if (!last)
    fail_msg("%s, the dlopen'd library's frames are not walked with its "
             "table (%zu of 40 events have the chain)", when, full);
}

/* An image loaded after recording started: its frames are walked with a
 * table once a worker pass has built one (the events before that walk
 * with the tables of the images there were, and frame pointers in it). */
static void test_dlopen_image_gets_a_table(void **state) {
  char lib[4200];
  (void)state;

  snprintf(lib, sizeof lib, "%s/libomitfp_lib.so", g_fx_dir);
  expect_dlopen_walked("dlopen", lib, "10", "after 2 s of worker passes");
}

/* The same with passes a minute apart: the hook library's dlopen tells the
 * worker (stkr_images_changed), which builds the table within milliseconds
 * instead of at its next pass, so the events of the 2 s after the load
 * have the chain. The library is named without a directory: omitfp finds
 * it through its RUNPATH ($ORIGIN), which glibc takes from dlopen's caller,
 * so this also shows that the hook keeps the program as the caller (a
 * wrapper that called on would make the hook library the caller, and the
 * load would fail; uninstrumented builds only, see below). */
static void test_dlopen_tells_the_worker(void **state) {
  char lib[4200] = "libomitfp_lib.so";
  (void)state;

#if SANITIZED
  /* The sanitizers' own dlopen interceptor calls on from their runtime,
   * which then is the caller glibc sees: there the name alone is not found
   * with or without our hook, so the path is given. */
  snprintf(lib, sizeof lib, "%s/libomitfp_lib.so", g_fx_dir);
#endif
  expect_dlopen_walked("dlopen-hint", lib, "60000",
                       "with passes a minute apart (the worker not told?), "
                       "2 s after the load");
}

/* `dlfresh LIB [mode]` recorded, LIB a build of omitfp_lib.c: its one
 * gethostname event's stack must go on from lib_inner through
 * lib_keep_outer and main, or stop after lib_inner marked cut; never
 * follow a stale frame-pointer record past them (*cut or *whole counts
 * it). `run` names the run in messages. */
static void dlfresh_never_skips(const char *lib, const char *mode, int run,
                                size_t *cut, size_t *whole) {
  char dir[4096], args[4200];
  rec r;
  stkr_event_view v;
  stkr_reader *rd;
  size_t events = 0;

  snprintf(args, sizeof args, "'%s/%s' %s", g_fx_dir, lib, mode);
  snprintf(dir, sizeof dir, "%s", fresh("dlfresh"));
  assert_int_equal(record(dir, "-q", "dlfresh", args), 0);
  rec_load(&r, dir);
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &v) == 1) {
    if (strcmp(v.site, "identifiers.gethostname") != 0)
      continue;
    events++;
    /* lib_inner's frame: the first, or the second after a sanitizer's
     * interceptor (preload_run.h, app_pc). */
    size_t k = 0;
    while (k < 2 && k < v.n_pcs && !pc_in(&r, v.process, v.pcs[k], lib, "lib_inner"))
      k++;
    if (k == 2 || k == v.n_pcs)
      fail_msg("%s run %d: lib_inner is not among the first frames", lib, run);
    if (v.n_pcs == k + 1) {
      /* Its callers are missing: the stack says so (QA, session 24: one
       * frame, stack_truncated false, as if whole). */
      if (!v.stack_truncated)
        fail_msg("%s run %d: a stack that ends at lib_inner is not marked "
                 "truncated", lib, run);
      (*cut)++;
    } else if (v.n_pcs >= k + 3 &&
               pc_in(&r, v.process, v.pcs[k + 1], lib, "lib_keep_outer") &&
               pc_in(&r, v.process, v.pcs[k + 2], "dlfresh", "main")) {
      (*whole)++;
    } else {
      fail_msg("%s run %d: after lib_inner the stack goes on (%zu PCs, %s) "
               "but not through lib_keep_outer and main: callers skipped",
               lib, run, v.n_pcs, v.stack_truncated ? "marked cut" : "unmarked");
    }
  }
  stkr_reader_free(rd);
  rec_free(&r);
  assert_int_equal(events, 1);
}

/* A library built without frame pointers, called the moment it is
 * loaded (before the worker can have built its table) from a program with
 * frame pointers: the walk may stop in it, or (table built meanwhile) go
 * on through lib_keep_outer and main; it must never follow the stale
 * frame-pointer record to main's caller, skipping both (it did, in 1 752
 * of 2 000 events of a dlopen loop found by a QA pass: unwind.h,
 * stkr__uw_loads_*). */
static void test_fresh_library_never_skips_callers(void **state) {
  size_t cut = 0, whole = 0;
  (void)state;

  for (int run = 0; run < 8; run++)
    dlfresh_never_skips("libomitfp_lib.so", "", run, &cut, &whole);
  print_message("dlfresh: %zu of 8 stacks stopped in the new library, %zu "
                "whole\n", cut, whole);
}

/* A library built without unwind tables and without frame pointers,
 * called from a program that keeps them (`dlfresh LIB late`): at its
 * frames the walk has no row, and the frame-pointer register still holds
 * main's record, which would skip lib_keep_outer and main and read as a
 * whole stack (QA, session 30: ne_leaf < app_b < main for ne_leaf <
 * ne_mid < ne_top < app_a < app_b < main); fails without fp_record_skips
 * (unwind/walk.c). */
static void test_library_without_tables_never_skips(void **state) {
  size_t cut = 0, whole = 0;
  (void)state;

  dlfresh_never_skips("libomitfp_noeh.so", "late", 0, &cut, &whole);
}

/* A library loaded, called and unloaded between two of the worker's
 * passes' batches: the batch that defines the call's stack carries the
 * image list from after the dlclose. `stackrec record` still names the
 * library's frames: a later list of the same session keeps the earlier
 * list's images it does not overlap (tools/stackrec/symbolize_canon.h).
 * Before, the frames stayed addresses (12% of a dlopen loop's events,
 * found by a QA pass). */
static void test_unloaded_library_still_named(void **state) {
  char dir[4096], args[4200];
  stkr_reader *rd;
  stkr_event_view v;
  size_t events = 0;
  (void)state;

  snprintf(args, sizeof args, "'%s/libomitfp_lib.so' close", g_fx_dir);
  snprintf(dir, sizeof dir, "%s", fresh("dlclose"));
  assert_int_equal(record(dir, "-q", "dlfresh", args), 0);
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &v) == 1) {
    if (strcmp(v.site, "identifiers.gethostname") != 0)
      continue;
    events++;
    bool named = false;
    for (size_t k = 0; k < v.n_frames && k < 3; k++)
      named |= v.frames[k].function != NULL &&
               strcmp(v.frames[k].function, "lib_inner") == 0;
    if (!named)
      fail_msg("lib_inner is not named among the first frames (%zu frames, "
               "the first %s at %#llx)", v.n_frames,
               v.n_frames && v.frames[0].function ? v.frames[0].function : "?",
               (unsigned long long)(v.n_frames ? v.frames[0].pc : 0));
  }
  stkr_reader_free(rd);
  assert_int_equal(events, 1);
}

/* The function among the first three frames of v that is one of the
 * swap libraries' inner functions, or NULL. */
static const char *swap_inner(const stkr_event_view *v) {
  for (size_t k = 0; k < v->n_frames && k < 3; k++) {
    const char *f = v->frames[k].function;
    if (f != NULL && (strcmp(f, "lib_inner") == 0 ||
                      strcmp(f, "other_inner") == 0))
      return f;
  }
  return NULL;
}

/* Two libraries loaded in turn, the second where the first was, each
 * called 50 times right before its dlclose with no pass of the worker
 * between (`dlfresh LIB swap LIB2`): every event names its own library's
 * function, as the hook's dlclose drains the rings before the unload.
 * Before, the first library's events were read after it was gone: named
 * as the second's functions, or not at all (QA, session 29; fails
 * without drain_before_unload, preload/hooks_dl.c). */
static void test_library_swapped_at_one_address(void **state) {
  char dir[4096], args[8400];
  stkr_reader *rd;
  stkr_event_view v;
  size_t a = 0, b = 0, other = 0, n = 0;
  (void)state;

  snprintf(args, sizeof args, "'%s/libomitfp_lib.so' swap '%s/libomitfp_other.so'",
           g_fx_dir, g_fx_dir);
  snprintf(dir, sizeof dir, "%s", fresh("swap"));
  /* No timed pass: only the hooks' own drains and hints bring one. */
  setenv("STACKREC_FLUSH_MS", "600000", 1);
  int rc = record(dir, "-q", "dlfresh", args);
  unsetenv("STACKREC_FLUSH_MS");
  assert_int_equal(rc, 0);
  print_message("dlfresh: %s", strstr(g_out, "swap: ") ? strstr(g_out, "swap: ")
                                                       : "no swap line\n");
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &v) == 1) {
    const char *f;
    if (strcmp(v.site, "identifiers.gethostname") != 0)
      continue;
    f = swap_inner(&v);
    /* The first 50 are the first library's (one thread, in order). */
    if (f != NULL && strcmp(f, n < 50 ? "lib_inner" : "other_inner") == 0)
      n < 50 ? a++ : b++;
    else
      other++;
    n++;
  }
  stkr_reader_free(rd);
  if (a != 50 || b != 50)
    fail_msg("lib_inner named %zu of the first 50 events, other_inner %zu "
             "of the last 50; %zu named otherwise or not at all", a, b, other);
}

/* [start, end) of a .dynsym function of a file (nm -D -S), or false. */
static bool dynsym_range(const char *file, const char *fn, uint64_t *start,
                         uint64_t *end) {
  unsigned long long a, n;
  if (sh("nm -D -S --defined-only '%s' | awk '$4 == \"%s\" {print $1, $2}'",
         file, fn) != 0 || sscanf(g_out, "%llx %llx", &a, &n) != 2)
    return false;
  *start = a;
  *end = a + n;
  return true;
}

/* Debian's python3 is built without frame pointers: with tables, a stack
 * recorded inside it reaches the interpreter's entry, Py_BytesMain (from
 * its .dynsym: the binary is stripped). */
static void test_python_reaches_interpreter_entry(void **state) {
  char dir[4096], py[512];
  uint64_t lo, hi;
  stkr_reader *rd;
  stkr_event_view v;
  bool found = false;
  size_t events = 0;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  skip(); /* the TSan runtime cannot be preloaded into python3 */
#endif
  if (sh("readlink -f /usr/bin/python3") != 0 ||
      sscanf(g_out, "%511s", py) != 1 || !dynsym_range(py, "Py_BytesMain", &lo, &hi)) {
    fprintf(stderr, "no /usr/bin/python3 with Py_BytesMain in .dynsym: skipped\n");
    skip();
  }
  snprintf(dir, sizeof dir, "%s", fresh("python"));
  /* Python's own allocations are not ours to check (as test-preload's
   * probe). */
  assert_int_equal(sh("%s'%s' record -q -o '%s' -- /usr/bin/python3 -c "
                      "'import socket; socket.gethostname()'",
                      SANITIZED ? "ASAN_OPTIONS=detect_leaks=0 " : "", g_bin,
                      dir), 0);
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &v) == 1) {
    const stkr_image_info *im;
    size_t n;
    if (strcmp(v.site, "identifiers.gethostname") != 0)
      continue;
    events++;
    assert_int_equal(stkr_reader_images(rd, v.process, &im, &n), 0);
    for (size_t i = 0; i < v.n_pcs; i++)
      for (size_t k = 0; k < n; k++)
        if (v.pcs[i] >= im[k].text_start && v.pcs[i] < im[k].text_end &&
            strcmp(im[k].path, py) == 0 && v.pcs[i] - im[k].load_address >= lo &&
            v.pcs[i] - im[k].load_address < hi)
          found = true;
  }
  stkr_reader_free(rd);
  assert_true(events >= 1);
  if (!found)
    fail_msg("no frame of python3's gethostname stack lies in Py_BytesMain");
}

TL_TEST_MAIN("unwind-record", setup, NULL,
             test_tables_walk_through_code_without_frame_pointers,
             test_fp_walk_stops_there, test_dlopen_image_gets_a_table,
             test_dlopen_tells_the_worker,
             test_fresh_library_never_skips_callers,
             test_library_without_tables_never_skips,
             test_unloaded_library_still_named,
             test_library_swapped_at_one_address,
             test_python_reaches_interpreter_entry)
