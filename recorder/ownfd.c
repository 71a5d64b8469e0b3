/*
 * ownfd.c: the descriptors the recorder keeps open, for stkr_fd_owned().
 *
 * The recorder keeps two descriptors for long: the session file's (it
 * holds the session's lock, ringfile.c) and the current segment's
 * (flush/segment.c), both at high numbers and close-on-exec. To the
 * program they must look free: bash takes an open close-on-exec
 * descriptor of 10 or more for a saved copy of its own, and after
 * `exec N>f` onto one it puts that copy back, so the script's writes to N
 * went into our files and f stayed empty. The hook library answers
 * fcntl(N, F_GETFD) with EBADF for these numbers (preload/hooks_files.c):
 * the program's dup2 then replaces our descriptor, and the recorder's own
 * identity checks (stkr__session_check, the segment writer's
 * stkr__fd_check) notice and go on with new ones.
 */
#include <stdatomic.h>
#include <sys/stat.h>

#include "recorder/stkr_internal.h"

/* Per slot: the number and the identity of the file it named when the
 * recorder took it. Written by the slot's owner only (session: the thread
 * that opens, re-takes or closes the session file, or the atfork child
 * handler; segment: the flush worker, or the atfork child handler): the
 * number is cleared first and published last with a release store, which
 * pairs with the acquire loads in stkr_fd_owned(); a reader that sees the
 * number change under it answers 0. Any thread reads. */
static struct {
  _Atomic int fd; /* -1: none */
  _Atomic uint64_t dev, ino;
} g_own[STKR__OWN_N] = {
    [STKR__OWN_SESSION] = {.fd = -1},
    [STKR__OWN_SEGMENT] = {.fd = -1},
};

void stkr__fd_own(unsigned slot, int fd, uint64_t dev, uint64_t ino) {
  if (slot >= STKR__OWN_N) return;
  /* Relaxed: the release store of the number below orders these. */
  atomic_store_explicit(&g_own[slot].fd, -1, memory_order_relaxed);
  atomic_store_explicit(&g_own[slot].dev, dev, memory_order_relaxed);
  atomic_store_explicit(&g_own[slot].ino, ino, memory_order_relaxed);
  /* Release: pairs with the acquire loads of stkr_fd_owned. */
  atomic_store_explicit(&g_own[slot].fd, fd, memory_order_release);
}

int stkr_fd_owned(int fd) {
  if (fd < 0) return 0;
  for (unsigned i = 0; i < STKR__OWN_N; i++) {
    struct stat st;
    uint64_t dev, ino;
    /* Acquire: pairs with stkr__fd_own's release store. */
    if (atomic_load_explicit(&g_own[i].fd, memory_order_acquire) != fd)
      continue;
    dev = atomic_load_explicit(&g_own[i].dev, memory_order_relaxed);
    ino = atomic_load_explicit(&g_own[i].ino, memory_order_relaxed);
    /* The same number still, and still our file there: a number the
     * program has put its own file at (dup2) is the program's. */
    if (atomic_load_explicit(&g_own[i].fd, memory_order_acquire) == fd &&
        fstat(fd, &st) == 0 && (uint64_t)st.st_dev == dev &&
        (uint64_t)st.st_ino == ino)
      return 1;
  }
  return 0;
}
