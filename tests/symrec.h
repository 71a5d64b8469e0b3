/*
 * symrec.h: writing small SYMBOLIZED recordings for the agg, report and
 * merge tests: sites, threads, stacks given as lists of frames (function,
 * file, line, inlined, app), events. Encoded with the real writer code
 * (stkr_fmt_encode_batch), one batch, like an inproc-mode recording.
 *
 * pc_base lets two "builds" of one program put the same functions at
 * other addresses: their stacks must still merge by frames.
 * Header-only (static functions) so each test stays one source file.
 */
#ifndef STKR_TEST_SYMREC_H
#define STKR_TEST_SYMREC_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stkr_format.h"

typedef struct sr_frame {
  const char *fn;   /* NULL: unknown function (shown as image+offset) */
  const char *file; /* NULL: unknown */
  uint32_t line;
  bool inlined;     /* a call inlined at the next PC's frame */
  bool app;
} sr_frame;

typedef struct sr_stack {
  uint32_t site;     /* 1-based index into sr_rec.sites */
  const sr_frame *f; /* innermost first; each frame that is not inlined
                        takes one PC */
  size_t n;
  bool truncated;
} sr_stack;

typedef struct sr_event {
  uint32_t stack;  /* 1-based index into sr_rec.stacks */
  uint32_t thread; /* 1-based index into sr_rec.threads */
  int64_t delta;   /* ns after the previous event */
} sr_event;

typedef struct sr_rec {
  uint32_t pid;
  const char *name;       /* process name */
  uint64_t pc_base;       /* stack s, PC k: pc_base + 0x100 * s + 0x10 * k */
  uint64_t start_ns;      /* header start and first event time */
  const char *const *sites;
  size_t n_sites;
  const char *const *threads; /* names; thread i has tid 1000 + i */
  size_t n_threads;
  const sr_stack *stacks;
  size_t n_stacks;
  const sr_event *evs;
  size_t n_evs;
  bool last;              /* clean end */
  uint64_t ring_full;     /* a Drops message with this many, if not 0 */
} sr_rec;

#define SR_APP_IMAGE "/opt/app/bin/app"
#define SR_LIB_IMAGE "/usr/lib/libc.so.6"
#define SR_MAX 512

typedef struct sr_strs {
  const char *v[SR_MAX];
  size_t n;
} sr_strs;

/* String id (>= 1) of s, 0 for NULL. */
static inline uint32_t sr_str(sr_strs *t, const char *s) {
  size_t i;

  if (s == NULL)
    return 0;
  for (i = 0; i < t->n; i++)
    if (strcmp(t->v[i], s) == 0)
      return (uint32_t)i + 1;
  if (t->n == SR_MAX)
    return 0;
  t->v[t->n++] = s;
  return (uint32_t)t->n;
}

/* Append the recording's one batch to out. @return 0 or -errno. */
static inline int sr_encode(const sr_rec *r, stkr_fmt_buf *out) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h = STACKREC__HEADER__INIT;
  Stackrec__Events ev = STACKREC__EVENTS__INIT;
  Stackrec__Drops d = STACKREC__DROPS__INIT;
  Stackrec__Drops *dp[1] = {&d};
  Stackrec__ClockSync clk = STACKREC__CLOCK_SYNC__INIT;
  Stackrec__Image img[2] = {STACKREC__IMAGE__INIT, STACKREC__IMAGE__INIT};
  Stackrec__Image *imgp[2] = {&img[0], &img[1]};
  static sr_strs strs;
  Stackrec__SiteDef *sd = calloc(r->n_sites + 1, sizeof *sd);
  Stackrec__SiteDef **sdp = calloc(r->n_sites + 1, sizeof *sdp);
  Stackrec__ThreadDef *td = calloc(r->n_threads + 1, sizeof *td);
  Stackrec__ThreadDef **tdp = calloc(r->n_threads + 1, sizeof *tdp);
  Stackrec__StackDef *kd = calloc(r->n_stacks + 1, sizeof *kd);
  Stackrec__StackDef **kdp = calloc(r->n_stacks + 1, sizeof *kdp);
  Stackrec__FrameDef *fd = calloc(SR_MAX, sizeof *fd);
  Stackrec__FrameDef **fdp = calloc(SR_MAX, sizeof *fdp);
  Stackrec__StringDef *xd = calloc(SR_MAX, sizeof *xd);
  Stackrec__StringDef **xdp = calloc(SR_MAX, sizeof *xdp);
  uint64_t *pcs = calloc(SR_MAX, sizeof *pcs);
  uint32_t *fids = calloc(SR_MAX, sizeof *fids);
  int64_t *deltas = calloc(r->n_evs + 1, sizeof *deltas);
  uint32_t *site = calloc(r->n_evs + 1, sizeof *site);
  uint32_t *thr = calloc(r->n_evs + 1, sizeof *thr);
  uint32_t *stk = calloc(r->n_evs + 1, sizeof *stk);
  size_t i, k, nf = 0, np = 0;
  int err = -ENOMEM;

  memset(&strs, 0, sizeof strs);
  if (!sd || !sdp || !td || !tdp || !kd || !kdp || !fd || !fdp || !xd ||
      !xdp || !pcs || !fids || !deltas || !site || !thr || !stk)
    goto out;
  h.format_version = STKR_FORMAT_VERSION;
  h.pid = r->pid;
  h.process_name = (char *)(r->name ? r->name : "symrec");
  h.start_mono_ns = r->start_ns;
  h.start_wall_ns = 1700000000000000000ull;
  h.segment_seq = 1;
  h.arch = "x86_64";
  b.header = &h;
  b.seq = 1;
  img[0].path = SR_APP_IMAGE;
  img[0].load_address = r->pc_base;
  img[0].text_start = r->pc_base;
  img[0].text_end = r->pc_base + 0x100000;
  img[0].app = true;
  img[1].path = SR_LIB_IMAGE;
  img[1].load_address = r->pc_base + 0x1000000;
  img[1].text_start = r->pc_base + 0x1000000;
  img[1].text_end = r->pc_base + 0x1100000;
  b.images = imgp;
  b.n_images = 2;
  for (i = 0; i < r->n_sites; i++) {
    stackrec__site_def__init(&sd[i]);
    sd[i].id = (uint32_t)i + 1;
    sd[i].name = (char *)r->sites[i];
    sdp[i] = &sd[i];
  }
  for (i = 0; i < r->n_threads; i++) {
    stackrec__thread_def__init(&td[i]);
    td[i].id = (uint32_t)i + 1;
    td[i].tid = 1000 + i + 1;
    td[i].name = (char *)r->threads[i];
    tdp[i] = &td[i];
  }
  for (i = 0; i < r->n_stacks; i++) {
    const sr_stack *s = &r->stacks[i];
    size_t pc0 = np, f0 = nf, npc = 0;

    stackrec__stack_def__init(&kd[i]);
    for (k = 0; k < s->n; k++) {
      const sr_frame *f = &s->f[k];
      uint64_t pc = r->pc_base + 0x100 * (i + 1) + 0x10 * npc;
      uint64_t load = f->app ? r->pc_base : r->pc_base + 0x1000000;

      if (!f->app)
        pc += 0x1000000;
      if (nf >= SR_MAX || np >= SR_MAX)
        goto out;
      stackrec__frame_def__init(&fd[nf]);
      fd[nf].id = (uint32_t)nf + 1;
      fd[nf].function = sr_str(&strs, f->fn);
      fd[nf].file = sr_str(&strs, f->file);
      fd[nf].line = f->line;
      fd[nf].image = sr_str(&strs, f->app ? SR_APP_IMAGE : SR_LIB_IMAGE);
      fd[nf].offset = pc - load;
      fd[nf].inlined = f->inlined;
      fd[nf].app = f->app;
      fdp[nf] = &fd[nf];
      fids[nf] = fd[nf].id;
      nf++;
      if (!f->inlined) {
        pcs[np++] = pc;
        npc++;
      }
    }
    kd[i].id = (uint32_t)i + 1;
    kd[i].pcs = pcs + pc0;
    kd[i].n_pcs = np - pc0;
    kd[i].frames = fids + f0;
    kd[i].n_frames = nf - f0;
    kd[i].hash = 0x5000 + i;
    kd[i].truncated = s->truncated;
    kd[i].site_id = s->site;
    kdp[i] = &kd[i];
  }
  for (i = 0; i < strs.n; i++) {
    stackrec__string_def__init(&xd[i]);
    xd[i].id = (uint32_t)i + 1;
    xd[i].value = (char *)strs.v[i];
    xdp[i] = &xd[i];
  }
  b.sites = sdp;
  b.n_sites = r->n_sites;
  b.threads = tdp;
  b.n_threads = r->n_threads;
  b.stacks = kdp;
  b.n_stacks = r->n_stacks;
  b.frames = fdp;
  b.n_frames = nf;
  b.strings = xdp;
  b.n_strings = strs.n;
  for (i = 0; i < r->n_evs; i++) {
    deltas[i] = r->evs[i].delta;
    stk[i] = r->evs[i].stack;
    site[i] = r->stacks[r->evs[i].stack - 1].site;
    thr[i] = r->evs[i].thread;
  }
  if (r->n_evs) {
    ev.base_ts_ns = r->start_ns;
    ev.n_ts_delta_ns = ev.n_site_id = ev.n_thread_id = ev.n_stack_id =
        r->n_evs;
    ev.ts_delta_ns = deltas;
    ev.site_id = site;
    ev.thread_id = thr;
    ev.stack_id = stk;
    b.events = &ev;
  }
  if (r->ring_full) {
    d.thread_id = 1;
    d.ring_full = r->ring_full;
    b.drops = dp;
    b.n_drops = 1;
  }
  clk.mono_ns = r->start_ns;
  clk.wall_ns = 1700000000000000000ull;
  b.clock = &clk;
  b.last = r->last;
  err = stkr_fmt_encode_batch(&b, NULL, 3, out);
out:
  free(sd);
  free(sdp);
  free(td);
  free(tdp);
  free(kd);
  free(kdp);
  free(fd);
  free(fdp);
  free(xd);
  free(xdp);
  free(pcs);
  free(fids);
  free(deltas);
  free(site);
  free(thr);
  free(stk);
  return err;
}

/* Write r as dir/stackrec-<pid>-000001.zst. @return 0 or -errno. */
static inline int sr_write(const char *dir, const sr_rec *r) {
  stkr_fmt_buf buf = {0};
  char path[4200];
  FILE *f;
  int err = sr_encode(r, &buf);

  if (err != 0)
    return err;
  snprintf(path, sizeof path, "%s/stackrec-%u-000001.zst", dir,
           (unsigned)r->pid);
  f = fopen(path, "wb");
  if (f == NULL) {
    err = -errno;
  } else {
    if (fwrite(buf.data, 1, buf.len, f) != buf.len)
      err = -EIO;
    if (fclose(f) != 0 && err == 0)
      err = -errno;
  }
  stkr_fmt_buf_free(&buf);
  return err;
}

#endif
