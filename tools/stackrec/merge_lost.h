/*
 * merge_lost.h: the batches `stackrec merge` could not copy, being damaged
 * in an input (merge.c; merge_lost.c). Each goes into OUT as a lost marker
 * (stkr_fmt_lost_marker), a frame in the output segment after the intact
 * batches copied before it, or a marker file in its segment's place when
 * none of its file's batches was intact, so that a reader of OUT reports
 * the loss as damage again (QA, session 39: a merged copy of a damaged
 * recording verified "intact, incomplete": the damage had vanished).
 * Not thread-safe: the CLI's one thread.
 */
#ifndef STKR_TOOLS_MERGE_LOST_H
#define STKR_TOOLS_MERGE_LOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct stkr__mlost_file {
  char *path;        /* the input segment, as the reader named it */
  uint32_t pending;  /* lost batches not in OUT yet */
  char *out_path;    /* its output segment, once one was made (else NULL) */
} stkr__mlost_file;

typedef struct stkr__mlost {
  stkr__mlost_file *v;
  size_t n, cap;
} stkr__mlost;

/* One more lost batch of input segment `path`. @return 0 or -ENOMEM. */
int stkr__mlost_note(stkr__mlost *l, const char *path);

/* The lost batches of `path` still pending (0 if none), now taken: the
 * caller writes them into path's output segment, out_path, which exists
 * (kept, for batches noted after it was closed). @return the count, or 0
 * with nothing taken when out of memory (they stay pending). */
uint32_t stkr__mlost_take(stkr__mlost *l, const char *path,
                          const char *out_path);

void stkr__mlost_free(stkr__mlost *l);

#endif /* STKR_TOOLS_MERGE_LOST_H */
