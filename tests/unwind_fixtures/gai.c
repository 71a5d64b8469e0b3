/*
 * gai.c: see gai.h. How the leaf gets inside getaddrinfo: this file
 * defines malloc. An executable's definition interposes libc's for every
 * caller, libc's own internals included (libc calls malloc through its GOT
 * precisely so that a program may replace it), so getaddrinfo's internal
 * allocations come here. Every call forwards to the next definition
 * (libc's, or a sanitizer's interceptor: dlsym(RTLD_NEXT)), so the rest of
 * the test program allocates as before; only while armed, on the arming
 * thread, does it call the leaf first.
 */
#define _GNU_SOURCE
#include "tests/unwind_fixtures/gai.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

#define KEEP() __asm__ volatile("" ::: "memory")

static void *(*g_next_malloc)(size_t);

/* Armed state, per thread: only the thread inside uwg_getaddrinfo sees it. */
static __thread unsigned t_left;   /* leaves still to call */
static __thread unsigned t_fired;  /* leaves called */
static __thread int t_in_leaf;     /* the leaf's own mallocs do not recurse */
static __thread uwc_leaf t_leaf;
static __thread void *t_arg;

/* The leaf's frame: a real function between malloc and the leaf, so the
 * walk crosses malloc's own frame too (kept: no tail call). */
__attribute__((noinline)) static void fire(void) {
  t_in_leaf = 1;
  t_fired++;
  t_leaf(t_arg);
  t_in_leaf = 0;
  KEEP();
}

void *malloc(size_t n) {
  static __thread int resolving;
  void *p;
  if (g_next_malloc == NULL) {
    /* dlsym does not allocate when it succeeds; a recursive call while it
     * runs (it never happens with glibc 2.36) fails instead of looping. */
    if (resolving) {
      errno = ENOMEM;
      return NULL;
    }
    resolving = 1;
    g_next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
    if (g_next_malloc == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (t_left > 0 && !t_in_leaf) {
    t_left--;
    fire();
  }
  p = g_next_malloc(n);
  KEEP();
  return p;
}

unsigned uwg_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                         unsigned max_leaves, uwc_leaf leaf, void *arg, int *gai_rc) {
  struct addrinfo *res = NULL;
  unsigned fired;
  t_leaf = leaf;
  t_arg = arg;
  t_fired = 0;
  t_left = max_leaves;
  *gai_rc = getaddrinfo(node, service, hints, &res);
  t_left = 0;
  fired = t_fired;
  if (*gai_rc == 0) freeaddrinfo(res);
  KEEP();
  return fired;
}
