/*
 * stkr_recover_session.c: one dead session's ring files -> one recovered
 * segment (steps in stkr_recover.c's comment). The batches are built here
 * as plain Stackrec__Batch messages and encoded by stkr_fmt_encode_batch(),
 * the writer's own encoder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "common/stkr_ringfile.h"
#include "proto/stkr__recover.h"

/* Recovered batches stay well inside the writer's own limits. */
#define STKR__RC_BATCH_EVENTS 65536u
#define STKR__RC_BATCH_BYTES (8u << 20)

/* ---- building and writing (steps 4, 5) -------------------------------- */

typedef struct rstack {
  uint64_t hash;
  uint32_t site, id;
  uint16_t depth;
  bool truncated, emitted;
  uint64_t *pcs;
} rstack;

typedef struct build {
  stkr__rc *rc;
  const stkr__rc_sess *ss;
  stkr__rc_scan *sc;
  bool dry;
  int fd;               /* the recovered segment, -1 until opened */
  uint32_t seq;         /* its <seq> */
  char path[STKR__RC_PATH_MAX];
  uint64_t batch_seq, recovered_total, written_batches;
  uint64_t lost_bytes;  /* of damaged ring records, this recovery's */
  uint64_t lost_written; /* lost_bytes as the last batch written said it */
  /* Per ring of the session: it could not be read (or is not what its
   * name says) and stays, its loss counted in lost_bytes; cur_ring is the
   * one recover_ring reads. */
  bool *keep;
  size_t cur_ring;
  /* A kept ring may be read later (it could not be opened now: no
   * permission, no descriptor left): the session file stays with it. */
  bool retry;
  /* stacks of this recovery, indexed by (hash, site) */
  rstack *stacks;
  size_t n_stacks, cap_stacks;
  stkr_index stack_ix;
  uint8_t *site_sent;   /* bitmap by site id: SiteDef in this segment */
  size_t site_sent_bytes;
  /* the open batch */
  int64_t *ts_delta;
  uint32_t *thread_id, *stack_id, *payload_len, *ptrunc, *site_col;
  size_t n, cap, n_ptrunc, cap_ptrunc;
  uint8_t *pdata;
  size_t pdata_len, pdata_cap;
  bool any_payload, any_unsited; /* unsited: an event has stack id 0 */
  uint64_t base_ts, last_ts;
  stkr__rck known;      /* what known records refer to */
  uint64_t from, dups, unresolved; /* this ring's RingPos.end; counts */
  uint64_t unresolved_payloads;
  Stackrec__SiteDef *sites;
  size_t n_sites, cap_sites;
  char **site_names;
  size_t cap_site_names;
  Stackrec__ThreadDef thread_def;
  bool thread_pending;
  char thread_name[32];
  uint32_t cur_thread;
  uint64_t cur_end;     /* ring position after the last record taken */
  /* Where each ring's recovery ended: the RingPos of a last batch without
   * events (a later recovery must not take those records again). */
  Stackrec__RingPos *done;
  size_t n_done, cap_done;
  size_t first_stack;   /* stacks[first_stack..] are new in this batch */
  /* Drops the writer made after its last batch (the ring and session
   * files' drops beyond what a written batch counts): the session's so
   * far, which every batch's Counters include; and the current ring's,
   * which its batch carries as Drops (x_pending). */
  uint64_t x_full, x_reentrant, x_other;
  Stackrec__Drops x_ring;
  bool x_pending;
  size_t est;
  stkr_fmt_buf out;
  int err;
} build;

static uint32_t intern_stack(build *b, const stkr_ring_rec *r) {
  bool trunc = (r->flags & 2u) != 0;
  uint64_t h = r->hash ^ ((uint64_t)r->site_id << 32);
  size_t pos, ix;

  for (ix = stkr_index_first(&b->stack_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&b->stack_ix, h, &pos)) {
    const rstack *s = &b->stacks[ix];
    if (s->hash == r->hash && s->site == r->site_id && s->depth == r->depth &&
        s->truncated == trunc &&
        memcmp(s->pcs, r->pcs, 8u * r->depth) == 0)
      return s->id;
  }
  if (b->sc->max_stack + b->n_stacks + 1 >= UINT32_MAX ||
      stkr__grow(&b->stacks, &b->cap_stacks, b->n_stacks + 1,
                 sizeof *b->stacks) != 0 ||
      stkr_index_reserve(&b->stack_ix, b->n_stacks + 1) != 0)
    return 0;
  rstack *s = &b->stacks[b->n_stacks];
  s->pcs = malloc(r->depth ? 8u * r->depth : 1);
  if (s->pcs == NULL) return 0;
  memcpy(s->pcs, r->pcs, 8u * r->depth);
  s->hash = r->hash;
  s->site = r->site_id;
  s->depth = r->depth;
  s->truncated = trunc;
  s->emitted = false;
  s->id = b->sc->max_stack + (uint32_t)b->n_stacks + 1;
  (void)stkr_index_add(&b->stack_ix, h, b->n_stacks); /* reserved */
  b->n_stacks++;
  b->est += 16 + 10u * r->depth;
  return s->id;
}

static int open_segment(build *b) {
  uint32_t seq = 0, pid = b->ss->h.pid;
  char name[STKR_FMT_SEGMENT_NAME_MAX];

  for (size_t i = 0; i < b->rc->n_segs; i++)
    if (b->rc->segs[i].pid == pid && b->rc->segs[i].seq > seq)
      seq = b->rc->segs[i].seq;
  if (!stkr__rc_same_dir(b->rc)) return -ESTALE;
  /* The highest file may be a run's tombstone: go on after its run. */
  if (seq > 0) seq = stkr_fmt_seq_said(b->rc->dir, pid, seq);
  for (int tries = 0; tries < 1000; tries++) {
    if (seq == UINT32_MAX) return -EOVERFLOW;
    seq++;
    stkr_fmt_segment_name(name, sizeof name, pid, seq);
    snprintf(b->path, sizeof b->path, "%s/%s", b->rc->dir, name);
    b->fd = open(b->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (b->fd >= 0) {
      b->seq = seq;
      return 0;
    }
    if (errno != EEXIST) return -errno;
  }
  return -EEXIST;
}

/* Totals as they stand once a batch is read: what the dead writer wrote,
 * its drops as far as its batches told, and what recovery adds
 * (attempted == written + dropped + recovered). */
static void counters(const build *b, Stackrec__Counters *K) {
  const stkr__rc_scan *sc = b->sc;
  K->written = sc->written;
  /* Cumulative both: the session file's is the latest (failed batches
   * after the last written one), the Counters' what batches told. */
  K->dropped_write_error =
      stkr__rc_max(sc->dropped_write_error, b->ss->h.dropped_write_error);
  K->segments_deleted = sc->segments_deleted;
  /* Saturating: the files' counters are hostile input (a reader calls
   * counters that do not add up damage; they must not wrap into sense). */
  K->dropped_ring_full =
      stkr__rc_sat(stkr__rc_max(sc->ring_full, sc->c_ring_full),
                               b->x_full);
  K->dropped_reentrant =
      stkr__rc_sat(stkr__rc_max(sc->reentrant, sc->c_reentrant),
                   b->x_reentrant);
  K->dropped_other =
      stkr__rc_sat(stkr__rc_max(sc->other, sc->c_other), b->x_other);
  /* Cumulative both, as dropped_write_error: the calls an exit's end
   * refused (the session file's, those after the last batch included)
   * and what the batches told (with events an exit left in memory rings,
   * which only they count). Before session 46 recovery wrote 0 here. */
  K->dropped_exit = stkr__rc_max(sc->c_exit, b->ss->h.drops_late);
  /* The session's, earlier recoveries' included (QA, session 22: a
   * recovery after one that died counted only its own, and attempted came
   * out below written + dropped + recovered). */
  K->recovered = stkr__rc_sat(sc->recovered_events, b->recovered_total);
  /* The largest, not a sum: an earlier recovery of the session read the
   * same rings, and so the same damaged stretch (stackrec.proto). */
  K->recovery_lost_bytes = stkr__rc_max(sc->c_lost_bytes, b->lost_bytes);
  /* Threads whose rings were in memory: nothing of them is in the ring
   * files, and a death lost what they had not flushed (stackrec.proto). */
  K->memory_rings_lost = b->ss->h.memory_rings;
  K->marks_dropped = b->ss->h.marks_dropped; /* the session's, all told */
  K->attempted = stkr__rc_sat(
      stkr__rc_sat(stkr__rc_sat(K->written, K->dropped_write_error),
                   stkr__rc_sat(K->dropped_ring_full, K->dropped_reentrant)),
      stkr__rc_sat(stkr__rc_sat(K->dropped_other, K->dropped_exit),
                   K->recovered));
}

/* The open batch's event columns, pointing into b. */
static void events_of(build *b, Stackrec__Events *E) {
  E->base_ts_ns = b->base_ts;
  E->n_ts_delta_ns = E->n_thread_id = E->n_stack_id = b->n;
  E->ts_delta_ns = b->ts_delta;
  E->thread_id = b->thread_id;
  E->stack_id = b->stack_id;
  if (b->any_payload) {
    E->n_payload_len = b->n;
    E->payload_len = b->payload_len;
    E->payload_data.len = b->pdata_len;
    E->payload_data.data = b->pdata;
  }
  E->n_payload_truncated = b->n_ptrunc;
  E->payload_truncated = b->ptrunc;
  if (b->any_unsited) { /* their sites cannot follow from a stack */
    E->n_site_id = b->n;
    E->site_id = b->site_col;
  }
}

/* Encode and write the open batch (nothing in a dry run). `last`: the
 * session's final batch, written even without events if no batch was (its
 * counters are the final accounting: without them, a writer that died with
 * nothing unwritten stayed "no clean end" for good). */
static int flush_batch(build *b, bool last) {
  Stackrec__Batch B = STACKREC__BATCH__INIT;
  Stackrec__Header H = STACKREC__HEADER__INIT;
  Stackrec__Config C = STACKREC__CONFIG__INIT;
  Stackrec__Events E = STACKREC__EVENTS__INIT;
  Stackrec__Counters K = STACKREC__COUNTERS__INIT;
  Stackrec__RingPos P = STACKREC__RING_POS__INIT;
  Stackrec__RingPos *pp = &P;
  Stackrec__ThreadDef *tp = &b->thread_def;
  Stackrec__SiteDef **sp = NULL;
  Stackrec__StackDef *sd = NULL, **sdp = NULL;
  Stackrec__RingPos **dp = NULL;
  Stackrec__Drops *xp = &b->x_ring;
  size_t n_new = b->n_stacks - b->first_stack;
  const stkr__rc_scan *sc = b->sc;
  int err = 0;

  /* The last batch also when the loss grew since the last one written
   * (a ring that could not be used after one that could: review, session
   * 40), so that the segment's counters carry it. */
  if (b->n == 0 && !b->x_pending &&
      !(last && (b->written_batches == 0 || b->lost_bytes != b->lost_written))) {
    b->thread_pending = false; /* nothing to add: no ThreadDef either */
    return 0;
  }
  b->recovered_total += b->n;
  if (b->dry) goto done;
  if (b->fd < 0 && (err = open_segment(b)) != 0) return err;
  sp = calloc(b->n_sites + 1, sizeof *sp);
  sd = calloc(n_new + 1, sizeof *sd);
  sdp = calloc(n_new + 1, sizeof *sdp);
  dp = calloc(b->n_done + 1, sizeof *dp);
  if (sp == NULL || sd == NULL || sdp == NULL || dp == NULL) {
    err = -ENOMEM;
    goto done;
  }
  B.seq = sc->max_batch_seq + ++b->batch_seq;
  B.recovered = true;
  if (b->written_batches == 0) {
    /* The dead session's Header, from its session file (the recovered
     * segment's first batch). */
    stkr_fmt_header_from_session(&H, &C, &b->ss->h);
    H.segment_seq = b->seq;
    H.session_first_seq = sc->first_seq ? sc->first_seq : b->seq;
    B.header = &H;
    if (sc->images != NULL) {
      B.n_images = sc->images->n_images;
      B.images = sc->images->images;
    }
  }
  for (size_t i = 0; i < b->n_sites; i++) sp[i] = &b->sites[i];
  B.n_sites = b->n_sites;
  B.sites = sp;
  if (b->thread_pending) {
    B.n_threads = 1;
    B.threads = &tp;
  }
  /* (A ring's first batch carries its ThreadDef; later batches of the
   * same ring in this segment need none.) */
  for (size_t i = 0; i < n_new; i++) {
    const rstack *s = &b->stacks[b->first_stack + i];
    Stackrec__StackDef d0 = STACKREC__STACK_DEF__INIT;
    sd[i] = d0;
    sd[i].id = s->id;
    sd[i].n_pcs = s->depth;
    sd[i].pcs = s->pcs;
    sd[i].hash = s->hash;
    sd[i].truncated = s->truncated;
    sd[i].site_id = s->site;
    sdp[i] = &sd[i];
  }
  B.n_stacks = n_new;
  B.stacks = sdp;
  if (b->n > 0) {
    events_of(b, &E);
    B.events = &E;
    P.thread_id = b->cur_thread;
    P.end = b->cur_end;
    B.n_ring_pos = 1;
    B.ring_pos = &pp;
  } else { /* where every ring's recovery ended */
    for (size_t i = 0; i < b->n_done; i++) dp[i] = &b->done[i];
    B.n_ring_pos = b->n_done;
    B.ring_pos = dp;
  }
  if (b->x_pending) {
    B.n_drops = 1;
    B.drops = &xp;
  }
  counters(b, &K);
  B.counters = &K;
  b->lost_written = b->lost_bytes;
  b->out.len = 0;
  if ((err = stkr_fmt_encode_batch(&B, NULL, 3, &b->out)) == 0)
    err = stkr_write_all_within(b->fd, b->out.data, b->out.len);
  b->written_batches++;
done:
  free(sp);
  free(sd);
  free(sdp);
  free(dp);
  for (size_t i = 0; i < b->n_sites; i++) free(b->site_names[i]);
  b->n = b->n_ptrunc = b->pdata_len = b->n_sites = 0;
  b->any_payload = b->any_unsited = false;
  b->thread_pending = false;
  b->x_pending = false;
  b->first_stack = b->n_stacks;
  b->est = 0;
  return err;
}

/* Room for need events in each of the five event columns, which share
 * b->cap: it moves only once every column has grown (a column that could
 * not is left as it was, never lost). @return 0 or -ENOMEM. */
static int grow_columns(build *b, size_t need) {
  size_t c[5] = {b->cap, b->cap, b->cap, b->cap, b->cap};

  if (need <= b->cap)
    return 0;
  if (stkr_grow((void **)&b->ts_delta, &c[0], need, sizeof *b->ts_delta) ||
      stkr_grow((void **)&b->thread_id, &c[1], need, sizeof *b->thread_id) ||
      stkr_grow((void **)&b->stack_id, &c[2], need, sizeof *b->stack_id) ||
      stkr_grow((void **)&b->payload_len, &c[3], need,
                sizeof *b->payload_len) ||
      stkr_grow((void **)&b->site_col, &c[4], need, sizeof *b->site_col))
    return -ENOMEM;
  b->cap = c[0]; /* all alike: the same doubling from the same cap */
  return 0;
}

static int add_rec(void *arg, const stkr_ring_rec *r) {
  build *b = arg;
  stkr_ring_rec full;
  uint32_t stack;
  const uint8_t *payload = r->payload;
  uint16_t plen = r->payload_len;
  bool ptrunc = (r->flags & STKR_RINGREC_PAYLOAD_TRUNCATED) != 0;
  int err;

  /* Below RingPos.end too: known records after it may refer to it. */
  if (!(r->flags & STKR_RINGREC_KNOWN)) stkr__rck_full(&b->known, r);
  if (r->flags & STKR_RINGREC_PAYLOAD_NEW) stkr__rck_payload_new(&b->known, r);
  if (r->pos < b->from) {
    b->dups++;
    return 0;
  }

  if (b->n >= STKR__RC_BATCH_EVENTS || b->est >= STKR__RC_BATCH_BYTES) {
    if ((err = flush_batch(b, false)) != 0) return err;
  }
  b->cur_end = r->pos + r->size; /* RingPos.end if the batch ends here */
  if (b->dry) {
    b->n++;
    return 0;
  }
  if ((err = stkr_bit_set(&b->site_sent, &b->site_sent_bytes, r->site_id)) < 0)
    return err;
  if (err == 1) {
    char name[1024];
    const char *nm = stkr__rc_sess_site(b->ss, r->site_id, name, sizeof name);
    if (nm != NULL) { /* else: defined by the dead writer's own batches */
      Stackrec__SiteDef d0 = STACKREC__SITE_DEF__INIT;
      char *copy = strdup(nm);
      if (copy == NULL ||
          stkr__grow(&b->sites, &b->cap_sites, b->n_sites + 1,
                     sizeof *b->sites) != 0 ||
          stkr__grow(&b->site_names, &b->cap_site_names, b->n_sites + 1,
                     sizeof *b->site_names) != 0) {
        free(copy);
        return -ENOMEM;
      }
      b->sites[b->n_sites] = d0;
      b->sites[b->n_sites].id = r->site_id;
      b->sites[b->n_sites].name = copy;
      b->site_names[b->n_sites++] = copy;
    }
  }
  if (!(r->flags & STKR_RINGREC_KNOWN)) {
    if ((stack = intern_stack(b, r)) == 0) return -ENOMEM;
  } else if ((err = stkr__rck_resolve(&b->known, b->rc, b->ss->h.pid, r,
                                      &full)) < 0) {
    return err;
  } else if (err == 0) { /* kept, with its site: stack id 0, "unknown" */
    stack = 0;
    b->unresolved++;
    b->any_unsited = true;
  } else if ((stack = intern_stack(b, &full)) == 0) {
    return -ENOMEM;
  }
  if ((r->flags & STKR_RINGREC_PAYLOAD_KNOWN) &&
      (err = stkr__rck_payload(&b->known, b->rc, b->ss->h.pid, r,
                               &payload)) <= 0) {
    if (err < 0) return err;
    /* Its payload is gone with its segment: the event is kept, with an
     * empty payload marked truncated, and counted. */
    payload = NULL;
    plen = 0;
    ptrunc = true;
    b->unresolved_payloads++;
  }
  if ((err = grow_columns(b, b->n + 1)) != 0)
    return err;
  /* Counter ticks -> CLOCK_MONOTONIC ns, with the dead writer's last
   * calibration (its records are at most an exit budget newer). */
  uint64_t ts = stkr_clock_to_ns(&b->ss->h.clock[b->ss->h.clock_idx & 1],
                                 r->ts_ns);
  if (b->n == 0) b->base_ts = b->last_ts = ts;
  b->ts_delta[b->n] = (int64_t)(ts - b->last_ts);
  b->last_ts = ts;
  b->thread_id[b->n] = b->cur_thread;
  b->stack_id[b->n] = stack;
  b->site_col[b->n] = r->site_id;
  b->payload_len[b->n] = plen;
  if (plen) {
    if (stkr__grow(&b->pdata, &b->pdata_cap, b->pdata_len + plen, 1) != 0)
      return -ENOMEM;
    memcpy(b->pdata + b->pdata_len, payload, plen);
    b->pdata_len += plen;
    b->any_payload = true;
  }
  if (ptrunc) {
    if (stkr__grow(&b->ptrunc, &b->cap_ptrunc, b->n_ptrunc + 1, 4) != 0)
      return -ENOMEM;
    b->ptrunc[b->n_ptrunc++] = (uint32_t)b->n;
  }
  b->n++;
  b->est += 12 + plen;
  return 0;
}

static void build_free(build *b) {
  STKR_FREE_EACH(b->stacks, b->n_stacks, pcs);
  for (size_t i = 0; i < b->n_sites; i++) free(b->site_names[i]);
  stkr_index_free(&b->stack_ix);
  STKR_FREE_ALL(b->stacks, b->site_sent, b->ts_delta, b->thread_id,
                b->stack_id, b->payload_len, b->ptrunc, b->site_col, b->pdata,
                b->sites, b->site_names, b->done, b->keep);
  stkr__rck_free(&b->known);
  stkr_fmt_buf_free(&b->out);
}

/* Ring file f, whole, into *data (malloc'd) and *len; its path into path.
 * @return 0, or -errno with *why "open" or "read" (-EINVAL on open: not a
 * regular file, which is never opened: a FIFO would block). */
static int read_ring(const stkr__rc *rc, const stkr__rc_file *f,
                     char path[STKR__RC_PATH_MAX], uint8_t **data,
                     uint64_t *len, const char **why) {
  int fd, err;

  stkr__rc_path(rc, path, f->pid, f->sid, f->thread);
  *why = "open";
  if ((fd = stkr_open_regular(path, 0)) < 0)
    return fd;
  *why = "read";
  err = stkr__rc_read_file(fd, STKR_RINGFILE_HDR_BYTES + STKR_RINGFILE_MAX_RING,
                           data, len);
  close(fd);
  return err;
}

/* A ring of the session that cannot be used: counted, kept (never
 * removed with the session's files: QA, session 40, a ring only unreadable
 * to the user running recover was deleted with its 1 783 events, and the
 * recording verified intact), and its size (at least a byte: its records
 * are unknown) counted as lost in the recovered segment, so that every
 * reader calls the session damaged. */
static void unusable_ring(build *b, const char *path) {
  struct stat st;
  uint64_t size = lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                      ? (uint64_t)st.st_size : 1;
  b->rc->st->orphans++;
  b->lost_bytes = stkr__rc_sat(b->lost_bytes, size);
  if (b->keep != NULL) b->keep[b->cur_ring] = true;
}

/* Could a ring that failed to open with err be read by a later recovery
 * (another user, more descriptors)? */
static bool open_may_work_later(int err) {
  return err == -EACCES || err == -EPERM || err == -EMFILE || err == -ENFILE;
}

/* Ring file f, read whole, with its header checked against its name: the
 * file's identity must match before any record of it is used. The records
 * are the thread's that owns the ring now (thread_id; file_no is the first
 * owner's). With `loud`, a file that cannot be read or does not match is
 * said and counted as an orphan (recover_ring; want_ring stays quiet, so
 * each file is said once).
 * @return 1 with *data (malloc'd), *len and *info set; 0 when the file
 * holds nothing to use; or -ENOMEM. */
static int load_ring(build *b, const stkr__rc_file *f, bool loud,
                     char path[STKR__RC_PATH_MAX], uint8_t **data,
                     uint64_t *len, stkr_ring_info *info) {
  uint64_t dups, lost, bad_pos;
  const char *why;
  int err;

  if ((err = read_ring(b->rc, f, path, data, len, &why)) != 0) {
    if (loud && why[0] == 'o' && open_may_work_later(err) && b->keep != NULL) {
      /* Not lost yet: kept with its session file, for a recovery that
       * can open it (QA, session 40: kept without it, the ring could
       * never be recovered, though root could read it). */
      stkr__rc_msg(b->rc, "%s: cannot open: %s; kept with its session "
                   "file for a later recovery", path, strerror(-err));
      b->rc->st->orphans++;
      b->keep[b->cur_ring] = true;
      b->retry = true;
    } else if (loud) {
      stkr__rc_msg(b->rc, "%s: cannot %s: %s; file kept, its records lost",
                   path, why, err == -EINVAL && why[0] == 'o'
                                  ? "not a regular file" : strerror(-err));
      unusable_ring(b, path);
    }
    return err == -ENOMEM ? err : 0;
  }
  if (stkr__rc_ring_unset(*data, *len)) /* died creating it: empty */
    goto nothing;
  /* The header alone first. */
  err = stkr_ring_parse(*data, *len, UINT64_MAX, info, NULL, NULL, &dups,
                        &lost, &bad_pos, &why);
  if (err == 0 && info->thread_id == 0 && info->head == info->tail &&
      info->file_no == f->thread)
    goto nothing; /* made ahead, never owned: nothing in it */
  if (err < 0 || info->file_no != f->thread || info->session_id != f->sid ||
      info->pid != f->pid || info->thread_id == 0) {
    if (loud) {
      stkr__rc_msg(b->rc, "%s: offset 0: %s; file kept, its records lost",
                   path, err < 0 ? why : "header does not match the file name");
      unusable_ring(b, path);
    }
    goto nothing;
  }
  return 1;
nothing:
  free(*data);
  *data = NULL;
  return 0;
}

/* What the ring's owner dropped after the writer's last batch (common/
 * stkr_ringfile.h, "drops"): the session's drops, and a Drops of the
 * ring's thread in its batch. */
static void ring_drops(build *b, const stkr_ring_info *info) {
  /* Pending values of a batch the segments hold are what it counted:
   * the writer died before it stored them as counted. */
  bool written = stkr__rc_written_pending(b->sc, info->pend_seq);
  uint64_t full = stkr__rc_uncounted(info->drops_full, info->counted_full,
                                     written, info->pend_full);
  uint64_t reent =
      stkr__rc_uncounted(info->drops_reentrant, info->counted_reentrant,
                         written, info->pend_reentrant);

  /* An earlier recovery of this session died after writing (part of) its
   * segment, this ring's batch among it: it counted these already. */
  if ((full == 0 && reent == 0) ||
      stkr_map_find(&b->sc->recovered_drops, info->thread_id) != NULL)
    return;
  b->x_full = stkr__rc_sat(b->x_full, full);
  b->x_reentrant = stkr__rc_sat(b->x_reentrant, reent);
  b->rc->st->drops_found =
      stkr__rc_sat(b->rc->st->drops_found, stkr__rc_sat(full, reent));
  stackrec__drops__init(&b->x_ring);
  b->x_ring.thread_id = info->thread_id;
  b->x_ring.ring_full = full;
  b->x_ring.reentrant = reent;
  b->x_pending = true;
}

/* Read one ring file and add its records past what the segments hold. */
static int recover_ring(build *b, const stkr__rc_file *f) {
  char path[STKR__RC_PATH_MAX];
  stkr_ring_info info;
  uint8_t *data = NULL;
  uint64_t len = 0, dups, lost, bad_pos, from = 0;
  const char *why;
  uint32_t idx;
  int err;

  if ((err = load_ring(b, f, true, path, &data, &len, &info)) <= 0)
    return err;
  if (stkr__idmap_get(&b->sc->pos_map, info.thread_id, &idx))
    from = b->sc->ends[idx];
  b->rc->st->rings++;
  b->cur_thread = info.thread_id;
  b->cur_end = from > info.tail ? from : info.tail;
  if (!b->dry) {
    Stackrec__ThreadDef d0 = STACKREC__THREAD_DEF__INIT;
    memcpy(b->thread_name, info.name, sizeof b->thread_name);
    b->thread_def = d0;
    b->thread_def.id = info.thread_id;
    b->thread_def.tid = info.os_tid;
    b->thread_def.name = b->thread_name;
    b->thread_def.exited = true; /* its process is gone */
  }
  b->thread_pending = true;
  b->from = from;
  b->dups = 0;
  stkr__rck_ring_begin(&b->known, data, len);
  /* From the tail: add_rec skips (and counts) what is below `from`. */
  err = stkr_ring_parse(data, len, 0, &info, add_rec, b, &dups, &lost,
                        &bad_pos, &why);
  if (err >= 0) {
    /* Everything up to head (or the bad record) is now accounted for. */
    b->cur_end = err == 1 ? info.head - lost : info.head;
    b->rc->st->duplicates += b->dups;
    if (stkr__grow(&b->done, &b->cap_done, b->n_done + 1, sizeof *b->done)) {
      free(data);
      return -ENOMEM;
    }
    stackrec__ring_pos__init(&b->done[b->n_done]);
    b->done[b->n_done].thread_id = b->cur_thread;
    b->done[b->n_done++].end = b->cur_end;
  }
  if (err == 1) {
    stkr__rc_msg(b->rc, "%s: offset %" PRIu64 ": %s; %" PRIu64
                 " bytes of records lost", path, bad_pos, why, lost);
    b->rc->st->damaged_rings++;
    b->rc->st->lost_bytes += lost;
    b->lost_bytes = stkr__rc_sat(b->lost_bytes, lost);
    err = 0;
  }
  if (err == 0) ring_drops(b, &info);
  /* One ring per batch tail: RingPos of this ring goes with its records. */
  if (err == 0) err = flush_batch(b, false);
  free(data);
  return err;
}

/* What ring f's known records may look up in the segments (its slots' keys
 * at the tail), before any ring is recovered: the segments are read once,
 * for those keys only. A ring that load_ring refuses adds nothing
 * (recover_ring says why). @return 0 or -ENOMEM. */
static int want_ring(build *b, const stkr__rc_file *f) {
  char path[STKR__RC_PATH_MAX];
  stkr_ring_info info;
  uint8_t *data = NULL;
  uint64_t len = 0;
  int err;

  if ((err = load_ring(b, f, false, path, &data, &len, &info)) <= 0)
    return err;
  err = stkr__rck_want_ring(&b->known, data, len);
  free(data);
  return err;
}

int stkr__rc_write_session(stkr__rc *rc, const stkr__rc_sess *ss,
                           stkr__rc_scan *sc, const stkr__rc_file *rings,
                           size_t n) {
  build b = {.rc = rc, .ss = ss, .sc = sc, .dry = rc->opts.dry_run, .fd = -1};
  /* What a session cut short by the budget must not have counted. */
  const stkr_recover_stats before = *rc->st;
  int err = 0;

  b.known.sid = ss->h.session_id;
  b.known.deadline_ns = rc->deadline_ns;
  /* Drops that no ring holds: of no ring or site, and of reaped threads
   * (the session file; 0 in older files). Not again after an earlier
   * recovery's segment (ring_drops). */
  if (!sc->recovered_before) {
    const stkr_sessfile_hdr *h = &ss->h;
    bool written = stkr__rc_written_pending(sc, h->pend_seq);
    b.x_other = stkr__rc_uncounted(h->drops_other, h->counted_other,
                                   written, h->pend_other);
    b.x_full = stkr__rc_uncounted(h->retired_full, h->counted_retired_full,
                                  written, h->pend_retired_full);
    b.x_reentrant = stkr__rc_uncounted(h->retired_reentrant,
                                       h->counted_retired_reentrant, written,
                                       h->pend_retired_reentrant);
    rc->st->drops_found = stkr__rc_sat(
        rc->st->drops_found,
        stkr__rc_sat(b.x_other, stkr__rc_sat(b.x_full, b.x_reentrant)));
  }
  /* Failed batches after the last written one, and calls an exit refused
   * after it (counters() takes them). */
  rc->st->drops_found = stkr__rc_sat(
      rc->st->drops_found,
      stkr__rc_sat(
          stkr__rc_beyond(ss->h.dropped_write_error, sc->dropped_write_error),
          stkr__rc_beyond(ss->h.drops_late, sc->c_exit)));
  for (size_t i = 0; i < n && err == 0; i++)
    err = stkr__rc_expired(rc->deadline_ns) ? -ETIMEDOUT
                                            : want_ring(&b, &rings[i]);
  if (err == 0 && (b.keep = calloc(n + 1, sizeof *b.keep)) == NULL)
    err = -ENOMEM;
  for (size_t i = 0; i < n && err == 0; i++) {
    b.cur_ring = i;
    err = stkr__rc_expired(rc->deadline_ns) ? -ETIMEDOUT
                                            : recover_ring(&b, &rings[i]);
  }
  if (err == 0 && b.retry && b.fd < 0 && b.n == 0 && b.recovered_total == 0) {
    /* Nothing this recovery can add, only rings kept for a later one: no
     * segment (each attempt would add an empty one), every file kept. */
    *rc->st = before;
    rc->st->sessions_failed++;
    stkr__rc_msg(rc, "session %016llx of pid %u: not recovered now; its "
                 "files kept for a recovery that can open its rings",
                 (unsigned long long)ss->h.session_id, (unsigned)ss->h.pid);
    build_free(&b);
    return 0;
  }
  if (err == 0) err = flush_batch(&b, true);
  if (err == 0 && b.fd >= 0 && fsync(b.fd) != 0) err = -errno;
  if (err == 0 && b.fd >= 0) /* the session's final segment: cap-proof */
    (void)fchmod(b.fd, STKR_FMT_SEGMENT_FINAL_MODE);
  if (b.fd >= 0 && close(b.fd) != 0 && err == 0) err = -errno;
  if (err == 0 && b.fd >= 0) err = stkr_fsync_dir(rc->dir);
  if (err == -ETIMEDOUT) { /* the budget: as if never started */
    if (b.fd >= 0) unlink(b.path);
    *rc->st = before; /* its rings' counts: again when it is recovered */
    rc->st->sessions_deferred++;
    stkr__rc_defer_mark(rc, ss->h.pid, ss->h.session_id);
    build_free(&b);
    return 0;
  }
  if (err != 0) {
    if (b.fd >= 0) unlink(b.path);
    /* Nothing written: its drops are not counted anywhere yet (QA,
     * session 22: "... now counted" on a full disk). */
    rc->st->drops_found = before.drops_found;
    stkr__rc_msg(rc, "%s: cannot write the recovered segment: %s; ring files "
                 "kept", b.fd >= 0 ? b.path : rc->dir,
                 err == -ESTALE ? "the directory was replaced while "
                                  "recovering (deleted and made again)"
                                : strerror(-err));
    rc->st->sessions_failed++;
    build_free(&b);
    return 0;
  }
  rc->st->events += b.recovered_total;
  rc->st->unresolved_stacks += b.unresolved;
  rc->st->unresolved_payloads += b.unresolved_payloads;
  if (b.unresolved != 0)
    stkr__rc_msg(rc, "session %016llx of pid %u: %llu recovered events keep "
                 "their site but not their stack (sent once, in a segment "
                 "that is gone)", (unsigned long long)ss->h.session_id,
                 (unsigned)ss->h.pid, (unsigned long long)b.unresolved);
  if (b.unresolved_payloads != 0)
    stkr__rc_msg(rc, "session %016llx of pid %u: %llu recovered events lost "
                 "their payload (sent once, in a segment that is gone): kept "
                 "with an empty payload marked truncated",
                 (unsigned long long)ss->h.session_id, (unsigned)ss->h.pid,
                 (unsigned long long)b.unresolved_payloads);
  rc->st->sessions_recovered++;
  if (b.fd >= 0) rc->st->segments_written++;
  if (!b.dry) {
    /* The torn frame's events were never released from the rings: they
     * are in the segment just written, and the fragment can go. */
    for (size_t i = 0; i < sc->n_torn; i++)
      stkr__rc_cut_torn_tail(rc, sc->torn[i], sc->torn_off[i], ss->h.pid);
    /* The segment is durable: the inputs may go. */
    stkr__rc_remove_inputs(rc, ss->h.pid, ss->h.session_id, rings, n,
                           b.keep, b.retry);
  }
  build_free(&b);
  return 0;
}
