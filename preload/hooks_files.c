/*
 * hooks_files.c: open, openat, fopen and their 64-bit and _FORTIFY_SOURCE
 * variants. One event per call whose path is sensitive (match.c), at the
 * site <category>.<api>: identifiers.open for /etc/machine-id,
 * files.fopen for ~/.ssh/id_rsa, devices.openat for /dev/video0, ... The
 * variants fold into their base API (open64 and __open_2 record as "open",
 * openat64 and __openat_2 as "openat", fopen64 as "fopen"): the report is
 * about what was opened from where; the stack shows the exact symbol.
 *
 * The event is recorded whether or not the open then succeeds: an attempt
 * to read ~/.ssh is what a privacy review wants to see, and a failed open
 * keeps its -1 and errno (the recorder never changes errno).
 *
 * Only absolute paths are classified (see stkr__pl_path_class); openat's
 * directory fd is not resolved.
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* fortify turns open/openat into inline wrappers */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/preload.h"

/* The _FORTIFY_SOURCE entry points; glibc declares them only under
 * fortify. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

#define SITE_AT(cat, name) [cat] = STKR_SITE_INIT(name),
#define SITES(api) {STKR__PL_FILE_SITES(SITE_AT, api)}
/* Indexed by category; the network and environment slots stay unused. */
static stkr_site g_open[STKR__PL_CAT_COUNT] = SITES("open");
static stkr_site g_openat[STKR__PL_CAT_COUNT] = SITES("openat");
static stkr_site g_fopen[STKR__PL_CAT_COUNT] = SITES("fopen");
#undef SITES
#undef SITE_AT

void stkr__pl_register_file_sites(void) {
  static const unsigned cats[] = {STKR__PL_CAT_IDENTIFIERS, STKR__PL_CAT_FILES,
                                  STKR__PL_CAT_DEVICES};
  size_t i;

  for (i = 0; i < sizeof cats / sizeof cats[0]; i++) {
    (void)stkr_site_register(&g_open[cats[i]]);
    (void)stkr_site_register(&g_openat[cats[i]]);
    (void)stkr_site_register(&g_fopen[cats[i]]);
  }
}

/* Must expand inside the hook (see stkr__pl_record). A miss costs the
 * ready load and the two-byte path filter. */
#define PATH_EVENT(sites, path)                                                \
  do {                                                                         \
    unsigned c_;                                                               \
    if (stkr__pl_ready() &&                                                    \
        (c_ = stkr__pl_path_class(&stkr__pl.paths, (path))) != 0 &&           \
        stkr__pl_want(c_ - 1))                                                 \
      stkr__pl_record(&(sites)[c_ - 1], (path), strlen(path));                 \
  } while (0)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*openat2_fn)(int, const char *, int);
typedef FILE *(*fopen_fn)(const char *, const char *);

/* When libc's function cannot be had (resolution re-entered through a
 * malloc replacement, say), the system call does the same job. */
static int open_syscall(int dirfd, const char *path, int flags, int mode) {
  return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

/* The mode argument exists only with O_CREAT or O_TMPFILE. */
#define READ_MODE(flags, last, mode)                                           \
  do {                                                                         \
    if (__OPEN_NEEDS_MODE(flags)) {                                            \
      va_list ap_;                                                             \
      va_start(ap_, last);                                                     \
      mode = va_arg(ap_, int);                                                 \
      va_end(ap_);                                                             \
    }                                                                          \
  } while (0)

/* The eight open hooks differ only in the libc function they forward to,
 * whether it takes a directory descriptor (the openat family: its own
 * sites), whether it takes a mode (not the fortify __open_2 family), and
 * O_LARGEFILE on the system call that stands in for a missing 64-bit name.
 * always_inline: the event must be recorded from the hook's own frame
 * (skip_frames 1, see stkr__pl_record). */
enum { OPEN_AT = 1, OPEN_MODE = 2, OPEN_LARGE = 4 };

static inline __attribute__((always_inline)) int
open_via(int real, unsigned how, int dirfd, const char *path, int flags,
         int mode) {
  void *fn = stkr__pl_real(real);

  PATH_EVENT((how & OPEN_AT) ? g_openat : g_open, path);
  if (fn == NULL)
    return open_syscall(dirfd, path,
                        (how & OPEN_LARGE) ? flags | O_LARGEFILE : flags, mode);
  switch (how & (OPEN_AT | OPEN_MODE)) {
  case OPEN_MODE:
    return ((open_fn)fn)(path, flags, mode);
  case 0:
    return ((open2_fn)fn)(path, flags);
  case OPEN_AT | OPEN_MODE:
    return ((openat_fn)fn)(dirfd, path, flags, mode);
  default:
    return ((openat2_fn)fn)(dirfd, path, flags);
  }
}

int open(const char *path, int flags, ...) {
  int mode = 0;

  READ_MODE(flags, flags, mode);
  return open_via(STKR__PL_R_open, OPEN_MODE, AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
  int mode = 0;

  READ_MODE(flags, flags, mode);
  return open_via(STKR__PL_R_open64, OPEN_MODE | OPEN_LARGE, AT_FDCWD, path,
                  flags, mode);
}

int __open_2(const char *path, int flags) {
  return open_via(STKR__PL_R___open_2, 0, AT_FDCWD, path, flags, 0);
}

int __open64_2(const char *path, int flags) {
  return open_via(STKR__PL_R___open64_2, OPEN_LARGE, AT_FDCWD, path, flags, 0);
}

int openat(int dirfd, const char *path, int flags, ...) {
  int mode = 0;

  READ_MODE(flags, flags, mode);
  return open_via(STKR__PL_R_openat, OPEN_AT | OPEN_MODE, dirfd, path, flags,
                  mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
  int mode = 0;

  READ_MODE(flags, flags, mode);
  return open_via(STKR__PL_R_openat64, OPEN_AT | OPEN_MODE | OPEN_LARGE, dirfd,
                  path, flags, mode);
}

int __openat_2(int dirfd, const char *path, int flags) {
  return open_via(STKR__PL_R___openat_2, OPEN_AT, dirfd, path, flags, 0);
}

int __openat64_2(int dirfd, const char *path, int flags) {
  return open_via(STKR__PL_R___openat64_2, OPEN_AT | OPEN_LARGE, dirfd, path,
                  flags, 0);
}

/* fopen and fopen64 differ only in the libc function they forward to.
 * always_inline: as open_via. No system call stands in for a
 * missing fopen (it would need libc's FILE). */
static inline __attribute__((always_inline)) FILE *
fopen_via(int real, const char *path, const char *mode) {
  fopen_fn fn = (fopen_fn)stkr__pl_real(real);

  PATH_EVENT(g_fopen, path);
  if (fn == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  return fn(path, mode);
}

FILE *fopen(const char *path, const char *mode) {
  return fopen_via(STKR__PL_R_fopen, path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
  return fopen_via(STKR__PL_R_fopen64, path, mode);
}

/* creat(path, mode) is open(path, O_CREAT | O_WRONLY | O_TRUNC, mode), and
 * recorded as "open"; freopen opens path into an existing stream, recorded
 * as "fopen" (a NULL path reopens the stream's own file: nothing new). QA,
 * session 41: neither was recorded (creat of ~/.ssh/newkey, freopen of
 * /etc/passwd). always_inline: as open_via. */
typedef int (*creat_fn)(const char *, mode_t);
typedef FILE *(*freopen_fn)(const char *, const char *, FILE *);

static inline __attribute__((always_inline)) int
creat_via(int real, const char *path, mode_t mode, int large) {
  creat_fn fn = (creat_fn)stkr__pl_real(real);

  PATH_EVENT(g_open, path);
  if (fn == NULL)
    return open_syscall(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC | large,
                        (int)mode);
  return fn(path, mode);
}

int creat(const char *path, mode_t mode) {
  return creat_via(STKR__PL_R_creat, path, mode, 0);
}

int creat64(const char *path, mode_t mode) {
  return creat_via(STKR__PL_R_creat64, path, mode, O_LARGEFILE);
}

static inline __attribute__((always_inline)) FILE *
freopen_via(int real, const char *path, const char *mode, FILE *stream) {
  freopen_fn fn = (freopen_fn)stkr__pl_real(real);

  if (path != NULL)
    PATH_EVENT(g_fopen, path);
  if (fn == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  return fn(path, mode, stream);
}

FILE *freopen(const char *path, const char *mode, FILE *stream) {
  return freopen_via(STKR__PL_R_freopen, path, mode, stream);
}

FILE *freopen64(const char *path, const char *mode, FILE *stream) {
  return freopen_via(STKR__PL_R_freopen64, path, mode, stream);
}

/* ---- fcntl: the recorder's own descriptors look free ----------------------
 * The recorder keeps its session and segment files open at high numbers,
 * close-on-exec (stkr_fd_owned). bash takes an open close-on-exec
 * descriptor of 10 or more for a saved copy of its own: after `exec N>f`
 * onto one of ours it put ours back, so the script's writes to N went into
 * the recording and f stayed empty. F_GETFD is how programs ask whether a
 * number is in use, so for ours it answers EBADF, as for a free number;
 * the program's dup2 then replaces our descriptor, and the recorder's
 * identity checks notice and go on in new files. Every other command
 * passes untouched (the recorder never asks F_GETFD about its own). A miss
 * costs a compare, or two loads for F_GETFD. */
typedef int (*fcntl_fn)(int, int, ...);

static int fcntl_via(int real, int fd, int cmd, void *arg) {
  fcntl_fn fn = (fcntl_fn)stkr__pl_real(real);

  if (cmd == F_GETFD && !stkr__pl_guard) {
    int owned;
    stkr__pl_guard++; /* its fstat is the recorder's, not an event */
    owned = stkr_fd_owned(fd);
    stkr__pl_guard--;
    if (owned) {
      errno = EBADF;
      return -1;
    }
  }
  if (fn == NULL) return (int)syscall(SYS_fcntl, fd, cmd, arg);
  return fn(fd, cmd, arg);
}

/* fcntl and fcntl64, the same: every fcntl command passes at most one
 * word, and glibc forwards it the same way. */
#define STKR__PL_FCNTL_HOOK(name)                                              \
  int name(int fd, int cmd, ...) {                                             \
    va_list ap;                                                                \
    void *arg;                                                                 \
                                                                               \
    va_start(ap, cmd);                                                         \
    arg = va_arg(ap, void *);                                                  \
    va_end(ap);                                                                \
    return fcntl_via(STKR__PL_R_##name, fd, cmd, arg);                         \
  }
STKR__PL_FCNTL_HOOK(fcntl)
STKR__PL_FCNTL_HOOK(fcntl64)
#undef STKR__PL_FCNTL_HOOK
