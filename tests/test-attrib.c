/*
 * test-attrib.c: attribution of stacks to modules (tools/stackrec/
 * attrib.c) and the JSON reader under it (tools/stackrec/json.c).
 *
 * Stacks are built by hand as the reader hands them out (innermost first):
 * a hook library and libc at the top, an SDK, the app. Each case states the
 * module a person would name; the module map cases cover a statically
 * linked SDK (symbol prefixes), image globs on full paths and base names,
 * and the first entry winning. Malformed maps must be refused with the
 * file name and line:column of the offending value.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/stackrec/attrib.h"
#include "tools/stackrec/json.h"
#include "tests/testlib.h"

static stkr_frame fr(const char *function, const char *image) {
  stkr_frame f;
  memset(&f, 0, sizeof f);
  f.function = function;
  f.image = image;
  return f;
}

static void test_system_images(void **state) {
  static const struct {
    const char *path;
    bool system;
  } images[] = {
      {"/lib/x86_64-linux-gnu/libc.so.6", true},
      {"/usr/lib/x86_64-linux-gnu/libz.so.1", true},
      {"/lib64/ld-linux-x86-64.so.2", true},
      {"/opt/x/ld-linux-aarch64.so.1", true},
      {"/opt/musl/libc.so", true},
      {"/work/bazel-bin/preload/libstackrec_preload.so", true},
      {"/System/Library/Frameworks/Foundation.framework/Foundation", true},
      {"/usr/lib/libSystem.B.dylib", true},
      {"/opt/app/libacme_sdk.so", false},
      {"/usr/local/lib/libfoo.so", false},
      {"/library/libcrypto.so", false}, /* not /lib/ */
      /* QA (session 31): a path that leaves /usr/lib (an rpath of
       * "/usr/lib/../../opt/ads"), and a library named libc-something, are
       * not the system's; glibc's own libc-2.36.so is. */
      {"/usr/lib/../../opt/ads/libads.so", false},
      {"/usr/lib/./../opt/ads/libads.so", false},
      {"/opt/../usr/lib/libz.so.1", true},
      {"/opt/app/libc-client.so.2007", false},
      {"/opt/glibc/libc-2.36.so", true},
      /* A trailing "..", and "//" (review, session 31). */
      {"/usr/lib/..", false},
      {"/usr/lib/x/../../opt/a.so", false},
      {"/usr//lib/libz.so.1", true},
      {"/var/containers/Bundle/Application/X/App.app/Frameworks/"
       "Acme.framework/Acme",
       false},
  };
  (void)state;

  for (size_t i = 0; i < sizeof images / sizeof images[0]; i++)
    if (stkr_attrib_system_image(images[i].path) != images[i].system)
      fail_msg("%s: %s a system image", images[i].path,
               images[i].system ? "not" : "taken for");
}

static void test_default_by_image(void **state) {
  stkr_frame s[] = {
      fr("getenv", "/work/preload/libstackrec_preload.so"),
      fr("__libc_getenv", "/lib/x86_64-linux-gnu/libc.so.6"),
      fr(NULL, NULL), /* an unknown PC is skipped, not responsible */
      fr("acme_fingerprint", "/opt/app/lib/libacme_sdk.so"),
      fr("main", "/opt/app/bin/app"),
  };
  stkr_frame sys_only[] = {
      fr("open", "/lib/x86_64-linux-gnu/libc.so.6"),
      fr("_dl_start", "/lib64/ld-linux-x86-64.so.2"),
  };
  stkr_frame none[] = {fr(NULL, NULL)};
  stkr_frame app[] = {fr("getenv", "/work/preload/libstackrec_preload.so"),
                      fr("main", "/opt/app/bin/app")};
  (void)state;
  assert_string_equal(stkr_attrib_module(NULL, s, 5, NULL), "libacme_sdk.so");
  assert_string_equal(stkr_attrib_module(NULL, s + 4, 1, NULL), "app");
  assert_string_equal(stkr_attrib_module(NULL, app, 2, NULL), "app");
  assert_string_equal(stkr_attrib_module(NULL, sys_only, 2, NULL), "libc.so.6");
  assert_string_equal(stkr_attrib_module(NULL, none, 1, NULL), "?");
  assert_string_equal(stkr_attrib_module(NULL, NULL, 0, NULL), "?");
}

static const char map_text[] =
    "{\"modules\": [\n"
    "  {\"name\": \"AcmeAnalytics\", \"images\": [\"libacme*.so\"],\n"
    "   \"symbols\": [\"acme_\"]},\n"
    "  {\"name\": \"PaySDK\", \"symbols\": [\"pay_sdk_\", \"PSK\", \"PaySDK.\"]},\n"
    "  {\"name\": \"Vendor\", \"images\": [\"/opt/vendor/*\"]},\n"
    "  {\"name\": \"Shadowed\", \"symbols\": [\"acme_\"]},\n"
    "  {\"name\": \"Packaged\", \"images\": [\"/usr/lib/packaged/*\"]}\n"
    "]}\n";

static void test_module_map(void **state) {
  stkr_modmap *m = NULL;
  char err[256] = "";
  stkr_frame dyn[] = {fr("getenv", "/lib/x86_64-linux-gnu/libc.so.6"),
                      fr("acme_fp", "/opt/app/lib/libacme_sdk.so"),
                      fr("main", "/opt/app/bin/app")};
  /* Statically linked: the SDK's functions live in the app's image. */
  stkr_frame stat_pay[] = {fr("statfs", "/lib/x86_64-linux-gnu/libc.so.6"),
                           fr("pay_sdk_disk", "/opt/app/bin/app"),
                           fr("main", "/opt/app/bin/app")};
  stkr_frame stat_acme[] = {fr("acme_x", "/opt/app/bin/app")};
  stkr_frame objc[] = {fr("-[PSKDevice ident]", "/opt/app/bin/App")};
  stkr_frame vendor[] = {fr(NULL, "/opt/vendor/libv.so")};
  stkr_frame app[] = {fr("getenv", "/lib/x86_64-linux-gnu/libc.so.6"),
                      fr("app_settings", "/opt/app/bin/app"),
                      fr("pay_sdk_run", "/opt/app/bin/app")};
  (void)state;
  assert_int_equal(stkr_modmap_parse("map.json", map_text, sizeof map_text - 1,
                                     &m, err, sizeof err), 0);
  assert_string_equal(stkr_attrib_module(m, dyn, 3, NULL), "AcmeAnalytics");
  assert_string_equal(stkr_attrib_module(m, stat_pay, 3, NULL), "PaySDK");
  /* The first entry that claims a frame wins ("Shadowed" never does). */
  assert_string_equal(stkr_attrib_module(m, stat_acme, 1, NULL), "AcmeAnalytics");
  assert_string_equal(stkr_attrib_module(m, objc, 1, NULL), "PaySDK");
  assert_string_equal(stkr_attrib_module(m, vendor, 1, NULL), "Vendor");
  /* glibc's fortified open (bits/fcntl2.h) inlined into the SDK's code,
   * -D_FORTIFY_SOURCE: the SDK's (QA, session 41: the app's). An inline
   * frame of the app's own header is not skipped. */
  {
    stkr_frame fort[] = {fr("open", "/opt/app/bin/app"),
                         fr("acme_readid", "/opt/app/bin/app"),
                         fr("main", "/opt/app/bin/app")};
    fort[0].inlined = true;
    fort[0].file = "/usr/include/x86_64-linux-gnu/bits/fcntl2.h";
    assert_string_equal(stkr_attrib_module(m, fort, 3, NULL), "AcmeAnalytics");
    fort[0].file = "/opt/app/src/io.h";
    assert_string_equal(stkr_attrib_module(m, fort, 3, NULL), "app");
  }
  /* Unsymbolized (QA, session 33): the app's own frame without a name is
   * "app", and said to be a guess, as a frame the map claims by image
   * after entries with symbol prefixes is; the first entry's image claim
   * is sure, and so is any named frame. */
  {
    stkr_frame bare_app[] = {fr(NULL, "/lib/x86_64-linux-gnu/libc.so.6"),
                             fr(NULL, "/opt/app/bin/app")};
    stkr_frame bare_acme[] = {fr(NULL, "/opt/app/lib/libacme_sdk.so")};
    bool unnamed = false;
    assert_string_equal(stkr_attrib_module(m, bare_app, 2, &unnamed), "app");
    assert_true(unnamed);
    assert_string_equal(stkr_attrib_module(m, vendor, 1, &unnamed), "Vendor");
    assert_true(unnamed);
    assert_string_equal(stkr_attrib_module(m, bare_acme, 1, &unnamed),
                        "AcmeAnalytics");
    assert_false(unnamed);
    assert_string_equal(stkr_attrib_module(m, app, 3, &unnamed), "app");
    assert_false(unnamed);
    assert_string_equal(stkr_attrib_module(NULL, bare_app, 2, &unnamed), "app");
    assert_false(unnamed);
  }
  /* An app packaged under /usr/lib/<app>/ (Debian's Electron apps,
   * Firefox): a map that names its images makes them a module (QA,
   * session 31: the system's, skipped, its calls blamed on no SDK). A
   * symbol prefix never makes a system frame a module. */
  {
    stkr_frame pk[] = {fr("getenv", "/lib/x86_64-linux-gnu/libc.so.6"),
                       fr("pk_call", "/usr/lib/packaged/libpk.so"),
                       fr("main", "/usr/lib/packaged/app")};
    stkr_frame sys_sym[] = {fr("acme_in_libc", "/lib/x86_64-linux-gnu/libc.so.6"),
                            fr("main", "/opt/app/bin/app")};
    /* libc, the loader and the hook library stay the system's even when
     * a map's broad glob names them (review: "*.so" took every event). */
    stkr_frame in_pk[] = {fr("getenv", "/usr/lib/packaged/libc.so.6"),
                          fr("pk_call", "/usr/lib/packaged/libpk.so")};
    assert_string_equal(stkr_attrib_module(m, pk, 3, NULL), "Packaged");
    assert_string_equal(stkr_attrib_module(m, sys_sym, 2, NULL), "app");
    assert_string_equal(stkr_attrib_module(m, in_pk, 2, NULL), "Packaged");
    assert_string_equal(stkr_attrib_module(m, in_pk, 1, NULL), "libc.so.6");
  }
  /* Swift names as the demangler writes them, the module in the middle
   * (QA, session 30: none matched "PaySDK."; fails without). */
  static const char *const swift[] = {
      "PaySDK.Wallet.read() -> ()",
      "static PaySDK.Wallet.readClipboard() -> ()",
      "closure #1 () -> () in static PaySDK.Wallet.read() -> ()",
      "closure #2 (Swift.Int) -> Swift.Bool in closure #1 () -> () in "
      "PaySDK.Wallet.read() -> ()",
      "(2) await resume partial function for PaySDK.Wallet.load() async -> ()",
      "@objc PaySDK.Wallet.read() -> ()",
      "merged PaySDK.Wallet.read() -> ()",
      "function signature specialization <Arg[0] = Dead> of static "
      "PaySDK.Wallet.read() -> ()",
      "generic specialization <Swift.Int> of PaySDK.Box.get() -> A",
      "(extension in PaySDK):Swift.String.paySDKValue.getter : Swift.Int",
      "implicit closure #1 () -> Swift.String in PaySDK.Wallet.read() -> ()"};
  for (size_t i = 0; i < sizeof swift / sizeof swift[0]; i++) {
    stkr_frame sw[] = {fr(swift[i], "/opt/app/bin/App")};
    if (strcmp(stkr_attrib_module(m, sw, 1, NULL), "PaySDK") != 0)
      fail_msg("\"%s\" not claimed by PaySDK.", swift[i]);
  }
  /* Not the module's: a closure in the app, a parameter that names it. */
  stkr_frame host[] = {fr("closure #1 (PaySDK.Wallet) -> () in App.main() -> ()",
                          "/opt/app/bin/App")};
  assert_string_equal(stkr_attrib_module(m, host, 1, NULL), "App");
  /* The responsible frame is the first non-system one: the app's own
   * function, although an SDK function called it. */
  assert_string_equal(stkr_attrib_module(m, app, 3, NULL), "app");
  stkr_modmap_free(m);
  stkr_modmap_free(NULL);
}

/* A malformed map must fail with "<name>:<line>:<col>: <what>". */
static void expect_bad(const char *text, const char *where, const char *what) {
  stkr_modmap *m = (stkr_modmap *)1;
  char err[256] = "";

  assert_int_equal(stkr_modmap_parse("m.json", text, strlen(text), &m, err,
                                     sizeof err), -EINVAL);
  assert_null(m);
  if (strncmp(err, where, strlen(where)) != 0 || strstr(err, what) == NULL)
    fail_msg("for %s: got \"%s\", want \"%s ...%s...\"", text, err, where,
             what);
}

static void test_bad_maps(void **state) {
  (void)state;
  expect_bad("", "m.json:1:1:", "end of input");
  expect_bad("{\"modules\": [\n  {\"name\": \"A\" \"images\": []}]}",
             "m.json:2:16:", "expected ',' or '}'");
  expect_bad("{\"modules\": [{\"name\": \"A\", \"images\": [\"x\"],}]}",
             "m.json:1:44:", "expected a string key");
  expect_bad("{\"modules\": [1]}", "m.json:1:14:", "must be an object");
  expect_bad("{\"modules\": [{\"name\": \"A\"}]}", "m.json:1:14:",
             "needs \"images\" or \"symbols\"");
  expect_bad("{\"modules\": [{\"images\": [\"x\"]}]}", "m.json:1:14:",
             "needs a \"name\"");
  expect_bad("{\"modules\": [\n{\"name\": \"A\",\n \"symbol\": [\"x\"]}]}",
             "m.json:3:12:", "unknown or repeated key: symbol");
  expect_bad("{\"modules\": [{\"name\": \"A\", \"images\": [\"\"]}]}",
             "m.json:1:39:", "non-empty string");
  expect_bad("{\"modules\": [{\"name\": \"A\", \"images\": 5}]}",
             "m.json:1:38:", "\"images\" must be a string or an array");
  expect_bad("{\"modules\": [{\"name\": \"A\", \"symbols\": []}]}",
             "m.json:1:39:", "empty array for \"symbols\"");
  expect_bad("{\"modulez\": []}", "m.json:1:13:",
             "unknown or repeated key: modulez");
  /* Repeated keys are refused, not decided by order (QA: the second
   * "name" won, the first "modules" array). */
  expect_bad("{\"modules\": [{\"name\": \"A\", \"images\": \"*\", "
             "\"name\": \"B\"}]}", "m.json:1:51:",
             "unknown or repeated key: name");
  expect_bad("{\"modules\": [], \"modules\": []}", "m.json:1:28:",
             "unknown or repeated key: modules");
  expect_bad("[]", "m.json:1:1:", "expected an object");
  expect_bad("{\"modules\": []} x", "m.json:1:17:", "text after");
  expect_bad("{\"modules\": [{\"name\": \"A\\q\"}]}", "m.json:1:26:",
             "bad escape");
  expect_bad("{\"modules\": [{\"name\": \"A\n\"}]}", "m.json:1:25:",
             "control character");
  expect_bad("{\"modules\": [{\"name\": \"A", "m.json:1:23:", "unterminated");
}

static void test_json(void **state) {
  const char text[] = " {\"a\": [1, -2.5e1, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
                      "\n \"b\": {}, \"c\": []}";
  stkr_json *v = NULL;
  const stkr_json *a;
  char err[128];
  char deep[STKR_JSON_MAX_DEPTH + 2];
  (void)state;

  assert_int_equal(stkr_json_parse(text, sizeof text - 1, &v, err, sizeof err), 0);
  a = stkr_json_get(v, "a");
  assert_non_null(a);
  assert_int_equal(a->type, STKR_JSON_ARRAY);
  assert_int_equal(a->n, 6);
  assert_true(a->items[0].num == 1.0);
  assert_true(a->items[1].num == -25.0);
  assert_true(a->items[2].b);
  assert_int_equal(a->items[3].type, STKR_JSON_BOOL);
  assert_false(a->items[3].b);
  assert_int_equal(a->items[4].type, STKR_JSON_NULL);
  assert_string_equal(a->items[5].str, "x\xc3\xa9\xf0\x9f\x98\x80\n");
  assert_int_equal(stkr_json_get(v, "b")->line, 2);
  assert_int_equal(stkr_json_get(v, "b")->col, 7);
  assert_null(stkr_json_get(v, "zz"));
  stkr_json_free(v);
  memset(deep, '[', sizeof deep);
  assert_int_equal(stkr_json_parse(deep, sizeof deep, &v, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "nested deeper"));
  assert_int_equal(stkr_json_parse("01", 2, &v, err, sizeof err), -EINVAL);
  assert_int_equal(stkr_json_parse("\"\\u0000\"", 8, &v, err, sizeof err),
                   -EINVAL);
  assert_int_equal(stkr_json_parse("\"\\udc00\"", 8, &v, err, sizeof err),
                   -EINVAL);
}

static void test_load_file(void **state) {
  char dir[] = "/tmp/test-attrib-XXXXXX", path[128], err[256];
  stkr_modmap *m = NULL;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/map.json", dir);
  assert_int_equal(stkr_modmap_load(path, &m, err, sizeof err), -ENOENT);
  assert_non_null(strstr(err, path));
  assert_int_equal(tl_write_file(path, "{\"modules\": [\n\n  {\"name\": 5}]}"),
                   0);
  assert_int_equal(stkr_modmap_load(path, &m, err, sizeof err), -EINVAL);
  {
    char want[160];
    snprintf(want, sizeof want, "%s:3:12: \"name\" must be", path);
    if (strncmp(err, want, strlen(want)) != 0)
      fail_msg("got \"%s\"", err);
  }
  assert_int_equal(tl_write_file(path, map_text), 0);
  assert_int_equal(stkr_modmap_load(path, &m, err, sizeof err), 0);
  stkr_modmap_free(m);
  unlink(path);
  rmdir(dir);
}

TL_TEST_MAIN("attrib", NULL, NULL, test_system_images, test_default_by_image,
             test_module_map, test_bad_maps, test_json, test_load_file)
