/*
 * ringpool.c: ring and session files that a process of a recording no
 * longer needs, kept for the next process instead of deleted (issue 9).
 *
 * Every recording process used to create a session file and a ring file
 * (created, given real blocks with fallocate, mapped, and on a clean end
 * unlinked): on ext4 each create scans the inode table past every inode
 * deleted in the last seconds, so a tree of short processes paid more for
 * its files than for its events. A file that ends cleanly is renamed into
 * DIR/.stackrec-cache/pool-<kind>-<k> (k < STKR__POOL_SLOTS; the kinds:
 * "session", and "ring<KiB>k" for each ring size, since rings come in
 * several: stkr__ring_tier) instead, and
 * the next process renames it back under its own name: no inode made or
 * freed, its blocks still reserved, its pages still in the page cache.
 *
 * Rules that keep the crash-proof rings exact:
 *  - A file is pooled only when it holds nothing to recover (the cases
 *    that used to unlink it), and only once nothing of ours maps it
 *    (ringfile.c unmaps, or replaces a live thread's mapping with private
 *    pages, first): a file in the pool may be mapped by another process
 *    the moment after.
 *  - The claim is exclusive: rename with RENAME_NOREPLACE (one winner per
 *    slot, and never over an existing name); a session file is locked
 *    before it is renamed into place, so recovery never sees it unlocked.
 *  - The claimer checks the size and reinitializes the header before the
 *    file means anything (ringfile.c); a mismatch is unlinked. A ring is
 *    claimed to its temporary name (STKR_RINGFILE_NEW) and renamed to its
 *    own only after, so no ring file carries a stale header under our name.
 *  - Readers and recovery skip the cache directory; `stackrec record`
 *    removes it at its end. At most STKR__POOL_SLOTS files of each kind
 *    wait there (~9 MiB with the default ring).
 * Linux only (renameat2); elsewhere every call says no and files are
 * created and deleted as before.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_ringfile.h"
#include "recorder/stkr_internal.h"


#if defined(__linux__) && defined(RENAME_NOREPLACE)

/* Cleared when the file system refuses RENAME_NOREPLACE (EINVAL): files
 * are then created and deleted as before. Relaxed: a stale true costs one
 * refused call. */
static _Atomic bool g_pool_ok = true;

static int slot_path(char *buf, size_t cap, const char *dir, const char *kind,
                     unsigned k) {
  int n = snprintf(buf, cap, "%s/" STKR_CACHE_DIR "/pool-%s-%u", dir, kind, k);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static bool same_file(int fd, const char *path, off_t bytes) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino && S_ISREG(a.st_mode) && a.st_size == bytes;
}

/* Is the cache directory there? (No pool yet is the common case of a
 * recording's first processes: one look instead of a miss per slot.) */
static bool pool_dir_exists(const char *dir) {
  char d[STKR__DIR_PATH_BYTES(strlen(dir))];
  return snprintf(d, sizeof d, "%s/" STKR_CACHE_DIR, dir) < (int)sizeof d &&
         access(d, F_OK) == 0;
}

int stkr__pool_take(const char *dir, const char *kind, size_t bytes,
                    bool lock, const char *path) {
  char src[STKR__DIR_PATH_BYTES(strlen(dir))];

  if (!atomic_load_explicit(&g_pool_ok, memory_order_relaxed)) return -ENOSYS;
  for (unsigned k = 0; k < STKR__POOL_SLOTS; k++) {
    int fd = -1, e;
    if (slot_path(src, sizeof src, dir, kind, k) != 0) return -ENAMETOOLONG;
    if (lock) {
      /* Lock first: of two claimers of one slot only one gets the lock. */
      if ((fd = stkr__open_high(src, O_RDWR)) < 0) {
        if (k == 0 && !pool_dir_exists(dir)) return -ENOENT;
        continue;
      }
      if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        continue;
      }
    }
    if (renameat2(AT_FDCWD, src, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
      e = errno;
      if (fd >= 0) close(fd);
      if (e == EINVAL || e == ENOSYS) {
        atomic_store_explicit(&g_pool_ok, false, memory_order_relaxed);
        return -ENOSYS;
      }
      if (e == EEXIST) return -EEXIST; /* path is taken: create fails too */
      if (e == ENOENT && k == 0 && !pool_dir_exists(dir)) return -ENOENT;
      continue; /* an empty slot, or one another process claimed */
    }
    if (fd < 0 && (fd = stkr__open_high(path, O_RDWR)) < 0) {
      (void)unlink(path);
      continue;
    }
    if (!same_file(fd, path, (off_t)bytes)) {
      close(fd); /* another size (another ring_bytes), or replaced under us */
      (void)unlink(path);
      continue;
    }
    return fd;
  }
  return -ENOENT;
}

bool stkr__pool_put(const char *dir, const char *kind, const char *path,
                    unsigned slots) {
  char dst[STKR__DIR_PATH_BYTES(strlen(dir))];
  bool made = false;

  if (!atomic_load_explicit(&g_pool_ok, memory_order_relaxed)) return false;
  if (slots > STKR__POOL_SLOTS) slots = STKR__POOL_SLOTS;
  for (unsigned k = 0; k < slots; k++) {
    if (slot_path(dst, sizeof dst, dir, kind, k) != 0) return false;
    if (renameat2(AT_FDCWD, path, AT_FDCWD, dst, RENAME_NOREPLACE) == 0)
      return true;
    if (errno == EEXIST) continue; /* slot full: the next */
    if (errno == ENOENT && !made) {
      /* The cache directory, not there yet (or path gone: then the retry
       * fails again and we give up). */
      char d[STKR__DIR_PATH_BYTES(strlen(dir))];
      made = true;
      if (snprintf(d, sizeof d, "%s/" STKR_CACHE_DIR, dir) < (int)sizeof d)
        (void)mkdir(d, 0700);
      k--; /* this slot again */
      continue;
    }
    if (errno == EINVAL || errno == ENOSYS)
      atomic_store_explicit(&g_pool_ok, false, memory_order_relaxed);
    return false;
  }
  return false; /* the pool is full: the caller unlinks */
}

#else

int stkr__pool_take(const char *dir, const char *kind, size_t bytes,
                    bool lock, const char *path) {
  (void)dir, (void)kind, (void)bytes, (void)lock, (void)path;
  return -ENOSYS;
}

bool stkr__pool_put(const char *dir, const char *kind, const char *path,
                    unsigned slots) {
  (void)dir, (void)kind, (void)path, (void)slots;
  return false;
}

#endif
