/*
 * stkr__reader.h: the reader's internals, shared by stkr_reader.c (inputs,
 * iteration, warnings), stkr_frames.c (file buffering, zstd frames, resync)
 * and stkr_batch.c (batch validation, definition tables, events). Not
 * installed; tools use proto/stkr_reader.h.
 */
#ifndef STKR__READER_H
#define STKR__READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/stkr_boot.h"
#include "common/stkr_map.h"
#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"

/* ---- id -> index maps (stkr_batch.c) --------------------------------------
 * Ids come from files, so they may be anything: a stkr_map from id to index
 * keeps the tables proportional to the number of definitions, not to the
 * largest id. Insert or replace with stkr_map_put, free with stkr_map_free;
 * indexes stay below UINT32_MAX - 1 (stkr__grow_indexed). */

/* @return 1 and *idx if id is in m, else 0. Inline: it runs for every
 * event (stkr__batch_event: the stack; the site and thread when not known
 * already, which stkr_map's dearer hash made worth keeping). */
static inline int stkr__idmap_get(const stkr_map *m, uint32_t id,
                                  uint32_t *idx) {
  const uint64_t *v = stkr_map_find(m, id);

  if (v == NULL)
    return 0;
  *idx = (uint32_t)*v;
  return 1;
}

typedef struct stkr__rd_thread {
  uint32_t id;
  uint64_t tid;
  char *name;
  bool exited;
} stkr__rd_thread;

typedef struct stkr__rd_stack {
  uint32_t id;
  /* Its site's entry + 1, kept by its first event that found the site (0:
   * none yet), so that the events of a stack look up one id less. Stays
   * right while the stack lives: a site map only adds ids, and both are
   * dropped together (stkr__session_reset, stkr__stream_trim). */
  uint32_t site_ix;
  uint64_t *pcs;
  size_t n_pcs;
  uint32_t *frames; /* indexes into stkr__stream.frames; NULL if none */
  size_t n_frames;
  uint64_t hash;
  bool truncated;
  uint32_t site_id; /* StackDef.site_id: 0 = events carry their site */
} stkr__rd_stack;

typedef struct stkr__file {
  char *path;
  uint32_t seq;  /* from the name; 0 for a file not named as a segment */
  uint64_t size; /* at stkr_reader_add() time */
  dev_t dev;
  ino_t ino;
  bool had_batch; /* an intact batch of it was read (accounting: a file
                     without one is an empty segment, not a missing one) */
  bool had_recovered; /* ... and one of them was a Batch.recovered one */
  bool tombstone;     /* the disk cap deleted it (stkr_fmt_is_tombstone) */
  uint32_t cap_deleted_by; /* ... the pid whose cap did */
  /* ... and the segments it says were deleted and no tombstone before it
   * said: tomb_lo..tomb_hi (seq..seq for one; a run: stkr_format.h;
   * tomb_lo > tomb_hi: none new); of them, how many a session's first
   * segments counted. */
  uint32_t tomb_lo, tomb_hi, tomb_counted;
  /* Damage as a whole, said once, not read: its Header names another
   * segment file of the recording (pid and number) than its own name, a
   * copy of that file (its batches each counted as damaged: stkr_batch.c,
   * stkr__misnamed); or a damaged tombstone (stkr__tombstone_check). */
  bool damaged_whole;
  /* Its Header named another process or number, said and counted once
   * (info.misnamed_segments), then read under its name. */
  bool misnamed;
  /* No zstd frame at its start nor after it ("not a zstd file"): said and
   * counted as damage once, not again as a segment whose writer ended
   * before its first batch (QA, session 46: `verify /etc/passwd`). */
  bool not_zstd;
  /* 0, or why it cannot be read: the -errno of its stat or open, -EINVAL
   * when it is not a regular file. Warned about (STKR_WARN_IO) when its
   * turn comes, counted in info.unreadable_segments, not as empty. */
  int unreadable;
} stkr__file;

/* Accounting of the current recording session (stkr_accounting.c). Reset at
 * each session start; folded into stkr_process_info at its end. */
typedef struct stkr__session_acct {
  uint64_t session_id;   /* Header.session_id, 0 if none */
  uint32_t first_seq;    /* Header.session_first_seq, 0 if unknown */
  uint32_t min_seg, last_seg; /* lowest / latest Header.segment_seq read */
  uint32_t gap_middle;   /* segments absent between headers read */
  size_t first_file, last_file; /* index + 1 in st->files; 0: none yet */
  bool have_counters;    /* a batch of the session carried Counters */
  Stackrec__Counters c;  /* those of the last such batch (scalars only) */
  uint64_t drops_rf, drops_re, drops_other; /* Drops deltas summed */
  uint64_t read, recovered, recovered_batches; /* events of intact batches */
  uint64_t damaged_before; /* info.damaged_batches at the session start */
  uint64_t missing_before; /* info.missing_batches at the session start */
  /* The session's first batch read: its Counters.written (the events of
   * the batches before it), if it carried Counters, was not recovered and
   * no damaged frame came before it; its Counters.dropped_write_error; and
   * the batches numbered before it. What the disk cap took when the
   * session's absent first segments are all its deletions. */
  bool first_counted;
  uint64_t first_written, first_write_errors, lead_missing;
} stkr__session_acct;

/* How many stkr_process_info counters sum over a pid's sessions
 * (stkr_accounting.c: the drops by reason, attempted, segments_deleted,
 * counters_recovered, marks_dropped). */
#define STKR__BANKED_COUNTERS 9

/* One recording stream: the segments of one pid in one directory. */
typedef struct stkr__stream {
  stkr_process_info info; /* public summary; strings below */
  char *dir;
  dev_t dir_dev;
  ino_t dir_ino;
  bool anon;              /* one file not named as a segment */
  size_t order;           /* creation order: ties in the pid sort */
  char *process_name, *arch;
  char *watched;          /* info.watched when not "" */
  bool watched_mixed;     /* Headers disagreed: info.watched stays "" */

  stkr__file *files; /* sorted by seq */
  size_t n_files, cap_files;

  stkr_site_info *sites; /* names owned (char * behind the const) */
  size_t n_sites, cap_sites;
  stkr_map site_map;
  stkr__rd_thread *threads;
  size_t n_threads, cap_threads;
  stkr_map thread_map;
  stkr_map tids;          /* OS thread ids seen, across sessions
                             (os_threads; trimmed at the stream's end) */
  stkr__rd_stack *stacks;
  size_t n_stacks, cap_stacks;
  stkr_map stack_map;
  /* The contents (PCs and site) of the stacks counted in info.stacks, for
   * the life of the stream: ids restart in every session and recovered
   * segment, a stack's content does not. */
  stkr_map stack_keys;
  stkr_image_info *images; /* paths and build ids owned */
  size_t n_images, cap_images;
  char **strings;          /* StringDefs of the session, owned */
  size_t n_strings, cap_strings;
  stkr_map string_map;
  stkr_frame *frames;      /* FrameDefs (pc 0), strings point into strings */
  uint32_t *frame_ids;     /* FrameDef.id of frames[i] */
  size_t n_frames, cap_frames, cap_frame_ids;
  stkr_map frame_map;

  bool have_sync; /* a (monotonic, wall) pair to date events with */
  uint64_t sync_mono, sync_wall;
  bool have_batch_seq;
  uint64_t last_batch_seq;
  uint64_t damaged_at_batch; /* info.damaged_batches after the last
                                intact batch (stkr__acct_counters) */
  uint64_t damaged_at_file;  /* ... when the current file was opened */

  /* The current recording session (see stkr_reader.h). */
  bool have_session;         /* a Header of this session was read */
  uint64_t proc_start;       /* Header.process_start of the current
                                instance (0: not known yet) */
  uint64_t sess_mono, sess_wall; /* its start times */
  bool sess_clean;           /* its last=true batch was read */
  size_t clean_file;         /* index + 1 of the file where sess_clean
                                became true (0: not clean): a cut-off
                                batch after it is damage, not a live tail */
  bool unclean_before;       /* an earlier session did not end cleanly */
  stkr__session_acct acct;   /* the current session's accounting */
  /* Ended sessions' counters, banked (stkr_accounting.c's table of the
   * stkr_process_info counters that sum over sessions): */
  uint64_t banked[STKR__BANKED_COUNTERS];
  size_t sites_before;       /* sites entries of earlier sessions */
  /* Marks (stkr_marks.c): ids of the current session's mark sites (few:
   * a linear scan), and how far this stream has got through the reader's
   * external marks (r->ext). */
  uint32_t *mark_ids;
  size_t n_mark_ids, cap_mark_ids;
  /* Ids of the session's stacks at a mark site, so that finding a batch's
   * marks compares stack ids, not looks them up; past
   * STKR__MAX_MARK_STACKS (a hostile file) the lookup is used instead. */
  uint32_t *mark_stacks;
  size_t n_mark_stacks, cap_mark_stacks;
  bool many_mark_stacks;
  size_t ext_next;           /* index into r->ext of the next to consider */
  /* The first Header of the stream as a look ahead found it
   * (stkr_copies.c: stkr_reader_find_copies, stkr_reader_start_clock),
   * before or apart from the reading itself: the first session id
   * (0: none found) and the first clock. */
  bool peeked;
  uint64_t peek_sid;
  stkr_start_clock peek_clock;
  uint32_t tomb_said;        /* the highest seq a tombstone read said */
  size_t tomb_floor;         /* files[] index past the last file met that
                                ends runs (stkr__tomb_clip) */
  /* The boots of its instances' clocks (stkr_header.c), for the external
   * marks of another boot (stkr_extmarks.c); many_boots: one could not be
   * kept (no memory), so none is said. */
  struct stkr__boot_seen { uint8_t id[16]; } *boots_seen;
  size_t n_boots_seen, cap_boots_seen;
  bool many_boots;
  unsigned warned; /* STKR__WARNED_* bits: say each oddity once */
} stkr__stream;

#define STKR__WARNED_PID 1u
#define STKR__WARNED_SEQ 2u
#define STKR__WARNED_CONFLICT 4u
#define STKR__WARNED_BAD_ID 8u
#define STKR__WARNED_IMAGES 16u
#define STKR__WARNED_FRAMES 32u
#define STKR__WARNED_OVERFLOW 64u
#define STKR__WARNED_MARK_BOOT 128u

/* Buffered reading of one file at explicit offsets (stkr_frames.c). The
 * buffer is fixed-size; frames larger than it are streamed through it. */
typedef struct stkr__input {
  int fd; /* -1 when closed */
  const char *path;
  uint8_t *buf;
  size_t cap;
  uint64_t off; /* file offset of buf[0] */
  size_t len;   /* valid bytes in buf */
  size_t pos;   /* read position in buf */
  bool eof;     /* read() returned 0 at off + len */
  int err;      /* errno of a failed read, or 0 */
} stkr__input;

/* One line of a marks file (stkr_marks.c). */
/* Pids lo..hi (both included), of a scope line (stkr_marks_scope.c). */
typedef struct stkr__pid_range {
  uint32_t lo, hi;
} stkr__pid_range;

/* The processes an "s1 pids=..." line of a marks file names: n sorted,
 * disjoint ranges (owned by the reader's scopes list). */
typedef struct stkr__scope {
  stkr__pid_range *v;
  size_t n;
} stkr__scope;

/* No process: the scope after a malformed scope line. */
extern const stkr__scope stkr__scope_none;

typedef struct stkr__extmark {
  dev_t dir_dev;
  ino_t dir_ino;
  uint64_t ts_ns, wall_ns;
  stkr_clock_id clock;  /* the setter's clock (have_boot false: not said) */
  uint32_t setter_pid;
  char *name;
  uint8_t *payload;
  size_t payload_len;
  const char *path; /* the marks file (shared by its marks; owned by the
                       first of them, path_owner) */
  bool path_owner;
  uint64_t offset;  /* byte offset of the line */
  /* The scope the line stands in (merge's "s1" lines): the processes it
   * belongs to. NULL: every process of its directory. Not owned. */
  const stkr__scope *scope;
} stkr__extmark;

struct stkr_reader {
  stkr_reader_opts opts; /* as given to stkr_reader_open (zeroed: NULL) */
  stkr_reader_counts counts;

  stkr__stream **streams; /* sorted by pid, then creation order */
  size_t n_streams, cap_streams;
  /* (directory, pid) -> position in streams, for the streams not anon
   * (built again when they are sorted): adding N process files is O(N),
   * not a scan of every stream per file. */
  stkr_index stream_ix;
  uint64_t stream_probes; /* lookups, plus the streams each compared: the
                             work, for the tests */
  bool started;
  int hard_err; /* sticky negative errno after a hard error */
  /* Read no marks file (stkr_copies.c's peeks: a batch's Header is all
   * they want, and a marks file may be tens of MiB; review, session 34). */
  bool no_marks;
  /* Every segment file added, by inode: one added again under another
   * name, in another directory (a symbolic link beside its recording),
   * is read once (QA, session 34: its events were counted twice). */
  /* Segment files added, by inode: the directory, pid and seq of the name
   * each was read under (stkr__inode_seen). */
  struct stkr__inode {
    dev_t dev, dir_dev;
    ino_t ino, dir_ino;
    uint32_t pid, seq;
  } *inodes;
  size_t n_inodes, cap_inodes;
  stkr_index inode_ix;

  /* Iteration cursor. */
  size_t cur_stream, cur_file;
  stkr__input in;
  ZSTD_DCtx *dctx;
  stkr_fmt_buf dbuf; /* the decompressed frame */
  stkr_fmt_pballoc pballoc; /* bounds what decoding one batch may take */
  Stackrec__Batch *batch; /* batch whose events are being handed out */
  uint64_t batch_off;
  uint64_t frame_len; /* compressed size of the frame stkr__next_frame
                         returned last */
  size_t ev_idx, ev_count;
  /* The last event's thread id and its entry + 1 (0: none), for the batch
   * being handed out: events come in runs of one thread (a ring drained
   * at a time), and its definitions were all applied before them. */
  uint32_t ev_thread_id, ev_thread_ix;
  uint64_t ev_ts;
  size_t payload_pos;
  uint8_t *trunc_bits; /* payload_truncated as a bitmap */
  size_t trunc_cap;
  /* The current event's frames (stkr_event_view.frames), rebuilt when the
   * stack changes. */
  stkr_frame *ev_frames;
  size_t ev_frames_cap;
  const stkr__rd_stack *ev_frames_of;
  /* External marks (marks files of `stackrec mark`) of every directory
   * added, sorted by directory then time; their strings owned. */
  stkr__extmark *ext;
  size_t n_ext, cap_ext;
  stkr_mark_clock ext_clock; /* the current event's, when ev_ext: */
  bool ev_ext;               /* it is an external mark
                                (stkr_reader_mark_clock) */
  stkr__scope **scopes; /* of the marks files' scope lines, owned */
  size_t n_scopes, cap_scopes;
  /* Processes that recorded nothing: the "u1" lines of the same files
   * (stkr_marks.c); their strings owned. */
  stkr_unrecorded_info *unrec;
  size_t n_unrec, cap_unrec;
  /* Processes still running when record ended: the "r1" lines
   * (stkr_marks_running.c); their names owned. */
  stkr_running_info *running;
  size_t n_running, cap_running;
  /* Directories whose marks file was read (a directory added twice is
   * read once), with that file's path for the unrec entries (owned; NULL
   * until its first "u1" line). */
  struct stkr__marks_dir {
    dev_t dev;
    ino_t ino;
    char *path;
    stkr_map unrec_pids; /* pid -> index in unrec, for this file */
    uint64_t damaged; /* its data_lost warnings: the processes' marks_damaged */
  } *mdirs;
  size_t n_mdirs, cap_mdirs;
  const stkr__stream *ev_stream; /* the current event's stream and stack */
  const stkr__rd_stack *ev_stack; /* (NULL: none, or an unknown stack) */
};

/* stkr_reader.c: report a warning (counted; formatted as
 * "<path>: offset N: <fmt...>", or "<path>: <fmt...>" when off < 0). */
void stkr__warn(stkr_reader *r, stkr_warn_kind kind, const char *path,
                int64_t off, uint32_t pid, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The same, once per stream for each flag (a STKR__WARNED_* bit of
 * st->warned), with the stream's pid. */
void stkr__warn_once(stkr_reader *r, stkr__stream *st, unsigned flag,
                     stkr_warn_kind kind, const char *path, int64_t off,
                     const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* stkr_frames.c */
int stkr__input_open(stkr__input *in, const char *path);
void stkr__input_close(stkr__input *in);
/* Decompress the next intact frame of the open file into r->dbuf, skipping
 * (and warning about) damaged or truncated ones; an incomplete frame at the
 * end of a live recording is skipped with a STKR_WARN_LIVE_TAIL note (see
 * stkr_reader.h).
 * @return 1 (frame at *frame_off, r->frame_len bytes), 0 (end of file), or
 *         -ENOMEM. */
int stkr__next_frame(stkr_reader *r, stkr__stream *st, uint64_t *frame_off);

/* stkr_header.c: a batch's Header into st->info (and the session's
 * accounting, stkr__acct_header). */
void stkr__apply_header(stkr_reader *r, stkr__stream *st,
                        const Stackrec__Header *h, const char *path,
                        uint64_t off);

/* stkr_batch.c */
#define STKR__BATCH_OK 1
#define STKR__BATCH_SKIPPED 0     /* damaged: warned, nothing to deliver */
#define STKR__BATCH_UNSUPPORTED 2 /* newer format: stop this stream */
/* Decode r->dbuf as the batch at `off` of `path`, apply its definitions and
 * counters to st and make its events current.
 * @return STKR__BATCH_* or -ENOMEM. */
int stkr__batch_load(stkr_reader *r, stkr__stream *st, const char *path,
                     uint64_t off);
/* Fill *ev with the current event (r->ev_idx < r->ev_count) and advance.
 * @return 0 or -ENOMEM. */
int stkr__batch_event(stkr_reader *r, stkr__stream *st, size_t st_index,
                      stkr_event_view *ev);
/* Drop the current batch. */
void stkr__batch_release(stkr_reader *r);
void stkr__stream_free(stkr__stream *st);
/* Is the current file of st (open in r->in) a copy of the segment file
 * named (pid, seq) in st's directory (one of the reader's files)? The same
 * size, and the same bytes at its start. */
bool stkr__segment_copy_of(const stkr_reader *r, const stkr__stream *st,
                           uint32_t pid, uint32_t seq);

/* stkr_accounting.c: per-session accounting (see "Accounting" in
 * stkr_reader.h). Start a session (after the previous one ended). */
void stkr__acct_begin(stkr__stream *st);
/* A header of the current session read from file index r->cur_file. */
void stkr__acct_header(stkr_reader *r, stkr__stream *st,
                       const Stackrec__Header *h, const char *path,
                       uint64_t off);
/* An intact batch of the current session (counters, drops, events). */
void stkr__acct_batch(stkr__stream *st, const Stackrec__Batch *b,
                      size_t file_index);
/* The current session ended (a new one starts, or the stream is done):
 * check it, warn, and fold it into st->info. */
void stkr__acct_end(stkr_reader *r, stkr__stream *st);
/* Refresh st->info's counters (banked sessions + the current one). */
void stkr__acct_publish(stkr__stream *st);
/* A batch read intact (stkr_batch.c, before its events): its clock pair,
 * its counters (stkr__acct_batch), the gaps in batch numbers it shows
 * (missing, or a damaged stretch's), its end mark. */
void stkr__acct_counters(stkr__stream *st, const Stackrec__Batch *b,
                         size_t file_index);
/* The stream has been read: end its session, count the segment files that
 * held no intact batch, set info.incomplete. */
void stkr__acct_stream_done(stkr_reader *r, stkr__stream *st);

/* stkr_batch.c helpers shared with stkr_symbols.c */
char *stkr__strdup0(const char *s); /* strdup(s ? s : "") */
/* Warn once per process that an id was defined twice, differently. */
void stkr__conflict(stkr_reader *r, stkr__stream *st, const char *path,
                    uint64_t off, const char *what, uint32_t id);
/* Warn once per process about a definition with id 0. */
void stkr__bad_id(stkr_reader *r, stkr__stream *st, const char *path,
                  uint64_t off, const char *what);

/* stkr_symbols.c: StringDef / FrameDef into st's tables (0 or -ENOMEM). */
int stkr__apply_string(stkr_reader *r, stkr__stream *st,
                       const Stackrec__StringDef *d, const char *path,
                       uint64_t off);
int stkr__apply_frame(stkr_reader *r, stkr__stream *st,
                      const Stackrec__FrameDef *d, const char *path,
                      uint64_t off);
/* s->frames from d->frames, or none (warned) if they do not fit the PCs.
 * @return 0 or -ENOMEM. */
int stkr__stack_frames(stkr_reader *r, stkr__stream *st, stkr__rd_stack *s,
                       const Stackrec__StackDef *d, const char *path,
                       uint64_t off);
/* r->ev_frames = the frames of stack s, each with its PC. 0 or -ENOMEM. */
int stkr__event_frames(stkr_reader *r, const stkr__stream *st,
                       const stkr__rd_stack *s);

/* stkr_marks.c: marks. */
/* Read the marks file of directory `dir` (if any) into r->ext (kept
 * sorted), once per directory. @return 0 or -ENOMEM (a bad file or line is warned about). */
int stkr__marks_load_dir(stkr_reader *r, const char *dir,
                         const struct stat *dst);
/* Is the open file f (r->in) a tombstone of the disk cap? Then it is
 * noted in f and st (stkr_tombstones.c). @return true if it is one, or a
 * damaged one (said): not to be read as a segment. */
bool stkr__tombstone_check(stkr_reader *r, stkr__stream *st, stkr__file *f);
/* f, listed, is gone (-ENOENT): is it of a run the cap went on with since?
 * Then it is noted as such, not as unreadable (stkr_tombstones.c). */
bool stkr__tomb_gone(stkr__stream *st, stkr__file *f);
/* f, a file that may hold data (not a tombstone), is met: the runs said
 * before it end before it (stkr_tombstones.c). */
void stkr__tomb_clip(stkr__stream *st, const stkr__file *f);
/* The seqs of a gap, as a reader can name them: "3", "3..5", "1, 3..5,
 * 9, ..." (at most STKR__SEQ_LIST_RANGES ranges, then ", ..."), never
 * more seqs than the count it names (want). */
#define STKR__SEQ_LIST_RANGES 6
typedef struct {
  char text[128];
  uint32_t lo, hi;  /* the range not yet put (lo > hi: none) */
  uint32_t ranges;  /* ranges put */
  uint32_t named, want; /* seqs named so far; how many there are */
} stkr__seq_list;
#define STKR__SEQ_LIST_INIT(want) {"", 1, 0, 0, 0, (want)}
/* The session's first gap (acct.first_seq..min_seg - 1) named seq by seq
 * (stkr_tombstones.c): its tombstones' seqs and the first `credit` seqs
 * no file holds into *deleted, the other seqs no file holds into
 * *missing (each made with STKR__SEQ_LIST_INIT of its count). ", ..."
 * ends a list that names fewer than its count. */
void stkr__first_gap_seqs(const stkr__stream *st, uint32_t credit,
                          stkr__seq_list *deleted, stkr__seq_list *missing);
/* Look ahead at st's first Header once (stkr_copies.c): st->peek_*. */
void stkr__peek_header(stkr__stream *st);
/* The next external mark due for stream st (index st_index) into *ev.
 * @return 1 (delivered) or 0 (none left for it). */
int stkr__marks_next_ext(stkr_reader *r, stkr__stream *st, size_t st_index,
                         stkr_event_view *ev);
/* At st's end: say a mark handed to it of a boot none of its instances
 * was on (STKR_WARN_INCONSISTENT, once). */
void stkr__marks_ext_check(stkr_reader *r, stkr__stream *st);
/* Site name d of a new site definition: a mark site ("mark:NAME") gets
 * name NAME and is_mark, and its id is noted for the batch scan.
 * @return 0 or -ENOMEM. */
int stkr__marks_site(stkr__stream *st, stkr_site_info *s, uint32_t id);
/* A stack (id) was defined at site site_id: note it if that is a mark's.
 * @return 1 when it is a mark's, 0 when not, or -ENOMEM. */
int stkr__marks_stack(stkr__stream *st, uint32_t id, uint32_t site_id);
/* Reorder the event columns of batch b (validated, its definitions
 * applied) so that its marks come first, each column consistently (time
 * deltas recomputed, payload bytes moved, payload_truncated renumbered).
 * Nothing is done for a batch without marks, or whose marks lead already.
 * @return 0 or -ENOMEM (b unchanged). */
int stkr__marks_first(const stkr__stream *st, Stackrec__Batch *b);
void stkr__marks_free(stkr_reader *r);
/* Parse a decimal u64 token [p, end). @return 0 or -1. */
int stkr__parse_u64(const char *p, const char *end, uint64_t *out);
/* Decode field [p, p + n) of a "u1"/"r1" line ("-" or lower-case hex) into
 * a new string (control characters as '?'). @return it, NULL for no
 * memory; *why set (and NULL returned) when malformed. */
char *stkr__unhex(const char *p, size_t n, const char **why);
/* s (at most max bytes) as lower-case hex, "-" when empty, into out
 * (2 * max + 1 bytes). @return the bytes written. */
size_t stkr__put_hex(char *out, const char *s, size_t max);
/* An "r1" line [p, end) of marks file path into r->running
 * (stkr_marks_running.c). @return NULL, or why it is malformed; *nomem on
 * -ENOMEM. */
const char *stkr__running_line(stkr_reader *r, const char *path,
                               const char *p, const char *end, bool *nomem);
/* Fields of a marks-file line [p, end), split at single spaces into tok /
 * len (max of them). @return how many, or max + 1 when there are more. */
size_t stkr__marks_fields(const char *p, const char *end, const char **tok,
                          size_t *len, size_t max);
/* Scope line [p, end) ("s1 -" or "s1 pids=..."), for the marks after it
 * in its file: *cur = NULL (the whole directory) or the scope (kept in
 * r->scopes). @return NULL, or why it is malformed (*cur then no process,
 * &stkr__scope_none); *nomem on -ENOMEM. */
const char *stkr__marks_scope_line(stkr_reader *r, const char *p,
                                   const char *end, const stkr__scope **cur,
                                   bool *nomem);
/* Is pid in scope s? */
bool stkr__scope_has(const stkr__scope *s, uint32_t pid);
/* The stream of (directory dev/ino, pid), or NULL; *probes counts the
 * lookup and the streams it compared (stkr_reader.c). */
stkr__stream *stkr__stream_find(const stkr_reader *r, dev_t dev, ino_t ino,
                                uint32_t pid, uint64_t *probes);
/* stkr_reader_links.c. Was a file of this inode added to r already (by
 * any name)? If not, it is remembered with the name it is read under (dir
 * dst, pid, seq; dst NULL: none). *held: the earlier name's entry when
 * seen. @return 1 seen, 0 new, or -ENOMEM. */
int stkr__inode_seen(stkr_reader *r, const struct stat *fst,
                     const struct stat *dst, uint32_t pid, uint32_t seq,
                     struct stkr__inode **held);
/* A segment name (path; dir dst, pid, seq) of a file read already under
 * *held: read once, said; of one process's names the lower seq is read.
 * @return 0 or -ENOMEM. */
int stkr__hard_link(stkr_reader *r, const char *path, const struct stat *dst,
                    uint32_t pid, uint32_t seq, struct stkr__inode *held);
/* The whole lines of dir's marks file (at most STKR_MARKS_MAX_BYTES) into
 * *buf (malloc'd, STKR_MARKS_MAX_BYTES; the caller frees it, also on
 * error) and *len (0: none, or not a regular file). A read error keeps
 * what was read before it. *damaged: NULL, or why the file is not all
 * read (not a regular file; longer than a reader reads), for a copy to
 * say (stkr__marks_put_lost). @return 0, -ENOMEM or the -errno of the
 * open. */
int stkr__marks_read(const char *dir, char **buf, size_t *len,
                     const char **damaged);
/* Append to dir's marks file the line saying that marks were lost before
 * this copy was made, and why ("l1 <hex why>": stkr_reader.h), so that
 * every reader of the copy says it as the input's readers did.
 * @return -EBADMSG (the loss, for the copying tool to say), or the -errno
 * of the failed write. */
int stkr__marks_put_lost(const char *dir, const char *why);
/* Append buf[0..n) to the file at path (created 0600) in one write.
 * @return 0 or -errno (-EIO: a short write; -ENXIO: not a regular file;
 * -EFBIG: past RLIMIT_FSIZE). */
int stkr__marks_append(const char *path, const void *buf, size_t n);

/* Grow *arr (elements of `size` bytes) to hold at least `need`. */
int stkr__grow(void *arr, size_t *cap, size_t need, size_t size);

/* Room for entry n of a table that an id map indexes (sites, threads,
 * stacks, strings, frames of a stream): indexes are handed out as uint32_t
 * (stkr__idmap_get), so n must stay below UINT32_MAX - 1. @return 0 or
 * -ENOMEM. */
int stkr__grow_indexed(void *arr, size_t *cap, size_t n, size_t size);
/* stkr__grow_indexed, then the new element *arr + n, zeroed; NULL when
 * out of memory or ids. */
void *stkr__grow_slot(void *arr, size_t *cap, size_t n, size_t size);

#endif /* STKR__READER_H */
