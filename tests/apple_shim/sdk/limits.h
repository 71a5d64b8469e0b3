/* Darwin stand-in (tests/apple_shim/sdk/README). <limits.h> (sys/syslimits.h). */
#ifndef STKR_SHIM_LIMITS_H
#define STKR_SHIM_LIMITS_H
#define PATH_MAX 1024
#endif
