/*
 * assemble.c: the builder's rows (build.c) -> the compact table, and
 * looking a pc up in it. Rows are sorted by address, merged, stored as
 * 16-bit indexes into a palette of the distinct rows, with a block index
 * per KiB of code (unwind.h, "one compact row").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_map.h"
#include "unwind/uw_rows.h"

static int cmp_ent(const void *pa, const void *pb) {
  const uw_ent *a = pa, *b = pb;
  int c = stkr_cmp_u64(a->pc, b->pc);
  /* At one address an FDE's end sorts first, so the next FDE's row wins. */
  if (c == 0) c = stkr_cmp_u64(b->row == ROW_END, a->row == ROW_END);
  return c != 0 ? c : stkr_cmp_u64(a->seq, b->seq);
}

/* Sort the entries by address. Each FDE's entries are already in order
 * and contiguous, so FDEs are sorted as units (ten times fewer than rows;
 * often already in order: then nothing moves); only when FDEs overlap
 * (hostile input) are all entries sorted one by one. */
typedef struct uw_group {
  uint64_t pc;
  size_t start, n;
} uw_group;

static int cmp_group(const void *pa, const void *pb) {
  const uw_group *a = pa, *b = pb;
  return stkr_cmp_u64_pair(a->pc, b->pc, a->start, b->start);
}

static int sort_entries(uw_rows *r) {
  uw_ent *e = r->e, *out;
  uw_group *g;
  size_t n = r->n, ng = 0, i, j, k = 0;

  for (i = 1; i < n; i++)
    if (cmp_ent(&e[i - 1], &e[i]) > 0) break;
  if (i >= n) return 0;
  g = malloc(n * sizeof *g);
  out = malloc(n * sizeof *out);
  if (g == NULL || out == NULL) { free(g); free(out); return -ENOMEM; }
  for (i = 0; i < n; i++) {
    if (i == 0 || e[i].seq != e[i - 1].seq) g[ng++] = (uw_group){e[i].pc, i, 0};
    g[ng - 1].n++;
  }
  qsort(g, ng, sizeof *g, cmp_group);
  for (i = 0; i < ng; i++)
    for (j = 0; j < g[i].n; j++) out[k++] = e[g[i].start + j];
  free(g);
  free(r->e);
  r->e = e = out;
  r->cap = n;
  for (i = 1; i < n; i++)
    if (cmp_ent(&e[i - 1], &e[i]) > 0) break;
  if (i < n) qsort(e, n, sizeof *e, cmp_ent); /* overlapping FDEs */
  return 0;
}

/* The palette: the distinct rows in index order, and row -> its index. */
typedef struct uw_pal {
  stkr_map ix; /* row -> palette index */
  uint32_t *rows; /* n distinct rows, in index order */
  size_t n, rows_cap;
} uw_pal;

/* The palette index of row r, adding it when new (at most 65536 rows: the
 * index is 16 bits). */
static int pal_put(uw_pal *p, uint32_t r, uint16_t *out) {
  const uint64_t *v = stkr_map_find(&p->ix, r);

  if (v != NULL) { *out = (uint16_t)*v; return 0; }
  if (p->n == 65536) return -E2BIG;
  if (stkr_grow((void **)&p->rows, &p->rows_cap, p->n + 1, sizeof *p->rows) != 0 ||
      stkr_map_put(&p->ix, r, p->n) != 0)
    return -ENOMEM;
  p->rows[p->n] = r;
  *out = (uint16_t)p->n++;
  return 0;
}

#define UW_BLOCK_SHIFT 10 /* the block index: one entry per KiB of code */

/* Sorted entries -> the table: one row per address (the last wins), equal
 * neighbours merged, FDE ends become FALLBACK. Rows are stored as 16-bit
 * indexes into a palette of the distinct rows (a few hundred in a real
 * image): 6 bytes a row instead of 8, which keeps tables within 1.5x of
 * .eh_frame. A block index (ORC's lookup table) gives, per KiB of code,
 * the rows to search, so a lookup is a few steps over a few cache lines. */
int stkr__uw_assemble(uw_rows *rows, uintptr_t base, stkr__uw_stats *st,
                      stkr__uw_table **out) {
  uw_ent *e = rows->e;
  size_t n = rows->n, i, k = 0, nb;
  stkr__uw_table *t;
  uint32_t *off, *pal, *blk;
  uint16_t *idx;
  size_t bytes;
  uw_pal *p;
  unsigned shift;
  int rc = 0;

  if ((rc = sort_entries(rows)) != 0) return rc;
  e = rows->e;
  p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  for (i = 0; i < n; i++) {
    uint32_t r = e[i].row == ROW_END ? STKR__UW_FALLBACK : e[i].row;
    if (i + 1 < n && e[i + 1].pc == e[i].pc) continue;
    if (k > 0 && e[k - 1].row == r) continue;
    if (k == 0 && r == STKR__UW_FALLBACK) continue; /* leading gap */
    e[k].pc = e[i].pc;
    e[k].row = r;
    k++;
  }
  /* One block per KiB, coarser when the rows are sparse (hostile input can
   * span 4 GiB with two rows): never more blocks than 2 per row + 16, so
   * memory stays bounded by the input. */
  shift = UW_BLOCK_SHIFT;
  while (k && shift < 32 && ((e[k - 1].pc - e[0].pc) >> shift) + 1 > 2 * k + 16) shift++;
  nb = k ? (size_t)((e[k - 1].pc - e[0].pc) >> shift) + 1 : 0;
  /* Indexes first (palette unknown yet): into e[].seq, which is free now. */
  for (i = 0; i < k && rc == 0; i++) {
    uint16_t v = 0;
    rc = pal_put(p, e[i].row, &v);
    e[i].seq = v;
  }
  if (rc != 0) goto out;
  bytes = sizeof *t + p->n * sizeof *pal + k * sizeof *off + nb * sizeof *blk + k * sizeof *idx;
  t = malloc(bytes);
  if (t == NULL) { rc = -ENOMEM; goto out; }
  memset(t, 0, sizeof *t);
  pal = (uint32_t *)(t + 1);
  off = pal + p->n;
  blk = off + k;
  idx = (uint16_t *)(blk + nb);
  if (p->n != 0) memcpy(pal, p->rows, p->n * sizeof *pal); /* no rows: p->rows is NULL */
  for (i = 0; i < k; i++) {
    off[i] = (uint32_t)(e[i].pc - base);
    idx[i] = (uint16_t)e[i].seq;
    st->rows_signal += e[i].row == STKR__UW_SIGNAL;
  }
  { /* blk[j]: the last row starting at or before block j's first byte */
    size_t j, r = 0;
    for (j = 0; j < nb; j++) {
      uint64_t at = (uint64_t)off[0] + ((uint64_t)j << shift);
      while (r + 1 < k && off[r + 1] <= at) r++;
      blk[j] = (uint32_t)r;
    }
  }
  t->base = base;
  t->n = (uint32_t)k;
  t->n_palette = (uint32_t)p->n;
  t->n_blocks = (uint32_t)nb;
  t->block_shift = shift;
  t->off = off;
  t->idx = idx;
  t->palette = pal;
  t->block = blk;
  t->lo = k ? base + off[0] : 0;
  t->hi = k ? base + off[k - 1] : 0;
  st->rows = k;
  st->table_bytes = bytes;
  *out = t;
out:
  stkr_map_free(&p->ix);
  free(p->rows);
  free(p);
  return rc;
}

void stkr__unwind_table_free(stkr__uw_table *t) {
  if (t != NULL && t->shares > 0)
    t->shares--;
  else
    free(t);
}

uint32_t stkr__unwind_table_find(const stkr__uw_table *t, uintptr_t pc) {
  uint32_t lo, hi, key, blk;

  if (t == NULL || t->n == 0 || pc < t->lo || pc >= t->hi) return STKR__UW_FALLBACK;
  key = (uint32_t)(pc - t->base);
  blk = (uint32_t)((uint64_t)(key - t->off[0]) >> t->block_shift);
  /* invariant: off[lo] <= key < off[hi] (off[n] = +inf) */
  lo = t->block[blk];
  hi = blk + 1 < t->n_blocks ? t->block[blk + 1] + 1 : t->n;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t->off[mid] <= key) lo = mid;
    else hi = mid;
  }
  return stkr__unwind_row(t, lo);
}
