/*
 * test-preload-match.c: what the hook library considers sensitive
 * (preload/match.c): path classes with and without $HOME, watched
 * environment names, category lists, and their error messages.
 */
#include <setjmp.h>
#include <stdarg.h>
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
}

static void test_paths_home(void **state) {
  static const pcase any_home[] = {
      /* /home/<user> and /root match without $HOME. */
      {"/home/alice/.ssh/id_rsa", FILES},
      {"/home/alice/.ssh", FILES},
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

static void test_names(void **state) {
  stkr__pl_names w;
  char err[256];
  (void)state;

  /* Default list. */
  assert_int_equal(stkr__pl_names_parse(NULL, &w, err, sizeof err), 0);
  assert_true(stkr__pl_names_match(&w, "HOME"));
  assert_true(stkr__pl_names_match(&w, "USER"));
  assert_true(stkr__pl_names_match(&w, "SSH_AUTH_SOCK"));
  assert_false(stkr__pl_names_match(&w, "PATH"));
  assert_false(stkr__pl_names_match(&w, "HOMEX"));
  assert_false(stkr__pl_names_match(&w, "HOM"));
  assert_false(stkr__pl_names_match(&w, ""));
  assert_int_equal(stkr__pl_names_parse("", &w, err, sizeof err), 0);
  assert_true(stkr__pl_names_match(&w, "HOME"));

  /* Exact names and prefixes. */
  assert_int_equal(
      stkr__pl_names_parse("AWS_*,TOKEN,GITHUB_TOKEN", &w, err, sizeof err), 0);
  assert_int_equal(w.n, 3);
  assert_true(stkr__pl_names_match(&w, "AWS_SECRET_ACCESS_KEY"));
  assert_true(stkr__pl_names_match(&w, "AWS_"));
  assert_false(stkr__pl_names_match(&w, "AWS"));
  assert_true(stkr__pl_names_match(&w, "TOKEN"));
  assert_false(stkr__pl_names_match(&w, "TOKENS"));
  assert_true(stkr__pl_names_match(&w, "GITHUB_TOKEN"));
  assert_false(stkr__pl_names_match(&w, "HOME"));

  /* Everything. */
  assert_int_equal(stkr__pl_names_parse("*", &w, err, sizeof err), 0);
  assert_true(stkr__pl_names_match(&w, "PATH"));
  assert_true(stkr__pl_names_match(&w, ""));

  /* Errors name the offset. */
  assert_int_equal(stkr__pl_names_parse("HOME,,USER", &w, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "empty name at offset 5"));
  assert_int_equal(stkr__pl_names_parse("HOME,", &w, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "empty name at offset 5"));
  assert_int_equal(stkr__pl_names_parse("A=B", &w, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "'=' in a name at offset 1"));
  assert_int_equal(stkr__pl_names_parse("A*B", &w, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "'*' not at the end of a name at offset 1"));
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
  assert_int_equal(stkr__pl_names_parse(list, &w, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "more than 64 names"));

  memset(list, 'X', 1100);
  list[1100] = '\0';
  assert_int_equal(stkr__pl_names_parse(list, &w, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "longer than 1023 bytes"));
}

static void test_categories(void **state) {
  unsigned m = 0;
  char err[256];
  (void)state;

  /* Unset: every category but reasons (stat is too frequent to record
   * unasked); "all" includes it. */
  assert_int_equal(stkr__pl_parse_categories(NULL, &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_DEFAULT);
  assert_false(m & STKR__PL_CAT_BIT(STKR__PL_CAT_REASONS));
  assert_int_equal(stkr__pl_parse_categories("", &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_DEFAULT);
  assert_int_equal(stkr__pl_parse_categories("reasons", &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_BIT(STKR__PL_CAT_REASONS));
  assert_int_equal(stkr__pl_parse_categories("all", &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_ALL);
  assert_int_equal(
      stkr__pl_parse_categories("files,network", &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_BIT(STKR__PL_CAT_FILES) |
                          STKR__PL_CAT_BIT(STKR__PL_CAT_NETWORK));
  assert_int_equal(stkr__pl_parse_categories("environment", &m, err, sizeof err),
                   0);
  assert_int_equal(m, STKR__PL_CAT_BIT(STKR__PL_CAT_ENVIRONMENT));
  assert_int_equal(
      stkr__pl_parse_categories("devices,all", &m, err, sizeof err), 0);
  assert_int_equal(m, STKR__PL_CAT_ALL);

  assert_int_equal(stkr__pl_parse_categories("files,cam", &m, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "invalid category \"cam\" at offset 6"));
  assert_int_equal(stkr__pl_parse_categories("files,", &m, err, sizeof err),
                   -EINVAL);
  assert_non_null(strstr(err, "invalid category \"\" at offset 6"));
  assert_int_equal(stkr__pl_parse_categories("Files", &m, err, sizeof err),
                   -EINVAL);

  assert_string_equal(stkr__pl_cat_name(STKR__PL_CAT_DEVICES), "devices");
  assert_string_equal(stkr__pl_cat_name(STKR__PL_CAT_REASONS), "reasons");
  assert_null(stkr__pl_cat_name(STKR__PL_CAT_COUNT));
}

TL_TEST_MAIN("preload-match", NULL, NULL, test_paths_absolute, test_paths_home,
             test_names, test_names_limits, test_categories)
