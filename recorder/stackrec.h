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
 * stkr_shutdown() and stkr_flush() must not race with each other; call them
 * from one controlling thread.
 */
#ifndef STACKREC_H
#define STACKREC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STKR_VERSION_MAJOR 0
#define STKR_VERSION_MINOR 2

/* Limits that bound every buffer on the hot path. */
#define STKR_MAX_DEPTH 256        /* hard cap on max_depth */
#define STKR_MAX_SITES 4096       /* distinct hook sites per process */
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
 *   segment_bytes       STACKREC_SEGMENT_BYTES    67108864 (64 MiB)
 *   disk_cap_bytes      STACKREC_DISK_CAP_BYTES   1073741824 (1 GiB)
 *   payload_max         STACKREC_PAYLOAD_MAX      256 (at most STKR_MAX_PAYLOAD)
 *   fork_mode           STACKREC_FORK             STKR_FORK_DISABLE
 *                                                 ("disable" or "follow")
 *   symbolize           STACKREC_SYMBOLIZE        STKR_SYMBOLIZE_INPROC
 *                                                 ("inproc", "offline", "none")
 *   exit_ms             STACKREC_EXIT_MS          100 (1 to 60000)
 *
 * exit_ms bounds stkr_shutdown_for_exit(), which the preload library calls
 * at exit, return from main, _exit and exec (see there). There is no
 * "unbounded" value: 0 means the default.
 *
 * STACKREC_APP_PATHS (environment only): colon-separated path prefixes of
 * the app's own images; with the main executable they are the "app" frames
 * (stackrec dump --app-only).
 *
 * A field set in the struct wins over the environment. Sizes in the
 * environment accept a K, M or G suffix. A malformed environment value makes
 * stkr_init() fail with -EINVAL and name the variable on stderr.
 */
typedef struct stkr_config {
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
  unsigned exit_ms; /* added in 0.2: keep last */
} stkr_config;

/*
 * A hook site: a name such as "privacy.clipboard.read", registered once.
 * Declare sites statically (STKR_SITE_DEFINE or the STKR_EVENT macro); the
 * recorder keeps a pointer to the site for the life of the process, so a
 * site must never be freed or moved. Fields are private.
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
  uint64_t stacks;         /* distinct stacks seen */
  uint64_t sites;          /* sites registered */
  uint64_t threads;        /* threads that recorded at least one event */
  uint64_t batches;        /* batches written */
  uint64_t bytes;          /* compressed bytes written */
  uint64_t segments;       /* segment files created */
  uint64_t segments_deleted; /* removed to stay under disk_cap_bytes */
  uint64_t write_errors;   /* failed writes (each drops one batch) */
  uint64_t dropped_exit;   /* still in anonymous rings when exit_ms ran
                              out: lost (also in `dropped`) */
  uint64_t pending_recovery; /* still in ring files when exit_ms ran out:
                              not lost, written out later by recovery
                              (stackrec recover, stackrec record, the next
                              stkr_init on the directory); not in
                              `dropped`. After a session ends,
                              attempted == written + dropped +
                              pending_recovery. */
} stkr_stats;

/*
 * Start recording: reads the environment, creates cfg->dir (mode 0700) and
 * starts the flush worker thread. cfg may be NULL (all defaults).
 * @return 0, -EALREADY if already recording, -EINVAL for a bad field or
 *         environment value, or the errno of a failed mkdir/open/thread start.
 */
int stkr_init(const stkr_config *cfg);

/*
 * Stop recording: later events are ignored (-ENOTCONN, not counted); every
 * event recorded before the call is drained, symbolized and written, the
 * segment closed and the worker joined and freed. Producers are stopped
 * first, so this never waits on threads that keep recording, but its time
 * grows with what the rings hold (and with symbol loading in inproc mode):
 * when the process is about to end, use stkr_shutdown_for_exit() instead.
 * @return 0, or -ENOTCONN when not recording.
 */
int stkr_shutdown(void);

/*
 * The end of a session for a process that is about to end (exit, a return
 * from main, _exit, exec, a fatal-signal handler), bounded by exit_ms:
 * recording stops (later events return -ENOTCONN at once, not counted, on
 * the threads that keep running until the process is gone); the rings are
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
 *         and the call returned on time, and the session lacks its end mark.
 */
int stkr_shutdown_for_exit(void);

/*
 * Barrier: returns once every event recorded (by any thread) before the call
 * is in a batch on disk, or was dropped and counted.
 * @return 0, -ENOTCONN if not recording, -EIO if a batch failed to write.
 */
int stkr_flush(void);

/* Fill *out with the current counters. Cheap; may be called any time. */
int stkr_stats_get(stkr_stats *out);

/*
 * Record an event at `site` for the calling thread: monotonic time, site,
 * thread, the caller's stack (the frame that called stkr_event is the first
 * PC), and up to payload_max bytes of payload (longer payloads are cut and
 * marked truncated).
 *
 * Cost: after the thread's first event, no malloc, no lock and no system
 * call but the clock. The thread's first event allocates its ring (mmap) and
 * looks up its stack bounds; a thread may call stkr_thread_attach() ahead of
 * time to pay that outside any hook.
 *
 * Signals: async-signal-safe once the thread is attached. An event from a
 * signal handler that interrupted an event on the same thread is dropped and
 * counted (dropped_reentrant), never corrupts the ring.
 *
 * @return 0 if recorded, -EAGAIN if dropped (ring full or re-entered),
 *         -ENOTCONN if not recording, -ENOMEM if no ring could be allocated,
 *         -EPERM on the recorder's own worker thread (never recorded).
 */
int stkr_event(stkr_site *site, const void *payload, size_t payload_len);

/* Allocate the calling thread's ring and cache its stack bounds now. */
int stkr_thread_attach(void);

/* Register a site now (stkr_event does it on first use).
 * @return 0, -ENOSPC past STKR_MAX_SITES, -EINVAL for a NULL/empty name. */
int stkr_site_register(stkr_site *site);

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
int stkr_mark_site(const char *name, stkr_site **out);

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
int stkr_config_check_env(char *why, size_t len);

/* Text for a value returned by any stkr_ call (0 or a negative errno). */
const char *stkr_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* STACKREC_H */
