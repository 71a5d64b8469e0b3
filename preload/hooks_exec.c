/*
 * hooks_exec.c: the exec family (execve, execvpe, execv, execvp, fexecve,
 * execl, execlp, execle), and posix_spawn/posix_spawnp (a note only). Each ends this image's recording cleanly
 * before the exec (stkr__pl_pre_exec, preload.c) and, if the exec fails
 * and returns, lets the next event start recording again with errno
 * kept. Nothing is recorded here: an exec is not a watched call. A
 * program whose loader cannot load this library (another ELF class; a
 * chroot without it) gets an environment without it (env_strip), so that
 * its loader has nothing to complain of into its stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_notify.h"
#include "preload/preload.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

extern char **environ;

/* At most this many variables, and bytes of LD_PRELOAD entries, in an
 * environment stripped (exec_via): its copy lives on the stack, which a
 * vfork child shares with its parent (review, session 34: 96 KiB was too
 * much for a small thread stack). More: not stripped. */
#define STRIP_MAX_VARS 2048
#define STRIP_MAX_BYTES 8192

/* The sizes env_strip needs for src: its variables (@return; SIZE_MAX
 * when over the limits above: not stripped) and the bytes of all its
 * "LD_PRELOAD=..." entries, each with its NUL (*lp_len: a hand-made
 * environment may hold several; review, session 34). */
static size_t strip_sizes(char *const src[], size_t *lp_len) {
  size_t n = 0;

  *lp_len = 0;
  while (src != NULL && src[n] != NULL && n <= STRIP_MAX_VARS) {
    if (strncmp(src[n], "LD_PRELOAD=", 11) == 0)
      *lp_len += strnlen(src[n], STRIP_MAX_BYTES) + 1;
    n++;
  }
  return src == NULL || n > STRIP_MAX_VARS || *lp_len > STRIP_MAX_BYTES
             ? SIZE_MAX
             : n;
}

/* src without this library in its LD_PRELOAD entries (every mention; the
 * only entry, left with nothing else, goes), into out (as many pointers as src
 * has, plus the NULL) and lp (strip_sizes' *lp_len bytes: each entry
 * rewritten gets its own part). */
static void env_strip(char *const src[], char **out, char *lp) {
  size_t k = 0, n_lp = 0;

  for (size_t i = 0; src[i] != NULL; i++)
    n_lp += strncmp(src[i], "LD_PRELOAD=", 11) == 0;

  for (size_t i = 0; src[i] != NULL; i++) {
    const char *at, *cur = src[i] + 11;
    size_t len;
    if (strncmp(src[i], "LD_PRELOAD=", 11) != 0 ||
        stkr__pl_preload_ours(cur, &at) == 0) {
      out[k++] = src[i];
      continue;
    }
    char *w = lp + 11, *entry = lp;
    memcpy(lp, "LD_PRELOAD=", 11);
    /* What precedes each mention of ours, then what follows the last. */
    while ((len = stkr__pl_preload_ours(cur, &at)) != 0) {
      memcpy(w, cur, (size_t)(at - cur));
      w += at - cur;
      cur = at + len;
      cur += strspn(cur, ": ");
    }
    len = strlen(cur);
    memcpy(w, cur, len + 1);
    w += len + 1;
    lp = w; /* the next entry's part */
    /* Left with nothing: the only one goes; of several, it stays, empty,
     * since the loader takes the last and the others would then count
     * (QA, session 34: another entry's library came to be preloaded). */
    if (entry[11 + strspn(entry + 11, ": ")] != '\0' || n_lp > 1)
      out[k++] = entry;
  }
  out[k] = NULL;
}

/* envp_var = src (an environment) without this library (env_strip), in
 * the calling function's stack frame: a macro, since alloca's memory is
 * the caller's. stripped: whether it was (not over the limits). */
#define STKR__PL_STRIP_ENV(src, envp_var, stripped)                          \
  do {                                                                       \
    size_t lp_len_, n_ = strip_sizes((src), &lp_len_);                      \
    (stripped) = n_ != SIZE_MAX;                                             \
    if (stripped) {                                                          \
      char **out_ = __builtin_alloca((n_ + 1) * sizeof *out_);               \
      char *lp_ = __builtin_alloca(lp_len_ + 1);                             \
      env_strip((src), out_, lp_);                                           \
      (envp_var) = out_;                                                     \
    }                                                                        \
  } while (0)

/* Every exec hook: close the recording, exec through the real function,
 * and if the exec failed (it returned), record on with errno kept. `real`
 * says which function and so which of path/fd/envp it takes. Static and
 * called directly: execl and friends must reach this code, not whatever
 * `execve` the dynamic linker would bind a call from this library to. */
static int exec_via(int real, const char *path, int fd, char *const argv[],
                    char *const envp[]) {
  void *fn = (void *)stkr__pl_real(real);
  char target[PATH_MAX];
  const char *why;
  bool strip = false;
  int was, r, saved = errno;

  if (fn == NULL) {
    errno = ENOSYS;
    return -1;
  }
  /* Not for our own execs (the guard). A vfork child's (posix_spawn's)
   * too: the note only reads our state, and goes out on a socket of its
   * own (the descriptor table is not shared). */
  if (!stkr__pl_guard &&
      (why = stkr__pl_exec_escapes(
           path, fd, real == STKR__PL_R_execvp || real == STKR__PL_R_execvpe,
           real == STKR__PL_R_execv || real == STKR__PL_R_execvp ? NULL
                                                                  : envp,
           target, sizeof target, &strip)) != NULL) {
    char shown[200]; /* the reason after a long path stays in the note */
    stkr_notify_squeeze(shown, sizeof shown, target, strlen(target));
    stkr__pl_note(-EPERM, "its exec of %s starts a program the hooks are "
                  "not in (%s): what it does is not recorded", shown, why);
  }
  if (strip) { /* the program's environment without us: an envp exec */
    char *const *src = envp != NULL && real != STKR__PL_R_execv &&
                               real != STKR__PL_R_execvp
                           ? envp
                           : environ;
    bool stripped;
    STKR__PL_STRIP_ENV(src, envp, stripped);
    if (stripped) {
      if (real == STKR__PL_R_execv) real = STKR__PL_R_execve;
      if (real == STKR__PL_R_execvp) real = STKR__PL_R_execvpe;
      if ((fn = (void *)stkr__pl_real(real)) == NULL) {
        errno = ENOSYS;
        return -1;
      }
    }
  }
  errno = saved;
  was = stkr__pl_pre_exec();
  switch (real) {
  case STKR__PL_R_execv:
  case STKR__PL_R_execvp:
    r = ((execv_fn)fn)(path, argv);
    break;
  case STKR__PL_R_fexecve:
    r = ((fexecve_fn)fn)(fd, argv, envp);
    break;
  default: /* execve, execvpe */
    r = ((execve_fn)fn)(path, argv, envp);
    break;
  }
  stkr__pl_exec_failed(was);
  return r;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
  return exec_via(STKR__PL_R_execve, path, -1, argv, envp);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
  return exec_via(STKR__PL_R_execvpe, file, -1, argv, envp);
}

int execv(const char *path, char *const argv[]) {
  return exec_via(STKR__PL_R_execv, path, -1, argv, NULL);
}

int execvp(const char *file, char *const argv[]) {
  return exec_via(STKR__PL_R_execvp, file, -1, argv, NULL);
}

int fexecve(int fd, char *const argv[], char *const envp[]) {
  return exec_via(STKR__PL_R_fexecve, NULL, fd, argv, envp);
}

/* execl, execlp, execle: glibc's versions call its internal execve, which
 * no hook sees; collect the arguments and go through our execv/execvp/
 * execve instead. argv lives on our stack (alloca, as in glibc), so this is
 * a macro that expands into each hook's body, not a function: the array
 * must live in the hook's own frame. with_env: an envp follows the NULL
 * (execle). */
#define STKR__PL_EXEC_LIST(real, file, arg0, with_env)                         \
  do {                                                                         \
    va_list ap_;                                                               \
    size_t n_ = 1, i_;                                                         \
    char **argv_;                                                              \
    char *const *envp_ = NULL;                                                 \
    va_start(ap_, arg0);                                                       \
    while (va_arg(ap_, const char *) != NULL)                                  \
      n_++;                                                                    \
    va_end(ap_);                                                               \
    argv_ = __builtin_alloca((n_ + 1) * sizeof(char *));                       \
    argv_[0] = (char *)arg0;                                                   \
    va_start(ap_, arg0);                                                       \
    for (i_ = 1; i_ <= n_; i_++)                                               \
      argv_[i_] = va_arg(ap_, char *); /* argv_[n_] gets the NULL */           \
    if (with_env)                                                              \
      envp_ = va_arg(ap_, char *const *);                                      \
    va_end(ap_);                                                               \
    return exec_via(real, file, -1, argv_, envp_);                             \
  } while (0)

/* A note that names a child which records nothing (under record only):
 * to record, or, out of its reach, as a "u1" line in the recording. */
static void note_child(long pid, const char *comm, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_child(long pid, const char *comm, const char *fmt, ...) {
  char msg[512];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!stkr_notify_send_as(stkr__pl_env("STACKREC_NOTIFY"), pid, comm, EPERM,
                           msg, 200))
    (void)stkr_notify_unrecorded_line(stkr__pl_env("STACKREC_DIR"), pid,
                                      comm, msg);
}

/* posix_spawn, posix_spawnp: glibc's start the child with its internal
 * execve, which no hook sees, so a child given an environment without the
 * hooks (Python's os.posix_spawn(..., {}), Rust's Command::env_clear,
 * system() after unsetenv("LD_PRELOAD")) ran unrecorded, unnamed (QA,
 * session 33). The same check as an exec's; the note names the child,
 * after the spawn gave its pid (this process records on). */
typedef int (*spawn_fn)(pid_t *, const char *,
                        const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[],
                        char *const[]);

static int spawn_via(int real, pid_t *pid, const char *file,
                     const posix_spawn_file_actions_t *fa,
                     const posix_spawnattr_t *attr, char *const argv[],
                     char *const envp[]) {
  spawn_fn fn = (spawn_fn)stkr__pl_real(real);
  char target[PATH_MAX];
  const char *why = NULL, *base;
  pid_t child;
  int r, saved = errno;

  if (fn == NULL)
    return ENOSYS;
  bool strip = false;
  if (!stkr__pl_guard)
    why = stkr__pl_exec_escapes(file, -1, real == STKR__PL_R_posix_spawnp,
                                envp, target, sizeof target, &strip);
  if (strip) { /* as exec_via */
    bool stripped;
    STKR__PL_STRIP_ENV(envp, envp, stripped);
    (void)stripped;
  }
  errno = saved;
  r = fn(&child, file, fa, attr, argv, envp);
  if (pid != NULL)
    *pid = child;
  if (r == 0 && why != NULL) {
    char shown[200];
    stkr_notify_squeeze(shown, sizeof shown, target, strlen(target));
    base = strrchr(target, '/');
    note_child((long)child, base != NULL ? base + 1 : target,
                        "started by posix_spawn from %d, %s, a program the "
                        "hooks are not in (%s): what it does is not recorded",
                        (int)getpid(), shown, why);
  }
  errno = saved;
  return r;
}

int posix_spawn(pid_t *pid, const char *path,
                const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *attr, char *const argv[],
                char *const envp[]) {
  return spawn_via(STKR__PL_R_posix_spawn, pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file,
                 const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[],
                 char *const envp[]) {
  return spawn_via(STKR__PL_R_posix_spawnp, pid, file, fa, attr, argv, envp);
}

int execl(const char *path, const char *arg, ...) {
  STKR__PL_EXEC_LIST(STKR__PL_R_execv, path, arg, false);
}

int execlp(const char *file, const char *arg, ...) {
  STKR__PL_EXEC_LIST(STKR__PL_R_execvp, file, arg, false);
}

int execle(const char *path, const char *arg, ...) {
  STKR__PL_EXEC_LIST(STKR__PL_R_execve, path, arg, true);
}
