/*
 * test-agg.c: the aggregation behind `report` and the exports
 * (tools/stackrec/agg.c), on recordings with known content:
 *   - the fixture's standard recording (tests/fixture.c): exact site and
 *     stack counts, order, labels (image+offset from the image list),
 *     drops;
 *   - two processes, and two recording sessions of one pid whose ids mean
 *     other things (ids restart: never conflated);
 *   - filters: site glob, thread glob and tid, time window (with an event
 *     drained out of order), app-only;
 *   - symbolized recordings of two "builds" (tests/symrec.h) whose PCs
 *     differ: stacks merge by frames, lines kept only where they agree;
 *   - real recordings made by the recorder in two child processes of this
 *     test (stkr_init, known call chains): counts add up, function names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "recorder/stackrec.h"
#include "tests/fixture.h"
#include "tests/symrec.h"
#include "tests/record_chain.h"
#include "tests/testlib.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/breakdown.h"

static void quiet(void *arg, const stkr_warning *w) {
  (void)arg;
  (void)w;
}

/* Aggregate the inputs; @return the stkr_agg_build result. */
static int agg_paths(const char *const *paths, size_t n,
                     const stkr_agg_opts *o, stkr_agg **out) {
  stkr_reader_opts ro = {.warn = quiet, .lazy_frames = true};
  stkr_reader *r;
  size_t i;
  int err;

  assert_int_equal(stkr_reader_create(&ro, &r), 0);
  for (i = 0; i < n; i++)
    assert_int_equal(stkr_reader_add(r, paths[i]), 0);
  err = stkr_agg_build(r, o, NULL, NULL, out);
  stkr_reader_free(r);
  return err;
}

static stkr_agg *agg_dir(const char *dir, const stkr_agg_opts *o) {
  stkr_agg *a = NULL;

  assert_non_null(dir);
  assert_int_equal(agg_paths(&dir, 1, o, &a), 0);
  assert_non_null(a);
  return a;
}

/* The stack's frame labels, innermost first, joined by ';' (static). */
static const char *labels(const stkr_agg_stack *s) {
  static char buf[4096];
  char one[1024];
  size_t i, len = 0;

  buf[0] = '\0';
  for (i = 0; i < s->n_frames && len < sizeof buf; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ";" : "",
                            stkr_agg_frame_label(&s->frames[i], one,
                                                 sizeof one));
  return buf;
}

static const stkr_agg_site *site(const stkr_agg *a, const char *name) {
  size_t i;

  for (i = 0; i < a->n_sites; i++)
    if (strcmp(a->sites[i].name, name) == 0)
      return &a->sites[i];
  fail_msg("no site %s", name);
  return NULL;
}

#define S1 "fixture+0x1000;fixture+0x1100;fixture+0x1200"
#define S2 "0x7f0000002000"
#define S3 "fixture+0x3000;fixture+0x3010;fixture+0x3020;fixture+0x3030"

/* ---- the standard fixture recording ------------------------------------- */

static void test_std_sites_stacks_and_drops(void **state) {
  const char *d = fx_tmpdir("agg-std");
  const stkr_agg_site *s;
  stkr_agg *a;
  (void)state;

  assert_int_equal(fx_std_write(d, FX_PID), 0);
  a = agg_dir(d, NULL);
  assert_int_equal(a->events_read, 9);
  assert_int_equal(a->events, 9);
  assert_int_equal(a->n_processes, 1);
  assert_int_equal(a->n_sites, 4);
  assert_int_equal(a->n_stacks, 9);
  /* Most events first, ties by name. */
  assert_string_equal(a->sites[0].name, "net.connect");
  assert_string_equal(a->sites[1].name, "privacy.clipboard.read");
  assert_string_equal(a->sites[2].name, "file.open");
  assert_string_equal(a->sites[3].name, "late.site");
  assert_int_equal(a->sites[0].count, 3);
  assert_int_equal(a->sites[1].count, 3);
  assert_int_equal(a->sites[2].count, 2);
  assert_int_equal(a->sites[3].count, 1);
  /* Equal counts: by frame labels. PCs inside the recorded image
   * (/usr/bin/fixture at 0x400000) are image+offset; the one outside any
   * image stays a raw PC. */
  s = site(a, "privacy.clipboard.read");
  assert_int_equal(s->n_stacks, 3);
  assert_string_equal(labels(s->stacks[0]), S2);
  assert_string_equal(labels(s->stacks[1]), S1);
  assert_string_equal(labels(s->stacks[2]), S3);
  assert_true(s->stacks[2]->truncated);
  assert_false(s->stacks[0]->truncated);
  assert_int_equal(s->stacks[0]->count, 1);
  assert_int_equal(s->stacks[0]->n_pids, 1);
  assert_string_equal(s->stacks[1]->frames[0].image, "/usr/bin/fixture");
  assert_int_equal(s->stacks[1]->frames[0].offset, 0x1000);
  assert_int_equal(s->stacks[1]->frames[0].pc, 0x401000);
  s = site(a, "file.open");
  assert_int_equal(s->n_stacks, 2);
  assert_string_equal(labels(s->stacks[0]), S2);
  assert_string_equal(labels(s->stacks[1]), S1);
  /* Drops of both sessions' batches, by cause (as `info` shows them). */
  assert_int_equal(a->drops, 14);
  assert_int_equal(a->drops_ring_full, 6);
  assert_int_equal(a->drops_reentrant, 2);
  assert_int_equal(a->drops_other, 4);
  assert_int_equal(a->drops_write_error, 2);
  assert_int_equal(a->damaged_batches, 0);
  assert_int_equal(a->live_processes, 0);
  stkr_agg_free(a);
}

static void test_two_processes_add_up(void **state) {
  const char *d = fx_tmpdir("agg-two");
  stkr_agg *a;
  size_t i;
  (void)state;

  assert_int_equal(fx_std_write(d, 1), 0);
  assert_int_equal(fx_std_write(d, 2), 0);
  a = agg_dir(d, NULL);
  assert_int_equal(a->n_processes, 2);
  assert_int_equal(a->events, 18);
  assert_int_equal(a->n_stacks, 9); /* merged by content */
  for (i = 0; i < a->n_stacks; i++) {
    assert_int_equal(a->stacks[i].n_pids, 2);
    assert_int_equal(a->stacks[i].count % 2, 0);
  }
  assert_int_equal(site(a, "net.connect")->count, 6);
  assert_int_equal(a->drops, 28);
  stkr_agg_free(a);
}

/* Session 1: standard batches 0..2. Session 2 (same pid, later start):
 * ids rotated, so site 1 / thread 1 / stack 1 mean net.connect /
 * worker-1 / the one-PC stack. Two events at those ids must count there,
 * not under session 1's meaning of the same ids. */
static void test_sessions_do_not_share_ids(void **state) {
  static const uint32_t s3[] = {1, 2, 3}, t2[] = {1, 2}, k3[] = {1, 2, 3};
  static const fx_ev e2[] = {{0, 1, 1, 1, NULL, 0, false},
                             {10, 1, 1, 1, NULL, 0, false}};
  fx_batch b = {.seq = 1, .header = true, .segment_seq = 2, .sites = s3,
                .n_sites = 3, .threads = t2, .n_threads = 2, .stacks = k3,
                .n_stacks = 3, .base_ts = 9000000000ull, .evs = e2,
                .n_evs = 2, .start_shift = 5000000000ull, .rotate = 1};
  const char *d = fx_tmpdir("agg-sess");
  stkr_fmt_buf buf = {0};
  const stkr_agg_site *s;
  stkr_agg *a;
  (void)state;

  assert_int_equal(fx_std_encode(0, 3, FX_PID, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 1, &buf), 0);
  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 2, &buf), 0);
  stkr_fmt_buf_free(&buf);

  a = agg_dir(d, NULL);
  assert_int_equal(a->events, 8);
  s = site(a, "net.connect");
  assert_int_equal(s->count, 3);
  assert_int_equal(s->n_stacks, 1);
  assert_string_equal(labels(s->stacks[0]), S2);
  s = site(a, "privacy.clipboard.read");
  assert_int_equal(s->count, 2); /* session 1 only */
  stkr_agg_free(a);
  {
    stkr_agg_opts o = {.thread_glob = "worker-1"};
    /* Session 1's thread 2 and session 2's thread 1 are worker-1. */
    a = agg_dir(d, &o);
    assert_int_equal(a->events, 4);
    assert_int_equal(site(a, "net.connect")->count, 3);
    assert_int_equal(site(a, "privacy.clipboard.read")->count, 1);
    stkr_agg_free(a);
  }
}

/* One stack id at two sites, alternating: the aggregation's id-indexed
 * level (agg.c, dense_key) remembers one (session, site) per stack id, so
 * this pattern misses it on every event and must still count each pair
 * apart. */
static void test_one_stack_id_at_two_sites(void **state) {
  static const uint32_t s3[] = {1, 2, 3}, t2[] = {1, 2}, k3[] = {1, 2, 3};
  static const fx_ev ev[] = {{0, 1, 1, 3, NULL, 0, false},
                             {10, 2, 1, 3, NULL, 0, false},
                             {10, 1, 2, 3, NULL, 0, false},
                             {10, 2, 2, 3, NULL, 0, false},
                             {10, 1, 1, 3, NULL, 0, false},
                             {10, 3, 1, 1, NULL, 0, false},
                             {10, 3, 1, 1, NULL, 0, false}};
  fx_batch b = {.seq = 1, .header = true, .segment_seq = 1, .sites = s3,
                .n_sites = 3, .threads = t2, .n_threads = 2, .stacks = k3,
                .n_stacks = 3, .base_ts = 9000000000ull, .evs = ev,
                .n_evs = sizeof ev / sizeof *ev};
  const char *d = fx_tmpdir("agg-idsite");
  stkr_fmt_buf buf = {0};
  stkr_agg *a;
  size_t i;
  uint64_t total = 0;
  (void)state;

  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);

  a = agg_dir(d, NULL);
  assert_int_equal(a->events, 7);
  assert_int_equal(a->n_sites, 3);
  for (i = 0; i < a->n_sites; i++) {
    assert_int_equal(a->sites[i].n_stacks, 1);
    total += a->sites[i].count;
  }
  assert_int_equal(total, 7);
  assert_int_equal(site(a, "privacy.clipboard.read")->count, 3);
  assert_int_equal(site(a, "net.connect")->count, 2);
  assert_int_equal(site(a, "file.open")->count, 2);
  assert_string_equal(labels(site(a, "privacy.clipboard.read")->stacks[0]), S3);
  assert_string_equal(labels(site(a, "net.connect")->stacks[0]), S3);
  assert_string_equal(labels(site(a, "file.open")->stacks[0]), S1);
  stkr_agg_free(a);
}

/* ---- filters -------------------------------------------------------------- */

static uint64_t count_with(const char *d, stkr_agg_opts o) {
  stkr_agg *a = agg_dir(d, &o);
  uint64_t n = a->events;

  assert_int_equal(a->events_read, 9);
  stkr_agg_free(a);
  return n;
}

static void test_filters(void **state) {
  const char *d = fx_tmpdir("agg-filt");
  stkr_agg_opts o;
  stkr_agg *a;
  (void)state;

  assert_int_equal(fx_std_write(d, FX_PID), 0);
  memset(&o, 0, sizeof o);
  o.site_glob = "net.*";
  assert_int_equal(count_with(d, o), 3);
  o.site_glob = "*.read";
  assert_int_equal(count_with(d, o), 3);
  o.site_glob = "*o*"; /* net.connect, privacy.clipboard.read, file.open */
  assert_int_equal(count_with(d, o), 8);
  o.site_glob = "nothing";
  assert_int_equal(count_with(d, o), 0);
  memset(&o, 0, sizeof o);
  o.thread_glob = "main"; /* thread 1 */
  assert_int_equal(count_with(d, o), 4);
  o.thread_glob = "worker-*"; /* thread 2 */
  assert_int_equal(count_with(d, o), 3);
  o.thread_glob = "5000"; /* thread 3 (no name) by its tid */
  assert_int_equal(count_with(d, o), 2);
  o.thread_glob = "4243"; /* worker-1 by tid */
  assert_int_equal(count_with(d, o), 3);
  o.site_glob = "net.*"; /* both: worker-1 at net.connect */
  assert_int_equal(count_with(d, o), 2);
  /* Time since the process's recording start (Header.start_mono_ns,
   * FX_START_MONO), not since its first event read: events at T0 + 0,
   * +1000, +700, +10005, +10012, +19980, +100000, +99950, +212345 ns,
   * with T0 = 2000000000 - FX_START_MONO ns = 1 s. */
  const double t0 = (2000000000.0 - (double)FX_START_MONO) / 1e9;
  memset(&o, 0, sizeof o);
  o.from_s = t0 + 50e-6;
  assert_int_equal(count_with(d, o), 3);
  o.from_s = 0;
  o.to_s = t0 + 20e-6;
  assert_int_equal(count_with(d, o), 6);
  o.from_s = t0 + 10e-6;
  o.to_s = t0 + 99.99e-6;
  assert_int_equal(count_with(d, o), 4);
  o.from_s = 0;
  o.to_s = t0;
  assert_int_equal(count_with(d, o), 0); /* nothing before the first */
  o.from_s = t0 + 0.5;
  o.to_s = 0;
  assert_int_equal(count_with(d, o), 0);
  /* A bad window is refused. */
  o.from_s = 2;
  o.to_s = 1;
  assert_int_equal(agg_paths(&d, 1, &o, &a), -EINVAL);
  o.from_s = -1;
  o.to_s = 0;
  assert_int_equal(agg_paths(&d, 1, &o, &a), -EINVAL);
}

/* An event recorded 500 ns before the process's recording start (a
 * follow-mode child's first event precedes its own init) is at time 0,
 * not before the window. */
static void test_window_event_before_first(void **state) {
  static const uint32_t s3[] = {1, 2, 3}, t1[] = {1}, k1[] = {1};
  static const fx_ev e[] = {{0, 1, 1, 1, NULL, 0, false},
                            {-500, 2, 1, 1, NULL, 0, false},
                            {2000, 3, 1, 1, NULL, 0, false}};
  fx_batch b = {.seq = 1, .header = true, .segment_seq = 1, .sites = s3,
                .n_sites = 3, .threads = t1, .n_threads = 1, .stacks = k1,
                .n_stacks = 1, .base_ts = FX_START_MONO, .evs = e,
                .n_evs = 3};
  const char *d = fx_tmpdir("agg-early");
  stkr_fmt_buf buf = {0};
  stkr_agg_opts o = {.to_s = 1e-6};
  stkr_agg *a;
  (void)state;

  assert_int_equal(fx_encode(&b, &buf), 0);
  assert_int_equal(fx_write_segment(d, FX_PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
  a = agg_dir(d, &o);
  assert_int_equal(a->events, 2);
  assert_int_equal(site(a, "net.connect")->count, 1); /* the early one */
  stkr_agg_free(a);
  o.from_s = 1e-7;
  o.to_s = 0;
  a = agg_dir(d, &o);
  assert_int_equal(a->events, 1);
  assert_string_equal(a->sites[0].name, "file.open");
  stkr_agg_free(a);
}

/* ---- symbolized stacks ------------------------------------------------------ */

static void test_symbolized_labels_and_app_only(void **state) {
  const char *d = sr_std_dir("agg-sym", 100, 0x400000);
  stkr_agg_opts o = {.app_only = true};
  const stkr_agg_site *s;
  stkr_agg *a;
  (void)state;

  assert_non_null(d);
  a = agg_dir(d, NULL);
  assert_int_equal(a->events, 8);
  s = site(a, "files.open");
  assert_int_equal(s->count, 5);
  assert_int_equal(s->n_stacks, 2);
  assert_int_equal(s->stacks[0]->count, 4);
  assert_string_equal(labels(s->stacks[0]),
                      "open_config;libc_wrapper;load;main");
  assert_string_equal(s->stacks[0]->frames[0].file, "app/config.c");
  assert_int_equal(s->stacks[0]->frames[0].line, 12);
  assert_true(s->stacks[0]->frames[2].inlined);
  assert_false(s->stacks[0]->frames[3].inlined);
  assert_string_equal(labels(s->stacks[1]), "__libc_open;__libc_start");
  s = site(a, "network.connect");
  /* Unknown function: the image's base name + offset from its load. */
  assert_string_equal(labels(s->stacks[0]), "app+0x400;main");
  assert_true(site(a, "files.stat")->stacks[0]->truncated);
  stkr_agg_free(a);

  a = agg_dir(d, &o);
  s = site(a, "files.open");
  assert_string_equal(labels(s->stacks[0]), "open_config;load;main");
  /* No app frame at all: the innermost is kept. */
  assert_string_equal(labels(s->stacks[1]), "__libc_open");
  stkr_agg_free(a);
}

/* A process's symbolized batch, then its recovered one with the same
 * stacks as PCs only (tools/stackrec/agg_learn.h): each raw stack takes
 * the frames the symbolized ones gave its PCs, inlined ones included
 * (more frames than PCs), and merges with them; --app-only applies as to
 * symbolized stacks. */
static void test_recovered_raw_stacks_take_learned_frames(void **state) {
  const char *d = sr_std_dir("agg-learn", 100, 0x400000);
  sr_rec raw = sr_std(100, 0x400000);
  stkr_agg_opts o = {.app_only = true};
  const stkr_agg_site *s;
  stkr_agg *a;
  (void)state;

  assert_non_null(d);
  raw.raw = raw.recovered = true;
  raw.seq = 2;
  assert_int_equal(sr_write(d, &raw), 0);
  a = agg_dir(d, NULL);
  assert_int_equal(a->events, 16);
  s = site(a, "files.open");
  assert_int_equal(s->n_stacks, 2);
  assert_int_equal(s->stacks[0]->count, 8);
  assert_string_equal(labels(s->stacks[0]),
                      "open_config;libc_wrapper;load;main");
  assert_true(s->stacks[0]->frames[2].inlined);
  /* The unknown app frame stays an image+offset, as in the symbolized. */
  assert_string_equal(labels(site(a, "network.connect")->stacks[0]),
                      "app+0x400;main");
  assert_int_equal(site(a, "network.connect")->n_stacks, 1);
  stkr_agg_free(a);
  a = agg_dir(d, &o);
  assert_string_equal(labels(site(a, "files.open")->stacks[0]),
                      "open_config;load;main");
  assert_int_equal(site(a, "files.open")->stacks[0]->count, 8);
  stkr_agg_free(a);
}

/* ---- two builds (tests/symrec.h) ---------------------------------------- */

/* r1 and r2 written into fresh directories tag1 and tag2: dirs[0] (its
 * path kept in keep, past fx_tmpdir's next call) and dirs[1]. */
static void write_two(const char *dirs[2], char *keep, size_t cap,
                      const char *tag1, const sr_rec *r1, const char *tag2,
                      const sr_rec *r2) {
  const char *d = sr_dir(tag1, r1);

  assert_non_null(d);
  snprintf(keep, cap, "%s", d);
  dirs[0] = keep;
  dirs[1] = sr_dir(tag2, r2);
  assert_non_null(dirs[1]);
}

/* Another build, sr_std(200, 0x800000), whose files.open stack (its
 * first) reaches open_config from another line: load calls it from
 * app/load.c:31 (the standard's: 30), main is at main_file:40. Its frames
 * go into f, its stacks into st. */
static sr_rec other_build(sr_stack st[4], sr_frame f[4],
                          const char *main_file) {
  static const sr_frame from_31[] = {
      {"open_config", "app/config.c", 12, false, true},
      {"libc_wrapper", NULL, 0, false, false},
      {"load", "app/load.c", 31, true, true},
      {"main", NULL, 40, false, true},
  };
  sr_rec r = sr_std(200, 0x800000);

  memcpy(f, from_31, sizeof from_31);
  f[3].file = main_file;
  memcpy(st, r.stacks, 4 * sizeof *st);
  st[0].f = f;
  r.stacks = st;
  return r;
}

/* Two builds: other addresses, same functions. By frames they are one
 * program: the stacks merge and their counts add up. */
static void test_builds_merge_by_frames(void **state) {
  const char *dirs[2];
  char keep[4096];
  sr_rec r1 = sr_std(100, 0x400000), r2 = sr_std(200, 0x7f1234000000ull);
  const stkr_agg_site *s;
  stkr_agg *a;
  size_t i;
  (void)state;

  write_two(dirs, keep, sizeof keep, "agg-build1", &r1, "agg-build2", &r2);
  assert_int_equal(agg_paths(dirs, 2, NULL, &a), 0);
  assert_int_equal(a->events, 16);
  assert_int_equal(a->n_stacks, 4);
  for (i = 0; i < a->n_stacks; i++)
    assert_int_equal(a->stacks[i].n_pids, 2);
  s = site(a, "files.open");
  assert_int_equal(s->stacks[0]->count, 8);
  assert_int_equal(s->stacks[0]->frames[3].line, 40); /* both agree */
  /* Unknown functions merge by image+offset, wherever the image was. */
  assert_int_equal(site(a, "network.connect")->stacks[0]->count, 4);
  stkr_agg_free(a);
}

/* The same functions reached from other lines: still one stack, but no
 * line is shown that is not true of every event. */
static void test_merged_lines_that_differ_are_dropped(void **state) {
  sr_stack st[4];
  sr_frame f[4];
  const char *dirs[2];
  char keep[4096];
  sr_rec r1 = sr_std(100, 0x400000),
         r2 = other_build(st, f, "app/main2.c");
  const stkr_agg_stack *k;
  stkr_agg_opts o = {.granularity = STKR_AGG_BY_FUNCTION};
  stkr_agg *a;
  (void)state;

  write_two(dirs, keep, sizeof keep, "agg-line1", &r1, "agg-line2", &r2);
  /* By function: one stack, lines kept only where they agree. */
  assert_int_equal(agg_paths(dirs, 2, &o, &a), 0);
  k = site(a, "files.open")->stacks[0];
  assert_int_equal(k->count, 8);
  assert_string_equal(k->frames[0].file, "app/config.c");
  assert_int_equal(k->frames[0].line, 12);
  assert_string_equal(k->frames[2].file, "app/load.c");
  assert_int_equal(k->frames[2].line, 0);
  assert_null(k->frames[3].file);
  assert_int_equal(k->frames[3].line, 0);
  stkr_agg_free(a);
  /* By line (the default): the call from load.c at another line, and
   * main in another file, make two stacks, each with its true lines. */
  assert_int_equal(agg_paths(dirs, 2, NULL, &a), 0);
  assert_int_equal(site(a, "files.open")->n_stacks, 3); /* + libc-only */
  for (size_t i = 0; i < 2; i++) {
    k = site(a, "files.open")->stacks[i];
    assert_int_equal(k->count, 4);
    assert_string_equal(k->frames[0].function, "open_config");
    assert_non_null(k->frames[3].file);
    assert_int_equal(k->frames[2].line,
                     strcmp(k->frames[3].file, "app/main.c") == 0 ? 30 : 31);
  }
  stkr_agg_free(a);
}

static void test_by_thread(void **state) {
  const stkr_agg_opts o = {.by_thread = true};
  stkr_agg *a = agg_dir(sr_std_dir("agg-thr", 100, 0x400000), &o);
  const stkr_agg_site *s = site(a, "files.open");
  (void)state;

  assert_int_equal(s->n_stacks, 3); /* open stack on main and io */
  assert_int_equal(s->stacks[0]->count, 3);
  assert_string_equal(s->stacks[0]->thread, "main");
  assert_int_equal(s->stacks[0]->tid, 1001);
  assert_int_equal(s->stacks[1]->count, 1);
  assert_int_equal(s->stacks[2]->count, 1);
  assert_false(s->stacks[0]->several_tids);
  stkr_agg_free(a);
}

/* The stack of one site kept apart by thread (or process, or payload)
 * shares one frame list (QA, session 26: a copy each, 1.1 GB for one
 * stack's million payloads); a change that one of them alone takes is
 * made on a copy of its own, never on the other's frames. */
static void test_shared_frames_copied_on_change(void **state) {
  static const sr_event on_main[] = {{1, 1, 0}};
  const stkr_agg_opts o = {.by_thread = true,
                           .granularity = STKR_AGG_BY_FUNCTION};
  sr_stack st[4];
  sr_frame f[4];
  /* Another build reaches load from line 31, on main only. */
  sr_rec r1 = sr_std(100, 0x400000), r2 = other_build(st, f, "app/main.c");
  const char *dirs[2];
  char keep[4096];
  const stkr_agg_site *s;
  stkr_agg *a;
  (void)state;

  r2.evs = on_main;
  r2.n_evs = 1;
  write_two(dirs, keep, sizeof keep, "agg-share1", &r1, "agg-share2", &r2);
  assert_int_equal(agg_paths(dirs, 1, &o, &a), 0);
  s = site(a, "files.open");
  assert_int_equal(s->n_stacks, 3);
  assert_string_equal(s->stacks[1]->thread, "io");
  assert_int_equal(s->stacks[1]->n_frames, 4);
  assert_ptr_equal(s->stacks[0]->frames, s->stacks[1]->frames);
  stkr_agg_free(a);
  /* With the other build. */
  assert_int_equal(agg_paths(dirs, 2, &o, &a), 0);
  s = site(a, "files.open");
  assert_int_equal(s->stacks[0]->count, 4);
  assert_string_equal(s->stacks[0]->thread, "main");
  assert_int_equal(s->stacks[0]->frames[2].line, 0);
  assert_string_equal(s->stacks[1]->thread, "io");
  assert_int_equal(s->stacks[1]->frames[2].line, 30);
  assert_int_equal(s->stacks[1]->frames[0].line, 12);
  stkr_agg_free(a);
}

/* Two processes whose threads have the same tids (containers, pid
 * namespaces): one row by thread name, but named as several threads, not
 * by a tid that is true of one process only. */
static void test_by_thread_same_tid_two_processes(void **state) {
  const stkr_agg_opts o = {.by_thread = true};
  char d1[4096];
  const char *dirs[2];
  stkr_agg *a;
  stkr_agg_row *rows;
  size_t n, i;
  (void)state;

  snprintf(d1, sizeof d1, "%s", sr_std_dir("agg-tid1", 100, 0x400000));
  dirs[0] = d1;
  dirs[1] = sr_std_dir("agg-tid2", 200, 0x400000);
  assert_int_equal(agg_paths(dirs, 2, &o, &a), 0);
  assert_int_equal(site(a, "files.open")->stacks[0]->count, 6);
  assert_true(site(a, "files.open")->stacks[0]->several_tids);
  assert_int_equal(stkr_agg_breakdown(a, STKR_BY_THREAD, &rows, &n), 0);
  for (i = 0; i < n && strncmp(rows[i].key, "main ", 5) != 0; i++) {}
  assert_true(i < n);
  assert_string_equal(rows[i].key, "main (several threads)");
  stkr_agg_rows_free(rows, n);
  stkr_agg_free(a);
  /* The same pid too (pid 1 in two containers): still two processes. */
  dirs[1] = sr_std_dir("agg-tid3", 100, 0x400000);
  assert_int_equal(agg_paths(dirs, 2, &o, &a), 0);
  assert_int_equal(site(a, "files.open")->stacks[0]->count, 6);
  assert_true(site(a, "files.open")->stacks[0]->several_tids);
  stkr_agg_free(a);
}

static void test_empty_and_bad_arguments(void **state) {
  const char *d = fx_tmpdir("agg-empty");
  stkr_agg *a = NULL;
  stkr_agg_opts o = {.site_glob = "x"};
  (void)state;

  a = agg_dir(d, &o); /* no segment files: nothing, no error */
  assert_int_equal(a->events_read, 0);
  assert_int_equal(a->n_sites, 0);
  assert_int_equal(a->n_stacks, 0);
  assert_int_equal(a->n_processes, 0);
  stkr_agg_free(a);
  assert_int_equal(stkr_agg_build(NULL, NULL, NULL, NULL, &a), -EINVAL);
  stkr_agg_free(NULL);
}

/* ---- real recordings by the recorder ---------------------------------------- */

STKR_SITE_DEFINE(g_site_a, "test.agg.a");
STKR_SITE_DEFINE(g_site_b, "test.agg.b");

RC_FRAME(agg_mid_a, &g_site_a)
RC_FRAME(agg_mid_b, &g_site_b)

/* 300 events via agg_mid_a and 200 via agg_mid_b (rc_record_in_child's
 * body). */
static void record_child(void) {
  for (int i = 0; i < 500; i++) {
    if (i % 5 < 3)
      agg_mid_a();
    else
      agg_mid_b();
  }
}

static void test_recorded_by_two_processes(void **state) {
  const char *d = fx_tmpdir("agg-rec");
  char dir[4096];
  const stkr_agg_site *s;
  const stkr_config cfg = {.flush_interval_ms = 20};
  /* By function: the two rc_record_in_child() calls below are at two lines,
   * which a build with debug info (-c dbg under the sanitizers) would keep
   * apart at the default granularity. */
  stkr_agg_opts f = {.granularity = STKR_AGG_BY_FUNCTION};
  stkr_agg_opts o = {.app_only = true, .granularity = STKR_AGG_BY_FUNCTION};
  stkr_agg *a;
  size_t i;
  bool any_lib = false;
  (void)state;

  snprintf(dir, sizeof dir, "%s", d);
  rc_record_in_child(dir, cfg, record_child);
  rc_record_in_child(dir, cfg, record_child);
  a = agg_dir(dir, &f);
  assert_int_equal(a->n_processes, 2);
  assert_int_equal(a->events, 1000);
  assert_int_equal(a->n_sites, 2);
  assert_string_equal(a->sites[0].name, "test.agg.a");
  assert_int_equal(a->sites[0].count, 600);
  assert_int_equal(a->sites[1].count, 400);
  /* One call chain per site, the same code in both processes: one stack
   * each, seen in both. */
  for (i = 0; i < 2; i++) {
    s = &a->sites[i];
    assert_int_equal(s->n_stacks, 1);
    assert_int_equal(s->stacks[0]->n_pids, 2);
    assert_true(s->stacks[0]->n_frames >= 3);
    assert_non_null(s->stacks[0]->frames[0].function);
    assert_string_equal(s->stacks[0]->frames[0].function, "rc_record");
    assert_string_equal(s->stacks[0]->frames[1].function,
                        i == 0 ? "agg_mid_a" : "agg_mid_b");
    assert_string_equal(s->stacks[0]->frames[2].function, "record_child");
    assert_true(s->stacks[0]->frames[0].is_app);
  }
  for (i = 0; i < a->sites[0].stacks[0]->n_frames; i++)
    any_lib = any_lib || !a->sites[0].stacks[0]->frames[i].is_app;
  assert_true(any_lib); /* cmocka and libc frames further out */
  stkr_agg_free(a);

  a = agg_dir(dir, &o);
  assert_int_equal(a->events, 1000);
  for (i = 0; i < a->sites[0].stacks[0]->n_frames; i++)
    assert_true(a->sites[0].stacks[0]->frames[i].is_app);
  assert_string_equal(a->sites[0].stacks[0]->frames[0].function, "rc_record");
  stkr_agg_free(a);
}

TL_TEST_MAIN("agg", NULL, NULL, test_std_sites_stacks_and_drops,
             test_two_processes_add_up, test_sessions_do_not_share_ids,
             test_one_stack_id_at_two_sites, test_filters,
             test_window_event_before_first,
             test_symbolized_labels_and_app_only,
             test_recovered_raw_stacks_take_learned_frames,
             test_builds_merge_by_frames,
             test_merged_lines_that_differ_are_dropped, test_by_thread,
             test_shared_frames_copied_on_change,
             test_by_thread_same_tid_two_processes,
             test_empty_and_bad_arguments, test_recorded_by_two_processes)
