/*
 * snapshot_harness.h: what the `stackrec snapshot` tests share
 * (test-snapshot.c, test-snapshot-symcache.c): the fixture process
 * (tests/snapshot_fixture.c) started with N threads parked in known
 * chains, told to check itself and exit, and killed by the teardown when a
 * test failed before it finished it; the group setup that finds it.
 * Include after <cmocka.h> and tests/cli_run.h.
 */
#ifndef STKR_TESTS_SNAPSHOT_HARNESS_H
#define STKR_TESTS_SNAPSHOT_HARNESS_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Under TSan (both suites): the busy thread's instrumented loop calls __tsan_* through the
 * fixture's PLT all the time, and may be stopped in a PLT entry: its leaf
 * is then an unnamed address of the fixture, snap_busy_inner next (the
 * entry's CFA expression is evaluated: before, snap_busy_inner was lost,
 * "['', 'snap_busy_outer', ...]" in CI, 2026-12-05). */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

static char g_fixture[4096];
static char g_tmp[4096];

/* A running fixture: its pid, the pipe to its stdin and from its stdout. */
typedef struct fixture {
  pid_t pid;
  int in, out;
} fixture;

/* The fixture of the running test, killed by teardown if the test failed
 * before it finished it. */
static pid_t g_live;

static __attribute__((unused)) int teardown(void **state) {
  (void)state;
  if (g_live > 0) {
    kill(g_live, SIGKILL);
    waitpid(g_live, NULL, 0);
    g_live = 0;
  }
  return 0;
}

static __attribute__((unused)) void fixture_start(fixture *f, int threads, const char *mode) {
  int pin[2], pout[2];
  char buf[64] = "", n[16];
  ssize_t k, got = 0;

  assert_int_equal(pipe2(pin, O_CLOEXEC), 0);
  assert_int_equal(pipe2(pout, O_CLOEXEC), 0);
  snprintf(n, sizeof n, "%d", threads);
  f->pid = fork();
  assert_true(f->pid >= 0);
  if (f->pid == 0) {
    dup2(pin[0], 0);
    dup2(pout[1], 1);
    execl(g_fixture, g_fixture, n, mode, (char *)NULL);
    _exit(127);
  }
  g_live = f->pid;
  close(pin[0]);
  close(pout[1]);
  f->in = pin[1];
  f->out = pout[0];
  /* "ready <pid>\n" once every thread was created. */
  while (got < (ssize_t)sizeof buf - 1 && !strchr(buf, '\n') &&
         (k = read(f->out, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
    got += k;
  assert_non_null(strstr(buf, "ready"));
  /* Let every thread reach its parking call. */
  nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
}

/* Tell the fixture to check itself and exit; @return its exit status,
 * with its last line in msg. */
static __attribute__((unused)) int fixture_finish(fixture *f, char *msg, size_t cap) {
  int st;
  ssize_t k, got = 0;
  if (write(f->in, "check\n", 6) != 6) return -1;
  close(f->in);
  while (got < (ssize_t)cap - 1 &&
         (k = read(f->out, msg + got, cap - 1 - (size_t)got)) > 0)
    got += k;
  msg[got > 0 ? got : 0] = '\0';
  close(f->out);
  if (waitpid(f->pid, &st, 0) != f->pid) return -1;
  g_live = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static __attribute__((unused)) void fixture_expect_ok(fixture *f) {
  char msg[256];
  int st = fixture_finish(f, msg, sizeof msg);
  if (st != 0) fprintf(stderr, "fixture: status %d: %s\n", st, msg);
  assert_int_equal(st, 0);
  assert_non_null(strstr(msg, "OK"));
}

static __attribute__((unused)) int setup(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  const char *tmp = getenv("TEST_TMPDIR");
  (void)state;
  if (cr_setup() != 0) return -1;
  snprintf(g_fixture, sizeof g_fixture, "%s/%s/tests/snapshot_fixture",
           src ? src : ".", ws ? ws : "stackrec");
  snprintf(g_tmp, sizeof g_tmp, "%s", tmp ? tmp : "/tmp");
  signal(SIGPIPE, SIG_IGN);
  return access(g_fixture, X_OK);
}

#endif /* STKR_TESTS_SNAPSHOT_HARNESS_H */
