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

static uint32_t moved(uint32_t id) {
  return id == 0 ? 0 : id + STKR__SYM_MIXED_ID_BASE; /* 0: none */
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
    m->strings[i].id = moved(d->strings[i]->id);
    m->string_ptrs[i] = &m->strings[i];
  }
  for (i = 0; i < d->n_frames; i++) {
    Stackrec__FrameDef *f = &m->frames[i];
    *f = *d->frames[i];
    f->id = moved(f->id);
    f->function = moved(f->function);
    f->file = moved(f->file);
    f->image = moved(f->image);
    m->frame_ptrs[i] = f;
  }
  return 0;
}

uint32_t *stkr__sym_move_frames(stkr__sym_moved *m, const uint32_t *fr,
                                uint32_t n) {
  uint32_t *v;

  if (stkr_grow((void **)&m->stack_frames, &m->cap_stacks, m->n_stacks + 1,
                sizeof *m->stack_frames) != 0 ||
      (v = malloc((n ? n : 1) * sizeof *v)) == NULL)
    return NULL;
  for (uint32_t i = 0; i < n; i++)
    v[i] = moved(fr[i]);
  m->stack_frames[m->n_stacks++] = v;
  return v;
}

void stkr__sym_moved_free(stkr__sym_moved *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n_stacks; i++)
    free(m->stack_frames[i]);
  free(m->stack_frames);
  free(m->strings);
  free(m->string_ptrs);
  free(m->frames);
  free(m->frame_ptrs);
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
