/*
 * test-compliance.c: `stackrec compliance` and `stackrec privacy-manifest`
 * (issue 13) on a real recording, and the stat hooks under them (the
 * sliding-window peak rate: test-rate.c).
 *
 * The fixture app (tests/compliance_fixtures/app.c) and its "SDK"
 * (libacme_sdk.so) run under `stackrec record`; the test sets
 * consent.granted, app.background and app.foreground with `stackrec mark`
 * between the app's phases. What each phase calls is known exactly, so
 * every count per (site, module) and per rule is asserted exactly:
 *   identifiers.open   libacme_sdk.so  43 (3 before consent)
 *   identifiers.uname  compliance_app   1 (before consent)
 *   network.connect    libacme_sdk.so   6 (4 in the background)
 *   reasons.stat       libacme_sdk.so   2;  reasons.statfs 1
 *   reasons.statvfs    compliance_app   1 (PaySDK with the module map)
 * Findings are checked in JSON (parsed with the tools' JSON reader), in
 * JUnit XML (python3's xml parser and a structure check), in the HTML page
 * (headless Chromium's DOM); the draft manifest with python3's plistlib.
 * Malformed policy, module map and manifest files, which must exit 2
 * naming the file and position: test-compliance-inputs.c (the recording
 * of both: tests/compliance_harness.h).
 */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/chromium_run.h"
#include "tests/cli_run.h"
#include "tests/compliance_harness.h"
#include "tests/fixture.h"
#include "tests/flush_util.h"
#include "tests/testlib.h"
#include "tools/stackrec/json.h"

/* ---- JSON checks ------------------------------------------------------------- */

/* The item of doc's array `list` whose fields k1 and k2 are v1 and v2;
 * fails the test if there is none. */
static const stkr_json *find_item(const stkr_json *doc, const char *list,
                                  const char *k1, const char *v1,
                                  const char *k2, const char *v2) {
  const stkr_json *items = stkr_json_get(doc, list);
  size_t i;

  assert_non_null(items);
  for (i = 0; i < items->n; i++)
    if (strcmp(stkr_json_get(&items->items[i], k1)->str, v1) == 0 &&
        strcmp(stkr_json_get(&items->items[i], k2)->str, v2) == 0)
      return &items->items[i];
  fail_msg("no %s with %s %s, %s %s", list, k1, v1, k2, v2);
  return NULL;
}

static const stkr_json *find_finding(const stkr_json *doc, const char *rule,
                                     const char *site) {
  return find_item(doc, "findings", "rule", rule, "site", site);
}

static double num(const stkr_json *o, const char *key) {
  const stkr_json *v = stkr_json_get(o, key);
  if (v == NULL || v->type != STKR_JSON_NUMBER)
    fail_msg("no number \"%s\"", key);
  return v->num;
}

static void expect_group(const stkr_json *doc, const char *site,
                         const char *module, int count, int before, int bg) {
  const stkr_json *g =
      find_item(doc, "groups", "site", site, "module", module);
  if (num(g, "count") != count || num(g, "before_consent") != before ||
      num(g, "background") != bg)
    fail_msg("%s / %s: count %g before %g background %g, want %d %d %d", site,
             module, num(g, "count"), num(g, "before_consent"),
             num(g, "background"), count, before, bg);
}

static stkr_json *run_json(const char *extra) {
  stkr_json *doc = NULL;
  char err[256];
  int rc = cr_run("compliance --policy '%s' --format json %s '%s'", g_policy,
                  extra, g_rec);

  if (rc != 1)
    fail_msg("compliance exited %d, want 1 (findings): %s", rc, cr_err);
  if (stkr_json_parse(cr_out, strlen(cr_out), &doc, err, sizeof err) != 0)
    fail_msg("compliance --format json is not JSON: %s", err);
  return doc;
}

static void test_counts_and_findings(void **state) {
  stkr_json *doc = run_json("");
  const stkr_json *f, *stack;
  (void)state;

  assert_int_equal(stkr_json_get(doc, "groups")->n, 6);
  expect_group(doc, "identifiers.open", "libacme_sdk.so", 43, 3, 0);
  expect_group(doc, "identifiers.uname", "compliance_app", 1, 1, 0);
  expect_group(doc, "network.connect", "libacme_sdk.so", 6, 0, 4);
  expect_group(doc, "reasons.stat", "libacme_sdk.so", 2, 2, 0);
  expect_group(doc, "reasons.statfs", "libacme_sdk.so", 1, 1, 0);
  expect_group(doc, "reasons.statvfs", "compliance_app", 1, 1, 0);
  assert_true(num(doc, "marks") >= 3);
  assert_true(num(doc, "consent_processes") == 1);

  /* Without the map, pay-disk (modules PaySDK) selects nothing. */
  assert_int_equal(stkr_json_get(doc, "findings")->n, 4);
  f = find_finding(doc, "before-consent", "identifiers.open");
  assert_true(num(f, "count") == 3);
  assert_string_equal(stkr_json_get(f, "module")->str, "libacme_sdk.so");
  stack = stkr_json_get(f, "stack");
  assert_true(stack->n >= 2);
  assert_string_equal(stkr_json_get(&stack->items[0], "function")->str,
                      "acme_fingerprint");
  assert_true(num(f, "first_ts") > 0);
  f = find_finding(doc, "before-consent", "identifiers.uname");
  assert_true(num(f, "count") == 1);
  assert_string_equal(stkr_json_get(f, "module")->str, "compliance_app");
  f = find_finding(doc, "background-location", "network.connect");
  assert_true(num(f, "count") == 4);
  f = find_finding(doc, "too-often", "identifiers.open");
  assert_true(num(f, "count") == 43);
  /* The 40-call burst lies in one minute; all 43 may. */
  assert_true(num(f, "peak_per_minute") >= 40 && num(f, "peak_per_minute") <= 43);
  stkr_json_free(doc);
}

static void test_module_map(void **state) {
  char extra[700];
  stkr_json *doc;
  const stkr_json *f;
  (void)state;

  snprintf(extra, sizeof extra, "--module-map '%s'", g_map);
  doc = run_json(extra);
  assert_int_equal(stkr_json_get(doc, "groups")->n, 6);
  expect_group(doc, "identifiers.open", "AcmeSDK", 43, 3, 0);
  expect_group(doc, "reasons.statvfs", "PaySDK", 1, 1, 0);
  expect_group(doc, "identifiers.uname", "compliance_app", 1, 1, 0);
  assert_int_equal(stkr_json_get(doc, "findings")->n, 5);
  f = find_finding(doc, "pay-disk", "reasons.statvfs");
  assert_string_equal(stkr_json_get(f, "module")->str, "PaySDK");
  assert_true(num(f, "count") == 1);
  stkr_json_free(doc);
}

static void test_no_policy_no_findings(void **state) {
  (void)state;
  assert_int_equal(cr_run("compliance '%s'", g_rec), 0);
  assert_non_null(strstr(cr_out, "no findings"));
  assert_non_null(strstr(cr_out, "libacme_sdk.so: 43 events"));
  /* The recording with the stat hooks on is complete and adds up. */
  assert_int_equal(cr_run("verify '%s'", g_rec), 0);
}

/* ---- JUnit, HTML, manifest --------------------------------------------------- */

static int python(const char *script, const char *arg) {
  char path[700], cmd[2048];
  int st;

  snprintf(path, sizeof path, "%s/check.py", g_tmp);
  write_file(path, script);
  snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", path, arg);
  st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A JUnit structure check: every suite's tests/failures attributes equal
 * its cases; each failure has a message; the expected suites and cases. */
static const char k_junit_check[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "assert root.tag == 'testsuites', root.tag\n"
    "got = {}\n"
    "total = fails = 0\n"
    "for s in root:\n"
    "    assert s.tag == 'testsuite'\n"
    "    cases = list(s)\n"
    "    assert all(c.tag == 'testcase' for c in cases)\n"
    "    assert int(s.get('tests')) == len(cases), s.get('name')\n"
    "    f = [c for c in cases if c.find('failure') is not None]\n"
    "    assert int(s.get('failures')) == len(f), s.get('name')\n"
    "    for c in cases:\n"
    "        assert c.get('classname') and c.get('name')\n"
    "    for c in f:\n"
    "        assert c.find('failure').get('message')\n"
    "        assert 'acme_fingerprint' in c.find('failure').text or\\\n"
    "               'app_about_screen' in c.find('failure').text or\\\n"
    "               'acme_location' in c.find('failure').text\n"
    "    got[s.get('name')] = sorted((c.get('name'), c.find('failure') is not None) for c in cases)\n"
    "    total += len(cases); fails += len(f)\n"
    "assert int(root.get('tests')) == total and int(root.get('failures')) == fails\n"
    "want = {\n"
    " 'before-consent': [('identifiers.open from libacme_sdk.so', True),\n"
    "                    ('identifiers.uname from compliance_app', True)],\n"
    " 'background-location': [('network.connect from libacme_sdk.so', True)],\n"
    " 'too-often': [('identifiers.open from libacme_sdk.so', True),\n"
    "               ('identifiers.uname from compliance_app', False)],\n"
    " 'pay-disk': [('modules seen', False), ('no matching events', False)]}\n"
    "assert got == want, got\n";

static void test_junit(void **state) {
  char out[700];
  (void)state;

  snprintf(out, sizeof out, "%s/junit.xml", g_tmp);
  assert_int_equal(cr_run("compliance --policy '%s' --format junit -o '%s' '%s'",
                          g_policy, out, g_rec), 1);
  assert_int_equal(python(k_junit_check, out), 0);
}

static void test_html(void **state) {
  char page[700], url[800], dom_path[700];
  FILE *f;
  static char dom[1 << 20];
  size_t n;
  (void)state;

  snprintf(page, sizeof page, "%s/compliance.html", g_tmp);
  assert_int_equal(cr_run("compliance --policy '%s' --format html -o '%s' '%s'",
                          g_policy, page, g_rec), 1);
  snprintf(url, sizeof url, "file://%s", page);
  snprintf(dom_path, sizeof dom_path, "%s/compliance.dom", g_tmp);
  chromium_run(g_tmp, url, "--dump-dom", dom_path);
  f = fopen(dom_path, "r");
  assert_non_null(f);
  n = fread(dom, 1, sizeof dom - 1, f);
  fclose(f);
  dom[n] = '\0';
  assert_non_null(strstr(dom, "<section id=\"compliance\">"));
  assert_int_equal(tl_count(dom, "<tr class=\"finding\">"), 4);
  assert_non_null(strstr(dom, "<td>background-location</td>"));
  /* The report's own script ran (it draws the flame graphs). */
  assert_non_null(strstr(dom, "class=\"flame\""));
}

static const char k_plist_check[] =
    "import sys, plistlib\n"
    "d = plistlib.load(open(sys.argv[1], 'rb'))\n"
    "types = [t['NSPrivacyAccessedAPIType'] for t in d['NSPrivacyAccessedAPITypes']]\n"
    "assert types == ['NSPrivacyAccessedAPICategoryFileTimestamp',\n"
    "                 'NSPrivacyAccessedAPICategoryDiskSpace'], types\n"
    "assert all(t['NSPrivacyAccessedAPITypeReasons'] == []\n"
    "           for t in d['NSPrivacyAccessedAPITypes'])\n"
    "text = open(sys.argv[1]).read()\n"
    "assert 'used by libacme_sdk.so: reasons.stat, 2 events' in text\n"
    "assert 'used by compliance_app: reasons.statvfs, 1 event' in text\n";

static const char k_per_module_check[] =
    "import sys, os, plistlib\n"
    "got = {}\n"
    "for f in sorted(os.listdir(sys.argv[1])):\n"
    "    d = plistlib.load(open(os.path.join(sys.argv[1], f), 'rb'))\n"
    "    got[f] = [t['NSPrivacyAccessedAPIType'][28:] for t in d['NSPrivacyAccessedAPITypes']]\n"
    "assert got == {'compliance_app.xcprivacy': ['DiskSpace'],\n"
    "               'libacme_sdk.so.xcprivacy': ['FileTimestamp', 'DiskSpace']}, got\n";

static const char k_manifest_head[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
    "\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
    "<plist version=\"1.0\">\n<dict>\n"
    "  <key>NSPrivacyTracking</key><false/>\n"
    "  <key>NSPrivacyAccessedAPITypes</key>\n  <array>\n";

/* A manifest declaring types[0..n), each with a reason of its own (one of
 * its codes), or with `reason` for all when not NULL. */
static void write_manifest_reason(const char *path, const char *const *types,
                                  int n, const char *reason) {
  FILE *f = fopen(path, "w");
  int i;

  assert_non_null(f);
  fputs(k_manifest_head, f);
  for (i = 0; i < n; i++)
    fprintf(f, "    <dict><key>NSPrivacyAccessedAPIType</key>"
            "<string>NSPrivacyAccessedAPICategory%s</string>"
            "<key>NSPrivacyAccessedAPITypeReasons</key>"
            "<array><string>%s</string></array></dict>\n", types[i],
            reason != NULL                            ? reason
            : strcmp(types[i], "DiskSpace") == 0      ? "85F4.1"
            : strcmp(types[i], "UserDefaults") == 0   ? "CA92.1"
                                                      : "C617.1");
  fputs("  </array>\n</dict>\n</plist>\n", f);
  assert_int_equal(fclose(f), 0);
}

static void write_manifest(const char *path, const char *const *types, int n) {
  write_manifest_reason(path, types, n, NULL);
}

static void test_privacy_manifest(void **state) {
  static const char *const partial[] = {"FileTimestamp", "UserDefaults"};
  static const char *const full[] = {"DiskSpace", "FileTimestamp"};
  char draft[700], man[700];
  (void)state;

  snprintf(draft, sizeof draft, "%s/draft.xcprivacy", g_tmp);
  snprintf(man, sizeof man, "%s/app.xcprivacy", g_tmp);
  assert_int_equal(cr_run("privacy-manifest -o '%s' '%s'", draft, g_rec), 0);
  assert_int_equal(python(k_plist_check, draft), 0);
  snprintf(man, sizeof man, "%s/per-module", g_tmp);
  assert_int_equal(cr_run("privacy-manifest --per-module '%s' -o /dev/null '%s'",
                          man, g_rec), 0);
  assert_int_equal(python(k_per_module_check, man), 0);
  {
    /* Two modules whose names make one file name: two files, and a note
     * (QA: the second replaced the first, exit 0, no word). */
    char map[700], dir[700], path[1000];
    snprintf(map, sizeof map, "%s/clash.json", g_tmp);
    write_file(map, "{\"modules\": [\n"
                    " {\"name\": \"Acme SDK\", \"images\": [\"libacme*\"]},\n"
                    " {\"name\": \"Acme_SDK\", \"images\": "
                    "[\"compliance_app*\"]}\n]}\n");
    snprintf(dir, sizeof dir, "%s/clash", g_tmp);
    assert_int_equal(cr_run("privacy-manifest --module-map '%s' --per-module "
                            "'%s' -o /dev/null '%s'", map, dir, g_rec), 0);
    cr_assert_has(cr_err, "another module's name makes the same file name");
    snprintf(path, sizeof path, "%s/Acme_SDK.xcprivacy", dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/Acme_SDK-2.xcprivacy", dir);
    assert_int_equal(access(path, R_OK), 0);
    /* A name longer than a file name may be: cut, suffix kept (QA,
     * session 27: "File name too long", exit 1). */
    char text[600];
    snprintf(text, sizeof text, "{\"modules\": [{\"name\": \"%0300d\", "
             "\"images\": [\"libacme*\"]}]}\n", 7);
    write_file(map, text);
    assert_int_equal(cr_run("privacy-manifest --module-map '%s' --per-module "
                            "'%s' -o /dev/null '%s'", map, dir, g_rec), 0);
    snprintf(path, sizeof path, "%s/%0230d.xcprivacy", dir, 0);
    assert_int_equal(access(path, R_OK), 0);
  }
  snprintf(man, sizeof man, "%s/app.xcprivacy", g_tmp);
  /* The draft declares what was used, but leaves the reasons to a person:
   * given back as it is, it is refused (QA: it passed). */
  assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", draft, g_rec),
                   1);
  cr_assert_has(cr_err, "declared without a reason: "
                        "NSPrivacyAccessedAPICategoryDiskSpace");
  assert_null(strstr(cr_err, "used but not declared"));
  write_manifest(man, partial, 2);
  assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", man, g_rec),
                   1);
  assert_non_null(strstr(cr_err, "used but not declared: "
                                 "NSPrivacyAccessedAPICategoryDiskSpace"));
  assert_null(strstr(cr_err, "not declared: NSPrivacyAccessedAPICategoryFileTimestamp"));
  assert_non_null(strstr(cr_err, "declared, not seen in this recording: "
                                 "NSPrivacyAccessedAPICategoryUserDefaults"));
  write_manifest(man, full, 2);
  assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", man, g_rec),
                   0);
  /* A reason that is none of its category's codes is none (QA, session
   * 39: "", BOGUS.9 and another category's code passed); a code of
   * Apple's form not in the table passes with a note. */
  static const char *const bad[] = {"", "BOGUS.9", "35F9.1"};
  for (int b = 0; b < 3; b++) {
    write_manifest_reason(man, full, 2, bad[b]);
    assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", man,
                            g_rec), 1);
    cr_assert_has(cr_err, "declared without a reason: "
                          "NSPrivacyAccessedAPICategoryDiskSpace");
  }
  cr_assert_has(cr_err, "DiskSpace: reason 35F9.1 is SystemBootTime's");
  write_manifest_reason(man, full, 2, "ABCD.7");
  assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", man, g_rec),
                   0);
  cr_assert_has(cr_err, "note: DiskSpace: reason \"ABCD.7\" is not one of "
                        "the codes known here");
}

/* ---- the stat hooks in forked children ---------------------------------------- */

/* The recorder's own fork handler calls fstat: with the stat hooks on it
 * once put an event into the parent's shared ring (written but never
 * attempted: the accounting did not add up). */
static void test_stat_hooks_fork(void **state) {
  char dir[700];
  int i;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  /* The TSan runtime cannot be preloaded into bash (built without it). */
  fprintf(stderr, "TSan: the hooks cannot go into /bin/bash: skipped\n");
  skip();
#endif
  snprintf(dir, sizeof dir, "%s/forks", g_tmp);
  san_preload(true);
  i = cr_run("record -q -o '%s' --categories reasons -- /bin/bash "
             "-c 'ls / >/dev/null; ls /tmp >/dev/null; test -d /tmp'", dir);
  san_preload(false);
  assert_int_equal(i, 0);
  if (cr_run("verify '%s'", dir) != 0)
    fail_msg("verify: %s%s", cr_out, cr_err);
  assert_int_equal(cr_run("report '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "reasons.stat"));
}

/* The text output cuts a stack at 3 lines and says how many frames it
 * left out: the standard recording's 4-frame stack leaves 1 ("... 1 more
 * frame", not "frames"). */
static void test_text_more_frames(void **state) {
  const char *dir = fx_tmpdir("compliance-std");
  (void)state;

  assert_non_null(dir);
  assert_int_equal(fx_std_write(dir, FX_PID), 0);
  if (cr_run("compliance '%s'", dir) != 0)
    fail_msg("compliance exited non-zero: %s", cr_err);
  if (strstr(cr_out, "... 1 more frame\n") == NULL ||
      strstr(cr_out, " 1 more frames") != NULL) {
    const char *m = strstr(cr_out, "more frame");
    fail_msg("want '... 1 more frame', got \"%.40s\" (%zu bytes of output)",
             m ? m - 8 : "(none)", strlen(cr_out));
  }
}

/* One process (pid 77) that watched `watched`, with an event at
 * privacy.clipboard.read and one at net.connect (the fixture's sites). */
static void write_watched(const char *d, const char *watched) {
  static const uint32_t s2[] = {1, 2}, one[] = {1};
  static const fx_ev ev[] = {{0, 1, 1, 1, NULL, 0, false},
                             {10, 2, 1, 1, NULL, 0, false}};
  const fx_batch b = {.seq = 1, .header = true, .pid = 77, .segment_seq = 1,
                      .sites = s2, .n_sites = 2, .threads = one,
                      .n_threads = 1, .stacks = one, .n_stacks = 1,
                      .base_ts = 1000, .evs = ev, .n_evs = 2, .last = true,
                      .watched = watched};
  stkr_fmt_buf buf = {0};

  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(d, 77, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
}

/* A rule the recording could not show events of (QA, session 26: both
 * passed, "no findings", exit 0): one over a category no process watched
 * (the fixture records identifiers, network and reasons) is NOT CHECKED,
 * an error everywhere and exit 1; one whose modules match no module seen
 * is a warning. privacy-manifest of a recording without `reasons` says it
 * cannot list the required-reason APIs, and exits 1. */
static void test_rules_not_seen(void **state) {
  char pol[700], rec[700];
  stkr_json *doc = NULL;
  const stkr_json *notes;
  char err[256];
  (void)state;

  snprintf(pol, sizeof pol, "%s/unseen.json", g_tmp);
  write_file(pol, "{\"rules\": [\n"
                  " {\"id\": \"files\", \"sites\": \"files.*\"},\n"
                  " {\"id\": \"mixed\", \"sites\": [\"reasons.*\", "
                  "\"devices.open\", \"devices.fopen\"]},\n"
                  " {\"id\": \"typo\", \"sites\": \"identifiers.*\", "
                  "\"modules\": \"AcmeSdk\"},\n"
                  " {\"id\": \"any-open\", \"sites\": \"*.open\"}\n]}\n");
  assert_int_equal(cr_run("info '%s'", g_rec), 0);
  cr_assert_has(cr_out, "  watched:     identifiers,network,reasons (sites of "
                        "other categories were not recorded)\n");
  assert_int_equal(cr_run("compliance --policy '%s' '%s'", pol, g_rec), 1);
  cr_assert_has(cr_out,
                "# NOT CHECKED: rule files: no process watched category "
                "files, so its events there could not be recorded",
                "# NOT CHECKED: rule mixed: no process watched category "
                "devices, so",
                "# WARNING: rule typo: its modules patterns match no module "
                "of the events read (", "libacme_sdk.so",
                "[any-open] identifiers.open from libacme_sdk.so: any call: "
                "43 events");
  assert_null(strstr(cr_out, "rule any-open:"));
  cr_assert_has(cr_err, "stackrec compliance: error: rule files not checked: ",
                "stackrec compliance: warning: rule typo may match nothing: ");
  assert_int_equal(cr_run("compliance --format json --policy '%s' '%s'", pol,
                          g_rec), 1);
  assert_int_equal(stkr_json_parse(cr_out, strlen(cr_out), &doc, err,
                                   sizeof err), 0);
  notes = stkr_json_get(doc, "rule_notes");
  assert_non_null(notes);
  assert_int_equal(notes->n, 3);
  assert_string_equal(stkr_json_get(&notes->items[0], "rule")->str, "files");
  assert_false(stkr_json_get(&notes->items[0], "checked")->b);
  assert_true(stkr_json_get(&notes->items[2], "checked")->b);
  stkr_json_free(doc);
  assert_int_equal(cr_run("compliance --format junit --policy '%s' '%s'", pol,
                          g_rec), 1);
  /* mixed's reasons.* were watched: its three groups are findings. */
  cr_assert_has(cr_out, "failures=\"4\" errors=\"2\">",
                "name=\"sites recorded\">\n      <error message=\"no "
                "process watched category files",
                "name=\"modules seen\">\n      <skipped message=");

  /* A recording of the files category only: no required-reason API
   * (written here: the hooks cannot go into /bin/sh under TSan). */
  snprintf(rec, sizeof rec, "%s", fx_tmpdir("compliance-files-only"));
  write_watched(rec, "file");
  assert_int_equal(cr_run("privacy-manifest -o /dev/null '%s'", rec), 1);
  cr_assert_has(cr_err, "error: no process of the recording watched category "
                        "reasons (the required-reason APIs)");
}

/* A category whose events were read was recorded, whatever the Header's
 * watched says (review, session 26: NOT CHECKED over data it held). */
static void test_watched_or_read(void **state) {
  const char *d = fx_tmpdir("compliance-watched");
  char pol[700];
  (void)state;

  write_watched(d, "net");
  snprintf(pol, sizeof pol, "%s/watched.json", g_tmp);
  write_file(pol, "[{\"id\": \"clip\", \"sites\": \"privacy.*\"},\n"
                  " {\"id\": \"files\", \"sites\": \"file.*\"}]\n");
  assert_int_equal(cr_run("compliance --policy '%s' '%s'", pol, d), 1);
  cr_assert_has(cr_out, "# NOT CHECKED: rule files: no process watched "
                        "category file,",
                "[clip] privacy.clipboard.read from ");
  assert_null(strstr(cr_out, "rule clip:"));
}

/* not_in_state: events while no such state is active, so before consent
 * and after it was revoked (QA, session 39: calls after consent.revoked
 * could not be flagged by any rule). The fixture with consent granted at
 * phase 0 and revoked at phase 1: the 4 + 2 location requests of phases
 * 2 and 3 come after the revocation. */
static void test_not_in_state_after_revocation(void **state) {
  static const char *const marks[] = {"consent.granted", "consent.revoked",
                                      "app.foreground"};
  char rec[700], ctl[700], pol[700];
  (void)state;

  snprintf(rec, sizeof rec, "%s/rec-revoked", g_tmp);
  snprintf(ctl, sizeof ctl, "%s/ctl-revoked", g_tmp);
  snprintf(pol, sizeof pol, "%s/revoked.json", g_tmp);
  assert_int_equal(record_fixture_marks(rec, ctl, marks), 0);
  write_file(pol, "{\"rules\": [{\"id\": \"no-consent\", \"sites\": "
                  "[\"identifiers.*\", \"network.*\"], \"not_in_state\": "
                  "\"consent.granted\"},\n"
                  " {\"id\": \"before\", \"sites\": \"network.*\", "
                  "\"before_mark\": \"consent.granted\"}]}\n");
  assert_int_equal(cr_run("compliance --policy '%s' '%s'", pol, rec), 1);
  cr_assert_has(cr_out,
                "[no-consent] identifiers.open from libacme_sdk.so: not in "
                "consent.granted: 3 events",
                "[no-consent] identifiers.uname from compliance_app: not in "
                "consent.granted: 1 event",
                "[no-consent] network.connect from libacme_sdk.so: not in "
                "consent.granted: 6 events");
  assert_null(strstr(cr_out, "[before]"));
  write_file(pol, "{\"rules\": [{\"id\": \"x\", \"sites\": \"a.*\", "
                  "\"not_in_state\": \"consent.grantd\"}]}\n");
  assert_int_equal(cr_run("compliance --policy '%s' '%s'", pol, rec), 2);
  cr_assert_has(cr_err, "\"not_in_state\": \"consent.grantd\" is no state");
}

TL_TEST_MAIN("compliance", setup, NULL, test_counts_and_findings,
             test_module_map, test_no_policy_no_findings, test_junit, test_html,
             test_privacy_manifest, test_stat_hooks_fork,
             test_text_more_frames, test_rules_not_seen,
             test_watched_or_read, test_not_in_state_after_revocation)
