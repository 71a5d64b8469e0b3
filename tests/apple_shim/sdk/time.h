/* Darwin stand-in (tests/apple_shim/sdk/README). clockid_t values as in
 * <time.h> (_CLOCK_REALTIME 0, _CLOCK_MONOTONIC 6, _CLOCK_UPTIME_RAW 8). */
#ifndef STKR_SHIM_TIME_H
#define STKR_SHIM_TIME_H
#include <stdint.h>
typedef long time_t;
struct timespec {
  time_t tv_sec;
  long tv_nsec;
};
typedef enum {
  CLOCK_REALTIME = 0,
  CLOCK_MONOTONIC = 6,
  CLOCK_MONOTONIC_RAW = 4,
  CLOCK_UPTIME_RAW = 8
} clockid_t;
int clock_gettime(clockid_t clock_id, struct timespec *tp);
uint64_t clock_gettime_nsec_np(clockid_t clock_id);
int nanosleep(const struct timespec *req, struct timespec *rem);
#endif
