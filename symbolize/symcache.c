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
 * Building: every address where an answer may change (line table rows,
 * CU / subprogram / inlined / block ranges, symbol starts and ends:
 * stkr__symfile_boundaries) is collected; between two of them the answer
 * is constant, so one lookup through the DWARF path per interval gives it
 * (the cache answers exactly what the DWARF answers, by construction);
 * equal neighbours are merged, and ranges with equal answers share one
 * stored frame chain.
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

#include "common/stkr_hash.h"
#include "common/stkr_io.h"
#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"

#define VERSION_N 2 /* 2: the word-wise checksum */
#define VERSION ((uint32_t)VERSION_N)
#define STR_(x) #x
#define STR(x) STR_(x)
#define HDR 96u
#define RANGE 16u /* u64 start, u32 first frame, u32 frame count */
#define FRAME 20u /* u32 function, file, line, column, flags */
#define NONE 0xffffffffu
#define F_INLINED 1u

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

/* The checksum covers the header up to itself (offset 88) and everything
 * after the header. */
#define SUM_OFF 88u
#define SUM_SEED 0xcbf29ce484222325ull

uint64_t stkr__symcache_checksum(const uint8_t *file, size_t len) {
  sum_state ss = {SUM_SEED, 0, {0}, 0};
  sum_more(&ss, file, SUM_OFF < len ? SUM_OFF : len);
  if (len > HDR) sum_more(&ss, file + HDR, len - HDR);
  return sum_end(&ss);
}

/* ---- building ------------------------------------------------------------ */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
  bool nomem;
} buf;

static uint8_t *grow(buf *b, size_t add) {
  if (b->n + add > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 65536;
    while (nc < b->n + add) nc *= 2;
    uint8_t *p = realloc(b->p, nc);
    if (!p) {
      b->nomem = true;
      return NULL;
    }
    b->p = p;
    b->cap = nc;
  }
  b->n += add;
  return b->p + b->n - add;
}

typedef struct strtab {
  buf data;
  uint32_t *slot; /* open addressing: offset + 1, 0 = empty */
  size_t cap, n;
} strtab;

static uint64_t str_hash(const char *s, size_t len) {
  return stkr_mix64(stkr_hash_bytes(STKR_HASH_SEED, s, len));
}

static uint32_t intern(strtab *t, const char *s) {
  size_t len, i;
  uint64_t h;
  if (!s) return NONE;
  len = strlen(s);
  h = str_hash(s, len);
  if (2 * (t->n + 1) > t->cap) { /* rehash */
    size_t nc = t->cap ? t->cap * 2 : 4096;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns) {
      t->data.nomem = true;
      return NONE;
    }
    for (size_t k = 0; k < t->cap; k++) {
      if (!t->slot[k]) continue;
      const char *o = (const char *)t->data.p + t->slot[k] - 1;
      size_t j = str_hash(o, strlen(o)) & (nc - 1);
      while (ns[j]) j = (j + 1) & (nc - 1);
      ns[j] = t->slot[k];
    }
    free(t->slot);
    t->slot = ns;
    t->cap = nc;
  }
  for (i = h & (t->cap - 1); t->slot[i]; i = (i + 1) & (t->cap - 1))
    if (strcmp((const char *)t->data.p + t->slot[i] - 1, s) == 0)
      return t->slot[i] - 1;
  if (t->data.n + len + 1 >= NONE) {
    t->data.nomem = true;
    return NONE;
  }
  uint32_t off = (uint32_t)t->data.n;
  uint8_t *d = grow(&t->data, len + 1);
  if (!d) return NONE;
  memcpy(d, s, len + 1);
  t->slot[i] = off + 1;
  t->n++;
  return off;
}

/* Frame chains already stored (ranges with equal answers share them):
 * open addressing, hash of the encoded chain -> (first frame, count). */
typedef struct chains {
  uint64_t *hash;
  uint32_t *first, *count;
  size_t cap, n;
  bool nomem;
} chains;

/* The index of an equal chain stored before, or NONE (then remembers this
 * one at `first`). */
static uint32_t chain_find(chains *c, const buf *frames, const uint8_t *enc,
                           uint32_t n, uint32_t first) {
  uint64_t h = stkr_mix64(stkr_hash_bytes(STKR_HASH_SEED, enc,
                                          (size_t)n * FRAME)) | 1;
  size_t i;
  if (2 * (c->n + 1) > c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 4096;
    uint64_t *nh = calloc(nc, sizeof *nh);
    uint32_t *nf = malloc(nc * sizeof *nf), *nn = malloc(nc * sizeof *nn);
    if (!nh || !nf || !nn) {
      free(nh);
      free(nf);
      free(nn);
      c->nomem = true;
      return NONE;
    }
    for (size_t k = 0; k < c->cap; k++) {
      if (!c->hash[k]) continue;
      size_t j = c->hash[k] & (nc - 1);
      while (nh[j]) j = (j + 1) & (nc - 1);
      nh[j] = c->hash[k];
      nf[j] = c->first[k];
      nn[j] = c->count[k];
    }
    free(c->hash);
    free(c->first);
    free(c->count);
    c->hash = nh;
    c->first = nf;
    c->count = nn;
    c->cap = nc;
  }
  for (i = h & (c->cap - 1); c->hash[i]; i = (i + 1) & (c->cap - 1))
    if (c->hash[i] == h && c->count[i] == n &&
        memcmp(frames->p + (size_t)c->first[i] * FRAME, enc,
               (size_t)n * FRAME) == 0)
      return c->first[i];
  c->hash[i] = h;
  c->first[i] = first;
  c->count[i] = n;
  c->n++;
  return NONE;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sort n addresses: LSD radix, 16 bits per pass, passes whose digit is
 * the same in every address skipped (addresses of one __TEXT share their
 * high bits). qsort took a tenth of a cache build. Falls back to qsort
 * when the scratch copy cannot be allocated. */
static void sort_u64(uint64_t *v, size_t n) {
  uint64_t *tmp = n > 1 ? malloc(n * sizeof *tmp) : NULL, *src = v, *dst = tmp;
  size_t *count = tmp ? malloc(65536 * sizeof *count) : NULL;
  uint64_t all_or = 0, all_and = ~0ull;
  if (!count) {
    free(tmp);
    if (n > 1) qsort(v, n, sizeof *v, cmp_u64);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    all_or |= v[i];
    all_and &= v[i];
  }
  for (unsigned shift = 0; shift < 64; shift += 16) {
    if ((((all_or ^ all_and) >> shift) & 0xffff) == 0) continue;
    memset(count, 0, 65536 * sizeof *count);
    for (size_t i = 0; i < n; i++) count[(src[i] >> shift) & 0xffff]++;
    for (size_t d = 0, sum = 0; d < 65536; d++) {
      size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 0xffff]++] = src[i];
    uint64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != v) memcpy(v, src, n * sizeof *v);
  free(tmp);
  free(count);
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
                       uint32_t nranges, uint32_t nframes, const buf *ranges,
                       const buf *frames, const buf *strs) {
  uint32_t t = 0, sub = 0;
  memset(h, 0, HDR);
  memcpy(h, STKR__SYMCACHE_MAGIC, 8);
  put32(h + 8, VERSION);
  put32(h + 12, HDR);
  put32(h + 16, info->has_uuid ? 16 : 0);
  memcpy(h + 20, info->uuid, 16);
  if (info->arch) (void)stkr_macho_arch_parse(info->arch, &t, &sub);
  put32(h + 52, t);
  put32(h + 56, nranges);
  put32(h + 60, nframes);
  put32(h + 64, (uint32_t)strs->n);
  put32(h + 68, sub);
  put64(h + 72, info->text_vmaddr);
  put64(h + 80, HDR + ranges->n + frames->n + strs->n);
  sum_state ss = {SUM_SEED, 0, {0}, 0};
  sum_more(&ss, h, SUM_OFF);
  sum_more(&ss, ranges->p, ranges->n);
  sum_more(&ss, frames->p, frames->n);
  sum_more(&ss, strs->p, strs->n);
  put64(h + SUM_OFF, sum_end(&ss));
}

int stkr__symcache_write(stkr__symfile *f, const char *path,
                         stkr__symcache_stats *st, char *err, size_t cap) {
  stkr__addrs bd = {0};
  chains ch = {0};
  stkr__symfile_info info;
  strtab strs = {0};
  buf hdr = {0}, ranges = {0}, frames = {0};
  uint64_t lo, hi;
  uint32_t nframes = 0, nranges = 0, prev_first = 0, prev_n = 0;
  bool have_prev = false;
  int rc;

  memset(st, 0, sizeof *st);
  stkr__symfile_get_info(f, &info);
  if ((rc = stkr__symfile_boundaries(f, &bd, &lo, &hi)) < 0) {
    snprintf(err, cap, "%s: %s", info.path,
             rc == -ENOTSUP ? "not a Mach-O file or dSYM (the symbol cache "
                              "holds Mach-O builds only)"
                            : strerror(-rc));
    free(bd.v);
    return rc;
  }
  stkr__addrs_add(&bd, lo);
  sort_u64(bd.v, bd.n);
  for (size_t i = 0; i < bd.n && !bd.nomem; i++) {
    stkr__symres res[STKR__SYM_MAX_INLINE];
    uint8_t enc[STKR__SYM_MAX_INLINE * FRAME];
    uint64_t a = bd.v[i];
    size_t n;
    if (a < lo || (i > 0 && a == bd.v[i - 1])) continue;
    if (a >= hi) break;
    n = stkr__symfile_lookup(f, a, res, STKR__SYM_MAX_INLINE);
    for (size_t k = 0; k < n; k++) {
      uint8_t *p = enc + k * FRAME;
      put32(p, intern(&strs, res[k].function));
      put32(p + 4, intern(&strs, res[k].file));
      put32(p + 8, res[k].line);
      put32(p + 12, res[k].column);
      put32(p + 16, res[k].inlined ? F_INLINED : 0);
    }
    /* The same answer as the range before: that range goes on. */
    if (have_prev && n == prev_n &&
        (n == 0 || memcmp(frames.p + (size_t)prev_first * FRAME, enc,
                          n * FRAME) == 0))
      continue;
    uint32_t first = n ? chain_find(&ch, &frames, enc, (uint32_t)n, nframes) : 0;
    uint8_t *r = grow(&ranges, RANGE);
    if (!r) break;
    if (n && first == NONE) { /* a chain not seen before */
      uint8_t *fp = grow(&frames, n * FRAME);
      if (!fp) break;
      memcpy(fp, enc, n * FRAME);
      first = nframes;
      nframes += (uint32_t)n;
    }
    put64(r, a);
    put32(r + 8, first);
    put32(r + 12, (uint32_t)n);
    prev_first = first;
    prev_n = (uint32_t)n;
    have_prev = true;
    nranges++;
  }
  uint8_t *r = grow(&ranges, RANGE); /* the end: __TEXT's */
  if (r) {
    put64(r, hi);
    put32(r + 8, 0);
    put32(r + 12, 0);
    nranges++;
  }
  free(bd.v);
  if (bd.nomem || ch.nomem || ranges.nomem || frames.nomem || strs.data.nomem ||
      !grow(&hdr, HDR)) {
    snprintf(err, cap, "%s: out of memory", info.path);
    rc = -ENOMEM;
    goto out;
  }
  put_header(hdr.p, &info, nranges, nframes, &ranges, &frames, &strs.data);
  {
    const buf parts[4] = {hdr, ranges, frames, strs.data};
    rc = write_file(path, parts, 4, err, cap);
  }
  st->ranges = nranges;
  st->frames = nframes;
  st->string_bytes = strs.data.n;
  st->file_bytes = HDR + ranges.n + frames.n + strs.data.n;
  st->dwarf_bytes = stkr__symfile_dwarf_bytes(f);
out:
  free(hdr.p);
  free(ranges.p);
  free(frames.p);
  free(strs.data.p);
  free(strs.slot);
  free(ch.hash);
  free(ch.first);
  free(ch.count);
  return rc;
}

/* ---- loading ------------------------------------------------------------- */

struct stkr__symcache {
  uint8_t *map;
  size_t len;
  const uint8_t *ranges, *frames;
  const char *strs;
  uint32_t n_ranges, n_frames, strsz;
  stkr__symfile_info info;
};

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
  if (get32(h + 16) != 0 && get32(h + 16) != 16)
    return bad(err, cap, path, 16, "bad id length");
  c->n_ranges = get32(h + 56);
  c->n_frames = get32(h + 60);
  c->strsz = get32(h + 64);
  need = (uint64_t)HDR + (uint64_t)c->n_ranges * RANGE +
         (uint64_t)c->n_frames * FRAME + c->strsz;
  if (get64(h + 80) != c->len || need != c->len)
    return bad(err, cap, path, 80, "sizes do not add up to the file size "
               "(truncated or damaged)");
  if (get64(h + SUM_OFF) != stkr__symcache_checksum(h, c->len))
    return bad(err, cap, path, SUM_OFF, "checksum mismatch (damaged)");
  if (c->n_ranges == 0) return bad(err, cap, path, 56, "no ranges");
  c->ranges = h + HDR;
  c->frames = c->ranges + (size_t)c->n_ranges * RANGE;
  c->strs = (const char *)c->frames + (size_t)c->n_frames * FRAME;
  if (c->strsz && c->strs[c->strsz - 1] != '\0')
    return bad(err, cap, path, (uint64_t)((const uint8_t *)c->strs - h) +
               c->strsz - 1, "string table not NUL-terminated");
  for (uint32_t i = 0; i < c->n_ranges; i++) {
    const uint8_t *r = c->ranges + (size_t)i * RANGE;
    uint64_t off = (uint64_t)(r - h);
    uint32_t first = get32(r + 8), n = get32(r + 12);
    if (i > 0 && get64(r) <= get64(r - RANGE))
      return bad(err, cap, path, off, "ranges not in increasing order");
    if (n > STKR__SYM_MAX_INLINE || first > c->n_frames ||
        n > c->n_frames - first)
      return bad(err, cap, path, off, "range points outside the frames");
  }
  for (uint32_t i = 0; i < c->n_frames; i++) {
    const uint8_t *f = c->frames + (size_t)i * FRAME;
    uint32_t fn = get32(f), file = get32(f + 4);
    if ((fn != NONE && fn >= c->strsz) || (file != NONE && file >= c->strsz))
      return bad(err, cap, path, (uint64_t)(f - h),
                 "frame names a string outside the string table");
  }
  return 0;
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
  free(c);
}

void stkr__symcache_info(const stkr__symcache *c, stkr__symfile_info *info) {
  *info = c->info;
}

size_t stkr__symcache_lookup(const stkr__symcache *c, uint64_t addr,
                             stkr__symres *out, size_t max) {
  size_t lo = 0, hi = c->n_ranges, n;
  const uint8_t *r;
  while (lo < hi) { /* first range starting above addr */
    size_t mid = (lo + hi) / 2;
    if (get64(c->ranges + mid * RANGE) <= addr) lo = mid + 1;
    else hi = mid;
  }
  /* Before the first range, or at/after the last (the end marker). */
  if (lo == 0 || lo == c->n_ranges) return 0;
  r = c->ranges + (lo - 1) * RANGE;
  n = get32(r + 12);
  if (n > max) n = max;
  for (size_t k = 0; k < n; k++) {
    const uint8_t *f = c->frames + (size_t)(get32(r + 8) + k) * FRAME;
    uint32_t fn = get32(f), file = get32(f + 4);
    out[k] = (stkr__symres){fn == NONE ? NULL : c->strs + fn,
                            file == NONE ? NULL : c->strs + file,
                            get32(f + 8), get32(f + 12),
                            (get32(f + 16) & F_INLINED) != 0};
  }
  return n;
}

#endif /* !__APPLE__ */
