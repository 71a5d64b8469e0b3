/*
 * flush_internal.h: the pieces of the flush worker, shared between the
 * flush/ sources and the flush tests. Not public; recorder/ never sees it.
 *
 * Module map:
 *   config.c       defaults + STACKREC_* environment -> stkr__fconfig
 *   stacktable.c   stack dedup (hash -> id), PCs kept in an arena
 *   segment.c      segment files: open, write, rotate, disk cap, errors
 *   batch.c        drained records -> one Stackrec__Batch (column-wise)
 *   images_*.c     the list of loaded images
 *   symbolize*.c   PCs -> frames (symbolize.h), once per unique PC
 *   drain.c        rings -> batches; the exit deadline
 *   drain_batch.c  batches -> segments: write, account, release
 *   wake_*.c       the worker's descriptor-free wake-up (wake.h)
 *   fd.c           the recorder's own descriptors: high, close-on-exec,
 *                  identity-checked
 *   worker.c       the worker thread, requests, session end, stats, fork
 */
#ifndef STKR_FLUSH_INTERNAL_H
#define STKR_FLUSH_INTERNAL_H

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "common/stkr_arena.h"
#include "common/stkr_map.h"
#include "proto/stackrec.pb-c.h"
#include "proto/stkr_format.h"
#include "recorder/stackrec.h"
#include "recorder/stkr_internal.h"
#include "symbolize/symbolize.h"

/* ---- logging (log.c) ------------------------------------------------------
 * One line on stderr, prefixed "stackrec: ". Messages of the same `kind` are
 * rate-limited (the first one, then at most one per STKR__LOG_INTERVAL_S with
 * a count of what was suppressed) so a full disk does not flood the app's
 * stderr. Never touches stdout. */
enum {
  STKR__LOG_CONFIG = 0,
  STKR__LOG_OPEN,
  STKR__LOG_WRITE,
  STKR__LOG_UNLINK,
  STKR__LOG_ENCODE,
  STKR__LOG_OTHER,
  STKR__LOG_KINDS
};
void stkr__log(int kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same for "this process records nothing" (err: a positive errno,
 * why), never rate-limited: `stackrec record` then names the process in
 * the recording as one that could not record (stkr_unrecorded_append). */
void stkr__log_unrecorded(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Where notes go from now on: record's notice socket (STACKREC_NOTIFY), else
 * descriptor 2 while it stays the file it is now. stkr_init calls it before
 * any thread of the new recording can log. */
void stkr__log_target_take(void);
/* Forget the rate limits (no note held back): stkr__log_target_take, and
 * fork's child handler (a follow-mode child's own notes). */
void stkr__log_limits_reset(void);

/* ---- config (config.c) --------------------------------------------------- */
typedef struct stkr__fconfig {
  /* The settings, resolved: defaults <- environment <- the caller's struct.
   * The public struct itself, so a setting is declared once (stackrec.h
   * documents each; exit_ms ends up in 1..STKR__MAX_EXIT_MS). set.size and
   * set.dir stay 0 and NULL: `dir` below is the worker's own copy. */
  stkr_config set;
  char *dir;       /* malloc'd */
  char *app_paths; /* malloc'd STACKREC_APP_PATHS, or NULL */
  /* malloc'd: the symbol cache directory of inproc symbolization
   * (common/stkr_symcache_dir.h), or NULL: none. */
  char *symcache_dir;
  /* The root directory's identity when the session started (0, 0: not
   * known), so that a forked child that changed its root (chroot) does not
   * record into another directory of the same path inside it (worker.c). */
  uint64_t root_dev, root_ino;
  /* stkr_config.watched, copied and checked ("" when not said). */
  char watched[STKR_WATCHED_MAX];
} stkr__fconfig;

#define STKR__DEFAULT_DIR "stackrec-out"
/* Still 256 KiB (issue 18). With stacks and payloads sent once per
 * thread a repeated event is a 24-byte record, and 64 KiB was tried again
 * (2,730 such events), but it lost events where 256 KiB lost none: in
 * inproc mode the worker's first resolution into a library stalls the
 * drain ~50-100 ms, and a burst of 4 threads x 6,000 events in 25 ms
 * (producers part C) dropped exactly a 64 KiB ring's overflow (13,192 of
 * 24,000, every run); in offline mode, under ASan, the symbolize
 * fixture's 2,002 back-to-back events with payloads seen once (each 16
 * bytes bigger with interning: the slot's old key) dropped 202
 * (//tests:symbolize). A symbol cache for the libraries (STACKREC_SYMCACHE)
 * removes the stall, but is not always there. See README, "Ring
 * capacity". */
#define STKR__DEFAULT_RING_BYTES 262144u
#define STKR__DEFAULT_DEPTH 64u
#define STKR__DEFAULT_FLUSH_MS 200u
#define STKR__DEFAULT_SEGMENT_BYTES (64ull << 20)
#define STKR__DEFAULT_DISK_CAP_BYTES (1ull << 30)
#define STKR__DEFAULT_PAYLOAD_MAX 256u
#define STKR__DEFAULT_EXIT_MS 100u
#define STKR__MAX_EXIT_MS 60000u
/* The worker's stack table (stacktable.c): 8 MiB holds ~25,000 stacks of
 * 32 PCs, more than a day of an ordinary app's distinct stacks; the floor
 * keeps the threads' mirrors (what a renewal keeps) well inside it. */
#define STKR__DEFAULT_STACK_TABLE_BYTES (8ull << 20)
#define STKR__MIN_STACK_TABLE_BYTES (64ull << 10)
#define STKR__MAX_STACK_TABLE_BYTES (1ull << 30)

/* Defaults <- environment <- non-zero fields of `in` (NULL: none). 0 or
 * -EINVAL (the offending variable or field named on stderr). On success
 * out's strings (dir, app_paths, symcache_dir) must be freed with
 * stkr__config_free. */
int stkr__config_build(const stkr_config *in, stkr__fconfig *out);
/* A copy of src with strings of its own (a followed fork's worker).
 * 0 or -ENOMEM (dst holds nothing to free then). */
int stkr__config_dup(const stkr__fconfig *src, stkr__fconfig *dst);
void stkr__config_free(stkr__fconfig *c);
/* Where a followed fork child came from (all 0 for stkr_init's session):
 * the Header's parent_pid, forked_from_pid and fork_mono_ns
 * (proto/stackrec.proto). */
typedef struct stkr__fork_origin {
  uint32_t parent_pid;      /* the process that forked this one */
  uint32_t forked_from_pid; /* the recording process whose memory (and
                               marks) it copied: parent_pid, or, through a
                               child that never recorded, its ancestor */
  uint64_t fork_mono_ns;    /* CLOCK_MONOTONIC of that copy */
  /* The follow-mode start itself: the parent's settings, its directory
   * resolved and recovered already. False for a followed child's own
   * stkr_init (its settings, its directory), which is still a copy. Set
   * by the starter (worker.c, lifecycle lock held); read by
   * stkr__worker_create. */
  bool follow_start;
} stkr__fork_origin;

/* A new session's description from the resolved settings (an fconfig's
 * set): who (this process; `origin`, NULL or a followed fork's), when
 * (now), a new session id, and the settings. The worker keeps it (worker.h, sess):
 * it is the template of the session file (stkr__session_open) and of every
 * segment's Header (stkr_fmt_header_from_session), which so say the same. */
_Static_assert(sizeof(((stkr_sessfile_hdr *)0)->watched) == STKR_WATCHED_MAX &&
                   STKR_FMT_WATCHED_MAX == STKR_WATCHED_MAX,
               "the session file and the Header hold stkr_config.watched");
void stkr__session_template(const stkr__fconfig *cfg,
                            const stkr__fork_origin *origin,
                            stkr_sessfile_hdr *s);
/* Parse "123", "64K", "1M", "2G" (binary multiples). 0 or -EINVAL. */
int stkr__parse_size(const char *s, uint64_t *out);

/* ---- stack table (stacktable.c) ------------------------------------------ */
typedef struct stkr__stack {
  uint64_t hash;
  uint32_t site;       /* part of the key: a stack as seen at one site */
  const uint64_t *pcs; /* in the arena; stable for the table's life */
  uint16_t depth;
  bool truncated;
  uint32_t epoch; /* segment epoch whose batches last carried the StackDef */
  /* Symbolized frames (inproc mode), in the symbolizer's memory: set once
   * when the stack is first seen, never changed. */
  const uint32_t *frames;
  uint32_t n_frames;
} stkr__stack;

typedef struct stkr__stacktab {
  stkr_index index;     /* key_hash(hash, site) -> index in stacks[] */
  stkr__stack *stacks;  /* stacks[id - id_base - 1] */
  size_t count, cap;
  stkr_arena arena;     /* the PCs: stacks[].pcs point into it */
  /* The ids of this generation are id_base + 1 .. id_base + count; a
   * renewal (stkr__stacktab_renew) starts the next above them, so an id is
   * never given to two stacks in a session (readers key stacks by id). */
  uint32_t id_base;
  uint64_t interned; /* stacks added, over every generation (stats.stacks) */
} stkr__stacktab;

int stkr__stacktab_init(stkr__stacktab *t);
void stkr__stacktab_free(stkr__stacktab *t);
/* The id (> id_base) of the stack (site, pcs[depth], truncated), adding it
 * if new; 0 when out of memory. `hash` (of the PCs) is only a hint: two
 * stacks with the same hash but different PCs or sites get different ids. */
uint32_t stkr__stacktab_intern(stkr__stacktab *t, uint64_t hash, uint32_t site,
                               const uint64_t *pcs, unsigned depth,
                               bool truncated);
/* id must be one of this generation's (the worker remaps what it holds at
 * a renewal: stkr__drain_renew_stacks). */
static inline stkr__stack *stkr__stacktab_get(stkr__stacktab *t, uint32_t id) {
  return &t->stacks[id - t->id_base - 1];
}
/* Is id one of this generation's? (0, "unknown", is not.) */
static inline bool stkr__stacktab_has(const stkr__stacktab *t, uint32_t id) {
  return id > t->id_base && id - t->id_base <= t->count;
}
/* The highest id given so far (every generation's). */
static inline uint32_t stkr__stacktab_max_id(const stkr__stacktab *t) {
  return t->id_base + (uint32_t)t->count;
}
/* What the table holds of the heap: its arrays as allocated and its
 * arena's blocks (what stkr_config.stack_table_bytes bounds). */
static inline uint64_t stkr__stacktab_bytes(const stkr__stacktab *t) {
  return (uint64_t)t->arena.bytes + t->cap * sizeof(stkr__stack) +
         t->index.cap * sizeof(stkr_map_slot);
}
/* Start a new generation that holds only the stacks marked in keep[] (by
 * index: keep[id - id_base - 1] != 0), under new ids above every id given
 * so far, their frames kept and their epochs reset (each is defined again
 * in the next batch that uses it). On return keep[i] is the new id of
 * the stack of index i, 0 for a forgotten one. keep holds t->count
 * entries. @return 0, or -ENOMEM with t unchanged (keep[] then
 * meaningless). */
int stkr__stacktab_renew(stkr__stacktab *t, uint32_t *keep);

/* ---- images (images_*.c) ------------------------------------------------- */
typedef struct stkr__images {
  Stackrec__Image *imgs;
  Stackrec__Image **ptrs; /* ptrs[i] = &imgs[i], for Batch.images */
  size_t n, cap;
  uint64_t gen;           /* bumped whenever the list changed */
  unsigned long long adds, subs; /* dl_iterate_phdr counters at last scan */
  bool scanned;
} stkr__images;

/* Around every scan of the loaded images (dl_iterate_phdr: the image list,
 * the unwind tables) and the symbolizer module's dlopen (sym_dl.c), so
 * that no fork starts in the middle of one: the child would inherit the
 * loader's list lock held, or a module half relocated (timer.c). */
void stkr__loader_scan_begin(void);
void stkr__loader_scan_end(void);

/* Rescan if the loader's image set may have changed. 0 or -errno (the old
 * list is kept on error). */
int stkr__images_refresh(stkr__images *im);
/* Whether the loader's list may differ from the one im holds (a refresh
 * would rescan): a few loads. Hold stkr__loader_scan_begin around it. */
bool stkr__images_stale(const stkr__images *im);
void stkr__images_free(stkr__images *im);
/* images.c, for images_*.c: free n images and the array; make imgs (n of
 * cap, owned from now on) the current list with ptrs (n pointers' room;
 * the old ptrs array is freed unless it is ptrs) and bump im->gen. */
void stkr__images_free_list(Stackrec__Image *imgs, size_t n);
void stkr__images_install(stkr__images *im, Stackrec__Image *imgs, size_t n,
                          size_t cap, Stackrec__Image **ptrs);

/* ---- our descriptors (fd.c) -----------------------------------------------
 * See fd.c for why. */
/* Where our descriptors go: stkr_fd_floor() and stkr_fd_raise() in
 * common/stkr_io.h, shared with recorder/. */
/* opendir() whose descriptor is high and close-on-exec too: a scan is
 * short, but the app may closerange() and reuse a low number meanwhile,
 * and our closedir() must not close its file. NULL with errno set. */
DIR *stkr__opendir_high(const char *path);

/* alone.c: the app's threads have all ended, only the recorder's are left
 * (Linux; false elsewhere); *status: the main thread's exit status.
 * Worker thread, every STKR__ALONE_CHECK_NS at most. stkr__end_if_alone:
 * then end the session (stkr_shutdown_for_exit) and the process with a
 * status of the main thread's own, or @return true: the worker's thread
 * returns (glibc's exit(0) at the last thread's end). Either way the
 * process ends as it would have unrecorded. The caller holds no pass. */
#define STKR__ALONE_CHECK_NS 200000000u /* 0.2 s: the default flush interval */
bool stkr__app_threads_gone(int *status);
bool stkr__end_if_alone(void);
/* Close the /proc/self/stat descriptor the looks keep, once checked to be
 * still ours: at a session's end on the worker thread, and in a forked
 * child (the atfork handler: fstat and close are async-signal-safe). */
void stkr__alone_close(void);
/* alone.c: Header.process_start, this process's start time as the OS
 * keeps it (Linux: ticks after boot); 0 when unknown. */
uint64_t stkr__process_start(void);
/* fd's identity (device, inode), remembered at open. 0 or -errno. */
int stkr__fd_identity(int fd, uint64_t *dev, uint64_t *ino);
/* Is fd still the file whose identity we remembered? 0 (and *st filled),
 * or -EBADF when it was closed or now names another file: the number is
 * the app's then, never to be written, truncated or closed by us. */
struct stat;
int stkr__fd_check(int fd, uint64_t dev, uint64_t ino, struct stat *st);

/* ---- segments (segment.c) ------------------------------------------------ */
typedef struct stkr__segw {
  char *dir;               /* borrowed from the config, or dir_owned */
  char *dir_owned;         /* where the directory was renamed to (malloc'd:
                              segment.c, follow_renamed_dir), or NULL */
  uint32_t pid;
  uint64_t segment_bytes, disk_cap_bytes;
  int fd;                  /* current segment (high, close-on-exec), or -1 */
  uint64_t fd_dev, fd_ino; /* its identity at open (fd.c) */
  uint32_t seq;            /* seq of the current (or the last opened) file */
  uint32_t prior_seq;      /* the highest seq of our pid before this session
                              (an earlier process's): its files are not ours */
  bool marks_off;          /* the file system does not keep a segment's mode
                              (our 0600 file read back executable): sessions'
                              final segments are neither marked nor kept */
  uint64_t cur_bytes;      /* bytes of good frames in the current file */
  uint64_t max_frame;      /* the largest frame written after a file's
                              first (RLIMIT_FSIZE) */
  /* The disk cap scans the directory when a segment of ours closed or
   * we wrote cap/16 bytes since the last scan (not per batch). */
  bool cap_scan_due;
  /* Scans in a row that found the cap's lock held by one process, which
   * (F_GETLK; 0: not known), and since when (CLOCK_MONOTONIC): past 8 and
   * a second, the cap runs without it (a holder stopped, SIGSTOP: QA,
   * session 35, 1.6 MB under a 64 KiB cap), leaving one tombstone a
   * segment (segment.c, cap_holder_stuck). */
  uint32_t cap_busy, cap_holder;
  uint64_t cap_busy_since_ns;
  uint64_t bytes_since_scan;
  /* Set when open_next had to recreate the directory; cleared by the
   * worker once a Header carrying Header.dir_recreated is written. */
  bool dir_recreated;
  /* Counters (the worker copies them into the stats). */
  uint64_t segments, segments_deleted, write_errors, bytes;
  uint64_t fds_lost; /* current files whose descriptor the app took */
  /* The last file closed with a whole frame in it (0: none), and its
   * identity: where stkr__seg_append_last writes once no file is open. */
  uint32_t last_seq;
  uint64_t last_dev, last_ino;
} stkr__segw;

/* Bytes of disk each segment keeps past its end (segment.c). A batch of
 * counters alone, the session's last, is ~150 bytes. */
#define STKR__SEG_RESERVE 4096u

/* `dir` must outlive the writer. Scans dir for older files of this pid so
 * that a recycled pid never overwrites them. */
int stkr__seg_init(stkr__segw *s, const char *dir, uint32_t pid,
                   uint64_t segment_bytes, uint64_t disk_cap_bytes);
/* True when the next batch must start a new segment file: none open, the
 * current one reached segment_bytes, or it was unlinked behind our back, or
 * under RLIMIT_FSIZE a frame twice the largest so far would pass the limit
 * (a batch refused there would be lost: it was built for that file). */
bool stkr__seg_need_new(stkr__segw *s);
/* Close the session's last file as its final segment (marked by its mode,
 * STKR_FMT_SEGMENT_FINAL_MODE: the disk cap keeps its counters). */
void stkr__seg_close_final(stkr__segw *s);
/* Close the current file (if any) and keep it for the disk cap. */
void stkr__seg_close(stkr__segw *s);
/* Append data (one whole frame: the session's last counters) to the
 * current file, or, with none open (a failed write closed it), to the
 * last file closed with a whole frame, reopened if it is still the same
 * file, into the room kept past its end (STKR__SEG_RESERVE), and mark it
 * the session's final segment. @return 0 or a negative errno (-ENOENT:
 * no such file; -ESTALE: another file under its name). */
int stkr__seg_append_last(stkr__segw *s, const void *data, size_t len);
/* Open the next segment file (recreating the directory if it vanished).
 * 0 or -errno. */
int stkr__seg_open_next(stkr__segw *s);
/* Write one frame to the current file with one write(2) (retrying short
 * writes and EINTR). On error the frame's partial bytes are cut off when
 * possible and the file is closed, so the next batch starts a new segment.
 * 0 or -errno. */
int stkr__seg_write(stkr__segw *s, const void *data, size_t len);
/* Keep the whole directory (every process's stackrec-*-*.zst) under
 * disk_cap_bytes: delete the oldest segments first (by mtime, then name),
 * never a process's newest (it holds that process's last counters; ours
 * included, open or closed). Scans only when due (see cap_scan_due). The
 * worker calls it before a batch's write: that batch counts the deletions. */
void stkr__seg_enforce_cap(stkr__segw *s);
void stkr__seg_free(stkr__segw *s);
/* A session that never started (stkr_init failed after its first batch
 * was written): close and remove the current file, so that no reader
 * sees a session without a clean end that never recorded. */
void stkr__seg_discard(stkr__segw *s);
/* In a forked child (atfork handler: async-signal-safe, no malloc): close
 * the inherited descriptor if it is still ours, and forget it; in follow
 * mode, note first which directory its file is in now (Linux: a readlink
 * of /proc/self/fd/N). */
void stkr__seg_forget_inherited(stkr__segw *s, bool follow);
/* In a forked child, s its parent's writer (after the above): where the
 * parent's segment was at the fork when the directory was renamed since
 * its config named it (else the writer's own knowledge of a rename,
 * follow_renamed_dir). @return a malloc'd directory, or NULL: the
 * config's still holds. */
char *stkr__seg_dir_in_parent(const stkr__segw *s);

/* ---- batch building (batch.c) -------------------------------------------- */
/* Batches stay far below STKR_FMT_MAX_BATCH_BYTES: at most this many events
 * and about this many (uncompressed) bytes. */
#define STKR__BATCH_MAX_EVENTS 65536u
#define STKR__BATCH_MAX_BYTES (16u << 20)

typedef struct stkr__tdef {
  Stackrec__ThreadDef def;
  char name[sizeof(((stkr__thread *)0)->name)];
} stkr__tdef;

typedef struct stkr__batchb {
  Stackrec__Batch batch;
  Stackrec__Header header;
  Stackrec__Config config;
  Stackrec__ClockSync clock;
  Stackrec__Events events;
  Stackrec__Counters counters;
  /* Event columns, one entry per event (payload_len always filled; left out
   * of the message when no event has a payload). */
  int64_t *ts_delta;
  uint32_t *site_id, *thread_id, *stack_id, *payload_len;
  size_t n, cap;
  uint32_t *ptrunc;
  size_t n_ptrunc, cap_ptrunc;
  uint8_t *pdata;
  size_t pdata_len, pdata_cap;
  bool any_payload;
  bool any_unsited; /* an event has stack id 0: keep the site column */
  uint64_t last_ts;
  size_t est_bytes; /* rough uncompressed size, for the batch cap */
  /* Definitions; the pointer arrays are what the Batch points at. */
  Stackrec__SiteDef *sites;
  Stackrec__SiteDef **site_ptrs;
  size_t n_sites, cap_sites;
  stkr__tdef *threads;
  Stackrec__ThreadDef **thread_ptrs;
  size_t n_threads, cap_threads;
  Stackrec__StackDef *stacks;
  Stackrec__StackDef **stack_ptrs;
  size_t n_stacks, cap_stacks;
  Stackrec__Drops *drops;
  Stackrec__Drops **drop_ptrs;
  size_t n_drops, cap_drops;
  /* Batch.ring_pos: how far each thread's ring is in this batch. */
  Stackrec__RingPos *ring_pos;
  Stackrec__RingPos **ring_pos_ptrs;
  size_t n_ring_pos, cap_ring_pos;
  /* StringDefs and FrameDefs (messages owned by the symbolizer). */
  stkr__symdefs symdefs;
} stkr__batchb;

void stkr__batch_init(stkr__batchb *b);
void stkr__batch_free(stkr__batchb *b);
/* Forget the previous batch's content, keep the buffers. */
void stkr__batch_reset(stkr__batchb *b);
/* Inline: asked before every record the worker adds. */
static inline bool stkr__batch_full(const stkr__batchb *b) {
  return b->n >= STKR__BATCH_MAX_EVENTS ||
         b->est_bytes + b->symdefs.est_bytes >= STKR__BATCH_MAX_BYTES;
}
/* True when the batch carries anything worth writing. */
bool stkr__batch_nonempty(const stkr__batchb *b);
/* Room in every column for one more event with `len` payload bytes (and a
 * truncation entry if `truncated`): stkr__batch_add_event's slow path.
 * 0 or -ENOMEM (arrays that did grow stay grown; nothing is appended). */
int stkr__batch_grow(stkr__batchb *b, size_t len, bool truncated);
/* Append one event. 0 or -ENOMEM (the batch is unchanged then). Inline:
 * it runs once per drained record, and as a call with eight arguments it
 * was a tenth of the worker's time per event (perf, one producer looping). */
static inline int stkr__batch_add_event(stkr__batchb *b, uint64_t ts,
                                        uint32_t site_id, uint32_t thread_id,
                                        uint32_t stack_id,
                                        const uint8_t *payload, size_t len,
                                        bool truncated) {
  if ((b->n >= b->cap || b->pdata_len + len > b->pdata_cap ||
       (truncated && b->n_ptrunc >= b->cap_ptrunc)) &&
      stkr__batch_grow(b, len, truncated) != 0)
    return -ENOMEM;
  if (b->n == 0) {
    b->events.base_ts_ns = ts;
    b->last_ts = ts;
  }
  /* Deltas are signed: the drain goes thread by thread, so time steps back
   * at each thread boundary. */
  b->ts_delta[b->n] = (int64_t)(ts - b->last_ts);
  b->last_ts = ts;
  b->site_id[b->n] = site_id;
  if (stack_id == 0)
    b->any_unsited = true; /* its site cannot follow from a stack */
  b->thread_id[b->n] = thread_id;
  b->stack_id[b->n] = stack_id;
  b->payload_len[b->n] = (uint32_t)len;
  if (len) {
    uint8_t *dst = b->pdata + b->pdata_len;
    /* Hooked names and paths are short: fixed-size copies (single moves)
     * that overlap in the middle, not a library call each. */
    if (len >= 16 && len <= 32) {
      memcpy(dst, payload, 16);
      memcpy(dst + len - 16, payload + len - 16, 16);
    } else if (len >= 8 && len < 16) {
      memcpy(dst, payload, 8);
      memcpy(dst + len - 8, payload + len - 8, 8);
    } else if (len >= 4 && len < 8) {
      memcpy(dst, payload, 4);
      memcpy(dst + len - 4, payload + len - 4, 4);
    } else if (len < 4) {
      dst[0] = payload[0];
      dst[len / 2] = payload[len / 2];
      dst[len - 1] = payload[len - 1];
    } else {
      memcpy(dst, payload, len);
    }
    b->pdata_len += len;
    b->any_payload = true;
  }
  if (truncated) b->ptrunc[b->n_ptrunc++] = (uint32_t)b->n;
  b->n++;
  /* Worst-case varint sizes: 10 (delta) + 3 * 5 (ids) + 5 (length). */
  b->est_bytes += 30 + len;
  return 0;
}
int stkr__batch_add_site(stkr__batchb *b, uint32_t id, const char *name);
int stkr__batch_add_thread(stkr__batchb *b, uint32_t id, uint64_t tid,
                           const char *name, bool exited);
int stkr__batch_add_stack(stkr__batchb *b, uint32_t id, const stkr__stack *st);
int stkr__batch_add_drops(stkr__batchb *b, uint32_t thread_id,
                          uint64_t ring_full, uint64_t reentrant,
                          uint64_t other);
/* Record that thread_id's ring is written out up to byte `end` once this
 * batch is (Batch.ring_pos). 0 or -ENOMEM. */
int stkr__batch_add_ring_pos(stkr__batchb *b, uint32_t thread_id,
                             uint64_t end);
/* Point the Batch's fields at the columns; after this, b->batch is ready to
 * be encoded (header, images, counters, clock and seq are set by the caller
 * through b->batch / b->header etc.). */
void stkr__batch_finish(stkr__batchb *b);

/* "inproc", "offline" or "none". */
const char *stkr__symbolize_mode_name(stkr_symbolize_mode m);
/* Is `path` under one of the colon-separated prefixes in `prefixes`? */
bool stkr__app_path_match(const char *prefixes, const char *path);

/* ---- the worker's mirror of a thread's known-payload table (pmirror.c) --
 * (common/stkr_ringfile.h, "Payloads"): the bytes of the latest
 * PAYLOAD_NEW record read for each slot, which PAYLOAD_KNOWN records
 * after it in the same ring repeat. Copied, not pointed to: the record's
 * ring space is handed back once its batch is written, while the slot's
 * known records may come much later. Worker only. */
typedef struct stkr__pmirror {
  /* Every mirror is on g_pmirrors too: the thread states that point to
   * them are mmap'd, where LeakSanitizer does not look, and a process
   * that ends without the worker's last pass still holds them. */
  struct stkr__pmirror *next, *prev;
  uint8_t *bytes[STKR__PKNOWN_SLOTS];
  uint16_t len[STKR__PKNOWN_SLOTS]; /* 0: the slot's payload is unknown */
  uint16_t cap[STKR__PKNOWN_SLOTS];
} stkr__pmirror;

/* Forget t's mirror and its buffers (the thread state is reaped or reset). */
void stkr__pmirror_free(stkr__thread *t);
/* The producer's table was cleared (new recording, fork): so is ours. */
void stkr__pmirror_check_stale(stkr__thread *t);
/* A PAYLOAD_NEW record's bytes become its slot's (out of memory: the slot
 * stays unknown). */
void stkr__pmirror_learn(stkr__thread *t, unsigned slot, const uint8_t *p,
                         uint16_t len);
/* The bytes a PAYLOAD_KNOWN record repeats; NULL when the mirror lacks
 * them (no memory when they came; or a ring not written by our rules). */
static inline const uint8_t *stkr__pmirror_get(const stkr__thread *t,
                                               unsigned slot, uint16_t len) {
  const stkr__pmirror *m = t->w_payloads;
  if (m == NULL || m->len[slot] == 0 || m->len[slot] != len) return NULL;
  return m->bytes[slot];
}

/* ---- process name (batch.c) ---- */
void stkr__process_name(char *buf, size_t len);

#endif /* STKR_FLUSH_INTERNAL_H */
