/*
 * dlfresh.c: built with frame pointers, it loads a library built without
 * them (omitfp_lib.c) and calls into it at once, before the recorder's
 * worker can have built the new image's unwind table
 * (tests/test-unwind-record.c):
 *
 *   dlfresh LIB         main -> lib_keep_outer -> lib_inner -> gethostname
 *   dlfresh LIB close   the same 50 ms after the load, then dlclose and
 *                       300 ms more: the worker's next pass lists the
 *                       images without LIB, in the batch that carries
 *                       the call's stack
 *   dlfresh LIB late    the chain once, 300 ms after the load (the worker's
 *                       watch of the loader over): for a library built
 *                       without unwind tables, which never gets one
 *   dlfresh LIB swap LIB2
 *                       LIB's chain 50 times, 300 ms after its load (the
 *                       worker's watch of the loader over), then at once
 *                       dlclose; LIB2 (the same code under other names:
 *                       other_keep_outer -> other_inner) loaded, at LIB's
 *                       address if the kernel reuses it, and called the
 *                       same way. Prints "swap: same address" or "swap:
 *                       another address".
 *
 * lib_keep_outer and lib_inner leave fp as main set it, so a walk that
 * falls back to the frame-pointer record in lib_inner reads main's record
 * and skips lib_keep_outer and main: a wrong stack that looks whole.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

typedef int (*chain_fn)(void);

/* Load lib, take sym, wait out the worker's watch, call it 50 times and
 * unload at once. @return where it was loaded, or NULL. */
static void *call_and_unload(const char *lib, const char *sym) {
  Dl_info info;
  void *h = dlopen(lib, RTLD_NOW), *base = NULL;
  chain_fn f = h ? (chain_fn)dlsym(h, sym) : NULL;
  if (f == NULL || dladdr((void *)f, &info) == 0) {
    fprintf(stderr, "dlfresh: %s: %s\n", lib, dlerror());
    return NULL;
  }
  base = info.dli_fbase;
  sleep_ms(300);
  for (int i = 0; i < 50; i++) (void)f();
  dlclose(h);
  return base;
}

static int swap(const char *lib, const char *lib2) {
  void *a = call_and_unload(lib, "lib_keep_outer");
  void *b = a ? call_and_unload(lib2, "other_keep_outer") : NULL;
  if (b == NULL) return 1;
  printf("swap: %s address\n", a == b ? "same" : "another");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[2], "swap") == 0) return swap(argv[1], argv[3]);
  if (argc == 3 && strcmp(argv[2], "late") == 0) {
    void *lh = dlopen(argv[1], RTLD_NOW);
    chain_fn f = lh ? (chain_fn)dlsym(lh, "lib_keep_outer") : NULL;
    if (f == NULL) return 2;
    sleep_ms(300);
    return f() == 1 ? 0 : 1;
  }
  int close_it = argc == 3 && strcmp(argv[2], "close") == 0;
  void *h = argc == 2 || close_it ? dlopen(argv[1], RTLD_NOW) : NULL;
  int (*outer)(void) = h ? (int (*)(void))dlsym(h, "lib_keep_outer") : NULL;
  if (outer == NULL) {
    fprintf(stderr, "usage: dlfresh LIB [close] (%s)\n", h ? dlerror() : "no library");
    return 2;
  }
  if (close_it) sleep_ms(50);
  int ok = outer() == 1;
  if (close_it) {
    dlclose(h);
    sleep_ms(300);
  }
  return ok ? 0 : 1;
}
