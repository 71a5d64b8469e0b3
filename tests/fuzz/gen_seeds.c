/*
 * gen_seeds.c: turns recordings into the fuzz targets' seed corpora
 * (tests/fuzz/gen_corpus.sh runs it; the output is committed under
 * tests/fuzz/corpus/).
 *
 *   gen_seeds OUT_DIR SEGMENT_FILE...
 *
 * Also writes the fixture's standard recording (tests/fixture.c: sessions,
 * drops, counters, truncated payloads) first. For every segment file:
 *   OUT/frames/<name> and OUT/cli/<name>: the file as is;
 *   OUT/batch/<name>.all: its batches decompressed, joined by the batch
 *     target's separator; OUT/batch/<name>.<k>: batch k alone (first 4).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "tests/fixture.h"

#define SEP "#STKRB#\n"

static int put(const char *dir, const char *sub, const char *name,
               const void *p, size_t n) {
  char path[4096];
  FILE *f;

  snprintf(path, sizeof path, "%s/%s", dir, sub);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
  f = fopen(path, "wb");
  if (f == NULL || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
    fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

static int seed_file(const char *out, const char *path, const char *name) {
  FILE *f = fopen(path, "rb");
  uint8_t *data;
  long len;
  size_t off = 0, all_len = 0;
  uint8_t *all = NULL;
  int k = 0;

  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0) {
    fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
    return -1;
  }
  rewind(f);
  data = malloc((size_t)len + 1);
  if (fread(data, 1, (size_t)len, f) != (size_t)len) {
    fclose(f);
    return -1;
  }
  fclose(f);
  if (put(out, "frames", name, data, (size_t)len) || put(out, "cli", name, data, (size_t)len))
    return -1;
  while (off < (size_t)len) {
    size_t fl = ZSTD_findFrameCompressedSize(data + off, (size_t)len - off);
    unsigned long long cs;
    uint8_t *raw;
    size_t rl;
    char bname[512];

    if (ZSTD_isError(fl))
      break; /* a torn tail: the frames before it are seeds enough */
    cs = ZSTD_getFrameContentSize(data + off, fl);
    if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN ||
        cs > (64u << 20))
      break;
    raw = malloc(cs + 1);
    rl = ZSTD_decompress(raw, cs, data + off, fl);
    if (!ZSTD_isError(rl)) {
      if (k < 4) {
        snprintf(bname, sizeof bname, "%s.%d", name, k);
        if (put(out, "batch", bname, raw, rl))
          return -1;
      }
      all = realloc(all, all_len + rl + sizeof(SEP));
      if (all_len) {
        memcpy(all + all_len, SEP, sizeof(SEP) - 1);
        all_len += sizeof(SEP) - 1;
      }
      memcpy(all + all_len, raw, rl);
      all_len += rl;
      k++;
    }
    free(raw);
    off += fl;
  }
  if (k > 1) {
    char bname[512];
    snprintf(bname, sizeof bname, "%s.all", name);
    if (put(out, "batch", bname, all, all_len))
      return -1;
  }
  free(all);
  free(data);
  return 0;
}

int main(int argc, char **argv) {
  char dir[4096], path[4200], name[300];
  int i, s;

  if (argc < 2) {
    fprintf(stderr, "usage: gen_seeds OUT_DIR SEGMENT_FILE...\n");
    return 2;
  }
  snprintf(dir, sizeof dir, "%s", fx_tmpdir("gen-seeds"));
  if (fx_std_write(dir, FX_PID) != 0)
    return 1;
  for (s = 1; s <= 2; s++) {
    snprintf(path, sizeof path, "%s/stackrec-%u-%06d.zst", dir, FX_PID, s);
    snprintf(name, sizeof name, "fixture-%d.zst", s);
    if (seed_file(argv[1], path, name))
      return 1;
  }
  for (i = 2; i < argc; i++) {
    const char *base = strrchr(argv[i], '/');
    snprintf(name, sizeof name, "rec-%d-%s", i - 1, base ? base + 1 : argv[i]);
    if (seed_file(argv[1], argv[i], name))
      return 1;
  }
  return 0;
}
