/*
 * chromium_run.h: headless Chromium for the tests that check pages in a
 * browser (test-html, test-compliance). Header-only (static functions),
 * like cli_run.h; include after <cmocka.h>.
 */
#ifndef STKR_TEST_CHROMIUM_RUN_H
#define STKR_TEST_CHROMIUM_RUN_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Chromium from $STKR_CHROMIUM or the PATH; fails the test if missing. */
static __attribute__((unused)) const char *chromium(void) {
  static char path[1024];
  static const char *const names[] = {"chromium", "chromium-browser",
                                      "google-chrome"};
  const char *env = getenv("STKR_CHROMIUM"), *p, *e;
  size_t i;

  if (path[0])
    return path;
  if (env && *env) {
    snprintf(path, sizeof path, "%s", env);
    return path;
  }
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    for (p = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"; *p; p = e) {
      e = strchr(p, ':') ? strchr(p, ':') : p + strlen(p);
      snprintf(path, sizeof path, "%.*s/%s", (int)(e - p), p, names[i]);
      if (access(path, X_OK) == 0)
        return path;
      if (*e == ':')
        e++;
    }
  path[0] = '\0';
  fail_msg("chromium not found on PATH (%s): install Debian's chromium "
           "(tools/install-deps.sh --tests) or set STKR_CHROMIUM",
           getenv("PATH") ? getenv("PATH") : "");
  return NULL;
}

/* Run headless Chromium on url with one extra option (--dump-dom or
 * --screenshot=...); stdout goes to out_path, its profile, home and log
 * under tmp. Killed after 90 s; a failure fails the test. */
static __attribute__((unused)) void chromium_run(const char *tmp,
                                                const char *url,
                                                const char *mode,
                                                const char *out_path) {
  char profile[600], home[600], log[600], udd[700];
  const char *bin = chromium();
  pid_t pid;
  int status = 0, waited;

  snprintf(home, sizeof home, "%s/home", tmp);
  snprintf(profile, sizeof profile, "%s/profile-XXXXXX", tmp);
  mkdir(home, 0700);
  assert_non_null(mkdtemp(profile));
  snprintf(udd, sizeof udd, "--user-data-dir=%s", profile);
  snprintf(log, sizeof log, "%s/chromium.log", tmp);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char *argv[] = {(char *)bin, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-quic", "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--hide-scrollbars",
                    "--window-size=1200,900", udd, (char *)mode, (char *)url,
                    NULL};
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int l = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    setpgid(0, 0); /* its helpers too, so a hang can be killed whole */
    if (o < 0 || l < 0 || dup2(o, 1) < 0 || dup2(l, 2) < 0)
      _exit(126);
    setenv("HOME", home, 1);
    setenv("XDG_CONFIG_HOME", home, 1);
    setenv("XDG_CACHE_HOME", home, 1);
    execv(bin, argv);
    _exit(127);
  }
  for (waited = 0; waited < 90000; waited += 20) {
    if (waitpid(pid, &status, WNOHANG) == pid)
      break;
    usleep(20000);
  }
  if (waited >= 90000) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("chromium %s %s: no result after 90 s (log: %s)", mode, url, log);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char l[4096] = "";
    FILE *lf = fopen(log, "r");
    if (lf != NULL) {
      l[fread(l, 1, sizeof l - 1, lf)] = '\0';
      fclose(lf);
    }
    fail_msg("chromium %s %s failed (status %#x): %s", mode, url, status, l);
  }
}

#endif /* STKR_TEST_CHROMIUM_RUN_H */
