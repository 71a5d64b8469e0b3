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
 *
 * lib_keep_outer and lib_inner leave fp as main set it, so a walk that
 * falls back to the frame-pointer record in lib_inner reads main's record
 * and skips lib_keep_outer and main: a wrong stack that looks whole.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void sleep_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
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
