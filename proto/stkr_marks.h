/*
 * stkr_marks.h: the recording directory's side files, beside its
 * segments: the marks file of `stackrec mark` and the lines `stackrec
 * record` adds to it (processes that recorded nothing, processes still
 * running when it ended), their format, their writers, and what the
 * reader (stkr_reader.h, which includes this header) hands out of them.
 * Split from stkr_reader.h; either header may be included first.
 *
 * Thread-safety: each function says.
 */
#ifndef STKR_MARKS_H
#define STKR_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "stkr_reader.h" /* STKR_API, stkr_reader */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- marks files (`stackrec mark`) ---------------------------------------
 * A recording directory may hold one marks file, STKR_MARKS_FILE, written
 * by `stackrec mark` while (or after) a program records into it: one line
 * per mark,
 *   m1 <mono_ns> <wall_ns> <pid> <name> <payload> [<clock>]\n
 * (decimal CLOCK_MONOTONIC and CLOCK_REALTIME ns read by the setter, its
 * pid, a mark name as in stkr_mark, the payload in lower-case hex or "-"
 * for none; since session 35 the setter's clock, "<boot id: 32 hex>:<time
 * namespace offset, signed decimal ns>" or "-", common/stkr_boot.h: a mark
 * of the same boot as a process but another namespace is moved onto the
 * clock of the process's instance current when it is handed out, by the
 * offsets, exactly; one of another boot by the two wall clocks, as right
 * as they are (stkr_reader_mark_clock keeps where it was set); one of a
 * boot none of the pid's instances was on is said at the process's end
 * (STKR_WARN_INCONSISTENT; not said by a reader that stops before it);
 * readers from before it warn of such a line as malformed and skip it). Lines are appended with one write(2) to a file opened with
 * O_APPEND, so concurrent setters never interleave. Lines starting with
 * '#' are comments; an "l1 <hex why>" line says that marks were lost
 * before a copy was made (stkr_marks_copy of a marks file that is not a
 * regular file, or longer than a reader reads): a STKR_WARN_DAMAGED
 * warning, as the input's readers gave; "u1" lines name processes that recorded nothing (see
 * "processes that recorded nothing" below). A scope line, written by
 * stkr_marks_copy_scoped (`stackrec merge`),
 *   s1 pids=<P|P-Q>[,<P|P-Q>...]\n   or   s1 -\n
 * gives the mark lines after it in the file to the processes with those
 * pids only (decimal, above 0, ranges low-high), until the next scope
 * line; "s1 -" (and the start of the file) gives them to every process of
 * the directory. A malformed scope line gives the marks after it to no
 * process (warned). Readers without scope lines (0.3.0 from before
 * 2026-12-03) warn about each as malformed and hand its marks to every
 * process of the directory. The reader reads at most STKR_MARKS_MAX lines and
 * STKR_MARKS_MAX_BYTES bytes of it; a malformed line is a
 * STKR_WARN_DAMAGED warning naming the file and the line's offset, and is
 * skipped; a last line without its newline is being written (or its
 * writer died): STKR_WARN_LIVE_TAIL, skipped. */
#define STKR_MARKS_FILE "stackrec.marks"
#define STKR_MARKS_MAX 100000
#define STKR_MARKS_MAX_BYTES (64u << 20)
#define STKR_MARKS_MAX_PAYLOAD 4096 /* bytes of one mark's payload */

/*
 * Append mark `name` with payload[0..len) to the marks file of directory
 * `dir` (created 0600 if missing), time-stamped now. The directory must
 * exist. Thread-safe.
 * @return 0; -EINVAL (name not a valid mark name, len over
 *         STKR_MARKS_MAX_PAYLOAD, NULL arguments); -ENXIO (the marks file
 *         is not a regular file: never written, nor waited on); or the
 *         negative errno of the failed open/write (-ENOENT, -ENOTDIR,
 *         -EACCES, ...).
 */
STKR_API int stkr_mark_append(const char *dir, const char *name, const void *payload,
                     size_t len);

/*
 * Append the complete lines of from_dir's marks file (if any; at most
 * STKR_MARKS_MAX_BYTES) to to_dir's: for tools that write a recording
 * into another directory (`stackrec symbolize -o`). A marks file that
 * cannot be read whole (not a regular file, longer than a reader reads)
 * leaves an "l1" line in to_dir's, which its readers take as damage.
 * Thread-safe.
 * @return 0 (also when from_dir has none), -EBADMSG (from_dir's marks
 *         file is damaged: said in to_dir's), -ENOMEM, or the negative
 *         errno of a failed open/read/write.
 */
STKR_API int stkr_marks_copy(const char *from_dir, const char *to_dir);

/* One process of a recording copied into another under a new pid. */
typedef struct stkr_pid_map {
  uint32_t from, to;
} stkr_pid_map;

/*
 * As stkr_marks_copy, for a tool that puts several recordings' processes
 * into one directory (`stackrec merge`): the mark lines are written inside
 * a scope line naming the processes they belong to in to_dir (the map's
 * `to` pids whose `from` pid was in their scope in from_dir: every one of
 * from_dir's, or those of from_dir's own scope lines), then "s1 -"; a mark
 * that belongs to none of them is left out. A scope line is written where
 * the scope changes, not per mark. A process that recorded nothing ("u1"
 * line) gets the map's pid for it if the map has it (it recorded before
 * it could not), else keeps its own. Other lines ("r1", comments) are
 * copied as they are. map: from_dir's processes in
 * to_dir, any order, not kept. A read error keeps what was read before it
 * (as stkr_marks_copy). Thread-safe.
 * @return 0, -EINVAL (NULL arguments), -EBADMSG (from_dir's marks file
 *         is damaged: said in to_dir's, as by stkr_marks_copy), -ENOMEM,
 *         or the negative errno of a failed open/write.
 */
STKR_API int stkr_marks_copy_scoped(const char *from_dir, const char *to_dir,
                                    const stkr_pid_map *map, size_t n_map);

/* ---- processes that recorded nothing -------------------------------------
 * `stackrec record` adds a line to its directory's marks file for each
 * process of its tree that recorded nothing because it could not (its hook
 * library or its recorder said why: no descriptor to spare, no permission
 * to write the directory, a recorder that failed to start in a forked
 * child):
 *   u1 <pid> <name> <reason>\n
 * name (the process's comm) and reason in lower-case hex, "-" when empty.
 * Those processes' watched calls are in no file, so a recording that
 * names any is incomplete (verify's status 4; the INCOMPLETE line of the
 * other commands). Malformed lines are STKR_WARN_DAMAGED warnings and are
 * skipped, as for marks; `stkr_marks_copy` carries them along. */
typedef struct stkr_unrecorded_info {
  uint32_t pid;
  const char *name;   /* its name (comm); "" when not known */
  const char *reason; /* why, in its own recorder's words */
  const char *path;   /* the marks file that names it */
} stkr_unrecorded_info;

/* @return how many processes the marks files of the reader's directories
 *         name as having recorded nothing (as read so far: every
 *         directory's file is read when the directory is added). */
STKR_API size_t stkr_reader_unrecorded_count(const stkr_reader *r);

/* @return the i-th of them (valid until stkr_reader_free), or NULL when i
 *         is not below stkr_reader_unrecorded_count(r). */
STKR_API const stkr_unrecorded_info *stkr_reader_unrecorded(
    const stkr_reader *r, size_t i);

/*
 * Append a "u1" line for process pid (name, reason: NUL-terminated, cut to
 * 255 and 1023 bytes) to the marks file of directory dir (created 0600 if
 * missing), in one write as stkr_mark_append. Thread-safe.
 * @return 0, -EINVAL (NULL arguments), -ENXIO (not a regular file), or the
 *         negative errno of the failed open/write.
 */
STKR_API int stkr_unrecorded_append(const char *dir, uint32_t pid,
                                    const char *name, const char *reason);

/* ---- processes still running when `stackrec record` ended ------------------
 * A process of the recorded tree that outlives `record` (a daemon, a job
 * left in the background) may record on into the directory after record's
 * summary; until it ends, the recording is not complete. `record` adds a
 * line for each to the marks file:
 *   r1 <pid> <boot id> <start time> <name>\n
 * boot id: /proc/sys/kernel/random/boot_id without its dashes (32
 * lower-case hex digits); start time: field 22 of /proc/<pid>/stat (clock
 * ticks since boot); name (comm) in lower-case hex, "-" when empty. A
 * reader tells whether each is alive now: the same boot, and a process of
 * that pid that started at that time (never another process that got the
 * pid since). On another machine or after a reboot it cannot tell (Linux
 * only; elsewhere likewise), nor where /proc does not show it. A line
 * naming the same process as an earlier one (merged copies of one run) is
 * read once. `merge` copies the lines as they are: the pid is the system's,
 * the one liveness is tested with, even where merge renumbered the
 * process's files. Malformed lines are STKR_WARN_DAMAGED warnings and are
 * skipped. */
typedef struct stkr_running_info {
  uint32_t pid;
  const char *name;  /* its name (comm) as record saw it; "" if unknown */
  bool alive;        /* still running now (this machine, this boot) */
  bool other_boot;   /* cannot tell: written on another boot or machine,
                        or its /proc entry cannot be read */
  const char *path;  /* the marks file that names it */
  uint64_t start;    /* its start time, as written */
  char boot[32];     /* its boot id, as written (not NUL-terminated) */
} stkr_running_info;

/* @return how many processes the marks files of the reader's directories
 *         name as running when record ended (alive or not now). */
STKR_API size_t stkr_reader_running_count(const stkr_reader *r);

/* @return the i-th of them (valid until stkr_reader_free), or NULL when i
 *         is not below stkr_reader_running_count(r). */
STKR_API const stkr_running_info *stkr_reader_running(const stkr_reader *r,
                                                      size_t i);

/*
 * Append an "r1" line for live process pid (name: NUL-terminated, cut to
 * 255 bytes) to the marks file of directory dir, with its boot id and
 * start time read from /proc, in one write as stkr_mark_append.
 * Thread-safe.
 * @return 0, -EINVAL (NULL arguments), -ESRCH (no such process), -ENOSYS
 *         (not Linux), -ENXIO (not a regular file), or the negative errno
 *         of the failed open/read/write.
 */
STKR_API int stkr_running_append(const char *dir, uint32_t pid,
                                 const char *name);

#ifdef __cplusplus
}
#endif
#endif /* STKR_MARKS_H */
