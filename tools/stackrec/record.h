/*
 * record.h: what record.c (running the command) hands to
 * record_summary.c (printing what it recorded). Internal to the CLI.
 */
#ifndef STKR_RECORD_H
#define STKR_RECORD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- setup (record_setup.c) ---- */

/* record's exit statuses of its own (record_help lists them all). */
#define STKR__REC_USAGE STKR_CLI_USAGE /* 2: usage, malformed STACKREC_* */
#define STKR__REC_BAD_DIR STKR_CLI_NO_INPUT /* 3: the directory is unusable */
#define STKR__REC_FAILED 125 /* stackrec record itself failed */
#define STKR__REC_CANNOT_EXEC 126
#define STKR__REC_NOT_FOUND 127

#define STKR__REC_PRELOAD_NAME "libstackrec_preload.so"

/* "stackrec record: " and the message on stderr. @return STKR__REC_FAILED. */
int stkr__rec_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The hook library, as an absolute path in out (cap bytes): from
 * $STACKREC_PRELOAD, else next to the stackrec binary. @return 0 or
 * STKR__REC_FAILED after printing why. */
int stkr__rec_find_preload(char *out, size_t cap);
/* Create the recording directory (opt: -o's value, or NULL: a name made
 * from cmd) and lock it (*lock: stkr_recover_lock_dir's descriptor, < 0:
 * none; the caller unlocks); its absolute path into out (cap bytes).
 * @return 0 or STKR__REC_BAD_DIR after printing why. */
int stkr__rec_make_dir(const char *opt, const char *cmd, char *out,
                       size_t cap, int *lock);
/* Every STACKREC_* value the hooks will read, checked with the parsers
 * they use (the recorder's stkr_config_check_env; preload/match.c for the
 * categories and watched names), so that a bad value stops record before
 * the command runs instead of leaving it unrecorded. cats_opt: the
 * --categories value, if given. @return 0 or STKR__REC_USAGE after
 * printing. */
int stkr__rec_check_env(const char *cats_opt);
/* Keep room in DIR's marks file for record's lines at its end (a disk
 * that fills up meanwhile), and give it back once they are written (a
 * command that never ran: the file too, if empty). */
void stkr__rec_marks_reserve(const char *dir);
void stkr__rec_marks_release(const char *dir, bool never_ran);
/* The child's LD_PRELOAD: the hooks (ours) first, so the app's calls
 * reach them directly (a hook in front of ours would shift the first
 * recorded frame), then whatever old preloads; but sanitizer runtimes
 * from old before everything. Entries are separated by ':' or ' ', as
 * ld.so reads them. @return a malloc'd string (the caller frees), or
 * NULL. */
char *stkr__rec_preload_list(const char *ours, const char *old);

/* ---- signals (record_signals.c: why each is passed on or not) ---- */

/* The signals record passes on to CMD, and their dispositions as record
 * was given them (CMD gets those back). */
typedef struct stkr__rec_sigs {
  sigset_t set;
  struct sigaction given[NSIG];
} stkr__rec_sigs;

/* Block the signals to pass on and install the handler that does it
 * (they stay blocked until the caller unblocks them: none is lost before
 * CMD's pid is known). */
void stkr__rec_sigs_install(stkr__rec_sigs *s);
/* In the child, before exec: the dispositions record was given. */
void stkr__rec_sigs_restore(const stkr__rec_sigs *s);
/* CMD's pid is pid: what came before it is passed on now. Gone: no one
 * to pass anything to (the signals stay blocked from then on). */
void stkr__rec_sigs_child(pid_t pid);
void stkr__rec_sigs_child_gone(void);
/* Is record a job of a shell with job control (its process group's
 * leader, with a controlling terminal)? Then it follows CMD's stops. */
bool stkr__rec_job_control(void);
/* CMD stopped by sig: stop record by it too, until continued. */
void stkr__rec_follow_stop(int sig);
/* The summary's "passed SIGTERM (2 times), ... on to CMD" line (none:
 * nothing). */
void stkr__rec_sigs_passed(FILE *f, const char *cmd);
/* The signals of s pending since CMD ended (blocked), named on stderr
 * unless quiet; they are discarded when record exits. */
void stkr__rec_sigs_settle(const stkr__rec_sigs *s, const char *cmd,
                           bool quiet);
/* End record by sig, as CMD ended (no core of its own). Returns only if
 * sig does not end a process by default. */
void stkr__rec_die_like(int sig);

/* A notice from a recorded process through the STACKREC_NOTIFY socket
 * (common/stkr_notify.h): one that records nothing, as its hook library
 * reported it (preload.c, init_failed), or a note of its recorder
 * (stkr__log: a lost descriptor, a failed write...) that would otherwise
 * have gone into the program's stderr. */
typedef struct stkr__rec_notice {
  int pid;
  int err;        /* why it records nothing: errno value; 0: a note */
  char name[17];  /* the process's name (comm) */
  char what[512]; /* why, in the library's words */
  bool static_cmd; /* record's own notice: CMD is statically linked */
  bool in_marks;   /* named in dir's marks file as it came (err != 0) */
} stkr__rec_notice;

#define STKR__REC_MAX_NOTICES 64

/* ") recorded nothing: " or "): ", what follows "process PID (NAME". */
static inline const char *stkr__rec_notice_text(const stkr__rec_notice *m) {
  return m->err != 0 ? ") recorded nothing: " : "): ";
}

typedef struct stkr__rec_notices {
  stkr__rec_notice v[STKR__REC_MAX_NOTICES];
  size_t n;
  uint64_t more; /* notices beyond the table: not listed */
  /* Of which from processes recording nothing, not named in dir's marks
   * file as they came (those named there are counted by every reader:
   * QA, session 34, one "N more" line was read as one process). */
  uint64_t more_unrecorded;
  const char *dir; /* the recording directory (NULL: none yet) */
  int lock;        /* record's lock of dir (stkr_recover_lock_dir; < 0:
                      none): a notice goes into dir's marks file as it
                      comes only while dir is still where the lock is */
  /* The STACKREC_DIR the tree was given: dir's name at the start (dir
   * follows a move of the directory, the processes' environment does not;
   * review, session 38). NULL: dir. */
  const char *env_dir;
  uint64_t foreign; /* datagrams without the token: not from the tree */
  /* The STACKREC_NOTIFY value given to the tree, "NAME/TOKEN" ("": none).
   * It also tells which processes still running were started under this
   * recording: their environment holds it. */
  char tree[64];
} stkr__rec_notices;

/* The channel (record_notify.c). Open: its name into name (cap bytes);
 * @return the fd (close-on-exec, non-blocking), or -1: then failures are
 * said on the program's stderr as without record. Drain: every queued
 * notice into nt. Print_live: the line naming the processes of the tree
 * still running (none: nothing). */
int stkr__rec_notify_open(char *name, size_t cap);
void stkr__rec_notify_drain(int fd, stkr__rec_notices *nt);
/* Name the processes in nt that recorded nothing (err != 0) in dir's marks
 * file (stkr_unrecorded_append), so that every reader of the recording
 * counts it incomplete, not only this summary: those not named there as
 * they came (stkr__rec_notify_drain does, so that a record killed before
 * its end loses none: QA, session 41). Those beyond the table are one
 * line with pid 0 that says how many. A failure is said on stderr;
 * nothing else changes. */
void stkr__rec_unrecorded_write(const char *dir, const stkr__rec_notices *nt);
/* Name the processes in nt that recorded (their notes, err 0, say why
 * writing failed: a full disk) and then ended, without a segment of
 * theirs in dir, in dir's marks file as stkr__rec_unrecorded_write does:
 * killed before anything reached the disk, their events are gone with no
 * count (QA, session 32: a worker SIGKILLed on a full disk vanished from
 * every view). After the recovery of dead writers. */
void stkr__rec_vanished_write(const char *dir, const stkr__rec_notices *nt);
void stkr__rec_print_live(FILE *f, const stkr__rec_notices *nt,
                          const char *dir);
/* The same processes into dir's marks file ("r1" lines, stkr_reader.h),
 * so that verify can tell a recording that may still grow. A failure is
 * said on stderr. @return how many were written, their pids in *pids
 * (malloc'd, the caller frees; NULL when none). */
size_t stkr__rec_running_write(const char *dir, const stkr__rec_notices *nt,
                               uint32_t **pids);
/* If cmd (as execvp finds it) is a statically linked ELF program, which
 * LD_PRELOAD cannot reach, a notice for process pid saying so: it recorded
 * nothing (record_notify.c). */
void stkr__rec_note_static(const char *cmd, int pid, stkr__rec_notices *nt);
/* After CMD ended: a static CMD that exec'd a dynamic program under its
 * pid (gosu, su-exec) recorded after all: its notice becomes a note (err
 * 0) that its calls before the exec were not recorded. */
void stkr__rec_static_settle(const char *dir, stkr__rec_notices *nt);

/* The notices in nt on f, a line each, each line after prefix: the
 * processes that recorded nothing with their reasons, the notes of those
 * that did, how many more came than were kept, and foreign ones. Names
 * and texts escaped (a TAB, a newline in a process name). */
void stkr__rec_print_notices(FILE *f, const stkr__rec_notices *nt,
                             const char *prefix);

/* Read dir and print the summary on f, with the processes in nt.
 * Best effort: a reading problem is reported, never changes the exit
 * status (that is the command's). */
void stkr__record_summary(const char *dir, const stkr__rec_notices *nt,
                          FILE *f);

#endif
