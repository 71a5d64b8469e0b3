/*
 * fuzz_unwind.c: the .eh_frame table builder (unwind/build.c) on arbitrary
 * bytes, as another image's memory or a damaged file would give it, then
 * the hybrid walk (unwind/walk.c) over a stack made of the same bytes with
 * that table.
 *
 * Input: byte 0 picks the architecture (bit 0) and whether datarel has a
 * base (bit 1); bytes 1..8 the section's address; the rest is .eh_frame.
 * Checked besides "no crash, no hang, nothing read outside the input":
 * a table's offsets strictly ascend, its size is bounded by the input's,
 * an error is one of the documented ones, and the walk stores between 1
 * and max PCs. Every table also goes through the recording's table cache
 * format (unwind/uw_store.h): stored and read back, it answers every
 * lookup as built; with one byte of the stored bytes flipped it is
 * refused.
 */
#include "tests/fuzz/fuzz_util.h"

#include <errno.h>
#include <string.h>

#include "common/stkr_hash.h"
#include "unwind/unwind.h"
#include "unwind/uw_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stkr__uw_src src;
  stkr__uw_table *t = NULL;
  stkr__uw_stats st;
  stkr__uw_set set = {0};
  stkr__uw_table *tabs[1];
  uint64_t vaddr = 0, pcs[32], again[32];
  static stkr__uw_cache cache; /* the fast loop too; gen below keeps each input's own */
  uint8_t *copy;
  size_t len;
  uint32_t i;
  int rc;

  if (size < 9) return 0;
  memcpy(&vaddr, data + 1, 8);
  vaddr &= 0xFFFFFFFFull; /* tables hold 32-bit offsets: keep most inputs in range */
  len = size - 9;
  copy = malloc(len ? len : 1); /* exactly len: ASan sees any overread */
  FZ_CHECK(copy != NULL);
  memcpy(copy, data + 9, len);
  memset(&src, 0, sizeof src);
  src.eh_frame = copy;
  src.eh_frame_len = len;
  src.eh_frame_vaddr = vaddr;
  src.data_base = (data[0] & 2) ? vaddr + 0x1000 : 0;
  src.arch = (data[0] & 1) ? STKR__UW_AARCH64 : STKR__UW_X86_64;
  rc = stkr__unwind_table_build(&src, &t, &st);
  FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG);
  FZ_CHECK(st.fdes_bad <= st.fdes);
  if (rc != 0) {
    FZ_CHECK(t == NULL);
    free(copy);
    return 0;
  }
  FZ_CHECK(t != NULL && st.rows == t->n);
  FZ_CHECK(st.table_bytes <= 128 + 10 * (uint64_t)len);
  for (i = 1; i < t->n; i++) FZ_CHECK(t->off[i] > t->off[i - 1]);
  for (i = 0; i < t->n; i++)
    FZ_CHECK(stkr__unwind_table_find(t, t->base + t->off[i]) == stkr__unwind_row(t, i));
  for (i = 0; i < t->n; i++) FZ_CHECK(t->idx[i] < t->n_palette);
  if (t->n != 0) { /* The cache's bytes, and back (any shape: sparse rows, block_shift 32). */
    static const uint8_t id[20] = {1, 2, 3};
    stkr__uw_table *back = NULL;
    stkr__uw_stats st2;
    uint8_t *buf;
    size_t blen;
    FZ_CHECK(stkr__unwind_table_encode(t, &st, &src, id, sizeof id, &buf, &blen) == 0);
    FZ_CHECK(stkr__unwind_table_decode(buf, blen, &src, id, sizeof id, &back, &st2) == 0);
    FZ_CHECK(back->n == t->n && back->lo == t->lo && back->hi == t->hi);
    for (i = 0; i < t->n; i++)
      FZ_CHECK(stkr__unwind_table_find(back, t->base + t->off[i]) == stkr__unwind_row(t, i));
    stkr__unwind_table_free(back);
    buf[vaddr % blen] ^= 0x40; /* one flipped bit: the checksum or a field */
    FZ_CHECK(stkr__unwind_table_decode(buf, blen, &src, id, sizeof id, &back, NULL) == -EINVAL);
    FZ_CHECK(back == NULL);
    free(buf);
  }

  /* Walk a "stack" made of the input's own bytes, starting in each of the
   * first rows, with the table published as a one-image set. */
  tabs[0] = t;
  set.n = 1;
  set.tables = tabs;
  set.gen = ++cache.gen + 1; /* a new set each input: the cache empties itself */
  for (i = 0; i < t->n && i < 8; i++) {
    uintptr_t lo = (uintptr_t)copy, hi = lo + (len & ~(size_t)7);
    stkr__uw_regs r = {t->base + t->off[i], lo + (i * 8) % (len + 1), lo + 16 * i, vaddr};
    unsigned n;
    if ((uintptr_t)copy % 8 != 0) break;
    n = stkr__unwind_walk(&set, &r, lo, hi, pcs, 32, NULL);
    FZ_CHECK(n >= 1 && n <= 32);
    /* With the row cache and memo, twice: the same walk, whichever path
     * it takes (the memo also sees the other starts of this input). */
    FZ_CHECK(stkr__unwind_walk_cached(&set, &cache, &r, lo, hi, again, 32, NULL) == n);
    FZ_CHECK(memcmp(again, pcs, n * sizeof pcs[0]) == 0);
    FZ_CHECK(stkr__unwind_walk_cached(&set, &cache, &r, lo, hi, again, 32, NULL) == n);
    FZ_CHECK(memcmp(again, pcs, n * sizeof pcs[0]) == 0);
    /* Folded as the recorder walks: the same PCs, and the hashes of them. */
    {
      stkr__uw_fold fold = {i % 3, 0, 0, false};
      uint64_t h1 = STKR_STACK_HASH_SEED, h2 = STKR_KEY2_SEED;
      unsigned k;
      FZ_CHECK(stkr__unwind_walk_folded(&set, &cache, &r, lo, hi, again, 32, &fold, NULL) == n);
      FZ_CHECK(memcmp(again, pcs, n * sizeof pcs[0]) == 0);
      for (k = fold.from; k < n; k++) {
        h1 = stkr_stack_hash_step(h1, pcs[k]);
        h2 = stkr_stack_key2_step(h2, pcs[k]);
      }
      FZ_CHECK(fold.h1 == h1 && fold.h2 == h2);
    }
  }
  stkr__unwind_table_free(t);
  free(copy);
  return 0;
}
