/*
 * stkr_recover.h: recovering the ring files of recorders that died.
 *
 * A recording process keeps its unflushed events in ring files mapped
 * MAP_SHARED in the recording directory (layout: common/stkr_ringfile.h).
 * When it dies (SIGKILL, a crash, jetsam), those files hold every event it
 * accepted but had not written. stkr_recover_dir() finds the sessions whose
 * writer is gone (their session file's flock can be taken), reads their
 * ring files, skips the records the segments already hold (the ring's own
 * tail, and the largest Batch.ring_pos.end per thread in the session's
 * newest segment: the only batch that can be written but not released),
 * and appends one segment stackrec-<pid>-<seq>.zst per session (the next
 * free <seq> of that pid) whose batches have Batch.recovered = true and the
 * dead session's Header (same session_id, pid, start times); with no event
 * left, one such batch without events, for its counters (the session's
 * final accounting: verify then finds it complete). Stacks carry
 * raw PCs (no frames): `stackrec symbolize` resolves them. Then, once the
 * segment is fsync'ed, it deletes the ring and session files. A frame cut
 * short at the end of the pid's newest segment (its writer died inside the
 * write: SIGKILL, or an _exit while the flush worker was past its exit
 * budget) is cut off then too, when no process of that pid lives: its
 * events were never released from the rings, so they are in the recovered
 * segment, and the fragment would otherwise read as damage mid-recording.
 *
 * Callers: stkr_init() on its directory (the embedded case: the next run
 * recovers the previous one), `stackrec record` after the program exited,
 * and `stackrec recover DIR`.
 *
 * Ring and session files are hostile input: every field is checked against
 * the file's size; a record that does not fit (torn by the crash, or
 * damaged) ends that ring's recovery, and the rest of the ring counts as
 * lost bytes. Memory is bounded by the ring sizes (at most
 * STKR_RINGFILE_MAX_RING each, checked against the file's real size) and by
 * the batch limits of stkr_format.h.
 *
 * Thread-safety: reentrant; concurrent recoveries of one directory are
 * serialized by the session file's lock (one recovers, the others see a
 * live session and skip it).
 */
#ifndef STKR_RECOVER_H
#define STKR_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stkr_recover_opts {
  /* Count only: write nothing, delete nothing, take no lock for longer
   * than the liveness test. Works on read-only directories. */
  bool dry_run;
  /* Recover at most this many dead sessions (0: all). Bounds the work of
   * an embedded stkr_init(). */
  unsigned max_sessions;
  /* Stop after about this many milliseconds (0: no limit), checked between
   * batches read and rings recovered: a session cut short is written
   * nothing, its files stay as they were and it counts in
   * sessions_deferred. It is also marked (DIR/.stackrec-cache/deferred-
   * PID-SESSION), and later runs with a budget skip it (counted deferred)
   * rather than spend their budget on it again: `stackrec recover` (no
   * budget) recovers it and removes the mark. Bounds the time an embedded
   * stkr_init() spends before the app goes on, whatever the size of the
   * dead sessions' segments. */
  unsigned budget_ms;
  /* Receives each problem as one line naming the file (and offset), e.g.
   * "DIR/stackrec-12-….ring: offset 8192: record size 7 is not a multiple
   * of 8; 4096 bytes lost". NULL: print "stackrec: " + line to stderr. */
  void (*message)(void *arg, const char *line);
  void *message_arg;
  /* Non-zero: recover this session only (Header.session_id), budget_ms
   * and max_sessions left aside for it; every other file is left alone,
   * uncounted. For a process that goes on after an exit left its own
   * session's events in the rings (flush/worker.c): written before its
   * next session's first segment, not after it, where a reader would
   * find the session in two pieces. Since session 37. */
  uint64_t only_session;
  /* Non-zero: sessions of this pid only, every other file left alone,
   * uncounted. For a process's start under `stackrec record`, which
   * recovers the directory itself: a dead session of its own, recycled,
   * pid is recovered before its own first segment, and the others'
   * sessions, live or dead, cost it nothing. Since session 44. */
  uint32_t only_pid;
} stkr_recover_opts;

typedef struct stkr_recover_stats {
  uint64_t sessions_live;      /* writer alive (lock held; or, past the
                                  budget, its pid alive): left alone */
  uint64_t sessions_dead;      /* writer gone: recovered, or tried */
  /* Sessions whose writer ended with everything written but could not
   * remove its files (it dropped its privileges after its start): not
   * dead, nothing to recover; removed (dry run: would be). */
  uint64_t sessions_ended_clean;
  uint64_t sessions_recovered; /* written out (dry run: would be) */
  uint64_t sessions_failed;    /* could not be written out: files kept */
  uint64_t sessions_deferred;  /* cut short by budget_ms: files kept, and
                                  sessions of a gone pid not looked at
                                  once it ran out */
  uint64_t rings;              /* ring files read */
  uint64_t events;             /* events recovered (dry run: found) */
  uint64_t duplicates;         /* records skipped: already in a segment */
  uint64_t damaged_rings;      /* rings whose recovery a bad record ended */
  uint64_t lost_bytes;         /* ring bytes after such a record */
  uint64_t orphans;            /* ring/session files that could not be
                                  used (bad header, no session file) */
  /* Ring files without their session file that hold no record (a whole
   * header, head == tail): a thread handed a ring while its session closed,
   * too late for the close to take it back (recorder/ringfile.c,
   * wait_ring_makers). Nothing in them: removed (dry run: would be), not
   * counted as orphans. */
  uint64_t empty_rings_removed;
  uint64_t segments_written;
  /* Events recovered without their stack (stack id 0, their site kept):
   * a known record (common/stkr_ringfile.h, "Records") whose stack was
   * written only to a segment that is gone (disk cap) or was lost. */
  uint64_t unresolved_stacks;
  /* Events recovered without their payload (kept empty, marked
   * truncated): a PAYLOAD_KNOWN record (common/stkr_ringfile.h,
   * "Payloads") whose bytes were only in a segment that is gone. */
  uint64_t unresolved_payloads;
  /* Events the dead writers dropped after their last batch (ring full, a
   * signal handler's, no ring or site, batches that failed to write, calls
   * refused while an exit ended the session: the ring and session files'
   * drops beyond what a written batch counts), added to their drops. */
  uint64_t drops_found;
} stkr_recover_stats;

/*
 * Recover every dead session in `dir` (see above).
 * @return 0 when the directory could be scanned (per-session failures are
 *         in out->sessions_failed / damaged_rings / orphans, each with a
 *         message), -EINVAL for NULL dir/out, or -errno when dir cannot be
 *         opened. *out is zeroed first.
 */
int stkr_recover_dir(const char *dir, const stkr_recover_opts *opts,
                     stkr_recover_stats *out);

/*
 * Remove the directory's cache of what its processes share to start faster
 * (DIR/.stackrec-cache: unwind tables by build-id, the clock's anchor; see
 * common/stkr_ringfile.h). Not recording data: `stackrec record` removes
 * it once its command has ended. Only regular files directly inside it are
 * removed, then the directory; record's lock (record.lock) stays, for
 * stkr_recover_unlock_dir at record's very end (the directory then stays
 * too). A process still running may recreate it.
 * @return 0 (also when there is none), or -errno of the first failure.
 */
int stkr_recover_remove_cache(const char *dir);

/*
 * The lock of the one `stackrec record` writing into `dir`
 * (DIR/.stackrec-cache/record.lock, flock): recording starts at a
 * process's first event, so until then a second record into the same
 * directory saw no segment and went ahead, and each summary counted the
 * other's processes (QA, session 20). Held by an open descriptor
 * (close-on-exec): released by close() or the holder's death; the file
 * goes with the cache (stkr_recover_remove_cache).
 * @return a descriptor to keep open; -EWOULDBLOCK when another process
 *         holds it; or -errno (the cache directory or the file cannot be
 *         made).
 */
int stkr_recover_lock_dir(const char *dir);

/* Release the lock stkr_recover_lock_dir gave (fd; -1: none), removing
 * its file and then the cache directory if that is empty. */
void stkr_recover_unlock_dir(const char *dir, int fd);

/* Is the lock file under dir the one fd holds (its identity)? Not after
 * `mv DIR ELSEWHERE; mkdir DIR`, or another record's lock there since. */
bool stkr_recover_lock_is_at(int fd, const char *dir);

/* Where the directory locked through fd (stkr_recover_lock_dir's) is now,
 * into out (cap bytes): a directory moved while locked (`mv DIR ELSEWHERE`
 * while `stackrec record` ran). Linux (common/stkr_io.h stkr_fd_dir).
 * @return true if found. */
bool stkr_recover_locked_dir_now(int fd, char *out, size_t cap);

/* Is `name` (an entry of a recording directory) the cache directory
 * (DIR/.stackrec-cache), which holds no recording data? */
bool stkr_recover_is_cache_name(const char *name);

/* The longest recording directory path (bytes, without its NUL) under
 * which every file a recording process makes fits in PATH_MAX: its cache
 * directory, the pools' and new files' prefixes, a ring's or session's
 * name. Past it a process records without crash-proof rings and recovery
 * cannot open what it would need (QA, session 47: 4 034-4 054 bytes). */
size_t stkr_recover_dir_max(void);

/* Is dir's cache directory absent or a directory of its own? Its path
 * into path (cap bytes) for messages. @return 0; -ELOOP (a symbolic link:
 * the processes' shared files would go where it leads) or -ENOTDIR
 * (something else) or -ENAMETOOLONG. */
int stkr_recover_cache_check(const char *dir, char *path, size_t cap);

/* Is a record's lock file in dir's cache (held by a record at work, or
 * left by one killed before its end, whose notes of processes that could
 * not record died with it)? */
bool stkr_recover_has_lock_file(const char *dir);

/* Is a `stackrec record` at work in dir now (its lock held)? Asked without
 * making or changing any file. Where locks are not supported, false. */
bool stkr_recover_record_running(const char *dir);

/*
 * One ring file's records, for tools and fuzzing: parse `data` (`len`
 * bytes, a whole ring file) and call `rec` for each record at or after
 * `from` (free-running offset; records below are counted in *dups), in
 * order, up to the file's head. Never reads outside data.
 * @return 0 (all read), 1 (a bad record ended the walk: *lost_bytes says how
 *         much was left), or -EINVAL (the header is unusable; *why says
 *         why).
 */
typedef struct stkr_ring_rec {
  uint64_t pos;          /* free-running offset of the record */
  uint32_t size;         /* its size in the ring (the next is at pos+size) */
  uint32_t site_id;
  uint64_t ts_ns;
  uint64_t hash;         /* full records: key[0], the PCs' hash; else 0 */
  uint64_t key2;         /* full records: key[1] (stkr_stack_key2) */
  uint64_t evicted[2];   /* full records: the slot's key before this one */
  uint8_t slot;          /* < STKR_RINGFILE_KNOWN_SLOTS */
  const uint64_t *pcs;   /* depth PCs (unaligned-safe copies are made by
                            the caller if needed: data is 8-byte aligned
                            when the file was mapped or malloc'd) */
  uint16_t depth;
  const uint8_t *payload;
  uint16_t payload_len;
  uint16_t flags;        /* STKR_RINGREC_*; KNOWN: depth 0, the stack is
                            the slot's (common/stkr_ringfile.h) */
  /* PAYLOAD_NEW or PAYLOAD_KNOWN set: the payload's slot; for
   * PAYLOAD_NEW, the key that slot held before (payload points at the
   * bytes); for PAYLOAD_KNOWN, payload is NULL and payload_len bytes are
   * the slot's (common/stkr_ringfile.h, "Payloads"). */
  uint8_t pslot;
  uint64_t pevicted[2];
} stkr_ring_rec;

typedef struct stkr_ring_info {
  uint64_t session_id;
  uint32_t pid;
  uint32_t thread_id;    /* the ring's current owner (ThreadDef.id) */
  uint32_t file_no;      /* the <n> of its file name (first owner) */
  uint64_t os_tid;
  char name[32];
  uint64_t ring_size, head, tail;
  /* The owner's drops, and how many a written batch counts (common/
   * stkr_ringfile.h, "drops"; 0 in files of writers before session 21). */
  uint64_t drops_full, drops_reentrant, counted_full, counted_reentrant;
  /* What batch pend_seq counts, stored before its write (0: none; 0 in
   * files of writers before session 22). */
  uint64_t pend_seq, pend_full, pend_reentrant;
} stkr_ring_info;

int stkr_ring_parse(const uint8_t *data, uint64_t len, uint64_t from,
                    stkr_ring_info *info,
                    int (*rec)(void *arg, const stkr_ring_rec *r), void *arg,
                    uint64_t *dups, uint64_t *lost_bytes, uint64_t *bad_pos,
                    const char **why);

#ifdef __cplusplus
}
#endif
#endif /* STKR_RECOVER_H */
