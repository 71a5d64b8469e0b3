/*
 * test-faults.c: the recorder inside an app whose environment fails it,
 * beyond test-flush.c / test-flush-segment.c (RLIMIT_FSIZE, a removed
 * directory, a file in its place, fork in a quiet process):
 *
 *   - a really full disk (a 128 KiB tmpfs, grown afterwards);
 *   - the output directory made read-only mid-run (immutable: root ignores
 *     mode bits) and writable again;
 *   - file descriptors exhausted (RLIMIT_NOFILE) when a segment rotates;
 *   - SIGKILL of the recording process at random moments: every batch that
 *     stkr_flush() reported written before the kill is read back;
 *   - fork while other threads are pushing into their rings;
 *   - stkr_shutdown() (and stkr_init() again) while threads keep recording.
 *
 * The rule: the app never crashes or blocks, every event is either written
 * or counted as dropped (attempted == written + dropped), recording resumes
 * when the fault goes away, and what was written reads back without damage.
 * Tests needing root powers (mount, the immutable flag) skip with a reason
 * where they are refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "recorder/stkr_internal.h" /* a thread's ring size */
#include "tests/flush_util.h"
#include "tests/testlib.h"

static char g_mnt[300];   /* a tmpfs mounted by a test, or "" */
static char g_immut[400]; /* a directory made immutable, or "" */

static int set_immutable(const char *path, bool on) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), flags, rc = 0;

  if (fd < 0)
    return -errno;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    rc = -errno;
  } else {
    flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0)
      rc = -errno;
  }
  close(fd);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  stkr_shutdown(); /* in case a test failed half-way */
  if (g_immut[0]) {
    set_immutable(g_immut, false);
    g_immut[0] = '\0';
  }
  if (g_mnt[0]) {
    umount2(g_mnt, MNT_DETACH);
    g_mnt[0] = '\0';
  }
  return tl_rm_rf(tl_dir);
}

static void assert_identity(stkr_stats *out) {
  stkr_stats st;
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.dropped, st.dropped_ring_full + st.dropped_reentrant +
                                   st.dropped_write_error + st.dropped_other);
  if (st.attempted != st.written + st.dropped)
    fail_msg("attempted %llu != written %llu + dropped %llu",
             (unsigned long long)st.attempted, (unsigned long long)st.written,
             (unsigned long long)st.dropped);
  if (out)
    *out = st;
}

STKR_SITE_DEFINE(g_site, "faults.fill");

/* n events with 200 random (incompressible) payload bytes each; rings are
 * big enough that none is dropped for want of room. */
static void fill(int n) {
  uint8_t p[200];
  for (int i = 0; i < n; i++) {
    for (size_t j = 0; j < sizeof p; j++)
      p[j] = (uint8_t)rand();
    assert_int_equal(stkr_event(&g_site, p, sizeof p), 0);
  }
}

/* A fault window: `rounds` of fill(30) + stkr_flush(); returns how many
 * flushes reported -EIO. The app goes on whatever happens. */
static int rounds_with_fault(int rounds) {
  int eio = 0;
  for (int i = 0; i < rounds; i++) {
    fill(30);
    int rc = stkr_flush();
    assert_true(rc == 0 || rc == -EIO);
    eio += rc == -EIO;
  }
  return eio;
}

/* After the fault: recording resumes, the identity holds, and everything
 * written reads back with no data lost. */
static void resume_and_read_back(const char *dir, const char *fault,
                                 int eio) {
  stkr_stats st;
  tf_sum sum;
  uint64_t before;

  assert_identity(&st);
  before = st.written;
  fill(10);
  assert_int_equal(stkr_flush(), 0);
  assert_identity(&st);
  assert_int_equal(st.written, before + 10);
  assert_int_equal(stkr_shutdown(), 0);
  assert_identity(&st);
  assert_int_equal(tf_read(dir, NULL, NULL, &sum), 0);
  assert_int_equal(sum.events, st.written);
  assert_int_equal(sum.data_lost, 0);
  assert_int_equal(sum.write_error_drops, st.dropped_write_error);
  assert_true(sum.clean_end);
  print_message("%s: %d failed flushes, %llu write errors, %llu events "
                "dropped and counted, %llu written and read back\n",
                fault, eio, (unsigned long long)st.write_errors,
                (unsigned long long)st.dropped_write_error,
                (unsigned long long)st.written);
}

/* ---- disk full ---------------------------------------------------------- */

static void test_disk_full_tmpfs(void **state) {
  char rec[400];
  stkr_config cfg = {.flush_interval_ms = 3600000, .segment_bytes = 32 << 10};
  stkr_stats st;
  int eio;
  (void)state;

  snprintf(g_mnt, sizeof g_mnt, "%s/mnt", tl_dir);
  assert_int_equal(mkdir(g_mnt, 0700), 0);
  if (mount("tmpfs", g_mnt, "tmpfs", 0, "size=128k,mode=0700") != 0) {
    print_message("skipped: cannot mount a tmpfs here (%s)\n", strerror(errno));
    g_mnt[0] = '\0';
    skip();
  }
  snprintf(rec, sizeof rec, "%s/rec", g_mnt);
  cfg.dir = rec;
  assert_int_equal(stkr_init(&cfg), 0);
  /* ~6 KB per batch: 128 KiB fill up within 40 rounds. */
  eio = rounds_with_fault(40);
  assert_true(eio > 0);
  assert_identity(&st);
  assert_true(st.write_errors > 0 && st.dropped_write_error > 0);
  /* Space comes back (an admin cleaned up). */
  assert_int_equal(mount(NULL, g_mnt, NULL, MS_REMOUNT, "size=8m"), 0);
  resume_and_read_back(rec, "disk full (tmpfs)", eio);
}

/* ---- directory made read-only ------------------------------------------- */

static void test_directory_read_only_mid_run(void **state) {
  char rec[400];
  stkr_config cfg = {.flush_interval_ms = 3600000, .segment_bytes = 8 << 10};
  stkr_stats st;
  int rc, eio;
  (void)state;

  snprintf(rec, sizeof rec, "%s/rec", tl_dir);
  cfg.dir = rec;
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(rounds_with_fault(3), 0);
  /* chmod would not stop root: the immutable flag does (no new files). */
  rc = set_immutable(rec, true);
  if (rc != 0) {
    print_message("skipped: cannot set the immutable flag here (%s)\n",
                  strerror(-rc));
    skip();
  }
  snprintf(g_immut, sizeof g_immut, "%s", rec);
  eio = rounds_with_fault(10); /* 8 KiB segments: every batch rotates */
  assert_int_equal(set_immutable(rec, false), 0);
  g_immut[0] = '\0';
  assert_true(eio > 0);
  assert_identity(&st);
  assert_true(st.dropped_write_error > 0);
  resume_and_read_back(rec, "read-only directory", eio);
}

/* ---- file descriptors exhausted ----------------------------------------- */

static void test_fd_exhaustion(void **state) {
  char rec[400];
  stkr_config cfg = {.flush_interval_ms = 3600000, .segment_bytes = 8 << 10};
  struct rlimit old, lim;
  int fds[512], nfd = 0, eio;
  (void)state;

  snprintf(rec, sizeof rec, "%s/rec", tl_dir);
  cfg.dir = rec;
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(rounds_with_fault(2), 0);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  lim = old;
  lim.rlim_cur = 256;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
  while (nfd < 512) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      break;
    fds[nfd++] = fd;
  }
  /* Nothing may print while no descriptor is left: collect, then assert. */
  int saw_emfile = nfd < 512 && errno == EMFILE;
  eio = rounds_with_fault(8); /* every batch needs a new segment file */
  while (nfd > 0)
    close(fds[--nfd]);
  setrlimit(RLIMIT_NOFILE, &old);
  assert_true(saw_emfile);
  assert_true(eio > 0);
  resume_and_read_back(rec, "descriptors exhausted", eio);
}

/* ---- SIGKILL ------------------------------------------------------------ */

STKR_SITE_DEFINE(g_kill_site, "faults.kill");

/* The child: records events "k<i>" forever, flushing every 256 and then
 * telling the parent how many are on disk. */
static void __attribute__((noreturn)) kill_child(const char *dir, int wfd) {
  stkr_config cfg = {.dir = dir, .flush_interval_ms = 5,
                     .ring_bytes = 4 << 20, .segment_bytes = 64 << 10};
  uint64_t i;

  if (stkr_init(&cfg) != 0)
    _exit(3);
  for (i = 0;; i++) {
    char p[24];
    int len = snprintf(p, sizeof p, "k%llu", (unsigned long long)i);

    if (stkr_event(&g_kill_site, p, (size_t)len) != 0)
      _exit(4); /* 4 MiB rings, flushed every 256: never full */
    if (i % 256 == 255) {
      stkr_stats st;
      uint64_t msg[2];

      if (stkr_flush() != 0)
        _exit(5);
      stkr_stats_get(&st);
      msg[0] = st.written;
      msg[1] = st.dropped;
      if (write(wfd, msg, sizeof msg) != (ssize_t)sizeof msg)
        _exit(6);
    }
  }
}

typedef struct kill_seen {
  uint8_t *bits;
  uint64_t n, max_i, bad;
} kill_seen;

static void on_kill_event(void *arg, const tf_ev *e) {
  kill_seen *s = arg;
  char buf[32];
  unsigned long long i;

  memcpy(buf, e->payload, e->payload_len < 31 ? e->payload_len : 31);
  buf[e->payload_len < 31 ? e->payload_len : 31] = '\0';
  if (sscanf(buf, "k%llu", &i) != 1 || i >= s->n || (s->bits[i / 8] >> (i % 8)) & 1) {
    s->bad++;
    return;
  }
  s->bits[i / 8] |= (uint8_t)(1u << (i % 8));
  if (i > s->max_i)
    s->max_i = i;
}

typedef struct warn_kinds {
  unsigned truncated, other_lost;
} warn_kinds;

static void count_kinds(void *arg, const stkr_warning *w) {
  warn_kinds *k = arg;
  if (w->kind == STKR_WARN_TRUNCATED)
    k->truncated++;
  else if (w->data_lost)
    k->other_lost++;
}

static void test_sigkill_flushed_batches_readable(void **state) {
  const int trials = 12;
  unsigned torn = 0;
  uint64_t total_flushed = 0, total_read = 0;
  (void)state;

  srand(99);
  for (int t = 0; t < trials; t++) {
    char dir[400];
    int pfd[2], status;
    uint64_t msg[2], flushed = 0, reports = 0;
    pid_t pid;

    snprintf(dir, sizeof dir, "%s/kill%d", tl_dir, t);
    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(pfd[0]);
      kill_child(dir, pfd[1]);
    }
    close(pfd[1]);
    /* Let it record for 2..40 flush reports, then kill it mid-stride. */
    uint64_t want = 2 + (uint64_t)(rand() % 39);
    while (reports < want && read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg) {
      assert_int_equal(msg[1], 0);
      flushed = msg[0];
      reports++;
    }
    {
      struct timespec ts = {0, (long)(rand() % 3000) * 1000};
      nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Reports the child wrote before dying count too. */
    while (read(pfd[0], msg, sizeof msg) == (ssize_t)sizeof msg)
      flushed = msg[0];
    close(pfd[0]);
    assert_true(flushed >= 512);

    /* Every event before the last completed flush reads back, in full. */
    {
      kill_seen s = {calloc(1 << 20, 1), 8u << 20, 0, 0};
      warn_kinds k = {0, 0};
      stkr_reader_opts o = {.warn = count_kinds, .warn_arg = &k};
      stkr_reader *r;
      stkr_event_view ev;
      uint64_t events = 0;
      int rc;

      assert_int_equal(stkr_reader_open(dir, &o, &r), 0);
      while ((rc = stkr_reader_next(r, &ev)) == 1) {
        tf_ev e;
        memset(&e, 0, sizeof e);
        e.payload_len = ev.payload_len < sizeof e.payload ? ev.payload_len
                                                          : sizeof e.payload;
        memcpy(e.payload, ev.payload, e.payload_len);
        on_kill_event(&s, &e);
        events++;
      }
      assert_int_equal(rc, 0);
      assert_false(stkr_reader_process(r, 0)->clean_end);
      stkr_reader_free(r);
      assert_int_equal(s.bad, 0);
      for (uint64_t i = 0; i < flushed; i++)
        if (!((s.bits[i / 8] >> (i % 8)) & 1))
          fail_msg("kill %d: event %llu flushed before the kill is missing",
                   t, (unsigned long long)i);
      /* The only damage a kill may leave: one cut-off batch at the end. */
      assert_int_equal(k.other_lost, 0);
      assert_true(k.truncated <= 1);
      torn += k.truncated;
      total_flushed += flushed;
      total_read += events;
      free(s.bits);
    }
  }
  print_message("SIGKILL: %d kills, %llu events flushed before them, %llu "
                "read back (later ones too), %u torn last batches\n",
                trials, (unsigned long long)total_flushed,
                (unsigned long long)total_read, torn);
}

/* ---- threads keep recording: fork, shutdown ------------------------------ */

STKR_SITE_DEFINE(g_busy_site, "faults.busy");
static _Atomic int g_stop;
typedef struct busy_count {
  uint64_t ok, eagain, notconn, other;
} busy_count;

static void *busy_producer(void *arg) {
  busy_count *c = arg;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    int rc = stkr_event(&g_busy_site, "busy", 4);
    if (rc == 0)
      c->ok++;
    else if (rc == -EAGAIN)
      c->eagain++;
    else if (rc == -ENOTCONN)
      c->notconn++;
    else
      c->other++;
  }
  return NULL;
}

#define BUSY 3

static void start_busy(pthread_t *th, busy_count *c) {
  atomic_store(&g_stop, 0);
  memset(c, 0, BUSY * sizeof *c);
  for (int k = 0; k < BUSY; k++)
    assert_int_equal(pthread_create(&th[k], NULL, busy_producer, &c[k]), 0);
}

static busy_count stop_busy(pthread_t *th, busy_count *c) {
  busy_count sum = {0, 0, 0, 0};
  atomic_store(&g_stop, 1);
  for (int k = 0; k < BUSY; k++) {
    pthread_join(th[k], NULL);
    sum.ok += c[k].ok;
    sum.eagain += c[k].eagain;
    sum.notconn += c[k].notconn;
    sum.other += c[k].other;
  }
  return sum;
}

/* Wait for pid at most `ms`; a child that hangs is killed and fails. */
static int wait_bounded(pid_t pid, int ms) {
  int status;
  for (int i = 0; i < ms; i++) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    usleep(1000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

static void test_fork_while_rings_in_use(void **state) {
#if defined(__SANITIZE_THREAD__)
  /* Follow mode's child mallocs (it starts a worker), and here other
   * threads of the parent malloc at any moment (the worker). TSan refuses
   * to start threads in such a child: TSan checks disable mode. GCC 12's
   * ASan does not lock its allocator around fork either (a child forked
   * while the worker held a size-class mutex blocked forever in its first
   * malloc, 2-6% of runs); in ASan builds fork's prepare handler now waits
   * for the worker to be idle (flush/worker.h), so ASan checks follow
   * mode as the plain build does. */
  const stkr_fork_mode mode = STKR_FORK_DISABLE;
#else
  const stkr_fork_mode mode = STKR_FORK_FOLLOW;
#endif
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 10,
                     .fork_mode = mode};
  pthread_t th[BUSY];
  busy_count c[BUSY], sum;
  stkr_stats st;
  tf_sum ts;
  const int forks = 20;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  start_busy(th, c);
  usleep(20000);
  for (int f = 0; f < forks; f++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      /* Only this thread exists here; the producers' rings are gone. */
      int bad = 0;
      if (mode == STKR_FORK_FOLLOW) {
        stkr_stats cs;
        for (int i = 0; i < 100; i++)
          bad |= stkr_event(&g_site, "child", 5) != 0;
        bad |= (stkr_flush() != 0) << 1;
        bad |= (stkr_stats_get(&cs) != 0 || cs.attempted != 100 ||
                cs.written != 100)
               << 2;
        bad |= (stkr_shutdown() != 0) << 3;
      } else {
        bad |= stkr_event(&g_site, "child", 5) != -ENOTCONN;
      }
      _exit(bad);
    }
    int rc = wait_bounded(pid, 30000);
    if (rc != 0)
      fail_msg("fork %d: child %s %d", f, rc < 0 ? "hung:" : "status", rc);
    usleep(2000);
  }
  sum = stop_busy(th, c);
  assert_int_equal(stkr_flush(), 0);
  assert_identity(&st);
  assert_int_equal(sum.other, 0);
  assert_int_equal(sum.ok + sum.eagain, st.attempted);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(tf_read(tl_dir, NULL, NULL, &ts), 0);
  assert_int_equal(ts.data_lost, 0);
  assert_int_equal(ts.events,
                   st.written + (mode == STKR_FORK_FOLLOW ? 100u * forks : 0));
  print_message("fork: %d forks while %d threads recorded (%llu events); "
                "children %s\n",
                forks, BUSY, (unsigned long long)st.written,
                mode == STKR_FORK_FOLLOW ? "recorded 100 events each"
                                         : "disabled");
}

static void test_shutdown_while_threads_record(void **state) {
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 5};
  pthread_t th[BUSY];
  busy_count c[BUSY], sum;
  uint64_t written = 0, attempted = 0, late = 0;
  const int cycles = 20;
  tf_sum ts;
  (void)state;

  start_busy(th, c);
  for (int i = 0; i < cycles; i++) {
    stkr_stats st;
    assert_int_equal(stkr_init(&cfg), 0);
    usleep(5000 + (useconds_t)(rand() % 10000));
    assert_int_equal(stkr_shutdown(), 0); /* producers still going */
    assert_int_equal(stkr_stats_get(&st), 0);
    /* An event that passed the state check just before shutdown is
     * either seen by the shutdown's quiesce (and drained) or refused: the
     * Dekker pair busy/state in stkr_event and stkr__recorder_stop. */
    if (st.attempted != st.written + st.dropped)
      late += st.attempted - (st.written + st.dropped);
    assert_int_equal(st.attempted, st.written + st.dropped);
    written += st.written;
    attempted += st.attempted;
    usleep(2000); /* they see -ENOTCONN now */
  }
  sum = stop_busy(th, c);
  assert_int_equal(sum.other, 0);
  assert_true(sum.notconn > 0);
  /* Every call that was not refused was counted by exactly one session:
   * shutdown waits out events in flight, so stkr_init() never zeroes the
   * counters of a thread inside stkr_event(). */
  assert_int_equal(sum.ok + sum.eagain, attempted);
  assert_int_equal(tf_read(tl_dir, NULL, NULL, &ts), 0);
  assert_int_equal(ts.data_lost, 0);
  assert_int_equal(ts.events, written);
  print_message("shutdown: %d init/shutdown cycles under %d recording "
                "threads: %llu events attempted, %llu written, %llu refused "
                "while stopped, %llu pushed after the final drain\n",
                cycles, BUSY, (unsigned long long)attempted,
                (unsigned long long)written, (unsigned long long)sum.notconn,
                (unsigned long long)late);
}

/* A thread pool that churns: waves of short-lived threads (10 events
 * each, then exit), 6,000 threads in all, at most 20 alive; then 10,000
 * threads of 3 events, at most 128 alive. An exited thread's ring is
 * charged until the worker reaps it; with the default 200 ms interval the
 * charge of thousands of exited threads filled the cap, and most new
 * threads were refused (QA, session 17: 78,390 of 100,000 events dropped
 * as dropped_other). A thread exiting past the first tier now wakes the
 * worker to reap. At 64 and 128 alive that was not enough (QA, session
 * 29: 31% and 48% dropped): a thread was reaped a pass after
 * its last records were read, each reap unlinked a ring file while new
 * threads made new ones (the ring cache held 32), and the unlinks stalled
 * the passes. Now a thread is reaped in the pass that writes its last
 * records, and the cache holds up to 128 rings (8 MiB). */
static atomic_int g_churn_bad;

static void *churn_thread(void *arg) {
  int events = (int)(intptr_t)arg;
  for (int i = 0; i < events; i++) {
    int rc = stkr_event(&g_site, "churn", 5);
    if (rc != 0 && rc != -EAGAIN && rc != -ENOMEM) atomic_store(&g_churn_bad, rc);
  }
  return NULL;
}

static void test_thread_churn(void **state) {
  /* Threads alive at a time, threads in all, events each. */
  static const int runs[][3] = {{20, 6000, 10}, {128, 10000, 3}};
  (void)state;

  for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
    stkr_config cfg = {.dir = tl_dir};
    stkr_stats st;
    pthread_t th[128];
    int width = runs[k][0], waves = runs[k][1] / width, events = runs[k][2];

    assert_int_equal(stkr_init(&cfg), 0);
    for (int w = 0; w < waves; w++) {
      for (int i = 0; i < width; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn_thread,
                                        (void *)(intptr_t)events),
                         0);
      for (int i = 0; i < width; i++) pthread_join(th[i], NULL);
    }
    assert_int_equal(stkr_flush(), 0);
    assert_int_equal(stkr_stats_get(&st), 0);
    assert_int_equal(stkr_shutdown(), 0);
    assert_int_equal(atomic_load(&g_churn_bad), 0);
    assert_int_equal(st.attempted, (uint64_t)waves * width * events);
    assert_int_equal(st.attempted, st.written + st.dropped);
    print_message("churn: %d threads, %d alive, %llu events: %llu written, "
                  "%llu dropped (%llu for want of ring memory)\n",
                  waves * width, width, (unsigned long long)st.attempted,
                  (unsigned long long)st.written,
                  (unsigned long long)st.dropped,
                  (unsigned long long)st.dropped_other);
    /* Loose on purpose (a loaded machine delays the worker's passes):
     * now none, or up to 12% with five such tests at once on two cores;
     * before, 78% at 20 alive and 45-57% at 128. */
    assert_true(st.dropped_other * 4 < st.attempted);
  }
}

/* The descriptors below STKR_FD_MIN (10) open now, as a bit mask. */
static unsigned low_fds(void) {
  unsigned m = 0;
  for (int fd = 3; fd < 10; fd++)
    if (fcntl(fd, F_GETFD) != -1) m |= 1u << fd;
  return m;
}

/* The forked child (tl_run_child): 0, or which check failed (2-7). */
static int inproc_files_child(void *arg) {
  stkr_config cfg = {.dir = tl_dir, .symbolize = STKR_SYMBOLIZE_INPROC};
  unsigned before = low_fds();
  int fd;
  (void)arg;
  unsetenv("STACKREC_SYMBOLIZE");
  if (stkr_init(&cfg) != 0) return 2;
  if (stkr_event(&g_site, "x", 1) != 0 || stkr_flush() != 0) return 3;
  if (low_fds() != before) {
    fprintf(stderr, "low descriptors 0x%x before, 0x%x after a flush\n",
            before, low_fds());
    return 4;
  }
  for (fd = 3; fd < 10; fd++) close(fd);
  fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd != 3) return 5;
  if (stkr_shutdown() != 0) return 6;
  if (write(fd, "x", 1) != 1) return 7; /* still the app's */
  return 0;
}

/* Inproc symbolization (the library's default) keeps the files libdw is
 * given open for the whole recording: the executable was at 3, the
 * lowest free number, so an app that closes 3-9 (a daemon) and opens a
 * file of its own got 3 back, and stkr_shutdown closed the app's file
 * (QA, session 17). Now they sit at the recorder's high numbers. */
static void test_inproc_files_not_low(void **state) {
  (void)state;
  tl_run_child(inproc_files_child, NULL);
}

/* All open descriptors. */
static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 65536; fd++) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

static _Atomic int g_cancel_sent;

/* Its first event with a cancel pending: the attach's file opens are
 * cancellation points. */
static void *cancelled_thread(void *arg) {
  int *rc = arg;
  (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  while (!atomic_load(&g_cancel_sent)) usleep(1000);
  (void)pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  *rc = stkr_event(&g_site, "c", 1);
  pthread_testcancel();
  return NULL;
}

/* A thread cancelled in its first event: the attach ends (cancellation
 * held off), the event is recorded, the thread is cancelled after it.
 * Before: cancelled inside the ring file's open, it left a descriptor and
 * a half-made ring file for good (QA, session 23: 13-56 descriptors
 * after shutdown instead of 5). */
static void test_thread_cancelled_in_first_event(void **state) {
  stkr_config cfg = {.dir = tl_dir};
  stkr_stats st;
  int before = open_fds(), rc = -1000;
  void *ret;
  pthread_t th;
  char cache[400];
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  for (int i = 0; i < 5; i++) {
    atomic_store(&g_cancel_sent, 0);
    assert_int_equal(pthread_create(&th, NULL, cancelled_thread, &rc), 0);
    assert_int_equal(pthread_cancel(th), 0);
    atomic_store(&g_cancel_sent, 1);
    assert_int_equal(pthread_join(th, &ret), 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    assert_int_equal(rc, 0);
  }
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.written, 5);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(open_fds(), before);
  snprintf(cache, sizeof cache, "%s/.stackrec-cache", tl_dir);
  assert_true(tl_count_files(cache, ".ring") <= 0); /* pool-*: no suffix */
}

/* A thread living across sessions gets each session's ring size: it kept
 * the first one's (QA, session 23: with 16 MiB configured anew, a thread
 * of the first session dropped ~90% as ring full). Both ways. */
static void test_ring_size_follows_the_session(void **state) {
  static const size_t sizes[] = {256u << 10, 4u << 20, 256u << 10};
  (void)state;

  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    stkr_config cfg = {.dir = tl_dir, .ring_bytes = sizes[i]};
    assert_int_equal(stkr_init(&cfg), 0);
    assert_int_equal(stkr_event(&g_site, "r", 1), 0);
    assert_true((uintptr_t)stkr__tls > STKR__THREAD_SENTINEL_MAX);
    if (stkr__ring_size(&stkr__tls->ring) != sizes[i])
      fail_msg("session %zu: a %llu-byte ring, configured %zu", i,
               (unsigned long long)stkr__ring_size(&stkr__tls->ring),
               sizes[i]);
    assert_int_equal(stkr_shutdown(), 0);
  }
}

static pthread_barrier_t g_life_bar;

/* One side of test_init_shutdown_raced: init, then shutdown, each at the
 * moment the other side calls it; the results into rc[0], rc[1]. */
static void *life_side(void *arg) {
  int *rc = arg;
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  pthread_barrier_wait(&g_life_bar);
  rc[0] = stkr_init(&cfg);
  pthread_barrier_wait(&g_life_bar);
  rc[1] = stkr_shutdown();
  return NULL;
}

/* stkr_init, then stkr_shutdown, on two threads at once: one of each
 * succeeds, the other gets -EALREADY / -ENOTCONN (QA, session 23: both
 * inits launched a worker, both shutdowns freed one: SIGSEGV or a hang in
 * 5 of 5 runs of 200). */
static void test_init_shutdown_raced(void **state) {
  (void)state;
  assert_int_equal(pthread_barrier_init(&g_life_bar, NULL, 2), 0);
  for (int round = 0; round < 50; round++) {
    int a[2], b[2];
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, life_side, a), 0);
    life_side(b);
    pthread_join(th, NULL);
    if (!((a[0] == 0 && b[0] == -EALREADY) || (b[0] == 0 && a[0] == -EALREADY)))
      fail_msg("round %d: init %d and %d", round, a[0], b[0]);
    if (!((a[1] == 0 && b[1] == -ENOTCONN) || (b[1] == 0 && a[1] == -ENOTCONN)))
      fail_msg("round %d: shutdown %d and %d", round, a[1], b[1]);
  }
  pthread_barrier_destroy(&g_life_bar);
}

int main(void) {
  /* Symbolization is not under test here and costs seconds per new image
   * under sanitizers (the forked children each start a worker). */
  setenv("STACKREC_SYMBOLIZE", "none", 1);
  return TL_RUN_GROUP(
      "faults", NULL, NULL,
      TL_CASES(tl_make_dir, teardown, test_disk_full_tmpfs,
               test_directory_read_only_mid_run, test_fd_exhaustion,
               test_sigkill_flushed_batches_readable,
               test_fork_while_rings_in_use,
               test_shutdown_while_threads_record, test_thread_churn,
               test_thread_cancelled_in_first_event,
               test_ring_size_follows_the_session, test_init_shutdown_raced,
               test_inproc_files_not_low));
}
