/* Darwin stand-in (tests/apple_shim/sdk/README). Opaque types sized as in
 * <sys/_pthread/_pthread_types.h> (LP64). */
#ifndef STKR_SHIM_PTHREAD_H
#define STKR_SHIM_PTHREAD_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>
typedef struct _opaque_pthread_t *pthread_t;
typedef unsigned long pthread_key_t;
typedef struct {
  long __sig;
  char __opaque[56];
} pthread_mutex_t;
typedef struct {
  long __sig;
  char __opaque[8];
} pthread_mutexattr_t;
typedef struct {
  long __sig;
  char __opaque[8];
} pthread_once_t;
typedef struct {
  long __sig;
  char __opaque[40];
} pthread_cond_t;
typedef struct {
  long __sig;
  char __opaque[56];
} pthread_attr_t;
#define PTHREAD_COND_INITIALIZER {0x3CB0B1BB, {0}}
#define PTHREAD_MUTEX_INITIALIZER {0x32AAABA7, {0}}
#define PTHREAD_ONCE_INIT {0x30B1BCBA, {0}}
pthread_t pthread_self(void);
int pthread_equal(pthread_t, pthread_t);
int pthread_key_create(pthread_key_t *key, void (*destructor)(void *));
int pthread_setspecific(pthread_key_t key, const void *value);
void *pthread_getspecific(pthread_key_t key);
int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a);
int pthread_mutex_lock(pthread_mutex_t *m);
int pthread_mutex_trylock(pthread_mutex_t *m);
int pthread_mutex_unlock(pthread_mutex_t *m);
int pthread_once(pthread_once_t *once, void (*init)(void));
int pthread_atfork(void (*prepare)(void), void (*parent)(void),
                   void (*child)(void));
int pthread_getname_np(pthread_t thread, char *name, size_t len);
int pthread_threadid_np(pthread_t thread, uint64_t *thread_id);
void *pthread_get_stackaddr_np(pthread_t thread);
size_t pthread_get_stacksize_np(pthread_t thread);
int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                   void *(*start)(void *), void *arg);
int pthread_join(pthread_t thread, void **value);
int pthread_detach(pthread_t thread);
/* recorder/thread.c: a thread's attach is not cancelled half-way. */
#define PTHREAD_CANCEL_ENABLE 0x01
#define PTHREAD_CANCEL_DISABLE 0x00
int pthread_setcancelstate(int state, int *old);
int pthread_cond_broadcast(pthread_cond_t *c);
int pthread_cond_timedwait_relative_np(pthread_cond_t *c, pthread_mutex_t *m,
                                       const struct timespec *reltime);
unsigned int pthread_mach_thread_np(pthread_t thread);
#endif
