/* test-flush-config.c: defaults, STACKREC_* environment, struct-over-env
 * precedence, size suffixes, malformed values (-EINVAL naming the variable),
 * and the output directory's creation (mkdir -p, mode 0700). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_mkdir.h"
#include "flush/flush_internal.h"
#include "tests/bad_env.h"
#include "tests/testlib.h"

static const char *const k_vars[] = {
    "STACKREC_DIR",          "STACKREC_RING_BYTES",     "STACKREC_DEPTH",
    "STACKREC_SKIP",         "STACKREC_FLUSH_MS",       "STACKREC_SEGMENT_BYTES",
    "STACKREC_DISK_CAP_BYTES", "STACKREC_PAYLOAD_MAX",  "STACKREC_FORK",
    "STACKREC_EXIT_MS",      "STACKREC_UNWIND",         "STACKREC_SYMCACHE",
    "STACKREC_SYMBOLIZE",    "STACKREC_SAMPLE_SIGNAL", "XDG_CACHE_HOME",
    "STACKREC_STACK_TABLE_BYTES"};

static int clear_env(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof k_vars / sizeof *k_vars; i++) unsetenv(k_vars[i]);
  return 0;
}

/* Set each "NAME=value" given (as env(1) takes them). */
#define set_env(...) set_env_list((const char *const[]){__VA_ARGS__, NULL})
static void set_env_list(const char *const *assignments) {
  for (; *assignments != NULL; assignments++) {
    char name[64];
    const char *eq = strchr(*assignments, '=');

    assert_non_null(eq);
    snprintf(name, sizeof name, "%.*s", (int)(eq - *assignments),
             *assignments);
    assert_int_equal(setenv(name, eq + 1, 1), 0);
  }
}

/* Run stkr__config_build with stderr captured into buf. */
static int build_capture(const stkr_config *in, stkr__fconfig *out, char *buf,
                         size_t len) {
  char path[] = "/tmp/stkr-cfg-XXXXXX";
  int fd = mkstemp(path), saved = dup(2), err;
  ssize_t n;
  assert_true(fd >= 0 && saved >= 0);
  unlink(path);
  dup2(fd, 2);
  err = stkr__config_build(in, out);
  dup2(saved, 2);
  close(saved);
  n = pread(fd, buf, len - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  close(fd);
  return err;
}

/* stkr__config_build(in) succeeds, and the fields it derives from the
 * struct and the environment are want's. */
static void expect_build(const stkr_config *in, const stkr__fconfig *want) {
  stkr__fconfig built;
  const stkr__fconfig *c = &built;

  assert_int_equal(stkr__config_build(in, &built), 0);
  assert_string_equal(c->dir, want->dir);
  assert_int_equal(c->set.ring_bytes, want->set.ring_bytes);
  assert_int_equal(c->set.max_depth, want->set.max_depth);
  assert_int_equal(c->set.skip_frames, want->set.skip_frames);
  assert_int_equal(c->set.flush_interval_ms, want->set.flush_interval_ms);
  assert_int_equal(c->set.segment_bytes, want->set.segment_bytes);
  assert_int_equal(c->set.disk_cap_bytes, want->set.disk_cap_bytes);
  assert_int_equal(c->set.payload_max, want->set.payload_max);
  assert_int_equal(c->set.fork_mode, want->set.fork_mode);
  stkr__config_free(&built);
}

static void test_defaults(void **state) {
  (void)state;
  stkr__fconfig c;
  expect_build(NULL, &(stkr__fconfig){
      .dir = "stackrec-out", .set.ring_bytes = 262144, .set.max_depth = 64,
      .set.skip_frames = 0, .set.flush_interval_ms = 200,
      .set.segment_bytes = 67108864, .set.disk_cap_bytes = 1073741824,
      .set.payload_max = 256, .set.fork_mode = STKR_FORK_DISABLE});
  /* An all-zero struct is the same as NULL. */
  stkr_config z;
  memset(&z, 0, sizeof z);
  assert_int_equal(stkr__config_build(&z, &c), 0);
  assert_int_equal(c.set.ring_bytes, 262144);
  assert_string_equal(c.dir, "stackrec-out");
  stkr__config_free(&c);
  /* An explicit size, rounded up to a power of two. */
  z.ring_bytes = 100000;
  assert_int_equal(stkr__config_build(&z, &c), 0);
  assert_int_equal(c.set.ring_bytes, 131072);
  stkr__config_free(&c);
}

static void test_env_values_and_suffixes(void **state) {
  (void)state;
  stkr__fconfig c;
  set_env("STACKREC_DIR=/tmp/somewhere", "STACKREC_RING_BYTES=1M",
          "STACKREC_DEPTH=32", "STACKREC_SKIP=2", "STACKREC_FLUSH_MS=50",
          "STACKREC_SEGMENT_BYTES=64k", "STACKREC_DISK_CAP_BYTES=2G",
          "STACKREC_PAYLOAD_MAX=1024", "STACKREC_FORK=follow");
  expect_build(NULL, &(stkr__fconfig){
      .dir = "/tmp/somewhere", .set.ring_bytes = 1 << 20, .set.max_depth = 32,
      .set.skip_frames = 2, .set.flush_interval_ms = 50,
      .set.segment_bytes = 65536, .set.disk_cap_bytes = 2ull << 30,
      .set.payload_max = 1024, .set.fork_mode = STKR_FORK_FOLLOW});

  set_env("STACKREC_FORK=DISABLE",
          "STACKREC_RING_BYTES=300000", /* rounded up to 2^n */
          "STACKREC_SEGMENT_BYTES=3MiB");
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.fork_mode, STKR_FORK_DISABLE);
  assert_int_equal(c.set.unwind, STKR_UNWIND_FP); /* the default */
  assert_int_equal(c.set.ring_bytes, 524288);
  assert_int_equal(c.set.segment_bytes, 3u << 20);
  stkr__config_free(&c);

  setenv("STACKREC_UNWIND", "TABLES", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.unwind, STKR_UNWIND_TABLES);
  stkr__config_free(&c);
  unsetenv("STACKREC_UNWIND");

  /* Empty means unset. */
  setenv("STACKREC_DEPTH", "", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.max_depth, 64);
  stkr__config_free(&c);
}

static void test_struct_wins_over_env(void **state) {
  (void)state;
  stkr_config in = {.dir = "from-struct",
                    .ring_bytes = 65536,
                    .max_depth = 8,
                    .flush_interval_ms = 7,
                    .segment_bytes = 1000,
                    .disk_cap_bytes = 5000,
                    .payload_max = 16,
                    .fork_mode = STKR_FORK_DISABLE};
  set_env("STACKREC_DIR=from-env", "STACKREC_RING_BYTES=1M",
          "STACKREC_DEPTH=100", "STACKREC_SKIP=3", "STACKREC_FLUSH_MS=999",
          "STACKREC_FORK=follow");
  /* skip_frames: the struct field is 0, so the env applies. */
  expect_build(&in, &(stkr__fconfig){
      .dir = "from-struct", .set.ring_bytes = 65536, .set.max_depth = 8,
      .set.skip_frames = 3, .set.flush_interval_ms = 7,
      .set.segment_bytes = 1000, .set.disk_cap_bytes = 5000,
      .set.payload_max = 16, .set.fork_mode = STKR_FORK_DISABLE});
}

/* name=value alone in the environment: stkr__config_build is -EINVAL and
 * its note names the variable. */
static void expect_einval(const char *name, const char *value) {
  char err[512];
  stkr__fconfig c;

  clear_env(NULL);
  setenv(name, value, 1);
  assert_int_equal(build_capture(NULL, &c, err, sizeof err), -EINVAL);
  if (!strstr(err, name) || !strstr(err, "stackrec: ")) {
    print_error("%s=%s: stderr was \"%s\"\n", name, value, err);
    fail();
  }
}

static void test_malformed_env_is_einval_and_named(void **state) {
  /* Beyond one value of each variable (tests/bad_env.h): the edges of
   * their syntax and ranges. */
  static const struct {
    const char *var, *values[4]; /* NULL-terminated */
  } edges[] = {
      {"STACKREC_RING_BYTES", {"-5", " 64K", "2T"}},
      {"STACKREC_DEPTH", {"lots", "257", "8K"}},
      {"STACKREC_SKIP", {"1.5"}},
      {"STACKREC_SEGMENT_BYTES", {"99999999999999999999", "17179869184G", "2G"}},
      {"STACKREC_DISK_CAP_BYTES", {"1Gx"}},
      {"STACKREC_PAYLOAD_MAX", {"5000"}},
      {"STACKREC_UNWIND", {"table"}},
      /* No "unbounded" exit: 0 and values above a minute are refused. */
      {"STACKREC_EXIT_MS", {"0", "60001"}},
      /* The stack table: 64 KiB to 1 GiB. */
      {"STACKREC_STACK_TABLE_BYTES", {"0", "65535", "1025M"}},
  };
  (void)state;

  for (size_t i = 0; i < N_BAD_ENV; i++)
    expect_einval(k_bad_env[i].var, k_bad_env[i].value);
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
    for (const char *const *v = edges[i].values; *v != NULL; v++)
      expect_einval(edges[i].var, *v);
}

static void test_bad_fields_are_einval(void **state) {
  (void)state;
  stkr__fconfig c;
  char err[512];
  stkr_config a = {.max_depth = STKR_MAX_DEPTH + 1};
  stkr_config b = {.payload_max = STKR_MAX_PAYLOAD + 1};
  stkr_config d = {.fork_mode = (stkr_fork_mode)7};
  stkr_config e = {.dir = ""};
  assert_int_equal(build_capture(&a, &c, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "max_depth"));
  assert_int_equal(build_capture(&b, &c, err, sizeof err), -EINVAL);
  assert_int_equal(build_capture(&d, &c, err, sizeof err), -EINVAL);
  assert_int_equal(build_capture(&e, &c, err, sizeof err), -EINVAL);
  /* Limits themselves are fine. */
  stkr_config ok = {.max_depth = STKR_MAX_DEPTH, .payload_max = STKR_MAX_PAYLOAD};
  assert_int_equal(stkr__config_build(&ok, &c), 0);
  stkr__config_free(&c);
}

/* exit_ms: default 100, environment, struct field (which wins), at most a
 * minute either way. */
static void test_exit_ms(void **state) {
  (void)state;
  stkr__fconfig c;
  char err[512];
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.exit_ms, 100);
  stkr__config_free(&c);
  setenv("STACKREC_EXIT_MS", "250", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.exit_ms, 250);
  stkr__config_free(&c);
  stkr_config f = {.exit_ms = 40};
  assert_int_equal(stkr__config_build(&f, &c), 0);
  assert_int_equal(c.set.exit_ms, 40);
  stkr__config_free(&c);
  stkr_config big = {.exit_ms = 60001};
  assert_int_equal(build_capture(&big, &c, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "exit_ms"));
}

/* stack_table_bytes: default 8 MiB, the environment, the struct field
 * (which wins), 64 KiB to 1 GiB either way. */
static void test_stack_table_bytes(void **state) {
  (void)state;
  stkr__fconfig c;
  char err[512];
  stkr_config f = STKR_CONFIG_INIT, small = STKR_CONFIG_INIT;
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.stack_table_bytes, 8u << 20);
  stkr__config_free(&c);
  setenv("STACKREC_STACK_TABLE_BYTES", "64K", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_int_equal(c.set.stack_table_bytes, 64u << 10);
  stkr__config_free(&c);
  f.stack_table_bytes = 1u << 30;
  assert_int_equal(stkr__config_build(&f, &c), 0);
  assert_int_equal(c.set.stack_table_bytes, 1u << 30);
  stkr__config_free(&c);
  small.stack_table_bytes = 4096;
  assert_int_equal(build_capture(&small, &c, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "stack_table_bytes"));
}

/* The symbol cache directory of inproc symbolization: STACKREC_SYMCACHE
 * (made absolute now: the worker opens caches after the app may have
 * changed directory; "none": none), else under XDG_CACHE_HOME; none in
 * the other modes. */
static void test_symcache_dir(void **state) {
  (void)state;
  stkr__fconfig c;
  char cwd[4096], want[4200];
  assert_non_null(getcwd(cwd, sizeof cwd));
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_string_equal(c.symcache_dir, "/xdg/stackrec/symcache");
  stkr__config_free(&c);
  setenv("STACKREC_SYMCACHE", "rel/caches", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  snprintf(want, sizeof want, "%s/rel/caches", cwd);
  assert_string_equal(c.symcache_dir, want);
  stkr__config_free(&c);
  setenv("STACKREC_SYMCACHE", "/abs/caches", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_string_equal(c.symcache_dir, "/abs/caches");
  stkr__fconfig d;
  assert_int_equal(stkr__config_dup(&c, &d), 0); /* a followed fork's copy */
  assert_string_equal(d.symcache_dir, "/abs/caches");
  assert_true(d.symcache_dir != c.symcache_dir);
  stkr__config_free(&d);
  stkr__config_free(&c);
  setenv("STACKREC_SYMCACHE", "none", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_null(c.symcache_dir);
  stkr__config_free(&c);
  setenv("STACKREC_SYMCACHE", "/abs/caches", 1);
  setenv("STACKREC_SYMBOLIZE", "offline", 1);
  assert_int_equal(stkr__config_build(NULL, &c), 0);
  assert_null(c.symcache_dir);
  stkr__config_free(&c);
}

/* The ring always fits recorder/'s minimum of four maximal records. */
static void test_small_ring_is_rounded_up(void **state) {
  (void)state;
  stkr__fconfig c;
  stkr_config in = {.ring_bytes = 100, .max_depth = STKR_MAX_DEPTH,
                    .payload_max = STKR_MAX_PAYLOAD};
  assert_int_equal(stkr__config_build(&in, &c), 0);
  size_t rec =
      sizeof(stkr__record_full) + 8u * STKR_MAX_DEPTH + STKR_MAX_PAYLOAD + 8;
  assert_true(c.set.ring_bytes >= 4 * rec);
  assert_int_equal(c.set.ring_bytes & (c.set.ring_bytes - 1), 0);
  stkr__config_free(&c);
}

static void test_parse_size(void **state) {
  (void)state;
  uint64_t v;
  assert_int_equal(stkr__parse_size("0", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(stkr__parse_size("10k", &v), 0);
  assert_int_equal(v, 10240);
  assert_int_equal(stkr__parse_size("10KB", &v), 0);
  assert_int_equal(v, 10240);
  assert_int_equal(stkr__parse_size("1g", &v), 0);
  assert_int_equal(v, 1ull << 30);
  assert_int_equal(stkr__parse_size("18446744073709551615", &v), 0);
  assert_int_equal(v, UINT64_MAX);
  assert_int_equal(stkr__parse_size("18446744073709551616", &v), -EINVAL);
  assert_int_equal(stkr__parse_size("", &v), -EINVAL);
  assert_int_equal(stkr__parse_size("K", &v), -EINVAL);
  assert_int_equal(stkr__parse_size("1 K", &v), -EINVAL);
  assert_int_equal(stkr__parse_size("+1", &v), -EINVAL);
}

/* Under umask `mask`, stkr_mkdir_p(base/sub, mode): sub and its first
 * component are directories of mode `want`. */
static void mkdir_expect(const char *base, const char *sub, mode_t mask,
                         mode_t mode, mode_t want) {
  char path[256];
  struct stat st;

  umask(mask);
  snprintf(path, sizeof path, "%s/%s", base, sub);
  assert_int_equal(stkr_mkdir_p(path, mode), 0);
  for (int k = 0; k < 2; k++) {
    if (k == 1) *strchr(path + strlen(base) + 1, '/') = '\0';
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    if ((st.st_mode & 0777) != want)
      fail_msg("%s: mode %o, want %o", path, st.st_mode & 0777, want);
  }
  umask(0);
}

static void test_mkdir_p_mode_0700(void **state) {
  (void)state;
  char base[] = "/tmp/stkr-mk-XXXXXX", path[256];
  mode_t old = umask(0);
  assert_non_null(mkdtemp(base));
  mkdir_expect(base, "a/b/c/", 0, 0700, 0700);
  /* A umask that takes the owner's bits: the mode all the same (QA,
   * session 23: 0600, a directory its owner could not enter). */
  mkdir_expect(base, "u/v", 0177, 0700, 0700);
  /* Only the owner's: umask 077 on 0755 leaves 0700, not 0755. */
  mkdir_expect(base, "w/x", 077, 0755, 0700);
  /* Existing: fine. A file in the way: -ENOTDIR / -EEXIST. */
  snprintf(path, sizeof path, "%s/a/b", base);
  assert_int_equal(stkr_mkdir_p(path, 0700), 0);
  snprintf(path, sizeof path, "%s/file", base);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(stkr_mkdir_p(path, 0700), -ENOTDIR);
  snprintf(path, sizeof path, "%s/file/sub", base);
  assert_true(stkr_mkdir_p(path, 0700) < 0);
  umask(old);
}

int main(void) {
  return TL_RUN_GROUP(
      "flush-config", NULL, NULL,
      TL_CASES(clear_env, NULL, test_defaults, test_env_values_and_suffixes,
               test_struct_wins_over_env,
               test_malformed_env_is_einval_and_named,
               test_bad_fields_are_einval, test_small_ring_is_rounded_up,
               test_exit_ms, test_stack_table_bytes, test_symcache_dir),
      TL_CASES(NULL, NULL, test_parse_size, test_mkdir_p_mode_0700));
}
