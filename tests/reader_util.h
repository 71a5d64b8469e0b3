/*
 * reader_util.h: helpers shared by the reader tests: collect warnings and
 * copy events out of a stkr_reader. Header-only (static functions) so each
 * test binary stays one source file plus the fixture.
 */
#ifndef STKR_TEST_READER_UTIL_H
#define STKR_TEST_READER_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stkr_reader.h"
#include "tests/fixture.h"

#define RU_MAX_WARN 64
#define RU_MAX_EV 64

typedef struct ru_warn {
  stkr_warn_kind kind;
  bool data_lost;
  int64_t offset;
  uint32_t pid;
  char path[512];
  char msg[1024];
} ru_warn;

typedef struct ru_log {
  int n;
  ru_warn w[RU_MAX_WARN];
} ru_log;

static __attribute__((unused)) void ru_collect(void *arg, const stkr_warning *w) {
  ru_log *log = arg;
  ru_warn *c;

  if (log->n >= RU_MAX_WARN)
    return;
  c = &log->w[log->n++];
  c->kind = w->kind;
  c->data_lost = w->data_lost;
  c->offset = w->offset;
  c->pid = w->pid;
  snprintf(c->path, sizeof(c->path), "%s", w->path);
  snprintf(c->msg, sizeof(c->msg), "%s", w->message);
}

/* An event copied out of the reader: its view, whose strings, PCs and
 * payload point into the copies below (valid as long as the ru_ev; proc,
 * path and frames are cleared: they die with the reader). */
typedef struct ru_ev {
  stkr_event_view v;
  char site[64], thread[64];
  uint64_t pcs[8];       /* the first 8 of v.n_pcs */
  uint8_t payload[32];   /* the first 32 bytes of v.payload_len */
} ru_ev;

/* Open `path` with warnings collected into log. */
static __attribute__((unused)) stkr_reader *ru_open(const char *path, ru_log *log) {
  stkr_reader_opts o = {.warn = ru_collect, .warn_arg = log};
  stkr_reader *r = NULL;
  int err;

  memset(log, 0, sizeof(*log));
  err = stkr_reader_open(path, &o, &r);
  if (err != 0) {
    fprintf(stderr, "open %s: %s\n", path, strerror(-err));
    return NULL;
  }
  return r;
}

/* Read every event (at most RU_MAX_EV kept); returns the count, or a
 * negative errno from stkr_reader_next. */
static __attribute__((unused)) int ru_read_all(stkr_reader *r, ru_ev *out) {
  stkr_event_view ev;
  int n = 0, rc;

  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (n < RU_MAX_EV) {
      ru_ev *c = &out[n];

      memset(c, 0, sizeof(*c));
      c->v = ev;
      c->v.proc = NULL;
      c->v.path = NULL;
      c->v.frames = NULL;
      c->v.n_frames = 0;
      snprintf(c->site, sizeof(c->site), "%s", ev.site);
      snprintf(c->thread, sizeof(c->thread), "%s", ev.thread_name);
      c->v.site = c->site;
      c->v.thread_name = c->thread;
      if (ev.n_pcs)
        memcpy(c->pcs, ev.pcs,
               (ev.n_pcs < 8 ? ev.n_pcs : 8) * sizeof(uint64_t));
      c->v.pcs = ev.pcs != NULL ? c->pcs : NULL;
      if (ev.payload_len)
        memcpy(c->payload, ev.payload,
               ev.payload_len < sizeof(c->payload) ? ev.payload_len
                                                   : sizeof(c->payload));
      c->v.payload = ev.payload != NULL ? c->payload : NULL;
    }
    n++;
  }
  if (rc < 0)
    return rc;
  /* The end is sticky. */
  if (stkr_reader_next(r, &ev) != 0)
    return -EPROTO;
  return n;
}

/* A file or directory read whole: the reader (the caller frees r), the
 * warnings it gave and the events it delivered (n: their count, or a
 * negative errno from stkr_reader_next; got holds the first RU_MAX_EV). */
typedef struct ru_reading {
  stkr_reader *r;
  ru_log log;
  ru_ev got[RU_MAX_EV];
  int n;
} ru_reading;

/* Open path with ru_open, failing the test if it cannot be opened, and
 * read every event into rd (ru_read_all). Needs <cmocka.h> included
 * first. */
static __attribute__((unused)) void ru_read_path(ru_reading *rd,
                                                 const char *path) {
  rd->r = ru_open(path, &rd->log);
  assert_non_null(rd->r);
  rd->n = ru_read_all(rd->r, rd->got);
}

/* 1 if got matches the expected standard event exactly. */
static __attribute__((unused)) int ru_match(const ru_ev *got, const fx_expect *want, uint32_t pid) {
  const stkr_event_view *g = &got->v;
  const fx_ev *x = &want->ev;

  if (g->ts_ns != want->ts || g->pid != pid || g->site_id != x->site ||
      g->thread_id != x->thread || g->stack_id != x->stack)
    return 0;
  if (strcmp(g->site, fx_site_name[x->site]) != 0 ||
      strcmp(g->thread_name, fx_thread_name[x->thread]) != 0 ||
      g->tid != fx_thread_tid[x->thread])
    return 0;
  if (g->n_pcs != fx_stack_len[x->stack] ||
      memcmp(g->pcs, fx_stack_pcs[x->stack], g->n_pcs * 8) != 0 ||
      g->stack_truncated != fx_stack_truncated[x->stack])
    return 0;
  if (g->payload_len != x->plen || (g->payload != NULL) != (x->plen != 0) ||
      (x->plen && memcmp(g->payload, x->payload, x->plen) != 0) ||
      g->payload_truncated != x->trunc || g->unresolved)
    return 0;
  /* Wall clock from the header's (mono, wall) pair. */
  if (g->wall_ns != FX_START_WALL + (want->ts - FX_START_MONO))
    return 0;
  return 1;
}

/* Count warnings of a kind. */
static __attribute__((unused)) int ru_count(const ru_log *log, stkr_warn_kind kind) {
  int i, n = 0;

  for (i = 0; i < log->n; i++)
    n += log->w[i].kind == kind;
  return n;
}

static __attribute__((unused)) void ru_dump_log(const ru_log *log) {
  int i;

  for (i = 0; i < log->n; i++)
    fprintf(stderr, "  warning %d: %s\n", (int)log->w[i].kind,
            log->w[i].msg);
}

#endif
