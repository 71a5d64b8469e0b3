/*
 * preload.c: the hook library's life cycle and its control hooks.
 *
 * Life cycle of one process image
 * - constructor (runs before main and before the constructors of the
 *   program, since a preloaded library is initialized right after its own
 *   dependencies): resolve every real function, read STACKREC_CATEGORIES,
 *   STACKREC_ENV_NAMES and HOME, and check the recorder's STACKREC_*
 *   values and the directory (stkr__pl_check_setup, setup_check.c).
 *   Recording starts at the process's first event ("Start at the first
 *   event" below): stkr_init()
 *   from the environment (STACKREC_DIR, STACKREC_DEPTH, ...), with two
 *   defaults of our own: skip_frames 1 (the hook's own frame; the first PC
 *   is then the app's caller) and fork mode "follow", each unless its
 *   STACKREC_* variable is set. A process that makes no watched call
 *   writes nothing.
 * - destructor: stkr_shutdown_for_exit() within STACKREC_EXIT_MS; the
 *   worker is not freed (freeing the symbolizer's debug info would only
 *   add to the exit). Run from _dl_fini, after atexit handlers and the
 *   program's destructors (their hooked calls are recorded); libraries
 *   finalized after us reach libc directly (-ENOTCONN).
 * - fork: the recorder follows (fork mode "follow"): a child's first event
 *   starts its own worker and files, in the same directory (the child of a
 *   process that has not started yet starts as a process of its own). A
 *   child that records nothing writes nothing.
 * - exec (execve and friends, hooks_exec.c): a recording process ends its
 *   session first (stkr_shutdown_for_exit); the new image starts again,
 *   same pid, a new session. A failed exec: the next event starts again.
 * - _exit/_Exit: skip exit handlers and destructors, so the hook ends the
 *   session first with stkr_shutdown_for_exit(): recording stops (the
 *   threads that keep running until exit_group get -ENOTCONN at once,
 *   counted as dropped_exit), what
 *   the rings hold is written within STACKREC_EXIT_MS, the rest counted as
 *   dropped_exit; nothing is joined or freed (_exit may be called from a
 *   signal handler that interrupted malloc).
 * - vfork: the child shares our memory and must not touch the recorder, so
 *   the exec and _exit hooks act only when getpid() is the pid the recorder
 *   was started for (vfork runs no atfork handler, so the pid differs).
 *
 * Re-entrancy: the library's own control calls (stkr_init, stkr_flush,
 * stkr_shutdown) run with stkr__pl_guard set, so the libc calls they make
 * (getenv of STACKREC_*, open of segment files, ...) are not recorded. The
 * flush worker thread is ignored by the recorder itself (-EPERM).
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* we define functions that fortify wraps inline */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_notify.h"
#include "preload/preload.h"

stkr__pl_state stkr__pl;
uintptr_t stkr__pl_self_lo, stkr__pl_self_hi;

/* This object's ELF header (the static linker defines it, hidden). */
extern const ElfW(Ehdr) __ehdr_start;

/* Find the library's executable segments (stkr__pl_from_self) from its
 * own program headers: no system call, no allocation. */
static void find_self(void) {
  const ElfW(Ehdr) *eh = &__ehdr_start;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
  uintptr_t base = (uintptr_t)eh, first_vaddr = UINTPTR_MAX;
  int i;

  for (i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
      first_vaddr = ph[i].p_vaddr; /* the segment holding the header */
  if (first_vaddr == UINTPTR_MAX)
    return; /* no range: nothing is taken for the library's own */
  base -= first_vaddr;
  for (i = 0; i < eh->e_phnum; i++) {
    uintptr_t lo, hi;
    if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
      continue;
    lo = base + ph[i].p_vaddr;
    hi = lo + ph[i].p_memsz;
    if (stkr__pl_self_hi == 0 || lo < stkr__pl_self_lo)
      stkr__pl_self_lo = lo;
    if (hi > stkr__pl_self_hi)
      stkr__pl_self_hi = hi;
  }
}
__thread int stkr__pl_guard __attribute__((tls_model("initial-exec")));
void *_Atomic stkr__pl_reals[STKR__PL_R_COUNT];

static const char *const k_real_names[STKR__PL_R_COUNT] = {
#define STKR__PL_NAME(name) #name,
    STKR__PL_REALS(STKR__PL_NAME)
#undef STKR__PL_NAME
};

/* Set while this thread is inside dlsym: a hook reached from there (a
 * malloc replacement reading its environment, say) must not resolve
 * again. */
static __thread int t_resolving __attribute__((tls_model("initial-exec")));

/* The pid the recorder state of this image belongs to. Written by the
 * constructor (before the program can start threads) and by the atfork
 * child handler (when only the forking thread exists); read by the exec
 * and _exit hooks. A vfork child sees its parent's value. */
pid_t stkr__pl_pid;

/* STACKREC_FORK is not "disable" (stkr__pl_check_setup; fork copies it). */
static bool g_follow_forks;

/* This image is a followed fork child of a process that had started (set
 * by atfork_child): its first event starts its recording; an exec, even a
 * failed one, ends that follow mode (pre_exec, exec_failed). */
static bool g_followed_child;
/* This image's start failed because the process had called
 * unshare(CLONE_NEWPID) (start_recording): no thread can be made then, but
 * its forked children, in the new namespace, can; they start as processes
 * of their own (atfork_child). */
static bool g_start_failed_newpid;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char buf[640];
  va_list ap;
  int n = snprintf(buf, sizeof buf, "stackrec: preload: ");

  va_start(ap, fmt);
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  /* The fd, not stdio: never touch the app's stderr buffer or its lock. */
  if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
    /* nothing to do */
  }
}

/* This process will record nothing: tell `stackrec record` through its
 * notice socket (common/stkr_notify.h), waiting at most 200 ms for room in
 * its queue, or, without one (preloaded by hand), say it on stderr. Under
 * record nothing goes into the program's streams. */
static const char *real_env(const char *name);
void stkr__pl_note(int err, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  int saved = errno;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Under record never on the program's stderr, even when the note
   * cannot reach it (QA, session 33: a full descriptor table put it there;
   * a dead pipe there killed the program). Preloaded by hand: stderr. */
  const char *notify = real_env("STACKREC_NOTIFY");
  if (stkr_notify_send(notify, err < 0 ? -err : err, msg, 200))
    ;
  else if (notify == NULL || notify[0] == '\0')
    say("%s", msg);
  else if (err != 0) /* into the recording, as record would have */
    (void)stkr_notify_unrecorded_line(real_env("STACKREC_DIR"),
                                      (long)getpid(), NULL, msg);
  errno = saved;
}

void *stkr__pl_resolve(int idx) {
  void *p;

  if (idx < 0 || idx >= STKR__PL_R_COUNT || t_resolving)
    return NULL;
  t_resolving = 1;
  p = dlsym(RTLD_NEXT, k_real_names[idx]);
  if (p == NULL) {
    /* Loaded with dlopen(RTLD_LOCAL) (the benchmark), RTLD_NEXT may find
     * nothing: take libc's own definition. */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc != NULL) {
      p = dlsym(libc, k_real_names[idx]);
      dlclose(libc);
    }
    (void)dlerror(); /* leave no error of ours for the app's dlerror() */
  }
  t_resolving = 0;
  if (p != NULL)
    atomic_store_explicit(&stkr__pl_reals[idx], p, memory_order_release);
  return p;
}

/* libc's getenv, for our own configuration reads; a STACKREC_* variable
 * as the constructor saw it (stkr_config_freeze_env in configure): QA, a
 * program that cleared its environment before its first watched call was
 * recorded into ./stackrec-out of its own working directory, and record
 * said no process recorded anything. */
static const char *real_env(const char *name) {
  char *(*fn)(const char *) =
      (char *(*)(const char *))stkr__pl_real(STKR__PL_R_getenv);
  if (strncmp(name, "STACKREC_", 9) == 0) return stkr_config_env(name);
  return fn != NULL ? fn(name) : stkr__pl_env_scan(name);
}

const char *stkr__pl_env(const char *name) { return real_env(name); }

/* ---- start / stop --------------------------------------------------------- */

/* stkr_init() with the library's defaults; attach the calling thread.
 * Guarded by the caller, after stkr__pl_check_setup. @return stkr_init's
 * result. */
static int start_recording(void) {
  stkr_config cfg;
  const char *v;
  int err;

  char watched[STKR_WATCHED_MAX];

  if ((err = stkr__pl_start_changed()) != 0) return err;
  stkr_config_init(&cfg);
  /* The recording says which categories it watched: an analysis can then
   * tell a category not called from one not recorded (QA, session 26: a
   * policy over `reasons`, off by default, passed as clean). */
  if (stkr__pl_cat_list(stkr__pl.cats, watched, sizeof watched) > 0)
    cfg.watched = watched;
  /* A struct field wins over the environment: set ours only where the
   * user said nothing. */
  v = real_env("STACKREC_SKIP");
  if (v == NULL || v[0] == '\0')
    cfg.skip_frames = STKR__PL_SKIP_FRAMES;
  v = real_env("STACKREC_FORK");
  if (v == NULL || v[0] == '\0')
    cfg.fork_mode = STKR_FORK_FOLLOW;
  err = stkr__pl_init_with_room(&cfg);
  if (err == -EINVAL && stkr__pl_pid_ns_unshared()) {
    /* pthread_create's EINVAL: not a setting (QA, session 28). */
    g_start_failed_newpid = true;
    stkr__pl_note(err, "not recorded: it called unshare(CLONE_NEWPID) "
                  "before its first watched call, after which a process "
                  "can make no thread, and the recorder needs one (its "
                  "forked children, in the new namespace, are recorded)");
    return err;
  }
  if (err != 0) {
    stkr__pl_note(err, "cannot start recording in pid %d: %s", (int)getpid(),
                stkr_strerror(err));
    return err;
  }
  (void)stkr_thread_attach();
  return 0;
}

/* The end of this process image: 0 not begun, 1 under way, 2 done. The
 * destructor and _exit may race (exit() on one thread, _exit on another,
 * or two threads calling _exit): the first one ends the session, the others
 * wait for it (bounded by STACKREC_EXIT_MS, as the first one is) instead of
 * ending it twice or killing the process in the middle of its last write. */
static _Atomic int g_end_state;

/* ---- Start at the first event ----------------------------------------------
 *
 * The constructor checks the setup (stkr__pl_check_setup) but starts
 * nothing: the process's first event starts recording (stkr__pl_start_now,
 * from the hook that records it), as a forked child's first event already
 * did. Most
 * processes of a build or a shell script make no watched call at all
 * (`make -j2` of a C project: gcc, cc1, as, collect2, ld, 0 events each),
 * and an eager start cost each of them ~1.5 ms of CPU and a segment, a
 * session and a ring file; they now leave nothing. The start's work (files,
 * the worker thread, the unwind tables) is what the constructor did, on the
 * thread of the first event instead of the main thread before main. It
 * allocates, so it must not run in a signal handler that interrupted
 * malloc: a process starts earlier when it installs a handler for a signal
 * that may come at any time (hooks_signal.c), and at its first fork (fork
 * below), so that its children follow it. */

/* Sleep while the start word is BUSY (a start under way on another
 * thread), at most max_ms: on the word itself (a futex), woken by the
 * start's end (start_wake), not polling. Each waiter woke every 1 ms
 * before: a program that kept starting threads that made watched calls
 * (QA, session 46: ~1000 of them waiting) took the CPU from the start,
 * which then did not finish in 2 s, and every waiter's call went
 * unrecorded and uncounted. Slices of 10 ms, counted, not timed: no
 * clock is read (a program that forbade itself the TSC, whose vDSO
 * clock_gettime reads it, gets SIGSEGV for one: test-preload's notsc). A
 * wake is never missed (FUTEX_WAIT compares the word first); a signal
 * ends a slice early, shortening the wait. */
static void start_wait_busy(unsigned max_ms) {
  for (unsigned i = 0;
       i < max_ms / 10 && atomic_load_explicit(&stkr__pl.start,
                                               memory_order_acquire) ==
                              STKR__PL_START_BUSY;
       i++) {
    struct timespec slice = {0, 10000000};
    (void)syscall(SYS_futex, (int *)&stkr__pl.start, FUTEX_WAIT_PRIVATE,
                  STKR__PL_START_BUSY, &slice, NULL, 0);
  }
}

static void start_wake(void) {
  (void)syscall(SYS_futex, (int *)&stkr__pl.start, FUTEX_WAKE_PRIVATE,
                INT_MAX, NULL, NULL, 0);
}

/* The start itself, once per process image (one CAS wins); the others wait
 * for it, bounded: stkr_init takes a few ms (6-15 ms of wall time measured),
 * and a thread that kept them waiting longer (descheduled) costs their
 * events at most, counted by no one only if the start fails. */
bool stkr__pl_start_now(void) {
  int expected = STKR__PL_START_PENDING, err, cancel_state;

  if (atomic_load_explicit(&stkr__pl.start, memory_order_acquire) ==
          STKR__PL_START_NONE ||
      getpid() != stkr__pl_pid) /* a vfork child shares our memory: never */
    return false;
  /* No cancellation from before the state is BUSY (an asynchronous one
   * would otherwise end the thread right after taking it) until after it
   * is released: see below. */
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  if (!atomic_compare_exchange_strong_explicit(
          &stkr__pl.start, &expected, STKR__PL_START_BUSY,
          memory_order_acq_rel, memory_order_acquire)) {
    pthread_setcancelstate(cancel_state, NULL);
    start_wait_busy(2000);
    return true; /* its event tries again: recorded if the start worked */
  }
  /* Signals wait until the start is done: a handler's hooked call on this
   * thread would otherwise pass unrecorded and uncounted under the guard
   * (a 100 us timer's handler lost ~200 opens at a 20 ms start). */
  /* Nor may a cancellation end this thread inside the start (its files
   * and mutexes are cancellation points): the state would stay BUSY and
   * every later event, fork and exit of the process wait 2 s for it (QA,
   * session 24: a thread cancelled there, 8.8 s against 20 ms plainly). A
   * pending cancel acts at the thread's next cancellation point after. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  stkr__pl_guard++;
  err = start_recording();
  stkr__pl_guard--;
  /* Release: pairs with the waiters' acquire loads above. Before the
   * cancel state comes back: an asynchronous cancel acts right then. */
  atomic_store_explicit(&stkr__pl.start, STKR__PL_START_NONE,
                        memory_order_release);
  start_wake();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_setcancelstate(cancel_state, NULL);
  return err == 0;
}

/* Wait (bounded) for a start under way on another thread; @return the
 * start state after. */
static int start_settled(void) {
  start_wait_busy(2000);
  return atomic_load_explicit(&stkr__pl.start, memory_order_acquire);
}

/* Before a fork: not in the middle of another thread's start (its child
 * would inherit a half-made recorder with no thread finishing it). The fork
 * hook has waited already, before any prepare handler ran; this wait is
 * for forks that do not come through it and for a start taken in between
 * (STACKREC_FORK=disable only: a followed fork starts first), and runs its
 * 2 s if that start has registered the worker's handlers, whose prepare
 * (run before this one) holds the scan and reap locks the start needs. */
static void atfork_prepare(void) { (void)start_settled(); }

static void atfork_child(void) {
  int expected = STKR__PL_START_PENDING;
  struct rlimit rl;

  stkr__pl_pid = getpid();
  atomic_store_explicit(&g_end_state, 0, memory_order_relaxed);
  g_followed_child =
      g_follow_forks && atomic_load_explicit(&stkr__pl.start,
                                             memory_order_relaxed) ==
                            STKR__PL_START_NONE;
  if (g_followed_child && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      rl.rlim_cur < STKR__PL_MIN_NOFILE) {
    /* Its parent lowered the limit after its own start: this child's
     * start would take numbers it counts on, as stkr__pl_check_setup says
     * of a process (QA, session 28: a child at 20 could open 15, not 17). The
     * hooks stand aside in it. */
    g_followed_child = false;
    atomic_store_explicit(&stkr__pl.ready, 0, memory_order_relaxed);
    stkr__pl_note(-EMFILE, "not recorded, nor its forked children: its "
                  "descriptor limit (RLIMIT_NOFILE %llu) is below %d",
                  (unsigned long long)rl.rlim_cur, STKR__PL_MIN_NOFILE);
  }
  if (g_follow_forks && g_start_failed_newpid) {
    /* In the namespace its parent could not record in: a process of its
     * own, started at its first event. */
    g_start_failed_newpid = g_followed_child = false;
    atomic_store_explicit(&stkr__pl.start, STKR__PL_START_PENDING,
                          memory_order_relaxed);
  }
  /* Still pending: the child starts at its own first event, as a process
   * of its own, if forks are followed. A start that outlasted
   * atfork_prepare's wait: this child does not record. */
  if (!g_follow_forks ||
      !atomic_compare_exchange_strong_explicit(
          &stkr__pl.start, &expected, STKR__PL_START_PENDING,
          memory_order_relaxed, memory_order_relaxed))
    atomic_store_explicit(&stkr__pl.start, STKR__PL_START_NONE,
                          memory_order_relaxed);
  /* The recorder's and the worker's own child handlers run next (they
   * register theirs when recording starts, after this one) and call libc
   * (fstat on the inherited segment descriptor): with this thread's ring
   * still the parent's MAP_SHARED one, a hook recording there would put
   * an event into the parent's recording. atfork_child_done, registered
   * after them, lifts the guard. */
  stkr__pl_guard++;
}

static void atfork_child_done(void) { stkr__pl_guard--; }

/* A thread that forbids itself rdtsc (PR_SET_TSC) crashes at its next
 * event: the recorder's clock reads the counter, and so does the vDSO's
 * clock_gettime; in seccomp's strict mode (which forbids it too) any of
 * the recorder's system calls kills the process (QA, session 24: SIGSEGV,
 * SIGKILL). Recording ends first, with a note; one not started yet never
 * starts, nor under a seccomp filter, which may forbid what the start
 * does (open, mmap: SIGSYS). A filter installed once recording runs is
 * left alone (an event makes no system call but the worker's wake), and
 * so is seccomp(2) itself, which glibc does not wrap (libseccomp calls it
 * with syscall()). */
void stkr__pl_before_sandbox(const char *what, bool strict) {
  int st = STKR__PL_START_PENDING;
  bool was;

  if (!atomic_load_explicit(&stkr__pl.ready, memory_order_acquire) ||
      stkr__pl_guard || getpid() != stkr__pl_pid)
    return;
  if (atomic_compare_exchange_strong_explicit(
          &stkr__pl.start, &st, STKR__PL_START_NONE, memory_order_acq_rel,
          memory_order_acquire)) {
    was = false; /* never to start */
  } else if (!strict && !g_followed_child) {
    return; /* a filter once recording runs: left alone */
  } else {
    /* Ends the recording, or the follow mode of a forked child that has
     * not recorded yet (flush/worker.c: it would start at its first
     * event, under the filter then; review). */
    stkr__pl_guard++;
    was = stkr_shutdown_for_exit() != -ENOTCONN;
    stkr__pl_guard--;
  }
  if (was) /* (err 0: a note of a process that did record) */
    stkr__pl_note(0, "recording stopped: the program called %s; its later "
                  "watched calls are not recorded", what);
  else
    stkr__pl_note(-EPERM, "not recorded: it called %s before its first "
                  "watched call", what);
}

/* Once per process image; see g_end_state. The caller checked ready, the
 * pid and (except the destructor) the guard. */
static void end_once(void) {
  int expected = 0;

  /* Nothing starts from here on (libraries finalized after us still make
   * hooked calls); a start under way finishes first, so that it ends. */
  for (;;) {
    int st = start_settled();
    /* A compare-and-swap, not a store: a first event on another thread
     * may take the start between the two (it then finishes before it
     * ends, as above). */
    if (st != STKR__PL_START_PENDING ||
        atomic_compare_exchange_strong_explicit(
            &stkr__pl.start, &st, STKR__PL_START_NONE, memory_order_acq_rel,
            memory_order_acquire))
      break;
  }
  if (atomic_compare_exchange_strong_explicit(&g_end_state, &expected, 1,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
    stkr__pl_guard++;
    (void)stkr_shutdown_for_exit();
    stkr__pl_guard--;
    /* Release: pairs with the acquire loads of the waiters below. */
    atomic_store_explicit(&g_end_state, 2, memory_order_release);
    return;
  }
  /* Another thread is ending the session (this thread is not: its guard
   * would have kept it out). */
  while (atomic_load_explicit(&g_end_state, memory_order_acquire) == 1) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* What both constructors do first: resolve libc's functions, note our pid
 * and the first fork handler, and read the hooks' configuration. 0, or
 * -EINVAL with the reason in err. */
static int configure(char *err, size_t err_len) {
  unsigned cats;
  int i;

  find_self();
  for (i = 0; i < STKR__PL_R_COUNT; i++)
    (void)stkr__pl_real(i);
  /* The settings the process was started with, kept for its first event
   * (and its forked children's), whatever it does to its environment. */
  (void)stkr_config_freeze_env();
  stkr__pl_pid = getpid();
  (void)pthread_atfork(atfork_prepare, NULL, atfork_child);
  if (stkr__pl_parse_categories(real_env("STACKREC_CATEGORIES"), &cats, err,
                                err_len) != 0 ||
      stkr__pl_names_parse(real_env("STACKREC_ENV_NAMES"), &stkr__pl.names,
                           err, err_len) != 0)
    return -EINVAL;
  stkr__pl.cats = cats;
  stkr__pl_paths_init(&stkr__pl.paths, real_env("HOME"));
  return 0;
}

#ifndef STKR_PRELOAD_CAPTURE_BACKTRACE
__attribute__((constructor)) static void stkr__pl_ctor(void) {
  char err[512];

  stkr__pl_guard++;
  if (configure(err, sizeof err) != 0) {
    stkr__pl_note(-EINVAL, "%s; recording nothing", err);
    (void)pthread_atfork(NULL, NULL, atfork_child_done);
    stkr__pl_guard--;
    return;
  }
  /* Every site now: see stkr__pl_register_sites. Sites are written into
   * the recording only when they record an event. */
  stkr__pl_register_sites();
  if (stkr__pl_check_setup(&g_follow_forks) == 0) {
    atomic_store_explicit(&stkr__pl.start, STKR__PL_START_PENDING,
                          memory_order_relaxed);
    /* Release: pairs with the acquire load in stkr__pl_enabled(); the
     * configuration above is visible to every hook that sees 1. */
    atomic_store_explicit(&stkr__pl.ready, 1, memory_order_release);
  }
  /* After the recorder's and the worker's handlers (see atfork_child). */
  (void)pthread_atfork(NULL, NULL, atfork_child_done);
  stkr__pl_guard--;
}

__attribute__((destructor)) static void stkr__pl_dtor(void) {
  if (!atomic_load_explicit(&stkr__pl.ready, memory_order_acquire) ||
      getpid() != stkr__pl_pid)
    return;
  end_once();
}
#else
/* The benchmark's backtrace() reference records nothing: configuration
 * only, no recorder. */
__attribute__((constructor)) static void stkr__pl_ctor(void) {
  char err[512];

  int rc = configure(err, sizeof err);

  if (rc != 0)
    say("%s; recording nothing", err);
  (void)pthread_atfork(NULL, NULL, atfork_child_done);
  if (rc == 0)
    atomic_store_explicit(&stkr__pl.ready, 1, memory_order_release);
}
#endif

/* ---- exec (the hooks: hooks_exec.c) -------------------------------------- */

int stkr__pl_pre_exec(void) {
  int was = 0, saved = errno;

  if (!atomic_load_explicit(&stkr__pl.ready, memory_order_acquire) ||
      stkr__pl_guard || getpid() != stkr__pl_pid)
    return 0;
  stkr__pl_guard++;
  /* -ENOTCONN unless this process runs a worker (a forked child that has
   * not recorded yet has none: nothing to end, and it will not start
   * recording in this image any more). Bounded, like every end of a process
   * image; if the exec fails, the restart's stkr_init frees what it left. */
  was = stkr_shutdown_for_exit() != -ENOTCONN;
  /* A followed child that had not recorded: its follow mode ended above.
   * If the exec fails it starts afresh at its next event, as a process of
   * its own (its events after a failed exec were lost, uncounted:
   * test-preload-procs.c, test_failed_exec_unstarted_child). */
  was |= g_followed_child;
  stkr__pl_guard--;
  errno = saved;
  return was;
}

void stkr__pl_exec_failed(int was) {
  if (was) {
    g_followed_child = false;
    atomic_store_explicit(&stkr__pl.start, STKR__PL_START_PENDING,
                          memory_order_release);
  }
}

/* ---- fork ----------------------------------------------------------------- */

/* A process that forks before its first event starts recording first, so
 * that its children follow it (fork mode "follow") instead of each
 * starting as a process of its own: a followed child inherits the image
 * list, the unwind tables and the clock calibration and skips the
 * directory's recovery scan; a fresh start redoes them all, which made 200
 * forked children that each record one event ~1.2x slower than with the
 * parent started (record_overhead). The start cannot run in an atfork
 * handler (glibc holds its handler lock there, which the start's own
 * pthread_atfork takes). vfork, posix_spawn and clone do not come here:
 * their children exec (or, like a fork not made through this symbol,
 * start at their own first event). */
pid_t fork(void) {
  pid_t (*fn)(void) = (pid_t(*)(void))stkr__pl_real(STKR__PL_R_fork);

  if (fn == NULL) {
    errno = ENOSYS;
    return -1;
  }
  if (!stkr__pl_guard && getpid() == stkr__pl_pid) {
    int saved = errno, st = atomic_load_explicit(&stkr__pl.start,
                                                 memory_order_acquire);
    /* A start under way on another thread: wait for it here, not only in
     * atfork_prepare. Prepare handlers run last-registered first: the
     * worker's (registered early in that start) takes the loader-scan
     * lock, which the start's own image scan then waits for, so the wait
     * there ran its whole 2 s, and the child, forked with the start still
     * busy, recorded nothing (tests/test-preload-procs.c,
     * test_fork_during_start). */
    if (st == STKR__PL_START_BUSY)
      st = start_settled();
    if (g_follow_forks && st == STKR__PL_START_PENDING)
      (void)stkr__pl_start_now();
    /* A followed child that has not recorded yet starts too, for the
     * same reason: its children's parent is then in the recording (QA:
     * the middle of a fork chain was missing and the leaf's parent pid
     * named no process of it). A no-op once it records. */
    else if (g_followed_child)
      (void)stkr_thread_attach();
    errno = saved;
  }
  return fn();
}

/* ---- _exit ---------------------------------------------------------------- */

static void pre_exit(void) {
  if (!atomic_load_explicit(&stkr__pl.ready, memory_order_acquire) ||
      stkr__pl_guard || getpid() != stkr__pl_pid)
    return;
  end_once();
}

/* _exit and _Exit differ only in the libc function they forward to. */
static _Noreturn void exit_via(int real, int status) {
  void (*fn)(int) = (void (*)(int))stkr__pl_real(real);

  pre_exit();
  if (fn != NULL)
    fn(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

void _exit(int status) { exit_via(STKR__PL_R__exit, status); }

void _Exit(int status) { exit_via(STKR__PL_R__Exit, status); }
