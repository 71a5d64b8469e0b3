/*
 * stkr_mkdir.h: the one `mkdir -p` (libc only, header-only), for the
 * recording directory (flush/), `stackrec record -o` and the symbol cache
 * directories of the CLI.
 *
 * stkr_mkdir_p(path, mode): create path and every missing parent with
 * mode less the umask, but the owner's bits of mode kept: a umask may take
 * them (0177 left a recording directory 0600 that its owner could not
 * enter: QA, session 23), so each directory this call made gets them back
 * (only those: the umask's say over the others stays; review). The chmod
 * is of what lstat found there, a directory of ours, never a symbolic
 * link put in its place. A trailing '/' is ignored. A component that a
 * racing creator made first is fine (its mode is its creator's); the last
 * one must end up a directory.
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
#include <unistd.h>

/* mkdir(dir, mode), then the owner's bits of mode back if the umask took
 * any. @return 0 made, 1 already there, or -errno. */
static inline int stkr__mkdir_mode(const char *dir, mode_t mode) {
  struct stat st;
  if (mkdir(dir, mode) != 0) return errno == EEXIST ? 1 : -errno;
  if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == geteuid() &&
      (st.st_mode & mode & S_IRWXU) != (mode & S_IRWXU))
    (void)chmod(dir, (st.st_mode & 07777) | (mode & S_IRWXU));
  return 0;
}

static inline int stkr_mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  struct stat st;

  if (len == 0) return -EINVAL;
  if (len >= sizeof buf) return -ENAMETOOLONG;
  /* Most calls find the directory there (every recorded process of a
   * recording, every start of an app): one stat instead of a mkdir for
   * each component. A directory found is not chmod'ed below either. */
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
  memcpy(buf, path, len + 1);
  while (len > 1 && buf[len - 1] == '/') buf[--len] = '\0';

  /* Create each missing prefix in turn. EEXIST from a racing creator is
   * fine as long as the thing that exists is a directory (checked last). */
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    int rc = stkr__mkdir_mode(buf, mode);
    *p = '/';
    if (rc < 0) return rc;
  }
  int rc = stkr__mkdir_mode(buf, mode);
  if (rc < 0) return rc;
  if (stat(buf, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

#endif /* STKR_COMMON_MKDIR_H */
