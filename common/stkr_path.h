/*
 * stkr_path.h: a path's plain form, read lexically (libc only,
 * header-only): "//" and "." components dropped, ".." taking the
 * component before it away, as the path reads; nothing is looked up (no
 * system call, no allocation).
 * "/usr/lib/../lib64//libc.so" is "/usr/lib64/libc.so"; links are not
 * followed, so the kernel may resolve a ".." elsewhere.
 * Used by attribution's system directories (tools/stackrec/attrib.c) and
 * the hooks' watched paths (preload/match.c).
 *
 * Their loads are not instrumented by ThreadSanitizer: in the hooks they
 * read the path an open was given, as libc's own reads do, which TSan
 * does not see either (a plain form's copy is a memcpy, which TSan
 * intercepts). Instrumented, a path ld.so or libc made (their locks
 * unknown to TSan) drew false reports, and one drawn while TSan
 * symbolized a report (its libbacktrace opens files through the hooks)
 * deadlocked the process at exit (//tests:exit-stress under TSan,
 * session 41).
 */
#ifndef STKR_COMMON_PATH_H
#define STKR_COMMON_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define STKR_PATH_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define STKR_PATH_NO_TSAN
#endif

/* Does the absolute path hold "//", a "." or ".." component (at the end
 * too), or end in '/' ("/" itself aside: `/etc/passwd/`, which the kernel
 * refuses for a file as it does `/etc/passwd//`, is still an attempt on
 * it)? A scan of its bytes, max at most: false for a path with no NUL
 * among them (so a caller given a string that is not one, by a program's
 * mistake, reads no further than max). */
STKR_PATH_NO_TSAN static inline bool stkr_path_unclean(const char *path,
                                                       size_t max) {
  bool unclean = false;

  for (size_t i = 0; i < max; i++) {
    const char *s = path + i;
    if (s[0] == '\0')
      return unclean;
    if (s[0] == '/' &&
        (s[1] == '/' || (s[1] == '\0' && i > 0) ||
         (s[1] == '.' && (s[2] == '/' || s[2] == '\0' ||
                          (s[2] == '.' && (s[3] == '/' || s[3] == '\0'))))))
      unclean = true;
  }
  return false;
}

/* The plain form of the absolute path into out (cap bytes).
 * @return its length, or 0 when it does not fit (out then undefined). */
STKR_PATH_NO_TSAN static inline size_t stkr_path_lexical(const char *path,
                                                         char *out,
                                                         size_t cap) {
  size_t n = 0;

  for (const char *s = path; *s != '\0';) {
    size_t len;
    while (*s == '/') s++;
    for (len = 0; s[len] != '\0' && s[len] != '/'; len++) {
    }
    if (len == 0 || (len == 1 && s[0] == '.')) {
      /* nothing, or ".": no component */
    } else if (len == 2 && s[0] == '.' && s[1] == '.') {
      while (n > 0 && out[n - 1] != '/') n--; /* the last component */
      if (n > 0) n--;                         /* and its slash */
    } else {
      if (n + 1 + len + 1 > cap) return 0;
      out[n++] = '/';
      memcpy(out + n, s, len);
      n += len;
    }
    s += len;
  }
  if (cap < 2) return 0;
  if (n == 0) out[n++] = '/';
  out[n] = '\0';
  return n;
}

#endif /* STKR_COMMON_PATH_H */
