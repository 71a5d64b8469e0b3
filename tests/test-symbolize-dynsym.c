/*
 * test-symbolize-dynsym.c: stripped programs are named from .dynsym, PIE or
 * not. Copies of tests/dynsym_fixtures (linked with --export-dynamic) are
 * stripped here as Debian strips /usr/bin/python3.11: `strip --strip-all`
 * (no .symtab, no DWARF), then a .gnu_debuglink to a debug file that is
 * removed again; only .dynsym names dyn_leaf, dyn_outer and main. Each is
 * recorded
 *  - by the embedded recorder in inproc mode (the worker resolves),
 *  - by it in offline mode, then resolved by `stackrec symbolize`,
 *  - by `stackrec record` and the hook library (offline, resolved in place
 *    at the end),
 * and the event's frames must be dyn_leaf, (the static st_hidden: no name,
 * image+offset), dyn_outer, main. st_hidden lies above an exported
 * function that ends before it: a nearest-preceding-symbol answer would
 * name it, the containment rule must not.
 *
 * The non-PIE (ET_EXEC) cases failed before the fix in
 * symbolize/symbolize_elf.c (mod.shift): libdw placed the module at its
 * link addresses while `stackrec symbolize` and `record` looked PCs up at
 * the image's canonical range, so every frame kept image+offset.
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

#include "proto/stkr_reader.h"
#include "tests/testlib.h"

static char g_bin[4096], g_lib[4096], g_tmp[2048];
static char g_out[1 << 16], g_err[1 << 16];
static const tl_capture g_sh = {g_out, sizeof g_out, g_err, sizeof g_err,
                                g_tmp, true, -1};
#define sh(...) tl_sh(&g_sh, __VA_ARGS__)

/* "LD_PRELOAD='<ASan runtime>' " under --config=asan (the ASan-built hook
 * library needs the runtime first in a program's list), else "". Only for
 * `stackrec record`: binutils would report their leaks under it. */
static char g_preload[1100];

/* ---- the stripped copy ----------------------------------------------------- */

/* A function symbol of the stripped copy's .dynsym (`nm -D -S`). */
typedef struct dsym {
  uint64_t lo, hi;
  char name[64];
} dsym;

typedef struct fixture {
  char path[2300];
  dsym syms[64];
  size_t n_syms;
} fixture;

/* Copy tests/dynsym_fixtures/<name> to g_tmp, strip it, give it a
 * .gnu_debuglink whose file is gone, and check what is left: the ELF type
 * `type` ("EXEC" or "DYN"), no .symtab, the three exported names. */
static void make_fixture(fixture *fx, const char *name, const char *type) {
  char src[4096], *p;

  tl_runfile(src, sizeof src, "tests/dynsym_fixtures/");
  snprintf(src + strlen(src), sizeof src - strlen(src), "%s", name);
  snprintf(fx->path, sizeof fx->path, "%s/%s", g_tmp, name);
  if (sh("cp '%s' '%s' && chmod u+w '%s' && "
         "objcopy --only-keep-debug '%s' '%s.debug' && "
         "strip --strip-all '%s' && "
         "objcopy --add-gnu-debuglink='%s.debug' '%s' && rm '%s.debug'",
         src, fx->path, fx->path, fx->path, fx->path, fx->path, fx->path,
         fx->path, fx->path) != 0)
    fail_msg("preparing %s: %s", fx->path, g_err);
  assert_int_equal(sh("readelf -hSW '%s'", fx->path), 0);
  if (!strstr(g_out, type)) fail_msg("%s: not of type %s:\n%s", name, type, g_out);
  assert_null(strstr(g_out, ".symtab"));
  assert_null(strstr(g_out, ".debug_info"));
  assert_non_null(strstr(g_out, ".gnu_debuglink"));
  assert_int_equal(sh("nm -D -S --defined-only '%s'", fx->path), 0);
  fx->n_syms = 0;
  for (p = g_out; p && *p && fx->n_syms < 64; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    unsigned long long lo, size;
    char t, nm[64];
    if (sscanf(p, "%llx %llx %c %63s", &lo, &size, &t, nm) == 4 &&
        (t == 'T' || t == 't' || t == 'W' || t == 'i')) {
      fx->syms[fx->n_syms] = (dsym){lo, lo + size, ""};
      snprintf(fx->syms[fx->n_syms++].name, sizeof fx->syms[0].name, "%s", nm);
    }
  }
  for (size_t k = 0; k < 3; k++) {
    static const char *const want[] = {"dyn_leaf", "dyn_outer", "main"};
    bool found = false;
    for (size_t i = 0; i < fx->n_syms; i++) found |= !strcmp(fx->syms[i].name, want[k]);
    if (!found) fail_msg("%s: %s not in .dynsym:\n%s", name, want[k], g_out);
  }
}

/* ---- checking a recording -------------------------------------------------- */

static const char *base(const char *p) {
  const char *s = p ? strrchr(p, '/') : NULL;
  return s ? s + 1 : p;
}

/* Under a sanitizer its interceptor of the hooked call may come first. */
static bool sanitizer_frame(const stkr_frame *f) {
  const char *b = base(f->image);
  return SANITIZED && b &&
         (strncmp(b, "libasan", 7) == 0 || strncmp(b, "libtsan", 7) == 0);
}

static void want_named(const stkr_frame *f, const fixture *fx, const char *fn) {
  if (!f->function || strcmp(f->function, fn) != 0)
    fail_msg("frame at %s+%#llx: function %s, want %s", base(f->image),
             (unsigned long long)f->offset, f->function ? f->function : "(null)",
             fn);
  assert_null(f->file); /* .dynsym has no lines */
  assert_false(f->inlined);
  assert_true(f->is_app);
  assert_string_equal(f->image, fx->path);
}

/* st_hidden's frame: no name; and some .dynsym function lies below it and
 * ends before it (so the check means something). */
static void want_unnamed(const stkr_frame *f, const fixture *fx) {
  uint64_t a = f->offset - 1; /* a return address: the call is before it */
  const dsym *below = NULL;
  if (f->function)
    fail_msg("static function at %s+%#llx named %s", base(f->image),
             (unsigned long long)f->offset, f->function);
  assert_string_equal(f->image, fx->path);
  for (size_t i = 0; i < fx->n_syms; i++)
    if (fx->syms[i].lo <= a && (!below || fx->syms[i].lo > below->lo))
      below = &fx->syms[i];
  if (!below) fail_msg("no .dynsym function below %#llx", (unsigned long long)a);
  assert_true(below->hi <= a);
}

/* The one event at `site` in dir: its frames must be the fixture's. */
static void check_recording(const char *dir, const char *site,
                            const fixture *fx) {
  stkr_reader *r;
  stkr_event_view ev;
  int rc, seen = 0;

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    size_t k = 0;
    if (ev.is_mark || strcmp(ev.site, site) != 0) continue;
    seen++;
    while (k < ev.n_frames && sanitizer_frame(&ev.frames[k])) k++;
    if (ev.n_frames < k + 4)
      fail_msg("%s: %zu frames, want at least %zu", site, ev.n_frames, k + 4);
    want_named(&ev.frames[k], fx, "dyn_leaf");
    want_unnamed(&ev.frames[k + 1], fx);
    want_named(&ev.frames[k + 2], fx, "dyn_outer");
    want_named(&ev.frames[k + 3], fx, "main");
  }
  assert_int_equal(rc, 0);
  assert_int_equal(seen, 1);
  stkr_reader_free(r);
}

/* ---- the three ways of resolving ------------------------------------------- */

/* The embedding fixture, inproc: its own worker names the frames. */
static void embed_inproc(const char *name, const char *type) {
  fixture fx;
  const char *dir = tl_fresh(g_tmp, "inproc");
  make_fixture(&fx, name, type);
  if (sh("STACKREC_DIR='%s' STACKREC_SYMBOLIZE=inproc '%s'", dir, fx.path))
    fail_msg("%s: %s", fx.path, g_err);
  check_recording(dir, "dynsym.leaf", &fx);
}

/* The embedding fixture, offline; `stackrec symbolize` names the frames. */
static void embed_offline(const char *name, const char *type) {
  fixture fx;
  char dir[2300], out[2400];
  snprintf(dir, sizeof dir, "%s", tl_fresh(g_tmp, "offline"));
  snprintf(out, sizeof out, "%s-s", dir);
  make_fixture(&fx, name, type);
  if (sh("STACKREC_DIR='%s' STACKREC_SYMBOLIZE=offline '%s'", dir, fx.path))
    fail_msg("%s: %s", fx.path, g_err);
  if (sh("'%s' symbolize -o '%s' '%s'", g_bin, out, dir) != 0)
    fail_msg("stackrec symbolize: %s", g_err);
  if (strstr(g_err, name)) fail_msg("stackrec symbolize warned: %s", g_err);
  check_recording(out, "dynsym.leaf", &fx);
}

/* The hooked fixture under `stackrec record`: resolved in place at the end. */
static void hook_record(const char *name, const char *type) {
  fixture fx;
  const char *dir = tl_fresh(g_tmp, "record");
  make_fixture(&fx, name, type);
  if (sh("%s'%s' record -q -o '%s' -- '%s'", g_preload, g_bin, dir,
         fx.path) != 0)
    fail_msg("stackrec record: %s", g_err);
  if (strstr(g_err, name)) fail_msg("stackrec record warned: %s", g_err);
  check_recording(dir, "identifiers.gethostname", &fx);
}

static void pie_inproc(void **s) { (void)s; embed_inproc("dynsym_embed_pie", "DYN"); }
static void exec_inproc(void **s) { (void)s; embed_inproc("dynsym_embed_exec", "EXEC"); }
static void pie_symbolize(void **s) { (void)s; embed_offline("dynsym_embed_pie", "DYN"); }
static void exec_symbolize(void **s) { (void)s; embed_offline("dynsym_embed_exec", "EXEC"); }
static void pie_record(void **s) { (void)s; hook_record("dynsym_hook_pie", "DYN"); }
static void exec_record(void **s) { (void)s; hook_record("dynsym_hook_exec", "EXEC"); }

static int setup(void **state) {
  (void)state;
  if (tl_hook_paths("dynsym", g_bin, sizeof g_bin, g_lib, sizeof g_lib, g_tmp,
                    sizeof g_tmp) != 0)
    return -1;
  setenv("STACKREC_PRELOAD", g_lib, 1);
  setenv("STACKREC_EXIT_MS", "5000", 1); /* what is recorded, not how fast */
  unsetenv("STACKREC_DIR");
  unsetenv("STACKREC_CATEGORIES");
  unsetenv("STACKREC_SYMBOLIZE");
  unsetenv("LD_PRELOAD");
#if defined(__SANITIZE_ADDRESS__)
  {
    char rt[1024];
    tl_asan_runtime(rt, sizeof rt);
    if (rt[0] == '\0') {
      fprintf(stderr, "sanitizer build, but no sanitizer runtime loaded\n");
      return -1;
    }
    snprintf(g_preload, sizeof g_preload, "LD_PRELOAD='%s' ", rt);
  }
#endif
  return 0;
}

TL_TEST_MAIN("symbolize-dynsym", setup, NULL, pie_inproc, exec_inproc,
             pie_symbolize, exec_symbolize, pie_record, exec_record)
