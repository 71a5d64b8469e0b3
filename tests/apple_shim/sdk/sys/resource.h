/* Darwin stand-in (tests/apple_shim/sdk/README). getrlimit(2). */
#ifndef STKR_SHIM_SYS_RESOURCE_H
#define STKR_SHIM_SYS_RESOURCE_H
typedef unsigned long long rlim_t;
struct rlimit {
  rlim_t rlim_cur;
  rlim_t rlim_max;
};
#define RLIMIT_FSIZE 1
#define RLIMIT_NOFILE 8
#define RLIM_INFINITY (((rlim_t)1 << 63) - 1)
int getrlimit(int resource, struct rlimit *rlp);
#endif
