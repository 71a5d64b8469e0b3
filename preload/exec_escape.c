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

#include "common/stkr_elfkind.h"
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

size_t stkr__pl_preload_ours(const char *v, const char **at) {
  const char *ours = our_name();
  size_t n = strlen(ours);
  *at = NULL;
  if (v == NULL || n == 0) return 0;
  while (*v != '\0') {
    size_t len = strcspn(v, ": ");
    const char *base = v + len;
    while (base > v && base[-1] != '/') base--;
    if ((size_t)(v + len - base) == n && memcmp(base, ours, n) == 0) {
      *at = v;
      return len;
    }
    v += len;
    v += strspn(v, ": ");
  }
  return 0;
}

/* Does an LD_PRELOAD value name a file of our name (ld.so splits it at
 * colons and spaces)? Our name unknown: assume so. */
static bool preload_has_ours(const char *v) {
  const char *at;
  return stkr__pl_preload_ours(v, &at) != 0 ||
         (v != NULL && our_name()[0] == '\0');
}

/* Can the hook library LD_PRELOAD names (v) be opened by this process
 * now? After chroot(2), or a change of credentials, the loader of the
 * program exec'd would fail to, and say so in its stderr. */
static bool preload_readable(const char *v) {
  char path[PATH_MAX];
  const char *at;
  size_t len = stkr__pl_preload_ours(v, &at);

  if (len == 0 || len >= sizeof path || memchr(at, '/', len) == NULL)
    return true; /* by name only: the loader's search, not judged */
  memcpy(path, at, len);
  path[len] = '\0';
  /* The effective ids: the loader opens the library with them. */
  return faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0;
}

/* The value of envp's last LD_PRELOAD entry, the one the loader uses (a
 * hand-made environment may hold several; QA, session 34), or NULL. */
static const char *last_preload(char *const envp[]) {
  const char *v = NULL;
  for (size_t i = 0; envp[i] != NULL; i++)
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0) v = envp[i] + 11;
  return v;
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
                                  size_t cap, bool *strip) {
  struct stat st;
  const char *notify = stkr__pl_env("STACKREC_NOTIFY"), *lp;
  stkr_elf_kind kind;

  *strip = false;
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
  lp = last_preload(envp);
  if (!preload_has_ours(lp))
    return "LD_PRELOAD, which loads the hooks, is not in the environment "
           "it is given";
  /* The hooks kept, the recording's settings not (a harness's minimal
   * environment that keeps LD_PRELOAD, `env -i LD_PRELOAD=...`): it would
   * record as a program preloaded by hand, into ./stackrec-out among the
   * program's files, a recording no one reads (QA, session 41). Out of
   * its LD_PRELOAD, named here as one that records nothing. */
  if (stkr__pl_env_in(envp, "STACKREC_NOTIFY") == NULL &&
      stkr__pl_env_in(envp, "STACKREC_DIR") == NULL) {
    *strip = true;
    return "its environment keeps the hook library in LD_PRELOAD but not "
           "the recording's settings (STACKREC_DIR, STACKREC_NOTIFY), so "
           "it would record into a directory of its own; the hooks are "
           "left out of it and of the programs it starts";
  }
  /* The loader would print its error into the program's stderr: the
   * library goes out of its LD_PRELOAD (strip), and with it out of the
   * programs it starts (QA, session 33: a 32-bit program; a chroot). */
  if ((kind = stkr_program_kind(fd, target)) != STKR_ELF_OURS) {
    *strip = true;
    return kind == STKR_ELF_OTHER_CLASS
               ? "it is (or its #! interpreter is) a program of the other "
                 "ELF class (32-bit beside "
                 "this 64-bit hook library, or the reverse), which cannot "
                 "load the hooks; nor do the programs it starts"
               : "it is (or its #! interpreter is) a program for another "
                 "machine, which cannot load "
                 "the hooks; nor do the programs it starts";
  }
  if (!preload_readable(lp)) {
    *strip = true;
    return "the hook library LD_PRELOAD names cannot be opened from this "
           "process (a chroot, or credentials that cannot read it); nor "
           "is it in the programs that one starts";
  }
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
