/*
 * stkr_format.c: segment names and batch encoding (see stkr_format.h).
 */
#include "proto/stkr_format.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd_errors.h>

#include "common/stkr_grow.h"
#include "common/stkr_ringfile.h"

int stkr_fmt_segment_name(char *buf, size_t len, uint32_t pid, uint32_t seq) {
  int n;

  if (buf == NULL || len == 0)
    return -ENAMETOOLONG;
  n = snprintf(buf, len, "stackrec-%u-%06u.zst", (unsigned)pid, (unsigned)seq);
  if (n < 0 || (size_t)n >= len) {
    buf[0] = '\0'; /* never leave a cut name that looks like another seq */
    return -ENAMETOOLONG;
  }
  return 0;
}

/* Parse decimal digits at *p into *v; at least one digit, no overflow. */
static int stkr__parse_u32(const char **p, uint32_t *v) {
  const char *s = *p;
  uint64_t acc = 0;

  if (*s < '0' || *s > '9')
    return -EINVAL;
  for (; *s >= '0' && *s <= '9'; s++) {
    acc = acc * 10 + (uint64_t)(*s - '0');
    if (acc > UINT32_MAX)
      return -EINVAL;
  }
  *p = s;
  *v = (uint32_t)acc;
  return 0;
}

int stkr_fmt_segment_parse(const char *name, uint32_t *pid, uint32_t *seq) {
  static const char prefix[] = "stackrec-";
  char canon[STKR_FMT_SEGMENT_NAME_MAX];
  const char *p;
  uint32_t p_pid, p_seq;

  if (name == NULL || strncmp(name, prefix, sizeof(prefix) - 1) != 0)
    return -EINVAL;
  p = name + sizeof(prefix) - 1;
  if (stkr__parse_u32(&p, &p_pid) != 0 || *p++ != '-')
    return -EINVAL;
  if (stkr__parse_u32(&p, &p_seq) != 0 || p_seq == 0)
    return -EINVAL;
  if (strcmp(p, ".zst") != 0)
    return -EINVAL;
  /* Accept only the canonical spelling: "stackrec-01-1.zst" would otherwise
   * alias "stackrec-1-000001.zst" and a directory could hold both. */
  if (stkr_fmt_segment_name(canon, sizeof(canon), p_pid, p_seq) != 0 ||
      strcmp(canon, name) != 0)
    return -EINVAL;
  if (pid != NULL)
    *pid = p_pid;
  if (seq != NULL)
    *seq = p_seq;
  return 0;
}

int stkr_fmt_dir_has_segments(const char *dir) {
  struct dirent *de;
  DIR *d = opendir(dir);
  int found = 0;

  if (d == NULL)
    return -errno;
  while (!found && (de = readdir(d)) != NULL)
    found = stkr_fmt_segment_parse(de->d_name, NULL, NULL) == 0;
  closedir(d);
  return found;
}

/* Make room for `extra` more bytes after b->len (the one grow helper:
 * doubling, so a reused buffer stops reallocating at its peak). */
static int stkr__buf_reserve(stkr_fmt_buf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len)
    return -ENOMEM;
  return stkr_grow((void **)&b->data, &b->cap, b->len + extra, 1);
}

int stkr_fmt_encode_batch(const Stackrec__Batch *batch, ZSTD_CCtx *cctx,
                          int level, stkr_fmt_buf *out) {
  ZSTD_CCtx *own = NULL;
  size_t packed, bound, zret;
  uint8_t *scratch;
  int err;

  if (batch == NULL || out == NULL)
    return -EINVAL;
  packed = stackrec__batch__get_packed_size(batch);
  if (packed > STKR_FMT_MAX_BATCH_BYTES)
    return -EFBIG;
  bound = ZSTD_compressBound(packed);

  /* The serialized batch goes to the spare room after the compressed
   * frame's worst-case end, so one growable buffer serves both and the
   * flush worker does no per-batch malloc once the buffer has grown. */
  err = stkr__buf_reserve(out, bound + packed);
  if (err != 0)
    return err;
  scratch = out->data + out->len + bound;
  if (stackrec__batch__pack(batch, scratch) != packed)
    return -EIO; /* protobuf-c disagrees with itself: treat as an I/O bug */

  if (cctx == NULL) {
    own = ZSTD_createCCtx();
    if (own == NULL)
      return -ENOMEM;
    cctx = own;
  }
  /* Set every parameter the format depends on each time: the caller may
   * have used the context for something else in between. */
  zret = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  if (!ZSTD_isError(zret))
    zret = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(zret))
    zret = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(zret))
    zret = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  if (!ZSTD_isError(zret))
    zret = ZSTD_compress2(cctx, out->data + out->len, bound, scratch, packed);
  ZSTD_freeCCtx(own);
  if (ZSTD_isError(zret))
    return ZSTD_getErrorCode(zret) == ZSTD_error_memory_allocation ? -ENOMEM
                                                                   : -EIO;
  out->len += zret;
  return 0;
}

void stkr_fmt_buf_free(stkr_fmt_buf *b) {
  if (b == NULL)
    return;
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void stkr_fmt_header_from_session(Stackrec__Header *H, Stackrec__Config *C,
                                  const struct stkr_sessfile_hdr *s) {
  /* protobuf-c's strings are char *; the encoder only reads them. */
  H->format_version = STKR_FORMAT_VERSION;
  H->pid = s->pid;
  H->process_name = (char *)s->process_name;
  H->start_mono_ns = s->start_mono_ns;
  H->start_wall_ns = s->start_wall_ns;
  H->session_id = s->session_id;
  H->arch = (char *)s->arch;
  H->parent_pid = s->parent_pid;
  C->ring_bytes = s->ring_bytes;
  C->max_depth = s->max_depth;
  C->skip_frames = s->skip_frames;
  C->flush_interval_ms = s->flush_interval_ms;
  C->segment_bytes = s->segment_bytes;
  C->disk_cap_bytes = s->disk_cap_bytes;
  C->payload_max = s->payload_max;
  C->symbolize = (char *)s->symbolize;
  H->config = C;
}

/* Each block carries its size in front of it, so free can give it back to
 * the budget; 16 bytes keep the block max_align_t-aligned. */
#define STKR__PB_HDR 16u

static void *stkr__pballoc_alloc(void *data, size_t size) {
  stkr_fmt_pballoc *a = data;
  uint8_t *p;

  if (size > a->limit - a->used) {
    a->refused = true;
    return NULL;
  }
  p = malloc(size + STKR__PB_HDR);
  if (p == NULL)
    return NULL;
  memcpy(p, &size, sizeof size);
  a->used += size;
  return p + STKR__PB_HDR;
}

static void stkr__pballoc_free(void *data, void *ptr) {
  stkr_fmt_pballoc *a = data;
  uint8_t *p = ptr;
  size_t size;

  if (p == NULL)
    return;
  p -= STKR__PB_HDR;
  memcpy(&size, p, sizeof size);
  a->used -= size;
  free(p);
}

void stkr_fmt_pballoc_init(stkr_fmt_pballoc *a, size_t limit) {
  a->pb.alloc = stkr__pballoc_alloc;
  a->pb.free = stkr__pballoc_free;
  a->pb.allocator_data = a;
  a->used = 0;
  a->limit = limit;
  a->refused = false;
}
