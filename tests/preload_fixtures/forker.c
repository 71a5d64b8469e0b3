/*
 * forker.c: a process tree for tests/test-preload.c. Each process makes
 * its hooked calls from known functions:
 *
 *   parent   fx_parent_before: getenv HOME
 *   c1       fork; fx_child_fork: open ~/.ssh/child-fork; _exit(0)
 *   c2       fork + exec of this program "execd": fx_execd: gethostname
 *   c3       vfork + exec "vforked": fx_vforked: getifaddrs. The vfork
 *            child shares the parent's memory: the exec hook must leave
 *            the parent's recorder alone.
 *   c4       fork; fx_child_before_exec: open ~/.ssh/before-exec (starts
 *            the child's own recording), then exec "after_exec":
 *            fx_after_exec: secure_getenv STKR_FIXTURE_AFTER_EXEC
 *   c5       fork; fx_child_before_failed_exec: open ~/.ssh/before-failed;
 *            exec of a missing file fails (ENOENT kept), recording resumes:
 *            fx_after_failed_exec: uname; exit(0)
 *   parent   fx_parent_after: getenv STKR_FIXTURE_AFTER (after the vfork)
 *
 * Prints "cN PID" for each child and "tree ok"; exits 0, or 3 after
 * printing a failed check.
 *
 * forker quiet: the parent makes no watched call; it forks two children,
 * each fx_child_fork (open ~/.ssh/child-fork) then _exit(0). Prints
 * "parent PID", "qN PID" and "quiet ok".
 *
 * forker failexec: the parent records (fx_parent_before) and forks f1,
 * which records nothing before an exec of a missing file fails (ENOENT
 * kept), then fx_after_failed_exec: uname; exit(0). Prints "f1 PID" and
 * "failexec ok".
 *
 * forker racefork: 12 trials, each a fresh image (fork + exec of
 * "racefork1 D", D = 0, 150, ..., 1650 us): a thread's first event
 * (fx_thread_first: getenv HOME) starts recording while the main thread,
 * D us after both left a barrier, forks; the child fx_child_fork then
 * _exit(0). The fork must not wait out the start's 2 s bound (a trial
 * whose fork took 1 s or more fails). Prints "rN PID" and "racefork ok".
 *
 * forker newpid: unshare(CLONE_NEWPID) (exit 4 when not permitted), then
 * fx_parent_before (its start fails: no thread can be made now) and a
 * fork; the child, pid 1 of the new namespace, fx_child_fork, _exit(0).
 * Prints "n1 PID" (the parent's view) and "newpid ok".
 *
 * forker daemon GO: the parent records (fx_parent_before), forks a daemon
 * (setsid, its output to /dev/null) and returns at once; the daemon waits
 * for the file GO to exist (at most 30 s), then fx_child_fork (open
 * ~/.ssh/child-fork) and exit(0). Prints "daemon PID" and "daemon ok".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/preload_fixtures/fixture_home.h"

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

/* Results go to a volatile: the call must happen, and fortified headers
 * warn about an ignored getenv result. */
static const char *volatile g_sink;

/* Opens (and closes) ~/rel: the watched open. Inlined: the recorded
 * caller stays the fx_ function. */
static inline __attribute__((always_inline)) void open_home(const char *rel) {
  int fd = open(home_path(rel), O_RDONLY);
  if (fd >= 0)
    close(fd);
}

NOINLINE static void fx_parent_before(void) {
  g_sink = getenv("HOME");
  BARRIER();
}
NOINLINE static void fx_parent_after(void) {
  g_sink = getenv("STKR_FIXTURE_AFTER");
  BARRIER();
}
NOINLINE static void fx_child_fork(void) {
  open_home(".ssh/child-fork");
  BARRIER();
}
NOINLINE static void fx_execd(void) {
  char h[256];
  (void)gethostname(h, sizeof h);
  BARRIER();
}
NOINLINE static void fx_vforked(void) {
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) == 0)
    freeifaddrs(ifa);
  BARRIER();
}
NOINLINE static void fx_child_before_exec(void) {
  open_home(".ssh/before-exec");
  BARRIER();
}
NOINLINE static void fx_after_exec(void) {
  g_sink = secure_getenv("STKR_FIXTURE_AFTER_EXEC");
  BARRIER();
}
NOINLINE static void fx_child_before_failed_exec(void) {
  open_home(".ssh/before-failed");
  BARRIER();
}
NOINLINE static void fx_after_failed_exec(void) {
  struct utsname u;
  (void)uname(&u);
  BARRIER();
}

NOINLINE static void fx_thread_first(void) {
  g_sink = getenv("HOME");
  BARRIER();
}

static char g_self[4096];

static pthread_barrier_t g_bar;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The thread waits for the fork (g_forked) before it ends: its end frees
 * its allocator cache, and GCC 12's ASan, unlike glibc's malloc, takes no
 * lock around fork, so a child forked then inherited ASan's allocator
 * locked and hung in its first malloc (CI, session 41; here 2 of 3 loops
 * of `forker racefork` under ASan within 100 s; the
 * race under test is the fork against the thread's start, not its end). */
static pthread_barrier_t g_forked;

static void *first_event_thread(void *arg) {
  (void)arg;
  pthread_barrier_wait(&g_bar);
  fx_thread_first();
  pthread_barrier_wait(&g_forked);
  return NULL;
}

/* One trial of "racefork": fork D us after another thread's first event
 * began (it starts recording, ~1-30 ms). 0, or 3 if the fork stalled. */
static int race_fork_once(long delay_us) {
  pthread_t t;
  double t0, took;
  pid_t pid;
  int st;

  pthread_barrier_init(&g_bar, NULL, 2);
  pthread_barrier_init(&g_forked, NULL, 2);
  if (pthread_create(&t, NULL, first_event_thread, NULL) != 0)
    return 3;
  pthread_barrier_wait(&g_bar);
  for (t0 = now_s(); now_s() < t0 + (double)delay_us / 1e6;)
    ;
  t0 = now_s();
  pid = fork();
  if (pid == 0) {
    fx_child_fork();
    _exit(0);
  }
  took = now_s() - t0;
  pthread_barrier_wait(&g_forked);
  pthread_join(t, NULL);
  if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0 || took >= 1.0) {
    fprintf(stderr, "forker: racefork1 %ld: fork took %.3f s (status %#x)\n",
            delay_us, took, pid < 0 ? -1 : st);
    return 3;
  }
  return 0;
}

static int wait_ok(pid_t pid, const char *name) {
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0) {
    fprintf(stderr, "forker: %s failed (status %#x)\n", name, st);
    return 0;
  }
  printf("%s %d\n", name, (int)pid);
  return 1;
}

/* A mode's end: "MODE ok" and 0 if every check passed, else 3 (the failed
 * check said why). */
static int finish(int ok, const char *mode) {
  if (!ok)
    return 3;
  printf("%s ok\n", mode);
  return 0;
}

/* A child's exec of a missing file fails (ENOENT kept), then it records
 * fx_after_failed_exec and exits 0. Inlined: the recorded caller stays
 * main. */
static inline __attribute__((always_inline, noreturn)) void
fx_exec_missing_then_record(void) {
  char *args[] = {"missing", NULL};

  errno = 0;
  if (execv("/nonexistent/stkr-missing", args) != -1 || errno != ENOENT) {
    fprintf(stderr, "forker: failed exec lost its errno (%d)\n", errno);
    exit(3);
  }
  fx_after_failed_exec();
  exit(0);
}

/* "daemon FILE": a child in a session of its own, its output on
 * /dev/null, records its event once FILE exists (up to 30 s), long after
 * this parent exited. */
static int daemon_child_waits_for(const char *file) {
  pid_t pid;

  fx_parent_before();
  pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    (void)setsid();
    if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(3);
    for (int i = 0; i < 3000 && access(file, F_OK) != 0; i++)
      usleep(10000);
    fx_child_fork();
    exit(0);
  }
  if (pid < 0) return 3;
  printf("daemon %d\n", (int)pid);
  return finish(1, "daemon");
}

/* "racefork": 12 trials of race_fork_once, each in a fresh process, the
 * fork 0 to 1.65 ms after the other thread's first event began. */
static int race_forks(void) {
  int ok = 1;

  if (readlink("/proc/self/exe", g_self, sizeof g_self - 1) < 0)
    return 3;
  for (int i = 0; i < 12; i++) {
    char name[8], delay[16];
    pid_t pid;
    snprintf(name, sizeof name, "r%d", i);
    snprintf(delay, sizeof delay, "%d", i * 150);
    pid = fork();
    if (pid == 0) {
      execl(g_self, "forker", "racefork1", delay, (char *)NULL);
      _exit(127);
    }
    ok &= wait_ok(pid, name);
  }
  return finish(ok, "racefork");
}

int main(int argc, char **argv) {
  pid_t pid;
  static int ok = 1; /* static: survives vfork's shared stack */

  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 2 && strcmp(argv[1], "execd") == 0) {
    fx_execd();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "vforked") == 0) {
    fx_vforked();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "after_exec") == 0) {
    fx_after_exec();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "quiet") == 0) {
    printf("parent %d\n", (int)getpid());
    for (int i = 1; i <= 2; i++) {
      char name[8];
      snprintf(name, sizeof name, "q%d", i);
      pid = fork();
      if (pid == 0) {
        fx_child_fork();
        _exit(0);
      }
      ok &= wait_ok(pid, name);
    }
    return finish(ok, "quiet");
  }
  if (argc == 2 && strcmp(argv[1], "failexec") == 0) {
    fx_parent_before();
    pid = fork();
    if (pid == 0) {
      fx_exec_missing_then_record();
    }
    return finish(wait_ok(pid, "f1"), "failexec");
  }
  if (argc == 2 && strcmp(argv[1], "newpid") == 0) {
    if (unshare(CLONE_NEWPID) != 0) return 4;
    fx_parent_before();
    pid = fork();
    if (pid == 0) {
      fx_child_fork();
      _exit(0);
    }
    return finish(wait_ok(pid, "n1"), "newpid");
  }
  if (argc == 3 && strcmp(argv[1], "daemon") == 0)
    return daemon_child_waits_for(argv[2]);
  if (argc == 3 && strcmp(argv[1], "racefork1") == 0)
    return race_fork_once(strtol(argv[2], NULL, 10));
  if (argc == 2 && strcmp(argv[1], "racefork") == 0)
    return race_forks();
  if (argc != 2 || strcmp(argv[1], "tree") != 0) {
    fprintf(stderr, "usage: forker tree|quiet|failexec|racefork|newpid\n");
    return 2;
  }
  if (readlink("/proc/self/exe", g_self, sizeof g_self - 1) < 0)
    return 3;

  fx_parent_before();
  pid = fork();
  if (pid == 0) {
    fx_child_fork();
    _exit(0); /* no exit handlers: the _exit hook must flush */
  }
  ok &= wait_ok(pid, "c1");

  pid = fork();
  if (pid == 0) {
    execl(g_self, "forker", "execd", (char *)NULL);
    _exit(127);
  }
  ok &= wait_ok(pid, "c2");

  pid = vfork();
  if (pid == 0) {
    char *args[] = {"forker", "vforked", NULL};
    execv(g_self, args);
    _exit(127);
  }
  ok &= wait_ok(pid, "c3");

  pid = fork();
  if (pid == 0) {
    char *args[] = {"forker", "after_exec", NULL};
    fx_child_before_exec();
    execv(g_self, args);
    _exit(127);
  }
  ok &= wait_ok(pid, "c4");

  pid = fork();
  if (pid == 0) {
    fx_child_before_failed_exec();
    fx_exec_missing_then_record();
  }
  ok &= wait_ok(pid, "c5");

  fx_parent_after();
  return finish(ok, "tree");
}
