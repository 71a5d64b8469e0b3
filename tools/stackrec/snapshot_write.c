/*
 * snapshot_write.c: `stackrec snapshot -o DIR`: snapshots as a recording
 * that report, export, dump and verify read like any other.
 *
 * One segment file stackrec-<PID>-<seq>.zst per run (seq 1, or the next
 * free one when DIR holds earlier snapshots of the same pid: each run is
 * its own session), one Batch per snapshot, encoded by the format's own
 * writer (proto/stkr_format.h, as merge and recover use it): the first
 * carries the Header (pid, comm, arch, symbolize "inproc") and the image
 * list, each carries the site "snapshot", the threads and stacks it meets
 * first and the StringDefs/FrameDefs those stacks need (the frame cache of
 * //symbolize, one epoch: the segment is self-contained), and one
 * event per thread at the instant that thread was stopped. The last batch
 * is marked last: a clean end. Counters: every event is written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_io.h"
#include "common/stkr_map.h"
#include "proto/stkr_format.h"
#include "tools/stackrec/snapshot.h"

typedef struct wstack {
  uint64_t hash;
  uint32_t id;
  uint32_t n_pcs, n_frames;
  uint64_t *pcs;
  const uint32_t *frames; /* the frame cache's, valid for its life */
  bool truncated;
} wstack;

struct stkr_snap_writer {
  char path[PATH_MAX];
  int fd;
  uint32_t pid, seq;
  uint64_t session_id, batches, written;
  bool header_done, ended;
  /* Threads by tid -> ThreadDef id. */
  uint64_t *tids;
  size_t n_tids, cap_tids;
  /* Stacks, and the common index over them. */
  wstack *stacks;
  size_t n_stacks, cap_stacks;
  stkr_index tab; /* stack hash -> index in stacks[] */
  stkr_fmt_buf out;
};

int stkr_snap_writer_open(const char *dir, uint32_t pid,
                          stkr_snap_writer **out, char *err, size_t cap) {
  stkr_snap_writer *w = calloc(1, sizeof *w);
  char name[STKR_FMT_SEGMENT_NAME_MAX];

  *out = NULL;
  if (!w) return -ENOMEM;
  w->fd = -1;
  w->pid = pid;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(err, cap, "cannot create %s: %s", dir, strerror(errno));
    free(w);
    return -errno;
  }
  /* Seq 1, or after the snapshots of this pid already there. */
  for (w->seq = 1; w->seq < 100000; w->seq++) {
    stkr_fmt_segment_name(name, sizeof name, pid, w->seq);
    snprintf(w->path, sizeof w->path, "%s/%s", dir, name);
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->fd >= 0 || errno != EEXIST) break;
  }
  if (w->fd < 0) {
    int e = errno;
    snprintf(err, cap, "cannot create %s: %s", w->path, strerror(e));
    free(w);
    return -e;
  }
  if (getrandom(&w->session_id, sizeof w->session_id, GRND_NONBLOCK) !=
          (ssize_t)sizeof w->session_id ||
      w->session_id == 0)
    w->session_id = stkr_mix64(((uint64_t)pid << 32) ^ (uint64_t)time(NULL));
  *out = w;
  return 0;
}

static uint32_t thread_id(stkr_snap_writer *w, uint64_t tid, bool *is_new) {
  for (size_t i = 0; i < w->n_tids; i++)
    if (w->tids[i] == tid) {
      *is_new = false;
      return (uint32_t)i + 1;
    }
  if (stkr_grow((void **)&w->tids, &w->cap_tids, w->n_tids + 1,
                sizeof *w->tids) != 0)
    return 0;
  w->tids[w->n_tids++] = tid;
  *is_new = true;
  return (uint32_t)w->n_tids;
}

/* The id of the stack (pcs, frames), adding it if new (*is_new). */
static uint32_t stack_id(stkr_snap_writer *w, const stkr_snap_frames *f,
                         bool *is_new) {
  uint64_t h = stkr_hash_bytes(STKR_HASH_SEED, f->pcs, f->n_pcs * 8u);
  size_t pos, ix;
  *is_new = false;
  for (ix = stkr_index_first(&w->tab, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&w->tab, h, &pos)) {
    const wstack *s = &w->stacks[ix];
    if (s->hash == h && s->n_pcs == f->n_pcs &&
        memcmp(s->pcs, f->pcs, f->n_pcs * 8u) == 0)
      return s->id;
  }
  if (stkr_index_reserve(&w->tab, w->n_stacks + 1) != 0) return 0;
  if (stkr_grow((void **)&w->stacks, &w->cap_stacks, w->n_stacks + 1,
                sizeof *w->stacks) != 0)
    return 0;
  wstack *s = &w->stacks[w->n_stacks];
  s->pcs = malloc(f->n_pcs * 8u + 8);
  if (!s->pcs) return 0;
  memcpy(s->pcs, f->pcs, f->n_pcs * 8u);
  s->hash = h;
  s->n_pcs = f->n_pcs;
  s->frames = f->frames;
  s->n_frames = f->n_frames;
  s->truncated = f->truncated;
  (void)stkr_index_add(&w->tab, h, w->n_stacks); /* reserved above */
  s->id = (uint32_t)++w->n_stacks;
  *is_new = true;
  return s->id;
}

/* The batch of one snapshot: its arrays, freed after encoding. */
typedef struct wbatch {
  Stackrec__ThreadDef *td, **tdp;
  Stackrec__StackDef *sd, **sdp;
  int64_t *dts;
  uint32_t *site, *thr, *stk;
  size_t n_td, n_sd, n_ev;
} wbatch;

static void wbatch_free(wbatch *b) {
  STKR_FREE_ALL(b->td, b->tdp, b->sd, b->sdp, b->dts, b->site, b->thr, b->stk);
}

/* Threads, stacks and events of s into b. @return 0 or -ENOMEM. */
static int fill(stkr_snap_writer *w, const stkr_snap *s,
                const stkr_snap_frames *fr, wbatch *b) {
  size_t n = s->n_threads;
  b->td = calloc(n + 1, sizeof *b->td);
  b->tdp = calloc(n + 1, sizeof *b->tdp);
  b->sd = calloc(n + 1, sizeof *b->sd);
  b->sdp = calloc(n + 1, sizeof *b->sdp);
  b->dts = calloc(n + 1, sizeof *b->dts);
  b->site = calloc(n + 1, sizeof *b->site);
  b->thr = calloc(n + 1, sizeof *b->thr);
  b->stk = calloc(n + 1, sizeof *b->stk);
  if (!b->td || !b->tdp || !b->sd || !b->sdp || !b->dts || !b->site ||
      !b->thr || !b->stk)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const stkr_snap_thread *t = &s->threads[i];
    static const Stackrec__ThreadDef td0 = STACKREC__THREAD_DEF__INIT;
    static const Stackrec__StackDef sd0 = STACKREC__STACK_DEF__INIT;
    bool is_new;
    uint32_t tid = thread_id(w, (uint64_t)t->tid, &is_new), sid;
    if (tid == 0) return -ENOMEM;
    if (is_new) {
      b->td[b->n_td] = td0;
      b->td[b->n_td].id = tid;
      b->td[b->n_td].tid = (uint64_t)t->tid;
      b->td[b->n_td].name = (char *)t->name;
      b->tdp[b->n_td] = &b->td[b->n_td];
      b->n_td++;
    }
    if ((sid = stack_id(w, &fr[i], &is_new)) == 0) return -ENOMEM;
    if (is_new) {
      const wstack *ws = &w->stacks[sid - 1];
      b->sd[b->n_sd] = sd0;
      b->sd[b->n_sd].id = sid;
      b->sd[b->n_sd].n_pcs = ws->n_pcs;
      b->sd[b->n_sd].pcs = ws->pcs;
      b->sd[b->n_sd].hash = ws->hash;
      b->sd[b->n_sd].truncated = ws->truncated;
      b->sd[b->n_sd].site_id = 1;
      b->sd[b->n_sd].n_frames = ws->n_frames;
      b->sd[b->n_sd].frames = (uint32_t *)ws->frames;
      b->sdp[b->n_sd] = &b->sd[b->n_sd];
      b->n_sd++;
    }
    b->dts[b->n_ev] = (int64_t)(t->ts_mono_ns - s->mono_ns);
    b->site[b->n_ev] = 1;
    b->thr[b->n_ev] = tid;
    b->stk[b->n_ev] = sid;
    b->n_ev++;
  }
  return 0;
}

int stkr_snap_writer_add(stkr_snap_writer *w, const stkr_snap *s,
                         const stkr_snap_frames *fr,
                         const stkr_snap_images *im,
                         const stkr__symdefs *defs, bool last) {
  Stackrec__Batch B = STACKREC__BATCH__INIT;
  Stackrec__Header H = STACKREC__HEADER__INIT;
  Stackrec__Config C = STACKREC__CONFIG__INIT;
  Stackrec__Events E = STACKREC__EVENTS__INIT;
  Stackrec__Counters K = STACKREC__COUNTERS__INIT;
  Stackrec__SiteDef site = STACKREC__SITE_DEF__INIT, *sitep = &site;
  Stackrec__Image *imgs = NULL, **imgp = NULL;
  wbatch b = {0};
  int err;

  if ((err = fill(w, s, fr, &b)) != 0) goto out;
  B.seq = ++w->batches;
  if (!w->header_done) {
    H.format_version = STKR_FORMAT_VERSION;
    H.pid = w->pid;
    H.process_name = (char *)s->comm;
    H.start_mono_ns = s->mono_ns;
    H.start_wall_ns = s->wall_ns;
    H.segment_seq = w->seq;
    H.session_id = w->session_id;
    H.session_first_seq = w->seq;
    H.arch = (char *)stkr_snap_arch();
    C.max_depth = STKR_SNAP_MAX_DEPTH;
    C.symbolize = (char *)"inproc";
    H.config = &C;
    B.header = &H;
    imgs = calloc(im->n + 1, sizeof *imgs);
    imgp = calloc(im->n + 1, sizeof *imgp);
    if (!imgs || !imgp) {
      err = -ENOMEM;
      goto out;
    }
    for (size_t i = 0; i < im->n; i++) {
      static const Stackrec__Image i0 = STACKREC__IMAGE__INIT;
      const stkr__symimg *si = &im->v[i].sym;
      imgs[i] = i0;
      imgs[i].path = (char *)si->path;
      imgs[i].load_address = si->load_address;
      imgs[i].text_start = si->text_start;
      imgs[i].text_end = si->text_end;
      imgs[i].build_id.data = (uint8_t *)si->build_id;
      imgs[i].build_id.len = si->build_id_len;
      imgs[i].app = si->app;
      imgp[i] = &imgs[i];
    }
    B.n_images = im->n;
    B.images = imgp;
  }
  site.id = 1;
  site.name = (char *)"snapshot";
  B.n_sites = 1;
  B.sites = &sitep;
  B.n_threads = b.n_td;
  B.threads = b.tdp;
  B.n_stacks = b.n_sd;
  B.stacks = b.sdp;
  B.n_strings = defs->n_strings;
  B.strings = defs->strings;
  B.n_frames = defs->n_frames;
  B.frames = defs->frames;
  E.base_ts_ns = s->mono_ns;
  E.n_ts_delta_ns = E.n_site_id = E.n_thread_id = E.n_stack_id = b.n_ev;
  E.ts_delta_ns = b.dts;
  E.site_id = b.site;
  E.thread_id = b.thr;
  E.stack_id = b.stk;
  B.events = &E;
  /* Totals as they stand once this batch is read. */
  K.written = w->written;
  K.attempted = w->written + b.n_ev;
  B.counters = &K;
  B.last = last;
  w->out.len = 0;
  if ((err = stkr_fmt_encode_batch(&B, NULL, 3, &w->out)) == 0 &&
      (err = stkr_write_all(w->fd, w->out.data, w->out.len)) == 0) {
    w->written += b.n_ev;
    w->header_done = true;
    w->ended = last;
  }
out:
  free(imgs);
  free(imgp);
  wbatch_free(&b);
  return err;
}

/* The end of a series that stopped before its last snapshot: a batch of
 * no events, the totals, marked last. */
static int write_end(stkr_snap_writer *w) {
  Stackrec__Batch B = STACKREC__BATCH__INIT;
  Stackrec__Counters K = STACKREC__COUNTERS__INIT;
  int err;

  B.seq = ++w->batches;
  K.written = K.attempted = w->written;
  B.counters = &K;
  B.last = true;
  w->out.len = 0;
  if ((err = stkr_fmt_encode_batch(&B, NULL, 3, &w->out)) == 0)
    err = stkr_write_all(w->fd, w->out.data, w->out.len);
  return err;
}

int stkr_snap_writer_close(stkr_snap_writer *w) {
  int err = 0;
  if (!w) return 0;
  if (w->fd >= 0) {
    if (w->header_done && !w->ended) err = write_end(w);
    if (fsync(w->fd) != 0 && err == 0) err = -errno;
    if (close(w->fd) != 0 && err == 0) err = -errno; /* closed either way */
    if (!w->header_done) (void)unlink(w->path); /* no batch */
  }
  STKR_FREE_EACH(w->stacks, w->n_stacks, pcs);
  free(w->stacks);
  stkr_index_free(&w->tab);
  free(w->tids);
  stkr_fmt_buf_free(&w->out);
  free(w);
  return err;
}

const char *stkr_snap_writer_path(const stkr_snap_writer *w) {
  return w->path;
}
