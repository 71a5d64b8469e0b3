/*
 * stkr_reader.h: streaming reader of stackrec recordings, for tools.
 *
 * A recording is a directory of segment files "stackrec-<pid>-<seq>.zst"
 * (see proto/stackrec.proto). Each pid is one recording stream (a
 * "process"); the reader visits processes in ascending pid order and, within
 * one, segments in seq order, and hands out one event at a time.
 *
 * Memory is bounded whatever the input: files are read through a fixed
 * buffer, one zstd frame (one Batch) is decoded at a time, and a batch that
 * declares more than STKR_FMT_MAX_BATCH_BYTES is rejected before anything is
 * allocated for it. What grows with the input is only the definition tables
 * (sites, threads, stacks, images) of the processes read.
 *
 * One pid in one directory may hold several recording sessions: a process
 * that called stkr_init() again, or a later process that got the same pid
 * (the writer then continues the seq numbers). A Header with other start
 * times, or a Batch.seq that goes backwards, starts a new session: ids are
 * forgotten (they restart in each session) and per-session counters are
 * summed. The process summary covers all sessions of the pid.
 *
 * Damage never stops reading: a truncated batch, a batch failing its
 * checksum, zstd or protobuf decoding, or with inconsistent columns is
 * reported through the warning callback (naming the file and byte offset),
 * skipped, and reading resumes at the next intact zstd frame.
 *
 * A recording still being written is read as far as it goes: a batch cut
 * off at the end of the LAST segment of a process whose recording has not
 * ended cleanly (no batch with last=true read in its current session) is
 * the batch the writer is appending right now, not damage. It is skipped
 * with a STKR_WARN_LIVE_TAIL note (data_lost false; not counted in
 * damaged_batches) and stkr_process_info.live_tail is set. A writer killed
 * mid-batch leaves the same bytes and is reported the same way. A cut-off
 * batch anywhere else (an earlier segment, or after a clean end) is
 * STKR_WARN_TRUNCATED damage. An event whose site/thread/stack id has no
 * definition is delivered with site "?" and an empty stack and counted as
 * unresolved. Only a process recorded in a newer format version is refused
 * (warning STKR_WARN_UNSUPPORTED, its remaining batches skipped).
 *
 * Accounting. Per session, the recorder's Counters satisfy
 *   attempted == written + dropped (by reason) + recovered
 * once it has ended cleanly. The reader checks this against what it read:
 * a session that ended cleanly with nothing missing must add up exactly
 * (else STKR_WARN_INCONSISTENT, accounting_mismatches); elsewhere the
 * shortfall is `unaccounted`. What makes a recording incomplete though
 * intact (stkr_process_info.incomplete) is reported as STKR_WARN_INCOMPLETE
 * findings (stkr_reader_opts.incomplete) naming the file, session and
 * counts; drops are in the summary.
 * Recovered batches make a recording complete again: they are counted, not
 * reported as incomplete.
 *
 * Marks (issue 13; recorder/stackrec.h stkr_mark, `stackrec mark`). A
 * mark is delivered by stkr_reader_next() as an event with is_mark true,
 * site = the mark's name ("consent.granted", without the "mark:" prefix
 * its site has on disk), payload = its payload, ts_ns/wall_ns on the clock
 * of the events (CLOCK_MONOTONIC of the machine, which is one clock for
 * every process of a recording made on one machine), pid/process/proc of
 * the process it belongs to. Marks are not events: they are counted in
 * stkr_process_info.marks / external_marks, not in events, and a tool that
 * counts events skips is_mark. Two kinds:
 * - A mark the process recorded (stkr_mark): thread and stack are the
 *   setter's (its stack as for any event); it belongs to that process
 *   only. Within one batch, its marks are handed out before its other
 *   events, so a mark comes before the events recorded after it on other
 *   threads that the writer drained into the same batch earlier. A mark
 *   recorded while the worker was between two threads' rings may still
 *   come after a later event of another thread that went into the
 *   previous batch; order by ts_ns, which is exact.
 * - An external mark (`stackrec mark DIR ...`, a line of DIR/stackrec.marks,
 *   see stkr_mark_append): it belongs to every process recorded in DIR
 *   (or, in a merged recording, to those of its input: the scope lines
 *   of the marks file, below),
 *   and is handed out to each, before that process's first event, all of
 *   DIR's external marks in time order (a process that started after the
 *   mark still learns of it: its ts_ns says when). thread_id 0, tid = the
 *   pid of the `stackrec mark` process, thread_name "stackrec mark", no
 *   stack (stack_undefined false, n_pcs 0), path = the marks file,
 *   batch_offset = the line's byte offset. A recording in DIR without any
 *   process shows no external mark (stkr_reader_counts.external_marks
 *   still counts the lines read).
 *
 * Thread-safety: a stkr_reader is not thread-safe; use one per thread.
 * Independent readers may run concurrently.
 */
#ifndef STKR_READER_H
#define STKR_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The export macro of recorder/stackrec.h (kept identical there): default
 * visibility, so the shared library exports the reader API too. */
#ifndef STKR_API
#if defined(__GNUC__) || defined(__clang__)
#define STKR_API __attribute__((visibility("default")))
#else
#define STKR_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stkr_reader stkr_reader;

/* What a warning is about. data_lost in stkr_warning says whether recorded
 * events (or their details) could not be read because of it. */
typedef enum stkr_warn_kind {
  STKR_WARN_IGNORED_FILES = 1, /* a directory holds non-segment files */
  STKR_WARN_NO_SEGMENTS,       /* a directory holds no segment file */
  STKR_WARN_EMPTY_FILE,        /* zero-length segment (just created) */
  STKR_WARN_NOT_ZSTD,          /* a segment holds no zstd frame at all */
  STKR_WARN_TRUNCATED,         /* the last batch of a file is cut off */
  STKR_WARN_DAMAGED,           /* a batch failed to decode or validate */
  STKR_WARN_UNSUPPORTED,       /* newer format version: process skipped */
  STKR_WARN_IO,                /* a segment cannot be opened (see
                                  stkr_reader_add) or a read failed: the
                                  file, or the rest of it, skipped */
  STKR_WARN_INCONSISTENT,      /* e.g. pid in a header differs from the
                                  file name; the data is still used */
  STKR_WARN_UNRESOLVED,        /* events with undefined ids (once/process) */
  STKR_WARN_LIVE_TAIL,         /* the last batch of a recording still being
                                  written is incomplete (see above); it is
                                  not read, and that is not damage */
  STKR_WARN_INCOMPLETE         /* intact, but the recording is not
                                  complete: segments missing from a
                                  session (deleted by the disk cap: a
                                  tombstone in its place names the
                                  process whose writes made the cap take
                                  it; or lost), a directory recreated
                                  mid-run, a
                                  session without a clean end, events
                                  attempted but neither written nor counted
                                  (see "Accounting" below). data_lost is
                                  false: what is there reads fine */
} stkr_warn_kind;

/* One warning. Every pointer is valid only during the callback. */
typedef struct stkr_warning {
  stkr_warn_kind kind;
  bool data_lost;      /* true for NOT_ZSTD, TRUNCATED, DAMAGED,
                          UNSUPPORTED, IO and UNRESOLVED (never for
                          LIVE_TAIL) */
  const char *path;    /* the file or directory concerned */
  int64_t offset;      /* byte offset in path, or -1 */
  uint32_t pid;        /* process concerned, 0 if none */
  const char *message; /* full text, e.g. "<path>: offset 123: truncated
                          batch (45 bytes), ignored"; no trailing newline */
} stkr_warning;

/* Receives every warning. Must not call back into the reader. */
typedef void (*stkr_warn_cb)(void *arg, const stkr_warning *w);

/* One intact batch (it decoded and validated), for tools that copy or
 * check recordings batch by batch. Pointers are valid only during the
 * callback. */
typedef struct stkr_batch_view {
  size_t process;      /* index for stkr_reader_process() */
  uint32_t pid;        /* the process's pid */
  const char *path;    /* segment file holding it */
  uint32_t file_seq;   /* <seq> of that file's name; 0: not a segment name */
  uint64_t offset;     /* byte offset of its zstd frame in path */
  uint64_t frame_len;  /* compressed size of that frame */
  const uint8_t *data; /* the serialized Batch message (decompressed) */
  size_t len;
} stkr_batch_view;

/* Receives every intact batch before its events are handed out. Must not
 * call back into the reader. @return 0 to go on, or a negative errno that
 * stops reading (stkr_reader_next() returns it as a hard error). */
typedef int (*stkr_batch_cb)(void *arg, const stkr_batch_view *b);

typedef struct stkr_reader_opts {
  stkr_warn_cb warn; /* NULL: print message + "\n" to stderr */
  void *warn_arg;    /* passed to warn */
  /* Leave stkr_event_view.frames NULL; a caller that wants them for an
   * event asks stkr_reader_frames(). Aggregating tools read millions of
   * events but need the frames of each distinct stack once. */
  bool lazy_frames;
  stkr_batch_cb batch; /* NULL: none */
  void *batch_arg;     /* passed to batch */
  /* Receives each STKR_WARN_INCOMPLETE finding (see "Accounting"); they
   * are not warnings (not passed to warn, not in stkr_reader_counts).
   * NULL: not reported, only counted in stkr_process_info. */
  stkr_warn_cb incomplete;
  void *incomplete_arg; /* passed to incomplete */
} stkr_reader_opts;

/* Per-process summary, updated as events are read: complete once
 * stkr_reader_next() has returned 0. Time stamps are CLOCK_MONOTONIC ns of
 * the recording process; *_wall_ns are ns since 1970 (0: unknown). */
typedef struct stkr_process_info {
  uint32_t pid;              /* from the segment file names */
  const char *dir;           /* directory holding the segments */
  /* From the first Header read ("" / 0 until then): */
  bool have_header;
  uint32_t parent_pid;       /* non-zero: forked child (follow mode) */
  const char *process_name;  /* a pid that exec'd other programs: their
                                names in order, "bash > python3" */
  const char *arch;
  uint64_t start_mono_ns;    /* clock readings at stkr_init() */
  uint64_t start_wall_ns;
  /* Unwind tables (Header.unwind_tables, the last Header read that has
   * them): the process walked its stacks with tables for unwind_images
   * images; frames elsewhere were walked with frame pointers.
   * unwind_tables false: frame pointers only (or an older writer). */
  bool unwind_tables;
  uint32_t unwind_images, unwind_images_failed, unwind_images_without_cfi;
  uint64_t unwind_rows, unwind_rows_fallback;
  /* Of unwind_images: tables read from the recording's cache (built by an
   * earlier process of the recording); cache files refused and rebuilt. */
  uint32_t unwind_images_cached, unwind_cache_rejected;
  /* Events: */
  uint64_t events;           /* events delivered (marks not included) */
  uint64_t marks;            /* marks this process recorded, delivered
                                (part of the accounting, as events) */
  uint64_t external_marks;   /* external marks delivered to it */
  uint64_t first_ts_ns;      /* smallest event time (0: no events), on
                                the first instance's clock (below) */
  uint64_t last_ts_ns;       /* largest event time, the same */
  uint64_t first_wall_ns;    /* wall-clock time of first_ts_ns */
  uint64_t unresolved_events; /* events with an undefined id (damage;
                                 stack_lost ones are not counted here) */
  /* Distinct definitions seen (sites by name and stacks by content, PCs
   * and site, across sessions and recovered segments; threads summed over
   * sessions, a renamed thread once per name), marks' sites and stacks
   * not among them (marks are counted apart): */
  uint64_t sites, threads, stacks;
  /* Events lost by the recorder, summed over sessions. Per session and
   * reason, the larger of the Drops summed over the batches read and the
   * Counters total of the last batch read (the totals survive a lost
   * batch; older writers have only Drops). drops_exit: Counters.dropped_exit.
   */
  uint64_t drops_ring_full, drops_reentrant, drops_other, drops_write_error;
  uint64_t drops_exit;
  uint64_t drops;            /* the sum of the five above (saturated; see
                                counters_overflow) */
  /* Counters of the last batch read of each session, summed: */
  uint64_t attempted;        /* Counters.attempted */
  uint64_t segments_deleted; /* Counters.segments_deleted: its segments
                                its own cap deleted (before tombstones:
                                any process's its cap deleted) */
  uint32_t sessions;         /* recording sessions seen (see above) */
  uint64_t session_id;       /* Header.session_id of the last session read
                                (0: written before session ids existed) */
  /* Accounting (see "Accounting" in the comment at the top of this file).
   * Final once stkr_reader_next() has returned 0. */
  uint64_t written;          /* events and marks read from batches the
                                process wrote itself (events + marks -
                                recovered) */
  uint64_t recovered;        /* events read from Batch.recovered batches:
                                accepted by a writer that died, written out
                                later by recovery */
  uint64_t recovered_batches;
  uint64_t counters_recovered; /* Counters.recovered, summed over sessions */
  uint64_t unaccounted;      /* attempted - (written + drops + recovered),
                                summed over sessions where it is positive:
                                events accepted but never written (killed
                                before its last flush) or in segments that
                                are missing */
  uint32_t accounting_mismatches; /* sessions whose counters contradict
                                what was read (inconsistent: damage) */
  bool counters_overflow;    /* drop counters whose sum overflows 64 bits:
                                damage (reported as STKR_WARN_DAMAGED) */
  uint32_t unclean_sessions; /* sessions without a last=true batch */
  uint32_t segments_missing; /* segments absent from a session's sequence
                                (Header.session_first_seq, segment_seq),
                                not explained by segments_deleted */
  uint32_t segments_cap_deleted; /* of the absent ones, those the disk cap
                                deleted: tombstones in their place (any
                                process's cap), or its own
                                Counters.segments_deleted */
  uint32_t dir_recreated;    /* segments whose Header.dir_recreated is set */
  uint32_t empty_segments;   /* segment files holding no batch at all
                                (0 bytes, or no intact header): a writer
                                that died before its first flush */
  bool incomplete;           /* any of: drops, unclean_sessions,
                                segments_missing, segments_deleted,
                                segments_cap_deleted,
                                dir_recreated, empty_segments,
                                unreadable_segments (also damage),
                                misnamed_segments (inconsistent),
                                missing_batches, unaccounted,
                                memory_rings_lost */
  /* Files and batches: */
  uint64_t segments;         /* segment files of this process (once read:
                                without the disk cap's tombstones) */
  uint32_t first_seq, last_seq; /* lowest and highest segment seq */
  uint64_t batches;          /* batches read intact */
  uint64_t compressed_bytes; /* total size of the segment files */
  uint64_t damaged_batches;  /* frames skipped as damaged or truncated */
  uint64_t missing_batches;  /* gaps in Batch.seq between batches read,
                                and before a session's first batch read
                                (batches are numbered from 1) */
  bool clean_end;            /* every session ended with a batch with
                                last=true (stkr_shutdown() ran) */
  int status;                /* 0, or -EPROTONOSUPPORT (newer format) */
  bool live_tail;            /* the last segment ends in an incomplete
                                batch and the recording has not ended
                                cleanly: still being written (or its writer
                                died mid-batch); see STKR_WARN_LIVE_TAIL */
  /* Of unclean_sessions, those whose writer was still recording when they
   * were read (the process alive and its session file there, asked
   * without taking the file's lock):
   * not ended yet rather than killed. Still counted as unclean (the
   * recording is not complete), and said so in the warning. */
  uint32_t live_sessions;
  /* Segment files that could not be read at all: a name of this process
   * on an entry that is not a regular file (a FIFO, a directory, a socket,
   * a device, a symbolic link leading nowhere or in a loop), or a file
   * that cannot be opened (no permission). Damage: each is a
   * STKR_WARN_IO warning naming it. Counted in segments. */
  uint32_t unreadable_segments;
  /* Segment files whose Header names another process or segment number
   * than their file name (a file renamed, or copied in from elsewhere),
   * not a copy of a segment of this recording (that is damage, not read):
   * read under their name, so their events may be another process's.
   * Each a STKR_WARN_INCONSISTENT warning naming it; inconsistent, not
   * lost (`verify` calls it damage; the views say it at the top).
   * Since session 44. */
  uint32_t misnamed_segments;
  /* Of the segments deleted by the disk cap (segments_cap_deleted): the
   * events and batches they held, known from the Counters of the first
   * batch after them when they were a session's first segments and
   * nothing else of it is absent. Counted apart from unaccounted and
   * missing_batches: attempted = written + drops + recovered + these. */
  uint64_t cap_deleted_events, cap_deleted_batches;
  /* Header.watched: the categories of sites the process watched
   * ("identifiers,network,..."; stkr_config.watched), from the first
   * Header that says it; "" when none does, or when two of its Headers
   * (a pid that exec'd) say different things: then anything may have been
   * watched. */
  const char *watched;
  /* Set before its first event is delivered: its earliest segment is a
   * tombstone of the disk cap (a file of STKR_FMT_MARKER_MAX bytes or
   * less) or its first file is numbered above 1, or (since session 33)
   * the first batch read of it is numbered above 1 (its first batches
   * damaged or never written; set when that batch is read, so, since
   * session 35, possibly before the external marks, which come with its
   * first event): what it recorded first, marks and
   * its Header included, is gone, so a mark's absence before an event
   * proves nothing (compliance: "not judged"). Since session 28. */
  bool head_lost;
  /* Threads that recorded into memory (no ring file could be made for
   * them) in sessions whose writer died: what they had not flushed is
   * lost, how many events is not known (Counters.memory_rings_lost, set
   * by recovery). Incomplete when non-zero. Since session 31. */
  uint32_t memory_rings_lost;
  /* Events recovered without their stack (stkr_event_view.stack_lost):
   * its only definition was in a batch whose write failed or in a segment
   * that is gone. Incomplete when non-zero. Since session 32. */
  uint64_t stacks_lost;
  /* From the first Header read: a forked child's origin, the recording
   * process whose memory it copied, and when (Header.forked_from_pid,
   * fork_mono_ns): it starts with that process's marks up to then. 0:
   * not said (not a forked child, or an older writer); forked_from_pid 0
   * with a time: merge could not place the origin. Since session 32. */
  uint32_t forked_from_pid;
  uint64_t fork_mono_ns;
  /* Marks the process set whose event was dropped (Counters.marks_dropped,
   * summed over sessions; a ring full, a re-entered event). Updated as
   * batches are read: an event read after it grew came after a mark no
   * reader saw. Since session 32. */
  uint64_t marks_dropped;
  /* Processes that held this pid, as read so far (Header.process_start,
   * since session 33): 1 for one process (its exec'd images and stkr_init
   * run again included), more when the pid was used again by another
   * process (a container's pid 1 restarted), each from the Header whose
   * start time differs from the one before (in clock ticks on Linux: a
   * pid taken again within 10 ms is not told apart); 0 before any
   * Header. A new
   * one begins before the events of its first batch are delivered, so a
   * tool keeping per-process state (marks) starts afresh when it grows.
   * The summary (events, sites, times) stays the pid's. */
  uint32_t instances;
  /* The current instance's first Header: its start, and the process it
   * was forked from (Header.forked_from_pid, fork_mono_ns; 0: none). The
   * first instance's are start_mono_ns, forked_from_pid and fork_mono_ns
   * above. */
  uint64_t instance_start_mono_ns;
  uint32_t instance_forked_from_pid;
  uint64_t instance_fork_mono_ns;
  /* Since session 35, from the first Header: which CLOCK_MONOTONIC its
   * times are on (Header.boot_id, mono_offset_ns; common/stkr_boot.h).
   * have_boot_id false: not known (an older writer, Apple). */
  bool have_boot_id;
  uint8_t boot_id[16];
  int64_t mono_offset_ns;
  /* The current instance's clock and wall-clock start, from its first
   * Header: a pid used again after a reboot, or in another time
   * namespace, has its times on another clock than its first instance's
   * (have_boot_id, boot_id, mono_offset_ns and start_wall_ns above, which
   * these equal during the first). Since session 36. */
  bool instance_have_boot_id;
  uint8_t instance_boot_id[16];
  int64_t instance_mono_offset_ns;
  uint64_t instance_start_wall_ns;
  /* What to add to a time of the current instance to put it on the first
   * one's clock: exact within a boot, by the wall clock across boots, 0
   * when a boot is not known (common/stkr_boot.h, stkr_clock_shift); 0
   * during the first. first_ts_ns and last_ts_ns are on the first
   * instance's clock. Across boots it is this instance's start against
   * the first's; tools/stackrec/boots.h relates a boot by its earliest
   * start, which a sleep between the two can make differ. Since session
   * 36. */
  int64_t instance_shift_ns;
  /* Distinct OS thread ids among `threads`, over the sessions of each
   * process that held the pid, summed over those: a thread renamed while
   * recording, or in two sessions (an exec), once; an unknown tid (0) each
   * time. Since session 36. */
  uint64_t os_threads;
  /* From the first Header read: its parent as the OS had it at the
   * session's start (Header.os_parent_pid; for an exec'd program too;
   * possibly a reaper, or another process with that pid since: see the
   * schema). 0: not said. Since session 37. */
  uint32_t os_parent_pid;
  /* Problems reading its directory's marks file (`stackrec mark`,
   * record's notes): a damaged or malformed line is one, and so is the
   * file unreadable, or cut at a limit (the lines after it not read): the
   * same for every process of that directory, each also a warning. A
   * mark may be lost with them. Since session 39. */
  uint64_t marks_damaged;
  /* When its last session ended cleanly: the clock of the batch with
   * last=true (Batch.clock, on the clock of first_ts_ns); 0: no clean end
   * read, or one without a clock. A `stackrec mark` set after it is one
   * the process never saw. Since session 42. */
  uint64_t end_ts_ns;
} stkr_process_info;

/* Events per site of one process. One entry with name "?" and id 0
 * (defined false) counts the events of every site id with no definition
 * (and of site 0). */
typedef struct stkr_site_info {
  uint32_t id;
  const char *name;
  bool defined;
  bool is_mark;        /* a mark's site: name is the mark's name */
  uint64_t events;     /* events (marks, for a mark's site) */
} stkr_site_info;

/* One loaded image, as in the Image message. */
typedef struct stkr_image_info {
  const char *path;
  uint64_t load_address, text_start, text_end;
  const uint8_t *build_id;
  size_t build_id_len;
} stkr_image_info;

/* Bit 63 of a recorded PC (stkr_event_view.pcs, StackDef.pcs): a Swift
 * async resume address from the task's async context chain, a function
 * start rather than a return address; the address is pc & ~STKR_PC_ASYNC.
 * Such PCs form the tail of a stack. (= STKR__PC_ASYNC in the recorder.) */
#define STKR_PC_ASYNC (1ull << 63)

/* One symbolized frame (stackrec.proto, FrameDef). A PC gives one or more
 * frames: the calls inlined at it (inlined = true, innermost first), then
 * the function containing it (inlined = false). */
typedef struct stkr_frame {
  uint64_t pc;           /* the recorded PC (a return address, or with
                            STKR_PC_ASYNC an async resume function) */
  const char *function;  /* demangled name; NULL: unknown (see image) */
  const char *file;      /* source file as compiled; NULL: unknown */
  uint32_t line, column; /* 0: unknown */
  const char *image;     /* path of the image; NULL: in no known image */
  uint64_t offset;       /* pc - the image's load address (pc if no image) */
  bool inlined;          /* a call inlined at pc; pc's frames go on */
  bool is_app;           /* the image is the app's own (the main
                            executable or under STACKREC_APP_PATHS) */
  bool async;            /* a Swift async resume function (FrameDef.async):
                            an awaiting caller from the async context chain */
} stkr_frame;

/* Where an external mark (a `stackrec mark` line) was set: its times on
 * its setter's CLOCK_MONOTONIC and wall clock, and which monotonic clock
 * that is (common/stkr_boot.h); stkr_reader_mark_clock. */
typedef struct stkr_mark_clock {
  uint64_t set_ns;
  uint64_t wall_ns;     /* 0: not known */
  bool have_boot_id;    /* the line said its clock (an older `stackrec
                           mark` did not): */
  uint8_t boot_id[16];
  int64_t mono_offset_ns;
} stkr_mark_clock;

/* One event. Pointers stay valid until the next stkr_reader_next() or
 * stkr_reader_free() on the reader; copy what you keep. */
typedef struct stkr_event_view {
  uint64_t ts_ns;            /* absolute CLOCK_MONOTONIC ns */
  uint64_t wall_ns;          /* the same instant, wall clock (0: unknown) */
  uint32_t pid;
  size_t process;            /* index for stkr_reader_process() */
  const stkr_process_info *proc; /* == stkr_reader_process(r, process) */
  uint32_t site_id;
  const char *site;          /* "?" if undefined */
  uint32_t thread_id;        /* recorder's thread id */
  uint64_t tid;              /* OS thread id; 0 if undefined */
  const char *thread_name;   /* "" if none; "?" if undefined */
  uint32_t stack_id;
  const uint64_t *pcs;       /* innermost first, each to be looked up at
                                pcs[i] - 1 (StackDef.pcs); NULL if
                                n_pcs == 0 */
  size_t n_pcs;              /* 0 if the stack is undefined */
  bool stack_truncated;      /* the walk stopped at max_depth, or could
                                not go on (StackDef.truncated): outer
                                callers are missing */
  const uint8_t *payload;    /* NULL if payload_len == 0 */
  size_t payload_len;
  bool payload_truncated;    /* cut at payload_max when recorded */
  bool is_mark;              /* a mark, not an event: site is its name
                                (see "Marks" at the top of this file) */
  bool unresolved;           /* some id had no definition: */
  bool site_undefined, thread_undefined, stack_undefined; /* which. A
                                tool keying state by id should key these
                                as one "unknown" (e.g. id 0): a file may
                                hold any number of distinct bogus ids */
  bool stack_lost;           /* stack_undefined (site and thread defined),
                                and said to be lost, not
                                damage: stack 0 of a recovered batch, an
                                event recovery kept without its stack,
                                whose only definition was in a batch that
                                is gone (a failed write, a deleted
                                segment). Counted in stacks_lost, not in
                                unresolved_events. Since session 32. */
  const char *path;          /* segment file of the event */
  uint64_t batch_offset;     /* byte offset of its batch in that file */
  /* Symbolized frames of the stack, innermost first (at least one per PC);
   * NULL and 0 when the stack was not symbolized (offline/none mode before
   * `stackrec symbolize`) or is undefined. */
  const stkr_frame *frames;
  size_t n_frames;
} stkr_event_view;

/* Counts over the whole reader. */
typedef struct stkr_reader_counts {
  uint64_t warnings;         /* warnings emitted */
  uint64_t data_lost;        /* of which data_lost was true */
  uint64_t external_marks;   /* lines read from marks files (each is
                                delivered once per process of its dir,
                                or of its scope: "s1" lines) */
} stkr_reader_counts;

/*
 * Create a reader with no input. opts may be NULL (warnings to stderr).
 * @return 0, -EINVAL (out NULL), or -ENOMEM. *out owns the reader; free it
 *         with stkr_reader_free().
 */
STKR_API int stkr_reader_create(const stkr_reader_opts *opts, stkr_reader **out);

/*
 * Add input: a directory (every segment file in it; other entries are
 * ignored and mentioned once in a STKR_WARN_IGNORED_FILES warning) or one
 * segment file. In a directory, an entry with a segment's name belongs
 * to that process even if it cannot be read: one that is not a regular
 * file (a FIFO, a directory, a socket, a device, a symbolic link leading
 * nowhere or in a loop) is never opened, and one that cannot be opened
 * is skipped; either is a data-loss warning (STKR_WARN_IO) naming it when
 * its process is read (stkr_process_info.unreadable_segments). A symbolic
 * link to a regular file is followed: that file is the segment. Files of
 * the same pid in the same directory form one process however they were
 * added; a file added twice is read once. A file added
 * by a name that is not a segment name is read as a process of its own,
 * whose pid comes from its first Header.
 * Must be called before the first stkr_reader_next().
 * @return 0, -EBUSY (reading has started), -EINVAL (NULL, or neither a
 *         directory nor a regular file), -ENOMEM, or the negative errno of a
 *         failed stat/opendir (e.g. -ENOENT, -EACCES; nothing added).
 */
STKR_API int stkr_reader_add(stkr_reader *r, const char *path);

/* Are two of the inputs added copies of one recording? Processes of one
 * pid in two directories whose first Headers name the same session
 * (Header.session_id: one stkr_init's) are: a device's directory pulled
 * twice, or a merge's OUT beside one of its inputs. Reading both would
 * count every event of that session twice; `stackrec` refuses such
 * inputs. Only processes whose pid another directory also has are
 * looked at (each through its first batch, read here), and only the
 * first session of each: a process merge renumbered (a pid two of its
 * inputs shared), or a copy that lost its first session to the disk cap
 * while an older one of the same pid was kept, is not found. Must be called
 * before the first stkr_reader_next().
 * @return 1 with *first and *second (process indices, first < second)
 *         and *session_id set; 0 when there are none; -EBUSY (reading
 *         has started), -EINVAL (a NULL argument), or -ENOMEM. */
STKR_API int stkr_reader_find_copies(stkr_reader *r, size_t *first,
                                     size_t *second, uint64_t *session_id);

/* Where a process started on both clocks, and which monotonic clock its
 * times are on (stkr_reader_start_clock). */
typedef struct stkr_start_clock {
  uint64_t mono_ns, wall_ns;  /* Header.start_mono_ns/start_wall_ns; 0:
                                 no Header found */
  bool have_boot_id;          /* Header.boot_id known: */
  uint8_t boot_id[16];
  int64_t mono_offset_ns;     /* Header.mono_offset_ns */
  uint32_t parent_pid;        /* Header.parent_pid: the process it was
                                 forked from (follow mode), 0: none;
                                 since session 36 */
  uint32_t os_parent_pid;     /* Header.os_parent_pid, 0: not said;
                                 since session 37 */
} stkr_start_clock;

/*
 * Process i's start and clock (above), from its first Header: as read
 * already or, before that, from a look at the first batch of its first
 * segments (at most 4 files read; tombstones, unreadable files not
 * counted; once per process). For views that need every process's clock
 * before reading its events: processes of several boots (a merge of
 * devices) or time namespaces lie on one time line only through it
 * (tools/stackrec/boots.h). May be called at any time; not thread-safe.
 * @return 0, or -EINVAL (NULL arguments, no process i).
 */
STKR_API int stkr_reader_start_clock(stkr_reader *r, size_t i,
                                     stkr_start_clock *out);

/* stkr_reader_create() + stkr_reader_add(path). On error *out is NULL. */
STKR_API int stkr_reader_open(const char *path, const stkr_reader_opts *opts,
                     stkr_reader **out);

/* Free the reader and everything it handed out. NULL is accepted. */
STKR_API void stkr_reader_free(stkr_reader *r);

/*
 * Read the next event into *ev.
 * @return 1 (an event), 0 (end of all input; further calls return 0), or a
 *         negative errno for a hard error (-ENOMEM; -EINVAL for NULL
 *         arguments). After a hard error only stkr_reader_free() and the
 *         accessors below may be called.
 */
STKR_API int stkr_reader_next(stkr_reader *r, stkr_event_view *ev);

/*
 * The symbolized frames of the event stkr_reader_next() returned last
 * (what ev->frames holds without lazy_frames). *frames stays valid until
 * the next stkr_reader_next() or stkr_reader_free().
 * @return 0 (*n is 0 when the stack has no frames), -ENOMEM, or -EINVAL
 *         when no event is current.
 */
STKR_API int stkr_reader_frames(stkr_reader *r, const stkr_frame **frames, size_t *n);

/*
 * Where the external mark last returned by stkr_reader_next() was set
 * (stkr_mark_clock). Its ts_ns is that time on the clock of its process's
 * instance current when it was handed out (stkr_process_info.instance_*;
 * external marks come before the process's first event): a tool that
 * keeps such marks for the pid's later instances puts them on each one's
 * clock from here. Since session 36.
 * @return NULL when that event was not an external mark (or r is NULL);
 *         valid until the next stkr_reader_next() or stkr_reader_free().
 *         After stkr_reader_next() failed, what it was before.
 */
STKR_API const stkr_mark_clock *stkr_reader_mark_clock(const stkr_reader *r);

/* Number of processes known (fixed once reading has started). */
STKR_API size_t stkr_reader_process_count(const stkr_reader *r);

/* Summary of process i (NULL if out of range). Owned by the reader. */
STKR_API const stkr_process_info *stkr_reader_process(const stkr_reader *r, size_t i);

/*
 * Sites of process i with their event counts, in order of first appearance.
 * *sites is owned by the reader and valid until the next
 * stkr_reader_next() or stkr_reader_free().
 * @return 0, or -EINVAL (i out of range or NULL arguments).
 */
STKR_API int stkr_reader_sites(const stkr_reader *r, size_t i,
                      const stkr_site_info **sites, size_t *n);

/*
 * Every image of process i seen so far (the union of the image lists read,
 * without duplicates). Owned by the reader, valid as for stkr_reader_sites.
 * @return 0, or -EINVAL.
 */
STKR_API int stkr_reader_images(const stkr_reader *r, size_t i,
                       const stkr_image_info **images, size_t *n);

/* Fill *out with the reader's warning counts. */
STKR_API void stkr_reader_get_counts(const stkr_reader *r, stkr_reader_counts *out);

#ifdef __cplusplus
}
#endif

/* The recording directory's side files (marks, processes that recorded
 * nothing, processes still running), which the reader reads with the
 * segments: their format and writers are stkr_marks.h's. */
#include "stkr_marks.h"

#endif /* STKR_READER_H */
