/*
 * test-symbolize-apple.c: `stackrec symbolize --debug-dir` on recordings
 * made on Apple devices in offline mode: synthetic recordings whose image
 * list names the Mach-O fixtures (tests/apple/fixtures.sh) by UUID
 * (Image.build_id = LC_UUID), slid load address and an on-device path.
 * Every PC (realistic return addresses: instruction + 4, looked up at
 * PC - 1) must resolve to exactly what llvm-symbolizer says for
 * PC - 1 - slide in the dSYM: every frame's function, file, line, column
 * and the inline chain. Also: the slice of a universal dSYM chosen by
 * UUID (an arm64 and an x86_64 process), DWARF 5, dSYMs found in an
 * .xcarchive, a binary without dSYM (symbol table names only), symbol
 * caches only (stackrec symcache build), and images
 * whose UUID nothing has (or a file of that name with another UUID): image
 * + offset and a warning naming the UUID, never a name.
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

#include <cmocka.h>

#include "macho/macho.h"
#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "tests/apple/macho_test.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

#define VMADDR 0x100000000ull
#define PER_STACK 16
#define MAX_IMG 4
#define MAX_PCS 40000
#define ORACLE_MAX 16

typedef struct img {
  const char *path;      /* on the device */
  uint64_t load;         /* slid Mach-O header */
  uint8_t uuid[16];
  const char *fixture;   /* thin file whose __text gives the PCs */
  size_t n_pcs;          /* how many PCs to take from it */
} img;

typedef struct oframe {
  char fn[512], file[512];
  uint32_t line, col;
} oframe;

typedef struct oracle {
  oframe f[ORACLE_MAX];
  size_t n;
} oracle;

static uint64_t g_pcs[MAX_PCS];
static oracle g_want[MAX_PCS];

/* __text of a thin fixture: [lo, lo + size). */
static void text_of(const char *name, uint64_t *lo, uint64_t *size) {
  char path[4200];
  FILE *f;
  static uint8_t buf[8 << 20];
  size_t len, n;
  stkr_macho_slice s;
  stkr_macho_image im;
  char err[256];
  snprintf(path, sizeof path, "%s/%s", mt_fx, name);
  assert_non_null(f = fopen(path, "rb"));
  len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_int_equal(stkr_macho_slices(buf, len, &s, 1, &n, err, sizeof err), 0);
  assert_int_equal(stkr_macho_parse(buf, len, &s, &im, err, sizeof err), 0);
  const stkr_macho_section *t = stkr_macho_section_find(&im, "__TEXT", "__text");
  assert_non_null(t);
  *lo = t->addr;
  *size = t->size;
  stkr_macho_image_free(&im);
}

/* Write one process's recording: images, one site, one thread, stacks of
 * PER_STACK PCs, one event per stack. */
static void write_rec(const char *dir, uint32_t pid, const char *arch,
                      const img *im, size_t n_img, const uint64_t *pcs,
                      size_t n_pcs) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h;
  Stackrec__Image imgs[MAX_IMG], *imgp[MAX_IMG];
  Stackrec__SiteDef site = STACKREC__SITE_DEF__INIT, *sitep = &site;
  Stackrec__ThreadDef th = STACKREC__THREAD_DEF__INIT, *thp = &th;
  size_t n_st = (n_pcs + PER_STACK - 1) / PER_STACK;
  Stackrec__StackDef *st = calloc(n_st, sizeof *st);
  Stackrec__StackDef **stp = calloc(n_st, sizeof *stp);
  fx_ev *evs = calloc(n_st, sizeof *evs);
  stkr_fmt_buf out = {0};

  assert_true(st != NULL && stp != NULL && evs != NULL);
  fx_header_init(&h, pid, "App", 1000, 1700000000000000000ull);
  h.arch = (char *)arch;
  b.header = &h;
  b.seq = 1;
  for (size_t i = 0; i < n_img; i++) {
    stackrec__image__init(&imgs[i]);
    imgs[i].path = (char *)im[i].path;
    imgs[i].load_address = im[i].load;
    imgs[i].text_start = im[i].load;
    imgs[i].text_end = im[i].load + 0x1000000;
    imgs[i].build_id.data = (uint8_t *)im[i].uuid;
    imgs[i].build_id.len = 16;
    imgs[i].app = i == 0;
    imgp[i] = &imgs[i];
  }
  b.images = imgp;
  b.n_images = n_img;
  site.id = 1;
  site.name = "privacy.test";
  b.sites = &sitep;
  b.n_sites = 1;
  th.id = 1;
  th.tid = 1001;
  th.name = "main";
  b.threads = &thp;
  b.n_threads = 1;
  for (size_t i = 0; i < n_st; i++) {
    stackrec__stack_def__init(&st[i]);
    st[i].id = (uint32_t)i + 1;
    st[i].pcs = (uint64_t *)pcs + i * PER_STACK;
    st[i].n_pcs = i + 1 < n_st ? PER_STACK : n_pcs - i * PER_STACK;
    st[i].site_id = 1;
    st[i].hash = 0x9000 + i;
    stp[i] = &st[i];
    /* One event per stack, 10 ns apart from the first at 1000 + 10. */
    evs[i] = (fx_ev){.delta = 10, .site = 1, .thread = 1,
                     .stack = (uint32_t)i + 1};
  }
  b.stacks = stp;
  b.n_stacks = n_st;
  b.last = true;
  assert_int_equal(fx_encode_events(&b, evs, n_st, 1000, &out), 0);
  mkdir(dir, 0700);
  assert_int_equal(fx_write_segment(dir, pid, 1, &out), 0);
  stkr_fmt_buf_free(&out);
  free(st);
  free(stp);
  free(evs);
}

/* llvm-symbolizer's frames for each address (text output: "function" and
 * "file:line:column" per frame, a blank line after each address). */
static void run_oracle(const char *obj, const char *arch, const uint64_t *addrs,
                       size_t n, oracle *out) {
  char in[4200], res[4200], line1[1024], line2[1024];
  FILE *f;
  snprintf(in, sizeof in, "%s/oracle.in", mt_tmp);
  snprintf(res, sizeof res, "%s/oracle.out", mt_tmp);
  assert_non_null(f = fopen(in, "w"));
  for (size_t i = 0; i < n; i++) fprintf(f, "0x%llx\n", (unsigned long long)addrs[i]);
  fclose(f);
  assert_int_equal(mt_sh("(llvm-symbolizer-14 --obj='%s' %s%s -C -i < '%s' > '%s')",
                         obj, arch ? "--default-arch=" : "", arch ? arch : "",
                         in, res), 0);
  assert_non_null(f = fopen(res, "r"));
  for (size_t i = 0; i < n; i++) {
    out[i].n = 0;
    while (fgets(line1, sizeof line1, f) && line1[0] != '\n') {
      char *colon2, *colon1;
      assert_non_null(fgets(line2, sizeof line2, f));
      line1[strcspn(line1, "\n")] = '\0';
      line2[strcspn(line2, "\n")] = '\0';
      if (out[i].n == ORACLE_MAX) continue;
      oframe *o = &out[i].f[out[i].n++];
      colon2 = strrchr(line2, ':');
      *colon2 = '\0';
      colon1 = strrchr(line2, ':');
      *colon1 = '\0';
      snprintf(o->fn, sizeof o->fn, "%s", strcmp(line1, "??") ? line1 : "");
      snprintf(o->file, sizeof o->file, "%s", strcmp(line2, "??") ? line2 : "");
      o->line = (uint32_t)atoi(colon1 + 1);
      o->col = (uint32_t)atoi(colon2 + 1);
    }
    if (out[i].n == 1 && !out[i].f[0].fn[0]) out[i].n = 0; /* "??" */
  }
  fclose(f);
}

/* PCs of image k: every 4th byte of its __text, as return addresses. */
static size_t make_pcs(const img *im, uint64_t *pcs, uint64_t *oracle_addr,
                       size_t max) {
  uint64_t lo, size;
  size_t n = 0;
  text_of(im->fixture, &lo, &size);
  for (uint64_t a = lo; a + 4 <= lo + size && n < max && n < im->n_pcs; a += 4) {
    pcs[n] = a + 4 - VMADDR + im->load; /* the return address */
    oracle_addr[n] = a + 3;             /* PC - 1, unslid */
    n++;
  }
  return n;
}

/* Read OUT; every PC in [first, first+n) of the global list must match
 * g_want (or be unresolved with an offset if want_none). @return PCs
 * checked. */
static size_t check_out(const char *out, uint32_t pid, size_t first, size_t n,
                        uint64_t load, bool want_none, bool function_only) {
  stkr_reader *r;
  stkr_event_view ev;
  size_t checked = 0;
  int rc;
  assert_int_equal(stkr_reader_open(out, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    size_t j = 0;
    if (ev.pid != pid) continue;
    assert_non_null(ev.frames);
    for (size_t k = 0; k < ev.n_pcs; k++) {
      size_t idx;
      for (idx = first; idx < first + n && g_pcs[idx] != ev.pcs[k]; idx++) {}
      size_t f0 = j;
      while (j < ev.n_frames && ev.frames[j].pc == ev.pcs[k]) j++;
      if (idx == first + n) continue; /* another image's PC */
      const oracle *w = &g_want[idx];
      checked++;
      if (want_none) {
        assert_int_equal(j - f0, 1);
        assert_null(ev.frames[f0].function);
        assert_int_equal(ev.frames[f0].offset, ev.pcs[k] - load);
        continue;
      }
      if (j - f0 != (w->n ? w->n : 1))
        fail_msg("pc 0x%llx: %zu frames, llvm-symbolizer %zu",
                 (unsigned long long)ev.pcs[k], j - f0, w->n);
      for (size_t q = 0; q < w->n; q++) {
        const stkr_frame *g = &ev.frames[f0 + q];
        const oframe *o = &w->f[q];
        if (!g->function || strcmp(g->function, o->fn) != 0)
          fail_msg("pc 0x%llx frame %zu: function '%s', llvm-symbolizer '%s'",
                   (unsigned long long)ev.pcs[k], q,
                   g->function ? g->function : "(null)", o->fn);
        if (function_only) {
          assert_null(g->file);
          continue;
        }
        if (strcmp(g->file ? g->file : "", o->file) != 0 || g->line != o->line ||
            g->column != o->col)
          fail_msg("pc 0x%llx frame %zu: %s:%u:%u, llvm-symbolizer %s:%u:%u",
                   (unsigned long long)ev.pcs[k], q, g->file ? g->file : "",
                   g->line, g->column, o->file, o->line, o->col);
        assert_int_equal(g->inlined, q + 1 < w->n);
      }
    }
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(r);
  return checked;
}

static img g_arm[4], g_x86[1];
static size_t g_first[5], g_n[5];

/* Every event of image k (of the recording's 5: g_arm[0..3] in process
 * 100, g_x86[0] in process 200) checked by check_out in out. */
static void check_image(const char *out, size_t k, bool want_none) {
  uint32_t pid = k < 4 ? 100 : 200;
  uint64_t load = k < 4 ? g_arm[k].load : g_x86[0].load;

  assert_int_equal(
      check_out(out, pid, g_first[k], g_n[k], load, want_none, false), g_n[k]);
}

static char g_dir[4200];

/* `stackrec symbolize --debug-dir DEBUG -o OUT REC`, which must exit 0;
 * DEBUG is debug_fmt (printf), OUT is mt_tmp/name, its path into out. */
static void symbolize(char *out, size_t cap, const char *name, const char *rec,
                      const char *debug_fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void symbolize(char *out, size_t cap, const char *name, const char *rec,
                      const char *debug_fmt, ...) {
  char debug[4200];
  va_list ap;

  va_start(ap, debug_fmt);
  vsnprintf(debug, sizeof debug, debug_fmt, ap);
  va_end(ap);
  snprintf(out, cap, "%s/%s", mt_tmp, name);
  assert_int_equal(mt_sh("'%s' symbolize --debug-dir '%s' -o '%s' '%s'",
                         mt_tool, debug, out, rec), 0);
}

/* The recording: pid 100 (arm64: App, a system library nothing has,
 * "Other-arm64" recorded with a UUID its dSYM does not have, D5-arm64
 * (DWARF 5)) and pid 200 (x86_64: App). */
static int setup(void **state) {
  static uint64_t oaddr[MAX_PCS];
  size_t np = 0;
  (void)state;
  if (mt_state != 0) return 0;
  g_arm[0] = (img){"/private/var/containers/Bundle/Application/0A1B/App.app/App",
                   0x104a80000ull, {0}, "App-arm64", 6000};
  g_arm[1] = (img){"/usr/lib/system/libsystem_kernel.dylib", 0x1b0000000ull,
                   {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                   "App-arm64", 50};
  g_arm[2] = (img){"/private/var/containers/Bundle/Application/0A1B/App.app/"
                   "Frameworks/Other-arm64", 0x1c0000000ull, {0}, "Other-arm64", 50};
  g_arm[3] = (img){"/private/var/containers/Bundle/Application/0A1B/App.app/"
                   "Frameworks/D5-arm64", 0x1d0000000ull, {0}, "D5-arm64", 3000};
  g_x86[0] = (img){"/Applications/App.app/Contents/MacOS/App", 0x10b3c0000ull,
                   {0}, "App-x86_64", 6000};
  assert_true(mt_uuid("App", "arm64", g_arm[0].uuid));
  /* Another build of Other-arm64: a UUID nothing has. */
  assert_true(mt_uuid("Other-arm64", "arm64", g_arm[2].uuid));
  g_arm[2].uuid[15] ^= 0x5a;
  assert_true(mt_uuid("D5-arm64", "arm64", g_arm[3].uuid));
  assert_true(mt_uuid("App", "x86_64", g_x86[0].uuid));
  for (size_t k = 0; k < 5; k++) {
    const img *im = k < 4 ? &g_arm[k] : &g_x86[0];
    g_first[k] = np;
    g_n[k] = make_pcs(im, g_pcs + np, oaddr + np, MAX_PCS - np);
    np += g_n[k];
  }
  snprintf(g_dir, sizeof g_dir, "%s/rec", mt_tmp);
  write_rec(g_dir, 100, "arm64", g_arm, 4, g_pcs, g_first[4]);
  write_rec(g_dir, 200, "x86_64", g_x86, 1, g_pcs + g_first[4], g_n[4]);
  {
    char obj[4200];
    snprintf(obj, sizeof obj, "%s/App.dSYM/Contents/Resources/DWARF/App", mt_fx);
    run_oracle(obj, "arm64", oaddr, g_n[0], g_want);
    run_oracle(obj, "x86_64", oaddr + g_first[4], g_n[4], g_want + g_first[4]);
    snprintf(obj, sizeof obj, "%s/D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64",
             mt_fx);
    run_oracle(obj, NULL, oaddr + g_first[3], g_n[3], g_want + g_first[3]);
  }
  return 0;
}

static void test_dsyms_by_uuid(void **state) {
  char out[4200];
  size_t n;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  symbolize(out, sizeof out, "out1", g_dir, "%s", mt_fx);
  fprintf(stderr, "%s%s", mt_out, mt_err);
  n = check_out(out, 100, g_first[0], g_n[0], g_arm[0].load, false, false);
  assert_int_equal(n, g_n[0]);
  assert_true(n >= 4000);
  /* DWARF 5 */
  check_image(out, 3, false);
  /* The x86_64 slice of the same universal dSYM, chosen by UUID. */
  check_image(out, 4, false);
  /* Nothing has this UUID: offsets, and a warning naming it. */
  check_image(out, 1, true);
  assert_non_null(strstr(mt_err, "libsystem_kernel.dylib: no dSYM or Mach-O "
                                 "file with UUID DEADBEEF-0102-0304-0506-"
                                 "0708090A0B0C (nor an ELF file with that "
                                 "build-id) found in the debug dirs"));
  /* A dSYM of that name, another build: never its names. */
  check_image(out, 2, true);
  assert_non_null(strstr(mt_err, "Other-arm64: UUID mismatch: recorded "));
}

static void test_xcarchive_and_binary_only(void **state) {
  char out[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  /* dSYMs as Xcode archives them. */
  symbolize(out, sizeof out, "out2", g_dir, "%s/Archive.xcarchive", mt_fx);
  check_image(out, 0, false);
  check_image(out, 4, false);
  /* Only the (universal) binary: its symbol table, function names only;
   * the outermost frame of what llvm-symbolizer says (no inlining). */
  assert_int_equal(mt_sh("rm -rf '%s/bin-only' && mkdir -p '%s/bin-only' && "
                         "cp '%s/App' '%s/bin-only/'", mt_tmp, mt_tmp, mt_fx,
                         mt_tmp), 0);
  symbolize(out, sizeof out, "out3", g_dir, "%s/bin-only", mt_tmp);
  {
    stkr_reader *r;
    stkr_event_view ev;
    size_t named = 0;
    assert_int_equal(stkr_reader_open(out, NULL, &r), 0);
    while (stkr_reader_next(r, &ev) == 1)
      for (size_t j = 0; j < ev.n_frames; j++)
        if (ev.frames[j].function) {
          named++;
          assert_null(ev.frames[j].file);
          assert_false(ev.frames[j].inlined);
        }
    stkr_reader_free(r);
    assert_true(named >= g_n[0] + g_n[4]);
  }
}

/* What the walk of --debug-dir takes and says (QA, session 30): dSYMs
 * behind symbolic links are found (a link to an ancestor walked once);
 * a Mach-O file that does not parse (a dSYM cut in half) is named in the
 * warning of the image that found nothing, with why (before: "no dSYM
 * found" alone, and linked dSYMs ignored: fails without). */
static void test_debug_dirs_said(void **state) {
  char out[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("rm -rf '%s/links' && mkdir -p '%s/links' && "
                         "ln -s '%s/App.dSYM' '%s/links/App.dSYM' && "
                         "ln -s .. '%s/links/up'", mt_tmp, mt_tmp, mt_fx,
                         mt_tmp, mt_tmp), 0);
  symbolize(out, sizeof out, "out-links", g_dir, "%s/links", mt_tmp);
  check_image(out, 0, false);
  check_image(out, 4, false);
  /* D5-arm64's dSYM cut in half: image 3 keeps its offsets, named why. */
  assert_int_equal(mt_sh("rm -rf '%s/cut' && mkdir -p '%s/cut' && "
                         "cp -R '%s/D5-arm64.dSYM' '%s/cut/' && f='%s/cut/"
                         "D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64' && "
                         "truncate -s $(($(stat -c %%s \"$f\") / 2)) \"$f\"",
                         mt_tmp, mt_tmp, mt_fx, mt_tmp, mt_tmp), 0);
  symbolize(out, sizeof out, "out-cut", g_dir, "%s/cut", mt_tmp);
  check_image(out, 3, true);
  if (strstr(mt_err, "Mach-O files or symbol caches that could not be read: ") == NULL ||
      strstr(mt_err, "cut/D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64 (") == NULL)
    fail_msg("the damaged dSYM is not named: %s", mt_err);
  /* An image recorded as "App" with a UUID no slice of the universal App
   * has: the mismatch names all three slices' UUIDs (only the first, another
   * architecture's, before). */
  char dir[4200];
  img one = g_arm[0];
  one.path = "/private/var/containers/Bundle/Application/X/App.app/App";
  one.uuid[0] ^= 0xff;
  snprintf(dir, sizeof dir, "%s/rec-uni", mt_tmp);
  write_rec(dir, 302, "arm64", &one, 1, g_pcs + g_first[0], 10);
  assert_int_equal(mt_sh("rm -rf '%s/uni' && mkdir -p '%s/uni' && cp '%s/App' "
                         "'%s/uni/'", mt_tmp, mt_tmp, mt_fx, mt_tmp), 0);
  symbolize(out, sizeof out, "out-uni", dir, "%s/uni", mt_tmp);
  const char *u = strstr(mt_err, "uni/App has UUIDs ");
  if (u == NULL || strchr(u, ',') == NULL || strchr(strchr(u, ',') + 1, ',') == NULL)
    fail_msg("not every slice's UUID named: %s", mt_err);
}

/* Symbol caches only (stackrec symcache build): the same answers. */
static void test_symbol_caches_only(void **state) {
  char out[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("rm -rf '%s/caches' && '%s' symcache build '%s/App.dSYM' "
                         "'%s/D5-arm64.dSYM' -o '%s/caches'", mt_tmp, mt_tool,
                         mt_fx, mt_fx, mt_tmp), 0);
  symbolize(out, sizeof out, "out4", g_dir, "%s/caches", mt_tmp);
  check_image(out, 0, false);
  check_image(out, 3, false);
  check_image(out, 4, false);
  /* A damaged cache, alone for its image: named with its offset and why
   * (QA, session 39: only "no dSYM ... found"). */
  assert_int_equal(mt_sh("cd '%s/caches' && for f in *.stkrsym; do printf "
                         "'\\377\\377\\377\\377' | dd of=\"$f\" bs=1 "
                         "seek=300 conv=notrunc 2>/dev/null; done",
                         mt_tmp), 0);
  symbolize(out, sizeof out, "out4b", g_dir, "%s/caches", mt_tmp);
  if (strstr(mt_err, "symbol caches that could not be read: ") == NULL ||
      strstr(mt_err, ".stkrsym: offset ") == NULL)
    fail_msg("the damaged cache is not named: %s", mt_err);
}

/* No --debug-dir: the image's recorded path, when this machine has the
 * file with that UUID (a shared build tree), gives its symbol table. */
static void test_recorded_path(void **state) {
  char dir[4200], out[4200], bin[4200];
  img one;
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(bin, sizeof bin, "%s/App-arm64", mt_fx);
  one = g_arm[0];
  one.path = bin;
  snprintf(dir, sizeof dir, "%s/rec-path", mt_tmp);
  snprintf(out, sizeof out, "%s/out5", mt_tmp);
  write_rec(dir, 300, "arm64", &one, 1, g_pcs + g_first[0], g_n[0]);
  assert_int_equal(mt_sh("'%s' symbolize -o '%s' '%s'", mt_tool, out, dir), 0);
  assert_string_equal(mt_err, "");
  {
    stkr_reader *r;
    stkr_event_view ev;
    size_t named = 0;
    assert_int_equal(stkr_reader_open(out, NULL, &r), 0);
    while (stkr_reader_next(r, &ev) == 1)
      for (size_t j = 0; j < ev.n_frames; j++) {
        assert_non_null(ev.frames[j].function);
        assert_null(ev.frames[j].file); /* a binary: names only */
        named++;
      }
    stkr_reader_free(r);
    assert_int_equal(named, g_n[0]);
  }
  /* The same path recorded with another UUID: never its names. */
  one.uuid[0] ^= 0xff;
  snprintf(dir, sizeof dir, "%s/rec-path2", mt_tmp);
  snprintf(out, sizeof out, "%s/out6", mt_tmp);
  write_rec(dir, 301, "arm64", &one, 1, g_pcs + g_first[0], 50);
  assert_int_equal(mt_sh("'%s' symbolize -o '%s' '%s'", mt_tool, out, dir), 0);
  assert_non_null(strstr(mt_err, "UUID mismatch or unreadable"));
  assert_non_null(strstr(mt_err, "no slice with UUID"));
}

MT_TEST_MAIN("symbolize-apple", 6, 12, setup, test_recorded_path,
             test_dsyms_by_uuid, test_xcarchive_and_binary_only,
             test_debug_dirs_said, test_symbol_caches_only)
