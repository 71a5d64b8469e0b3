/*
 * symbolize.c: the run of `stackrec symbolize` (its command:
 * symbolize_cmd.c): resolve a recording made in offline (or none) mode
 * after the fact, with the binaries and debug files matched by build-id,
 * and write it again with frames (same format, same file names, in
 * another directory). Frames a recording already has as image+offset are
 * resolved again (symbolize_mixed.h).
 *
 * Each segment file is rewritten batch by batch: the batch is decoded,
 * every StackDef gets its frames (StackDef.frames) and the StringDefs and
 * FrameDefs the segment still lacks are added, and the batch is encoded
 * again; everything else (events, payloads, threads, drops, counters,
 * headers) is carried over untouched. One frame cache (symbolize/symbolize.h)
 * serves the whole run, so each unique PC is resolved once; a segment
 * starts a new "epoch", so every output segment is self-contained like the
 * recorder's own. The image list comes from the recording (whole list in
 * every segment's first batch and whenever it changed).
 *
 * Never a wrong name: an image whose file cannot be found with the recorded
 * build-id (or has another build-id) keeps image+offset frames and gets one
 * warning. Damaged input is copied through unchanged (the reader resyncs
 * on it as it would have on the original) and reported.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "common/stkr_pid.h"
#include "proto/stkr_format.h"
#include "symbolize/symbolize.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/json.h" /* stkr_text_file_read */
#include "tools/stackrec/symbolize_canon.h"
#include "tools/stackrec/symbolize_mixed.h"
#include "tools/stackrec/symbolize_run.h"
#include "tools/stackrec/symcache_dir.h"

/* The largest segment file symbolize reads (whole, as it rewrites it): 16
 * times the writer's default segment (64 MiB). A larger one (a writer
 * given STACKREC_SEGMENT_BYTES past it, or a damaged or hostile file: a
 * sparse 100 GiB file took all memory, QA, session 40) is left out, said,
 * and marked lost in OUT. */
#define SYM_MAX_FILE ((size_t)1 << 30)


static void warn_cb(void *arg, const char *why) {
  const stkr__sym_run *run = arg;
  if (run->quiet)
    return;
  fflush(stdout);
  /* An image's path is the recorded program's to choose: escaped. */
  char prefix[64];
  snprintf(prefix, sizeof prefix, "stackrec %s: warning: ", run->cmd);
  stkr_cli_put_line(stderr, prefix, why, "");
}

static int cmp_seg(const void *a, const void *b) {
  const stkr__sym_seg *x = a, *y = b;
  return stkr_cmp_u64_pair(x->pid, y->pid, x->seq, y->seq);
}

/* Decode the frame at p (csize bytes). @return the Batch, or NULL. The
 * reader's rule (stkr_fmt_decode_frame): a frame without a content size is
 * fine, one without a checksum is not, so symbolize and verify agree. */
static Stackrec__Batch *decode(stkr__sym_run *run, const uint8_t *p, size_t csize) {
  stkr_fmt_buf b = {run->dbuf, 0, run->dbuf_cap};
  const char *why;
  size_t flen;
  int err = stkr_fmt_decode_frame(run->dctx, p, csize, &b, &flen, &why);
  run->dbuf = b.data;
  run->dbuf_cap = b.cap;
  if (err != 0 || flen != csize) return NULL;
  return stackrec__batch__unpack(&run->pballoc.pb, b.len, run->dbuf);
}

/* Pass the union of canonical images (symbolize_canon.h) to the cache. */
static int canon_publish(stkr__sym_run *run) {
  const stkr__canon *k = &run->canon;
  stkr__symimg *si = calloc(k->n_img ? k->n_img : 1, sizeof *si);
  int err;
  if (!si) return -ENOMEM;
  for (size_t i = 0; i < k->n_img; i++) {
    const stkr__canon_img *c = &k->img[i];
    si[i] = (stkr__symimg){c->path, c->base, c->base + c->text_lo,
                           c->base + c->text_hi, c->build_id, c->build_id_len,
                           c->app};
  }
  err = stkr__symc_set_images(run->c, si, k->n_img);
  free(si);
  return err;
}

/* Add frames to one decoded batch and encode it into run->out (in a
 * mixed file, to its bare stacks only, with moved ids). */
static int rewrite(stkr__sym_run *run, Stackrec__Batch *b) {
  stkr__symdefs defs = {0};
  stkr__sym_moved mv = {.base = run->id_base};
  bool *ours; /* the stacks given frames here */
  /* A renamed stack's own frames (protobuf-c's), given back after. */
  struct { uint32_t *frames; size_t n; } *was = NULL;
  int err = 0;
  size_t i;

  if (b->n_images) {
    /* The same session of the same process: a list that replaces an
     * earlier one keeps that one's unloaded images (symbolize_canon.h). An
     * exec'd program keeps its pid, not its session id. */
    bool same = !run->new_proc &&
                (b->header == NULL || b->header->session_id == run->session_id);
    if (b->header != NULL) run->session_id = b->header->session_id;
    if ((err = stkr__canon_set_process(&run->canon, b, same)) < 0 ||
        (err > 0 && (err = canon_publish(run)) < 0))
      return err;
    err = 0;
    run->new_proc = false;
  } else if (run->new_proc) {
    /* A process whose list we have not seen (its first batch damaged):
     * image+offset rather than the last process's names. */
    stkr__canon_unknown_process(&run->canon);
    run->new_proc = false;
  }
  if ((ours = calloc(b->n_stacks + 1, sizeof *ours)) == NULL ||
      (run->rename && (was = calloc(b->n_stacks + 1, sizeof *was)) == NULL)) {
    free(ours);
    return -ENOMEM;
  }
  for (i = 0; i < b->n_stacks && err == 0; i++) {
    Stackrec__StackDef *d = b->stacks[i];
    const uint64_t *pcs = stkr__canon_pcs(&run->canon, d->pcs, d->n_pcs);
    const uint32_t *fr;
    uint32_t nf;
    /* A stack of no PC (an event in a handler on an alternate signal
     * stack: the walk found no frame inside the thread's stack) has no
     * frame to resolve. Taken for "out of memory" below, it failed the
     * whole recording's resolution. */
    if (d->n_pcs == 0) continue;
    if (run->mixed && d->n_frames > 0) {
      uint32_t *own = d->frames;
      size_t n_own = d->n_frames;
      int named;
      if (!run->rename || !stkr__sym_stack_unnamed(&run->scan, d)) continue;
      if (!pcs ||
          (named = stkr__sym_rename_stack(run->c, &run->scan, pcs, d,
                                          run->epoch, &defs, &mv)) < 0) {
        err = -ENOMEM;
        break;
      }
      if (named > 0) {
        was[i].frames = own;
        was[i].n = n_own;
        run->renamed_pcs += (uint64_t)named;
        run->renamed_stacks++;
        run->renamed_now++;
      }
      continue;
    }
    if (!pcs)
      err = -ENOMEM;
    else if ((err = stkr__symc_stack(run->c, pcs, d->n_pcs, &fr, &nf)) == 0 &&
        (err = stkr__symc_emit(run->c, fr, nf, run->epoch, &defs)) == 0) {
      if (run->mixed && (fr = stkr__sym_move_frames(&mv, fr, nf)) == NULL) {
        err = -ENOMEM;
        break;
      }
      d->frames = (uint32_t *)fr; /* the cache's (or mv's): unhooked below */
      d->n_frames = nf;
      ours[i] = true;
      run->stacks++;
    }
  }
  if (err == 0 && run->mixed) {
    err = stkr__sym_encode_mixed(b, &defs, &mv, run->cctx, &run->out);
  } else if (err == 0) { /* b's own are none: only ours */
    b->strings = defs.strings;
    b->n_strings = defs.n_strings;
    b->frames = defs.frames;
    b->n_frames = defs.n_frames;
    err = stkr_fmt_encode_batch(b, run->cctx, 3, &run->out);
    /* The added memory is not protobuf-c's: keep free_unpacked off it. */
    b->strings = NULL;
    b->n_strings = 0;
    b->frames = NULL;
    b->n_frames = 0;
  }
  for (i = 0; i < b->n_stacks; i++) {
    if (was != NULL && was[i].n != 0) { /* renamed: its own back */
      b->stacks[i]->frames = was[i].frames;
      b->stacks[i]->n_frames = was[i].n;
      continue;
    }
    if (!ours[i]) continue; /* a mixed file's own frames stay its own */
    b->stacks[i]->frames = NULL;
    b->stacks[i]->n_frames = 0;
  }
  free(ours);
  free(was);
  stkr__sym_moved_free(&mv);
  stkr__symdefs_free(&defs);
  return err;
}

/* In place, the temporary files are renamed over the originals only once
 * all are written (pending_commit): a failure, or record being killed,
 * before that leaves every original as it was (readers ignore the
 * ".NAME.tmp" files); a reader sees the old file or the new one, never
 * half of either. The new files are not fsync'd one by one: measured here,
 * an fdatasync per file cost 0.5-10 ms each on a busy disk (200 processes:
 * +0.2 to +1.3 s, more than the whole recording), one syncfs waited for
 * every other writer of the file system, and starting write-back early
 * (sync_file_range) did not help. The recorder does not fsync its
 * segments either; ext4 (auto_da_alloc) flushes a file renamed over an
 * existing one before the rename commits. The directory is synced once,
 * after the renames. */
static int pending_add(stkr__sym_run *run, const char *name) {
  if (stkr_grow((void **)&run->pending, &run->cap_pending, run->n_pending + 1,
                sizeof *run->pending) != 0)
    return -ENOMEM;
  if (!(run->pending[run->n_pending] = strdup(name))) return -ENOMEM;
  run->n_pending++;
  return 0;
}

/* Rename each written temporary file over its original, then sync the
 * directory. @return 0 or -errno (the originals not yet replaced stay,
 * their temporary files are removed). */
static int pending_commit(stkr__sym_run *run, const char *dir) {
  char path[PATH_MAX], tmp[PATH_MAX + 16];
  int err = 0;
  size_t i;

  if (run->n_pending == 0) return 0;
  for (i = 0; i < run->n_pending; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, run->pending[i]);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, run->pending[i]);
    if (err == 0 && rename(tmp, path) != 0) {
      err = -errno;
      fprintf(stderr, "stackrec %s: cannot replace %s: %s\n", run->cmd, path,
              strerror(-err));
    }
    if (err < 0) (void)unlink(tmp);
  }
  /* The renames themselves: durable with the directory. */
  if (err == 0) err = stkr_fsync_dir(dir);
  return err;
}

bool stkr_cli_symbolize_is_temp(const char *name) {
  size_t n = strlen(name);
  char seg[NAME_MAX + 1];
  uint32_t pid, seq;

  /* write_out's ".%s.tmp" */
  if (n < sizeof ".x.tmp" - 1 || name[0] != '.' ||
      strcmp(name + n - 4, ".tmp") != 0 || n - 5 >= sizeof seg)
    return false;
  memcpy(seg, name + 1, n - 5);
  seg[n - 5] = '\0';
  return stkr_fmt_segment_parse(seg, &pid, &seq) == 0;
}

/* Write run->out to path, or (in place) to a temporary file beside it,
 * renamed over it by pending_commit: a crash leaves the old file or the
 * new one, never half of either. @return 0 or -errno, after printing why. */
static int write_out(stkr__sym_run *run, const char *dir, const char *name) {
  char path[PATH_MAX], tmp[PATH_MAX + 16];
  int err = 0, fd;

  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
      (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= sizeof tmp)
    err = -ENAMETOOLONG;
  else if ((fd = open(run->in_place ? tmp : path,
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
    err = -errno;
  else {
    struct stat orig;
    err = stkr_write_all(fd, run->out.data, run->out.len);
    /* In place, a session's final segment stays one (the disk cap of a
     * later writer into this directory keeps it: stkr_format.h). */
    if (run->in_place && stat(path, &orig) == 0 && STKR_FMT_SEGMENT_IS_FINAL(orig.st_mode))
      (void)fchmod(fd, STKR_FMT_SEGMENT_FINAL_MODE);
    if (close(fd) != 0 && err == 0) err = -errno;
    if (err == 0 && run->in_place) err = pending_add(run, name);
    /* Not half a file: in place the original stays; in OUT the name is
     * freed for the lost marker (review, session 40: a write that stopped
     * on a batch boundary left a file that verified intact). */
    if (err < 0) (void)unlink(run->in_place ? tmp : path);
  }
  if (err < 0) {
    char line[PATH_MAX + 128], prefix[32];
    snprintf(prefix, sizeof prefix, "stackrec %s: ", run->cmd);
    snprintf(line, sizeof line, "cannot write %s: %s", path, strerror(-err));
    stkr_cli_put_line(stderr, prefix, line, "");
  }
  return err;
}

/* An input segment that could not be read: its place in OUT holds merge's
 * "lost" marker, so that every reader of OUT reports the loss (QA,
 * session 25: OUT verified intact, the process gone, with only symbolize's
 * exit status to tell). In place, the unreadable file itself stays. */
static int put_lost_marker(stkr__sym_run *run, const char *outdir,
                           const char *name) {
  uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
  int err;

  stkr_fmt_lost_marker(t, (uint32_t)getpid());
  run->out.len = 0;
  if ((err = stkr_fmt_buf_append(&run->out, t, sizeof t)) < 0) return err;
  return write_out(run, outdir, name);
}

/* What the batches of a file hold. */
typedef struct file_look {
  bool already, stacks, bare, inproc;
  size_t end; /* where the first frame that is not zstd's starts (len: none) */
} file_look;

/* Look at every batch of data (a whole file): *fl, and its frames into
 * run->scan (reset first). @return 0 or -ENOMEM. */
static int look_at_file(stkr__sym_run *run, const uint8_t *data, size_t len,
                        file_look *fl) {
  size_t off;
  int err = 0;

  memset(fl, 0, sizeof *fl);
  fl->end = len;
  stkr__sym_scan_reset(&run->scan);
  for (off = 0; off < len && err == 0;) {
    size_t cs = ZSTD_findFrameCompressedSize(data + off, len - off);
    if (ZSTD_isError(cs)) {
      /* On past damage, as the reader and do_file go: the definitions
       * after it count too (review, session 40: ids above a damaged
       * stretch were missed, and the new ones could take them). */
      if (fl->end == len) fl->end = off;
      off = stkr_fmt_next_frame_magic(data, len, off + 1);
      continue;
    }
    Stackrec__Batch *b = decode(run, data + off, cs);
    if (b) {
      fl->already |= stkr__sym_has_frames(b);
      fl->bare |= stkr__sym_has_bare_stack(b);
      fl->inproc |= stkr__sym_inproc(b);
      fl->stacks |= b->n_stacks != 0;
      err = stkr__sym_scan_batch(&run->scan, b);
      stackrec__batch__free_unpacked(b, &run->pballoc.pb);
    }
    off += cs;
  }
  return err;
}

/* Not in place, before any file is written: the ids this run adds go
 * above every id of the recording, since a reader keeps a session's
 * definitions across its files, the first of an id: an earlier run's
 * moved ids, in a later file of the session, would otherwise win over
 * ours. A file not read here is not read by do_file either (said there).
 * @return 0 or -ENOMEM. */
static int find_id_base(stkr__sym_run *run, const char *indir, const stkr__sym_seg *segs,
                        size_t n_segs) {
  for (size_t i = 0; i < n_segs; i++) {
    char in[PATH_MAX];
    uint8_t *data;
    size_t len;
    file_look fl;
    int err;

    snprintf(in, sizeof in, "%s/%s", indir, segs[i].name);
    if ((err = stkr_text_file_read(in, SYM_MAX_FILE, (char **)&data, &len,
                                   NULL, 0)) < 0) {
      if (err == -ENOMEM) return err;
      continue;
    }
    err = look_at_file(run, data, len, &fl);
    free(data);
    if (err < 0) return err;
  }
  /* A hostile file's ids near 2^32 leave no room: its frames keep theirs,
   * and stacks without frames in a file with frames stay so (ids from
   * STKR__SYM_MIXED_ID_BASE could be the file's own: review, session 40). */
  run->rename = run->scan.max_id < STKR__SYM_MIXED_ID_ROOM;
  run->no_room = !run->rename;
  if (run->rename && run->scan.max_id >= STKR__SYM_MIXED_ID_BASE)
    run->id_base = run->scan.max_id + 1;
  return 0;
}

/* Rewrite one segment file into outdir. @return 0, or -errno (hard). */
static int do_file(stkr__sym_run *run, const char *indir, const char *outdir,
                   const char *name) {
  char in[PATH_MAX];
  uint8_t *data;
  size_t len, off = 0;
  bool already, renamable;
  file_look fl;
  struct stat gone;
  int err;

  snprintf(in, sizeof in, "%s/%s", indir, name);
  /* The whole file, a regular one only (-ENXIO: a FIFO named like a
   * segment would wait for a writer): read once, written once. */
  if ((err = stkr_text_file_read(in, SYM_MAX_FILE, (char **)&data, &len,
                                 NULL, 0)) == -ENOENT && !run->in_place &&
      lstat(in, &gone) != 0 && errno == ENOENT) {
    /* Listed, then gone (not a dangling link: that is lost data): a
     * recording still written, whose disk cap took it into a run
     * (stkr_format.h) since. Said in OUT by a tombstone of
     * its own (naming its process as the deleter: who it was is not
     * known), not as lost data (QA, session 35: exit 1 in 29 of 40). */
    uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
    uint32_t pid = 0, seq;
    (void)stkr_fmt_segment_parse(name, &pid, &seq);
    stkr_fmt_tombstone(t, pid);
    run->out.len = 0;
    if ((err = stkr_fmt_buf_append(&run->out, t, sizeof t)) < 0) return err;
    return write_out(run, outdir, name);
  }
  if (err < 0) {
    char line[PATH_MAX + 128], prefix[32];
    snprintf(prefix, sizeof prefix, "stackrec %s: ", run->cmd);
    snprintf(line, sizeof line, "cannot read %s: %s", in,
             err == -ENXIO    ? "not a regular file"
             : err == -EINVAL ? "larger than the 1 GiB symbolize reads"
                              : strerror(-err));
    stkr_cli_put_line(stderr, prefix, line, "");
    run->status = STKR_CLI_DATA_LOST;
    if (err == -ENOMEM || run->in_place) return err == -ENOMEM ? err : 0;
    /* Said by write_out when it fails; the other files go on. */
    err = put_lost_marker(run, outdir, name);
    return err == -ENOMEM ? err : 0;
  }
  run->files++;
  run->epoch++; /* a new output segment: define everything again */
  run->out.len = 0;

  /* A file that already has frames (inproc, or symbolized before) is
   * copied as it is, unless some of its stacks have none (first seen as
   * the recording ended, or recovered): then only those are resolved
   * (mixed). */
  run->mixed = false;
  run->renamed_now = 0;
  if ((err = look_at_file(run, data, len, &fl)) < 0) {
    free(data);
    return err;
  }
  already = fl.already;
  /* Frames written as image+offset: resolved again (not in place). */
  renamable = run->rename && run->scan.unnamed_stacks;
  /* An in-process session's ids are the recorder's in every segment of
   * it, also one whose stacks all lack frames (a last segment of stacks
   * first seen at the end, a recovered one): ours go above them there too,
   * or the reader would keep the recorder's frame of the same id. */
  if ((fl.bare || renamable) && (already || fl.inproc)) {
    already = run->no_room; /* no room: copied as it is */
    run->mixed = !run->no_room;
    run->mixed_files += fl.bare && !run->no_room;
  }
  /* In place, a file without stacks has nothing to gain (each segment
   * carries its own image list: the next file does not need this one). */
  if (run->in_place && !already && !fl.stacks && fl.end == len) {
    free(data);
    return 0;
  }
  if (already) {
    run->copied_files++;
    if (run->in_place) { /* nothing to change */
      free(data);
      return 0;
    }
    stkr_fmt_buf_free(&run->out);
    if (len) {
      run->out.data = malloc(len);
      if (!run->out.data) {
        free(data);
        return -ENOMEM;
      }
      memcpy(run->out.data, data, len);
      run->out.len = run->out.cap = len;
    }
    goto write;
  }

  for (off = 0; off < len;) {
    size_t cs = ZSTD_findFrameCompressedSize(data + off, len - off), end;
    Stackrec__Batch *b;
    if (!ZSTD_isError(cs) && stkr_fmt_is_skippable(data + off, cs)) {
      /* Not a batch, not damage (a tombstone of the disk cap, or another
       * tool's): carried over as it is. */
      if ((err = stkr_fmt_buf_append(&run->out, data + off, cs)) < 0) {
        free(data);
        return err;
      }
      off += cs;
      continue;
    }
    b = ZSTD_isError(cs) ? NULL : decode(run, data + off, cs);
    if (!b) {
      /* Damaged or truncated: carried over as it is, up to the next frame
       * magic, where the reader will resync too. */
      end = stkr_fmt_next_frame_magic(data, len, off + 1);
      fflush(stdout);
      char line[PATH_MAX + 160], prefix[48];
      snprintf(prefix, sizeof prefix, "stackrec %s: warning: ", run->cmd);
      snprintf(line, sizeof line, "%s: offset %zu: damaged or truncated "
               "batch (%zu bytes) copied without symbolizing", in, off,
               end - off);
      stkr_cli_put_line(stderr, prefix, line, "");
      run->damaged++;
      run->status = STKR_CLI_DATA_LOST;
      if ((err = stkr_fmt_buf_append(&run->out, data + off, end - off)) < 0) {
        free(data);
        return err;
      }
      off = end;
      continue;
    }
    err = rewrite(run, b);
    stackrec__batch__free_unpacked(b, &run->pballoc.pb);
    if (err < 0) {
      fprintf(stderr, "stackrec %s: %s: offset %zu: %s\n", run->cmd, in,
              off, strerror(-err));
      free(data);
      return err;
    }
    run->batches++;
    off += cs;
  }
  run->renamed_files += run->renamed_now != 0;

write:
  free(data);
  return write_out(run, outdir, name);
}

/* The segment files of dir, sorted by pid then seq. */
int stkr__sym_list_segments(const char *dir, stkr__sym_seg **out, size_t *n) {
  DIR *d = opendir(dir);
  struct dirent *de;
  size_t cap = 0;

  *out = NULL;
  *n = 0;
  if (!d) return -errno;
  while ((de = readdir(d)) != NULL) {
    uint32_t pid, seq;
    if (stkr_fmt_segment_parse(de->d_name, &pid, &seq) != 0) continue;
    if (stkr_grow((void **)out, &cap, *n + 1, sizeof **out) != 0 ||
        !((*out)[*n].name = strdup(de->d_name))) {
      closedir(d);
      return -ENOMEM;
    }
    (*out)[*n].pid = pid;
    (*out)[*n].seq = seq;
    (*out)[*n].waited = false;
    (*n)++;
  }
  closedir(d);
  if (*n) qsort(*out, *n, sizeof **out, cmp_seg);
  return 0;
}

void stkr__sym_run_free(stkr__sym_run *run) {
  stkr__canon_free(&run->canon);
  stkr__sym_scan_free(&run->scan);
  for (size_t i = 0; i < run->n_pending; i++) free(run->pending[i]);
  stkr__symc_free(run->c);
  ZSTD_freeDCtx(run->dctx);
  ZSTD_freeCCtx(run->cctx);
  stkr_fmt_buf_free(&run->out);
  STKR_FREE_ALL(run->pending, run->dbuf);
}


/* May pid's files still grow? It is in record's list of the tree's
 * processes still running and has not ended since. A pid alone is not
 * enough: another program may have it now (QA, session 28: a soak of
 * 10 656 processes left 6 files unresolved for "processes still running"
 * when none was). */
static bool still_running(const stkr__sym_run *run, uint32_t pid) {
  for (size_t i = 0; i < run->n_running; i++)
    if (run->running[i] == pid) return stkr_pid_alive(pid);
  return false;
}

/* Symbolize segs (sorted by pid, seq) of indir into outdir (ignored in
 * place) with one frame cache for all of them: each unique PC of an image
 * is resolved once, and an image's symbols are loaded once while its
 * mapping stays the same from process to process (forked children).
 * @return 0, or -errno (hard: out of memory, a file not written). */
/* A run that ends on a hard error (out of memory, OUT not writable):
 * what OUT lacks, segs[from..n), is marked lost, so that it never reads
 * as a whole copy (QA, session 40: verify said intact of 1 of 4). Not in
 * place, where the originals stay. */
static void mark_rest_lost(stkr__sym_run *run, const char *outdir,
                           const stkr__sym_seg *segs, size_t from, size_t n) {
  for (size_t k = from; !run->in_place && k < n; k++)
    (void)put_lost_marker(run, outdir, segs[k].name);
}

int stkr__sym_run_segments(stkr__sym_run *run, const char *indir, const char *outdir,
                        stkr__sym_seg *segs, size_t n_segs, const char **dirs,
                        size_t n_dirs) {
  stkr__symbe *be = NULL;
  stkr__symbe_opts so = {.debug_dirs = dirs, .n_debug_dirs = n_dirs,
                         .offline = true, .warn = warn_cb, .warn_arg = run,
                         .symcache_dir = run->symcache_dir};
  int err;

  stkr_fmt_pballoc_init(&run->pballoc, STKR_FMT_MAX_DECODED_BYTES);
  stkr__demangle_swift_enable(); /* a tool: may load libswiftCore */
  if (stkr__symbe_create(&so, &be) < 0 ||
      (run->be = be, stkr__symc_create(be, &run->c)) < 0 ||
      !(run->dctx = ZSTD_createDCtx()) || !(run->cctx = ZSTD_createCCtx()) ||
      (!run->in_place && find_id_base(run, indir, segs, n_segs) < 0)) {
    fprintf(stderr, "stackrec %s: out of memory\n", run->cmd);
    mark_rest_lost(run, outdir, segs, 0, n_segs);
    return -ENOMEM;
  }
  /* Two passes in place: a writer still running may append to its files
   * (rewriting one would lose what it adds), so its files wait; those
   * whose writer ended meanwhile (python's forkserver ends just after the
   * program) are done in the second, and only the rest are "left
   * unresolved" (QA, session 20: the summary counted one such file but
   * named no process as still running). */
  for (int pass = 0; pass < (run->in_place ? 2 : 1); pass++) {
    uint32_t last_pid = 0;
    for (size_t i = 0; i < n_segs; i++) {
      if (pass == 1 && !segs[i].waited) continue;
      if (run->in_place && still_running(run, segs[i].pid)) {
        segs[i].waited = true;
        if (pass == 1 && run->live_files++ == 0) /* left unresolved */
          run->live_pid = segs[i].pid;
        continue;
      }
      /* Another process: its PCs mean other things until its image list
       * (in each segment's first batch) is set; the backend keeps the
       * symbols of images mapped alike. */
      if (segs[i].pid != last_pid) run->new_proc = true;
      last_pid = segs[i].pid;
      if ((err = do_file(run, indir, outdir, segs[i].name)) < 0) {
        /* A hard error (out of memory, OUT not writable) ends the run:
         * what OUT lacks is marked lost, so that it never reads as a
         * whole copy (QA, session 40: verify said intact of 1 of 4). */
        mark_rest_lost(run, outdir, segs, i, n_segs);
        return err;
      }
    }
  }
  return 0;
}

int stkr_cli_symbolize_in_place(const char *dir, bool quiet,
                                const char *symcache_dir,
                                stkr_cli_symcache_todo *todo,
                                const uint32_t *running, size_t n_running,
                                stkr_cli_sym_stats *st) {
  stkr__sym_seg *segs = NULL;
  size_t n_segs = 0, i;
  stkr__sym_run run;
  int err;

  memset(st, 0, sizeof *st);
  if ((err = stkr__sym_list_segments(dir, &segs, &n_segs)) < 0) return err;
  memset(&run, 0, sizeof run);
  run.cmd = "record";
  run.in_place = true;
  run.quiet = quiet;
  run.symcache_dir = symcache_dir;
  run.running = running;
  run.n_running = n_running;
  err = n_segs ? stkr__sym_run_segments(&run, dir, dir, segs, n_segs, NULL, 0) : 0;
  if (err == 0)
    err = pending_commit(&run, dir);
  else
    for (i = 0; i < run.n_pending; i++) { /* keep every original */
      char tmp[PATH_MAX + 16];
      snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, run.pending[i]);
      (void)unlink(tmp);
    }
  st->files = err == 0 ? run.n_pending : 0;
  st->live_files = run.live_files;
  st->live_pid = run.live_pid;
  st->resolved = run.c ? stkr__symc_resolved(run.c) : 0;
  st->damaged = run.damaged;
  st->from_symcache = run.c ? stkr__symbe_cached(run.be) : 0;
  if (todo != NULL && run.c != NULL) stkr_cli_symcache_take(run.be, todo);
  stkr__sym_run_free(&run);
  STKR_FREE_EACH(segs, n_segs, name);
  free(segs);
  return err;
}
