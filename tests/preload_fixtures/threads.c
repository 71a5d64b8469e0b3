/*
 * threads.c: hooked calls from several threads at once, and from a signal
 * handler that interrupts them, for tests/test-preload.c.
 *
 *   threads threads   4 threads x 200 x {open ~/.ssh/thread-missing (fails
 *                     ENOENT), getenv HOME}, started together on a
 *                     barrier, all from fx_thread_body. Prints "ok".
 *   threads sigstress the main thread calls getenv("HOME") 5000 times
 *                     (fx_loop) while a 100 us interval timer's handler
 *                     (fx_alarm) opens ~/.ssh/from-alarm: handlers land in
 *                     the middle of hooks and of the recorder. Prints
 *                     "loop N alarms M"; every call must come back with
 *                     the right result and errno.
 *   threads mallocsig  a 1 ms timer's handler makes the process's first
 *                     watched call (getenv HOME) while main loops on
 *                     malloc/free; prints "alarms 100"
 *   threads smallstack N  two threads one after the other, each made with
 *                     a stack of N bytes (0: PTHREAD_STACK_MIN), each
 *                     calling getenv HOME once (fx_small_body): the first
 *                     is the process's first watched call (the recorder
 *                     starts there), the second attaches its own ring
 *                     there. Prints "ok".
 *   threads altstack   a SIGUSR1 handler running on an alternate signal
 *                     stack (SA_ONSTACK) calls getenv HOME
 *                     (fx_altstack_handler), then main calls it
 *                     (fx_altstack_main). Prints "ok".
 * Exits 0, or 3 after printing a failed check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/preload_fixtures/fixture_home.h"

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define THREADS 4
#define PER_THREAD 200
#define LOOP 5000

static char g_missing[4096], g_alarm_path[4096];
static pthread_barrier_t g_barrier;
static _Atomic int g_failed;

NOINLINE static void *fx_thread_body(void *arg) {
  int i;
  (void)arg;
  pthread_barrier_wait(&g_barrier);
  for (i = 0; i < PER_THREAD; i++) {
    errno = 0;
    if (open(g_missing, O_RDONLY) != -1 || errno != ENOENT)
      g_failed = 1;
    if (getenv("HOME") == NULL)
      g_failed = 1;
    BARRIER();
  }
  return NULL;
}

static volatile sig_atomic_t g_alarms, g_alarm_bad;
NOINLINE static void fx_alarm(int sig) {
  int saved = errno;
  (void)sig;
  if (open(g_alarm_path, O_RDONLY) != -1 || errno != ENOENT)
    g_alarm_bad = 1;
  g_alarms++;
  errno = saved;
  BARRIER();
}

NOINLINE static int fx_loop(void) {
  int i, bad = 0;
  for (i = 0; i < LOOP; i++) {
    errno = EXDEV;
    if (getenv("HOME") == NULL || errno != EXDEV)
      bad = 1;
    BARRIER();
  }
  return bad;
}

/* mallocsig: the process's first watched call is made by a 1 ms timer's
 * handler (getenv HOME) while main allocates and frees without pause, so
 * the handler interrupts malloc most of the time. */
static volatile sig_atomic_t g_heap_alarms, g_heap_want;

NOINLINE static void fx_heap_alarm(int sig) {
  int saved = errno;
  (void)sig;
  /* One more alarm may come between the loop's end and the timer's stop
   * (it made "alarms 101" once): past the count, nothing is called. */
  if (g_heap_alarms < g_heap_want) {
    g_alarm_bad |= getenv("HOME") == NULL;
    g_heap_alarms++;
  }
  errno = saved;
}

NOINLINE static int fx_heap_loop(int want) {
  struct sigaction sa;
  struct itimerval it = {{0, 1000}, {0, 1000}}, off = {{0, 0}, {0, 0}};
  void *p[64] = {0};
  unsigned long i = 0;

  g_heap_want = want;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fx_heap_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  setitimer(ITIMER_REAL, &it, NULL);
  while (g_heap_alarms < want) {
    unsigned k = (unsigned)(i % 64);
    free(p[k]);
    p[k] = malloc(16 + (i * 7919) % 4000);
    i++;
  }
  setitimer(ITIMER_REAL, &off, NULL);
  for (i = 0; i < 64; i++)
    free(p[i]);
  return g_alarm_bad;
}

NOINLINE static void *fx_small_body(void *arg) {
  (void)arg;
  if (getenv("HOME") == NULL) g_failed = 1;
  BARRIER();
  return NULL;
}

static int small_stacks(size_t bytes) {
  pthread_attr_t attr;
  pthread_t t;

  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, bytes ? bytes : PTHREAD_STACK_MIN) != 0)
    return 2;
  for (int i = 0; i < 2; i++) {
    if (pthread_create(&t, &attr, fx_small_body, NULL) != 0) return 2;
    pthread_join(t, NULL);
  }
  pthread_attr_destroy(&attr);
  if (g_failed) return 3;
  printf("ok\n");
  return 0;
}

/* rename: a thread named "alpha" reads HOME 3 times, renames itself
 * "beta" (pthread_setname_np) and reads it 4 times, then "gamma" (prctl)
 * and 2 times. */
static void fx_read_home(int n) {
  for (int i = 0; i < n; i++)
    if (getenv("HOME") == NULL)
      g_failed = 1;
}

static void *fx_rename_body(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "alpha");
  fx_read_home(3);
  pthread_setname_np(pthread_self(), "beta");
  fx_read_home(4);
  prctl(PR_SET_NAME, "gamma", 0, 0, 0);
  fx_read_home(2);
  return NULL;
}

NOINLINE static void fx_altstack_handler(int sig) {
  (void)sig;
  if (getenv("HOME") == NULL) g_failed = 1;
  BARRIER();
}

NOINLINE static int fx_altstack_main(void) {
  static char alt[1 << 16];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
  struct sigaction sa;

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fx_altstack_handler;
  sa.sa_flags = SA_ONSTACK;
  if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
    return 2;
  raise(SIGUSR1); /* the first event: the recording's first stack is empty */
  if (getenv("HOME") == NULL) return 3;
  if (g_failed) return 3;
  printf("ok\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *home = env_home();

  setvbuf(stdout, NULL, _IONBF, 0);
  snprintf(g_missing, sizeof g_missing, "%s/.ssh/thread-missing", home);
  snprintf(g_alarm_path, sizeof g_alarm_path, "%s/.ssh/from-alarm", home);
  if (argc == 2 && strcmp(argv[1], "altstack") == 0)
    return fx_altstack_main();
  if (argc == 2 && strcmp(argv[1], "forkrename") == 0) {
    /* A followed fork child that renames itself before its first event
     * (review: it recorded under its parent's name). */
    pid_t pid;
    int st = 0;
    prctl(PR_SET_NAME, "parent", 0, 0, 0);
    fx_read_home(1);
    if ((pid = fork()) == 0) {
      prctl(PR_SET_NAME, "child", 0, 0, 0);
      fx_read_home(5);
      _exit(g_failed ? 3 : 0);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0 || g_failed)
      return 3;
    printf("ok\n");
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "rename") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, fx_rename_body, NULL);
    pthread_join(t, NULL);
    if (g_failed) return 3;
    printf("ok\n");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "smallstack") == 0)
    return small_stacks(strtoul(argv[2], NULL, 0));
  if (argc == 2 && strcmp(argv[1], "mallocsig") == 0) {
    int bad = fx_heap_loop(100);
    printf("alarms %d\n", (int)g_heap_alarms);
    return bad ? 3 : 0;
  }
  if (argc == 2 && strcmp(argv[1], "threads") == 0) {
    pthread_t t[THREADS];
    int i;
    pthread_barrier_init(&g_barrier, NULL, THREADS);
    for (i = 0; i < THREADS; i++)
      pthread_create(&t[i], NULL, fx_thread_body, NULL);
    for (i = 0; i < THREADS; i++)
      pthread_join(t[i], NULL);
    if (g_failed) {
      fprintf(stderr, "threads: a hooked call returned a wrong result\n");
      return 3;
    }
    printf("ok\n");
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "sigstress") == 0) {
    struct sigaction sa;
    struct itimerval it = {{0, 100}, {0, 100}}, off = {{0, 0}, {0, 0}};
    int bad;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fx_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    setitimer(ITIMER_REAL, &it, NULL);
    bad = fx_loop();
    setitimer(ITIMER_REAL, &off, NULL);
    printf("loop %d alarms %d\n", LOOP, (int)g_alarms);
    if (bad || g_alarm_bad) {
      fprintf(stderr, "sigstress: wrong result or errno (loop %d, alarm %d)\n",
              bad, (int)g_alarm_bad);
      return 3;
    }
    return 0;
  }
  fprintf(stderr, "usage: threads threads|sigstress|rename|...\n");
  return 2;
}
