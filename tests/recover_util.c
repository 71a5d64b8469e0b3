/*
 * recover_util.c: what the recovery tests (test-recover*.c) share:
 * scratch directories, children that record and die by SIGKILL, recovery
 * with its messages collected, and reading a recovered directory back
 * (tests/recover_util.h).
 */
#define _GNU_SOURCE
#include "tests/recover_util.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "recorder/stkr_internal.h"
#include "tests/testlib.h"

stkr_site g_site = STKR_SITE_INIT("recover.test");

static char g_root[256];
static int g_dirs;

int recover_setup(const char *tag) {
  return tl_mkdtemp(g_root, sizeof g_root, tag);
}

int recover_group_setup(void **state) {
  (void)state;
  assert_int_equal(recover_setup(tl_group()), 0);
  return 0;
}

void new_dir(char *out, size_t cap) {
  snprintf(out, cap, "%s/d%d", g_root, ++g_dirs);
  assert_int_equal(mkdir(out, 0700), 0);
}

/* ---- reading back --------------------------------------------------------- */

static void rb_warn(void *arg, const stkr_warning *w) {
  readback *rb = arg;
  if (w->data_lost && w->kind != STKR_WARN_TRUNCATED)
    rb->warnings_lost++;
  if (w->kind == STKR_WARN_INCONSISTENT)
    rb->warnings_inconsistent++;
}

void read_dir(const char *dir, readback *rb, size_t n_seen) {
  stkr_reader_opts o = {.warn = rb_warn, .warn_arg = rb, .lazy_frames = true};
  stkr_reader *r;
  stkr_event_view ev;
  int rc;

  memset(rb, 0, sizeof *rb);
  rb->n_seen = n_seen;
  rb->seen = calloc(n_seen ? n_seen : 1, sizeof *rb->seen);
  rb->thread_of = calloc(n_seen ? n_seen : 1, sizeof *rb->thread_of);
  assert_true(rb->seen != NULL && rb->thread_of != NULL);
  assert_int_equal(stkr_reader_open(dir, &o, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    rb->events++;
    if (rb->ts_min == 0 || ev.ts_ns < rb->ts_min) rb->ts_min = ev.ts_ns;
    if (ev.ts_ns > rb->ts_max) rb->ts_max = ev.ts_ns;
    if (ev.payload_len == 4) {
      uint32_t v;
      memcpy(&v, ev.payload, 4);
      if (v < n_seen) {
        rb->seen[v]++;
        rb->thread_of[v] = ev.thread_id;
      }
      if (ev.n_pcs == 0)
        rb->seq_no_stack++;
      else if (rb->seq_stack == 0)
        rb->seq_stack = ev.pcs[0] ^ ev.n_pcs;
      else if (rb->seq_stack != (ev.pcs[0] ^ ev.n_pcs))
        rb->seq_other_stack++;
      if (ev.site == NULL || strcmp(ev.site, "recover.test") != 0)
        rb->seq_site_bad++;
    } else if (ev.payload_len == 1) {
      rb->by_byte[ev.payload[0]]++;
    } else if (ev.payload_len == 2 && ev.payload[0] == 'h' &&
               ev.payload[1] < 4) {
      /* helper_event(): the same call chain every time per helper */
      unsigned h = ev.payload[1];
      if (rb->helper_events[h]++ == 0)
        rb->stack_of[h] = ev.n_pcs ? ev.pcs[0] ^ ev.n_pcs : 0;
      else if (rb->stack_of[h] != (ev.n_pcs ? ev.pcs[0] ^ ev.n_pcs : 0))
        rb->stack_of[h] = UINT64_MAX; /* two different stacks: wrong */
    }
  }
  assert_int_equal(rc, 0);
  stkr_reader_free(r);
}

void rb_free(readback *rb) {
  free(rb->seen);
  free(rb->thread_of);
}

/* dir holds `events` events, among them the payloads 0..n-1 once each. */
void assert_read_once(const char *dir, uint64_t events, uint32_t n) {
  readback rb;

  read_dir(dir, &rb, n);
  assert_int_equal(rb.events, events);
  for (uint32_t i = 0; i < n; i++) assert_int_equal(rb.seen[i], 1);
  rb_free(&rb);
}

uint64_t events_in_segments(const char *dir) {
  readback rb;
  uint64_t n;

  read_dir(dir, &rb, 0);
  n = rb.events;
  rb_free(&rb);
  return n;
}

/* ---- recording children ------------------------------------------------ */

void record_seq(uint32_t from, uint32_t n) {
  for (uint32_t i = from; i < from + n; i++)
    if (stkr_event(&g_site, &i, 4) != 0) _exit(91);
}

/* Fork: the child starts recording with cfg (exit 90 if it cannot), runs
 * body(arg) and dies by SIGKILL, leaving its ring files behind; the parent
 * waits for it. @return the child's wait status. */
int run_killed_child(const stkr_config *cfg, void (*body)(void *),
                     void *arg) {
  int status;
  pid_t p = fork();

  assert_true(p >= 0);
  if (p == 0) {
    if (stkr_init(cfg) != 0) _exit(90);
    body(arg);
    kill(getpid(), SIGKILL);
    _exit(94);
  }
  assert_int_equal(waitpid(p, &status, 0), p);
  return status;
}

int run_killed_child_in_new_dir(char *dir, size_t cap, stkr_config cfg,
                                void (*body)(void *), void *arg) {
  new_dir(dir, cap);
  cfg.dir = dir;
  if (cfg.flush_interval_ms == 0)
    cfg.flush_interval_ms = 3600000;
  return run_killed_child(&cfg, body, arg);
}

/* Child: record n1 events, flush, (optionally) rewind the ring file's tail
 * to where it was before the flush, as if we died between the batch's
 * write(2) and the tail store; record n2 more; die by SIGKILL. */
typedef struct die_arg {
  uint32_t n1, n2;
  bool rewind;
} die_arg;

static void die_body(void *arg) {
  const die_arg *a = arg;
  /* One call site for both phases: one stack, so that the ring holds only
   * known records after the flush (their full record is in the segment). */
  for (int phase = 0; phase < 2; phase++) {
    record_seq(phase ? a->n1 : 0, phase ? a->n2 : a->n1);
    if (phase == 0 && a->n1) {
      if (stkr_flush() != 0) _exit(92);
      if (a->rewind) {
        stkr__ring_ctl *c = stkr__tls->ring.c;
        if (stkr__tls->ring.session == 0) _exit(93); /* not a ring file */
        atomic_store_explicit(&c->tail, 0, memory_order_release);
      }
    }
  }
}

int flush_then_unnote_drops(void) {
  stkr__ring_ctl *c = stkr__tls->ring.c;
  stkr_sessfile_hdr *h = stkr__session_hdr();
  uint64_t full, reent, other, rfull, rreent;
  int rc;

  if (c == NULL || h == NULL) return -EINVAL;
  full = atomic_load(&c->counted_full);
  reent = atomic_load(&c->counted_reentrant);
  /* Atomic: the worker may be writing a batch of the burst meanwhile (what
   * it counted is below the flush's batch's pending values either way). */
  other = __atomic_load_n(&h->counted_other, __ATOMIC_RELAXED);
  rfull = __atomic_load_n(&h->counted_retired_full, __ATOMIC_RELAXED);
  rreent = __atomic_load_n(&h->counted_retired_reentrant, __ATOMIC_RELAXED);
  if ((rc = stkr_flush()) != 0) return rc;
  atomic_store(&c->counted_full, full);
  atomic_store(&c->counted_reentrant, reent);
  __atomic_store_n(&h->counted_other, other, __ATOMIC_RELAXED);
  __atomic_store_n(&h->counted_retired_full, rfull, __ATOMIC_RELAXED);
  __atomic_store_n(&h->counted_retired_reentrant, rreent, __ATOMIC_RELAXED);
  return 0;
}

void pend_unwritten_drops(void) {
  stkr_sessfile_hdr *h = stkr__session_hdr();
  uint64_t seq;

  if (h == NULL) _exit(95);
  seq = __atomic_load_n(&h->max_batch_seq, __ATOMIC_RELAXED) + 1;
  for (stkr__thread *t = stkr__threads_first(); t; t = stkr__threads_next(t)) {
    stkr__ring_ctl *c = t->ring.c;
    if (c == NULL || t->ring.session == 0) continue;
    stkr__pending_store(&c->pend_seq, seq, &c->pend_full,
                        atomic_load(&c->drops_full), &c->pend_reentrant,
                        atomic_load(&c->drops_reentrant), NULL, 0);
  }
  stkr__pending_store(
      (_Atomic uint64_t *)&h->pend_seq, seq,
      (_Atomic uint64_t *)&h->pend_other,
      __atomic_load_n(&h->drops_other, __ATOMIC_RELAXED),
      (_Atomic uint64_t *)&h->pend_retired_full,
      __atomic_load_n(&h->retired_full, __ATOMIC_RELAXED),
      (_Atomic uint64_t *)&h->pend_retired_reentrant,
      __atomic_load_n(&h->retired_reentrant, __ATOMIC_RELAXED));
}

void run_child_die(char *dir, size_t cap, uint32_t n1, uint32_t n2,
                   bool rewind) {
  stkr_config cfg = {.ring_bytes = 256 << 10};
  die_arg a = {n1, n2, rewind};
  int status = run_killed_child_in_new_dir(dir, cap, cfg, die_body, &a);

  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

void recover_msg_cb(void *arg, const char *line) {
  msgs *m = arg;
  m->n++;
  snprintf(m->last, sizeof m->last, "%s", line);
}

int final_segments(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  int n = 0;

  assert_non_null(d);
  while ((de = readdir(d)) != NULL) {
    char path[4400];
    struct stat st;
    if (stkr_fmt_segment_parse(de->d_name, NULL, NULL) != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (stat(path, &st) == 0 && STKR_FMT_SEGMENT_IS_FINAL(st.st_mode))
      n++;
  }
  closedir(d);
  return n;
}

void recover(const char *dir, bool dry, stkr_recover_stats *st, msgs *m) {
  stkr_recover_opts o = {.dry_run = dry, .message = recover_msg_cb, .message_arg = m};
  memset(m, 0, sizeof *m);
  assert_int_equal(stkr_recover_dir(dir, &o, st), 0);
}

int kill_and_recover(recovery *r, stkr_config cfg, void (*body)(void *),
                     void *arg) {
  int status = run_killed_child_in_new_dir(r->dir, sizeof r->dir, cfg, body,
                                           arg);

  recover(r->dir, false, &r->st, &r->ms);
  return status;
}
