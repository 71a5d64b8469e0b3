/*
 * demo.c: a small multi-threaded "app" with privacy-sensitive hook sites,
 * recorded by stackrec. Run by the README's first quick-start command.
 *
 *   demo [DIR] [EVENTS_PER_THREAD]
 *
 * Four worker threads, each with its own call chain into the hooks, plus
 * the main thread. The recording lands in DIR (default: stackrec-demo).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/stackrec.h"

static int g_events = 20000;

/* Hooks in a real app fire between pieces of real work; a little work
 * between events keeps the demo's rate (some 100 k events/s per thread)
 * within what the worker drains with default 256 KiB rings. Run with
 * DEMO_BURST=1 to fire back to back and watch the ring-full drops. */
static int g_burst;
static void app_work(int i) {
  if (!g_burst && i % 32 == 31)
    usleep(200);
}

/* The hooks: what an app's interposed APIs would call. */
static __attribute__((noinline)) void hook_clipboard_read(void) {
  STKR_EVENT("privacy.clipboard.read", NULL, 0);
}
static __attribute__((noinline)) void hook_file_open(const char *path) {
  STKR_EVENT("files.open", path, strlen(path));
}
static __attribute__((noinline)) void hook_location(const char *accuracy) {
  STKR_EVENT("privacy.location.get", accuracy, strlen(accuracy));
}

/* Call chains of the "app". */
static __attribute__((noinline)) void paste_into_search_box(void) {
  hook_clipboard_read();
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void search_screen_appear(int i) {
  (void)i;
  paste_into_search_box();
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void load_user_config(int i) {
  hook_file_open(i % 2 ? "/home/user/.config/app/settings.json"
                       : "/home/user/.ssh/known_hosts");
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void weather_widget_refresh(int i) {
  (void)i;
  hook_location("accuracy=city");
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void analytics_sdk_tick(int i) {
  (void)i;
  hook_location("accuracy=best");
  __asm__ volatile("" ::: "memory");
}

/* The worker threads: each runs one call chain of the "app" in a loop
 * (the chains take the iteration; only the config loader uses it). */
typedef struct app_thread {
  const char *name;
  void (*chain)(int i);
} app_thread;

static const app_thread k_threads[] = {
    {"ui", search_screen_appear},
    {"io", load_user_config},
    {"widget", weather_widget_refresh},
    {"analytics-sdk", analytics_sdk_tick},
};
#define N_THREADS (sizeof k_threads / sizeof k_threads[0])

static void *app_thread_main(void *arg) {
  const app_thread *t = arg;
  int i;

  pthread_setname_np(pthread_self(), t->name);
  for (i = 0; i < g_events; i++) {
    t->chain(i);
    app_work(i);
  }
  return NULL;
}

int main(int argc, char **argv) {
  stkr_config cfg;
  stkr_stats st;
  pthread_t th[N_THREADS];
  size_t i;
  int err;

  memset(&cfg, 0, sizeof cfg);
  cfg.dir = argc > 1 ? argv[1] : "stackrec-demo";
  /* 4 MiB rings: the worker resolves each new stack to names once, and the
   * first stack into libc costs it tens of ms (libc's debug info, if
   * installed); bigger rings ride that out without drops. */
  cfg.ring_bytes = 4 << 20;
  if (argc > 2)
    g_events = atoi(argv[2]);
  g_burst = getenv("DEMO_BURST") != NULL;
  err = stkr_init(&cfg);
  if (err != 0) {
    fprintf(stderr, "demo: stkr_init(%s): %s\n", cfg.dir, stkr_strerror(err));
    return 1;
  }
  for (i = 0; i < N_THREADS; i++)
    pthread_create(&th[i], NULL, app_thread_main, (void *)&k_threads[i]);
  for (i = 0; i < N_THREADS; i++)
    pthread_join(th[i], NULL);
  hook_clipboard_read(); /* one from the main thread */
  err = stkr_flush();
  if (err != 0)
    fprintf(stderr, "demo: stkr_flush: %s\n", stkr_strerror(err));
  stkr_stats_get(&st);
  printf("demo: %llu events attempted, %llu written, %llu dropped "
         "(%llu ring full), %llu distinct stacks, %llu bytes on disk in %s\n",
         (unsigned long long)st.attempted, (unsigned long long)st.written,
         (unsigned long long)st.dropped,
         (unsigned long long)st.dropped_ring_full,
         (unsigned long long)st.stacks, (unsigned long long)st.bytes, cfg.dir);
  err = stkr_shutdown();
  if (err != 0) {
    fprintf(stderr, "demo: stkr_shutdown: %s\n", stkr_strerror(err));
    return 1;
  }
  return 0;
}
