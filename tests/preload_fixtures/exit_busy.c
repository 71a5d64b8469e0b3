/*
 * exit_busy.c: a program that ends while its threads are busy in hooked
 * calls (tests/test-exit.c). Three threads loop on getenv("HOME") and
 * open("/etc/passwd") (both watched by the hooks) and never stop; a fourth
 * keeps starting short-lived threads that do the same. After 300 ms the
 * main thread ends the program the way argv[1] says:
 *   exit     exit(0) (destructors run: the hook library's stkr_shutdown)
 *   _exit    _exit(0) (no destructors: the _exit hook ends the session)
 *   return   return 0 from main
 * argv[2], optional: the number of looping threads (default 3).
 * Prints "calls N" (hooked calls made so far, roughly) and exits 0.
 * Or, where the main thread ends before the process (QA, session 24: under
 * the recorder such a process never ended, its flush thread alive):
 *   pthread_exit  the threads make 200 calls each and return; main calls
 *                 pthread_exit right away: the last thread's end exits 0
 *   sys_exit      no thread: main makes its calls, then SYS_exit(3) (the
 *                 thread's own exit, as seccomp's strict mode allows):
 *                 status 3
 *   cancel_start  a thread with asynchronous cancellation loops on getenv
 *                 (its first call starts the recording, ~10 ms under
 *                 `stackrec record`), cancelled 2 ms in; then main makes a
 *                 call and forks a child that makes one (QA, session 24:
 *                 a cancel inside the start left it "busy" for good, and
 *                 every later call, the fork and the exit waited 2 s)
 *   quiet_exit, quiet__exit, quiet_return
 *                 no thread: main makes its calls and ends by exit(0),
 *                 _exit(0) or return 0; no call comes while the session
 *                 ends (QA, session 47: such an end left its final segment
 *                 unmarked, with its disk reserve)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic unsigned long g_calls;

static void busy_once(void) {
  if (getenv("HOME") == NULL) abort();
  int fd = open("/etc/passwd", O_RDONLY);
  if (fd >= 0) close(fd);
  atomic_fetch_add_explicit(&g_calls, 2, memory_order_relaxed);
}

static void *busy(void *arg) {
  (void)arg;
  for (;;) busy_once();
  return NULL;
}

static void *cancelled_looper(void *arg) {
  (void)arg;
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
  for (;;) busy_once();
  return NULL;
}

static int cancel_start(void) {
  pthread_t t;
  int st;
  if (pthread_create(&t, NULL, cancelled_looper, NULL) != 0) return 2;
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  pthread_cancel(t);
  pthread_join(t, NULL);
  busy_once();
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    busy_once();
    _exit(0);
  }
  if (p < 0 || waitpid(p, &st, 0) != p || st != 0) return 3;
  printf("calls %lu\n", atomic_load(&g_calls));
  return 0;
}

static void *short_lived(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) busy_once();
  return NULL;
}

static void *spawner(void *arg) {
  pthread_attr_t detached;
  (void)arg;
  /* Detached from birth: no window in which the program could end with a
   * finished, unjoined thread (a leak to TSan). */
  pthread_attr_init(&detached);
  pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
  for (;;) {
    pthread_t t;
    (void)pthread_create(&t, &detached, short_lived, NULL);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

int main(int argc, char **argv) {
  pthread_t t;
  const char *how = argc > 1 ? argv[1] : "exit";
  int busy_threads = argc > 2 ? atoi(argv[2]) : 3;

  if (strcmp(how, "pthread_exit") == 0) {
    for (int i = 0; i < busy_threads; i++)
      if (pthread_create(&t, NULL, short_lived, NULL) != 0) return 2;
    pthread_exit(NULL);
  }
  if (strcmp(how, "cancel_start") == 0) return cancel_start();
  if (strcmp(how, "sys_exit") == 0) {
    for (int i = 0; i < 10; i++) busy_once();
    printf("calls %lu\n", atomic_load(&g_calls));
    fflush(stdout);
    syscall(SYS_exit, 3);
  }
  if (strncmp(how, "quiet_", 6) == 0) {
    for (int i = 0; i < 10; i++) busy_once();
    printf("calls %lu\n", atomic_load(&g_calls));
    fflush(stdout);
    if (strcmp(how + 6, "_exit") == 0) _exit(0);
    if (strcmp(how + 6, "return") == 0) return 0;
    exit(0);
  }
  for (int i = 0; i < busy_threads; i++)
    if (pthread_create(&t, NULL, busy, NULL) != 0) return 2;
  if (pthread_create(&t, NULL, spawner, NULL) != 0) return 2;
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  printf("calls %lu\n", atomic_load(&g_calls));
  fflush(stdout);
  if (strcmp(how, "_exit") == 0) _exit(0);
  if (strcmp(how, "return") == 0) return 0;
  exit(0);
}
