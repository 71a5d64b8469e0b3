/*
 * setup_check.c: may this process record? Its limits, root directory and
 * environment as it starts (the constructor: stkr__pl_check_setup) and
 * as its first watched call starts the recording (stkr__pl_start_changed,
 * stkr__pl_pid_ns_unshared); preload.h. A process that may not is noted
 * (to record, or on the stderr it was given) and records nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/preload.h"

/* The root directory stkr__pl_check_setup saw (chroot:
 * stkr__pl_start_changed). Written by the constructor, read at the first
 * event's start. */
static dev_t g_root_dev;
static ino_t g_root_ino;
static bool g_root_known;

/* stkr__pl_check_setup (preload.h): what must fail before the program
 * runs, not at its first event (the constructor): a malformed STACKREC_*
 * value, a directory this process may not write into or that it lost
 * (STACKREC_DIR removed from the environment of a process of `record`'s
 * tree: the default directory, in its working directory, would be made
 * among the program's files; QA, session 28), a descriptor limit below
 * STKR__PL_MIN_NOFILE, a stack limit below STKR__PL_MIN_STACK_KIB
 * (checked first: the others need stack). @return 0 or the error,
 * reported. */
int stkr__pl_check_setup(bool *follow_forks) {
  struct rlimit rl;
  struct stat root;
  char why[256];
  const char *v;
  int err;

  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < (rlim_t)STKR__PL_MIN_STACK_KIB << 10) {
    stkr__pl_note(-ENOMEM, "not recorded, nor its forked children: its "
                  "stack limit (RLIMIT_STACK %llu KiB) is below %d KiB, "
                  "too little for the recorder's start",
                  (unsigned long long)(rl.rlim_cur >> 10),
                  STKR__PL_MIN_STACK_KIB);
    return -ENOMEM;
  }
  if (stat("/", &root) == 0) {
    g_root_dev = root.st_dev;
    g_root_ino = root.st_ino;
    g_root_known = true;
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      rl.rlim_cur < STKR__PL_MIN_NOFILE) {
    stkr__pl_note(-EMFILE, "not recorded, nor its forked children: its "
                  "descriptor limit (RLIMIT_NOFILE %llu) is below %d, and "
                  "the recorder's descriptors would take numbers the "
                  "program counts on", (unsigned long long)rl.rlim_cur,
                  STKR__PL_MIN_NOFILE);
    return -EMFILE;
  }

  /* The recorder's own parse first, so that a bad value is reported here
   * (to record, or on stderr) with its name, not printed by stkr_init. */
  if ((err = stkr_config_check_env(why, sizeof why)) != 0) {
    stkr__pl_note(err, "cannot start recording in pid %d: %s", (int)getpid(),
                err == -EINVAL ? why : stkr_strerror(err));
    return err;
  }
  /* Under record the directory exists already (record made it): one that
   * this process may not write into (it dropped its privileges) is
   * reported to record rather than by stkr_init on the app's stderr.
   * AT_EACCESS: the effective ids, which are what creating a file uses. */
  v = stkr__pl_env("STACKREC_NOTIFY");
  if (v != NULL && v[0] != '\0' &&
      ((v = stkr__pl_env("STACKREC_DIR")) == NULL || v[0] == '\0')) {
    stkr__pl_note(-EINVAL, "not recorded, nor its forked children: "
                  "STACKREC_DIR was removed from its environment (by the "
                  "program that started it), so the recording directory "
                  "is not known");
    return -EINVAL;
  }
  if (v != NULL && v[0] != '\0' &&
      faccessat(AT_FDCWD, v, W_OK | X_OK, AT_EACCESS) != 0) {
    err = -errno;
    stkr__pl_note(err, "cannot write the recording directory %s: %s", v,
                strerror(-err));
    return err;
  }
  v = stkr__pl_env("STACKREC_FORK");
  *follow_forks = v == NULL || strcasecmp(v, "disable") != 0;
  return 0;
}

/* What the program changed between its start (stkr__pl_check_setup) and
 * its first watched call, which starts the recording (QA, session 24): a
 * descriptor limit lowered below STKR__PL_MIN_NOFILE (the recorder's
 * descriptors then took numbers it counted on: EMFILE after 10 opens of
 * its 12), or its root directory (chroot: the recording's path then named
 * a directory inside the jail, made and filled there). Not recorded then,
 * with the note; nor when this thread may not read the time-stamp counter
 * (see stkr__pl_before_sandbox; inherited from the thread that made it,
 * and through exec). @return 0 or the error. */
int stkr__pl_start_changed(void) {
  struct rlimit rl;
  struct stat root;
  int tsc = 0;

  if (prctl(PR_GET_TSC, &tsc, 0, 0, 0) == 0 && tsc == PR_TSC_SIGSEGV) {
    stkr__pl_note(-EPERM, "not recorded: it may not read the time-stamp "
                  "counter (PR_SET_TSC), which the clock needs");
    return -EPERM;
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      rl.rlim_cur < STKR__PL_MIN_NOFILE) {
    stkr__pl_note(-EMFILE, "not recorded: it lowered its descriptor limit "
                  "(RLIMIT_NOFILE %llu) below %d before its first watched "
                  "call", (unsigned long long)rl.rlim_cur,
                  STKR__PL_MIN_NOFILE);
    return -EMFILE;
  }
  if (g_root_known && (stat("/", &root) != 0 || root.st_dev != g_root_dev ||
                       root.st_ino != g_root_ino)) {
    stkr__pl_note(-EXDEV, "not recorded: it changed its root directory "
                  "(chroot) before its first watched call, which hides the "
                  "recording's");
    return -EXDEV;
  }
  return 0;
}

/* Did this process call unshare(CLONE_NEWPID): do its children go to
 * another pid namespace than its own? (Then pthread_create fails with
 * EINVAL: CLONE_THREAD needs the two to be one.) Until its first child is
 * made, the new namespace's link does not resolve (ENOENT). False when
 * /proc cannot tell. */
bool stkr__pl_pid_ns_unshared(void) {
  struct stat own, children;
  if (stat("/proc/self/ns/pid", &own) != 0) return false;
  if (stat("/proc/self/ns/pid_for_children", &children) != 0)
    return errno == ENOENT;
  return own.st_ino != children.st_ino || own.st_dev != children.st_dev;
}
