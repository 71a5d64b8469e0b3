/*
 * stkr_format.c: segment names and batch encoding (see stkr_format.h).
 */
#include "proto/stkr_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd_errors.h>

#include "common/stkr_grow.h"
#include "common/stkr_io.h"
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

static const char k_tomb_tag[8] = {'S', 'T', 'K', 'R', 'C', 'A', 'P', '1'};
static const char k_lost_tag[8] = {'S', 'T', 'K', 'R', 'L', 'O', 'S', '1'};
static const char k_run_tag[8] = {'S', 'T', 'K', 'R', 'C', 'A', 'P', '2'};

static void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

void stkr_fmt_tombstone(uint8_t out[STKR_FMT_TOMBSTONE_SIZE],
                        uint32_t deleter_pid) {
  put_le32(out, STKR_FMT_TOMBSTONE_MAGIC);
  put_le32(out + 4, STKR_FMT_TOMBSTONE_SIZE - 8); /* the frame's payload */
  memcpy(out + 8, k_tomb_tag, sizeof k_tomb_tag);
  put_le32(out + 16, deleter_pid);
}

bool stkr_fmt_is_marker_frame(const uint8_t *p, size_t len) {
  return len >= 4 && get_le32(p) == STKR_FMT_TOMBSTONE_MAGIC;
}

bool stkr_fmt_is_skippable(const uint8_t *p, size_t len) {
  return len >= 4 && (get_le32(p) & ZSTD_MAGIC_SKIPPABLE_MASK) ==
                         ZSTD_MAGIC_SKIPPABLE_START;
}

size_t stkr_fmt_next_frame_magic(const uint8_t *p, size_t len, size_t from) {
  for (size_t i = from; i + 4 <= len; i++)
    if (get_le32(p + i) == ZSTD_MAGICNUMBER) return i;
  return len;
}

/* A whole marker (tombstone or lost) with payload tag. */
static bool marker_is(const uint8_t *p, size_t len, const char tag[8]) {
  return len == STKR_FMT_TOMBSTONE_SIZE && stkr_fmt_is_marker_frame(p, len) &&
         get_le32(p + 4) == STKR_FMT_TOMBSTONE_SIZE - 8 &&
         memcmp(p + 8, tag, 8) == 0;
}

void stkr_fmt_tombstone_run(uint8_t out[STKR_FMT_TOMBSTONE_RUN_SIZE],
                            uint32_t deleter_pid, uint32_t last_seq) {
  put_le32(out, STKR_FMT_TOMBSTONE_MAGIC);
  put_le32(out + 4, STKR_FMT_TOMBSTONE_RUN_SIZE - 8);
  memcpy(out + 8, k_run_tag, sizeof k_run_tag);
  put_le32(out + 16, deleter_pid);
  put_le32(out + 20, last_seq);
}

bool stkr_fmt_tombstone_parse(const uint8_t *p, size_t len,
                              uint32_t *deleter_pid, uint32_t *last_seq) {
  uint32_t last = 0;

  if (len == STKR_FMT_TOMBSTONE_RUN_SIZE && stkr_fmt_is_marker_frame(p, len) &&
      get_le32(p + 4) == STKR_FMT_TOMBSTONE_RUN_SIZE - 8 &&
      memcmp(p + 8, k_run_tag, 8) == 0 && (last = get_le32(p + 20)) != 0) {
    /* A run that ends at 0 names no segment: not a tombstone. */
  } else if (!marker_is(p, len, k_tomb_tag)) {
    return false;
  }
  if (deleter_pid != NULL)
    *deleter_pid = get_le32(p + 16);
  if (last_seq != NULL)
    *last_seq = last;
  return true;
}

bool stkr_fmt_tombstone_read(const char *dir, uint32_t pid, uint32_t seq,
                             uint32_t *by, uint32_t *last) {
  uint8_t t[STKR_FMT_MARKER_MAX];
  char name[STKR_FMT_SEGMENT_NAME_MAX], path[4096];
  struct stat st;
  ssize_t got = -1;
  int fd, k;

  *last = 0;
  if (stkr_fmt_segment_name(name, sizeof name, pid, seq) != 0)
    return false;
  k = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (k < 0 || (size_t)k >= sizeof path ||
      (fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
    return false;
  if ((fd = stkr_fd_raise(fd)) < 0)
    return false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size <= (off_t)sizeof t)
    got = pread(fd, t, sizeof t, 0);
  close(fd);
  if (got <= 0 || !stkr_fmt_tombstone_parse(t, (size_t)got, by, last) ||
      (*last != 0 && *last < seq))
    return false;
  if (*last == 0)
    *last = seq;
  return true;
}

uint32_t stkr_fmt_seq_said(const char *dir, uint32_t pid, uint32_t seq) {
  uint32_t last;

  return stkr_fmt_tombstone_read(dir, pid, seq, NULL, &last) && last > seq &&
                 last <= STKR_FMT_SEQ_MAX
             ? last
             : seq;
}

bool stkr_fmt_is_tombstone(const uint8_t *p, size_t len,
                           uint32_t *deleter_pid) {
  return stkr_fmt_tombstone_parse(p, len, deleter_pid, NULL);
}

void stkr_fmt_lost_marker(uint8_t out[STKR_FMT_TOMBSTONE_SIZE],
                          uint32_t writer_pid) {
  stkr_fmt_tombstone(out, writer_pid);
  memcpy(out + 8, k_lost_tag, sizeof k_lost_tag);
}

bool stkr_fmt_is_lost_marker(const uint8_t *p, size_t len) {
  return marker_is(p, len, k_lost_tag);
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

/* ---- the Events message, packed by hand ---------------------------------
 * Wire format (protobuf encoding): a field is a varint key (number << 3 |
 * wire type) and its value; a packed repeated field is key, byte length,
 * then the elements' varints; sint64 is zigzag-coded first. protobuf-c
 * emits a message's fields in field-number order and leaves out proto3
 * zeros (a 0 scalar, an empty column or bytes), as done here. */
#define EV_VARINT 0u
#define EV_LEN 2u

static inline size_t ev_varint_size(uint64_t v) {
  /* 7 payload bits a byte. Compares, not a bit scan: bsr is slow on some
   * x86_64 cores (lzcnt is not baseline), and ids and deltas are mostly
   * one or two bytes, which predicts well (measured: a bsr-based size
   * pass was slower than protobuf-c's). */
  if (v < (1ull << 7)) return 1;
  if (v < (1ull << 14)) return 2;
  if (v < (1ull << 21)) return 3;
  if (v < (1ull << 28)) return 4;
  return 5 + (v >= (1ull << 35)) + (v >= (1ull << 42)) + (v >= (1ull << 49)) +
         (v >= (1ull << 56)) + (v >= (1ull << 63));
}

/* The pack loops keep their bounds and bases in locals: stores through a
 * uint8_t pointer may alias anything, and would make the compiler reload
 * them from the message at every element. */
static inline uint8_t *ev_varint(uint8_t *p, uint64_t v) {
  if (v < 0x80) { /* most ids and small deltas: one byte */
    *p = (uint8_t)v;
    return p + 1;
  }
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t ev_zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Finish a packed field whose elements were written at body, `room`
 * bytes after p (the room held for the length's varint): write the
 * length, and close the gap when it took fewer bytes. One pass over the
 * elements, as protobuf-c does, instead of a size pass and a write pass. */
static uint8_t *ev_close_len(uint8_t *p, size_t room, uint8_t *end) {
  uint8_t *body = p + room;
  size_t len = (size_t)(end - body), used = ev_varint_size(len);

  ev_varint(p, len);
  if (used < room) memmove(p + used, body, len);
  return p + used + len;
}

static uint8_t *ev_u32_field(uint8_t *p, unsigned field, const uint32_t *v,
                             size_t n) {
  size_t room;
  uint8_t *q;

  if (n == 0) return p;
  *p++ = (uint8_t)(field << 3 | EV_LEN);
  room = ev_varint_size(5 * (uint64_t)n); /* 5 bytes an element at most */
  q = p + room;
  /* Ids are mostly below 128: eight at a time when all eight are (one
   * test, eight byte stores, which the compiler turns into a few vector
   * instructions), else one by one. */
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t any = v[i] | v[i + 1] | v[i + 2] | v[i + 3] | v[i + 4] |
                   v[i + 5] | v[i + 6] | v[i + 7];
    if (any < 0x80) {
      for (size_t k = 0; k < 8; k++) q[k] = (uint8_t)v[i + k];
      q += 8;
    } else {
      for (size_t k = 0; k < 8; k++) q = ev_varint(q, v[i + k]);
    }
  }
  for (; i < n; i++) q = ev_varint(q, v[i]);
  return ev_close_len(p, room, q);
}

static uint8_t *ev_s64_field(uint8_t *p, unsigned field, const int64_t *v,
                             size_t n) {
  size_t room;
  uint8_t *q;

  if (n == 0) return p;
  *p++ = (uint8_t)(field << 3 | EV_LEN);
  room = ev_varint_size(10 * (uint64_t)n);
  q = p + room;
  for (size_t i = 0; i < n; i++) q = ev_varint(q, ev_zigzag(v[i]));
  return ev_close_len(p, room, q);
}

/* The bound saturates at SIZE_MAX instead of wrapping: it reads only the
 * lengths, and a wrapped one (10 * n past 4 GiB on a 32-bit size_t, or the
 * columns' sum) would pass the limit check and size the buffer too small.
 * SIZE_MAX is past any limit, so the caller packs with protobuf-c or
 * refuses. */
static inline size_t ev_sat_add(size_t a, size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* A packed column of n elements of at most `each` (<= 10) bytes: key,
 * length, body, at most. */
static inline size_t ev_col_max(size_t n, size_t each) {
  if (n == 0) return 0;
  if (n > SIZE_MAX / 16) return SIZE_MAX; /* 11 + each * n would not fit */
  return 1 + ev_varint_size(each * (uint64_t)n) + each * n;
}

size_t stkr_fmt_events_packed_max(const Stackrec__Events *e) {
  size_t m = 11; /* base_ts_ns: key and a varint */

  m = ev_sat_add(m, ev_col_max(e->n_ts_delta_ns, 10));
  m = ev_sat_add(m, ev_col_max(e->n_site_id, 5));
  m = ev_sat_add(m, ev_col_max(e->n_thread_id, 5));
  m = ev_sat_add(m, ev_col_max(e->n_stack_id, 5));
  m = ev_sat_add(m, ev_col_max(e->n_payload_len, 5));
  if (e->payload_data.len)
    m = ev_sat_add(m, ev_sat_add(11, e->payload_data.len));
  return ev_sat_add(m, ev_col_max(e->n_payload_truncated, 5));
}

size_t stkr_fmt_events_pack(const Stackrec__Events *e, uint8_t *out) {
  uint8_t *p = out;

  if (e->base_ts_ns) {
    *p++ = 1u << 3 | EV_VARINT;
    p = ev_varint(p, e->base_ts_ns);
  }
  p = ev_s64_field(p, 2, e->ts_delta_ns, e->n_ts_delta_ns);
  p = ev_u32_field(p, 3, e->site_id, e->n_site_id);
  p = ev_u32_field(p, 4, e->thread_id, e->n_thread_id);
  p = ev_u32_field(p, 5, e->stack_id, e->n_stack_id);
  p = ev_u32_field(p, 6, e->payload_len, e->n_payload_len);
  if (e->payload_data.len) {
    *p++ = 7u << 3 | EV_LEN;
    p = ev_varint(p, e->payload_data.len);
    memcpy(p, e->payload_data.data, e->payload_data.len);
    p += e->payload_data.len;
  }
  p = ev_u32_field(p, 8, e->payload_truncated, e->n_payload_truncated);
  return (size_t)(p - out);
}

/* Batch.events is field 8, a message: key 8 << 3 | 2. */
#define BATCH_EVENTS_KEY (8u << 3 | EV_LEN)

/* The Batch serialized: protobuf-c for all but the events, which follow,
 * packed by hand (they are most of a batch, and protobuf-c sized and
 * packed them element by element through generic calls: ~a seventh of the
 * flush worker's time). A message field may stand anywhere in a message;
 * every protobuf parser, protobuf-c's included, accepts it after the
 * others. Events carrying unknown fields (a newer writer's, re-encoded by
 * merge) go through protobuf-c whole, which keeps them.
 * *rest: the batch less what is packed by hand. @return at most how many
 * bytes batch_pack() writes: a bound within STKR_FMT_MAX_BATCH_BYTES when
 * rest->events is NULL, else the exact size. */
static size_t batch_packed_max(const Stackrec__Batch *batch,
                               Stackrec__Batch *rest) {
  const Stackrec__Events *e = batch->events;
  size_t ev_max, max;

  *rest = *batch;
  if (e == NULL || e->base.n_unknown_fields != 0)
    return stackrec__batch__get_packed_size(batch);
  ev_max = stkr_fmt_events_packed_max(e);
  if (ev_max <= STKR_FMT_MAX_BATCH_BYTES) {
    rest->events = NULL;
    max = stackrec__batch__get_packed_size(rest) + 1 +
          ev_varint_size(ev_max) + ev_max;
    if (max <= STKR_FMT_MAX_BATCH_BYTES)
      return max;
    rest->events = batch->events;
  }
  /* A bound past the limit (a batch near it, or re-encoded by merge, whose
   * columns may pack far below their bound): the exact size instead, so
   * that a batch over the limit is refused before anything is reserved
   * and memory stays within the limit, as before the events were packed
   * by hand. The flush worker's batches stay far below (batch.c). */
  return stackrec__batch__get_packed_size(batch);
}

static size_t batch_pack(const Stackrec__Batch *batch,
                         const Stackrec__Batch *rest, uint8_t *out) {
  uint8_t *p = out + stackrec__batch__pack(rest, out);

  if (rest->events == NULL && batch->events != NULL) {
    size_t room = ev_varint_size(stkr_fmt_events_packed_max(batch->events));
    *p++ = BATCH_EVENTS_KEY;
    p = ev_close_len(p, room, p + room +
                                  stkr_fmt_events_pack(batch->events, p + room));
  }
  return (size_t)(p - out);
}

int stkr_fmt_encode_batch(const Stackrec__Batch *batch, ZSTD_CCtx *cctx,
                          int level, stkr_fmt_buf *out) {
  ZSTD_CCtx *own = NULL;
  Stackrec__Batch rest;
  size_t packed, bound, zret, max;
  uint8_t *scratch;
  int err;

  if (batch == NULL || out == NULL)
    return -EINVAL;
  max = batch_packed_max(batch, &rest);
  if (max > STKR_FMT_MAX_BATCH_BYTES)
    return -EFBIG; /* the exact size: a bound is within the limit */
  bound = ZSTD_compressBound(max);

  /* The serialized batch goes to the spare room after the compressed
   * frame's worst-case end, so one growable buffer serves both and the
   * flush worker does no per-batch malloc once the buffer has grown (the
   * room past what is written is never touched). */
  err = stkr__buf_reserve(out, bound + max);
  if (err != 0)
    return err;
  scratch = out->data + out->len + bound;
  packed = batch_pack(batch, &rest, scratch);
  if (packed > max)
    return -EIO; /* cannot be: the bound is exact arithmetic (and tested) */

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

int stkr_fmt_buf_append(stkr_fmt_buf *b, const void *p, size_t n) {
  int err = stkr__buf_reserve(b, n);
  if (err != 0) return err;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
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
  H->forked_from_pid = s->forked_from_pid;
  H->fork_mono_ns = s->fork_mono_ns;
  H->process_start = s->process_start;
  H->os_parent_pid = s->os_parent_pid;
  for (size_t i = 0; i < sizeof s->boot_id; i++)
    if (s->boot_id[i] != 0) { /* all zero: not known, not written */
      H->boot_id.data = (uint8_t *)s->boot_id;
      H->boot_id.len = sizeof s->boot_id;
      break;
    }
  H->mono_offset_ns = s->mono_offset_ns;
  H->watched = (char *)s->watched;
#define STKR__COPY(f) C->f = s->f;
  STKR_SESS_CONFIG_FIELDS(STKR__COPY)
#undef STKR__COPY
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
