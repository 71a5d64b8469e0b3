/*
 * symbolize_harness.h: what the symbolization tests share
 * (test-symbolize.c, test-symbolize-files.c): the fixture program
 * (tests/symfixture) run into a recording, the lines of its calls it
 * prints (g_line_of) and its resolver counts; shell runs with captured
 * output; every frame of a recording checked against the fixture's truth
 * (check_recording); the group setup that finds the fixture, its plugin
 * and the tool. Include after <cmocka.h>.
 */
#ifndef STKR_TESTS_SYMBOLIZE_HARNESS_H
#define STKR_TESTS_SYMBOLIZE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The fixture binary `bin` recorded offline (STACKREC_SYMBOLIZE=offline:
 * PCs only, for `stackrec symbolize`) into g_tmp/tag, its path into dir. */
static void record_offline(const char *bin, const char *tag, char *dir,
                           size_t cap) {
  mkpath(dir, cap, tag);
  run_fixture(bin, "STACKREC_SYMBOLIZE=offline", dir);
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

/* The fixture's two call chains: every event at `site` has the n frames
 * w[] of our code, innermost first, then libc's start code. */
typedef struct chain {
  const char *site;
  size_t n;
  want w[6];
} chain;

static const chain k_chains[2] = {
    {"sym.c", 6,
     {{"inlined_helper", "fixture_c.c", L_INLINED, true},
      {"outer_c", "fixture_c.c", L_OUTER_C, false},
      {"static_mid", "fixture_c.c", L_STATIC_MID, false},
      {"run_c", "fixture_c.c", L_RUN_C, false},
      {"chains", "fixture_main.c", L_MAIN_C, false},
      {"main", "fixture_main.c", L_MAIN, false}}},
    {"sym.cc", 5,
     {{"int fx::twice<int>(int)", "fixture_cc.cc", L_TWICE, false},
      {"fx::Widget::poke(int)", "fixture_cc.cc", L_POKE, false},
      {"run_cc", "fixture_cc.cc", L_RUN_CC, false},
      {"chains", "fixture_main.c", L_MAIN_CC, false},
      {"main", "fixture_main.c", L_MAIN, false}}},
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
  uint64_t n = 0, seen[2] = {0, 0};
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
    size_t c = 0;
    while (c < 2 && strcmp(ev.site, k_chains[c].site) != 0) c++;
    if (c == 2) fail_msg("unexpected site %s", ev.site);
    check_event(r, &ev, k_chains[c].w, k_chains[c].n, image_base, symbols);
    seen[c]++;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(seen[0], 1001); /* sym.c */
  assert_int_equal(seen[1], 1001); /* sym.cc */
  stkr_reader_free(r);
  if (pcs) *pcs = nu;
  return n;
}

#endif
