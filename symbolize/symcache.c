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
 * Building: symcache_build.c (the format: symcache_format.h).
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

#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symcache_format.h"

uint64_t stkr__symcache_checksum(const uint8_t *file, size_t len) {
  sum_state ss = {SUM_SEED, 0, {0}, 0};
  if (len > HDR) sum_more(&ss, file + HDR, len - HDR);
  sum_more(&ss, file, SUM_OFF < len ? SUM_OFF : len);
  return sum_end(&ss);
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
  if (!S_ISREG(st.st_mode)) {
    /* A directory, FIFO or device under a cache's name: its st_size is no
     * file size (a device's 0, or a mapping that fails or never ends). */
    snprintf(err, cap, "%s: not a regular file", path);
    free(c);
    return -EINVAL;
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
  /* Checked whole, so every page of the map is resident now, though
   * lookups touch few (a binary search in a bucket): libc's cache held
   * 3.6 MB of RSS in a recorded app that resolved a handful of PCs. Drop
   * them from this process; the page cache keeps them for the faults of
   * later lookups. */
  if (c->len) (void)madvise(c->map, c->len, MADV_DONTNEED);
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
