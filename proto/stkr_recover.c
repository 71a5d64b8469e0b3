/*
 * stkr_recover.c: ring files of dead recorders -> a recovered segment (see
 * stkr_recover.h for the contract, common/stkr_ringfile.h for the files).
 *
 * Per dead session:
 *   1. take its lock (LOCK_NB; failing means a live writer: leave it);
 *   2. read the session file (site names, the Header's fields);
 *   3. read the session's newest segment through the reader's batch
 *      callback (the worker releases ring space after every batch it
 *      writes, so only the last batch can be unreleased), keeping: the
 *      largest RingPos.end per thread (dedupe), the largest stack id and
 *      Batch.seq (with the session file's notes of both: the recovered
 *      batches continue after them), the last image list and counters;
 *   4. walk each ring file from max(tail, RingPos.end) to head;
 *   5. encode batches (Batch.recovered) into stackrec-<pid>-<next seq>.zst,
 *      fsync it and the directory, cut a torn frame off the end of the
 *      newest segment (stkr__rc_cut_torn_tail), then unlink the ring
 *      files, the rings it left half made in the cache directory and the
 *      session file (stkr__rc_remove_inputs).
 * A failure before the fsync removes the partial segment and keeps every
 * input file, so a later recovery can try again; a crash after the fsync
 * but before the unlinks is harmless too: the recovered batches carry
 * RingPos, so the next recovery finds nothing left to add.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_io.h"
#include "common/stkr_pid.h"
#include "common/stkr_ringfile.h"
#include "proto/stkr__recover.h"

/* ---- messages -------------------------------------------------------- */

void stkr__rc_msg(stkr__rc *rc, const char *fmt, ...) {
  char line[1024];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (rc->opts.message != NULL)
    rc->opts.message(rc->opts.message_arg, line);
  else
    fprintf(stderr, "stackrec: %s\n", line);
}

/* ---- the ring file decoder (pure; fuzzed) ----------------------------- */

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Check a ring file's header and its head and tail indices; fill *m and
 * *info. @return NULL, or why the file is refused. */
static const char *ring_header(const uint8_t *data, uint64_t len,
                               stkr_ringfile_meta *m, stkr_ring_info *info) {
  uint64_t head, tail;

  if (len < STKR_RINGFILE_TAIL_OFF + 8)
    return "shorter than a ring file header";
  memcpy(m, data, sizeof *m);
  if (memcmp(m->magic, STKR_RINGFILE_MAGIC, 8) != 0)
    return "not a ring file (bad magic)";
  if (m->version != STKR_RINGFILE_VERSION)
    return "unknown ring file version";
  /* The tables sit in the header: it must cover them. */
  if (m->record_hdr != sizeof(stkr_ringfile_record) ||
      m->hdr_bytes < STKR_RINGFILE_PKNOWN_OFF + 16u * STKR_RINGFILE_PKNOWN_SLOTS ||
      m->hdr_bytes % 8 != 0)
    return "bad header size fields";
  if (m->ring_size < 64 || m->ring_size > STKR_RINGFILE_MAX_RING ||
      (m->ring_size & (m->ring_size - 1)) != 0 ||
      m->hdr_bytes > len || m->ring_size > len - m->hdr_bytes)
    return "ring size is not a power of two that fits the file";
  head = rd64(data + STKR_RINGFILE_HEAD_OFF);
  tail = rd64(data + STKR_RINGFILE_TAIL_OFF);
  info->session_id = m->session_id;
  info->pid = m->pid;
  info->thread_id = m->thread_id;
  info->file_no = m->file_no;
  info->os_tid = m->os_tid;
  memcpy(info->name, m->name, sizeof info->name);
  info->name[sizeof info->name - 1] = '\0';
  info->ring_size = m->ring_size;
  info->head = head;
  info->tail = tail;
  /* Any values: recovery adds drops - counted only where it is positive. */
  info->drops_full = rd64(data + STKR_RINGFILE_DROPS_OFF);
  info->drops_reentrant = rd64(data + STKR_RINGFILE_DROPS_OFF + 8);
  info->counted_full = rd64(data + STKR_RINGFILE_DROPS_OFF + 16);
  info->counted_reentrant = rd64(data + STKR_RINGFILE_DROPS_OFF + 24);
  info->pend_seq = rd64(data + STKR_RINGFILE_PEND_OFF);
  info->pend_full = rd64(data + STKR_RINGFILE_PEND_OFF + 8);
  info->pend_reentrant = rd64(data + STKR_RINGFILE_PEND_OFF + 16);
  if (tail > head || head - tail > m->ring_size || tail % 8 != 0 ||
      head % 8 != 0)
    return "head and tail indices disagree";
  return NULL;
}

/* Check the record at rec (off bytes into a ring of ring_size, left bytes
 * before the head); fill *h and *hdr (its header's size). A wrap marker
 * passes with h->site_id == 0. @return NULL, or why it is refused. */
static const char *ring_record(const uint8_t *rec, uint64_t off,
                               uint64_t left, uint64_t ring_size,
                               stkr_ringfile_record *h, uint64_t *hdr) {
  /* off is a multiple of 8 and ring_size >= 64: 8 bytes are there. */
  memcpy(h, rec, 8);
  if (h->size < 8 || h->size % 8 != 0 || h->size > left ||
      h->size > ring_size - off)
    return "bad record size";
  if (h->site_id == 0) /* wrap marker */
    return NULL;
  if (h->size < sizeof *h)
    return "record shorter than its header";
  memcpy(h, rec, sizeof *h);
  return stkr_ringfile_record_check(h, hdr);
}

/* Hand a checked record (h, header of hdr bytes) at pos to rec. */
static int ring_deliver(const uint8_t *p, uint64_t pos,
                        const stkr_ringfile_record *h, uint64_t hdr,
                        int (*rec)(void *arg, const stkr_ring_rec *r),
                        void *arg) {
  stkr_ring_rec r = {
      .pos = pos,
      .size = h->size,
      .site_id = h->site_id,
      .ts_ns = h->ts_ns,
      .slot = h->slot,
      .pcs = (const uint64_t *)(const void *)(p + hdr),
      .depth = h->depth,
      .payload = p + hdr + 8u * h->depth,
      .payload_len = h->payload_len,
      .flags = h->flags,
      .pslot = h->pslot,
  };
  if (h->flags & STKR_RINGREC_PAYLOAD_NEW) {
    memcpy(r.pevicted, r.payload, 16);
    r.payload += 16;
  } else if (h->flags & STKR_RINGREC_PAYLOAD_KNOWN) {
    r.payload = NULL;
  }
  if ((h->flags & STKR_RINGREC_KNOWN) == 0) {
    stkr_ringfile_full f;

    memcpy(&f, p, sizeof f);
    r.hash = f.key[0];
    r.key2 = f.key[1];
    r.evicted[0] = f.evicted[0];
    r.evicted[1] = f.evicted[1];
  }
  return rec(arg, &r);
}

int stkr_ring_parse(const uint8_t *data, uint64_t len, uint64_t from,
                    stkr_ring_info *info,
                    int (*rec)(void *arg, const stkr_ring_rec *r), void *arg,
                    uint64_t *dups, uint64_t *lost_bytes, uint64_t *bad_pos,
                    const char **why) {
  stkr_ringfile_meta m;
  uint64_t head, mask, pos;
  const uint8_t *buf;

  *dups = *lost_bytes = *bad_pos = 0;
  memset(info, 0, sizeof *info);
  if ((*why = ring_header(data, len, &m, info)) != NULL)
    return -EINVAL;
  head = info->head;
  buf = data + m.hdr_bytes;
  mask = m.ring_size - 1;
  for (pos = info->tail; pos < head;) {
    uint64_t off = pos & mask, hdr = 0;
    stkr_ringfile_record h;

    if ((*why = ring_record(buf + off, off, head - pos, m.ring_size, &h,
                            &hdr)) != NULL) {
      *lost_bytes = head - pos;
      *bad_pos = m.hdr_bytes + off;
      return 1;
    }
    if (h.site_id != 0 && pos < from) {
      ++*dups;
    } else if (h.site_id != 0 && rec != NULL) {
      int err = ring_deliver(buf + off, pos, &h, hdr, rec, arg);
      if (err != 0)
        return err;
    }
    pos += h.size;
  }
  return 0;
}

/* ---- the session file (step 2) ---------------------------------------- */

const char *stkr__rc_sess_check(stkr__rc_sess *s, const uint8_t *data, uint64_t len,
                              uint32_t pid, uint64_t sid) {
  const stkr_sessfile_hdr *h = &s->h;

  if (len < sizeof *h)
    return "shorter than a session file header";
  memcpy(&s->h, data, sizeof s->h);
  s->data = data;
  s->len = len;
  if (memcmp(h->magic, STKR_SESSFILE_MAGIC, 8) != 0)
    return "not a session file (bad magic)";
  if (h->version != STKR_SESSFILE_VERSION)
    return "unknown session file version";
  if (h->session_id != sid || h->pid != pid)
    return "pid or session id differ from the file name";
  if (h->site_cap > (1u << 20) || h->slots_off > len ||
      (uint64_t)8 * (h->site_cap + 1) > len - h->slots_off ||
      h->slots_off % 8 != 0 || h->names_off > len ||
      h->names_cap > len - h->names_off)
    return "site table does not fit the file";
  s->h.process_name[sizeof h->process_name - 1] = '\0';
  s->h.arch[sizeof h->arch - 1] = '\0';
  s->h.symbolize[sizeof h->symbolize - 1] = '\0';
  s->h.watched[sizeof h->watched - 1] = '\0';
  return NULL;
}

/* The name of site id, or NULL (not stored, or out of bounds). Copied into
 * buf (NUL-terminated). */
const char *stkr__rc_sess_site(const stkr__rc_sess *s, uint32_t id, char *buf,
                             size_t cap) {
  uint64_t slot, off, n;

  if (id == 0 || id > s->h.site_cap)
    return NULL;
  memcpy(&slot, s->data + s->h.slots_off + 8u * id, 8);
  off = slot >> 32;
  n = slot & 0xFFFFFFFFu;
  if (slot == 0 || off > s->h.names_cap || n > s->h.names_cap - off ||
      n >= cap)
    return NULL;
  memcpy(buf, s->data + s->h.names_off + off, n);
  buf[n] = '\0';
  return buf;
}

/* ---- names ------------------------------------------------------------ */

/* "stackrec-<pid>-<16 hex>" then ".session" or "-<thread>.ring". 0 or
 * -EINVAL. Strict, like stkr_fmt_segment_parse: one name per triple. */
int stkr__rc_parse_name(const char *s, uint32_t *pid, uint64_t *sid,
                        uint32_t *thread) {
  uint64_t v = 0;
  int n;

  if (strncmp(s, "stackrec-", 9) != 0)
    return -EINVAL;
  s += 9;
  for (n = 0; *s >= '0' && *s <= '9'; s++, n++) {
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > UINT32_MAX)
      return -EINVAL;
  }
  if (n == 0 || (n > 1 && s[-n] == '0') || *s++ != '-')
    return -EINVAL;
  *pid = (uint32_t)v;
  v = 0;
  for (n = 0; n < 16; n++, s++) {
    int d = *s >= '0' && *s <= '9'   ? *s - '0'
            : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                                     : -1;
    if (d < 0)
      return -EINVAL;
    v = v << 4 | (uint64_t)d;
  }
  *sid = v;
  if (strcmp(s, ".session") == 0) {
    *thread = 0;
    return 0;
  }
  if (*s++ != '-')
    return -EINVAL;
  v = 0;
  for (n = 0; *s >= '0' && *s <= '9'; s++, n++) {
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > UINT32_MAX)
      return -EINVAL;
  }
  if (n == 0 || (n > 1 && s[-n] == '0') || v == 0 || strcmp(s, ".ring") != 0)
    return -EINVAL;
  *thread = (uint32_t)v;
  return 0;
}

/* Read a whole regular file of at most max bytes. 0 or -errno (-EFBIG). */
int stkr__rc_read_file(int fd, uint64_t max, uint8_t **data, uint64_t *len) {
  struct stat st;
  uint8_t *p;
  size_t got = 0;
  int err;

  *data = NULL;
  *len = 0;
  if (fstat(fd, &st) != 0)
    return -errno;
  if (!S_ISREG(st.st_mode))
    return -EINVAL;
  if ((uint64_t)st.st_size > max)
    return -EFBIG;
  /* 8-byte alignment for the records: malloc gives at least that. */
  p = malloc(st.st_size ? (size_t)st.st_size : 1);
  if (p == NULL)
    return -ENOMEM;
  err = stkr_pread_all(fd, p, (size_t)st.st_size, 0, &got);
  if (err == 0 && got < (size_t)st.st_size)
    err = -EIO; /* it shrank under us */
  if (err < 0) {
    free(p);
    return err;
  }
  *data = p;
  *len = got;
  return 0;
}

/* ---- the directory ---------------------------------------------------- */

static int cmp_sess(const void *a, const void *b) {
  const stkr__rc_file *x = a, *y = b;
  int c = stkr_cmp_u64(x->pid, y->pid);
  if (c == 0) c = stkr_cmp_u64(x->sid, y->sid);
  return c != 0 ? c : stkr_cmp_u64(x->thread, y->thread);
}

bool stkr__rc_same_dir(const stkr__rc *rc) {
  struct stat st;
  return stat(rc->dir, &st) == 0 && (uint64_t)st.st_dev == rc->dir_dev &&
         (uint64_t)st.st_ino == rc->dir_ino;
}

static int list_dir(stkr__rc *rc) {
  DIR *d = opendir(rc->dir);
  struct dirent *e;
  struct stat st;
  int err = 0;

  if (d == NULL)
    return -errno;
  if (fstat(dirfd(d), &st) == 0) {
    rc->dir_dev = (uint64_t)st.st_dev;
    rc->dir_ino = (uint64_t)st.st_ino;
  }
  while ((e = readdir(d)) != NULL) {
    stkr__rc_file f = {0};
    uint32_t spid, sseq;

    if (stkr_fmt_segment_parse(e->d_name, &spid, &sseq) == 0) {
      if (stkr__grow(&rc->segs, &rc->cap_segs, rc->n_segs + 1,
                     sizeof *rc->segs) != 0) {
        err = -ENOMEM;
        break;
      }
      rc->segs[rc->n_segs].pid = spid;
      rc->segs[rc->n_segs].seq = sseq;
      rc->n_segs++;
      continue;
    }
    if (stkr__rc_parse_name(e->d_name, &f.pid, &f.sid, &f.thread) != 0)
      continue;
    if (stkr__grow(&rc->files, &rc->cap_files, rc->n_files + 1,
                   sizeof *rc->files) != 0) {
      err = -ENOMEM;
      break;
    }
    rc->files[rc->n_files++] = f;
  }
  closedir(d);
  if (err == 0 && rc->n_files > 1)
    qsort(rc->files, rc->n_files, sizeof *rc->files, cmp_sess);
  return err;
}

void stkr__rc_path(const stkr__rc *rc, char *buf, uint32_t pid, uint64_t sid,
                   uint32_t thread) {
  char name[STKR_RINGFILE_NAME_MAX];
  stkr_ringfile_name(name, pid, sid, thread);
  snprintf(buf, STKR__RC_PATH_MAX, "%s/%s", rc->dir, name);
}

/* A ring file of a session without its session file: removed (dry run:
 * only counted) when it is whole, holds no record and its process is gone,
 * since nothing can be lost with it. @return whether it was such a file. */
static bool remove_empty_ring(stkr__rc *rc, const stkr__rc_file *f) {
  char path[STKR__RC_PATH_MAX];
  uint8_t hdr[STKR_RINGFILE_TAIL_OFF + 8];
  stkr_ringfile_meta m;
  struct stat st;
  bool empty;

  stkr__rc_path(rc, path, f->pid, f->sid, f->thread);
  int fd = stkr_open_regular(path, O_NOFOLLOW);
  if (fd < 0)
    return false;
  empty = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
          (uint64_t)st.st_size >= STKR_RINGFILE_HDR_BYTES &&
          pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr;
  close(fd);
  if (!empty)
    return false;
  memcpy(&m, hdr, sizeof m);
  if (memcmp(m.magic, STKR_RINGFILE_MAGIC, 8) != 0 ||
      m.version != STKR_RINGFILE_VERSION || m.session_id != f->sid ||
      m.pid != f->pid ||
      rd64(hdr + STKR_RINGFILE_HEAD_OFF) != rd64(hdr + STKR_RINGFILE_TAIL_OFF))
    return false;
  /* Not a session starting right now, whose session file (named before
   * its first ring) the directory listing may have missed: the session
   * file is still absent and the pid is gone (found in review). */
  char sess[STKR__RC_PATH_MAX];
  stkr__rc_path(rc, sess, f->pid, f->sid, 0);
  if (access(sess, F_OK) == 0 || errno != ENOENT || stkr_pid_alive(f->pid))
    return false;
  if (!rc->opts.dry_run && unlink(path) != 0)
    return false;
  rc->st->empty_rings_removed++;
  return true;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool stkr__rc_expired(uint64_t deadline_ns) {
  return deadline_ns != 0 && mono_ns() >= deadline_ns;
}

int stkr_recover_dir(const char *dir, const stkr_recover_opts *opts,
                     stkr_recover_stats *out) {
  stkr__rc rc = {0};
  int err;
  size_t i = 0;
  unsigned done = 0;

  if (dir == NULL || out == NULL)
    return -EINVAL;
  memset(out, 0, sizeof *out);
  if (opts != NULL)
    rc.opts = *opts;
  if (strlen(dir) + 1 + STKR_FMT_SEGMENT_NAME_MAX + STKR_RINGFILE_NAME_MAX >
      STKR__RC_PATH_MAX)
    return -ENAMETOOLONG;
  rc.dir = dir;
  rc.st = out;
  if (rc.opts.only_session != 0)
    rc.opts.budget_ms = rc.opts.max_sessions = 0;
  if (rc.opts.budget_ms != 0)
    rc.deadline_ns = mono_ns() + (uint64_t)rc.opts.budget_ms * 1000000u;
  if ((err = list_dir(&rc)) != 0)
    goto out;
  while (i < rc.n_files) {
    size_t j = i;
    bool has_session;

    while (j < rc.n_files && rc.files[j].pid == rc.files[i].pid &&
           rc.files[j].sid == rc.files[i].sid)
      j++;
    /* Sorted: the session file (thread 0) comes first. */
    has_session = rc.files[i].thread == 0;
    if ((rc.opts.only_session != 0 &&
         rc.files[i].sid != rc.opts.only_session) ||
        (rc.opts.only_pid != 0 && rc.files[i].pid != rc.opts.only_pid)) {
      /* not asked about */
    } else if (!has_session) {
      /* Rings without a session file. A session file is named before its
       * first ring and removed after its last (ringfile.c), so these are
       * rings handed on while their session closed, or files we cannot
       * trust. */
      for (size_t k = i; k < j; k++) {
        char path[STKR__RC_PATH_MAX];
        stkr__rc_path(&rc, path, rc.files[k].pid, rc.files[k].sid,
                      rc.files[k].thread);
        if (remove_empty_ring(&rc, &rc.files[k]))
          continue;
        /* Gone since the listing: handed on by a session that ended
         * cleanly while we listed (it pools its rings, then its session
         * file; the listing can see the one and miss the other): nothing
         * of it to recover (QA, session 44: said for complete recordings
         * of many short processes). */
        if (access(path, F_OK) != 0 && errno == ENOENT)
          continue;
        out->orphans++;
        /* Said (QA, session 40: verify never named them), unless its
         * process lives: a ring in the middle of being handed on. */
        if (!stkr_pid_alive(rc.files[k].pid))
          stkr__rc_msg(&rc, "%s: a ring file without its session file (its "
                       "process is gone): its records cannot be recovered; "
                       "file kept", path);
      }
    } else if (stkr__rc_expired(rc.deadline_ns) ||
               (rc.opts.budget_ms != 0 &&
                stkr__rc_defer_marked(&rc, rc.files[i].pid, rc.files[i].sid))) {
      /* Not looked at. A writer that lives is recording, nothing to
       * recover (QA, session 44: 300 short processes at once each said
       * "22 sessions left in ring files after the budget": live ones,
       * and ones that had ended since the listing); a dead one's files
       * wait for a recovery without a budget. */
      char sess[STKR__RC_PATH_MAX];
      stkr__rc_path(&rc, sess, rc.files[i].pid, rc.files[i].sid, 0);
      if (stkr_pid_alive(rc.files[i].pid))
        out->sessions_live++;
      else if (access(sess, F_OK) == 0 || errno != ENOENT)
        out->sessions_deferred++;
      /* else gone since the listing: ended cleanly, or recovered by
       * another process of the recording meanwhile */
    } else if (rc.opts.max_sessions == 0 || done < rc.opts.max_sessions) {
      int r = stkr__rc_session(&rc, rc.files + i + 1, j - i - 1);
      if (r == 1)
        done++;
    }
    i = j;
  }
  if (out->sessions_deferred != 0)
    stkr__rc_msg(&rc, "%s: %llu session%s left in ring files after the %u ms "
                 "budget, this run's or an earlier one's (`stackrec recover` "
                 "recovers a dead one)", dir,
                 (unsigned long long)out->sessions_deferred,
                 out->sessions_deferred == 1 ? "" : "s", rc.opts.budget_ms);
out:
  free(rc.files);
  free(rc.segs);
  return err;
}

/* No magic in a whole header: the writer died creating the file (or
 * clearing a pooled one), as it stores the magic last, before any record
 * (recorder/ringfile.c, create_ring). Nothing to recover and none lost,
 * so not damage (at exit under load, 1 run in 4 left such a file, which
 * verify and recover called damaged). A shorter file stays damage: a
 * writer's file has its full size before its header is written. */
bool stkr__rc_ring_unset(const uint8_t *data, uint64_t len) {
  /* The writer stores the magic last, also over a pooled file that still
   * holds its last owner's records: a zero magic is a ring its writer died
   * making, whatever follows it. (Not told apart: a header page of zeros
   * over records, a power failure's; its records are not recovered: QA,
   * session 40, named in the README.) */
  static const uint8_t zero[8];
  return len >= STKR_RINGFILE_HDR_BYTES && memcmp(data, zero, 8) == 0;
}

/* A writer that dies inside its write(2) leaves the frame cut short: an
 * exit (_exit, exit_group) while the flush worker is past its exit budget
 * and mid-write, or a SIGKILL, stops the copy between pages (seen: 8192
 * bytes of a frame at load 30). The reader reports that as an incomplete
 * last batch while the file is the newest, but once the recovered segment
 * follows it, it sits mid-recording and reads as damage, although nothing
 * is lost: the writer releases ring space only after a whole frame is
 * written, so the cut batch's events were just recovered from the rings.
 * So recovery removes the fragment, as the writer itself does after a
 * failed write (flush/segment.c): cut the file back to its last whole
 * frame, or remove it if none is left. Only when `pid` is gone: a live
 * process of that pid (recycled, or a later session of the same one) may
 * be completing that very frame. */
void stkr__rc_cut_torn_tail(stkr__rc *rc, const char *path, uint64_t off,
                            uint32_t pid) {
  struct stat st;
  int fd;

  if (stkr_pid_alive(pid)) return;
  if ((fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) return;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size <= off) {
    close(fd); /* not the file the reader saw: leave it */
    return;
  }
  if (off != 0 && st.st_nlink > 1) {
    /* A cut would cut every name of the file (a backup made with `cp -al`:
     * QA, session 40); a copy under this name would make one file two,
     * both read if the other name is in the recording (review). */
    stkr__rc_msg(rc, "%s: offset %" PRIu64 ": torn last batch kept (the file "
                 "has other names, hard links, which a cut would change); its "
                 "events are recovered", path, off);
    close(fd);
    return;
  }
  if (off == 0 ? unlink(path) != 0 : ftruncate(fd, (off_t)off) != 0) {
    stkr__rc_msg(rc, "%s: offset %" PRIu64 ": cannot remove a torn last "
                 "batch (its events are recovered): %s", path, off,
                 strerror(errno));
  } else {
    stkr__rc_msg(rc, "%s: offset %" PRIu64 ": torn last batch (%" PRIu64
                 " bytes, its writer died inside the write) %s; its events "
                 "are recovered", path, off, (uint64_t)st.st_size - off,
                 off == 0 ? "and the file removed" : "cut off");
  }
  close(fd);
}

/* The ring files session `sid` of `pid` left half made in the cache
 * directory (STKR_RINGFILE_NEW). Such a file was never a ring of its
 * session: it has no name a reader or recovery looks at, no record, and its
 * writer died before it had any. Removing it is all there is to do (a
 * `stackrec record` removes the whole cache directory at its end; a bare
 * LD_PRELOAD run leaves them to us). */
static void remove_new_rings(const stkr__rc *rc, uint32_t pid, uint64_t sid) {
  char pre[STKR_RINGFILE_NAME_MAX + 8];
  struct dirent *e;
  DIR *d;
  size_t n;

  /* "new-stackrec-<pid>-<sid>-": the name of its ring 1, cut at the '-'. */
  memcpy(pre, STKR_RINGFILE_NEW, sizeof STKR_RINGFILE_NEW - 1);
  stkr_ringfile_name(pre + sizeof STKR_RINGFILE_NEW - 1, pid, sid, 1);
  n = (size_t)(strrchr(pre, '-') + 1 - pre);
  int fd = stkr__rc_cache_dirfd(rc->dir, false);
  if (fd < 0) return;
  if ((d = fdopendir(fd)) == NULL) {
    close(fd);
    return;
  }
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len > n + 5 && memcmp(e->d_name, pre, n) == 0 &&
        strcmp(e->d_name + len - 5, ".ring") == 0)
      (void)unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

void stkr__rc_remove_inputs(const stkr__rc *rc, uint32_t pid, uint64_t sid,
                            const stkr__rc_file *rings, size_t n,
                            const bool *keep, bool keep_session) {
  char path[STKR__RC_PATH_MAX];

  /* Rings first, the session file (our lock) last, so no one sees rings
   * without their session while we still hold it. */
  for (size_t i = 0; i < n; i++) {
    if (keep != NULL && keep[i]) continue;
    stkr__rc_path(rc, path, rings[i].pid, rings[i].sid, rings[i].thread);
    unlink(path);
  }
  remove_new_rings(rc, pid, sid);
  stkr__rc_defer_clear(rc, pid, sid);
  if (keep_session) return;
  stkr__rc_path(rc, path, pid, sid, 0);
  unlink(path);
}

/* A session file bigger than this is not one we wrote. */
#define STKR__RC_MAX_SESSFILE (64u << 20)

int stkr__rc_session(stkr__rc *rc, const stkr__rc_file *rings, size_t n) {
  const stkr__rc_file *f = rings - 1; /* the session file's entry */
  char path[STKR__RC_PATH_MAX];
  stkr__rc_sess ss;
  stkr__rc_scan sc = {0};
  uint8_t *data = NULL;
  uint64_t len = 0;
  const char *why;
  struct stat st;
  int fd, err;

  stkr__rc_path(rc, path, f->pid, f->sid, 0);
  /* Only a regular file: a FIFO named like a session file made verify's
   * dry run wait for a writer forever. */
  fd = stkr_open_regular(path, rc->opts.dry_run ? 0 : O_RDWR);
  if (fd < 0) {
    if (fd != -ENOENT) {
      stkr__rc_msg(rc, "%s: cannot open: %s", path,
                   fd == -EINVAL ? "not a regular file" : strerror(-fd));
      rc->st->sessions_failed++;
    }
    return 0; /* ENOENT: recovered or closed meanwhile */
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    /* EWOULDBLOCK: its writer lives. */
    rc->st->sessions_live++;
    close(fd);
    return 0;
  }
  struct stat named;
  if (fstat(fd, &st) != 0 || st.st_nlink == 0 || stat(path, &named) != 0 ||
      named.st_ino != st.st_ino || named.st_dev != st.st_dev) {
    /* Another recovery finished it before we got the lock, or its writer
     * ended cleanly meanwhile (the file pooled under another name, or
     * removed): not a dead session. */
    close(fd);
    return 0;
  }
  err = stkr__rc_read_file(fd, STKR__RC_MAX_SESSFILE, &data, &len);
  if (err != 0 || (why = stkr__rc_sess_check(&ss, data, len, f->pid, f->sid)) != NULL) {
    stkr__rc_msg(rc, "%s: offset 0: %s; session not recovered", path,
                 err != 0 ? strerror(-err) : why);
    rc->st->sessions_dead++;
    rc->st->orphans += 1 + n;
    rc->st->sessions_failed++;
    free(data);
    close(fd);
    return 1;
  }
  sc.sid = f->sid;
  sc.start_mono = ss.h.start_mono_ns;
  sc.start_wall = ss.h.start_wall_ns;
  sc.deadline_ns = rc->deadline_ns;
  err = stkr__rc_scan_segments(rc, f->pid, &sc);
  /* What the writer noted in the session file covers what the segments
   * read do not (older segments, or one the disk cap deleted). */
  if (ss.h.max_stack_id > sc.max_stack) sc.max_stack = ss.h.max_stack_id;
  sc.max_batch_seq = stkr__rc_max(sc.max_batch_seq, ss.h.max_batch_seq);
  if (err == 0 && ss.h.state == STKR_SESS_ENDED_CLEAN && sc.writer_last) {
    /* Not a dead writer: one that ended with everything written (its last
     * batch is there), and could not remove its files. */
    rc->st->sessions_ended_clean++;
    if (!rc->opts.dry_run)
      stkr__rc_remove_inputs(rc, f->pid, f->sid, rings, n, NULL, false);
    stkr__rc_scan_free(&sc);
    free(data);
    close(fd);
    return 0;
  }
  rc->st->sessions_dead++;
  if (err == -ETIMEDOUT) {
    rc->st->sessions_deferred++; /* the budget: as if never started */
    stkr__rc_defer_mark(rc, f->pid, f->sid);
  } else if (err != 0) {
    stkr__rc_msg(rc, "%s: cannot read the segments of pid %u: %s; session "
                 "not recovered", rc->dir, (unsigned)f->pid, strerror(-err));
    rc->st->sessions_failed++;
  } else {
    err = stkr__rc_write_session(rc, &ss, &sc, rings, n); /* we hold the lock */
  }
  stkr__rc_scan_free(&sc);
  free(data);
  close(fd); /* releases the lock */
  return 1;
}
