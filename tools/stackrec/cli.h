/*
 * cli.h: shared pieces of the `stackrec` command-line tool.
 *
 * Exit status of every command (also in the usage text):
 *   0  every input was read completely
 *   1  recorded data was lost: a batch was damaged, truncated or in an
 *      unsupported format version, a file could not be read, or no
 *      recording was found at all; also a failed write to stdout or an
 *      out-of-memory error
 *   2  usage error (bad command, option or argument)
 *   3  an input could not be opened (missing, no permission, not a file)
 *   4  (verify, and record's summary) intact but incomplete: events
 *      dropped, a session that ended uncleanly, segments missing from a
 *      session or deleted by the disk cap, a directory recreated mid-run,
 *      a segment file without any batch. Other commands exit 0 there and
 *      show the accounting (info per process, report at the top).
 * Output that cannot be written (stdout, or merge's OUT) is 1, never 3:
 * 3 is only for input.
 * Warnings that lose no data (ignored files, an empty segment of a live
 * recording) are printed but keep the status 0; the incomplete last batch
 * of a recording still being written is not a warning at all (info and
 * report say "still being written"; verify notes it).
 */
#ifndef STKR_CLI_H
#define STKR_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "proto/stkr_reader.h"

#define STKR_CLI_OK 0
#define STKR_CLI_DATA_LOST 1
#define STKR_CLI_USAGE 2
#define STKR_CLI_NO_INPUT 3
#define STKR_CLI_INCOMPLETE 4

/* The exit-status paragraph shared by every --help. */
extern const char stkr_cli_exit_help[];

/* Print "stackrec <cmd>: <msg>" and a --help hint to stderr; @return 2. */
int stkr_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For getopt_long's ':' (an option without its value; the optstring starts
 * with ':') or '?' (an unknown option), c: print which option, as
 * stkr_cli_usage_error does, naming argv[optind - 1]. @return 2. */
int stkr_cli_bad_option(const char *cmd, int c, char *const *argv);

/* One option of a command, a row of the table the command states: the
 * getopt_long table, the short-option string and --help's entry are all
 * built from it (main.c), so they cannot disagree. A table ends with a
 * row whose name and key are both 0. */
typedef struct stkr_cli_opt {
  const char *name; /* --name (unique prefixes too), NULL: -key only */
  int key;          /* what stkr_cli_getopt returns for it */
  unsigned flags;   /* STKR_CLI_VALUE, STKR_CLI_SHORT, ... below */
  const char **str; /* non-NULL: the value is stored here, key not returned */
  bool *set;        /* non-NULL: *set = true, key not returned */
} stkr_cli_opt;

#define STKR_CLI_VALUE 1u /* the option takes a value (optarg) */
#define STKR_CLI_SHORT 2u /* -key (a letter) is the option too */
/* A value option that may be given more than once (each value counts):
 * any other given twice is a usage error, not "the last one wins". */
#define STKR_CLI_REPEAT 4u
/* Only the whole --name: an abbreviation is refused as unknown, its value
 * unsaid (push's --password-file: `--password SECRET`, clickhouse-client's
 * spelling, was taken for it and the secret printed as a file name). */
#define STKR_CLI_EXACT 8u

/* An option whose value is one of a few names (--format text|json|...):
 * stkr_cli_getopt stores the index of the name given in *index, or ends
 * the parsing with stkr_cli_choice_parse's usage error. A table ends with
 * a row whose key is 0. */
typedef struct stkr_cli_choice {
  int key;                  /* the option's row in opts (STKR_CLI_VALUE) */
  const char *const *names; /* its values, NULL-ended */
  int *index;               /* where the index of the value goes */
} stkr_cli_choice;

/* The value arg of option opt ("--format") as the index of one of names
 * (NULL-ended) in *index. @return 0, or 2 after printing "stackrec <cmd>:
 * <opt> '<arg>': a, b or c" (names, listed) as stkr_cli_usage_error. */
int stkr_cli_choice_parse(const char *cmd, const char *opt,
                          const char *const *names, const char *arg,
                          int *index);

/* How many rows of opts and more_opts together, --help added. */
#define STKR_CLI_MAX_OPTS 32

/* A command's option parsing with stkr_cli_getopt: what every command's
 * getopt loop had in common (the reset, --help, the usage errors). Only
 * cmd, opts, more_opts, choices, help, long_only, in_order and operands
 * are the caller's. */
typedef struct stkr_cli_getopt_state {
  const char *cmd;
  const stkr_cli_opt *opts;      /* the command's table */
  const stkr_cli_opt *more_opts; /* a shared one (stkr__filter_opts), or NULL */
  /* The rows of opts whose value is one of a few names, or NULL: */
  const stkr_cli_choice *choices;
  const char *help[5];           /* --help prints these in order (NULL-ended) */
  bool long_only;                /* getopt_long_only (atos spells -arch) */
  bool in_order;                 /* stop at the first operand (record's CMD) */
  const char *operands; /* "DIR or FILE": at least one is needed, or NULL */
  bool started;                  /* false before the first call */
  int status;                    /* the exit status with STKR_CLI_OPT_EXIT */
  int seen[STKR_CLI_MAX_OPTS];   /* keys of the value options given so far */
  int n_seen;
  /* Built from the tables at the first call: */
  char shortopts[3 * STKR_CLI_MAX_OPTS + 3];
  struct option longopts[STKR_CLI_MAX_OPTS + 1];
} stkr_cli_getopt_state;

#define STKR_CLI_OPT_EXIT 0x10fe

/* The next option of argv (getopt's state is reset on the first call).
 * Options whose row names a place (str, set), and s->choices, are stored
 * there and parsing goes on. 'h' (the help printed, stdout flushed), ':'
 * / '?', a choice's unknown value and a value option without
 * STKR_CLI_REPEAT given twice (a usage error printed), and the end
 * of the options without an operand when s->operands says one is needed
 * ("no DIR or FILE given"), end the parsing: @return STKR_CLI_OPT_EXIT
 * with s->status the command's exit status. @return the option's key
 * otherwise, -1 at the end (the operands start at optind). */
int stkr_cli_getopt(stkr_cli_getopt_state *s, int argc, char **argv);

/* A file a person wrote and handed to cmd (a policy, a module map, a
 * manifest: what) could not be loaded: print "stackrec <cmd>: <what>
 * <msg>" (msg names the file, and the line when malformed).
 * @return the exit status for the loader's rc: 2 for -EINVAL (malformed),
 *         1 for -ENOMEM, else 3 (cannot be read). */
int stkr_cli_load_error(const char *cmd, const char *what, const char *msg,
                        int rc);

/* Create a reader (warnings to stderr as "stackrec: warning: ...") and add
 * every path. lazy_frames: see stkr_reader_opts (commands that aggregate,
 * or need no frames, pass true). @return 0, or an exit status (3 for an
 * input that cannot be opened, 2 for two inputs that are copies of one
 * recording (stkr_reader_find_copies), 1 out of memory) after printing
 * the error. */
int stkr_cli_open(const char *cmd, char *const *paths, int n,
                  bool lazy_frames, stkr_reader **out);

/* stkr_cli_open with the caller's reader options (its own warning,
 * incomplete or batch callbacks: merge, verify). Same errors and status. */
int stkr_cli_open_opts(const char *cmd, const stkr_reader_opts *opts,
                       char *const *paths, int n, stkr_reader **out);

/* The exit status for a reader that has been read (as far as wanted):
 * 1 if data was lost or no process was found, else 0. No process in
 * inputs that are all empty directories is 0, said on stderr: a recording
 * in which no process made a watched call (`record -- /bin/true`; a
 * process writes nothing until its first). */
int stkr_cli_status(const stkr_reader *r);

/* Were the last stkr_cli_open's inputs all directories without a single
 * entry? (Not thread-safe: the CLI's one thread.) */
bool stkr_cli_inputs_empty(void);
/* Is path a directory without any file of a process: empty, or only the
 * marks file (`stackrec mark`; record names there the processes that could
 * not record)? An empty recording: every command reads it as such, exit 0
 * (record's directory when no process made a watched call). */
bool stkr_cli_dir_empty(const char *path);

/* The one-line completeness summary of a reader that has been read
 * (verify.c): "INCOMPLETE: 1 of 2 processes (pid 4242): 14 events dropped
 * (...); 1 session without a clean end ..." (up to three pids) when any
 * process is incomplete or damaged, written into buf (cut to len). report
 * and report --html show it at the top; export, dump, privacy-manifest,
 * diff and compliance too. @return its length, 0 (buf "") when complete
 * and intact. */
size_t stkr_cli_incomplete_line(const stkr_reader *r, char *buf, size_t len);
/* Is p damaged, as verify says it (exit 1): a batch lost, events with
 * undefined ids, not read (a newer format), counters that overflow or do
 * not add up, a segment unreadable. verify.c; info's "complete" too. */
bool stkr_cli_process_damaged(const stkr_process_info *p);
/* How many processes the marks files name as still running since record
 * ended and alive now; *first (if first is not NULL) the first of them. */
size_t stkr_cli_running_alive(const stkr_reader *r,
                              const stkr_running_info **first);

/* The end of a process's accounting line, after its figures (info and
 * verify, each in its words): " <cap> N" for the events the disk cap
 * deleted, then the verdict, newline included. verdict[]: counters
 * overflow, they do not add up, N not accounted for (a format with one
 * %llu), no counters recorded, adds up. */
typedef struct stkr_cli_acct_words {
  const char *cap, *verdict[5];
} stkr_cli_acct_words;
void stkr_cli_put_accounting_end(const stkr_process_info *p,
                                 const stkr_cli_acct_words *w);

/* How p's dropped events split by reason, as verify, info and the
 * completeness line say it: "ring full N, reentrant N, other N, write
 * error N, exit N" (verify.c), in buf (STKR_CLI_DROP_REASONS_MAX bytes
 * hold any). @return buf. */
#define STKR_CLI_DROP_REASONS_MAX 160
const char *stkr_cli_drop_reasons(const stkr_process_info *p, char *buf,
                                  size_t len);

/* Flush stdout; @return 0, or 1 after printing an error if writing failed. */
int stkr_cli_flush(const char *cmd);
/* The stack limit the user gave, back in place: record's child, before it
 * execs the command (main raised ours: see main.c). Async-signal-safe. */
void stkr_cli_stack_limit_restore(void);
/* The note, on f, that Swift names were left mangled (no libswiftCore.so
 * found), if any were: "stackrec CMD: note: N Swift name(s) left mangled
 * WHERE: ...". f is stdout for commands whose report is their output. */
void stkr_cli_swift_note(FILE *f, const char *cmd, const char *where);
/* Say on stderr that copying DIR's marks file into OUT failed with err
 * (stkr_marks_copy, stkr_marks_copy_scoped): -EBADMSG is the input's
 * damage, carried into OUT's marks file, named so. */
void stkr_cli_marks_copy_said(const char *cmd, const char *dir, int err);

/* Refuse an output (option opt, e.g. "-o") that would destroy an input:
 * empty, the same file as an input, or a recording's file name (segment,
 * .session, .ring, the marks file) in an input directory or the directory
 * of an input file (output_check.c); and one that cannot be written (a
 * regular file or a new one: opened, or made and removed, nothing kept),
 * before any input is read. inputs[i] may be NULL (an optional input file
 * not given). NULL and "-" (stdout: stkr_cli_create) pass.
 * @return 0, STKR_CLI_USAGE after printing why, or STKR_CLI_DATA_LOST
 * after "cannot create PATH: why" (as stkr_cli_create's). */
int stkr_cli_check_output(const char *cmd, const char *opt, const char *path,
                          char *const *inputs, int n);
/* The directory holding file `path` (as the reader takes it: the path up
 * to its last '/') into dir (PATH_MAX bytes) and *st. @return 0 or -1. */
int stkr_cli_stat_dir_of(const char *path, char *dir, struct stat *st);
/* The same file: device and inode. */
bool stkr_cli_same_inode(const struct stat *a, const struct stat *b);
/* Is path (made or not) inside the directory `in`: is `in` its parent or
 * an ancestor of it (after links: its real path's)? An output there would
 * change the recording it copies (QA, session 40). */
bool stkr_cli_path_inside(const char *path, const struct stat *in);
/* merge, symbolize: refuse an OUT that exists and is not a directory,
 * or is a symbolic link that leads nowhere (mkdir cannot make it).
 * @return 0, or the usage status after printing why. */
int stkr_cli_check_out_dir(const char *cmd, const char *out);
/* merge: refuse an OUT that is not a directory, or is an input or the
 * directory of an input file. @return 0, or the usage status after
 * printing why. */
int stkr_cli_merge_check_out(const char *out, char *const *in, int n);
/* merge: refuse an input given again (the reader reads a directory or
 * file once, so OUT would hold it once while the summary counted both):
 * the same directory or file (device and inode: any path to it), or a
 * segment file of a directory also given (stkr_cli_stat_dir_of).
 * @return 0, or the usage status (or 1, out of memory) after printing
 * why. */
int stkr_cli_merge_check_repeats(char *const *in, int n);

/* A command's output file: path created (truncated) for writing, or stdout
 * when path is NULL or "-". @return the stream, or NULL after printing "stackrec
 * <cmd>: cannot create <path>: <why>". */
FILE *stkr_cli_create(const char *cmd, const char *path);

/* The end of writing f (from stkr_cli_create; stdout is left open): err is
 * what the writer returned (0 or -errno); a failed fclose counts when it is
 * 0. @return 0, or STKR_CLI_DATA_LOST after printing "stackrec <cmd>:
 * writing <path or stdout>: <why>". */
int stkr_cli_close_output(const char *cmd, const char *path, FILE *f,
                          int err);

/* The end of a command that read r: status when not 0, else r's
 * (stkr_cli_status), then stdout flushed (1 if that fails).
 * @return the command's exit status. */
int stkr_cli_finish(const char *cmd, const stkr_reader *r, int status);

/* One line of a message (a reader's warning: it names paths, which may
 * hold a newline or escape bytes): prefix, msg as stkr_cli_put_text
 * writes it (control and invalid bytes as \xNN), suffix, "\n". So one warning
 * stays one line (QA, session 25: a directory named with a newline split
 * one in two). */
void stkr_cli_put_line(FILE *f, const char *prefix, const char *msg,
                       const char *suffix);

/* Bytes as text: printable ASCII as is, '"' and '\\' escaped with a
 * backslash, every other byte as \xNN. */
void stkr_cli_put_escaped(FILE *f, const uint8_t *p, size_t n);

/* Bytes as text for viewers that take UTF-8 (pprof labels, the HTML
 * page): valid UTF-8 and printable ASCII as they are (a path with "\u20ac"
 * or a quote reads and matches as recorded; QA, session 27), but '\\'
 * doubled, control bytes and bytes of no valid UTF-8 sequence as \xNN:
 * two different byte strings never print the same (QA, session 33: the
 * byte 0xff and the text "\xff" were one pprof label). */
void stkr_cli_put_text(FILE *f, const uint8_t *p, size_t n);

/* Bytes as the inside of a JSON string: '"', '\\' and control characters
 * escaped, valid UTF-8 copied, every byte of invalid UTF-8 as \u00XX. */
void stkr_cli_put_json(FILE *f, const uint8_t *p, size_t n);

/* Bytes as a JSON string: stkr_cli_put_json between quotes. */
void stkr_cli_put_json_bytes(FILE *f, const uint8_t *p, size_t n);

/* A C string as a JSON string (quoted, as stkr_cli_put_json), or null when
 * s is NULL. */
void stkr_cli_put_json_str(FILE *f, const char *s);

/* A JSON object's member with a string value (stkr_cli_put_json_str):
 * before (",", "{", ",\n{" ...), then "key": and s. */
void stkr_cli_put_json_member(FILE *f, const char *before, const char *key,
                              const char *s);

/* A record (a line, a JSON object) built in memory and written with one
 * fwrite: for commands that print a small record per input at a high
 * rate (atos), where a printf or putc per field cost more than the
 * lookup behind it. Zero-initialize; reused after each write; freed by
 * stkr_cli_buf_free. Out of memory is sticky: what does not fit is
 * dropped and stkr_cli_buf_write reports it. Output bytes are those of
 * the stdio calls they replace (noted per function). */
typedef struct stkr_cli_buf {
  char *p;
  size_t len, cap;
  int err; /* 0 or -ENOMEM */
} stkr_cli_buf;
void stkr_cli_buf_put(stkr_cli_buf *b, const char *s, size_t n);
void stkr_cli_buf_puts(stkr_cli_buf *b, const char *s);
/* Decimal, as printf's %llu. */
void stkr_cli_buf_u64(stkr_cli_buf *b, uint64_t v);
/* Lower-case hexadecimal without 0x, as printf's %llx. */
void stkr_cli_buf_hex(stkr_cli_buf *b, uint64_t v);
/* As stkr_cli_put_json_str: quoted and escaped, or null when s is NULL. */
void stkr_cli_buf_json_str(stkr_cli_buf *b, const char *s);
/* Write what was built to f and empty b (write errors stay f's, as with
 * any stdio call: stkr_cli_flush reports them).
 * @return 0, or -ENOMEM when something was dropped since the last write. */
int stkr_cli_buf_write(stkr_cli_buf *b, FILE *f);
void stkr_cli_buf_free(stkr_cli_buf *b);

/* One event as a JSON object and a newline: the format of `dump --json`
 * and `export --format jsonl` (json_event.c). fr/n_fr are the frames to
 * show (ev's, or the app's with app_only, see stkr__app_frames); with
 * app_only "stack" keeps the PCs of the app's frames (the innermost PC
 * when none is the app's). */
void stkr_cli_put_event_json(FILE *f, const stkr_event_view *ev,
                             bool app_only, const stkr_frame *fr,
                             size_t n_fr, const stkr_reader *r);
/* The directory of process `process` of r when another process of r has
 * its pid (two recordings of pid 1 containers or devices), else NULL: the
 * key that tells them apart, as report's "(pid N, DIR)", chrome's tracks
 * and pprof's recording label do (QA, session 33: jsonl had none).
 * Processes are sorted by pid: a neighbour's is compared. O(1). */
const char *stkr_cli_shared_pid_dir(const stkr_reader *r, size_t process);

/* A stream that zstd-compresses into raw (one frame, checksum on) and
 * closes raw when it is closed (zst_out.c). @return the stream, or NULL
 * with errno set (raw is then still the caller's). */
FILE *stkr_cli_zstd_writer(FILE *raw);

/* `info --json`: every process of r (read to the end) as one JSON
 * document on stdout (info_json.c). @return 0 or -ENOMEM. */
int stkr__info_json(const stkr_reader *r, uint64_t events);

/* Commands: argc/argv start at the command name. @return exit status. */
int stkr_cli_info(int argc, char **argv);
int stkr_cli_dump(int argc, char **argv);
int stkr_cli_symbolize(int argc, char **argv);
int stkr_cli_record(int argc, char **argv);
int stkr_cli_export(int argc, char **argv);
int stkr_cli_report(int argc, char **argv); /* report.c */
int stkr_cli_verify(int argc, char **argv); /* verify.c */
int stkr_cli_merge(int argc, char **argv);  /* merge.c */
int stkr_cli_atos(int argc, char **argv);   /* atos.c */
int stkr_cli_symcache(int argc, char **argv); /* symcache.c */
int stkr_cli_mark(int argc, char **argv);   /* mark.c */
int stkr_cli_diff(int argc, char **argv);   /* diff.c */
/* ---- issue 13: compliance, privacy manifest ---- */
/* compliance, privacy-manifest: a rule broken / a category used but not
 * declared (the same number as data lost: CI fails either way). */
#define STKR_CLI_FINDINGS 1
int stkr_cli_compliance(int argc, char **argv); /* compliance_cmd.c */
int stkr_cli_privacy_manifest(int argc, char **argv); /* privacy_manifest.c */
/* ---- end issue 13 ---- */
int stkr_cli_snapshot(int argc, char **argv); /* snapshot.c */

/* What stkr_cli_symbolize_in_place did. */
typedef struct stkr_cli_sym_stats {
  uint64_t files;      /* segment files rewritten with frames */
  uint64_t live_files; /* left alone: their writer is still running */
  uint32_t live_pid;   /* the writer of the first of them */
  uint64_t resolved;   /* unique PCs resolved (one cache for all files) */
  uint64_t damaged;    /* damaged batches carried over unsymbolized */
  uint64_t from_symcache; /* images answered from a symbol cache */
} stkr_cli_sym_stats;

struct stkr_cli_symcache_todo; /* symcache_dir.h */
/* Symbolize every offline-mode segment file of dir where it is (symbolize.c;
 * `stackrec record` after the command ended): each file is rewritten to a
 * temporary file, synced and renamed over the original; files that have
 * frames already, or whose process still runs, are left alone: running
 * (n_running pids) names the processes of the recorded tree still running
 * (record's own list: a pid alone may be another program's since; QA,
 * session 28). Warnings
 * go to stderr as "stackrec record: warning: ..." unless quiet (record -q
 * prints nothing of its own into the program's stderr but failures).
 * symcache_dir (NULL: none): images with a cache there are answered from
 * it; the images read from DWARF instead are added to *todo (when not
 * NULL) for stkr_cli_symcache_fill once the summary is printed.
 * @return 0, or -errno (out of memory, a file that could not be written:
 *         that file is then unchanged). */
int stkr_cli_symbolize_in_place(const char *dir, bool quiet,
                                const char *symcache_dir,
                                struct stkr_cli_symcache_todo *todo,
                                const uint32_t *running, size_t n_running,
                                stkr_cli_sym_stats *st);
/* Is `name` (a file name in a recording directory) the temporary file
 * stkr_cli_symbolize_in_place writes a segment's new version to, which a
 * `record` killed while it symbolized leaves behind (".NAME.tmp", NAME a
 * segment's)? symbolize.c. */
bool stkr_cli_symbolize_is_temp(const char *name);
/* The prefix of the file `stackrec record` writes a block into to try its
 * directory (record_setup.c), which a record killed in that moment leaves
 * behind: not recording data (an empty recording stays empty; `stackrec
 * recover` removes it). */
#define STKR_CLI_PROBE_PREFIX ".stackrec-probe-"
int stkr_cli_recover(int argc, char **argv); /* recover.c */
int stkr_cli_push(int argc, char **argv);    /* push.c (issue 16) */
/* `stackrec record`, once the program exited: remove the processes'
 * shared cache (DIR/.stackrec-cache: unwind tables, the clock's anchor)
 * and recover the ring files of its processes that died (before the
 * summary reads the directory). One line on stderr when something was
 * recovered or lost, unless quiet. */
void stkr_cli_recover_after_record(const char *dir, bool quiet);
/* The events that dead writers left in path's ring files (crash-proof
 * rings), in no segment until `stackrec recover` writes them: a dry run of
 * recovery, which writes nothing. @return how many sessions hold them (0:
 * none, or path is no directory), their events in *events, and in *drops
 * (drops NULL: not asked) the events they dropped that no written batch
 * counts (ring full, failed writes: recovery adds them to the recording).
 * message/arg: recovery's notes on damaged files (NULL: on stderr).
 * recover.c. */
uint64_t stkr_cli_rings_left(const char *path,
                             void (*message)(void *arg, const char *line),
                             void *arg, uint64_t *events, uint64_t *drops);
/* For commands that write segments only (merge, symbolize): say on stderr
 * that dir's dead writers left events in ring files which are `where` (as
 * "not merged", "not in OUT"), and what to run. @return whether there are
 * any. recover.c. */
bool stkr_cli_rings_left_said(const char *cmd, const char *dir,
                              const char *where);
/* The same over the directories r reads (at most 64 distinct ones), their
 * notes on damaged files dropped (verify names those). verify.c. */
uint64_t stkr_cli_reader_rings_left(const stkr_reader *r, uint64_t *events);
/* Events the recorder dropped, or still in a dead writer's ring files,
 * are in no output of cmd (export, push, dump, privacy-manifest): said on
 * stderr ("stackrec CMD: note: ... they are not in WHERE"), never
 * silently; and so is anything else that makes the recording incomplete
 * or damaged (stkr_cli_incomplete_line). verify.c. */
void stkr_cli_note_left_out(const stkr_reader *r, const char *cmd,
                            const char *where);

/* A progress line on stderr for work over about a second, only when
 * stderr is a terminal (progress.c). Not thread-safe (one command runs). */
typedef struct stkr_cli_progress {
  const char *cmd;
  bool tty, shown;
  double start, last; /* CLOCK_MONOTONIC seconds */
} stkr_cli_progress;
void stkr_cli_progress_init(stkr_cli_progress *p, const char *cmd);
/* "stackrec CMD: 12.3 M events WHAT (4 s)"; what NULL: "read". Cheap when
 * nothing is printed: call it every ~million events, not every event. */
void stkr_cli_progress_update(stkr_cli_progress *p, uint64_t events,
                              const char *what);
/* stkr_cli_progress_update(p, events, NULL) as the progress callback of
 * stkr_agg_build and stkr_comp_build (arg: the stkr_cli_progress). */
void stkr_cli_progress_cb(uint64_t events, void *arg);
/* Erase the line (if shown). */
void stkr_cli_progress_done(stkr_cli_progress *p);
/* Erase whatever progress line is shown, before printing a warning. */
void stkr_cli_progress_pause(void);

/* Read every event of r with a progress line ("stackrec <cmd>: N M events
 * <what>"), on_event (if not NULL) seeing each (marks too); the count of
 * events, marks not included, in *events (if not NULL).
 * @return 0 at the end, or stkr_reader_next's -errno. */
int stkr_cli_read_all(stkr_reader *r, const char *cmd, const char *what,
                      void (*on_event)(const stkr_event_view *ev, void *arg),
                      void *arg, uint64_t *events);

/* Segments of process p the disk cap deleted: those its sessions'
 * accounting placed (tombstones, whichever process's cap left them, and
 * its own counter's), and any more its own counter says its cap deleted. */
static inline uint64_t stkr_cli_cap_deleted(const stkr_process_info *p) {
  return p->segments_deleted > p->segments_cap_deleted
             ? p->segments_deleted
             : p->segments_cap_deleted;
}

/* " (N events)" of segments the disk cap deleted, for a line that names
 * them (stkr_process_info.cap_deleted_events, summed), or "" for 0: into
 * buf. */
static inline const char *stkr_cli_cap_events(uint64_t n, char *buf,
                                              size_t len) {
  if (n == 0) return "";
  snprintf(buf, len, " (%llu event%s)", (unsigned long long)n,
           n == 1 ? "" : "s");
  return buf;
}

#endif
