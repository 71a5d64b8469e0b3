/*
 * symcache.c: the per-build symbol cache (format: docs/SYMCACHE.md).
 *
 * Why: reading DWARF costs microseconds per address and tens of MB of
 * libdw tables per image; a fleet's recordings hit the same builds again
 * and again. The cache stores the answers themselves: the __TEXT of one
 * build cut into address ranges, each with the frames any address in it
 * resolves to (innermost first, inline chain included), over interned
 * strings. A lookup is one binary search in a mapped file.
 *
 * Building: the walk (symcache_walk.c, stkr__symfile_walk) cuts __TEXT at
 * every address where an answer may change (line table rows, CU /
 * subprogram / inlined / block ranges, symbol starts and ends) and gives
 * each interval's frames, the ones the DWARF path gives at any address in
 * it (the cache answers exactly what the DWARF answers), read in one pass
 * over each CU; equal neighbours are merged, and ranges with equal answers
 * share one stored frame chain.
 *
 * Loading: the whole file is checked before the first lookup (sizes,
 * checksum, every range and frame index, every string offset), so a
 * damaged or hostile cache is refused with the offset named, and lookups
 * need no checks.
 *
 * Only compiled where there is no dyld (like the other Linux backends).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_io.h"
#include "common/stkr_map.h"
#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"

/* 2: the word-wise checksum. 3: ranges of 8 bytes and frames of 16 (the
 * file was as large as the DWARF, and writing it was a third of a build's
 * CPU: zeroing the pages, copying them into the page cache), frames
 * before ranges, the header last in the checksum. */
#define VERSION_N 3
#define VERSION ((uint32_t)VERSION_N)
#define STR_(x) #x
#define STR(x) STR_(x)
#define HDR 104u
#define BASE_OFF 88u /* u64: range starts are offsets from it */
#define RANGE 8u     /* u32 start - base, u32 first frame (NONE: none) */
#define FRAME 16u    /* u32 function, file, line; u32 column | flags */
#define NONE 0xffffffffu
#define F_INLINED (1u << 30)
#define F_LAST (1u << 31) /* the last frame of its chain */
#define COL_MAX (F_INLINED - 1)

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* The checksum (version 2): the bytes as 8-byte little-endian words (the
 * last one zero-padded), each folded in with a multiply, then the length.
 * Version 1 used byte-wise FNV-1a, which took most of the time of opening
 * a large cache (a multiply per byte); this takes one per 8 bytes. A check
 * against damage, not against forgery. */
typedef struct sum_state {
  uint64_t h, len;
  uint8_t tail[8];
  size_t nt;
} sum_state;

static uint64_t sum_fold(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

static void sum_more(sum_state *s, const uint8_t *p, size_t n) {
  uint64_t w;
  s->len += n;
  while (s->nt && n) { /* finish a word begun by the previous part */
    s->tail[s->nt++] = *p++;
    n--;
    if (s->nt == 8) {
      memcpy(&w, s->tail, 8);
      s->h = sum_fold(s->h, w);
      s->nt = 0;
    }
  }
  for (; n >= 8; p += 8, n -= 8) {
    memcpy(&w, p, 8);
    s->h = sum_fold(s->h, w);
  }
  memcpy(s->tail + s->nt, p, n);
  s->nt += n;
}

static uint64_t sum_end(sum_state *s) {
  uint64_t w = 0;
  if (s->nt) {
    memset(s->tail + s->nt, 0, 8 - s->nt);
    memcpy(&w, s->tail, 8);
    s->h = sum_fold(s->h, w);
  }
  return sum_fold(s->h, s->len);
}

/* The checksum covers everything after the header, then the header up to
 * itself (offset 96): the header, with the counts, is known last. */
#define SUM_OFF ((unsigned)STKR__SYMCACHE_SUM_OFF) /* 96 */
#define SUM_SEED 0xcbf29ce484222325ull

uint64_t stkr__symcache_checksum(const uint8_t *file, size_t len) {
  sum_state ss = {SUM_SEED, 0, {0}, 0};
  if (len > HDR) sum_more(&ss, file + HDR, len - HDR);
  sum_more(&ss, file, SUM_OFF < len ? SUM_OFF : len);
  return sum_end(&ss);
}

/* ---- building ------------------------------------------------------------ */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
  bool nomem;
} buf;

/* Room for cap bytes in all. @return false (and nomem) when out of
 * memory. */
static bool reserve(buf *b, size_t cap) {
  if (stkr__grow_big((void **)&b->p, &b->cap, cap, 1) == 0) return true;
  b->nomem = true;
  return false;
}

/* Append add bytes. @return where they go, or NULL (and nomem). */
static uint8_t *grow(buf *b, size_t add) {
  if (!reserve(b, b->n + add)) return NULL;
  b->n += add;
  return b->p + b->n - add;
}

/* Interned strings: each distinct string once in `data`, numbered in
 * order of first appearance (ordinals, dense); offs[k] is string k's
 * offset in data. */
typedef struct strtab {
  buf data;
  uint32_t *offs;
  size_t n, cap;
  stkr_index ix; /* hash of the string -> its ordinal */
} strtab;

/* s's ordinal, adding it when new. @return NONE for NULL or when out of
 * memory (then data.nomem). */
static uint32_t intern(strtab *t, const char *s) {
  size_t len, pos, k;
  uint64_t h;
  if (!s) return NONE;
  len = strlen(s);
  h = stkr_hash_bytes(STKR_HASH_SEED, s, len);
  for (k = stkr_index_first(&t->ix, h, &pos); k != STKR_INDEX_NONE;
       k = stkr_index_next(&t->ix, h, &pos))
    if (strcmp((const char *)t->data.p + t->offs[k], s) == 0) return (uint32_t)k;
  if (t->data.n + len + 1 >= NONE || t->n + 1 >= NONE) {
    t->data.nomem = true;
    return NONE;
  }
  if (stkr_grow((void **)&t->offs, &t->cap, t->n + 1, sizeof *t->offs) != 0) {
    t->data.nomem = true;
    return NONE;
  }
  uint32_t off = (uint32_t)t->data.n;
  uint8_t *d = grow(&t->data, len + 1);
  if (!d || stkr_index_add(&t->ix, h, t->n) != 0) {
    t->data.nomem = true;
    return NONE;
  }
  memcpy(d, s, len + 1);
  t->offs[t->n] = off;
  return (uint32_t)t->n++;
}

static void strtab_free(strtab *t) {
  free(t->data.p);
  free(t->offs);
  stkr_index_free(&t->ix);
}

/* Frame chains already stored (ranges with equal answers share them):
 * hash of the encoded chain -> first frame * 32 + frame count (at most
 * 16). One slot holds both, so a new chain costs one cache miss.
 *
 * The table holds the last CHAIN_GEN chains at most: when it is full it
 * is emptied and fills again. A table of every chain was 64 MB on a 100
 * MB dSYM (1.97 M chains), zeroed by the kernel page by page and missed
 * in memory at every new chain; this one (4 MB) stays in the L3 cache.
 * What it loses is a repeat more than a generation after the chain it
 * repeats, stored again (the same answers, a few frames more): on that
 * dSYM every repeat came within 16 chains, in Debian's libc (118 712
 * chains) 34 686 of 34 714 repeats within 65 536. */
#define CHAIN_KEY(first, n) ((size_t)(first) * 32 + (n))
#define CHAIN_GEN ((size_t)1 << 17)

/* The first frame of an equal chain stored before, or NONE (then
 * remembers this one at `first`; *nomem when it cannot). h: the hash of
 * the n frames at enc. */
static uint32_t chain_find(stkr_index *x, const buf *frames, const uint8_t *enc,
                           uint32_t n, uint64_t h, uint32_t first, bool *nomem) {
  size_t pos, k;
  for (k = stkr_index_first(x, h, &pos); k != STKR_INDEX_NONE;
       k = stkr_index_next(x, h, &pos))
    if (k % 32 == n &&
        memcmp(frames->p + k / 32 * FRAME, enc, (size_t)n * FRAME) == 0)
      return (uint32_t)(k / 32);
  if (x->n >= CHAIN_GEN) stkr_index_clear(x); /* a new generation */
  if (stkr_index_add(x, h, CHAIN_KEY(first, n)) != 0) *nomem = true;
  return NONE;
}

static int write_file(const char *path, const buf *parts, size_t n_parts,
                      char *err, size_t cap) {
  char tmp[4200];
  int fd, rc = 0;
  snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  if ((fd = mkstemp(tmp)) < 0) {
    rc = -errno;
    snprintf(err, cap, "%s: %s", tmp, strerror(errno));
    return rc;
  }
  for (size_t k = 0; k < n_parts && rc == 0; k++)
    rc = stkr_write_all(fd, parts[k].p, parts[k].n);
  /* No fsync: a cache is derived data, and one torn by a crash fails its
   * checksum on load and is rebuilt. */
  if (rc == 0 && fchmod(fd, 0644) != 0) rc = -errno;
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  if (rc < 0) {
    snprintf(err, cap, "%s: %s", path, strerror(-rc));
    unlink(tmp);
  }
  return rc;
}

/* The header (docs/SYMCACHE.md), checksum last. */
static void put_header(uint8_t *h, const stkr__symfile_info *info,
                       const uint8_t *id, uint32_t id_len, uint32_t nranges,
                       uint32_t nframes, uint64_t base, const buf *ranges,
                       const buf *frames, const buf *strs) {
  uint32_t t = 0, sub = 0;
  memset(h, 0, HDR);
  memcpy(h, STKR__SYMCACHE_MAGIC, 8);
  put32(h + 8, VERSION);
  put32(h + 12, HDR);
  put32(h + 16, id_len);
  memcpy(h + 20, id, id_len);
  if (info->arch) (void)stkr_macho_arch_parse(info->arch, &t, &sub);
  put32(h + 52, t);
  put32(h + 56, nranges);
  put32(h + 60, nframes);
  put32(h + 64, (uint32_t)strs->n);
  put32(h + 68, sub);
  put64(h + 72, info->text_vmaddr);
  put64(h + 80, HDR + frames->n + ranges->n + strs->n);
  put64(h + BASE_OFF, base);
  sum_state ss = {SUM_SEED, 0, {0}, 0};
  sum_more(&ss, frames->p, frames->n);
  sum_more(&ss, ranges->p, ranges->n);
  sum_more(&ss, strs->p, strs->n);
  sum_more(&ss, h, SUM_OFF);
  put64(h + SUM_OFF, sum_end(&ss));
}

/* An interval of the walk, encoded, with the hash of its frames. */
#define AHEAD 16
typedef struct pending {
  uint64_t start, hash;
  uint32_t n;
  uint8_t enc[STKR__SYM_MAX_INLINE * FRAME];
} pending;

/* What the walk's intervals become: ranges over shared frame chains. */
typedef struct builder {
  /* The walk's strings are interned into `seen` as it meets them; a string
   * goes into the file's table (`strs`) when a stored frame first uses it,
   * so that the table holds only used strings, in order of first use. */
  strtab seen;
  buf strs;
  uint32_t *stored; /* ordinal in seen -> ordinal in strs, NONE: not yet */
  stkr_index chains;
  pending ahead[AHEAD]; /* encoded intervals not yet added, from head on */
  size_t head, n_ahead;
  bool nomem;
  buf ranges, frames;
  uint32_t nframes, nranges, prev_first, prev_n;
  bool have_prev;
  uint64_t base; /* the first range's start (nranges > 0) */
} builder;

static uint32_t intern_cb(void *arg, const char *s) {
  builder *b = arg;
  size_t cap = b->seen.cap, n = b->seen.n;
  uint32_t id = intern(&b->seen, s);
  if (b->seen.cap != cap) { /* seen.offs grew: so does stored */
    uint32_t *st = realloc(b->stored, b->seen.cap * sizeof *st);
    if (!st) {
      b->nomem = true;
      return NONE;
    }
    b->stored = st;
  }
  /* New (not merely the last one added, asked again): not stored yet. */
  if (id != NONE && b->seen.n != n) b->stored[id] = NONE;
  return id;
}

/* The file's offset of the string of `seen` ordinal id (NONE: none). */
static uint32_t store(builder *b, uint32_t id) {
  if (id == NONE) return NONE;
  if (b->stored[id] == NONE) { /* seen holds each string once: no search */
    const char *s = (const char *)b->seen.data.p + b->seen.offs[id];
    size_t len = strlen(s) + 1;
    uint8_t *d = b->strs.n + len < NONE ? grow(&b->strs, len) : NULL;
    if (!d) {
      b->nomem = true;
      return NONE;
    }
    memcpy(d, s, len);
    b->stored[id] = (uint32_t)(b->strs.n - len);
  }
  return b->stored[id];
}

/* Put the range starting at `start` (its first frame `first`, NONE:
 * none). @return -EFBIG past 4 GB of addresses from the first range. */
static int put_range(builder *b, uint64_t start, uint32_t first) {
  if (b->nranges == 0) b->base = start;
  if (start - b->base > UINT32_MAX) return -EFBIG;
  uint8_t *r = grow(&b->ranges, RANGE);
  if (!r) return -ENOMEM;
  put32(r, (uint32_t)(start - b->base));
  put32(r + 4, first);
  b->nranges++;
  return 0;
}

/* Store one interval: a new range unless it answers as the one before
 * (then that range goes on). */
static int add_range(builder *b, const pending *pd) {
  uint32_t n = pd->n, first = 0;
  if (b->have_prev && n == b->prev_n &&
      (n == 0 || memcmp(b->frames.p + (size_t)b->prev_first * FRAME, pd->enc,
                        n * FRAME) == 0))
    return 0;
  if (n)
    first = chain_find(&b->chains, &b->frames, pd->enc, n, pd->hash,
                       b->nframes, &b->nomem);
  if (b->nomem) return -ENOMEM;
  if (n && first == NONE) { /* a chain not seen before */
    uint8_t *fp = grow(&b->frames, n * FRAME);
    if (!fp) return -ENOMEM;
    memcpy(fp, pd->enc, n * FRAME);
    first = b->nframes;
    b->nframes += n;
  }
  int rc = put_range(b, pd->start, n ? first : NONE);
  b->prev_first = first;
  b->prev_n = n;
  b->have_prev = true;
  return rc;
}

/* One interval of the walk, encoded now (its strings stored in order of
 * first use) and added AHEAD intervals later: most chains are new, and
 * each new one's slot in the chain table is a cache miss (a table of
 * hundreds of thousands of chains), so the slot is prefetched first. */
static int range_cb(void *arg, uint64_t a, const stkr__symframe *fr,
                    size_t n) {
  builder *b = arg;
  pending *pd = &b->ahead[(b->head + b->n_ahead) % AHEAD];
  for (size_t k = 0; k < n; k++) {
    uint8_t *p = pd->enc + k * FRAME;
    put32(p, store(b, fr[k].function));
    put32(p + 4, store(b, fr[k].file));
    put32(p + 8, fr[k].line);
    /* (a column past 2^30 - 1, which no compiler writes: 0, unknown) */
    put32(p + 12, (fr[k].column <= COL_MAX ? fr[k].column : 0) |
                      (fr[k].inlined ? F_INLINED : 0) |
                      (k + 1 == n ? F_LAST : 0));
  }
  pd->start = a;
  pd->n = (uint32_t)n;
  pd->hash = stkr_hash_bytes(STKR_HASH_SEED, pd->enc, n * FRAME);
  if (n && b->chains.cap) /* stkr_index_first's first slot */
    __builtin_prefetch(&b->chains.slot[stkr_mix64(pd->hash) & (b->chains.cap - 1)]);
  if (++b->n_ahead < AHEAD) return 0;
  int rc = add_range(b, &b->ahead[b->head]);
  b->head = (b->head + 1) % AHEAD;
  b->n_ahead--;
  return rc;
}

/* Size the chain table once for the walk's intervals: about half of them
 * start a new chain (18.9 MB dSYM: 395 422 of 851 651), and growing the
 * table step by step re-inserted every chain at each doubling (at most
 * a generation: CHAIN_GEN). */
static int expect_cb(void *arg, size_t n) {
  builder *b = arg;
  /* The ranges too (at most one per interval, and the end), and room for
   * two frames per interval (18.9 MB dSYM: 0.77): growing them by
   * doubling copied them each time. Pages never written cost nothing. */
  if (!reserve(&b->ranges, (n + 1) * RANGE) ||
      !reserve(&b->frames, 2 * n * FRAME))
    return -ENOMEM;
  int rc = stkr_index_reserve(&b->chains, n / 2 < CHAIN_GEN ? n / 2 : CHAIN_GEN);
  if (rc == 0) stkr__huge_hint(b->chains.slot, b->chains.cap * sizeof *b->chains.slot);
  return rc;
}

/* The walk starts again (stkr__symwalk_ops.restart): every range and
 * frame given so far forgotten, and the strings' places in the file. The
 * strings seen stay (the walk may ask for them again, with the same ids). */
static int restart_cb(void *arg) {
  builder *b = arg;
  for (size_t i = 0; i < b->seen.n; i++) b->stored[i] = NONE;
  b->strs.n = b->ranges.n = b->frames.n = 0;
  if (b->chains.cap) memset(b->chains.slot, 0, b->chains.cap * sizeof *b->chains.slot);
  b->chains.n = 0;
  b->head = b->n_ahead = 0;
  b->nframes = b->nranges = b->prev_first = b->prev_n = 0;
  b->have_prev = false;
  return b->nomem ? -ENOMEM : 0;
}

/* The intervals still ahead. */
static int flush_ahead(builder *b) {
  int rc = 0;
  for (; b->n_ahead && rc == 0; b->n_ahead--) {
    rc = add_range(b, &b->ahead[b->head]);
    b->head = (b->head + 1) % AHEAD;
  }
  return rc;
}

int stkr__symcache_write(stkr__symfile *f, const char *path,
                         stkr__symcache_stats *st, char *err, size_t cap) {
  builder b;
  stkr__symfile_info info;
  buf hdr = {0};
  uint64_t hi;
  int rc;

  memset(st, 0, sizeof *st);
  memset(&b, 0, sizeof b);
  stkr__symfile_get_info(f, &info);
  const stkr__symwalk_ops ops = {intern_cb, range_cb, expect_cb, &b,
                                 restart_cb, false};
  stkr__symelf_out elf = {.id_len = 0};
  bool is_elf = false;
  rc = stkr__symfile_walk(f, &ops, &hi);
  if (rc == -ENOTSUP && !info.macho) { /* an ELF file (symcache_elf.c) */
    is_elf = true;
    /* Without restart: the ELF walk reads the whole file first, in one
     * thread, with the handles (and a dwz alternate file) it set up; the
     * streamed build opens handles of its own. */
    stkr__symwalk_ops elf_ops = ops;
    elf_ops.restart = NULL;
    rc = stkr__symelf_walk(info.path, &elf_ops, &elf, err, cap);
    hi = elf.hi;
  }
  if (rc == 0) rc = flush_ahead(&b);
  if (rc < 0 && rc != -ENOMEM && rc != -EFBIG) {
    if (!is_elf) /* a cache given as input */
      snprintf(err, cap, "%s: %s", info.path,
               rc == -ENOTSUP ? "a symbol cache, not a Mach-O file or dSYM "
                                "(not converted again)"
                              : strerror(-rc));
    goto out;
  }
  if (rc == 0) rc = put_range(&b, hi, NONE); /* the end: __TEXT's */
  if (rc == -EFBIG) {
    snprintf(err, cap, "%s: addresses span 4 GB or more: too large for a "
             "symbol cache", info.path);
    goto out;
  }
  if (rc < 0 || b.nomem || b.seen.data.nomem || !grow(&hdr, HDR)) {
    snprintf(err, cap, "%s: out of memory", info.path);
    rc = -ENOMEM;
    goto out;
  }
  put_header(hdr.p, &info, is_elf ? elf.id : info.uuid,
             is_elf ? (uint32_t)elf.id_len : info.has_uuid ? 16 : 0,
             b.nranges, b.nframes, b.base, &b.ranges, &b.frames, &b.strs);
  {
    const buf parts[4] = {hdr, b.frames, b.ranges, b.strs};
    rc = write_file(path, parts, 4, err, cap);
  }
  st->ranges = b.nranges;
  st->frames = b.nframes;
  st->string_bytes = b.strs.n;
  st->file_bytes = HDR + b.frames.n + b.ranges.n + b.strs.n;
  st->dwarf_bytes = is_elf ? elf.dwarf_bytes : stkr__symfile_dwarf_bytes(f);
out:
  free(hdr.p);
  free(b.ranges.p);
  free(b.frames.p);
  free(b.strs.p);
  strtab_free(&b.seen);
  free(b.stored);
  stkr_index_free(&b.chains);
  return rc;
}

/* ---- loading ------------------------------------------------------------- */

struct stkr__symcache {
  uint8_t *map;
  size_t len;
  const uint8_t *ranges, *frames;
  const char *strs;
  uint32_t n_ranges, n_frames, strsz;
  uint64_t base; /* range starts are offsets from it (u32) */
  stkr__symfile_info info;
  /* The ranges of each 2^shift bytes of addresses (NULL: none, search
   * all ranges): bucket b (offsets from base first + [b << shift, (b + 1)
   * << shift)) holds ranges [cnt[b], cnt[b + 1]], counted below its start.
   * A binary search over millions of ranges in the mapped file misses the
   * cache at almost every step; with about BUCKET_RANGES ranges per
   * bucket a lookup is one read here and a search over a cache line or
   * two (2.1 M ranges: 4 MB of index). */
  uint32_t *cnt;
  uint64_t first, nb;
  unsigned shift;
};

#define BUCKET_RANGES 2

static int bad(char *err, size_t cap, const char *path, uint64_t off,
               const char *what) {
  snprintf(err, cap, "%s: offset %llu: %s", path, (unsigned long long)off,
           what);
  return -EINVAL;
}

/* Check everything a lookup will touch. */
static int check(stkr__symcache *c, const char *path, char *err, size_t cap) {
  const uint8_t *h = c->map;
  uint64_t need;
  if (c->len < HDR) return bad(err, cap, path, 0, "shorter than the header");
  if (memcmp(h, STKR__SYMCACHE_MAGIC, 8) != 0)
    return bad(err, cap, path, 0, "not a stackrec symbol cache");
  if (get32(h + 8) != VERSION)
    return bad(err, cap, path, 8, "unsupported format version (this "
               "stackrec reads version " STR(VERSION_N) ": rebuild the cache)");
  if (get32(h + 12) != HDR) return bad(err, cap, path, 12, "bad header size");
  if (get32(h + 16) > 32) /* 16: a Mach-O UUID; an ELF build-id: 1-32 */
    return bad(err, cap, path, 16, "bad id length");
  c->n_ranges = get32(h + 56);
  c->n_frames = get32(h + 60);
  c->strsz = get32(h + 64);
  need = (uint64_t)HDR + (uint64_t)c->n_frames * FRAME +
         (uint64_t)c->n_ranges * RANGE + c->strsz;
  if (get64(h + 80) != c->len || need != c->len)
    return bad(err, cap, path, 80, "sizes do not add up to the file size "
               "(truncated or damaged)");
  if (get64(h + SUM_OFF) != stkr__symcache_checksum(h, c->len))
    return bad(err, cap, path, SUM_OFF, "checksum mismatch (damaged)");
  if (c->n_ranges == 0) return bad(err, cap, path, 56, "no ranges");
  c->frames = h + HDR;
  c->ranges = c->frames + (size_t)c->n_frames * FRAME;
  c->strs = (const char *)c->ranges + (size_t)c->n_ranges * RANGE;
  c->base = get64(h + BASE_OFF);
  if (c->strsz && c->strs[c->strsz - 1] != '\0')
    return bad(err, cap, path, (uint64_t)((const uint8_t *)c->strs - h) +
               c->strsz - 1, "string table not NUL-terminated");
  for (uint32_t i = 0; i < c->n_ranges; i++) {
    const uint8_t *r = c->ranges + (size_t)i * RANGE;
    uint32_t first = get32(r + 4);
    if (i > 0 && get32(r) <= get32(r - RANGE))
      return bad(err, cap, path, (uint64_t)(r - h),
                 "ranges not in increasing order");
    if (first != NONE && first >= c->n_frames)
      return bad(err, cap, path, (uint64_t)(r - h),
                 "range points outside the frames");
  }
  if (c->base > UINT64_MAX - get32(c->ranges + (size_t)(c->n_ranges - 1) * RANGE))
    return bad(err, cap, path, BASE_OFF, "addresses past 2^64");
  /* A chain is read from a range's first frame to one marked last, so
   * every frame must be at most 16 frames before such a one. */
  for (uint32_t i = 0, run = 0; i < c->n_frames; i++) {
    const uint8_t *f = c->frames + (size_t)i * FRAME;
    uint32_t fn = get32(f), file = get32(f + 4);
    if ((fn != NONE && fn >= c->strsz) || (file != NONE && file >= c->strsz))
      return bad(err, cap, path, (uint64_t)(f - h),
                 "frame names a string outside the string table");
    run = get32(f + 12) & F_LAST ? 0 : run + 1;
    if (run == STKR__SYM_MAX_INLINE || (run && i + 1 == c->n_frames))
      return bad(err, cap, path, (uint64_t)(f - h),
                 "frame chain longer than " STR(STKR__SYM_MAX_INLINE)
                 " frames or not ended");
  }
  return 0;
}

/* Range i's start: an offset from c->base. */
static uint32_t range_off(const stkr__symcache *c, size_t i) {
  return get32(c->ranges + i * RANGE);
}

/* The bucket index of c's checked ranges (see struct stkr__symcache);
 * without it (out of memory) lookups search all ranges, with the same
 * answers. */
static void index_buckets(stkr__symcache *c) {
  uint64_t span;
  size_t nb, i = 0;
  unsigned shift = 0;
  c->first = range_off(c, 0);
  span = range_off(c, c->n_ranges - 1) - c->first; /* (under 2^32) */
  while ((span >> shift) > c->n_ranges / BUCKET_RANGES) shift++;
  nb = (size_t)(span >> shift) + 1; /* every address below the end marker */
  if (!(c->cnt = malloc((nb + 1) * sizeof *c->cnt))) return;
  for (size_t b = 0; b <= nb; b++) {
    uint64_t lim = (uint64_t)b << shift; /* bucket b's start - first */
    while (i < c->n_ranges && range_off(c, i) - c->first < lim)
      i++;
    c->cnt[b] = (uint32_t)i;
  }
  c->shift = shift;
  c->nb = nb;
}

int stkr__symcache_open(int fd, const char *path, stkr__symcache **out,
                        char *err, size_t cap) {
  stkr__symcache *c = calloc(1, sizeof *c);
  struct stat st;
  int rc;
  *out = NULL;
  if (!c) return -ENOMEM;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
    snprintf(err, cap, "%s: %s", path, strerror(errno));
    free(c);
    return rc;
  }
  c->len = (size_t)st.st_size;
  c->map = c->len ? mmap(NULL, c->len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  if (c->map == MAP_FAILED) {
    rc = -errno;
    snprintf(err, cap, "%s: cannot map: %s", path, strerror(errno));
    free(c);
    return rc;
  }
  if ((rc = check(c, path, err, cap)) < 0) {
    stkr__symcache_free(c);
    return rc;
  }
  index_buckets(c);
  c->info.macho = true;
  c->info.has_uuid = get32(c->map + 16) == 16;
  memcpy(c->info.uuid, c->map + 20, 16);
  c->info.arch = stkr_macho_arch_name(get32(c->map + 52), get32(c->map + 68));
  c->info.text_vmaddr = get64(c->map + 72);
  c->info.has_dwarf = true;
  *out = c;
  return 0;
}

void stkr__symcache_free(stkr__symcache *c) {
  if (!c) return;
  if (c->map) munmap(c->map, c->len);
  free(c->cnt);
  free(c);
}

void stkr__symcache_info(const stkr__symcache *c, stkr__symfile_info *info) {
  *info = c->info;
}

const uint8_t *stkr__symcache_id(const stkr__symcache *c, size_t *len) {
  *len = get32(c->map + 16);
  return c->map + 20;
}

/* addr as an offset from c->base in *off. @return false: outside every
 * range (below the base, or past the end marker's 32 bits). */
static bool off_of(const stkr__symcache *c, uint64_t addr, uint64_t *off) {
  if (addr < c->base || addr - c->base > UINT32_MAX) return false;
  *off = addr - c->base;
  return true;
}

/* The bucket of offset off in *b. @return false: no bucket index, or off
 * outside every bucket (no answer there). */
static bool bucket_of(const stkr__symcache *c, uint64_t off, uint64_t *b) {
  if (!c->cnt || off < c->first) return false;
  *b = (off - c->first) >> c->shift;
  return *b < c->nb;
}

/* The range holding offset off, or NULL (none: before the first range, at
 * or after the end marker). */
static const uint8_t *find_range(const stkr__symcache *c, uint64_t off) {
  size_t lo = 0, hi = c->n_ranges;
  uint64_t b;
  if (c->cnt) { /* the ranges of off's bucket */
    if (!bucket_of(c, off, &b)) return NULL;
    lo = c->cnt[b];
    hi = c->cnt[b + 1];
  }
  while (lo < hi) { /* first range starting above off */
    size_t mid = (lo + hi) / 2;
    if (range_off(c, mid) <= off) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || lo == c->n_ranges) return NULL;
  return c->ranges + (lo - 1) * RANGE;
}

void stkr__symcache_prefetch(const stkr__symcache *c, uint64_t addr,
                             int step) {
  const uint8_t *r;
  uint64_t off, b;
  if (!off_of(c, addr, &off) || !bucket_of(c, off, &b)) return;
  if (step == 0) {
    __builtin_prefetch(&c->cnt[b]);
  } else if (step == 1) {
    __builtin_prefetch(c->ranges + (size_t)c->cnt[b] * RANGE);
  } else if ((r = find_range(c, off)) != NULL && get32(r + 4) != NONE) {
    __builtin_prefetch(c->frames + (size_t)get32(r + 4) * FRAME);
  }
}

size_t stkr__symcache_lookup(const stkr__symcache *c, uint64_t addr,
                             stkr__symres *out, size_t max) {
  const uint8_t *r;
  uint64_t off;
  size_t n = 0;
  if (!off_of(c, addr, &off) || !(r = find_range(c, off))) return 0;
  /* From the range's first frame to the last of its chain (check: at
   * most STKR__SYM_MAX_INLINE, inside the frames). */
  for (uint32_t k = get32(r + 4), flags = 0; k != NONE && n < max &&
       !(flags & F_LAST); k++) {
    const uint8_t *f = c->frames + (size_t)k * FRAME;
    uint32_t fn = get32(f), file = get32(f + 4);
    flags = get32(f + 12);
    /* The caller reads every string next, and each is a cache miss in a
     * large file: started here, they overlap rather than wait in turn. */
    if (fn != NONE) __builtin_prefetch(c->strs + fn);
    if (file != NONE) __builtin_prefetch(c->strs + file);
    out[n++] = (stkr__symres){fn == NONE ? NULL : c->strs + fn,
                              file == NONE ? NULL : c->strs + file,
                              get32(f + 8), flags & COL_MAX,
                              (flags & F_INLINED) != 0};
  }
  return n;
}

#endif /* !__APPLE__ */
