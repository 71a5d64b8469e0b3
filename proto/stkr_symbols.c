/*
 * stkr_symbols.c: the reader's side of symbolization (stackrec.proto:
 * StringDef, FrameDef, StackDef.frames): interned strings and frames per
 * session, each stack's frame list checked against its PCs, and the
 * frames of the current event (stkr_event_view.frames).
 *
 * A stack whose frames do not fit its PCs (an undefined frame, or not
 * exactly one frame that is not inlined per PC) keeps its PCs and loses
 * its frames, with one warning per process: frames are an annotation,
 * never a reason to drop an event.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stkr__reader.h"

static void stkr__bad_frames(stkr_reader *r, stkr__stream *st,
                             const char *path, uint64_t off, const char *why,
                             uint32_t id) {
  stkr__warn_once(r, st, STKR__WARNED_FRAMES, STKR_WARN_INCONSISTENT, path,
                  (int64_t)off,
                  "stack %u: %s; its PCs are kept without frames (further "
                  "frame problems not reported)",
                  (unsigned)id, why);
}

static const char *stkr__string(const stkr__stream *st, uint32_t id,
                                bool *missing) {
  uint32_t idx;

  if (id == 0)
    return NULL;
  if (stkr__idmap_get(&st->string_map, id, &idx))
    return st->strings[idx];
  *missing = true;
  return NULL;
}

int stkr__apply_string(stkr_reader *r, stkr__stream *st,
                              const Stackrec__StringDef *d, const char *path,
                              uint64_t off) {
  uint32_t idx;
  char *v;

  if (d->id == 0) {
    stkr__bad_id(r, st, path, off, "string");
    return 0;
  }
  if (stkr__idmap_get(&st->string_map, d->id, &idx)) {
    if (strcmp(st->strings[idx], d->value ? d->value : "") != 0)
      stkr__conflict(r, st, path, off, "string", d->id);
    return 0;
  }
  if (stkr__grow_indexed(&st->strings, &st->cap_strings, st->n_strings,
                         sizeof(*st->strings)) != 0 ||
      (v = stkr__strdup0(d->value)) == NULL)
    return -ENOMEM;
  if (stkr_map_put(&st->string_map, d->id, (uint32_t)st->n_strings) != 0) {
    free(v);
    return -ENOMEM;
  }
  st->strings[st->n_strings++] = v;
  return 0;
}

int stkr__apply_frame(stkr_reader *r, stkr__stream *st,
                             const Stackrec__FrameDef *d, const char *path,
                             uint64_t off) {
  stkr_frame f;
  uint32_t idx;
  bool missing = false;

  if (d->id == 0) {
    stkr__bad_id(r, st, path, off, "frame");
    return 0;
  }
  memset(&f, 0, sizeof(f));
  f.function = stkr__string(st, d->function, &missing);
  f.file = stkr__string(st, d->file, &missing);
  f.image = stkr__string(st, d->image, &missing);
  f.line = d->line;
  f.column = d->column;
  f.offset = d->offset;
  f.inlined = d->inlined;
  f.is_app = d->app;
  f.async = d->async;
  if (missing)
    stkr__warn_once(r, st, STKR__WARNED_FRAMES, STKR_WARN_INCONSISTENT, path,
                    (int64_t)off,
                    "frame %u refers to an undefined string; shown as "
                    "unknown (further frame problems not reported)",
                    (unsigned)d->id);
  if (stkr__idmap_get(&st->frame_map, d->id, &idx)) {
    const stkr_frame *o = &st->frames[idx];
    if (o->line != f.line || o->column != f.column || o->offset != f.offset ||
        o->inlined != f.inlined || o->async != f.async ||
        o->function != f.function ||
        o->file != f.file || o->image != f.image)
      stkr__conflict(r, st, path, off, "frame", d->id);
    return 0;
  }
  if (stkr__grow_indexed(&st->frames, &st->cap_frames, st->n_frames,
                         sizeof(*st->frames)) != 0 ||
      stkr__grow(&st->frame_ids, &st->cap_frame_ids, st->n_frames + 1,
                 sizeof(*st->frame_ids)) != 0 ||
      stkr_map_put(&st->frame_map, d->id, (uint32_t)st->n_frames) != 0)
    return -ENOMEM;
  st->frame_ids[st->n_frames] = d->id;
  st->frames[st->n_frames++] = f;
  return 0;
}

/* Resolve a StackDef's frame ids to frame indexes. @return 0 (s->frames
 * set, or left NULL after a warning when they do not fit the PCs), or
 * -ENOMEM. */
int stkr__stack_frames(stkr_reader *r, stkr__stream *st,
                              stkr__rd_stack *s, const Stackrec__StackDef *d,
                              const char *path, uint64_t off) {
  size_t i, real = 0;
  uint32_t idx;

  if (d->n_frames == 0)
    return 0;
  s->frames = malloc(d->n_frames * sizeof(*s->frames));
  if (s->frames == NULL)
    return -ENOMEM;
  for (i = 0; i < d->n_frames; i++) {
    if (!stkr__idmap_get(&st->frame_map, d->frames[i], &idx)) {
      stkr__bad_frames(r, st, path, off, "refers to an undefined frame",
                       d->id);
      goto drop;
    }
    s->frames[i] = idx;
    if (!st->frames[idx].inlined)
      real++;
  }
  /* Exactly one frame that is not inlined per PC, and the last frame
   * closes the last PC's group. */
  if (real != d->n_pcs || st->frames[s->frames[d->n_frames - 1]].inlined) {
    stkr__bad_frames(r, st, path, off, "frames do not match its PCs", d->id);
    goto drop;
  }
  s->n_frames = d->n_frames;
  return 0;
drop:
  free(s->frames);
  s->frames = NULL;
  return 0;
}


/* r->ev_frames = the frames of stack s, each with its PC. */
int stkr__event_frames(stkr_reader *r, const stkr__stream *st,
                              const stkr__rd_stack *s) {
  size_t i, pc = 0;

  if (r->ev_frames_of == s)
    return 0;
  if (stkr__grow(&r->ev_frames, &r->ev_frames_cap, s->n_frames,
                 sizeof(*r->ev_frames)) != 0)
    return -ENOMEM;
  for (i = 0; i < s->n_frames; i++) {
    r->ev_frames[i] = st->frames[s->frames[i]];
    r->ev_frames[i].pc = s->pcs[pc]; /* checked: pc < n_pcs */
    if (!r->ev_frames[i].inlined)
      pc++;
  }
  r->ev_frames_of = s;
  return 0;
}

int stkr_reader_frames(stkr_reader *r, const stkr_frame **frames, size_t *n) {
  const stkr__rd_stack *s;

  if (r == NULL || frames == NULL || n == NULL || r->ev_stream == NULL)
    return -EINVAL;
  s = r->ev_stack;
  *frames = NULL;
  *n = 0;
  if (s == NULL || s->n_frames == 0)
    return 0;
  if (stkr__event_frames(r, r->ev_stream, s) != 0)
    return -ENOMEM;
  *frames = r->ev_frames;
  *n = s->n_frames;
  return 0;
}
