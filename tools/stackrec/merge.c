/*
 * merge.c: `stackrec merge`: several recordings (many devices, many runs
 * of one build) into one recording directory.
 *
 * The design is the simplest one the format allows without re-numbering
 * any id: every input process (the segments of one pid in one input
 * directory) becomes one process of OUT, its intact batches copied in
 * order into segments of the same seq numbers. Ids stay consistent because
 * a process's batches are never mixed with another's; sessions, drops,
 * counters, images and frames come along unchanged. A process keeps its
 * pid unless an earlier input process already took it in OUT; it then
 * gets a fresh synthetic pid from 10000000 up (above any Linux or Darwin
 * pid, so it cannot be mistaken for a real one), written into its Header
 * messages too so OUT reads back without inconsistencies.
 *
 * Nothing is matched at merge time: readers of OUT (report, export) merge
 * stacks by content across processes (agg.c): same site, same frame labels
 * (function names, or image+offset), so stacks of different builds of one
 * program meet by their symbolized frames.
 *
 * Batches are copied as their compressed bytes (verified by the reader:
 * checksum, decoding, validation) unless their Header must change, in
 * which case they are decoded, changed and encoded again. Damaged batches
 * are left out (and reported; exit 1), as is the incomplete last batch of
 * a recording still being written. Memory: one batch at a time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_io.h"
#include "proto/stkr_format.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/export.h" /* stkr__map */
#include "tools/stackrec/merge_lost.h"
#include "tools/stackrec/merge_pids.h"

#define COPY_CHUNK (1u << 20)

static const char merge_help[] =
    "Usage: stackrec merge -o OUT DIR|FILE...\n"
    "\n"
    "Merge several recordings (many devices, many runs of one build) into\n"
    "one recording directory OUT, which 'stackrec report', 'export' and the\n"
    "other commands read like any recording.\n"
    "\n"
    "Every input process (the segments of one pid in one input directory)\n"
    "becomes one process of OUT: its intact batches are copied in order,\n"
    "into segment files of the same numbers, so its ids, sessions, drops\n"
    "and counters stay as they were. It keeps its pid unless an earlier\n"
    "input process took it; it then gets a new pid from 10000000 up that no\n"
    "input process has (said on stdout), also written into its headers.\n"
    "Stacks are not matched at merge time: readers of OUT merge them by\n"
    "content (site, function names, or image+offset where unknown), so\n"
    "stacks from different builds meet by their symbolized frames.\n"
    "Recordings made in offline mode have only image+offset, which matches\n"
    "within one build: run 'stackrec symbolize' on them first to match\n"
    "builds.\n"
    "\n"
    "Damaged batches are left out, each leaving a marker in OUT that\n"
    "readers report as damage in turn, and named on stderr (exit 1), as\n"
    "are\n"
    "events that dead writers left in an input's ring files (run 'stackrec\n"
    "recover' on it first); the\n"
    "incomplete last batch of a recording still being written is left out\n"
    "quietly. OUT is created if missing; it must not be an input, nor hold\n"
    "segment files already: existing files are never overwritten. An OUT\n"
    "that cannot be created or written is an output failure: exit 1.\n"
    "Each input is given once: one named again (by any path to it, or a\n"
    "segment file of an input directory) is a usage error (exit 2), and so\n"
    "are two copies of one recording (one recording session of a process\n"
    "in two inputs: a device's directory pulled twice), found while\n"
    "merging: what was written of OUT is removed.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT  the directory to write (required; not inside an\n"
    "                    input)\n"
    "  -h, --help        this help\n"
    "\n";

typedef struct merge_run {
  const char *outdir;
  stkr__mpids pids; /* each input process's pid in OUT */
  /* The output segment being written, and the input file it copies. */
  size_t cur_process;
  char cur_in[PATH_MAX];
  int in_fd, out_fd;
  bool in_gone; /* cur_in went after it was read: OUT has its tombstone */
  char out_path[PATH_MAX];
  /* Re-encoding and copying. */
  stkr_fmt_pballoc pballoc;
  ZSTD_CCtx *cctx;
  stkr_fmt_buf enc;
  uint8_t *chunk;
  /* Totals. */
  uint64_t batches, rewritten, segments, bytes;
  uint64_t live; /* processes whose live tail was left out */
  bool rings_left; /* an input has events in ring files, none merged */
  /* (Header.session_id, pid) -> the input process that holds it: a second
   * process holding a session is a copy of the same recording (dup_*). */
  stkr__map sessions;
  size_t dup_first, dup_second;
  uint64_t dup_sid;
  uint32_t dup_pid;
  /* Batches damaged in an input: lost markers in OUT (merge_lost.h). */
  stkr__mlost lost;
  int lost_err; /* the first failure to put one: OUT lacks it */
} merge_run;

/* n lost markers appended to fd (the output segment at path). @return 0
 * or -errno (said). */
static int put_lost(int fd, const char *path, uint32_t n) {
  uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
  int err = 0;

  stkr_fmt_lost_marker(t, (uint32_t)getpid());
  for (uint32_t i = 0; i < n && err == 0; i++)
    err = stkr_write_all(fd, t, sizeof t);
  if (err != 0)
    fprintf(stderr, "stackrec merge: writing %s: %s\n", path, strerror(-err));
  return err;
}

/* A batch of w->path that the reader found damaged: its marker now, after
 * the batches of the same file copied before it, or once that file's
 * output segment exists (merge_lost.h). */
static void note_lost(merge_run *m, const stkr_warning *w) {
  int err;

  if (w->path == NULL)
    return;
  if (m->out_fd >= 0 && !m->in_gone && strcmp(w->path, m->cur_in) == 0)
    err = put_lost(m->out_fd, m->out_path, 1);
  else if ((err = stkr__mlost_note(&m->lost, w->path)) != 0)
    fprintf(stderr, "stackrec merge: %s\n", strerror(-err));
  if (err != 0 && m->lost_err == 0)
    m->lost_err = err;
}

static void on_warning(void *arg, const stkr_warning *w) {
  merge_run *m = arg;

  if (w->kind == STKR_WARN_LIVE_TAIL) {
    m->live++;
    return;
  }
  /* OUT keeps the headers, counters and batch numbers that make an input
   * incomplete: `stackrec verify OUT` says so, as it would of the input. */
  if (w->kind == STKR_WARN_INCOMPLETE)
    return;
  /* Damage with no offset is in counters of batches that are copied (a
   * recovery's lost bytes, overflowing drops): OUT keeps them as they are
   * (review, session 39: a marker for them grew the damage every merge). */
  const bool in_counters = w->kind == STKR_WARN_DAMAGED && w->offset < 0;
  /* A segment that cannot be read at all (STKR_WARN_IO: a link to a
   * device or a directory under a segment's name) is lost whole, as a
   * FIFO is (QA, session 40: OUT had no marker and verified intact). */
  if ((w->kind == STKR_WARN_DAMAGED && !in_counters) ||
      (w->kind == STKR_WARN_IO && w->data_lost) ||
      w->kind == STKR_WARN_TRUNCATED || w->kind == STKR_WARN_NOT_ZSTD)
    note_lost(m, w);
  stkr_cli_progress_pause();
  fflush(stdout);
  stkr_cli_put_line(stderr, "stackrec merge: warning: ", w->message,
                    w->data_lost && !in_counters ? " (not merged)" : "");
}

static int close_out(merge_run *m) {
  int err = 0;

  if (m->out_fd >= 0 && close(m->out_fd) != 0)
    err = -errno;
  m->out_fd = -1;
  if (m->in_fd >= 0)
    close(m->in_fd);
  m->in_fd = -1;
  m->cur_in[0] = '\0';
  if (err != 0)
    fprintf(stderr, "stackrec merge: writing %s: %s\n", m->out_path,
            strerror(-err));
  return err;
}

/* Tombstone t (got bytes) of segment seq of input process ix, written
 * into OUT under its output pid. @return 0 or -errno (said). */
static int put_tombstone(merge_run *m, size_t ix, uint32_t seq,
                         const uint8_t *t, size_t got) {
  char out[PATH_MAX], name[STKR_FMT_SEGMENT_NAME_MAX];
  int fd, err = 0;

  stkr_fmt_segment_name(name, sizeof name, m->pids.p[ix].out_pid, seq);
  snprintf(out, sizeof out, "%s/%s", m->outdir, name);
  fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  /* OUT holds it already: read as a segment, the disk cap of a recording
   * still written deleted it since (QA, session 35): its data are in OUT,
   * which is more than the tombstone says. */
  if (fd < 0 && errno == EEXIST)
    return 0;
  if (fd < 0 || (err = stkr_write_all(fd, t, got)) != 0) {
    err = err ? err : -errno;
    fprintf(stderr, "stackrec merge: cannot create %s: %s\n", out,
            strerror(-err));
  }
  if (fd >= 0)
    close(fd);
  if (err == 0)
    m->pids.p[ix].wrote = true;
  return err;
}

/* (pid, reader process index) of one input directory's processes. */
typedef struct pid_ix {
  uint32_t pid;
  size_t ix;
} pid_ix;

static int pid_ix_cmp(const void *a, const void *b) {
  const pid_ix *x = a, *y = b;
  return stkr_cmp_u64(x->pid, y->pid);
}

/* The disk cap's tombstones in input directory dir (segments the cap
 * deleted) written into OUT under their processes' output pids, so OUT
 * still says which segments the cap took, and at whose writes
 * (proto/stkr_format.h). A process of which merge copied no batch (the cap
 * took all its segments) gets its output pid here. One listing of dir.
 * @return 0 or -errno. */
static int carry_tombstones(merge_run *m, const stkr_reader *r,
                            const char *dir) {
  size_t n = 0, i, np = m->pids.n;
  pid_ix *v = malloc((np ? np : 1) * sizeof *v), key, *hit, *by;
  struct dirent *de;
  struct stat st;
  DIR *d;
  int err = 0;

  if (v == NULL)
    return -ENOMEM;
  for (i = 0; i < np && stat(dir, &st) == 0; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    if (m->pids.p[i].ino == st.st_ino && m->pids.p[i].dev == st.st_dev)
      v[n++] = (pid_ix){p->pid, i};
  }
  qsort(v, n, sizeof *v, pid_ix_cmp);
  if (n == 0 || (d = opendir(dir)) == NULL) {
    free(v);
    return 0;
  }
  while (err == 0 && (de = readdir(d)) != NULL) {
    char in[PATH_MAX];
    uint8_t t[STKR_FMT_MARKER_MAX + 1];
    uint32_t seq, last = 0;
    size_t got = 0;
    int fd;

    if (stkr_fmt_segment_parse(de->d_name, &key.pid, &seq) != 0 ||
        (hit = bsearch(&key, v, n, sizeof *v, pid_ix_cmp)) == NULL)
      continue;
    snprintf(in, sizeof in, "%s/%s", dir, de->d_name);
    if ((fd = stkr_open_regular(in, O_NOFOLLOW)) < 0) {
      /* Unreadable (the reader said so): its place in OUT says it too. A
       * symbolic link is followed by the reader: not this one's to mark. */
      struct stat ls;
      if (lstat(in, &ls) == 0 && S_ISLNK(ls.st_mode) && stat(in, &ls) == 0)
        continue;
      if ((err = stkr__mpids_assign(&m->pids, hit->ix, hit->pid)) != 0)
        break;
      stkr_fmt_lost_marker(t, (uint32_t)getpid());
      err = put_tombstone(m, hit->ix, seq, t, STKR_FMT_TOMBSTONE_SIZE);
      continue;
    }
    (void)stkr_pread_all(fd, t, sizeof t, 0, &got);
    close(fd);
    if (!stkr_fmt_tombstone_parse(t, got, &key.pid, &last))
      continue;
    /* The deleter under its name in OUT, if merge renumbered it (one of
     * which no batch was copied gets its name here, so a later tombstone
     * of its own cannot name it otherwise). */
    if ((by = bsearch(&key, v, n, sizeof *v, pid_ix_cmp)) != NULL) {
      if ((err = stkr__mpids_assign(&m->pids, by->ix, by->pid)) != 0)
        break;
      if (last != 0) /* a run (its seqs stay: merge keeps them) */
        stkr_fmt_tombstone_run(t, m->pids.p[by->ix].out_pid, last);
      else
        stkr_fmt_tombstone(t, m->pids.p[by->ix].out_pid);
    }
    if ((err = stkr__mpids_assign(&m->pids, hit->ix, hit->pid)) == 0)
      err = put_tombstone(m, hit->ix, seq, t, got);
  }
  closedir(d);
  free(v);
  return err;
}

/* Start the output segment for input file b->path. */
static int open_out(merge_run *m, const stkr_batch_view *b) {
  char name[STKR_FMT_SEGMENT_NAME_MAX];
  uint32_t seq = b->file_seq ? b->file_seq : 1;
  int err;

  if ((err = close_out(m)) != 0)
    return err;
  stkr_fmt_segment_name(name, sizeof name, m->pids.p[b->process].out_pid,
                        seq);
  snprintf(m->out_path, sizeof m->out_path, "%s/%s", m->outdir, name);
  /* O_EXCL: never overwrite (two input files of one process cannot map
   * to one name: a process's files have distinct seqs). */
  m->out_fd = open(m->out_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (m->out_fd < 0) {
    err = -errno;
    fprintf(stderr, "stackrec merge: cannot create %s: %s\n", m->out_path,
            strerror(errno));
    return err;
  }
  /* The reader just read it; a FIFO swapped in since must not block. */
  m->in_fd = stkr_open_regular(b->path, 0);
  m->in_gone = m->in_fd == -ENOENT;
  if (m->in_gone) {
    /* Read, then taken by the disk cap of a recording still written (QA,
     * session 35: 1 merge in 60 stopped here): its place in OUT says so,
     * as the cap's (who deleted it is not known: its own process). */
    uint8_t t[STKR_FMT_TOMBSTONE_SIZE];
    stkr_fmt_tombstone(t, m->pids.p[b->process].out_pid);
    m->in_fd = -1;
    if ((err = stkr_write_all(m->out_fd, t, sizeof t)) != 0) {
      fprintf(stderr, "stackrec merge: writing %s: %s\n", m->out_path,
              strerror(-err));
      return err;
    }
    m->pids.p[b->process].wrote = true;
  } else if (m->in_fd < 0) {
    err = m->in_fd;
    m->in_fd = -1;
    fprintf(stderr, "stackrec merge: cannot reopen %s: %s\n", b->path,
            err == -EINVAL ? "not a regular file any more" : strerror(-err));
    return err;
  }
  snprintf(m->cur_in, sizeof m->cur_in, "%s", b->path);
  m->cur_process = b->process;
  m->segments++;
  return 0;
}

/* Copy the batch's frame as it is in the input file. */
static int copy_frame(merge_run *m, const stkr_batch_view *b) {
  uint64_t off = b->offset, left = b->frame_len;

  while (left > 0) {
    size_t want = left < COPY_CHUNK ? (size_t)left : COPY_CHUNK;
    ssize_t n = pread(m->in_fd, m->chunk, want, (off_t)off);
    int err;

    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      err = n < 0 ? -errno : -EIO;
      fprintf(stderr, "stackrec merge: %s: offset %llu: reading again: %s\n",
              b->path, (unsigned long long)off, strerror(-err));
      return err;
    }
    if ((err = stkr_write_all(m->out_fd, m->chunk, (size_t)n)) != 0) {
      fprintf(stderr, "stackrec merge: writing %s: %s\n", m->out_path,
              strerror(-err));
      return err;
    }
    off += (uint64_t)n;
    left -= (uint64_t)n;
  }
  m->bytes += b->frame_len;
  return 0;
}

/* A session is one process's in one recording: found in a second input
 * process, the inputs are copies of one recording (a device's directory
 * pulled twice), and merging both would count its events twice (QA,
 * session 31: 2 000 events of a run that made 1 000, verify intact).
 * @return 0, or -EEXIST with dup_* set (the caller refuses the inputs). */
static int check_session(merge_run *m, const stkr_batch_view *b,
                         const Stackrec__Header *h) {
  uint8_t key[12];
  uint64_t first = b->process;
  int rc;

  memcpy(key, &h->session_id, 8);
  memcpy(key + 8, &b->pid, 4);
  if ((rc = stkr__map_put(&m->sessions, key, sizeof key, &first, NULL)) < 0)
    return rc;
  if (rc == 0 || first == b->process)
    return 0;
  m->dup_first = (size_t)first;
  m->dup_second = b->process;
  m->dup_sid = h->session_id;
  m->dup_pid = b->pid;
  return -EEXIST;
}

/* Decode the batch; if it has a Header that must change, encode it again
 * with the new pid and seq. *done: whether it was written. */
static int rewrite_header(merge_run *m, const stkr_batch_view *b,
                          bool *done) {
  Stackrec__Batch *batch;
  uint32_t pid = m->pids.p[b->process].out_pid;
  uint32_t seq = b->file_seq ? b->file_seq : 1, parent = 0, from = 0,
           os_parent = 0;
  int err;

  *done = false;
  m->pballoc.refused = false;
  batch = stackrec__batch__unpack(&m->pballoc.pb, b->len, b->data);
  if (batch == NULL) /* the reader decoded it: only memory can fail */
    return -ENOMEM;
  if (batch->header != NULL && batch->header->session_id != 0 &&
      (err = check_session(m, b, batch->header)) != 0) {
    stackrec__batch__free_unpacked(batch, &m->pballoc.pb);
    return err;
  }
  if (batch->header != NULL) {
    parent = stkr__mpids_parent(&m->pids, b->process,
                                batch->header->parent_pid);
    /* 0 where that process is not known under its pid in OUT: the child's
     * inherited marks are then unknown, which readers say. */
    from = stkr__mpids_parent(&m->pids, b->process,
                              batch->header->forked_from_pid);
    os_parent = stkr__mpids_parent(&m->pids, b->process,
                                   batch->header->os_parent_pid);
  }
  if (batch->header == NULL ||
      (batch->header->pid == pid && batch->header->segment_seq == seq &&
       batch->header->parent_pid == parent &&
       batch->header->forked_from_pid == from &&
       batch->header->os_parent_pid == os_parent)) {
    stackrec__batch__free_unpacked(batch, &m->pballoc.pb);
    return 0;
  }
  batch->header->pid = pid;
  batch->header->segment_seq = seq;
  batch->header->parent_pid = parent;
  batch->header->forked_from_pid = from;
  batch->header->os_parent_pid = os_parent;
  m->enc.len = 0;
  err = stkr_fmt_encode_batch(batch, m->cctx, 3, &m->enc);
  stackrec__batch__free_unpacked(batch, &m->pballoc.pb);
  if (err == 0)
    err = stkr_write_all(m->out_fd, m->enc.data, m->enc.len);
  if (err != 0) {
    fprintf(stderr, "stackrec merge: writing %s: %s\n", m->out_path,
            strerror(-err));
    return err;
  }
  m->bytes += m->enc.len;
  m->rewritten++;
  *done = true;
  return 0;
}

static int on_batch(void *arg, const stkr_batch_view *b) {
  merge_run *m = arg;
  const stkr__mproc *p;
  bool done = false;
  int err;

  if (b->process >= m->pids.n)
    return -EINVAL; /* cannot happen: the count is fixed while reading */
  if ((err = stkr__mpids_assign(&m->pids, b->process, b->pid)) != 0)
    return err;
  p = &m->pids.p[b->process];
  if (m->out_fd < 0 || m->cur_process != b->process ||
      strcmp(m->cur_in, b->path) != 0)
    if ((err = open_out(m, b)) != 0)
      return err;
  if (m->in_gone)
    return 0; /* its batches are not to be had: the tombstone says so */
  /* The Header changes with the pid, with the seq of a file not named as
   * a segment (it gets 1), and with a parent merge renumbered or must not
   * name (a Header is in a segment's first batch: decoded to see). */
  if (p->renumbered || b->file_seq == 0 || b->offset == 0)
    if ((err = rewrite_header(m, b, &done)) != 0)
      return err;
  if (!done && (err = copy_frame(m, b)) != 0)
    return err;
  m->pids.p[b->process].wrote = true;
  m->batches++;
  /* Damaged batches of this file read before its first intact one. */
  uint32_t lost = m->lost.n ? stkr__mlost_take(&m->lost, b->path,
                                               m->out_path)
                            : 0;
  if (lost > 0 && (err = put_lost(m->out_fd, m->out_path, lost)) != 0)
    return err;
  return 0;
}

/* The lost batches still pending once everything was read: of files with
 * an output segment, appended to it (noted after it was closed); of files
 * none of whose batches was intact, a lost marker file in the segment's
 * place, under its process (by input directory and pid, as
 * carry_tombstones finds them). @return 0 or -errno (said). */
static int put_lost_left(merge_run *m, const stkr_reader *r) {
  int err = 0;

  for (size_t i = 0; i < m->lost.n && err == 0; i++) {
    const stkr__mlost_file *f = &m->lost.v[i];
    char dir[PATH_MAX];
    const char *slash = strrchr(f->path, '/');
    uint32_t pid, seq;
    struct stat st;
    uint8_t t[STKR_FMT_TOMBSTONE_SIZE];

    if (f->pending == 0)
      continue;
    if (f->out_path != NULL) {
      int fd = open(f->out_path, O_WRONLY | O_APPEND | O_CLOEXEC);
      err = fd < 0 ? -errno : put_lost(fd, f->out_path, f->pending);
      if (fd >= 0)
        close(fd);
      else
        fprintf(stderr, "stackrec merge: cannot reopen %s: %s\n",
                f->out_path, strerror(-err));
      continue;
    }
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - f->path) : 1,
             slash ? f->path : ".");
    /* A file not named as a segment whose every batch was damaged has no
     * process to put it under (its Header was never read): said on
     * stderr only, as the warning above. */
    if (stkr_fmt_segment_parse(slash ? slash + 1 : f->path, &pid, &seq) != 0 ||
        stat(dir, &st) != 0)
      continue;
    for (size_t ix = 0; ix < m->pids.n; ix++)
      if (m->pids.p[ix].dev == st.st_dev && m->pids.p[ix].ino == st.st_ino &&
          stkr_reader_process(r, ix)->pid == pid) {
        stkr_fmt_lost_marker(t, (uint32_t)getpid());
        /* N lost batches of one file: one marker file (a reader counts
         * a whole file so); a file removed since (its tombstone in OUT,
         * EEXIST) keeps that. */
        if ((err = stkr__mpids_assign(&m->pids, ix, pid)) == 0)
          err = put_tombstone(m, ix, seq, t, sizeof t);
        break;
      }
  }
  return err;
}

static void print_summary(const merge_run *m, stkr_reader *r, int inputs) {
  size_t i;

  for (i = 0; i < m->pids.n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    if (m->pids.p[i].renumbered && m->pids.p[i].wrote) {
      printf("process %u of ", (unsigned)p->pid);
      stkr_cli_put_escaped(stdout, (const uint8_t *)p->dir, strlen(p->dir));
      printf(" written as process %u (pid %u was taken)\n",
             (unsigned)m->pids.p[i].out_pid, (unsigned)p->pid);
    }
  }
  printf("merged %d input%s: %zu process%s, %llu segment%s, %llu batch%s "
         "(%llu bytes) into ",
         inputs, inputs == 1 ? "" : "s", m->pids.n,
         m->pids.n == 1 ? "" : "es", (unsigned long long)m->segments,
         m->segments == 1 ? "" : "s", (unsigned long long)m->batches,
         m->batches == 1 ? "" : "es", (unsigned long long)m->bytes);
  stkr_cli_put_escaped(stdout, (const uint8_t *)m->outdir,
                       strlen(m->outdir));
  putchar('\n');
  if (m->live)
    printf("%llu process%s still being written: %s last, incomplete "
           "batch was left out\n",
           (unsigned long long)m->live, m->live == 1 ? " was" : "es were",
           m->live == 1 ? "its" : "their");
}

/* The inputs' marks files into OUT's: marks set with `stackrec mark`, each
 * written inside a scope line naming the processes of its own input (QA:
 * a consent mark of one run reached every run's processes, and compliance
 * said "no findings" for a run that never saw consent), and the processes
 * that could not record (without them OUT would look complete). A segment
 * given as FILE brings its directory's, as the reader reads it with the
 * segment; each directory once (by inode), so two segments of one
 * directory do not double its lines.
 * @return 0, or -1 after saying which copy failed. */
static int copy_marks_files(const merge_run *m, char *const *in, int n,
                            const char *out) {
  struct stat *seen = calloc((size_t)n, sizeof(*seen));
  stkr_pid_map *map = malloc((m->pids.n ? m->pids.n : 1) * sizeof(*map));
  char dir[PATH_MAX];
  int n_seen = 0, status = 0;

  if (seen == NULL || map == NULL) {
    fprintf(stderr, "stackrec merge: copying marks files: %s\n",
            strerror(ENOMEM));
    free(seen);
    free(map);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    struct stat st;
    int err = 0, k;
    if (stat(in[i], &st) != 0)
      continue; /* the reader said so */
    if (S_ISDIR(st.st_mode))
      snprintf(dir, sizeof dir, "%s", in[i]);
    else if (stkr_cli_stat_dir_of(in[i], dir, &st) != 0)
      err = -errno;
    for (k = 0; err == 0 && k < n_seen; k++)
      if (stkr_cli_same_inode(&seen[k], &st))
        break;
    if (err == 0 && k == n_seen) {
      seen[n_seen++] = st;
      err = stkr_marks_copy_scoped(
          dir, out, map, stkr__mpids_of_dir(&m->pids, st.st_dev, st.st_ino,
                                            map));
    }
    if (err != 0) {
      stkr_cli_marks_copy_said("merge", dir, err);
      status = -1;
    }
  }
  free(seen);
  free(map);
  return status;
}

/* OUT's marks file past what a reader reads (STKR_MARKS_MAX lines or
 * STKR_MARKS_MAX_BYTES: several inputs with many marks each): said, as
 * the marks past it are lost to every reader. @return 0, or -1 if so. */
static int check_marks_size(const char *out) {
  char path[PATH_MAX];
  unsigned long long lines = 0;
  struct stat st;
  FILE *f;
  int c;

  snprintf(path, sizeof path, "%s/%s", out, STKR_MARKS_FILE);
  if (stat(path, &st) != 0 || (f = fopen(path, "re")) == NULL)
    return 0;
  while ((c = getc(f)) != EOF && lines <= STKR_MARKS_MAX)
    lines += c == '\n';
  fclose(f);
  if ((uint64_t)st.st_size <= STKR_MARKS_MAX_BYTES && lines <= STKR_MARKS_MAX)
    return 0;
  fprintf(stderr, "stackrec merge: %s: more than %d lines or %u MiB, what "
          "readers read: the marks past that are ignored by every reader\n",
          path, STKR_MARKS_MAX, (unsigned)(STKR_MARKS_MAX_BYTES >> 20));
  return -1;
}

/* Two inputs hold one session (check_session): nothing of OUT is kept
 * (it held no segment before: its segment files are all ours), and the
 * usage status. */
static int refuse_copies(const merge_run *m, const stkr_reader *r,
                         bool made_out) {
  const stkr_process_info *a = stkr_reader_process(r, m->dup_first);
  const stkr_process_info *b = stkr_reader_process(r, m->dup_second);
  DIR *d = opendir(m->outdir);
  struct dirent *e;
  uint32_t pid, seq;

  while (d != NULL && (e = readdir(d)) != NULL)
    if (stkr_fmt_segment_parse(e->d_name, &pid, &seq) == 0)
      (void)unlinkat(dirfd(d), e->d_name, 0);
  if (d != NULL) closedir(d);
  if (made_out) (void)rmdir(m->outdir);
  return stkr_cli_usage_error(
      "merge", "'%s' and '%s' hold the same recording session %016llx of "
      "pid %u: copies of one recording? Give each recording once (nothing "
      "was merged)", a != NULL && a->dir ? a->dir : "?",
      b != NULL && b->dir ? b->dir : "?", (unsigned long long)m->dup_sid,
      (unsigned)m->dup_pid);
}

int stkr_cli_merge(int argc, char **argv) {
  const char *out = NULL;
  const stkr_cli_opt options[] = {
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, &out, NULL}, {0}};
  stkr_cli_getopt_state gopt = {.cmd = "merge", .opts = options,
                                .help = {merge_help, stkr_cli_exit_help}};
  merge_run m;
  stkr_reader_opts opts = {.warn = on_warning, .warn_arg = &m,
                           .lazy_frames = true, .batch = on_batch,
                           .batch_arg = &m};
  stkr_reader *r = NULL;
  int rc, status = STKR_CLI_OK;

  if (stkr_cli_getopt(&gopt, argc, argv) == STKR_CLI_OPT_EXIT)
    return gopt.status;
  if (out == NULL || out[0] == '\0')
    return stkr_cli_usage_error("merge", "no -o OUT given");
  if (optind >= argc)
    return stkr_cli_usage_error("merge", "no DIR or FILE given");
  if ((rc = stkr_cli_merge_check_out(out, argv + optind, argc - optind)) !=
          0 ||
      (rc = stkr_cli_merge_check_repeats(argv + optind, argc - optind)) != 0)
    return rc;

  memset(&m, 0, sizeof m);
  m.outdir = out;
  m.in_fd = m.out_fd = -1;
    stkr_fmt_pballoc_init(&m.pballoc, STKR_FMT_MAX_DECODED_BYTES);
  if ((status = stkr_cli_open_opts("merge", &opts, argv + optind,
                                   argc - optind, &r)) != 0)
    goto out;
  if ((m.chunk = malloc(COPY_CHUNK)) == NULL ||
      (m.cctx = ZSTD_createCCtx()) == NULL) {
    fprintf(stderr, "stackrec merge: %s\n", strerror(ENOMEM));
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  if (stkr__mpids_init(&m.pids, r) != 0) {
    fprintf(stderr, "stackrec merge: %s\n", strerror(ENOMEM));
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  bool made_out = mkdir(out, 0700) == 0;
  if (!made_out && errno != EEXIST) {
    fprintf(stderr, "stackrec merge: cannot create %s: %s\n", out,
            strerror(errno));
    status = STKR_CLI_DATA_LOST; /* output, not input: see cli.h */
    goto out;
  }
  if ((rc = stkr_fmt_dir_has_segments(out)) != 0) {
    if (rc < 0)
      fprintf(stderr, "stackrec merge: cannot list %s: %s\n", out,
              strerror(-rc));
    else
      stkr_cli_usage_error("merge", "OUT '%s' already holds segment files; "
                                    "give an empty or new directory", out);
    status = rc < 0 ? STKR_CLI_DATA_LOST : STKR_CLI_USAGE;
    goto out;
  }

  /* Events dead writers left in an input's ring files are in no segment:
   * merge copies segments, so say which input needs `recover` first (QA:
   * they were left out without a word, and OUT can never get them). */
  for (int i = optind; i < argc; i++)
    if (stkr_cli_rings_left_said("merge", argv[i], "merged"))
      m.rings_left = true;
  rc = stkr_cli_read_all(r, "merge", "merged", NULL, NULL, NULL);
  if (close_out(&m) != 0 && rc >= 0)
    rc = -EIO;
  if (rc == -EEXIST && m.dup_sid != 0) {
    status = refuse_copies(&m, r, made_out);
    goto out;
  }
  if (rc < 0) {
    /* on_batch said what failed, unless the reader did (memory). */
    if (rc == -ENOMEM)
      fprintf(stderr, "stackrec merge: %s\n", strerror(ENOMEM));
    fprintf(stderr, "stackrec merge: stopped; %s is incomplete\n", out);
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  for (int i = optind; i < argc; i++)
    if (carry_tombstones(&m, r, argv[i]) != 0)
      status = STKR_CLI_DATA_LOST;
  if (put_lost_left(&m, r) != 0 || m.lost_err != 0)
    status = STKR_CLI_DATA_LOST;
  if (copy_marks_files(&m, argv + optind, argc - optind, out) != 0 ||
      check_marks_size(out) != 0)
    status = STKR_CLI_DATA_LOST;
  print_summary(&m, r, argc - optind);
  rc = stkr_cli_finish("merge", r, STKR_CLI_OK);
  if (status == STKR_CLI_OK)
    status = rc;
  if (m.rings_left && status == STKR_CLI_OK)
    status = STKR_CLI_DATA_LOST;
out:
  close_out(&m);
  stkr_reader_free(r);
  stkr__mpids_free(&m.pids);
  stkr__map_free(&m.sessions);
  stkr__mlost_free(&m.lost);
  free(m.chunk);
  ZSTD_freeCCtx(m.cctx);
  stkr_fmt_buf_free(&m.enc);
  return status;
}
