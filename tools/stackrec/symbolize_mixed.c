/*
 * symbolize_mixed.c: resolving the bare stacks of a segment that already
 * has frames (symbolize_mixed.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/symbolize_mixed.h"

bool stkr__sym_has_frames(const Stackrec__Batch *b) {
  if (b->n_frames || b->n_strings) return true;
  for (size_t i = 0; i < b->n_stacks; i++)
    if (b->stacks[i]->n_frames) return true;
  return false;
}

bool stkr__sym_has_bare_stack(const Stackrec__Batch *b) {
  for (size_t i = 0; i < b->n_stacks; i++)
    if (b->stacks[i]->n_pcs > 0 && b->stacks[i]->n_frames == 0) return true;
  return false;
}

bool stkr__sym_inproc(const Stackrec__Batch *b) {
  return b->header != NULL && b->header->config != NULL &&
         b->header->config->symbolize != NULL &&
         strcmp(b->header->config->symbolize, "inproc") == 0;
}

static uint32_t moved(const stkr__sym_moved *m, uint32_t id) {
  uint32_t base = m->base ? m->base : STKR__SYM_MIXED_ID_BASE;
  return id == 0 ? 0 : id + base; /* 0: none */
}

int stkr__sym_move_defs(const stkr__symdefs *d, stkr__sym_moved *m) {
  size_t i;

  m->n_strings = d->n_strings;
  m->n_frames = d->n_frames;
  m->strings = calloc(d->n_strings + 1, sizeof *m->strings);
  m->string_ptrs = calloc(d->n_strings + 1, sizeof *m->string_ptrs);
  m->frames = calloc(d->n_frames + 1, sizeof *m->frames);
  m->frame_ptrs = calloc(d->n_frames + 1, sizeof *m->frame_ptrs);
  if (!m->strings || !m->string_ptrs || !m->frames || !m->frame_ptrs) {
    stkr__sym_moved_free(m);
    return -ENOMEM;
  }
  for (i = 0; i < d->n_strings; i++) {
    m->strings[i] = *d->strings[i]; /* value: the cache's, borrowed */
    m->strings[i].id = moved(m, d->strings[i]->id);
    m->string_ptrs[i] = &m->strings[i];
  }
  for (i = 0; i < d->n_frames; i++) {
    Stackrec__FrameDef *f = &m->frames[i];
    *f = *d->frames[i];
    f->id = moved(m, f->id);
    f->function = moved(m, f->function);
    f->file = moved(m, f->file);
    f->image = moved(m, f->image);
    m->frame_ptrs[i] = f;
  }
  return 0;
}

/* Keep v (malloc'd) in m, freed with it. @return 0 or -ENOMEM (v freed). */
static int keep_frames(stkr__sym_moved *m, uint32_t *v) {
  if (stkr_grow((void **)&m->stack_frames, &m->cap_stacks, m->n_stacks + 1,
                sizeof *m->stack_frames) != 0) {
    free(v);
    return -ENOMEM;
  }
  m->stack_frames[m->n_stacks++] = v;
  return 0;
}

uint32_t *stkr__sym_move_frames(stkr__sym_moved *m, const uint32_t *fr,
                                uint32_t n) {
  uint32_t *v;

  if ((v = malloc((n ? n : 1) * sizeof *v)) == NULL)
    return NULL;
  for (uint32_t i = 0; i < n; i++)
    v[i] = moved(m, fr[i]);
  return keep_frames(m, v) == 0 ? v : NULL;
}

/* ---- frames written as image+offset, resolved again ---------------------- */

/* stkr__sym_scan.frames values: no function; inlined; a function but no
 * file (named from a symbol table: .dynsym of a stripped library, whose
 * debug file gives file:line and inlined calls; QA, session 40). */
enum { F_UNNAMED = 1, F_INLINED = 2, F_NOFILE = 4 };

int stkr__sym_scan_batch(stkr__sym_scan *s, const Stackrec__Batch *b) {
  size_t i;

  for (i = 0; i < b->n_strings; i++)
    if (b->strings[i]->id > s->max_id) s->max_id = b->strings[i]->id;
  for (i = 0; i < b->n_frames; i++) {
    const Stackrec__FrameDef *f = b->frames[i];
    if (f->id > s->max_id) s->max_id = f->id;
    if (stkr_map_put(&s->frames, f->id,
                     (f->function == 0 ? F_UNNAMED
                      : f->file == 0   ? F_NOFILE
                                       : 0) |
                         (f->inlined ? F_INLINED : 0)) != 0)
      return -ENOMEM;
  }
  for (i = 0; i < b->n_stacks && !s->unnamed_stacks; i++)
    s->unnamed_stacks = b->stacks[i]->n_frames != 0 &&
                        stkr__sym_stack_unnamed(s, b->stacks[i]);
  return 0;
}

/* A frame id's flags; an id the file does not define: a named frame (its
 * definition is elsewhere, or missing: left alone either way). */
static uint64_t frame_flags(const stkr__sym_scan *s, uint32_t id) {
  const uint64_t *v = stkr_map_find(&s->frames, id);
  return v ? *v : 0;
}

bool stkr__sym_stack_unnamed(const stkr__sym_scan *s,
                             const Stackrec__StackDef *d) {
  for (size_t i = 0; i < d->n_frames; i++) {
    uint64_t f = frame_flags(s, d->frames[i]);
    if (!(f & F_INLINED) && (f & (F_UNNAMED | F_NOFILE))) return true;
  }
  return false;
}

void stkr__sym_scan_reset(stkr__sym_scan *s) {
  stkr_map_clear(&s->frames);
  s->unnamed_stacks = false;
}

void stkr__sym_scan_free(stkr__sym_scan *s) {
  stkr_map_free(&s->frames);
  memset(s, 0, sizeof *s);
}

int stkr__sym_rename_stack(stkr__symc *c, const stkr__sym_scan *s,
                           const uint64_t *pcs, Stackrec__StackDef *d,
                           uint32_t epoch, stkr__symdefs *defs,
                           stkr__sym_moved *m) {
  size_t cap = d->n_frames + d->n_pcs * STKR__SYM_MAX_INLINE, n = 0, k = 0;
  uint32_t *v = malloc(cap * sizeof *v);
  int named = 0, err = 0;

  if (v == NULL) return -ENOMEM;
  /* The frames of pcs[i]: its inlined calls, then its function (the one
   * frame of an image+offset PC). */
  for (size_t i = 0; i < d->n_pcs; i++) {
    size_t g = k;
    const uint32_t *fr;
    uint32_t nf;

    while (k < d->n_frames && (frame_flags(s, d->frames[k]) & F_INLINED)) k++;
    if (k++ >= d->n_frames) break; /* not one function a PC: left alone */
    const uint64_t old = frame_flags(s, d->frames[k - 1]);
    if (old & (F_UNNAMED | F_NOFILE)) {
      if ((err = stkr__symc_stack(c, &pcs[i], 1, &fr, &nf)) != 0) break;
      /* Taken when it names what the old frame did not: the function of
       * an image+offset frame, the file of a symbol table's. */
      if (nf != 0 && stkr__symc_frame_named(c, fr[nf - 1]) &&
          ((old & F_UNNAMED) || stkr__symc_frame_has_file(c, fr[nf - 1]))) {
        if ((err = stkr__symc_emit(c, fr, nf, epoch, defs)) != 0) break;
        for (uint32_t j = 0; j < nf; j++) v[n++] = moved(m, fr[j]);
        named++;
        continue;
      }
    }
    memcpy(v + n, d->frames + g, (k - g) * sizeof *v);
    n += k - g;
  }
  if (err != 0 || named == 0 || k != d->n_frames) {
    free(v);
    return err;
  }
  if ((err = keep_frames(m, v)) != 0) return err;
  d->frames = v;
  d->n_frames = n;
  return named;
}

void stkr__sym_moved_free(stkr__sym_moved *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n_stacks; i++)
    free(m->stack_frames[i]);
  STKR_FREE_ALL(m->stack_frames, m->strings, m->string_ptrs, m->frames,
                m->frame_ptrs);
  memset(m, 0, sizeof *m);
}

int stkr__sym_encode_mixed(Stackrec__Batch *b, const stkr__symdefs *defs,
                           stkr__sym_moved *m, ZSTD_CCtx *cctx,
                           stkr_fmt_buf *out) {
  size_t ns = b->n_strings, nf = b->n_frames;
  Stackrec__StringDef **os = b->strings, **sp;
  Stackrec__FrameDef **of = b->frames, **fp;
  int err = stkr__sym_move_defs(defs, m);

  if (err != 0)
    return err;
  sp = malloc((ns + m->n_strings + 1) * sizeof *sp);
  fp = malloc((nf + m->n_frames + 1) * sizeof *fp);
  if (sp == NULL || fp == NULL) {
    free(sp);
    free(fp);
    return -ENOMEM;
  }
  /* The batch's own definitions first; ours go after them. */
  if (ns) memcpy(sp, os, ns * sizeof *sp); /* (os may be NULL then) */
  if (m->n_strings) memcpy(sp + ns, m->string_ptrs, m->n_strings * sizeof *sp);
  if (nf) memcpy(fp, of, nf * sizeof *fp);
  if (m->n_frames) memcpy(fp + nf, m->frame_ptrs, m->n_frames * sizeof *fp);
  b->strings = sp;
  b->n_strings = ns + m->n_strings;
  b->frames = fp;
  b->n_frames = nf + m->n_frames;
  err = stkr_fmt_encode_batch(b, cctx, 3, out);
  b->strings = os; /* protobuf-c's own again, for free_unpacked */
  b->n_strings = ns;
  b->frames = of;
  b->n_frames = nf;
  free(sp);
  free(fp);
  return err;
}
