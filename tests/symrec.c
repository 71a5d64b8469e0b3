/*
 * symrec.c: see symrec.h. The batch goes through fixture.c's encoder
 * (fx_header_init, fx_encode_events); what is added here is the symbolized
 * part: frames and their strings, and two images.
 */
#include "tests/symrec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fixture.h"

#define SR_MAX 512
/* The wall clock at start_ns: one boot (wall - mono) for every process
 * written, as on one machine (common/stkr_boot.h). */
#define SR_START_WALL 1700000000000000000ull
#define SR_WALL_AT(mono) (SR_START_WALL - 1000000000ull + (mono))

/* The frame and string tables of one batch (SR_MAX of each). */
typedef struct sr_tables {
  const char *str[SR_MAX];
  size_t n_str, n_frames, n_pcs;
  Stackrec__FrameDef fd[SR_MAX], *fdp[SR_MAX];
  Stackrec__StringDef xd[SR_MAX], *xdp[SR_MAX];
  uint64_t pcs[SR_MAX];
  uint32_t fids[SR_MAX];
} sr_tables;

/* String id (>= 1) of s, 0 for NULL (or a full table). */
static uint32_t sr_str(sr_tables *t, const char *s) {
  size_t i;

  if (s == NULL)
    return 0;
  for (i = 0; i < t->n_str; i++)
    if (strcmp(t->str[i], s) == 0)
      return (uint32_t)i + 1;
  if (t->n_str == SR_MAX)
    return 0;
  t->str[t->n_str++] = s;
  return (uint32_t)t->n_str;
}

/* Stack i (0-based) of r into kd, its frames and PCs into t.
 * @return 0 or -ENOMEM (a table is full). */
static int sr_stack_def(const sr_rec *r, size_t i, Stackrec__StackDef *kd,
                        sr_tables *t) {
  const sr_stack *s = &r->stacks[i];
  size_t k, pc0 = t->n_pcs, f0 = t->n_frames, npc = 0;

  stackrec__stack_def__init(kd);
  for (k = 0; k < s->n; k++) {
    const sr_frame *f = &s->f[k];
    uint64_t pc = r->pc_base + 0x100 * (i + 1) + 0x10 * npc;
    uint64_t load = f->app ? r->pc_base : r->pc_base + 0x1000000;
    Stackrec__FrameDef *fd = &t->fd[t->n_frames];

    if (!f->app)
      pc += 0x1000000;
    if (t->n_frames >= SR_MAX || t->n_pcs >= SR_MAX)
      return -ENOMEM;
    stackrec__frame_def__init(fd);
    fd->id = (uint32_t)t->n_frames + 1;
    fd->function = sr_str(t, f->fn);
    fd->file = sr_str(t, f->file);
    fd->line = f->line;
    fd->image = sr_str(t, f->app ? SR_APP_IMAGE : SR_LIB_IMAGE);
    fd->offset = pc - load;
    fd->inlined = f->inlined;
    fd->app = f->app;
    t->fdp[t->n_frames] = fd;
    t->fids[t->n_frames++] = fd->id;
    if (!f->inlined) {
      t->pcs[t->n_pcs++] = pc;
      npc++;
    }
  }
  kd->id = (uint32_t)i + 1;
  kd->pcs = t->pcs + pc0;
  kd->n_pcs = t->n_pcs - pc0;
  kd->frames = t->fids + f0;
  kd->n_frames = t->n_frames - f0;
  kd->hash = 0x5000 + i;
  kd->truncated = s->truncated;
  kd->site_id = s->site;
  return 0;
}

/* The app image at pc_base, libc 16 MiB above it. */
static void sr_images(const sr_rec *r, Stackrec__Image img[2]) {
  stackrec__image__init(&img[0]);
  stackrec__image__init(&img[1]);
  img[0].path = SR_APP_IMAGE;
  img[0].load_address = r->pc_base;
  img[0].text_start = r->pc_base;
  img[0].text_end = r->pc_base + 0x100000;
  img[0].app = true;
  img[1].path = SR_LIB_IMAGE;
  img[1].load_address = r->pc_base + 0x1000000;
  img[1].text_start = r->pc_base + 0x1000000;
  img[1].text_end = r->pc_base + 0x1100000;
}

int sr_encode(const sr_rec *r, stkr_fmt_buf *out) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h;
  Stackrec__Drops d = STACKREC__DROPS__INIT, *dp[1] = {&d};
  Stackrec__ClockSync clk = STACKREC__CLOCK_SYNC__INIT;
  Stackrec__Image img[2], *imgp[2] = {&img[0], &img[1]};
  Stackrec__SiteDef *sd = calloc(r->n_sites + 1, sizeof *sd);
  Stackrec__SiteDef **sdp = calloc(r->n_sites + 1, sizeof *sdp);
  Stackrec__ThreadDef *td = calloc(r->n_threads + 1, sizeof *td);
  Stackrec__ThreadDef **tdp = calloc(r->n_threads + 1, sizeof *tdp);
  Stackrec__StackDef *kd = calloc(r->n_stacks + 1, sizeof *kd);
  Stackrec__StackDef **kdp = calloc(r->n_stacks + 1, sizeof *kdp);
  fx_ev *evs = calloc(r->n_evs + 1, sizeof *evs);
  sr_tables *t = calloc(1, sizeof *t);
  size_t i;
  int err = -ENOMEM;

  if (!sd || !sdp || !td || !tdp || !kd || !kdp || !evs || !t)
    goto out;
  fx_header_init(&h, r->pid, r->name ? r->name : "symrec", r->start_ns,
                 SR_WALL_AT(r->start_ns));
  h.parent_pid = r->parent_pid;
  h.segment_seq = r->seq ? r->seq : 1; /* as sr_write names the file */
  b.header = &h;
  b.seq = 1;
  sr_images(r, img);
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
    td[i].tid = r->tids != NULL ? r->tids[i] : 1000 + i + 1;
    td[i].name = (char *)r->threads[i];
    tdp[i] = &td[i];
  }
  for (i = 0; i < r->n_stacks; i++) {
    if ((err = sr_stack_def(r, i, &kd[i], t)) != 0)
      goto out;
    kdp[i] = &kd[i];
  }
  for (i = 0; i < t->n_str; i++) {
    stackrec__string_def__init(&t->xd[i]);
    t->xd[i].id = (uint32_t)i + 1;
    t->xd[i].value = (char *)t->str[i];
    t->xdp[i] = &t->xd[i];
  }
  b.sites = sdp;
  b.n_sites = r->n_sites;
  b.threads = tdp;
  b.n_threads = r->n_threads;
  b.stacks = kdp;
  b.n_stacks = r->n_stacks;
  if (r->raw) /* PCs only */
    for (i = 0; i < r->n_stacks; i++) kd[i].n_frames = 0;
  else {
    b.frames = t->fdp;
    b.n_frames = t->n_frames;
    b.strings = t->xdp;
    b.n_strings = t->n_str;
  }
  b.recovered = r->recovered;
  for (i = 0; i < r->n_evs; i++) {
    evs[i].delta = r->evs[i].delta;
    evs[i].stack = r->evs[i].stack;
    evs[i].site = r->stacks[r->evs[i].stack - 1].site;
    evs[i].thread = r->evs[i].thread;
  }
  if (r->ring_full) {
    d.thread_id = 1;
    d.ring_full = r->ring_full;
    b.drops = dp;
    b.n_drops = 1;
  }
  clk.mono_ns = r->start_ns;
  clk.wall_ns = SR_WALL_AT(r->start_ns);
  b.clock = &clk;
  b.last = r->last;
  err = fx_encode_events(&b, evs, r->n_evs, r->start_ns, out);
out:
  free(sd);
  free(sdp);
  free(td);
  free(tdp);
  free(kd);
  free(kdp);
  free(evs);
  free(t);
  return err;
}

int sr_write(const char *dir, const sr_rec *r) {
  stkr_fmt_buf buf = {0};
  char name[STKR_FMT_SEGMENT_NAME_MAX], path[4200];
  int err = sr_encode(r, &buf);

  if (err == 0)
    err = stkr_fmt_segment_name(name, sizeof name, r->pid,
                                r->seq ? r->seq : 1);
  if (err == 0) {
    snprintf(path, sizeof path, "%s/%s", dir, name);
    err = fx_write_file(path, buf.data, buf.len);
  }
  stkr_fmt_buf_free(&buf);
  return err;
}

/* ---- the standard symbolized recording ------------------------------------ */

static const char *const sr_std_sites[] = {"files.open", "files.stat",
                                           "network.connect"};
static const char *const sr_std_threads[] = {"main", "io"};
static const sr_frame sr_std_open[] = {
    {"open_config", "app/config.c", 12, false, true},
    {"libc_wrapper", NULL, 0, false, false},
    {"load", "app/load.c", 30, true, true}, /* inlined into main */
    {"main", "app/main.c", 40, false, true},
};
static const sr_frame sr_std_lib_only[] = {
    {"__libc_open", NULL, 0, false, false},
    {"__libc_start", NULL, 0, false, false},
};
static const sr_frame sr_std_stat[] = {
    {"stat_it", "app/stat.c", 7, false, true},
    {"main", "app/main.c", 44, false, true},
};
static const sr_frame sr_std_unknown[] = {
    {NULL, NULL, 0, false, true}, /* app+offset */
    {"main", "app/main.c", 50, false, true},
};
static const sr_stack sr_std_stacks[] = {
    {1, sr_std_open, 4, false},
    {1, sr_std_lib_only, 2, false},
    {2, sr_std_stat, 2, true},
    {3, sr_std_unknown, 2, false},
};
/* Stack 1 on main at t=0, 10, 70 ns and on io at 20; stack 2 at 30 (main),
 * stack 3 at 40 (io), stack 4 at 50, 60 (main). */
static const sr_event sr_std_evs[] = {
    {1, 1, 0}, {1, 1, 10}, {1, 2, 10}, {2, 1, 10}, {3, 2, 10},
    {4, 1, 10}, {4, 1, 10}, {1, 1, 10},
};

sr_rec sr_std(uint32_t pid, uint64_t pc_base) {
  sr_rec r = {.pid = pid, .name = "app", .pc_base = pc_base,
              .start_ns = 1000000000ull, .sites = sr_std_sites, .n_sites = 3,
              .threads = sr_std_threads, .n_threads = 2,
              .stacks = sr_std_stacks, .n_stacks = 4, .evs = sr_std_evs,
              .n_evs = 8, .last = true};
  return r;
}

const char *sr_dir(const char *tag, const sr_rec *r) {
  const char *d = fx_tmpdir(tag);

  return d != NULL && sr_write(d, r) == 0 ? d : NULL;
}

const char *sr_std_dir(const char *tag, uint32_t pid, uint64_t pc_base) {
  sr_rec r = sr_std(pid, pc_base);

  return sr_dir(tag, &r);
}
