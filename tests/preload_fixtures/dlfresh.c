/*
 * dlfresh.c: built with frame pointers, it loads a library built without
 * them (omitfp_lib.c) and calls into it at once, before the recorder's
 * worker can have built the new image's unwind table
 * (tests/test-unwind-record.c):
 *
 *   dlfresh LIB    main -> lib_keep_outer -> lib_inner -> gethostname
 *
 * lib_keep_outer and lib_inner leave fp as main set it, so a walk that
 * falls back to the frame-pointer record in lib_inner reads main's record
 * and skips lib_keep_outer and main: a wrong stack that looks whole.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *h = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
  int (*outer)(void) = h ? (int (*)(void))dlsym(h, "lib_keep_outer") : NULL;
  if (outer == NULL) {
    fprintf(stderr, "usage: dlfresh LIB (%s)\n", h ? dlerror() : "no library");
    return 2;
  }
  return outer() == 1 ? 0 : 1;
}
