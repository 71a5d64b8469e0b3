/* Darwin stand-in (tests/apple_shim/sdk/README). The 64-bit Darwin types. */
#ifndef STKR_SHIM_SYS_TYPES_H
#define STKR_SHIM_SYS_TYPES_H
#include <stdint.h>
typedef int32_t dev_t;
typedef uint16_t mode_t;
typedef uint16_t nlink_t;
typedef uint64_t ino_t;
typedef uint32_t uid_t;
typedef uint32_t gid_t;
typedef int32_t pid_t;
typedef long long off_t;
typedef int64_t blkcnt_t;
typedef int32_t blksize_t;
typedef long ssize_t;
#endif
