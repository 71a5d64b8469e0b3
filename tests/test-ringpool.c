/*
 * test-ringpool.c: issue 9, ring and session files reused across the
 * processes of a recording (recorder/ringpool.c) instead of created and
 * deleted by each.
 *
 *  - A clean end moves its ring and session file into DIR/.stackrec-cache
 *    (pool-ring<KiB>k-<k>, pool-session-<k>); the next process takes those very
 *    files (same inodes), and the recording reads back every event.
 *  - Crash-proofing holds with reused files: a process killed (SIGKILL)
 *    after taking them leaves exactly its unflushed events, which recovery
 *    finds, with no orphan file and nothing of the previous owner.
 *  - A pooled file whose old contents are garbage, or whose size is not
 *    the ring's, never leaks into the recording.
 *  - A reader ignores the pool; `stackrec record`'s end removes it (see
 *    test-table-cache.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "common/stkr_ringfile.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "ringpool.test");

/* The first pooled ring of 64 KiB (this file's processes' size): one pool
 * per ring size (recorder/ringfile.c, ring_kind). */
#define POOL_RING64K_0 "pool-ring64k-0"

static ino_t ino_of(const char *name) {
  char p[2200];
  struct stat st;
  snprintf(p, sizeof p, "%s/.stackrec-cache/%s", tl_dir, name);
  return stat(p, &st) == 0 ? st.st_ino : 0;
}

/* The inode of this directory's only file ending in suffix, 0 if none. */
static ino_t ino_of_suffix(const char *suffix) {
  char p[2200];
  struct stat st;
  tl_find_file(tl_dir, suffix, p, sizeof p);
  return stat(p, &st) == 0 ? st.st_ino : 0;
}

/* Fork a process of the recording (1 h interval, rings of ring_bytes)
 * with a pipe back: in the child (returns 0, recording started) *fd is
 * the pipe's write end; in the parent (returns the pid) its read end. */
static pid_t fork_recording(int *fd, size_t ring_bytes) {
  int fds[2];
  pid_t pid;

  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  close(fds[pid == 0 ? 0 : 1]);
  *fd = fds[pid == 0 ? 1 : 0];
  if (pid == 0) {
    stkr_config cfg = {.flush_interval_ms = 3600000, .ring_bytes = ring_bytes};
    cfg.dir = tl_dir;
    if (stkr_init(&cfg) != 0) _exit(2);
  }
  return pid;
}

/* Parent: len bytes from the child's pipe into out, then its end: killed
 * by SIGKILL if die, else exit status 0. */
static void reap_child(pid_t pid, int fd, void *out, size_t len, bool die) {
  int st;
  size_t got = 0;
  /* The child may write in pieces (run_tiered: two writes): read all. */
  while (got < len) {
    ssize_t r = read(fd, (char *)out + got, len - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  assert_int_equal(got, len);
  close(fd);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (die)
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("child exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* A process of the recording: events [first, first + n) (payload: the
 * number), then a flush and `more` events after it; killed by SIGKILL if
 * `die`, else a clean end. Reports the inodes of its session and ring
 * files through a pipe. */
static void run_process(uint32_t first, uint32_t n, uint32_t more, bool die,
                        ino_t inos[2]) {
  int fd;
  pid_t pid = fork_recording(&fd, 64 << 10);

  if (pid == 0) {
    ino_t got[2];
    for (uint32_t i = first; i < first + n; i++)
      if (stkr_event(&g_site, &i, sizeof i) != 0) _exit(3);
    if (stkr_flush() != 0) _exit(4);
    for (uint32_t i = first + n; i < first + n + more; i++)
      if (stkr_event(&g_site, &i, sizeof i) != 0) _exit(3);
    got[0] = ino_of_suffix(".session");
    got[1] = ino_of_suffix(".ring");
    if (write(fd, got, sizeof got) != (ssize_t)sizeof got) _exit(5);
    if (die) raise(SIGKILL);
    if (stkr_shutdown() != 0) _exit(6);
    _exit(0);
  }
  reap_child(pid, fd, inos, 2 * sizeof(ino_t), die);
}

/* Every event number in [0, n) exactly once, nothing else. */
static void assert_events_exactly(uint32_t n) {
  stkr_reader *r;
  stkr_event_view ev;
  uint8_t *seen = calloc(n, 1);
  uint32_t total = 0;
  int rc;

  assert_non_null(seen);
  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    uint32_t v;
    assert_int_equal(ev.payload_len, 4);
    memcpy(&v, ev.payload, 4);
    assert_true(v < n);
    if (seen[v]++) fail_msg("event %u twice", v);
    total++;
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(r);
  free(seen);
  assert_int_equal(total, n);
}

static void recover_exact(uint64_t want_events) {
  stkr_recover_stats st;
  assert_int_equal(stkr_recover_dir(tl_dir, NULL, &st), 0);
  assert_int_equal(st.events, want_events);
  assert_int_equal(st.sessions_recovered, 1);
  assert_int_equal(st.orphans, 0);
  assert_int_equal(st.damaged_rings, 0);
}

static void test_clean_end_pools_and_next_takes(void **state) {
  ino_t first[2], second[2], ring, sess;
  (void)state;

  run_process(0, 100, 0, false, first);
  /* Nothing left in the directory but the segment; the files wait. */
  assert_int_equal(tl_count_files(tl_dir, ".session"), 0);
  assert_int_equal(tl_count_files(tl_dir, ".ring"), 0);
  sess = ino_of("pool-session-0");
  ring = ino_of(POOL_RING64K_0);
  assert_true(sess == first[0] && ring == first[1]);

  run_process(100, 50, 0, false, second);
  assert_true(second[0] == sess && second[1] == ring); /* taken, not made */
  assert_true(ino_of("pool-session-0") == sess && ino_of(POOL_RING64K_0) == ring);
  assert_events_exactly(150);
}

static void test_killed_after_taking_recovers_exactly(void **state) {
  ino_t inos[2];
  (void)state;

  run_process(0, 100, 0, false, inos); /* fills the pool */
  run_process(100, 50, 50, true, inos); /* 50 flushed, 50 in its ring */
  assert_true(inos[0] == ino_of("pool-session-0") || ino_of("pool-session-0") == 0);
  assert_int_equal(tl_count_files(tl_dir, ".session"), 1);
  assert_int_equal(tl_count_files(tl_dir, ".ring"), 1);
  recover_exact(50);
  assert_events_exactly(200);
}

/* Overwrite the first `n` bytes of a pooled file with 0xAB. */
static void garble(const char *name, size_t n) {
  char p[2200];
  uint8_t *junk = malloc(n);
  int fd;
  assert_non_null(junk);
  memset(junk, 0xAB, n);
  snprintf(p, sizeof p, "%s/.stackrec-cache/%s", tl_dir, name);
  assert_true((fd = open(p, O_WRONLY)) >= 0);
  assert_int_equal(pwrite(fd, junk, n, 0), (ssize_t)n);
  close(fd);
  free(junk);
}

static void test_garbage_in_the_pool_never_leaks(void **state) {
  ino_t inos[2];
  char p[2200];
  (void)state;

  run_process(0, 100, 0, false, inos);
  /* Old contents a reader would misread if they were kept: the whole
   * header and site slots of the session file, the ring's header and its
   * first records. */
  garble("pool-session-0", 4096 + 8 * 4097);
  garble(POOL_RING64K_0, 4096 + 8192);
  run_process(100, 50, 50, true, inos);
  assert_true(inos[1] != 0);
  recover_exact(50);
  assert_events_exactly(200);

  /* A pooled ring of another size is not used (and not kept). */
  run_process(200, 10, 0, false, inos);
  snprintf(p, sizeof p, "%s/.stackrec-cache/" POOL_RING64K_0, tl_dir);
  assert_int_equal(truncate(p, 8192), 0);
  run_process(210, 10, 10, true, inos);
  {
    struct stat st;
    tl_find_file(tl_dir, ".ring", p, sizeof p);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 4096 + (64 << 10)); /* a ring of its size */
  }
  recover_exact(10);
  assert_events_exactly(230);
}

/* ---- rings of several sizes (stkr__ring_tier) ---------------------------- */

/* Up to cap inodes of the directory d's files whose name holds `part` and,
 * when owned, whose ring header names an owner (a thread's ring, not one
 * the worker made ahead); with born, each file's birth time (realtime ns,
 * 0 where the file system keeps none). @return how many. */
static size_t inodes_of(const char *d, const char *part, bool owned,
                        ino_t *out, uint64_t *born, size_t cap) {
  char p[2400];
  struct dirent *de;
  size_t n = 0;
  DIR *dir = opendir(d);
  while (dir != NULL && (de = readdir(dir)) != NULL && n < cap) {
    stkr_ringfile_meta m;
    struct stat st;
    if (strstr(de->d_name, part) == NULL) continue;
    snprintf(p, sizeof p, "%s/%s", d, de->d_name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && fstat(fd, &st) == 0 &&
              (!owned || (pread(fd, &m, sizeof m, 0) == (ssize_t)sizeof m &&
                          m.thread_id != 0));
    struct statx sx;
    if (ok && born != NULL)
      born[n] = statx(fd, "", AT_EMPTY_PATH, STATX_BTIME, &sx) == 0 &&
                        (sx.stx_mask & STATX_BTIME)
                    ? (uint64_t)sx.stx_btime.tv_sec * 1000000000u +
                          sx.stx_btime.tv_nsec
                    : 0;
    if (fd >= 0) close(fd);
    if (ok) out[n++] = st.st_ino;
  }
  if (dir != NULL) closedir(dir);
  return n;
}

static pthread_barrier_t g_tier_bar;

static void *tier_thread(void *arg) {
  (void)arg;
  if (stkr_event(&g_site, "tier", 4) != 0) _exit(3);
  pthread_barrier_wait(&g_tier_bar); /* all alive: main lists the rings */
  pthread_barrier_wait(&g_tier_bar);
  return NULL;
}

/* A process with 1 MiB rings and 4 threads besides main: 3 rings of 1 MiB
 * fit under the first tier (4 MiB), the 4th thread's is a quarter (the
 * main thread keeps the ring size it had in this test's process). The
 * inodes of the threads' rings, while all are alive, come back through
 * the pipe (at most 8; their count first). A clean end pools the files. */
static void run_tiered(ino_t *inos, uint64_t *born, size_t *n) {
  int fd;
  pid_t pid = fork_recording(&fd, 1 << 20);

  if (pid == 0) {
    pthread_t th[4];
    ino_t got[9];
    uint64_t b[8];
    if (stkr_event(&g_site, "main", 4) != 0) _exit(3);
    pthread_barrier_init(&g_tier_bar, NULL, 5);
    for (int k = 0; k < 4; k++)
      if (pthread_create(&th[k], NULL, tier_thread, NULL) != 0) _exit(4);
    pthread_barrier_wait(&g_tier_bar);
    got[0] = (ino_t)inodes_of(tl_dir, ".ring", true, got + 1, b, 8);
    pthread_barrier_wait(&g_tier_bar);
    for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
    if (write(fd, got, sizeof got) != (ssize_t)sizeof got ||
        write(fd, b, sizeof b) != (ssize_t)sizeof b)
      _exit(5);
    if (stkr_shutdown() != 0) _exit(6);
    _exit(0);
  }
  struct {
    ino_t got[9];
    uint64_t b[8];
  } r;
  reap_child(pid, fd, &r, sizeof r, false);
  *n = (size_t)r.got[0];
  memcpy(inos, r.got + 1, *n * sizeof *inos);
  memcpy(born, r.b, *n * sizeof *born);
}

/* The pool keeps rings of each size apart: every thread of the next
 * process takes a pooled file. Before, the pool was one list, and a taker
 * unlinked every file of another size it met on its way, so the next
 * process created some of its threads' rings anew. */
static void test_rings_of_two_sizes_pooled(void **state) {
  ino_t first[8], second[8], pool[64];
  uint64_t b1[8], b2[8];
  size_t n1, n2, np;
  char cache[2200];
  struct timespec between;
  (void)state;

  run_tiered(first, b1, &n1);
  assert_int_equal(n1, 5);
  snprintf(cache, sizeof cache, "%s/.stackrec-cache", tl_dir);
  np = inodes_of(cache, "pool-ring", false, pool, NULL, 64);
  usleep(20000);
  clock_gettime(CLOCK_REALTIME, &between);
  usleep(20000);
  run_tiered(second, b2, &n2);
  assert_int_equal(n2, 5);
  /* Pooled: an inode of the pool, and (an inode number can be given again
   * to a file created after an unlink) born before the second process. */
  for (size_t j = 0; j < n2; j++) {
    bool pooled = false;
    for (size_t i = 0; i < np && !pooled; i++) pooled = pool[i] == second[j];
    uint64_t t = (uint64_t)between.tv_sec * 1000000000u + between.tv_nsec;
    if (!pooled || (b2[j] != 0 && b2[j] > t))
      fail_msg("a ring of the second process (inode %lu) is not one of the "
               "%zu pooled files", (unsigned long)second[j], np);
  }
  stkr_reader *r;
  stkr_event_view ev;
  int n = 0, rc;
  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) n++;
  assert_int_equal(rc, 0);
  stkr_reader_free(r);
  assert_int_equal(n, 10); /* 2 processes x 5 threads */
}

/* ---- a session file is named only once locked and whole ---------------- */

static atomic_int g_observe_stop;

/* What a process starting beside ours does in its recovery: list the
 * directory, open each session file and try its lock. Counts the locks it
 * got (a live session's file visible unlocked) in *arg. */
static void *observe_sessions(void *arg) {
  int *got = arg;
  while (!atomic_load(&g_observe_stop)) {
    DIR *d = opendir(tl_dir);
    struct dirent *e;
    if (d == NULL) continue;
    while ((e = readdir(d)) != NULL) {
      size_t len = strlen(e->d_name);
      if (len < 8 || strcmp(e->d_name + len - 8, ".session") != 0) continue;
      int fd = openat(dirfd(d), e->d_name, O_RDWR | O_CLOEXEC);
      if (fd < 0) continue;
      /* As recovery checks too: a file its owner pooled or removed since
       * we opened it (the lock then free) is no longer that session's. */
      struct stat a, b;
      if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
          a.st_nlink > 0 && fstatat(dirfd(d), e->d_name, &b, 0) == 0 &&
          a.st_ino == b.st_ino && a.st_dev == b.st_dev)
        (*got)++;
      close(fd); /* releases it */
    }
    closedir(d);
  }
  return NULL;
}

/* A session file was created under its name, then locked: a process
 * starting beside ours found it empty and unlocked in between ("shorter
 * than a session file header"), and its lock made our flock fail ("rings
 * are not crash-proof"; 4 of 10 runs of `xargs -P8` under record). It is
 * made under a temporary name now. 300 sessions (each file new: the pool
 * emptied every time) under an observer that tries every session file's
 * lock: it must never get one, and every start must get ring files. */
static void test_session_named_when_locked(void **state) {
  char pool[2200];
  pthread_t th;
  int got = 0, unproofed = 0;
  (void)state;

  atomic_store(&g_observe_stop, 0);
  assert_int_equal(pthread_create(&th, NULL, observe_sessions, &got), 0);
  snprintf(pool, sizeof pool, "%s/.stackrec-cache/pool-session-0", tl_dir);
  for (int i = 0; i < 300; i++) {
    stkr_config cfg = {.flush_interval_ms = 3600000, .ring_bytes = 64 << 10};
    stkr_stats st;
    uint32_t v = (uint32_t)i;
    cfg.dir = tl_dir;
    assert_int_equal(stkr_init(&cfg), 0);
    assert_int_equal(stkr_event(&g_site, &v, sizeof v), 0);
    assert_int_equal(stkr_stats_get(&st), 0);
    unproofed += ino_of_suffix(".ring") == 0; /* no ring file: memory only */
    assert_int_equal(stkr_shutdown(), 0);
    (void)unlink(pool); /* the next session makes a new file */
  }
  atomic_store(&g_observe_stop, 1);
  pthread_join(th, NULL);
  if (got != 0 || unproofed != 0)
    fail_msg("an unlocked session file was seen %d times; %d sessions "
             "without ring files", got, unproofed);
}

static void *four_events(void *arg) {
  for (uint32_t i = 0; i < 4; i++)
    if (stkr_event(&g_site, &i, sizeof i) != 0) return arg;
  return NULL;
}

/* Entries of dir named pool-*. */
static int count_pooled(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (d == NULL) return 0; /* no cache directory: nothing pooled */
  while ((e = readdir(d)) != NULL) n += strncmp(e->d_name, "pool-", 5) == 0;
  closedir(d);
  return n;
}

/* A process whose 8 threads each recorded into a ring of their own, with
 * disk_cap_bytes = cap, ending cleanly: @return how many files the pool
 * then holds. */
static int pooled_after(uint64_t cap) {
  char cache[4200];
  pid_t pid = fork();
  int st;

  assert_true(pid >= 0);
  if (pid == 0) {
    stkr_config cfg = {.flush_interval_ms = 3600000, .ring_bytes = 64 << 10,
                       .disk_cap_bytes = cap};
    pthread_t th[8];
    cfg.dir = tl_dir;
    if (stkr_init(&cfg) != 0) _exit(2);
    for (int i = 0; i < 8; i++)
      if (pthread_create(&th[i], NULL, four_events, NULL) != 0) _exit(3);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    if (stkr_shutdown() != 0) _exit(4);
    _exit(0);
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(cache, sizeof cache, "%s/.stackrec-cache", tl_dir);
  return count_pooled(cache);
}

/* QA (session 22): pooled files are beyond the directory's cap (it counts
 * segments): a directory capped at 1 MiB held 3.4 MiB of them. A kind now
 * keeps at most an eighth of the cap: with 256 KiB none (68 KiB a ring,
 * the session file larger still); with 4 MiB 7 rings of 68 KiB (8 made). */
static void test_pool_within_the_cap(void **state) {
  int n;
  (void)state;

  assert_int_equal(pooled_after(256 << 10), 0);
  n = pooled_after(4u << 20);
  if (n < 1 || n > 8) /* 7 rings, and the session file if it fits */
    fail_msg("%d files pooled under a 4 MiB cap", n);
}

/* QA (session 28): the recording directory renamed while the app ran
 * (`mv DIR DIR.moved`). Its clean end looked for its ring and session
 * files under the old name, so they stayed in DIR.moved and verify took
 * them for a dead writer's. The session follows its file: nothing of it
 * is left, and the moved directory reads back every event. */
static void test_directory_renamed_while_recording(void **state) {
  char moved[2200], c;
  int fd, go[2], st;
  pid_t pid;
  (void)state;

  assert_int_equal(pipe(go), 0);
  pid = fork_recording(&fd, 64 << 10);
  snprintf(moved, sizeof moved, "%s.moved", tl_dir);
  if (pid == 0) {
    for (uint32_t i = 0; i < 100; i++)
      if (stkr_event(&g_site, &i, sizeof i) != 0) _exit(3);
    if (write(fd, "e", 1) != 1 || read(go[0], &c, 1) != 1) _exit(4);
    if (stkr_shutdown() != 0) _exit(6); /* renamed by now */
    _exit(0);
  }
  assert_int_equal(read(fd, &c, 1), 1); /* its events are in */
  assert_int_equal(rename(tl_dir, moved), 0);
  assert_int_equal(write(go[1], "r", 1), 1);
  close(fd);
  close(go[0]);
  close(go[1]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(tl_count_files(moved, ".session"), 0);
  assert_int_equal(tl_count_files(moved, ".ring"), 0);
  assert_int_equal(rename(moved, tl_dir), 0); /* for the reader and cleanup */
  assert_events_exactly(100);
}

/* A process that drops its privileges after its start (a server's
 * worker: root at its start, then nobody) ends cleanly, everything
 * written, but may not remove its session and ring files from the
 * directory root made: they stay, marked ended, and are not a dead
 * writer's: recovery removes them and writes nothing (QA, session 31:
 * verify called it "a writer that died", its recovery "complete thanks to
 * recovery"). Root only. */
static void test_clean_end_without_permission(void **state) {
  stkr_recover_stats st;
  ino_t inos[2];
  int fd;
  pid_t pid;
  (void)state;

  if (geteuid() != 0)
    skip();
  pid = fork_recording(&fd, 64 << 10);
  if (pid == 0) {
    for (uint32_t i = 0; i < 100; i++)
      if (stkr_event(&g_site, &i, sizeof i) != 0) _exit(3);
    if (stkr_flush() != 0) _exit(4);
    inos[0] = ino_of_suffix(".session"); /* while it may list tl_dir */
    inos[1] = ino_of_suffix(".ring");
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(7);
    if (write(fd, inos, sizeof inos) != (ssize_t)sizeof inos) _exit(5);
    if (stkr_shutdown() != 0) _exit(6);
    _exit(0);
  }
  reap_child(pid, fd, inos, sizeof inos, false);
  assert_int_equal(tl_count_files(tl_dir, ".session"), 1); /* refused */
  assert_int_equal(stkr_recover_dir(tl_dir, &(stkr_recover_opts){.dry_run = true}, &st), 0);
  assert_int_equal(st.sessions_ended_clean, 1);
  assert_int_equal(st.sessions_dead + st.sessions_recovered + st.events, 0);
  assert_int_equal(stkr_recover_dir(tl_dir, NULL, &st), 0);
  assert_int_equal(st.sessions_ended_clean, 1);
  assert_int_equal(st.sessions_recovered + st.segments_written, 0);
  assert_int_equal(tl_count_files(tl_dir, ".session"), 0);
  assert_int_equal(tl_count_files(tl_dir, ".ring"), 0);
  assert_events_exactly(100);
}

TL_TEST_MAIN_EACH("ringpool", tl_make_dir, tl_rm_dir,
                  test_clean_end_pools_and_next_takes,
                  test_killed_after_taking_recovers_exactly,
                  test_garbage_in_the_pool_never_leaks,
                  test_session_named_when_locked,
                  test_rings_of_two_sizes_pooled, test_pool_within_the_cap,
                  test_directory_renamed_while_recording,
                  test_clean_end_without_permission)
