/*
 * exec_escape.c: does an exec start an image that the hooks will not be
 * in? Under `stackrec record` such a program's watched calls are nobody's
 * to record, and a recording that said nothing of it looked complete (QA,
 * session 28: `env -i cat /etc/shadow`, `env -u LD_PRELOAD`, a set-user-ID
 * or file-capability copy of cat: 0 of their opens recorded, verify 0).
 * The exec hooks (hooks_exec.c) ask before the real exec; the answer is
 * told to record as a process that records nothing (verify: incomplete).
 * Only when the exec will run a file (found, executable), so that a failed
 * exec tells nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/stkr_which.h"
#include "preload/preload.h"

extern char **environ;

/* The file name of this library (its last path component). */
static const char *our_name(void) {
  static char name[NAME_MAX + 1];
  Dl_info info;
  if (name[0] == '\0' && dladdr((void *)our_name, &info) != 0 &&
      info.dli_fname != NULL) {
    const char *slash = strrchr(info.dli_fname, '/');
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : info.dli_fname);
  }
  return name;
}

/* Does an LD_PRELOAD value name a file of our name (ld.so splits it at
 * colons and spaces)? */
static bool preload_has_ours(const char *v) {
  const char *ours = our_name();
  size_t n = strlen(ours);
  if (v == NULL || n == 0) return v != NULL; /* our name unknown: assume so */
  while (*v != '\0') {
    size_t len = strcspn(v, ": ");
    const char *base = v + len;
    while (base > v && base[-1] != '/') base--;
    if ((size_t)(v + len - base) == n && memcmp(base, ours, n) == 0)
      return true;
    v += len;
    v += strspn(v, ": ");
  }
  return false;
}

/* Does the file start with "#!"? Linux ignores the set-user-ID bit of a
 * script: its interpreter runs with the hooks. */
static bool is_script(const char *path, int fd) {
  char magic[2] = {0, 0};
  int own = fd < 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  bool yes = (fd >= 0 ? pread(fd, magic, 2, 0) : read(own, magic, 2)) == 2 &&
             magic[0] == '#' && magic[1] == '!';
  if (own >= 0) close(own);
  return yes;
}

const char *stkr__pl_exec_escapes(const char *file, int fd, bool search,
                                  char *const envp[], char *target,
                                  size_t cap) {
  struct stat st;
  const char *notify = stkr__pl_env("STACKREC_NOTIFY");

  if (notify == NULL || notify[0] == '\0') return NULL; /* not under record */
  if (fd >= 0) {
    snprintf(target, cap, "descriptor %d", fd);
    if (fstat(fd, &st) != 0) return NULL;
  } else if (!(search ? stkr_which(file, stkr__pl_env_in(environ, "PATH"),
                                    target, cap)
                      : (size_t)snprintf(target, cap, "%s", file) < cap) ||
             access(target, X_OK) != 0 || stat(target, &st) != 0) {
    return NULL;
  }
  if (envp == NULL) envp = environ;
  if (!preload_has_ours(stkr__pl_env_in(envp, "LD_PRELOAD")))
    return "LD_PRELOAD, which loads the hooks, is not in the environment "
           "it is given";
  if ((((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
       ((st.st_mode & S_ISGID) && st.st_gid != getegid())) &&
      !is_script(target, fd))
    return "it is a set-user-ID or set-group-ID program, for which the "
           "loader ignores LD_PRELOAD";
  if (fd < 0 && getxattr(target, "security.capability", NULL, 0) >= 0)
    return "it has file capabilities, for which the loader ignores "
           "LD_PRELOAD";
  return NULL;
}
