/*
 * push_native.c: the events of one chunk of `stackrec push` as one block
 * of ClickHouse's Native format, in the sorting key's order.
 *
 * Why Native: a RowBinary row is parsed value by value (a virtual call per
 * column per row: 0.46 us a row of the old 15-column shape, ~0.2 us of
 * 12 integers, measured on 18.16); a Native block is column after column,
 * each fixed-width column copied as one array. Why sorted: MergeTree
 * sorts every inserted block by its sorting key unless it finds it
 * already sorted (a linear check; ProfileEvents
 * MergeTreeDataWriterBlocksAlreadySorted counts the skipped sorts).
 * Events arrive in (process, ordinal) order; a stable bucketing by site
 * (a few dozen distinct sites a chunk, ordered by id) makes that
 * (site, rec, pid, n), the key of `events`, at O(rows) cost. Should the
 * input not be in (pid, n) order the server sorts as usual: the order is
 * an optimization, never needed for correctness.
 *
 * Native layout without block info (what the HTTP interface reads as
 * input, client revision 0): varint columns, varint rows, then per column
 * its name and type as strings (varint length, bytes) and its values,
 * fixed-width little-endian.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/push.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "push_native.c copies integers as they are in memory: little-endian"
#endif

/* The columns in stkr__cols_events' order: name, type, width, and where
 * the value is in a row (REC: the block's constant). */
#define REC ((size_t)-1)
static const struct {
  const char *name, *type;
  unsigned width;
  size_t off;
} k_cols[] = {
    {"day", "Date", 2, offsetof(stkr__ev_row, day)},
    {"rec", "UInt64", 8, REC},
    {"pid", "UInt32", 4, offsetof(stkr__ev_row, pid)},
    {"n", "UInt64", 8, offsetof(stkr__ev_row, n)},
    {"tid", "UInt64", 8, offsetof(stkr__ev_row, tid)},
    {"thread", "UInt64", 8, offsetof(stkr__ev_row, thread)},
    {"site", "UInt64", 8, offsetof(stkr__ev_row, site)},
    {"ts", "UInt64", 8, offsetof(stkr__ev_row, ts)},
    {"ts_mono", "UInt64", 8, offsetof(stkr__ev_row, ts_mono)},
    {"stack", "UInt64", 8, offsetof(stkr__ev_row, stack)},
    {"payload", "UInt64", 8, offsetof(stkr__ev_row, payload)},
    {"stack_truncated", "UInt8", 1, offsetof(stkr__ev_row, stack_truncated)},
};
#define N_COLS (sizeof k_cols / sizeof k_cols[0])

struct stkr__evblock {
  uint64_t rec;
  stkr__ev_row *rows;
  size_t n, cap;
  /* The chunk's distinct sites: an open-addressing set of ids (0: empty)
   * giving each its bucket, and the ids by bucket. */
  uint64_t *slot_site;
  uint32_t *slot_bucket;
  size_t slots;
  uint64_t *sites;
  size_t n_sites, cap_sites;
  uint32_t *perm; /* rows in sending order, made by seal */
  size_t cap_perm;
  /* Encoding: next column (N_COLS + 1: done; 0 is the block header) and
   * row within it, and whether that column's header went out. */
  size_t col, row;
  bool col_head;
};

int stkr__evblock_create(stkr__evblock **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void stkr__evblock_free(stkr__evblock *b) {
  if (b == NULL)
    return;
  free(b->rows);
  free(b->slot_site);
  free(b->slot_bucket);
  free(b->sites);
  free(b->perm);
  free(b);
}

void stkr__evblock_reset(stkr__evblock *b, uint64_t rec) {
  b->rec = rec;
  b->n = 0;
  b->n_sites = 0;
  if (b->slots > 0)
    memset(b->slot_site, 0, b->slots * sizeof *b->slot_site);
  b->col = b->row = 0;
  b->col_head = false;
}

size_t stkr__evblock_rows(const stkr__evblock *b) { return b->n; }

/* Double the site set when half full (ids are != 0: content hashes). */
static int sites_grow(stkr__evblock *b) {
  size_t cap = b->slots ? 2 * b->slots : 64, i, j;
  uint64_t *s = calloc(cap, sizeof *s);
  uint32_t *k = calloc(cap, sizeof *k);
  if (s == NULL || k == NULL) {
    free(s);
    free(k);
    return -ENOMEM;
  }
  for (i = 0; i < b->slots; i++)
    if (b->slot_site[i] != 0) {
      for (j = stkr_mix64(b->slot_site[i]) & (cap - 1); s[j] != 0;
           j = (j + 1) & (cap - 1))
        ;
      s[j] = b->slot_site[i];
      k[j] = b->slot_bucket[i];
    }
  free(b->slot_site);
  free(b->slot_bucket);
  b->slot_site = s;
  b->slot_bucket = k;
  b->slots = cap;
  return 0;
}

/* @return the bucket of site (added if new), or -ENOMEM. */
static long site_bucket(stkr__evblock *b, uint64_t site) {
  size_t j;
  int err;
  if (2 * (b->n_sites + 1) > b->slots && (err = sites_grow(b)) != 0)
    return err;
  for (j = stkr_mix64(site) & (b->slots - 1); b->slot_site[j] != 0;
       j = (j + 1) & (b->slots - 1))
    if (b->slot_site[j] == site)
      return b->slot_bucket[j];
  if ((err = stkr_grow((void **)&b->sites, &b->cap_sites, b->n_sites + 1,
                       sizeof *b->sites)) != 0)
    return err;
  b->slot_site[j] = site;
  b->slot_bucket[j] = (uint32_t)b->n_sites;
  b->sites[b->n_sites] = site;
  return (long)b->n_sites++;
}

int stkr__evblock_add(stkr__evblock *b, const stkr__ev_row *row) {
  long k = site_bucket(b, row->site);
  int err;
  if (k < 0)
    return (int)k;
  if (b->n >= UINT32_MAX)
    return -ENOMEM; /* perm holds 32-bit indexes; chunks are <= 2^20 */
  if ((err = stkr_grow((void **)&b->rows, &b->cap, b->n + 1,
                       sizeof *b->rows)) != 0)
    return err;
  b->rows[b->n] = *row;
  b->rows[b->n].bucket = (uint32_t)k;
  b->n++;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* A counting sort of the rows by their site's rank: stable, O(rows). */
int stkr__evblock_seal(stkr__evblock *b) {
  size_t i, *start;
  uint64_t *sorted;
  uint32_t *rank;
  int err;

  b->col = b->row = 0;
  b->col_head = false;
  if ((err = stkr_grow((void **)&b->perm, &b->cap_perm, b->n + 1,
                       sizeof *b->perm)) != 0)
    return err;
  sorted = malloc((b->n_sites + 1) * sizeof *sorted);
  rank = malloc((b->n_sites + 1) * sizeof *rank);
  start = calloc(b->n_sites + 1, sizeof *start);
  if (sorted == NULL || rank == NULL || start == NULL) {
    free(sorted);
    free(rank);
    free(start);
    return -ENOMEM;
  }
  memcpy(sorted, b->sites, b->n_sites * sizeof *sorted);
  qsort(sorted, b->n_sites, sizeof *sorted, cmp_u64);
  for (i = 0; i < b->n_sites; i++) { /* bucket -> rank, by lookup */
    uint64_t *r = bsearch(&b->sites[i], sorted, b->n_sites, sizeof *sorted,
                          cmp_u64);
    rank[i] = (uint32_t)(r - sorted);
  }
  for (i = 0; i < b->n; i++) /* rows per rank, then where each starts */
    start[rank[b->rows[i].bucket] + 1]++;
  for (i = 1; i <= b->n_sites; i++)
    start[i] += start[i - 1];
  for (i = 0; i < b->n; i++)
    b->perm[start[rank[b->rows[i].bucket]]++] = (uint32_t)i;
  free(sorted);
  free(rank);
  free(start);
  return 0;
}

static size_t put_varint(uint8_t *o, uint64_t v) {
  size_t n = 0;
  do {
    o[n] = (uint8_t)(v & 0x7F);
    v >>= 7;
    if (v != 0)
      o[n] |= 0x80;
    n++;
  } while (v != 0);
  return n;
}

static size_t put_str(uint8_t *o, const char *s) {
  size_t n = strlen(s), k = put_varint(o, n);
  memcpy(o + k, s, n);
  return k + n;
}

/* Values of column c from row b->row on, while they fit in [o, end). */
static uint8_t *put_values(stkr__evblock *b, size_t c, uint8_t *o,
                           const uint8_t *end) {
  const unsigned w = k_cols[c].width;
  const size_t off = k_cols[c].off;
  const uint8_t *base = (const uint8_t *)b->rows;
  size_t i = b->row, room = (size_t)(end - o) / w;
  size_t stop = b->n - i < room ? b->n : i + room;

  if (off == REC) {
    for (; i < stop; i++, o += 8)
      memcpy(o, &b->rec, 8);
  } else {
    /* One loop per width, so that each memcpy is a plain load and store. */
    switch (w) {
    case 1:
      for (; i < stop; i++, o++)
        *o = base[b->perm[i] * sizeof(stkr__ev_row) + off];
      break;
    case 2:
      for (; i < stop; i++, o += 2)
        memcpy(o, base + b->perm[i] * sizeof(stkr__ev_row) + off, 2);
      break;
    case 4:
      for (; i < stop; i++, o += 4)
        memcpy(o, base + b->perm[i] * sizeof(stkr__ev_row) + off, 4);
      break;
    default:
      for (; i < stop; i++, o += 8)
        memcpy(o, base + b->perm[i] * sizeof(stkr__ev_row) + off, 8);
      break;
    }
  }
  b->row = i;
  return o;
}

long stkr__evblock_produce(void *arg, uint8_t *buf, size_t cap) {
  stkr__evblock *b = arg;
  uint8_t *o = buf, *end = buf + cap;

  /* Headers are under 64 bytes; the caller's buffer is 256 KiB. */
  while (b->col <= N_COLS && end - o >= 64) {
    if (b->col == 0) {
      o += put_varint(o, N_COLS);
      o += put_varint(o, b->n);
      b->col = 1;
      continue;
    }
    if (!b->col_head) {
      o += put_str(o, k_cols[b->col - 1].name);
      o += put_str(o, k_cols[b->col - 1].type);
      b->col_head = true;
      b->row = 0;
    }
    o = put_values(b, b->col - 1, o, end);
    if (b->row < b->n)
      break; /* the buffer is full */
    b->col++;
    b->col_head = false;
  }
  return (long)(o - buf);
}
