/*
 * stkr_format.h: the writer's half of the recording format (see
 * proto/stackrec.proto): segment file names and batch encoding. flush/ uses
 * it to write segments; proto/stkr_reader.c uses the same constants and name
 * parser to read them back, so the two sides cannot drift apart.
 *
 * Not installed, no ABI promise: a Bazel target of its own, //proto:format
 * (with stkr_recover.h), visible to flush/ and to the CLI, which writes
 * segments too (merge, symbolize, snapshot), and to tests and benchmarks.
 *
 * Thread-safety: every function here is reentrant; a ZSTD_CCtx or
 * stkr_fmt_buf must not be used by two threads at once.
 */
#ifndef STKR_FORMAT_H
#define STKR_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

#include "proto/stackrec.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Header.format_version this code writes and the newest it reads. */
#define STKR_FORMAT_VERSION 1

/* Largest serialized (decompressed) Batch. The writer refuses to produce a
 * larger one and readers reject one before allocating for it, which bounds a
 * reader's memory no matter what a file claims. */
#define STKR_FMT_MAX_BATCH_BYTES (64u << 20)

/* Most PCs a StackDef may hold: the recorder's hard cap on max_depth
 * (STKR_MAX_DEPTH in recorder/stackrec.h, which proto/ cannot include).
 * A reader treats a longer stack as damage: it is not something the writer
 * makes, and a copy of it would be the file's to size. */
#define STKR_FMT_MAX_DEPTH 256
/* Most symbolized frames a StackDef may list: every PC's inlined calls and
 * its function (64 levels of inlining per PC is far beyond real code). */
#define STKR_FMT_MAX_STACK_FRAMES (STKR_FMT_MAX_DEPTH * 64)

/* Longest name stkr_fmt_segment_name() can produce, with its NUL:
 * "stackrec-" + 10 digits + "-" + 10 digits + ".zst" + NUL. */
#define STKR_FMT_SEGMENT_NAME_MAX 35

/*
 * Write the segment file name "stackrec-<pid>-<seq>.zst" into buf; <seq> has
 * at least 6 digits ("000001").
 * @return 0, or -ENAMETOOLONG if len is too small (buf then holds "" when
 *         len > 0). Use STKR_FMT_SEGMENT_NAME_MAX bytes to never fail.
 */
int stkr_fmt_segment_name(char *buf, size_t len, uint32_t pid, uint32_t seq);

/*
 * Parse a segment file name (a base name, no directory). Only the exact form
 * stkr_fmt_segment_name() writes is accepted (no leading zeros in <pid>, no
 * sign, no spaces, seq >= 1), so every accepted name maps to one (pid, seq)
 * and back. pid and seq may be NULL.
 * @return 0, or -EINVAL if name is not a segment name.
 */
int stkr_fmt_segment_parse(const char *name, uint32_t *pid, uint32_t *seq);

/*
 * The mode of a session's last segment, the one holding its final
 * Counters: the owner's execute bit added to the 0600 segments are written
 * with (a mark only: read-only, the natural one, made `rm -r` ask about
 * every such file). The disk cap (flush/segment.c) passes over a segment
 * with that bit, within a bound (the 4 latest, more within half the cap),
 * so sessions keep the counters that say what they wrote, dropped and
 * lost, not only each pid's newest (QA, session 26: an app restarted as
 * pid 1 in a container lost whole earlier sessions to the cap, their
 * events in no count). Set by the writer at a clean end, by recovery on
 * the segment it writes for a dead session, and by the next session of
 * the same pid on the newest segment a dead one left. Where the file
 * system shows every file executable (vfat, CIFS, WSL's drvfs), the
 * writer notices at its first file and neither sets nor trusts the mark.
 */
#define STKR_FMT_SEGMENT_FINAL_MODE 0700
#define STKR_FMT_SEGMENT_IS_FINAL(st_mode) (((st_mode) & 0100) != 0)

/*
 * A segment the disk cap deleted (flush/segment.c) is replaced by a
 * tombstone, not removed: a file of STKR_FMT_TOMBSTONE_SIZE bytes holding
 * one zstd skippable frame (so the file stays a valid zstd stream, empty)
 * with magic STKR_FMT_TOMBSTONE_MAGIC and the payload "STKRCAP1" + the
 * deleting process's pid (u32 little-endian). The reader then says which
 * of a process's segments the cap took, and by whom, even when another
 * process of the recording deleted them; a missing file stays missing.
 */
#define STKR_FMT_TOMBSTONE_MAGIC 0x184D2A5Au /* a zstd skippable magic */
#define STKR_FMT_TOMBSTONE_SIZE 20u
/*
 * A run of tombstones (since session 35): the cap deletes a process's
 * segments oldest first, so the segment it deletes is often the one after
 * a tombstone's. The tombstone of the run's first segment then says so for
 * the whole run: payload "STKRCAP2" + the deleting process's pid + the
 * run's last seq (u32 little-endian each). The cap writes a tombstone in
 * place of the segment it deletes, as before, then the run's first one
 * again with the new last seq, then removes the one it wrote: a process's
 * deleted segments leave one file a run, not one each (QA, session 33:
 * 268 tombstones in 8 s at a 64 KiB cap, without end). The first seq's
 * file stays, which a writer's start looks for (flush/segment.c). The run
 * names who deleted its last segment only. A reader counts the seqs
 * first..last as deleted, up to the next file that may hold data (a run
 * says nothing of a seq that has one); tombstones whose seqs an earlier
 * run says (a writer that died between the steps, or a cap that ran
 * without the lock: flush/segment.c) count only what is new. A writer
 * goes on after a run's last (stkr_fmt_seq_said). Readers from before it
 * call such a file a damaged tombstone; writers from before it, sharing
 * the directory, take no lock and may delete it as a segment.
 */
#define STKR_FMT_TOMBSTONE_RUN_SIZE 24u
/* The largest marker file (tombstones, merge's lost marker): no segment
 * with a batch is this small. */
#define STKR_FMT_MARKER_MAX STKR_FMT_TOMBSTONE_RUN_SIZE

/* Header.watched's bound, with its NUL: the recorder's STKR_WATCHED_MAX
 * (stackrec.h) and the session file's field (stkr_ringfile.h). A reader
 * takes a longer value as "not said". */
#define STKR_FMT_WATCHED_MAX 128

/* Write the tombstone of a segment deleted by process deleter_pid. */
void stkr_fmt_tombstone(uint8_t out[STKR_FMT_TOMBSTONE_SIZE],
                        uint32_t deleter_pid);

/* Write the tombstone of a run of segments from the one whose name it
 * takes up to last_seq, the last deleted by process deleter_pid. */
void stkr_fmt_tombstone_run(uint8_t out[STKR_FMT_TOMBSTONE_RUN_SIZE],
                            uint32_t deleter_pid, uint32_t last_seq);

/* @return true if p[0, len) is a whole tombstone, of one segment or of a
 *         run (then *deleter_pid, if not NULL, gets the pid it names, and
 *         *last_seq, if not NULL, a run's last seq or 0 for one segment).
 */
bool stkr_fmt_is_tombstone(const uint8_t *p, size_t len,
                           uint32_t *deleter_pid);
bool stkr_fmt_tombstone_parse(const uint8_t *p, size_t len,
                              uint32_t *deleter_pid, uint32_t *last_seq);

/* The highest seq that segment file dir/name (of seq `seq`) stands for:
 * its own, or, for the tombstone of a run, the run's last. A writer goes
 * on after it (flush/segment.c at its start, recovery), never inside a
 * run whose other files the cap removed (review, session 35: a recovered
 * segment numbered 2 cut a run of 1..13 short). */
uint32_t stkr_fmt_seq_said(const char *dir, uint32_t pid, uint32_t seq);
/* The tombstone in dir at pid's seq (a regular file, not followed through
 * a link): who deleted it (*by, may be NULL) and the last seq it says
 * (*last: seq for one segment's). @return false when there is none there
 * (gone, not a tombstone, damaged, a run ending before seq). */
bool stkr_fmt_tombstone_read(const char *dir, uint32_t pid, uint32_t seq,
                             uint32_t *by, uint32_t *last);
/* A writer's last seq: names have 6 digits. A run said to end above it is
 * not believed (stkr_fmt_seq_said: QA, session 35, a hostile run's
 * 0xffffffff made the next writer's seq wrap to 0). */
#define STKR_FMT_SEQ_MAX 999999u

/* The same frame with the payload "STKRLOS1" + a pid: a segment `stackrec
 * merge` could not read (a FIFO, a file without read permission under a
 * segment's name) or none of whose batches was intact, written into its
 * output as a file in the segment's place so that the loss stays visible
 * there (QA, session 25: the merged recording verified intact, the
 * process gone); and, since session 39, a frame inside an output segment
 * where merge left out a damaged batch. A reader reports either as
 * damage. */
void stkr_fmt_lost_marker(uint8_t out[STKR_FMT_TOMBSTONE_SIZE],
                          uint32_t writer_pid);
bool stkr_fmt_is_lost_marker(const uint8_t *p, size_t len);
/* Does p start with the markers' skippable magic (whole or damaged)? */
bool stkr_fmt_is_marker_frame(const uint8_t *p, size_t len);
/* Does p (len bytes) start with any zstd skippable frame's magic? */
bool stkr_fmt_is_skippable(const uint8_t *p, size_t len);
/* The offset of the next zstd frame magic in p[from, len), or len: where
 * a copy of a damaged file goes on after a frame that does not decode. */
size_t stkr_fmt_next_frame_magic(const uint8_t *p, size_t len, size_t from);

/*
 * Does dir hold a segment file (a name stkr_fmt_segment_parse() accepts)?
 * The commands that write a recording (record, merge, symbolize) refuse a
 * directory that does: their output would mix with it.
 * @return 1, 0, or -errno if dir cannot be listed.
 */
int stkr_fmt_dir_has_segments(const char *dir);

/* A growable byte buffer. Zero-initialize it; free it with
 * stkr_fmt_buf_free(). The caller may reset len to 0 to reuse the memory. */
typedef struct stkr_fmt_buf {
  uint8_t *data;
  size_t len, cap;
} stkr_fmt_buf;

/*
 * Serialize `batch` (protobuf-c for all but its Events, which come last,
 * packed by stkr_fmt_events_pack) and compress it as ONE zstd frame, with
 * the content checksum and content size in the frame header, appended to
 * `out` (out->len grows by the frame size; earlier bytes are kept). On error
 * out->len is unchanged.
 *
 * cctx: reused across calls to keep its tables warm; its compression level,
 * checksum and content-size parameters are (re)set here. NULL: a context is
 * created and freed for this call only (convenient for tests and tools).
 * level: a zstd level (e.g. 3; 0 means zstd's default).
 * @return 0, -EINVAL (NULL batch/out), -ENOMEM, -EFBIG (serialized batch
 *         larger than STKR_FMT_MAX_BATCH_BYTES), or -EIO (zstd error).
 */
int stkr_fmt_encode_batch(const Stackrec__Batch *batch, ZSTD_CCtx *cctx,
                          int level, stkr_fmt_buf *out);

/*
 * The Events message as protobuf-c packs it, byte for byte (fields in
 * number order, proto3 zeros left out), in one tight pass per column: what
 * stkr_fmt_encode_batch appends after the rest of the Batch. Unknown
 * fields are not written (the encoder hands Events that carry some to
 * protobuf-c). Thread-safe; e is only read.
 * @return the bytes written at out, which must hold
 *         stkr_fmt_events_packed_max(e) (at least what pack writes; it
 *         saturates at SIZE_MAX, never wraps).
 */
size_t stkr_fmt_events_packed_max(const Stackrec__Events *e);
size_t stkr_fmt_events_pack(const Stackrec__Events *e, uint8_t *out);

/* Append p[0, n) to b as it is. @return 0, or -ENOMEM with b unchanged. */
int stkr_fmt_buf_append(stkr_fmt_buf *b, const void *p, size_t n);

/* Free b's memory and zero it. NULL is accepted. */
void stkr_fmt_buf_free(stkr_fmt_buf *b);

/*
 * The Header (and its Config) that opens a session's segment, from the
 * header of the session's file (common/stkr_ringfile.h): format_version,
 * who, when and with which settings. The live writer
 * (flush/drain_batch.c, from the template it gave the session file) and
 * recovery (stkr_recover_session.c, from a dead session's file) both fill
 * theirs here, so a recovered segment's Header cannot drift from a live one's.
 * The caller sets what only it knows: segment_seq, session_first_seq,
 * dir_recreated, unwind_tables. H and C point into `s`'s strings and C is
 * linked as H->config: all three must outlive the encode.
 */
struct stkr_sessfile_hdr;
void stkr_fmt_header_from_session(Stackrec__Header *H, Stackrec__Config *C,
                                  const struct stkr_sessfile_hdr *s);

/*
 * The readers' one rule for the header of a zstd frame holding a Batch
 * (implemented with the reader, proto/stkr_frames.c): the content checksum
 * must be on (nothing would verify the content otherwise); the content
 * size may be absent (zstd allows it; the reader grows its buffer up to
 * STKR_FMT_MAX_BATCH_BYTES), but must not exceed that limit when present.
 * p: avail bytes at a frame magic. *fcs: the declared content size or
 * ZSTD_CONTENTSIZE_UNKNOWN.
 * @return 0 (acceptable), -EAGAIN (header incomplete in avail bytes), or
 *         -EINVAL (*reason: static text).
 */
int stkr_fmt_frame_check(const uint8_t *p, size_t avail,
                         unsigned long long *fcs, const char **reason);

/*
 * Decompress the one zstd frame at src (len bytes available) into out
 * (out->len = its content size), under stkr_fmt_frame_check's rule, the
 * frame's checksum verified. For tools that rewrite segments in memory
 * (stackrec symbolize) so that they judge a frame exactly as the reader.
 * *frame_len: the frame's compressed size.
 * @return 0, -EINVAL (damaged or cut off: *reason), or -ENOMEM.
 */
int stkr_fmt_decode_frame(ZSTD_DCtx *dctx, const uint8_t *src, size_t len,
                          stkr_fmt_buf *out, size_t *frame_len,
                          const char **reason);

/* Most memory one Batch may take once decoded by protobuf-c. Decoding can
 * multiply its input many times over (a packed field of 1-byte varints
 * becomes 8 bytes an element; every message is its own allocation), so
 * bounding the serialized size (STKR_FMT_MAX_BATCH_BYTES) does not bound
 * the decoder: a 5 KB segment could otherwise ask for gigabytes. The
 * writer's batches (at most 65536 events) need a few MiB. */
#define STKR_FMT_MAX_DECODED_BYTES (256u << 20)

/*
 * A protobuf-c allocator that refuses once the blocks it has handed out
 * (and not yet freed) would exceed `limit` bytes. Pass &a->pb to
 * stackrec__batch__unpack() AND to the matching free_unpacked(). `refused`
 * tells, after a failed unpack, that the limit (not the input) was why;
 * stkr_fmt_pballoc_init() clears it, as may the caller before each unpack.
 * Not thread-safe: one per decoding thread.
 */
typedef struct stkr_fmt_pballoc {
  ProtobufCAllocator pb;
  size_t used, limit;
  bool refused;
} stkr_fmt_pballoc;

void stkr_fmt_pballoc_init(stkr_fmt_pballoc *a, size_t limit);

#ifdef __cplusplus
}
#endif
#endif /* STKR_FORMAT_H */
