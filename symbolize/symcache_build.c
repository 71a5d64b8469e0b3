/*
 * symcache_build.c: building the per-build symbol cache (format:
 * docs/SYMCACHE.md, symcache_format.h; reading it: symcache.c).
 *
 * The walk (symcache_walk.c, stkr__symfile_walk) cuts __TEXT at every
 * address where an answer may change (line table rows, CU / subprogram /
 * inlined / block ranges, symbol starts and ends) and gives each
 * interval's frames, the ones the DWARF path gives at any address in it
 * (the cache answers exactly what the DWARF answers), read in one pass
 * over each CU; equal neighbours are merged, and ranges with equal
 * answers share one stored frame chain. The frames are written to the
 * file as they come; the ranges and strings, which follow them, at the
 * end.
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
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_io.h"
#include "common/stkr_map.h"
#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"
#include "symbolize/symcache_format.h"

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

/* s's ordinal (len bytes, h: stkr_hash_bytes(STKR_HASH_SEED, s, len)),
 * adding it when new. @return NONE when out of memory (then
 * data.nomem). */
static uint32_t intern(strtab *t, const char *s, size_t len, uint64_t h) {
  size_t pos, k;
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
/* Frames kept in memory (4 MB), the others written out (see builder). */
size_t stkr__symcache_frames_kept = (size_t)1 << 18;
#define FRAMES_KEPT stkr__symcache_frames_kept

/* The first frame of an equal chain stored before, or NONE (then
 * remembers this one at `first`; *nomem when it cannot). h: the hash of
 * the n frames at enc. */
static uint32_t chain_find(stkr_index *x, const buf *frames, uint32_t out,
                           const uint8_t *enc, uint32_t n, uint64_t h,
                           uint32_t first, bool *nomem) {
  size_t pos, k;
  for (k = stkr_index_first(x, h, &pos); k != STKR_INDEX_NONE;
       k = stkr_index_next(x, h, &pos))
    if (k % 32 == n && memcmp(frames->p + (k / 32 - out) * FRAME, enc,
                              (size_t)n * FRAME) == 0)
      return (uint32_t)(k / 32);
  if (x->n >= CHAIN_GEN) stkr_index_clear(x); /* a new generation */
  if (stkr_index_add(x, h, CHAIN_KEY(first, n)) != 0) *nomem = true;
  return NONE;
}

/* The output, written as it is made: a temporary file next to the
 * cache, renamed over it once whole. */
typedef struct outfile {
  char tmp[4200]; /* "": none (renamed, or never made) */
  int fd;         /* -1: closed */
  sum_state sum; /* of what was written after the header */
} outfile;

/* Create o->tmp for path, positioned after the header. */
static int out_open(outfile *o, const char *path, char *err, size_t cap) {
  int rc;
  snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", path);
  o->sum = (sum_state){SUM_SEED, 0, {0}, 0};
  if ((o->fd = mkstemp(o->tmp)) >= 0 && lseek(o->fd, HDR, SEEK_SET) == HDR)
    return 0;
  rc = -errno;
  snprintf(err, cap, "%s: %s", path, strerror(errno));
  if (o->fd >= 0) {
    close(o->fd);
    unlink(o->tmp);
    o->fd = -1;
  }
  o->tmp[0] = '\0';
  return rc;
}

/* Bytes per write(2). The ranges (16.7 MB on a 100 MB dSYM) went out in
 * one write that took 35-105 ms of the answering thread in the kernel
 * (copy_folio_from_iter_atomic), against 0.4 ms per MB in 1 MB writes
 * (this 6.18 kernel, ext4; the whole file's writes: 71-138 ms -> 40-48). */
#define OUT_CHUNK ((size_t)1 << 20)
/* Append n bytes to the body. @return 0 or -errno. */
static int out_put(outfile *o, const void *p, size_t n) {
  const uint8_t *c = p;
  int rc = 0;
  /* An image without frames or strings (a stripped binary) has empty
   * parts, whose pointers are NULL: memcpy(dst, NULL, 0) is still
   * undefined behaviour (UBSan stops at it). */
  if (n == 0) return 0;
  sum_more(&o->sum, p, n);
  for (size_t k; n && rc == 0; c += k, n -= k) {
    k = n < OUT_CHUNK ? n : OUT_CHUNK;
    rc = stkr_write_all(o->fd, c, k);
  }
  return rc;
}

/* The body written so far is forgotten (the walk restarts). */
static int out_rewind(outfile *o) {
  o->sum = (sum_state){SUM_SEED, 0, {0}, 0};
  return lseek(o->fd, HDR, SEEK_SET) == HDR ? 0 : -errno;
}

/* The header at 0 and the file at its size, renamed to path. @return 0
 * or -errno (then out_abort). */
static int out_close(outfile *o, const uint8_t *hdr, uint64_t size,
                     const char *path) {
  int rc = 0;
  /* (ftruncate: a restarted walk may have written more before) */
  if (lseek(o->fd, 0, SEEK_SET) != 0 || ftruncate(o->fd, (off_t)size) != 0)
    return -errno;
  if ((rc = stkr_write_all(o->fd, hdr, HDR)) < 0) return rc;
  /* No fsync: a cache is derived data, and one torn by a crash fails its
   * checksum on load and is rebuilt. */
  if (fchmod(o->fd, 0644) != 0) return -errno;
  rc = close(o->fd) != 0 ? -errno : 0;
  o->fd = -1;
  if (rc == 0 && rename(o->tmp, path) != 0) rc = -errno;
  if (rc == 0) o->tmp[0] = '\0';
  return rc;
}

/* The build failed: no file. */
static void out_abort(outfile *o) {
  if (o->fd >= 0) close(o->fd);
  if (o->tmp[0]) unlink(o->tmp);
  o->fd = -1;
  o->tmp[0] = '\0';
}

/* The header (docs/SYMCACHE.md) of a file of `size` bytes, checksum
 * last: body, the sum of the bytes after the header. */
static void put_header(uint8_t *h, const stkr__symfile_info *info,
                       const uint8_t *id, uint32_t id_len, uint32_t nranges,
                       uint32_t nframes, uint32_t strsz, uint64_t base,
                       uint64_t size, sum_state *body) {
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
  put32(h + 64, strsz);
  put32(h + 68, sub);
  put64(h + 72, info->text_vmaddr);
  put64(h + 80, size);
  put64(h + BASE_OFF, base);
  sum_more(body, h, SUM_OFF);
  put64(h + SUM_OFF, sum_end(body));
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
  /* The frames are written to the file as they come (they are most of
   * it, and come first): `frames` holds those from frames_out on, at
   * most FRAMES_KEPT (see add_range). Ranges and strings follow them in
   * the file, so they are kept until the end. */
  outfile *out;
  int io_rc; /* writing it failed: -errno */
  buf ranges, frames;
  uint32_t nframes, frames_out, nranges, prev_n;
  bool have_prev;
  uint8_t prev_enc[STKR__SYM_MAX_INLINE * FRAME]; /* the last range's */
  uint64_t base; /* the first range's start (nranges > 0) */
} builder;

static uint32_t intern_hashed_cb(void *arg, const char *s, size_t len,
                                 uint64_t h) {
  builder *b = arg;
  size_t cap = b->seen.cap, n = b->seen.n;
  uint32_t id = intern(&b->seen, s, len, h);
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

static uint32_t intern_cb(void *arg, const char *s) {
  if (!s) return NONE;
  size_t len = strlen(s);
  return intern_hashed_cb(arg, s, len, stkr_hash_bytes(STKR_HASH_SEED, s, len));
}

/* A string of hash h comes soon: its first slot in the index (a cache
 * and TLB miss: 200 000 strings of a 100 MB dSYM, an 8 MB index, were a
 * fifth of the answering thread's time waiting there). */
static void intern_soon_cb(void *arg, uint64_t h) {
  const stkr_index *x = &((builder *)arg)->seen.ix;
  if (x->cap) __builtin_prefetch(&x->slot[stkr_mix64(h) & (x->cap - 1)]);
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
  int rc;
  if (b->have_prev && n == b->prev_n &&
      memcmp(b->prev_enc, pd->enc, n * FRAME) == 0)
    return 0;
  if (n)
    first = chain_find(&b->chains, &b->frames, b->frames_out, pd->enc, n,
                       pd->hash, b->nframes, &b->nomem);
  if (b->nomem) return -ENOMEM;
  if (n && first == NONE &&
      b->frames.n + n * FRAME > FRAMES_KEPT * FRAME) {
    /* Out to the file; chains stored before are no longer found (a
     * repeat of one is stored again: the same answers). */
    if ((rc = out_put(b->out, b->frames.p, b->frames.n)) < 0)
      return b->io_rc = rc;
    b->frames_out = b->nframes;
    b->frames.n = 0;
    stkr_index_clear(&b->chains);
  }
  if (n && first == NONE) { /* a chain not seen before */
    uint8_t *fp = grow(&b->frames, n * FRAME);
    if (!fp) return -ENOMEM;
    memcpy(fp, pd->enc, n * FRAME);
    first = b->nframes;
    b->nframes += n;
  }
  rc = put_range(b, pd->start, n ? first : NONE);
  memcpy(b->prev_enc, pd->enc, n * FRAME);
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
   * two frames per interval (18.9 MB dSYM: 0.77) up to FRAMES_KEPT:
   * growing them by doubling copied them each time. Pages never written
   * cost nothing. */
  size_t nf = 2 * n < FRAMES_KEPT ? 2 * n : FRAMES_KEPT;
  if (!reserve(&b->ranges, (n + 1) * RANGE) ||
      !reserve(&b->frames, (nf + STKR__SYM_MAX_INLINE) * FRAME))
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
  b->nframes = b->frames_out = b->nranges = b->prev_n = 0;
  b->have_prev = false;
  if (b->nomem) return -ENOMEM;
  return b->io_rc = out_rewind(b->out);
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

/* The end of the file after the walk: the frames still in memory, the
 * ranges, the strings, then the header. @return 0 or -errno (err set). */
static int finish(builder *b, const stkr__symfile_info *info,
                  const uint8_t *id, uint32_t id_len, uint64_t *size,
                  const char *path, char *err, size_t cap) {
  uint8_t hdr[HDR];
  int rc = out_put(b->out, b->frames.p, b->frames.n);
  if (rc == 0) rc = out_put(b->out, b->ranges.p, b->ranges.n);
  if (rc == 0) rc = out_put(b->out, b->strs.p, b->strs.n);
  if (rc < 0) {
    snprintf(err, cap, "%s: %s", path, strerror(-rc));
    return rc;
  }
  *size = HDR + (uint64_t)b->nframes * FRAME + b->ranges.n + b->strs.n;
  put_header(hdr, info, id, id_len, b->nranges, b->nframes,
             (uint32_t)b->strs.n, b->base, *size, &b->out->sum);
  if ((rc = out_close(b->out, hdr, *size, path)) < 0)
    snprintf(err, cap, "%s: %s", path, strerror(-rc));
  return rc;
}

int stkr__symcache_write(stkr__symfile *f, const char *path,
                         stkr__symcache_stats *st, char *err, size_t cap) {
  builder b;
  stkr__symfile_info info;
  outfile out;
  uint64_t hi, size = 0;
  int rc;

  memset(st, 0, sizeof *st);
  memset(&b, 0, sizeof b);
  stkr__symfile_get_info(f, &info);
  if ((rc = out_open(&out, path, err, cap)) < 0) return rc;
  b.out = &out;
  const stkr__symwalk_ops ops = {intern_cb,  range_cb,         expect_cb,
                                 &b,         restart_cb,       false,
                                 intern_hashed_cb, intern_soon_cb};
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
  if (b.io_rc) {
    snprintf(err, cap, "%s: %s", path, strerror(-b.io_rc));
    rc = b.io_rc;
    goto out;
  }
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
  if (rc < 0 || b.nomem || b.seen.data.nomem) {
    snprintf(err, cap, "%s: out of memory", info.path);
    rc = -ENOMEM;
    goto out;
  }
  rc = finish(&b, &info, is_elf ? elf.id : info.uuid,
              is_elf ? (uint32_t)elf.id_len : info.has_uuid ? 16 : 0, &size,
              path, err, cap);
  st->ranges = b.nranges;
  st->frames = b.nframes;
  st->string_bytes = b.strs.n;
  st->file_bytes = size;
  st->dwarf_bytes = is_elf ? elf.dwarf_bytes : stkr__symfile_dwarf_bytes(f);
  snprintf(st->debug_not_used, sizeof st->debug_not_used, "%s",
           is_elf ? elf.debug_not_used : "");
out:
  out_abort(&out); /* (nothing left when finished) */
  free(b.ranges.p);
  free(b.frames.p);
  free(b.strs.p);
  strtab_free(&b.seen);
  free(b.stored);
  stkr_index_free(&b.chains);
  return rc;
}

#endif /* !__APPLE__ */
