/*
 * preload.h: internals shared by the files of the LD_PRELOAD hook library
 * (libstackrec_preload.so). Not public: the library's only interface is the
 * libc entry points it interposes and the STACKREC_* environment (see
 * preload/README.md for the catalogue).
 *
 * Layout:
 *   match.c        pure matching: sensitive paths, watched environment names,
 *                  category lists (no recorder dependency; unit-tested alone;
 *                  declared in match.h, which `stackrec record` uses too)
 *   preload.c      state, real-function resolution, constructor/destructor,
 *                  fork/exec/_exit handling, the environment hooks
 *   hooks_files.c  open/openat/fopen and their 64-bit and fortify variants;
 *                  fcntl(F_GETFD), which finds the recorder's own
 *                  descriptors free (stkr_fd_owned)
 *   hooks_net.c    identifiers (gethostname, uname, getifaddrs, ioctl) and
 *                  network (connect, getaddrinfo)
 *   hooks_stat.c   reasons: the stat and statfs/statvfs families
 *   hooks_signal.c sigaction and the signal family: a pending start comes
 *                  first when a handler may interrupt malloc
 *   hooks_dl.c     dlopen/dlclose: watched, not recorded
 *
 * Every hook follows one shape: classify the call with a cheap check (a
 * miss costs a few loads and compares, no event), record one event with
 * stkr__pl_record() if it matches an enabled category, then call the real
 * function and return its result untouched (errno included).
 */
#ifndef STKR_PRELOAD_H
#define STKR_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "preload/match.h"
#include "recorder/stackrec.h"

#ifdef STKR_PRELOAD_CAPTURE_BACKTRACE
#include <execinfo.h>
#endif

/* ---- runtime state (preload.c) -------------------------------------------- */

typedef struct stkr__pl_state {
  /* Written by the constructor before the release store of `ready`, read by
   * hooks after their acquire load of it; never written again (exec starts
   * a new image, fork copies it unchanged). */
  unsigned cats; /* STKR__PL_CAT_BIT mask of enabled categories */
  stkr__pl_paths paths;
  stkr__pl_names names;
  /* 1 once the fields above are set. Release store in the constructor,
   * acquire load in stkr__pl_enabled() (a plain load on x86_64). */
  _Atomic int ready;
  /* The recording's start, deferred to the first event (preload.c, "Start
   * at the first event"): STKR__PL_START_*. Set to PENDING by the
   * constructor (before `ready`), taken by one hook's compare-and-swap,
   * cleared by the end of the process image and by a fork child that does
   * not follow. */
  _Atomic int start;
} stkr__pl_state;

enum {
  STKR__PL_START_NONE,    /* started, failed, ended, or never to start */
  STKR__PL_START_PENDING, /* configured; the first event starts recording */
  STKR__PL_START_BUSY     /* a thread is starting it now */
};

extern stkr__pl_state stkr__pl;

/* The library's own executable code, [lo, hi): set by the constructor
 * before the release store of `ready`, read after the acquire load. A
 * hooked call made from there is the recorder's own (fstat of its segment
 * file, stat of a new ring file, even inside stkr_event while a thread
 * attaches or in a forked child's fork handler): it is never recorded. A
 * call from a signal handler that interrupted an event comes from the
 * app's code and still reaches stkr_event, which counts it. */
extern uintptr_t stkr__pl_self_lo, stkr__pl_self_hi;

static inline bool stkr__pl_from_self(const void *ret) {
  uintptr_t pc = (uintptr_t)ret;
  return pc >= stkr__pl_self_lo && pc < stkr__pl_self_hi;
}

/* Non-zero while this thread runs the library's own control code
 * (stkr_init/stkr_flush/stkr_shutdown from the constructor, destructor,
 * exec and _exit hooks): libc calls made by the recorder on this thread then
 * go straight to libc. The flush worker thread needs no flag: the recorder
 * marks it ignored (its events return -EPERM). initial-exec TLS: no lazy
 * allocation inside a hook. */
extern __thread int stkr__pl_guard __attribute__((tls_model("initial-exec")));

/* Has the constructor configured the hooks (and started recording)? One
 * acquire load (a plain load on x86_64); pairs with the constructor's
 * release store. Hooks test it before reading any configuration. */
static inline bool stkr__pl_ready(void) {
  return __builtin_expect(
      atomic_load_explicit(&stkr__pl.ready, memory_order_acquire) != 0, 1);
}

/* After stkr__pl_ready(): is category c enabled, and may this thread's
 * call be recorded (not the library's own control code)? */
static inline bool stkr__pl_want(unsigned c) {
  return (stkr__pl.cats & STKR__PL_CAT_BIT(c)) != 0 && !stkr__pl_guard;
}

/* The hook's frame lies between the app's call and stkr_event(); the
 * library configures skip_frames = 1 so that the first recorded PC is the
 * return address into the app's calling function. That only holds if the
 * hook calls stkr_event() from its own frame: hence always_inline. */
#define STKR__PL_SKIP_FRAMES 1

/* Before an exec (hooks_exec.c): end this image's recording cleanly
 * (bounded, as every end of a process image). @return 1 if it was
 * recording or following, for stkr__pl_exec_failed. errno kept. */
int stkr__pl_pre_exec(void);
/* stkr_init(cfg) on this thread, or on a helper thread of a sized stack
 * when this one is short of it (start_room.c). @return its result, or
 * -errno if the helper could not run. */
int stkr__pl_init_with_room(const stkr_config *cfg);
/* The recorder holds two or three descriptors while it records (the
 * segment, the session file's lock, the worker's event descriptors), at
 * stkr_fd_floor() or above but never below 10. A program started under a
 * soft RLIMIT_NOFILE this low counts on the few numbers it has (python3
 * under `ulimit -n 12` failed with EMFILE in 2 of 3 recorded runs, never
 * plain): below it the process is not recorded. Decided here, as the
 * program starts: its descriptors are still free, so the note reaches
 * record (a socket) or the stderr the program was given; at its first
 * event the table may be full (review: the note then fell back into the
 * program's stderr). A forked child follows its parent, and the note says
 * so. A limit the program lowers itself before its first watched call
 * stops the start then (start_changed; with a note, which may then find
 * no descriptor for record's socket); lowered once recording runs, the
 * recorder's descriptors are above it already. An app that embeds the
 * recorder decides for itself (stkr_init does not check). */
#define STKR__PL_MIN_NOFILE 64

/* The least stack limit (RLIMIT_STACK) a process records with: below it
 * the constructor's own checks (paths of PATH_MAX) overflowed the main
 * thread's stack (`ulimit -s 16`: /bin/true died of SIGSEGV; QA, session
 * 28). Above it, a start short of stack runs on a helper thread of its
 * own size (start_room.c). */
#define STKR__PL_MIN_STACK_KIB 64

/* setup_check.c. The constructor's check: a malformed STACKREC_* value,
 * a directory this process may not write (or that it lost), limits below
 * the above. *follow_forks: STACKREC_FORK is not "disable". @return 0 or
 * the error, noted. */
int stkr__pl_check_setup(bool *follow_forks);
/* At the first event: what the program changed since its start (a lower
 * descriptor limit, its root directory, the time-stamp counter denied).
 * @return 0 or the error, noted. */
int stkr__pl_start_changed(void);
/* Did this process unshare(CLONE_NEWPID) (its threads cannot be made)? */
bool stkr__pl_pid_ns_unshared(void);

/* Will the image an exec starts run without the hooks (exec_escape.c)?
 * Under `stackrec record` only. file (search: looked up in PATH as execvp
 * does) or fd is what the exec runs, envp its environment (NULL: ours);
 * target gets the file's name. *strip: the hook library must leave its
 * LD_PRELOAD (hooks_exec.c's env_strip), since its loader cannot load it and
 * would say so in the program's stderr (another ELF class; a chroot).
 * @return why, or NULL (it will have them, not under record, or the exec
 * will fail: no such executable file). */
const char *stkr__pl_exec_escapes(const char *file, int fd, bool search,
                                  char *const envp[], char *target,
                                  size_t cap, bool *strip);
/* Where an LD_PRELOAD value v names a file of this library's name: *at
 * and @return its length (0, *at NULL: nowhere). exec_escape.c. */
size_t stkr__pl_preload_ours(const char *v, const char **at);
/* A note to `stackrec record` (or stderr without it), errno kept; err != 0
 * names a process that records nothing (verify: incomplete). preload.c. */
void stkr__pl_note(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A variable of our environment as the constructor saw it (STACKREC_*) or
 * as libc's getenv has it now. preload.c. */
const char *stkr__pl_env(const char *name);
/* The exec failed (returned): with was = stkr__pl_pre_exec()'s, the next
 * event starts recording again (a process that had not started is still
 * pending). */
void stkr__pl_exec_failed(int was);

/* Start recording for the event the calling hook is about to record, if
 * the start is still pending (preload.c). @return true if recording now.
 * Never inlined: it runs once per process. */
bool stkr__pl_start_now(void) __attribute__((noinline, cold));

/* The calling thread is about to forbid itself the time-stamp counter
 * (prctl PR_SET_TSC, PR_TSC_SIGSEGV) or enter seccomp (PR_SET_SECCOMP;
 * `strict`: its strict mode). Recording stops first where it would no
 * longer work (preload.c); the caller then makes the call. */
void stkr__pl_before_sandbox(const char *what, bool strict);

/* getenv without libc's (hooks_env.c): a scan of environ. */
char *stkr__pl_env_scan(const char *name);
/* NAME's value in the environment array envp (NULL: not there, or no
 * array). hooks_env.c; stkr__pl_env_scan is it over environ. */
char *stkr__pl_env_in(char *const envp[], const char *name);

/* The pid this image's recorder state belongs to (preload.c): written by
 * the constructor and the atfork child handler, read by the hooks that
 * must not act in a vfork child (which sees its parent's value). */
extern pid_t stkr__pl_pid;


#define STKR__PL_CAPTURE_DEPTH 64 /* the backtrace() reference only */

static inline __attribute__((always_inline)) void
stkr__pl_record(stkr_site *site, const void *payload, size_t len) {
  int saved = errno; /* the recorder must never leak an errno to the app */
#ifdef STKR_PRELOAD_CAPTURE_BACKTRACE
  /* Benchmark reference (tools/bench:hook_cost): the same hook, with glibc
   * backtrace() in place of the recorder. Never in the product library. */
  void *pcs[STKR__PL_CAPTURE_DEPTH];
  volatile int n = backtrace(pcs, STKR__PL_CAPTURE_DEPTH);
  (void)n;
  (void)site;
  (void)payload;
  (void)len;
#else
  /* Not recording yet: the process's first event starts it (cold; the
   * hook's frame is still the caller's, so skip_frames holds for the
   * second try). */
  if (__builtin_expect(stkr_event(site, payload, len) == -ENOTCONN, 0) &&
      stkr__pl_start_now())
    (void)stkr_event(site, payload, len);
#endif
  errno = saved;
}

/* ---- sites ---------------------------------------------------------------- */

/* The sites: match.h's STKR__PL_SITES and STKR__PL_FILE_SITES. */

/* stkr__pl_site_getenv, ... (sites.c). Hidden: the hooks address them
 * PC-relative, with no GOT load on the hot path. */
#define STKR__PL_SITE_DECL(name, str)                                          \
  extern stkr_site stkr__pl_site_##name __attribute__((visibility("hidden")));
STKR__PL_SITES(STKR__PL_SITE_DECL)
#undef STKR__PL_SITE_DECL

/* Register every site now (constructor). A site otherwise registers at its
 * first event, and the recorder drops (and counts) the event of a thread
 * that finds the site being registered by another: two threads' first
 * open of ~/.ssh at the same moment would lose one. */
void stkr__pl_register_sites(void);      /* sites.c */
void stkr__pl_register_file_sites(void); /* hooks_files.c */

/* ---- real functions --------------------------------------------------------- */

/* Every interposed symbol, resolved with dlsym(RTLD_NEXT) once. */
#define STKR__PL_REALS(X)                                                      \
  X(open) X(open64) X(__open_2) X(__open64_2) X(openat) X(openat64)            \
  X(__openat_2) X(__openat64_2) X(fopen) X(fopen64) X(creat) X(creat64)     \
  X(freopen) X(freopen64) X(gethostname)                                     \
  X(__gethostname_chk) X(uname) X(getifaddrs) X(ioctl) X(connect)              \
  X(getaddrinfo) X(getenv) X(secure_getenv)                                    \
  X(execve) X(execv) X(execvp) X(execvpe) X(fexecve) X(_exit) X(_Exit)    \
  X(posix_spawn) X(posix_spawnp)                                               \
  X(stat) X(stat64) X(lstat) X(lstat64) X(fstat) X(fstat64) X(fstatat)         \
  X(fstatat64) X(__xstat) X(__xstat64) X(__lxstat) X(__lxstat64)               \
  X(__fxstat) X(__fxstat64) X(__fxstatat) X(__fxstatat64) X(statx)             \
  X(statfs) X(statfs64) X(fstatfs) X(fstatfs64) X(statvfs) X(statvfs64)        \
  X(fstatvfs) X(fstatvfs64) X(dlopen) X(dlclose) X(fork) X(fcntl)          \
  X(fcntl64)                                                                   \
  X(sigaction) X(signal) X(bsd_signal) X(sysv_signal)                      \
  X(pthread_setname_np) X(prctl)

enum {
#define STKR__PL_ENUM(name) STKR__PL_R_##name,
  STKR__PL_REALS(STKR__PL_ENUM)
#undef STKR__PL_ENUM
  STKR__PL_R_COUNT
};

/* Pointers by index. Written with a release store by whoever resolves
 * first (all writers store the same value), read with an acquire load in
 * stkr__pl_real(). */
extern void *_Atomic stkr__pl_reals[STKR__PL_R_COUNT];

/* Resolve symbol idx now. @return the function, or NULL if libc has no
 * such symbol or resolution re-entered itself on this thread (dlsym ->
 * malloc -> a hook); callers then fall back (see each hook). */
void *stkr__pl_resolve(int idx);

static inline void *stkr__pl_real(int idx) {
  void *p = atomic_load_explicit(&stkr__pl_reals[idx], memory_order_acquire);
  return __builtin_expect(p != NULL, 1) ? p : stkr__pl_resolve(idx);
}

#endif /* STKR_PRELOAD_H */
