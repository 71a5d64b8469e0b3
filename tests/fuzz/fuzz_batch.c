/*
 * fuzz_batch.c: the batch decoder (proto/stkr_batch.c) on arbitrary
 * decompressed bytes: stkr__batch_load() + stkr__batch_event() over a
 * sequence of batches of one stream, as the reader calls them after a frame
 * decoded. The input is split at FZ_BATCH_SEP into batches, so definitions,
 * sessions and counters carry over from batch to batch as in a real file.
 *
 * Checked besides "no crash, no hang": every event of an accepted batch is
 * delivered; payloads lie inside the batch's payload bytes; an event
 * without a stack has no PCs; names are never NULL; the per-process
 * summary adds up (events, drops).
 */
#include "tests/fuzz/fuzz_util.h"

#include <string.h>

#include "proto/stkr__reader.h"

/* Between two batches of one input (see tests/fuzz/README.md). */
#define FZ_BATCH_SEP "#STKRB#\n"

static void fz_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  FZ_CHECK(w->path != NULL && w->message != NULL);
  FZ_CHECK(strcmp(w->path, "fuzz-batch") == 0);
}

static void fz_batch(stkr_reader *r, stkr__stream *st, const uint8_t *p,
                     size_t n, uint64_t off, uint64_t *delivered) {
  const Stackrec__Events *e;
  int rc;

  if (n > r->dbuf.cap) {
    uint8_t *q = realloc(r->dbuf.data, n);
    FZ_CHECK(q != NULL);
    r->dbuf.data = q;
    r->dbuf.cap = n;
  }
  if (n)
    memcpy(r->dbuf.data, p, n);
  r->dbuf.len = n;
  rc = stkr__batch_load(r, st, "fuzz-batch", off);
  FZ_CHECK(rc == STKR__BATCH_OK || rc == STKR__BATCH_SKIPPED ||
           rc == STKR__BATCH_UNSUPPORTED);
  if (rc != STKR__BATCH_OK)
    return;
  e = r->batch->events;
  FZ_CHECK(r->ev_count == (e ? e->n_ts_delta_ns : 0));
  while (r->ev_idx < r->ev_count) {
    stkr_event_view ev;
    size_t before = r->ev_idx;

    FZ_CHECK(stkr__batch_event(r, st, 0, &ev) == 0);
    FZ_CHECK(r->ev_idx == before + 1);
    FZ_CHECK(ev.site != NULL && ev.thread_name != NULL);
    FZ_CHECK((ev.n_pcs == 0) == (ev.pcs == NULL));
    FZ_CHECK((ev.payload_len == 0) == (ev.payload == NULL));
    if (ev.payload_len) {
      FZ_CHECK(ev.payload >= e->payload_data.data);
      FZ_CHECK(ev.payload + ev.payload_len <=
               e->payload_data.data + e->payload_data.len);
    }
    FZ_CHECK(ev.proc == &st->info);
    (*delivered)++;
  }
  stkr__batch_release(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stkr_reader_opts opts = {.warn = fz_warn, .warn_arg = NULL};
  stkr_reader *r = NULL;
  stkr__stream *st;
  const uint8_t *p = data, *end = data + size;
  uint64_t delivered = 0;
  const stkr_process_info *in;

  FZ_CHECK(stkr_reader_create(&opts, &r) == 0);
  st = calloc(1, sizeof(*st));
  FZ_CHECK(st != NULL);
  st->info.pid = 1;
  st->info.process_name = st->info.arch = "";
  st->files = calloc(1, sizeof(*st->files));
  FZ_CHECK(st->files != NULL);
  st->files[0].path = strdup("fuzz-batch");
  st->files[0].seq = 1;
  st->n_files = st->cap_files = 1;
  for (;;) {
    const uint8_t *sep = memmem(p, (size_t)(end - p), FZ_BATCH_SEP,
                                sizeof(FZ_BATCH_SEP) - 1);
    const uint8_t *stop = sep ? sep : end;

    fz_batch(r, st, p, (size_t)(stop - p), (uint64_t)(p - data), &delivered);
    if (st->info.status != 0 || sep == NULL)
      break; /* an unsupported version ends the stream, as in the reader */
    p = sep + sizeof(FZ_BATCH_SEP) - 1;
  }
  in = &st->info;
  FZ_CHECK(in->events == delivered);
  /* The five reasons add up to the total (which saturates, reported as
   * damage, rather than wrap). */
  if (!in->counters_overflow)
    FZ_CHECK(in->drops == in->drops_ring_full + in->drops_reentrant +
                              in->drops_other + in->drops_write_error +
                              in->drops_exit);
  FZ_CHECK(in->unresolved_events <= in->events);
  FZ_CHECK(in->first_ts_ns <= in->last_ts_ns);
  stkr__stream_free(st);
  stkr_reader_free(r);
  return 0;
}
