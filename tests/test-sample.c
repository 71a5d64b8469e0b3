/*
 * test-sample.c: stkr_thread_sample(), sampling another thread of the
 * process (issue 12). Threads parked in known call chains
 * (sample_fixture.h: poll, pause, a futex wait, a busy loop) are sampled
 * from the main thread; the recording is read back and each sample's
 * function names must be exactly the chain, attributed to the sampled
 * thread. A busy thread sampled 10,000 times computes the same checksum
 * as without sampling. A thread that blocks the signal, one that exited
 * and an app handler on the signal give their documented errors, in
 * bounded time, counted. Signals on our number from another process never
 * take or lose a request.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/sample_fixture.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "test.sample");
STKR_SITE_DEFINE(g_stop_site, "test.stop");

static char g_dir[256];

/* Start recording into a fresh g_dir. */
static int start_rec(void) {
  return sf_start_rec(g_dir, sizeof g_dir, "sample", 1u << 20);
}

/* Runs before anything in this process set the sampling signal up (the
 * setup is once per process): in forked children, the app's own handler
 * on the signal makes registration fail with -EBUSY, and a malformed
 * STACKREC_SAMPLE_SIGNAL with -EINVAL. */
static void app_handler(int sig) { (void)sig; }

static int child_register(const char *env, bool app_handler_first) {
  pid_t pid = fork();
  int st;

  if (pid == 0) {
    stkr_thread_handle h;
    int err;
    if (env != NULL)
      setenv("STACKREC_SAMPLE_SIGNAL", env, 1);
    if (app_handler_first)
      signal(SIGRTMAX - 7, app_handler);
    if ((err = start_rec()) != 0)
      _exit(err == -EINVAL ? 200 : 100); /* stkr_init refused: 200 */
    err = stkr_thread_self(&h);
    stkr_shutdown();
    _exit(-err);
  }
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? -WEXITSTATUS(st) : -1000;
}

static void test_setup_refusals(void **state) {
  (void)state;
  assert_int_equal(child_register(NULL, true), -EBUSY);
  /* A malformed STACKREC_SAMPLE_SIGNAL: stkr_init refuses it (QA, session
   * 23: it started, and stkr_thread_self failed later, silently). */
  assert_int_equal(child_register("RTMAX-99", false), -200);
  assert_int_equal(child_register("banana", false), -200);
  assert_int_equal(child_register("RTMIN+2", true), 0); /* another number */
  assert_int_equal(child_register(NULL, false), 0);
}

static void test_exact_chains(void **state) {
  sf_thread_arg th[SF_KINDS];
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int seen[SF_KINDS] = {0}, k, i;
  char got[512];

  (void)state;
  assert_int_equal(start_rec(), 0);
  for (k = 0; k < SF_KINDS; k++)
    assert_int_equal(sf_start(&th[k], k), 0);
  usleep(50000); /* let each reach its park */
  for (i = 0; i < 5; i++) {
    for (k = 0; k < SF_KINDS; k++) {
      int err = stkr_thread_sample(atomic_load(&th[k].handle), &g_site,
                                   sf_kind_name[k], strlen(sf_kind_name[k]),
                                   5000);
      assert_int_equal(err, 0);
    }
    usleep(5000);
  }
  for (k = 0; k < SF_KINDS; k++)
    sf_stop(&th[k], &g_stop_site);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(g_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    if (strcmp(ev.site, "test.sample") != 0)
      continue;
    for (k = 0; k < SF_KINDS; k++)
      if (ev.payload_len == strlen(sf_kind_name[k]) &&
          memcmp(ev.payload, sf_kind_name[k], ev.payload_len) == 0)
        break;
    assert_true(k < SF_KINDS);
    assert_non_null(ev.frames);
    if (!sf_event_chain(&ev, sf_chain[k], 5, got, sizeof got) &&
        !sf_caught_in_tsan(&ev))
      fail_msg("%s: got \"%s\"", sf_kind_name[k], got);
    /* The sampled thread's event, not the sampler's. */
    assert_int_not_equal(ev.tid, (uint64_t)syscall(SYS_gettid));
    seen[k]++;
  }
  stkr_reader_free(r);
  for (k = 0; k < SF_KINDS; k++)
    assert_int_equal(seen[k], 5);
}

/* A busy thread sampled 10,000 times: every sample answered (recorded, or
 * dropped and counted when its ring was full), and the computation it was
 * interrupted in gives the same checksum as computed here unsampled. */
static void test_busy_thread_sampled_10000_times(void **state) {
  sf_thread_arg th;
  stkr_sample_stats before, after;
  stkr_stats st;
  uint64_t x = 88172645463325252ull, n, i, ok = 0, dropped = 0;

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  assert_int_equal(sf_start(&th, SF_BUSY), 0);
  for (i = 0; i < 10000; i++) {
    int err = stkr_thread_sample(atomic_load(&th.handle), &g_site, "busy", 4,
                                 5000);
    if (err == 0)
      ok++;
    else if (err == -EAGAIN)
      dropped++;
    else
      fail_msg("sample %llu: %s", (unsigned long long)i, stkr_strerror(err));
  }
  sf_stop(&th, &g_stop_site);
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_int_equal(after.recorded - before.recorded, ok);
  assert_int_equal(after.dropped - before.dropped, dropped);
  assert_true(ok >= 5000); /* the worker drains a 1 MiB ring in time */
  n = atomic_load(&th.iters);
  for (i = 0; i < n; i++)
    x = sf_step(x);
  assert_true(n > 0);
  assert_true(x == th.sum);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, st.written + st.dropped);
  assert_true(st.written >= ok);
  assert_int_equal(stkr_shutdown(), 0);
}

static void *block_then_park(void *p) {
  sf_thread_arg *a = p;
  sigset_t set;

  sigemptyset(&set);
  sigaddset(&set, SIGRTMAX - 7);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  atomic_store(&a->reg_err, 0);
  while (!atomic_load(&a->stop))
    (void)sf_sys(SYS_futex, (long)&a->stop, FUTEX_WAIT_PRIVATE, 0, 0);
  /* Unblocked: the one signal still queued is delivered now, and finds
   * its request withdrawn. */
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  atomic_store(&a->iters, 1);
  while (atomic_load(&a->iters) != 2)
    usleep(1000);
  return NULL;
}

static void *register_then_block(void *p) {
  sf_thread_arg *a = p;
  stkr_thread_handle h;
  int err = stkr_thread_self(&h);

  atomic_store(&a->handle, h);
  if (err != 0) {
    atomic_store(&a->reg_err, err);
    return NULL;
  }
  return block_then_park(p);
}

/* A thread that blocks the signal: -EDEADLK within the timeout, counted;
 * a second request is refused without queuing another signal; once it
 * unblocks, sampling works again. A thread that blocks it at registration
 * cannot register. */
static void test_blocked_thread_reported(void **state) {
  sf_thread_arg a;
  stkr_sample_stats before, after;
  stkr_thread_handle h;
  uint64_t t0;
  int err;

  (void)state;
  assert_int_equal(start_rec(), 0);
  memset(&a, 0, sizeof a);
  atomic_store(&a.reg_err, 1);
  assert_int_equal(pthread_create(&a.thread, NULL, register_then_block, &a), 0);
  while (atomic_load(&a.reg_err) == 1)
    usleep(1000);
  assert_int_equal(atomic_load(&a.reg_err), 0);
  h = atomic_load(&a.handle);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  t0 = sf_now_ms();
  if (getenv("STKR_UNDER_QEMU") != NULL) {
    /* qemu-user keeps the guest's signal mask to itself: /proc shows the
     * host's, so a blocked thread is only seen as not answering. */
    assert_int_equal(stkr_thread_sample(h, &g_site, "blocked", 7, 100),
                     -ETIMEDOUT);
    assert_true(sf_now_ms() - t0 < 2000);
    assert_int_equal(stkr_sample_stats_get(&after), 0);
    assert_int_equal(after.timed_out - before.timed_out, 1);
  } else {
    assert_int_equal(stkr_thread_sample(h, &g_site, "blocked", 7, 100),
                     -EDEADLK);
    assert_int_equal(stkr_thread_sample(h, &g_site, "blocked", 7, 100),
                     -EDEADLK);
    assert_true(sf_now_ms() - t0 < 2000);
    assert_int_equal(stkr_sample_stats_get(&after), 0);
    assert_int_equal(after.blocked - before.blocked, 2);
  }
  atomic_store(&a.stop, 1);
  (void)sf_sys(SYS_futex, (long)&a.stop, FUTEX_WAKE_PRIVATE, 1, 0);
  while (atomic_load(&a.iters) != 1)
    usleep(1000);
  err = stkr_thread_sample(h, &g_site, "unblocked", 9, 5000);
  assert_int_equal(err, 0);
  atomic_store(&a.iters, 2);
  pthread_join(a.thread, NULL);

  /* Exited: its handle is stale. */
  t0 = sf_now_ms();
  assert_int_equal(stkr_thread_sample(h, &g_site, "gone", 4, 100), -ESRCH);
  assert_true(sf_now_ms() - t0 < 1000);
  assert_int_equal(stkr_thread_sample(0, &g_site, NULL, 0, 0), -ESRCH);
  assert_int_equal(stkr_thread_sample(h, NULL, NULL, 0, 0), -EINVAL);

  /* Blocking the signal before registering: refused at once. */
  {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMAX - 7);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    memset(&a, 0, sizeof a);
    atomic_store(&a.reg_err, 1);
    assert_int_equal(pthread_create(&a.thread, NULL, register_then_block, &a),
                     0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_join(a.thread, NULL);
    assert_int_equal(atomic_load(&a.reg_err), -EDEADLK);
  }
  /* Sampling oneself is refused (stkr_event does that). */
  assert_int_equal(stkr_thread_self(&h), 0);
  assert_int_equal(stkr_thread_sample(h, &g_site, NULL, 0, 0), -EINVAL);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_thread_sample(h, &g_site, NULL, 0, 0), -ENOTCONN);
}

/* The app takes the signal over after setup: refused (-EBUSY) at the next
 * request, counted; the app's handler is left in place and never called
 * by us. Ours back: sampling works again. */
static _Atomic int g_app_calls;
static void app_counting_handler(int sig) {
  (void)sig;
  atomic_fetch_add(&g_app_calls, 1);
}

static void test_app_handler_refused(void **state) {
  sf_thread_arg th;
  struct sigaction app, ours;
  stkr_sample_stats before, after;

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(sf_start(&th, SF_POLL), 0);
  memset(&app, 0, sizeof app);
  app.sa_handler = app_counting_handler;
  assert_int_equal(sigaction(SIGRTMAX - 7, &app, &ours), 0);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  assert_int_equal(stkr_thread_sample(atomic_load(&th.handle), &g_site, "x", 1,
                                      100),
                   -EBUSY);
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_int_equal(after.busy - before.busy, 1);
  assert_int_equal(atomic_load(&g_app_calls), 0);
  assert_int_equal(sigaction(SIGRTMAX - 7, &ours, NULL), 0);
  assert_int_equal(stkr_thread_sample(atomic_load(&th.handle), &g_site, "x", 1,
                                      5000),
                   0);
  sf_stop(&th, &g_stop_site);
  assert_int_equal(stkr_shutdown(), 0);
}

/* A registered thread that spins until told to stop, its kernel tid
 * published. */
typedef struct spin_arg {
  _Atomic uint64_t handle;
  _Atomic int tid;
  _Atomic int stop;
} spin_arg;

static void *spin_main(void *p) {
  spin_arg *a = p;
  stkr_thread_handle h;
  if (stkr_thread_self(&h) != 0) return NULL;
  atomic_store(&a->handle, h);
  atomic_store(&a->tid, (int)syscall(SYS_gettid));
  while (!atomic_load(&a->stop)) {}
  return NULL;
}

/* Another process sends our signal number to the sampled thread
 * (tgkill) all along: those signals are told apart by their sender and
 * never take, answer or lose a request of ours; every sample is answered
 * (the handler gives a request it took for a foreign signal back to our
 * own signal, queued behind it). */
static void test_foreign_signals_ignored(void **state) {
  spin_arg a = {0};
  pthread_t th;
  pid_t child, me = getpid();
  int ok = 0, st;

  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* TSan keeps one pending signal per number and thread: a foreign signal
   * and ours arriving together become one, and ours may be the one lost
   * (the real kernel queues both). */
  print_message("SKIP under TSan: it merges pending signals of one "
                "number\n");
  skip();
#endif
  assert_int_equal(start_rec(), 0);
  assert_int_equal(pthread_create(&th, NULL, spin_main, &a), 0);
  while (!atomic_load(&a.tid)) usleep(1000);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* Until the parent kills it: one signal every ~20 us. */
    for (;;) {
      if (syscall(SYS_tgkill, me, atomic_load(&a.tid), SIGRTMAX - 7) != 0)
        _exit(1);
      usleep(20);
    }
  }
  for (int i = 0; i < 3000; i++) {
    int err = stkr_thread_sample(atomic_load(&a.handle), &g_site, "f", 1,
                                 5000);
    if (err == 0)
      ok++;
    else if (err != -EAGAIN)
      fail_msg("sample %d: %s", i, stkr_strerror(err));
  }
  kill(child, SIGKILL);
  waitpid(child, &st, 0);
  assert_true(WIFSIGNALED(st)); /* it was still sending: no tgkill failed */
  atomic_store(&a.stop, 1);
  pthread_join(th, NULL);
  assert_true(ok >= 1500);
  assert_int_equal(stkr_shutdown(), 0);
}

/* A thread that registers, works a little and returns, sampled without
 * pause until it is gone: every answer is a sample (0) or "exited"
 * (-ESRCH); -ETIMEDOUT only when this machine starved it. QA: 300 such
 * threads gave 40 -EDEADLK, each after the whole timeout (the exiting
 * thread had blocked the signal), and 9 -ENOTCONN (the handler ran while
 * its recorder state was torn down), and -EAGAIN counted as a dropped
 * event. */
typedef struct short_lived {
  _Atomic stkr_thread_handle handle;
} short_lived;

static void *short_lived_main(void *arg) {
  short_lived *a = arg;
  stkr_thread_handle h;
  volatile long k = 0;
  if (stkr_thread_self(&h) != 0) return NULL;
  atomic_store(&a->handle, h);
  for (long i = 0; i < 200000; i++) k++;
  return NULL;
}

static void test_exiting_threads_answer_esrch(void **state) {
  int other = 0, esrch = 0, timed_out = 0, ok = 0;
  stkr_sample_stats before, after;
  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  for (int round = 0; round < 200; round++) {
    short_lived a = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, short_lived_main, &a), 0);
    while (!atomic_load(&a.handle)) sched_yield();
    for (;;) {
      int err = stkr_thread_sample(atomic_load(&a.handle), &g_site, "x", 1,
                                   1000);
      if (err == 0) {
        ok++;
      } else if (err == -ESRCH) {
        esrch++;
        break;
      } else if (err == -ETIMEDOUT) {
        timed_out++;
      } else {
        fprintf(stderr, "round %d: %s\n", round, stkr_strerror(err));
        other++;
        if (other > 20) break;
      }
    }
    pthread_join(th, NULL);
  }
  fprintf(stderr, "short-lived threads: %d samples, %d exited, %d timed "
                  "out, %d other\n", ok, esrch, timed_out, other);
  assert_int_equal(other, 0);
  assert_int_equal(esrch, 200);
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_int_equal(after.blocked, before.blocked);
  assert_int_equal(after.dropped, before.dropped);
  assert_int_equal(stkr_shutdown(), 0);
}

TL_TEST_MAIN("sample", NULL, NULL,
             /* First: it needs a process where the signal was never set
              * up. */
             test_setup_refusals, test_exact_chains,
             test_busy_thread_sampled_10000_times, test_blocked_thread_reported,
             test_app_handler_refused, test_foreign_signals_ignored,
             test_exiting_threads_answer_esrch)
