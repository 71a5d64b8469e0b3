/*
 * start_room.c: stkr_init on a thread with the stack it needs (preload.h,
 * stkr__pl_init_with_room): the calling thread's, or a helper's when the
 * caller is short of it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/preload.h"

/* The main thread's stack limit (RLIMIT_STACK) below which its start runs
 * on a helper too (preload.c refuses to record below 64 KiB). */
#define STKR__PL_MAIN_ROOM_LIMIT ((rlim_t)1 << 20)

/* stkr_init's work needs tens of KiB of stack (paths, the image list, the
 * worker's setup), more than a thread made with a small stack has left:
 * a first event on a PTHREAD_STACK_MIN (16 KiB) thread died of SIGSEGV in
 * the start. Below this much room the start runs on a helper thread of a
 * default stack, this one waiting for it (signals stay blocked there as
 * here: the helper inherits the mask). */
#define STKR__PL_START_ROOM ((uintptr_t)256 << 10)

/* The bytes of stack below this frame on this thread; UINTPTR_MAX when
 * unknown or the main thread's (then the start runs here, as before), 0
 * for the main thread under a stack limit below STKR__PL_MAIN_ROOM_LIMIT.
 * The main thread's stack grows on demand up to RLIMIT_STACK (8 MiB unless
 * set lower), and for it pthread_getattr_np parses /proc/self/maps, which
 * every process that records would pay at its start. */
static uintptr_t stack_room(void) {
  pthread_attr_t attr;
  void *lo = NULL;
  size_t size = 0;
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);

  if ((pid_t)syscall(SYS_gettid) == getpid()) {
    /* The main thread: a stack limit under 1 MiB (above the constructor's
     * least) leaves too little for a start deep in the program (`ulimit
     * -s 32`: cat died of SIGSEGV in its first open's start). */
    struct rlimit rl;
    return getrlimit(RLIMIT_STACK, &rl) == 0 &&
                   rl.rlim_cur != RLIM_INFINITY &&
                   rl.rlim_cur < STKR__PL_MAIN_ROOM_LIMIT
               ? 0
               : UINTPTR_MAX;
  }
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return UINTPTR_MAX;
  int err = pthread_attr_getstack(&attr, &lo, &size);
  pthread_attr_destroy(&attr);
  if (err != 0 || here < (uintptr_t)lo || here - (uintptr_t)lo > size)
    return UINTPTR_MAX;
  return here - (uintptr_t)lo;
}

typedef struct init_call {
  const stkr_config *cfg;
  int err;
} init_call;

static void *init_on_helper(void *arg) {
  init_call *c = arg;
  c->err = stkr_init(c->cfg);
  return NULL;
}

int stkr__pl_init_with_room(const stkr_config *cfg) {
  init_call call = {cfg, 0};
  pthread_t helper;
  pthread_attr_t attr;
  size_t size = 0;
  int err;

  if (stack_room() >= STKR__PL_START_ROOM) return stkr_init(cfg);
  /* Sized: with default attributes the helper would get RLIMIT_STACK's
   * size, as short as this thread's under `ulimit -s 64`. */
  if ((err = pthread_attr_init(&attr)) != 0) return -err;
  if (pthread_attr_getstacksize(&attr, &size) != 0 ||
      size < 4 * STKR__PL_START_ROOM)
    (void)pthread_attr_setstacksize(&attr, 4 * STKR__PL_START_ROOM);
  err = pthread_create(&helper, &attr, init_on_helper, &call);
  pthread_attr_destroy(&attr);
  if (err != 0) return -err;
  (void)pthread_join(helper, NULL);
  return call.err;
}
