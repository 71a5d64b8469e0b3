/*
 * stkr_accounting.c: is a recording complete? Per recording session, what
 * the recorder says it attempted against what was read, dropped (by reason)
 * or recovered; which segments of the session's sequence are absent; how
 * the session ended. See "Accounting" in stkr_reader.h.
 *
 * The batch code (stkr_batch.c) calls in at each session start, header and
 * intact batch; the session's facts are checked, warned about (one
 * STKR_WARN_INCOMPLETE line each, naming file, session and counts) and
 * folded into stkr_process_info when the session ends. Nothing here grows
 * with the input: a fixed struct per stream.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_pid.h"
#include "common/stkr_ringfile.h"

#include "proto/stkr__reader.h"

/* a + b, saturated at UINT64_MAX; *ovf set when it overflowed. Counters come
 * from files: a value near 2^64 must not wrap into a small, plausible sum. */
static uint64_t stkr__add_sat(uint64_t a, uint64_t b, bool *ovf) {
  uint64_t s;

  if (__builtin_add_overflow(a, b, &s)) {
    *ovf = true;
    return UINT64_MAX;
  }
  return s;
}

static uint64_t stkr__max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* "session 0123456789abcdef" (Header.session_id), or "session 2" (its
 * ordinal in the process) for writers without session ids. */
static void stkr__session_name(const stkr__stream *st, char *buf,
                               size_t len) {
  if (st->acct.session_id != 0)
    snprintf(buf, len, "session %016llx",
             (unsigned long long)st->acct.session_id);
  else
    snprintf(buf, len, "session %u", (unsigned)st->info.sessions);
}

void stkr__acct_begin(stkr__stream *st) {
  memset(&st->acct, 0, sizeof(st->acct));
  st->acct.damaged_before = st->info.damaged_batches;
  st->acct.missing_before = st->info.missing_batches;
}

/* Segment files of st with a seq in (lo, hi), there: not missing. Those
 * that held no intact batch are reported as empty segments; those whose
 * batches were read without a Header of the session (their first batch,
 * which carries it, damaged) as damage (QA, session 46: "first segment 1
 * missing" of a segment read but for its first two batches). */
static uint32_t stkr__present_between(const stkr__stream *st, uint32_t lo,
                                      uint32_t hi) {
  uint32_t n = 0;
  size_t i;

  for (i = 0; i < st->n_files; i++)
    if (st->files[i].seq > lo && st->files[i].seq < hi &&
        !st->files[i].tombstone && !st->files[i].damaged_whole)
      n++;
  return n;
}

/* The other processes whose disk cap deleted a process's segments: the
 * first three pids met, and whether there were more. */
typedef struct {
  uint32_t pid[3];
  uint32_t n;  /* pids kept, at most 3 */
  bool more;   /* a fourth distinct pid was met */
} stkr__deleters;

static void stkr__deleters_add(stkr__deleters *d, uint32_t pid) {
  uint32_t i;

  for (i = 0; i < d->n; i++)
    if (d->pid[i] == pid)
      return;
  if (d->n < 3)
    d->pid[d->n++] = pid;
  else
    d->more = true;
}

/* "process 7", "processes 7 and 8", "processes 7, 8 and 9", "processes 7,
 * 8, 9 and others" into buf (d->n >= 1). */
static void stkr__deleters_name(const stkr__deleters *d, char *buf,
                                size_t len) {
  size_t o;
  uint32_t i;

  o = (size_t)snprintf(buf, len, "process%s %u", d->n > 1 ? "es" : "",
                       (unsigned)d->pid[0]);
  for (i = 1; i < d->n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%u",
                          i + 1 == d->n && !d->more ? " and " : ", ",
                          (unsigned)d->pid[i]);
  if (d->more && o < len)
    snprintf(buf + o, len - o, " and others");
}

/* Segments of st the disk cap deleted, as its tombstones say (one each,
 * or a run: stkr__file.tomb_lo..tomb_hi), with a seq in (lo, hi): how many, how
 * many of them this process's own cap left (*own), and the other
 * processes whose caps left the others (*others). */
static uint32_t stkr__tombs_between(stkr__stream *st, uint32_t lo,
                                    uint32_t hi, uint32_t *own,
                                    stkr__deleters *others) {
  uint32_t n = 0;
  size_t i;

  *own = 0;
  for (i = 0; i < st->n_files; i++) {
    stkr__file *f = &st->files[i];
    uint32_t a = f->tomb_lo > lo ? f->tomb_lo : lo + 1;
    uint32_t b = f->tomb_hi < hi ? f->tomb_hi : hi - 1, k;
    if (!f->tombstone || hi == 0 || a > b)
      continue;
    k = b - a + 1;
    n += k;
    f->tomb_counted += k;
    if (f->cap_deleted_by == st->info.pid)
      *own += k;
    else
      stkr__deleters_add(others, f->cap_deleted_by);
  }
  return n;
}

void stkr__acct_header(stkr_reader *r, stkr__stream *st,
                       const Stackrec__Header *h, const char *path,
                       uint64_t off) {
  stkr__session_acct *a = &st->acct;

  if (h->dir_recreated) {
    char sid[48];

    if (a->min_seg == 0) /* the session's first header: name it by it */
      a->session_id = h->session_id;
    stkr__session_name(st, sid, sizeof(sid));
    st->info.dir_recreated++;
    stkr__warn(r, STKR_WARN_INCOMPLETE, path, (int64_t)off, st->info.pid,
               "process %u %s: the recording directory was "
               "deleted and recreated before this segment (%u): what the "
               "process wrote before was lost with it",
               (unsigned)st->info.pid, sid, (unsigned)h->segment_seq);
  }
  if (a->min_seg == 0) { /* the session's first header */
    a->session_id = h->session_id;
    a->first_seq = h->session_first_seq;
    a->min_seg = a->last_seg = h->segment_seq;
    st->info.session_id = h->session_id;
    return;
  }
  if (h->segment_seq > a->last_seg + 1) {
    uint32_t gap = h->segment_seq - a->last_seg - 1;

    uint32_t present = stkr__present_between(st, a->last_seg, h->segment_seq);
    gap = gap > present ? gap - present : 0; /* a seq listed twice */
    if (gap > 0) {
      char sid[48];

      stkr__session_name(st, sid, sizeof(sid));
      a->gap_middle += gap;
      stkr__warn(r, STKR_WARN_INCOMPLETE, path, (int64_t)off, st->info.pid,
                 "process %u %s: %u segment%s (%u..%u) missing "
                 "before this one",
                 (unsigned)st->info.pid, sid, (unsigned)gap, gap == 1 ? "" : "s",
                 (unsigned)a->last_seg + 1, (unsigned)h->segment_seq - 1);
    }
  }
  if (h->segment_seq > a->last_seg)
    a->last_seg = h->segment_seq;
  if (h->segment_seq < a->min_seg)
    a->min_seg = h->segment_seq;
}

void stkr__acct_batch(stkr__stream *st, const Stackrec__Batch *b,
                      size_t file_index) {
  stkr__session_acct *a = &st->acct;
  uint64_t n = b->events ? b->events->n_ts_delta_ns : 0;
  bool ovf = false;
  size_t i;

  st->files[file_index].had_batch = true;
  if (a->first_file == 0) {
    a->first_file = file_index + 1;
    /* A recovered batch counts too: its Counters.written is what the dead
     * writer wrote, all before it (recovery writes after the writer's
     * last segment), so when it is the first batch read the cap took the
     * rest (QA, session 26: they read "neither read nor counted"). */
    a->first_counted = b->counters != NULL &&
                       st->info.damaged_batches == a->damaged_before;
    a->first_written = a->first_counted ? b->counters->written : 0;
    a->first_write_errors =
        a->first_counted ? b->counters->dropped_write_error : 0;
  }
  a->last_file = file_index + 1;
  if (b->recovered) {
    st->files[file_index].had_recovered = true;
    a->recovered += n;
    a->recovered_batches++;
  } else {
    a->read += n;
  }
  for (i = 0; i < b->n_drops; i++) {
    a->drops_rf = stkr__add_sat(a->drops_rf, b->drops[i]->ring_full, &ovf);
    a->drops_re = stkr__add_sat(a->drops_re, b->drops[i]->reentrant, &ovf);
    a->drops_other = stkr__add_sat(a->drops_other, b->drops[i]->other, &ovf);
  }
  if (ovf)
    st->info.counters_overflow = true;
  if (b->counters != NULL) {
    const Stackrec__Counters *c = b->counters;

    a->have_counters = true;
    a->c.attempted = c->attempted;
    a->c.written = c->written;
    a->c.dropped_write_error = c->dropped_write_error;
    a->c.segments_deleted = c->segments_deleted;
    a->c.dropped_ring_full = c->dropped_ring_full;
    a->c.dropped_reentrant = c->dropped_reentrant;
    a->c.dropped_other = c->dropped_other;
    a->c.dropped_exit = c->dropped_exit;
    a->c.recovered = c->recovered;
    a->c.recovery_lost_bytes = c->recovery_lost_bytes;
    a->c.memory_rings_lost = c->memory_rings_lost;
    /* The largest the session said: a recovered batch carries the
     * session file's count, which a second recovery writes again. */
    a->c.marks_dropped = stkr__max(a->c.marks_dropped, c->marks_dropped);
  }
}

/* The session's drops by reason (see stkr_process_info). */
static void stkr__sess_drops(const stkr__session_acct *a, uint64_t d[5]) {
  d[0] = stkr__max(a->drops_rf, a->c.dropped_ring_full);
  d[1] = stkr__max(a->drops_re, a->c.dropped_reentrant);
  d[2] = stkr__max(a->drops_other, a->c.dropped_other);
  d[3] = a->c.dropped_write_error;
  d[4] = a->c.dropped_exit;
}

/* The counters of stkr_process_info that sum over a pid's sessions, in
 * the order stkr__publish gives the current session's: ended sessions'
 * totals are banked (st->banked) and the current one's added on top, so
 * that a later session's Counters, which start from 0, never replace an
 * earlier one's. The first five are the drops by reason (as d[]). */
static const size_t g_banked[STKR__BANKED_COUNTERS] = {
    offsetof(stkr_process_info, drops_ring_full),
    offsetof(stkr_process_info, drops_reentrant),
    offsetof(stkr_process_info, drops_other),
    offsetof(stkr_process_info, drops_write_error),
    offsetof(stkr_process_info, drops_exit),
    offsetof(stkr_process_info, attempted),
    offsetof(stkr_process_info, segments_deleted),
    offsetof(stkr_process_info, counters_recovered),
    offsetof(stkr_process_info, marks_dropped),
};

static uint64_t *stkr__banked_field(stkr_process_info *in, size_t i) {
  return (uint64_t *)(void *)((char *)in + g_banked[i]);
}

/* st->info = banked sessions + the current one. @return the overflow. */
static bool stkr__publish(stkr__stream *st) {
  stkr_process_info *in = &st->info;
  const stkr__session_acct *a = &st->acct;
  uint64_t cur[STKR__BANKED_COUNTERS];
  bool ovf = in->counters_overflow;

  stkr__sess_drops(a, cur); /* cur[0..4] */
  cur[5] = a->c.attempted;
  cur[6] = a->c.segments_deleted;
  cur[7] = a->c.recovered;
  cur[8] = a->c.marks_dropped;
  in->drops = 0;
  for (size_t i = 0; i < STKR__BANKED_COUNTERS; i++) {
    uint64_t *f = stkr__banked_field(in, i);
    *f = stkr__add_sat(st->banked[i], cur[i], &ovf);
    if (i < 5) in->drops = stkr__add_sat(in->drops, *f, &ovf);
  }
  in->counters_overflow = ovf;
  return ovf;
}

void stkr__acct_publish(stkr__stream *st) { (void)stkr__publish(st); }

/* Does the session's ring-file set still exist next to its segment? A
 * bounded exit (stkr_shutdown_for_exit) may end a session cleanly while
 * events it accepted are still in its ring files: they are pending
 * recovery (`stackrec recover`), not lost, so the counters' gap is then
 * incomplete, not damaged. */
static bool stkr__sess_has_rings(const char *seg_path, uint32_t pid,
                                 uint64_t session_id) {
  char name[STKR_RINGFILE_NAME_MAX], path[4096];
  const char *slash = seg_path ? strrchr(seg_path, '/') : NULL;
  int dir_len = slash ? (int)(slash - seg_path) : 1;
  if (session_id == 0) return false;
  stkr_ringfile_name(name, pid, session_id, 0);
  if (snprintf(path, sizeof path, "%.*s/%s", dir_len, slash ? seg_path : ".",
               name) >= (int)sizeof path)
    return false;
  return access(path, F_OK) == 0;
}

static const char *stkr__sess_path(const stkr__stream *st, size_t file1) {
  if (file1 > 0 && file1 <= st->n_files)
    return st->files[file1 - 1].path;
  return st->n_files ? st->files[0].path : st->dir;
}

/* The session's absent first segments: (deleted by the cap, missing), and
 * the pid of another process whose cap deleted some (0: none). Deleted:
 * the tombstones in the gap, and of the files that are gone altogether as
 * many as the session's own counter says its cap deleted beyond its
 * tombstones (recordings from before tombstones: the disk cap deletes the
 * oldest segments, so the first ones). */
static void stkr__first_gap(stkr__stream *st, uint32_t *deleted,
                            uint32_t *missing, uint32_t *tombstoned,
                            stkr__deleters *by_others, bool *by_self) {
  const stkr__session_acct *a = &st->acct;
  uint32_t absent = 0, tombs = 0, own = 0;
  uint64_t own_left;

  *deleted = *missing = 0;
  if (a->first_seq != 0 && a->min_seg > a->first_seq) {
    uint32_t empty = stkr__present_between(st, a->first_seq - 1, a->min_seg);
    absent = a->min_seg - a->first_seq;
    tombs = stkr__tombs_between(st, a->first_seq - 1, a->min_seg, &own,
                                by_others);
    /* Runs say no more than the gap holds (a hostile one might). */
    tombs = tombs < absent ? tombs : absent;
    own = own < tombs ? own : tombs;
    /* Saturating: a seq listed twice (one directory added twice while
     * the cap renamed over a segment) must not wrap. */
    absent = absent > empty ? absent - empty : 0;
    absent = absent > tombs ? absent - tombs : 0;
  }
  own_left = a->c.segments_deleted > own ? a->c.segments_deleted - own : 0;
  *deleted = tombs + (own_left < absent ? (uint32_t)own_left : absent);
  *missing = tombs + absent - *deleted;
  *tombstoned = tombs;
  *by_self = *deleted > tombs - own;
}

/* Warn once per stream when the drop counters overflow when added up. */
static void stkr__warn_overflow(stkr_reader *r, stkr__stream *st,
                                const char *sid) {
  const stkr_process_info *in = &st->info;

  if (!stkr__publish(st))
    return;
  stkr__warn_once(r, st, STKR__WARNED_OVERFLOW, STKR_WARN_DAMAGED,
                  stkr__sess_path(st, st->acct.last_file), -1,
                  "process %u %s: drop counters overflow 64 bits "
                  "when added up (ring full %llu, reentrant %llu, other "
                  "%llu, write error %llu, exit %llu): damaged counters",
                  (unsigned)in->pid, sid,
                  (unsigned long long)in->drops_ring_full,
                  (unsigned long long)in->drops_reentrant,
                  (unsigned long long)in->drops_other,
                  (unsigned long long)in->drops_write_error,
                  (unsigned long long)in->drops_exit);
}

/* One warning about the session's first segments named in l (n of them):
 * "process P S: <first>segment(s) <l> <why>". */
static void stkr__warn_first(stkr_reader *r, const stkr__stream *st,
                             const char *sid, const char *first, uint32_t n,
                             const stkr__seq_list *l, const char *why) {
  char gap[32]; /* when l names none of them (a gap too long to walk) */

  snprintf(gap, sizeof gap, "%u..%u", (unsigned)st->acct.first_seq,
           (unsigned)st->acct.min_seg - 1);
  if (l->text[0] != '\0')
    stkr__warn(r, STKR_WARN_INCOMPLETE,
               stkr__sess_path(st, st->acct.first_file), -1, st->info.pid,
               "process %u %s: %ssegment%s %s %s", (unsigned)st->info.pid,
               sid, first, n == 1 ? "" : "s", l->text, why);
  else
    stkr__warn(r, STKR_WARN_INCOMPLETE,
               stkr__sess_path(st, st->acct.first_file), -1, st->info.pid,
               "process %u %s: %s%u segment%s among %s %s",
               (unsigned)st->info.pid, sid, first, (unsigned)n,
               n == 1 ? "" : "s", gap, why);
}

/* Name the session's absent first segments and count them into the
 * process. @return how many are absent (deleted by the cap or missing),
 * *by_cap of them by the cap, when the cap took all of them (else 0). */
static uint32_t stkr__account_first_gap(stkr_reader *r, stkr__stream *st,
                                        const char *sid, uint32_t *by_cap) {
  const stkr__session_acct *a = &st->acct;
  stkr_process_info *in = &st->info;
  stkr__deleters by_others = {{0}, 0, false};
  uint32_t cap_deleted, first_missing, tombs;
  stkr__seq_list dl, ml;
  bool by_self;
  char why[160], whom[96];

  stkr__first_gap(st, &cap_deleted, &first_missing, &tombs, &by_others,
                  &by_self);
  /* Whose writes made the cap delete them (it is the directory's). */
  if (by_others.n > 0) {
    stkr__deleters_name(&by_others, whom, sizeof whom);
    snprintf(why, sizeof why, "deleted by the disk cap, when %s%s wrote",
             by_self ? "this process and " : "", whom);
  }
  dl = (stkr__seq_list)STKR__SEQ_LIST_INIT(cap_deleted);
  ml = (stkr__seq_list)STKR__SEQ_LIST_INIT(first_missing);
  if (cap_deleted || first_missing)
    stkr__first_gap_seqs(st, cap_deleted - tombs, &dl, &ml);
  if (cap_deleted)
    stkr__warn_first(r, st, sid, "", cap_deleted, &dl,
                     by_others.n > 0 ? why : "deleted by the disk cap");
  if (first_missing) {
    snprintf(why, sizeof why, "missing (the session starts at segment %u)",
             (unsigned)a->first_seq);
    stkr__warn_first(r, st, sid, "first ", first_missing, &ml, why);
  }
  in->segments_cap_deleted += cap_deleted;
  in->segments_missing += first_missing + a->gap_middle;
  *by_cap = first_missing == 0 ? cap_deleted : 0;
  return cap_deleted + first_missing;
}

/* The session's sums for a warning: "(attempted A, written W, dropped D,
 * recovered R)", or with rel "attempted A <rel> written W + dropped D +
 * recovered R". */
static void stkr__acct_sums(char *buf, size_t n, const stkr__session_acct *a,
                            uint64_t dropped, const char *rel) {
  if (rel)
    snprintf(buf, n, "attempted %llu %s written %llu + dropped %llu + "
             "recovered %llu",
             (unsigned long long)a->c.attempted, rel,
             (unsigned long long)a->read, (unsigned long long)dropped,
             (unsigned long long)a->recovered);
  else
    snprintf(buf, n, "(attempted %llu, written %llu, dropped %llu, "
             "recovered %llu)",
             (unsigned long long)a->c.attempted, (unsigned long long)a->read,
             (unsigned long long)dropped, (unsigned long long)a->recovered);
}

/* Is the session's writer still recording? Its process is alive and its
 * session file is in the recording's directory (a clean end removes it, a
 * dead writer's stays: recovery removes it with the pid gone). No lock is
 * taken to ask: even a brief one would make a concurrent recovery skip a
 * dead session, or a writer re-taking its lock think it lost it (found in
 * review). A pid reused by another process since its writer died reads as
 * still recording: only the wording of an incomplete finding. */
static bool stkr__session_live(const stkr__stream *st, uint64_t session_id) {
  char name[STKR_RINGFILE_NAME_MAX], path[4096];

  if (session_id == 0 || st->dir == NULL || !stkr_pid_alive(st->info.pid))
    return false;
  stkr_ringfile_name(name, st->info.pid, session_id, 0);
  if ((size_t)snprintf(path, sizeof path, "%s/%s", st->dir, name) >= sizeof path)
    return false;
  return access(path, F_OK) == 0;
}

/* A session that did not end cleanly (and that recovery did not complete):
 * count it and say what is known of it. */
static void stkr__warn_unclean(stkr_reader *r, stkr__stream *st,
                               const char *sid) {
  const stkr__session_acct *a = &st->acct;
  stkr_process_info *in = &st->info;
  char attempted[64] = "no counters read";

  if (a->have_counters)
    snprintf(attempted, sizeof(attempted),
             "%llu attempted by its last counters",
             (unsigned long long)a->c.attempted);
  in->unclean_sessions++;
  bool live = stkr__session_live(st, a->session_id);
  in->live_sessions += live;
  stkr__warn(r, STKR_WARN_INCOMPLETE, stkr__sess_path(st, a->last_file), -1,
             in->pid, "process %u %s: %s; %llu events read, %s",
             (unsigned)in->pid, sid,
             live ? "still recording (the process is alive and its session "
                    "file is there): not ended yet"
             /* Its last file ends in a batch cut off mid-write: that batch
              * may be the last one, so "killed" alone would guess (QA,
              * session 46: a cut final batch read as a killed process). */
             : in->live_tail
                 ? "no clean end read: its last batch was cut off mid-write "
                   "(the process died while writing it, the disk filled, or "
                   "the file was cut since), or the process was killed, "
                   "crashed or called _exit before it"
                 : "no clean end (no last batch): the process was killed, "
                   "crashed or called _exit, or its last segment is missing",
             (unsigned long long)(a->read + a->recovered), attempted);
}

/* Compare the session's last counters with what was read, dropped and
 * recovered (`accounted`): events attempted but in no segment are counted
 * as unaccounted; sums that cannot be right as mismatches. `whole`: nothing
 * of the session is known to be missing, so the sums must agree exactly. */
static void stkr__acct_balance(stkr_reader *r, stkr__stream *st,
                               const char *sid, uint64_t dropped,
                               uint64_t accounted, bool whole) {
  const stkr__session_acct *a = &st->acct;
  stkr_process_info *in = &st->info;
  const char *path = stkr__sess_path(st, a->last_file);
  uint32_t pid = in->pid;
  char sums[160];

  if (a->c.attempted > accounted) {
    unsigned long long lost = a->c.attempted - accounted;

    in->unaccounted += lost;
    if (whole && stkr__sess_has_rings(path, pid, a->session_id)) {
      stkr__acct_sums(sums, sizeof(sums), a, dropped, NULL);
      stkr__warn(r, STKR_WARN_INCOMPLETE, path, -1, pid,
                 "process %u %s: %llu events attempted are in no segment: "
                 "its exit left them in its ring files %s; "
                 "'stackrec recover' writes them out",
                 (unsigned)pid, sid, lost, sums);
    } else if (whole) {
      in->accounting_mismatches++;
      stkr__acct_sums(sums, sizeof(sums), a, dropped, "!=");
      stkr__warn(r, STKR_WARN_INCONSISTENT, path, -1, pid,
                 "process %u %s: accounting does not add up: %s",
                 (unsigned)pid, sid, sums);
    } else {
      stkr__acct_sums(sums, sizeof(sums), a, dropped, NULL);
      stkr__warn(r, STKR_WARN_INCOMPLETE, path, -1, pid,
                 "process %u %s: %llu events attempted but "
                 "neither read nor counted as dropped %s",
                 (unsigned)pid, sid, lost, sums);
    }
  } else if (a->c.attempted < accounted && a->recovered_batches == 0) {
    /* More read or dropped than ever attempted: the counters (or the
     * batches) are wrong. Recovery may legitimately read events pushed
     * after the dead writer's last counters, so not then. */
    in->accounting_mismatches++;
    stkr__acct_sums(sums, sizeof(sums), a, dropped, "<");
    stkr__warn(r, STKR_WARN_INCONSISTENT, path, -1, pid,
               "process %u %s: accounting does not add up: %s",
               (unsigned)pid, sid, sums);
  }
}

void stkr__acct_end(stkr_reader *r, stkr__stream *st) {
  stkr__session_acct *a = &st->acct;
  stkr_process_info *in = &st->info;
  char sid[48];
  uint32_t absent_first, by_cap;
  uint64_t d[5], dropped = 0, accounted;
  bool ovf = false, whole, recovered_end;
  int i;

  if (a->first_file == 0) /* no intact batch: nothing to account */
    return;
  stkr__session_name(st, sid, sizeof(sid));
  stkr__warn_overflow(r, st, sid);
  if (a->have_counters && a->c.recovery_lost_bytes > 0) {
    /* QA (session 25): the recovered batch's counters add up without the
     * records recovery could not read, so the session passed for intact
     * and complete. Damage: counted as one batch's worth. */
    in->damaged_batches++;
    stkr__warn(r, STKR_WARN_DAMAGED,
               st->files[a->last_file - 1].path, -1, in->pid,
               "process %u %s: recovery found %llu bytes of the dead "
               "writer's ring records damaged; the events in them are lost "
               "(how many is not known)",
               (unsigned)in->pid, sid,
               (unsigned long long)a->c.recovery_lost_bytes);
  }
  if (a->have_counters && a->c.memory_rings_lost > 0) {
    /* QA (session 31): a writer killed on a full disk had a thread's ring
     * in memory; its unflushed events vanished and the counters added up
     * without them. */
    in->memory_rings_lost += a->c.memory_rings_lost;
    stkr__warn(r, STKR_WARN_INCOMPLETE,
               st->files[a->last_file - 1].path, -1, in->pid,
               "process %u %s: it died with %u thread%s recording into "
               "memory (no ring file could be made for %s): what %s not "
               "flushed is lost, how many events is not known",
               (unsigned)in->pid, sid, (unsigned)a->c.memory_rings_lost,
               a->c.memory_rings_lost == 1 ? "" : "s",
               a->c.memory_rings_lost == 1 ? "it" : "them",
               a->c.memory_rings_lost == 1 ? "it had" : "they had");
  }
  absent_first = stkr__account_first_gap(r, st, sid, &by_cap);

  stkr__sess_drops(a, d);
  for (i = 0; i < 5; i++)
    dropped = stkr__add_sat(dropped, d[i], &ovf);
  accounted = stkr__add_sat(stkr__add_sat(a->read, dropped, &ovf),
                            a->recovered, &ovf);
  /* The cap took the session's first segments, and nothing else of it is
   * absent: the batches numbered before the first one read, and the
   * events that batch's Counters say were written before it, are the
   * cap's, not "missing" or "neither read nor counted" (QA, session 23:
   * one deletion told three ways). Only when that batch is the first thing
   * after the deleted range: in the segment right after it, no damaged
   * frame before it (review: else damage or a segment without a batch
   * would pass for the cap's). Failed writes keep their numbers: with any
   * before it, the gap in numbers is not all the cap's; it stays
   * "missing". */
  if (by_cap > 0 && a->first_counted && a->min_seg == a->first_seq + by_cap) {
    if (a->first_write_errors == 0) {
      in->missing_batches -= a->lead_missing;
      in->cap_deleted_batches += a->lead_missing;
    }
    in->cap_deleted_events += a->first_written;
    accounted = stkr__add_sat(accounted, a->first_written, &ovf);
    absent_first -= by_cap; /* known: the counters must add up */
  }
  in->written += a->read;
  in->recovered += a->recovered;
  in->recovered_batches += a->recovered_batches;
  /* Nothing of the session is known to be missing: its counters must then
   * add up exactly to what was read. */
  whole = st->sess_clean && absent_first + a->gap_middle == 0 &&
          in->damaged_batches == a->damaged_before &&
          in->missing_batches == a->missing_before;
  /* A writer that died, whose unflushed events recovery wrote out: as
   * complete as a clean end when everything it attempted is accounted. */
  recovered_end = !st->sess_clean && a->recovered_batches > 0 &&
                  a->have_counters && !ovf && accounted >= a->c.attempted;
  if (!st->sess_clean && !recovered_end)
    stkr__warn_unclean(r, st, sid);
  if (a->have_counters && !ovf)
    stkr__acct_balance(r, st, sid, dropped, accounted, whole);

  /* Bank the session. */
  for (size_t i = 0; i < STKR__BANKED_COUNTERS; i++)
    st->banked[i] = *stkr__banked_field(in, i);
  stkr__acct_begin(st);
}

/* Did recovery write a later segment of this pid? Then an earlier segment
 * without any batch is the dead writer's: it opened the file at start and
 * died before its first flush, and its ring files (what it had accepted)
 * were recovered into that later segment. Nothing is missing. */
static bool recovered_after(const stkr__stream *st, uint32_t seq) {
  size_t i;

  for (i = 0; i < st->n_files; i++)
    if (st->files[i].had_recovered && st->files[i].seq > seq)
      return true;
  return false;
}

/* Tombstones no session's first segments counted (a whole earlier
 * session, or every data file of the process, taken by the cap): counted
 * and told here, so that no deletion goes unsaid. */
static void stkr__acct_stray_tombs(stkr_reader *r, stkr__stream *st) {
  stkr__deleters by = {{0}, 0, false};
  uint64_t n = 0;
  uint32_t lo = UINT32_MAX, hi = 0;
  const char *path = NULL;
  char whom[96];
  size_t i;

  for (i = 0; i < st->n_files; i++) {
    const stkr__file *f = &st->files[i];
    uint64_t says = f->tomb_lo <= f->tomb_hi
                        ? (uint64_t)f->tomb_hi - f->tomb_lo + 1 : 0;
    if (!f->tombstone || f->tomb_counted >= says)
      continue;
    n += says - f->tomb_counted;
    lo = f->tomb_lo < lo ? f->tomb_lo : lo;
    hi = f->tomb_hi > hi ? f->tomb_hi : hi;
    stkr__deleters_add(&by, f->cap_deleted_by);
    path = path ? path : f->path;
  }
  if (n == 0)
    return;
  /* Saturating: hostile runs may claim more seqs than a counter holds. */
  if (n > UINT32_MAX - st->info.segments_cap_deleted)
    n = UINT32_MAX - st->info.segments_cap_deleted;
  st->info.segments_cap_deleted += (uint32_t)n;
  stkr__deleters_name(&by, whom, sizeof whom);
  stkr__warn(r, STKR_WARN_INCOMPLETE, path, -1, st->info.pid,
             "process %u: %u segment%s among %u..%u deleted by the disk "
             "cap, when %s wrote",
             (unsigned)st->info.pid, (unsigned)n, n == 1 ? "" : "s",
             (unsigned)lo, (unsigned)hi, whom);
}

void stkr__acct_stream_done(stkr_reader *r, stkr__stream *st) {
  stkr_process_info *in = &st->info;
  size_t i;

  stkr__acct_end(r, st);
  stkr__acct_stray_tombs(r, st);
  for (i = 0; i < st->n_files; i++) {
    const stkr__file *f = &st->files[i];

    /* An unreadable, damaged_whole or not_zstd one was reported as damage
     * (stkr__unreadable, stkr__misnamed, stkr__tombstone_check,
     * stkr_frames.c); a tombstone is counted with its session's first
     * segments. */
    if (f->had_batch || f->unreadable || f->damaged_whole || f->not_zstd ||
        f->tombstone || recovered_after(st, f->seq))
      continue;
    in->empty_segments++;
    stkr__warn(r, STKR_WARN_INCOMPLETE, f->path, -1, in->pid,
               "process %u: segment %u holds no intact batch: its writer "
               "ended before its first flush completed, and whatever it "
               "recorded is lost",
               (unsigned)in->pid, (unsigned)f->seq);
  }
  in->incomplete = in->drops || in->unclean_sessions ||
                   in->segments_missing || in->segments_deleted ||
                   in->segments_cap_deleted ||
                   in->dir_recreated || in->empty_segments ||
                   in->unreadable_segments || in->misnamed_segments ||
                   in->missing_batches || in->unaccounted ||
                   in->memory_rings_lost || in->stacks_lost;
}

/* A gap of `gap` batches in a session's numbering, with `damaged` damaged
 * frames read across it: the gap's batches are the damage's (as damaged,
 * at least the frames counted), or missing when there was none.
 * Saturating: Batch.seq is the file's word (a hostile 2^63). */
static void stkr__count_gap(stkr_process_info *in, uint64_t gap,
                            uint64_t damaged) {
  uint64_t *n = damaged == 0 ? &in->missing_batches : &in->damaged_batches;
  uint64_t add = damaged == 0 ? gap : gap > damaged ? gap - damaged : 0;
  *n = add > UINT64_MAX - *n ? UINT64_MAX : *n + add;
}

void stkr__acct_counters(stkr__stream *st, const Stackrec__Batch *b,
                         size_t file_index) {
  stkr_process_info *in = &st->info;

  if (b->clock != NULL && b->clock->wall_ns != 0) {
    st->have_sync = true;
    st->sync_mono = b->clock->mono_ns;
    st->sync_wall = b->clock->wall_ns;
  }
  stkr__acct_batch(st, b, file_index);
  stkr__acct_publish(st);
  if (st->have_batch_seq && b->seq > st->last_batch_seq + 1) {
    /* The batches between this one and the session's last intact one.
     * Damage read since: they are its stretch's, which can span several
     * of them (QA, session 44: "1 batch lost" and "2 missing" for one
     * stretch over two frames; one damaged batch was also one missing). */
    stkr__count_gap(in, b->seq - st->last_batch_seq - 1,
                    in->damaged_batches - st->damaged_at_batch);
  } else if (!st->have_batch_seq && b->seq > 1 &&
             in->damaged_batches > st->damaged_at_file &&
             st->damaged_at_file >= st->damaged_at_batch) {
    /* The session's first batch read, after damage earlier in this very
     * file (a segment holds one session's batches): its first batches
     * are that damage's, as above (QA, session 46: the first two frames
     * of a segment read as 1 damaged and 2 missing). */
    stkr__count_gap(in, b->seq - 1, in->damaged_batches - st->damaged_at_file);
    if (in->batches == 0)
      in->head_lost = true;
  } else if (!st->have_batch_seq && b->seq > 1) {
    /* Batches are numbered from 1 in each session: a session whose first
     * batch read is numbered 4 lost its first three (a deleted or emptied
     * first segment, or the disk cap). */
    in->missing_batches += b->seq - 1;
    st->acct.lead_missing = b->seq - 1;
    /* The process's first batches, read before any other: its Header
     * (whether it was forked, and from whom) and any mark in them are
     * gone, as with a first segment gone (a damaged first frame, a failed
     * first write; review, session 33: a forked child's events counted
     * "before consent"). Before this batch's events are delivered. */
    if (in->batches == 0)
      in->head_lost = true;
  }
  if (b->seq != 0 && (!st->have_batch_seq || b->seq > st->last_batch_seq)) {
    st->have_batch_seq = true;
    st->last_batch_seq = b->seq;
  }
  st->damaged_at_batch = in->damaged_batches;
  if (b->last) {
    st->sess_clean = true;
    in->end_ts_ns = 0;
    if (b->clock != NULL && b->clock->mono_ns != 0)
      in->end_ts_ns = in->instance_shift_ns == 0
                          ? b->clock->mono_ns
                          : stkr_clock_add(b->clock->mono_ns,
                                           in->instance_shift_ns);
  }
  in->clean_end = st->sess_clean && !st->unclean_before;
  in->batches++;
}
