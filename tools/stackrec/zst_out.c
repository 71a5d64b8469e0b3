/*
 * zst_out.c: a stdio stream that zstd-compresses what is written to it,
 * for `export -o FILE.zst` (per-event formats are hundreds of bytes to
 * kilobytes per event: a 10 M-event jsonl export is gigabytes of text,
 * which compresses 20-50x).
 *
 * Built on fopencookie(3), so every writer keeps its FILE *. The output is
 * one zstd frame with the content checksum on, as `zstd -d` expects.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <zstd.h>

#include "tools/stackrec/cli.h"

typedef struct zst_out {
  ZSTD_CCtx *cctx;
  FILE *raw;    /* owned: closed with the stream */
  char buf[1 << 16];
} zst_out;

/* Compress in[0..n) (mode ZSTD_e_continue or ZSTD_e_end) and write what
 * comes out. @return 0 or -1 with errno set. */
static int pump(zst_out *z, const void *in, size_t n, ZSTD_EndDirective mode) {
  ZSTD_inBuffer ib = {in, n, 0};
  size_t left;

  do {
    ZSTD_outBuffer ob = {z->buf, sizeof z->buf, 0};
    left = ZSTD_compressStream2(z->cctx, &ob, &ib, mode);
    if (ZSTD_isError(left)) {
      errno = ENOMEM; /* zstd's own errors here are allocation failures */
      return -1;
    }
    if (ob.pos > 0 && fwrite(z->buf, 1, ob.pos, z->raw) != ob.pos)
      return -1; /* fwrite set errno */
  } while (mode == ZSTD_e_end ? left != 0 : ib.pos < ib.size);
  return 0;
}

static ssize_t zst_write(void *cookie, const char *p, size_t n) {
  return pump(cookie, p, n, ZSTD_e_continue) == 0 ? (ssize_t)n : -1;
}

static int zst_close(void *cookie) {
  zst_out *z = cookie;
  int rc = pump(z, NULL, 0, ZSTD_e_end), saved = errno;

  if (fclose(z->raw) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  ZSTD_freeCCtx(z->cctx);
  free(z);
  errno = saved;
  return rc;
}

FILE *stkr_cli_zstd_writer(FILE *raw) {
  static const cookie_io_functions_t io = {NULL, zst_write, NULL, zst_close};
  zst_out *z = calloc(1, sizeof *z);
  FILE *f;

  if (z == NULL || (z->cctx = ZSTD_createCCtx()) == NULL) {
    free(z);
    errno = ENOMEM;
    return NULL;
  }
  ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
  z->raw = raw;
  if ((f = fopencookie(z, "w", io)) == NULL) {
    ZSTD_freeCCtx(z->cctx);
    free(z);
    errno = ENOMEM;
  }
  return f;
}
