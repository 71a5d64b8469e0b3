/*
 * test-compliance-inputs.c: the files `stackrec compliance` and
 * `stackrec privacy-manifest` refuse (issue 13), beside the fixture app's
 * real recording (tests/compliance_harness.h, as test-compliance.c).
 * Malformed policy, module map and manifest files (a byte order mark, a
 * byte that is not text, a NUL, a key twice, a state that is none) must
 * exit 2 naming the file and the line and column; files that cannot be
 * opened exit 3, naming them; options that do not apply are refused.
 * Split from test-compliance.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/compliance_harness.h"
#include "tests/testlib.h"

/* ---- bad inputs -------------------------------------------------------------- */

/* cmd exits 2 and its stderr holds want (a file name and position). */
static void expect_usage(const char *want, const char *fmt, ...) {
  char args[4096];
  va_list ap;
  int rc;

  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  rc = cr_run("%s", args);
  if (rc != 2 || strstr(cr_err, want) == NULL)
    fail_msg("stackrec %s: exit %d, stderr \"%s\"; want 2 and \"%s\"", args,
             rc, cr_err, want);
}

/* Files stackrec refuses with exit 2, naming where and why: the file
 * (in g_tmp), its text, "LINE:COL: why" and the options that read it. */
static const struct bad_file {
  const char *name, *text, *where_why, *opts[2];
} g_bad_files[] = {
    {"bad.json",
     "{\"rules\": [\n  {\"id\": \"x\", \"sites\": \"a.*\",}\n]}\n",
     "2:30: expected a string key", {"compliance --policy"}},
    {"bad.json",
     "{\"rules\": [\n  {\"id\": \"x\", \"sites\": \"a.*\",\n"
     "   \"before_consent\": \"consent.granted\"}]}\n",
     "3:22: unknown or repeated key \"before_consent\"",
     {"compliance --policy"}},
    {"bad.json",
     "{\"rules\": [{\"id\": \"x\", \"sites\": \"a\", "
     "\"max_per_minute\": -1}]}",
     "1:56: \"max_per_minute\" must be a number", {"compliance --policy"}},
    {"bad.json",
     "{\"rules\": [], \"rules\": [{\"id\": \"x\", \"sites\": \"*\"}]}",
     "1:24: unknown or repeated key \"rules\"", {"compliance --policy"}},
    /* A state outside the table never holds: the rule passed in silence
     * (QA, session 31). */
    {"bad.json",
     "{\"rules\": [{\"id\": \"x\", \"sites\": \"a.*\", "
     "\"in_state\": \"app.backgrond\"}]}",
     "1:52: \"in_state\": \"app.backgrond\" is no state",
     {"compliance --policy"}},
    /* A byte order mark is passed over, and line 1's columns count from
     * after it; a byte that is not text is shown as \xNN, not raw. */
    {"bad.json", "\xef\xbb\xbf{\"rules\": 5}", "1:11: expected {\"rules\"",
     {"compliance --policy"}},
    {"bad.json", "{\"rules\": [\xc3]}", "1:12: unexpected byte \\xc3",
     {"compliance --policy", "compliance --module-map"}},
    {"bad.json", "{\"modules\": [{\"name\": \"A\", \"imagez\": [\"x\"]}]}",
     "1:38: unknown or repeated key: imagez",
     {"compliance --module-map", "privacy-manifest --module-map"}},
    {"bad.xcprivacy",
     "<?xml version=\"1.0\"?>\n<plist version=\"1.0\">\n<dict>\n"
     "  <key>NSPrivacyAccessedAPITypes</key>\n  <array>\n"
     "    <dict><key>NSPrivacyAccessedAPIType</key>"
     "<string>x</strin></dict>\n",
     "6:63: <string> closed by </strin>", {"privacy-manifest --manifest"}},
    {"bad.xcprivacy",
     "<plist version=\"1.0\">\n<dict>\n<key>A</key>\n</dict>\n</plist>\n",
     "4:1: <key>A</key> has no value", {"privacy-manifest --manifest"}},
    /* QA, against plistlib: a key twice (which one counts differs between
     * readers) is refused. */
    {"bad.xcprivacy",
     "<plist version=\"1.0\">\n<dict>\n<key>A</key><true/>\n"
     "<key>A</key><false/>\n</dict>\n</plist>\n",
     "5:8: <key>A</key> twice", {"privacy-manifest --manifest"}},
    /* After a byte order mark, line 1's columns are an editor's (it was
     * counted: 3 columns off). The table's last file: p below. */
    {"bad.xcprivacy", "\xef\xbb\xbf<plist><dict><key>A</key></dict></plist>\n",
     "1:26: <key>A</key> has no value", {"privacy-manifest --manifest"}},
};

static void test_bad_inputs(void **state) {
  char p[700], want[800];
  (void)state;

  for (size_t i = 0; i < sizeof g_bad_files / sizeof g_bad_files[0]; i++) {
    const struct bad_file *b = &g_bad_files[i];
    snprintf(p, sizeof p, "%s/%s", g_tmp, b->name);
    write_file(p, b->text);
    snprintf(want, sizeof want, "%s:%s", p, b->where_why);
    for (size_t k = 0; k < 2 && b->opts[k] != NULL; k++)
      expect_usage(want, "%s '%s' '%s'", b->opts[k], p, g_rec);
  }
  /* QA, against plistlib: a NUL byte (not XML) is refused; a byte order
   * mark is not. p: bad.xcprivacy, the table's last file. */
  {
    static const char nul[] = "<plist version=\"1.0\">\n<dict>\n<key>A</key>"
                              "<string>a\0b</string>\n</dict>\n</plist>\n";
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(nul, 1, sizeof nul - 1, f), sizeof nul - 1);
    assert_int_equal(fclose(f), 0);
  }
  snprintf(want, sizeof want, "%s:3:22: a control character (0x00)", p);
  expect_usage(want, "privacy-manifest --manifest '%s' '%s'", p, g_rec);
  write_file(p, "\xef\xbb\xbf<?xml version=\"1.0\"?>\n<plist version=\"1.0\">"
                "<dict></dict></plist>\n");
  assert_int_equal(cr_run("privacy-manifest --manifest '%s' '%s'", p, g_rec),
                   1); /* read: it declares nothing of what was used */
  cr_assert_has(cr_err, "used but not declared");
  /* Files that cannot be opened: 3, naming them. */
  assert_int_equal(cr_run("compliance --policy '%s/none.json' '%s'", g_tmp,
                          g_rec), 3);
  assert_non_null(strstr(cr_err, "none.json: No such file"));
  assert_int_equal(cr_run("privacy-manifest --manifest '%s/none.plist' '%s'",
                          g_tmp, g_rec), 3);
  /* A FIFO or a directory named as an input: test-compliance-rules.c. */
  expect_usage("--format 'xml'", "compliance --format xml '%s'", g_rec);
  /* Frames dropped before attribution blamed an SDK's calls on the app
   * (QA, session 33): refused where a module is blamed. */
  expect_usage("--app-only does not apply", "compliance --app-only '%s'",
               g_rec);
  expect_usage("--app-only does not apply",
               "privacy-manifest --app-only '%s'", g_rec);
}

TL_TEST_MAIN("compliance-inputs", setup, NULL, test_bad_inputs)
