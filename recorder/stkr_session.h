/*
 * stkr_session.h: session and ring files (ringfile.c, ringpool.c,
 * ringcache.c), part of recorder/stkr_internal.h (which includes it; apart
 * to keep that header readable). Not public.
 *
 * A recording session's session file (header + site names, mapped) and its
 * liveness lock; see common/stkr_ringfile.h for the layout and the rules.
 * Control calls (open, close, check) come from the thread that runs
 * stkr_init/stkr_shutdown or from the worker; never concurrently. */

#ifndef STKR_SESSION_H
#define STKR_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_ringfile.h"
#include "recorder/stkr_ring.h"

/* Create the session file in `dir` (absolute; copied), lock it, map it,
 * copy the sites registered so far; later rings are files of this
 * session. `tmpl`: who, when and with which settings (session_id, pid,
 * parent_pid, start_*, process_name, arch, symbolize and the Config
 * fields, strings NUL-terminated; the rest is ignored): the flush worker fills it once and starts
 * its segments' Header from the same struct (stkr_fmt_header_from_session),
 * so the file and the segments say the same. 0 or -errno (then rings stay
 * anonymous: the recording works, without crash-proofing). */
int stkr__session_open(const char *dir, const stkr_sessfile_hdr *tmpl);
/* End the session. `leftovers`: records stay in ring files (a bounded exit
 * ran out of time): keep every file for recovery. Otherwise unlink the
 * session file; ring files of live threads are unlinked (or pooled) and
 * their rings keep working from the unlinked mappings until re-backed or
 * freed. until_ns (CLOCK_MONOTONIC; 0: none): an exit's deadline, past
 * which the remaining ring files are only unlinked (not pooled). */
void stkr__session_close(bool leftovers, uint64_t until_ns);
/* Worker, once per drain pass: is the lock descriptor still ours (the app
 * may have closed or replaced it)? If not, lock again through a new one.
 * Returns false when the session had to be given up. */
bool stkr__session_check(void);
/* The directory the session file is in now (it follows a rename of the
 * recording directory; its descriptor's identity checked), into out (cap
 * bytes). @return false when not known (no session file, its descriptor
 * not ours, not Linux). Worker thread. */
bool stkr__session_dir_now(char *out, size_t cap);
/* Worker, after each batch's write or failed attempt (not a failure at the
 * session's end, whose number recovery's batch takes): the highest stack
 * id and Batch.seq used so far, into the session file (see stkr_sessfile_hdr). */
void stkr__session_note(uint32_t max_stack_id, uint64_t batch_seq);
/* The session file's drops (stkr_sessfile_hdr: drops_other, retired_*),
 * as a batch's counters read them (stkr__threads_counts_mark). */
typedef struct stkr__sess_drops {
  uint64_t other, retired_full, retired_reentrant;
} stkr__sess_drops;
/* In session_drops.c. drops_other: add one (any thread, with
 * stkr__count_dropped_other). _retire: add a reaped thread's drops that
 * no written batch counted (worker). _note: read retired_* into *out
 * (worker). _pend: store the noted values as pending for batch seq, where
 * they differ from counted_* (worker, before that batch's write;
 * common/stkr_ringfile.h, "pending"). _commit: store the noted values as
 * counted_* (worker, after that batch's write). _worker: add n of the
 * flush worker's drops (records it read but could not hold) to
 * drops_other, right before the release of their records (the worker; a
 * batch's dropped_other counts them, so counted_other does too). _reset:
 * zero them all (the start, no producer active). mark_dropped: add one
 * (any thread). No-ops without a session file. add_u64 (ringfile.c): add
 * n at byte off of the header, any thread, never after the unmap. */
void stkr__session_drop_other(void);
/* drop_late: a call refused while an exit ended the session (drops_late,
 * stkr__late_call: any thread). */
void stkr__session_drop_late(void);
void stkr__session_mark_dropped(void);
void stkr__session_add_u64(size_t off, uint64_t n);
void stkr__session_drops_worker(uint64_t n);
void stkr__session_drops_retire(uint64_t full, uint64_t reentrant);
void stkr__session_drops_note(stkr__sess_drops *out);
void stkr__session_drops_pend(const stkr__sess_drops *noted, uint64_t seq);
void stkr__session_drops_commit(const stkr__sess_drops *noted);
void stkr__session_drops_reset(void);
/* The worker's dropped_write_error (cumulative since the start) into the
 * session file, at each failed batch (worker). No-op without a session. */
void stkr__session_write_errors(uint64_t total);
/* The session file's header as mapped (acquire), NULL when no session is
 * open. Valid while the worker runs (ringfile.c unmaps it only after). */
stkr_sessfile_hdr *stkr__session_hdr(void);
/* The event clock's calibration, into the session file (see
 * stkr_sessfile_hdr.clock). Worker, or the start. No-op without session. */
void stkr__session_clock(const stkr_clock_cal *cal);
/* The ring size of the current session's config (0: none). */
size_t stkr__session_ring_bytes(void);
/* The current session's id, 0 if none. */
uint64_t stkr__session_current(void);
/* The current session's directory (absolute), NULL if none. The control
 * thread or the worker (it changes only when a session opens). */
const char *stkr__session_dir(void);
/* open(path, flags | O_CLOEXEC, 0600) moved to a descriptor >= 1000 whose
 * identity (it is the file at path) was checked: see cachedir.c. The
 * descriptor or -errno. */
int stkr__open_high(const char *path, int flags);
/* The session directory's shared cache (STKR_CACHE_DIR, cachedir.c): what
 * processes of one recording share to start faster. Control thread or
 * worker; may allocate. A file's contents are untrusted: validate them.
 * read: the whole file `name` (at most max_bytes) into *out (malloc'd,
 * caller frees). 0, or -ENOENT (no file, or no session), -EINVAL (not a
 * regular file, empty or too large), -errno.
 * write: buf as `name`, atomically (a temporary file renamed over it;
 * the directory made if missing). 0 or -errno. */
int stkr__cache_read(const char *name, size_t max_bytes, void **out,
                     size_t *len);
int stkr__cache_write(const char *name, const void *buf, size_t len);
/* open: the file `name` for reading (a high descriptor, the caller closes
 * it), or -errno (-ENOENT: no file, or no session). */
int stkr__cache_open(const char *name);
/* The pool of ring and session files of a recording (ringpool.c), kept in
 * dir's shared cache instead of deleted. take: rename a pooled file of
 * `kind` ("ring", "session") and exactly `bytes` to path (locked first
 * with flock when `lock`), @return its descriptor (high, close-on-exec)
 * or -ENOENT (none), -EEXIST (path exists), -ENOSYS (no pool here); the
 * caller clears its header. put: move the file at path into the pool's
 * first `slots` of the kind; nothing of ours may map it any more.
 * @return false if it was not moved (those full, no support): the caller
 * unlinks it. */
int stkr__pool_take(const char *dir, const char *kind, size_t bytes, bool lock,
                    const char *path);
bool stkr__pool_put(const char *dir, const char *kind, const char *path,
                    unsigned slots);
/* The most files of one kind the pool keeps; put uses the first `slots`
 * (at most this) of them. */
#define STKR__POOL_SLOTS 16
/* Bytes of a path under a recording directory of dir_len bytes: the
 * directory, "/" STKR_CACHE_DIR "/", a prefix ("new-", "pool-") and a file
 * name of at most STKR_RINGFILE_NAME_MAX bytes with its NUL. Path buffers
 * on the ring's and session's paths are sized with it (variable-length
 * arrays), not PATH_MAX: a thread's first event creates its ring on the
 * program's own stack, where PATH_MAX buffers took ~21 KB and overflowed a
 * thread of PTHREAD_STACK_MIN (16 KiB) stack: SIGSEGV in the app. */
#define STKR__DIR_PATH_BYTES(dir_len) \
  ((dir_len) + sizeof("/" STKR_CACHE_DIR "/pool-") + STKR_RINGFILE_NAME_MAX)
/* A site was given an id (site.c): store its name in the session file.
 * Lock-free, no system call: a memcpy into the mapping. */
void stkr__session_site_added(uint32_t id, const char *name);
/* Forked child: drop the parent's session (unmap, close the child's copy
 * of the lock descriptor so that the parent's death stays visible). */
void stkr__session_forget_after_fork(void);
/* Around anything that hands a ring file of the session to a place a
 * session close cleans: a thread's attach (from before it takes a ring to
 * after it is in the thread list), the worker's prefill and keep (into
 * the cache). Close waits (bounded) for every thread in between, so that
 * it finds every such ring (ringfile.c). Nests. */
void stkr__ringfile_enter(void);
void stkr__ringfile_leave(void);
/* A ring file of the current session for thread `thread_id`: a kept one
 * (see stkr__ringfile_keep) re-owned, else a new file, sized and mapped;
 * *ctl gets the mapping (total = header page + ring). -ENOENT when there
 * is no session. */
int stkr__ringfile_map(uint64_t ring_size, uint32_t thread_id, uint64_t os_tid,
                       const char *name, stkr__ring_ctl **ctl,
                       uint64_t *session);
/* Worker, once per drain pass: make ring files ahead (so that the cache
 * holds at least STKR_RINGFILE_PREFILL), so that starting threads need
 * not create files. */
void stkr__ringfile_prefill(void);
/* Unlink the ring file <n> = file_no of session, a ring of ring_size
 * bytes (its file goes to the pool of its size if there is room). No-op
 * for session 0. */
void stkr__ringfile_unlink(uint64_t session, uint32_t file_no,
                           uint64_t ring_size);
/* Keep an empty, released ring of the current session for the next thread
 * that starts (stkr__ringfile_map takes it). False: not kept (another
 * session, or the cache is full); the caller unmaps it. Worker. */
bool stkr__ringfile_keep(stkr__ring_ctl *c, uint64_t session);
/* Rings that had to fall back to anonymous memory (no session file, or
 * creating the file failed). Monotone; relaxed. */
uint64_t stkr__ringfile_fallbacks(void);
/* The ring cache (ringcache.c): rings of the current session, empty,
 * released and mapped, for threads about to start; the worker puts, any
 * starting thread takes. _bytes: c's mapping (header page + ring). _take:
 * a cached ring of ring_size bytes of `session`, now the caller's, or
 * NULL. _put: into a free slot, false if none (use stkr__ringfile_keep,
 * which checks the session). _drop: unmap an owned ring, its file to the
 * pool or unlinked. _clear: every ring unmapped, its file unlinked (or
 * pooled) if asked. _wanted: how many rings of `size` to make so that
 * `want` are cached (at most the free slots; with none free, one ring of
 * another size is dropped, one a call; worker). */
size_t stkr__ringcache_bytes(const stkr__ring_ctl *c);
stkr__ring_ctl *stkr__ringcache_take(uint64_t ring_size, uint64_t session);
bool stkr__ringcache_put(stkr__ring_ctl *c);
void stkr__ringcache_drop(stkr__ring_ctl *c);
void stkr__ringcache_clear(bool unlink_files);
int stkr__ringcache_wanted(uint64_t size, int want);
/* A fresh random non-zero session id (getrandom, else clock and pid). The
 * one place session ids come from. */
uint64_t stkr__session_id_new(void);

#endif /* STKR_SESSION_H */
