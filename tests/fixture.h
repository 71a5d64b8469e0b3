/*
 * fixture.h: writing known recordings for the proto/reader/cli tests.
 *
 * A fixed set of definitions (sites, threads, stacks below) and a batch
 * builder that encodes with the real writer code (stkr_fmt_encode_batch), so
 * the tests exercise the same bytes flush/ produces.
 */
#ifndef STKR_TEST_FIXTURE_H
#define STKR_TEST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_format.h"

#define FX_PID 4242u
#define FX_START_MONO 1000000000ull
#define FX_START_WALL 1700000000000000000ull /* 2023-11-14T22:13:20Z */

/* Definitions, by id (index 0 unused). */
#define FX_N_SITES 4
#define FX_N_THREADS 3
#define FX_N_STACKS 3
extern const char *const fx_site_name[FX_N_SITES + 1];
extern const uint64_t fx_thread_tid[FX_N_THREADS + 1];
extern const char *const fx_thread_name[FX_N_THREADS + 1];
extern const uint64_t *const fx_stack_pcs[FX_N_STACKS + 1];
extern const size_t fx_stack_len[FX_N_STACKS + 1];
extern const bool fx_stack_truncated[FX_N_STACKS + 1];

typedef struct fx_ev {
  int64_t delta;
  uint32_t site, thread, stack;
  const char *payload; /* NULL: none */
  uint32_t plen;
  bool trunc;
} fx_ev;

typedef struct fx_batch {
  uint64_t seq;
  bool header;             /* write a Header */
  uint32_t pid;            /* header pid; 0: FX_PID */
  uint32_t segment_seq;    /* header segment_seq */
  uint32_t format_version; /* 0: STKR_FORMAT_VERSION */
  const uint32_t *sites, *threads, *stacks; /* ids to define */
  size_t n_sites, n_threads, n_stacks;
  uint64_t base_ts;
  const fx_ev *evs;
  size_t n_evs;
  bool drops;  /* add Drops{1, 3, 1, 0} and Drops{0, 0, 0, 2} */
  bool counters; /* add Counters{100, 5, 2, 0} (attempted, written,
                    dropped_write_error, segments_deleted) */
  uint64_t attempted, written; /* non-zero: instead of 100, 5 */
  const Stackrec__Counters *cnt; /* non-NULL: these Counters, verbatim */
  /* Header fields for sessions and recreated directories, and
   * Batch.recovered (stackrec.proto): */
  uint64_t session_id;
  uint32_t session_first_seq;
  bool dir_recreated;
  bool recovered;
  bool last;
  /* A later recording session: header start times + start_shift, and the
   * definition of id i describes fx entry rot(i) = (i - 1 + rotate) % N + 1
   * (sites, threads and stacks alike), so ids mean something else. */
  uint64_t start_shift;
  /* Another boot: CLOCK_MONOTONIC (header, clock sync) this much ahead,
   * the wall clock not (events: base_ts is the caller's). */
  uint64_t mono_ahead;
  /* Header.boot_id: 16 bytes of this value (0: none written), and
   * Header.mono_offset_ns. */
  uint8_t boot;
  int64_t mono_offset;
  uint64_t process_start; /* Header.process_start (0: none written) */
  uint32_t parent_pid;    /* Header.parent_pid (0: none written) */
  uint32_t os_parent_pid; /* Header.os_parent_pid (0: none written) */
  uint32_t rotate;
  const char *watched; /* Header.watched; NULL: none */
  const char *process_name; /* Header.process_name; NULL: "fixture" */
} fx_batch;

/* The fx table index that id `id` refers to under `rotate` (n entries). */
static inline uint32_t fx_rot(uint32_t id, uint32_t rotate, uint32_t n) {
  return id >= 1 && id <= n ? (id - 1 + rotate) % n + 1 : id;
}

/* Append the encoded batch to out. @return 0 or a negative errno. */
int fx_encode(const fx_batch *b, stkr_fmt_buf *out);

/* The one encoder under fx_encode and sr_encode (tests/symrec.h), so that
 * both write batches the same way: */
/* h initialised with what every recording's header says (format version,
 * pid, process name, start times, segment 1, x86_64). */
void fx_header_init(Stackrec__Header *h, uint32_t pid, const char *name,
                    uint64_t start_mono, uint64_t start_wall);
/* b with the events evs[0..n) (times from base_ts) appended to out as the
 * worker does (stkr_fmt_encode_batch; at level 3, the worker's is 1: a
 * reader sees no difference). b->events is left NULL.
 * @return 0 or a negative errno. */
int fx_encode_events(Stackrec__Batch *b, const fx_ev *evs, size_t n,
                     uint64_t base_ts, stkr_fmt_buf *out);

/* Write len bytes to path (created/truncated). @return 0 or -errno. */
int fx_write_file(const char *path, const void *data, size_t len);

/* Write data[0..len) as segment seq of process pid in dir, named as the
 * recorder names it (dir/stackrec-<pid>-<seq>.zst): what a test writes
 * there that no encoder makes (a tombstone, junk, a batch cut short).
 * @return 0 or a negative errno. */
int fx_write_segment_bytes(const char *dir, uint32_t pid, uint32_t seq,
                           const void *data, size_t len);

/* Write out's bytes as segment seq of process pid in dir (as above), then
 * empty out for the next segment (its memory kept: stkr_fmt_buf_free it
 * at the end). @return 0 or a negative errno. */
int fx_write_segment(const char *dir, uint32_t pid, uint32_t seq,
                     stkr_fmt_buf *out);

/* An event as a reader must deliver it. */
typedef struct fx_expect {
  uint64_t ts;  /* absolute: the batch's base_ts plus the deltas so far */
  fx_ev ev;     /* as encoded (its delta relative to the previous one) */
  int batch;    /* 0-based index in the standard recording */
} fx_expect;

/* A segment of one batch, ended (last), holding one event at site 1,
 * thread 1, stack 1 of the fx tables: what the tests of whole-recording
 * answers write when one event is all they need. */
typedef struct fx_one {
  uint32_t pid;
  uint64_t session_id;
  uint32_t segment_seq;       /* 0: 1 */
  uint64_t shift;             /* the start and the event this much later */
  uint64_t mono_ahead;        /* ... on a monotonic clock this much ahead:
                                 another boot (fx_batch.mono_ahead) */
  uint8_t boot;               /* fx_batch.boot, mono_offset */
  int64_t mono_offset;
  uint64_t process_start;     /* fx_batch.process_start: two launches of
                                 one pid differ in it */
  bool silent;                /* no event: its Header alone */
  uint32_t parent_pid;        /* Header.parent_pid: forked from it */
  uint32_t os_parent_pid;     /* Header.os_parent_pid: the OS's parent */
  const char *watched;        /* Header.watched; NULL: none */
  const char *process_name;   /* NULL: "fixture" */
} fx_one;
/* Write it as dir/stackrec-<pid>-<seq>.zst. @return 0 or a negative errno. */
int fx_write_one(const char *dir, const fx_one *o);
/* Write o as launch k (0, 1, ...) of its pid, a pid used again (a
 * restart, an exec): session k + 1, in segment k + 1; its other fields as
 * o says. @return 0 or a negative errno. */
int fx_write_launch(const char *dir, fx_one o, uint32_t k);

/* The standard recording: segment 1 with batches 0..2 (3 batches), segment
 * 2 with batches 3..4 (definitions repeated; batch 4 is `last`). */
#define FX_STD_BATCHES 5
extern const fx_batch fx_std[FX_STD_BATCHES];
/* Expected events in read order; fills at most max, returns the count. */
size_t fx_std_expect(fx_expect *out, size_t max);
/* Encode standard batches [from, to), headers saying `pid`, into out. */
int fx_std_encode(int from, int to, uint32_t pid, stkr_fmt_buf *out);
/* Write the standard recording as dir/stackrec-<pid>-00000{1,2}.zst. */
int fx_std_write(const char *dir, uint32_t pid);
/* The standard recording still being written: segment 2 holds batch 3
 * and only the first `cut` bytes of batch 4 (cut > 0 and shorter than
 * the batch: a reader sees a live, incomplete last batch). */
int fx_std_write_live(const char *dir, uint32_t pid, size_t cut);
/* The standard batches [from, to) without drops, the last (batch 4)
 * carrying Counters that add up (attempted 9, written 8): a complete
 * recording. */
int fx_clean_encode(int from, int to, uint32_t pid, stkr_fmt_buf *out);
/* The same with Header.session_id = session (fx_clean_encode: 0, none). */
int fx_clean_encode_session(int from, int to, uint32_t pid, uint64_t session,
                            stkr_fmt_buf *out);

/* A fresh empty directory under $TEST_TMPDIR (or /tmp); static buffer. */
const char *fx_tmpdir(const char *tag);

#endif
