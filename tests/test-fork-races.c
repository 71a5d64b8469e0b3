/*
 * test-fork-races.c: fork() while other threads of the app use the
 * recorder (QA, session 33). A child forked while another thread ran
 * stkr_init again, its threads' rings being swapped (reback, under the
 * reap lock), died of SIGSEGV in the recorder's atfork child handler,
 * which unmapped a ring the parent had just unmapped: 1 child in ~60-1400
 * forks with 11 recording threads. fork's prepare handler now takes the
 * reap lock. A stress of up to 4 s. QA's program, the same loops linked
 * with the CMake-built library, lost a child in 82-207 forks without the
 * fix, every run; this Bazel build of the test did not show it in 4 s
 * (-c fastbuild or opt, ~2 000 forks): it guards the path, and says how
 * many forks and sessions it saw, but has not been seen to fail.
 * Also: a followed child's threads that record at once (QA, session 39).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stackrec.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "fork.race");

static _Atomic int g_stop, g_inits, g_init_err;

static void *recording(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    (void)stkr_event(&g_site, "r", 1);
    usleep(100);
  }
  return NULL;
}

static void *reinit(void *arg) {
  stkr_config cfg;
  (void)arg;
  stkr_config_init(&cfg);
  cfg.dir = tl_dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  while (!atomic_load(&g_stop)) {
    int err = stkr_init(&cfg);
    if (err == 0) {
      atomic_fetch_add(&g_inits, 1);
      usleep(50);
      (void)stkr_shutdown();
    } else {
      atomic_store(&g_init_err, err);
    }
  }
  return NULL;
}

static void test_fork_while_another_thread_starts(void **state) {
  enum { RECORDERS = 11 };
  pthread_t rec[RECORDERS], ctl;
  struct timespec t0, t;
  int forks = 0, killed = 0, sig = 0;
  double slowest = 0;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  /* TSan's runtime and forks of a multi-threaded process: not tried. */
  fprintf(stderr, "TSan: forks beside threads not tried: skipped\n");
  skip();
#endif
  atomic_store(&g_stop, 0);
  for (int i = 0; i < RECORDERS; i++)
    assert_int_equal(pthread_create(&rec[i], NULL, recording, NULL), 0);
  assert_int_equal(pthread_create(&ctl, NULL, reinit, NULL), 0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    struct timespec f0, f1;
    int st;
    clock_gettime(CLOCK_MONOTONIC, &f0);
    pid_t c = fork();
    if (c == 0)
      _exit(0);
    assert_true(c > 0);
    clock_gettime(CLOCK_MONOTONIC, &f1);
    if ((double)(f1.tv_sec - f0.tv_sec) + (f1.tv_nsec - f0.tv_nsec) / 1e9 >
        slowest)
      slowest = (double)(f1.tv_sec - f0.tv_sec) +
                (f1.tv_nsec - f0.tv_nsec) / 1e9;
    assert_int_equal(waitpid(c, &st, 0), c);
    forks++;
    if (WIFSIGNALED(st)) {
      killed++;
      sig = WTERMSIG(st);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while (t.tv_sec - t0.tv_sec < 4 && killed == 0);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < RECORDERS; i++)
    pthread_join(rec[i], NULL);
  pthread_join(ctl, NULL);
  (void)stkr_shutdown();
  fprintf(stderr, "%d forks, %d sessions started (last error %d), slowest "
          "fork %.3f s\n", forks, atomic_load(&g_inits),
          atomic_load(&g_init_err), slowest);
  if (killed != 0)
    fail_msg("%d of %d children killed by signal %d", killed, forks, sig);
  /* A fork waits for a pass's scan and the reap lock, each briefly: one
   * that waited out a handler's 2 s bound met a lock taken in the wrong
   * order (review, session 33: the reap lock before the scan lock). */
  assert_true(slowest < 1.9);
  assert_true(forks > 0);
}

/* Sites another thread registers (first uses) while the main thread
 * forks: a site whose claim was in flight at the fork stayed CLAIMING in
 * the child for good, its claimer gone; each of its events there was
 * dropped after a spin of 2-6 ms (QA, session 33: in every run of 4 000
 * registrations). A child now finds no site claiming (site.c, g_claims),
 * and records at the site registered last. Exit 3: a site still
 * claiming; 4: an event refused. */
enum { N_SITES = 4000 };
static stkr_site g_sites[N_SITES];
static char g_site_names[N_SITES][24];
static _Atomic int g_registered;

static void *registering(void *arg) {
  (void)arg;
  for (int i = 0; i < N_SITES && !atomic_load(&g_stop); i++) {
    atomic_store(&g_registered, i);
    (void)stkr_site_register(&g_sites[i]);
  }
  atomic_store(&g_stop, 1);
  return NULL;
}

static void test_fork_while_a_site_registers(void **state) {
  stkr_config cfg;
  pthread_t reg;
  int forks = 0;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  fprintf(stderr, "TSan: forks beside threads not tried: skipped\n");
  skip();
#endif
  for (int i = 0; i < N_SITES; i++) {
    snprintf(g_site_names[i], sizeof g_site_names[i], "fork.site%d", i);
    g_sites[i] = (stkr_site)STKR_SITE_INIT(g_site_names[i]);
  }
  stkr_config_init(&cfg);
  cfg.dir = tl_dir;
  cfg.fork_mode = STKR_FORK_FOLLOW;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  assert_int_equal(stkr_init(&cfg), 0);
  atomic_store(&g_stop, 0);
  assert_int_equal(pthread_create(&reg, NULL, registering, NULL), 0);
  while (!atomic_load(&g_stop)) {
    int st;
    pid_t c = fork();
    if (c == 0) {
      int last = atomic_load(&g_registered);
      for (int i = 0; i <= last; i++)
        if (__atomic_load_n(&g_sites[i].id, __ATOMIC_RELAXED) == 0xFFFFFFFFu)
          _exit(3);
      _exit(stkr_event(&g_sites[last], "x", 1) == 0 ? 0 : 4);
    }
    assert_true(c > 0);
    assert_int_equal(waitpid(c, &st, 0), c);
    forks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail_msg("child %d of %d: status %#x (3: a site still claiming, 4: "
               "an event refused)", forks, forks, st);
  }
  pthread_join(reg, NULL);
  assert_int_equal(stkr_shutdown(), 0);
  fprintf(stderr, "%d forks during %d registrations\n", forks, N_SITES);
  assert_true(forks > 0);
}

/* A followed child's threads that record at once: the first starts the
 * child's recording, the others wait for that start (QA, session 39: 3
 * of 4 threads got -ENOTCONN for all of their 2 000 events, counted
 * nowhere; verify said complete). Each child: 4 threads x 500 events from
 * a barrier, every one recorded. */
#define START_THREADS 4
#define START_EVENTS 500
static pthread_barrier_t g_start_bar;
static _Atomic int g_refused;

static void *start_together(void *arg) {
  (void)arg;
  pthread_barrier_wait(&g_start_bar);
  for (int i = 0; i < START_EVENTS; i++)
    if (stkr_event(&g_site, "s", 1) != 0)
      atomic_fetch_add(&g_refused, 1);
  return NULL;
}

static void test_child_threads_start_together(void **state) {
  stkr_config cfg;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  fprintf(stderr, "TSan: threads in a forked child not tried: skipped\n");
  skip();
#endif
  stkr_config_init(&cfg);
  cfg.dir = tl_dir;
  cfg.fork_mode = STKR_FORK_FOLLOW;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  assert_int_equal(stkr_init(&cfg), 0);
  for (int k = 0; k < 5; k++) {
    int st;
    pid_t c = fork();
    if (c == 0) {
      pthread_t t[START_THREADS];
      stkr_stats s;
      pthread_barrier_init(&g_start_bar, NULL, START_THREADS);
      for (int i = 0; i < START_THREADS; i++)
        pthread_create(&t[i], NULL, start_together, NULL);
      for (int i = 0; i < START_THREADS; i++)
        pthread_join(t[i], NULL);
      if (stkr_flush() != 0 || stkr_stats_get(&s) != 0) _exit(5);
      if (atomic_load(&g_refused) != 0) {
        fprintf(stderr, "child: %d events refused\n", atomic_load(&g_refused));
        _exit(6);
      }
      if (s.attempted != START_THREADS * START_EVENTS ||
          s.written + s.dropped != s.attempted) {
        fprintf(stderr, "child: attempted %llu written %llu dropped %llu\n",
                (unsigned long long)s.attempted,
                (unsigned long long)s.written, (unsigned long long)s.dropped);
        _exit(7);
      }
      _exit(stkr_shutdown() == 0 ? 0 : 8);
    }
    assert_true(c > 0);
    assert_int_equal(waitpid(c, &st, 0), c);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail_msg("child %d: status %#x (6: events refused, 7: counts)", k, st);
  }
  assert_int_equal(stkr_shutdown(), 0);
}

TL_TEST_MAIN_EACH("fork-races", tl_make_dir, tl_rm_dir,
                  test_fork_while_another_thread_starts,
                  test_fork_while_a_site_registers,
                  test_child_threads_start_together)
