/*
 * test-preload-match.c: what the hook library considers sensitive
 * (preload/match.c): path classes with and without $HOME, watched
 * environment names, category lists, and their error messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "preload/match.h"
#include "tests/testlib.h"

#define ID (STKR__PL_CAT_IDENTIFIERS + 1u)
#define FILES (STKR__PL_CAT_FILES + 1u)
#define DEV (STKR__PL_CAT_DEVICES + 1u)
#define NONE STKR__PL_PATH_NONE

typedef struct pcase {
  const char *path;
  unsigned want;
} pcase;

static void check_paths(const stkr__pl_paths *p, const pcase *c, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned got = stkr__pl_path_class(p, c[i].path);
    if (got != c[i].want)
      fail_msg("%s: class %u, expected %u", c[i].path ? c[i].path : "(null)",
               got, c[i].want);
  }
}

static void test_paths_absolute(void **state) {
  static const pcase c[] = {
      {"/etc/machine-id", ID},
      /* Written other ways (QA, session 41: none was recorded). */
      {"/etc//passwd", FILES},
      {"//etc/passwd", FILES},
      {"/etc/./passwd", FILES},
      {"/usr/../etc/machine-id", ID},
      {"/etc/../etc/machine-id", ID},
      {"/../../etc/shadow", FILES},
      {"/sys/class/net/../net/lo/address", ID},
      {"/etc/ssh/../passwd", FILES},
      {"/etc/passwd/..", NONE},
      {"/etc/passwd/.", FILES},
      /* One trailing slash as two (session 42's note: it was NONE). */
      {"/etc/passwd/", FILES},
      {"/etc/passwd//", FILES},
      {"/etc/machine-id/", ID},
      {"/etc/", NONE},
      {"/", NONE},
      {"/etc/..passwd", NONE},
      {"/etc/.../passwd", NONE},
      /* By the plain form alone, not by what the path starts with (review,
       * session 42: a device, and not recorded as an identifier). */
      {"/dev/snd/../../etc/machine-id", ID},
      {"/dev/snd/../null", NONE},
      {"/dev/snd//pcmC0D0p", DEV},
      {"/home/alice/.ssh/../../../etc/machine-id", ID},
      {"/etc/machine-id.bak", NONE},
      {"/etc/machine-i", NONE},
      {"/var/lib/dbus/machine-id", ID},
      {"/sys/class/net/eth0/address", ID},
      {"/sys/class/net/eth0/mtu", NONE},
      {"/sys/class/net//address", NONE},
      {"/sys/class/net/eth0/x/address", NONE},
      {"/sys/class/dmi/id/product_uuid", ID},
      {"/sys/devices/virtual/dmi/id/board_serial", ID},
      {"/sys/class/dmi/id/bios_vendor", NONE},
      {"/etc/shadow", FILES},
      {"/etc/gshadow", FILES},
      {"/etc/passwd", FILES},
      {"/etc/passwd-", NONE},
      {"/etc/ssh/ssh_host_ed25519_key", FILES},
      {"/etc/ssh/sshd_config", NONE},
      {"/etc/hostname", NONE},
      {"/dev/video0", DEV},
      {"/dev/video", DEV},
      {"/dev/snd/pcmC0D0c", DEV},
      {"/dev/snd", NONE},
      {"/dev/v4l/by-id/usb-cam", DEV},
      {"/dev/null", NONE},
      {"/usr/lib/x86_64-linux-gnu/libc.so.6", NONE},
      {"/", NONE},
      {"", NONE},
      {NULL, NONE},
      {"etc/passwd", NONE}, /* relative: not resolved */
      {".ssh/id_rsa", NONE},
  };
  stkr__pl_paths p;
  (void)state;

  stkr__pl_paths_init(&p, NULL);
  check_paths(&p, c, sizeof c / sizeof c[0]);

  /* The scan reads PATH_MAX bytes at most: a path with no NUL among them
   * is read as written (an unterminated buffer, a program's mistake, is
   * read no further). Here its NUL is past them: "/" + 5000 "a" +
   * "/../etc//passwd", as written no watched path. */
  static char long_path[5100];
  memset(long_path, 'a', sizeof long_path);
  long_path[0] = '/';
  snprintf(long_path + 5001, sizeof long_path - 5001, "/../etc//passwd");
  assert_int_equal(stkr__pl_path_class(&p, long_path), NONE);
  assert_int_equal(stkr__pl_path_class(&p, "/aaaa/../etc//passwd"), FILES);
}

static void test_paths_home(void **state) {
  static const pcase any_home[] = {
      /* /home/<user> and /root match without $HOME. */
      {"/home/alice/.ssh/id_rsa", FILES},
      {"/home/alice/.ssh", FILES},
      {"/home/alice/.ssh/", FILES},
      {"/home/alice/.sshx/id_rsa", NONE},
      {"/home/alice/.gnupg/pubring.kbx", FILES},
      {"/home/alice/.mozilla/firefox/abc.default/cookies.sqlite", FILES},
      {"/home/alice/.config/google-chrome/Default/Cookies", FILES},
      {"/home/alice/.config/chromium/Default/Login Data", FILES},
      {"/home/alice/.config/BraveSoftware/Brave-Browser", FILES},
      {"/home/alice/snap/firefox/common", FILES},
      {"/home/alice/.local/share/keyrings/login.keyring", FILES},
      {"/home/alice/.pki/nssdb/cert9.db", FILES},
      {"/home/alice/.password-store/x.gpg", FILES},
      {"/home/alice/.config/app/settings.json", NONE},
      {"/home/alice/.bashrc", NONE},
      {"/home//.ssh/id_rsa", NONE},
      {"/home/.ssh", NONE},
      {"/root/.ssh/authorized_keys", FILES},
      {"/root/.cache/x", NONE},
  };
  static const pcase custom_home[] = {
      {"/srv/users/bob/.ssh/known_hosts", FILES},
      {"/srv/users//bob/.ssh/known_hosts", FILES},
      {"/srv/users/bob/./.ssh", FILES},
      {"/srv/users/bob/.gnupg", FILES},
      {"/srv/users/bob/notes.txt", NONE},
      {"/srv/users/bobby/.ssh/known_hosts", NONE},
      {"/srv/other/.ssh/known_hosts", NONE},
      {"/home/alice/.ssh/id_rsa", FILES}, /* still */
      {"/etc/passwd", FILES},             /* still */
  };
  stkr__pl_paths p;
  char long_home[STKR__PL_HOME_MAX + 16];
  (void)state;

  stkr__pl_paths_init(&p, NULL);
  check_paths(&p, any_home, sizeof any_home / sizeof any_home[0]);
  stkr__pl_paths_init(&p, "/srv/users/bob/"); /* trailing '/' trimmed */
  assert_string_equal(p.home, "/srv/users/bob");
  check_paths(&p, custom_home, sizeof custom_home / sizeof custom_home[0]);
  /* A HOME written another way is taken in its plain form (QA, session
   * 41: HOME=/x//home lost every ~/.ssh open). */
  stkr__pl_paths_init(&p, "//srv//users/./bob");
  assert_string_equal(p.home, "/srv/users/bob");
  check_paths(&p, custom_home, sizeof custom_home / sizeof custom_home[0]);
  check_paths(&p, any_home, sizeof any_home / sizeof any_home[0]);
  /* "/" as HOME would make every path a home path: ignored. So are a
   * relative and an over-long HOME. */
  stkr__pl_paths_init(&p, "/");
  assert_int_equal(p.home_len, 0);
  assert_int_equal(stkr__pl_path_class(&p, "/.ssh/id_rsa"), NONE);
  stkr__pl_paths_init(&p, "relative/home");
  assert_int_equal(p.home_len, 0);
  memset(long_home, 'a', sizeof long_home - 1);
  long_home[0] = '/';
  long_home[sizeof long_home - 1] = '\0';
  stkr__pl_paths_init(&p, long_home);
  assert_int_equal(p.home_len, 0);
  assert_int_equal(stkr__pl_path_class(&p, "/root/.ssh/id_rsa"), FILES);
}

/* Each of the names (the list ends with NULL) matches w if want, else
 * does not; the first that does otherwise is named. */
#define expect_names(w, want, ...)                                            \
  check_names(w, want, (const char *const[]){__VA_ARGS__, NULL})
static void check_names(const stkr__pl_names *w, bool want,
                        const char *const *names) {
  for (; *names != NULL; names++)
    if (stkr__pl_names_match(w, *names) != want)
      fail_msg("\"%s\" %s, expected the opposite", *names,
               want ? "not matched" : "matched");
}

/* The name list s is refused (-EINVAL) with an error containing msg,
 * left in err (256 bytes). */
static void names_refused(const char *s, char *err, const char *msg) {
  stkr__pl_names w;

  assert_int_equal(stkr__pl_names_parse(s, &w, err, 256), -EINVAL);
  if (strstr(err, msg) == NULL)
    fail_msg("%s: error \"%s\", expected \"%s\"", s, err, msg);
}

static void test_names(void **state) {
  stkr__pl_names w;
  char err[256];
  (void)state;

  /* Default list. */
  assert_int_equal(stkr__pl_names_parse(NULL, &w, err, sizeof err), 0);
  expect_names(&w, true, "HOME", "USER", "SSH_AUTH_SOCK");
  expect_names(&w, false, "PATH", "HOMEX", "HOM", "");
  assert_int_equal(stkr__pl_names_parse("", &w, err, sizeof err), 0);
  expect_names(&w, true, "HOME");

  /* Exact names and prefixes. */
  assert_int_equal(
      stkr__pl_names_parse("AWS_*,TOKEN,GITHUB_TOKEN", &w, err, sizeof err), 0);
  assert_int_equal(w.n, 3);
  expect_names(&w, true, "AWS_SECRET_ACCESS_KEY", "AWS_", "TOKEN",
               "GITHUB_TOKEN");
  expect_names(&w, false, "AWS", "TOKENS", "HOME");

  /* Everything. */
  assert_int_equal(stkr__pl_names_parse("*", &w, err, sizeof err), 0);
  expect_names(&w, true, "PATH", "");

  /* Errors name the offset. */
  names_refused("HOME,,USER", err, "empty name at offset 5");
  names_refused("HOME,", err, "empty name at offset 5");
  names_refused("A=B", err, "'=' in a name at offset 1");
  names_refused("A*B", err, "'*' not at the end of a name at offset 1");
  assert_non_null(strstr(err, "STACKREC_ENV_NAMES: "));
  assert_non_null(strstr(err, "of \"A*B\""));
}

static void test_names_limits(void **state) {
  char list[2048], err[256];
  stkr__pl_names w;
  size_t n = 0;
  int i;
  (void)state;

  for (i = 0; i < STKR__PL_NAMES_MAX; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%sN%d", i ? "," : "", i);
  assert_int_equal(stkr__pl_names_parse(list, &w, err, sizeof err), 0);
  assert_true(stkr__pl_names_match(&w, "N63"));
  assert_false(stkr__pl_names_match(&w, "N64"));
  snprintf(list + n, sizeof list - n, ",N64");
  names_refused(list, err, "more than 64 names");

  memset(list, 'X', 1100);
  list[1100] = '\0';
  names_refused(list, err, "longer than 1023 bytes");
}

/* The category list s parses to the mask want. */
static void categories_are(const char *s, unsigned want) {
  unsigned m = 0;
  char err[256];

  assert_int_equal(stkr__pl_parse_categories(s, &m, err, sizeof err), 0);
  if (m != want)
    fail_msg("%s: mask %#x, expected %#x", s ? s : "(unset)", m, want);
}

/* The category list s is refused (-EINVAL), with msg in the error (NULL:
 * any). */
static void categories_refused(const char *s, const char *msg) {
  unsigned m = 0;
  char err[256];

  assert_int_equal(stkr__pl_parse_categories(s, &m, err, sizeof err),
                   -EINVAL);
  if (msg != NULL && strstr(err, msg) == NULL)
    fail_msg("%s: error \"%s\", expected \"%s\"", s, err, msg);
}

static void test_categories(void **state) {
  (void)state;

  /* Unset: every category but reasons (stat is too frequent to record
   * unasked); "all" includes it. */
  categories_are(NULL, STKR__PL_CAT_DEFAULT);
  assert_false(STKR__PL_CAT_DEFAULT & STKR__PL_CAT_BIT(STKR__PL_CAT_REASONS));
  categories_are("", STKR__PL_CAT_DEFAULT);
  categories_are("reasons", STKR__PL_CAT_BIT(STKR__PL_CAT_REASONS));
  categories_are("all", STKR__PL_CAT_ALL);
  categories_are("files,network", STKR__PL_CAT_BIT(STKR__PL_CAT_FILES) |
                                      STKR__PL_CAT_BIT(STKR__PL_CAT_NETWORK));
  categories_are("environment", STKR__PL_CAT_BIT(STKR__PL_CAT_ENVIRONMENT));
  categories_are("devices,all", STKR__PL_CAT_ALL);

  categories_refused("files,cam", "invalid category \"cam\" at offset 6");
  categories_refused("files,", "invalid category \"\" at offset 6");
  categories_refused("Files", NULL);

  assert_string_equal(stkr__pl_cat_name(STKR__PL_CAT_DEVICES), "devices");
  assert_string_equal(stkr__pl_cat_name(STKR__PL_CAT_REASONS), "reasons");
  assert_null(stkr__pl_cat_name(STKR__PL_CAT_COUNT));
}

TL_TEST_MAIN("preload-match", NULL, NULL, test_paths_absolute, test_paths_home,
             test_names, test_names_limits, test_categories)
