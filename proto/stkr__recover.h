/*
 * stkr__recover.h: internals shared by stkr_recover.c (directory, names,
 * ring decoder), stkr_recover_session.c (one dead session -> segment) and
 * stkr_recover_scan.c (what its segments already hold).
 * Not public.
 */
#ifndef STKR__RECOVER_H
#define STKR__RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "common/stkr_ringfile.h"
#include "proto/stkr__reader.h"
#include "proto/stkr_recover.h"

#define STKR__RC_PATH_MAX 4096

/* Counter arithmetic of the scan and the session's rebuild: the larger;
 * a sum that sticks at UINT64_MAX (hostile counters must not wrap); a - b
 * or 0 (a file's drops beyond what it says was counted). */
static inline uint64_t stkr__rc_max(uint64_t a, uint64_t b) {
  return a > b ? a : b;
}
static inline uint64_t stkr__rc_sat(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}
static inline uint64_t stkr__rc_beyond(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

typedef struct stkr__rc_file {
  uint32_t pid;
  uint64_t sid;
  uint32_t thread; /* 0: the session file */
} stkr__rc_file;

typedef struct stkr__rc_seg {
  uint32_t pid, seq;
} stkr__rc_seg;

typedef struct stkr__rc {
  const char *dir;
  /* dir's identity when it was listed: a recovered segment goes only into
   * that directory, not one made under its name since (stkr__rc_same_dir). */
  uint64_t dir_dev, dir_ino;
  stkr_recover_opts opts;
  stkr_recover_stats *st;
  stkr__rc_file *files; /* ring and session files, sorted */
  size_t n_files, cap_files;
  stkr__rc_seg *segs;   /* segment files in dir */
  size_t n_segs, cap_segs;
  uint64_t deadline_ns; /* CLOCK_MONOTONIC, from opts.budget_ms; 0: none */
} stkr__rc;

/* Is rc->dir still the directory that was listed? A recovery whose
 * directory was deleted and made again by a new recording wrote the dead
 * session's segment into the new one (QA, session 28). */
bool stkr__rc_same_dir(const stkr__rc *rc);
/* Past the deadline (0: never)? */
bool stkr__rc_expired(uint64_t deadline_ns);
/* The budget's mark on session (pid, sid) (stkr_recover_opts.budget_ms):
 * set (made), test, or clear (removed). Best effort. */
/* DIR/.stackrec-cache as a directory of its own (made first when `make`),
 * never through a link (stkr_recover_cache.c). @return an O_DIRECTORY
 * descriptor or -errno (-ELOOP, -ENOTDIR: not a directory of its own). */
int stkr__rc_cache_dirfd(const char *dir, bool make);
void stkr__rc_defer_mark(const stkr__rc *rc, uint32_t pid, uint64_t sid);
bool stkr__rc_defer_marked(const stkr__rc *rc, uint32_t pid, uint64_t sid);
void stkr__rc_defer_clear(const stkr__rc *rc, uint32_t pid, uint64_t sid);

/* A dead session's session file, read whole. */
typedef struct stkr__rc_sess {
  stkr_sessfile_hdr h;
  const uint8_t *data;
  uint64_t len;
} stkr__rc_sess;

/* Check data (len bytes) as the session file of (pid, sid) and copy its
 * header into s->h; NULL, or why not. */
const char *stkr__rc_sess_check(stkr__rc_sess *s, const uint8_t *data,
                                uint64_t len, uint32_t pid, uint64_t sid);
/* The name of site id, or NULL (not stored, or out of bounds), copied into
 * buf (NUL-terminated). */
const char *stkr__rc_sess_site(const stkr__rc_sess *s, uint32_t id, char *buf,
                               size_t cap);

void stkr__rc_msg(stkr__rc *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int stkr__rc_parse_name(const char *s, uint32_t *pid, uint64_t *sid,
                        uint32_t *thread);
int stkr__rc_read_file(int fd, uint64_t max, uint8_t **data, uint64_t *len);
/* dir/<name of (pid, sid, thread)> into buf (STKR__RC_PATH_MAX bytes). */
void stkr__rc_path(const stkr__rc *rc, char *buf, uint32_t pid, uint64_t sid,
                   uint32_t thread);
/* Recover one session whose session file is rc->files-entry (pid, sid) and
 * whose rings are rings[0..n). Returns 1 when the session was dead (and
 * recovered or tried), 0 when it was live or gone, <0 on a hard error. */
int stkr__rc_session(stkr__rc *rc, const stkr__rc_file *rings, size_t n);
/* A ring file its writer died creating (no magic yet): nothing in it. */
bool stkr__rc_ring_unset(const uint8_t *data, uint64_t len);
/* Once session `sid` of `pid` (dead: we hold its lock) is recovered and
 * durable: remove its ring files rings[0..n) but those keep[] marks (NULL:
 * none; a ring that could not be read stays, and says its loss to every
 * later reader), those it left half made in the cache directory, and its
 * session file unless keep_session (a kept ring a later recovery may
 * read). */
void stkr__rc_remove_inputs(const stkr__rc *rc, uint32_t pid, uint64_t sid,
                            const stkr__rc_file *rings, size_t n,
                            const bool *keep, bool keep_session);
/* After a dead session's recovered segment is durable: cut a frame torn by
 * its writer's death (or an earlier recovery's) off the end of path, a
 * segment of the session's pid, at off, the frame's start
 * (stkr_recover.c). */
void stkr__rc_cut_torn_tail(stkr__rc *rc, const char *path, uint64_t off,
                            uint32_t pid);

/* ---- what the segments already hold (stkr_recover_scan.c) ---- */
/* Filled by stkr__rc_scan_segments from the batches of session sid (set
 * by the caller, with start_mono/start_wall) in the segments of its pid. */
typedef struct stkr__rc_scan {
  uint64_t sid, start_mono, start_wall;
  stkr_map pos_map; /* thread id -> index in ends */
  uint64_t *ends;
  size_t n_ends, cap_ends;
  uint32_t max_stack, first_seq;
  uint64_t max_batch_seq;
  /* The highest Batch.seq of the writer's own batches (not recovered
   * ones) of the session in the segments read: a writer's pending drops
   * of a batch at or below it are counted (stkr_ringfile.h, "pending").
   * When only an earlier recovery's segment was read it is 0, and the
   * counted values apply: never too few. */
  uint64_t found_batch_seq;
  uint64_t written, dropped_write_error, segments_deleted;
  uint64_t recovered_events; /* in the recovered batches read */
  uint64_t ring_full, reentrant, other, c_ring_full, c_reentrant, c_other;
  uint64_t c_lost_bytes; /* Counters.recovery_lost_bytes, the largest */
  uint64_t c_exit;       /* Counters.dropped_exit, the largest */
  Stackrec__Batch *images;  /* latest batch of the session with images */
  size_t images_seg, cur_seg; /* the scan's index of its segment, of the
                                 one being read (0: the newest) */
  stkr_fmt_pballoc *images_alloc;
  char *cur_path;
  bool cur_match;
  /* A batch of the writer's own (not recovered) was seen: the scan goes
   * on past recovered segments until then, since each recovery that died
   * before removing its inputs left one, with where it ended. */
  bool writer_matched;
  /* Of those, one ended the session (Batch.last): with the session file's
   * STKR_SESS_ENDED_CLEAN, the proof that its files hold nothing to
   * recover (either alone could be a bit flipped). */
  bool writer_last;
  /* A recovered batch of the session was seen: an earlier recovery wrote
   * (some of) its segment and died before removing the files. Its first
   * batch counted the session file's drops; its Drops name the threads
   * whose rings' drops it counted (recovered_drops: thread id -> 1). */
  bool recovered_before;
  stkr_map recovered_drops;
  uint64_t deadline_ns; /* stkr__rc's: a batch past it ends the scan */
  /* Segments read that end inside a frame (the newest, the writer's death
   * mid-write(2); an older one, an earlier recovery's), and where that
   * frame starts (stkr__rc_cut_torn_tail); at most four. */
  char *torn[4];
  uint64_t torn_off[4];
  size_t n_torn;
  int err;
} stkr__rc_scan;
/* The seqs of pid's segment files in rc, newest first, into *out
 * (malloc'd, the caller frees; NULL when none) and *n. 0 or -ENOMEM. */
int stkr__rc_seqs_desc(const stkr__rc *rc, uint32_t pid, uint32_t **out,
                       size_t *n);
/* Read pid's segments newest first until one holds a batch of s->sid
 * written by its writer (stkr_recover_scan.c says why).
 * 0, or -errno (-ENOMEM). */
int stkr__rc_scan_segments(stkr__rc *rc, uint32_t pid, stkr__rc_scan *s);
void stkr__rc_scan_free(stkr__rc_scan *s);
/* stkr__rc_session's work once the session is known dead and its segments
 * scanned: its rings' records into a recovered segment, then its files
 * removed (stkr_recover_session.c). @return 0, or a hard -errno. */
int stkr__rc_write_session(stkr__rc *rc, const stkr__rc_sess *ss,
                           stkr__rc_scan *sc, const stkr__rc_file *rings,
                           size_t n);
/* Whether batch seq, whose pending drops a ring or session file holds,
 * reached the segments (common/stkr_ringfile.h, "pending"). */
static inline bool stkr__rc_written_pending(const stkr__rc_scan *sc,
                                            uint64_t seq) {
  return seq != 0 && sc->found_batch_seq >= seq;
}
/* A file's drops beyond what the writer's batches count: counted, or, when
 * the pending batch is `written`, its pending value (which only ever
 * raises what counts as counted). */
static inline uint64_t stkr__rc_uncounted(uint64_t drops, uint64_t counted,
                                          bool written, uint64_t pend) {
  return stkr__rc_beyond(drops,
                         written ? stkr__rc_max(pend, counted) : counted);
}

/* ---- known records (stkr_recover_known.c) ---- */
typedef struct stkr__rck_stack {
  uint64_t key[2];
  uint64_t *pcs;
  uint32_t site;
  uint16_t depth;
  bool truncated;
} stkr__rck_stack;

/* A payload of the session's segments, by key. */
typedef struct stkr__rck_pbytes {
  uint64_t key[2];
  uint8_t *bytes;
  uint16_t len;
} stkr__rck_pbytes;

/* One session's resolver of known records. Zero-initialize, set sid. */
typedef struct stkr__rck {
  uint64_t sid;
  /* per ring: the slot's key at the tail, and its stack since (a full
   * record of the ring; size != 0 marks it set) */
  uint64_t pre[STKR_RINGFILE_KNOWN_SLOTS][2];
  bool first_seen[STKR_RINGFILE_KNOWN_SLOTS];
  stkr_ring_rec cur[STKR_RINGFILE_KNOWN_SLOTS];
  /* the session's segments' stacks by key, loaded on first need */
  bool loaded, cur_match;
  char *cur_path;
  stkr__rck_stack *seg;
  size_t n_seg, cap_seg;
  stkr_index seg_ix; /* by key (stkr_recover_known.c's want_key) */
  /* The same for payloads (common/stkr_ringfile.h, "Payloads"): per ring,
   * each payload slot's key at the tail and its bytes since (pcur_len 0:
   * none yet); the segments' payloads by key (loaded with the stacks). */
  uint64_t ppre[STKR_RINGFILE_PKNOWN_SLOTS][2];
  bool pfirst_seen[STKR_RINGFILE_PKNOWN_SLOTS];
  const uint8_t *pcur[STKR_RINGFILE_PKNOWN_SLOTS];
  uint16_t pcur_len[STKR_RINGFILE_PKNOWN_SLOTS];
  stkr__rck_pbytes *pseg;
  size_t n_pseg, cap_pseg;
  stkr_index pseg_ix;
  /* The keys the session's rings may look up in its segments (every
   * slot's key at a ring's tail, stkr__rck_want_ring): only those are kept
   * from the segments, read newest first until all are found. Value 0:
   * wanted, 1: found. */
  stkr_map want_s, want_p;
  size_t n_want, n_found;
  uint64_t deadline_ns; /* stkr__rc's: a batch past it ends the reading */
} stkr__rck;

/* Before a ring's records: the slots' keys at its tail. data/len: the
 * whole ring file, whose header stkr_ring_parse accepted. */
void stkr__rck_ring_begin(stkr__rck *k, const uint8_t *data, uint64_t len);
/* Before any ring of the session is recovered, once per ring (same data):
 * add its slots' keys at the tail to what the segments are read for.
 * @return 0 or -ENOMEM. */
int stkr__rck_want_ring(stkr__rck *k, const uint8_t *data, uint64_t len);
/* A full record of the ring (r->pcs must stay valid for the ring). */
void stkr__rck_full(stkr__rck *k, const stkr_ring_rec *r);
/* The stack of known record r: 1 and *out (site_id, hash, pcs, depth,
 * flags) when found, 0 when not (its segment is gone), -ENOMEM. Reads the
 * session's segments of pid (rc->segs) on first need. */
int stkr__rck_resolve(stkr__rck *k, stkr__rc *rc, uint32_t pid,
                      const stkr_ring_rec *r, stkr_ring_rec *out);
/* A PAYLOAD_NEW record of the ring (r->payload must stay valid for the
 * ring): its bytes become its slot's. */
void stkr__rck_payload_new(stkr__rck *k, const stkr_ring_rec *r);
/* The bytes of PAYLOAD_KNOWN record r: 1 and *out (r->payload_len bytes,
 * valid until stkr__rck_free) when found, 0 when not (the segment that had
 * them is gone), -ENOMEM. */
int stkr__rck_payload(stkr__rck *k, stkr__rc *rc, uint32_t pid,
                      const stkr_ring_rec *r, const uint8_t **out);
void stkr__rck_free(stkr__rck *k);

#endif /* STKR__RECOVER_H */
