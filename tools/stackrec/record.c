/*
 * record.c: `stackrec record`: run a command under the privacy hooks
 * (libstackrec_preload.so, see preload/README.md) and summarize what it
 * touched.
 *
 * The command runs as our child with LD_PRELOAD naming the hook library
 * and STACKREC_DIR an absolute recording directory, so every process of
 * its tree (forked or exec'd, whatever its working directory) writes its
 * own files into the same directory. We wait for it, then read the
 * directory with the public reader and print the summary on stderr (stdout
 * belongs to the command). Exit status: see record_help, the one place
 * that lists them.
 *
 * Setup is loud: a directory we cannot use, a malformed STACKREC_* value
 * (checked with the recorder's own parser, stkr_config_check_env) or
 * category list stops us before the command runs. Signals sent to us are
 * passed on to the command, and we still print the summary; once the
 * command has ended they are held back (blocked) until we exit, so that a
 * supervisor's second SIGTERM cannot kill us with the recording half
 * recovered or unsymbolized (issue 9). A process of
 * the tree that cannot record tells us why through an abstract unix
 * datagram socket (STACKREC_NOTIFY; preload.c) instead of writing into
 * the program's stderr, and the summary lists it.
 *
 * Cost independent of the number of processes: the tree records in
 * offline mode (PCs and image lists only: no process loads debug info),
 * and we symbolize the whole directory once at the end, one frame cache
 * for every file (stkr_cli_symbolize_in_place).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_elfkind.h"
#include "common/stkr_mkdir.h"
#include "common/stkr_which.h"
#include "preload/match.h"
#include "proto/stkr_format.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/record.h"
#include "tools/stackrec/symcache_dir.h"

static const char record_help[] =
    "Usage: stackrec record [-o DIR] [--depth N] [--categories LIST] [-q]\n"
    "                       [--symcache CDIR | --no-symcache] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with the privacy hooks preloaded (" STKR__REC_PRELOAD_NAME ") and\n"
    "record the call stack of every sensitive libc call it makes, in every\n"
    "process of its tree; then print a summary on stderr: events per\n"
    "category and API, the payloads (paths, addresses, names), distinct\n"
    "stacks, drops, the processes that recorded nothing and why, and for\n"
    "each API its most frequent stack (function and file:line; image+offset\n"
    "where no symbols were found).\n"
    "\n"
    "Categories: identifiers (machine-id, MAC, hostname, uname), network\n"
    "(connect, getaddrinfo), files (~/.ssh, browser profiles, keyrings,\n"
    "/etc/shadow, /etc/passwd), devices (camera, microphone), environment\n"
    "(getenv of the names in STACKREC_ENV_NAMES). The full catalogue is in\n"
    "preload/README.md.\n"
    "\n"
    "Options:\n"
    "  -o, --output DIR   recording directory (created; must not hold a\n"
    "                     recording already). Default:\n"
    "                     ./stackrec-CMD-YYYYMMDD-HHMMSS\n"
    "  -d, --depth N      frames per stack, 1-256 (default 64)\n"
    "  -c, --categories LIST\n"
    "                     comma-separated categories to record (identifiers,\n"
    "                     network, files, devices, environment, reasons), or\n"
    "                     \"all\". Default: all but reasons (the stat and\n"
    "                     statfs families: frequent, asked for explicitly)\n"
    "  -q, --quiet        no summary; only the notes of events lost or not\n"
    "                     recorded (a process that recorded nothing, a\n"
    "                     descriptor the program took over, ...)\n"
    "  --symcache CDIR    symbol caches (<build-id>.stkrsym, docs/SYMCACHE.md)\n"
    "                     for the resolution at the end: an image with one\n"
    "                     is answered from it, its DWARF never read; the\n"
    "                     images read from DWARF are then converted into\n"
    "                     caches there for the next runs (after the\n"
    "                     summary; a few per run). Default:\n"
    "                     $STACKREC_SYMCACHE (\"none\": none), else\n"
    "                     $XDG_CACHE_HOME/stackrec/symcache, else\n"
    "                     ~/.cache/stackrec/symcache\n"
    "  --no-symcache      neither read nor write symbol caches\n"
    "  -h, --help         this help\n"
    "\n"
    "The hook library is looked up in $STACKREC_PRELOAD, then next to the\n"
    "stackrec binary (../preload/, ./, ../lib/stackrec/). It goes first in\n"
    "LD_PRELOAD, before what the environment preloads already (but after\n"
    "sanitizer runtimes, which must be first). Every other\n"
    "STACKREC_* variable (STACKREC_ENV_NAMES, STACKREC_FORK, ...) is passed\n"
    "on to the hooks, after the same checks the recorder makes: a malformed\n"
    "value stops stackrec record before CMD runs.\n"
    "\n"
    "The processes record in offline mode (PCs and image lists only;\n"
    "STACKREC_SYMBOLIZE=offline unless set) and walk stacks with unwind\n"
    "tables built from each image's .eh_frame, so that code built without\n"
    "frame pointers is walked through (STACKREC_UNWIND=tables unless set;\n"
    "STACKREC_UNWIND=fp: frame pointers only). stackrec record resolves\n"
    "the whole recording into function names and file:line once CMD has\n"
    "ended, one symbol cache for all processes (as 'stackrec symbolize'\n"
    "would, but in place). A process still running then (a daemon CMD\n"
    "left behind) keeps its files unresolved.\n"
    "\n"
    "Signals: every signal a process can catch, sent to stackrec record,\n"
    "is passed on to CMD (not SIGCHLD, SIGXFSZ, nor the faults SEGV, BUS,\n"
    "FPE, ILL, TRAP, SYS); stackrec record waits for CMD and prints its\n"
    "summary. What the terminal sends the foreground job (^C, ^\\, ^Z, a\n"
    "hangup) reaches CMD directly and is not sent twice. As a shell's job,\n"
    "stackrec record stops when CMD stops (^Z), and fg/bg go on with both.\n"
    "Killed outright (SIGKILL), it takes CMD with it. Once CMD has ended,\n"
    "signals no longer stop stackrec record: it finishes the recording\n"
    "(recovery, symbolization, summary), names the signals it ignored on\n"
    "the summary's last line, and exits as below.\n"
    "\n"
    "Exit status:\n"
    "  CMD's exit status; if CMD was killed by signal N, record ends by\n"
    "  signal N too, after its summary (a shell shows 128+N);\n"
    "  when CMD was not run:\n"
    "  2    usage error, or a malformed STACKREC_* value (named on stderr)\n"
    "  3    the recording directory cannot be created or used (-o): a\n"
    "       file, no permission, a read-only or full file system (a\n"
    "       block is written there first)\n"
    "  125  stackrec record itself failed (no hook library, fork failed)\n"
    "  126  CMD cannot be executed\n"
    "  127  CMD was not found\n";

/* ---- signals and notices ------------------------------------------------ */

/* The signals passed on to CMD (record_signals.c). */
static stkr__rec_sigs g_sigs;
/* SIGXFSZ as we were given it, for the command (exec_cmd): record itself
 * ignores it, so that its own writes under a small RLIMIT_FSIZE (`ulimit
 * -f`, which is CMD's limit and ours alike) fail with EFBIG, said, instead
 * of killing it mid-symbolization with CMD's status lost and a lock left
 * behind (QA, session 40: exit 153 after CMD's 0). */
static struct sigaction g_xfsz_given;

static void on_sigchld(int sig) { (void)sig; /* wakes ppoll */ }

/* While CMD runs, record recovers the dead sessions of its directory every
 * RECOVER_EVERY_S: a supervisor whose workers are killed kept each dead
 * worker's ring and session files (~0.5 MB) until CMD ended, past any
 * disk cap (QA, session 31: 33 MB in 4 minutes under a 1 MiB cap). Here,
 * in record's own process, not in the recorded ones: no descriptor, lock
 * or delay of theirs is touched (a review found all three when a recorded
 * process's flush worker did it). At most 8 sessions and RECOVER_BUDGET_MS
 * a round, so that the processes' notices keep being read (a queue left
 * full sends their notes to the program's stderr): a larger session is
 * marked deferred and left to the unbounded recovery at CMD's end. Live
 * sessions are skipped (their locks). Notes are left to that recovery too. */
#define RECOVER_EVERY_S 10
#define RECOVER_BUDGET_MS 100
static void quiet_note(void *arg, const char *line) {
  (void)arg;
  (void)line;
}
static void recover_now(const char *dir) {
  stkr_recover_opts o = {.max_sessions = 8, .budget_ms = RECOVER_BUDGET_MS,
                         .message = quiet_note};
  stkr_recover_stats st;
  (void)stkr_recover_dir(dir, &o, &st);
}

static time_t mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

/* In run()'s child: exec argv with the hooks in LD_PRELOAD, or tell the
 * parent through fd why not (the errno), and _exit. */
static __attribute__((noreturn)) void exec_cmd(char **argv,
                                               const char *preload, int fd) {
  char *lp = stkr__rec_preload_list(preload, getenv("LD_PRELOAD"));
  char exe[4096];
  int err;
  ssize_t k;

  stkr_cli_stack_limit_restore();
  sigaction(SIGXFSZ, &g_xfsz_given, NULL);
  /* A program whose loader cannot load the hooks (another ELF class)
   * runs without them, or its loader says so in its stderr (QA, session
   * 33); stkr__rec_note_static names it. */
  if (stkr_which(argv[0], getenv("PATH"), exe, sizeof exe) &&
      stkr_program_kind(-1, exe) != STKR_ELF_OURS) {
    execvp(argv[0], argv);
    err = errno;
  } else if (lp == NULL || setenv("LD_PRELOAD", lp, 1) != 0) {
    err = errno;
  } else {
    execvp(argv[0], argv);
    err = errno;
  }
  k = write(fd, &err, sizeof err);
  (void)k;
  _exit(err == ENOENT ? STKR__REC_NOT_FOUND : STKR__REC_CANNOT_EXEC);
}

/* Run argv with the hooks (LD_PRELOAD set in the child only; the rest of
 * the STACKREC_* environment is ours already). Signals sent to us are
 * forwarded to the command; notices are collected while it runs (the
 * socket's queue is short). @return 0 with its wait status in *status, or
 * an exit code (125, 126, 127) after printing why. */
static int run(char **argv, const char *preload, const char *dir, int nfd,
               stkr__rec_notices *nt, int *status) {
  struct sigaction chld, old_chld;
  sigset_t block, oldmask, waitmask;
  struct pollfd pfd = {.fd = nfd, .events = POLLIN};
  pid_t pid, w, parent = getpid();
  int fds[2], err = 0, rc = 0;
  bool job_control = stkr__rec_job_control();
  ssize_t k;

  /* The child reports a failed exec through a close-on-exec pipe: EOF
   * means the exec succeeded. */
  if (pipe2(fds, O_CLOEXEC) != 0)
    return stkr__rec_error("pipe: %s", strerror(errno));
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigprocmask(SIG_BLOCK, &block, &oldmask);
  stkr__rec_sigs_install(&g_sigs); /* blocked too, until the wait */
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&g_sigs.set, sig) == 1)
      sigaddset(&block, sig);
  memset(&chld, 0, sizeof chld);
  chld.sa_handler = on_sigchld;
  sigaction(SIGCHLD, &chld, &old_chld);
  fflush(NULL);
  pid = fork();
  if (pid == 0) {
    /* The command gets the dispositions and mask we were given. */
    stkr__rec_sigs_restore(&g_sigs);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    close(fds[0]);
    /* record killed by a signal it cannot catch (SIGKILL: `timeout -s
     * KILL`, the OOM killer) kills the command as that signal would have
     * without record, instead of leaving it running orphaned (QA, session
     * 41). Before the exec: kept across it (not for set-user-ID
     * programs, which the kernel spares). Already gone: now. */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(STKR__REC_FAILED);
    exec_cmd(argv, preload, fds[1]);
  }
  if (pid < 0) {
    rc = stkr__rec_error("fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    goto out;
  }
  stkr__rec_sigs_child(pid);
  close(fds[1]);
  /* SIGPIPE of our own writes (a summary into a gone reader) is not
   * passed on (record_signals.c): the write fails, CMD's status stays. */
  /* SIGCHLD stays blocked but in ppoll: no wake-up is lost between the
   * waitpid and the wait. */
  waitmask = oldmask;
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&g_sigs.set, sig) == 1)
      sigdelset(&waitmask, sig);
  sigaddset(&waitmask, SIGCHLD);
  sigprocmask(SIG_SETMASK, &waitmask, NULL); /* forwarded: unblocked */
  sigdelset(&waitmask, SIGCHLD);             /* ppoll's mask */
  do
    k = read(fds[0], &err, sizeof err);
  while (k < 0 && errno == EINTR);
  close(fds[0]);
  if (k == 0) /* exec'd: a static program has no hooks */
    stkr__rec_note_static(argv[0], (int)pid, nt);
  time_t recover_at = mono_s() + RECOVER_EVERY_S;
  for (;;) {
    w = waitpid(pid, status, WNOHANG | WUNTRACED);
    if (w == pid && WIFSTOPPED(*status)) {
      /* A job's command stopped (^Z, a program suspending itself, tty
       * input in the background): the shell waits for record, so record
       * stops too (record_signals.c). */
      if (job_control)
        stkr__rec_follow_stop(WSTOPSIG(*status));
      continue;
    }
    if (w == pid) {
      /* CMD has ended: from here to our exit a forwarded signal would
       * kill us (or interrupt the recovery and symbolization) with no
       * one left to pass it to; it stays pending, and settle_signals()
       * names it. */
      sigprocmask(SIG_BLOCK, &block, NULL);
      break;
    }
    if (w < 0 && errno != EINTR) {
      rc = stkr__rec_error("waitpid: %s", strerror(errno));
      goto out;
    }
    if (w == 0) {
      time_t now = mono_s();
      struct timespec left = {recover_at > now ? recover_at - now : 0, 0};
      if (ppoll(&pfd, nfd >= 0 ? 1 : 0, &left, &waitmask) > 0)
        stkr__rec_notify_drain(nfd, nt);
      if (mono_s() >= recover_at) {
        recover_now(dir);
        recover_at = mono_s() + RECOVER_EVERY_S;
      }
    }
  }
  stkr__rec_notify_drain(nfd, nt);
  if (k == (ssize_t)sizeof err) {
    stkr__rec_error("cannot run %s: %s", argv[0], strerror(err));
    rc = err == ENOENT ? STKR__REC_NOT_FOUND : STKR__REC_CANNOT_EXEC;
  }
out:
  /* The forwarded signals stay blocked (and forward() installed) until we
   * exit, whatever the path: record never returns to a caller that would
   * run on, and restoring the default dispositions here is what let a
   * second SIGTERM kill us before finish() (issue 9). SIGCHLD is ours to
   * give back. */
  sigprocmask(SIG_BLOCK, &block, NULL);
  stkr__rec_sigs_child_gone();
  sigaction(SIGCHLD, &old_chld, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&g_sigs.set, sig) == 1)
      sigaddset(&oldmask, sig);
  sigprocmask(SIG_SETMASK, &oldmask, NULL);
  return rc;
}

/* Tests only: with STACKREC_RECORD_TEST_HOLD=PATH, once CMD has ended,
 * create PATH and wait until it is removed (at most 60 s), so that a test
 * can send a signal that surely arrives after CMD's end, on any machine
 * (tests/test-record-setup.c: test_signals_after_end). */
static void test_hold(void) {
  const char *path = getenv("STACKREC_RECORD_TEST_HOLD");
  struct timespec tick = {0, 10 * 1000 * 1000};
  int fd, i;

  if (path == NULL || path[0] == '\0' ||
      (fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0)
    return;
  close(fd);
  for (i = 0; i < 6000 && access(path, F_OK) == 0; i++)
    nanosleep(&tick, NULL);
}

/* The environment every process of the tree reads (the child adds
 * LD_PRELOAD). With offline non-NULL, also STACKREC_SYMBOLIZE=offline if
 * the user did not set it (*offline: we did). @return 0 or -errno. */
static int set_env(const char *dir, const char *depth, const char *cats,
                   const char *notify, bool *offline) {
  const char *v = getenv("STACKREC_SYMBOLIZE");

  /* Offline unless the user chose: no process loads debug info, we
   * resolve the whole recording once at the end. */
  if (offline != NULL && (*offline = v == NULL || v[0] == '\0') &&
      setenv("STACKREC_SYMBOLIZE", "offline", 1) != 0)
    return -errno;
  /* Tables unless the user chose: the programs record runs (Debian's
   * python3, libc) are built without frame pointers, where a frame-pointer
   * walk stops at the first frame (docs/UNWIND.md). */
  v = getenv("STACKREC_UNWIND");
  if ((v == NULL || v[0] == '\0') && setenv("STACKREC_UNWIND", "tables", 1) != 0)
    return -errno;
  if (
      (dir && setenv("STACKREC_DIR", dir, 1) != 0) ||
      (depth && setenv("STACKREC_DEPTH", depth, 1) != 0) ||
      (cats && setenv("STACKREC_CATEGORIES", cats, 1) != 0) ||
      (notify && setenv("STACKREC_NOTIFY", notify, 1) != 0))
    return -errno;
  if (!notify)
    unsetenv("STACKREC_NOTIFY"); /* not an outer record's */
  return 0;
}

/* The recording directory moved while the command ran (`mv DIR ELSEWHERE`):
 * where it is now, found by our own lock file in it (lock, the descriptor
 * of DIR/.stackrec-cache/record.lock), into dir (cap bytes), said. The
 * end's work (recovery, the lines of the processes that recorded nothing,
 * symbolization, the summary) then happens there (QA, session 38: those
 * lines went to the old, gone path, and the moved recording verified
 * complete with 70% of its events missing: the processes started after
 * the move, whose STACKREC_DIR names the old path, could not record).
 * Linux (stkr_recover_locked_dir_now); elsewhere, or without a lock,
 * "gone" as before. */
static void follow_moved_dir(char *dir, size_t cap, int lock) {
  char now[PATH_MAX];

  /* Our lock under the name: not moved. Else followed even when the name
   * holds something now (`mv DIR DIR.1; mkdir DIR`, or another record's
   * directory: review, session 38). */
  if (lock < 0 || stkr_recover_lock_is_at(lock, dir) ||
      !stkr_recover_locked_dir_now(lock, now, sizeof now) ||
      strlen(now) >= cap || strcmp(now, dir) == 0)
    return;
  stkr__rec_error("the recording directory %s was moved to %s while the "
                  "command ran; the recording ends there (a process started "
                  "after the move could not record into the old name: each "
                  "that said so is named there)", dir, now);
  memcpy(dir, now, strlen(now) + 1);
}

/* After the command: resolve the recording in place (if the tree recorded
 * offline because we said so), then print the summary. */
static void finish(const char *cmd, const char *dir, int status, bool quiet,
                   bool symbolize, const char *symcache_dir,
                   stkr_cli_symcache_todo *todo,
                   const stkr__rec_notices *nt) {
  stkr_cli_sym_stats st;
  struct stat dst;
  uint32_t *running = NULL;
  size_t n_running = 0;
  int err;

  /* Moved or deleted while the command ran (the processes' files went
   * with it, or into a directory they made again under the name): said
   * plainly, not as a failure to symbolize (QA, session 28). */
  if (stat(dir, &dst) != 0 && errno == ENOENT) {
    stkr__rec_error("the recording directory %s is gone (moved or deleted "
                    "while %s ran?)", dir, cmd);
    symbolize = false;
  } else {
    /* Dead writers' ring files (crash-proof rings) are recovered first,
     * after the command was reaped and before the recording is
     * symbolized and summarized. */
    stkr_cli_recover_after_record(dir, quiet);
    stkr__rec_unrecorded_write(dir, nt);
    stkr__rec_vanished_write(dir, nt);
    n_running = stkr__rec_running_write(dir, nt, &running);
    stkr__rec_marks_release(dir, false);
  }
  if (symbolize &&
      (err = stkr_cli_symbolize_in_place(dir, quiet, symcache_dir, todo,
                                         running, n_running, &st)) < 0)
    stkr__rec_error("symbolizing %s failed (%s%s): the summary shows "
                    "image+offset; 'stackrec symbolize' can resolve it later",
                    dir, strerror(-err),
                    err == -EFBIG ? ": the file size limit, ulimit -f" : "");
  else if (symbolize && st.live_files && !quiet)
    /* Naming one writer: it may end before the summary's list of the
     * processes still running (QA, session 20). */
    fprintf(stderr, "stackrec record: %llu segment file%s of processes still "
                    "running (process %u%s) %s left unresolved ('stackrec "
                    "symbolize -o OUT DIR' resolves %s once they end)\n",
            (unsigned long long)st.live_files, st.live_files == 1 ? "" : "s",
            (unsigned)st.live_pid, st.live_files == 1 ? "" : ", ...",
            st.live_files == 1 ? "was" : "were",
            st.live_files == 1 ? "it" : "them");
  free(running);
  if (symbolize && !quiet && st.from_symcache)
    fprintf(stderr, "stackrec record: %llu image%s answered from symbol "
                    "caches in %s\n", (unsigned long long)st.from_symcache,
            st.from_symcache == 1 ? "" : "s", symcache_dir);
  if (quiet) { /* the notices only, all of them said (QA, session 33) */
    stkr__rec_print_notices(stderr, nt, "stackrec record: ");
    return;
  }
  stkr__rec_sigs_passed(stderr, cmd);
  if (WIFSIGNALED(status))
    fprintf(stderr, "stackrec record: %s was killed by signal %d (%s)\n",
            cmd, WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    fprintf(stderr, "stackrec record: %s exited with status %d\n", cmd,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  stkr__record_summary(dir, nt, stderr);
}

/* What record does once CMD has ended. */
typedef struct after_cmd {
  const char *cmd, *dir;
  int status;
  bool quiet, symbolize;
  const char *symcache;
  stkr_cli_symcache_todo *todo;
  const stkr__rec_notices *nt;
} after_cmd;

static void *after_cmd_main(void *arg) {
  after_cmd *a = arg;
  finish(a->cmd, a->dir, a->status, a->quiet, a->symbolize, a->symcache,
         a->todo, a->nt);
  stkr__rec_sigs_settle(&g_sigs, a->cmd, a->quiet);
  /* After the summary: the caches cost this run, once, what they save
   * every later one (libc: ~0.15 s written, ~50 ms a run saved). Quiet:
   * not a word, the program's stderr is ours too. */
  if (a->symcache != NULL)
    stkr_cli_symcache_fill(a->todo, a->symcache, "record",
                           a->quiet ? STKR_CLI_SYMCACHE_SILENT
                                    : STKR_CLI_SYMCACHE_NOTES);
  return NULL;
}

/* The smallest stack that after_cmd_main runs on. libdw's line-table
 * reader keeps ~150 KiB of arrays on the stack (libc's table), and a
 * `ulimit -s 128` meant for CMD (ulimit sets the hard limit too) killed
 * record with SIGSEGV in finish: CMD's status and the summary lost. A
 * thread's stack is mapped, whatever RLIMIT_STACK; under glibc the threads
 * it starts (symcache_stream.c's readers) get the same default. */
#define REC_STACK_MIN ((size_t)8 << 20)

static void after_cmd_with_room(after_cmd *a) {
  struct rlimit rl;
  pthread_attr_t attr;
  pthread_t t;

  if (getrlimit(RLIMIT_STACK, &rl) == 0 &&
      (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= REC_STACK_MIN)) {
    after_cmd_main(a);
    return;
  }
  if (pthread_attr_init(&attr) == 0) {
    int err = pthread_attr_setstacksize(&attr, REC_STACK_MIN);
#if defined(__GLIBC__)
    if (err == 0) (void)pthread_setattr_default_np(&attr);
#endif
    /* Signals: the thread inherits our mask (the forwarded ones held). */
    if (err == 0) err = pthread_create(&t, &attr, after_cmd_main, a);
    pthread_attr_destroy(&attr);
    if (err == 0) {
      (void)pthread_join(t, NULL);
      return;
    }
  }
  after_cmd_main(a); /* no thread: on the stack we have */
}

/* --depth's value: 1-256. @return 0, or the usage error's status. */
static int check_depth(const char *v) {
  char *end;
  unsigned long n;
  errno = 0;
  n = strtoul(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno || n < 1 || n > 256)
    return stkr_cli_usage_error("record", "--depth: \"%s\" is not a "
                                          "number in 1-256", v);
  return 0;
}

/* The options that exclude each other or may not be empty. @return 0, or
 * the usage error's status. */
static int check_options(const char *symcache, bool no_symcache,
                         const char *cats) {
  if (no_symcache && symcache)
    return stkr_cli_usage_error("record", "--symcache and --no-symcache "
                                          "exclude each other");
  if (symcache != NULL && symcache[0] == '\0')
    return stkr_cli_usage_error("record", "--symcache: empty directory name");
  /* Unset STACKREC_CATEGORIES means the default; an option given empty is
   * a mistake, as an empty item in a list is. */
  if (cats != NULL && cats[0] == '\0')
    return stkr_cli_usage_error("record", "--categories: no category given "
                                          "(leave the option out for the "
                                          "default)");
  return 0;
}

int stkr_cli_record(int argc, char **argv) {
  static stkr__rec_notices nt; /* large; one record per process */
  /* Static for the same reason as nt: a small `ulimit -s` (see
   * stkr__rec_find_preload). */
  static char preload[PATH_MAX], dir[PATH_MAX], symcache_buf[PATH_MAX];
  static char env_dir[PATH_MAX]; /* dir as the tree was given it */
  const char *out_opt = NULL, *depth = NULL, *cats = NULL, *symcache = NULL;
  char notify[64];
  stkr_cli_symcache_todo todo = {0};
  bool quiet = false, offline, no_symcache = false;
  const unsigned SV = STKR_CLI_SHORT | STKR_CLI_VALUE;
  const stkr_cli_opt opts[] = {
      {"output", 'o', SV, NULL, NULL},
      {"depth", 'd', SV, NULL, NULL},
      {"categories", 'c', SV, &cats, NULL},
      {"quiet", 'q', STKR_CLI_SHORT, NULL, &quiet},
      {"symcache", 'S', STKR_CLI_VALUE, &symcache, NULL},
      {"no-symcache", 'N', 0, NULL, &no_symcache},
      {0}};
  /* in_order: stop at CMD, so its own options stay its own. */
  stkr_cli_getopt_state gopt = {.cmd = "record", .opts = opts,
                                .help = {record_help}, .in_order = true};
  int c, rc, status = 0, nfd, dir_lock = -1;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT: /* record's own failure is 125, not 1 */
      return gopt.status == STKR_CLI_DATA_LOST ? STKR__REC_FAILED : gopt.status;
    case 'o':
      out_opt = optarg;
      if (out_opt[0] == '\0')
        return stkr_cli_usage_error("record", "-o: empty directory name");
      break;
    case 'd':
      if ((rc = check_depth(optarg)) != 0)
        return rc;
      depth = optarg;
      break;
    }
  }
  if (optind >= argc)
    return stkr_cli_usage_error("record", "no command given");
  {
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGXFSZ, &ign, &g_xfsz_given);
  }
  if ((rc = check_options(symcache, no_symcache, cats)) != 0)
    return rc;
  if (!no_symcache && symcache == NULL)
    symcache = stkr_symcache_dir(symcache_buf, sizeof symcache_buf);
  /* STACKREC_DIR is set below, once the directory exists. */
  if (set_env(NULL, depth, cats, NULL, &offline) != 0)
    return stkr__rec_error("setenv: %s", strerror(errno));
  if ((rc = stkr__rec_check_env(cats)) != 0)
    return rc;
  if ((rc = stkr__rec_find_preload(preload, sizeof preload)) != 0)
    return rc;
  if (strchr(preload, ':') != NULL || strchr(preload, ' ') != NULL)
    return stkr__rec_error("the hook library path %s contains ':' or ' ', "
                           "which LD_PRELOAD cannot express", preload);
  struct stat before;
  bool made = out_opt == NULL || stat(out_opt, &before) != 0;
  if ((rc = stkr__rec_make_dir(out_opt, argv[optind], dir, sizeof dir,
                                &dir_lock)) != 0)
    return rc;
  nfd = stkr__rec_notify_open(notify, sizeof notify);
  if (set_env(dir, NULL, NULL, nfd >= 0 ? notify : NULL, NULL) != 0) {
    rc = stkr__rec_error("setenv: %s", strerror(errno));
    goto out;
  }
  memset(&nt, 0, sizeof nt);
  nt.dir = dir;
  nt.lock = dir_lock;
  if (nfd >= 0)
    snprintf(nt.tree, sizeof nt.tree, "%s", notify);
  if ((rc = run(argv + optind, preload, dir, nfd, &nt, &status)) != 0) {
    /* CMD never ran (126, 127): no recording, so no directory of ours
     * left behind (rmdir: only if still empty, once the lock is gone). */
    stkr_recover_unlock_dir(dir, dir_lock);
    dir_lock = -1;
    stkr__rec_marks_release(dir, true);
    if (made) (void)rmdir(dir);
    goto out;
  }
  if (WIFEXITED(status))
    rc = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    rc = 128 + WTERMSIG(status);
  else
    rc = STKR__REC_FAILED;
  memcpy(env_dir, dir, sizeof env_dir); /* the tree's STACKREC_DIR */
  nt.env_dir = env_dir;
  follow_moved_dir(dir, sizeof dir, dir_lock);
  stkr__rec_static_settle(dir, &nt); /* its files, if any, are there now */
  test_hold();
  {
    after_cmd a = {argv[optind], dir, status, quiet, offline, symcache,
                   &todo, &nt};
    after_cmd_with_room(&a);
  }
  stkr_cli_symcache_todo_free(&todo);
out:
  stkr_recover_unlock_dir(dir, dir_lock);
  if (nfd >= 0)
    close(nfd);
  /* Killed by signal N: record ends by N too, its work done (a caller
   * tells "killed" from "exited 128+N": record_signals.c). */
  if (rc != 0 && rc == 128 + WTERMSIG(status) && WIFSIGNALED(status))
    stkr__rec_die_like(WTERMSIG(status));
  return rc;
}
