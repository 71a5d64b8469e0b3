/*
 * uw_store.h: built unwind tables as bytes, for the per-build-id cache of
 * a recording (issue 9: every exec'd process of a recording used to build
 * the same images' tables again; recorder/unwind_tables.c keeps one file
 * per build-id and loads it instead).
 *
 * A table is position-independent (offsets from the image's load bias),
 * so the bytes of one process's table serve every process that maps the
 * same image. Layout of the bytes (host byte order; a file from another
 * layout, architecture or image is refused, never guessed at):
 *   stkr__uw_file_hdr (magic, STKR__UW_TABLE_FORMAT, arch, the image's
 *   build-id and .eh_frame position and size, the counts, the builder's
 *   stats, a checksum), then palette[n_palette] u32, off[n] u32,
 *   block[n_blocks] u32, idx[n] u16.
 * Decoding validates everything the walk relies on (the checksum, every
 * palette index and block entry in range, offsets ascending, the block
 * count the range implies), so a damaged or hostile file yields -EINVAL,
 * never a table the hot path could read out of bounds with.
 *
 * Thread-safety: reentrant; allocates. Not for the hot path.
 */
#ifndef STKR_UNWIND_UW_STORE_H
#define STKR_UNWIND_UW_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STKR__UW_FILE_MAGIC "STKRUWT1" /* 8 bytes, no NUL in the file */
#define STKR__UW_BUILD_ID_MAX 64u
/* Larger files are refused unread (a table is ~1.1x its .eh_frame: tens
 * of MB for the largest binaries). */
#define STKR__UW_FILE_MAX ((size_t)256 << 20)

typedef struct stkr__uw_file_hdr {
  char magic[8];          /* STKR__UW_FILE_MAGIC */
  uint32_t format;        /* STKR__UW_TABLE_FORMAT */
  uint32_t hdr_bytes;     /* sizeof(stkr__uw_file_hdr) */
  uint32_t arch;          /* stkr__uw_arch */
  uint32_t build_id_len;  /* 1..STKR__UW_BUILD_ID_MAX */
  uint8_t build_id[STKR__UW_BUILD_ID_MAX];
  uint64_t eh_frame_off;  /* src.eh_frame_vaddr - src.base */
  uint64_t eh_frame_len;  /* src.eh_frame_len */
  uint32_t n, n_palette, n_blocks, block_shift;
  uint64_t lo_off, hi_off; /* off[0], off[n - 1] */
  /* The builder's stats, so that a loaded table reports what a build
   * would: cies, fdes, fdes_bad, rows, rows_fallback, rows_signal,
   * table_bytes, eh_frame_bytes. */
  uint64_t stats[8];
  uint64_t payload_bytes; /* what follows the header */
  uint64_t sum;           /* stkr__unwind_file_sum over header (sum = 0) and payload */
} stkr__uw_file_hdr;

/* The bytes of t (built from src, the image with build-id id[0..id_len)).
 * @return 0 and *buf (malloc'd, caller frees) of *len bytes, -EINVAL
 * (no rows, a build-id of 0 or over STKR__UW_BUILD_ID_MAX bytes), -ENOMEM. */
int stkr__unwind_table_encode(const stkr__uw_table *t, const stkr__uw_stats *st,
                              const stkr__uw_src *src, const uint8_t *id,
                              size_t id_len, uint8_t **buf, size_t *len);

/* A table from bytes made by stkr__unwind_table_encode, for the image at
 * src (its load bias becomes the table's base) with build-id id.
 * @return 0, *out (free with stkr__unwind_table_free) and *st (may be
 * NULL); -EINVAL: not a table of this format, architecture and image, or
 * damaged; -ENOMEM. buf is only read. */
int stkr__unwind_table_decode(const uint8_t *buf, size_t len,
                              const stkr__uw_src *src, const uint8_t *id,
                              size_t id_len, stkr__uw_table **out,
                              stkr__uw_stats *st);

/* The same in two steps, so that a file is read once, straight into the
 * table's memory: check the header (the first sizeof(stkr__uw_file_hdr)
 * bytes) against the image and get the payload's size; then allocate the
 * table with room for it, read the payload to stkr__unwind_table_payload(t)
 * and finish with stkr__unwind_table_adopt (checksum, bounds).
 * hdr_check: @return 0 and *payload_bytes, or -EINVAL.
 * alloc: @return a table (free with stkr__unwind_table_free) or NULL.
 * adopt: @return 0 and *st (may be NULL), or -EINVAL (t is then freed). */
int stkr__unwind_file_hdr_check(const stkr__uw_file_hdr *h,
                                const stkr__uw_src *src, const uint8_t *id,
                                size_t id_len, size_t *payload_bytes);
stkr__uw_table *stkr__unwind_table_alloc(size_t payload_bytes);
void *stkr__unwind_table_payload(stkr__uw_table *t);
int stkr__unwind_table_adopt(const stkr__uw_file_hdr *h,
                             const stkr__uw_src *src, stkr__uw_table *t,
                             stkr__uw_stats *st);

/* The checksum of the bytes (a fixed function: it is stored in files,
 * unlike common/stkr_hash.h's in-memory hashes). Four independent
 * multiply-xor lanes over 8-byte words, so it runs at memory speed. */
uint64_t stkr__unwind_file_sum(const uint8_t *p, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* STKR_UNWIND_UW_STORE_H */
