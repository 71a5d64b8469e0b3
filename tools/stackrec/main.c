/*
 * main.c: `stackrec`, the command-line reader of stackrec recordings.
 * Dispatches to a command (info.c, dump.c) and holds what they share:
 * opening inputs, printing warnings, exit status. See cli.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "symbolize/symbolize.h" /* stkr__demangle_swift_missed */
#include "proto/stkr_recover.h" /* stkr_recover_is_cache_name */
#include "recorder/stackrec.h" /* stkr_version */
#include "tools/stackrec/cli.h"

const char stkr_cli_exit_help[] =
    "Exit status:\n"
    "  0  all input read\n"
    "  1  recorded data lost (damaged, truncated or unsupported batches,\n"
    "     unreadable files), no recording found (an empty directory is an\n"
    "     empty recording: 0), or output failed\n"
    "  2  usage error\n"
    "  3  an input cannot be opened\n"
    "  4  (verify; recover --dry-run) intact but incomplete: events\n"
    "     dropped, a process that ended uncleanly, missing or deleted\n"
    "     segments, a recreated directory; other commands say so and exit 0\n";

/* Every command, once: the usage text and the dispatch both come from this
 * table, so a command cannot be listed without existing or the reverse. */
static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} k_commands[] = {
    {"record", stkr_cli_record,
     "run a command under the privacy hooks, then summarize"},
    {"info", stkr_cli_info, "summary of each recorded process"},
    {"dump", stkr_cli_dump, "one line per event (text or JSON)"},
    {"symbolize", stkr_cli_symbolize,
     "resolve an offline-mode recording into frames"},
    {"export", stkr_cli_export,
     "pprof, folded stacks, Chrome trace or JSON lines"},
    {"report", stkr_cli_report,
     "sites ranked by events, with their call stacks (or HTML)"},
    {"verify", stkr_cli_verify,
     "check every segment; exit 1 if damaged, 4 if incomplete"},
    {"merge", stkr_cli_merge, "several recordings into one directory"},
    {"atos", stkr_cli_atos,
     "addresses to function, file:line (Mach-O, dSYM or ELF)"},
    {"symcache", stkr_cli_symcache,
     "per-build symbol caches from dSYMs (for symbolize, atos)"},
    {"recover", stkr_cli_recover,
     "write out what killed processes left in their ring files"},
    /* fleet (issue 16) */
    {"push", stkr_cli_push, "recordings into ClickHouse (docs/fleet.md)"},
    {"compliance", stkr_cli_compliance,
     "per site and SDK: how often, before consent, in background; policy"},
    {"privacy-manifest", stkr_cli_privacy_manifest,
     "draft PrivacyInfo.xcprivacy; categories used but not declared"},
    {"mark", stkr_cli_mark, "set a mark (e.g. consent.granted) in a recording"},
    {"diff", stkr_cli_diff,
     "call paths added, gone or changed in rate between two recordings"},
    {"snapshot", stkr_cli_snapshot,
     "every thread's stack of a running process (like eu-stack)"},
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static void put_usage(void) {
  size_t i;

  fputs("Usage: stackrec COMMAND [OPTIONS] DIR|FILE...\n"
        "\n"
        "Read stackrec recordings: directories of stackrec-<pid>-<seq>.zst\n"
        "segment files, or single segment files.\n"
        "\n"
        "Commands:\n",
        stdout);
  for (i = 0; i < N_COMMANDS; i++)
    printf("  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
  fputs("\n"
        "Run 'stackrec COMMAND --help' for the options of a command,\n"
        "'stackrec --version' for the version.\n"
        "Warnings about damaged input go to stderr, naming file and offset.\n"
        "\n",
        stdout);
}

int stkr_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "stackrec%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'stackrec%s%s --help'.\n", cmd ? " " : "",
          cmd ? cmd : "");
  return STKR_CLI_USAGE;
}

int stkr_cli_bad_option(const char *cmd, int c, char *const *argv) {
  if (c == ':')
    return stkr_cli_usage_error(cmd, "option '%s' needs a value",
                                argv[optind - 1]);
  return stkr_cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
}

int stkr_cli_choice_parse(const char *cmd, const char *opt,
                          const char *const *names, const char *arg,
                          int *index) {
  char list[256];
  size_t n = 0;
  int i;

  for (i = 0; names[i] != NULL; i++)
    if (strcmp(arg, names[i]) == 0) {
      *index = i;
      return 0;
    }
  list[0] = '\0';
  for (i = 0; names[i] != NULL && n < sizeof list; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                          i == 0 ? "" : names[i + 1] ? ", " : " or ",
                          names[i]);
  return stkr_cli_usage_error(cmd, "%s '%s': %s", opt, arg, list);
}

/* Add the rows of t to s's getopt tables. @return 0, -1 when they are full
 * (a table too long: a programming error, said once). */
static int getopt_add(stkr_cli_getopt_state *s, const stkr_cli_opt *t,
                      size_t *n, size_t *ns) {
  for (; t != NULL && (t->name != NULL || t->key != 0); t++) {
    /* Room for the row, then --help and the end of each table. */
    if (*n + 2 > STKR_CLI_MAX_OPTS || *ns + 4 > sizeof s->shortopts)
      return -1;
    if (t->flags & STKR_CLI_SHORT) {
      s->shortopts[(*ns)++] = (char)t->key;
      if (t->flags & STKR_CLI_VALUE)
        s->shortopts[(*ns)++] = ':';
    }
    if (t->name != NULL)
      s->longopts[(*n)++] = (struct option){
          t->name, (t->flags & STKR_CLI_VALUE) ? required_argument
                                                : no_argument,
          NULL, t->key};
  }
  return 0;
}

/* The getopt tables of s from its option tables, --help (and -h) last. */
static void getopt_build(stkr_cli_getopt_state *s) {
  size_t n = 0, ns = 0;

  if (s->in_order)
    s->shortopts[ns++] = '+';
  s->shortopts[ns++] = ':'; /* ':' for a missing value, not '?' */
  if (getopt_add(s, s->opts, &n, &ns) != 0 ||
      getopt_add(s, s->more_opts, &n, &ns) != 0)
    fprintf(stderr, "stackrec %s: more than %d options: some ignored\n",
            s->cmd, STKR_CLI_MAX_OPTS);
  s->shortopts[ns++] = 'h';
  s->shortopts[ns] = '\0';
  s->longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
  s->longopts[n] = (struct option){NULL, 0, NULL, 0};
}

/* The choice of key c in s->choices, or NULL. */
static const stkr_cli_choice *getopt_choice(const stkr_cli_getopt_state *s,
                                            int c) {
  const stkr_cli_choice *t;

  for (t = s->choices; t != NULL && t->key != 0; t++)
    if (t->key == c)
      return t;
  return NULL;
}

/* The row of key c in s's tables, or NULL. */
static const stkr_cli_opt *getopt_row(const stkr_cli_getopt_state *s, int c) {
  const stkr_cli_opt *t;

  for (t = s->opts; t != NULL && (t->name != NULL || t->key != 0); t++)
    if (t->key == c)
      return t;
  for (t = s->more_opts; t != NULL && (t->name != NULL || t->key != 0); t++)
    if (t->key == c)
      return t;
  return NULL;
}

/* Was row (STKR_CLI_EXACT) given by an abbreviation of its name? The
 * element that named it is the last one getopt took ("--name=value",
 * "-kvalue") or the one before its value. @return the name typed (after
 * "--", *len bytes of it, the value left out), or NULL when it was whole
 * or a short option. */
static const char *getopt_abbreviated(const stkr_cli_opt *row, char **argv,
                                      int *len) {
  const char *e = argv[optind - 1];

  if (row->name == NULL || !(row->flags & STKR_CLI_EXACT))
    return NULL;
  if ((row->flags & STKR_CLI_VALUE) && optind >= 2 &&
      !(optarg > e && optarg <= e + strlen(e)))
    e = argv[optind - 2];
  if (strncmp(e, "--", 2) != 0)
    return NULL;
  *len = (int)strcspn(e + 2, "=");
  return strlen(row->name) == (size_t)*len ? NULL : e + 2;
}

int stkr_cli_getopt(stkr_cli_getopt_state *s, int argc, char **argv) {
  const stkr_cli_choice *choice;
  const stkr_cli_opt *row;
  int c;

  if (!s->started) {
    s->started = true;
    opterr = 0; /* our own messages, naming the command */
    optind = 1; /* commands run one after another in tests */
    getopt_build(s);
  }
  for (;;) {
    c = s->long_only
            ? getopt_long_only(argc, argv, s->shortopts, s->longopts, NULL)
            : getopt_long(argc, argv, s->shortopts, s->longopts, NULL);
    if (c == 'h') {
      for (size_t i = 0; i < sizeof s->help / sizeof s->help[0]; i++)
        if (s->help[i] != NULL)
          fputs(s->help[i], stdout);
      s->status = stkr_cli_flush(s->cmd);
      return STKR_CLI_OPT_EXIT;
    }
    if (c == ':' || c == '?') {
      s->status = stkr_cli_bad_option(s->cmd, c, argv);
      return STKR_CLI_OPT_EXIT;
    }
    if (c == -1 && s->operands != NULL && optind >= argc) {
      s->status = stkr_cli_usage_error(s->cmd, "no %s given", s->operands);
      return STKR_CLI_OPT_EXIT;
    }
    row = c == -1 ? NULL : getopt_row(s, c);
    choice = c == -1 ? NULL : getopt_choice(s, c);
    int len;
    const char *typed = row ? getopt_abbreviated(row, argv, &len) : NULL;
    if (typed != NULL) {
      s->status = stkr_cli_usage_error(s->cmd, "unknown option '--%.*s'",
                                       len, typed);
      return STKR_CLI_OPT_EXIT;
    }
    if (row != NULL && (row->flags & (STKR_CLI_VALUE | STKR_CLI_REPEAT)) ==
                           STKR_CLI_VALUE) {
      int k;
      for (k = 0; k < s->n_seen && s->seen[k] != c; k++)
        ;
      if (k < s->n_seen) { /* QA: `--from 1 --from 2` took 2 silently */
        char opt[64];
        if (row->name != NULL && (row->flags & STKR_CLI_SHORT))
          snprintf(opt, sizeof opt, "--%s (-%c)", row->name, c);
        else if (row->name != NULL)
          snprintf(opt, sizeof opt, "--%s", row->name);
        else
          snprintf(opt, sizeof opt, "-%c", c);
        s->status = stkr_cli_usage_error(s->cmd, "%s given twice", opt);
        return STKR_CLI_OPT_EXIT;
      }
      if (s->n_seen < STKR_CLI_MAX_OPTS)
        s->seen[s->n_seen++] = c;
    }
    if (choice != NULL) {
      char opt[64];

      snprintf(opt, sizeof opt, "--%s",
               row != NULL && row->name != NULL ? row->name : "?");
      s->status = stkr_cli_choice_parse(s->cmd, opt, choice->names,
                                        optarg, choice->index);
      if (s->status != 0)
        return STKR_CLI_OPT_EXIT;
    } else if (row != NULL && row->str != NULL)
      *row->str = optarg;
    else if (row != NULL && row->set != NULL)
      *row->set = true;
    else
      return c;
  }
}

int stkr_cli_load_error(const char *cmd, const char *what, const char *msg,
                        int rc) {
  fprintf(stderr, "stackrec %s: %s %s\n", cmd, what, msg);
  return rc == -EINVAL ? STKR_CLI_USAGE
         : rc == -ENOMEM ? STKR_CLI_DATA_LOST
                         : STKR_CLI_NO_INPUT;
}

/* Set by stkr_cli_open_opts: every input is a directory with no entry. */
static bool g_inputs_empty;

bool stkr_cli_inputs_empty(void) { return g_inputs_empty; }

bool stkr_cli_dir_empty(const char *path) {
  DIR *d = opendir(path);
  const struct dirent *e;
  bool empty = d != NULL;

  /* What a `record` killed before anything was recorded leaves is no
   * recording data: its probe (QA, session 38: "DAMAGED: no recording
   * found", exit 1), and its cache directory, unless its lock is there
   * (a record at work, or one killed before its end, which took with it
   * the names of processes that could not record: review). */
  while (empty && (e = readdir(d)) != NULL)
    empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, STKR_MARKS_FILE) == 0 ||
            (stkr_recover_is_cache_name(e->d_name) &&
             !stkr_recover_has_lock_file(path)) ||
            strncmp(e->d_name, STKR_CLI_PROBE_PREFIX,
                    sizeof STKR_CLI_PROBE_PREFIX - 1) == 0;
  if (d != NULL)
    closedir(d);
  return empty;
}

/* Warnings go to stderr as they come, in file order, so they can be matched
 * with the output around them. */
static void stkr__cli_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  /* An empty directory: said once, by stkr_cli_status. */
  if (w->kind == STKR_WARN_NO_SEGMENTS && g_inputs_empty)
    return;
  /* A recording still being written is not a problem, and an incomplete
   * one is shown where it belongs: `info` and `report` say so in their
   * output (accounting, "INCOMPLETE:"), `verify` line by line. */
  if (w->kind == STKR_WARN_LIVE_TAIL || w->kind == STKR_WARN_INCOMPLETE)
    return;
  stkr_cli_progress_pause();
  fflush(stdout);
  stkr_cli_put_line(stderr, "stackrec: warning: ", w->message, "");
}

/* Two inputs that are copies of one recording (stkr_reader_find_copies)
 * are refused, as merge refuses them: every event of theirs would count
 * twice (QA, session 33: every reader did, verify said intact).
 * @return 0, or the exit status (usage; out of memory). */
static int refuse_copies(const char *cmd, stkr_reader *r) {
  size_t a, b;
  uint64_t sid;
  int rc = stkr_reader_find_copies(r, &a, &b, &sid);

  if (rc == 0)
    return 0;
  if (rc < 0) {
    fprintf(stderr, "stackrec %s: %s\n", cmd, strerror(-rc));
    return STKR_CLI_DATA_LOST;
  }
  const stkr_process_info *pa = stkr_reader_process(r, a),
                          *pb = stkr_reader_process(r, b);
  return stkr_cli_usage_error(
      cmd, "'%s' and '%s' hold the same recording session %016llx of pid "
      "%u: copies of one recording? Give each recording once (nothing was "
      "read)", pa->dir, pb->dir, (unsigned long long)sid,
      (unsigned)pa->pid);
}

int stkr_cli_open(const char *cmd, char *const *paths, int n,
                  bool lazy_frames, stkr_reader **out) {
  stkr_reader_opts opts = {.warn = stkr__cli_warn, .warn_arg = NULL,
                           .lazy_frames = lazy_frames};

  return stkr_cli_open_opts(cmd, &opts, paths, n, out);
}

int stkr_cli_open_opts(const char *cmd, const stkr_reader_opts *opts,
                       char *const *paths, int n, stkr_reader **out) {
  stkr_reader *r;
  int i, err;

  *out = NULL;
  g_inputs_empty = n > 0;
  for (i = 0; i < n && g_inputs_empty; i++)
    g_inputs_empty = stkr_cli_dir_empty(paths[i]);
  err = stkr_reader_create(opts, &r);
  if (err != 0) {
    fprintf(stderr, "stackrec %s: %s\n", cmd, strerror(-err));
    return STKR_CLI_DATA_LOST;
  }
  for (i = 0; i < n; i++) {
    err = stkr_reader_add(r, paths[i]);
    if (err != 0) {
      fflush(stdout); /* what the command printed comes first */
      fprintf(stderr, "stackrec %s: cannot open %s: %s\n", cmd, paths[i],
              err == -EINVAL ? "not a directory or regular file"
                             : strerror(-err));
      stkr_reader_free(r);
      return err == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
    }
  }
  if (n > 1 && (err = refuse_copies(cmd, r)) != 0) {
    stkr_reader_free(r);
    return err;
  }
  *out = r;
  return 0;
}

int stkr_cli_status(const stkr_reader *r) {
  stkr_reader_counts c;

  stkr_reader_get_counts(r, &c);
  if (c.data_lost > 0)
    return STKR_CLI_DATA_LOST;
  if (stkr_reader_process_count(r) == 0) {
    if (g_inputs_empty && stkr_reader_unrecorded_count(r) != 0) {
      fprintf(stderr, "stackrec: no process recorded anything, and %zu "
                      "could not (INCOMPLETE; see 'stackrec verify')\n",
              stkr_reader_unrecorded_count(r));
      return STKR_CLI_OK;
    }
    if (g_inputs_empty) {
      fprintf(stderr, "stackrec: an empty recording: no process made a "
                      "watched call\n");
      return STKR_CLI_OK;
    }
    fprintf(stderr, "stackrec: no recording found\n");
    return STKR_CLI_DATA_LOST;
  }
  return STKR_CLI_OK;
}

int stkr_cli_flush(const char *cmd) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "stackrec %s: writing output: %s\n", cmd,
            strerror(errno));
    return STKR_CLI_DATA_LOST;
  }
  return STKR_CLI_OK;
}

void stkr_cli_marks_copy_said(const char *cmd, const char *dir, int err) {
  if (err == -EBADMSG)
    fprintf(stderr, "stackrec %s: %s/%s is damaged (not a regular file, or "
            "longer than a reader reads): the copy's marks file says so\n",
            cmd, dir, STKR_MARKS_FILE);
  else
    fprintf(stderr, "stackrec %s: cannot copy %s/%s: %s\n", cmd, dir,
            STKR_MARKS_FILE, strerror(-err));
}

void stkr_cli_swift_note(FILE *f, const char *cmd, const char *where) {
  uint64_t n = stkr__demangle_swift_missed();

  const char *env = getenv("STACKREC_SWIFT_RUNTIME");

  if (n == 0)
    return;
  fprintf(f, "stackrec %s: note: %llu Swift name%s left mangled%s: ", cmd,
          (unsigned long long)n, n == 1 ? "" : "s", where);
  if (env != NULL && *env != '\0') /* QA, session 39: said "set" it */
    fprintf(f, "STACKREC_SWIFT_RUNTIME=%s is no Swift runtime that loads "
               "(a libswiftCore.so with swift_demangle)\n", env);
  else
    fputs("no Swift runtime (libswiftCore.so) found; set "
          "STACKREC_SWIFT_RUNTIME\n", f);
}

FILE *stkr_cli_create(const char *cmd, const char *path) {
  FILE *f = path != NULL && strcmp(path, "-") != 0 ? fopen(path, "w") : stdout;

  if (f == NULL)
    fprintf(stderr, "stackrec %s: cannot create %s: %s\n", cmd, path,
            strerror(errno));
  return f;
}

int stkr_cli_close_output(const char *cmd, const char *path, FILE *f,
                          int err) {
  if (f != stdout && fclose(f) != 0 && err == 0)
    err = -errno;
  if (err == 0)
    return 0;
  fprintf(stderr, "stackrec %s: writing %s: %s\n", cmd,
          path != NULL ? path : "stdout", strerror(-err));
  return STKR_CLI_DATA_LOST;
}

int stkr_cli_finish(const char *cmd, const stkr_reader *r, int status) {
  if (status == STKR_CLI_OK)
    status = stkr_cli_status(r);
  if (stkr_cli_flush(cmd) != 0)
    status = STKR_CLI_DATA_LOST;
  return status;
}

/* The stack limit (RLIMIT_STACK) main found, while it is raised. */
static struct rlimit g_user_stack;
static bool g_stack_raised;

/* The commands keep paths (PATH_MAX) and tables on the stack: under
 * `ulimit -s 16` `stackrec record` died of SIGSEGV before it ran anything
 * (QA, session 28). The soft limit goes up to 8 MiB where the hard one
 * allows (the main thread's stack grows against the limit of the moment;
 * record gives the command the user's limit back). @return false when it
 * stays below 1 MiB: bash's `ulimit -s` sets the hard limit too. */
#define STKR__CLI_STACK ((rlim_t)8 << 20)
#define STKR__CLI_STACK_LEAST ((rlim_t)1 << 20)
static bool stack_limit_raise(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      rl.rlim_cur >= STKR__CLI_STACK)
    return true;
  g_user_stack = rl;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > STKR__CLI_STACK
                    ? STKR__CLI_STACK
                    : rl.rlim_max;
  if (rl.rlim_cur > g_user_stack.rlim_cur && setrlimit(RLIMIT_STACK, &rl) == 0)
    g_stack_raised = true;
  return (g_stack_raised ? rl.rlim_cur : g_user_stack.rlim_cur) >=
         STKR__CLI_STACK_LEAST;
}

void stkr_cli_stack_limit_restore(void) {
  if (g_stack_raised) (void)setrlimit(RLIMIT_STACK, &g_user_stack);
}

static int run_command(int argc, char **argv);

/* Otherwise the command runs on a thread of an 8 MiB stack (a mapping,
 * not bound by RLIMIT_STACK), main waiting with every signal blocked, so
 * that the process's signals reach the command's thread as they would
 * the main thread. */
typedef struct big_stack_call {
  int argc;
  char **argv;
  sigset_t mask;
  int rc;
} big_stack_call;

static void *on_big_stack(void *arg) {
  big_stack_call *c = arg;
  pthread_sigmask(SIG_SETMASK, &c->mask, NULL);
  c->rc = run_command(c->argc, c->argv);
  return NULL;
}

static int run_on_big_stack(int argc, char **argv) {
  big_stack_call c = {argc, argv, {{0}}, 0};
  pthread_attr_t attr;
  pthread_t t;
  sigset_t all;

  sigfillset(&all);
  if (pthread_attr_init(&attr) != 0) return run_command(argc, argv);
  (void)pthread_attr_setstacksize(&attr, STKR__CLI_STACK);
  pthread_sigmask(SIG_BLOCK, &all, &c.mask); /* the thread's, until it runs */
  int err = pthread_create(&t, &attr, on_big_stack, &c);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
    return run_command(argc, argv);
  }
  (void)pthread_join(t, NULL);
  return c.rc;
}

/* A standard descriptor the caller closed (`2>&-`) would be the number of
 * the next file a command opens, and its messages would go into that file
 * (QA, session 43: snapshot -o's summary inside its segment, which verify
 * then called damaged). Each closed one is /dev/null for us, opened the
 * other way round (stdin for writing, stdout and stderr for reading, as
 * gnulib's stdopen), so that using it still fails with EBADF as on a
 * closed one (review: `export >&-` exited 0), and close-on-exec, so that
 * the program `record` runs still finds it closed. */
static void std_fds_hold(void) {
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int n = open("/dev/null", (fd == 0 ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
      if (n >= 0 && n != fd) close(n); /* a lower one was free: not ours */
    }
}

int main(int argc, char **argv) {
  std_fds_hold();
  return stack_limit_raise() ? run_command(argc, argv)
                             : run_on_big_stack(argc, argv);
}

static int run_command(int argc, char **argv) {
  const char *cmd;

  if (argc < 2)
    return stkr_cli_usage_error(NULL, "missing command");
  cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    put_usage();
    fputs(stkr_cli_exit_help, stdout);
    return stkr_cli_flush("help");
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    /* The tool's and the library's it runs with (the hook library and
     * libstackrec.so of an install are built with it). */
    unsigned v = stkr_version();
    printf("stackrec %d.%d.%d (library %u.%u.%u)\n", STKR_VERSION_MAJOR,
           STKR_VERSION_MINOR, STKR_VERSION_PATCH, (v >> 16) & 0xff,
           (v >> 8) & 0xff, v & 0xff);
    return stkr_cli_flush("--version");
  }
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(cmd, k_commands[i].name) == 0)
      return k_commands[i].run(argc - 1, argv + 1);
  if (cmd[0] == '-')
    return stkr_cli_usage_error(NULL, "unknown option '%s'", cmd);
  return stkr_cli_usage_error(NULL, "unknown command '%s'", cmd);
}
