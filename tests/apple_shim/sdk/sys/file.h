/* Darwin stand-in (tests/apple_shim/sdk/README). flock(2). */
#ifndef STKR_SHIM_SYS_FILE_H
#define STKR_SHIM_SYS_FILE_H
#define LOCK_SH 0x01
#define LOCK_EX 0x02
#define LOCK_NB 0x04
#define LOCK_UN 0x08
int flock(int fd, int operation);
#endif
