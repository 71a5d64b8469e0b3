/*
 * stkr_symcache_dir.h: where stackrec's symbol caches live (libc only,
 * header-only): the directory of <build-id>.stkrsym files (docs/
 * SYMCACHE.md) that the embedded recorder's in-process symbolization reads
 * (flush/config.c) and the CLI reads and fills (record, snapshot).
 *
 *   $STACKREC_SYMCACHE   when set; "" or "none": no cache directory
 *   $XDG_CACHE_HOME/stackrec/symcache   when XDG_CACHE_HOME is absolute
 *   $HOME/.cache/stackrec/symcache      when HOME is absolute
 *
 * stkr_symcache_dir(buf, cap): the directory into buf.
 * @return buf, or NULL: none (or it does not fit in cap).
 * Thread-safety: as getenv(3).
 */
#ifndef STKR_COMMON_SYMCACHE_DIR_H
#define STKR_COMMON_SYMCACHE_DIR_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The same, with STACKREC_SYMCACHE's value given (own: NULL when unset):
 * the recorder passes the value frozen at the hook library's load
 * (stkr_config_env), so that "none" holds in a program that cleared its
 * environment. */
static inline const char *stkr_symcache_dir_own(char *buf, size_t cap,
                                                const char *own) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n;

  if (own != NULL) {
    if (own[0] == '\0' || strcmp(own, "none") == 0) return NULL;
    n = snprintf(buf, cap, "%s", own);
  } else if (xdg != NULL && xdg[0] == '/') {
    n = snprintf(buf, cap, "%s/stackrec/symcache", xdg);
  } else if (home != NULL && home[0] == '/') {
    n = snprintf(buf, cap, "%s/.cache/stackrec/symcache", home);
  } else {
    return NULL;
  }
  return n < 0 || (size_t)n >= cap ? NULL : buf;
}

static inline const char *stkr_symcache_dir(char *buf, size_t cap) {
  return stkr_symcache_dir_own(buf, cap, getenv("STACKREC_SYMCACHE"));
}

#endif /* STKR_COMMON_SYMCACHE_DIR_H */
