/*
 * compliance_harness.h: what the tests of `stackrec compliance` and
 * `stackrec privacy-manifest` on the fixture app share
 * (test-compliance.c, test-compliance-inputs.c): the app
 * (tests/compliance_fixtures) recorded under `stackrec record` while
 * `stackrec mark` sets a mark between its phases, into g_rec; the policy
 * and module map the group writes beside it (g_policy, g_map); the
 * sanitizer runtime preloaded for the commands that run the hooks.
 * Include after <cmocka.h>.
 */
#ifndef STKR_TESTS_COMPLIANCE_HARNESS_H
#define STKR_TESTS_COMPLIANCE_HARNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/cli_run.h"
#include "tests/testlib.h"

static char g_tmp[512], g_rec[600], g_ctl[600], g_app[4096], g_policy[600],
    g_map[600], g_san_rt[1024];

/* LD_PRELOAD the sanitizer runtime for a command that runs the hooks. */
static void san_preload(bool on) {
  if (g_san_rt[0] == '\0')
    return;
  if (on) {
    setenv("LD_PRELOAD", g_san_rt, 1);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* bash's leaks: not ours */
  } else {
    unsetenv("LD_PRELOAD");
    unsetenv("ASAN_OPTIONS");
  }
}

static const char k_policy[] =
    "{\"rules\": [\n"
    " {\"id\": \"before-consent\", \"sites\": \"identifiers.*\",\n"
    "  \"before_mark\": \"consent.granted\"},\n"
    " {\"id\": \"background-location\", \"sites\": \"network.connect\",\n"
    "  \"in_state\": \"app.background\"},\n"
    " {\"id\": \"too-often\", \"sites\": \"identifiers.*\", "
    "\"max_per_minute\": 30},\n"
    " {\"id\": \"pay-disk\", \"sites\": \"reasons.statvfs\", "
    "\"modules\": \"PaySDK\"}\n"
    "]}\n";

static const char k_map[] =
    "{\"modules\": [\n"
    " {\"name\": \"AcmeSDK\", \"images\": [\"libacme*\"]},\n"
    " {\"name\": \"PaySDK\", \"symbols\": [\"pay_sdk_\"]}\n"
    "]}\n";

static void write_file(const char *path, const char *text) {
  assert_int_equal(tl_write_file(path, text), 0);
}

static bool wait_file(const char *dir, const char *name, int seconds) {
  char path[700];
  int i;

  snprintf(path, sizeof path, "%s/%s", dir, name);
  for (i = 0; i < seconds * 100; i++) {
    struct timespec ts = {0, 10000000};
    if (access(path, F_OK) == 0)
      return true;
    nanosleep(&ts, NULL);
  }
  return false;
}

/* Record the fixture into rec (its control files in ctl, made here),
 * setting marks[i] at phase i. */
static int record_fixture_marks(const char *rec, const char *ctl,
                                const char *const marks[3]) {
  char cmd[16384], name[32];
  pid_t pid;
  int i, st;

  snprintf(cmd, sizeof cmd,
           "'%s' record -q -o '%s' --categories identifiers,network,reasons "
           "-- '%s' '%s'", cr_bin, rec, g_app, ctl);
  if (mkdir(ctl, 0700) != 0)
    return -1;
  if ((pid = fork()) < 0)
    return -1;
  if (pid == 0) {
    san_preload(true);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  for (i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "ready.%d", i);
    if (!wait_file(ctl, name, 60)) {
      fprintf(stderr, "fixture never reached phase %d\n", i);
      break;
    }
    if (cr_run("mark '%s' %s", rec, marks[i]) != 0) {
      fprintf(stderr, "stackrec mark %s: %s", marks[i], cr_err);
      break;
    }
    snprintf(cmd, sizeof cmd, "%s/go.%d", ctl, i);
    write_file(cmd, "");
  }
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "record of the fixture failed (status %#x)\n", st);
    return -1;
  }
  return i == 3 ? 0 : -1;
}

static int record_fixture(void) {
  static const char *const marks[] = {"consent.granted", "app.background",
                                      "app.foreground"};
  return record_fixture_marks(g_rec, g_ctl, marks);
}

static int setup(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  (void)state;
  if (cr_setup() != 0)
    return -1;
  if (tl_mkdtemp(g_tmp, sizeof g_tmp, "compliance") != 0)
    return -1;
  snprintf(g_rec, sizeof g_rec, "%s/rec", g_tmp);
  snprintf(g_ctl, sizeof g_ctl, "%s/ctl", g_tmp);
  snprintf(g_policy, sizeof g_policy, "%s/policy.json", g_tmp);
  snprintf(g_map, sizeof g_map, "%s/modules.json", g_tmp);
  snprintf(g_app, sizeof g_app, "%s/%s/tests/compliance_fixtures/compliance_app",
           src ? src : ".", ws ? ws : "stackrec");
#if defined(__SANITIZE_ADDRESS__)
  /* The ASan-built hooks need the runtime first in every program they go
   * into (record keeps it in front of them): set for record only, not
   * for python3 or Chromium. */
  tl_asan_runtime(g_san_rt, sizeof g_san_rt);
  if (g_san_rt[0] == '\0')
    return -1;
#endif
  /* What is recorded is checked here, not how fast the end is. */
  setenv("STACKREC_EXIT_MS", "5000", 1);
  write_file(g_policy, k_policy);
  write_file(g_map, k_map);
  return record_fixture();
}

#endif
