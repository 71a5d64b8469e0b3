/*
 * symbolize_mixed.h: `stackrec symbolize` on a segment that already has
 * frames for some stacks but not for others (an in-process recording
 * whose last stacks were first seen as it ended: the worker does not
 * start a resolution then, flush/drain_pass.c). Split out of symbolize.c,
 * its only user.
 *
 * Such a file was copied as it was ("already had frames"), so those
 * stacks stayed image+offset for good (QA, session 27). Now only they are
 * resolved; the StringDefs and FrameDefs added for them take ids from
 * STKR__SYM_MIXED_ID_BASE up, which the recorder's own ids (counted from
 * 1 per session, one per distinct frame or string) never reach, so the
 * two cannot clash in the session's id space (the reader keeps a
 * session's definitions across its segments).
 *
 * Thread-safety: none.
 */
#ifndef STKR_SYMBOLIZE_MIXED_H
#define STKR_SYMBOLIZE_MIXED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

#include "common/stkr_map.h"
#include "proto/stackrec.pb-c.h"
#include "proto/stkr_format.h"
#include "symbolize/symbolize.h"

#define STKR__SYM_MIXED_ID_BASE 0x80000000u
/* Ids a recording uses up to which another run's moved ids still leave
 * room for ours above them (stkr__sym_moved.base); past it no frame is
 * resolved again (a hostile file's ids near 2^32). */
#define STKR__SYM_MIXED_ID_ROOM 0xE0000000u

/* @return whether batch b defines frames (StringDefs, FrameDefs or a
 * StackDef's frames). */
bool stkr__sym_has_frames(const Stackrec__Batch *b);

/* @return whether batch b defines a stack of PCs without its frames. */
bool stkr__sym_has_bare_stack(const Stackrec__Batch *b);

/* @return whether batch b's Header says the session symbolized in-process
 * (Config.symbolize "inproc"): its ids are the recorder's. */
bool stkr__sym_inproc(const Stackrec__Batch *b);

/* What a file's definitions say of its frames, batch by batch
 * (stkr__sym_scan_batch), and the largest id they use. Frames written as
 * image+offset (no function: the image's file was missing, or stripped,
 * where the recording was symbolized) are resolved again, with the
 * --debug-dir the recording did not have (QA, session 39: they stayed
 * image+offset for good). Zero-initialize; stkr__sym_scan_free. */
typedef struct stkr__sym_scan {
  stkr_map frames;     /* FrameDef id -> its flags (symbolize_mixed.c) */
  bool unnamed_stacks; /* a StackDef's frames leave some PC unnamed */
  uint32_t max_id;     /* the largest StringDef or FrameDef id */
} stkr__sym_scan;

/* Learn b's FrameDefs (a segment defines its frames before the stacks
 * that use them) and look at its stacks. @return 0 or -ENOMEM. */
int stkr__sym_scan_batch(stkr__sym_scan *s, const Stackrec__Batch *b);
/* Does stack d, which has frames, leave a PC without a function, or with
 * a function but no file? */
bool stkr__sym_stack_unnamed(const stkr__sym_scan *s,
                             const Stackrec__StackDef *d);
/* Forget the frames (a new file); max_id stays. */
void stkr__sym_scan_reset(stkr__sym_scan *s);
void stkr__sym_scan_free(stkr__sym_scan *s);

/* Copies, owned by the holder, of definitions moved to the mixed id
 * range. */
typedef struct stkr__sym_moved {
  /* Where the moved ids start: 0 means STKR__SYM_MIXED_ID_BASE; a run
   * that resolves frames again sets it above every id of the recording
   * (an earlier run's moved ids among them). */
  uint32_t base;
  Stackrec__StringDef *strings, **string_ptrs;
  Stackrec__FrameDef *frames, **frame_ptrs;
  size_t n_strings, n_frames;
  uint32_t **stack_frames; /* per stack moved: its frame ids, moved */
  size_t n_stacks, cap_stacks;
} stkr__sym_moved;

/* Into m: d's StringDefs and FrameDefs with their ids (and the string ids
 * a frame names) moved up by STKR__SYM_MIXED_ID_BASE.
 * @return 0 or -ENOMEM (m freed). */
int stkr__sym_move_defs(const stkr__symdefs *d, stkr__sym_moved *m);

/* A copy of the n frame ids fr moved up likewise, kept in m (freed with
 * it). @return the copy, or NULL when out of memory. */
uint32_t *stkr__sym_move_frames(stkr__sym_moved *m, const uint32_t *fr,
                                uint32_t n);

void stkr__sym_moved_free(stkr__sym_moved *m);

/* Stack d (with frames, some PC unnamed: stkr__sym_stack_unnamed), pcs
 * its PCs as the cache takes them: each unnamed PC resolved again, its
 * new frames taken (their defs into defs, in epoch; d->frames into m,
 * moved) only when they name its function; the others keep theirs.
 * @return how many PCs were named (d->frames unchanged when 0), or
 * -ENOMEM. */
int stkr__sym_rename_stack(stkr__symc *c, const stkr__sym_scan *s,
                           const uint64_t *pcs, Stackrec__StackDef *d,
                           uint32_t epoch, stkr__symdefs *defs,
                           stkr__sym_moved *m);

/* Encode batch b (level 3) into out with its own definitions and, after
 * them, defs moved into m (stkr__sym_move_defs); b is as it was after.
 * @return 0, -ENOMEM or stkr_fmt_encode_batch's error. */
int stkr__sym_encode_mixed(Stackrec__Batch *b, const stkr__symdefs *defs,
                           stkr__sym_moved *m, ZSTD_CCtx *cctx,
                           stkr_fmt_buf *out);

#endif /* STKR_SYMBOLIZE_MIXED_H */
