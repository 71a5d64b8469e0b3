/*
 * test-watchdog.c: the hang watchdog (issue 12). The main thread ticks,
 * then blocks ~1 s inside a known chain: one hang of 0.5-5 s is recorded
 * with that chain (identical samples kept as few events with a count) and
 * one recovery. A thread that says it is idle is not hung. Stopping inside
 * a hang records the run so far. The watchdog holds no descriptor and its
 * thread is gone after stop and after stkr_shutdown.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/sample_fixture.h"
#include "tests/testlib.h"

static char g_dir[256];

/* Start recording into a fresh g_dir. */
static int start_rec(void) {
  return sf_start_rec(g_dir, sizeof g_dir, "wd", 0);
}

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n - (strcmp(path, "/proc/self/fd") == 0); /* opendir's own */
}

/* The task count once it is back to `want`, or what it still is after
 * 2 s: a joined thread's /proc entry can outlive the join for a moment
 * (seen under qemu-user on a loaded machine). */
static int tasks_settled(int want) {
  int n = count_dir("/proc/self/task");
  for (int i = 0; i < 200 && n != want; i++) {
    usleep(10000);
    n = count_dir("/proc/self/task");
  }
  return n;
}

/* Threads of this process named stkr-watchdog. */
static int watchdog_threads(void) {
  glob_t g;
  int n = 0;

  if (glob("/proc/self/task/*/comm", 0, NULL, &g) != 0)
    return 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    char comm[64];
    tl_slurp(g.gl_pathv[i], comm, sizeof comm); /* "" once the thread ended */
    n += strcmp(comm, "stkr-watchdog\n") == 0;
  }
  globfree(&g);
  return n;
}

/* Tick every 10 ms for ms. */
static void run_loop(unsigned ms) {
  uint64_t end = sf_now_ms() + ms;
  while (sf_now_ms() < end) {
    stkr_watchdog_tick();
    usleep(10000);
  }
}

/* The blocking chain: wd_block_a < wd_block_b < wd_park_sleep, sleeping
 * with a raw nanosleep (the PC stays in wd_park_sleep). */
SF_NOINLINE static void wd_park_sleep(unsigned ms) {
  uint64_t end = sf_now_ms() + ms;
  for (uint64_t now; (now = sf_now_ms()) < end;) {
    struct timespec ts = {(time_t)((end - now) / 1000),
                          (long)((end - now) % 1000) * 1000000};
    (void)sf_sys(SYS_nanosleep, (long)&ts, 0, 0, 0); /* EINTR: go round */
  }
}
SF_NOINLINE static void wd_block_b(unsigned ms) {
  wd_park_sleep(ms);
  __asm__ volatile("" ::: "memory");
}
SF_NOINLINE static void wd_block_a(unsigned ms) {
  wd_block_b(ms);
  __asm__ volatile("" ::: "memory");
}

static const char *const g_block_chain[3] = {"wd_park_sleep", "wd_block_b",
                                             "wd_block_a"};

/* "key=N" in a payload, or -1. */
static long field(const stkr_event_view *ev, const char *key) {
  char buf[128], pat[32];
  const char *p;
  size_t n = ev->payload_len < sizeof buf - 1 ? ev->payload_len : sizeof buf - 1;

  memcpy(buf, ev->payload, n);
  buf[n] = '\0';
  snprintf(pat, sizeof pat, "%s=", key);
  for (p = buf; (p = strstr(p, pat)) != NULL; p++)
    if (p == buf || p[-1] == ' ')
      return strtol(p + strlen(pat), NULL, 10);
  return -1;
}

static void test_one_second_block_is_one_hang(void **state) {
  stkr_reader *r = NULL;
  stkr_event_view ev;
  stkr_sample_stats before, after;
  int fds, tasks, hang_events = 0, recovered = 0;
  long run_samples = 0, rec_samples = -1, rec_ms = -1, max_ms = -1;
  char got[256];

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  fds = count_dir("/proc/self/fd");
  tasks = count_dir("/proc/self/task");
  assert_int_equal(stkr_watchdog_start(NULL), 0);
  assert_int_equal(stkr_watchdog_start(NULL), -EALREADY);
  assert_int_equal(count_dir("/proc/self/fd"), fds); /* no descriptor */
  assert_int_equal(count_dir("/proc/self/task"), tasks + 1);
  run_loop(400); /* ticking: no hang */
  wd_block_a(1000);
  run_loop(300); /* recovered: the tick pushes the run and the recovery */
  assert_int_equal(stkr_watchdog_stop(), 0);
  assert_int_equal(stkr_watchdog_stop(), -ENOTCONN);
  assert_int_equal(tasks_settled(tasks), tasks);
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_int_equal(after.hangs - before.hangs, 1);
  assert_true(after.hang_samples - before.hang_samples >= 5);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(g_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    assert_int_equal(ev.tid, (uint64_t)getpid()); /* the main thread's */
    if (strcmp(ev.site, "watchdog.hang") == 0) {
      hang_events++;
      assert_int_equal(field(&ev, "hang"), 1);
      run_samples += field(&ev, "samples");
      if (field(&ev, "ms") > max_ms)
        max_ms = field(&ev, "ms");
      if (!sf_event_chain(&ev, g_block_chain, 3, got, sizeof got))
        fail_msg("hang stack: %s", got);
    } else if (strcmp(ev.site, "watchdog.recovered") == 0) {
      recovered++;
      rec_ms = field(&ev, "ms");
      rec_samples = field(&ev, "samples");
    }
  }
  stkr_reader_free(r);
  print_message("hang: %d events, %ld samples, recovered after %ld ms\n",
                hang_events, run_samples, rec_ms);
  assert_int_equal(recovered, 1);
  assert_true(rec_ms >= 500 && rec_ms <= 5000);
  /* Identical samples are kept as one event with a count: a handful of
   * events at most (a sample that lands between two sleeps has another
   * PC), far fewer than samples. */
  assert_true(hang_events >= 1 && hang_events <= 3);
  assert_true(run_samples >= 5 && hang_events < run_samples);
  assert_int_equal(rec_samples, run_samples);
  assert_true(max_ms >= 250 && max_ms <= rec_ms);

  /* `stackrec report`: a Hangs section with the hang, grouped by stack;
   * the HTML page carries the hang for its timeline. */
  if (getenv("STKR_NO_CLI") != NULL)
    return;
  assert_int_equal(cr_setup(), 0);
  assert_int_equal(cr_run("report --granularity function '%s'", g_dir), 0);
  if (strstr(cr_out, "Hangs (watchdog): 1 hang, ") == NULL)
    fail_msg("no Hangs section:\n%s", cr_out);
  {
    char want[128];
    const char *h = strstr(cr_out, "Hangs (watchdog)");
    const char *p1 = strstr(h, "wd_park_sleep"), *p2 = strstr(h, "wd_block_b"),
               *p3 = strstr(h, "wd_block_a");
    assert_true(p1 != NULL && p2 > p1 && p3 > p2);
    snprintf(want, sizeof want, "%ld samples (100.00%%) in 1 hang, longest ",
             run_samples);
    if (strstr(h, want) == NULL)
      fail_msg("want \"%s\" in:\n%s", want, h);
    assert_non_null(strstr(h, "recovered\n"));
  }
  {
    static char html[1 << 18];
    assert_int_equal(cr_html(g_dir, html, sizeof html), 0);
    assert_non_null(strstr(html, "\"hangs\":[{\"pid\":"));
    assert_non_null(strstr(html, "\"recovered\":true"));
  }
}

static void test_idle_is_not_a_hang(void **state) {
  stkr_sample_stats before, after;

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  stkr_watchdog_opts o = {0, 100, 20};
  assert_int_equal(stkr_watchdog_start(&o), 0);
  stkr_watchdog_idle();
  usleep(500000);
  stkr_watchdog_tick();
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_int_equal(after.hangs, before.hangs);
  /* stkr_shutdown stops the watchdog too. */
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_watchdog_stop(), -ENOTCONN);
}

/* Another thread hangs; the watchdog is stopped inside the hang: the run
 * so far is recorded (the target's handler takes it), no recovery. */
static void test_stop_inside_a_hang(void **state) {
  sf_thread_arg th;
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int hangs = 0, recovered = 0, chained = 0;
  long samples = 0;
  char got[256];

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(sf_start(&th, SF_FUTEX), 0);
  stkr_watchdog_opts o = {atomic_load(&th.handle), 100, 20};
  assert_int_equal(stkr_watchdog_start(&o), 0);
  usleep(400000); /* never ticks: hung after 100 ms */
  uint64_t t0 = sf_now_ms();
  assert_int_equal(stkr_watchdog_stop(), 0);
  assert_true(sf_now_ms() - t0 < 2000);
  sf_stop(&th, NULL);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_reader_open(g_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    if (strcmp(ev.site, "watchdog.hang") == 0) {
      hangs++;
      assert_int_equal(field(&ev, "hang"), 1); /* runs of one hang */
      if (sf_event_chain(&ev, sf_chain[SF_FUTEX], 3, got, sizeof got))
        chained++;
      else if (!sf_caught_in_tsan(&ev))
        fail_msg("hang stack: %s", got);
      samples += field(&ev, "samples");
    } else if (strcmp(ev.site, "watchdog.recovered") == 0) {
      recovered++;
    }
  }
  stkr_reader_free(r);
  /* Samples every 20 ms from 100 ms to 400 ms: about 15 (at least 3 on a
   * loaded machine), all of hang 1, kept as a few runs of identical stacks:
   * mostly one, but a sample that finds the thread between two 20 ms waits
   * (its wait timed out and it waits for a CPU) has another leaf PC and
   * starts a run (seen once in CI under ASan: 3 runs). Under TSan its
   * deferred signals can also catch the thread inside TSan's own runtime
   * (sf_caught_in_tsan); at least one run has the chain. */
  assert_true(samples >= 3);
  assert_true(chained >= 1);
  assert_true(hangs >= 1); /* merging runs: test_one_second_block_is_one_hang */
  assert_int_equal(recovered, 0);
}

/* The end of a process inside a hang: stkr_shutdown_for_exit stops the
 * watchdog within its 50 ms (plus the recorder's own exit budget). */
static void test_exit_stops_watchdog(void **state) {
  sf_thread_arg th;
  uint64_t t0;

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(sf_start(&th, SF_FUTEX), 0);
  stkr_watchdog_opts o = {atomic_load(&th.handle), 50, 10};
  assert_int_equal(stkr_watchdog_start(&o), 0);
  for (int i = 0; i < 100 && watchdog_threads() != 1; i++)
    usleep(10000); /* it names itself when it starts */
  assert_int_equal(watchdog_threads(), 1);
  usleep(200000); /* hung, sampled every 10 ms */
  t0 = sf_now_ms();
  /* -ETIMEDOUT: the worker did not finish its last pass within the exit
   * budget (100 ms), as happens under TSan on a loaded machine (seen in a
   * clean-clone CI run); the exit is bounded all the same, which is what
   * is checked here. */
  int rc = stkr_shutdown_for_exit();
  if (rc != 0 && rc != -ETIMEDOUT) fail_msg("stkr_shutdown_for_exit: %d", rc);
  assert_true(sf_now_ms() - t0 < 1000);
  assert_int_equal(stkr_watchdog_stop(), -ENOTCONN);
  for (int i = 0; i < 100 && watchdog_threads() != 0; i++)
    usleep(10000); /* a thread left detached ends by itself */
  assert_int_equal(watchdog_threads(), 0);
  sf_stop(&th, NULL);
}

/* A hang the thread ticked its way out of right before the stop, with no
 * look of the watchdog between the tick and the stop (its interval is
 * 200 ms): recovered (QA, session 23: "not recovered" whenever the stop
 * came within an interval of the tick). */
static void test_recovered_right_before_stop(void **state) {
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int recovered = 0;
  long ms = -1;

  (void)state;
  assert_int_equal(start_rec(), 0);
  stkr_watchdog_opts o = {0, 100, 200};
  assert_int_equal(stkr_watchdog_start(&o), 0);
  stkr_watchdog_tick();
  wd_block_a(700); /* looked at 200, 400, 600 ms: a hang */
  stkr_watchdog_tick();
  assert_int_equal(stkr_watchdog_stop(), 0);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_reader_open(g_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    if (strcmp(ev.site, "watchdog.recovered") == 0) {
      recovered++;
      ms = field(&ev, "ms");
    }
  stkr_reader_free(r);
  assert_int_equal(recovered, 1);
  /* From the watchdog's first look that saw the tick before the block
   * (by 200 ms), to the stop: at least the threshold. */
  assert_true(ms >= 100);
}

static void test_not_recording(void **state) {
  (void)state;
  assert_int_equal(stkr_watchdog_start(NULL), -ENOTCONN);
  stkr_watchdog_tick(); /* harmless */
}

/* A forked child that does not record (the default fork mode): neither a
 * registration nor a watchdog is its (QA, session 33: 0 from both, and a
 * join of the parent's watchdog thread). */
static void test_child_does_not_record(void **state) {
  stkr_thread_handle h;
  pid_t c;
  int st;

  (void)state;
  assert_int_equal(start_rec(), 0);
  assert_int_equal(stkr_watchdog_start(NULL), 0);
  if ((c = fork()) == 0) {
    int self = stkr_thread_self(&h), stop = stkr_watchdog_stop();
    if (self != -ENOTCONN || stop != -ENOTCONN) {
      fprintf(stderr, "child: stkr_thread_self %d, stkr_watchdog_stop %d\n",
              self, stop);
      _exit(1);
    }
    _exit(0);
  }
  assert_true(c > 0);
  assert_int_equal(waitpid(c, &st, 0), c);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(stkr_thread_self(&h), 0); /* the parent's are its own */
  assert_int_equal(stkr_watchdog_stop(), 0);
  assert_int_equal(stkr_shutdown(), 0);
}

TL_TEST_MAIN("watchdog", NULL, NULL, test_not_recording,
             test_one_second_block_is_one_hang, test_idle_is_not_a_hang,
             test_stop_inside_a_hang, test_recovered_right_before_stop,
             test_exit_stops_watchdog, test_child_does_not_record)
