/*
 * push.c: `stackrec push`: recordings into ClickHouse (issue 16).
 *
 * One recording (DIR) at a time, read through the public reader, its
 * events sent as INSERTs of at most --chunk-events rows, each one Native
 * block of integer ids (push_native.c), so one part: all or nothing on
 * the server. The next chunk is read while the server stores one (up to
 * --streams events INSERTs in flight, each on a thread and connection of
 * its own). Chunks are committed in order: after a chunk's events are
 * in, its marks and the dimension rows first seen in it (stacks, frames,
 * site and thread names, payloads) are inserted, then one `pushes` row
 * per (pid, range of ordinals) says the range is in.
 * A (re)push first reads which ranges are in and skips them, so pushing
 * again adds nothing, and a push cut off by a server that went away
 * resumes where it stopped: the recording is read again from the start
 * (the reader runs at tens of millions of events/s) and the committed
 * ranges skipped. The one window left, chunks whose events the server
 * committed but whose ranges are not in, sends the same rows again: same
 * sorting key in a ReplacingMergeTree, collapsed by merges (FINAL or
 * OPTIMIZE ... FINAL show it at once). Last, the summary rows (images,
 * sites, processes, drops) and a `pushes` row with pid 0xFFFFFFFF
 * covering every event.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "proto/stkr_recover.h" /* stkr_recover_record_running */
#include "tools/stackrec/cli.h"
#include "tools/stackrec/push.h"

#define SUMMARY_PID 0xFFFFFFFFu

typedef struct range {
  uint32_t pid;
  uint64_t first, last; /* ordinals [first, last) of one process */
} range;

/* What one round of INSERTs sends. --streams chunks have their events
 * INSERTs in flight at once (each on a thread and a connection of its
 * own: the server stores each INSERT on one thread) while one more is
 * read. Chunks are committed (marks, dimension rows, ranges) in order. */
typedef struct chunk {
  stkr__evblock *blk;   /* events */
  stkr__buf marks;      /* marks, RowBinary */
  stkr__buf dims[STKR_DIM_KINDS]; /* dimension rows first seen in it */
  range *ranges;        /* the ordinals it holds, by process */
  size_t n_ranges, cap_ranges;
  uint32_t rows;        /* events and marks */
  uint32_t n_marks;     /* of which marks */
  stkr__ch *ch;         /* its events INSERT's own connection */
} chunk;

/* The ordinals of a process's external marks (`stackrec mark`: handed out
 * before its first event, all of its directory's, in the marks file's
 * order) are counted apart from its events and its own marks, from here:
 * a mark added after a push took ordinal 0 and moved every event up by
 * one, so the next push sent the last event of each process again, under
 * a new ordinal, and the new mark fell in a range already in (QA). */
#define EXT_MARK_ORD (UINT64_C(1) << 62)

/* One pass over one recording. Reset for each attempt. */
typedef struct pass {
  const stkr__push_opts *o;
  stkr__ch *ch;
  unsigned missing;     /* STKR__ADDED_* columns the tables lack (older) */
  bool dir_empty;       /* the input is an empty recording's directory */
  const char *dir;
  stkr_reader *r;
  stkr__dims *dims;     /* stacks, frames and names of this pass */
  uint64_t rec;         /* stkr__rec_id(recording) */
  stkr__push_ids id;
  stkr__push_names nm;  /* build, device, recording id, identity */
  bool have_id;
  range *done;          /* committed ranges, sorted by (pid, first) */
  size_t n_done, cap_done;
  bool summary_done;    /* the summary row covers summary_events */
  uint64_t summary_events;
  /* Events read but external marks (`stackrec mark`): what the summary's
   * rows (images, sites, processes, drops) describe. A new mark changes
   * none of them (QA, session 26: each one sent all four again). */
  uint64_t summary_total;
  /* reading */
  stkr_event_view ev;
  bool have_ev, eof;
  int read_err;
  size_t proc;          /* process index of the last event */
  uint64_t n;           /* its ordinal in that process: events and the
                           process's own marks from 0, external marks
                           from EXT_MARK_ORD */
  uint64_t next_n, next_ext; /* the next of each, in that process */
  uint64_t total;       /* events read */
  /* two chunks: one read while the other's events are stored */
  chunk ck[STKR_PUSH_MAX_STREAMS + 1]; /* kept across passes */
  /* results */
  uint64_t sent, skipped, committed_chunks; /* events */
  uint64_t sent_marks, skipped_marks;
  uint64_t sent_before, sent_marks_before; /* by earlier passes (skipped
                                               in this one) */
  uint64_t warned, warn_seen; /* warnings printed by earlier passes */
} pass;

static void push_warn(void *arg, const stkr_warning *w) {
  pass *p = arg;
  if (w->kind == STKR_WARN_LIVE_TAIL || w->kind == STKR_WARN_INCOMPLETE ||
      (w->kind == STKR_WARN_NO_SEGMENTS && p->dir_empty)) /* one_pass says */
    return;
  /* Each attempt reads the recording again: say each warning once. */
  if (++p->warn_seen <= p->warned)
    return;
  p->warned = p->warn_seen;
  stkr_cli_put_line(stderr, "stackrec: warning: ", w->message, "");
}

static void fail_msg_ch(const pass *p, const stkr__ch *ch, const char *what) {
  fprintf(stderr, "stackrec push: %s: %s: %s\n", p->dir, what,
          stkr__ch_error(ch));
}

static void fail_msg(const pass *p, const char *what) {
  fail_msg_ch(p, p->ch, what);
}

static const char *table(const pass *p, const char *t, char *buf,
                         size_t len) {
  snprintf(buf, len, "%s.%s%s", p->o->ch.database, t,
           p->o->cluster ? "_all" : "");
  return buf;
}

/* ---- identity ---- */

/* From process proc of reader r (NULL: nothing known), whose first batch
 * r has read. */
static void set_ids_from(pass *p, stkr_reader *r, size_t proc) {
  stkr__push_names_of(p->o, r, proc, &p->nm);
  p->id.build = p->nm.build;
  p->id.device = p->nm.device;
  p->id.recording = p->nm.recording;
  p->rec = stkr__rec_id(p->nm.recording);
  p->have_id = true;
}

static void no_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  (void)w;
}

/* The recording's identity from its first process's first batch: its
 * header and image list. Read with a reader of its own, to that process's
 * first event that is not an external mark: those are handed out before
 * the batch is read, and with one first the build was "unknown" and the
 * recording id another (QA: every build marked by a test harness landed
 * in "unknown", and a push after a mark stored every event again). */
static void set_ids(pass *p) {
  stkr_reader_opts ro = {.warn = no_warn, .lazy_frames = true};
  stkr_reader *r = NULL;
  stkr_event_view ev;

  /* Process 0 as before (a recording pushed by an earlier version keeps
   * its id): by the first event that is not an external mark, its first
   * batch, if it has one, has been read. */
  if (stkr_reader_create(&ro, &r) == 0 && stkr_reader_add(r, p->dir) == 0)
    while (stkr_reader_next(r, &ev) > 0 && ev.is_mark && ev.thread_id == 0) {
    }
  set_ids_from(p, r, 0);
  stkr_reader_free(r);
}

static void merge_done(pass *p);

/* Which ranges of this recording are in already. */
static stkr__ch_fail load_done(pass *p) {
  char sql[1024], t[192], lit[600];
  stkr__buf resp = {0};
  stkr__ch_fail f;
  const char *s;

  /* The recording id is hex or the user's: quote it as a literal. */
  stkr__sql_quote(lit, sizeof lit, p->nm.recording);
  snprintf(sql, sizeof sql,
           "SELECT pid, first, last FROM %s WHERE recording = '%s' ORDER BY "
           "pid, first FORMAT TabSeparated", table(p, "pushes", t, sizeof t),
           lit);
  f = stkr__ch_query(p->ch, sql, &resp);
  p->n_done = 0;
  for (s = (const char *)resp.p; f == STKR_CH_OK && s && s < (const char *)resp.p + resp.len;) {
    range rg;
    unsigned long long a, b;
    unsigned pid;
    if (sscanf(s, "%u\t%llu\t%llu", &pid, &a, &b) == 3) {
      rg.pid = pid;
      rg.first = a;
      rg.last = b;
      if (pid == SUMMARY_PID) {
        p->summary_done = true;
        p->summary_events = b > p->summary_events ? b : p->summary_events;
      } else if (stkr_grow((void **)&p->done, &p->cap_done, p->n_done + 1,
                           sizeof *p->done) == 0) {
        p->done[p->n_done++] = rg;
      }
    }
    s = memchr(s, '\n', (size_t)((const char *)resp.p + resp.len - s));
    s = s ? s + 1 : NULL;
  }
  stkr__buf_free(&resp);
  merge_done(p);
  return f;
}

/* The committed ranges (sorted by pid, first) with overlapping and
 * adjacent ones of a pid merged: a chunk sent again (the window of
 * fleet.md) has its ranges twice. */
static void merge_done(pass *p) {
  size_t o = 0;

  for (size_t i = 0; i < p->n_done; i++) {
    range *l = o ? &p->done[o - 1] : NULL;
    if (l != NULL && l->pid == p->done[i].pid && p->done[i].first <= l->last) {
      if (p->done[i].last > l->last)
        l->last = p->done[i].last;
    } else {
      p->done[o++] = p->done[i];
    }
  }
  p->n_done = o;
}

/* Is (pid, n) committed? A binary search: a process's ordinals do not
 * come in one rising run (its external marks, from EXT_MARK_ORD, come
 * before its events, from 0), and a cursor that assumed they did sent a
 * process's events again (review). */
static bool is_done(const pass *p, uint32_t pid, uint64_t n) {
  size_t lo = 0, hi = p->n_done;

  while (lo < hi) { /* the first range after (pid, n) */
    size_t mid = lo + (hi - lo) / 2;
    const range *r = &p->done[mid];
    if (r->pid < pid || (r->pid == pid && r->first <= n))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && p->done[lo - 1].pid == pid && n < p->done[lo - 1].last;
}

/* ---- the events body ---- */

static int next_event(pass *p) {
  int rc;
  if (p->have_ev)
    return 1;
  if (p->eof)
    return 0;
  rc = stkr_reader_next(p->r, &p->ev);
  if (rc <= 0) {
    p->eof = true;
    if (rc < 0)
      p->read_err = rc;
    return rc;
  }
  if (p->total == 0 || p->ev.process != p->proc) {
    p->proc = p->ev.process;
    p->next_n = 0;
    p->next_ext = EXT_MARK_ORD;
  }
  if (p->ev.is_mark && p->ev.thread_id == 0) {
    p->n = p->next_ext++; /* external */
  } else {
    p->n = p->next_n++;
    p->summary_total++;
  }
  p->total++;
  p->have_ev = true;
  return 1;
}

static int add_to_chunk(chunk *c, uint32_t pid, uint64_t n) {
  range *l = c->n_ranges ? &c->ranges[c->n_ranges - 1] : NULL;
  if (l != NULL && l->pid == pid && l->last == n) {
    l->last++;
    return 0;
  }
  if (stkr_grow((void **)&c->ranges, &c->cap_ranges, c->n_ranges + 1,
                sizeof *c->ranges) != 0)
    return -ENOMEM;
  c->ranges[c->n_ranges++] = (range){pid, n, n + 1};
  return 0;
}

#define NS_PER_DAY 86400000000000ull

static int add_event(pass *p, chunk *c) {
  const stkr_event_view *ev = &p->ev;
  stkr__ev_row row = {.n = p->n,
                      .tid = ev->tid,
                      .ts = ev->wall_ns,
                      .ts_mono = ev->ts_ns,
                      .pid = ev->pid,
                      .day = (uint16_t)(ev->wall_ns / NS_PER_DAY),
                      .stack_truncated = ev->stack_truncated};
  int err;

  if ((err = stkr__dims_stack(p->dims, p->r, ev, &p->id, &row.stack)) ||
      (err = stkr__dims_name(p->dims, STKR_DIM_SITE, ev->site,
                             strlen(ev->site), false, &row.site)) ||
      (err = stkr__dims_name(p->dims, STKR_DIM_THREAD, ev->thread_name,
                             strlen(ev->thread_name), false, &row.thread)) ||
      (err = stkr__dims_name(p->dims, STKR_DIM_PAYLOAD, ev->payload,
                             ev->payload_len, ev->payload_truncated,
                             &row.payload)))
    return err;
  return stkr__evblock_add(c->blk, &row);
}

/* A mark (issue 13): a row of `marks`, with its ordinal among the
 * process's events and marks, so that the chunk's ranges cover it. */
static int add_mark(pass *p, chunk *c) {
  const stkr_event_view *ev = &p->ev;
  stkr__buf *b = &c->marks;
  int e = stkr__rb_u16(b, (uint16_t)(ev->wall_ns / NS_PER_DAY));
  e |= stkr__rb_u64(b, p->rec);
  e |= stkr__rb_u32(b, ev->pid);
  e |= stkr__rb_u64(b, p->n);
  e |= stkr__rb_u64(b, ev->tid);
  e |= stkr__rb_u64(b, ev->wall_ns);
  e |= stkr__rb_u64(b, ev->ts_ns);
  e |= stkr__rb_str(b, ev->site);
  e |= stkr__rb_bytes(b, ev->payload, ev->payload_len);
  return e ? -ENOMEM : 0;
}

/* Read the next chunk: up to --chunk-events events and marks not pushed
 * yet, and the dimension rows they refer to; its events block sealed.
 * @return 0 or a negative errno (the reader's or -ENOMEM). */
static int fill_chunk(pass *p, chunk *c) {
  int rc, err = 0;

  stkr__evblock_reset(c->blk, p->rec);
  c->marks.len = 0;
  c->rows = c->n_marks = 0;
  c->n_ranges = 0;
  while (c->rows < p->o->chunk) {
    if ((rc = next_event(p)) <= 0) {
      err = rc;
      break;
    }
    p->have_ev = false;
    if (is_done(p, p->ev.pid, p->n)) {
      if (p->ev.is_mark)
        p->skipped_marks++;
      else
        p->skipped++;
      continue;
    }
    err = p->ev.is_mark ? add_mark(p, c) : add_event(p, c);
    if (err != 0 || (err = add_to_chunk(c, p->ev.pid, p->n)) != 0)
      return err;
    c->rows++;
    c->n_marks += p->ev.is_mark;
  }
  stkr__dims_take(p->dims, c->dims);
  return err != 0 ? err : stkr__evblock_seal(c->blk);
}

/* A RowBinary body that is already in memory. */
typedef struct mem_body {
  const stkr__buf *b;
  size_t off;
} mem_body;

static long produce_mem(void *arg, uint8_t *buf, size_t cap) {
  mem_body *m = arg;
  size_t k = m->b->len - m->off < cap ? m->b->len - m->off : cap;
  memcpy(buf, m->b->p + m->off, k);
  m->off += k;
  return (long)k;
}

static stkr__ch_fail insert_mem(pass *p, const char *name, const char *cols,
                                const stkr__buf *b) {
  char t[1200], tn[192];
  mem_body m = {b, 0};
  if (b->len == 0)
    return STKR_CH_OK;
  snprintf(t, sizeof t, "%s (%s)", table(p, name, tn, sizeof tn), cols);
  return stkr__ch_insert(p->ch, t, "RowBinary", produce_mem, &m);
}

static stkr__ch_fail insert_ranges(pass *p, const range *rg, size_t n) {
  stkr__buf b = {0};
  uint32_t now = (uint32_t)time(NULL);
  stkr__ch_fail f;
  int e = 0;
  for (size_t i = 0; i < n; i++) {
    e |= stkr__rb_str(&b, p->nm.recording);
    e |= stkr__rb_u32(&b, rg[i].pid);
    e |= stkr__rb_u64(&b, rg[i].first);
    e |= stkr__rb_u64(&b, rg[i].last);
    e |= stkr__rb_u32(&b, now);
  }
  f = e ? STKR_CH_LOCAL : insert_mem(p, "pushes", stkr__cols_pushes, &b);
  stkr__buf_free(&b);
  return f;
}

/* The events INSERT of one chunk, on a thread of its own while the next
 * chunk is read. The chunk and its connection are the job's until it is
 * joined. */
typedef struct events_job {
  pass *p;
  chunk *c;
  pthread_t th;
  bool threaded;
  stkr__ch_fail f; /* written by the job, read after the join */
} events_job;

static void *insert_events(void *arg) {
  events_job *j = arg;
  char t[1200], tn[192];
  snprintf(t, sizeof t, "%s (%s)", table(j->p, "events", tn, sizeof tn),
           stkr__cols_events);
  j->f = stkr__ch_insert(j->c->ch, t, "Native", stkr__evblock_produce,
                         j->c->blk);
  return NULL;
}

static void start_job(events_job *j, pass *p, chunk *c) {
  *j = (events_job){.p = p, .c = c, .f = STKR_CH_OK};
  if (stkr__evblock_rows(c->blk) == 0)
    return; /* marks only */
  j->threaded = pthread_create(&j->th, NULL, insert_events, j) == 0;
  if (!j->threaded)
    insert_events(j);
}

static stkr__ch_fail join_job(events_job *j) {
  if (j->threaded)
    pthread_join(j->th, NULL);
  j->threaded = false;
  return j->f;
}

/* After a chunk's events are in: its marks, the dimension rows first
 * seen in it, then the ranges that say it is in. */
static stkr__ch_fail finish_chunk(pass *p, chunk *c) {
  stkr__ch_fail f = insert_mem(p, "marks", stkr__cols_marks, &c->marks);
  for (int k = 0; k < STKR_DIM_KINDS && f == STKR_CH_OK; k++)
    f = insert_mem(p, stkr__dim_table[k], stkr__dim_cols[k], &c->dims[k]);
  if (f == STKR_CH_OK)
    f = insert_ranges(p, c->ranges, c->n_ranges);
  if (f != STKR_CH_OK)
    return f;
  p->sent += c->rows - c->n_marks;
  p->sent_marks += c->n_marks;
  p->committed_chunks++;
  if (p->o->test_delay_ms > 0)
    usleep(p->o->test_delay_ms * 1000u);
  return STKR_CH_OK;
}

/* Every chunk of the pass: up to --streams events INSERTs in flight while
 * the next chunk is read; each chunk committed in order once its events
 * are in. @return the failure kind (STKR_CH_LOCAL: p->read_err says). */
static stkr__ch_fail send_chunks(pass *p) {
  const size_t slots = p->o->streams + 1;
  events_job jobs[STKR_PUSH_MAX_STREAMS + 1];
  size_t head = 0, next = 0, busy = 0; /* oldest in flight, being read */
  stkr__ch_fail f = STKR_CH_OK;
  int err = fill_chunk(p, &p->ck[next]);

  for (;;) {
    while (err == 0 && p->ck[next].rows > 0 && busy < p->o->streams) {
      start_job(&jobs[next], p, &p->ck[next]);
      busy++;
      next = (next + 1) % slots;
      err = fill_chunk(p, &p->ck[next]);
    }
    if (busy == 0)
      break;
    f = join_job(&jobs[head]);
    if (f != STKR_CH_OK)
      fail_msg_ch(p, p->ck[head].ch, "inserting events");
    else if ((f = finish_chunk(p, &p->ck[head])) != STKR_CH_OK)
      fail_msg(p, "inserting events");
    busy--;
    head = (head + 1) % slots;
    if (f != STKR_CH_OK) {
      for (; busy > 0; busy--, head = (head + 1) % slots)
        join_job(&jobs[head]); /* their chunks are not committed */
      return f;
    }
  }
  if (err < 0) {
    if (p->read_err == 0)
      p->read_err = err;
    return STKR_CH_LOCAL; /* nothing of the chunk being read was sent */
  }
  return STKR_CH_OK;
}

/* A --recording id given to another recording before: its events would
 * be taken for this one's, and this one's skipped as "already there" where
 * ordinals meet (QA, session 39: two devices' runs under one id, 3 000 of
 * 8 000 events lost, exit 0). Only asked when the id has ranges in and
 * the table has identities. @return 0 go on; else the exit status, said
 * (a clash: 2; the check failed: 1, not pushed unchecked). */
static int identity_clash(pass *p) {
  char t[192], other[80];
  int clash;

  if (p->o->recording == NULL || (p->missing & STKR__ADDED_IDENTITY) ||
      (p->n_done == 0 && !p->summary_done))
    return 0;
  clash = stkr__schema_identity_clash(p->ch,
                                      table(p, "recordings", t, sizeof t),
                                      p->nm.recording, p->nm.identity, other,
                                      sizeof other);
  if (clash < 0) { /* not pushed unchecked: the check is the point */
    fail_msg(p, "checking whose --recording id it is (not pushed)");
    return STKR_CLI_DATA_LOST;
  }
  if (clash == 0)
    return 0;
  fprintf(stderr, "stackrec push: %s: --recording %s is another "
          "recording's already (identity %s; this one's is %s, device %s): "
          "give each recording its own id, or none (the default is this "
          "identity); not pushed\n", p->dir, p->nm.recording, other,
          p->nm.identity, p->nm.device);
  return STKR_CLI_USAGE;
}

/* The recording's identity row, on its first push (a retry after a push
 * that committed nothing may send it twice: same key, collapsed). */
static stkr__ch_fail send_recording(pass *p) {
  stkr__buf b = {0};
  stkr__ch_fail f = STKR_CH_LOCAL;
  if (p->n_done > 0 || p->summary_done)
    return STKR_CH_OK;
  const bool v1 = (p->missing & STKR__ADDED_IDENTITY) != 0;
  if (stkr__rb_u64(&b, p->rec) == 0 && stkr__rb_str(&b, p->nm.recording) == 0 &&
      stkr__rb_str(&b, p->nm.build) == 0 && stkr__rb_str(&b, p->nm.device) == 0 &&
      (v1 || stkr__rb_str(&b, p->nm.identity) == 0))
    f = insert_mem(p, "recordings",
                   v1 ? stkr__cols_recordings_v1 : stkr__cols_recordings, &b);
  stkr__buf_free(&b);
  return f;
}

static stkr__ch_fail send_summary(pass *p) {
  stkr__buf im = {0}, si = {0}, pr = {0}, dr = {0};
  stkr__ch_fail f = STKR_CH_LOCAL;
  range all = {SUMMARY_PID, 0, p->summary_total};

  if (p->summary_done && p->summary_events == p->summary_total)
    return STKR_CH_OK;
  const bool procs_v1 = (p->missing & STKR__ADDED_OS_PARENT) != 0;
  if (stkr__rows_summary(p->r, &p->id, procs_v1, &im, &si, &pr, &dr) == 0 &&
      (f = insert_mem(p, "images", stkr__cols_images, &im)) == STKR_CH_OK &&
      (f = insert_mem(p, "sites", stkr__cols_sites, &si)) == STKR_CH_OK &&
      (f = insert_mem(p, "processes",
                      procs_v1 ? stkr__cols_processes_v1
                               : stkr__cols_processes,
                      &pr)) == STKR_CH_OK &&
      (f = insert_mem(p, "drops", stkr__cols_drops, &dr)) == STKR_CH_OK)
    f = insert_ranges(p, &all, 1);
  stkr__buf_free(&im);
  stkr__buf_free(&si);
  stkr__buf_free(&pr);
  stkr__buf_free(&dr);
  return f;
}

/* Read the recording from the start and send what is not in yet.
 * @return the failure kind; *status is the input's exit status. */
static stkr__ch_fail one_pass(pass *p, char *dir, int *status) {
  stkr_reader_opts ro = {.warn = push_warn, .warn_arg = p,
                         .lazy_frames = true};
  stkr__ch_fail f = STKR_CH_OK;
  int err;

  p->warn_seen = 0;
  p->skipped = p->skipped_marks = 0;
  p->sent_before = p->sent;
  p->sent_marks_before = p->sent_marks;
  if ((err = stkr_reader_create(&ro, &p->r)) != 0 ||
      (err = stkr__dims_create(&p->dims)) != 0) {
    *status = STKR_CLI_DATA_LOST;
    return STKR_CH_LOCAL;
  }
  /* Under `record`, processes record PCs only and record names the
   * stacks at its end: pushed now, its events would keep raw addresses
   * for good, and the same path arrive twice (QA, session 39). */
  if (stkr_recover_record_running(dir)) {
    fprintf(stderr, "stackrec push: %s: `stackrec record` is still writing "
            "it (it names the stacks at its end; pushed now they would keep "
            "raw addresses): push it once record has ended; not pushed\n",
            dir);
    *status = STKR_CLI_DATA_LOST;
    return STKR_CH_OK;
  }
  p->dir_empty = stkr_cli_dir_empty(dir); /* before the reader's */
  if ((err = stkr_reader_add(p->r, dir)) != 0) {
    fprintf(stderr, "stackrec push: cannot open %s: %s\n", dir,
            err == -EINVAL ? "not a directory or regular file"
                           : strerror(-err));
    *status = err == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
    return STKR_CH_OK;
  }
  /* An empty recording (a program that made no watched call) is one, as
   * for every reader: nothing to push, exit 0 (QA, session 39: "no
   * recording found", exit 1). */
  if (p->dir_empty && stkr_reader_process_count(p->r) == 0 &&
      stkr_reader_unrecorded_count(p->r) == 0) {
    if (!p->o->quiet)
      fprintf(stderr, "stackrec push: %s: an empty recording (no process "
              "made a watched call): nothing to push\n", dir);
    *status = STKR_CLI_OK;
    return STKR_CH_OK;
  }
  set_ids(p);
  if ((f = stkr__ch_check(p->ch)) != STKR_CH_OK) {
    fail_msg(p, "checking the server");
    return f;
  }
  if ((f = load_done(p)) != STKR_CH_OK) {
    fail_msg(p, "reading what is pushed already");
    return f;
  }
  if ((*status = identity_clash(p)) != 0)
    return STKR_CH_OK;
  if ((f = send_recording(p)) != STKR_CH_OK) {
    fail_msg(p, "inserting the recording");
    return f;
  }
  f = send_chunks(p);
  if (f == STKR_CH_OK && (f = send_summary(p)) != STKR_CH_OK)
    fail_msg(p, "inserting the summary");
  if (p->read_err != 0) {
    fprintf(stderr, "stackrec push: %s: %s\n", dir, strerror(-p->read_err));
    *status = STKR_CLI_DATA_LOST;
    return STKR_CH_LOCAL;
  }
  if (f == STKR_CH_OK) {
    *status = stkr_cli_status(p->r);
    if (!p->o->quiet)
      stkr_cli_note_left_out(p->r, "push", "ClickHouse");
  }
  return f;
}

static void pass_reset(pass *p) {
  stkr_reader_free(p->r);
  stkr__dims_free(p->dims);
  p->r = NULL;
  p->dims = NULL;
  p->have_ev = p->eof = false;
  p->read_err = 0;
  p->n_done = 0;
  p->summary_done = false;
  p->summary_events = 0;
  p->total = p->n = p->summary_total = 0;
  p->proc = 0;
}

/* Push one recording with bounded retries. @return exit status. */
static int push_dir(const stkr__push_opts *o, stkr__ch *ch, char *dir,
                    unsigned missing) {
  pass p = {.o = o, .ch = ch, .dir = dir, .missing = missing};
  uint32_t failures = 0, wait = o->retry_wait_ms;
  int err, status = STKR_CLI_OK;

  for (uint32_t i = 0; i <= o->streams; i++)
    if ((err = stkr__evblock_create(&p.ck[i].blk)) != 0 ||
        (err = stkr__ch_create(&o->ch, &p.ck[i].ch)) != 0) {
      if (err != -ENOENT)
        fprintf(stderr, "stackrec push: %s: %s\n", dir, strerror(-err));
      status = STKR_CLI_DATA_LOST;
      goto out;
    }
  for (;;) {
    uint64_t before = p.committed_chunks;
    stkr__ch_fail f = one_pass(&p, dir, &status);
    bool progress = p.committed_chunks > before;
    pass_reset(&p);
    if (f == STKR_CH_OK)
      break;
    if (f == STKR_CH_LOCAL) {
      if (stkr__ch_error(ch)[0] != '\0')
        fail_msg(&p, "stopped");
      status = STKR_CLI_DATA_LOST;
      break;
    }
    if (f == STKR_CH_SERVER) {
      status = STKR_CLI_DATA_LOST;
      break;
    }
    if (progress) { /* the server was there a moment ago: start afresh */
      failures = 0;
      wait = o->retry_wait_ms;
    }
    if (failures++ >= o->retries) {
      /* This push's, not the recording's: what earlier pushes put in was
       * not asked of a server that did not answer (QA, session 39: "0
       * events are in" with 886 stored). */
      fprintf(stderr,
              "stackrec push: %s: giving up after %u attempt%s; this push "
              "sent %" PRIu64 " event%s, and pushing again resumes where the "
              "server has them\n",
              dir, failures, failures == 1 ? "" : "s", p.sent,
              p.sent == 1 ? "" : "s");
      status = STKR_CLI_DATA_LOST;
      break;
    }
    fprintf(stderr, "stackrec push: %s: retrying in %u ms (attempt %u of %u)\n",
            dir, wait, failures, o->retries);
    usleep(wait * 1000u);
    wait = wait >= 5000 ? 10000 : wait * 2;
  }
  /* (Not for an empty recording: no identity, nothing to say; review.) */
  if (!o->quiet && p.have_id && (status == STKR_CLI_OK || p.sent > 0)) {
    /* Already there: what the last pass skipped, less what this push's
     * earlier passes sent (QA: after retries a 3 M recording said "3000000
     * pushed, 1600000 already there"). Marks are not events. */
    uint64_t there = p.skipped > p.sent_before ? p.skipped - p.sent_before
                                               : 0;
    uint64_t marks_there = p.skipped_marks > p.sent_marks_before
                               ? p.skipped_marks - p.sent_marks_before
                               : 0;
    fprintf(stderr,
            "stackrec push: %s: recording %s (device %s, build %s): %" PRIu64
            " events pushed, %" PRIu64 " already there",
            dir, p.nm.recording, p.nm.device, p.nm.build, p.sent, there);
    if (p.sent_marks || p.skipped_marks)
      fprintf(stderr, "; marks: %" PRIu64 " pushed, %" PRIu64
              " already there", p.sent_marks, marks_there);
    fputc('\n', stderr);
  }
out:
  free(p.done);
  for (uint32_t i = 0; i <= o->streams; i++) {
    stkr__ch_free(p.ck[i].ch);
    free(p.ck[i].ranges);
    stkr__buf_free(&p.ck[i].marks);
    for (int k = 0; k < STKR_DIM_KINDS; k++)
      stkr__buf_free(&p.ck[i].dims[k]);
    stkr__evblock_free(p.ck[i].blk);
  }
  return status;
}


/* Connect, create the schema if asked, push each recording. @return the
 * worst exit status. */
static int run(const stkr__push_opts *o, char **dirs, int n_dirs) {
  int st, status = STKR_CLI_OK;
  stkr__ch *ch;

  if ((st = stkr__ch_create(&o->ch, &ch)) != 0) {
    if (st != -ENOENT) /* -ENOENT: load_curl said why */
      fprintf(stderr, "stackrec push: cannot start libcurl: %s\n",
              strerror(-st));
    return STKR_CLI_DATA_LOST;
  }
  unsigned missing = 0;
  if (o->create_schema)
    status = stkr__schema_create(ch, o);
  if (status == STKR_CLI_OK)
    status = stkr__schema_added_columns(ch, o, &missing);
  for (int i = 0; i < n_dirs && !(o->create_schema && status != 0); i++) {
    st = push_dir(o, ch, dirs[i], missing);
    if (st > status)
      status = st;
  }
  stkr__ch_free(ch);
  return status;
}

int stkr_cli_push(int argc, char **argv) {
  stkr__push_opts o;
  char pw[4096];
  int st = stkr__push_args(argc, argv, &o, pw, sizeof pw);

  if (st < 0)
    st = o.print_schema ? stkr__schema_print(&o)
                        : run(&o, argv + o.first_dir, argc - o.first_dir);
  memset(pw, 0, sizeof pw);
  return st;
}
