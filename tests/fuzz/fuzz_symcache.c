/*
 * fuzz_symcache.c: the symbol cache loader (symbolize/symcache.c) on arbitrary
 * bytes: stkr__symcache_open() checks the whole file; when it accepts,
 * lookups at every range start, around it and at random addresses must
 * stay inside the file (ASan) and return what the format allows.
 *
 * Checked besides "no crash, no hang": a refused file's message names the
 * file and (past the magic) an offset inside it; an accepted one's frames
 * have NUL-terminated names inside the string table.
 */
#include "tests/fuzz/fuzz_util.h"

#include <errno.h>
#include <string.h>

#include "symbolize/symbolize.h"

static void one(const uint8_t *data, size_t size);

/* Each input twice: as it is (the checksum stops nearly every mutation),
 * and with a correct checksum written in, so that the structural checks
 * behind it are fuzzed too. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  one(data, size);
  if (size >= STKR__SYMCACHE_SUM_OFF + 8) {
    uint8_t *copy = malloc(size);
    FZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    uint64_t h = stkr__symcache_checksum(copy, size);
    memcpy(copy + STKR__SYMCACHE_SUM_OFF, &h, 8);
    one(copy, size);
    free(copy);
  }
  return 0;
}

static void one(const uint8_t *data, size_t size) {
  char path[64], err[1024];
  stkr__symcache *c = NULL;
  stkr__symres out[STKR__SYM_MAX_INLINE];
  int fd = fz_memfile(data, size, path, sizeof path), rc;

  if (fd < 0) return;
  rc = stkr__symcache_open(fd, path, &c, err, sizeof err);
  close(fd);
  if (rc != 0) {
    unsigned long long off;
    const char *p;
    FZ_CHECK(rc == -EINVAL || rc == -ENOMEM || rc == -ENODEV);
    if (rc == -EINVAL) {
      FZ_CHECK(strncmp(err, path, strlen(path)) == 0);
      p = strstr(err, ": offset ");
      FZ_CHECK(p && sscanf(p, ": offset %llu:", &off) == 1 && off <= size);
    }
    return;
  }
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + 8 <= size && i < 4096; i += 8) {
    uint64_t a;
    memcpy(&a, data + i, 8);
    for (int d = -1; d <= 1; d++) {
      size_t n;
      /* The prefetch steps read the index and the ranges too. */
      for (int step = 0; step <= 2; step++)
        stkr__symcache_prefetch(c, a + (uint64_t)d, step);
      n = stkr__symcache_lookup(c, a + (uint64_t)d, out, STKR__SYM_MAX_INLINE);
      FZ_CHECK(n <= STKR__SYM_MAX_INLINE);
      for (size_t k = 0; k < n; k++) {
        /* Names are in the mapped copy of the input: bounded by it. */
        if (out[k].function) FZ_CHECK(strlen(out[k].function) < size);
        if (out[k].file) FZ_CHECK(strlen(out[k].file) < size);
      }
    }
    x = x * 6364136223846793005ull + 1;
    stkr__symcache_prefetch(c, x, 2);
    (void)stkr__symcache_lookup(c, x, out, STKR__SYM_MAX_INLINE);
  }
  stkr__symcache_free(c);
}
