/*
 * stkr_frames.c: reading a segment file one zstd frame at a time.
 *
 * A segment is a plain sequence of zstd frames, one Batch each. The file is
 * read through a fixed buffer and each frame is streamed through
 * ZSTD_decompressStream(), which stops exactly at the frame's end, verifies
 * the content checksum and so also tells us the frame's compressed size: no
 * need to hold a whole frame (or file) in memory, and no block walking of our
 * own. The decompressed size is bounded by STKR_FMT_MAX_BATCH_BYTES before
 * any allocation (from the frame header when it carries the content size, as
 * our writer's frames always do; by capped growth otherwise).
 *
 * On damage we scan forward for the next zstd magic number and accept the
 * first candidate that decodes cleanly; the checksum makes a false candidate
 * inside compressed data practically impossible to accept.
 */
#if defined(__linux__)
/* SEEK_DATA (glibc declares it for _GNU_SOURCE only: without it the jump
 * over holes below was never compiled, and test-damage's 64 GiB hole was
 * read as zeros, ~65 s, until a loaded CI passed its 120 s: session 37). */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_io.h"
#include "proto/stkr__reader.h"

#define STKR__IN_CAP (256u << 10)
#define STKR__HDR_MAX 18 /* ZSTD_FRAMEHEADERSIZE_MAX, a static-only macro */
#define STKR__UNKNOWN_SIZE_START (1u << 20)

/* The magic number as it appears in the file (little endian). */
static const uint8_t stkr__magic[4] = {0x28, 0xB5, 0x2F, 0xFD};

typedef enum stkr__fres {
  STKR__F_OK,       /* frame decoded into r->dbuf (len may be 0) */
  STKR__F_END,      /* clean end of file */
  STKR__F_TRUNC,    /* file ends inside the frame */
  STKR__F_BAD,      /* the frame does not decode */
  STKR__F_NOTFRAME, /* no frame magic here */
  STKR__F_IOERR,    /* read error (in->err) */
  STKR__F_NOMEM,
  STKR__F_LOST      /* a lost marker: a batch a copy could not carry */
} stkr__fres;

int stkr__input_open(stkr__input *in, const char *path) {
  int fd;

  if (in->buf == NULL) {
    in->buf = malloc(STKR__IN_CAP);
    if (in->buf == NULL)
      return -ENOMEM;
    in->cap = STKR__IN_CAP;
  }
  /* Regular files only: a segment swapped for a FIFO since it was added
   * must not block the open (-EINVAL, reported as unreadable). */
  fd = stkr_open_regular(path, 0);
  if (fd < 0)
    return fd;
  in->fd = fd;
  in->path = path;
  in->off = 0;
  in->len = in->pos = 0;
  in->eof = false;
  in->err = 0;
  return 0;
}

void stkr__input_close(stkr__input *in) {
  if (in->fd >= 0)
    close(in->fd);
  in->fd = -1;
  in->path = NULL;
}

static uint64_t stkr__in_tell(const stkr__input *in) {
  return in->off + in->pos;
}

static void stkr__in_seek(stkr__input *in, uint64_t off) {
  if (off >= in->off && off <= in->off + in->len) {
    in->pos = (size_t)(off - in->off);
    return;
  }
  in->off = off;
  in->len = in->pos = 0;
  in->eof = false;
  in->err = 0;
}

/* Make at least `need` (<= cap) bytes available at pos, unless the file ends
 * or a read fails first. @return the bytes available at pos. */
static size_t stkr__in_fill(stkr__input *in, size_t need) {
  if (need > in->cap)
    need = in->cap;
  while (in->len - in->pos < need && !in->eof && in->err == 0) {
    ssize_t n;

    if (in->pos > 0) { /* keep the buffer's start at the read position */
      memmove(in->buf, in->buf + in->pos, in->len - in->pos);
      in->off += in->pos;
      in->len -= in->pos;
      in->pos = 0;
    }
    n = pread(in->fd, in->buf + in->len, in->cap - in->len,
              (off_t)(in->off + in->len));
    if (n < 0) {
      if (errno != EINTR)
        in->err = errno;
      continue;
    }
    if (n == 0)
      in->eof = true;
    in->len += (size_t)n;
  }
  return in->len - in->pos;
}

static uint32_t stkr__rd32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static int stkr__dbuf_reserve(stkr_fmt_buf *b, size_t cap) {
  uint8_t *p;

  if (cap <= b->cap)
    return 0;
  p = realloc(b->data, cap);
  if (p == NULL)
    return -ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

/* Skip a skippable frame (zstd lets other tools interleave these). One
 * that is a lost marker (stkr_fmt_lost_marker) stands for a batch that
 * `merge` could not copy (damaged in its input; `symbolize -o` copies a
 * damaged batch's bytes as they are): the loss stays damage in the copy
 * (QA, session 39: a merged recording of a damaged one verified "intact,
 * incomplete"). */
static stkr__fres stkr__skip_skippable(stkr__input *in) {
  uint64_t end;
  uint32_t size;

  if (stkr__in_fill(in, 8) < 8)
    return in->err ? STKR__F_IOERR : STKR__F_TRUNC;
  size = stkr__rd32le(in->buf + in->pos + 4);
  if (size == STKR_FMT_TOMBSTONE_SIZE - 8 &&
      stkr__in_fill(in, STKR_FMT_TOMBSTONE_SIZE) >=
          STKR_FMT_TOMBSTONE_SIZE &&
      stkr_fmt_is_lost_marker(in->buf + in->pos,
                              STKR_FMT_TOMBSTONE_SIZE)) {
    in->pos += STKR_FMT_TOMBSTONE_SIZE;
    return STKR__F_LOST;
  }
  end = stkr__in_tell(in) + 8 + size;
  stkr__in_seek(in, end - 1); /* its last byte must exist */
  if (stkr__in_fill(in, 1) < 1)
    return in->err ? STKR__F_IOERR : STKR__F_TRUNC;
  in->pos++;
  return STKR__F_OK;
}

int stkr_fmt_frame_check(const uint8_t *p, size_t avail,
                         unsigned long long *fcs, const char **reason) {
  *reason = "";
  *fcs = ZSTD_getFrameContentSize(p, avail);
  if (*fcs == ZSTD_CONTENTSIZE_ERROR) {
    /* Also what a header cut short gives. */
    if (avail < STKR__HDR_MAX)
      return -EAGAIN;
    *reason = "invalid frame header";
    return -EINVAL;
  }
  if (*fcs != ZSTD_CONTENTSIZE_UNKNOWN && *fcs > STKR_FMT_MAX_BATCH_BYTES) {
    *reason = "declared size over the batch limit";
    return -EINVAL;
  }
  /* Every batch our writer makes carries a content checksum; a frame
   * without one is damage (a flipped Content_Checksum_flag, bit 2 of the
   * Frame_Header_Descriptor right after the magic, RFC 8878 3.1.1.1.1)
   * whose contents nothing would verify. The header is complete here
   * (ZSTD_getFrameContentSize parsed it), so p[4] is inside it. A frame
   * without a content size is fine: zstd allows it, and the size is
   * bounded while decoding. */
  if (!(p[4] & 0x04)) {
    *reason = "frame without content checksum";
    return -EINVAL;
  }
  return 0;
}

int stkr_fmt_decode_frame(ZSTD_DCtx *dctx, const uint8_t *src, size_t len,
                          stkr_fmt_buf *out, size_t *frame_len,
                          const char **reason) {
  unsigned long long fcs;
  ZSTD_inBuffer ib = {src, len, 0};
  int rc = stkr_fmt_frame_check(src, len, &fcs, reason);

  out->len = 0;
  *frame_len = 0;
  if (rc == -EAGAIN)
    *reason = "truncated frame header";
  if (rc != 0)
    return -EINVAL;
  if (stkr__dbuf_reserve(out, fcs == ZSTD_CONTENTSIZE_UNKNOWN
                                  ? STKR__UNKNOWN_SIZE_START
                                  : (fcs ? (size_t)fcs : 1)) != 0)
    return -ENOMEM;
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  for (;;) {
    ZSTD_outBuffer ob = {out->data,
                         fcs == ZSTD_CONTENTSIZE_UNKNOWN ? out->cap
                                                         : (size_t)fcs,
                         out->len};
    size_t zret = ZSTD_decompressStream(dctx, &ob, &ib);

    out->len = ob.pos;
    if (ZSTD_isError(zret)) {
      *reason = ZSTD_getErrorName(zret);
      return -EINVAL;
    }
    if (zret == 0) {
      *frame_len = ib.pos;
      return 0;
    }
    if (ib.pos == ib.size && ob.pos < ob.size) {
      *reason = "truncated frame";
      return -EINVAL;
    }
    if (ob.pos == ob.size) { /* output full: grow, within the limit */
      if (fcs != ZSTD_CONTENTSIZE_UNKNOWN ||
          out->cap >= STKR_FMT_MAX_BATCH_BYTES) {
        *reason = "content larger than declared or over the batch limit";
        return -EINVAL;
      }
      if (stkr__dbuf_reserve(out, out->cap * 2 > STKR_FMT_MAX_BATCH_BYTES
                                      ? STKR_FMT_MAX_BATCH_BYTES
                                      : out->cap * 2) != 0)
        return -ENOMEM;
    }
  }
}

/* Decode the frame at the input position into r->dbuf. On STKR__F_BAD,
 * *reason says why (static text from zstd or a literal). */
static stkr__fres stkr__frame_read(stkr_reader *r, const char **reason) {
  stkr__input *in = &r->in;
  stkr_fmt_buf *out = &r->dbuf;
  unsigned long long fcs;
  size_t avail, zret;
  const uint8_t *p;
  uint32_t magic;

  out->len = 0;
  *reason = "";
  avail = stkr__in_fill(in, 4);
  if (avail == 0)
    return in->err ? STKR__F_IOERR : STKR__F_END;
  p = in->buf + in->pos;
  if (avail < 4) {
    if (in->err)
      return STKR__F_IOERR;
    return memcmp(p, stkr__magic, avail) == 0 ? STKR__F_TRUNC
                                               : STKR__F_NOTFRAME;
  }
  magic = stkr__rd32le(p);
  if ((magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START)
    return stkr__skip_skippable(in);
  if (magic != ZSTD_MAGICNUMBER)
    return STKR__F_NOTFRAME;

  avail = stkr__in_fill(in, STKR__HDR_MAX);
  p = in->buf + in->pos;
  switch (stkr_fmt_frame_check(p, avail, &fcs, reason)) {
  case 0:
    break;
  case -EAGAIN:
    /* A header cut short by the end of the file. */
    if (avail < STKR__HDR_MAX && in->err == 0)
      return STKR__F_TRUNC;
    if (in->err)
      return STKR__F_IOERR;
    *reason = "invalid frame header";
    return STKR__F_BAD;
  default:
    return STKR__F_BAD;
  }
  if (stkr__dbuf_reserve(out, fcs == ZSTD_CONTENTSIZE_UNKNOWN
                                  ? STKR__UNKNOWN_SIZE_START
                                  : (fcs ? (size_t)fcs : 1)) != 0)
    return STKR__F_NOMEM;
  ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);

  for (;;) {
    ZSTD_inBuffer ib;
    ZSTD_outBuffer ob;

    if (in->pos == in->len && stkr__in_fill(in, 1) == 0)
      return in->err ? STKR__F_IOERR : STKR__F_TRUNC;
    ib.src = in->buf + in->pos;
    ib.size = in->len - in->pos;
    ib.pos = 0;
    ob.dst = out->data;
    ob.size = fcs == ZSTD_CONTENTSIZE_UNKNOWN ? out->cap : (size_t)fcs;
    ob.pos = out->len;
    zret = ZSTD_decompressStream(r->dctx, &ob, &ib);
    in->pos += ib.pos;
    if (ZSTD_isError(zret)) {
      *reason = ZSTD_getErrorName(zret);
      return STKR__F_BAD;
    }
    if (zret == 0) {
      out->len = ob.pos;
      return STKR__F_OK;
    }
    if (ib.pos == 0 && ob.pos == out->len) {
      /* No progress although input was available: the output is full. */
      if (ob.pos < ob.size) {
        *reason = "decoder made no progress";
        return STKR__F_BAD;
      }
      if (fcs != ZSTD_CONTENTSIZE_UNKNOWN ||
          out->cap >= STKR_FMT_MAX_BATCH_BYTES) {
        *reason = "content larger than declared or over the batch limit";
        return STKR__F_BAD;
      }
      if (stkr__dbuf_reserve(out, out->cap * 2 > STKR_FMT_MAX_BATCH_BYTES
                                      ? STKR_FMT_MAX_BATCH_BYTES
                                      : out->cap * 2) != 0)
        return STKR__F_NOMEM;
    }
    out->len = ob.pos;
  }
}

/* Find the first offset >= from holding the frame magic.
 * @return 1 (*at set), 0 none before the end of the file (or a read error). */
static int stkr__scan_magic(stkr__input *in, uint64_t from, uint64_t *at) {
  stkr__in_seek(in, from);
  for (;;) {
    size_t avail, i;
    const uint8_t *p;

#if defined(SEEK_DATA)
    /* A hole is never written data (writers only append; a reserve is
     * fallocated zeros): jump over it instead of reading its zeros (QA,
     * session 33: a 16 GiB sparse file, 0 bytes on disk, took every reader
     * 23-39 s). The 3 bytes kept from the last buffer are in the hole too
     * when one starts there. */
    if (in->len - in->pos < 4) {
      off_t cur = (off_t)stkr__in_tell(in), data = lseek(in->fd, cur, SEEK_DATA);
      if (data < 0 && errno == ENXIO)
        return 0; /* nothing but hole to the end */
      if (data > cur)
        stkr__in_seek(in, (uint64_t)data);
    }
#endif
    avail = stkr__in_fill(in, in->cap);
    p = in->buf + in->pos;

    if (avail < 4)
      return 0;
    for (i = 0; i + 4 <= avail; i++) {
      const uint8_t *q = memchr(p + i, stkr__magic[0], avail - 3 - i);

      if (q == NULL)
        break;
      i = (size_t)(q - p);
      if (memcmp(q, stkr__magic, 4) == 0) {
        *at = stkr__in_tell(in) + i;
        return 1;
      }
    }
    in->pos += avail - 3; /* the last 3 bytes may start a magic */
    if (in->eof)
      return 0;
  }
}

/* After a bad frame at `bad`: find the next frame that decodes, leaving it
 * in r->dbuf. @return 1 (*found set), 0 none, or -ENOMEM. */
static int stkr__resync(stkr_reader *r, uint64_t bad, uint64_t *found) {
  uint64_t from = bad + 1, at;
  const char *reason;

  while (stkr__scan_magic(&r->in, from, &at)) {
    stkr__in_seek(&r->in, at);
    switch (stkr__frame_read(r, &reason)) {
    case STKR__F_OK:
      *found = at;
      return 1;
    case STKR__F_NOMEM:
      return -ENOMEM;
    case STKR__F_IOERR:
      return 0;
    default:
      from = at + 1;
    }
  }
  return 0;
}

/* Is a frame cut off by the end of the file the one a live writer is
 * appending? Only at the end of the process's last segment, and only if
 * the recording has not ended cleanly in that file (see stkr_reader.h). */
static bool stkr__is_live_tail(const stkr_reader *r, const stkr__stream *st) {
  return r->cur_file + 1 >= st->n_files &&
         !(st->sess_clean && st->clean_file == r->cur_file + 1);
}

int stkr__next_frame(stkr_reader *r, stkr__stream *st, uint64_t *frame_off) {
  stkr__input *in = &r->in;
  const char *path = in->path;
  uint32_t pid = st->info.pid;
  uint64_t retried_at = UINT64_MAX;

  for (;;) {
    uint64_t start = stkr__in_tell(in), end, found;
    const char *reason;
    stkr__fres res = stkr__frame_read(r, &reason);
    int rc;

    switch (res) {
    case STKR__F_OK:
      if (r->dbuf.len == 0)
        continue; /* skippable or empty frame: nothing to deliver */
      *frame_off = start;
      r->frame_len = stkr__in_tell(in) - start;
      return 1;
    case STKR__F_TRUNC:
      if (retried_at != start) {
        /* A live writer may have completed the frame since we hit the
         * end of the file (one write(2) per frame, but a reader can see
         * part of it): read it once more before resyncing past it. */
        retried_at = start;
        stkr__in_seek(in, start);
        in->eof = false;
        continue;
      }
      break;
    case STKR__F_END:
      return 0;
    case STKR__F_NOMEM:
      return -ENOMEM;
    case STKR__F_LOST:
      st->info.damaged_batches++;
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)start, pid,
                 "a batch lost before this copy was made (damaged in the "
                 "recording `stackrec merge` copied)");
      continue;
    case STKR__F_IOERR:
      stkr__warn(r, STKR_WARN_IO, path, (int64_t)stkr__in_tell(in), pid,
                 "read error: %s; rest of the file skipped",
                 strerror(in->err));
      return 0;
    default:
      break;
    }

    /* Where the file ended, for the message, before resync moves on. */
    end = in->eof ? in->off + in->len : stkr__in_tell(in);
    rc = stkr__resync(r, start, &found);
    if (rc < 0)
      return rc;
    if (rc > 0) {
      st->info.damaged_batches++;
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)start, pid,
                 "damaged batch (%s), skipped %llu bytes to the next batch",
                 res == STKR__F_NOTFRAME ? "no zstd frame here"
                 : res == STKR__F_TRUNC  ? "frame cut short"
                                         : reason,
                 (unsigned long long)(found - start));
      if (r->dbuf.len == 0)
        continue;
      *frame_off = found;
      r->frame_len = stkr__in_tell(in) - found;
      return 1;
    }
    if (in->err == 0 && res == STKR__F_TRUNC && stkr__is_live_tail(r, st)) {
      st->info.live_tail = true;
      stkr__warn(r, STKR_WARN_LIVE_TAIL, path, (int64_t)start, pid,
                 "incomplete last batch (%llu bytes): the recording is "
                 "still being written (or its writer stopped mid-batch); "
                 "not read",
                 (unsigned long long)(end - start));
      return 0;
    }
    st->info.damaged_batches++;
    if (in->err != 0) {
      stkr__warn(r, STKR_WARN_IO, path, (int64_t)start, pid,
                 "read error: %s; rest of the file skipped",
                 strerror(in->err));
    } else if (res == STKR__F_TRUNC) {
      stkr__warn(r, STKR_WARN_TRUNCATED, path, (int64_t)start, pid,
                 "truncated batch (%llu bytes), ignored",
                 (unsigned long long)(end - start));
    } else if (res == STKR__F_NOTFRAME && start == 0) {
      if (r->cur_file < st->n_files) /* (a fuzz target's bare stream) */
        st->files[r->cur_file].not_zstd = true;
      stkr__warn(r, STKR_WARN_NOT_ZSTD, path, -1, pid,
                 "not a zstd file (no intact frame found), skipped");
    } else if (res == STKR__F_NOTFRAME) {
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)start, pid,
                 "damaged data (no zstd frame here), rest of the file "
                 "ignored");
    } else {
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)start, pid,
                 "damaged batch (%s), rest of the file ignored", reason);
    }
    return 0;
  }
}
