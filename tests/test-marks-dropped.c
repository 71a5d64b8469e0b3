/*
 * test-marks-dropped.c: a mark the recorder dropped (QA, session 32: a
 * full ring dropped app.foreground, and compliance judged every later
 * event "in the background", 3 findings, nothing unjudged).
 *
 * The flush worker is held (the loader scan lock, as test-flush-pressure)
 * while a 4 KiB ring fills, so that the mark's event is refused
 * deterministically; then:
 * - stkr_mark says -EAGAIN; the batches' Counters.marks_dropped say 1, the
 *   reader's stkr_process_info.marks_dropped too;
 * - compliance does not count the events after it in the background, nor
 *   before consent; they are unjudged, and the process is counted in
 *   marks_lost_processes. The events before the drop are judged.
 * - a child forked after it (follow mode) inherits the doubt: its events
 *   are unjudged too (review, session 32: "in the background"). Not under
 *   TSan (no threads after a multi-threaded fork).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "flush/worker.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "tests/reader_util.h"
#include "tests/testlib.h"
#include "tools/stackrec/compliance.h"

STKR_SITE_DEFINE(g_probe, "identifiers.probe");

static __attribute__((noinline)) int sdk_call(void) {
  int rc = stkr_event(&g_probe, NULL, 0);
  __asm__ volatile("" ::: "memory");
  return rc;
}

static void test_dropped_mark(void **state) {
  stkr_config cfg = {.dir = tl_dir, .ring_bytes = 4096,
                     .flush_interval_ms = 3600 * 1000,
                     .symbolize = STKR_SYMBOLIZE_NONE,
                     .fork_mode = STKR_FORK_FOLLOW};
  ru_log log = {0};
  stkr_reader *r;
  stkr_comp_opts o;
  stkr_comp *c = NULL;
  uint64_t bg = 0, before = 0, events = 0, child = 0;
  int i, pushed = 0, st;
  pid_t pid;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_mark("app.background", NULL, 0), 0);
  for (i = 0; i < 3; i++) /* in the background: judged */
    assert_int_equal(sdk_call(), 0);
  assert_int_equal(stkr_flush(), 0);
  /* The worker held: the ring fills, and the mark finds no room. */
  stkr__loader_scan_begin();
  while (sdk_call() == 0 && pushed < 100000)
    pushed++;
  assert_int_equal(stkr_mark("app.foreground", NULL, 0), -EAGAIN);
  stkr__loader_scan_end();
  assert_int_equal(stkr_flush(), 0);
  for (i = 0; i < 5; i++) /* after the dropped mark: not judged */
    assert_int_equal(sdk_call(), 0);
#if !defined(__SANITIZE_THREAD__)
  child = 2;
  assert_int_equal(stkr_flush(), 0); /* the drop's count before the fork */
  if ((pid = fork()) == 0) {
    for (i = 0; i < 2; i++)
      (void)sdk_call();
    _exit(stkr_shutdown() == 0 ? 0 : 1);
  }
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
  assert_int_equal(stkr_shutdown(), 0);

  assert_non_null(r = ru_open(tl_dir, &log));
  memset(&o, 0, sizeof o);
  assert_int_equal(stkr_comp_build(r, &o, NULL, NULL, &c), 0);
  assert_int_equal(stkr_reader_process(r, 0)->marks_dropped, 1);
  for (size_t g = 0; g < c->n_groups; g++) {
    events += c->groups[g].count;
    bg += c->groups[g].background;
    before += c->groups[g].before_consent;
  }
  assert_int_equal(events, 3 + (uint64_t)pushed + 5 + child);
  /* The 3 before the drop; the pushed ones were read after the batch
   * that counted it, so not judged either (was 3 + pushed + 5). */
  assert_true(bg >= 3 && bg <= 3 + (uint64_t)pushed);
  assert_true(c->unjudged >= 5 + child);
  assert_int_equal(bg + c->unjudged, events);
  assert_int_equal(before, bg); /* no consent: every judged event */
  assert_int_equal(c->marks_lost_processes, 1 + (child > 0));
  stkr_comp_free(c);
  stkr_reader_free(r);
}

/* The same drop in a process killed before its next batch: the count is
 * in its session file, and recovery writes it. */
static void test_dropped_mark_of_a_killed_process(void **state) {
  char dir[512];
  stkr_recover_stats rs;
  ru_log log = {0};
  stkr_reader *r;
  stkr_event_view ev;
  pid_t pid;
  int st;
  (void)state;

  snprintf(dir, sizeof dir, "%s/killed", tl_dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  if ((pid = fork()) == 0) {
    stkr_config cfg = {.dir = dir, .ring_bytes = 4096,
                       .flush_interval_ms = 3600 * 1000,
                       .symbolize = STKR_SYMBOLIZE_NONE};
    int n = 0;
    if (stkr_init(&cfg) != 0 || stkr_mark("app.background", NULL, 0) != 0 ||
        stkr_flush() != 0)
      _exit(2);
    stkr__loader_scan_begin(); /* the worker never writes again */
    while (sdk_call() == 0 && n++ < 100000)
      ;
    if (stkr_mark("app.foreground", NULL, 0) != -EAGAIN)
      _exit(3);
    kill(getpid(), SIGKILL);
    _exit(4);
  }
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(stkr_recover_dir(dir, NULL, &rs), 0);
  assert_int_equal(rs.sessions_recovered, 1);
  assert_non_null(r = ru_open(dir, &log));
  while (stkr_reader_next(r, &ev) == 1)
    ;
  assert_int_equal(stkr_reader_process(r, 0)->marks_dropped, 1); /* was 0 */
  stkr_reader_free(r);
}

TL_TEST_MAIN("marks-dropped", tl_make_dir, tl_rm_dir, test_dropped_mark,
             test_dropped_mark_of_a_killed_process)
