/*
 * hooks_stat.c: the libc members of Apple's "required-reason" API
 * categories, category `reasons` (the catalogue that maps categories to
 * APIs and sites is tools/stackrec/reasons.c):
 *   FileTimestamp  stat, fstat, lstat, fstatat, statx (and their 64-bit
 *                  names and the __xstat family older binaries call)
 *                  -> reasons.stat, .fstat, .lstat, .fstatat, .statx
 *   DiskSpace      statfs, fstatfs, statvfs, fstatvfs (and 64-bit names)
 *                  -> reasons.statfs, .fstatfs, .statvfs, .fstatvfs
 * Payload: the path (none for the descriptor variants).
 *
 * Off unless asked for (STACKREC_CATEGORIES=...,reasons or all): stat is
 * the most frequent file system call of many programs (an interpreter
 * stats every module it imports, make every target), and recording each
 * call would change their timing far more than the other, rare, sensitive
 * calls do. With the category off a call costs the ready load and one bit
 * test.
 *
 * Variants record at their base API's site (stat64 and __xstat as
 * "stat"), as hooks_files.c does. When libc's function cannot be resolved
 * (resolution re-entered through a malloc replacement, or an __xstat name
 * that this libc keeps only as a compat symbol) the system call does the
 * job where there is one, else the call fails with ENOSYS.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/preload.h"

/* Not declared by glibc >= 2.33 (kept for binaries linked before it). */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
               int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
                 int flags);

/* Must expand inside the hook (see stkr__pl_record; the return address is
 * the hook's caller). The recorder itself calls fstat and stat (its files):
 * those calls come from the library's own code and are not recorded. */
/* site: the API's name in preload.h's site table (stat: stkr__pl_site_stat). */
#define REASON_EVENT(site, path)                                               \
  do {                                                                         \
    if (stkr__pl_ready() && stkr__pl_want(STKR__PL_CAT_REASONS) &&             \
        !stkr__pl_from_self(__builtin_return_address(0))) {                    \
      const char *p_ = (path);                                                 \
      if (stkr__pl_unreadable(p_)) /* the call fails with EFAULT */           \
        p_ = NULL;                                                             \
      stkr__pl_record(&stkr__pl_site_##site, p_, p_ != NULL ? strlen(p_) : 0); \
    }                                                                          \
  } while (0)

static int no_function(void) {
  errno = ENOSYS;
  return -1;
}

/* The kernel's struct stat is glibc's on x86_64 and aarch64 (64-bit). */
static int stat_syscall(int dirfd, const char *path, void *st, int flags) {
#ifdef SYS_newfstatat
  return (int)syscall(SYS_newfstatat, dirfd, path, st, flags);
#else
  (void)dirfd, (void)path, (void)st, (void)flags;
  return no_function();
#endif
}

static int fstat_syscall(int fd, void *st) {
#ifdef SYS_fstat
  return (int)syscall(SYS_fstat, fd, st);
#else
  return stat_syscall(fd, "", st, AT_EMPTY_PATH);
#endif
}

typedef int (*stat_fn)(const char *, void *);
typedef int (*fstat_fn)(int, void *);
typedef int (*fstatat_fn)(int, const char *, void *, int);
typedef int (*xstat_fn)(int, const char *, void *);
typedef int (*fxstat_fn)(int, int, void *);
typedef int (*fxstatat_fn)(int, int, const char *, void *, int);

/* One hook per name; each expands the event inside its own frame. */
#define STAT_HOOK(name, site, type)                                            \
  int name(const char *path, struct type *st) {                                \
    stat_fn fn = (stat_fn)stkr__pl_real(STKR__PL_R_##name);                    \
    REASON_EVENT(site, path);                                                  \
    return fn != NULL ? fn(path, st) : stat_syscall(AT_FDCWD, path, st, FLAGS);\
  }
#define FLAGS 0
STAT_HOOK(stat, stat, stat)
STAT_HOOK(stat64, stat, stat64)
#undef FLAGS
#define FLAGS AT_SYMLINK_NOFOLLOW
STAT_HOOK(lstat, lstat, stat)
STAT_HOOK(lstat64, lstat, stat64)
#undef FLAGS
#undef STAT_HOOK

#define XSTAT_HOOK(name, site, type, flags)                                    \
  int name(int ver, const char *path, struct type *st) {                       \
    xstat_fn fn = (xstat_fn)stkr__pl_real(STKR__PL_R_##name);                  \
    REASON_EVENT(site, path);                                                  \
    return fn != NULL ? fn(ver, path, st)                                      \
                      : stat_syscall(AT_FDCWD, path, st, flags);               \
  }
XSTAT_HOOK(__xstat, stat, stat, 0)
XSTAT_HOOK(__xstat64, stat, stat64, 0)
XSTAT_HOOK(__lxstat, lstat, stat, AT_SYMLINK_NOFOLLOW)
XSTAT_HOOK(__lxstat64, lstat, stat64, AT_SYMLINK_NOFOLLOW)
#undef XSTAT_HOOK

#define FSTAT_HOOK(name, type)                                                 \
  int name(int fd, struct type *st) {                                          \
    fstat_fn fn = (fstat_fn)stkr__pl_real(STKR__PL_R_##name);                  \
    REASON_EVENT(fstat, NULL);                                                 \
    return fn != NULL ? fn(fd, st) : fstat_syscall(fd, st);                    \
  }
FSTAT_HOOK(fstat, stat)
FSTAT_HOOK(fstat64, stat64)
#undef FSTAT_HOOK

#define FXSTAT_HOOK(name, type)                                                \
  int name(int ver, int fd, struct type *st) {                                 \
    fxstat_fn fn = (fxstat_fn)stkr__pl_real(STKR__PL_R_##name);                \
    REASON_EVENT(fstat, NULL);                                                 \
    return fn != NULL ? fn(ver, fd, st) : fstat_syscall(fd, st);               \
  }
FXSTAT_HOOK(__fxstat, stat)
FXSTAT_HOOK(__fxstat64, stat64)
#undef FXSTAT_HOOK

#define FSTATAT_HOOK(name, type)                                               \
  int name(int dirfd, const char *path, struct type *st, int flags) {          \
    fstatat_fn fn = (fstatat_fn)stkr__pl_real(STKR__PL_R_##name);              \
    REASON_EVENT(fstatat, path);                                               \
    return fn != NULL ? fn(dirfd, path, st, flags)                             \
                      : stat_syscall(dirfd, path, st, flags);                  \
  }
FSTATAT_HOOK(fstatat, stat)
FSTATAT_HOOK(fstatat64, stat64)
#undef FSTATAT_HOOK

#define FXSTATAT_HOOK(name, type)                                              \
  int name(int ver, int dirfd, const char *path, struct type *st, int flags) { \
    fxstatat_fn fn = (fxstatat_fn)stkr__pl_real(STKR__PL_R_##name);            \
    REASON_EVENT(fstatat, path);                                               \
    return fn != NULL ? fn(ver, dirfd, path, st, flags)                        \
                      : stat_syscall(dirfd, path, st, flags);                  \
  }
FXSTATAT_HOOK(__fxstatat, stat)
FXSTATAT_HOOK(__fxstatat64, stat64)
#undef FXSTATAT_HOOK

typedef int (*statx_fn)(int, const char *, int, unsigned, struct statx *);

int statx(int dirfd, const char *path, int flags, unsigned mask,
          struct statx *st) {
  statx_fn fn = (statx_fn)stkr__pl_real(STKR__PL_R_statx);

  REASON_EVENT(statx, path);
  if (fn != NULL)
    return fn(dirfd, path, flags, mask, st);
#ifdef SYS_statx
  return (int)syscall(SYS_statx, dirfd, path, flags, mask, st);
#else
  return no_function();
#endif
}

/* statfs and fstatfs are system calls; statvfs is computed by libc. */
#define PATH_FS_HOOK(name, site, type, sys)                                    \
  int name(const char *path, struct type *st) {                                \
    stat_fn fn = (stat_fn)stkr__pl_real(STKR__PL_R_##name);                    \
    REASON_EVENT(site, path);                                                  \
    return fn != NULL ? fn(path, st) : sys;                                    \
  }
#define FD_FS_HOOK(name, site, type, sys)                                      \
  int name(int fd, struct type *st) {                                          \
    fstat_fn fn = (fstat_fn)stkr__pl_real(STKR__PL_R_##name);                  \
    REASON_EVENT(site, NULL);                                                  \
    return fn != NULL ? fn(fd, st) : sys;                                      \
  }
PATH_FS_HOOK(statfs, statfs, statfs, (int)syscall(SYS_statfs, path, st))
PATH_FS_HOOK(statfs64, statfs, statfs64, (int)syscall(SYS_statfs, path, st))
FD_FS_HOOK(fstatfs, fstatfs, statfs, (int)syscall(SYS_fstatfs, fd, st))
FD_FS_HOOK(fstatfs64, fstatfs, statfs64, (int)syscall(SYS_fstatfs, fd, st))
PATH_FS_HOOK(statvfs, statvfs, statvfs, ((void)path, (void)st, no_function()))
PATH_FS_HOOK(statvfs64, statvfs, statvfs64,
             ((void)path, (void)st, no_function()))
FD_FS_HOOK(fstatvfs, fstatvfs, statvfs, ((void)fd, (void)st, no_function()))
FD_FS_HOOK(fstatvfs64, fstatvfs, statvfs64,
           ((void)fd, (void)st, no_function()))
#undef PATH_FS_HOOK
#undef FD_FS_HOOK
