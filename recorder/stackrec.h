/*
 * stackrec.h: the one public header for recording call stacks at hook sites.
 *
 * A hook site calls STKR_EVENT(name, payload, len) (or stkr_event() with a
 * site it declared once); the calling thread's stack is walked by frame
 * pointers, hashed, and pushed into that thread's own lock-free ring. A single
 * flush worker thread drains the rings into zstd-compressed segment files.
 *
 * Conventions (as in libuv):
 * - every public name starts with stkr_ / STKR_; internals use stkr__;
 * - every call that can fail returns 0 or a negative errno (-EINVAL, ...);
 *   stkr_strerror() turns either into text;
 * - the recorder is process-wide: hooks are global, so there is exactly one
 *   recorder, set up by stkr_init() and torn down by stkr_shutdown().
 *
 * Thread-safety: stkr_event() may be called from any thread, at any time,
 * including from signal handlers (see its comment). stkr_init(),
 * stkr_flush(), stkr_shutdown() and stkr_shutdown_for_exit() run one at a
 * time (a lock: called together from two threads, one waits, then gets
 * -EALREADY or -ENOTCONN as it would after the other); call them from one
 * controlling thread all the same. They are no cancellation points (a
 * pthread_cancel acts at the caller's next one, after the call), and none
 * but stkr_shutdown_for_exit() is async-signal-safe: a signal handler must
 * not call them, nor siglongjmp out of one it interrupted (the recorder's
 * lock stays held and later control calls wait for it).
 */
#ifndef STACKREC_H
#define STACKREC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memset: stkr_config_init */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Export macro and versions (issue 17: embedding without Bazel).
 *
 * STKR_API marks every public function. With gcc/clang it gives default
 * visibility, so a shared library built with -fvisibility=hidden (the CMake
 * build does) exports the stkr_ API and nothing else; internal stkr__
 * functions stay hidden. Define STKR_API yourself (e.g. to nothing) before
 * including this header to override it. proto/stkr_reader.h carries the
 * same definition (keep the two identical).
 */
#ifndef STKR_API
#if defined(__GNUC__) || defined(__clang__)
#define STKR_API __attribute__((visibility("default")))
#else
#define STKR_API
#endif
#endif

/* The version of this header. stkr_version() gives the library's at run
 * time; compare the two to detect a header/library mismatch. The number is
 * (major << 16) | (minor << 8) | patch, as libuv's UV_VERSION_HEX. */
#define STKR_VERSION_MAJOR 0
#define STKR_VERSION_MINOR 3
#define STKR_VERSION_PATCH 0
#define STKR_VERSION_NUMBER                                          \
  ((STKR_VERSION_MAJOR << 16) | (STKR_VERSION_MINOR << 8) |          \
   STKR_VERSION_PATCH)
#define STKR_VERSION_STRING "0.3.0"

/*
 * ABI rules (from 0.3 on):
 * - Functions are never removed or changed in signature within a major
 *   version; new ones are added. Enum values are never renumbered.
 * - stkr_config only grows at its end. Its first member, `size`, says how
 *   much of it the caller knows: sizeof(stkr_config) as the caller's header
 *   had it (STKR_CONFIG_INIT sets it), or 0, which means the 0.3 layout
 *   (every field up to exit_ms). A library newer than the caller reads only
 *   `size` bytes and defaults the rest; a library older than the caller
 *   accepts a larger `size` only if every byte it does not know is zero
 *   (unset new fields), and otherwise refuses with -E2BIG rather than
 *   ignore a setting. A field added after 0.3 is read only when `size`
 *   covers it: set size (STKR_CONFIG_INIT) to use one.
 * - Structs the library fills for the caller (stkr_stats, the reader's
 *   views and summaries) carry no size: they change only with the ABI
 *   version, which is the shared library's SONAME: libstackrec.so.0.3
 *   before 1.0 (every minor version may change them), then the major.
 *   A binary built against another ABI version does not load.
 * - The static library and the Swift package are built with the app, so
 *   header and library always match there; stkr_version() is still there
 *   to check.
 * Source compatibility: 0.2 callers that zero the config ({0}, memset or
 * designated initializers) compile and behave as before (size 0). 0.2
 * binaries must be rebuilt: `size` moved every field (nothing had been
 * released with the 0.2 layout).
 */

/* Limits that bound every buffer on the hot path. */
#define STKR_MAX_DEPTH 256        /* hard cap on max_depth */
#define STKR_MAX_SITES 4096       /* distinct hook sites per process */
#define STKR_WATCHED_MAX 128      /* stkr_config.watched, with its NUL */
#define STKR_MAX_PAYLOAD 4096     /* hard cap on payload_max */

/* What a forked child does with the recorder it inherited. The child never
 * writes into its parent's files either way. */
typedef enum stkr_fork_mode {
  STKR_FORK_DISABLE = 1, /* the child records nothing */
  STKR_FORK_FOLLOW = 2   /* the child starts its own files in the same dir */
} stkr_fork_mode;

/* How recorded stacks get function names (stackrec.proto, FrameDef). */
typedef enum stkr_symbolize_mode {
  STKR_SYMBOLIZE_INPROC = 1,  /* the worker resolves each new PC once and
                                 writes frames with the stack */
  STKR_SYMBOLIZE_OFFLINE = 2, /* PCs and the image list only; resolve later
                                 with `stackrec symbolize` */
  STKR_SYMBOLIZE_NONE = 3     /* no symbol work at all (PCs only) */
} stkr_symbolize_mode;

/* How the recorder walks a stack at a hook site. */
typedef enum stkr_unwind_mode {
  STKR_UNWIND_FP = 1,    /* frame pointers only: the fastest walk, complete
                            where every frame keeps its frame pointer (Apple
                            platforms, code built -fno-omit-frame-pointer) */
  STKR_UNWIND_TABLES = 2 /* Linux x86_64/aarch64: each image's .eh_frame
                            turned into a compact table by the worker, frame
                            pointers where an image has none: complete
                            stacks through code built without frame pointers
                            (Debian's binaries); FP on other platforms */
} stkr_unwind_mode;

/*
 * Recorder configuration. Any field left 0 / NULL takes the default shown,
 * after the matching environment variable (if set) has been applied, so a
 * preloaded library can be configured with no code at all:
 *
 *   field               env variable              default
 *   dir                 STACKREC_DIR              "stackrec-out"
 *   ring_bytes          STACKREC_RING_BYTES       262144 (rounded up to 2^n)
 *   max_depth           STACKREC_DEPTH            64 (at most STKR_MAX_DEPTH)
 *   skip_frames         STACKREC_SKIP             0
 *   flush_interval_ms   STACKREC_FLUSH_MS         200
 *   segment_bytes       STACKREC_SEGMENT_BYTES    67108864 (64 MiB; at most 1 GiB)
 *   disk_cap_bytes      STACKREC_DISK_CAP_BYTES   1073741824 (1 GiB)
 *   payload_max         STACKREC_PAYLOAD_MAX      256 (at most STKR_MAX_PAYLOAD)
 *   fork_mode           STACKREC_FORK             STKR_FORK_DISABLE
 *                                                 ("disable" or "follow")
 *   symbolize           STACKREC_SYMBOLIZE        STKR_SYMBOLIZE_INPROC
 *                                                 ("inproc", "offline", "none")
 *   exit_ms             STACKREC_EXIT_MS          100 (1 to 60000)
 *   unwind              STACKREC_UNWIND           STKR_UNWIND_FP
 *                                                 ("fp" or "tables")
 *   stack_table_bytes   STACKREC_STACK_TABLE_BYTES  8388608 (8 MiB;
 *                                                 64 KiB to 1 GiB)
 *
 * exit_ms bounds stkr_shutdown_for_exit(), which the preload library calls
 * at exit, return from main, _exit and exec (see there). There is no
 * "unbounded" value: 0 means the default.
 *
 * STACKREC_APP_PATHS (environment only): colon-separated path prefixes of
 * the app's own images; with the main executable they are the "app" frames
 * (stackrec dump --app-only).
 *
 * STACKREC_SYMCACHE (environment only; inproc symbolization): a directory
 * of symbol caches (<build-id>.stkrsym, docs/SYMCACHE.md) answering an
 * image instead of its DWARF, read only; default
 * $XDG_CACHE_HOME/stackrec/symcache, else $HOME/.cache/stackrec/symcache;
 * "none" or empty: none.
 *
 * A field set in the struct wins over the environment. Sizes in the
 * environment accept a K, M or G suffix. A malformed environment value makes
 * stkr_init() fail with -EINVAL and name the variable on stderr.
 */
typedef struct stkr_config {
  /* sizeof(stkr_config) as the caller compiled it, or 0 for the 0.3
   * layout: see "ABI rules" above. Not a setting. Added in 0.3. */
  size_t size;
  const char *dir;
  size_t ring_bytes;
  unsigned max_depth;
  unsigned skip_frames;
  unsigned flush_interval_ms;
  uint64_t segment_bytes;
  uint64_t disk_cap_bytes;
  unsigned payload_max;
  stkr_fork_mode fork_mode;
  stkr_symbolize_mode symbolize;
  unsigned exit_ms; /* added in 0.2; the end of the 0.3 layout */
  stkr_unwind_mode unwind; /* added after 0.3 (set `size` to use it) */
  /* What this process watches: the categories of its sites, the part of a
   * site's name before its first '.', comma-separated ("identifiers,
   * network,files"), at most STKR_WATCHED_MAX - 1 bytes of [a-z0-9_-] and
   * ','. Written into every segment's Header, so that an analysis can tell
   * a category not called from one not watched (`stackrec compliance`
   * names a rule over a category no process watched as not checked).
   * NULL or "": not said (the analyses then assume anything may have been
   * watched). Copied at stkr_init(). The hook library sets its
   * STACKREC_CATEGORIES. Added after 0.3 (set `size` to use it). */
  const char *watched;
  /* What the flush worker's table of the session's distinct stacks may
   * hold (each: ~60 bytes plus 8 a PC). Past it the table is renewed
   * between two batches, keeping the stacks threads are still sending as
   * known; a forgotten stack seen again is written again (a few bytes on
   * disk, one more definition for readers, which merge stacks by
   * content), never dropped. Added after 0.3 (set `size` to use it). */
  uint64_t stack_table_bytes;
  /* New fields go here, at the end only (see "ABI rules"). */
} stkr_config;

/* Declare the caller's layout (size) and leave every setting 0 (its
 * default): `stkr_config cfg = STKR_CONFIG_INIT;` in C, or
 * stkr_config_init(&cfg) (also from C++ and Swift). Needed only to set a
 * field added after 0.3; {0} stays valid. Compiled into the caller: it
 * records the caller's sizeof, never the library's. */
#ifndef __cplusplus
#define STKR_CONFIG_INIT { .size = sizeof(stkr_config) }
#endif
static inline void stkr_config_init(stkr_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
}

/*
 * A hook site: a name such as "privacy.clipboard.read", registered once.
 * Declare sites statically (STKR_SITE_DEFINE or the STKR_EVENT macro). The
 * recorder keeps a copy of the name, so a site may go with a library the
 * app unloads (dlclose) once no thread records at it; a site must not move
 * while it is in use. Fields are private.
 */
typedef struct stkr_site {
  const char *name;
  uint32_t id; /* 0 until registered; written once under the site lock */
} stkr_site;

#define STKR_SITE_INIT(site_name) { (site_name), 0 }
#define STKR_SITE_DEFINE(var, site_name) \
  static stkr_site var = STKR_SITE_INIT(site_name)

/* Record one event at a site named by a string literal, with an optional
 * payload (NULL, 0 for none). The site is registered on first use. */
#define STKR_EVENT(site_name, payload, payload_len)                   \
  do {                                                                \
    static stkr_site stkr__site_here = STKR_SITE_INIT(site_name);     \
    (void)stkr_event(&stkr__site_here, (payload), (payload_len));     \
  } while (0)

/* Counters, all since stkr_init(). Once stkr_flush() has returned,
 * attempted == written + dropped holds exactly for the events before it. */
typedef struct stkr_stats {
  uint64_t attempted;      /* stkr_event() calls while recording */
  uint64_t written;        /* events in batches that reached the disk */
  uint64_t dropped;        /* the sum of the five dropped_* below */
  uint64_t dropped_ring_full;
  uint64_t dropped_reentrant; /* signal handler interrupted an event */
  uint64_t dropped_write_error; /* batch could not be written */
  uint64_t dropped_other;  /* thread exiting, no memory for a ring, ... */
  uint64_t stacks;         /* distinct stacks seen (one that the worker's
                              table forgot, past stack_table_bytes, and
                              met again counts again) */
  uint64_t sites;          /* site ids taken: sites registered, and names
                              refused for their size (-ENOSPC), whose id
                              is not given back */
  uint64_t threads;        /* threads that recorded at least one event */
  uint64_t batches;        /* batches written */
  uint64_t bytes;          /* compressed bytes written */
  uint64_t segments;       /* segment files created that hold a batch */
  uint64_t segments_deleted; /* of this process's segments, deleted by the
                                disk cap at its own writes (another
                                process's it deletes leave a tombstone
                                that tells their owner's readers) */
  uint64_t write_errors;   /* failed writes (each drops one batch) */
  uint64_t dropped_exit;   /* still in anonymous rings when exit_ms ran
                              out: lost; and calls refused while
                              stkr_shutdown_for_exit ended the session
                              (also in `dropped`) */
  uint64_t pending_recovery; /* still in ring files when exit_ms ran out:
                              not lost, written out later by recovery
                              (stackrec recover, stackrec record, the next
                              stkr_init on the directory); not in
                              `dropped`. After a session ends,
                              attempted == written + dropped +
                              pending_recovery. */
} stkr_stats;

/* The library's version at run time: STKR_VERSION_NUMBER and
 * STKR_VERSION_STRING as it was built. Thread-safe; callable any time. */
STKR_API unsigned stkr_version(void);
STKR_API const char *stkr_version_string(void);

/*
 * Start recording: reads the environment, creates cfg->dir (mode 0700) and
 * starts the flush worker thread. cfg may be NULL (all defaults).
 * Notes: what the recorder cannot do (a bad field or variable, a directory
 * it cannot make, a write that failed, a recovery's or the symbolizer's
 * notes) is said in lines "stackrec: ..." on descriptor 2, at most one
 * of a kind a minute (a bad field or variable, a directory or file it
 * cannot make, and a process that records nothing are always said), and
 * only while descriptor 2 is still the file it was at stkr_init() (a
 * program that reopened it never finds them in its own file); never on
 * stdout. Under `stackrec record` they go to record's summary instead.
 * @return 0, -EALREADY if already recording, -EINVAL for a bad field or
 *         environment value (or a cfg->size below the 0.3 layout), -E2BIG
 *         when cfg->size is larger than this library's stkr_config and a
 *         field it does not know is set (see "ABI rules"), or the errno of a
 *         failed mkdir/open/thread start.
 */
STKR_API int stkr_init(const stkr_config *cfg);

/*
 * Stop recording: later events are ignored (-ENOTCONN, not counted); every
 * event recorded before the call is drained, symbolized and written, the
 * segment closed and the worker joined and freed. Producers are stopped
 * first, so this never waits on threads that keep recording (only, up to
 * 2 s, for one still inside an event to leave it), but its time grows
 * with what the rings hold (and with symbol loading in inproc mode):
 * when the process is about to end, use stkr_shutdown_for_exit() instead.
 * @return 0, -ENOTCONN when not recording, or -EIO when the last batch
 *         could not be written (a full disk): recording has stopped all
 *         the same, and what that batch held (events, the final counters)
 *         stays in the directory's ring and session files for recovery
 *         (`stackrec recover`, `stackrec record`, the next stkr_init);
 *         without a session file (rings in memory: one could not be made)
 *         its events are lost, counted as dropped_write_error.
 */
STKR_API int stkr_shutdown(void);

/*
 * The end of a session for a process that is about to end (exit, a return
 * from main, _exit, exec, a fatal-signal handler), bounded by exit_ms:
 * recording stops (later events return -ENOTCONN at once on the threads
 * that keep running until the process is gone, counted as dropped_exit:
 * the last batch's counters have those made before them, up to three more
 * batches of counters the later ones; those after the last, and after
 * this returns, are not counted); the rings are
 * drained until half the budget; stacks first seen now are written
 * unsymbolized (one resolution can cost the whole budget; PCs and the image
 * list stay, `stackrec symbolize` resolves them later; a stkr_flush() before
 * resolves everything); what is still in the rings is counted as
 * dropped_exit, and the last batch carries the totals. The worker is not
 * freed (no malloc lock is taken: it may be held by the thread an _exit
 * from a signal handler interrupted); a later stkr_init() frees it. Do not
 * call it from a signal handler that interrupted another stkr_ control call.
 * @return 0; -ENOTCONN when not recording; -ETIMEDOUT when the worker could
 *         not even write the last batch in time (a CPU starved by the app's
 *         busy threads, a write stuck on a slow disk): recording has stopped
 *         and the call returned on time, and the session lacks its end mark;
 *         -EIO when the last batch could not be written (as stkr_shutdown);
 *         -EBUSY when another stkr_ control call held the session for
 *         100 ms, a wait on top of exit_ms (the process ends with its
 *         events in the ring files). Control calls that come while it
 *         waits let it go first (a thread calling stkr_flush in a loop
 *         starved it before session 39).
 */
STKR_API int stkr_shutdown_for_exit(void);

/*
 * Barrier: returns once every event recorded (by any thread) before the call
 * is in a batch on disk, or was dropped and counted.
 * @return 0, -ENOTCONN if not recording, -EIO if a batch failed to write,
 *         -EDEADLK on the recorder's own threads (the flush worker would
 *         wait for itself).
 */
STKR_API int stkr_flush(void);

/*
 * stkr_flush, waiting at most timeout_ms: for a caller with a deadline (an
 * app sent to the background, a host about to dlclose a library whose
 * frames its threads just recorded: a stack is resolved against the images
 * of the moment the worker reads it, so one read after the unload loses
 * its names, or takes those of a library loaded at the same address next).
 * The hook library behind `stackrec record` calls it from dlclose (before
 * the unload, 100 ms at most). On -ETIMEDOUT the worker still writes those
 * events, later. Not from a signal handler.
 * @return 0, -ENOTCONN if not recording, -EIO if a batch failed to write,
 *         -ETIMEDOUT, -EDEADLK on the recorder's own threads (the flush
 *         worker: it would wait for itself), -ENOMEM. Added in 0.3 (session
 *         30): a library built before it lacks the symbol.
 */
STKR_API int stkr_flush_timeout(unsigned timeout_ms);

/* Fill *out with the current counters. Cheap; may be called any time. */
STKR_API int stkr_stats_get(stkr_stats *out);

/*
 * Tell the recorder that the process is loading or unloading images
 * (dlopen, dlclose). Without it the worker notices a new image at its next
 * pass (every flush_interval_ms), and until then the image's frames have no
 * unwind table (STKR_UNWIND_TABLES: a stack through them may end there) and
 * no entry in the image list. After this call the worker looks every 1 ms
 * until the list changes (for 1 s at most), then for 100 ms more, so a
 * call just before dlopen is enough. The hook
 * library behind `stackrec record` calls it from its dlopen and dlclose.
 * Cheap (a store and, if a worker runs, a semaphore post), thread-safe and
 * async-signal-safe; does nothing when not recording.
 */
STKR_API void stkr_images_changed(void);

/*
 * Record an event at `site` for the calling thread: monotonic time, site,
 * thread, the caller's stack (the frame that called stkr_event is the first
 * PC), and up to payload_max bytes of payload (longer payloads are cut and
 * marked truncated).
 *
 * Cost: after the thread's first event, no malloc, no lock and no system
 * call but the clock. The thread's first event allocates its ring (mmap) and
 * looks up its stack bounds; a thread may call stkr_thread_attach() ahead of
 * time to pay that outside any hook. In a forked child that follows its
 * parent (STKR_FORK_FOLLOW), the child's first event starts its recording
 * (its files, its worker: ~1 ms); an event of another thread meanwhile
 * waits for that start, at most 1 s past its beginning (then -ENOTCONN,
 * as before a start); never an event of the starting thread's own signal
 * handlers.
 *
 * Signals: async-signal-safe once the thread is attached. An event from a
 * signal handler that interrupted an event on the same thread is dropped and
 * counted (dropped_reentrant), never corrupts the ring. A handler that
 * siglongjmps out of an event it interrupted leaves the thread marked as
 * inside one: its later events are dropped as dropped_reentrant (counted,
 * never lost silently) until the thread ends; a thread of such a program
 * should not record from code a jumping handler can interrupt.
 * A vfork() child shares its parent's memory: an event it records before
 * its exec is written as the parent's, by the parent's thread.
 *
 * @return 0 if recorded, -EAGAIN if dropped (ring full or re-entered,
 *         counted as dropped_ring_full / dropped_reentrant; or no ring for
 *         this thread: the process's ring memory used up by live threads,
 *         the thread exiting, or its first event interrupted by a signal
 *         handler of its own; or no site id left, STKR_MAX_SITES taken:
 *         counted as dropped_other),
 *         -ENOTCONN if not recording, -ENOMEM if no ring could be allocated,
 *         -EPERM on the recorder's own worker thread (never recorded),
 *         -EINVAL for a NULL site or one whose name stkr_site_register
 *         refuses (not counted: no event).
 */
STKR_API int stkr_event(stkr_site *site, const void *payload, size_t payload_len);

/*
 * stkr_event, leaving out `skip` more innermost frames than the config's
 * skip_frames: for a language binding whose own functions stand between
 * the app's hook and the recorder (the Swift API passes 1, its public
 * function), so that skip_frames counts the app's wrapper frames alone,
 * the same for hooks written in C and through the binding. At most
 * STKR_MAX_DEPTH frames are skipped in all. Added in 0.3 (session 30).
 * @return as stkr_event.
 */
STKR_API int stkr_event_skip(stkr_site *site, const void *payload,
                             size_t payload_len, unsigned skip);

/* Allocate the calling thread's ring and cache its stack bounds now. In a
 * forked child that follows its parent (STKR_FORK_FOLLOW) and has not
 * recorded yet, this starts the child's recording first, as its first
 * event would: what the hook library does before such a child forks in
 * turn, so that its own children's parent is in the recording.
 * @return 0, or as stkr_event (-ENOTCONN: not recording). */
STKR_API int stkr_thread_attach(void);

/* The calling thread renamed itself (pthread_setname_np, prctl
 * PR_SET_NAME): its later events carry the new name, its earlier ones keep
 * the name they were made under (in the files, a new thread id of the same
 * tid from the rename on). The hook library behind `stackrec record` calls
 * it from its pthread_setname_np and prctl; an app that embeds the
 * recorder and renames threads calls it after the rename. Not told apart:
 * a thread renamed by another thread (until it renames itself), events
 * recovered after a crash (under the thread's last name), and more than 8
 * renames of one thread between two passes
 * of the worker (the later ones keep the 8th's name until the next; a
 * note says so).
 * Cost: the name is read and compared; a change writes a small queue in
 * the thread's state, which the worker reads. Thread-safe; async-signal-
 * safe (inside an event, a signal handler's rename is not told); does
 * nothing when not recording. */
STKR_API void stkr_thread_renamed(void);

/* Register a site now (stkr_event does it on first use).
 * @return 0, -ENOSPC past STKR_MAX_SITES (or 1 MiB of names: the name's
 *         id is taken all the same, and not given back: another thread
 *         may have taken the next one meanwhile), -EINVAL for a NULL/empty name or one
 *         beginning with "mark:" (reserved for marks: stkr_mark). */
STKR_API int stkr_site_register(stkr_site *site);

/* ---- marks (issue 13) ----------------------------------------------------
 * A mark says that something happened to the app as a whole, for the
 * analyses that ask what came before or after it: "consent.granted",
 * "consent.revoked", "app.background", "app.foreground", "screen.Checkout"
 * (states between a mark and its opposite: tools/stackrec/states.h).
 * A mark is recorded as an event at a site of its own, named "mark:NAME"
 * (site names beginning with "mark:" are reserved for marks), so it carries
 * the recording's clock, the calling thread, the setter's stack and the
 * payload, and is ordered against the process's events by that clock. The
 * reader hands it out as an event with is_mark set and site = NAME
 * (proto/stkr_reader.h). A harness outside the process sets marks with
 * `stackrec mark DIR NAME [PAYLOAD]` instead. */
#define STKR_MARK_NAME_MAX 64 /* bytes of a mark name */
#define STKR_MAX_MARKS 256    /* distinct mark names per process (each is
                                 also one of the STKR_MAX_SITES sites) */

/*
 * The site of mark `name` (1 to STKR_MARK_NAME_MAX bytes of [A-Za-z0-9._-],
 * copied), created and registered on first use: stkr_event(*out, ...) then
 * records the mark. For callers that cannot use the inline stkr_mark()
 * (through dlsym, from another language). Takes a lock the first time a
 * name is seen: not async-signal-safe. Thread-safe.
 * @return 0; -EINVAL (name invalid, out NULL); -ENOSPC past STKR_MAX_MARKS
 *         names or STKR_MAX_SITES sites.
 */
STKR_API int stkr_mark_site(const char *name, stkr_site **out);

/*
 * Record mark `name` with an optional payload (NULL, 0), as stkr_event()
 * records an event: the stack is the caller's (inlined, so that the frame
 * that called stkr_mark is the first PC, as for stkr_event; skip_frames
 * applies). Not async-signal-safe the first time a name is seen
 * (stkr_mark_site); afterwards as stkr_event().
 * @return 0; the errors of stkr_mark_site() and of stkr_event() (a mark
 *         can be dropped and counted like any event when the ring is full).
 */
static inline __attribute__((always_inline)) int
stkr_mark(const char *name, const void *payload, size_t payload_len) {
  stkr_site *site;
  int err = stkr_mark_site(name, &site);

  return err != 0 ? err : stkr_event(site, payload, payload_len);
}
/* ---- end of marks -------------------------------------------------------- */

/* Check the STACKREC_* environment as stkr_init() would read it (the same
 * parser), without starting anything: for launchers that set up a recorder
 * in another process (stackrec record) and must refuse a bad value first.
 * Writes nothing to stderr. Thread-safe (reads the environment).
 * @return 0, or -EINVAL with "invalid NAME="VALUE": reason" in why (always
 *         NUL-terminated when len > 0), or -ENOMEM. */
STKR_API int stkr_config_check_env(char *why, size_t len);

/* Take the STACKREC_* variables as they are now: from then on stkr_init()
 * (and stkr_config_check_env, stkr_config_env) read this copy, not the
 * environment. For a recorder whose settings are checked long before it
 * starts (stackrec's hook library: checked at load, started at the
 * process's first event), so that a program that clears or rewrites its
 * environment meanwhile (clearenv, os.environ.clear()) is recorded as it
 * was told. Once per process (a later call keeps the first copy, a forked
 * child inherits it). Call it before other threads use the recorder.
 * @return 0, or -ENOMEM (then the environment is read as before). */
STKR_API int stkr_config_freeze_env(void);

/* The value of STACKREC_* variable `name` as stkr_init() reads it: the
 * frozen copy once stkr_config_freeze_env() ran, else getenv(name). NULL
 * when unset (or name is NULL). Thread-safe (the copy is never changed or
 * freed). */
STKR_API const char *stkr_config_env(const char *name);

/* ---- Sampling another thread of this process; the hang watchdog --------
 * (recorder/sample.c, sample_linux.c, sample_apple.c, watchdog.c)
 *
 * A thread that may be sampled registers itself once with
 * stkr_thread_self() and hands the handle to whoever samples it. A sample
 * is recorded as an event of the *target* thread (its ring, its thread id)
 * at the given site; its first PC is where the target was interrupted.
 *
 * Linux: a real-time signal (default SIGRTMAX-7; STACKREC_SAMPLE_SIGNAL=N,
 * RTMIN+N or RTMAX-N picks another) is sent with tgkill; the target's
 * handler walks the frame pointers of the interrupted context (its own
 * frames are not in the stack) and pushes the record into its own ring.
 * The sampler waits for the answer at most timeout_ms. If the app has its
 * own handler on that signal, sampling refuses (-EBUSY) rather than chain
 * (a chained handler could not tell our requests from the app's signals):
 * pick another number with STACKREC_SAMPLE_SIGNAL. The handler, installed
 * at the first stkr_thread_self(), stays for the rest of the process, past
 * stkr_shutdown(): a request still on its way would otherwise meet the
 * signal's default action, which ends the process. The target sees the
 * signal like any: a call that is never restarted after a handler (poll,
 * epoll_wait, nanosleep, pause, sigsuspend, ...) returns EINTR there.
 * Apple (not run on a device): thread_suspend, thread_get_state, the same
 * bounded walk, thread_resume; nothing that can take a lock runs while the
 * target is suspended.
 * Frames of code built without frame pointers (Debian's libc) are seen
 * only as the interrupted PC: the caller of such a function is missing.
 */
typedef uint64_t stkr_thread_handle; /* 0 is never a valid handle */

/* Register the calling thread for sampling (idempotent) and attach it (its
 * ring). The registration ends when the thread exits; later samples of the
 * handle return -ESRCH. Thread-safe.
 * @return 0; -ENOTCONN when not recording; -ENOSPC when 64 threads are
 *         registered; -EDEADLK when the thread blocks the sampling signal;
 *         -EBUSY when the app has a handler on that signal; -EINVAL for a
 *         malformed STACKREC_SAMPLE_SIGNAL; -EPERM on the recorder's own
 *         threads. */
STKR_API int stkr_thread_self(stkr_thread_handle *out);

/*
 * Record the current stack of thread `target` at `site`, with a payload
 * (copied, up to 256 bytes). Waits for the target at most timeout_ms (0:
 * 100 ms); never longer. One sample of a target at a time (a concurrent
 * one returns -EALREADY). Thread-safe; not from a signal handler; not on
 * the target thread itself (use stkr_event there).
 * @return 0 recorded; -EAGAIN the target's event was dropped (it was
 *         interrupted inside an event: dropped_reentrant; or its ring was
 *         full); -ETIMEDOUT no answer in time (the thread is stopped or
 *         starved); -EDEADLK the thread blocks the sampling signal; -ESRCH
 *         the thread exited (or an unknown handle); -EBUSY the app has a
 *         handler on the signal; -EALREADY another sample of this target
 *         is under way; -EINVAL the calling thread is the target, a NULL
 *         site or one whose name is refused ("mark:...": stkr_site_register);
 *         -ENOTCONN not recording. Every outcome but -EINVAL and -ENOTCONN
 *         (no sample was asked) is counted (stkr_sample_stats_get).
 */
STKR_API int stkr_thread_sample(stkr_thread_handle target, stkr_site *site,
                       const void *payload, size_t payload_len,
                       unsigned timeout_ms);

/* Counters of sampling and of the watchdog since the process started. */
typedef struct stkr_sample_stats {
  uint64_t requested;  /* samples asked of a live handle (stkr_thread_sample,
                        * watchdog), those then refused before any signal
                        * too (-EBUSY, -EALREADY, -ESRCH for a thread found
                        * exiting); a stale handle counts in exited only */
  uint64_t recorded;   /* samples pushed into the target's ring */
  uint64_t walked;     /* watchdog samples taken (compared, not pushed) */
  uint64_t timed_out;  /* -ETIMEDOUT */
  uint64_t blocked;    /* -EDEADLK */
  uint64_t exited;     /* -ESRCH */
  uint64_t busy;       /* -EBUSY and -EALREADY */
  uint64_t dropped;    /* -EAGAIN: the target's event was dropped */
  uint64_t hangs;      /* watchdog: hangs detected */
  uint64_t hang_samples; /* watchdog: samples taken during hangs */
  uint64_t hang_runs;  /* watchdog: runs of identical stacks recorded */
  uint64_t hang_runs_lost; /* runs the target never took (it exited) */
} stkr_sample_stats;

/* Fill *out. Any thread, any time. @return 0, -EINVAL for NULL. */
STKR_API int stkr_sample_stats_get(stkr_sample_stats *out);

/*
 * The hang watchdog: one thread of the recorder's own that watches a
 * thread (the one that calls stkr_watchdog_start, normally the main thread,
 * unless opts->target names another) through a heartbeat: the watched
 * thread's run loop calls stkr_watchdog_tick() each time round, and
 * stkr_watchdog_idle() before it waits for input (not a hang). When no
 * tick came for threshold_ms, the thread is sampled every interval_ms
 * until it ticks again. Consecutive identical stacks are one event at site
 * "watchdog.hang" with payload "hang=ID ms=D samples=N first_ms=F" (D: the
 * hang's duration at the run's last sample; F: at its first); the end of
 * the hang is an event at "watchdog.recovered" with
 * "hang=ID ms=TOTAL samples=N". These events are pushed by the watched
 * thread itself (its next tick, or its signal handler at the next sample),
 * so a run appears when the stack changes or the hang ends.
 * The watchdog thread holds no descriptor, never records, and ends with
 * stkr_watchdog_stop(), stkr_shutdown() or stkr_shutdown_for_exit().
 * Defaults (0 fields): threshold_ms 250, interval_ms 50.
 */
typedef struct stkr_watchdog_opts {
  stkr_thread_handle target; /* 0: the calling thread */
  unsigned threshold_ms;
  unsigned interval_ms;
} stkr_watchdog_opts;

/* @return 0; -EALREADY when one runs; -ENOTCONN when not recording; the
 *         errors of stkr_thread_self(); -EAGAIN when the thread could not
 *         be started. opts may be NULL. Control call: not concurrently with
 *         stkr_watchdog_stop or stkr_shutdown. */
STKR_API int stkr_watchdog_start(const stkr_watchdog_opts *opts);
/* Stop and join the watchdog; a hang in progress is recorded first (its
 * current run). Bounded: at most about min(interval_ms, 100) + 170 ms;
 * from stkr_shutdown_for_exit at most 50 ms (then the thread is left
 * detached, and a later stkr_watchdog_start returns -EBUSY until it ends).
 * @return 0, or -ENOTCONN when none runs. */
STKR_API int stkr_watchdog_stop(void);
/* Heartbeat of the watched thread: a relaxed store, plus (after a hang)
 * pushing the hang's last run and its recovery. Lock-free; no syscall but
 * the clock after a hang. */
STKR_API void stkr_watchdog_tick(void);
/* The watched thread is about to wait for input: not a hang until its
 * next tick. */
STKR_API void stkr_watchdog_idle(void);

/* 1 if `fd` is a descriptor the recorder keeps open in this process (its
 * session file's, its current segment's) and still names that file, else
 * 0 (never an error). For code that manages the descriptor table: those
 * numbers are best treated as free (the recorder notices when the program
 * closes them or puts its own file there, and goes on with new ones). The
 * hook library of `stackrec record` answers fcntl(fd, F_GETFD) on them
 * with EBADF: bash takes an open close-on-exec descriptor of 10 or more
 * for a copy of its own and restores it after `exec N>f`, which sent a
 * script's writes into the recording. Thread-safe and async-signal-safe. */
STKR_API int stkr_fd_owned(int fd);

/* Text for a value returned by any stkr_ call (0 or a negative errno). */
STKR_API const char *stkr_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* STACKREC_H */
