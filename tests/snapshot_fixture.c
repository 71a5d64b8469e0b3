/*
 * snapshot_fixture.c: the target of tests/test-snapshot.c and of
 * tools/bench/snapshot_vs.sh. N threads (default 10, argv[1]) parked in
 * known call chains, two functions deep each, below a libc call:
 *   snap_poll_outer -> snap_poll_inner -> poll(NULL, 0, -1)
 *   snap_pause_outer -> snap_pause_inner -> pause()
 *   snap_mutex_outer -> snap_mutex_inner -> pthread_mutex_lock (held by main)
 *   snap_busy_outer -> snap_busy_inner (a busy loop counting)
 *   snap_sleep_outer -> snap_sleep_inner -> nanosleep (1 s steps)
 * thread i runs chain i % 5 and is named "snap-<chain>-<i>". The main
 * thread prints "ready <pid>" and waits in snap_main_wait -> read(stdin).
 * On a line "check" (or EOF) it checks that the target kept running
 * correctly: the busy threads still count; every blocked call had no
 * spurious return (EINTR) while parked; then it releases every thread
 * (SIGUSR1 for poll/pause, the mutex, a flag), joins them within 10 s and
 * exits 0, or 1 with a line saying what was wrong.
 * On a line "exec" it execs `sleep 10` instead, its threads parked.
 * With "churn" (argv[2]) one more thread creates and joins short-lived
 * threads all the time; with "clock" one more thread, "snap-clock", loops
 * in snap_clock_outer -> snap_clock_inner -> clock_gettime, gettimeofday
 * and time: the vDSO's code, where a frame-pointer walk lost the caller
 * (test_vdso_caller_kept). Built with frame pointers and noinline so the
 * chains are exact.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_release;      /* main -> threads: leave */
static atomic_ulong g_busy_count; /* busy threads -> main */
static atomic_int g_spurious;     /* a blocked call returned while parked */
static atomic_int g_done;         /* threads that returned */

static void on_usr1(int sig) { (void)sig; }

/* Keep the compiler from turning calls into tail jumps (the frame would
 * go): use the result after the call. */
#define KEEP(x) __asm__ volatile("" ::"r"(x) : "memory")

NOINLINE static int snap_poll_inner(void) {
  int n = 0;
  while (!atomic_load(&g_release)) {
    int r = poll(NULL, 0, -1);
    if (r < 0 && errno == EINTR && !atomic_load(&g_release))
      atomic_fetch_add(&g_spurious, 1);
    n++;
  }
  KEEP(n);
  return n;
}
NOINLINE static int snap_poll_outer(void) { int r = snap_poll_inner(); KEEP(r); return r; }

NOINLINE static int snap_pause_inner(void) {
  int n = 0;
  while (!atomic_load(&g_release)) {
    pause();
    if (!atomic_load(&g_release)) atomic_fetch_add(&g_spurious, 1);
    n++;
  }
  KEEP(n);
  return n;
}
NOINLINE static int snap_pause_outer(void) { int r = snap_pause_inner(); KEEP(r); return r; }

NOINLINE static int snap_mutex_inner(void) {
  int r = pthread_mutex_lock(&g_mutex);
  if (!atomic_load(&g_release)) atomic_fetch_add(&g_spurious, 1);
  pthread_mutex_unlock(&g_mutex);
  KEEP(r);
  return r;
}
NOINLINE static int snap_mutex_outer(void) { int r = snap_mutex_inner(); KEEP(r); return r; }

NOINLINE static int snap_busy_inner(void) {
  unsigned long local = 0;
  while (!atomic_load_explicit(&g_release, memory_order_relaxed)) {
    local++;
    atomic_fetch_add_explicit(&g_busy_count, 1, memory_order_relaxed);
  }
  KEEP(local);
  return (int)(local & 1);
}
NOINLINE static int snap_busy_outer(void) { int r = snap_busy_inner(); KEEP(r); return r; }

NOINLINE static int snap_sleep_inner(void) {
  int n = 0;
  while (!atomic_load(&g_release)) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    /* nanosleep restarts by itself after a ptrace stop; EINTR only with
     * our own SIGUSR1 (sent at release). */
    if (nanosleep(&ts, NULL) != 0 && errno == EINTR &&
        !atomic_load(&g_release))
      atomic_fetch_add(&g_spurious, 1);
    n++;
  }
  KEEP(n);
  return n;
}
NOINLINE static int snap_sleep_outer(void) { int r = snap_sleep_inner(); KEEP(r); return r; }

/* The vDSO's calls, all the time: most of the thread's instants are in
 * the kernel's code, where no frame record of its own may be (x86_64's
 * __vdso_time has none; clock_gettime's is popped before its last
 * instructions). */
NOINLINE static long snap_clock_inner(void) {
  long n = 0;
  while (!atomic_load_explicit(&g_release, memory_order_relaxed)) {
    struct timespec ts;
    struct timeval tv;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    gettimeofday(&tv, NULL);
    n += ts.tv_nsec + tv.tv_usec;
    for (int i = 0; i < 32; i++) n += (long)time(NULL);
  }
  KEEP(n);
  return n;
}
NOINLINE static long snap_clock_outer(void) { long r = snap_clock_inner(); KEEP(r); return r; }

static void *clock_main(void *arg) {
  pthread_setname_np(pthread_self(), "snap-clock");
  long r = snap_clock_outer();
  KEEP(r);
  return arg;
}

static const char *const k_chain[] = {"poll", "pause", "mutex", "busy",
                                      "sleep"};

static void *thread_main(void *arg) {
  int i = (int)(intptr_t)arg, r = 0;
  char name[16];
  snprintf(name, sizeof name, "snap-%s-%d", k_chain[i % 5], i);
  pthread_setname_np(pthread_self(), name);
  switch (i % 5) {
  case 0: r = snap_poll_outer(); break;
  case 1: r = snap_pause_outer(); break;
  case 2: r = snap_mutex_outer(); break;
  case 3: r = snap_busy_outer(); break;
  case 4: r = snap_sleep_outer(); break;
  }
  KEEP(r);
  atomic_fetch_add(&g_done, 1);
  return NULL;
}

/* "churn": threads that come and go all the time, for the snapshot's
 * "a thread vanished meanwhile" path. */
static void *churn_child(void *arg) {
  nanosleep(&(struct timespec){0, 100 * 1000}, NULL);
  return arg;
}
static void *churn_main(void *arg) {
  pthread_setname_np(pthread_self(), "snap-churn");
  while (!atomic_load(&g_release)) {
    pthread_t c;
    if (pthread_create(&c, NULL, churn_child, NULL) == 0)
      pthread_join(c, NULL);
  }
  return arg;
}

NOINLINE static ssize_t snap_main_wait(char *buf, size_t n) {
  ssize_t r;
  do r = read(0, buf, n);
  while (r < 0 && errno == EINTR);
  KEEP(r);
  return r;
}

static int check_and_exit(pthread_t *t, int n) {
  unsigned long c0 = atomic_load(&g_busy_count), c1 = c0;
  int spurious = atomic_load(&g_spurious);
  bool busy = n > 3;

  /* The busy threads go on counting (within 5 s: a loaded machine). */
  for (int k = 0; k < 500 && busy && c1 == c0; k++) {
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    c1 = atomic_load(&g_busy_count);
  }
  atomic_store(&g_release, 1);
  pthread_mutex_unlock(&g_mutex);
  for (int i = 0; i < n; i++)
    if (i % 5 == 0 || i % 5 == 1 || i % 5 == 4) pthread_kill(t[i], SIGUSR1);
  for (int k = 0; k < 1000 && atomic_load(&g_done) < n; k++) {
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    /* A thread between its release check and its call: wake it again. */
    for (int i = 0; i < n; i++)
      if (i % 5 == 0 || i % 5 == 1) pthread_kill(t[i], SIGUSR1);
  }
  if (atomic_load(&g_done) < n) {
    printf("FAIL: only %d of %d threads returned within 10 s\n",
           atomic_load(&g_done), n);
    return 1;
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  if (busy && c1 == c0) {
    printf("FAIL: the busy threads stopped counting\n");
    return 1;
  }
  if (spurious) {
    printf("FAIL: %d blocked calls returned while parked\n", spurious);
    return 1;
  }
  printf("OK %d threads, busy count %lu\n", n, c1);
  return 0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  pthread_t *t;
  struct sigaction sa;
  char buf[64];

  if (n < 1 || n > 10000) return 2;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1; /* no SA_RESTART: poll and pause return */
  sigaction(SIGUSR1, &sa, NULL);
  t = calloc((size_t)n, sizeof *t);
  pthread_mutex_lock(&g_mutex);
  for (int i = 0; i < n; i++) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 << 10);
    if (pthread_create(&t[i], &a, thread_main, (void *)(intptr_t)i) != 0)
      return 2;
    pthread_attr_destroy(&a);
  }
  pthread_t churn, clk;
  bool churning = argc > 2 && strcmp(argv[2], "churn") == 0 &&
                  pthread_create(&churn, NULL, churn_main, NULL) == 0;
  bool clocking = argc > 2 && strcmp(argv[2], "clock") == 0 &&
                  pthread_create(&clk, NULL, clock_main, NULL) == 0;
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  ssize_t got = snap_main_wait(buf, sizeof buf);
  /* "exec": become another program at once, every thread parked
   * (test_exec_during_capture). */
  if (got >= 4 && memcmp(buf, "exec", 4) == 0)
    execl("/bin/sleep", "sleep", "10", (char *)NULL);
  int rc = check_and_exit(t, n);
  if (churning) pthread_join(churn, NULL);
  if (clocking) pthread_join(clk, NULL);
  free(t);
  return rc;
}
