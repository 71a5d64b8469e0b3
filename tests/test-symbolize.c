/*
 * test-symbolize.c: symbolization end to end. Runs the fixture program
 * (tests/symfixture: C and C++ call chains, -O2 -g, an inlined call, a
 * namespaced method, a template; a data dependency) in each mode, reads the
 * recording back and compares every frame of our own code with the truth:
 * exact demangled names, file basenames, the line of every call (which
 * the fixture prints) and the inline frame. Also: `stackrec symbolize` on
 * offline recordings, a stripped copy whose debug file is found only by
 * build-id, a binary replaced by another build (offsets and a warning,
 * never a name), repeated stacks doing no resolver work, segments that each
 * carry their own definitions, and `stackrec dump --app-only`.
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
#include "tests/symfixture/fixture.h"
#include "tests/testlib.h"

static char g_fixture[4096], g_plugin[4096], g_tool[4096], g_tmp[4096];
static char g_out[1 << 16], g_err[1 << 16];
static int g_line_of[L_COUNT];
static unsigned long long g_resolved[2];

static const tl_capture g_sh = {g_out, sizeof g_out, g_err, sizeof g_err,
                                g_tmp, true, -1};
/* Run a shell command line; stdout/stderr into g_out/g_err. @return exit
 * status (killed: fails the test). */
#define sh(...) tl_sh(&g_sh, __VA_ARGS__)

/* Run the fixture binary `bin` with `env` (shell assignments) recording
 * into dir; parse its output into g_line_of and g_resolved. */
static void run_fixture_after(const char *pre, const char *bin,
                              const char *env, const char *dir) {
  int st = sh("%sSTACKREC_DIR='%s' STACKREC_FLUSH_MS=50 %s '%s'", pre, dir,
              env, bin);
  const char *p = g_out;
  int got = 0, k, v;
  unsigned long long r;
  if (st != 0) fail_msg("fixture exited %d:\n%s", st, g_err);
  for (int n = 0; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (sscanf(p, "resolved %llu", &r) == 1 && n < 2) g_resolved[n++] = r;
    if (sscanf(p, "line %d %d", &k, &v) == 2 && k >= 0 && k < L_COUNT) {
      g_line_of[k] = v;
      got++;
    }
  }
  assert_int_equal(got, L_COUNT);
}

/* (run_fixture_after: the shell runs `pre` first, "" for nothing.) */
static void run_fixture(const char *bin, const char *env, const char *dir) {
  run_fixture_after("", bin, env, dir);
}

static void mkpath(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", g_tmp, name);
}

static int setup(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  (void)state;
  if (tl_mkdtemp(g_tmp, sizeof g_tmp, "sym") != 0) return -1;
  snprintf(g_fixture, sizeof g_fixture, "%s/%s/tests/symfixture/symfixture",
           src ? src : ".", ws ? ws : ".");
  snprintf(g_plugin, sizeof g_plugin, "%s/%s/tests/symfixture/symplugin",
           src ? src : ".", ws ? ws : ".");
  snprintf(g_tool, sizeof g_tool, "%s/%s/tools/stackrec", src ? src : ".",
           ws ? ws : ".");
  if (access(g_fixture, X_OK) != 0 || access(g_tool, X_OK) != 0) {
    fprintf(stderr, "missing %s or %s\n", g_fixture, g_tool);
    return -1;
  }
  return 0;
}

/* ---- expected frames ----------------------------------------------------- */

typedef struct want {
  const char *function, *file;
  int line_key;
  bool inlined;
} want;

static const want want_c[] = {
    {"inlined_helper", "fixture_c.c", L_INLINED, true},
    {"outer_c", "fixture_c.c", L_OUTER_C, false},
    {"static_mid", "fixture_c.c", L_STATIC_MID, false},
    {"run_c", "fixture_c.c", L_RUN_C, false},
    {"chains", "fixture_main.c", L_MAIN_C, false},
    {"main", "fixture_main.c", L_MAIN, false},
};
static const want want_cc[] = {
    {"int fx::twice<int>(int)", "fixture_cc.cc", L_TWICE, false},
    {"fx::Widget::poke(int)", "fixture_cc.cc", L_POKE, false},
    {"run_cc", "fixture_cc.cc", L_RUN_CC, false},
    {"chains", "fixture_main.c", L_MAIN_CC, false},
    {"main", "fixture_main.c", L_MAIN, false},
};

static const char *base(const char *p) {
  const char *s = p ? strrchr(p, '/') : NULL;
  return s ? s + 1 : p;
}

/* The load address of the image at `path` in process 0. */
static uint64_t load_address(stkr_reader *r, const char *path) {
  const stkr_image_info *im;
  size_t n;
  assert_int_equal(stkr_reader_images(r, 0, &im, &n), 0);
  for (size_t i = 0; i < n; i++)
    if (strcmp(im[i].path, path) == 0) return im[i].load_address;
  fail_msg("image %s not in the recording", path);
  return 0;
}

/* Check one event's frames against w[]: names, files, lines, inline
 * flags, PCs, image and offset; `symbols` false: our frames must have no
 * name, only image+offset (an unusable binary). */
static void check_event(stkr_reader *r, const stkr_event_view *ev,
                        const want *w, size_t nw, const char *image_base,
                        bool symbols) {
  size_t pc = 0;
  if (!symbols) { /* one frame per PC: as many as our real frames */
    size_t real = 0;
    for (size_t i = 0; i < nw; i++) real += !w[i].inlined;
    nw = real;
  }
  assert_true(ev->n_frames >= nw);
  for (size_t i = 0; i < nw; i++) {
    const stkr_frame *f = &ev->frames[i];
    if (i > 0 && !ev->frames[i - 1].inlined) pc++;
    assert_int_equal(f->pc, ev->pcs[pc]);
    assert_non_null(f->image);
    assert_string_equal(base(f->image), image_base);
    assert_int_equal(f->offset, f->pc - load_address(r, f->image));
    assert_true(f->is_app);
    if (!symbols) {
      assert_null(f->function);
      assert_null(f->file);
      assert_false(f->inlined);
      continue;
    }
    if (!f->function || strcmp(f->function, w[i].function) != 0)
      fail_msg("frame %zu: function %s, want %s", i,
               f->function ? f->function : "(null)", w[i].function);
    assert_non_null(f->file);
    assert_string_equal(base(f->file), w[i].file);
    if ((int)f->line != g_line_of[w[i].line_key])
      fail_msg("frame %zu (%s): line %u, want %d", i, w[i].function,
               (unsigned)f->line, g_line_of[w[i].line_key]);
    assert_int_equal(f->inlined, w[i].inlined);
  }
  if (!symbols) return;
  /* Past main: libc's start code, not the app's. */
  for (size_t i = nw; i < ev->n_frames; i++) assert_false(ev->frames[i].is_app);
}

/* Read dir; check every event; @return the number of events. Also counts
 * the distinct PCs of the recording into *pcs (if not NULL). */
static uint64_t check_recording(const char *dir, const char *image_base,
                                bool symbols, size_t *pcs) {
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t n = 0, seen_c = 0, seen_cc = 0;
  uint64_t uniq[256];
  size_t nu = 0;
  int rc;
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    n++;
    for (size_t i = 0; i < ev.n_pcs; i++) {
      size_t k = 0;
      while (k < nu && uniq[k] != ev.pcs[i]) k++;
      if (k == nu && nu < 256) uniq[nu++] = ev.pcs[i];
    }
    if (strcmp(ev.site, "sym.c") == 0) {
      check_event(r, &ev, want_c, sizeof want_c / sizeof *want_c, image_base,
                  symbols);
      seen_c++;
    } else if (strcmp(ev.site, "sym.cc") == 0) {
      check_event(r, &ev, want_cc, sizeof want_cc / sizeof *want_cc,
                  image_base, symbols);
      seen_cc++;
    } else {
      fail_msg("unexpected site %s", ev.site);
    }
  }
  assert_int_equal(rc, 0);
  assert_int_equal(seen_c, 1001);
  assert_int_equal(seen_cc, 1001);
  stkr_reader_free(r);
  if (pcs) *pcs = nu;
  return n;
}

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
  mkpath(dir, sizeof dir, "offline");
  mkpath(out, sizeof out, "offline-sym");
  run_fixture(g_fixture, "STACKREC_SYMBOLIZE=offline", dir);
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
  mkpath(dir, sizeof dir, "stripped");
  run_fixture(app, "STACKREC_SYMBOLIZE=offline", dir);
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
  mkpath(dir, sizeof dir, "mismatch");
  mkpath(out, sizeof out, "mismatch-sym");
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", g_fixture, app, app), 0);
  run_fixture(app, "STACKREC_SYMBOLIZE=offline", dir);
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
  mkpath(dir, sizeof dir, "fifo-rec");
  mkpath(out, sizeof out, "fifo-sym");
  assert_int_equal(sh("cp '%s' '%s' && chmod u+w '%s'", g_fixture, app, app), 0);
  run_fixture(app, "STACKREC_SYMBOLIZE=offline", dir);
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
  mkpath(dir, sizeof dir, "lost-rec");
  mkpath(out, sizeof out, "lost-sym");
  run_fixture(g_fixture, "STACKREC_SYMBOLIZE=offline", dir);
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
             test_inproc_symcache_fifo, test_inproc_small_default_stack,
             test_inproc_stripped_debuglink,
             test_mismatched_binary, test_fifo_in_place_of_files,
             test_unreadable_segment_marked_lost,
             test_fifo_debuglink, test_dump_frames_and_app_only,
             test_dlopen_plugin_and_app_paths,
             test_stacks_first_seen_at_the_end,
             test_second_run_ids_above_the_first,
             test_dynsym_frames_get_their_lines)
