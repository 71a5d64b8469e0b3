/*
 * store.c: built unwind tables to bytes and back (uw_store.h), for the
 * per-build-id cache of a recording. Knows the table layout of
 * STKR__UW_TABLE_FORMAT 2 (build.c's assemble; 2 has format 1's layout,
 * with the lazy PLT's rows, which tables of format 1 lack): a new layout
 * must bump the constant and teach this file, or the build stops here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/uw_store.h"

#if STKR__UW_TABLE_FORMAT != 2
#error "store.c encodes format 2 (palette, off, block, idx): update it for the new table layout"
#endif

#define K1 0x9E3779B97F4A7C15ull
#define K2 0xC2B2AE3D27D4EB4Full

static uint64_t rotl(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

uint64_t stkr__unwind_file_sum(const uint8_t *p, size_t n) {
  uint64_t h[4] = {K1, K2, K1 ^ K2, n};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, sizeof w);
    for (int l = 0; l < 4; l++) h[l] = rotl((h[l] ^ w[l]) * K1, 31);
  }
  for (; i < n; i++) h[i & 3] = rotl((h[i & 3] ^ p[i]) * K2, 27);
  return (rotl(h[0], 1) ^ rotl(h[1], 7) ^ rotl(h[2], 12) ^ rotl(h[3], 18)) * K1;
}

static size_t payload_of(uint64_t n, uint64_t n_palette, uint64_t n_blocks) {
  return (size_t)(4 * n_palette + 4 * n + 4 * n_blocks + 2 * n);
}

/* The checksum of a header (its sum field as 0) and the payload. */
static uint64_t file_sum(const stkr__uw_file_hdr *h, const uint8_t *payload) {
  stkr__uw_file_hdr z = *h;
  z.sum = 0;
  return stkr__unwind_file_sum((const uint8_t *)&z, sizeof z) ^
         rotl(stkr__unwind_file_sum(payload, (size_t)h->payload_bytes), 17);
}

int stkr__unwind_table_encode(const stkr__uw_table *t, const stkr__uw_stats *st,
                              const stkr__uw_src *src, const uint8_t *id,
                              size_t id_len, uint8_t **buf, size_t *len) {
  stkr__uw_file_hdr h;
  uint8_t *b, *p;
  size_t pay;

  *buf = NULL;
  *len = 0;
  if (t == NULL || t->n == 0 || id == NULL || id_len == 0 ||
      id_len > STKR__UW_BUILD_ID_MAX)
    return -EINVAL;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, STKR__UW_FILE_MAGIC, sizeof h.magic);
  h.format = STKR__UW_TABLE_FORMAT;
  h.hdr_bytes = sizeof h;
  h.arch = (uint32_t)src->arch;
  h.build_id_len = (uint32_t)id_len;
  memcpy(h.build_id, id, id_len);
  h.eh_frame_off = src->eh_frame_vaddr - src->base;
  h.eh_frame_len = src->eh_frame_len;
  h.n = t->n;
  h.n_palette = t->n_palette;
  h.n_blocks = t->n_blocks;
  h.block_shift = t->block_shift;
  h.lo_off = t->off[0];
  h.hi_off = t->off[t->n - 1];
  h.stats[0] = st->cies;
  h.stats[1] = st->fdes;
  h.stats[2] = st->fdes_bad;
  h.stats[3] = st->rows;
  h.stats[4] = st->rows_fallback;
  h.stats[5] = st->rows_signal;
  h.stats[6] = st->table_bytes;
  h.stats[7] = st->eh_frame_bytes;
  pay = payload_of(t->n, t->n_palette, t->n_blocks);
  h.payload_bytes = pay;
  if ((b = malloc(sizeof h + pay)) == NULL) return -ENOMEM;
  p = b + sizeof h;
  memcpy(p, t->palette, 4u * t->n_palette);
  p += 4u * t->n_palette;
  memcpy(p, t->off, 4u * t->n);
  p += 4u * t->n;
  memcpy(p, t->block, 4u * t->n_blocks);
  p += 4u * t->n_blocks;
  memcpy(p, t->idx, 2u * t->n);
  h.sum = file_sum(&h, b + sizeof h);
  memcpy(b, &h, sizeof h);
  *buf = b;
  *len = sizeof h + pay;
  return 0;
}

/* What the walk relies on (build.c's stkr__unwind_table_find): every
 * palette index and block entry in range, the block index covering
 * [off[0], off[n - 1]) and offsets ascending, so that its search stays
 * inside the arrays and finds the row a build would. */
static bool arrays_ok(const stkr__uw_table *t) {
  uint32_t i;
  for (i = 0; i < t->n; i++)
    if (t->idx[i] >= t->n_palette || (i > 0 && t->off[i] <= t->off[i - 1]))
      return false;
  for (i = 0; i < t->n_blocks; i++)
    if (t->block[i] >= t->n || (i > 0 && t->block[i] < t->block[i - 1]))
      return false;
  return true;
}

int stkr__unwind_file_hdr_check(const stkr__uw_file_hdr *hp,
                                const stkr__uw_src *src, const uint8_t *id,
                                size_t id_len, size_t *payload_bytes) {
  stkr__uw_file_hdr h = *hp;
  if (memcmp(h.magic, STKR__UW_FILE_MAGIC, sizeof h.magic) != 0 ||
      h.format != STKR__UW_TABLE_FORMAT || h.hdr_bytes != sizeof h ||
      h.arch != (uint32_t)src->arch || h.build_id_len != id_len ||
      id_len == 0 || id_len > STKR__UW_BUILD_ID_MAX ||
      memcmp(h.build_id, id, id_len) != 0 ||
      h.eh_frame_off != src->eh_frame_vaddr - src->base ||
      h.eh_frame_len != src->eh_frame_len)
    return -EINVAL; /* another format, architecture or image */
  /* Counts first (bounded, so payload_of cannot overflow), then sizes. */
  if (h.n == 0 || h.n_palette == 0 || h.n_palette > 65536u ||
      h.n_blocks == 0 || h.block_shift > 32 || h.lo_off > h.hi_off ||
      h.n_blocks != ((h.hi_off - h.lo_off) >> h.block_shift) + 1 ||
      h.payload_bytes != payload_of(h.n, h.n_palette, h.n_blocks) ||
      h.payload_bytes > STKR__UW_FILE_MAX)
    return -EINVAL;
  *payload_bytes = (size_t)h.payload_bytes;
  return 0;
}

stkr__uw_table *stkr__unwind_table_alloc(size_t payload_bytes) {
  stkr__uw_table *t = malloc(sizeof *t + payload_bytes);
  if (t != NULL) memset(t, 0, sizeof *t);
  return t;
}

void *stkr__unwind_table_payload(stkr__uw_table *t) { return t + 1; }

int stkr__unwind_table_adopt(const stkr__uw_file_hdr *hp,
                             const stkr__uw_src *src, stkr__uw_table *t,
                             stkr__uw_stats *st) {
  const stkr__uw_file_hdr *h = hp;
  uint32_t *pal = (uint32_t *)(t + 1), *off, *blk;

  if (file_sum(h, (const uint8_t *)pal) != h->sum) { /* damaged */
    free(t);
    return -EINVAL;
  }
  /* The order assemble() allocates them in. */
  off = pal + h->n_palette;
  blk = off + h->n;
  t->base = src->base;
  t->n = h->n;
  t->n_palette = h->n_palette;
  t->n_blocks = h->n_blocks;
  t->block_shift = h->block_shift;
  t->palette = pal;
  t->off = off;
  t->block = blk;
  t->idx = (uint16_t *)(blk + h->n_blocks);
  if (off[0] != h->lo_off || off[h->n - 1] != h->hi_off || !arrays_ok(t)) {
    free(t);
    return -EINVAL;
  }
  t->lo = src->base + off[0];
  t->hi = src->base + off[h->n - 1];
  if (st != NULL) {
    memset(st, 0, sizeof *st);
    st->cies = h->stats[0];
    st->fdes = h->stats[1];
    st->fdes_bad = h->stats[2];
    st->rows = h->stats[3];
    st->rows_fallback = h->stats[4];
    st->rows_signal = h->stats[5];
    st->table_bytes = h->stats[6];
    st->eh_frame_bytes = h->stats[7];
  }
  return 0;
}

int stkr__unwind_table_decode(const uint8_t *buf, size_t len,
                              const stkr__uw_src *src, const uint8_t *id,
                              size_t id_len, stkr__uw_table **out,
                              stkr__uw_stats *st) {
  stkr__uw_file_hdr h;
  stkr__uw_table *t;
  size_t pay;
  int rc;

  *out = NULL;
  if (len < sizeof h) return -EINVAL;
  memcpy(&h, buf, sizeof h);
  if ((rc = stkr__unwind_file_hdr_check(&h, src, id, id_len, &pay)) != 0)
    return rc;
  if (pay != len - sizeof h) return -EINVAL;
  if ((t = stkr__unwind_table_alloc(pay)) == NULL) return -ENOMEM;
  memcpy(stkr__unwind_table_payload(t), buf + sizeof h, pay);
  if ((rc = stkr__unwind_table_adopt(&h, src, t, st)) != 0) return rc;
  *out = t;
  return 0;
}
