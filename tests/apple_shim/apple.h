/*
 * apple.h: the few Apple declarations recorder/platform_apple.c and
 * flush/images_apple.c use, so that Linux can at least syntax-check them
 * (`tests/apple_syntax.sh`). Signatures copied by hand from Apple's
 * documentation (pthread.h, time.h, mach-o/dyld.h, mach-o/loader.h). This
 * proves the code parses and type-checks against these declarations; it
 * does NOT prove it runs on a device.
 */
#ifndef STKR_APPLE_SHIM_H
#define STKR_APPLE_SHIM_H
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CLOCK_UPTIME_RAW 8
uint64_t clock_gettime_nsec_np(clockid_t clock_id);
int pthread_threadid_np(pthread_t thread, uint64_t *thread_id);
void *pthread_get_stackaddr_np(pthread_t thread);
size_t pthread_get_stacksize_np(pthread_t thread);
#endif
