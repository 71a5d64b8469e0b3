/*
 * stkr_reader.c: inputs (directories and files grouped into per-pid
 * streams), the event iterator and the warning channel. See stkr_reader.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_io.h" /* stkr_pread_all */
#include "common/stkr_ringfile.h" /* STKR_CACHE_DIR */
#include "proto/stkr__reader.h"
#include "proto/stkr__recover.h" /* stkr__rc_parse_name: ring/session files */

static void stkr__vwarn(stkr_reader *r, stkr_warn_kind kind, const char *path,
                        int64_t off, uint32_t pid, const char *fmt,
                        va_list ap) {
  char what[512], msg[1024 + 512];
  stkr_warning w;

  if (kind == STKR_WARN_INCOMPLETE && r->opts.incomplete == NULL)
    return;
  vsnprintf(what, sizeof(what), fmt, ap);
  if (off >= 0)
    snprintf(msg, sizeof(msg), "%s: offset %lld: %s", path, (long long)off,
             what);
  else
    snprintf(msg, sizeof(msg), "%s: %s", path, what);

  memset(&w, 0, sizeof(w));
  w.kind = kind;
  /* Not STKR_WARN_LIVE_TAIL: a batch being written is not lost. */
  w.data_lost = kind == STKR_WARN_NOT_ZSTD || kind == STKR_WARN_TRUNCATED ||
                kind == STKR_WARN_DAMAGED || kind == STKR_WARN_UNSUPPORTED ||
                kind == STKR_WARN_IO || kind == STKR_WARN_UNRESOLVED;
  w.path = path;
  w.offset = off;
  w.pid = pid;
  w.message = msg;
  if (kind == STKR_WARN_INCOMPLETE) { /* a finding, not a warning */
    if (r->opts.incomplete != NULL)
      r->opts.incomplete(r->opts.incomplete_arg, &w);
    return;
  }
  r->counts.warnings++;
  if (w.data_lost)
    r->counts.data_lost++;
  if (r->opts.warn != NULL)
    r->opts.warn(r->opts.warn_arg, &w);
  else
    fprintf(stderr, "%s\n", msg);
}

void stkr__warn(stkr_reader *r, stkr_warn_kind kind, const char *path,
                int64_t off, uint32_t pid, const char *fmt, ...) {
  va_list ap;

  va_start(ap, fmt);
  stkr__vwarn(r, kind, path, off, pid, fmt, ap);
  va_end(ap);
}

void stkr__warn_once(stkr_reader *r, stkr__stream *st, unsigned flag,
                     stkr_warn_kind kind, const char *path, int64_t off,
                     const char *fmt, ...) {
  va_list ap;

  if (st->warned & flag)
    return;
  st->warned |= flag;
  va_start(ap, fmt);
  stkr__vwarn(r, kind, path, off, st->info.pid, fmt, ap);
  va_end(ap);
}

int stkr_reader_create(const stkr_reader_opts *opts, stkr_reader **out) {
  stkr_reader *r;

  if (out == NULL)
    return -EINVAL;
  *out = NULL;
  r = calloc(1, sizeof(*r));
  if (r == NULL)
    return -ENOMEM;
  r->in.fd = -1;
  if (opts != NULL)
    r->opts = *opts;
  stkr_fmt_pballoc_init(&r->pballoc, STKR_FMT_MAX_DECODED_BYTES);
  r->dctx = ZSTD_createDCtx();
  if (r->dctx == NULL) {
    free(r);
    return -ENOMEM;
  }
  *out = r;
  return 0;
}

void stkr_reader_free(stkr_reader *r) {
  size_t i;

  if (r == NULL)
    return;
  stkr__batch_release(r);
  stkr__input_close(&r->in);
  for (i = 0; i < r->n_streams; i++)
    stkr__stream_free(r->streams[i]);
  ZSTD_freeDCtx(r->dctx);
  stkr_fmt_buf_free(&r->dbuf);
  stkr_index_free(&r->inode_ix);
  stkr_index_free(&r->stream_ix);
  STKR_FREE_ALL(r->in.buf, r->streams, r->trunc_bits,
                r->ev_frames, r->inodes);
  stkr__marks_free(r);
  free(r);
}

/* ---- inputs ------------------------------------------------------------ */

static uint64_t stkr__stream_hash(dev_t dev, ino_t ino, uint32_t pid) {
  return stkr_mix64((uint64_t)dev ^ ((uint64_t)pid << 32)) ^ (uint64_t)ino;
}

/* Index st (not anon) at position at of streams. @return 0 or -ENOMEM. */
static int stkr__stream_ix_add(stkr_reader *r, const stkr__stream *st,
                               size_t at) {
  return stkr_index_add(&r->stream_ix,
                        stkr__stream_hash(st->dir_dev, st->dir_ino,
                                          st->info.pid),
                        at);
}

static int stkr__stream_cmp(const void *a, const void *b) {
  const stkr__stream *x = *(const stkr__stream *const *)a;
  const stkr__stream *y = *(const stkr__stream *const *)b;

  int c = stkr_cmp_u64(x->info.pid, y->info.pid);

  return c != 0 ? c : stkr_cmp_u64(x->order, y->order);
}

/* The stream of the directory (dev, ino) for pid, or NULL. */
stkr__stream *stkr__stream_find(const stkr_reader *r, dev_t dev, ino_t ino,
                                uint32_t pid, uint64_t *probes) {
  uint64_t h = stkr__stream_hash(dev, ino, pid);
  size_t pos, ix;

  (*probes)++;
  for (ix = stkr_index_first(&r->stream_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&r->stream_ix, h, &pos)) {
    stkr__stream *st = r->streams[ix];
    (*probes)++;
    if (st->info.pid == pid && st->dir_dev == dev && st->dir_ino == ino)
      return st;
  }
  return NULL;
}

/* Do two open files hold the same bytes? Both of size bytes; the first
 * STKR__COPY_CMP_BYTES are compared (a copy made with cp is identical; two
 * segments of one process differ in their first batch's Header already,
 * its segment number at least). */
#define STKR__COPY_CMP_BYTES 65536u
static bool stkr__same_start(int a, int b, uint64_t size) {
  uint8_t *x, *y;
  size_t n = size < STKR__COPY_CMP_BYTES ? (size_t)size : STKR__COPY_CMP_BYTES;
  size_t ga = 0, gb = 0;
  bool same;

  if ((x = malloc(2 * (n ? n : 1))) == NULL) return false;
  y = x + n;
  same = stkr_pread_all(a, x, n, 0, &ga) == 0 && ga == n &&
         stkr_pread_all(b, y, n, 0, &gb) == 0 && gb == n &&
         memcmp(x, y, n) == 0;
  free(x);
  return same;
}

bool stkr__segment_copy_of(const stkr_reader *r, const stkr__stream *st,
                           uint32_t pid, uint32_t seq) {
  uint64_t probes = 0;
  const stkr__stream *o = stkr__stream_find(r, st->dir_dev, st->dir_ino, pid,
                                            &probes);
  const stkr__file *cur = &st->files[r->cur_file], *f;
  size_t lo = 0, hi = o != NULL ? o->n_files : 0;
  struct stat now;
  bool same;
  int fd;

  while (lo < hi) { /* files sorted by seq (stkr__stream_add_file) */
    size_t mid = lo + (hi - lo) / 2;
    if (o->files[mid].seq < seq) lo = mid + 1;
    else hi = mid;
  }
  if (o == NULL || lo >= o->n_files || (f = &o->files[lo])->seq != seq ||
      f == cur || f->unreadable || f->size != cur->size ||
      fstat(r->in.fd, &now) != 0 || (uint64_t)now.st_size != cur->size)
    return false;
  if ((fd = stkr_open_regular(f->path, 0)) < 0) return false;
  same = stkr__same_start(r->in.fd, fd, cur->size);
  close(fd);
  return same;
}

/* The stream for (dir, pid), created if missing (anon: always a new one).
 * New streams are appended: stkr__streams_sort() puts them in order. */
static int stkr__stream_get(stkr_reader *r, const char *dir,
                            const struct stat *dst, uint32_t pid, bool anon,
                            stkr__stream **out) {
  stkr__stream *st;

  if (!anon && (st = stkr__stream_find(r, dst->st_dev, dst->st_ino, pid,
                                       &r->stream_probes)) != NULL) {
    *out = st;
    return 0;
  }
  if (stkr__grow(&r->streams, &r->cap_streams, r->n_streams + 1,
                 sizeof(*r->streams)) != 0)
    return -ENOMEM;
  st = calloc(1, sizeof(*st));
  if (st == NULL || (st->dir = strdup(dir)) == NULL) {
    free(st);
    return -ENOMEM;
  }
  st->info.pid = pid;
  st->info.dir = st->dir;
  st->info.process_name = "";
  st->info.arch = "";
  st->info.watched = "";
  st->dir_dev = dst->st_dev;
  st->dir_ino = dst->st_ino;
  st->anon = anon;
  st->order = r->n_streams;
  if (!anon && stkr__stream_ix_add(r, st, r->n_streams) != 0) {
    free(st->dir);
    free(st);
    return -ENOMEM;
  }
  r->streams[r->n_streams++] = st;
  *out = st;
  return 0;
}

/* Streams sorted by pid, then creation order (once per stkr_reader_add),
 * and stream_ix, which holds their positions, built again. */
static void stkr__streams_sort(stkr_reader *r) {
  if (r->n_streams < 2)
    return;
  qsort(r->streams, r->n_streams, sizeof(*r->streams), stkr__stream_cmp);
  /* The entries it held, at their new positions, in the room they had:
   * no growth, so no failure. */
  stkr_index_clear(&r->stream_ix);
  for (size_t i = 0; i < r->n_streams; i++)
    if (!r->streams[i]->anon)
      (void)stkr__stream_ix_add(r, r->streams[i], i);
}

/* Add one file to stream st, keeping files sorted by seq, once per inode.
 * unreadable: 0, or why it cannot be read (stkr__file); fst is NULL when
 * even its stat failed (a dangling symbolic link: no inode to compare). */
static int stkr__stream_add_file(stkr__stream *st, const char *path,
                                 uint32_t seq, const struct stat *fst,
                                 int unreadable) {
  stkr__file *f;
  size_t i;

  /* Once per inode; what cannot be read once per name of it (two names
   * of a process linked to /dev/zero are two losses), so that the same
   * directory given twice is still read once. */
  for (i = 0; fst != NULL && i < st->n_files; i++)
    if (st->files[i].dev == fst->st_dev && st->files[i].ino == fst->st_ino &&
        (unreadable == 0 || st->files[i].seq == seq))
      return 0; /* (no inode is 0: never equal to a file without a stat) */
  /* Most processes have one segment: start at 1, not stkr__grow's 16
   * (the arrays of every process stay allocated while reading). */
  if (st->cap_files == 0) {
    if ((st->files = malloc(sizeof(*st->files))) == NULL)
      return -ENOMEM;
    st->cap_files = 1;
  }
  if (stkr__grow(&st->files, &st->cap_files, st->n_files + 1,
                 sizeof(*st->files)) != 0)
    return -ENOMEM;
  for (i = st->n_files; i > 0 && st->files[i - 1].seq > seq; i--)
    st->files[i] = st->files[i - 1];
  f = &st->files[i];
  memset(f, 0, sizeof(*f));
  if ((f->path = strdup(path)) == NULL) {
    memmove(&st->files[i], &st->files[i + 1],
            (st->n_files - i) * sizeof(*f));
    return -ENOMEM;
  }
  f->seq = seq;
  f->unreadable = unreadable;
  if (fst != NULL) {
    f->dev = fst->st_dev;
    f->ino = fst->st_ino;
    f->size = unreadable ? 0 : (uint64_t)fst->st_size;
  }
  st->n_files++;
  st->info.segments++;
  st->info.compressed_bytes += f->size;
  if (st->info.first_seq == 0 || seq < st->info.first_seq)
    st->info.first_seq = seq;
  if (seq > st->info.last_seq)
    st->info.last_seq = seq;
  return 0;
}

static char *stkr__join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  bool slash = dl > 0 && dir[dl - 1] != '/';
  char *p = malloc(dl + slash + nl + 1);

  if (p == NULL)
    return NULL;
  memcpy(p, dir, dl);
  if (slash)
    p[dl] = '/';
  memcpy(p + dl + slash, name, nl + 1);
  return p;
}

static int stkr__add_dir(stkr_reader *r, const char *dir,
                         const struct stat *dst) {
  unsigned long ignored = 0, found = 0;
  char example[256] = "";
  struct dirent *de;
  DIR *d;
  int err = 0;

  d = opendir(dir);
  if (d == NULL)
    return -errno;
  while (err == 0 && (errno = 0, de = readdir(d)) != NULL) {
    struct stat fst;
    stkr__stream *st;
    uint32_t pid, seq;
    uint64_t sid;
    char *path;
    int bad;

    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    /* Ring and session files belong to the recording (stkr_recover.h):
     * not segments, and not strangers either. */
    if (stkr__rc_parse_name(de->d_name, &pid, &sid, &seq) == 0)
      continue;
    if (strcmp(de->d_name, STKR_MARKS_FILE) == 0)
      continue; /* stkr__marks_load_dir reads it */
    if (strcmp(de->d_name, STKR_CACHE_DIR) == 0 ||
        strncmp(de->d_name, ".stackrec-", 10) == 0)
      continue; /* what the recording's processes share (the cache, a
                   tombstone being written): no data */
    if (stkr_fmt_segment_parse(de->d_name, &pid, &seq) != 0) {
      if (ignored++ == 0)
        snprintf(example, sizeof(example), "%s", de->d_name);
      continue;
    }
    /* A segment's name on what is no regular file (a FIFO, a directory,
     * a dangling link) is not a stranger: that process's segment cannot
     * be read, which its reading reports as damage. Never opened (a FIFO
     * would block the open). A link to a regular file is followed. */
    if (fstatat(dirfd(d), de->d_name, &fst, 0) != 0)
      bad = -errno;
    else
      bad = S_ISREG(fst.st_mode) ? 0 : -EINVAL;
    /* A regular file is read once, whatever names it has; each name of
     * what cannot be read is its own loss (QA, session 40: segment names
     * of three processes linked to /dev/zero were said once). */
    struct stkr__inode *held = NULL;
    if ((path = stkr__join(dir, de->d_name)) == NULL) {
      err = -ENOMEM;
      break;
    }
    const int seen =
        stkr__inode_seen(r, bad == 0 ? &fst : NULL, dst, pid, seq, &held);
    if (seen != 0) { /* read under its other name; or out of memory */
      err = seen < 0 ? seen : stkr__hard_link(r, path, dst, pid, seq, held);
      free(path);
      found++;
      continue;
    }
    if (path == NULL)
      err = -ENOMEM;
    else if ((err = stkr__stream_get(r, dir, dst, pid, false, &st)) == 0)
      err = stkr__stream_add_file(st, path, seq,
                                  bad == 0 || bad == -EINVAL ? &fst : NULL,
                                  bad);
    free(path);
    found++;
  }
  if (err == 0 && errno != 0)
    err = -errno;
  closedir(d);
  stkr__streams_sort(r);
  if (err == 0)
    err = stkr__marks_load_dir(r, dir, dst);
  if (err != 0)
    return err;
  if (ignored)
    stkr__warn(r, STKR_WARN_IGNORED_FILES, dir, -1, 0,
               "ignored %lu %s (stackrec-<pid>-<seq>.zst), e.g. \"%s\"",
               ignored,
               ignored == 1 ? "entry that is not a segment file"
                            : "entries that are not segment files",
               example);
  if (found == 0)
    stkr__warn(r, STKR_WARN_NO_SEGMENTS, dir, -1, 0,
               "no segment files (stackrec-<pid>-<seq>.zst) found");
  return 0;
}

int stkr_reader_add(stkr_reader *r, const char *path) {
  struct stat fst, dst;
  const char *base;
  stkr__stream *st;
  uint32_t pid, seq;
  char *dir;
  int err;

  if (r == NULL || path == NULL)
    return -EINVAL;
  if (r->started)
    return -EBUSY;
  if (stat(path, &fst) != 0)
    return -errno;
  if (S_ISDIR(fst.st_mode))
    return stkr__add_dir(r, path, &fst);
  if (!S_ISREG(fst.st_mode))
    return -EINVAL;
  /* A file: its directory (by inode) and pid name its stream. */
  base = strrchr(path, '/');
  if (base != NULL) {
    dir = strndup(path, (size_t)(base - path) + (base == path));
    base++;
  } else {
    dir = strdup(".");
    base = path;
  }
  if (dir == NULL)
    return -ENOMEM;
  if (stat(dir, &dst) != 0) {
    err = -errno;
    free(dir);
    return err;
  }
  struct stkr__inode *held = NULL;
  bool named = stkr_fmt_segment_parse(base, &pid, &seq) == 0;
  if ((err = stkr__inode_seen(r, &fst, &dst, named ? pid : 0,
                              named ? seq : 0, &held)) != 0) {
    free(dir); /* added by another name */
    return err < 0 ? err : 0;
  }
  if (named) {
    err = stkr__stream_get(r, dir, &dst, pid, false, &st);
  } else {
    pid = 0;
    seq = 0;
    err = stkr__stream_get(r, dir, &dst, 0, true, &st);
  }
  if (err == 0)
    err = stkr__stream_add_file(st, path, seq, &fst, 0);
  stkr__streams_sort(r);
  if (err == 0)
    err = stkr__marks_load_dir(r, dir, &dst);
  free(dir);
  return err;
}

int stkr_reader_open(const char *path, const stkr_reader_opts *opts,
                     stkr_reader **out) {
  int err = stkr_reader_create(opts, out);

  if (err == 0 && (err = stkr_reader_add(*out, path)) != 0) {
    stkr_reader_free(*out);
    *out = NULL;
  }
  return err;
}

/* ---- iteration --------------------------------------------------------- */

/* realloc *arr down to n elements (nothing when n is 0: keep it). */
static void stkr__shrink(void *arr, size_t *cap, size_t n, size_t size) {
  void **parr = arr;
  void *p;

  if (n == 0 || n >= *cap)
    return;
  p = realloc(*parr, n * size);
  if (p != NULL) {
    *parr = p;
    *cap = n;
  }
}

/* The stream has been read: free what only reading needed (threads,
 * stacks, frames, strings, id maps), keeping the summary, sites and images
 * the accessors hand out, so memory does not grow with the number of
 * processes read beyond their summaries. */
static void stkr__stream_trim(stkr__stream *st) {
  size_t i;

  STKR_FREE_EACH(st->threads, st->n_threads, name);
  free(st->threads);
  st->threads = NULL;
  st->n_threads = st->cap_threads = 0;
  stkr_map_free(&st->thread_map);
  stkr_map_free(&st->tids);
  for (i = 0; i < st->n_stacks; i++) {
    free(st->stacks[i].pcs);
    free(st->stacks[i].frames);
  }
  free(st->stacks);
  st->stacks = NULL;
  st->n_stacks = st->cap_stacks = 0;
  stkr_map_free(&st->stack_map);
  stkr_map_free(&st->stack_keys);
  free(st->frames);
  free(st->frame_ids);
  st->frames = NULL;
  st->frame_ids = NULL;
  st->n_frames = st->cap_frames = st->cap_frame_ids = 0;
  stkr_map_free(&st->frame_map);
  for (i = 0; i < st->n_strings; i++)
    free(st->strings[i]);
  free(st->strings);
  st->strings = NULL;
  st->n_strings = st->cap_strings = 0;
  stkr_map_free(&st->string_map);
  stkr_map_free(&st->site_map);
  stkr__shrink(&st->sites, &st->cap_sites, st->n_sites, sizeof(*st->sites));
  stkr__shrink(&st->images, &st->cap_images, st->n_images,
               sizeof(*st->images));
  stkr__shrink(&st->files, &st->cap_files, st->n_files, sizeof(*st->files));
}

static void stkr__stream_done(stkr_reader *r, stkr__stream *st) {
  stkr__acct_stream_done(r, st);
  if (st->ext_next != 0)
    stkr__marks_ext_check(r, st);
  /* No event of this stream is current any more (stkr_reader_frames). */
  r->ev_stream = NULL;
  r->ev_stack = NULL;
  r->ev_frames_of = NULL;
  if (st->info.unresolved_events)
    stkr__warn(r, STKR_WARN_UNRESOLVED,
               st->n_files ? st->files[0].path : st->dir, -1, st->info.pid,
               "process %u: %llu event%s refer to undefined "
               "sites/threads/stacks (shown as \"?\")",
               (unsigned)st->info.pid,
               (unsigned long long)st->info.unresolved_events,
               st->info.unresolved_events == 1 ? "" : "s");
  if (st->info.stacks_lost)
    stkr__warn(r, STKR_WARN_INCOMPLETE,
               st->n_files ? st->files[0].path : st->dir, -1, st->info.pid,
               "process %u: %llu event%s recovered without %s stack (sent "
               "once, in a batch that is gone: a failed write or a deleted "
               "segment; shown as \"?\")",
               (unsigned)st->info.pid,
               (unsigned long long)st->info.stacks_lost,
               st->info.stacks_lost == 1 ? "" : "s",
               st->info.stacks_lost == 1 ? "its" : "their");
  stkr__stream_trim(st);
}

/* What a file that is not regular is, for a warning. */
static const char *stkr__file_type(mode_t mode) {
  return S_ISFIFO(mode)   ? "a FIFO"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
                          : "an entry";
}

/* Segment f of st cannot be read (err: its stat's or open's -errno, or
 * -EINVAL: not a regular file): data lost, said with what it is. */
static void stkr__unreadable(stkr_reader *r, stkr__stream *st,
                             stkr__file *f, int err) {
  struct stat sb;
  char why[160];

  if (err == -EINVAL && stat(f->path, &sb) == 0 && !S_ISREG(sb.st_mode))
    snprintf(why, sizeof(why), "%s, not a regular file",
             stkr__file_type(sb.st_mode));
  else if (lstat(f->path, &sb) == 0 && S_ISLNK(sb.st_mode))
    snprintf(why, sizeof(why), "a symbolic link: %s", strerror(-err));
  else
    snprintf(why, sizeof(why), "cannot open: %s", strerror(-err));
  f->unreadable = err;
  st->info.unreadable_segments++;
  stkr__warn(r, STKR_WARN_IO, f->path, -1, st->info.pid,
             "unreadable segment (%s), not read", why);
}

int stkr_reader_next(stkr_reader *r, stkr_event_view *ev) {
  if (r == NULL || ev == NULL)
    return -EINVAL;
  if (r->hard_err)
    return r->hard_err;
  r->started = true;
  r->ev_ext = false; /* stkr_reader_mark_clock */

  for (;;) {
    stkr__stream *st;
    stkr__file *f;
    uint64_t off;
    int rc;

    if (r->cur_stream >= r->n_streams)
      return 0;
    st = r->streams[r->cur_stream];
    if (r->batch != NULL && r->ev_idx < r->ev_count) {
      /* A stream's external marks come before its first event, once its
       * first Header is read: they go on its clock (stkr_extmarks.c). */
      if (r->n_ext != 0 && st->ext_next < r->n_ext &&
          stkr__marks_next_ext(r, st, r->cur_stream, ev))
        return 1;
      rc = stkr__batch_event(r, st, r->cur_stream, ev);
      if (rc != 0)
        return r->hard_err = rc;
      return 1;
    }
    stkr__batch_release(r);

    if (r->in.fd < 0 && r->cur_file == 0 && st->n_files != 0)
      st->info.head_lost |= st->files[0].seq > 1 ||
                           st->files[0].size <= STKR_FMT_MARKER_MAX;
    if (r->in.fd < 0) {
      if (st->info.status != 0 || r->cur_file >= st->n_files) {
        /* ... or at its end, when it had none. */
        if (r->n_ext != 0 && st->ext_next < r->n_ext &&
            stkr__marks_next_ext(r, st, r->cur_stream, ev))
          return 1;
        stkr__stream_done(r, st);
        r->cur_stream++;
        r->cur_file = 0;
        continue;
      }
      f = &st->files[r->cur_file];
      rc = f->unreadable ? f->unreadable : stkr__input_open(&r->in, f->path);
      if (rc == -ENOMEM)
        return r->hard_err = rc;
      if (rc != 0) {
        if (rc != -ENOENT)
          stkr__tomb_clip(st, f); /* there, whatever it holds */
        if (rc != -ENOENT || !stkr__tomb_gone(st, f))
          stkr__unreadable(r, st, f, rc);
        r->cur_file++;
        continue;
      }
      if (stkr__tombstone_check(r, st, f)) {
        /* The disk cap's: counted by the accounting, not read. */
        stkr__input_close(&r->in);
        r->cur_file++;
        continue;
      }
      stkr__tomb_clip(st, f);
      st->damaged_at_file = st->info.damaged_batches;
      if (f->size == 0) {
        /* A segment just created by a live recorder, or a placeholder:
         * nothing recorded is lost, but say why it contributes nothing. */
        struct stat now;

        if (fstat(r->in.fd, &now) == 0 && now.st_size == 0) {
          stkr__warn(r, STKR_WARN_EMPTY_FILE, f->path, -1, st->info.pid,
                     "empty file, skipped");
          stkr__input_close(&r->in);
          r->cur_file++;
          continue;
        }
      }
    }
    f = &st->files[r->cur_file];
    rc = stkr__next_frame(r, st, &off);
    if (rc < 0)
      return r->hard_err = rc;
    if (rc == 0) {
      stkr__input_close(&r->in);
      r->cur_file++;
      continue;
    }
    {
      bool was_clean = st->sess_clean;

      rc = stkr__batch_load(r, st, f->path, off);
      if (rc < 0)
        return r->hard_err = rc;
      /* Where the session ended cleanly: a cut-off batch later in that
       * same file is damage, not a live tail (stkr_frames.c). */
      if (st->sess_clean && !was_clean)
        st->clean_file = r->cur_file + 1;
    }
    if (rc == STKR__BATCH_OK && r->opts.batch != NULL) {
      stkr_batch_view bv = {.process = r->cur_stream, .pid = st->info.pid,
                            .path = f->path, .file_seq = f->seq,
                            .offset = off, .frame_len = r->frame_len,
                            .data = r->dbuf.data, .len = r->dbuf.len};

      rc = r->opts.batch(r->opts.batch_arg, &bv);
      if (rc != 0)
        return r->hard_err = rc < 0 ? rc : -EIO;
    }
    if (rc == STKR__BATCH_UNSUPPORTED) {
      stkr__input_close(&r->in);
      r->cur_file = st->n_files;
    }
  }
}

/* ---- accessors --------------------------------------------------------- */

size_t stkr_reader_process_count(const stkr_reader *r) {
  return r ? r->n_streams : 0;
}

const stkr_process_info *stkr_reader_process(const stkr_reader *r, size_t i) {
  if (r == NULL || i >= r->n_streams)
    return NULL;
  return &r->streams[i]->info;
}

int stkr_reader_sites(const stkr_reader *r, size_t i,
                      const stkr_site_info **sites, size_t *n) {
  if (r == NULL || i >= r->n_streams || sites == NULL || n == NULL)
    return -EINVAL;
  *sites = r->streams[i]->sites;
  *n = r->streams[i]->n_sites;
  return 0;
}

int stkr_reader_images(const stkr_reader *r, size_t i,
                       const stkr_image_info **images, size_t *n) {
  if (r == NULL || i >= r->n_streams || images == NULL || n == NULL)
    return -EINVAL;
  *images = r->streams[i]->images;
  *n = r->streams[i]->n_images;
  return 0;
}

void stkr_reader_get_counts(const stkr_reader *r, stkr_reader_counts *out) {
  if (out == NULL)
    return;
  if (r == NULL)
    memset(out, 0, sizeof(*out));
  else
    *out = r->counts;
}
