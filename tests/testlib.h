/*
 * testlib.h: what many tests share (//tests:testlib, test-only): reading
 * and writing small files, running a shell command with its output
 * captured, finding files in the runfiles, a monotonic clock in seconds and
 * the sanitizer runtime a preloaded program needs.
 *
 * One copy of each, so that a fix (a buffer size, a killed command) lands
 * in every test at once. Not thread-safe: tests call these from their main
 * thread.
 */
#ifndef STKR_TESTLIB_H
#define STKR_TESTLIB_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Built with --config=asan or --config=tsan? Timing bounds and the
 * programs a sanitizer runtime can be preloaded into depend on it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* The content of path in buf, NUL-terminated (at most cap - 1 bytes; a
 * file that cannot be read gives ""). */
void tl_slurp(const char *path, char *buf, size_t cap);

/* snprintf into buf[cap], failing the test when the text does not fit:
 * a path or a command cut short would test something else. */
void tl_fmt(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The whole content of path, NUL-terminated, malloc'd (the caller frees),
 * its length in *len if not NULL. Fails the test if it cannot be read. */
char *tl_slurp_alloc(const char *path, size_t *len);

/* A path dir/<tag>-<n> not used before by this process (not created), in
 * a static buffer (the next call overwrites it). */
const char *tl_fresh(const char *dir, const char *tag);

/* Create a new directory $TEST_TMPDIR (else /tmp)/<tag>-XXXXXX (mkdtemp:
 * mode 0700, a name no other run takes) and put its path into dir.
 * @return 0, or -1 if it does not fit cap or cannot be made (errno set). */
int tl_mkdtemp(char *dir, size_t cap, const char *tag);

/* Remove dir and everything below it (`rm -rf`; a missing dir is no
 * error). @return 0, or -1 if something is left. */
int tl_rm_rf(const char *dir);

/* The scratch directory of a test that needs one fresh directory per test
 * (or per group): tl_make_dir, a cmocka setup, creates it (tl_mkdtemp,
 * named after the running group); tl_rm_dir, a teardown, removes it. */
extern char tl_dir[256];
int tl_make_dir(void **state);
int tl_rm_dir(void **state);

/* The name of the group tl_run_group runs ("test" outside one): the tag of
 * a group's scratch directory. */
const char *tl_group(void);

/* How many entries of dir end in suffix (longer than it). */
int tl_count_files(const char *dir, const char *suffix);

/* The path of the one entry of dir that ends in suffix (the last found if
 * several), into out. Fails the test if there is none. */
void tl_find_file(const char *dir, const char *suffix, char *out, size_t cap);

/* How many times needle (not empty) occurs in hay, not overlapping. */
int tl_count(const char *hay, const char *needle);

/* Assert that each of the texts given occurs in s: tl_assert_has(out,
 * "a", "b"). The first missing one is named, with s. */
#define tl_assert_has(s, ...)                                                 \
  tl__assert_has(s, (const char *const[]){__VA_ARGS__, NULL})
void tl__assert_has(const char *s, const char *const *texts);

/* Write text to path (created or truncated; tl_append_file: appended).
 * @return 0 or -1. */
int tl_write_file(const char *path, const char *text);
int tl_append_file(const char *path, const char *text);
/* Write data[0..len) to path, created or truncated; @return 0 or -1. */
int tl_write_bytes(const char *path, const void *data, size_t len);

/* CLOCK_MONOTONIC in seconds. */
double tl_now_s(void);

/* Where tl_sh puts a command's output: stdout in out, stderr in err (both
 * NUL-terminated, cut at their capacity), through the files sh.out and
 * sh.err in dir (NULL: $TEST_TMPDIR, else /tmp). */
typedef struct tl_capture {
  char *out;
  size_t out_cap;
  char *err;
  size_t err_cap;
  const char *dir;
  /* A command that did not exit (killed by a signal: a crash is never an
   * answer): fail the test when set, else print the command and return
   * `killed` (e.g. -1 or 128). */
  bool fail_if_killed;
  int killed;
} tl_capture;

/* Run the shell command line (printf format) with its output in c.
 * @return its exit status (or c->killed, see above). */
int tl_sh(const tl_capture *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int tl_vsh(const tl_capture *c, const char *fmt, va_list ap);

/* Run the shell command line (printf format) with its output going to
 * the test's own (its log). @return its exit status, or -1 if it did not
 * exit. */
int tl_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The runfiles path of rel ("tools/stackrec"): $TEST_SRCDIR/$TEST_WORKSPACE
 * (or "."/"stackrec")/rel, into buf. @return buf. */
const char *tl_runfile(char *buf, size_t cap, const char *rel);

/* What every test of the hook library needs first: the tool
 * (tools/stackrec) into bin and the hook library
 * (preload/libstackrec_preload.so) into lib, from the runfiles, and a
 * scratch directory $TEST_TMPDIR/<tag> (created) into tmp. @return 0, or
 * -1 saying on stderr which is missing. */
int tl_hook_paths(const char *tag, char *bin, size_t bin_cap, char *lib,
                  size_t lib_cap, char *tmp, size_t tmp_cap);

/* Run body(arg) in a forked child that ends with _exit(what body
 * returned): no exit handlers and no cmocka state unwinding in the child
 * (under TSan a child that returns may never end), and the status is the
 * body's own. Fails the test unless the fork worked and the child exited
 * 0 (its status is printed). */
void tl_run_child(int (*body)(void *arg), void *arg);

/* The path of the ASan runtime loaded in this process ("" if none): it
 * must come first in LD_PRELOAD of a program our ASan-built hooks go into. */
void tl_asan_runtime(char *out, size_t cap);

/* The run-time address and size of section `name` (".plt") of this
 * executable, from /proc/self/exe's section headers and the main
 * program's load bias (ELF64). @return 0, or -1 (no such section). */
int tl_exe_section(const char *name, uintptr_t *addr, size_t *size);

/* ---- main() of a cmocka test file ----
 *
 * Each test file states its group's name, the group's setup and teardown
 * (NULL: none) and its tests; the cmocka array, the tests' names and the
 * run are made here, once:
 *
 *   TL_TEST_MAIN("report", setup, NULL, test_std_whole_output, test_top)
 *
 * When every test has the same setup and teardown of its own (and the
 * group none): TL_TEST_MAIN_EACH("flush", make_dir, teardown, test_a, ...).
 * Otherwise the tests come in runs that share their per-test setup and
 * teardown (TL_CASES), and main() returns TL_RUN_GROUP (doing first what
 * it must):
 *
 *   int main(void) {
 *     setenv("STACKREC_SYMBOLIZE", "none", 1);
 *     return TL_RUN_GROUP("faults", NULL, NULL,
 *                         TL_CASES(make_dir, teardown, test_a, test_b),
 *                         TL_CASES(NULL, NULL, test_c));
 *   }
 *
 * A function run once per row of a table of cases (the row its state):
 * TL_CASES' place takes TL_TABLE(setup, teardown, test_fn, rows).
 *
 * Each test is named after its function, as cmocka_unit_test() names it
 * (so cmocka's filters and the skip lists of tests/aarch64 see the same
 * names); the cases run in the order listed. */
typedef void (*tl_test_fn)(void **state);   /* cmocka's CMUnitTestFunction */
typedef int (*tl_fixture_fn)(void **state); /* cmocka's CMFixtureFunction */

/* A run of tests sharing one per-test setup and teardown: functions of
 * their own (TL_CASES), or one function run once per row of a table
 * (TL_TABLE). */
typedef struct tl_cases {
  const char *names;        /* the functions as written: "test_a, test_b" */
  const tl_test_fn *tests;  /* the same functions, NULL-terminated */
  tl_fixture_fn setup;      /* before each of them, or NULL */
  tl_fixture_fn teardown;   /* after each of them, or NULL */
  /* TL_TABLE: row_test runs once per row of rows (n_rows of row_size
   * bytes), with the row as its state (*state; a setup sees it first).
   * Each row starts with its case's name, a const char *: cases that
   * differ only in data are rows, named as their functions were. */
  tl_test_fn row_test;
  const void *rows;
  size_t row_size, n_rows;
} tl_cases;

/* Run the tests of runs (ended by one whose names is NULL) as the cmocka
 * group `group`, between group_setup and group_teardown (either NULL).
 * @return cmocka's status (the number of tests that failed), or 1 when the
 * names do not match the functions (a stray comma). */
int tl_run_group(const char *group, tl_fixture_fn group_setup,
                 tl_fixture_fn group_teardown, const tl_cases *runs);

#define TL_CASES(each_setup, each_teardown, ...)                            \
  {.names = #__VA_ARGS__, .tests = (const tl_test_fn[]){__VA_ARGS__, NULL}, \
   .setup = each_setup, .teardown = each_teardown}

/* A row of cases that differ in one flag only; tl_flag(state) is it. */
typedef struct tl_flag_case {
  const char *name;
  bool flag;
} tl_flag_case;

static inline bool tl_flag(void **state) {
  return ((const tl_flag_case *)*state)->flag;
}

/* rows: an array (not a pointer) of structs whose first field is the
 * case's name. */
#define TL_TABLE(each_setup, each_teardown, test_fn, table)                 \
  {.names = "", .setup = each_setup, .teardown = each_teardown,             \
   .row_test = test_fn, .rows = table, .row_size = sizeof(table)[0],        \
   .n_rows = sizeof(table) / sizeof(table)[0]}

#define TL_RUN_GROUP(group, group_setup, group_teardown, ...)               \
  tl_run_group(group, group_setup, group_teardown,                          \
               (const tl_cases[]){__VA_ARGS__, {.names = NULL}})

/* main() itself: TL_TEST_MAIN and TL_TEST_MAIN_EACH above. */
#define TL__TEST_MAIN(group, group_setup, group_teardown, setup, teardown, \
                      ...)                                                 \
  int main(void) {                                                         \
    return TL_RUN_GROUP(group, group_setup, group_teardown,                \
                        TL_CASES(setup, teardown, __VA_ARGS__));           \
  }
#define TL_TEST_MAIN(group, group_setup, group_teardown, ...)              \
  TL__TEST_MAIN(group, group_setup, group_teardown, NULL, NULL, __VA_ARGS__)
#define TL_TEST_MAIN_EACH(group, setup, teardown, ...)                     \
  TL__TEST_MAIN(group, NULL, NULL, setup, teardown, __VA_ARGS__)

#endif

