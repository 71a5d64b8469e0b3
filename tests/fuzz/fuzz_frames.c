/*
 * fuzz_frames.c: the segment/frame reader (proto/stkr_frames.c) on
 * arbitrary bytes: stkr__next_frame() over a whole file, as the reader
 * calls it, without batch decoding.
 *
 * Checked besides "no crash, no hang": frames come at strictly increasing
 * offsets inside the file, never more frames than bytes, every decoded
 * frame within STKR_FMT_MAX_BATCH_BYTES, and every warning names this file
 * and an offset inside it.
 */
#include "tests/fuzz/fuzz_util.h"

#include <string.h>

#include "proto/stkr__reader.h"

typedef struct fz_ctx {
  const char *path;
  size_t size;
  unsigned warnings;
} fz_ctx;

static void fz_warn(void *arg, const stkr_warning *w) {
  fz_ctx *c = arg;

  c->warnings++;
  FZ_CHECK(w->path != NULL && strcmp(w->path, c->path) == 0);
  FZ_CHECK(w->offset >= -1 && w->offset <= (int64_t)c->size);
  FZ_CHECK(strncmp(w->message, c->path, strlen(c->path)) == 0);
  FZ_CHECK(w->kind >= STKR_WARN_IGNORED_FILES &&
           w->kind <= STKR_WARN_LIVE_TAIL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  fz_ctx ctx = {path, size, 0};
  stkr_reader_opts opts = {.warn = fz_warn, .warn_arg = &ctx};
  stkr_reader *r = NULL;
  stkr__stream *st;
  uint64_t off, prev = 0;
  size_t frames = 0;
  int fd, rc;

  fd = fz_memfile(data, size, path, sizeof path);
  if (fd < 0)
    return 0;
  FZ_CHECK(stkr_reader_create(&opts, &r) == 0);
  st = calloc(1, sizeof(*st));
  FZ_CHECK(st != NULL);
  st->info.pid = 1;
  FZ_CHECK(stkr__input_open(&r->in, path) == 0);
  while ((rc = stkr__next_frame(r, st, &off)) == 1) {
    FZ_CHECK(off < size);
    FZ_CHECK(frames == 0 || off > prev);
    FZ_CHECK(r->dbuf.len > 0 && r->dbuf.len <= STKR_FMT_MAX_BATCH_BYTES);
    prev = off;
    frames++;
    FZ_CHECK(frames <= size);
  }
  FZ_CHECK(rc == 0); /* never -ENOMEM on inputs this small */
  /* Damage was both counted and reported. */
  FZ_CHECK(st->info.damaged_batches <= ctx.warnings);
  stkr__input_close(&r->in);
  stkr__stream_free(st);
  stkr_reader_free(r);
  close(fd);
  return 0;
}
