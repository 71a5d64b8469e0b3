/*
 * test-symbolize.c: symbolization end to end. Runs the fixture program
 * (tests/symfixture: C and C++ call chains, -O2 -g, an inlined call, a
 * namespaced method, a template; a data dependency) in each mode, reads the
 * recording back and compares every frame of our own code with the truth:
 * exact demangled names, file basenames, the line of every call (which
 * the fixture prints) and the inline frame. Also: `stackrec symbolize` on
 * offline recordings, a stripped copy whose debug file is found only by
 * build-id, repeated stacks doing no resolver work, segments that each
 * carry their own definitions, and `stackrec dump --app-only`. Files that
 * are not what the symbolizer looks for (another build, FIFOs, a segment
 * it cannot read): test-symbolize-files.c. Both over
 * tests/symbolize_harness.h.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/symbolize_harness.h"
#include "tests/testlib.h"

/* No event of dir has frames. */
static void check_no_frames(const char *dir) {
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t n = 0;
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    assert_int_equal(ev.n_frames, 0);
    assert_null(ev.frames);
    assert_true(ev.n_pcs > 0); /* the PCs are kept in every mode */
    n++;
  }
  assert_int_equal(n, 2002);
  stkr_reader_free(r);
}

/* ---- tests --------------------------------------------------------------- */

static void test_inproc_frames(void **state) {
  char dir[4200];
  size_t pcs;
  (void)state;
  mkpath(dir, sizeof dir, "inproc");
  run_fixture(g_fixture, "", dir);
  assert_int_equal(check_recording(dir, "symfixture", true, &pcs), 2002);
  /* Each unique PC was resolved once, and the 1000 repeats of both stacks
   * did no resolver work at all. */
  assert_true(g_resolved[0] > 0);
  assert_int_equal(g_resolved[0], pcs);
  assert_int_equal(g_resolved[1], g_resolved[0]);
}

static void test_inproc_segments_self_contained(void **state) {
  char dir[4200], file[4400];
  stkr_reader *r;
  stkr_event_view ev;
  int files = 0;
  (void)state;
  mkpath(dir, sizeof dir, "rotate");
  /* Tiny segments: many files; the PC cache survives rotation (same
   * resolver count), and every file alone has the frames of its events. */
  run_fixture(g_fixture, "STACKREC_SEGMENT_BYTES=1K", dir);
  assert_int_equal(g_resolved[1], g_resolved[0]);
  for (int seq = 1; seq < 1000; seq++) {
    uint64_t events = 0;
    snprintf(file, sizeof file, "%s/stackrec-%s-%06d.zst", dir, "*", seq);
    /* The pid is unknown here: glob with the shell. */
    if (sh("ls %s", file) != 0) break;
    g_out[strcspn(g_out, "\n")] = '\0';
    assert_int_equal(stkr_reader_open(g_out, NULL, &r), 0);
    while (stkr_reader_next(r, &ev) == 1) {
      events++;
      assert_false(ev.unresolved);
      assert_true(ev.n_frames >= ev.n_pcs);
      if (strcmp(ev.site, "sym.c") == 0) {
        assert_string_equal(ev.frames[0].function, "inlined_helper");
        assert_string_equal(ev.frames[1].function, "outer_c");
      } else {
        assert_string_equal(ev.frames[0].function, "int fx::twice<int>(int)");
      }
    }
    stkr_reader_free(r);
    if (events) files++;
  }
  assert_true(files >= 2);
}

static void test_offline_then_symbolize(void **state) {
  char dir[4200], out[4200];
  (void)state;
  mkpath(out, sizeof out, "offline-sym");
  record_offline(g_fixture, "offline", dir, sizeof dir);
  assert_int_equal(g_resolved[0], 0); /* the device does no symbol work */
  assert_int_equal(g_resolved[1], 0);
  check_no_frames(dir);
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out, dir), 0);
  assert_null(strstr(g_err, "symfixture")); /* no warning about our image */
  assert_int_equal(check_recording(out, "symfixture", true, NULL), 2002);
  /* The output directory is never overwritten. */
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out, dir), 2);
  assert_non_null(strstr(g_err, "already holds segment files"));
  /* A mode that does not exist is an error naming the variable. */
  mkpath(dir, sizeof dir, "badmode");
  assert_int_equal(sh("STACKREC_DIR='%s' STACKREC_SYMBOLIZE=sometimes '%s'",
                      dir, g_fixture), 1);
  assert_non_null(strstr(g_err, "STACKREC_SYMBOLIZE=\"sometimes\""));
  /* none: no frames either; symbolize still can. */
  mkpath(dir, sizeof dir, "none");
  run_fixture(g_fixture, "STACKREC_SYMBOLIZE=none", dir);
  assert_int_equal(g_resolved[1], 0);
  check_no_frames(dir);
}

/* A stripped copy of src at g_tmp/name (out), whose debug file only
 * g_tmp/dbg/.build-id has (dbg); made once. */
static void stripped_copy(const char *src, const char *name, char *out,
                          size_t out_cap, char *dbg, size_t dbg_cap) {
  char bid[128];
  const char *app = out;
  mkpath(out, out_cap, name);
  mkpath(dbg, dbg_cap, "dbg");
  if (access(app, R_OK) == 0) return;
  assert_int_equal(sh("mkdir -p \"$(dirname '%s')\" && cp '%s' '%s' && "
                      "chmod u+w '%s' && "
                      "objcopy --only-keep-debug '%s' '%s.debug' && "
                      "strip --strip-all '%s'",
                      app, src, app, app, app, app, app), 0);
  assert_int_equal(sh("readelf -n '%s' | sed -n 's/.*Build ID: *//p'", app), 0);
  snprintf(bid, sizeof bid, "%.40s", g_out);
  assert_true(strlen(bid) >= 8);
  assert_int_equal(sh("mkdir -p '%s/.build-id/%.2s' && mv '%s.debug' "
                      "'%s/.build-id/%.2s/%s.debug'",
                      dbg, bid, app, dbg, bid, bid + 2), 0);
}

/* The stripped fixture: no symbol of ours left in it. */
static void stripped_app(char *app, size_t app_cap, char *dbg,
                         size_t dbg_cap) {
  stripped_copy(g_fixture, "stripped-app", app, app_cap, dbg, dbg_cap);
  assert_int_equal(sh("nm '%s' 2>&1 | grep static_mid", app), 1);
}

static void test_stripped_debug_by_build_id(void **state) {
  char app[4200], dbg[4200], dir[4200], out[4200];
  (void)state;
  stripped_app(app, sizeof app, dbg, sizeof dbg);
  record_offline(app, "stripped", dir, sizeof dir);
  /* Without the debug dir: image+offset only, and a note saying so. */
  mkpath(out, sizeof out, "stripped-nodbg");
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out, dir), 0);
  assert_non_null(strstr(g_err, "no function symbols and no debug info"));
  check_recording(out, "stripped-app", false, NULL);
  /* With it, found by build-id: everything. */
  mkpath(out, sizeof out, "stripped-dbg");
  assert_int_equal(sh("'%s' symbolize --debug-dir '%s' -o '%s' '%s'", g_tool,
                      dbg, out, dir), 0);
  assert_null(strstr(g_err, "stripped-app"));
  check_recording(out, "stripped-app", true, NULL);
  /* Recorded in-process (a stripped release build), its frames were
   * written image+offset: `symbolize --debug-dir` names them too (QA,
   * session 39: such files were copied as they were, for good). */
  mkpath(dir, sizeof dir, "stripped-inproc");
  run_fixture(app, "STACKREC_SYMCACHE=none", dir);
  check_recording(dir, "stripped-app", false, NULL);
  mkpath(out, sizeof out, "stripped-inproc-named");
  assert_int_equal(sh("'%s' symbolize --debug-dir '%s' -o '%s' '%s'", g_tool,
                      dbg, out, dir), 0);
  assert_non_null(strstr(g_out, "the recording had left image+offset or "
                                "without file:line were resolved now"));
  check_recording(out, "stripped-app", true, NULL);
  assert_int_equal(sh("'%s' verify '%s'", g_tool, out), 0);
  assert_string_equal(g_err, "");
}

/* Inproc symbolization reads symbol caches by build-id (STACKREC_SYMCACHE,
 * else $XDG_CACHE_HOME/stackrec/symcache): the same frames as from the
 * DWARF. A cache built from a stripped copy (same build-id, no symbols)
 * proves the worker answered from it: our frames lose their names. */
static void test_inproc_symcache(void **state) {
  char full[4200], bare[4200], app[4200], xdg[4200], env[4400], dir[4200];
  (void)state;
  mkpath(full, sizeof full, "symcache-full");
  mkpath(bare, sizeof bare, "symcache-xdg/stackrec/symcache");
  mkpath(xdg, sizeof xdg, "symcache-xdg");
  mkpath(app, sizeof app, "symcache-stripped-app");
  if (sh("'%s' symcache build '%s' -o '%s'", g_tool, g_fixture, full) != 0)
    fail_msg("symcache build: %s", g_err);
  /* -o of a directory whose parents do not exist yet: made (mkdir -p). */
  if (sh("cp '%s' '%s' && chmod u+w '%s' && "
         "strip --strip-all '%s' && '%s' symcache build '%s' -o '%s'",
         g_fixture, app, app, app, g_tool, app, bare) != 0)
    fail_msg("stripped copy's cache: %s", g_err);

  snprintf(env, sizeof env, "STACKREC_SYMCACHE='%s'", full);
  mkpath(dir, sizeof dir, "symcache-inproc-full");
  run_fixture(g_fixture, env, dir);
  check_recording(dir, "symfixture", true, NULL);

  /* The default directory, under XDG_CACHE_HOME: the stripped answers. */
  snprintf(env, sizeof env, "XDG_CACHE_HOME='%s'", xdg);
  mkpath(dir, sizeof dir, "symcache-inproc-bare");
  run_fixture(g_fixture, env, dir);
  check_recording(dir, "symfixture", false, NULL);

  /* "none": no cache read, the binary's own symbols and DWARF. */
  snprintf(env, sizeof env, "XDG_CACHE_HOME='%s' STACKREC_SYMCACHE=none", xdg);
  mkpath(dir, sizeof dir, "symcache-inproc-none");
  run_fixture(g_fixture, env, dir);
  check_recording(dir, "symfixture", true, NULL);
}

/* An app whose threads' default stack is small (RLIMIT_STACK's soft
 * limit, here 128 KiB: `ulimit -S -s 128`) resolves libc's frames from
 * its DWARF in the worker: libdw's line-table reader keeps ~150 KiB on the
 * stack, and the worker, made with the default size, died of SIGSEGV (4 or
 * 5 runs in 12 before, not every one: the worker is now made with 2 MiB).
 * Twelve runs (~0.1 s each), each checked. */
static void test_inproc_small_default_stack(void **state) {
  char dir[4200], name[64];
  (void)state;
  for (int i = 0; i < 12; i++) {
    snprintf(name, sizeof name, "small-stack-%d", i);
    mkpath(dir, sizeof dir, name);
    run_fixture_after("ulimit -S -s 128 && ", g_fixture,
                      "STACKREC_SYMCACHE=none", dir);
    check_recording(dir, "symfixture", true, NULL);
  }
}

static void test_inproc_stripped_debuglink(void **state) {
  char d[4200], dir[4200];
  (void)state;
  /* A stripped app whose debug file sits in .debug/ next to it, named by
   * its .gnu_debuglink: the worker finds it (locally, never debuginfod). */
  mkpath(d, sizeof d, "dl");
  assert_int_equal(sh("mkdir -p '%s/.debug' && cp '%s' '%s/app' && "
                      "chmod u+w '%s/app' && "
                      "objcopy --only-keep-debug '%s/app' '%s/app.dbg' && "
                      "strip --strip-all '%s/app' && "
                      "objcopy --add-gnu-debuglink='%s/app.dbg' '%s/app' && "
                      "mv '%s/app.dbg' '%s/.debug/'",
                      d, g_fixture, d, d, d, d, d, d, d, d, d), 0);
  assert_int_equal(sh("nm '%s/app' 2>&1 | grep static_mid", d), 1);
  mkpath(dir, sizeof dir, "debuglink");
  snprintf(d + strlen(d), sizeof d - strlen(d), "/app");
  run_fixture(d, "", dir);
  check_recording(dir, "app", true, NULL);
}

/* The frames of the one "sym.plugin" event of dir, checked; app: whether
 * the plugin's frame must be the app's. */
static void check_plugin(const char *dir, bool app) {
  stkr_reader *r;
  stkr_event_view ev;
  int found = 0;
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    if (strcmp(ev.site, "sym.plugin") != 0) continue;
    found++;
    assert_true(ev.n_frames >= 3);
    assert_string_equal(ev.frames[0].function, "plugin_cb");
    assert_string_equal(base(ev.frames[0].file), "fixture_main.c");
    assert_int_equal(ev.frames[0].line, g_line_of[L_PLUGIN_CB]);
    assert_true(ev.frames[0].is_app); /* the main executable */
    assert_string_equal(ev.frames[1].function, "plugin_entry");
    assert_string_equal(base(ev.frames[1].file), "plugin.c");
    assert_int_equal(ev.frames[1].line, g_line_of[L_PLUGIN]);
    assert_string_equal(base(ev.frames[1].image), "symplugin");
    assert_int_equal(ev.frames[1].offset,
                     ev.pcs[1] - load_address(r, ev.frames[1].image));
    assert_int_equal(ev.frames[1].is_app, app);
  }
  assert_int_equal(found, 1);
  stkr_reader_free(r);
}

static void test_dlopen_plugin_and_app_paths(void **state) {
  char dir[4200], env[8400], pdir[4096];
  (void)state;
  /* A library loaded after the recording started (and unloaded before it
   * ended) is listed and resolved like the others. */
  mkpath(dir, sizeof dir, "plugin");
  snprintf(env, sizeof env, "SYMFIXTURE_PLUGIN='%s'", g_plugin);
  run_fixture(g_fixture, env, dir);
  check_plugin(dir, false);
  /* Under STACKREC_APP_PATHS it is the app's. */
  snprintf(pdir, sizeof pdir, "%.*s", (int)(strrchr(g_plugin, '/') - g_plugin),
           g_plugin);
  mkpath(dir, sizeof dir, "plugin-app");
  snprintf(env, sizeof env, "SYMFIXTURE_PLUGIN='%s' STACKREC_APP_PATHS='/nonexistent:%s/'",
           g_plugin, pdir);
  run_fixture(g_fixture, env, dir);
  check_plugin(dir, true);
  assert_int_equal(sh("'%s' dump --frames --app-only '%s' | grep -c plugin_entry",
                      g_tool, dir), 0);
  assert_int_equal(atoi(g_out), 1);
  /* Loaded by a relative path (dlopen("./symplugin") in its directory):
   * named by the file the kernel mapped, so it is resolved (QA, session
   * 23: its frames stayed image+offset). */
  char pre[4200];
  mkpath(dir, sizeof dir, "plugin-relative");
  snprintf(pre, sizeof pre, "cd '%s' && ", pdir);
  run_fixture_after(pre, g_fixture, "SYMFIXTURE_PLUGIN=./symplugin", dir);
  check_plugin(dir, false);
}

/* The frames of the one event at `site` in dir: its innermost function,
 * or "" when it has none (PCs only). */
static void late_function(const char *dir, const char *site, char *fn,
                          size_t cap) {
  stkr_reader *r;
  stkr_event_view ev;
  int found = 0;
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    if (strcmp(ev.site, site) != 0) continue;
    found++;
    snprintf(fn, cap, "%s", ev.n_frames && ev.frames[0].function
                                ? ev.frames[0].function : "");
  }
  stkr_reader_free(r);
  assert_int_equal(found, 1);
}

/* dir verifies without a warning, and every sym.c event still has its
 * inlined_helper frame (1001 of them). */
static void check_app_frames_kept(const char *dir) {
  assert_int_equal(sh("'%s' verify '%s' && '%s' dump --frames '%s' | "
                      "grep -c '^    inlined_helper '", g_tool, dir, g_tool,
                      dir), 0);
  assert_int_equal(atoi(g_out), 1001);
  assert_string_equal(g_err, "");
}

/* Record bin in place `tag` (into dir) ending with a stack through a
 * plugin never resolved before, in 1 KiB segments: the last one holds
 * that late stack alone, with no frame, yet its ids are still the
 * recorder's session's (its offline rewrite took ids the recorder had
 * used: "redefined differently"). `env`: more settings, or "". */
static void late_plugin_recording(const char *bin, const char *env,
                                  const char *tag, char *dir, size_t cap) {
  char all[8400], fn[256];
  mkpath(dir, cap, tag);
  snprintf(all, sizeof all, "STACKREC_FLUSH_MS=60000 STACKREC_SEGMENT_BYTES=1K "
           "%sSYMFIXTURE_LATE='%s'", env, g_plugin);
  run_fixture(bin, all, dir);
  late_function(dir, "sym.plugin", fn, sizeof fn);
  assert_string_equal(fn, "");
}

/* A stack first seen as the session ends (QA, session 27: written with
 * PCs only, and `symbolize` copied such a file as it was):
 *  - in an image already open, the worker still resolves it;
 *  - in one never resolved before (a plugin's), it keeps its PCs, and
 *    `symbolize` resolves just those stacks of the otherwise symbolized
 *    file. A long flush interval: no pass between the event and the end. */
static void test_stacks_first_seen_at_the_end(void **state) {
  char dir[4200], out[4200], fn[256];
  (void)state;
  mkpath(dir, sizeof dir, "late-main");
  run_fixture(g_fixture, "STACKREC_FLUSH_MS=60000 SYMFIXTURE_LATE=main", dir);
  late_function(dir, "sym.late", fn, sizeof fn);
  assert_string_equal(fn, "late_call");
  mkpath(out, sizeof out, "late-plugin-sym");
  late_plugin_recording(g_fixture, "", "late-plugin", dir, sizeof dir);
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out, dir), 0);
  assert_non_null(strstr(g_out, "only those were resolved"));
  assert_string_equal(g_err, "");
  check_plugin(out, false);
  /* The file's own frames are still there, and read without a warning. */
  check_app_frames_kept(out);
}

static void test_dump_frames_and_app_only(void **state) {
  char dir[4200];
  (void)state;
  mkpath(dir, sizeof dir, "dump");
  run_fixture(g_fixture, "", dir);
  assert_int_equal(sh("'%s' dump --json --limit 1 '%s'", g_tool, dir), 0);
  assert_non_null(strstr(g_out, "\"function\":\"inlined_helper\""));
  assert_non_null(strstr(g_out, "\"inlined\":true"));
  assert_non_null(strstr(g_out, "\"app\":false")); /* libc's start code */
  assert_int_equal(sh("'%s' dump --json --app-only --limit 1 '%s'", g_tool, dir),
                   0);
  assert_non_null(strstr(g_out, "\"function\":\"main\""));
  assert_null(strstr(g_out, "\"app\":false"));
  assert_null(strstr(g_out, "libc"));
  assert_int_equal(sh("'%s' dump --frames --app-only --limit 1 '%s'", g_tool,
                      dir), 0);
  {
    char want[256];
    snprintf(want, sizeof want,
             "\n    inlined_helper (tests/symfixture/fixture_c.c:%d) "
             "[inlined]\n    outer_c (tests/symfixture/fixture_c.c:%d)\n",
             g_line_of[L_INLINED], g_line_of[L_OUTER_C]);
    if (!strstr(g_out, want)) fail_msg("no\n%s\nin\n%s", want, g_out);
  }
}

/* A stripped plugin recorded in-process: its exported plugin_entry is
 * named from .dynsym, without file or line; `symbolize --debug-dir` with
 * its debug file gives them (QA, session 40: only frames without a
 * function were resolved again, so a library's stayed without file:line). */
static void test_dynsym_frames_get_their_lines(void **state) {
  char plugin[4200], dbg[4200], dir[4200], out[4200], env[8600];
  (void)state;
  stripped_copy(g_plugin, "stripped-plugin/symplugin", plugin, sizeof plugin,
                dbg, sizeof dbg);
  mkpath(dir, sizeof dir, "stripped-plugin-rec");
  snprintf(env, sizeof env, "SYMFIXTURE_PLUGIN='%s' STACKREC_SYMCACHE=none",
           plugin);
  run_fixture(g_fixture, env, dir);
  /* Named, with no file. */
  assert_int_equal(sh("'%s' dump --frames '%s' | grep -c '^    plugin_entry$'",
                      g_tool, dir), 0);
  assert_int_equal(atoi(g_out), 1);
  mkpath(out, sizeof out, "stripped-plugin-sym");
  assert_int_equal(sh("'%s' symbolize --debug-dir '%s' -o '%s' '%s'", g_tool,
                      dbg, out, dir), 0);
  assert_non_null(strstr(g_out, "resolved now"));
  check_plugin(out, false);
}

/* The ids a second run adds go above the first run's: a stripped app's
 * late plugin stack, resolved by a first `symbolize` (no debug dir, ids
 * moved up), then the app's frames by a second one (with it). Had both
 * runs taken the same ids, the reader (a session's first definition of
 * an id wins) would name the plugin's frame after one of the app's. */
static void test_second_run_ids_above_the_first(void **state) {
  char app[4200], dbg[4200], dir[4200], out1[4200], out2[4200];
  (void)state;
  stripped_app(app, sizeof app, dbg, sizeof dbg);
  mkpath(out1, sizeof out1, "stripped-late-1");
  mkpath(out2, sizeof out2, "stripped-late-2");
  late_plugin_recording(app, "STACKREC_SYMCACHE=none ", "stripped-late", dir,
                        sizeof dir);
  assert_int_equal(sh("'%s' symbolize -o '%s' '%s'", g_tool, out1, dir), 0);
  assert_non_null(strstr(g_out, "only those were resolved"));
  assert_null(strstr(g_out, "resolved now")); /* no debug file: none */
  assert_int_equal(sh("'%s' dump --frames '%s' | grep -c '^    plugin_entry '",
                      g_tool, out1), 0);
  assert_int_equal(atoi(g_out), 1); /* the plugin's frame; plugin_cb (the
                                       app's) is image+offset still */
  assert_int_equal(sh("'%s' symbolize --debug-dir '%s' -o '%s' '%s'", g_tool,
                      dbg, out2, out1), 0);
  assert_non_null(strstr(g_out, "resolved now"));
  check_plugin(out2, false);
  check_app_frames_kept(out2);
}

TL_TEST_MAIN("symbolize", setup, NULL, test_inproc_frames,
             test_inproc_segments_self_contained, test_offline_then_symbolize,
             test_stripped_debug_by_build_id, test_inproc_symcache,
             test_inproc_small_default_stack, test_inproc_stripped_debuglink,
             test_dump_frames_and_app_only,
             test_dlopen_plugin_and_app_paths,
             test_stacks_first_seen_at_the_end,
             test_second_run_ids_above_the_first,
             test_dynsym_frames_get_their_lines)
