/*
 * push_rows.c: rows of `stackrec push` in ClickHouse's RowBinary format
 * (little-endian integers, strings and arrays as a LEB128 length and the
 * bytes), and the content hashes that make stacks and frames the same row
 * whatever device, process or session recorded them.
 *
 * Sites, thread names and payloads are ids in `events` too (a hash of
 * their bytes, seeded per kind), their text in a dimension table.
 *
 * A frame's id hashes what names it (function, file, line, column, image
 * path, offset in the image, inlined, async), never the PC, which ASLR
 * moves. A stack's id hashes its frame ids in order. An unsymbolized
 * stack (offline mode before `stackrec symbolize`) has only PCs: each is a
 * frame of its own with offset = PC, so such stacks only match within
 * one process.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_hex.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/breakdown.h"
#include "tools/stackrec/push.h"

/* ---- buffers and RowBinary values ---- */

int stkr__buf_put(stkr__buf *b, const void *p, size_t n) {
  if (b->len + n < b->len)
    return -ENOMEM;
  if (b->len + n > b->cap) {
    void *q = b->p;
    int err = stkr_grow(&q, &b->cap, b->len + n, 1);
    if (err != 0)
      return err;
    b->p = q;
  }
  if (n > 0)
    memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

void stkr__buf_free(stkr__buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* Little-endian on every host we build for (x86_64, aarch64); spelled out
 * byte by byte so that it stays right elsewhere. */
static int put_le(stkr__buf *b, uint64_t v, size_t n) {
  uint8_t t[8];
  for (size_t i = 0; i < n; i++)
    t[i] = (uint8_t)(v >> (8 * i));
  return stkr__buf_put(b, t, n);
}

int stkr__rb_u8(stkr__buf *b, uint8_t v) { return stkr__buf_put(b, &v, 1); }
int stkr__rb_u16(stkr__buf *b, uint16_t v) { return put_le(b, v, 2); }
int stkr__rb_u32(stkr__buf *b, uint32_t v) { return put_le(b, v, 4); }
int stkr__rb_u64(stkr__buf *b, uint64_t v) { return put_le(b, v, 8); }

size_t stkr__leb128(uint8_t out[10], uint64_t v) {
  size_t n = 0;
  do {
    out[n] = (uint8_t)(v & 0x7F);
    v >>= 7;
    if (v != 0)
      out[n] |= 0x80;
    n++;
  } while (v != 0);
  return n;
}

int stkr__rb_varint(stkr__buf *b, uint64_t v) {
  uint8_t t[10];
  return stkr__buf_put(b, t, stkr__leb128(t, v));
}

int stkr__rb_bytes(stkr__buf *b, const void *p, size_t n) {
  int err = stkr__rb_varint(b, n);
  return err != 0 ? err : stkr__buf_put(b, p, n);
}

int stkr__rb_str(stkr__buf *b, const char *s) {
  return stkr__rb_bytes(b, s ? s : "", s ? strlen(s) : 0);
}

/* ---- the dimension rows ---- */

struct stkr__dims {
  stkr_map stacks; /* mix of (process, session, stack id) -> hash */
  stkr_map seen;   /* content hashes whose rows were queued */
  stkr__buf rows[STKR_DIM_KINDS]; /* rows not sent yet, by kind */
  stkr_frame *pcf;          /* frames made from PCs (unsymbolized) */
  size_t pcf_cap;
};

int stkr__dims_create(stkr__dims **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void stkr__dims_free(stkr__dims *m) {
  if (m == NULL)
    return;
  stkr_map_free(&m->stacks);
  stkr_map_free(&m->seen);
  free(m->pcf);
  for (int k = 0; k < STKR_DIM_KINDS; k++)
    stkr__buf_free(&m->rows[k]);
  free(m);
}

const char *const stkr__dim_table[STKR_DIM_KINDS] = {
    "site_names", "threads", "payloads", "stacks", "frames"};
const char *const stkr__dim_cols[STKR_DIM_KINDS] = {
    stkr__cols_site_names, stkr__cols_threads, stkr__cols_payloads,
    stkr__cols_stacks, stkr__cols_frames};

void stkr__dims_take(stkr__dims *m, stkr__buf out[STKR_DIM_KINDS]) {
  for (int k = 0; k < STKR_DIM_KINDS; k++) {
    stkr__buf t = m->rows[k];
    m->rows[k] = out[k];
    m->rows[k].len = 0;
    out[k] = t;
  }
}

/* @return 1 if h was in the seen set, 0 if added, -ENOMEM. h != 0. */
static int seen_add(stkr__dims *m, uint64_t h) {
  if (stkr_map_find(&m->seen, h) != NULL)
    return 1;
  return stkr_map_put(&m->seen, h, 1);
}

static uint64_t hash_str(uint64_t h, const char *s) {
  /* The terminating NUL separates fields; NULL differs from "". */
  return s ? stkr_hash_bytes(h, s, strlen(s) + 1) : stkr_hash_bytes(h, "\1", 1);
}

static uint64_t frame_id(const stkr_frame *f) {
  uint64_t h = STKR_HASH_SEED, v[4];
  h = hash_str(h, f->function);
  h = hash_str(h, f->file);
  h = hash_str(h, f->image);
  v[0] = f->line;
  v[1] = f->column;
  v[2] = f->image || f->function ? f->offset : f->pc;
  v[3] = (uint64_t)f->inlined | (uint64_t)f->async << 1;
  h = stkr_hash_bytes(h, v, sizeof v);
  h = stkr_mix64(h);
  return h ? h : 1;
}

static const char *base_name(const char *p) {
  const char *s = p ? strrchr(p, '/') : NULL;
  return s ? s + 1 : p;
}

static int frame_row(stkr__buf *b, const stkr__push_ids *id,
                     const stkr_frame *f, uint64_t fid) {
  int e = 0;
  e |= stkr__rb_str(b, id->build);
  e |= stkr__rb_u64(b, fid);
  e |= stkr__rb_str(b, f->function);
  e |= stkr__rb_str(b, f->file);
  e |= stkr__rb_u32(b, f->line);
  e |= stkr__rb_u32(b, f->column);
  e |= stkr__rb_str(b, f->image);
  e |= stkr__rb_str(b, base_name(f->image));
  e |= stkr__rb_u64(b, f->image ? f->offset : f->pc & ~STKR_PC_ASYNC);
  e |= stkr__rb_u8(b, f->inlined);
  e |= stkr__rb_u8(b, f->is_app);
  e |= stkr__rb_u8(b, f->async);
  return e ? -ENOMEM : 0;
}

/* The module a stack is attributed to: `report --by module`'s rule
 * (breakdown.c: the image of its innermost frame outside the system). */
static const char *stack_module(const stkr_frame *fr, size_t n) {
  stkr_agg_stack s = {.frames = fr, .n_frames = n};
  return stkr_agg_stack_module(&s);
}

/* Resolve the current event's stack: its frames (or frames made from its
 * PCs), their ids, its content hash; queue the rows of what is new. */
static int resolve(stkr__dims *m, stkr_reader *r,
                   const stkr_event_view *ev, const stkr__push_ids *id,
                   uint64_t *out) {
  const stkr_frame *fr;
  size_t n, i;
  uint64_t h = STKR_HASH_SEED, *ids;
  int err = stkr_reader_frames(r, &fr, &n);

  if (err != 0)
    return err;
  if (n == 0) { /* unsymbolized: one frame per PC */
    err = stkr_grow((void **)&m->pcf, &m->pcf_cap, ev->n_pcs,
                    sizeof *m->pcf);
    if (err != 0)
      return err;
    for (i = 0; i < ev->n_pcs; i++) {
      memset(&m->pcf[i], 0, sizeof m->pcf[i]);
      m->pcf[i].pc = ev->pcs[i] & ~STKR_PC_ASYNC;
      m->pcf[i].offset = m->pcf[i].pc;
      m->pcf[i].async = (ev->pcs[i] & STKR_PC_ASYNC) != 0;
    }
    fr = m->pcf;
    n = ev->n_pcs;
  }
  if (n == 0) {
    *out = 0;
    return 0;
  }
  ids = malloc(n * sizeof *ids);
  if (ids == NULL)
    return -ENOMEM;
  for (i = 0; i < n; i++) {
    ids[i] = frame_id(&fr[i]);
    h = stkr_hash_bytes(h, &ids[i], sizeof ids[i]);
  }
  h = stkr_mix64(h ^ n);
  *out = h = h ? h : 1;
  /* Stack and frame ids share one seen set: a collision between the two
   * kinds would at worst skip one row, with odds of 2^-64. */
  err = seen_add(m, h);
  if (err == 0) {
    char text[1024];
    int e = 0;
    e |= stkr__rb_str(&m->rows[STKR_DIM_STACK], id->build);
    e |= stkr__rb_u64(&m->rows[STKR_DIM_STACK], h);
    e |= stkr__rb_u16(&m->rows[STKR_DIM_STACK], (uint16_t)(n > 65535 ? 65535 : n));
    e |= stkr__rb_varint(&m->rows[STKR_DIM_STACK], n);
    for (i = 0; i < n; i++)
      e |= stkr__rb_u64(&m->rows[STKR_DIM_STACK], ids[i]);
    e |= stkr__rb_varint(&m->rows[STKR_DIM_STACK], n);
    for (i = 0; i < n; i++)
      e |= stkr__rb_str(&m->rows[STKR_DIM_STACK], stkr_agg_frame_text(&fr[i], STKR_AGG_BY_LINE,
                                                       text, sizeof text));
    e |= stkr__rb_str(&m->rows[STKR_DIM_STACK], stack_module(fr, n));
    for (i = 0; i < n && e == 0; i++) {
      int s = seen_add(m, ids[i]);
      if (s < 0)
        e = 1;
      else if (s == 0)
        e |= frame_row(&m->rows[STKR_DIM_FRAME], id, &fr[i], ids[i]);
    }
    err = e ? -ENOMEM : 0;
  } else if (err == 1) {
    err = 0;
  }
  free(ids);
  return err;
}

int stkr__dims_stack(stkr__dims *m, stkr_reader *r,
                       const stkr_event_view *ev, const stkr__push_ids *id,
                       uint64_t *hash) {
  uint64_t key, *known;
  int err;

  if (ev->stack_undefined || ev->n_pcs == 0) {
    *hash = 0;
    return 0;
  }
  /* Stack ids restart in each session of a process. */
  key = stkr_mix64(((uint64_t)ev->process << 40) ^
                   ((uint64_t)ev->proc->sessions << 32) ^ ev->stack_id) | 1;
  if ((known = stkr_map_find(&m->stacks, key)) != NULL) {
    *hash = *known;
    return 0;
  }
  if ((err = resolve(m, r, ev, id, hash)) != 0)
    return err;
  return stkr_map_put(&m->stacks, key, *hash);
}

/* Seeds of the kinds' hashes: the same bytes as a site and as a thread
 * name are two ids (they share the seen set). */
static const uint64_t k_kind_seed[] = {0x5173A11D5173A11Dull,
                                       0x7E4EAD5A7E4EAD5Aull,
                                       0x9A7104D59A7104D5ull};

int stkr__dims_name(stkr__dims *m, stkr__dim_kind kind, const void *p,
                    size_t len, bool truncated, uint64_t *id) {
  uint64_t h;
  stkr__buf *b;
  int s, e;

  if (len == 0 && !truncated) {
    *id = 0;
    return 0;
  }
  h = stkr_hash_bytes(k_kind_seed[kind] ^ truncated, p, len);
  h = stkr_mix64(h);
  *id = h = h ? h : 1;
  if ((s = seen_add(m, h)) != 0)
    return s < 0 ? s : 0;
  b = &m->rows[kind];
  e = stkr__rb_u64(b, h);
  e |= stkr__rb_bytes(b, p, len);
  if (kind == STKR_DIM_PAYLOAD)
    e |= stkr__rb_u8(b, truncated);
  return e ? -ENOMEM : 0;
}

uint64_t stkr__rec_id(const char *recording) {
  uint64_t h = stkr_mix64(stkr_hash_bytes(STKR_HASH_SEED, recording,
                                          strlen(recording)));
  return h ? h : 1;
}

/* ---- summary rows ---- */

static int ids_row(stkr__buf *b, const stkr__push_ids *id, uint32_t pid) {
  int e = stkr__rb_str(b, id->build);
  e |= stkr__rb_str(b, id->device);
  e |= stkr__rb_str(b, id->recording);
  e |= stkr__rb_u32(b, pid);
  return e ? -ENOMEM : 0;
}

static int hex(stkr__buf *b, const uint8_t *p, size_t n) {
  char t[2 * 64 + 1];
  (void)stkr_hex(t, sizeof t, p, n); /* 64 bytes at most */
  return stkr__rb_str(b, t);
}

static int process_rows(const stkr_reader *r, size_t i,
                        const stkr__push_ids *id, bool procs_v1,
                        stkr__buf *images,
                        stkr__buf *sites, stkr__buf *procs,
                        stkr__buf *drops) {
  const stkr_process_info *p = stkr_reader_process(r, i);
  const stkr_image_info *im;
  const stkr_site_info *si;
  size_t n, k;
  int e = 0;
  const struct { const char *reason; uint64_t n; } dr[] = {
      {"ring_full", p->drops_ring_full}, {"reentrant", p->drops_reentrant},
      {"other", p->drops_other}, {"write_error", p->drops_write_error},
      {"exit", p->drops_exit}};

  if (stkr_reader_images(r, i, &im, &n) == 0)
    for (k = 0; k < n; k++) {
      e |= ids_row(images, id, p->pid);
      e |= stkr__rb_str(images, im[k].path);
      e |= hex(images, im[k].build_id, im[k].build_id_len);
      e |= stkr__rb_u64(images, im[k].load_address);
      e |= stkr__rb_u64(images, im[k].text_start);
      e |= stkr__rb_u64(images, im[k].text_end);
    }
  if (stkr_reader_sites(r, i, &si, &n) == 0)
    for (k = 0; k < n; k++) {
      e |= ids_row(sites, id, p->pid);
      e |= stkr__rb_str(sites, si[k].name);
      e |= stkr__rb_u64(sites, si[k].events);
    }
  e |= ids_row(procs, id, p->pid);
  e |= stkr__rb_u32(procs, p->parent_pid);
  e |= stkr__rb_str(procs, p->process_name);
  e |= stkr__rb_str(procs, p->arch);
  e |= stkr__rb_u64(procs, p->start_wall_ns);
  e |= stkr__rb_u64(procs, p->events);
  e |= stkr__rb_u64(procs, p->attempted);
  e |= stkr__rb_u64(procs, p->drops);
  e |= stkr__rb_u32(procs, p->sessions);
  e |= stkr__rb_u8(procs, p->clean_end);
  e |= stkr__rb_u8(procs, p->incomplete);
  e |= stkr__rb_u64(procs, p->damaged_batches);
  e |= stkr__rb_u64(procs, p->unaccounted);
  if (!procs_v1)
    e |= stkr__rb_u32(procs, p->os_parent_pid);
  for (k = 0; k < sizeof dr / sizeof dr[0]; k++)
    if (dr[k].n > 0) {
      e |= ids_row(drops, id, p->pid);
      e |= stkr__rb_str(drops, dr[k].reason);
      e |= stkr__rb_u64(drops, dr[k].n);
    }
  return e ? -ENOMEM : 0;
}

int stkr__rows_summary(const stkr_reader *r, const stkr__push_ids *id,
                       bool procs_v1,
                       stkr__buf *images, stkr__buf *sites,
                       stkr__buf *procs, stkr__buf *drops) {
  size_t i, n = stkr_reader_process_count(r);
  for (i = 0; i < n; i++) {
    int err = process_rows(r, i, id, procs_v1, images, sites, procs, drops);
    if (err != 0)
      return err;
  }
  return 0;
}

void stkr__push_names_of(const struct stkr__push_opts *o, const stkr_reader *r,
                         size_t proc, stkr__push_names *out) {
  const stkr_process_info *pi = r ? stkr_reader_process(r, proc) : NULL;
  const stkr_image_info *im;
  size_t n = 0;
  uint64_t h = STKR_HASH_SEED, v[4] = {0};

  if (o->build != NULL) {
    snprintf(out->build, sizeof out->build, "%s", o->build);
  } else if (pi != NULL && stkr_reader_images(r, proc, &im, &n) == 0 &&
             n > 0 && im[0].build_id_len > 0) {
    (void)stkr_hex(out->build, sizeof out->build, im[0].build_id,
                   im[0].build_id_len > 64 ? 64 : im[0].build_id_len);
  } else {
    snprintf(out->build, sizeof out->build, "unknown");
  }
  if (o->device != NULL)
    snprintf(out->device, sizeof out->device, "%s", o->device);
  else if (gethostname(out->device, sizeof out->device - 1) != 0)
    snprintf(out->device, sizeof out->device, "unknown");
  if (pi != NULL) {
    v[0] = pi->pid;
    v[1] = pi->session_id;
    v[2] = pi->start_wall_ns;
    v[3] = pi->start_mono_ns;
  }
  /* Its identity: its first process's session, whoever pushes it (a
   * re-push from another machine is the same recording; review, session
   * 39: the pusher's host name made it "another"). The default id hashes
   * device and build too, as it always did. */
  snprintf(out->identity, sizeof out->identity, "%016" PRIx64,
           stkr_mix64(stkr_hash_bytes(STKR_HASH_SEED, v, sizeof v)));
  h = stkr_hash_bytes(h, out->device, strlen(out->device) + 1);
  h = stkr_hash_bytes(h, out->build, strlen(out->build) + 1);
  h = stkr_hash_bytes(h, v, sizeof v);
  if (o->recording != NULL)
    snprintf(out->recording, sizeof out->recording, "%s", o->recording);
  else
    snprintf(out->recording, sizeof out->recording, "%016" PRIx64,
             stkr_mix64(h));
}
