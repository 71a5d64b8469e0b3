/*
 * fixture.c: see fixture.h.
 */
#include "tests/fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const fx_site_name[FX_N_SITES + 1] = {
    NULL, "privacy.clipboard.read", "net.connect", "file.open", "late.site"};
const uint64_t fx_thread_tid[FX_N_THREADS + 1] = {0, 4242, 4243, 5000};
const char *const fx_thread_name[FX_N_THREADS + 1] = {NULL, "main",
                                                      "worker-1", ""};
static const uint64_t fx_pcs1[] = {0x401000, 0x401100, 0x401200};
static const uint64_t fx_pcs2[] = {0x7f0000002000ull};
static const uint64_t fx_pcs3[] = {0x403000, 0x403010, 0x403020, 0x403030};
const uint64_t *const fx_stack_pcs[FX_N_STACKS + 1] = {NULL, fx_pcs1, fx_pcs2,
                                                       fx_pcs3};
const size_t fx_stack_len[FX_N_STACKS + 1] = {0, 3, 1, 4};
const bool fx_stack_truncated[FX_N_STACKS + 1] = {false, false, false, true};

void fx_header_init(Stackrec__Header *h, uint32_t pid, const char *name,
                    uint64_t start_mono, uint64_t start_wall) {
  stackrec__header__init(h);
  h->format_version = STKR_FORMAT_VERSION;
  h->pid = pid;
  h->process_name = (char *)name;
  h->start_mono_ns = start_mono;
  h->start_wall_ns = start_wall;
  h->segment_seq = 1;
  h->arch = "x86_64";
}

int fx_encode_events(Stackrec__Batch *b, const fx_ev *evs, size_t n,
                     uint64_t base_ts, stkr_fmt_buf *out) {
  Stackrec__Events ev = STACKREC__EVENTS__INIT;
  int64_t *deltas = NULL;
  uint32_t *site = NULL, *thr = NULL, *stk = NULL, *plen = NULL, *trunc = NULL;
  uint8_t *pdata = NULL;
  size_t i, ptotal = 0, ntrunc = 0;
  bool any_payload = false;
  int err = -ENOMEM;

  if (n) {
    deltas = calloc(n, sizeof(*deltas));
    site = calloc(n, sizeof(*site));
    thr = calloc(n, sizeof(*thr));
    stk = calloc(n, sizeof(*stk));
    plen = calloc(n, sizeof(*plen));
    trunc = calloc(n, sizeof(*trunc));
    for (i = 0; i < n; i++)
      ptotal += evs[i].plen;
    pdata = malloc(ptotal + 1);
    if (!deltas || !site || !thr || !stk || !plen || !trunc || !pdata)
      goto out;
    ptotal = 0;
    for (i = 0; i < n; i++) {
      const fx_ev *e = &evs[i];

      deltas[i] = e->delta;
      site[i] = e->site;
      thr[i] = e->thread;
      stk[i] = e->stack;
      plen[i] = e->plen;
      if (e->plen) {
        memcpy(pdata + ptotal, e->payload, e->plen);
        any_payload = true;
      }
      ptotal += e->plen;
      if (e->trunc)
        trunc[ntrunc++] = (uint32_t)i;
    }
    ev.base_ts_ns = base_ts;
    ev.n_ts_delta_ns = ev.n_site_id = ev.n_thread_id = ev.n_stack_id = n;
    ev.ts_delta_ns = deltas;
    ev.site_id = site;
    ev.thread_id = thr;
    ev.stack_id = stk;
    if (any_payload) {
      ev.n_payload_len = n;
      ev.payload_len = plen;
      ev.payload_data.data = pdata;
      ev.payload_data.len = ptotal;
    }
    ev.n_payload_truncated = ntrunc;
    ev.payload_truncated = trunc;
    b->events = &ev;
  }
  err = stkr_fmt_encode_batch(b, NULL, 3, out);
  b->events = NULL; /* ev dies here */
out:
  free(deltas);
  free(site);
  free(thr);
  free(stk);
  free(plen);
  free(trunc);
  free(pdata);
  return err;
}

/* The fx table entry that a batch's id defines (fx_rot), or FX_BOGUS for
 * an id past the table's n entries. */
#define FX_BOGUS UINT32_MAX
static uint32_t fx_entry(uint32_t id, uint32_t rotate, uint32_t n) {
  return id <= n ? fx_rot(id, rotate, n) : FX_BOGUS;
}

/* fx_entry for threads and stacks: a bogus id still needs real content
 * (a tid, PCs), entry 1's. */
static uint32_t fx_entry_or_first(uint32_t id, uint32_t rotate, uint32_t n) {
  uint32_t e = fx_entry(id, rotate, n);

  return e != FX_BOGUS ? e : 1;
}

/* The site, thread and stack definitions of fb, in the caller's arrays
 * (16 of each). @return 0 or -EINVAL (too many). */
static int fx_define(Stackrec__Batch *b, const fx_batch *fb,
                     Stackrec__SiteDef *sd, Stackrec__SiteDef **sdp,
                     Stackrec__ThreadDef *td, Stackrec__ThreadDef **tdp,
                     Stackrec__StackDef *kd, Stackrec__StackDef **kdp) {
  size_t i;

  if (fb->n_sites > 16 || fb->n_threads > 16 || fb->n_stacks > 16)
    return -EINVAL;
  for (i = 0; i < fb->n_sites; i++) {
    uint32_t id = fx_entry(fb->sites[i], fb->rotate, FX_N_SITES);

    stackrec__site_def__init(&sd[i]);
    sd[i].id = fb->sites[i];
    sd[i].name = (char *)(id != FX_BOGUS ? fx_site_name[id] : "bogus");
    sdp[i] = &sd[i];
  }
  for (i = 0; i < fb->n_threads; i++) {
    uint32_t id = fx_entry_or_first(fb->threads[i], fb->rotate, FX_N_THREADS);

    stackrec__thread_def__init(&td[i]);
    td[i].id = fb->threads[i];
    td[i].tid = fx_thread_tid[id];
    td[i].name = (char *)fx_thread_name[id];
    tdp[i] = &td[i];
  }
  for (i = 0; i < fb->n_stacks; i++) {
    uint32_t id = fx_entry_or_first(fb->stacks[i], fb->rotate, FX_N_STACKS);

    stackrec__stack_def__init(&kd[i]);
    kd[i].id = fb->stacks[i];
    kd[i].pcs = (uint64_t *)fx_stack_pcs[id];
    kd[i].n_pcs = fx_stack_len[id];
    kd[i].hash = 0x1234 + id;
    kd[i].truncated = fx_stack_truncated[id];
    kdp[i] = &kd[i];
  }
  b->sites = sdp;
  b->n_sites = fb->n_sites;
  b->threads = tdp;
  b->n_threads = fb->n_threads;
  b->stacks = kdp;
  b->n_stacks = fb->n_stacks;
  return 0;
}

int fx_encode(const fx_batch *fb, stkr_fmt_buf *out) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h;
  Stackrec__Config cfg = STACKREC__CONFIG__INIT;
  Stackrec__Drops d1 = STACKREC__DROPS__INIT, d2 = STACKREC__DROPS__INIT;
  Stackrec__Drops *drops[2] = {&d1, &d2};
  Stackrec__Counters cnt = STACKREC__COUNTERS__INIT;
  Stackrec__ClockSync clk = STACKREC__CLOCK_SYNC__INIT;
  uint8_t boot[16];
  Stackrec__Image img = STACKREC__IMAGE__INIT;
  Stackrec__Image *imgs[1] = {&img};
  Stackrec__SiteDef sd[16], *sdp[16];
  Stackrec__ThreadDef td[16], *tdp[16];
  Stackrec__StackDef kd[16], *kdp[16];
  int err;

  if ((err = fx_define(&b, fb, sd, sdp, td, tdp, kd, kdp)) != 0)
    return err;
  b.seq = fb->seq;
  if (fb->header) {
    fx_header_init(&h, fb->pid ? fb->pid : FX_PID,
                   fb->process_name ? fb->process_name : "fixture",
                   FX_START_MONO + fb->start_shift + fb->mono_ahead,
                   FX_START_WALL + fb->start_shift);
    if (fb->boot != 0) {
      memset(boot, fb->boot, sizeof boot);
      h.boot_id.data = boot;
      h.boot_id.len = sizeof boot;
    }
    h.mono_offset_ns = fb->mono_offset;
    h.process_start = fb->process_start;
    h.parent_pid = fb->parent_pid;
    h.os_parent_pid = fb->os_parent_pid;
    if (fb->format_version)
      h.format_version = fb->format_version;
    h.segment_seq = fb->segment_seq;
    h.session_id = fb->session_id;
    h.session_first_seq = fb->session_first_seq;
    h.dir_recreated = fb->dir_recreated;
    if (fb->watched != NULL) h.watched = (char *)fb->watched;
    cfg.max_depth = 64;
    cfg.payload_max = 8;
    h.config = &cfg;
    b.header = &h;
    img.path = "/usr/bin/fixture";
    img.load_address = 0x400000;
    img.text_start = 0x401000;
    img.text_end = 0x404000;
    img.build_id.data = (uint8_t *)"\x12\x34";
    img.build_id.len = 2;
    b.images = imgs;
    b.n_images = 1;
  }
  if (fb->drops) {
    d1.thread_id = 1;
    d1.ring_full = 3;
    d1.reentrant = 1;
    d2.other = 2;
    b.drops = drops;
    b.n_drops = 2;
  }
  if (fb->cnt != NULL) {
    cnt = *fb->cnt;
    b.counters = &cnt;
  } else if (fb->counters) {
    cnt.attempted = fb->attempted ? fb->attempted : 100;
    cnt.written = fb->written ? fb->written : 5;
    cnt.dropped_write_error = 2;
    b.counters = &cnt;
  }
  clk.mono_ns = FX_START_MONO + fb->start_shift + fb->mono_ahead;
  clk.wall_ns = FX_START_WALL + fb->start_shift;
  b.clock = &clk;
  b.last = fb->last;
  b.recovered = fb->recovered;
  return fx_encode_events(&b, fb->evs, fb->n_evs, fb->base_ts, out);
}

int fx_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  int err = 0;

  if (f == NULL)
    return -errno;
  if (len && fwrite(data, 1, len, f) != len)
    err = -EIO;
  if (fclose(f) != 0 && err == 0)
    err = -errno;
  return err;
}

/* ---- the standard recording --------------------------------------------- */

static const uint32_t all_sites[] = {1, 2, 3}, all_threads[] = {1, 2},
                      all_stacks[] = {1, 2, 3};
static const uint32_t late_site[] = {4}, late_thread[] = {3};
static const uint32_t seg2_sites[] = {1, 2, 3, 4}, seg2_threads[] = {1, 2, 3};

static const fx_ev b0[] = {
    {0, 1, 1, 1, "hello", 5, false},
    {1000, 2, 2, 2, NULL, 0, false},
    {-300, 1, 2, 3, "\x00\x01" "bin\xff\x7f\x1b", 8, false},
};
static const fx_ev b1[] = {
    {5, 3, 1, 1, "abcdefgh", 8, true},
    {7, 3, 1, 2, NULL, 0, false},
};
static const fx_ev b2[] = {
    {-20, 4, 3, 1, "x", 1, false},
};
static const fx_ev b3[] = {
    {0, 2, 1, 3, "q\"b\\s\n", 6, false},
    {-50, 1, 3, 2, "\xc3\xa9t\xc3\xa9", 5, false},
};
static const fx_ev b4[] = {
    {12345, 2, 2, 1, "bye", 3, false},
};

#define ARR(a) a, sizeof(a) / sizeof(a[0])
const fx_batch fx_std[FX_STD_BATCHES] = {
    {.seq = 1, .header = true, .segment_seq = 1, .sites = all_sites,
     .n_sites = 3, .threads = all_threads, .n_threads = 2,
     .stacks = all_stacks, .n_stacks = 3, .base_ts = 2000000000ull,
     .evs = ARR(b0)},
    {.seq = 2, .base_ts = 2000010000ull, .evs = ARR(b1)},
    {.seq = 3, .sites = late_site, .n_sites = 1, .threads = late_thread,
     .n_threads = 1, .base_ts = 2000020000ull, .evs = ARR(b2), .drops = true,
     .counters = true},
    {.seq = 4, .header = true, .segment_seq = 2, .sites = seg2_sites,
     .n_sites = 4, .threads = seg2_threads, .n_threads = 3,
     .stacks = all_stacks, .n_stacks = 3, .base_ts = 2000100000ull,
     .evs = ARR(b3)},
    /* At the clean end the counters add up: attempted 23 == 9 events
     * + 14 dropped (2 x Drops{3, 1, 2} + 2 write errors). */
    {.seq = 5, .base_ts = 2000200000ull, .evs = ARR(b4), .drops = true,
     .counters = true, .attempted = 23, .written = 8, .last = true},
};

size_t fx_std_expect(fx_expect *out, size_t max) {
  size_t k = 0;
  int bi;

  for (bi = 0; bi < FX_STD_BATCHES; bi++) {
    uint64_t ts = fx_std[bi].base_ts;
    size_t i;

    for (i = 0; i < fx_std[bi].n_evs; i++) {
      const fx_ev *e = &fx_std[bi].evs[i];

      ts += (uint64_t)e->delta;
      if (k < max) {
        out[k].ts = ts;
        out[k].ev = *e;
        out[k].batch = bi;
      }
      k++;
    }
  }
  return k;
}

int fx_std_encode(int from, int to, uint32_t pid, stkr_fmt_buf *out) {
  int i, err;

  for (i = from; i < to; i++) {
    fx_batch b = fx_std[i];

    b.pid = pid;
    if ((err = fx_encode(&b, out)) != 0)
      return err;
  }
  return 0;
}

int fx_write_segment_bytes(const char *dir, uint32_t pid, uint32_t seq,
                           const void *data, size_t len) {
  char name[STKR_FMT_SEGMENT_NAME_MAX], path[4096];
  int err = stkr_fmt_segment_name(name, sizeof(name), pid, seq);

  if (err == 0 && (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
                      sizeof(path))
    err = -ENAMETOOLONG;
  if (err == 0)
    err = fx_write_file(path, data, len);
  return err;
}

int fx_write_segment(const char *dir, uint32_t pid, uint32_t seq,
                     stkr_fmt_buf *out) {
  int err = fx_write_segment_bytes(dir, pid, seq, out->data, out->len);

  out->len = 0;
  return err;
}

int fx_write_one(const char *dir, const fx_one *o) {
  static const uint32_t sites[] = {1}, threads[] = {1}, stacks[] = {1};
  static const fx_ev evs[] = {{1000, 1, 1, 1, "a", 1, false}};
  const uint32_t seq = o->segment_seq ? o->segment_seq : 1;
  const fx_batch b = {.seq = 1, .header = true, .pid = o->pid,
                      .segment_seq = seq, .sites = sites, .n_sites = 1,
                      .threads = threads, .n_threads = 1, .stacks = stacks,
                      .n_stacks = 1, .base_ts = FX_START_MONO + o->shift + o->mono_ahead,
                      .evs = evs, .n_evs = o->silent ? 0 : 1, .last = true,
                      .session_id = o->session_id, .start_shift = o->shift,
                      .mono_ahead = o->mono_ahead, .boot = o->boot,
                      .mono_offset = o->mono_offset,
                      .process_start = o->process_start,
                      .parent_pid = o->parent_pid,
                      .os_parent_pid = o->os_parent_pid,
                      .watched = o->watched, .process_name = o->process_name};
  stkr_fmt_buf buf = {0};
  int err = fx_encode(&b, &buf);

  if (err == 0)
    err = fx_write_segment(dir, o->pid, seq, &buf);
  stkr_fmt_buf_free(&buf);
  return err;
}

int fx_write_launch(const char *dir, fx_one o, uint32_t k) {
  o.session_id = k + 1;
  o.segment_seq = k + 1;
  return fx_write_one(dir, &o);
}

int fx_std_write(const char *dir, uint32_t pid) {
  stkr_fmt_buf buf = {0};
  int err;

  err = fx_std_encode(0, 3, pid, &buf);
  if (err == 0)
    err = fx_write_segment(dir, pid, 1, &buf);
  if (err == 0)
    err = fx_std_encode(3, 5, pid, &buf);
  if (err == 0)
    err = fx_write_segment(dir, pid, 2, &buf);
  stkr_fmt_buf_free(&buf);
  return err;
}

int fx_std_write_live(const char *dir, uint32_t pid, size_t cut) {
  stkr_fmt_buf buf = {0};
  size_t end3 = 0;
  int err;

  err = fx_std_write(dir, pid);
  if (err == 0)
    err = fx_std_encode(3, 4, pid, &buf);
  end3 = buf.len;
  if (err == 0)
    err = fx_std_encode(4, 5, pid, &buf);
  if (err == 0 && (cut == 0 || end3 + cut >= buf.len))
    err = -EINVAL; /* not a cut inside batch 4 */
  buf.len = end3 + cut; /* segment 2 ends inside batch 4 */
  if (err == 0)
    err = fx_write_segment(dir, pid, 2, &buf);
  stkr_fmt_buf_free(&buf);
  return err;
}

int fx_clean_encode(int from, int to, uint32_t pid, stkr_fmt_buf *out) {
  return fx_clean_encode_session(from, to, pid, 0, out);
}

int fx_clean_encode_session(int from, int to, uint32_t pid, uint64_t session,
                            stkr_fmt_buf *out) {
  static const Stackrec__Counters clean = {
      .base = PROTOBUF_C_MESSAGE_INIT(&stackrec__counters__descriptor),
      .attempted = 9, .written = 8};
  int i, err;

  for (i = from; i < to; i++) {
    fx_batch b = fx_std[i];

    b.pid = pid;
    b.session_id = session;
    b.drops = false;
    b.counters = false;
    /* One file: its later headers say the first's segment (std's batch
     * 3 starts its segment 2), or readers take it for a misnamed file. */
    if (i > from) b.segment_seq = fx_std[from].segment_seq;
    if (b.last)
      b.cnt = &clean;
    if ((err = fx_encode(&b, out)) != 0)
      return err;
  }
  return 0;
}

const char *fx_tmpdir(const char *tag) {
  static char path[4096];
  static unsigned counter;
  const char *base = getenv("TEST_TMPDIR");

  snprintf(path, sizeof(path), "%s/stkr-%s-%ld-%u", base ? base : "/tmp",
           tag, (long)getpid(), counter++);
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return NULL;
  return path;
}
