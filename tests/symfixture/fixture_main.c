/* fixture_main.c: the symbolization fixture program (tests/test-symbolize.c
 * runs it). Configured by the environment (STACKREC_DIR, STACKREC_SYMBOLIZE,
 * ...). It records each call chain once, flushes and prints how many PCs
 * the symbolizer has resolved ("resolved N"); then records the same chains
 * 1000 times more, flushes and prints the count again (repeats must cost
 * nothing);
 * with SYMFIXTURE_PLUGIN set, records one event through a dlopen()ed
 * library ("sym.plugin"); then prints the source lines of every call
 * ("line K N") and exits.
 * Exit status 0, or 1 when recording failed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/stackrec.h"
#include "symbolize/symbolize.h"
#include "tests/symfixture/fixture.h"

/* Both chains from one call site, so every round has the same PCs. */
static __attribute__((noinline)) void chains(int i) {
  AT(L_MAIN_C, run_c(i));
  AT(L_MAIN_CC, run_cc(i));
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void plugin_cb(int i) {
  AT(L_PLUGIN_CB, STKR_EVENT("sym.plugin", &i, sizeof i));
  __asm__ volatile("" ::: "memory");
}

/* SYMFIXTURE_PLUGIN=path: dlopen it, record one event through it, flush
 * while it is loaded, dlclose it and flush again (the image list changes
 * twice). @return 0, or 1 on failure. */
static int plugin_round(const char *path, bool late) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  void (*entry)(void (*)(int), int, volatile int *);
  if (!h) {
    fprintf(stderr, "symfixture: dlopen: %s\n", dlerror());
    return 1;
  }
  *(void **)&entry = dlsym(h, "plugin_entry");
  if (!entry) {
    fprintf(stderr, "symfixture: dlsym: %s\n", dlerror());
    return 1;
  }
  entry(plugin_cb, 7, &g_line[L_PLUGIN]);
  if (late) return 0; /* first seen as the session ends; stays loaded */
  if (stkr_flush() != 0) return 1;
  dlclose(h);
  return stkr_flush() != 0;
}

/* SYMFIXTURE_LATE=main: one event of a new stack in this program, right
 * before stkr_shutdown_for_exit (run with a long flush interval: no pass
 * between);
 * SYMFIXTURE_LATE=PATH: the plugin's, its image never resolved before. */
static __attribute__((noinline)) void late_call(void) {
  STKR_EVENT("sym.late", "late", 4);
  __asm__ volatile("" ::: "memory");
}

/* Print the resolver's count after a flush barrier. */
static int report(void) {
  int err = stkr_flush();
  if (err) {
    fprintf(stderr, "symfixture: stkr_flush: %s\n", stkr_strerror(err));
    return 1;
  }
  printf("resolved %llu\n", (unsigned long long)stkr__sym_resolved_total());
  return 0;
}

/* Volatile, so the compiler cannot peel the first iteration off the loop
 * (which would give it call sites of its own). */
static volatile int g_first = 0, g_rounds = 1001;

int main(void) {
  int err = stkr_init(NULL);
  if (err) {
    fprintf(stderr, "symfixture: stkr_init: %s\n", stkr_strerror(err));
    return 1;
  }
  for (int i = 0; i < g_rounds; i++) {
    AT(L_MAIN, chains(i));
    if (i == g_first && report()) return 1;
  }
  if (report()) return 1;
  if (getenv("SYMFIXTURE_PLUGIN") &&
      plugin_round(getenv("SYMFIXTURE_PLUGIN"), false))
    return 1;
  const char *late = getenv("SYMFIXTURE_LATE");
  if (late != NULL && strcmp(late, "main") == 0)
    late_call();
  else if (late != NULL && plugin_round(late, true))
    return 1;
  if (late != NULL)
    stkr_shutdown_for_exit(); /* as at exit: the end's budget applies */
  else
    stkr_shutdown();
  for (int k = 0; k < L_COUNT; k++) printf("line %d %d\n", k, g_line[k]);
  return 0;
}
