/*
 * test-reader-ids.c: the reader's two lookup caches (proto/stkr_batch.c,
 * since 262f611) against one recording whose ids make each shortcut give a
 * wrong answer if it is taken when it must not be:
 *   - a stack's site entry (stkr__rd_stack.site_ix), kept by its first
 *     event that finds its own site: events with a site column that
 *     agrees and disagrees with their stack's site, an undefined site id,
 *     site 0; batches without a site column (the site from the stack),
 *     a stack whose site is defined only in a later batch;
 *   - the last event's thread entry (stkr_reader.ev_thread_ix), reset at
 *     each batch load: runs of one thread and switches, an undefined
 *     thread, a thread renamed in a later batch, and a second session
 *     (another Header) in which thread 1 is another entry than before.
 * Every event's site, thread (tid and name), stack PCs and undefined flags
 * are what the reader gave before the caches (the test passes on
 * 262f611^), each one what stackrec.proto's rules say.
 * Each cache broken (its id check or its reset left out) fails this test;
 * test-reader.c and test-damage.c cannot see a broken site cache: the
 * fixture's stacks (fixture.c) have no site.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tests/reader_util.h"
#include "tests/testlib.h"

#define RI_PID 4242u

typedef struct ri_site {
  uint32_t id;
  const char *name;
} ri_site;

typedef struct ri_thread {
  uint32_t id;
  uint64_t tid;
  const char *name;
} ri_thread;

typedef struct ri_stack {
  uint32_t id, site;
  uint64_t pcs[2];
  size_t n_pcs;
} ri_stack;

/* One batch: a Header when start_mono is set, its definitions, and its
 * events at 1000 + 1, + 2, ... ns. sites NULL: no site column (every
 * event's site is its stack's), the recorder's usual form. */
typedef struct ri_batch {
  uint64_t seq;
  uint64_t start_mono, start_wall, session;
  const ri_site *defs_site;
  size_t n_defs_site;
  const ri_thread *defs_thread;
  size_t n_defs_thread;
  const ri_stack *defs_stack;
  size_t n_defs_stack;
  const uint32_t *sites, *threads, *stacks;
  size_t n;
} ri_batch;

#define RI_ARR(a) a, sizeof(a) / sizeof((a)[0])
#define RI_MAX 16

/* Session 1, batch 1: sites 1, 2; threads 1, 2; stack 3's site (9)
 * defined only in batch 2. Site column: 1 agrees with stack 1's site,
 * 2 disagrees, 5 is undefined, 0 is no site; thread 3 and stack 9 are
 * undefined; stack 3 at site 2 and stack 2 at site 1 (not theirs). */
static const ri_site b1_sites[] = {{1, "site.one"}, {2, "site.two"}};
static const ri_thread b1_threads[] = {{1, 100, "t1"}, {2, 200, "t2"}};
static const ri_stack b1_stacks[] = {
    {1, 1, {0x1000}, 1}, {2, 2, {0x2000, 0x2100}, 2}, {3, 9, {0x3000}, 1}};
static const uint32_t b1_site_col[] = {1, 2, 1, 5, 0, 1, 2, 2, 1};
static const uint32_t b1_thread_col[] = {1, 2, 1, 1, 3, 2, 2, 1, 2};
static const uint32_t b1_stack_col[] = {1, 1, 1, 1, 1, 9, 2, 3, 2};
/* Batch 2: thread 1 renamed, thread 4 and site 9 new; no site column. */
static const ri_site b2_sites[] = {{9, "site.nine"}};
static const ri_thread b2_threads[] = {{1, 100, "t1-renamed"},
                                       {4, 400, "t4"}};
static const uint32_t b2_thread_col[] = {1, 1, 4, 4, 2, 3, 1};
static const uint32_t b2_stack_col[] = {1, 3, 3, 2, 1, 1, 9};
/* Batch 3: stack 4 (site 2) new; its events at sites 2, 1, 2. */
static const ri_stack b3_stacks[] = {{4, 2, {0x4000}, 1}};
static const uint32_t b3_site_col[] = {2, 1, 2};
static const uint32_t b3_thread_col[] = {4, 4, 1};
static const uint32_t b3_stack_col[] = {4, 4, 4};
/* Session 2 (other start times, seq 1 again): ids start again. Thread 1
 * is the second entry now (thread 5 the first), and batch 3 ended on
 * thread 1: a thread entry kept across the batch load names s2-t5. */
static const ri_site b4_sites[] = {{1, "s2.site"}};
static const ri_thread b4_threads[] = {{5, 555, "s2-t5"}, {1, 111, "s2-t1"}};
static const ri_stack b4_stacks[] = {{1, 1, {0x5000}, 1}};
static const uint32_t b4_thread_col[] = {1, 1, 5, 2};
static const uint32_t b4_stack_col[] = {1, 1, 1, 1};

static const ri_batch ri_rec[] = {
    {.seq = 1, .start_mono = 5, .start_wall = 6, .session = 77,
     .defs_site = RI_ARR(b1_sites), .defs_thread = RI_ARR(b1_threads),
     .defs_stack = RI_ARR(b1_stacks), .sites = b1_site_col,
     .threads = b1_thread_col, .stacks = RI_ARR(b1_stack_col)},
    {.seq = 2, .defs_site = RI_ARR(b2_sites),
     .defs_thread = RI_ARR(b2_threads), .threads = b2_thread_col,
     .stacks = RI_ARR(b2_stack_col)},
    {.seq = 3, .defs_stack = RI_ARR(b3_stacks), .sites = b3_site_col,
     .threads = b3_thread_col, .stacks = RI_ARR(b3_stack_col)},
    {.seq = 1, .start_mono = 50, .start_wall = 60, .session = 78,
     .defs_site = RI_ARR(b4_sites), .defs_thread = RI_ARR(b4_threads),
     .defs_stack = RI_ARR(b4_stacks), .threads = b4_thread_col,
     .stacks = RI_ARR(b4_stack_col)},
};

/* What the reader must deliver. site "?": undefined (site_undefined);
 * thread NULL: undefined ("?", tid 0); n_pcs 0: stack undefined. */
typedef struct ri_want {
  uint64_t ts;
  const char *site;
  uint64_t tid;
  const char *thread;
  uint64_t pcs[2];
  size_t n_pcs;
} ri_want;

static const ri_want ri_wants[] = {
    /* batch 1 */
    {1001, "site.one", 100, "t1", {0x1000}, 1},
    {1002, "site.two", 200, "t2", {0x1000}, 1}, /* not stack 1's site */
    {1003, "site.one", 100, "t1", {0x1000}, 1},
    {1004, "?", 100, "t1", {0x1000}, 1},        /* site 5 undefined */
    {1005, "?", 0, NULL, {0x1000}, 1},          /* site 0, thread 3 */
    {1006, "site.one", 200, "t2", {0}, 0},      /* stack 9 undefined */
    {1007, "site.two", 200, "t2", {0x2000, 0x2100}, 2},
    {1008, "site.two", 100, "t1", {0x3000}, 1}, /* site 9 not yet */
    {1009, "site.one", 200, "t2", {0x2000, 0x2100}, 2},
    /* batch 2: sites from the stacks */
    {1001, "site.one", 100, "t1-renamed", {0x1000}, 1},
    {1002, "site.nine", 100, "t1-renamed", {0x3000}, 1},
    {1003, "site.nine", 400, "t4", {0x3000}, 1},
    {1004, "site.two", 400, "t4", {0x2000, 0x2100}, 2},
    {1005, "site.one", 200, "t2", {0x1000}, 1},
    {1006, "site.one", 0, NULL, {0x1000}, 1},   /* thread 3 */
    {1007, "?", 100, "t1-renamed", {0}, 0},     /* stack 9: no site */
    /* batch 3 */
    {1001, "site.two", 400, "t4", {0x4000}, 1},
    {1002, "site.one", 400, "t4", {0x4000}, 1}, /* not stack 4's site */
    {1003, "site.two", 100, "t1-renamed", {0x4000}, 1},
    /* session 2 */
    {1001, "s2.site", 111, "s2-t1", {0x5000}, 1},
    {1002, "s2.site", 111, "s2-t1", {0x5000}, 1},
    {1003, "s2.site", 555, "s2-t5", {0x5000}, 1},
    {1004, "s2.site", 0, NULL, {0x5000}, 1},    /* thread 2 gone */
};
#define RI_N_WANTS (sizeof(ri_wants) / sizeof(ri_wants[0]))

/* Append rb, encoded as the worker does (stkr_fmt_encode_batch), to out.
 * Its own Events: fixture.c's fx_encode_events always writes a site
 * column, and half of these batches must have none. */
static void ri_encode(const ri_batch *rb, stkr_fmt_buf *out) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h;
  Stackrec__Events e = STACKREC__EVENTS__INIT;
  Stackrec__SiteDef sd[RI_MAX], *sdp[RI_MAX];
  Stackrec__ThreadDef td[RI_MAX], *tdp[RI_MAX];
  Stackrec__StackDef kd[RI_MAX], *kdp[RI_MAX];
  int64_t deltas[RI_MAX];
  size_t i;

  assert_true(rb->n_defs_site <= RI_MAX && rb->n_defs_thread <= RI_MAX &&
              rb->n_defs_stack <= RI_MAX && rb->n <= RI_MAX);
  b.seq = rb->seq;
  if (rb->start_mono != 0) {
    fx_header_init(&h, RI_PID, "hand", rb->start_mono, rb->start_wall);
    h.session_id = rb->session;
    b.header = &h;
  }
  /* Each batch's definitions, in the order the tables list them. */
  b.sites = sdp;
  b.n_sites = rb->n_defs_site;
  for (i = 0; i < b.n_sites; i++) {
    stackrec__site_def__init(sdp[i] = &sd[i]);
    sd[i].id = rb->defs_site[i].id;
    sd[i].name = (char *)rb->defs_site[i].name;
  }
  b.threads = tdp;
  b.n_threads = rb->n_defs_thread;
  for (i = 0; i < b.n_threads; i++) {
    stackrec__thread_def__init(tdp[i] = &td[i]);
    td[i].id = rb->defs_thread[i].id;
    td[i].tid = rb->defs_thread[i].tid;
    td[i].name = (char *)rb->defs_thread[i].name;
  }
  b.stacks = kdp;
  b.n_stacks = rb->n_defs_stack;
  for (i = 0; i < b.n_stacks; i++) {
    stackrec__stack_def__init(kdp[i] = &kd[i]);
    kd[i].id = rb->defs_stack[i].id;
    kd[i].pcs = (uint64_t *)rb->defs_stack[i].pcs;
    kd[i].n_pcs = rb->defs_stack[i].n_pcs;
    kd[i].hash = 1;
    kd[i].site_id = rb->defs_stack[i].site;
  }
  for (i = 0; i < rb->n; i++)
    deltas[i] = 1;
  e.base_ts_ns = 1000;
  e.n_ts_delta_ns = e.n_thread_id = e.n_stack_id = rb->n;
  e.ts_delta_ns = deltas;
  e.thread_id = (uint32_t *)rb->threads;
  e.stack_id = (uint32_t *)rb->stacks;
  if (rb->sites != NULL) {
    e.n_site_id = rb->n;
    e.site_id = (uint32_t *)rb->sites;
  }
  b.events = &e;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, out), 0);
}

/* An event as "ts site tid(thread) pcs...", as `stackrec dump` shows it. */
static void ri_show(char *buf, size_t len, uint64_t ts, const char *site,
                    uint64_t tid, const char *thread, const uint64_t *pcs,
                    size_t n_pcs) {
  int k = snprintf(buf, len, "%llu %s %llu(%s) pcs", (unsigned long long)ts,
                   site, (unsigned long long)tid, thread);
  size_t i;

  for (i = 0; i < n_pcs && k > 0 && (size_t)k < len; i++)
    k += snprintf(buf + k, len - (size_t)k, " %#llx",
                  (unsigned long long)pcs[i]);
}

/* Does got say what w says, flags included? */
static bool ri_matches(const ru_ev *got, const ri_want *w) {
  const stkr_event_view *v = &got->v;
  bool site_undef = strcmp(w->site, "?") == 0;
  bool thread_undef = w->thread == NULL;
  bool stack_undef = w->n_pcs == 0;

  if (v->ts_ns != w->ts || v->pid != RI_PID || strcmp(v->site, w->site) != 0 ||
      v->tid != w->tid ||
      strcmp(v->thread_name, thread_undef ? "?" : w->thread) != 0 ||
      v->n_pcs != w->n_pcs ||
      (w->n_pcs && memcmp(got->pcs, w->pcs, w->n_pcs * sizeof(uint64_t))))
    return false;
  return v->site_undefined == site_undef &&
         v->thread_undefined == thread_undef &&
         v->stack_undefined == stack_undef && !v->stack_lost &&
         v->unresolved == (site_undef || thread_undef || stack_undef);
}

/* Every event of the recording, read from its directory, as ri_wants. */
static void test_sites_and_threads_by_id(void **state) {
  const char *dir = fx_tmpdir("ids");
  stkr_fmt_buf buf = {0};
  const stkr_process_info *p;
  const stkr_event_view *g;
  const ri_want *w;
  ru_reading rd;
  char got[256], want[256];
  size_t i, bad = 0;
  (void)state;

  assert_non_null(dir);
  for (i = 0; i < sizeof(ri_rec) / sizeof(ri_rec[0]); i++)
    ri_encode(&ri_rec[i], &buf);
  assert_int_equal(fx_write_segment(dir, RI_PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);

  ru_read_path(&rd, dir);
  ru_dump_log(&rd.log);
  assert_int_equal(rd.n, (int)RI_N_WANTS);
  /* All the differences first: one broken cache changes several events. */
  for (i = 0; i < RI_N_WANTS; i++) {
    if (ri_matches(&rd.got[i], &ri_wants[i]))
      continue;
    g = &rd.got[i].v;
    w = &ri_wants[i];
    ri_show(got, sizeof got, g->ts_ns, g->site, g->tid, g->thread_name,
            rd.got[i].pcs, g->n_pcs < 8 ? g->n_pcs : 8);
    ri_show(want, sizeof want, w->ts, w->site, w->tid,
            w->thread ? w->thread : "?", w->pcs, w->n_pcs);
    print_error("event %zu: got  %s (undefined: site %d thread %d stack %d)\n"
                "          want %s\n",
                i, got, g->site_undefined, g->thread_undefined,
                g->stack_undefined, want);
    bad++;
  }
  if (bad != 0)
    fail_msg("%zu of %zu events differ", bad, RI_N_WANTS);

  p = stkr_reader_process(rd.r, 0);
  assert_non_null(p);
  assert_int_equal(p->sessions, 2);
  assert_int_equal(p->events, RI_N_WANTS);
  /* 1004, 1005, 1006 of batch 1; 1006, 1007 of batch 2; the last. */
  assert_int_equal(p->unresolved_events, 6);
  assert_int_equal(ru_count(&rd.log, STKR_WARN_UNRESOLVED), 1);
  assert_int_equal(rd.log.n, 1);
  assert_non_null(strstr(rd.log.w[0].msg, "6 events"));
  stkr_reader_free(rd.r);
}

TL_TEST_MAIN("reader-ids", NULL, NULL, test_sites_and_threads_by_id)
