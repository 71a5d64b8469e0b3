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

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/push.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "push_native.c copies integers as they are in memory: little-endian"
#endif

/* The block keeps one array per column (a row-major array read through
 * the permutation cost a cache line per value: half of push's time). */
struct stkr__evblock {
  uint64_t rec;
  uint64_t *n, *tid, *thread, *site, *ts, *ts_mono, *stack, *payload;
  uint32_t *pid, *bucket; /* bucket: the site's index in `sites` */
  uint16_t *day;
  uint8_t *stack_truncated;
  size_t rows, cap;
  /* The chunk's distinct sites: id -> bucket, and the ids by bucket. */
  stkr_map site_bucket;
  uint64_t *sites;
  size_t n_sites, cap_sites;
  uint32_t *perm; /* rows in sending order, made by seal */
  /* Encoding: next column (0: the block header; N_COLS + 1: done), the
   * row within it, and whether that column's header went out. */
  size_t col, row;
  bool col_head;
};

/* The columns in stkr__cols_events' order: name, type, width, and which
 * array holds them (REC: the block's constant). */
#define REC ((size_t)-1)
#define ARR(f) offsetof(struct stkr__evblock, f)
static const struct {
  const char *name, *type;
  unsigned width;
  size_t arr;
} k_cols[] = {
    {"day", "Date", 2, ARR(day)},
    {"rec", "UInt64", 8, REC},
    {"pid", "UInt32", 4, ARR(pid)},
    {"n", "UInt64", 8, ARR(n)},
    {"tid", "UInt64", 8, ARR(tid)},
    {"thread", "UInt64", 8, ARR(thread)},
    {"site", "UInt64", 8, ARR(site)},
    {"ts", "UInt64", 8, ARR(ts)},
    {"ts_mono", "UInt64", 8, ARR(ts_mono)},
    {"stack", "UInt64", 8, ARR(stack)},
    {"payload", "UInt64", 8, ARR(payload)},
    {"stack_truncated", "UInt8", 1, ARR(stack_truncated)},
};
#define N_COLS (sizeof k_cols / sizeof k_cols[0])

static void **column(stkr__evblock *b, size_t arr) {
  return (void **)((char *)b + arr);
}

int stkr__evblock_create(stkr__evblock **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void stkr__evblock_free(stkr__evblock *b) {
  if (b == NULL)
    return;
  for (size_t c = 0; c < N_COLS; c++)
    if (k_cols[c].arr != REC)
      free(*column(b, k_cols[c].arr));
  free(b->bucket);
  stkr_map_free(&b->site_bucket);
  free(b->sites);
  free(b->perm);
  free(b);
}

void stkr__evblock_reset(stkr__evblock *b, uint64_t rec) {
  b->rec = rec;
  b->rows = 0;
  b->n_sites = 0;
  stkr_map_clear(&b->site_bucket);
  b->col = b->row = 0;
  b->col_head = false;
}

size_t stkr__evblock_rows(const stkr__evblock *b) { return b->rows; }

/* Room for at least one more row in every column (and perm, bucket). */
static int grow(stkr__evblock *b) {
  size_t cap = b->cap ? 2 * b->cap : 4096, c;
  void *q;
  for (c = 0; c <= N_COLS; c++) {
    size_t w = c < N_COLS ? k_cols[c].width : 4;
    void **a = c < N_COLS ? column(b, k_cols[c].arr) : (void **)&b->bucket;
    if (c < N_COLS && k_cols[c].arr == REC)
      continue;
    if ((q = realloc(*a, cap * w)) == NULL)
      return -ENOMEM;
    *a = q;
  }
  if ((q = realloc(b->perm, cap * sizeof *b->perm)) == NULL)
    return -ENOMEM;
  b->perm = q;
  b->cap = cap;
  return 0;
}

/* @return the bucket of site (added if new), or -ENOMEM. */
static long site_bucket(stkr__evblock *b, uint64_t site) {
  uint64_t *k = stkr_map_find(&b->site_bucket, site);
  int err;
  if (k != NULL)
    return (long)*k;
  if ((err = stkr_grow((void **)&b->sites, &b->cap_sites, b->n_sites + 1,
                       sizeof *b->sites)) != 0 ||
      (err = stkr_map_put(&b->site_bucket, site, b->n_sites)) != 0)
    return err;
  b->sites[b->n_sites] = site;
  return (long)b->n_sites++;
}

int stkr__evblock_add(stkr__evblock *b, const stkr__ev_row *row) {
  long k = site_bucket(b, row->site);
  size_t i = b->rows;
  int err;
  if (k < 0)
    return (int)k;
  if (i >= UINT32_MAX)
    return -ENOMEM; /* perm holds 32-bit indexes; chunks are <= 2^23 */
  if (i == b->cap && (err = grow(b)) != 0)
    return err;
  b->n[i] = row->n;
  b->tid[i] = row->tid;
  b->thread[i] = row->thread;
  b->site[i] = row->site;
  b->ts[i] = row->ts;
  b->ts_mono[i] = row->ts_mono;
  b->stack[i] = row->stack;
  b->payload[i] = row->payload;
  b->pid[i] = row->pid;
  b->bucket[i] = (uint32_t)k;
  b->day[i] = row->day;
  b->stack_truncated[i] = row->stack_truncated;
  b->rows = i + 1;
  return 0;
}

/* A counting sort of the rows by their site's rank: stable, O(rows). */
int stkr__evblock_seal(stkr__evblock *b) {
  size_t i, *start;
  uint64_t *sorted;
  uint32_t *rank;

  b->col = b->row = 0;
  b->col_head = false;
  if (b->rows == 0)
    return 0;
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
  qsort(sorted, b->n_sites, sizeof *sorted, stkr_qsort_u64);
  for (i = 0; i < b->n_sites; i++) { /* bucket -> rank, by lookup */
    uint64_t *r = bsearch(&b->sites[i], sorted, b->n_sites, sizeof *sorted,
                          stkr_qsort_u64);
    rank[i] = (uint32_t)(r - sorted);
  }
  for (i = 0; i < b->rows; i++) /* rows per rank, then where each starts */
    start[rank[b->bucket[i]] + 1]++;
  for (i = 1; i <= b->n_sites; i++)
    start[i] += start[i - 1];
  for (i = 0; i < b->rows; i++)
    b->perm[start[rank[b->bucket[i]]]++] = (uint32_t)i;
  free(sorted);
  free(rank);
  free(start);
  return 0;
}

static size_t put_str(uint8_t *o, const char *s) {
  size_t n = strlen(s), k = stkr__leb128(o, n);
  memcpy(o + k, s, n);
  return k + n;
}

/* Values of column c from row b->row on, while they fit in [o, end). */
static uint8_t *put_values(stkr__evblock *b, size_t c, uint8_t *o,
                           const uint8_t *end) {
  const unsigned w = k_cols[c].width;
  const uint32_t *perm = b->perm;
  size_t i = b->row, room = (size_t)(end - o) / w;
  size_t stop = b->rows - i < room ? b->rows : i + room;

  if (k_cols[c].arr == REC) {
    for (; i < stop; i++, o += 8)
      memcpy(o, &b->rec, 8);
  } else {
    const uint8_t *a = *column(b, k_cols[c].arr);
    /* One loop per width, so that each memcpy is a plain load and store. */
    switch (w) {
    case 1:
      for (; i < stop; i++, o++)
        *o = a[perm[i]];
      break;
    case 2:
      for (; i < stop; i++, o += 2)
        memcpy(o, a + 2 * (size_t)perm[i], 2);
      break;
    case 4:
      for (; i < stop; i++, o += 4)
        memcpy(o, a + 4 * (size_t)perm[i], 4);
      break;
    default:
      for (; i < stop; i++, o += 8)
        memcpy(o, a + 8 * (size_t)perm[i], 8);
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
      o += stkr__leb128(o, N_COLS);
      o += stkr__leb128(o, b->rows);
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
    if (b->row < b->rows)
      break; /* the buffer is full */
    b->col++;
    b->col_head = false;
  }
  return (long)(o - buf);
}
