/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_UNISTD_H
#define STKR_SHIM_UNISTD_H
#include <stddef.h>
#include <sys/types.h>
int close(int fd);
int unlink(const char *path);
pid_t getpid(void);
int ftruncate(int fd, off_t length);
#endif
