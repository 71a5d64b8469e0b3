/*
 * record_signals.c: `stackrec record` stands in for its command towards
 * whoever sent it signals, stops and waits on it (split from record.c).
 *
 * A supervisor, a shell or `timeout` holds record's pid, not the
 * command's. So:
 * - every signal a process can catch is passed on (QA, session 41: only
 *   TERM, HUP, INT, QUIT, USR1 and USR2 were; ALRM, XCPU, IO... killed
 *   record and orphaned the command, TTIN/TTOU/TSTP stopped record, CONT
 *   never reached a stopped command, so TERM then CONT to a stopped one
 *   hung), except the faults of record's own code (SEGV, BUS, FPE, ILL,
 *   TRAP, SYS: default, as a handler that returns would loop), SIGCHLD
 *   (ours: the command's end) and SIGXFSZ (ignored: record.c). A signal
 *   the kernel sent the terminal's process group (^C, ^Z, a hangup, a
 *   resize: si_code SI_KERNEL) reached the command too, and one record
 *   sent itself (SIGPIPE of its own write) is not the command's: neither
 *   is passed on; except a terminal's signal when the command has left
 *   record's process group (setpgid): then to the command's group;
 * - a command that stops is followed, when record is a job of a shell with
 *   job control (the leader of its process group, with a controlling
 *   terminal): record stops by the same signal, so that the shell sees
 *   the job stopped and gets its terminal back (QA: a program suspending
 *   itself, tmux's ^B ^Z, left the shell hung). Elsewhere no one waits
 *   for stops, and a record stopped after its command was continued
 *   behind its back would hang its caller: not followed;
 * - a command killed by signal N: record ends by N too, once its work is
 *   done (stkr__rec_die_like), so that a shell's loop stops at ^C and a
 *   caller sees "killed by N", as without record (QA: 128+N made `for`
 *   loops run on and xargs go on).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tools/stackrec/record.h"

/* Written by stkr__rec_sigs_child (with the forwarded signals blocked),
 * read by forward() (a signal handler on record's one thread). */
static volatile sig_atomic_t g_child;
/* Written by forward(), read by stkr__rec_sigs_child: signals that came
 * before the command's pid was known; and how many of each were passed
 * on (for the summary: QA, session 31, HUP twice then TERM was said as
 * "passed signal 15"). */
static volatile sig_atomic_t g_pending[NSIG], g_passed_n[NSIG];

/* Passed on? The ones record cannot catch, its own faults, its SIGCHLD
 * and SIGXFSZ are not (see the top of this file). */
static bool forwardable(int sig) {
  switch (sig) {
  case SIGKILL: case SIGSTOP: case SIGCHLD: case SIGXFSZ:
  case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP:
  case SIGSYS:
    return false;
  default:
    return true;
  }
}

static void forward(int sig, siginfo_t *si, void *uc) {
  int saved = errno;

  (void)uc;
  /* The terminal's group signals reached the command too: not twice.
   * SIGCONT always goes on (the command may have been stopped alone). */
  if (si != NULL && sig != SIGCONT && si->si_code <= 0 &&
      si->si_pid == getpid())
    return;
  if (si != NULL && sig != SIGCONT && si->si_code == SI_KERNEL) {
    /* Unless the command left our group (setpgid(0, 0): GNU timeout,
     * daemons' helpers): plainly it would lead the terminal's group and
     * get ^C; here that group is record's, and the command's group got
     * nothing (QA, session 47: `record -- timeout 10 sleep 5` ran on
     * through ^C). Its whole group, as the terminal would. getpgid and
     * getpgrp are system calls, safe here. */
    bool tty_sig = sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP ||
                   sig == SIGHUP || sig == SIGWINCH;
    pid_t grp = tty_sig && g_child > 0 ? getpgid((pid_t)g_child) : -1;
    if (grp <= 0 || grp == getpgrp()) {
      errno = saved;
      return;
    }
    g_passed_n[sig] = g_passed_n[sig] + 1;
    (void)kill(-grp, sig);
    errno = saved;
    return;
  }
  g_passed_n[sig] = g_passed_n[sig] + 1; /* all signals blocked in here */
  if (g_child > 0) {
    (void)kill((pid_t)g_child, sig);
    /* A command in a group of its own was stopped as a group (the ^Z
     * passed on above): `fg` continues record alone, and the command's
     * children stayed stopped (QA, session 47: timeout's sleep). */
    pid_t grp = sig == SIGCONT ? getpgid((pid_t)g_child) : -1;
    if (grp > 0 && grp != getpgrp()) (void)kill(-grp, sig);
  } else {
    g_pending[sig] = 1;
  }
  errno = saved;
}

void stkr__rec_sigs_install(stkr__rec_sigs *s) {
  struct sigaction act;

  memset(&act, 0, sizeof act);
  act.sa_sigaction = forward;
  act.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&act.sa_mask);
  sigemptyset(&s->set);
  g_child = 0;
  for (int sig = 1; sig < NSIG; sig++) {
    g_pending[sig] = 0;
    g_passed_n[sig] = 0;
    if (!forwardable(sig))
      continue;
    sigaddset(&s->set, sig); /* blocked first: none lost in between */
  }
  sigprocmask(SIG_BLOCK, &s->set, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    /* glibc's own signals (32, 33) are refused: not ours to pass. */
    if (sigismember(&s->set, sig) == 1 &&
        sigaction(sig, &act, &s->given[sig]) != 0)
      sigdelset(&s->set, sig);
}

void stkr__rec_sigs_restore(const stkr__rec_sigs *s) {
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&s->set, sig) == 1)
      sigaction(sig, &s->given[sig], NULL);
}

void stkr__rec_sigs_child(pid_t pid) {
  g_child = pid;
  for (int sig = 1; sig < NSIG; sig++)
    if (g_pending[sig]) {
      g_pending[sig] = 0;
      (void)kill(pid, sig);
    }
}

void stkr__rec_sigs_child_gone(void) { g_child = 0; }

bool stkr__rec_job_control(void) {
  int fd;

  if (getpgrp() != getpid())
    return false;
  if ((fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0)
    return false;
  close(fd);
  return true;
}

void stkr__rec_follow_stop(int sig) {
  struct sigaction dfl, ours;
  sigset_t one, old;

  /* By the command's own signal, so that the shell says why ("Stopped
   * (tty input)"); its default action is to stop. When the shell
   * continues the job (SIGCONT to the group) the command goes on with
   * us; when only record is continued, forward() passes the SIGCONT on. */
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  if (sig != SIGSTOP && sigaction(sig, &dfl, &ours) != 0)
    return;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, &old);
  (void)raise(sig); /* returns once continued (an orphaned group: at once) */
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (sig != SIGSTOP)
    sigaction(sig, &ours, NULL);
}

/* "SIGTERM" for 15 (glibc's abbreviation), "SIGRTMIN+2", or "signal N". */
static const char *sig_name(int sig, char *buf, size_t len) {
  const char *abbrev = NULL;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
  abbrev = sigabbrev_np(sig);
#endif
  if (abbrev != NULL)
    snprintf(buf, len, "SIG%s", abbrev);
  else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    snprintf(buf, len, "SIGRTMIN+%d", sig - SIGRTMIN);
  else
    snprintf(buf, len, "signal %d", sig);
  return buf;
}

void stkr__rec_sigs_passed(FILE *f, const char *cmd) {
  const char *sep = "stackrec record: passed ";
  char name[32];

  for (int sig = 1; sig < NSIG; sig++)
    if (g_passed_n[sig] > 0) {
      fprintf(f, "%s%s", sep, sig_name(sig, name, sizeof name));
      if (g_passed_n[sig] > 1)
        fprintf(f, " (%d times)", (int)g_passed_n[sig]);
      sep = ", ";
    }
  if (sep[0] == ',')
    fprintf(f, " on to %s\n", cmd);
}

void stkr__rec_sigs_settle(const stkr__rec_sigs *s, const char *cmd,
                           bool quiet) {
  char names[256] = "", name[32];
  sigset_t pending;
  size_t n = 0;

  if (quiet || sigpending(&pending) != 0)
    return;
  for (int sig = 1; sig < NSIG && n < sizeof names - 40; sig++)
    /* Not the ones whose default is to do nothing (a resize, the end of a
     * stop), nor record's own SIGPIPE (a summary into a gone reader). */
    if (sigismember(&s->set, sig) == 1 && sigismember(&pending, sig) == 1 &&
        sig != SIGPIPE && sig != SIGCONT && sig != SIGWINCH &&
        sig != SIGURG && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
      n += (size_t)snprintf(names + n, sizeof names - n, "%s%s",
                            n ? ", " : "", sig_name(sig, name, sizeof name));
  if (n != 0)
    fprintf(stderr, "stackrec record: ignored %s, which arrived after %s "
                    "had ended (the recording was finished first)\n",
            names, cmd);
}

void stkr__rec_die_like(int sig) {
  struct rlimit none = {0, 0};
  struct sigaction dfl;
  sigset_t one;

  fflush(NULL);
  /* The command's core, if it dumped one, is the one that matters; record
   * leaves none of its own (GNU timeout does the same). */
  (void)setrlimit(RLIMIT_CORE, &none);
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  if (sigaction(sig, &dfl, NULL) != 0)
    return;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, NULL);
  (void)raise(sig);
  /* Still here: a signal whose default is not to end a process (the
   * command was killed by it some other way); the caller exits 128+N. */
}
