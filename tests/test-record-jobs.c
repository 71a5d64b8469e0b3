/*
 * test-record-jobs.c: `stackrec record` stands in for its command towards
 * whoever holds record's pid (QA, session 41): every signal a process can
 * catch is passed on (ALRM killed record and orphaned the command, TTIN
 * stopped record, CONT never reached a stopped command); a command that
 * stops itself in a shell's job stops record too, so that the shell gets
 * its terminal back; record killed outright (SIGKILL) takes the command
 * with it. tools/stackrec/record_signals.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/record_env.h"
#include "tests/testlib.h"

#define DEADLINE_S 30.0

static int setup(void **state) {
  (void)state;
  return record_env_setup("recjobs");
}

/* The state letter of pid in /proc ('R', 'S', 'T', 'Z'...; 0: gone). */
static char proc_state(pid_t pid) {
  char path[64], buf[512], *p;

  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  tl_slurp(path, buf, sizeof buf);
  p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' ? p[2] : 0;
}

/* Wait (bounded) until cmd's state is one of states ('-': gone), else
 * kill it and fail, naming what was waited for. */
static void wait_state(pid_t cmd, const char *states, const char *what) {
  double t0 = tl_now_s();
  char c;

  while ((c = proc_state(cmd)) == 0 ? strchr(states, '-') == NULL
                                    : strchr(states, c) == NULL) {
    if (tl_now_s() - t0 > DEADLINE_S) {
      kill(cmd, SIGCONT);
      kill(cmd, SIGKILL);
      fail_msg("%s never happened (state %c)", what, c ? c : '-');
    }
    usleep(10000);
  }
}

/* record's wait status, waited for (bounded: then it and cmd, if any, are
 * killed, and the test fails naming what it waited for). */
static int wait_record(pid_t pid, pid_t cmd, const char *what) {
  double t0 = tl_now_s();
  int st;

  while (waitpid(pid, &st, WNOHANG) != pid) {
    if (tl_now_s() - t0 > DEADLINE_S) {
      if (cmd > 0) {
        kill(cmd, SIGCONT);
        kill(cmd, SIGKILL);
      }
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fail_msg("%s: record never ended", what);
    }
    usleep(20000);
  }
  return st;
}

/* Signals record used to die of, stop by or swallow, sent to record by
 * kill: each reaches the command (bash's traps say so), record neither
 * dies nor stops, and the command's status is record's. */
static void test_every_catchable_signal_passed(void **state) {
  static const int sigs[] = {SIGALRM, SIGTTIN, SIGTTOU, SIGTSTP, SIGWINCH,
                             SIGCONT, SIGVTALRM, SIGIO, SIGPWR};
  const char *dir;
  char out[4300], ready[4300], script[8192], want[64], got[8192];
  size_t n = 0, i;
  pid_t pid;
  int st;
  (void)state;

  if (!hooks_run_in("bash"))
    return;
  snprintf(ready, sizeof ready, "%s/every.ready", g_tmp);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    n += (size_t)snprintf(script + n, sizeof script - n,
                          "trap 'echo got %d' %d; ", sigs[i], sigs[i]);
  snprintf(script + n, sizeof script - n,
           "trap 'exit 0' USR1; : > '%s'; while :; do sleep 0.05; done",
           ready);
  /* bash's own leaks are not ours (the sanitized hooks bring LSan in). */
  pid = rec_start("every", true,
                  (const char *const[]){"env", "ASAN_OPTIONS=detect_leaks=0",
                                        "bash", "-c", script, NULL},
                  &dir, out, sizeof out);
  (void)dir;
  cr_wait_file(ready, pid, "the command's start");
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    double t0 = tl_now_s();

    assert_int_equal(kill(pid, sigs[i]), 0);
    /* Each trap has run before the next signal (bash runs pending traps
     * in signal order, not sending order). */
    snprintf(want, sizeof want, "got %d\n", sigs[i]);
    for (;;) {
      tl_slurp(out, got, sizeof got);
      if (strstr(got, want) != NULL)
        break;
      if (tl_now_s() - t0 > DEADLINE_S || proc_state(pid) == 'T' ||
          proc_state(pid) == 'Z') {
        kill(pid, SIGCONT);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("signal %d never reached the command (record state "
                 "%#x):\n%s", sigs[i], st, got);
      }
      usleep(20000);
    }
  }
  assert_int_equal(kill(pid, SIGUSR1), 0);
  st = wait_record(pid, 0, "USR1 to end");
  tl_slurp(out, got, sizeof got);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("record status %#x\n%s", st, got);
  cr_assert_has(got, "passed SIGUSR1, SIGALRM, SIGCONT, SIGTSTP, SIGTTIN, "
                     "SIGTTOU, SIGVTALRM, SIGWINCH");
}

/* record -- sleep 60 in the background, once sleep runs: record's pid,
 * sleep's in *cmd. */
static pid_t record_sleep(const char *tag, pid_t *cmd) {
  const char *dir;
  char err[4300];
  pid_t pid = rec_start(tag, false, (const char *const[]){"sleep", "60", NULL},
                        &dir, err, sizeof err);

  *cmd = rec_wait_child(pid, "sleep");
  return pid;
}

/* A stopped command, then TERM and CONT to record, as a supervisor sends
 * them (systemd's KillMode=process): the command ends by TERM, and so does
 * record (QA: CONT was not passed on, and both waited for ever). */
static void test_stopped_command_term_then_cont(void **state) {
  pid_t pid, cmd;
  int st;
  (void)state;

  if (!hooks_run_in("sleep"))
    return;
  pid = record_sleep("stopped", &cmd);
  assert_int_equal(kill(cmd, SIGSTOP), 0);
  wait_state(cmd, "T", "sleep's stop");
  assert_int_equal(kill(pid, SIGTERM), 0);
  assert_int_equal(kill(pid, SIGCONT), 0);
  st = wait_record(pid, cmd, "TERM then CONT");
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
    fail_msg("record status %#x", st);
}

/* record killed by SIGKILL (timeout -s KILL, the OOM killer): the command
 * dies too, as it would without record (QA: it ran on, orphaned). */
static void test_killed_record_takes_the_command(void **state) {
  pid_t cmd;
  int st;
  (void)state;

  if (hooks_run_in("sleep")) {
    pid_t pid = record_sleep("killed", &cmd);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    wait_state(cmd, "Z-", "the command's end with record's");
  }
}

/* A process that records nothing (env -i drops LD_PRELOAD) is named in
 * the recording as record hears of it: record killed later (SIGKILL, the
 * OOM killer) took the name with it, and the recording verified complete
 * (QA, session 41). */
static void test_unrecorded_named_before_records_end(void **state) {
  const char *dir;
  char err[4300], marks[4300], got[4096];
  double t0 = tl_now_s();
  int st;
  (void)state;

  if (!hooks_run_in("sh"))
    return;
  pid_t pid = rec_start("unrec", false,
                        (const char *const[]){"sh", "-c",
                                              "env -i /bin/true; exec sleep 60",
                                              NULL},
                        &dir, err, sizeof err);
  snprintf(marks, sizeof marks, "%s/stackrec.marks", dir);
  for (got[0] = '\0'; strstr(got, "\nu1 ") == NULL && strncmp(got, "u1 ", 3);
       tl_slurp(marks, got, sizeof got)) {
    if (tl_now_s() - t0 > DEADLINE_S) {
      kill(pid, SIGKILL);
      fail_msg("not in %s while record ran:\n%s", marks, got);
    }
    usleep(20000);
  }
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_int_equal(cr_run("verify '%s'", dir), 4);
  cr_assert_has(cr_out, "(env) recorded nothing");
  /* Its lock left says its end's work was never done (nothing did). */
  cr_assert_has(cr_out, "that wrote it ended before finishing");
  assert_int_equal(cr_run("recover '%s'", dir), 0);
  (void)cr_run("verify '%s'", dir);
  assert_null(strstr(cr_out, "ended before finishing"));
}

/* In a session with a terminal, record as a shell's job would be (its own
 * process group, the terminal's foreground): the command stops itself
 * (SIGTSTP, as tmux's ^B ^Z does); record must stop by the same signal, so
 * that the "shell" (here: the session leader) sees the job stopped; its
 * SIGCONT to the group lets both go on to a clean end. @return 0 if so. */
static int job_body(void *arg) {
  const char *dir = arg;
  char log[4300];
  int slave, st, master = posix_openpt(O_RDWR | O_NOCTTY);
  pid_t job;

  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 ||
      setsid() < 0 || (slave = open(ptsname(master), O_RDWR)) < 0)
    return 10; /* the terminal is now our controlling one */
  signal(SIGTTOU, SIG_IGN); /* tcsetpgrp from outside the foreground */
  snprintf(log, sizeof log, "%s.log", dir);
  job = fork();
  if (job == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    setpgid(0, 0);
    signal(SIGTTOU, SIG_DFL);
    dup2(slave, 0);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execl(cr_bin, cr_bin, "record", "-q", "-o", dir, "--", "/bin/sh", "-c",
          "kill -TSTP $$; echo resumed", (char *)NULL);
    _exit(127);
  }
  if (job < 0)
    return 11;
  setpgid(job, job);
  if (tcsetpgrp(slave, job) != 0)
    return 12;
  alarm((unsigned)DEADLINE_S); /* a record that never stops: fail, not hang */
  if (waitpid(job, &st, WUNTRACED) != job || !WIFSTOPPED(st) ||
      WSTOPSIG(st) != SIGTSTP) {
    fprintf(stderr, "record's status %#x, not stopped by SIGTSTP\n", st);
    return 13;
  }
  kill(-job, SIGCONT); /* the shell's `fg` */
  if (waitpid(job, &st, 0) != job || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "record's status after CONT %#x\n", st);
    return 14;
  }
  return 0;
}

static void test_job_stops_with_its_command(void **state) {
  const char *dir = fresh("job");
  char log[4300], got[8192];
  (void)state;

  if (!hooks_run_in("sh"))
    return;
  tl_run_child(job_body, (void *)dir);
  snprintf(log, sizeof log, "%s.log", dir);
  tl_slurp(log, got, sizeof got);
  cr_assert_has(got, "resumed");
}

TL_TEST_MAIN("record-jobs", setup, NULL, test_every_catchable_signal_passed,
             test_stopped_command_term_then_cont,
             test_killed_record_takes_the_command,
             test_unrecorded_named_before_records_end,
             test_job_stops_with_its_command)
