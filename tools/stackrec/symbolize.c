/*
 * symbolize.c: `stackrec symbolize`: resolve a recording made in offline
 * (or none) mode after the fact, with the binaries and debug files matched
 * by build-id, and write it again with frames (same format, same file
 * names, in another directory).
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
#include <getopt.h>
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
#include "tools/stackrec/symcache_dir.h"

static const char symbolize_help[] =
    "Usage: stackrec symbolize [--debug-dir PATH]... [--symcache DIR] [-o OUT]\n"
    "                          DIR\n"
    "\n"
    "Resolve the PCs of a recording made with STACKREC_SYMBOLIZE=offline (or\n"
    "none) into frames: function, file:line and inlined calls, as an inproc\n"
    "recording has them. Writes a symbolized copy of every segment file of\n"
    "DIR into OUT (default: DIR-symbolized), same names, same format; DIR is\n"
    "not changed. Read OUT with 'stackrec dump --frames' or '--json'.\n"
    "\n"
    "Each image of the recording is looked up by its build-id, in order:\n"
    "  PATH/.build-id/xx/yyyy and PATH/.build-id/xx/yyyy.debug, then\n"
    "  PATH/<file name of the image>, for every --debug-dir PATH; then the\n"
    "  image's recorded path. A file is used only if its build-id matches\n"
    "  the recorded one. Separate debug info is then found by build-id\n"
    "  (PATH/.build-id, /usr/lib/debug/.build-id) or .gnu_debuglink.\n"
    "Images recorded on Apple platforms (build-id = the Mach-O LC_UUID) are\n"
    "looked up by UUID among the Mach-O files under every --debug-dir PATH:\n"
    "dSYM bundles (X.dSYM/Contents/Resources/DWARF/X), .xcarchive/dSYMs,\n"
    "loose and universal binaries (the slice with that UUID); a dSYM gives\n"
    "function, file:line and inlined calls, a binary its symbol table's\n"
    "names. A PC is looked up at PC - 1 - load address + __TEXT vmaddr.\n"
    "An image with no matching file keeps image+offset frames (never a\n"
    "guessed name) and is named in a warning on stderr (\"UUID mismatch\"\n"
    "when a file of its name has another UUID). Swift names are demangled\n"
    "with the Swift runtime (STACKREC_SWIFT_RUNTIME=/path/libswiftCore.so,\n"
    "else /opt/swift/usr/lib/swift/linux); without it they stay mangled\n"
    "and a note says so.\n"
    "\n"
    "Options:\n"
    "  -d, --debug-dir PATH  also search PATH (repeatable)\n"
    "  --symcache CDIR       an ELF image whose build-id has a symbol cache\n"
    "                        CDIR/<build-id>.stkrsym (stackrec symcache\n"
    "                        build, stackrec snapshot) is answered from it,\n"
    "                        its DWARF not read (the same answers)\n"
    "  -o, --output OUT      output directory (created; must not hold\n"
    "                        segment files already)\n"
    "  -h, --help            this help\n"
    "\n";

#define MAX_DIRS 64

typedef struct segf {
  char *name;
  uint32_t pid, seq;
  bool waited; /* in place: its writer was running (run_segments) */
} segf;

typedef struct sym_run {
  bool quiet; /* record -q: warnings (an image without symbols) unsaid */
  /* In place: the processes of the recorded tree still running (record's
   * list), whose files may still grow. */
  const uint32_t *running;
  size_t n_running;
  stkr__symc *c;
  ZSTD_DCtx *dctx;
  stkr_fmt_pballoc pballoc; /* bounds what decoding one batch may take */
  ZSTD_CCtx *cctx;
  stkr_fmt_buf out;
  uint8_t *dbuf;
  size_t dbuf_cap;
  uint32_t epoch;
  uint64_t files, batches, stacks, damaged, copied_files, live_files;
  uint32_t live_pid; /* the writer of the first file left (in place) */
  int status;
  bool in_place;  /* rewrite each file where it is (stackrec record) */
  bool new_proc;  /* no image list seen yet for the current process */
  uint64_t session_id; /* of the last Header read */
  const char *cmd; /* "symbolize" or "record": prefix of messages */
  const char *symcache_dir; /* --symcache, or NULL */
  stkr__symbe *be; /* the backend, owned by c (stkr__symc_create) */
  char **pending;  /* in place: names whose ".NAME.tmp" awaits its rename */
  size_t n_pending, cap_pending;
  stkr__canon canon; /* one image list for every process */
  bool mixed; /* the file has frames: only its bare stacks are resolved,
                 their definitions moved (symbolize_mixed.h) */
  uint64_t mixed_files;
} sym_run;

static void warn_cb(void *arg, const char *why) {
  const sym_run *run = arg;
  if (run->quiet)
    return;
  fflush(stdout);
  fprintf(stderr, "stackrec %s: warning: %s\n", run->cmd, why);
}

static int cmp_seg(const void *a, const void *b) {
  const segf *x = a, *y = b;
  int c = stkr_cmp_u64(x->pid, y->pid);
  return c != 0 ? c : stkr_cmp_u64(x->seq, y->seq);
}

/* Decode the frame at p (csize bytes). @return the Batch, or NULL. The
 * reader's rule (stkr_fmt_decode_frame): a frame without a content size is
 * fine, one without a checksum is not, so symbolize and verify agree. */
static Stackrec__Batch *decode(sym_run *run, const uint8_t *p, size_t csize) {
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
static int canon_publish(sym_run *run) {
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
static int rewrite(sym_run *run, Stackrec__Batch *b) {
  stkr__symdefs defs = {0};
  stkr__sym_moved mv = {0};
  bool *ours; /* the stacks given frames here */
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
  if ((ours = calloc(b->n_stacks + 1, sizeof *ours)) == NULL)
    return -ENOMEM;
  for (i = 0; i < b->n_stacks && err == 0; i++) {
    Stackrec__StackDef *d = b->stacks[i];
    const uint64_t *pcs = stkr__canon_pcs(&run->canon, d->pcs, d->n_pcs);
    const uint32_t *fr;
    uint32_t nf;
    /* A stack of no PC (an event in a handler on an alternate signal
     * stack: the walk found no frame inside the thread's stack) has no
     * frame to resolve. Taken for "out of memory" below, it failed the
     * whole recording's resolution. */
    if (d->n_pcs == 0 || (run->mixed && d->n_frames > 0)) continue;
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
    if (!ours[i]) continue; /* a mixed file's own frames stay its own */
    b->stacks[i]->frames = NULL;
    b->stacks[i]->n_frames = 0;
  }
  free(ours);
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
static int pending_add(sym_run *run, const char *name) {
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
static int pending_commit(sym_run *run, const char *dir) {
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
static int write_out(sym_run *run, const char *dir, const char *name) {
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
    if (err < 0 && run->in_place) (void)unlink(tmp);
  }
  if (err < 0)
    fprintf(stderr, "stackrec %s: cannot write %s: %s\n", run->cmd, path,
            strerror(-err));
  return err;
}

/* An input segment that could not be read: its place in OUT holds merge's
 * "lost" marker, so that every reader of OUT reports the loss (QA,
 * session 25: OUT verified intact, the process gone, with only symbolize's
 * exit status to tell). In place, the unreadable file itself stays. */
static int put_lost_marker(sym_run *run, const char *outdir,
                           const char *name) {
  uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
  int err;

  stkr_fmt_lost_marker(t, (uint32_t)getpid());
  run->out.len = 0;
  if ((err = stkr_fmt_buf_append(&run->out, t, sizeof t)) < 0) return err;
  return write_out(run, outdir, name);
}

/* Rewrite one segment file into outdir. @return 0, or -errno (hard). */
static int do_file(sym_run *run, const char *indir, const char *outdir,
                   const char *name) {
  char in[PATH_MAX];
  uint8_t *data;
  size_t len, off = 0;
  bool already = false, stacks = false, bare = false, inproc = false;
  struct stat gone;
  int err;

  snprintf(in, sizeof in, "%s/%s", indir, name);
  /* The whole file, a regular one only (-ENXIO: a FIFO named like a
   * segment would wait for a writer): read once, written once. */
  if ((err = stkr_text_file_read(in, SIZE_MAX, (char **)&data, &len, NULL,
                                 0)) == -ENOENT && !run->in_place &&
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
    fprintf(stderr, "stackrec %s: cannot read %s: %s\n", run->cmd, in,
            err == -ENXIO ? "not a regular file" : strerror(-err));
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
  for (off = 0; off < len;) {
    size_t cs = ZSTD_findFrameCompressedSize(data + off, len - off);
    if (ZSTD_isError(cs)) break;
    Stackrec__Batch *b = decode(run, data + off, cs);
    if (b) {
      already |= stkr__sym_has_frames(b);
      bare |= stkr__sym_has_bare_stack(b);
      inproc |= stkr__sym_inproc(b);
      stacks |= b->n_stacks != 0;
      stackrec__batch__free_unpacked(b, &run->pballoc.pb);
    }
    off += cs;
  }
  /* An in-process session's ids are the recorder's in every segment of
   * it, also one whose stacks all lack frames (a last segment of stacks
   * first seen at the end, a recovered one): ours go above them there too,
   * or the reader would keep the recorder's frame of the same id. */
  if (bare && (already || inproc)) {
    already = false;
    run->mixed = true;
    run->mixed_files++;
  }
  /* In place, a file without stacks has nothing to gain (each segment
   * carries its own image list: the next file does not need this one). */
  if (run->in_place && !already && !stacks && off == len) {
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
      fprintf(stderr,
              "stackrec %s: warning: %s: offset %zu: damaged or "
              "truncated batch (%zu bytes) copied without symbolizing\n",
              run->cmd, in, off, end - off);
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

write:
  free(data);
  return write_out(run, outdir, name);
}

/* The segment files of dir, sorted by pid then seq. */
static int list_segments(const char *dir, segf **out, size_t *n) {
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

static void run_free(sym_run *run) {
  stkr__canon_free(&run->canon);
  for (size_t i = 0; i < run->n_pending; i++) free(run->pending[i]);
  free(run->pending);
  stkr__symc_free(run->c);
  ZSTD_freeDCtx(run->dctx);
  ZSTD_freeCCtx(run->cctx);
  stkr_fmt_buf_free(&run->out);
  free(run->dbuf);
}


/* May pid's files still grow? It is in record's list of the tree's
 * processes still running and has not ended since. A pid alone is not
 * enough: another program may have it now (QA, session 28: a soak of
 * 10 656 processes left 6 files unresolved for "processes still running"
 * when none was). */
static bool still_running(const sym_run *run, uint32_t pid) {
  for (size_t i = 0; i < run->n_running; i++)
    if (run->running[i] == pid) return stkr_pid_alive(pid);
  return false;
}

/* Symbolize segs (sorted by pid, seq) of indir into outdir (ignored in
 * place) with one frame cache for all of them: each unique PC of an image
 * is resolved once, and an image's symbols are loaded once while its
 * mapping stays the same from process to process (forked children).
 * @return 0, or -errno (hard: out of memory, a file not written). */
static int run_segments(sym_run *run, const char *indir, const char *outdir,
                        segf *segs, size_t n_segs, const char **dirs,
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
      !(run->dctx = ZSTD_createDCtx()) || !(run->cctx = ZSTD_createCCtx())) {
    fprintf(stderr, "stackrec %s: out of memory\n", run->cmd);
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
      if ((err = do_file(run, indir, outdir, segs[i].name)) < 0) return err;
    }
  }
  return 0;
}

int stkr_cli_symbolize_in_place(const char *dir, bool quiet,
                                const char *symcache_dir,
                                stkr_cli_symcache_todo *todo,
                                const uint32_t *running, size_t n_running,
                                stkr_cli_sym_stats *st) {
  segf *segs = NULL;
  size_t n_segs = 0, i;
  sym_run run;
  int err;

  memset(st, 0, sizeof *st);
  if ((err = list_segments(dir, &segs, &n_segs)) < 0) return err;
  memset(&run, 0, sizeof run);
  run.cmd = "record";
  run.in_place = true;
  run.quiet = quiet;
  run.symcache_dir = symcache_dir;
  run.running = running;
  run.n_running = n_running;
  err = n_segs ? run_segments(&run, dir, dir, segs, n_segs, NULL, 0) : 0;
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
  run_free(&run);
  STKR_FREE_EACH(segs, n_segs, name);
  free(segs);
  return err;
}

/* Parse the options: the --debug-dir PATHs into dirs (MAX_DIRS at most),
 * -o into *outdir, --symcache into *symcache. @return -1 to go on, else
 * the exit status. */
static int parse_args(int argc, char **argv, const char **dirs,
                      size_t *n_dirs, const char **outdir,
                      const char **symcache) {
  const stkr_cli_opt opts[] = {
      {"debug-dir", 'd', STKR_CLI_SHORT | STKR_CLI_VALUE | STKR_CLI_REPEAT,
       NULL, NULL},
      {"symcache", 'c', STKR_CLI_VALUE, symcache, NULL},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, outdir, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "symbolize", .opts = opts,
                                .help = {symbolize_help, stkr_cli_exit_help}};
  struct stat st;
  int c;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case 'd':
      if (*n_dirs == MAX_DIRS)
        return stkr_cli_usage_error("symbolize", "more than %d --debug-dir",
                                    MAX_DIRS);
      if (stat(optarg, &st) != 0 || !S_ISDIR(st.st_mode))
        return stkr_cli_usage_error("symbolize",
                                    "--debug-dir '%s' is not a directory",
                                    optarg);
      dirs[(*n_dirs)++] = optarg;
      break;
    }
  }
  if (optind >= argc)
    return stkr_cli_usage_error("symbolize", "no DIR given");
  if (optind + 1 < argc)
    return stkr_cli_usage_error("symbolize", "one DIR only, got '%s' too",
                                argv[optind + 1]);
  return -1;
}

/* Create outdir if need be; refuse DIR itself and a directory that holds
 * segment files already (the output would mix with them). @return 0, or
 * the exit status after the message. */
static int make_outdir(const char *indir, const char *outdir) {
  struct stat a, b;

  if (mkdir(outdir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "stackrec symbolize: cannot create %s: %s\n", outdir,
            strerror(errno));
    return STKR_CLI_DATA_LOST; /* an output failure: 3 names inputs */
  }
  if (stat(outdir, &a) == 0 && stat(indir, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return stkr_cli_usage_error("symbolize", "OUT '%s' is DIR itself", outdir);
  if (stkr_fmt_dir_has_segments(outdir) == 1)
    return stkr_cli_usage_error("symbolize",
                                "OUT '%s' already holds segment files; "
                                "give an empty or new directory", outdir);
  return 0;
}

int stkr_cli_symbolize(int argc, char **argv) {
  const char *dirs[MAX_DIRS];
  size_t n_dirs = 0, n_segs = 0;
  char outbuf[PATH_MAX], *indir;
  const char *outdir = NULL, *symcache = NULL;
  segf *segs = NULL;
  struct stat st;
  sym_run run;
  int err;

  if ((err = parse_args(argc, argv, dirs, &n_dirs, &outdir, &symcache)) >= 0)
    return err;
  indir = argv[optind];
  if (stat(indir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "stackrec symbolize: cannot open %s: %s\n", indir,
            stat(indir, &st) != 0 ? strerror(errno) : "not a directory");
    return STKR_CLI_NO_INPUT;
  }
  if (!outdir) {
    size_t l = strlen(indir);
    while (l > 1 && indir[l - 1] == '/') l--;
    snprintf(outbuf, sizeof outbuf, "%.*s-symbolized", (int)l, indir);
    outdir = outbuf;
  }
  if ((err = list_segments(indir, &segs, &n_segs)) < 0) {
    fprintf(stderr, "stackrec symbolize: cannot list %s: %s\n", indir,
            strerror(-err));
    return STKR_CLI_NO_INPUT;
  }
  if (n_segs == 0 && stkr_cli_dir_empty(indir)) {
    /* As every reader takes it (QA: exit 1 here, 0 elsewhere): OUT is an
     * empty recording too, with the marks file if there is one. */
    free(segs);
    if ((err = make_outdir(indir, outdir)) != 0)
      return err;
    char marks[PATH_MAX + sizeof STKR_MARKS_FILE + 1];
    snprintf(marks, sizeof marks, "%s/%s", outdir, STKR_MARKS_FILE);
    if (access(marks, F_OK) == 0) /* a second run would double its lines */
      return stkr_cli_usage_error("symbolize",
                                  "OUT '%s' already holds %s; give an "
                                  "empty or new directory", outdir,
                                  STKR_MARKS_FILE);
    if (stkr_marks_copy(indir, outdir) != 0) {
      fprintf(stderr, "stackrec symbolize: cannot copy %s/%s\n", indir,
              STKR_MARKS_FILE);
      return STKR_CLI_DATA_LOST;
    }
    printf("an empty recording (no process made a watched call): nothing "
           "to symbolize; written to %s\n", outdir);
    return stkr_cli_flush("symbolize") != 0 ? STKR_CLI_DATA_LOST : STKR_CLI_OK;
  }
  if (n_segs == 0) {
    fprintf(stderr, "stackrec symbolize: no segment files "
                    "(stackrec-<pid>-<seq>.zst) in %s\n", indir);
    free(segs);
    return STKR_CLI_DATA_LOST;
  }
  if ((err = make_outdir(indir, outdir)) != 0)
    goto out_segs;

  memset(&run, 0, sizeof run);
  run.cmd = "symbolize";
  run.symcache_dir = symcache;
  if ((err = run_segments(&run, indir, outdir, segs, n_segs, dirs, n_dirs)) <
      0) {
    err = STKR_CLI_DATA_LOST;
    goto out_run;
  }
  unsigned long long pcs = stkr__symc_resolved(run.c),
                     named = stkr__symc_named(run.c),
                     frames = stkr__symc_frames(run.c);
  /* Named, not looked up: a PC whose image has no usable file stays
   * image+offset (QA, session 39: "11 unique PCs resolved" where 9 were
   * not). */
  printf("%llu segment file%s, %llu batch%s, %llu stack%s: %llu unique PC%s, "
         "%llu named, %llu left image+offset, in %llu frame%s; written to "
         "%s\n",
         (unsigned long long)run.files, run.files == 1 ? "" : "s",
         (unsigned long long)run.batches, run.batches == 1 ? "" : "es",
         (unsigned long long)run.stacks, run.stacks == 1 ? "" : "s", pcs,
         pcs == 1 ? "" : "s", named, pcs - named, frames,
         frames == 1 ? "" : "s", outdir);
  if (run.copied_files)
    printf("%llu file%s already had frames and %s copied unchanged (frames "
           "written as image+offset, their image's file missing then, are "
           "not resolved again: keep the binaries in place until a "
           "recording is symbolized)\n",
           (unsigned long long)run.copied_files,
           run.copied_files == 1 ? "" : "s",
           run.copied_files == 1 ? "was" : "were");
  if (run.mixed_files)
    printf("%llu file%s of an in-process recording had stacks without "
           "frames (first seen as it ended, or recovered): only those were "
           "resolved\n",
           (unsigned long long)run.mixed_files,
           run.mixed_files == 1 ? "" : "s");
  stkr_cli_swift_note(stdout, "symbolize", "");
  err = run.status;
  /* Dead writers' events in DIR's ring files are in no segment, nor in OUT
   * (QA, session 29: exit 0 without a word). */
  char where[PATH_MAX + 8];
  snprintf(where, sizeof where, "in %s", outdir);
  if (stkr_cli_rings_left_said("symbolize", indir, where) &&
      err == STKR_CLI_OK)
    err = STKR_CLI_DATA_LOST;
  if (stkr_marks_copy(indir, outdir) != 0) { /* `stackrec mark`'s marks */
    fprintf(stderr, "stackrec symbolize: cannot copy %s/%s\n", indir, STKR_MARKS_FILE);
    err = STKR_CLI_DATA_LOST;
  }
  if (stkr_cli_flush("symbolize") != 0) err = STKR_CLI_DATA_LOST;
out_run:
  run_free(&run);
out_segs:
  STKR_FREE_EACH(segs, n_segs, name);
  free(segs);
  return err;
}
