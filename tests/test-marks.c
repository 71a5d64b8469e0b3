/*
 * test-marks.c: marks in the stream (issue 13).
 *
 * - stkr_mark in a recording process (a forked child: the recorder is
 *   process-wide): read back as events with is_mark, the mark's name,
 *   payload, thread; the setter's stack (the frame that called stkr_mark
 *   first, as for stkr_event); not counted as events; handed out before the
 *   events of its batch that were recorded after it on another thread.
 * - mark names: validated, one site per name, at most STKR_MAX_MARKS.
 * - `stackrec mark DIR NAME [PAYLOAD]`: the mark reaches every process of
 *   DIR before its first event, time-stamped between the clock readings
 *   around the command; works after the program ended; usage errors (2),
 *   DIR missing (3); a damaged marks file warns with file and offset.
 * - dump / dump --json / export --format jsonl print marks (kind "mark");
 *   report does not count them; info counts them apart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/cli_run.h"
#include "tests/testlib.h"

static char g_tmp[2048];

static uint64_t mono_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void make_dir(char *out, size_t len, const char *name) {
  char cmd[4200];

  snprintf(out, len, "%s/%s", g_tmp, name);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", out, out);
  assert_int_equal(system(cmd), 0);
}

/* ---- a recording made by a child --------------------------------------- */

typedef struct child_out {
  uint64_t ev_pc0, mark_pc0;   /* first PC of the event and of the mark
                                  recorded from one function */
  uint64_t mark_ts_before;     /* clock just before stkr_mark */
  int rc_mark, rc_bad;
} child_out;

static _Atomic int g_go; /* the worker thread may record its second half */

static void *other_thread(void *arg) {
  int i;

  (void)arg;
  for (i = 0; i < 100; i++)
    STKR_EVENT("test.before", NULL, 0);
  while (!__atomic_load_n(&g_go, __ATOMIC_ACQUIRE))
    usleep(100);
  for (i = 0; i < 100; i++) {
    char p[16];
    int n = snprintf(p, sizeof(p), "a%d", i);

    STKR_EVENT("test.after", p, (size_t)n); /* payloads survive reordering */
  }
  return NULL;
}

/* The event and the mark from one function: their first PCs are both in
 * it (stkr_mark is inlined, so its caller's frame comes first). */
static __attribute__((noinline)) int set_consent(child_out *o) {
  STKR_EVENT("test.setter", NULL, 0);
  o->mark_ts_before = mono_ns();
  return stkr_mark("consent.granted", "v=2", 3);
}

static _Atomic int g_attached, g_mark_now;

static void *setter_thread(void *arg) {
  child_out *o = arg;

  stkr_thread_attach();
  __atomic_store_n(&g_attached, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&g_mark_now, __ATOMIC_ACQUIRE))
    usleep(100);
  o->rc_mark = set_consent(o);
  o->rc_bad = stkr_mark("no spaces", NULL, 0);
  return NULL;
}

/* The setter thread attaches first, then thread "other" (the worker
 * drains the newest thread's ring first: other's before the setter's) and
 * records 100 events, then the setter sets the mark, then "other" records
 * 100 events after it: without the reader handing a batch's marks out
 * first, those 100 would come before the mark. */
typedef struct child_paths {
  const char *dir;    /* the recording */
  char outfile[4200]; /* the child's child_out */
} child_paths;

/* The forked child (tl_run_child): 0, or 10/11 if the recorder or its
 * outfile could not be made. */
static int child_record(void *arg) {
  const child_paths *paths = arg;
  stkr_config cfg = {0};
  child_out o = {0};
  pthread_t th, setter;
  FILE *f;

  cfg.dir = paths->dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  cfg.flush_interval_ms = 60000; /* one batch: stkr_flush below */
  if (stkr_init(&cfg) != 0)
    return 10;
  pthread_create(&setter, NULL, setter_thread, &o);
  while (!__atomic_load_n(&g_attached, __ATOMIC_ACQUIRE))
    usleep(100);
  pthread_create(&th, NULL, other_thread, NULL);
  usleep(20000); /* its 100 "before" events first */
  __atomic_store_n(&g_mark_now, 1, __ATOMIC_RELEASE);
  pthread_join(setter, NULL);
  __atomic_store_n(&g_go, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  (void)stkr_mark("app.background", NULL, 0);
  stkr_flush();
  stkr_shutdown();
  f = fopen(paths->outfile, "wb");
  if (f == NULL || fwrite(&o, sizeof(o), 1, f) != 1)
    return 11;
  fclose(f);
  return 0;
}

static child_out record_in_child(const char *dir) {
  child_paths paths = {.dir = dir};
  child_out o;
  FILE *f;

  snprintf(paths.outfile, sizeof(paths.outfile), "%s.out", dir);
  tl_run_child(child_record, &paths);
  f = fopen(paths.outfile, "rb");
  assert_non_null(f);
  assert_int_equal(fread(&o, sizeof(o), 1, f), 1);
  fclose(f);
  return o;
}

typedef struct seen {
  char site[80];
  bool is_mark;
  uint64_t ts;
  uint32_t pid, thread_id;
  uint8_t payload[16];
  size_t plen;
  uint64_t pc0, pc1;
  size_t n_pcs;
  uint32_t stack_id;
} seen;

#define MAX_SEEN 1024

/* Read every event of dir; @return the count (also the warnings). */
static size_t read_all(const char *dir, seen *out, stkr_reader **keep) {
  stkr_reader *r;
  stkr_event_view ev;
  size_t n = 0;
  int rc;

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    assert_true(n < MAX_SEEN);
    snprintf(out[n].site, sizeof(out[n].site), "%s", ev.site);
    out[n].is_mark = ev.is_mark;
    out[n].ts = ev.ts_ns;
    out[n].pid = ev.pid;
    out[n].thread_id = ev.thread_id;
    out[n].plen = ev.payload_len < 16 ? ev.payload_len : 16;
    if (ev.payload_len)
      memcpy(out[n].payload, ev.payload, out[n].plen);
    out[n].n_pcs = ev.n_pcs;
    out[n].pc0 = ev.n_pcs > 0 ? ev.pcs[0] : 0;
    out[n].pc1 = ev.n_pcs > 1 ? ev.pcs[1] : 0;
    out[n].stack_id = ev.stack_id;
    n++;
  }
  assert_int_equal(rc, 0);
  *keep = r;
  return n;
}

static seen g_seen[MAX_SEEN];

static void test_mark_in_process(void **state) {
  char dir[4096];
  child_out o;
  stkr_reader *r;
  const stkr_process_info *p;
  size_t n, i, i_mark = SIZE_MAX, i_setter = SIZE_MAX, marks = 0;
  const stkr_site_info *sites;
  size_t n_sites;
  bool mark_site_listed = false;

  (void)state;
  make_dir(dir, sizeof(dir), "inproc");
  o = record_in_child(dir);
  assert_int_equal(o.rc_mark, 0);
  assert_int_equal(o.rc_bad, -EINVAL);

  n = read_all(dir, g_seen, &r);
  assert_int_equal(n, 100 + 100 + 1 + 2); /* events + 2 marks */
  for (i = 0; i < n; i++) {
    if (g_seen[i].is_mark) {
      marks++;
      assert_true(strcmp(g_seen[i].site, "consent.granted") == 0 ||
                  strcmp(g_seen[i].site, "app.background") == 0);
      assert_true(g_seen[i].thread_id != 0);
      if (strcmp(g_seen[i].site, "consent.granted") == 0)
        i_mark = i;
    } else {
      assert_null(strstr(g_seen[i].site, "mark"));
      if (strcmp(g_seen[i].site, "test.setter") == 0)
        i_setter = i;
    }
  }
  assert_int_equal(marks, 2);
  assert_true(i_mark != SIZE_MAX && i_setter != SIZE_MAX);
  {
    /* The batch's columns were reordered (marks first): every other
     * event keeps its payload and order. */
    char want[16];
    size_t k = 0;

    for (i = 0; i < n; i++)
      if (strcmp(g_seen[i].site, "test.after") == 0) {
        snprintf(want, sizeof(want), "a%zu", k++);
        assert_int_equal(g_seen[i].plen, strlen(want));
        assert_memory_equal(g_seen[i].payload, want, strlen(want));
        assert_true(i == 0 || strcmp(g_seen[i - 1].site, "test.after") ||
                    g_seen[i - 1].ts <= g_seen[i].ts);
      }
    assert_int_equal(k, 100);
  }
  /* Payload, time. */
  assert_int_equal(g_seen[i_mark].plen, 3);
  assert_memory_equal(g_seen[i_mark].payload, "v=2", 3);
  assert_true(g_seen[i_mark].ts >= o.mark_ts_before);
  /* The setter's stack: same function as the event recorded just before
   * (both first PCs in set_consent, within a few hundred bytes), and the
   * same caller below it. */
  assert_true(g_seen[i_mark].n_pcs >= 2);
  assert_true(g_seen[i_mark].pc0 - g_seen[i_setter].pc0 < 512 ||
              g_seen[i_setter].pc0 - g_seen[i_mark].pc0 < 512);
  assert_int_equal(g_seen[i_mark].pc1, g_seen[i_setter].pc1);
  /* In one batch: the mark comes before every event recorded after it,
   * though the other thread's ring (drained first or not) holds them. */
  for (i = 0; i < n; i++)
    if (!g_seen[i].is_mark && g_seen[i].ts > g_seen[i_mark].ts)
      assert_true(i > i_mark);
  /* Counted apart. */
  p = stkr_reader_process(r, 0);
  assert_non_null(p);
  assert_int_equal(p->events, 201);
  assert_int_equal(p->marks, 2);
  assert_int_equal(p->external_marks, 0);
  assert_false(p->incomplete);
  /* test.before, test.after, test.setter; the stacks of their events, as
   * many as the build makes (one each, or more under TSan): info counted
   * the marks' sites and stacks among them. */
  assert_int_equal(p->sites, 3);
  {
    size_t stacks = 0;
    for (i = 0; i < n; i++) {
      bool again = g_seen[i].is_mark;
      for (size_t j = 0; j < i && !again; j++)
        again = !g_seen[j].is_mark && g_seen[j].stack_id == g_seen[i].stack_id;
      stacks += !again;
    }
    assert_int_equal(p->stacks, stacks);
  }
  assert_int_equal(stkr_reader_sites(r, 0, &sites, &n_sites), 0);
  for (i = 0; i < n_sites; i++)
    if (sites[i].is_mark && strcmp(sites[i].name, "consent.granted") == 0) {
      mark_site_listed = true;
      assert_int_equal(sites[i].events, 1);
    }
  assert_true(mark_site_listed);
  stkr_reader_free(r);
}

static void test_mark_names(void **state) {
  stkr_site *a, *b;
  char name[80];
  int i, err = 0;

  (void)state;
  assert_int_equal(stkr_mark_site("consent.granted", &a), 0);
  assert_int_equal(stkr_mark_site("consent.granted", &b), 0);
  assert_ptr_equal(a, b);
  assert_string_equal(a->name, "mark:consent.granted");
  assert_int_equal(stkr_mark_site("screen.Checkout_2-b", &b), 0);
  assert_ptr_not_equal(a, b);
  assert_int_equal(stkr_mark_site("", &a), -EINVAL);
  assert_null(a);
  assert_int_equal(stkr_mark_site(NULL, &a), -EINVAL);
  assert_int_equal(stkr_mark_site("a:b", &a), -EINVAL);
  assert_int_equal(stkr_mark_site("a b", &a), -EINVAL);
  assert_int_equal(stkr_mark_site("caf\xc3\xa9", &a), -EINVAL);
  memset(name, 'x', 64);
  name[64] = '\0';
  assert_int_equal(stkr_mark_site(name, &a), 0); /* 64: the limit */
  name[64] = 'x';
  name[65] = '\0';
  assert_int_equal(stkr_mark_site(name, &a), -EINVAL);
  assert_int_equal(stkr_mark_site("x", NULL), -EINVAL);
  /* Not recording: the mark is refused like an event. */
  assert_int_equal(stkr_mark("consent.granted", NULL, 0), -ENOTCONN);
  /* The table is bounded: 256 names in all (3 made above). */
  for (i = 0; i < 300 && err == 0; i++) {
    snprintf(name, sizeof(name), "many.%d", i);
    err = stkr_mark_site(name, &a);
  }
  assert_int_equal(err, -ENOSPC);
  assert_int_equal(i, STKR_MAX_MARKS - 3 + 1);
  assert_int_equal(stkr_mark_site("consent.granted", &a), 0); /* still */
}

/* ---- `stackrec mark` --------------------------------------------------- */

static void test_cli_mark(void **state) {
  char dir[4096], other[4096];
  stkr_reader *r;
  const stkr_process_info *p0, *p1;
  uint64_t t0, t1;
  size_t n, i, ext = 0;

  (void)state;
  make_dir(dir, sizeof(dir), "cli");
  (void)record_in_child(dir);
  (void)record_in_child(dir); /* a second process in the same DIR */
  t0 = mono_ns();
  assert_int_equal(cr_run("mark '%s' consent.revoked 'who=harness'", dir), 0);
  t1 = mono_ns();
  assert_string_equal(cr_out, "");
  assert_int_equal(cr_run("mark '%s' screen.Home", dir), 0);

  n = read_all(dir, g_seen, &r);
  assert_int_equal(stkr_reader_process_count(r), 2);
  for (i = 0; i < n; i++) {
    if (!g_seen[i].is_mark || g_seen[i].thread_id != 0)
      continue;
    /* External: before the process's first event, in time order. */
    if (strcmp(g_seen[i].site, "consent.revoked") == 0) {
      assert_true(g_seen[i].ts >= t0 && g_seen[i].ts <= t1);
      assert_int_equal(g_seen[i].plen, 11);
      assert_memory_equal(g_seen[i].payload, "who=harness", 11);
      /* the first of its process */
      assert_true(i == 0 || g_seen[i - 1].pid != g_seen[i].pid);
    } else {
      assert_string_equal(g_seen[i].site, "screen.Home");
      assert_true(g_seen[i - 1].is_mark &&
                  strcmp(g_seen[i - 1].site, "consent.revoked") == 0);
    }
    assert_int_equal(g_seen[i].n_pcs, 0);
    ext++;
  }
  assert_int_equal(ext, 4); /* 2 marks x 2 processes */
  p0 = stkr_reader_process(r, 0);
  p1 = stkr_reader_process(r, 1);
  assert_int_equal(p0->external_marks, 2);
  assert_int_equal(p1->external_marks, 2);
  assert_int_equal(p0->events, 201);
  assert_int_not_equal(p0->pid, p1->pid);
  stkr_reader_free(r);

  /* Errors. */
  cr_expect(2, "invalid mark name", "mark '%s' 'bad name'", dir);
  assert_int_equal(cr_run("mark '%s'", dir), 2);
  assert_int_equal(cr_run("mark '%s' a b c", dir), 2);
  assert_int_equal(cr_run("mark --bogus '%s' a", dir), 2);
  snprintf(other, sizeof(other), "%s/does-not-exist", g_tmp);
  cr_expect(3, "does-not-exist", "mark '%s' consent.granted", other);
  assert_int_equal(cr_run("mark --help"), 0);
  assert_non_null(strstr(cr_out, "ordered against events"));
}

typedef struct warn_log {
  char path[4200];
  int n, lost, live, other_path;
  int64_t off[8];
} warn_log;

static void collect(void *arg, const stkr_warning *w) {
  warn_log *l = arg;

  if (w->kind == STKR_WARN_LIVE_TAIL) {
    l->live++;
  } else if (l->n < 8) {
    l->other_path += strcmp(w->path, l->path) != 0;
    l->off[l->n++] = w->offset;
    l->lost += w->data_lost;
  }
}

/* Every command on the recording of test_cli_mark (2 processes, each with
 * 201 events, 2 recorded marks and the 2 marks of `stackrec mark`). */
static void test_tools_show_marks(void **state) {
  char dir[4096], out[4200];

  (void)state;
  snprintf(dir, sizeof(dir), "%s/cli", g_tmp);
  /* dump: one line per mark per process, named as on disk. */
  assert_int_equal(cr_run("dump '%s'", dir), 0);
  assert_int_equal(tl_count(cr_out, " mark:consent.granted "), 2);
  assert_int_equal(tl_count(cr_out, " mark:consent.revoked "), 2);
  assert_int_equal(tl_count(cr_out, "(stackrec mark) \"who=harness\" stack=-"),
                   2);
  assert_int_equal(tl_count(cr_out, "\n"), 2 * (201 + 4));
  /* --limit counts events, not marks (QA, session 33: --site X --limit 3
   * printed 3 marks and no event of X). */
  assert_int_equal(cr_run("dump --site 'nothing.*' --limit 3 '%s'", dir), 0);
  assert_int_equal(tl_count(cr_out, "\n"), 8);
  assert_null(strstr(cr_err, "stopped after --limit"));
  /* dump --json and export jsonl: "kind":"mark" on marks only. */
  assert_int_equal(cr_run("dump --json '%s'", dir), 0);
  assert_int_equal(tl_count(cr_out, "\"kind\":\"mark\""), 8);
  assert_int_equal(tl_count(cr_out, "\"external\":true"), 4);
  assert_int_equal(tl_count(cr_out, "\"site\":\"consent.granted\",\"kind\":"
                                    "\"mark\",\"external\":false"),
                   2);
  assert_int_equal(cr_run("export --format jsonl --site 'nothing.*' '%s'", dir),
                   0);
  assert_int_equal(tl_count(cr_out, "\"kind\":\"mark\""), 8); /* filters */
  assert_int_equal(tl_count(cr_out, "\n"), 8);
  /* report: marks are not events; listed once each; on the timelines. */
  assert_int_equal(cr_run("report --timeline '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "# 402 events from 2 processes, 3 sites"));
  assert_non_null(strstr(cr_out, "# marks (not counted as events): 6: "));
  assert_int_equal(tl_count(cr_out, "consent.revoked (stackrec mark)"), 1);
  assert_int_equal(tl_count(cr_out, " consent.granted (pid "), 2);
  {
    /* In time order (QA, session 22: kept by process, 1.5 s was listed
     * before 1.0 s). */
    const char *p = strstr(cr_out, "# marks (not counted as events): 6: ");
    double prev = -1, t;
    p += strlen("# marks (not counted as events): 6: ");
    for (int k = 0; k < 6; k++) {
      assert_int_equal(sscanf(p, "%lf", &t), 1);
      assert_true(t >= prev);
      prev = t;
      if (k < 5) assert_non_null(p = strstr(p, ", ") + 2);
    }
  }
  {
    /* A row under each timeline: '^' in the buckets holding a mark; two
     * launches, each drawn from its own start, said (QA, session 38: a
     * mark of one drawn as if before the other's events). */
    const char *row = strstr(cr_out, "  marks (each on its own process "
                             "tree's line; 2 trees here, each from its own "
                             "start)\n"), *bol = row;

    assert_non_null(row);
    while (bol > cr_out && bol[-1] != '\n')
      bol--;
    assert_non_null(memchr(bol, '^', (size_t)(row - bol)));
  }
  assert_null(strstr(cr_out, "consent.granted:"));
  /* compliance counts them as report does: a `stackrec mark` mark once,
   * not once per process (it said 8). */
  assert_int_equal(cr_run("compliance --format json '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "\"marks\":6"));
  /* folded: 402 events, no mark. */
  assert_int_equal(cr_run("export --format folded '%s'", dir), 0);
  assert_null(strstr(cr_out, "consent"));
  assert_non_null(strstr(cr_out, "test.after;"));
  /* chrome: process-wide instant events in category "mark". */
  snprintf(out, sizeof(out), "%s/trace.json", g_tmp);
  assert_int_equal(cr_run("export --format chrome -o '%s' '%s'", out, dir), 0);
  tl_slurp(out, cr_out, sizeof(cr_out));
  assert_int_equal(tl_count(cr_out, "\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"p\""),
                   8);
  assert_non_null(strstr(cr_out, "\"events\":402,"));
  /* HTML: the list and the JSON the timelines draw. */
  snprintf(out, sizeof(out), "%s/report.html", g_tmp);
  assert_int_equal(cr_run("report --html '%s' '%s'", out, dir), 0);
  tl_slurp(out, cr_out, sizeof(cr_out));
  assert_non_null(strstr(cr_out, "<p class=\"marks\">6 marks (not counted"));
  assert_non_null(strstr(cr_out, "The timelines draw 2 process trees"));
  assert_int_equal(tl_count(cr_out, ",\"consent.revoked\",true]"), 1);
  assert_int_equal(tl_count(cr_out, ",\"consent.granted\",false]"), 2);
  /* info and verify count them apart. */
  assert_int_equal(cr_run("info '%s'", dir), 0);
  assert_int_equal(
      tl_count(cr_out, "  marks:       2 recorded, 2 set with `stackrec mark`"),
      2);
  assert_non_null(strstr(cr_out, "2 processes, 402 events"));
  assert_int_equal(cr_run("info --json '%s'", dir), 0);
  assert_int_equal(tl_count(cr_out, "\"marks\":2,\"external_marks\":2"), 2);
  assert_int_equal(cr_run("verify '%s'", dir), 0);
  assert_int_equal(tl_count(cr_out, "201 events, 4 marks: intact"), 2);
  /* symbolize -o OUT takes `stackrec mark`'s marks along. */
  snprintf(out, sizeof(out), "%s/symbolized", g_tmp);
  assert_int_equal(cr_run("symbolize -o '%s' '%s'", out, dir), 0);
  assert_int_equal(cr_run("dump '%s'", out), 0);
  assert_int_equal(tl_count(cr_out, "(stackrec mark)"), 4);
  assert_int_equal(tl_count(cr_out, " mark:consent.granted "), 2);
}

/* The harness case: a program runs under `stackrec record`; the harness
 * waits until it has opened /etc/passwd once (a cat process), sets
 * consent.granted with `stackrec mark`, then lets it open it again (a
 * second cat). Both processes get the mark; the first cat's events are
 * before it by the clock, the second's after; record's summary counts it. */
static void test_mark_live_record(void **state) {
  char dir[4096], ready[4200], go[4200], out[4200], cmd[16384];
  stkr_reader *r;
  stkr_event_view ev;
  uint64_t mark_ts = 0, before_max = 0, after_min = UINT64_MAX;
  uint32_t first_pid = 0;
  int rc, st, before = 0, after = 0, marks = 0;
  pid_t pid;

  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  skip(); /* the hooks in /bin/cat under a sanitizer: see test-record-setup */
#endif
  snprintf(dir, sizeof(dir), "%s/live", g_tmp);
  snprintf(ready, sizeof(ready), "%s/live.ready", g_tmp);
  snprintf(go, sizeof(go), "%s/live.go", g_tmp);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s' '%s'", dir, ready, go);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof(cmd),
           "cat /etc/passwd >/dev/null; touch '%s'; i=0; "
           "while [ ! -e '%s' ] && [ $i -lt 3000 ]; do sleep 0.01; "
           "i=$((i+1)); done; cat /etc/passwd >/dev/null",
           ready, go);
  snprintf(out, sizeof(out), "%s/live.out", g_tmp);
  pid = cr_record_bg(dir, out, true, NULL,
                     (const char *const[]){"/bin/sh", "-c", cmd, NULL});
  cr_wait_file(ready, pid, "the first cat");
  assert_int_equal(cr_run("mark '%s' consent.granted", dir), 0);
  snprintf(cmd, sizeof(cmd), "touch '%s'", go);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  tl_slurp(out, cr_out, sizeof(cr_out));
  assert_non_null(strstr(cr_out, "marks: 1 ("));

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (ev.is_mark) {
      assert_string_equal(ev.site, "consent.granted");
      mark_ts = ev.ts_ns;
      marks++;
      continue;
    }
    if (strcmp(ev.site, "files.open") != 0 || ev.payload_len != 11 ||
        memcmp(ev.payload, "/etc/passwd", 11) != 0)
      continue;
    /* The two cats: the mark comes first in each process's stream. */
    assert_true(mark_ts != 0);
    if (ev.ts_ns < mark_ts) {
      first_pid = ev.pid;
      before++;
      if (ev.ts_ns > before_max)
        before_max = ev.ts_ns;
    } else {
      after++;
      if (ev.ts_ns < after_min)
        after_min = ev.ts_ns;
      assert_int_not_equal(ev.pid, first_pid);
    }
  }
  assert_int_equal(rc, 0);
  assert_true(marks >= 2); /* sh and both cats (a process per exec) */
  assert_true(before >= 1);
  assert_true(after >= 1);
  assert_true(before_max < mark_ts && mark_ts < after_min);
  stkr_reader_free(r);
}

/* A marks file with damage: each bad line named by offset, skipped; the
 * good lines delivered; a line without newline at the end is a live tail
 * (not data lost). */
static void test_marks_file_damage(void **state) {
  char dir[4096], path[4200];
  const char *text = "# comment\n"
                     "m1 5 6 7 app.background -\n"   /* offset 10 */
                     "m2 5 6 7 x -\n"                /* 36: version */
                     "m1 5 6 7 bad:name -\n"         /* 49: name */
                     "m1 5 6 7 ok 4g\n"              /* 69: hex */
                     "m1 5 6 ok -\n"                 /* 84: fields */
                     "m1 9 6 7 app.foreground 6869\n" /* 96 */
                     "m1 10 6 7 cut";
  stkr_reader_opts opts = {0};
  warn_log log;
  stkr_reader *r;
  stkr_reader_counts c;
  stkr_event_view ev;
  int rc, marks = 0;

  (void)state;
  memset(&log, 0, sizeof(log));
  make_dir(dir, sizeof(dir), "damage");
  (void)record_in_child(dir);
  snprintf(path, sizeof(path), "%s/%s", dir, STKR_MARKS_FILE);
  assert_int_equal(tl_write_file(path, text), 0);
  snprintf(log.path, sizeof(log.path), "%s", path);
  opts.warn = collect;
  opts.warn_arg = &log;
  assert_int_equal(stkr_reader_open(dir, &opts, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    if (ev.is_mark && ev.thread_id == 0) {
      marks++;
      if (strcmp(ev.site, "app.foreground") == 0) {
        assert_int_equal(ev.payload_len, 2);
        assert_memory_equal(ev.payload, "hi", 2);
        assert_int_equal(ev.ts_ns, 9);
      }
    }
  assert_int_equal(rc, 0);
  assert_int_equal(marks, 2);
  assert_int_equal(log.n, 4);
  assert_int_equal(log.off[0], 36);
  assert_int_equal(log.off[1], 49);
  assert_int_equal(log.off[2], 69);
  assert_int_equal(log.off[3], 84);
  assert_int_equal(log.lost, 4);
  assert_int_equal(log.live, 1);
  assert_int_equal(log.other_path, 0);
  stkr_reader_get_counts(r, &c);
  assert_int_equal(c.external_marks, 2);
  stkr_reader_free(r);

  /* A FIFO as the marks file: named and skipped, never opened (the
   * readers, and `stackrec record`'s summary, waited for a writer). */
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mkfifo(path, 0600), 0);
  memset(&log, 0, sizeof(log));
  snprintf(log.path, sizeof(log.path), "%s", path);
  assert_int_equal(stkr_reader_open(dir, &opts, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    assert_false(ev.is_mark && ev.thread_id == 0);
  assert_int_equal(rc, 0);
  assert_int_equal(log.n, 1);
  assert_int_equal(log.other_path, 0);
  stkr_reader_free(r);
  assert_int_equal(stkr_mark_append(dir, "app.background", NULL, 0), -ENXIO);
}

/* Processes that could not record: record's "u1" lines in the marks file
 * (stkr_unrecorded_append), read back by the reader, shown by verify and
 * report as incomplete, carried by merge; malformed ones warned and
 * skipped. Before, such a process was only in record's summary, and
 * verify said "intact" (exit 0). */
static void test_unrecorded_processes(void **state) {
  char dir[4096], out[4200], path[4200];
  const stkr_unrecorded_info *u;
  warn_log log;
  stkr_reader_opts opts = {.warn = collect, .warn_arg = &log};
  stkr_reader *r;

  (void)state;
  memset(&log, 0, sizeof(log));
  make_dir(dir, sizeof(dir), "unrec");
  (void)record_in_child(dir);
  assert_int_equal(cr_run("verify '%s'", dir), 0);
  assert_int_equal(stkr_unrecorded_append(dir, 4242, "python3",
                                          "cannot record in forked child"), 0);
  assert_int_equal(stkr_unrecorded_append(dir, 7, "", "a b\nc"), 0);
  assert_int_equal(stkr_unrecorded_append(NULL, 7, "", ""), -EINVAL);
  assert_int_equal(cr_run("verify '%s'", dir), 4);
  assert_non_null(strstr(cr_out, "incomplete: process 4242 (python3) "
                                 "recorded nothing, unable to: cannot "
                                 "record in forked child"));
  assert_int_equal(cr_run("report '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "INCOMPLETE: 2 processes "
                                 "of the tree recorded nothing"));
  snprintf(out, sizeof(out), "%s-merged", dir);
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, dir), 0);
  assert_int_equal(cr_run("verify '%s'", out), 4);
  assert_non_null(strstr(cr_out, "process 4242 (python3) recorded nothing"));
  assert_non_null(strstr(cr_out, "process 7 () recorded nothing"));
  /* A segment given as FILE brings its directory's marks file, as the
   * reader reads it with the segment (merge dropped it: OUT verified 0). */
  snprintf(out, sizeof(out), "%s-merged-file", dir);
  assert_int_equal(cr_run("verify \"$(ls -d '%s'/stackrec-*.zst | head -1)\"",
                          dir), 4);
  assert_int_equal(cr_run("merge -o '%s' \"$(ls -d '%s'/stackrec-*.zst | "
                          "head -1)\"", out, dir), 0);
  assert_int_equal(cr_run("verify '%s'", out), 4);
  assert_non_null(strstr(cr_out, "process 4242 (python3) recorded nothing"));
  snprintf(path, sizeof(path), "%s/%s", dir, STKR_MARKS_FILE);
  assert_int_equal(tl_append_file(path, "u1 8 - \n"          /* fields */
                                        "u1 x - -\n"         /* pid */
                                        "u1 9 4g -\n"),      /* hex */
                   0);
  assert_int_equal(stkr_mark_append(dir, "app.background", NULL, 0), 0);
  snprintf(log.path, sizeof(log.path), "%s", path);
  assert_int_equal(stkr_reader_open(dir, &opts, &r), 0);
  assert_int_equal(stkr_reader_unrecorded_count(r), 2);
  u = stkr_reader_unrecorded(r, 0);
  assert_int_equal(u->pid, 4242);
  assert_string_equal(u->name, "python3");
  assert_string_equal(u->reason, "cannot record in forked child");
  assert_string_equal(u->path, path);
  u = stkr_reader_unrecorded(r, 1);
  assert_string_equal(u->name, "");
  assert_string_equal(u->reason, "a b?c"); /* no control characters */
  assert_null(stkr_reader_unrecorded(r, 2));
  assert_int_equal(log.n, 3); /* the three malformed lines, nothing else */
  assert_int_equal(log.other_path, 0);
  stkr_reader_free(r);
  /* A directory added again (by another path to it) whose marks file
   * holds only u1 lines (merge's OUT): read once. */
  snprintf(out, sizeof(out), "%s-merged", dir);
  snprintf(path, sizeof(path), "%s-merged/.", dir);
  assert_int_equal(stkr_reader_create(&opts, &r), 0);
  assert_int_equal(stkr_reader_add(r, out), 0);
  (void)stkr_reader_add(r, path);
  assert_int_equal(stkr_reader_unrecorded_count(r), 2);
  stkr_reader_free(r);
}

/* A process that could not record and then exec'd has a u1 line per
 * program it ran, under one pid: one process, named as its chain (QA,
 * session 29: "2 processes of the tree recorded nothing" for one). A
 * hostile file's lines of one pid do not grow the name without end. */
static void test_unrecorded_exec_counted_once(void **state) {
  char dir[4096], path[4200];
  const stkr_unrecorded_info *u;
  stkr_reader *r;

  (void)state;
  make_dir(dir, sizeof(dir), "unrec-exec");
  (void)record_in_child(dir);
  assert_int_equal(stkr_unrecorded_append(dir, 55, "sh", "no room"), 0);
  assert_int_equal(stkr_unrecorded_append(dir, 56, "cat", "no room"), 0);
  assert_int_equal(stkr_unrecorded_append(dir, 55, "git", "no room"), 0);
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  assert_int_equal(stkr_reader_unrecorded_count(r), 2);
  u = stkr_reader_unrecorded(r, 0);
  assert_int_equal(u->pid, 55);
  assert_string_equal(u->name, "sh > git");
  stkr_reader_free(r);
  assert_int_equal(cr_run("report '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "2 processes of the tree recorded nothing"));
  assert_int_equal(cr_run("info --json '%s'", dir), 0);
  assert_non_null(strstr(cr_out, "\"complete\":false,"));
  assert_non_null(strstr(cr_out, "\"unrecorded_processes\":2}"));
  for (int i = 0; i < 500; i++)
    assert_int_equal(stkr_unrecorded_append(dir, 55, i % 2 ? "a" : "b", "x"),
                     0);
  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  assert_int_equal(stkr_reader_unrecorded_count(r), 2);
  u = stkr_reader_unrecorded(r, 0);
  assert_true(strlen(u->name) < 256);
  snprintf(path, sizeof(path), "%s", u->name);
  assert_non_null(strstr(path, " > ..."));
  stkr_reader_free(r);
}

static int setup(void **state) {
  const char *t = getenv("TEST_TMPDIR");

  (void)state;
  snprintf(g_tmp, sizeof(g_tmp), "%s/marks", t ? t : "/tmp");
  mkdir(g_tmp, 0700);
  return cr_setup();
}

TL_TEST_MAIN("marks", setup, NULL, test_mark_in_process, test_cli_mark,
             test_unrecorded_exec_counted_once,
             test_tools_show_marks, test_mark_live_record,
             test_marks_file_damage, test_unrecorded_processes,
             /* Last: it fills the process's mark table (forked children of
              * the tests above inherit it). */
             test_mark_names)
