/*
 * test-record-signals.c: signals sent to `stackrec record` (issue 9,
 * defect 4): every signal a process can catch, sent by kill, is passed on
 * to the command, and record still prints its summary and ends by the
 * command's signal (session 41: it exited 128+N); a stopped command is
 * followed by a record that is a shell's job; ^C at record's terminal
 * reaches a command that made a process group of its own; record killed
 * outright takes the command with it; a
 * second signal once the command has ended is held back until record has
 * recovered and symbolized the recording, and named on the summary's last
 * line. Split from test-record-setup.c.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/record_env.h"
#include "tests/testlib.h"

static int setup(void **state) {
  (void)state;
  return record_env_setup("recsignals");
}

static const char *sig_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP"
       : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "?";
}

/* record -- sleep 60 in the background; once sleep runs, send sig to
 * record only. record must pass it on, wait, print its summary and end by
 * sig as sleep did. (sleep makes no watched call: it writes no file, which
 * is why the wait looks at record's children.) */
static void signal_case(int sig) {
  const char *dir;
  char err[4300];
  int st;
  pid_t pid = rec_start("sig", false, (const char *const[]){"sleep", "60", NULL},
                        &dir, err, sizeof err);

  (void)rec_wait_child(pid, "sleep");
  assert_int_equal(kill(pid, sig), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  tl_slurp(err, cr_err, sizeof cr_err);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != sig)
    fail_msg("signal %d: record status %#x\n%s", sig, st, cr_err);
  assert_non_null(strstr(cr_err, "killed by signal"));
  assert_non_null(strstr(cr_err, "recording: "));
  snprintf(err, sizeof err, "passed %s on to ", sig_name(sig));
  assert_non_null(strstr(cr_err, err));
  assert_non_null(strstr(cr_err, "processes: "));
  /* record ends only once the command has: sig says sleep got it. */
}

/* Two HUPs the command ignores, then TERM: every kind passed on is named
 * (QA, session 31: only the last, "passed signal 15"). Counts are not
 * checked: two HUPs sent while record has them blocked arrive as one. */
static void test_signals_all_named(void **state) {
  const char *dir;
  char err[4300];
  pid_t pid;
  int st;
  (void)state;

  if (!hooks_run_in("sleep"))
    return;
  pid = rec_start("sig-all", false,
                  (const char *const[]){"sh", "-c", "trap '' HUP; exec sleep 60",
                                        NULL},
                  &dir, err, sizeof err);
  (void)dir;
  (void)rec_wait_child(pid, "sleep");
  assert_int_equal(kill(pid, SIGHUP), 0);
  usleep(100000);
  assert_int_equal(kill(pid, SIGHUP), 0);
  usleep(100000);
  assert_int_equal(kill(pid, SIGTERM), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  tl_slurp(err, cr_err, sizeof cr_err);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
    fail_msg("record status %#x\n%s", st, cr_err);
  /* In signal order; HUP twice, or once if the two arrived as one. */
  if (strstr(cr_err, "passed SIGHUP") == NULL ||
      strstr(strstr(cr_err, "passed SIGHUP"), ", SIGTERM on to ") == NULL)
    fail_msg("not both named:\n%s", cr_err);
}

static void test_signals(void **state) {
  (void)state;
  if (!hooks_run_in("sleep"))
    return;
  signal_case(SIGTERM);
  signal_case(SIGHUP);
  /* Sent by a process (kill), not typed at a terminal: passed on once. */
  signal_case(SIGINT);
  signal_case(SIGUSR1);
}

/* Two signals, the second after CMD has ended (issue 9: a supervisor's
 * repeated SIGTERM, or timeout's HUP to the whole group, once killed
 * record with 128+sig before it recovered and symbolized the recording).
 * CMD runs the all_apis fixture, then exits 7 on the first signal.
 * STACKREC_RECORD_TEST_HOLD makes record wait, once CMD has ended, until
 * we have sent the second one: no timing is assumed. */
static void late_signal_case(int sig, const char *fx) {
  const char *dir = fresh("late");
  char err[4300], ready[4300], hold[4300], env[4400], script[9000];
  char caches[4300], ls[4400];
  static char rec_err[sizeof cr_err]; /* record's stderr (cr_run reuses cr_err) */
  pid_t pid;
  int st;

  /* An empty symbol cache directory: the late signal, pending through
   * record's end, must also stop the cache fill after the summary. */
  snprintf(caches, sizeof caches, "%s.caches", dir);
  setenv("STACKREC_SYMCACHE", caches, 1);

  snprintf(err, sizeof err, "%s.err", dir);
  snprintf(ready, sizeof ready, "%s.ready", dir);
  snprintf(hold, sizeof hold, "%s.hold", dir);
  snprintf(env, sizeof env, "STACKREC_RECORD_TEST_HOLD=%s", hold);
  snprintf(script, sizeof script,
           "trap 'exit 7' TERM HUP; \"%s\" exit 0 >/dev/null 2>&1; "
           ": >\"%s\"; while :; do sleep 0.05; done",
           fx, ready);
  pid = cr_record_bg(dir, err, false, env,
                     (const char *const[]){"/bin/sh", "-c", script, NULL});
  cr_wait_file(ready, pid, "the command's start");
  assert_int_equal(kill(pid, sig), 0); /* passed on: sh exits 7 */
  cr_wait_file(hold, pid, "the command's end");
  /* Pending (or fatal) in record at once: kill() on a single-threaded
   * process makes the signal pending before it returns. */
  assert_int_equal(kill(pid, sig), 0);
  assert_int_equal(unlink(hold), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  unsetenv("STACKREC_SYMCACHE");
  tl_slurp(err, cr_err, sizeof cr_err);
  memcpy(rec_err, cr_err, sizeof rec_err);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 7)
    fail_msg("signal %d twice: record status %#x (want exit 7)\n%s", sig, st,
             cr_err);
  assert_non_null(strstr(cr_err, "exited with status 7"));
  assert_non_null(strstr(cr_err, "recording: "));
  assert_non_null(strstr(cr_err, "processes: "));
  if (strstr(cr_err, "ignored SIG") == NULL ||
      strstr(cr_err, sig == SIGTERM ? "SIGTERM" : "SIGHUP") == NULL)
    fail_msg("the late signal %d is not named:\n%s", sig, cr_err);
  if (cr_run("verify '%s'", dir) != 0)
    fail_msg("verify: %s%s", cr_out, cr_err);
  /* Symbolized: the fixture's frame is named, not image+offset. */
  assert_int_equal(cr_run("dump --frames '%s'", dir), 0);
  if (strstr(cr_out, "fx_uname") == NULL ||
      strstr(cr_out, "all_apis+0x") != NULL)
    fail_msg("signal %d twice: recording not symbolized:\n%.4000s", sig,
             cr_out);
  /* libc's file:line came from its DWARF (libc6-dbg): its cache was due,
   * and the fill stopped before it, saying so. */
  snprintf(ls, sizeof ls, "ls '%s' 2>/dev/null | grep -q stkrsym", caches);
  if (system(ls) == 0) fail_msg("signal %d: a cache was written", sig);
  if (strstr(cr_out, "libc-start.c") != NULL &&
      strstr(rec_err, "not written: a signal to stop arrived") == NULL)
    fail_msg("signal %d: the cache fill did not stop:\n%s", sig, rec_err);
}

static void test_signals_after_end(void **state) {
  char fx[4200];
  (void)state;

  if (!hooks_run_in("sh"))
    return;
  tl_runfile(fx, sizeof fx, "tests/preload_fixtures/all_apis");
  late_signal_case(SIGTERM, fx);
  late_signal_case(SIGHUP, fx);
}

/* Session files in dir of the pids listed (one a line) in pids_file. */
static int sessions_of(const char *dir, const char *pids_file) {
  char pids[256] = "", want[300];
  int n = 0;

  tl_slurp(pids_file, pids, sizeof pids);
  for (char *p = pids, *e; (e = strchr(p, '\n')) != NULL; p = e + 1) {
    *e = '\0';
    snprintf(want, sizeof want, "stackrec-%s-", p);
    DIR *d = opendir(dir);
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;)
      n += strncmp(de->d_name, want, strlen(want)) == 0 &&
           strstr(de->d_name, ".session") != NULL;
    if (d != NULL) closedir(d);
  }
  return n;
}

/* record recovers its directory's dead sessions while CMD runs (every
 * 10 s), not only at CMD's end: a supervisor whose workers die by SIGKILL
 * kept every dead worker's ring and session files until then, past any
 * disk cap (QA, session 31). Two python3 children record one open each
 * and kill themselves; CMD then waits for our word. Within 30 s (10 s
 * expected) their session files are gone while CMD still runs; after,
 * every event is read back, complete. */
static void test_dead_sessions_recovered_during_the_run(void **state) {
  const char *dir = fresh("dead");
  char err[4300], script[9000], pids[4300], stop[4300];
  pid_t pid;
  int st, left = -1;
  double t0;
  (void)state;

  if (!hooks_run_in("python3"))
    return;
  snprintf(err, sizeof err, "%s.err", dir);
  snprintf(pids, sizeof pids, "%s.pids", dir);
  snprintf(stop, sizeof stop, "%s.stop", dir);
  snprintf(script, sizeof script,
           "for i in 1 2; do python3 -c \"import os; "
           "open('/etc/passwd').read(); "
           "open('%s', 'a').write('%%d\\n' %% os.getpid()); "
           "os.kill(os.getpid(), 9)\"; done; "
           "while [ ! -e '%s' ]; do sleep 0.1; done",
           pids, stop);
  pid = cr_record_bg(dir, err, false, NULL,
                     (const char *const[]){"sh", "-c", script, NULL});
  t0 = tl_now_s();
  for (;;) {
    char got[256] = "";
    tl_slurp(pids, got, sizeof got);
    if (tl_count(got, "\n") >= 2 || tl_now_s() - t0 > 30) break;
    usleep(50000);
  }
  t0 = tl_now_s();
  while (tl_now_s() - t0 < 30 && (left = sessions_of(dir, pids)) != 0)
    usleep(100000);
  assert_int_equal(tl_write_file(stop, ""), 0);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  assert_int_equal(left, 0);
  assert_int_equal(cr_run("verify '%s'", dir), 0);
}

/* A child whose writes all fail (its own RLIMIT_FSIZE 0: no session
 * file, no segment) and which is then SIGKILLed leaves no file: record,
 * which its notes reached, names it in the recording (QA, session 32: on
 * a full disk such a worker vanished from every view, verify naming
 * only its parent's missing batch). */
static void test_killed_before_anything_was_written(void **state) {
  const char *dir = fresh("killed-nothing-written");
  char want[64];
  int rc;
  (void)state;

  if (!HOOKS_IN_SYSTEM_PROGRAMS || access("/usr/bin/python3", X_OK) != 0) {
    fprintf(stderr, "skipped: no hooks in system programs, or no python3\n");
    return;
  }
  rc = cr_run("record -o '%s' -- /usr/bin/python3 -c \"import os, resource, "
              "signal, socket, time\n"
              "socket.gethostname()\n"
              "p = os.fork()\n"
              "if p == 0:\n"
              "  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "  resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))\n"
              "  for _ in range(100): socket.gethostname()\n"
              "  time.sleep(0.6)\n" /* its worker's write failed */
              "  os.kill(os.getpid(), signal.SIGKILL)\n"
              "print(p, flush=True)\n"
              "os.waitpid(p, 0)\n"
              "socket.gethostname()\"",
              dir);
  if (rc != 0 && !SANITIZED) fail_msg("record exit %d:\n%s", rc, cr_err);
  snprintf(want, sizeof want, "process %ld (python3)", strtol(cr_out, NULL, 10));
  assert_int_equal(cr_run("verify '%s'", dir), 4);
  if (strstr(cr_out, want) == NULL ||
      strstr(cr_out, "its events were lost, how many is not known") == NULL)
    fail_msg("the killed child is not named (%s):\n%s", want, cr_out);
}

/* SIGPIPE: record's summary written into a pipe whose reader is gone
 * (`record ... 2>&1 | head -1`) killed record, and the pipeline's status
 * was 141, not CMD's (QA, session 33). */
static void test_summary_into_a_closed_pipe(void **state) {
  char dir[4200], sh[4300];
  FILE *f;
  (void)state;

  if (!hooks_run_in("bash"))
    return;
  snprintf(dir, sizeof dir, "%s", fresh("pipe"));
  snprintf(sh, sizeof sh, "%s.sh", dir);
  assert_non_null(f = fopen(sh, "w"));
  fprintf(f,
          "'%s' record -o '%s' -- /bin/bash -c 'echo \"$HOME\"; sleep 0.2; "
          "exit 5' 2>&1 | head -1 >/dev/null\n"
          "exit ${PIPESTATUS[0]}\n",
          cr_bin, dir);
  fclose(f);
  for (int i = 0; i < 3; i++) {
    tl_rm_rf(dir);
    assert_int_equal(tl_system("/bin/bash '%s'", sh), 5); /* was 141 */
  }
}

/* A record killed (SIGKILL: no signal to hold back) while it symbolized
 * its recording in place leaves a temporary copy of a segment (".NAME.tmp":
 * the segments stay whole) and the marks file's 64 KiB reserve; no later
 * command removed them (noted in session 36). `stackrec recover` does,
 * unless a record holds the directory's lock; --dry-run counts them. The
 * leftovers are made here as symbolize and record make them: a kill timed
 * inside the symbolization would be a race. */
static void test_killed_while_symbolizing(void **state) {
  const char *dir = fresh("killed-symbolizing");
  char seg[4300], tmp[4400], lock[4300], probe[4400];
  void *data;
  size_t len;
  int fd;
  (void)state;

  if (!hooks_run_in("bash"))
    return;
  if (cr_run("record -q -o '%s' -- /bin/bash -c 'echo \"$HOME\"' >/dev/null",
             dir) != 0)
    fail_msg("record: %s", cr_err);
  tl_find_file(dir, ".zst", seg, sizeof seg);
  assert_non_null(data = tl_slurp_alloc(seg, &len));
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, strrchr(seg, '/') + 1);
  assert_int_equal(tl_write_bytes(tmp, data, len), 0);
  /* And the probe of a record killed at its start (QA, session 38). */
  snprintf(probe, sizeof probe, "%s/.stackrec-probe-Xy12Zq", dir);
  assert_int_equal(tl_write_bytes(probe, "x", 1), 0);
  free(data);
  assert_int_equal(cr_run("recover --dry-run '%s'", dir), 0);
  tl_assert_has(cr_out, "; 2 temporary files (", "of a 'stackrec record' "
                "killed while it symbolized or started would be removed");
  assert_int_equal(access(tmp, F_OK), 0);

  /* A record writing into it (its lock held): left alone. */
  snprintf(lock, sizeof lock, "%s/.stackrec-cache", dir);
  (void)mkdir(lock, 0700);
  strcat(lock, "/record.lock");
  assert_true((fd = open(lock, O_RDWR | O_CREAT, 0600)) >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  for (int dry = 0; dry < 2; dry++) {
    assert_int_equal(cr_run("recover %s'%s'", dry ? "--dry-run " : "", dir),
                     0);
    assert_null(strstr(cr_out, "temporary"));
  }
  assert_int_equal(access(tmp, F_OK), 0);
  assert_int_equal(access(probe, F_OK), 0);
  close(fd);

  assert_int_equal(cr_run("recover '%s'", dir), 0);
  tl_assert_has(cr_out, "; 2 temporary files (", " removed\n");
  assert_int_equal(access(tmp, F_OK), -1);
  assert_int_equal(access(probe, F_OK), -1);
  assert_int_equal(access(lock, F_OK), -1); /* the stale lock's file too */
  assert_int_equal(cr_run("verify '%s'", dir), 0);
}

/* The marks file's reserve is given back at record's end under an
 * exclusive flock, and appenders (stkr_append_line: `stackrec mark`, a
 * process still running) write under a shared one, so that a line
 * appended between the size check and the truncation is not cut (session
 * 37's note: the release read the size, then truncated to it). An
 * appender that holds its lock: the reserve stays (given back before,
 * whatever the lock). A releaser that holds its lock: `stackrec mark`
 * waits 20 ms at most, then writes (bounded: a stopped holder never
 * blocks it). */
static void test_marks_reserve_released_under_lock(void **state) {
  const char *dir = fresh("marks-reserve");
  char marks[4300];
  struct timespec t0, t1;
  struct stat st;
  int fd;
  (void)state;

  if (!hooks_run_in("true"))
    return;
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(marks, sizeof marks, "%s/stackrec.marks", dir);
  assert_true((fd = open(marks, O_RDWR | O_CREAT, 0600)) >= 0);
  if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096) != 0) {
    close(fd); /* no reserve where there is no fallocate (NFS) */
    skip();
  }
  assert_int_equal(ftruncate(fd, 0), 0);
  assert_int_equal(flock(fd, LOCK_SH), 0); /* an appender at work */
  assert_int_equal(cr_run("record -q -o '%s' -- /bin/true", dir), 0);
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(st.st_blocks * 512 >= 64 * 1024); /* kept */
  assert_int_equal(flock(fd, LOCK_UN), 0);
  assert_int_equal(flock(fd, LOCK_EX), 0); /* a releaser at work */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(cr_run("mark '%s' consent.granted", dir), 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  /* It waited (a lower bound only: never a flake on a loaded machine). */
  assert_true((t1.tv_sec - t0.tv_sec) * 1000000000L +
                  (t1.tv_nsec - t0.tv_nsec) >= 18000000L);
  close(fd);
  tl_slurp(marks, cr_out, sizeof cr_out);
  assert_non_null(strstr(cr_out, " consent.granted "));
  tl_rm_rf(dir);
  assert_int_equal(cr_run("record -q -o '%s' -- /bin/true", dir), 0);
  assert_int_equal(stat(marks, &st), 0);
  assert_true(st.st_blocks * 512 < 64 * 1024); /* given back */
}

/* A file size limit smaller than record's own writes (`ulimit -f 1` is
 * the command's limit and record's alike): they fail with EFBIG and are
 * said; record exits with CMD's status and leaves no lock or temporary
 * file (QA, session 40: SIGXFSZ killed record mid-symbolization, exit 153
 * after CMD's 0, the recording unresolved, the lock left; and while CMD
 * ran, it left CMD orphaned, read as a recording with most events gone).
 * The command keeps SIGXFSZ as it was given: its own write past the
 * limit still kills it, as plainly. */
static void test_file_size_limit_is_the_commands(void **state) {
  const char *dir = fresh("fsize");
  char path[4400];
  struct stat st;
  DIR *d;
  struct dirent *e;
  (void)state;

  if (!hooks_run_in("true"))
    return;
  assert_int_equal(tl_sh(&cr_capture, "ulimit -f 1; '%s' record -o '%s' -- "
                         "/usr/bin/python3 -c 'import os; os.uname(); "
                         "print(\"hi\")'", cr_bin, dir), 0);
  assert_string_equal(cr_out, "hi\n");
  cr_assert_has(cr_err, "exited with status 0");
  snprintf(path, sizeof path, "%s/.stackrec-cache/record.lock", dir);
  assert_int_not_equal(stat(path, &st), 0);
  assert_non_null(d = opendir(dir));
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".tmp") != NULL)
      fail_msg("left behind: %s", e->d_name);
  closedir(d);
  tl_rm_rf(dir);
  assert_int_equal(tl_sh(&cr_capture, "ulimit -f 1; '%s' record -q -o '%s' "
                         "-- /bin/sh -c 'head -c 4096 /dev/zero > %s.big'",
                         cr_bin, dir, dir), 128 + SIGXFSZ);
  (void)unlink(strcat(strcpy(path, dir), ".big"));
}

/* ^C at a terminal whose foreground job is record, its command having
 * made a process group of its own (setpgid(0, 0), as GNU timeout does):
 * the terminal's SIGINT reaches record's group only, and record passes it
 * to the command's group (QA, session 47: the command ran on to its end,
 * 4.3 s after ^C; plainly 0.05 s). record runs as a session leader on a
 * pseudo-terminal of its own, as under an interactive shell. */
static void test_interrupt_reaches_a_command_in_its_own_group(void **state) {
  static const char script[] =
      "import os, sys, time\n"
      "os.setpgid(0, 0)\n"
      "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
      "time.sleep(20)\n";
  const char *dir = fresh("tty-int");
  char buf[4096] = "", *pts;
  size_t have = 0;
  int m, st;
  pid_t pid;
  (void)state;
  if (!hooks_run_in("python3"))
    return;
  assert_true((m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) >= 0);
  assert_int_equal(grantpt(m), 0);
  assert_int_equal(unlockpt(m), 0);
  assert_non_null(pts = ptsname(m));
  if ((pid = fork()) == 0) {
    int t;
    /* A new session; its first terminal becomes its controlling one,
     * with this process's group in the foreground. */
    if (setsid() < 0 || (t = open(pts, O_RDWR)) < 0) _exit(126);
    dup2(t, 0);
    dup2(t, 1);
    dup2(t, 2);
    execl(cr_bin, "stackrec", "record", "-q", "-o", dir, "--",
          "/usr/bin/python3", "-c", script, (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  /* Until the command has left the group and said so (30 s at most). */
  double t0 = tl_now_s();
  while (strstr(buf, "ready") == NULL || have == 0) {
    struct pollfd p = {m, POLLIN, 0};
    if (tl_now_s() - t0 > 30) {
      kill(pid, SIGKILL);
      fail_msg("the command did not start: %.*s", (int)have, buf);
    }
    if (poll(&p, 1, 100) == 1) {
      ssize_t n = read(m, buf + have, sizeof buf - 1 - have);
      if (n > 0) have += (size_t)n;
    }
    buf[have] = '\0';
  }
  t0 = tl_now_s();
  assert_int_equal(write(m, "\003", 1), 1); /* ^C */
  /* Drain the terminal while waiting: record and python must not block
   * on it. 10 s is half the command's sleep. */
  for (;;) {
    struct pollfd p = {m, POLLIN, 0};
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (tl_now_s() - t0 > 10) {
      pid_t py = rec_child_of(pid, "python3"); /* a group of its own */
      if (py > 0) kill(-py, SIGKILL);
      kill(pid, SIGKILL);
      (void)waitpid(pid, &st, 0);
      fail_msg("record and its command were still running 10 s after ^C");
    }
    if (poll(&p, 1, 50) == 1 && read(m, buf, sizeof buf) <= 0) usleep(10000);
  }
  close(m);
  /* python died of its SIGINT (KeyboardInterrupt, re-raised), and record
   * ends as its command did. */
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGINT)
    fail_msg("record's status %#x, want killed by SIGINT", st);
}

TL_TEST_MAIN("record-signals", setup, NULL, test_signals, test_signals_all_named,
             test_interrupt_reaches_a_command_in_its_own_group,
             test_signals_after_end,
             test_dead_sessions_recovered_during_the_run,
             test_killed_before_anything_was_written,
             test_killed_while_symbolizing,
             test_summary_into_a_closed_pipe,
             test_marks_reserve_released_under_lock,
             test_file_size_limit_is_the_commands)
