/*
 * test-sites.c: what the recorder keeps of a hook site (recorder/site.c),
 * through a recording read back: a copy of its name, so that a site whose
 * struct goes away (a library the app dlclose'd; here a heap struct whose
 * name is overwritten, then freed: ASan sees any later read) is still
 * named, by the worker, by the next registration's lookup and by the next
 * stkr_init's session file; a NULL site, and one with no name; a site of
 * the app named with the marks' reserved prefix ("mark:"), which would be
 * read as a mark; the app's errno across a thread's first event.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_later, "app.later");
STKR_SITE_DEFINE(g_forged, "mark:consent.granted");
STKR_SITE_DEFINE(g_forged_sample, "mark:app.background");

static void start(void) {
  stkr_config cfg = {.dir = tl_dir, .flush_interval_ms = 3600000};
  assert_int_equal(stkr_init(&cfg), 0);
}

/* Events and marks per site name read back from tl_dir. */
static int count_site(const char *site, bool mark) {
  stkr_reader *r;
  stkr_event_view ev;
  int n = 0;

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    n += strcmp(ev.site, site) == 0 && ev.is_mark == mark;
  stkr_reader_free(r);
  return n;
}

/* A site in memory that goes away after its events: named all the same
 * (QA, session 23: a plugin's STKR_EVENT site after dlclose made the
 * worker, the next registration and the next stkr_init die of SIGSEGV). */
static void test_site_gone_after_use(void **state) {
  stkr_site *s = malloc(sizeof *s);
  char *name = strdup("plugin.hook");
  stkr_stats st;
  (void)state;

  assert_non_null(s);
  assert_non_null(name);
  *s = (stkr_site)STKR_SITE_INIT(name);
  start();
  for (int i = 0; i < 3; i++) assert_int_equal(stkr_event(s, "p", 1), 0);
  /* Gone before the worker names it in a batch. */
  memset(name, 'X', strlen(name));
  free(name);
  memset(s, 0xa5, sizeof *s);
  free(s);
  /* A registration compares the names of the sites so far. */
  assert_int_equal(stkr_event(&g_later, "x", 1), 0);
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  /* The next session's file is given every registered site's name. */
  start();
  assert_int_equal(stkr_event(&g_later, "y", 1), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(count_site("plugin.hook", false), 3);
  assert_int_equal(count_site("app.later", false), 2);
}

static void test_null_site(void **state) {
  stkr_stats st;
  (void)state;

  assert_int_equal(stkr_event(NULL, "x", 1), -EINVAL);
  start();
  assert_int_equal(stkr_event(NULL, "x", 1), -EINVAL); /* SIGSEGV before */
  assert_int_equal(stkr_event(&g_later, "x", 1), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, 1); /* no event: not counted */
  assert_int_equal(st.dropped, 0);
}

/* "mark:" names are the marks': an app's site named so is refused, not
 * recorded as a mark nor counted (QA, session 23: it recorded, and
 * compliance took it for consent given: "before consent" 1 became 0). */
static void test_mark_prefix_refused(void **state) {
  stkr_stats st;
  (void)state;

  start();
  assert_int_equal(stkr_event(&g_forged, NULL, 0), -EINVAL);
  assert_int_equal(stkr_event(&g_forged, NULL, 0), -EINVAL); /* for good */
  assert_int_equal(stkr_site_register(&g_forged), -EINVAL);
  assert_int_equal(stkr_mark("consent.granted", NULL, 0), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(count_site("consent.granted", true), 1);
  assert_int_equal(count_site("mark:consent.granted", false), 0);
}

static _Atomic int g_target_state; /* 1 registered, 2 may go */
static stkr_thread_handle g_target;

static void *sample_target(void *arg) {
  (void)arg;
  if (stkr_thread_self(&g_target) == 0) g_target_state = 1;
  else g_target_state = -1;
  while (g_target_state != 2) usleep(1000);
  return NULL;
}

/* stkr_thread_sample at a refused site: -EINVAL, the target never
 * signalled, nothing counted (review, session 23: it was signalled and
 * its answer counted under no outcome). */
static void test_sample_at_refused_site(void **state) {
  stkr_sample_stats before, after;
  pthread_t th;
  (void)state;

  start();
  assert_int_equal(pthread_create(&th, NULL, sample_target, NULL), 0);
  while (g_target_state == 0) usleep(1000);
  assert_int_equal(g_target_state, 1);
  assert_int_equal(stkr_sample_stats_get(&before), 0);
  assert_int_equal(stkr_thread_sample(g_target, &g_forged_sample, NULL, 0, 0),
                   -EINVAL);
  assert_int_equal(stkr_sample_stats_get(&after), 0);
  assert_memory_equal(&before, &after, sizeof before);
  g_target_state = 2;
  pthread_join(th, NULL);
  assert_int_equal(stkr_shutdown(), 0);
}

/* A site with a NULL or empty name: refused as the header says, -EINVAL
 * and no event (QA, session 27: -EAGAIN, counted in dropped_other, and
 * verify called the recording incomplete). */
static void test_nameless_site_refused(void **state) {
  static stkr_site nameless = {0}, empty = {.name = ""};
  stkr_stats st;
  (void)state;

  start();
  for (int i = 0; i < 2; i++) { /* for good */
    assert_int_equal(stkr_event(&nameless, "x", 1), -EINVAL);
    assert_int_equal(stkr_event(&empty, "x", 1), -EINVAL);
  }
  assert_int_equal(stkr_site_register(&empty), -EINVAL);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(st.attempted, 0);
  assert_int_equal(st.dropped, 0);
}

/* A thread's first event takes a ring from the pool (renames that fail on
 * empty slots) and leaves the app's errno as it was; after stkr_shutdown
 * an attached thread's stkr_thread_attach says -ENOTCONN (QA, session 27:
 * errno ENOENT; 0). */
static void *first_event_errno(void *arg) {
  errno = 4242;
  *(int *)arg = stkr_event(&g_later, NULL, 0) == 0 ? errno : -1;
  return NULL;
}

static void test_first_event_keeps_errno(void **state) {
  pthread_t th;
  int seen = 0;
  (void)state;

  start();
  assert_int_equal(pthread_create(&th, NULL, first_event_errno, &seen), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(seen, 4242);
  assert_int_equal(stkr_thread_attach(), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(stkr_thread_attach(), -ENOTCONN);
}

TL_TEST_MAIN_EACH("sites", tl_make_dir, NULL, test_site_gone_after_use,
                  test_null_site, test_mark_prefix_refused,
                  test_sample_at_refused_site, test_nameless_site_refused,
                  test_first_event_keeps_errno)
