/*
 * stkr_which.h: the file an execvp of a command runs (libc only,
 * header-only), for the places that must know it before the exec:
 * preload/exec_escape.c (will the image have the hooks?) and `stackrec
 * record` (is CMD statically linked?).
 *
 * stkr_which(file, path, out, cap): a name with a slash as it is (found
 * when it exists); else the first entry of path (the caller's PATH, as
 * execvp takes it from the caller's environment; NULL: "/bin:/usr/bin",
 * glibc's default) holding an executable regular file of that name (an
 * empty entry is the current directory). The name goes into out.
 * @return false when none is found: the exec will fail.
 * Thread-safety: as stat(2) and access(2).
 */
#ifndef STKR_COMMON_WHICH_H
#define STKR_COMMON_WHICH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline bool stkr_which(const char *file, const char *path, char *out,
                              size_t cap) {
  struct stat st;
  const char *end;

  if (strchr(file, '/') != NULL)
    return (size_t)snprintf(out, cap, "%s", file) < cap &&
           access(out, F_OK) == 0;
  for (path = path != NULL ? path : "/bin:/usr/bin"; *path != '\0';
       path = *end ? end + 1 : end) {
    end = strchr(path, ':');
    end = end != NULL ? end : path + strlen(path);
    if ((size_t)snprintf(out, cap, "%.*s%s%s", (int)(end - path), path,
                         end > path ? "/" : "", file) >= cap)
      continue;
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return true;
  }
  return false;
}

#endif /* STKR_COMMON_WHICH_H */
