/*
 * test-export-pprof.c: `stackrec export --format pprof` loaded by the real
 * pprof (`go tool pprof`, Debian golang-go): the recording of
 * test-export-util.h (counts per function from -top, whole stacks and
 * labels from -traces and -tags, filters), the symbolization fixture
 * (inlined calls as Line entries of one Location, innermost first; the
 * mapping's file and build-id; also its folded stacks with and without
 * --app-only, as this binary has the fixture), a recording with drops and
 * an empty one.
 * Without go the tests fail, saying so: CI installs it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/test-export-util.h"
#include "tests/testlib.h"

static char g_go[1024];

/* Run `go tool pprof -symbolize=none ARGS` with a private HOME and Go
 * caches (nothing may be fetched: there is no network). */
static int pprof(const char *fmt, ...) {
  char args[4096];
  va_list ap;

  if (g_go[0] == '\0' && find_program("go", g_go, sizeof g_go) != 0) {
    g_go[0] = '\0'; /* every test says why, not just the first */
    fail_msg("golang-go is not installed: the pprof export is checked by "
             "loading it in `go tool pprof` (tools/install-deps.sh --tests "
             "installs it)");
  }
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  return sh("mkdir -p '%s/gohome' && HOME='%s/gohome' GOCACHE='%s/gocache' "
            "GOPATH='%s/gopath' GOPROXY=off GOFLAGS= GOTOOLCHAIN=local "
            "PPROF_TMPDIR='%s' '%s' tool pprof -symbolize=none %s",
            g_tmp, g_tmp, g_tmp, g_tmp, g_tmp, g_go, args);
}

/* Export `opts` of g_rec to FILE (in g_tmp) and load it with -top. */
static void export_top(const char *file, const char *opts) {
  int st = sh("'%s' export --format pprof -o '%s' %s '%s'", g_tool,
              tmp_path(file), opts, g_rec);
  if (st != 0)
    fail_msg("export %s: exit %d\n%s", opts, st, g_err);
  st = pprof("-top '%s'", tmp_path(file));
  if (st != 0)
    fail_msg("pprof -top %s: exit %d\n%s%s", file, st, g_out, g_err);
}

/* flat and cum of function `name` in the -top output in g_out; -1 if it
 * is not listed. Rows: "flat flat% sum% cum cum% NAME". */
static void top_row(const char *name, long long *flat, long long *cum) {
  const char *p = g_out;

  *flat = *cum = -1;
  for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    char line[1024];
    long long f, c;
    int n = 0;
    snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
    if (sscanf(line, "%lld %*s %*s %lld %*s %n", &f, &c, &n) == 2 && n > 0 &&
        strcmp(line + n, name) == 0) {
      *flat = f;
      *cum = c;
      return;
    }
  }
}

#define assert_top(name, want_flat, want_cum)                                \
  do {                                                                       \
    long long f_, c_;                                                        \
    top_row(name, &f_, &c_);                                                 \
    if (f_ != (want_flat) || c_ != (want_cum))                               \
      fail_msg("%s: flat %lld cum %lld, want %d %d in:\n%s", name, f_, c_,   \
               (int)(want_flat), (int)(want_cum), g_out);                    \
  } while (0)

/* Some line of g_out starts with "sym.c" and ends with suffix. */
static void assert_has_line_suffix(const char *suffix) {
  const char *p = g_out;
  size_t sl = strlen(suffix);

  for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    size_t len = strcspn(p, "\n");
    if (len >= sl && strncmp(p, "sym.c;", 6) == 0 &&
        strncmp(p + len - sl, suffix, sl) == 0)
      return;
  }
  fail_msg("no line ending in \"%s\" in:\n%s", suffix, g_out);
}

static int setup(void **state) {
  (void)state;
  return rec_make("pprof");
}

static void test_top_counts_per_function(void **state) {
  FILE *f;
  unsigned char magic[2] = {0, 0};
  (void)state;

  export_top("all.pb.gz", "");
  f = fopen(tmp_path("all.pb.gz"), "rb");
  assert_non_null(f);
  assert_int_equal(fread(magic, 1, 2, f), 2);
  fclose(f);
  assert_true(magic[0] == 0x1f && magic[1] == 0x8b); /* gzip */
  tl_assert_has(g_out, "Type: events\n", "of 75 total");
  assert_top("exp_hook", 75, 75);
  assert_top("exp_mid_a", 0, 50);
  assert_top("exp_mid_b", 0, 20);
  assert_top("exp_mid_c", 0, 5);
  assert_top("exp_alpha_main", 0, 60);
  assert_top("exp_beta_main", 0, 15);
}

/* -traces: one block per sample, labels first, then the stack leaf
 * first. */
static void test_traces_show_whole_stacks_and_labels(void **state) {
  char want[512];
  const char *b;
  (void)state;

  export_top("traces.pb.gz", "");
  assert_int_equal(pprof("-traces '%s'", tmp_path("traces.pb.gz")), 0);
  /* Each payload is its own sample (labels site, thread, payload,
   * process, pid), so equal stacks with other payloads never merge. The
   * recording's max_depth is 3: each stack was cut, and its label says so
   * (QA, session 24: nothing marked the cut in pprof). */
  snprintf(want, sizeof want,
           "      site:  exp.write\n"
           "    thread:  exp-alpha\n"
           "   payload:  p7\n"
           "   process:  export-pprof\n"
           "stack_truncated:  true\n"
           "       pid:  %d\n"
           "         1   exp_hook\n"
           "             exp_mid_b\n"
           "             exp_alpha_main\n",
           (int)getpid());
  b = strstr(g_out, want);
  if (b == NULL)
    fail_msg("no exp.write stack in:\n%s", g_out);
  snprintf(want, sizeof want,
           "      site:  exp;odd name\n"
           "    thread:  exp-beta\n"
           "   payload:  p4\n"
           "   process:  export-pprof\n"
           "stack_truncated:  true\n"
           "       pid:  %d\n"
           "         1   exp_hook\n"
           "             exp_mid_c\n"
           "             exp_beta_main\n",
           (int)getpid());
  assert_non_null(strstr(g_out, want));
  assert_int_equal(pprof("-tags '%s'", tmp_path("traces.pb.gz")), 0);
  tl_assert_has(g_out,
                " site: Total 75",
                "50.0 (66.67%): exp.read\n",
                "20.0 (26.67%): exp.write\n",
                "5.0 ( 6.67%): exp;odd name\n",
                " thread: Total 75",
                "60.0 (80.00%): exp-alpha\n",
                "15.0 (20.00%): exp-beta\n",
                " payload: Total 75",
                " process: Total 75",
                " stack_truncated: Total 75",
                "75.0 (  100%): export-pprof\n");
}

static void test_filters(void **state) {
  char opts[128];
  (void)state;

  export_top("f1.pb.gz", "--site exp.read --thread exp-beta");
  assert_top("exp_hook", 10, 10);
  assert_top("exp_beta_main", 0, 10);
  assert_null(strstr(g_out, "exp_alpha_main"));

  snprintf(opts, sizeof opts, "--thread %llu",
           (unsigned long long)g_tid_alpha);
  export_top("f2.pb.gz", opts);
  assert_top("exp_hook", 60, 60);

  export_top("f3.pb.gz", "--site 'exp.*' --from 0.25");
  assert_top("exp_hook", 10, 10); /* beta's exp.read only */
  export_top("f4.pb.gz", "--to 0.25 --app-only");
  assert_top("exp_hook", 60, 60);
  assert_top("exp_alpha_main", 0, 60);
}

/* The symbolization fixture: -O2 -g, an inlined call, C++ names, a
 * build-id. Its recording has the inlined call as a second Line of the
 * Location of outer_c's PC, innermost (inlined_helper) first. */
static const char *fixture_recording(void) {
  static char dir[1200];
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  char fixture[2048];

  if (dir[0] != '\0')
    return dir;
  snprintf(fixture, sizeof fixture, "%s/%s/tests/symfixture/symfixture",
           src ? src : ".", ws ? ws : ".");
  snprintf(dir, sizeof dir, "%s", tmp_path("symrec"));
  if (sh("STACKREC_DIR='%s' STACKREC_FLUSH_MS=50 '%s'", dir, fixture) != 0) {
    dir[0] = '\0';
    fail_msg("symfixture failed:\n%s", g_err);
  }
  return dir;
}

static void test_inlined_lines_and_mapping(void **state) {
  char hex[200] = "", want[512];
  const char *dir = fixture_recording(), *loc;
  stkr_reader *r;
  stkr_event_view ev;
  const stkr_image_info *im;
  size_t n, i, k;
  (void)state;

  /* The fixture's build-id, as the recording holds it. */
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    ;
  assert_int_equal(stkr_reader_images(r, 0, &im, &n), 0);
  for (i = 0; i < n; i++)
    if (strstr(im[i].path, "/symfixture") != NULL && im[i].build_id_len)
      for (k = 0; k < im[i].build_id_len && k < 64; k++)
        snprintf(hex + 2 * k, 3, "%02x", im[i].build_id[k]);
  stkr_reader_free(r);
  assert_true(strlen(hex) >= 16);

  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s'", g_tool,
                      tmp_path("sym.pb.gz"), dir), 0);
  assert_int_equal(pprof("-top '%s'", tmp_path("sym.pb.gz")), 0);
  assert_top("inlined_helper (inline)", 1001, 1001);
  assert_top("outer_c", 0, 1001);
  assert_top("int fx::twice<int>(int)", 1001, 1001);
  assert_top("fx::Widget::poke(int)", 0, 1001);
  assert_top("main", 0, 2002);

  assert_int_equal(pprof("-raw '%s'", tmp_path("sym.pb.gz")), 0);
  /* "N: 0xADDR M=1 inlined_helper FILE:LINE s=0\n   outer_c FILE:..." */
  loc = strstr(g_out, " M=1 inlined_helper tests/symfixture/fixture_c.c:");
  if (loc == NULL)
    fail_msg("no inlined_helper location in:\n%s", g_out);
  loc = strchr(loc, '\n');
  assert_non_null(loc);
  assert_true(strncmp(loc, "\n             outer_c tests/symfixture/"
                           "fixture_c.c:", 42) == 0);
  /* Mapping 1 is the executable, with its build-id, and every location
   * in it is symbolized ([FN][FL][LN][IN]). */
  snprintf(want, sizeof want, "/tests/symfixture/symfixture %s [FN][FL][LN][IN]\n",
           hex);
  if (strstr(g_out, want) == NULL)
    fail_msg("no mapping \"%s\" in:\n%s", want, g_out);
  assert_non_null(strstr(g_out, "\nMappings\n1: 0x"));
}

/* The forked child (tl_run_child): it records into dir and no event. */
static int record_nothing(void *dir) {
  stkr_config cfg;

  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  return stkr_init(&cfg) == 0 && stkr_shutdown() == 0 ? 0 : 1;
}

/* A process that recorded no event came first (the lower pid: a shell
 * before the program it ran), and pprof named the profile after it
 * ("File: dash"): the first mapping is now a process's with events. Here a
 * forked child of this test records nothing, then the fixture records. */
static void test_first_mapping_has_events(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  const char *dir = tmp_path("idlefirst");
  (void)state;

  tl_run_child(record_nothing, (void *)dir);
  assert_int_equal(sh("'%s' info '%s'", g_tool, dir), 0);
  assert_non_null(strstr(g_out, "export-pprof")); /* its images are there */
  assert_int_equal(sh("STACKREC_DIR='%s' '%s/%s/tests/symfixture/symfixture'",
                      dir, src ? src : ".", ws ? ws : "."), 0);
  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s'", g_tool,
                      tmp_path("idlefirst.pb.gz"), dir), 0);
  assert_int_equal(pprof("-top '%s'", tmp_path("idlefirst.pb.gz")), 0);
  if (strstr(g_out, "File: symfixture\n") == NULL)
    fail_msg("want \"File: symfixture\" in:\n%s", g_out);
}

/* Folded stacks of the fixture: inlined calls as frames of their own
 * (after their caller, root to leaf), C++ names as demangled; --app-only
 * drops libc's frames (the recording is of the fixture, the main
 * executable), and pprof with --app-only agrees. */
static void test_fixture_folded_and_app_only(void **state) {
  const char *dir = fixture_recording();
  (void)state;

  /* By default a frame is its function, file and line. */
  assert_int_equal(sh("'%s' export --format folded '%s'", g_tool, dir), 0);
  assert_has_line_suffix(";main fixture_main.c:86;chains fixture_main.c:23;"
                         "run_c fixture_c.c:27;static_mid fixture_c.c:22;"
                         "outer_c fixture_c.c:17;inlined_helper "
                         "fixture_c.c:12 1001");
  assert_int_equal(sh("'%s' export --format folded --granularity function "
                      "'%s'", g_tool, dir), 0);
  /* Everything above main is libc's start code: not ours to name. */
  assert_has_line_suffix(";main;chains;run_c;static_mid;outer_c;"
                         "inlined_helper 1001");
  assert_int_equal(sh("'%s' export --format folded --app-only "
                      "--granularity function '%s'", g_tool, dir), 0);
  assert_string_equal(
      g_out, "sym.c;main;chains;run_c;static_mid;outer_c;inlined_helper "
             "1001\n"
             "sym.cc;main;chains;run_cc;fx::Widget::poke(int);int "
             "fx::twice<int>(int) 1001\n");
  assert_int_equal(sh("'%s' export --format pprof --app-only -o '%s' '%s'",
                      g_tool, tmp_path("app.pb.gz"), dir), 0);
  assert_int_equal(pprof("-top '%s'", tmp_path("app.pb.gz")), 0);
  assert_top("main", 0, 2002);
  assert_null(strstr(g_out, "__libc_start"));
}

/* Events the recorder dropped are in no export, and the profile says so
 * in a comment (pprof prints comments in its header); the tool says it
 * on stderr. An empty input still gives a profile pprof loads. */
static void test_drops_noted_and_empty_profile(void **state) {
  stkr_config cfg;
  stkr_stats st;
  const char *dir = tmp_path("drops");
  char note[128];
  int i;
  (void)state;

  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = 16 << 10;
  cfg.max_depth = 3;
  cfg.flush_interval_ms = 60000; /* only the high-water mark wakes it */
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  assert_int_equal(stkr_init(&cfg), 0);
  for (i = 0; i < 20000; i++)
    (void)stkr_event(&g_site_write, "burst", 5);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_true(st.dropped > 0);

  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s'", g_tool,
                      tmp_path("drops.pb.gz"), dir), 0);
  snprintf(note, sizeof note, "note: %llu events were dropped by the recorder",
           (unsigned long long)st.dropped);
  if (strstr(g_err, note) == NULL)
    fail_msg("want \"%s\" on stderr, got:\n%s", note, g_err);
  assert_int_equal(pprof("-top '%s'", tmp_path("drops.pb.gz")), 0);
  snprintf(note, sizeof note, "%llu events were dropped by the recorder and "
           "are not in this profile", (unsigned long long)st.dropped);
  if (strstr(g_out, note) == NULL)
    fail_msg("want \"%s\" in:\n%s", note, g_out);
  {
    char want[64];
    snprintf(want, sizeof want, "of %llu total",
             (unsigned long long)st.written);
    assert_non_null(strstr(g_out, want));
  }

  /* Empty: an empty recording (exit 0, said), a valid, empty profile. */
  assert_int_equal(mkdir(tmp_path("empty"), 0755), 0);
  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s'", g_tool,
                      tmp_path("empty.pb.gz"), tmp_path("empty")), 0);
  assert_non_null(strstr(g_err, "an empty recording"));
  assert_int_equal(pprof("-top '%s'", tmp_path("empty.pb.gz")), 0);
  assert_non_null(strstr(g_out, "of 0 total"));
}

/* Labels are the recorded text (UTF-8, quotes) with only control and
 * invalid bytes as \xNN and a backslash doubled; a pid that two recordings
 * share gets a "recording" label (QA, session 27: the payload label was
 * report's escaped text, so -tagfocus on a path with "\u20ac" matched
 * nothing; a newline in a thread name split `pprof -tags`. Session 33: the
 * byte 0xff and the text "\xff" were one label). */
/* The forked child of test_labels_are_recorded_text (tl_run_child): a
 * thread name and payloads of odd bytes, recorded the same into each of
 * the two directories dirs[0..2). 0, or 2/3: init/shutdown failed. */
static int record_odd_labels(void *dirs) {
  static const char euro[] = "/home/u/\xe2\x82\xac-euro.txt";
  static const char quoted[] = "back\\slash \"q\"";

  pthread_setname_np(pthread_self(), "ev\nil\x01");
  for (int d = 0; d < 2; d++) {
    stkr_config cfg = {.dir = ((const char **)dirs)[d], .max_depth = 3};
    if (stkr_init(&cfg) != 0)
      return 2;
    stkr_event(&g_site_read, euro, strlen(euro));
    stkr_event(&g_site_read, quoted, strlen(quoted));
    stkr_event(&g_site_read, "\xff", 1);
    stkr_event(&g_site_read, "\\xff", 4);
    if (stkr_shutdown() != 0)
      return 3;
  }
  return 0;
}

static void test_labels_are_recorded_text(void **state) {
  char a[1200], b[1200];
  const char *dirs[2] = {a, b};
  (void)state;

  snprintf(a, sizeof a, "%s", tmp_path("odd-a"));
  snprintf(b, sizeof b, "%s", tmp_path("odd-b"));
  /* One process records the same events twice, into a and into b: two
   * recordings of one pid (a copy of a would be refused: test-copies.c). */
  tl_run_child(record_odd_labels, dirs);
  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s' '%s'", g_tool,
                      tmp_path("odd.pb.gz"), a, b),
                   0);
  assert_int_equal(pprof("-tags '%s'", tmp_path("odd.pb.gz")), 0);
  tl_assert_has(g_out,
                "2.0 (25.00%): /home/u/\xe2\x82\xac-euro.txt\n",
                "2.0 (25.00%): back\\\\slash \"q\"\n",
                "2.0 (25.00%): \\xff\n",
                "2.0 (25.00%): \\\\xff\n",
                "8.0 (  100%): ev\\x0ail\\x01\n",
                " recording: Total 8",
                "odd-a\n",
                "odd-b\n");
  assert_int_equal(pprof("-tagfocus='payload=.*\xe2\x82\xac-euro' -top '%s'",
                         tmp_path("odd.pb.gz")), 0);
  assert_non_null(strstr(g_out, "accounting for 2, 25.00% of 8 total"));
}

/* A payload cut at payload_max has a payload_truncated label (its text
 * ends "...", as a payload may of its own; QA, session 39). */
/* The forked child of test_cut_payload_labeled (tl_run_child): into dir,
 * under payload_max 32, a payload of 64 bytes and one of 8 ending "...".
 * 0, or 2/3: init/shutdown failed. */
static int record_cut_payload(void *dir) {
  stkr_config cfg = {.dir = dir, .payload_max = 32};
  char longp[64];

  memset(longp, 'L', sizeof longp);
  if (stkr_init(&cfg) != 0)
    return 2;
  stkr_event(&g_site_read, longp, sizeof longp);
  stkr_event(&g_site_read, "short...", 8);
  return stkr_shutdown() != 0 ? 3 : 0;
}

static void test_cut_payload_labeled(void **state) {
  char d[1200];
  (void)state;

  snprintf(d, sizeof d, "%s", tmp_path("cut-payload"));
  tl_run_child(record_cut_payload, d);
  assert_int_equal(sh("'%s' export --format pprof -o '%s' '%s'", g_tool,
                      tmp_path("cut.pb.gz"), d),
                   0);
  assert_int_equal(pprof("-tags '%s'", tmp_path("cut.pb.gz")), 0);
  tl_assert_has(g_out, " payload_truncated: Total 1.0\n",
                "1.0 (  100%): true\n");
  assert_int_equal(pprof("-tagfocus='payload_truncated=true' -top '%s'",
                         tmp_path("cut.pb.gz")), 0);
  assert_non_null(strstr(g_out, "accounting for 1, 50.00% of 2 total"));
}

TL_TEST_MAIN("export-pprof", setup, NULL, test_top_counts_per_function,
             test_traces_show_whole_stacks_and_labels, test_filters,
             test_inlined_lines_and_mapping, test_first_mapping_has_events,
             test_fixture_folded_and_app_only,
             test_drops_noted_and_empty_profile,
             test_labels_are_recorded_text, test_cut_payload_labeled)
