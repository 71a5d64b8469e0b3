/*
 * test-unsymbolized.c: the views that compare or attribute stacks, on a
 * recording whose stacks were never symbolized (QA, session 33). The
 * program of tests/diff_fixtures (app_extra: phone_home ->
 * identifiers.device_id, in the app's own image) is recorded twice with
 * the embedded recorder, once as usual and once offline (PCs and image
 * lists only, as a recovered or daemon's recording is). A module map
 * names "PhoneSDK" by the symbol prefix "phone_", as an SDK linked into
 * the app is named.
 * - compliance: a rule against PhoneSDK finds the symbolized run's 20
 *   events; on the offline run it is NOT CHECKED, exit 1, and the header
 *   says NOT SYMBOLIZED (before: "no findings", exit 0, the SDK's calls
 *   counted as the app's). `stackrec symbolize`d, the finding again; a
 *   stripped build, symbolized as it ran, is no guess (names cannot come).
 * - privacy-manifest --per-module: exit 1 with the reason on the offline
 *   run (its drafts would give the SDK's use to the app).
 * - diff symbolized -> offline: every path new and gone, as before, but
 *   the text, JSON and gate say NEW was never symbolized.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/testlib.h"

static char g_tmp[2048], g_sym[2100], g_off[2100], g_map[2100], g_pol[2100],
    g_stripped[2100];

static const char k_map[] =
    "{\"modules\": [{\"name\": \"PhoneSDK\", \"symbols\": [\"phone_\"]}]}\n";
static const char k_policy[] =
    "{\"rules\": [{\"id\": \"no-sdk-ids\", \"sites\": \"identifiers.*\", "
    "\"modules\": \"PhoneSDK\"}]}\n";

static void test_compliance_names_no_module_it_guessed(void **state) {
  (void)state;
  assert_int_equal(cr_run("compliance --module-map '%s' --policy '%s' '%s'",
                          g_map, g_pol, g_sym),
                   1);
  cr_assert_has(cr_out, "1 finding:\n  [no-sdk-ids] identifiers.device_id "
                        "from PhoneSDK: any call: 20 events");
  assert_null(strstr(cr_out, "NOT SYMBOLIZED"));

  assert_int_equal(cr_run("compliance --module-map '%s' --policy '%s' '%s'",
                          g_map, g_pol, g_off),
                   1);
  cr_assert_has(cr_out,
                "# NOT CHECKED: rule no-sdk-ids: 20 of its events have "
                "stacks never symbolized, so the module map's symbol "
                "prefixes could not say which module made them",
                "# NOT SYMBOLIZED: 50 events with stacks never symbolized",
                "no findings, but 1 rule not checked");
  cr_assert_has(cr_err, "rule no-sdk-ids not checked");
  /* JSON and JUnit say it too. */
  assert_int_equal(cr_run("compliance --format json --module-map '%s' "
                          "--policy '%s' '%s'", g_map, g_pol, g_off),
                   1);
  cr_assert_has(cr_out, "\"unnamed\":50,", "\"checked\":false");
  assert_int_equal(cr_run("compliance --format junit --module-map '%s' "
                          "--policy '%s' '%s'", g_map, g_pol, g_off),
                   1);
  cr_assert_has(cr_out, "stacks symbolized");
  /* Without a map no symbol prefix could apply: the modules are image
   * names either way, and nothing is a guess. */
  assert_int_equal(cr_run("compliance --format json '%s'", g_off), 0);
  cr_assert_has(cr_out, "\"unnamed\":0,");

  /* Symbolized, but stripped: its frames have no names either, which
   * `stackrec symbolize` cannot change; not a guess to hold back on
   * (review, session 34: every such rule was NOT CHECKED). */
  assert_int_equal(cr_run("compliance --format json --module-map '%s' "
                          "--policy '%s' '%s'", g_map, g_pol, g_stripped),
                   0);
  cr_assert_has(cr_out, "\"unnamed\":0,");
  assert_null(strstr(cr_out, "never symbolized"));

  /* Symbolized afterwards (setup): the finding. */
  assert_int_equal(cr_run("compliance --module-map '%s' --policy '%s' "
                          "'%s-symbolized'", g_map, g_pol, g_off),
                   1);
  cr_assert_has(cr_out, "[no-sdk-ids] identifiers.device_id from PhoneSDK");
}

static void test_manifest_per_module_refused(void **state) {
  (void)state;
  assert_int_equal(cr_run("privacy-manifest --module-map '%s' --per-module "
                          "'%s/pm-sym' '%s'", g_map, g_tmp, g_sym),
                   0);
  assert_null(strstr(cr_err, "never symbolized"));
  assert_int_equal(cr_run("privacy-manifest --module-map '%s' --per-module "
                          "'%s/pm-off' '%s'", g_map, g_tmp, g_off),
                   1);
  cr_assert_has(cr_err, "50 events have stacks never symbolized: the "
                        "module map's symbol prefixes could not name their "
                        "module", "none written");
  char dir[2200];
  snprintf(dir, sizeof dir, "%s/pm-off", g_tmp);
  assert_int_equal(access(dir, F_OK), -1); /* no draft made */
}

static void test_diff_says_which_side(void **state) {
  (void)state;
  assert_int_equal(cr_run("diff '%s' '%s'", g_sym, g_off), 1);
  cr_assert_has(cr_out,
                "# NEW NOT SYMBOLIZED: 50 of 50 events have stacks never "
                "symbolized (PCs only)",
                "FAIL: NEW adds 3 paths to a sensitive site (an input is "
                "NOT SYMBOLIZED: a path may be new only by its addresses)");
  assert_null(strstr(cr_out, "# BASE NOT SYMBOLIZED"));
  assert_int_equal(cr_run("diff --format json '%s' '%s'", g_sym, g_off), 1);
  cr_assert_has(cr_out, "\"unsymbolized_events\":0}",
                "\"unsymbolized_events\":50}");
  /* Both symbolized: no word of it. */
  assert_int_equal(cr_run("diff '%s' '%s-symbolized'", g_sym, g_off), 0);
  assert_null(strstr(cr_out, "NOT SYMBOLIZED"));
}

/* "N named, M left image+offset" of symbolize's summary. */
static void named_left(const char *out, unsigned long long *named,
                       unsigned long long *left) {
  const char *p = strstr(out, " named, ");
  *named = *left = 0;
  if (p == NULL)
    fail_msg("no \"named\" in: %s", out);
  while (p > out && p[-1] >= '0' && p[-1] <= '9')
    p--;
  if (sscanf(p, "%llu named, %llu left image+offset", named, left) != 2)
    fail_msg("no counts in: %s", out);
}

/* symbolize says how many PCs it named, not how many it looked up (QA,
 * session 39: "11 unique PCs resolved" with the binary gone, 9 unnamed):
 * with the app's binary moved away, fewer are named and more are left. */
static void test_symbolize_counts_names(void **state) {
  unsigned long long n1, l1, n2, l2;
  (void)state;

  assert_int_equal(cr_run("symbolize -o '%s/c1' '%s'", g_tmp, g_off), 0);
  named_left(cr_out, &n1, &l1);
  assert_int_equal(tl_system("mv '%s/app' '%s/app.away'", g_tmp, g_tmp), 0);
  int rc = cr_run("symbolize -o '%s/c2' '%s'", g_tmp, g_off);
  assert_int_equal(tl_system("mv '%s/app.away' '%s/app'", g_tmp, g_tmp), 0);
  assert_int_equal(rc, 0);
  named_left(cr_out, &n2, &l2);
  if (!(n1 > n2 && l2 > l1 && n1 + l1 == n2 + l2))
    fail_msg("with the binary: %llu named, %llu left; without: %llu, %llu",
             n1, l1, n2, l2);
}

static int setup(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  (void)state;
  if (cr_setup() != 0 || tl_mkdtemp(g_tmp, sizeof g_tmp, "unsym") != 0)
    return -1;
  snprintf(g_sym, sizeof g_sym, "%s/sym", g_tmp);
  snprintf(g_off, sizeof g_off, "%s/off", g_tmp);
  snprintf(g_map, sizeof g_map, "%s/map.json", g_tmp);
  snprintf(g_pol, sizeof g_pol, "%s/policy.json", g_tmp);
  snprintf(g_stripped, sizeof g_stripped, "%s/stripped", g_tmp);
  if (tl_write_file(g_map, k_map) != 0 || tl_write_file(g_pol, k_policy) != 0)
    return -1;
  /* One build, copied under one name, recorded both ways. */
  if (tl_system("cp '%s/%s/tests/diff_fixtures/app_extra' '%s/app'",
                src ? src : ".", ws ? ws : "stackrec", g_tmp) != 0 ||
      tl_system("'%s/app' '%s'", g_tmp, g_sym) != 0 ||
      tl_system("'%s/app' '%s' 1 offline", g_tmp, g_off) != 0 ||
      cr_run("symbolize '%s'", g_off) != 0 || /* into OFF-symbolized */
      tl_system("mkdir '%s/s' && strip -o '%s/s/app' '%s/app' && "
                "'%s/s/app' '%s'", g_tmp, g_tmp, g_tmp, g_tmp, g_stripped) != 0)
    return -1;
  return 0;
}

TL_TEST_MAIN("unsymbolized", setup, NULL, test_symbolize_counts_names,
             test_compliance_names_no_module_it_guessed,
             test_manifest_per_module_refused, test_diff_says_which_side)
