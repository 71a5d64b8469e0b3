/*
 * dynsym_fixture.c: a program whose only function names, once stripped
 * (`strip --strip-all`), are its .dynsym ones (tests/test-symbolize-dynsym.c
 * strips a copy and records it): linked with --export-dynamic, so dyn_leaf,
 * dyn_outer and main are exported, st_hidden (static) is not. Built as a
 * PIE and as a non-PIE (ET_EXEC, like Debian's /usr/bin/python3.11).
 *
 * Call chain: main -> dyn_outer -> st_hidden -> dyn_leaf -> the event.
 * Built with DYNSYM_EMBED, the program embeds the recorder (configured by
 * STACKREC_* variables) and records "dynsym.leaf" with STKR_EVENT, then
 * flushes (a barrier: in inproc mode its stack is resolved by then);
 * without it, it calls gethostname() for the hook library to record
 * (identifiers.gethostname, under `stackrec record`).
 * Exit status 0, or 1 when recording failed.
 */
#include <stdio.h>
#include <unistd.h>

#ifdef DYNSYM_EMBED
#include "recorder/stackrec.h"
#endif

__attribute__((noinline)) int dyn_leaf(int i) {
#ifdef DYNSYM_EMBED
  STKR_EVENT("dynsym.leaf", &i, sizeof i);
#else
  char name[256];
  if (gethostname(name, sizeof name) != 0) return -1;
#endif
  __asm__ volatile("" ::: "memory");
  return i + 1;
}

/* Defined after an exported function (the file is emitted in order:
 * -fno-toplevel-reorder), so that the nearest .dynsym symbol below it
 * ends before it: a nearest-preceding-symbol answer would misname it. */
static __attribute__((noinline)) int st_hidden(int i) {
  int r = dyn_leaf(i);
  __asm__ volatile("" ::: "memory");
  return r + 1;
}

__attribute__((noinline)) int dyn_outer(int i) {
  int r = st_hidden(i);
  __asm__ volatile("" ::: "memory");
  return r + 1;
}

int main(void) {
#ifdef DYNSYM_EMBED
  int err = stkr_init(NULL);
  if (err) {
    fprintf(stderr, "dynsym_fixture: stkr_init: %s\n", stkr_strerror(err));
    return 1;
  }
#endif
  int r = dyn_outer(1);
#ifdef DYNSYM_EMBED
  if ((err = stkr_flush()) != 0) {
    fprintf(stderr, "dynsym_fixture: stkr_flush: %s\n", stkr_strerror(err));
    return 1;
  }
  stkr_shutdown();
#endif
  return r == 4 ? 0 : 1;
}
