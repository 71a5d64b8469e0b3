/*
 * test-inherit.c: the marks a forked child starts with (QA, session 31:
 * a child forked after consent.granted counted all of its events "before
 * consent", a finding that was not true).
 *
 * Real recordings: a test process embeds the recorder (follow mode), marks
 * and forks; `compliance`'s library (tools/stackrec/compliance.h) reads
 * them back.
 * - after consent, a fork: the child's events are after consent; the
 *   child's Header names its origin and the fork time (after the mark);
 * - a fork, then consent in the parent: the child's are before it;
 * - a grandchild through a child that never recorded: its origin is the
 *   grandparent (parent_pid is still its parent);
 * - app.background, a fork: the child's events are in the background;
 * - the origin's files gone: the child's events are not judged (as for a
 *   process whose earliest segments are gone), never "before consent";
 * - the child's first batch (its Header) damaged: its events are not
 *   judged either.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stackrec.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/reader_util.h"
#include "tests/testlib.h"
#include "tools/stackrec/compliance.h"

static char g_tmp[2048];

typedef enum scenario {
  CONSENT_THEN_FORK,
  FORK_THEN_CONSENT,
  GRANDCHILD,
  BACKGROUND_THEN_FORK,
  CHAIN_MIDDLE_OTHER_SITE,
  CHILD_OWN_INIT,
  CONSENT_THEN_FORK_BATCHES
} scenario;

static __attribute__((noinline)) void sdk_call(void) {
  STKR_EVENT("identifiers.probe", "x", 1);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void net_call(void) {
  STKR_EVENT("network.connect", "y", 1);
  __asm__ volatile("" ::: "memory");
}

static void wait_ok(pid_t p) {
  int st;
  if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    _exit(9);
}

/* A child that records n events and ends. */
static void child_events(int n) {
  for (int i = 0; i < n; i++)
    sdk_call();
  _exit(stkr_shutdown() == 0 ? 0 : 8);
}

/* The recording process: its events, marks and forks by scenario. Runs in
 * a process of its own (the recorder is process-wide). */
static int record(const char *dir, scenario s) {
  stkr_config cfg;
  int go[2];
  char b;
  pid_t c, g;

  stkr_config_init(&cfg);
  cfg.dir = dir;
  cfg.fork_mode = STKR_FORK_FOLLOW;
  if (stkr_init(&cfg) != 0 || pipe(go) != 0)
    return 2;
  switch (s) {
  case CONSENT_THEN_FORK: /* 1 before, 1 + 2 after */
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    sdk_call();
    if ((c = fork()) == 0)
      child_events(2);
    wait_ok(c);
    break;
  case FORK_THEN_CONSENT: /* the child's 2 before, forked before it */
    if ((c = fork()) == 0) {
      if (read(go[0], &b, 1) != 1)
        _exit(7);
      child_events(2);
    }
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    sdk_call();
    if (write(go[1], "g", 1) != 1)
      return 3;
    wait_ok(c);
    break;
  case GRANDCHILD: /* the middle child records nothing */
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    if ((c = fork()) == 0) {
      if ((g = fork()) == 0)
        child_events(2);
      wait_ok(g);
      _exit(0);
    }
    wait_ok(c);
    break;
  case CONSENT_THEN_FORK_BATCHES: /* the child's 3 in 3 batches */
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    if ((c = fork()) == 0) {
      for (int i = 0; i < 3; i++)
        if (sdk_call(), stkr_flush() != 0)
          _exit(5);
      child_events(0);
    }
    wait_ok(c);
    break;
  case CHILD_OWN_INIT: /* the child starts recording with stkr_init */
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    if ((c = fork()) == 0) {
      if (stkr_init(&cfg) != 0)
        _exit(6);
      child_events(2);
    }
    wait_ok(c);
    break;
  case CHAIN_MIDDLE_OTHER_SITE: /* the middle records network.* only */
    sdk_call();
    stkr_mark("consent.granted", NULL, 0);
    if ((c = fork()) == 0) {
      net_call();
      if ((g = fork()) == 0)
        child_events(2);
      wait_ok(g);
      _exit(stkr_shutdown() == 0 ? 0 : 8);
    }
    wait_ok(c);
    break;
  case BACKGROUND_THEN_FORK: /* the child's 2 in the background */
    stkr_mark("app.background", NULL, 0);
    if ((c = fork()) == 0)
      child_events(2);
    wait_ok(c);
    stkr_mark("app.foreground", NULL, 0);
    sdk_call();
    break;
  }
  return stkr_shutdown() == 0 ? 0 : 4;
}

/* A fresh directory `name` recorded by scenario s; *parent: the pid of
 * the process that ran it. */
static void make_recording(char *dir, size_t cap, const char *name,
                           scenario s, pid_t *parent) {
  int st;

#if defined(__SANITIZE_THREAD__)
  /* Follow mode starts a worker thread in the child, and TSan starts no
   * thread after a multi-threaded fork (as test-session.c). */
  fprintf(stderr, "TSan: no threads after a multi-threaded fork: skipped\n");
  skip();
#endif
  snprintf(dir, cap, "%s/%s", g_tmp, name);
  assert_int_equal(tl_rm_rf(dir), 0);
  *parent = fork();
  assert_true(*parent >= 0);
  if (*parent == 0)
    _exit(record(dir, s));
  assert_int_equal(waitpid(*parent, &st, 0), *parent);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

typedef struct counts {
  uint64_t events, before_consent, background, unjudged;
  size_t unknown_origin;
} counts;

/* compliance of dir, its events at sites matching site_glob (NULL: all). */
static counts comp_counts_of(const char *dir, const char *site_glob) {
  ru_log log = {0};
  stkr_reader *r = ru_open(dir, &log);
  stkr_comp_opts o;
  stkr_comp *c = NULL;
  counts k = {0};

  assert_non_null(r);
  memset(&o, 0, sizeof o);
  o.agg.site_glob = site_glob;
  assert_int_equal(stkr_comp_build(r, &o, NULL, NULL, &c), 0);
  for (size_t i = 0; i < c->n_groups; i++) {
    if (strcmp(c->groups[i].site, "identifiers.probe") != 0)
      continue;
    k.events += c->groups[i].count;
    k.before_consent += c->groups[i].before_consent;
    k.background += c->groups[i].background;
  }
  k.unjudged = c->unjudged;
  k.unknown_origin = c->unknown_origin_processes;
  stkr_comp_free(c);
  stkr_reader_free(r);
  return k;
}

static counts comp_counts(const char *dir) { return comp_counts_of(dir, NULL); }

/* Read r to its end (the process infos are complete then). */
static void read_all(stkr_reader *r) {
  stkr_event_view ev;
  while (stkr_reader_next(r, &ev) == 1)
    ;
}

/* The process of r with pid (r read to its end). */
static const stkr_process_info *process_of(stkr_reader *r, uint32_t pid) {
  size_t i;

  read_all(r);
  for (i = 0; i < stkr_reader_process_count(r); i++)
    if (stkr_reader_process(r, i)->pid == pid)
      return stkr_reader_process(r, i);
  return NULL;
}

/* make_recording, then comp_counts of it. */
static counts recorded(char *dir, size_t cap, const char *name, scenario s,
                       pid_t *parent) {
  make_recording(dir, cap, name, s, parent);
  return comp_counts(dir);
}

static void test_consent_then_fork(void **state) {
  char dir[4096];
  ru_log log = {0};
  stkr_reader *r;
  const stkr_process_info *p, *child = NULL;
  pid_t parent;
  counts k;
  (void)state;

  k = recorded(dir, sizeof dir, "consent-fork", CONSENT_THEN_FORK, &parent);
  assert_int_equal(k.events, 4);
  assert_int_equal(k.before_consent, 1); /* was 3: the child's 2 too */
  assert_int_equal(k.unjudged, 0);

  /* The child's Header: its origin and when. */
  r = ru_open(dir, &log);
  assert_non_null(r);
  p = process_of(r, (uint32_t)parent);
  assert_non_null(p);
  assert_int_equal(p->fork_mono_ns, 0);
  for (size_t i = 0; i < stkr_reader_process_count(r); i++)
    if (stkr_reader_process(r, i)->pid != (uint32_t)parent)
      child = stkr_reader_process(r, i);
  assert_non_null(child);
  assert_int_equal(child->parent_pid, parent);
  assert_int_equal(child->forked_from_pid, parent);
  assert_true(child->fork_mono_ns > p->start_mono_ns);
  assert_true(child->fork_mono_ns <= child->start_mono_ns);
  stkr_reader_free(r);

  /* A `stackrec mark` mark, handed out before each process's first
   * segment is read, changes none of it (QA, session 32: the child then
   * lost what it inherited, 3 before consent). */
  assert_int_equal(cr_run("mark '%s' screen.Settings", dir), 0);
  k = comp_counts(dir);
  assert_int_equal(k.before_consent, 1);
  assert_int_equal(k.unjudged, 0);
}

/* Scenario s recorded into name: events, before consent, in background,
 * none unjudged. */
static void expect_counts(const char *name, scenario s, uint64_t events,
                          uint64_t before, uint64_t background) {
  char dir[4096];
  pid_t parent;
  counts k = recorded(dir, sizeof dir, name, s, &parent);

  assert_int_equal(k.events, events);
  assert_int_equal(k.before_consent, before);
  assert_int_equal(k.background, background);
  assert_int_equal(k.unjudged, 0);
}

/* A followed child that starts recording with its own stkr_init is still
 * a copy of its parent: after consent (review, session 32: 2 more before
 * consent). */
static void test_child_own_init(void **state) {
  (void)state;
  expect_counts("child-init", CHILD_OWN_INIT, 3, 1, 0);
}

/* The parent's first event and the child's two (forked before consent). */
static void test_fork_then_consent(void **state) {
  (void)state;
  expect_counts("fork-consent", FORK_THEN_CONSENT, 4, 3, 0);
}

static void test_grandchild(void **state) {
  char dir[4096], want[128];
  ru_log log = {0};
  stkr_reader *r;
  const stkr_process_info *g = NULL;
  pid_t parent;
  counts k;
  (void)state;

  k = recorded(dir, sizeof dir, "grandchild", GRANDCHILD, &parent);
  assert_int_equal(k.events, 3);
  assert_int_equal(k.before_consent, 1);
  r = ru_open(dir, &log);
  assert_non_null(r);
  read_all(r);
  assert_int_equal(stkr_reader_process_count(r), 2); /* the middle: none */
  for (size_t i = 0; i < 2; i++)
    if (stkr_reader_process(r, i)->pid != (uint32_t)parent)
      g = stkr_reader_process(r, i);
  assert_non_null(g);
  assert_int_equal(g->forked_from_pid, parent);
  assert_true(g->parent_pid != 0 && g->parent_pid != (uint32_t)parent);
  stkr_reader_free(r);
  /* info says where its marks came from. */
  snprintf(want, sizeof want, "  marks from:  pid %d (as at its fork)\n",
           (int)parent);
  assert_int_equal(cr_run("info '%s'", dir), 0);
  cr_assert_has(cr_out, want);
  snprintf(want, sizeof want, "\"forked_from_pid\":%d,\"fork_mono_ns\":",
           (int)parent);
  assert_int_equal(cr_run("info --json '%s'", dir), 0);
  cr_assert_has(cr_out, want);
}

/* The child's 2 in the background (0 before); no consent anywhere. */
static void test_background_then_fork(void **state) {
  (void)state;
  expect_counts("background", BACKGROUND_THEN_FORK, 3, 3, 2);
}

/* A grandchild whose middle process recorded only network.* events and no
 * mark, read with a filter on identifiers.*: the middle process is never
 * visited, and still links the grandchild to the consent before it
 * (review, session 32: 2 more before consent). */
static void test_chain_through_a_filtered_process(void **state) {
  char dir[4096];
  pid_t parent;
  counts k;
  (void)state;

  make_recording(dir, sizeof dir, "chain", CHAIN_MIDDLE_OTHER_SITE, &parent);
  k = comp_counts_of(dir, "identifiers.*");
  assert_int_equal(k.events, 3);
  assert_int_equal(k.before_consent, 1);
  assert_int_equal(k.unjudged, 0);
  k = comp_counts(dir); /* unfiltered, the same */
  assert_int_equal(k.before_consent, 1);
}

/* The number after "key": in JSON text s, past its first "from" (NULL:
 * from the start); -1 if none. */
static long long json_num(const char *s, const char *from, const char *key) {
  char k[64];
  const char *p = from != NULL ? strstr(s, from) : s;

  snprintf(k, sizeof k, "\"%s\":", key);
  if (p == NULL || (p = strstr(p, k)) == NULL)
    return -1;
  return strtoll(p + strlen(k), NULL, 10);
}

/* A parent that merge renumbered (its pid taken by the other input's
 * process) is read after its child, which kept its pid: compliance reads
 * the recording once more and judges the child (QA, session 32: 2 events
 * "not judged", 1 process of unknown origin). */
static void test_merge_renumbered_parent(void **state) {
  char dir[4096], other[4096], out[4096];
  pid_t parent;
  (void)state;

  make_recording(dir, sizeof dir, "renumbered", CONSENT_THEN_FORK, &parent);
  snprintf(other, sizeof other, "%s/renumbered-other", g_tmp);
  snprintf(out, sizeof out, "%s/renumbered-out", g_tmp);
  assert_int_equal(tl_rm_rf(other), 0);
  assert_int_equal(tl_rm_rf(out), 0);
  assert_int_equal(mkdir(other, 0700), 0);
  /* Another recording's process holds the parent's pid; listed first, it
   * keeps it. */
  assert_int_equal(fx_write_one(other, &(fx_one){.pid = (uint32_t)parent,
                                                 .session_id = 0x5eed}),
                   0);
  assert_int_equal(cr_run("merge -o '%s' '%s' '%s'", out, other, dir), 0);
  assert_int_equal(cr_run("compliance --format json '%s'", out), 0);
  if (json_num(cr_out, NULL, "unjudged") != 0 ||
      json_num(cr_out, NULL, "unknown_origin_processes") != 0 ||
      json_num(cr_out, "\"site\":\"identifiers.probe\"", "before_consent") !=
          1)
    fail_msg("the child is not judged after consent:\n%s", cr_out);
}

/* The parent's segments removed: what the child started with is unknown. */
static void test_origin_missing(void **state) {
  char dir[4096], path[4400], prefix[64];
  DIR *d;
  struct dirent *e;
  pid_t parent;
  int removed = 0;
  counts k;
  (void)state;

  make_recording(dir, sizeof dir, "origin-gone", CONSENT_THEN_FORK, &parent);
  snprintf(prefix, sizeof prefix, "stackrec-%d-", (int)parent);
  assert_non_null(d = opendir(dir));
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      assert_int_equal(unlink(path), 0);
      removed++;
    }
  closedir(d);
  assert_true(removed > 0);
  k = comp_counts(dir);
  assert_int_equal(k.events, 2);
  assert_int_equal(k.before_consent, 0); /* not judged: not "before" */
  assert_int_equal(k.unjudged, 2);
  assert_int_equal(k.unknown_origin, 1);
}

/* The child's first batch, which holds its Header, damaged: the reader
 * skips to its second, so whether and from whom it was forked is not
 * known, nor its marks in that batch; its events are not judged (review,
 * session 33: 3 more "before consent"). */
static void test_child_first_batch_damaged(void **state) {
  static const unsigned char magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  char dir[4096], path[4400], prefix[64];
  unsigned char *seg;
  size_t len, second = 0;
  ru_log log = {0};
  stkr_reader *r;
  const stkr_process_info *child = NULL;
  DIR *d;
  struct dirent *e;
  pid_t parent;
  counts k;
  (void)state;

  make_recording(dir, sizeof dir, "first-batch", CONSENT_THEN_FORK_BATCHES,
                 &parent);
  snprintf(prefix, sizeof prefix, "stackrec-%d-", (int)parent);
  path[0] = '\0';
  assert_non_null(d = opendir(dir));
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, "stackrec-", 9) == 0 &&
        strncmp(e->d_name, prefix, strlen(prefix)) != 0)
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
  closedir(d);
  assert_non_null(seg = (unsigned char *)tl_slurp_alloc(path, &len));
  for (size_t i = 4; i + 4 <= len && second == 0; i++)
    if (memcmp(seg + i, magic, 4) == 0)
      second = i;
  assert_true(second > 64); /* the child's first batch: its first frame */
  seg[second / 2] ^= 0xff;  /* in its compressed block */
  assert_int_equal(tl_write_bytes(path, seg, len), 0);
  free(seg);

  /* The Header's batch holds the image list, the first event the next:
   * the child's 3 are all read, and none judged. */
  k = comp_counts(dir);
  assert_int_equal(k.events, 4);
  assert_int_equal(k.before_consent, 1);
  assert_int_equal(k.unjudged, 3);
  r = ru_open(dir, &log);
  assert_non_null(r);
  read_all(r);
  for (size_t i = 0; i < stkr_reader_process_count(r); i++)
    if (stkr_reader_process(r, i)->pid != (uint32_t)parent)
      child = stkr_reader_process(r, i);
  assert_non_null(child);
  assert_true(child->head_lost);
  assert_false(child->have_header);
  assert_int_equal(child->damaged_batches, 1);
  stkr_reader_free(r);
}

/* One launch of an app as pid 1 of a pid namespace of its own (a
 * container's app), into dir: consent (stkr_mark) if asked, then `events`
 * watched calls.
 * @return 0, 1 when no namespace can be made here (not root), else -1. */
static int launch_as_pid1(const char *dir, bool consent, int events) {
  pid_t c = fork();
  int st;

  if (c < 0)
    return -1;
  if (c == 0) {
    pid_t g;
    if (unshare(CLONE_NEWPID) != 0)
      _exit(errno == EPERM || errno == EINVAL ? 77 : 2);
    if ((g = fork()) == 0) {
      stkr_config cfg;
      stkr_config_init(&cfg);
      cfg.dir = dir;
      if (getpid() != 1 || stkr_init(&cfg) != 0)
        _exit(3);
      if (consent)
        stkr_mark("consent.granted", NULL, 0);
      for (int i = 0; i < events; i++)
        sdk_call();
      _exit(stkr_shutdown() == 0 ? 0 : 4);
    }
    if (g < 0 || waitpid(g, &st, 0) != g)
      _exit(5);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 6);
  }
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st))
    return -1;
  return WEXITSTATUS(st) == 77 ? 1 : WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* A pid 1 launched into dir (g_tmp/tag) twice: the first launch with
 * `consent` (stkr_mark) and `first` watched calls, then `stackrec mark DIR
 * consent.granted`, then the second launch with 5. Start times are in
 * clock ticks (10 ms): two launches within one tick would be one process
 * (a container's restart takes longer). Skipped without pid namespaces.
 * @return comp_counts of dir then. */
static counts relaunch_pid1(char *dir, size_t len, const char *tag,
                            bool consent, int first) {
  int rc;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  /* The sanitizers' runtimes and a process that is pid 1: not tried. */
  fprintf(stderr, "sanitizers: pid namespaces not tried: skipped\n");
  skip();
#endif
  snprintf(dir, len, "%s/%s", g_tmp, tag);
  assert_int_equal(tl_rm_rf(dir), 0);
  if ((rc = launch_as_pid1(dir, consent, first)) == 1) {
    fprintf(stderr, "no pid namespace here (not root?): skipped\n");
    skip();
  }
  assert_int_equal(rc, 0);
  assert_int_equal(cr_run("mark '%s' consent.granted", dir), 0);
  usleep(30000);
  assert_int_equal(launch_as_pid1(dir, false, 5), 0);
  return comp_counts(dir);
}

/* An app restarted as a container's pid 1, into one directory: the second
 * launch's events are its own process's, before any consent (QA, session
 * 33: judged by the first launch's consent.granted, "no findings"). A
 * harness's consent between the launches is the first one's; one set
 * after the second launch started is its too. */
static void test_pid_reused(void **state) {
  char dir[4096];
  ru_log log = {0};
  stkr_reader *r;
  counts k;
  (void)state;

  k = relaunch_pid1(dir, sizeof dir, "pid1", true, 1);
  assert_int_equal(k.events, 6);
  assert_int_equal(k.before_consent, 5); /* was 0 */
  assert_int_equal(k.unjudged, 0);
  r = ru_open(dir, &log);
  assert_non_null(r);
  read_all(r);
  assert_int_equal(stkr_reader_process_count(r), 1);
  assert_int_equal(stkr_reader_process(r, 0)->pid, 1);
  assert_int_equal(stkr_reader_process(r, 0)->instances, 2);
  stkr_reader_free(r);
  assert_int_equal(cr_run("info '%s'", dir), 0);
  cr_assert_has(cr_out, "  sessions:    2, of 2 processes that held this "
                        "pid in turn (the pid was used again)\n");
  /* A harness's consent now: after the second launch's events. */
  assert_int_equal(cr_run("mark '%s' consent.granted", dir), 0);
  k = comp_counts(dir);
  assert_int_equal(k.before_consent, 5); /* its events came before it */
}

/* The same when the first launch recorded no event: the marks of the pid
 * come at its first event, the second launch's, whose Header is read by
 * then; a consent set before that launch started is still not its
 * (review, session 35: "before consent 0, no findings"). */
static void test_pid_reused_first_silent(void **state) {
  char dir[4096];
  counts k;
  (void)state;

  k = relaunch_pid1(dir, sizeof dir, "pid1-silent", false, 0);
  assert_int_equal(k.events, 5);
  assert_int_equal(k.before_consent, 5); /* was 0 */
}

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0)
    return -1;
  return tl_mkdtemp(g_tmp, sizeof g_tmp, "inherit");
}

static int teardown(void **state) {
  (void)state;
  return tl_rm_rf(g_tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_consent_then_fork),
      cmocka_unit_test(test_fork_then_consent),
      cmocka_unit_test(test_grandchild),
      cmocka_unit_test(test_background_then_fork),
      cmocka_unit_test(test_chain_through_a_filtered_process),
      cmocka_unit_test(test_child_own_init),
      cmocka_unit_test(test_merge_renumbered_parent),
      cmocka_unit_test(test_origin_missing),
      cmocka_unit_test(test_child_first_batch_damaged),
      cmocka_unit_test(test_pid_reused),
      cmocka_unit_test(test_pid_reused_first_silent),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
