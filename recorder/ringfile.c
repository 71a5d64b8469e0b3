/*
 * ringfile.c: session files and ring files, the crash-proof half of the
 * recorder (layout and rules: common/stkr_ringfile.h).
 *
 * - stkr_init (flush/worker.c) opens a session: it creates
 *   DIR/stackrec-<pid>-<session>.session, takes flock(LOCK_EX) on it through
 *   a close-on-exec descriptor moved to a high number, maps it MAP_SHARED
 *   and fills its header. Site names go into it as sites are registered
 *   (a memcpy into the mapping: registration happens on the hot path).
 * - A thread's first event (or stkr_thread_attach) takes a ring file the
 *   worker made ahead (stkr__ringfile_prefill, every drain pass) or one an
 *   exited thread left; only when there is none does it create, size and
 *   map a file itself (closing the descriptor at once: a mapping needs
 *   none). Creating a file costs 0.1-1 ms on a journaling file system,
 *   far more than the thread: that work belongs on the worker. Any failure
 *   leaves the thread on anonymous memory (counted), never without a ring.
 * - The lock is the liveness signal for recovery: the kernel drops it when
 *   the process dies or execs. A forked child closes its inherited copy,
 *   or a long-lived child would keep a dead parent looking alive.
 *
 * State: g_sess is written by the control thread (open/close, with no
 * producer running: recorder start/stop order it through the recorder's
 * state atomic, release at start, acquire in stkr_event) and read by
 * producers at their first event. `map` is also read by stkr_site_register
 * on any thread: it is published with a release store and read with
 * acquire.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h> /* and Apple's arc4random_buf */
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

#include "common/stkr_hash.h"
#include "common/stkr_io.h"
#include "common/stkr_ringfile.h"
#include "recorder/stkr_internal.h"

static struct {
  char dir[PATH_MAX];
  size_t dir_len;
  uint64_t session_id;
  uint32_t pid;
  int lock_fd;              /* -1: none */
  dev_t lock_dev;
  ino_t lock_ino;
  size_t map_bytes;
  size_t ring_bytes;
  uint64_t disk_cap;        /* the directory's cap (0: none): the pool's */
  bool lost;                /* the lock was lost and could not be re-taken */
  bool lock_by_map;         /* the lock's descriptor is gone, the lock held
                               by the header's mapping (Linux) */
} g_sess = {.lock_fd = -1};
/* The session file's mapping; release store at open, acquire loads by
 * site registration (any thread); NULL when no session. */
static stkr_sessfile_hdr *_Atomic g_map;
/* Threads inside stkr__session_site_added() (any thread, any time: sites
 * may be registered while no recording runs). seq_cst increment, then the
 * load of g_map; close stores g_map, then loads this: a Dekker pair, so
 * close never unmaps the header under a writer. */
static _Atomic int g_map_users;
/* Threads between stkr__ringfile_enter and _leave: taking a ring of the
 * session and linking themselves into the thread list, or (the worker)
 * making rings ahead and keeping rings in the cache: the places close
 * cleans. seq_cst increment, then a seq_cst load of g_map; close stores
 * g_map, then waits (bounded) for this to drop to 0: a Dekker pair, so
 * close never misses a ring handed on during it, whose file would stay
 * behind (seen in 7 of 480 recorded _exit runs of exit_busy, and with 12
 * busy threads, where a worker abandoned at the exit budget still made
 * and kept rings, in 1 of 60). */
static _Atomic int g_ring_makers;
static _Atomic uint64_t g_fallbacks;
/* The <n> of the last ring file made in this session. */
static _Atomic uint32_t g_file_no;

/* Give the file `bytes` of real blocks, not a sparse hole: a store into a
 * mapped hole that the file system cannot back (disk full) would raise
 * SIGBUS in the app. fallocate(2), not posix_fallocate(): no emulation
 * writing zeros, and a plain system call, safe in a signal handler. */
static int reserve_file(int fd, size_t bytes) {
  /* Past RLIMIT_FSIZE the kernel would raise SIGXFSZ in the app's thread
   * (common/stkr_io.h): the thread keeps a ring in memory instead. */
  if (!stkr_fsize_room(bytes))
    return -EFBIG;
#if defined(__linux__)
  if (fallocate(fd, 0, 0, (off_t)bytes) != 0)
    return -errno; /* ENOSPC, or EOPNOTSUPP: no crash-proof ring here */
  return 0;
#else
  /* Apple: no fallocate; APFS allocates on write anyway (copy-on-write),
   * so a full disk is a risk preallocation could not remove. */
  return ftruncate(fd, (off_t)bytes) != 0 ? -errno : 0;
#endif
}

static void store_site(stkr_sessfile_hdr *h, uint32_t id, const char *name);

uint64_t stkr__session_id_new(void) {
  uint64_t id = 0;
#if defined(__linux__)
  if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
    id = 0;
#elif defined(__APPLE__)
  arc4random_buf(&id, sizeof id);
#endif
  if (id == 0) {
    /* No entropy source: mix the clocks and the pid. */
    id = stkr_mix64(stkr__clock_mono_ns() ^ (stkr__clock_wall_ns() << 1) ^
                    ((uint64_t)getpid() << 32));
  }
  return id ? id : 1;
}

uint64_t stkr__session_current(void) {
  return atomic_load_explicit(&g_map, memory_order_acquire) ? g_sess.session_id
                                                             : 0;
}

size_t stkr__session_ring_bytes(void) { return g_sess.ring_bytes; }

const char *stkr__session_dir(void) {
  return atomic_load_explicit(&g_map, memory_order_acquire) ? g_sess.dir
                                                             : NULL;
}

uint64_t stkr__ringfile_fallbacks(void) {
  return atomic_load_explicit(&g_fallbacks, memory_order_relaxed);
}

/* How many files of `bytes` each the pool may keep of one kind (one per
 * ring size, and the session files): an eighth of the directory's cap for
 * each, at most STKR__POOL_SLOTS. The cap counts
 * segments only; pooled files were beyond it (QA, session 22: a directory
 * capped at 1 MiB held 3.4 MiB of pooled rings), and on a small disk they
 * take the room the final counters need. */
static unsigned pool_slots(size_t bytes) {
  uint64_t n;
  if (g_sess.disk_cap == 0 || bytes == 0) return STKR__POOL_SLOTS;
  n = g_sess.disk_cap / 8 / bytes;
  return n < STKR__POOL_SLOTS ? (unsigned)n : STKR__POOL_SLOTS;
}

/* dir + "/" + the file's base name into buf (STKR__DIR_PATH_BYTES). */
static void file_path(char *buf, uint64_t session, uint32_t thread) {
  memcpy(buf, g_sess.dir, g_sess.dir_len);
  buf[g_sess.dir_len] = '/';
  stkr_ringfile_name(buf + g_sess.dir_len + 1, g_sess.pid, session, thread);
}

/* The pool kind of a ring file of ring_size bytes: one per size, so that
 * a process never takes (or clears) a pooled ring of a size it does not
 * want (rings come in several sizes: stkr__ring_tier). */
#define STKR__RING_KIND_BYTES 32
static const char *ring_kind(char *buf, uint64_t ring_size) {
  snprintf(buf, STKR__RING_KIND_BYTES, "ring%lluk",
           (unsigned long long)(ring_size >> 10));
  return buf;
}

/* The file at path for the session file or a ring file: a file of `kind`
 * and `bytes` that a finished process left in the pool (ringpool.c; locked
 * first when `lock`), else a new, empty one. *pooled says which. @return
 * its descriptor, or -errno. */
static int take_or_create(const char *kind, size_t bytes, bool lock,
                          const char *path, bool *pooled) {
  int fd = stkr__pool_take(g_sess.dir, kind, bytes, lock, path);

  *pooled = fd >= 0;
  if (*pooled)
    return fd;
  fd = stkr__open_high(path, O_RDWR | O_CREAT | O_EXCL);
  if (fd == -ENOENT) { /* a ring's first: the cache directory is not there */
    char d[STKR__DIR_PATH_BYTES(g_sess.dir_len)];
    if (snprintf(d, sizeof d, "%s/" STKR_CACHE_DIR, g_sess.dir) < (int)sizeof d)
      (void)mkdir(d, 0700);
    fd = stkr__open_high(path, O_RDWR | O_CREAT | O_EXCL);
  }
  if (fd == -EBADF)
    unlink(path); /* created, but its descriptor was taken over */
  return fd;
}

/* Where a ring or session file is made before it gets its name
 * (STKR_RINGFILE_NEW in common/stkr_ringfile.h), into buf (cap bytes). 0
 * or -ENAMETOOLONG. */
static int new_path(char *buf, size_t cap, uint64_t session, uint32_t thread) {
  char name[STKR_RINGFILE_NAME_MAX];
  stkr_ringfile_name(name, g_sess.pid, session, thread);
  int n = snprintf(buf, cap, "%s/" STKR_CACHE_DIR "/" STKR_RINGFILE_NEW "%s",
                   g_sess.dir, name);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  memcpy(dst, src ? src : "", n);
  dst[n] = '\0';
}

static size_t sess_file_bytes(void) {
  return STKR_SESSFILE_HDR_BYTES + 8u * (STKR_MAX_SITES + 1) +
         STKR_SESSFILE_NAMES_CAP;
}

int stkr__session_open(const char *dir, const stkr_sessfile_hdr *tmpl) {
  size_t dir_len = strlen(dir);
  char path[STKR__DIR_PATH_BYTES(dir_len)];
  size_t bytes = sess_file_bytes();
  stkr_sessfile_hdr *h;
  struct stat st;
  int fd, err;

  stkr__session_close(false, 0); /* a session left open (cannot happen) */
  if (dir_len + 1 + STKR_RINGFILE_NAME_MAX > sizeof g_sess.dir)
    return -ENAMETOOLONG;
  memcpy(g_sess.dir, dir, dir_len + 1);
  g_sess.dir_len = dir_len;
  g_sess.pid = tmpl->pid;
  g_sess.session_id = tmpl->session_id;
  g_sess.ring_bytes = (size_t)tmpl->ring_bytes;
  g_sess.disk_cap = tmpl->disk_cap_bytes;
  g_sess.lost = false;
  g_sess.lock_by_map = false;
  atomic_store_explicit(&g_file_no, 0, memory_order_relaxed);
  file_path(path, tmpl->session_id, 0);
  /* Made (or claimed from the pool, locked first) under its
   * STKR_RINGFILE_NEW name, and given its own only once locked, sized and
   * with its header, as ring files are: a process starting beside ours
   * recovers what it finds under session names, and found this one empty
   * and unlocked right after its creation ("shorter than a session file
   * header"), its lock then making our flock fail (EAGAIN: "rings are not
   * crash-proof"; 4 of 10 runs of `xargs -P8`). A process that dies in
   * between leaves the file in the cache directory, which `stackrec
   * record` removes at its end. Its old header and site slots, if pooled,
   * are cleared below. */
  char tmp[STKR__DIR_PATH_BYTES(dir_len)];
  bool pooled;
  if ((err = new_path(tmp, sizeof tmp, tmpl->session_id, 0)) != 0)
    return err;
  fd = take_or_create("session", bytes, true, tmp, &pooled);
  if (fd < 0)
    return fd;
  if (!pooled && flock(fd, LOCK_EX | LOCK_NB) != 0)
    err = -errno;
  else if (fstat(fd, &st) != 0)
    err = -errno;
  else
    err = pooled ? 0 : reserve_file(fd, bytes);
  h = err != 0 ? MAP_FAILED
               : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (err == 0 && h == MAP_FAILED)
    err = -errno;
  if (err != 0) {
    close(fd);
    unlink(tmp);
    return err;
  }
  if (pooled) /* as a new file's: the header's spare bytes, every site's slot */
    memset(h, 0, STKR_SESSFILE_HDR_BYTES + 8u * (STKR_MAX_SITES + 1));
  /* The template's descriptive fields as they are; then this file's own
   * layout, state and counters, whatever the template held there. Nobody
   * else sees h before the release store below. */
  *h = *tmpl;
  h->names_used = h->names_overflow = 0;
  h->max_stack_id = 0;
  h->max_batch_seq = 0;
  memset(h->clock, 0, sizeof h->clock);
  h->clock_idx = 0;
  memcpy(h->magic, STKR_SESSFILE_MAGIC, 8);
  h->version = STKR_SESSFILE_VERSION;
  h->hdr_bytes = STKR_SESSFILE_HDR_BYTES;
  h->site_cap = STKR_MAX_SITES;
  h->slots_off = STKR_SESSFILE_HDR_BYTES;
  h->names_off = STKR_SESSFILE_HDR_BYTES + 8u * (STKR_MAX_SITES + 1);
  h->names_cap = STKR_SESSFILE_NAMES_CAP;
  h->state = STKR_SESS_RUNNING;
  if (rename(tmp, path) != 0) {
    err = -errno;
    munmap(h, bytes);
    close(fd);
    unlink(tmp);
    return err;
  }
  g_sess.lock_fd = fd;
  g_sess.lock_dev = st.st_dev;
  g_sess.lock_ino = st.st_ino;
  stkr__fd_own(STKR__OWN_SESSION, fd, (uint64_t)st.st_dev,
               (uint64_t)st.st_ino);
  g_sess.map_bytes = bytes;
  /* Release: the header above is complete for site registration. */
  atomic_store_explicit(&g_map, h, memory_order_release);
  /* Sites registered before (an earlier session, or before stkr_init):
   * their names are needed too. A site registered concurrently may be
   * stored twice; both copies are the same name. */
  for (uint32_t id = 1; id <= stkr__site_count(); id++) {
    const char *name = stkr__site_name(id);
    if (name != NULL)
      stkr__session_site_added(id, name);
  }
  return 0;
}

void stkr__session_site_added(uint32_t id, const char *name) {
  stkr_sessfile_hdr *h;

  atomic_fetch_add_explicit(&g_map_users, 1, memory_order_seq_cst);
  h = atomic_load_explicit(&g_map, memory_order_seq_cst);
  if (h != NULL && id != 0 && id <= h->site_cap)
    store_site(h, id, name);
  /* Release: our stores into the mapping come before close's unmap. */
  atomic_fetch_sub_explicit(&g_map_users, 1, memory_order_release);
}

void stkr__session_add_u64(size_t off, uint64_t n) {
  stkr_sessfile_hdr *h;

  /* As a site's name: a thread with no ring holds no `busy`, so the
   * close's quiesce does not wait for it; g_map_users does (review,
   * session 32: the add could land after the unmap). */
  atomic_fetch_add_explicit(&g_map_users, 1, memory_order_seq_cst);
  h = atomic_load_explicit(&g_map, memory_order_seq_cst);
  if (h != NULL)
    __atomic_fetch_add((uint64_t *)(void *)((char *)h + off), n,
                       __ATOMIC_RELAXED);
  atomic_fetch_sub_explicit(&g_map_users, 1, memory_order_release);
}

/* Wait until no site registration (nor a count, nor a ring maker's note)
 * is using the session header; a registration stuck for a second (a
 * thread stopped in a debugger) keeps the mapping alive forever rather
 * than fault. Control thread. @return whether none is. */
static bool map_users_gone(void) {
  /* By the clock: a loaded machine oversleeps each of 1000 sleeps. */
  const uint64_t give_up = stkr__clock_mono_ns() + 1000000000u;
  for (;;) {
    /* Acquire: pairs with the release decrement above. */
    if (atomic_load_explicit(&g_map_users, memory_order_acquire) == 0)
      return true;
    if (stkr__clock_mono_ns() >= give_up)
      return false;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Unmap the session header, if `unused` (map_users_gone, asked once
 * g_map is NULL: no later user can load the mapping). @return unused. */
static bool unmap_header(stkr_sessfile_hdr *h, bool unused) {
  if (unused)
    munmap(h, g_sess.map_bytes);
  return unused;
}

static void store_site(stkr_sessfile_hdr *h, uint32_t id, const char *name) {
  size_t len;
  uint32_t off;

  len = strnlen(name, 65535);
  /* Lock-free: claim bytes of the names area, copy, then publish the slot.
   * Atomic RMW: threads register sites concurrently. */
  off = __atomic_fetch_add(&h->names_used, (uint32_t)len, __ATOMIC_RELAXED);
  if ((uint64_t)off + len > h->names_cap) {
    __atomic_fetch_add(&h->names_overflow, 1, __ATOMIC_RELAXED);
    return;
  }
  memcpy((char *)h + h->names_off + off, name, len);
  /* Release: pairs with nothing in this process (recovery reads the file
   * after we died, when every store is in the page cache); it keeps the
   * slot from being visible before its bytes to anyone who looks. */
  __atomic_store_n((uint64_t *)((char *)h + h->slots_off) + id,
                   ((uint64_t)off << 32) | len, __ATOMIC_RELEASE);
}

stkr_sessfile_hdr *stkr__session_hdr(void) {
  return atomic_load_explicit(&g_map, memory_order_acquire);
}

void stkr__ringfile_enter(void) {
  atomic_fetch_add_explicit(&g_ring_makers, 1, memory_order_seq_cst);
}

void stkr__ringfile_leave(void) {
  /* Release: the thread's link into the list comes before close's load. */
  atomic_fetch_sub_explicit(&g_ring_makers, 1, memory_order_release);
}

/* Wait for threads handing on a ring right now: at most 100 ms (a thread
 * descheduled mid-attach among a dozen busy ones on two cores; a file made
 * on a slow disk; or this very thread, when close runs in a signal handler
 * that interrupted its attach), after which such a ring's file may stay
 * behind, as an orphan readers count. */
static void wait_ring_makers(uint64_t until_ns) {
  for (int i = 0; i < 100; i++) {
    /* Acquire: pairs with the release decrement in attach_end. */
    if (atomic_load_explicit(&g_ring_makers, memory_order_acquire) == 0)
      return;
    if (until_ns != 0 && stkr__clock_mono_ns() >= until_ns)
      return; /* an exit's deadline first */
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* The recording directory may have been renamed while we recorded (QA,
 * session 28: `mv DIR DIR.moved` mid-run left a cleanly ended session's
 * ring and session files in DIR.moved, which verify then took for a dead
 * writer's): our files are where the session file is now. */
bool stkr__session_dir_now(char *out, size_t cap) {
  struct stat st;
  return g_sess.lock_fd >= 0 && fstat(g_sess.lock_fd, &st) == 0 &&
         st.st_dev == g_sess.lock_dev && st.st_ino == g_sess.lock_ino &&
         stkr_fd_dir(g_sess.lock_fd, out, cap);
}

/* Written only when the directory did move: a thread still making its
 * ring (one that outlived close's bounded wait, or one that has not yet
 * seen the session go) reads g_sess.dir, and rewriting the same path was
 * a data race all the same (CI under TSan, session 47: `record -- exit_busy
 * _exit`, 9 of 24 runs beside two more). A move while such a thread runs
 * is left to that thread's file, which recovery finds. */
static void follow_renamed_dir(void) {
  char now[sizeof g_sess.dir];
  if (stkr__session_dir_now(now, sizeof now - STKR_RINGFILE_NAME_MAX)) {
    size_t len = strlen(now);
    if (len == g_sess.dir_len && memcmp(now, g_sess.dir, len) == 0) return;
    g_sess.dir_len = len;
    memcpy(g_sess.dir, now, len + 1);
  }
}

static void close_files(bool leftovers, uint64_t until_ns);

void stkr__session_close(bool leftovers, uint64_t until_ns) {
  if (atomic_load_explicit(&g_map, memory_order_acquire) == NULL) return;
  follow_renamed_dir();
  close_files(leftovers, until_ns);
}

/* Does a thread's ring in memory (not one of this session's files) hold
 * records not consumed? Only at the close: no producer or consumer runs. */
static bool memory_rings_hold_records(void) {
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t))
    if (t->ring.c != NULL && t->ring.session != g_sess.session_id &&
        (stkr__ring_unread(&t->ring) != 0 || stkr__ring_pending(&t->ring)))
      return true;
  return false;
}

/* stkr__session_close, its paths sized for the directory's name. */
static void close_files(bool leftovers, uint64_t until_ns) {
  bool pool_full = false; /* every pool slot taken, or past until_ns: the
                             rest of the rings are unlinked */
  stkr_sessfile_hdr *h = atomic_load_explicit(&g_map, memory_order_acquire);
  char path[STKR__DIR_PATH_BYTES(g_sess.dir_len)];

  if (h == NULL)
    return;
  /* seq_cst: the other half of the Dekker pairs in site_added and
   * ringfile_map. */
  atomic_store_explicit(&g_map, NULL, memory_order_seq_cst);
  wait_ring_makers(until_ns);
  /* Asked once, now that no user can load the mapping: a user stuck for
   * good (a siglongjmp out of a count) costs 1 s (test-longjmp). */
  const bool unused = map_users_gone();
  /* Before the loop below, which hands the file rings on. */
  const bool memory_left = leftovers && memory_rings_hold_records();
  /* Everything is written: said before any file goes, so that files this
   * process cannot remove (an unlink or rename refused: a process that
   * dropped its privileges after its start) never read as a dead
   * writer's; recovery removes them. */
  if (!leftovers)
    h->state = STKR_SESS_ENDED_CLEAN;
  /* No producer or consumer runs (after the worker's final drain): the
   * rings may change hands. Their files go with the session (or stay, all
   * of them, for recovery); the mappings keep working until re-backed.
   * Past an exit's deadline the rest are only unlinked (QA, session 27:
   * 680 threads' rings took 33 times exit_ms, each re-backed and trying
   * every pool slot); left behind, empty, they would read as a dead
   * writer's for recovery to end. */
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    if (t->ring.c == NULL || t->ring.session != g_sess.session_id)
      continue;
    if (!leftovers && !pool_full && until_ns != 0 &&
        stkr__clock_mono_ns() >= until_ns)
      pool_full = true; /* hurry: unlink only (no re-backing needed) */
    /* A thread still in an event (its handler blocked past the stop's
     * wait) may push on: its mapping stays (test-stuck-start). Acquire:
     * as stkr__threads_wait_idle's. */
    if (!leftovers &&
        (pool_full || atomic_load_explicit(&t->busy, memory_order_acquire))) {
      file_path(path, t->ring.session, t->ring.c->meta.file_no);
      unlink(path); /* our mapping goes on over the unlinked file */
    } else if (!leftovers) {
      /* Emptied, it goes to the pool for the next process (ringpool.c):
       * our mapping of it becomes private pages first, so nothing we do
       * later can write into a file another process may map. */
      uint32_t no = t->ring.c->meta.file_no;
      char kind[STKR__RING_KIND_BYTES];
      ring_kind(kind, t->ring.c->meta.ring_size);
      size_t bytes = stkr__ringcache_bytes(t->ring.c); /* the header, before it goes */
      void *p = mmap(t->ring.c, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      file_path(path, t->ring.session, no);
      if (p == MAP_FAILED ||
          !stkr__pool_put(g_sess.dir, kind, path, pool_slots(bytes))) {
        pool_full = p != MAP_FAILED; /* the rest: unlinked (one kind of
                                        ring per process) */
        unlink(path);
      }
    }
    t->ring.session = 0;
  }
  /* Cached rings are empty: never worth recovering. */
  stkr__ringcache_clear(true);
  if (leftovers) {
    /* Rings in memory that the final drain emptied lose nothing with the
     * process: not counted as lost (QA, session 32: a clean shutdown whose
     * last batch failed on a full disk read "died with 4 rings in memory,
     * how many events is not known", its accounting exact). */
    if (!memory_left)
      h->memory_rings = 0;
    /* Recovery takes it from here once our lock is gone. */
    h->state = STKR_SESS_ENDED_LEFTOVERS;
    unmap_header(h, unused);
  } else if (g_sess.lock_by_map) {
    /* The unmap releases the lock: the name goes first, so no recoverer
     * can find the file unlocked (its rings are gone already). */
    file_path(path, g_sess.session_id, 0);
    unlink(path);
    unmap_header(h, unused);
  } else {
    /* Unmapped before it is pooled; still locked and named until then. */
    bool unmapped = unmap_header(h, unused);
    file_path(path, g_sess.session_id, 0);
    if (!unmapped || !stkr__pool_put(g_sess.dir, "session", path,
                                     pool_slots(sess_file_bytes())))
      unlink(path);
  }
  stkr__fd_own(STKR__OWN_SESSION, -1, 0, 0);
  if (g_sess.lock_fd >= 0)
    close(g_sess.lock_fd); /* releases the lock (by_map: the unmap did) */
  g_sess.lock_fd = -1;
  g_sess.lock_by_map = false;
}

bool stkr__session_check(void) {
  struct stat st;
  char path[STKR__DIR_PATH_BYTES(g_sess.dir_len)];

  if (atomic_load_explicit(&g_map, memory_order_relaxed) == NULL ||
      g_sess.lost)
    return true; /* no session, or already reported */
  if (g_sess.lock_fd >= 0 && fstat(g_sess.lock_fd, &st) == 0 &&
      st.st_dev == g_sess.lock_dev && st.st_ino == g_sess.lock_ino)
    return true;
  /* Closed or replaced by the app (closerange, dup2). Never close a
   * descriptor that is not ours. */
  g_sess.lock_fd = -1;
  stkr__fd_own(STKR__OWN_SESSION, -1, 0, 0);
  file_path(path, g_sess.session_id, 0);
#if defined(__linux__)
  /* The flock belongs to the open file description, which the header's
   * mapping still holds: Linux keeps the lock until the unmap, so it is
   * ours still, and no other process's. What matters is that the file is
   * still there under its name for recovery to find; a stat tells, and
   * needs no descriptor (a program that filled its descriptor table made
   * a reopen fail with EMFILE, and the note was false). */
  if (stat(path, &st) == 0 && st.st_dev == g_sess.lock_dev &&
      st.st_ino == g_sess.lock_ino) {
    g_sess.lock_by_map = true;
    return true;
  }
#else
  /* Apple's flock goes with the last descriptor: take the lock again
   * through a new one. A recoverer that slipped in between saw a dead
   * session: stop using ring files rather than risk events twice. */
  int fd = stkr__open_high(path, O_RDWR);
  if (fd >= 0) {
    if (fstat(fd, &st) == 0 && st.st_dev == g_sess.lock_dev &&
        st.st_ino == g_sess.lock_ino && flock(fd, LOCK_EX | LOCK_NB) == 0) {
      g_sess.lock_fd = fd;
      stkr__fd_own(STKR__OWN_SESSION, fd, (uint64_t)st.st_dev,
                   (uint64_t)st.st_ino);
      return true;
    }
    close(fd);
  }
#endif
  g_sess.lost = true;
  return false;
}

void stkr__session_forget_after_fork(void) {
  stkr_sessfile_hdr *h = atomic_load_explicit(&g_map, memory_order_relaxed);
  struct stat st;

  /* Async-signal-safe calls only (atfork child handler). The descriptor
   * is our own copy (same open file description as the parent's): closing
   * it leaves the parent's lock in place, and lets it go when the parent
   * dies. Unless the program put its own file at that number since (dup2,
   * bash's `exec 1000>f`) and the worker has not checked yet: then the
   * number is the program's, which the child (a subshell) may write to. */
  atomic_store_explicit(&g_map, NULL, memory_order_relaxed);
  if (h != NULL)
    munmap(h, g_sess.map_bytes);
  /* Threads of the parent caught inside a ring's making or a use of the
   * map do not exist here: nobody is (QA, session 33: the child's
   * shutdown waited 0.1-1.7 s for them, and then left its map). */
  atomic_store_explicit(&g_map_users, 0, memory_order_relaxed);
  atomic_store_explicit(&g_ring_makers, 0, memory_order_relaxed);
  stkr__ringcache_clear(false); /* the parent's files: unmap ours, keep theirs */
  stkr__fd_own(STKR__OWN_SESSION, -1, 0, 0);
  if (g_sess.lock_fd >= 0 && fstat(g_sess.lock_fd, &st) == 0 &&
      st.st_dev == g_sess.lock_dev && st.st_ino == g_sess.lock_ino)
    close(g_sess.lock_fd);
  g_sess.lock_fd = -1;
}

/* Create, size and map a new, unowned ring file of the current session
 * (meta.thread_id 0: recovery skips it). 0 or -errno.
 * The file is made, or claimed from the pool, under its STKR_RINGFILE_NEW
 * name and renamed to its own only once sized and with its header written:
 * a writer that dies in between (an _exit while a thread starts: 51 of 160
 * runs at load 30) used to leave a 0-byte file, which recovery cannot tell
 * from a ring cut to nothing, or a pooled file with its last owner's
 * header, which reads as a file under a wrong name. Both were reported as
 * damage; now they are left where recovery removes them silently. */
static int create_ring(uint64_t ring_size, stkr__ring_ctl **out) {
  char path[STKR__DIR_PATH_BYTES(g_sess.dir_len)];
  char tmp[STKR__DIR_PATH_BYTES(g_sess.dir_len)];
  size_t bytes = STKR_RINGFILE_HDR_BYTES + (size_t)ring_size;
  /* Any thread; relaxed: only uniqueness matters. */
  uint32_t no = atomic_fetch_add_explicit(&g_file_no, 1, memory_order_relaxed) + 1;
  stkr__ring_ctl *c;
  int fd, err;

  file_path(path, g_sess.session_id, no);
  if ((err = new_path(tmp, sizeof tmp, g_sess.session_id, no)) != 0)
    return err;
  /* A pooled file is sized and reserved already; its old header is
   * cleared below before anything reads it. */
  bool pooled;
  char kind[STKR__RING_KIND_BYTES];
  fd = take_or_create(ring_kind(kind, ring_size), bytes, false, tmp, &pooled);
  if (fd < 0)
    return fd;
  if (!pooled) {
    if ((err = reserve_file(fd, bytes)) != 0) {
      close(fd);
      unlink(tmp);
      return err;
    }
  }
  c = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = c == MAP_FAILED ? -errno : 0;
  close(fd); /* the mapping keeps the file */
  if (err != 0) {
    unlink(tmp);
    return err;
  }
  if (pooled)
    memset(c, 0, STKR_RINGFILE_HDR_BYTES); /* as a new file's */
  c->meta.version = STKR_RINGFILE_VERSION;
  c->meta.hdr_bytes = STKR_RINGFILE_HDR_BYTES;
  c->meta.ring_size = ring_size;
  c->meta.session_id = g_sess.session_id;
  c->meta.pid = g_sess.pid;
  c->meta.record_hdr = sizeof(stkr__record);
  c->meta.file_no = no;
  /* Magic last: a file without it is one we died while creating. */
  memcpy(c->meta.magic, STKR_RINGFILE_MAGIC, 8);
  /* The stores above are in the shared mapping, so in the file for anyone
   * who reads it after the rename (one page cache; no msync needed). */
  if (rename(tmp, path) != 0) {
    err = -errno;
    munmap(c, bytes);
    unlink(tmp);
    return err;
  }
  *out = c;
  return 0;
}

int stkr__ringfile_map(uint64_t ring_size, uint32_t thread_id, uint64_t os_tid,
                       const char *name, stkr__ring_ctl **ctl,
                       uint64_t *session) {
  stkr__ring_ctl *c;
  uint64_t pos;
  int err;

  /* seq_cst: the other half of the Dekker pair with close (g_ring_makers;
   * acquire would do for g_sess's other fields, written before it). */
  if (thread_id == 0 || atomic_load_explicit(&g_map, memory_order_seq_cst) == NULL)
    return -ENOENT;
  /* A ring made ahead by the worker, or left by an exited thread: no file
   * to create on the program's thread. */
  c = stkr__ringcache_take(ring_size, g_sess.session_id);
  if (c == NULL && (err = create_ring(ring_size, &c)) != 0) {
    atomic_fetch_add_explicit(&g_fallbacks, 1, memory_order_relaxed);
    /* The thread records into memory from now on: said in the session
     * file for recovery, since a kill loses what that ring holds with
     * nothing left to count it (QA, session 31). As a site's name is
     * stored (stkr__session_site_added): the close unmaps the header only
     * once no one uses it (a ring maker's wait is bounded, this is not;
     * review). */
    atomic_fetch_add_explicit(&g_map_users, 1, memory_order_seq_cst);
    stkr_sessfile_hdr *h = atomic_load_explicit(&g_map, memory_order_seq_cst);
    if (h != NULL)
      __atomic_fetch_add(&h->memory_rings, 1, __ATOMIC_RELAXED);
    /* Release: our store into the mapping comes before close's unmap. */
    atomic_fetch_sub_explicit(&g_map_users, 1, memory_order_release);
    return err;
  }
  /* Empty and released: tail == head, nothing in it is anyone's. The
   * indices run on from where they are. The owner is written before the
   * first record is committed (the head store), so a crash in between
   * leaves an empty ring. */
  pos = atomic_load_explicit(&c->tail, memory_order_relaxed);
  /* The new owner has sent no stack yet (its worker state is fresh). */
  memset(c->known, 0, sizeof c->known);
  memset(c->pknown, 0, sizeof c->pknown);
  stkr__ring_drops_clear(c); /* the new owner has dropped nothing */
  c->meta.thread_id = thread_id;
  c->meta.os_tid = os_tid;
  copy_str(c->meta.name, sizeof c->meta.name, name);
  c->p_tail = c->p_start = c->c_head = c->c_read = pos;
  c->p_reserved = 0;
  *ctl = c;
  *session = g_sess.session_id;
  return 0;
}

static void prefill(void);

void stkr__ringfile_prefill(void) {
  stkr__ringfile_enter();
  /* seq_cst: see g_ring_makers. */
  if (atomic_load_explicit(&g_map, memory_order_seq_cst) != NULL && !g_sess.lost)
    prefill();
  stkr__ringfile_leave();
}

/* Rings of the size the next starting thread would get (stkr__ring_tier:
 * past the first tiers, smaller ones), so that it finds one. */
static void prefill(void) {
  uint64_t size = stkr__ring_round(stkr__threads_next_ring(g_sess.ring_bytes));

  for (int more = stkr__ringcache_wanted(size, STKR_RINGFILE_PREFILL);
       more > 0; more--) {
    stkr__ring_ctl *c;
    if (create_ring(size, &c) != 0)
      return; /* tried again next pass */
    if (!stkr__ringfile_keep(c, g_sess.session_id)) {
      stkr__ringcache_drop(c);
      return;
    }
  }
}

bool stkr__ringfile_keep(stkr__ring_ctl *c, uint64_t session) {
  stkr__ringfile_enter();
  /* seq_cst: see g_ring_makers. */
  bool kept = session != 0 &&
              atomic_load_explicit(&g_map, memory_order_seq_cst) != NULL &&
              session == g_sess.session_id && stkr__ringcache_put(c);
  stkr__ringfile_leave();
  return kept;
}

void stkr__ringfile_unlink(uint64_t session, uint32_t file_no,
                           uint64_t ring_size) {
  char path[STKR__DIR_PATH_BYTES(g_sess.dir_len)];
  char kind[STKR__RING_KIND_BYTES];

  if (session == 0 || file_no == 0 || g_sess.dir_len == 0)
    return;
  file_path(path, session, file_no);
  /* g_sess.pid: the ring was made by this process (a forked child
   * privatizes its rings, so it never frees a parent's file). Every caller
   * has unmapped it: the next process may have it. */
  if (!stkr__pool_put(g_sess.dir, ring_kind(kind, ring_size), path,
                      pool_slots(STKR_RINGFILE_HDR_BYTES + ring_size)))
    unlink(path);
}
