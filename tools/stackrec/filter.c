/*
 * filter.c: the one event filter (filter.h).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_boot.h"
#include "tools/stackrec/filter.h"

/* fnmatch that tells a bad pattern apart: 1 match, 0 no match, -EINVAL. */
static int match(const char *pattern, const char *s) {
  int rc = fnmatch(pattern, s, 0);

  if (rc == 0)
    return 1;
  return rc == FNM_NOMATCH ? 0 : -EINVAL;
}

int stkr__filter_init(stkr__filter *f, const stkr_agg_opts *o) {
  memset(f, 0, sizeof *f);
  f->o = o;
  f->cur_process = SIZE_MAX;
  if (o->from_s < 0 || (o->to_s > 0 && o->to_s <= o->from_s))
    return -EINVAL;
  if (o->thread_glob != NULL && o->thread_glob[0] != '-') {
    char *end;
    unsigned long long v = strtoull(o->thread_glob, &end, 10);
    if (*end == '\0' && end != o->thread_glob) {
      f->have_tid = true;
      f->tid = v;
    }
  }
  return 0;
}

/* The reader never comes back to a process it has left: per-process state
 * starts afresh, so memory stays bounded by one process's ids. */
static void enter_process(stkr__filter *f, const stkr_event_view *ev) {
  if (ev->process == f->cur_process)
    return;
  stkr_map_free(&f->site_pass);
  stkr_map_free(&f->thread_pass);
  f->cur_process = ev->process;
  f->origin_ns = 0;
}

uint64_t stkr__filter_origin(stkr__filter *f, const stkr_event_view *ev) {
  enter_process(f, ev);
  if (f->origin_ns == 0) {
    /* Fixed at the process's first event, so it never moves: a Header
     * read later (after a lost first segment) does not shift windows. */
    if (ev->proc != NULL && ev->proc->have_header &&
        ev->proc->start_mono_ns != 0)
      f->origin_ns = ev->proc->start_mono_ns;
    else
      f->origin_ns = ev->ts_ns ? ev->ts_ns : 1;
  }
  return f->origin_ns;
}

/* Cached name test of one kind (site or thread) for ev. */
static int name_pass(stkr__filter *f, stkr_map *c, uint32_t id,
                     const stkr_event_view *ev, bool thread) {
  uint64_t key = (uint64_t)ev->proc->sessions << 32 | id;
  const uint64_t *pass = stkr_map_find(c, key);
  int m;

  if (pass != NULL)
    return (int)*pass;
  if (thread)
    m = f->have_tid && ev->tid == f->tid ? 1
                                         : match(f->o->thread_glob,
                                                 ev->thread_name);
  else
    m = match(f->o->site_glob, ev->site);
  if (m < 0)
    return m;
  if (stkr_map_put(c, key, m == 1) != 0)
    return -ENOMEM;
  return m;
}

uint64_t stkr__filter_offset(stkr__filter *f, const stkr_event_view *ev) {
  const uint64_t origin = stkr__filter_origin(f, ev);
  uint64_t ts = ev->ts_ns;

  if (ev->proc != NULL && ev->proc->instance_shift_ns != 0)
    ts = stkr_clock_add(ts, ev->proc->instance_shift_ns);
  return ts > origin ? ts - origin : 0;
}

int stkr__filter_pass(stkr__filter *f, const stkr_event_view *ev) {
  const stkr_agg_opts *o = f->o;
  int m;

  enter_process(f, ev);
  /* Marks are context for the events, not events: shown whatever the
   * filters, and never what fixes the time origin (a mark set with
   * `stackrec mark` comes before the process's Header is read). */
  if (ev->is_mark)
    return 1;
  if (o->from_s > 0 || o->to_s > 0) {
    double t = (double)stkr__filter_offset(f, ev) / 1e9;
    if (t < o->from_s || (o->to_s > 0 && t >= o->to_s))
      return 0;
  }
  /* Undefined ids share the cache entry 0: a hostile file may hold any
   * number of them, and they all read as "?". */
  if (o->site_glob != NULL &&
      (m = name_pass(f, &f->site_pass, ev->site_undefined ? 0 : ev->site_id,
                     ev, false)) <= 0)
    return m;
  if (o->thread_glob != NULL &&
      (m = name_pass(f, &f->thread_pass,
                     ev->thread_undefined ? 0 : ev->thread_id, ev, true)) <= 0)
    return m;
  return 1;
}

void stkr__filter_free(stkr__filter *f) {
  stkr_map_free(&f->site_pass);
  stkr_map_free(&f->thread_pass);
}

const char *stkr__filter_seconds(double s, char buf[STKR__SECONDS_MAX]) {
  size_t n = (size_t)snprintf(buf, STKR__SECONDS_MAX, "%.9f", s);

  while (n > 1 && buf[n - 1] == '0')
    buf[--n] = '\0';
  if (n > 1 && buf[n - 1] == '.')
    buf[--n] = '\0';
  return buf;
}

static void put_seconds(stkr_cli_buf *b, double s) {
  char buf[STKR__SECONDS_MAX];
  stkr_cli_buf_puts(b, stkr__filter_seconds(s, buf));
}

bool stkr__filter_describe(const stkr_agg_opts *o, stkr_cli_buf *b) {
  const char *sep = "";

  if (o->site_glob) {
    stkr_cli_buf_puts(b, "site ");
    stkr_cli_buf_puts(b, o->site_glob);
    sep = " ";
  }
  if (o->thread_glob) {
    stkr_cli_buf_puts(b, sep);
    stkr_cli_buf_puts(b, "thread ");
    stkr_cli_buf_puts(b, o->thread_glob);
    sep = " ";
  }
  if (o->from_s > 0 || o->to_s > 0) {
    stkr_cli_buf_puts(b, sep);
    stkr_cli_buf_puts(b, "time [");
    put_seconds(b, o->from_s);
    stkr_cli_buf_puts(b, " s, ");
    if (o->to_s > 0) {
      put_seconds(b, o->to_s);
      stkr_cli_buf_puts(b, " s)");
    } else {
      stkr_cli_buf_puts(b, "end)");
    }
    sep = " ";
  }
  if (o->app_only) {
    stkr_cli_buf_puts(b, sep);
    stkr_cli_buf_puts(b, "app-only");
    sep = " ";
  }
  return *sep != '\0';
}
