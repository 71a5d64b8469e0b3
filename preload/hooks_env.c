/*
 * hooks_env.c: getenv and secure_getenv, watched (the environment
 * category: the names of STACKREC_ENV_NAMES, preload.h), and the scan of
 * environ that stands in for libc's getenv while its address cannot be
 * had (resolution re-entered through a malloc replacement, say).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "preload/preload.h"

char *stkr__pl_env_in(char *const envp[], const char *name) {
  size_t n = strlen(name);

  for (char *const *e = envp; e != NULL && *e != NULL; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

/* getenv for when libc's cannot be had (resolution re-entered). */
char *stkr__pl_env_scan(const char *name) {
  return stkr__pl_env_in(environ, name);
}

/* getenv and secure_getenv: record a watched name, then @return libc's
 * function, NULL if it cannot be had. always_inline: the event must be
 * recorded from the hook's own frame (skip_frames 1, see stkr__pl_record). */
typedef char *(*getenv_fn)(const char *);

static inline __attribute__((always_inline)) getenv_fn
env_event(int real, stkr_site *site, const char *name) {
  if (stkr__pl_ready() && stkr__pl_want(STKR__PL_CAT_ENVIRONMENT) &&
      stkr__pl_names_match(&stkr__pl.names, name))
    stkr__pl_record(site, name, strlen(name));
  return (getenv_fn)stkr__pl_real(real);
}

char *getenv(const char *name) {
  getenv_fn fn = env_event(STKR__PL_R_getenv, &stkr__pl_site_getenv, name);

  return fn != NULL ? fn(name) : stkr__pl_env_scan(name);
}

char *secure_getenv(const char *name) {
  getenv_fn fn =
      env_event(STKR__PL_R_secure_getenv, &stkr__pl_site_secure_getenv, name);

  if (fn != NULL)
    return fn(name);
  return getauxval(AT_SECURE) ? NULL : stkr__pl_env_scan(name);
}
