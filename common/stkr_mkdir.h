/*
 * stkr_mkdir.h: the one `mkdir -p` (libc only, header-only), for the
 * recording directory (flush/), `stackrec record -o` and the symbol cache
 * directories of the CLI.
 *
 * stkr_mkdir_p(path, mode): create path and every missing parent with
 * mode (before the umask). A trailing '/' is ignored. A component that a
 * racing creator made first is fine; the last one must end up a
 * directory.
 * @return 0, -EINVAL (empty path), -ENAMETOOLONG (PATH_MAX or more),
 * -ENOTDIR (path exists and is not a directory), or -errno of the mkdir
 * or stat that failed.
 * Thread-safety: as mkdir(2); not async-signal-safe (stat, errno).
 */
#ifndef STKR_COMMON_MKDIR_H
#define STKR_COMMON_MKDIR_H

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static inline int stkr_mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  struct stat st;

  if (len == 0) return -EINVAL;
  if (len >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  while (len > 1 && buf[len - 1] == '/') buf[--len] = '\0';

  /* Create each missing prefix in turn. EEXIST from a racing creator is
   * fine as long as the thing that exists is a directory (checked last). */
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, mode) != 0 && errno != EEXIST) {
      int e = errno;
      *p = '/';
      return -e;
    }
    *p = '/';
  }
  if (mkdir(buf, mode) != 0 && errno != EEXIST) return -errno;
  if (stat(buf, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

#endif /* STKR_COMMON_MKDIR_H */
