/*
 * fixture_home.h: $HOME for the preload fixtures (all_apis, threads,
 * forker), read without a watched call. Header-only: the fixtures are
 * single-file programs that do not link stackrec.
 */
#ifndef STKR_TEST_FIXTURE_HOME_H
#define STKR_TEST_FIXTURE_HOME_H

#include <stdio.h>
#include <string.h>

/* $HOME from the environment block itself: getenv("HOME") is a watched
 * call, and the fixture's bookkeeping must not add events. */
extern char **environ;
static __attribute__((unused)) const char *env_home(void) {
  char **e;
  for (e = environ; e != NULL && *e != NULL; e++)
    if (strncmp(*e, "HOME=", 5) == 0)
      return *e + 5;
  return "/nonexistent";
}

/* $HOME/rel, in a static buffer. */
static __attribute__((unused)) const char *home_path(const char *rel) {
  static char path[4096];

  snprintf(path, sizeof path, "%s/%s", env_home(), rel);
  return path;
}

#endif
