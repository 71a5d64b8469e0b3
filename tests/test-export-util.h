/*
 * test-export-util.h: what tests/test-export.c and test-export-pprof.c
 * share: the recording they make in their own process (known sites, call
 * chains and threads, symbolized in-process), and running programs (the
 * built //tools:stackrec, python3, go) with their output captured.
 *
 * The recording (rec_make): max_depth 3, so every stack is exactly
 * exp_hook <- exp_mid_* <- the thread's function, nothing of libc:
 *   thread "exp-alpha": 40 x exp.read  via exp_mid_a
 *                       20 x exp.write via exp_mid_b
 *   (500 ms pause)
 *   thread "exp-beta":  10 x exp.read  via exp_mid_a
 *                        5 x "exp;odd name" via exp_mid_c
 * Header-only: each test binary includes it once.
 */
#ifndef STKR_TEST_EXPORT_UTIL_H
#define STKR_TEST_EXPORT_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np; must come before any include */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "recorder/stackrec.h"
#include "tests/testlib.h"

static char g_tmp[1024];  /* the test's scratch directory */
static char g_tool[2048]; /* //tools:stackrec */
static char g_rec[1200];  /* the recording */
static char g_out[1 << 20], g_err[1 << 16];
static uint64_t g_tid_alpha, g_tid_beta;

static const tl_capture g_sh = {g_out, sizeof g_out, g_err, sizeof g_err,
                                g_tmp, false, 128};
/* Run a shell command; its stdout lands in g_out, stderr in g_err.
 * @return its exit status (128 if it was killed). */
#define sh(...) tl_sh(&g_sh, __VA_ARGS__)

/* The path of a file in g_tmp, in one of a few rotating static buffers. */
__attribute__((unused)) static const char *tmp_path(const char *name) {
  static char buf[4][1200];
  static int k;

  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmp, name);
  return buf[k];
}

/* Is `prog` on PATH (or at /usr/bin/prog)? Into path. */
__attribute__((unused)) static int find_program(const char *prog, char *path, size_t cap) {
  if (sh("command -v '%s'", prog) == 0 && g_out[0] == '/') {
    size_t n = strcspn(g_out, "\n");
    if (n < cap) {
      memcpy(path, g_out, n);
      path[n] = '\0';
      return 0;
    }
  }
  snprintf(path, cap, "/usr/bin/%s", prog);
  return access(path, X_OK);
}

/* ---- the recording ------------------------------------------------------- */

STKR_SITE_DEFINE(g_site_read, "exp.read");
STKR_SITE_DEFINE(g_site_write, "exp.write");
STKR_SITE_DEFINE(g_site_odd, "exp;odd name");

static __attribute__((noinline)) void exp_hook(stkr_site *s, int i) {
  char p[16];
  int n = snprintf(p, sizeof p, "p%d", i);
  while (stkr_event(s, p, (size_t)n) == -EAGAIN)
    usleep(100); /* ring full: let the worker drain */
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void exp_mid_a(stkr_site *s, int i) {
  exp_hook(s, i);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void exp_mid_b(stkr_site *s, int i) {
  exp_hook(s, i);
  __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void exp_mid_c(stkr_site *s, int i) {
  exp_hook(s, i);
  __asm__ volatile("" ::: "memory");
}

/* One recording thread: n_a events through exp_mid_a at exp.read, then n_b
 * through `mid_b` at `site_b`. A macro, not a function: the thread's main
 * must stay the frame above exp_mid_a (an inline function would show as an
 * inlined frame of its own once symbolized). */
#define EXP_THREAD_RUN(name, tid, n_a, site_b, mid_b, n_b)                   \
  do {                                                                       \
    int i_;                                                                  \
    pthread_setname_np(pthread_self(), (name));                             \
    *(tid) = (uint64_t)syscall(SYS_gettid);                                  \
    for (i_ = 0; i_ < (n_a); i_++)                                           \
      exp_mid_a(&g_site_read, i_);                                           \
    for (i_ = 0; i_ < (n_b); i_++)                                           \
      mid_b((site_b), i_);                                                   \
    __asm__ volatile("" ::: "memory");                                       \
  } while (0)

static void *exp_alpha_main(void *arg) {
  EXP_THREAD_RUN("exp-alpha", &g_tid_alpha, 40, &g_site_write, exp_mid_b, 20);
  return arg;
}

static void *exp_beta_main(void *arg) {
  EXP_THREAD_RUN("exp-beta", &g_tid_beta, 10, &g_site_odd, exp_mid_c, 5);
  return arg;
}

/* Record the recording above into dir, in this process: flush_ms its
 * flush interval (0: the default), pause_us a pause between its two
 * threads. @return 0 or -1 (with a message). */
__attribute__((unused)) static int rec_record(const char *dir, unsigned flush_ms,
                                               unsigned pause_us) {
  stkr_config cfg;
  pthread_t th;
  int err;

  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.max_depth = 3;
  cfg.flush_interval_ms = flush_ms;
  cfg.symbolize = STKR_SYMBOLIZE_INPROC;
  if ((err = stkr_init(&cfg)) != 0) {
    fprintf(stderr, "stkr_init: %s\n", stkr_strerror(err));
    return -1;
  }
  pthread_create(&th, NULL, exp_alpha_main, NULL);
  pthread_join(th, NULL);
  if (pause_us != 0)
    usleep(pause_us);
  pthread_create(&th, NULL, exp_beta_main, NULL);
  pthread_join(th, NULL);
  if ((err = stkr_shutdown()) != 0) {
    fprintf(stderr, "stkr_shutdown: %s\n", stkr_strerror(err));
    return -1;
  }
  return 0;
}

/* Make g_tmp, find the tool, record the recording above into g_rec.
 * @return 0 or -1 (with a message). */
__attribute__((unused)) static int rec_make(const char *tag) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");

  if (tl_mkdtemp(g_tmp, sizeof g_tmp, tag) != 0)
    return -1;
  snprintf(g_tool, sizeof g_tool, "%s/%s/tools/stackrec", src ? src : ".",
           ws ? ws : ".");
  if (access(g_tool, X_OK) != 0) {
    fprintf(stderr, "no stackrec binary at %s\n", g_tool);
    return -1;
  }
  snprintf(g_rec, sizeof g_rec, "%s/rec", g_tmp);
  /* The pause: --from/--to split the threads at 0.25 s. */
  return rec_record(g_rec, 20, 500 * 1000);
}

#endif
