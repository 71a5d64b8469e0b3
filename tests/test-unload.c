/* test-unload.c: a host unloads a plugin that embedded the recorder.
 *
 * Every thread that recorded carries a thread-exit callback (a pthread key
 * destructor) into the recorder's code. A host that dlclosed a plugin
 * holding that code, after the plugin had ended its recording properly,
 * had the next such thread to end jump into unmapped memory (QA, session
 * 29: SIGSEGV in __nptl_deallocate_tsd). The recorder now marks its image
 * RTLD_NODELETE at its first start (recorder/event.c, stkr__pin_image).
 * The host runs in a child process, so that a crash fails the test
 * instead of ending it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/testlib.h"

static int (*g_event)(void);
static pthread_barrier_t g_recorded, g_unloaded;

/* A thread of the host's own that records through the plugin, then ends
 * only after the plugin is gone: its exit runs the recorder's key
 * destructor. */
static void *host_thread(void *arg) {
  (void)arg;
  if (g_event() != 0) _exit(3);
  pthread_barrier_wait(&g_recorded);
  pthread_barrier_wait(&g_unloaded);
  return NULL;
}

/* The host: 0 when the thread ended and was joined; never returns on a
 * crash (the parent sees the signal). */
static int host(const char *plugin, const char *dir) {
  void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  pthread_t th;
  if (h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", plugin, dlerror());
    return 2;
  }
  int (*start)(const char *) = (int (*)(const char *))dlsym(h, "unload_plugin_start");
  int (*stop)(void) = (int (*)(void))dlsym(h, "unload_plugin_stop");
  g_event = (int (*)(void))dlsym(h, "unload_plugin_event");
  if (start == NULL || stop == NULL || g_event == NULL || start(dir) != 0)
    return 4;
  pthread_barrier_init(&g_recorded, NULL, 2);
  pthread_barrier_init(&g_unloaded, NULL, 2);
  if (pthread_create(&th, NULL, host_thread, NULL) != 0) return 5;
  pthread_barrier_wait(&g_recorded);
  if (stop() != 0) return 6;
  g_event = NULL;
  (void)dlclose(h);
  pthread_barrier_wait(&g_unloaded);
  pthread_join(th, NULL);
  return 0;
}

static void test_thread_ends_after_the_plugin_is_unloaded(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  char plugin[1024];
  int st;
  (void)state;

  snprintf(plugin, sizeof plugin, "%s/%s/tests/libunload_plugin.so",
           src ? src : ".", ws ? ws : ".");
  assert_int_equal(access(plugin, R_OK), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* not cmocka's: the parent sees the crash */
    signal(SIGBUS, SIG_DFL);
    _exit(host(plugin, tl_dir));
  }
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (WIFSIGNALED(st))
    fail_msg("the host died of signal %d", WTERMSIG(st));
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  /* The plugin's recording is whole: one segment written. */
  assert_true(tl_count_files(tl_dir, ".zst") >= 1);
}

TL_TEST_MAIN("unload", tl_make_dir, tl_rm_dir,
             test_thread_ends_after_the_plugin_is_unloaded)
