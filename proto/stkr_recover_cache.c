/*
 * stkr_recover_cache.c: recovery's use of DIR/.stackrec-cache (the
 * processes' shared cache): record's lock there, the marks of sessions a
 * budget deferred, and its removal at record's end. Split out of
 * stkr_recover.c. Every file made, read or removed there goes through one
 * descriptor of the directory opened without following a link
 * (stkr__rc_cache_dirfd).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_io.h"
#include "proto/stkr__recover.h"

/* DIR/.stackrec-cache opened as a directory of its own (made first when
 * `make`), never through a link: every file recover makes, reads or
 * removes there goes through this descriptor, so that a link put in its
 * place cannot lead them outside the recording (QA, session 40: a link to
 * another directory had recover delete a record.lock there).
 * @return the descriptor, or -errno (-ELOOP or -ENOTDIR: not a
 * directory of its own). */
int stkr__rc_cache_dirfd(const char *dir, bool make) {
  char path[PATH_MAX];
  int fd;

  if (dir == NULL) return -EINVAL;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, STKR_CACHE_DIR) >=
      sizeof path)
    return -ENAMETOOLONG;
  if (make && mkdir(path, 0700) != 0 && errno != EEXIST) return -errno;
  fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

static bool defer_name(char *name, size_t cap, uint32_t pid, uint64_t sid) {
  return (size_t)snprintf(name, cap, "deferred-%u-%016llx", (unsigned)pid,
                          (unsigned long long)sid) < cap;
}

void stkr__rc_defer_mark(const stkr__rc *rc, uint32_t pid, uint64_t sid) {
  char name[64];
  int dfd, fd;
  if (rc->opts.dry_run || !defer_name(name, sizeof name, pid, sid) ||
      (dfd = stkr__rc_cache_dirfd(rc->dir, true)) < 0)
    return;
  fd = openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  close(dfd);
}

bool stkr__rc_defer_marked(const stkr__rc *rc, uint32_t pid, uint64_t sid) {
  char name[64];
  struct stat st;
  int dfd;
  bool marked;
  if (!defer_name(name, sizeof name, pid, sid) ||
      (dfd = stkr__rc_cache_dirfd(rc->dir, false)) < 0)
    return false;
  marked = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  close(dfd);
  return marked;
}

void stkr__rc_defer_clear(const stkr__rc *rc, uint32_t pid, uint64_t sid) {
  char name[64];
  int dfd;
  if (!defer_name(name, sizeof name, pid, sid) ||
      (dfd = stkr__rc_cache_dirfd(rc->dir, false)) < 0)
    return;
  (void)unlinkat(dfd, name, 0);
  close(dfd);
}

/* record's lock in the cache directory (stkr_recover_lock_dir). */
#define LOCK_FILE "record.lock"

int stkr_recover_lock_dir(const char *dir) {
  int dfd = stkr__rc_cache_dirfd(dir, true), fd;

  if (dfd < 0) return dfd;
  fd = openat(dfd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  close(dfd);
  if (fd < 0) return -errno;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno == EWOULDBLOCK ? -EWOULDBLOCK : -errno;
    close(fd);
    return err;
  }
  return fd;
}

bool stkr_recover_locked_dir_now(int fd, char *out, size_t cap) {
  const size_t tail = sizeof "/" STKR_CACHE_DIR - 1;
  struct stat st;
  size_t n;

  if (fd < 0 || !stkr_fd_dir(fd, out, cap))
    return false;
  n = strlen(out);
  if (n <= tail || strcmp(out + n - tail, "/" STKR_CACHE_DIR) != 0)
    return false;
  out[n - tail] = '\0';
  return stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

size_t stkr_recover_dir_max(void) {
  /* recorder/stkr_session.h's STKR__DIR_PATH_BYTES (the cache's prefix and
   * a name) is what recording needs; recovery makes longer names there
   * (a segment's temporary copy, its deferred marks): a 3 997-byte
   * directory recorded, and its recovery failed (QA, session 47; 3 996
   * worked). Room for two names besides the prefix. */
  return PATH_MAX - sizeof("/" STKR_CACHE_DIR "/pool-") -
         2 * STKR_RINGFILE_NAME_MAX;
}

int stkr_recover_cache_check(const char *dir, char *path, size_t cap) {
  struct stat st;

  if ((size_t)snprintf(path, cap, "%s/%s", dir, STKR_CACHE_DIR) >= cap)
    return -ENAMETOOLONG;
  if (lstat(path, &st) != 0 || S_ISDIR(st.st_mode)) return 0;
  return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;
}

bool stkr_recover_is_cache_name(const char *name) {
  return name != NULL && strcmp(name, STKR_CACHE_DIR) == 0;
}


bool stkr_recover_has_lock_file(const char *dir) {
  struct stat st;
  int dfd = stkr__rc_cache_dirfd(dir, false);
  bool has;

  if (dfd < 0) return false;
  has = fstatat(dfd, LOCK_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0;
  close(dfd);
  return has;
}

bool stkr_recover_record_running(const char *dir) {
  bool held = false;
  int fd;

  /* Opened, never made: a reader leaves no file behind. */
  int dfd = stkr__rc_cache_dirfd(dir, false);
  if (dfd < 0) return false;
  fd = openat(dfd, LOCK_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  close(dfd);
  if (fd < 0) return false;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0)
    held = errno == EWOULDBLOCK;
  close(fd); /* releases what we took */
  return held;
}

int stkr_recover_remove_cache(const char *dir) {
  char path[PATH_MAX];
  struct dirent *e;
  bool locked = false;
  DIR *d;
  int fd, err = 0;

  if (dir == NULL) return -EINVAL;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, STKR_CACHE_DIR) >=
      sizeof path)
    return -ENAMETOOLONG;
  if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return errno == ENOENT ? 0 : -errno;
  if ((d = fdopendir(fd)) == NULL) {
    err = -errno;
    close(fd);
    return err;
  }
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    if (strcmp(e->d_name, LOCK_FILE) == 0) {
      locked = true; /* record's, until its very end */
      continue;
    }
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue; /* ".", "..", anything not ours to remove */
    if (unlinkat(dirfd(d), e->d_name, 0) != 0 && err == 0 && errno != ENOENT)
      err = -errno;
  }
  closedir(d);
  if (rmdir(path) != 0 && err == 0 && errno != ENOENT &&
      !(locked && errno == ENOTEMPTY))
    err = -errno;
  return err;
}

/* Is the lock fd the file under LOCK_FILE in cache directory dfd? */
static bool lock_is_in(int fd, int dfd) {
  struct stat a, b;
  return fstat(fd, &a) == 0 &&
         fstatat(dfd, LOCK_FILE, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool stkr_recover_lock_is_at(int fd, const char *dir) {
  int dfd;
  bool at;

  if (fd < 0 || (dfd = stkr__rc_cache_dirfd(dir, false)) < 0) return false;
  at = lock_is_in(fd, dfd);
  close(dfd);
  return at;
}

void stkr_recover_unlock_dir(const char *dir, int fd) {
  char path[PATH_MAX];
  int dfd;

  if (fd < 0 || dir == NULL) return;
  /* Unlinked before the close: a record that takes the lock after us
   * makes a new file, never ours. Only ours: another record's lock may be
   * under that name now (our directory moved away; review, session 38);
   * the check and the unlink through one descriptor of the directory. */
  if ((dfd = stkr__rc_cache_dirfd(dir, false)) >= 0) {
    if (lock_is_in(fd, dfd)) (void)unlinkat(dfd, LOCK_FILE, 0);
    close(dfd);
  }
  close(fd);
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, STKR_CACHE_DIR) <
      sizeof path)
    (void)rmdir(path); /* only if empty */
}
