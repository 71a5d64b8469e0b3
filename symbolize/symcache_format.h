/*
 * symcache_format.h: the symbol cache's file format (docs/SYMCACHE.md),
 * shared by its writer (symcache_build.c) and its reader (symcache.c)
 * and included by them only (its short names: HDR, NONE, ...).
 */
#ifndef STKR_SYMBOLIZE_SYMCACHE_FORMAT_H
#define STKR_SYMBOLIZE_SYMCACHE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symbolize/symbolize.h"

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

static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline uint64_t get64(const uint8_t *p) {
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

static inline uint64_t sum_fold(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

static inline void sum_more(sum_state *s, const uint8_t *p, size_t n) {
  uint64_t w;
  s->len += n;
  /* (nt < 8 always; said again for gcc -O2, which could not prove it.) */
  while (s->nt != 0 && s->nt < 8 && n) { /* finish a word begun before */
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

static inline uint64_t sum_end(sum_state *s) {
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

#endif /* STKR_SYMBOLIZE_SYMCACHE_FORMAT_H */
