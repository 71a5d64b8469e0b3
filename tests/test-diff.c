/*
 * test-diff.c: `stackrec diff BASE NEW` on two builds of one program
 * (tests/diff_fixtures/app.c; the second built with -DEXTRA_PATH, one call
 * path more: phone_home -> identifiers.device_id), each copied to a
 * directory of its own under the same name (as two builds of one app are)
 * and recorded with the embedded recorder:
 * - BASE -> EXTRA: exactly that path, as new and sensitive; exit 1; the
 *   JSON (checked by python3's json module), text and HTML say so;
 * - EXTRA -> BASE: the path is gone; exit 0;
 * - BASE -> BASE (another run of the same build): nothing; exit 0;
 * - --sensitive not matching the new path's site: reported, exit 0;
 * - BASE -> BASE run with 3 files.open a tick: that path's rate changed;
 * - usage errors (2), an input that cannot be opened (3).
 */
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

#include "tests/cli_run.h"
#include "tests/testlib.h"

static char g_tmp[2048];
static char g_base[4096], g_extra[4096], g_base2[4096], g_base3[4096];
static char g_capped[4096];

static void test_new_path_fails_the_gate(void **state) {
  char json[4200];

  (void)state;
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, g_extra), 1);
  cr_assert_has(cr_out,
                "NEW PATHS: 1 (1 to a sensitive site)\n"
                "  + identifiers.device_id [sensitive] "
                "module app: 0 -> 20 events",
                "        phone_home (", /* with its file */
                "GONE PATHS: 0\n",
                "RATE CHANGED: 0\n",
                "FAIL: NEW adds 1 path to a sensitive site");

  snprintf(json, sizeof(json), "%s/diff.json", g_tmp);
  assert_int_equal(
      cr_run("diff --format json -o '%s' '%s' '%s'", json, g_base, g_extra), 1);
  assert_int_equal(
      tl_system("python3 - '%s' <<'EOF'\n"
                "import json, sys\n"
                "d = json.load(open(sys.argv[1]))\n"
                "assert d['gate'] == 'fail', d['gate']\n"
                "assert d['summary'] == {'added': 1, 'added_sensitive': 1, "
                "'gone': 0, 'changed': 0}, d['summary']\n"
                "p = d['added'][0]\n"
                "assert p['site'] == 'identifiers.device_id' and p['module'] == 'app'\n"
                "assert p['sensitive'] and p['base_count'] == 0 and "
                "p['new_count'] == 20\n"
                "fns = [f['function'] for f in p['frames']]\n"
                "assert fns[:3] == ['phone_home', 'tick', 'main'], fns\n"
                "assert p['frames'][0]['file'].endswith('app.c')\n"
                "assert d['base']['events'] == 30 and d['new']['events'] == 50\n"
                "assert d['base']['intact'] and d['new']['intact']\n"
                "EOF",
                json),
      0);
}

static void test_reverse_and_identical(void **state) {
  (void)state;
  assert_int_equal(cr_run("diff '%s' '%s'", g_extra, g_base), 0);
  cr_assert_has(cr_out,
                "NEW PATHS: 0 (0 to a sensitive site)\n",
                "GONE PATHS: 1\n"
                "  - identifiers.device_id [sensitive] "
                "module app: 20 -> 0 events",
                "PASS: no new path");

  assert_int_equal(cr_run("diff --format json '%s' '%s'", g_base, g_base2), 0);
  assert_non_null(strstr(cr_out, "\"summary\":{\"added\":0,\"added_sensitive\":0,"
                                 "\"gone\":0,\"changed\":0}"));
  assert_non_null(strstr(cr_out, "\"gate\":\"pass\""));
}

static void test_sensitive_and_rate(void **state) {
  (void)state;
  /* Only network.* is sensitive: the new path is still shown, the gate
   * passes. */
  assert_int_equal(cr_run("diff --sensitive 'network.*' --sensitive 'x.*' "
                          "'%s' '%s'",
                          g_base, g_extra),
                   0);
  assert_non_null(strstr(cr_out, "NEW PATHS: 1 (0 to a sensitive site)\n"
                                 "  + identifiers.device_id module app"));
  assert_non_null(strstr(cr_out, "sensitive sites: network.*, x.*\n"));
  /* A pattern that matches no site of either side is said: a typo makes a
   * gate that never fails (QA, session 39). */
  assert_non_null(strstr(cr_err, "warning: --sensitive x.* matches no site "
                                 "of BASE or NEW\n"));
  assert_null(strstr(cr_err, "--sensitive network.*"));
  /* Three reads a tick instead of one: files.open's rate changed (x3),
   * network.connect's did not. */
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, g_base3), 0);
  assert_non_null(strstr(cr_out, "RATE CHANGED: 1\n"
                                 "  ~ files.open [sensitive] module app: "
                                 "20 -> 60 events"));
  assert_int_equal(tl_count(cr_out, "network.connect"), 0);
  /* ... unless the threshold is above the change. */
  assert_int_equal(cr_run("diff --threshold 400 '%s' '%s'", g_base, g_base3),
                   0);
  assert_non_null(strstr(cr_out, "RATE CHANGED: 0\n"));
}

/* QA (session 28): a run whose oldest segments the disk cap deleted had
 * its paths' rates divided by the whole recording time, deleted part
 * included: 15 paths "changed" by ~80% against an uncapped run of the
 * same work. The deleted segments' times are unknown, so rates are not
 * compared, and diff says why. */
/* The rate printed after 'prefix': 20 events a run of 20 ticks of 50 ms
 * is 1200 a minute on an idle machine, less on a loaded one whose ticks
 * come late (CI, session 32: 1200 exactly was asserted, and failed). */
static void assert_rate_after(const char *out, const char *prefix) {
  const char *p = strstr(out, prefix);
  double rate;

  if (p == NULL)
    fail_msg("no \"%s\" in:\n%s", prefix, out);
  rate = strtod(p + strlen(prefix), NULL);
  if (rate < 100 || rate > 1300)
    fail_msg("rate %g after \"%s\" is not 20 events in 1-12 s", rate,
             prefix);
}

static void test_capped_side(void **state) {
  (void)state;
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, g_capped), 0);
  cr_assert_has(cr_out, "RATE CHANGED: not compared (NEW lost ",
                "to the disk cap, whose times are unknown");
  assert_int_equal(cr_run("diff --format json '%s' '%s'", g_base, g_capped),
                   0);
  cr_assert_has(cr_out, "\"rates_not_compared\":\"NEW lost ");
  /* Nor printed for its new and gone paths (QA, session 29: rates ~10x
   * too low next to "not compared"): "?" in text and HTML, null in JSON;
   * the other side's stay. */
  assert_int_equal(cr_run("diff '%s' '%s'", g_capped, g_extra), 1);
  assert_rate_after(cr_out, "0 -> 20 events, ? -> ");
  assert_int_equal(cr_run("diff --format json '%s' '%s'", g_capped, g_extra),
                   1);
  assert_rate_after(cr_out, "\"base_per_min\":null,\"new_per_min\":");
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, g_base3), 0);
  assert_null(strstr(cr_out, "not compared"));
}

static void test_html(void **state) {
  char html[4200];

  (void)state;
  snprintf(html, sizeof(html), "%s/diff.html", g_tmp);
  assert_int_equal(
      cr_run("diff --format html -o '%s' '%s' '%s'", html, g_base, g_extra), 1);
  tl_slurp(html, cr_out, sizeof(cr_out));
  cr_assert_has(cr_out,
                "<p class=\"gate fail\" id=\"gate\">FAIL",
                "<h2>New paths: 1</h2>",
                "<tr class=\"sensitive\"><td>"
                "identifiers.device_id</td><td>app</td>",
                "<li>phone_home <span class=\"file\">",
                "</body></html>\n");
  /* Well-formed enough for Python's HTML parser, every tag closed. */
  assert_int_equal(
      tl_system("python3 - '%s' <<'EOF'\n"
                "import sys, html.parser\n"
                "class P(html.parser.HTMLParser):\n"
                "  def __init__(s):\n"
                "    super().__init__(); s.stack = []\n"
                "  def handle_starttag(s, t, a):\n"
                "    if t not in ('meta',): s.stack.append(t)\n"
                "  def handle_endtag(s, t):\n"
                "    assert s.stack and s.stack.pop() == t, t\n"
                "p = P(); p.feed(open(sys.argv[1]).read()); p.close()\n"
                "assert p.stack == [], p.stack\n"
                "EOF",
                html),
      0);
}

/* A side that recorded no process (an empty directory, a static program)
 * compares nothing: the gate fails, NOT COMPARED (QA, session 39: an
 * empty NEW passed, exit 0). */
static void test_empty_side_not_compared(void **state) {
  char empty[4200];
  (void)state;

  snprintf(empty, sizeof empty, "%s/empty", g_tmp);
  assert_int_equal(tl_system("mkdir -p '%s'", empty), 0);
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, empty), 1);
  cr_assert_has(cr_out, "# NEW NOT RECORDED: it holds no process",
                "\nNOT COMPARED: NEW recorded no process\n");
  assert_null(strstr(cr_out, "PASS"));
  assert_int_equal(cr_run("diff --format json '%s' '%s'", empty, g_base), 1);
  cr_assert_has(cr_out, "\"gate\":\"not_compared\"");
}

static void test_usage(void **state) {
  char missing[4200];

  (void)state;
  cr_expect(2, "needs BASE and NEW", "diff '%s'", g_base);
  assert_int_equal(cr_run("diff '%s' '%s' '%s'", g_base, g_base, g_base), 2);
  assert_int_equal(cr_run("diff --format xml '%s' '%s'", g_base, g_base), 2);
  assert_int_equal(cr_run("diff --threshold abc '%s' '%s'", g_base, g_base), 2);
  assert_int_equal(cr_run("diff --min-count -1 '%s' '%s'", g_base, g_base), 2);
  cr_expect(2, "--sensitive wants a site pattern", "diff --sensitive '' "
            "'%s' '%s'", g_base, g_base);
  snprintf(missing, sizeof(missing), "%s/none", g_tmp);
  assert_int_equal(cr_run("diff '%s' '%s'", g_base, missing), 3);
  assert_non_null(strstr(cr_err, missing));
  assert_int_equal(cr_run("diff --module-map '%s' '%s' '%s'", missing, g_base,
                          g_base),
                   3);
  /* An output that cannot be made or written is an output failure (1),
   * named with its reason (QA: 3, the inputs' status; no reason). */
  cr_expect(1, "cannot create", "diff -o '%s/x' '%s' '%s'", missing, g_base,
            g_base);
  cr_expect(1, "/dev/full: No space left on device",
            "diff -o /dev/full '%s' '%s'", g_base, g_base);
  cr_expect(1, "cannot create", "symbolize -o '%s/x' '%s'", missing, g_base);
  assert_int_equal(cr_run("diff --help"), 0);
  assert_non_null(strstr(cr_out, "Usage: stackrec diff"));
}

/* Copy the two builds to <tmp>/{base,extra}/app and record four runs. */
static int setup(void **state) {
  const char *t = getenv("TEST_TMPDIR"), *src = getenv("TEST_SRCDIR"),
             *ws = getenv("TEST_WORKSPACE");
  char fx[4096];

  (void)state;
  snprintf(g_tmp, sizeof(g_tmp), "%s/diff", t ? t : "/tmp");
  snprintf(fx, sizeof(fx), "%s/%s/tests/diff_fixtures", src ? src : ".",
           ws ? ws : "stackrec");
  snprintf(g_base, sizeof(g_base), "%s/rec-base", g_tmp);
  snprintf(g_extra, sizeof(g_extra), "%s/rec-extra", g_tmp);
  snprintf(g_base2, sizeof(g_base2), "%s/rec-base2", g_tmp);
  snprintf(g_base3, sizeof(g_base3), "%s/rec-base3", g_tmp);
  snprintf(g_capped, sizeof(g_capped), "%s/rec-capped", g_tmp);
  if (cr_setup() != 0 ||
      tl_system("rm -rf '%s' && mkdir -p '%s/base' '%s/extra' && "
                "cp '%s/app_base' '%s/base/app' && cp '%s/app_extra' '%s/extra/app'",
                g_tmp, g_tmp, g_tmp, fx, g_tmp, fx, g_tmp) != 0)
    return -1;
  if (tl_system("'%s/base/app' '%s'", g_tmp, g_base) != 0 ||
      tl_system("'%s/extra/app' '%s'", g_tmp, g_extra) != 0 ||
      tl_system("'%s/base/app' '%s'", g_tmp, g_base2) != 0 ||
      tl_system("'%s/base/app' '%s' 3", g_tmp, g_base3) != 0 ||
      /* A segment a batch, a 1-byte cap: all but the newest deleted. */
      tl_system("STACKREC_SEGMENT_BYTES=1 STACKREC_DISK_CAP_BYTES=1 "
                "'%s/base/app' '%s'", g_tmp, g_capped) != 0)
    return -1;
  return 0;
}

TL_TEST_MAIN("diff", setup, NULL, test_new_path_fails_the_gate,
             test_reverse_and_identical, test_sensitive_and_rate,
             test_capped_side, test_html, test_empty_side_not_compared,
             test_usage)
