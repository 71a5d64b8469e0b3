/*
 * agg_learn.h: the frames a recording's symbolized stacks gave each code
 * address, for its unsymbolized stacks of the same process (agg.c).
 *
 * Why: a process recording in-process (symbolized) that is killed leaves
 * events in its ring files, and recovery writes them with raw PCs only.
 * Read back, one call path showed as two stacks (its frames, and
 * image+offset), and `diff` against a clean run reported a new path (QA,
 * session 22). Most such PCs were resolved already in the process's own
 * earlier batches, which the reader delivers first: the same image and
 * offset in the same process means the same code.
 *
 * Keyed by (process index, image path, offset in it, async), never by the
 * raw PC: an exec'd image of the same pid maps other code at the same
 * addresses, but not the same file at the same offset. Strings in frames
 * are interned (strtab.h). Private to //tools:stackrec_lib; no thread-
 * safety (the aggregation's one thread).
 */
#ifndef STKR_AGG_LEARN_H
#define STKR_AGG_LEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h"

typedef struct stkr__learn_span {
  size_t process;
  const char *image;  /* interned */
  uint64_t offset;
  bool async;
  uint32_t start, count; /* frames[start, start + count) */
} stkr__learn_span;

typedef struct stkr__learned {
  stkr_index ix;              /* key hash -> index into spans */
  stkr__learn_span *spans;
  size_t n_spans, cap_spans;
  stkr_frame *frames;         /* copies, strings interned */
  size_t n_frames, cap_frames;
} stkr__learned;

/* Learn the frames of one symbolized stack of process (f[0..n), as the
 * reader gives them: a PC's inlined frames, then its own). PCs known
 * already, or in no image, are skipped. @return 0 or -ENOMEM. */
int stkr__learn_frames(stkr__learned *l, size_t process, const stkr_frame *f,
                       size_t n);

/* The frames learned for (process, image, offset, async), their number in
 * *count; NULL when none (or image NULL). Valid until the next learn. */
const stkr_frame *stkr__learned_find(const stkr__learned *l, size_t process,
                                     const char *image, uint64_t offset,
                                     bool async, size_t *count);

void stkr__learned_free(stkr__learned *l);

#endif
