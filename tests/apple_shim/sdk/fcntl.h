/* Darwin stand-in (tests/apple_shim/sdk/README). <fcntl.h> values. */
#ifndef STKR_SHIM_FCNTL_H
#define STKR_SHIM_FCNTL_H
#define O_RDONLY 0x0000
#define O_WRONLY 0x0001
#define O_RDWR 0x0002
#define O_NONBLOCK 0x0004
#define O_APPEND 0x0008
#define O_NOFOLLOW 0x0100
#define O_CREAT 0x0200
#define O_TRUNC 0x0400
#define O_EXCL 0x0800
#define O_NOCTTY 0x00020000
#define O_DIRECTORY 0x00100000
#define O_CLOEXEC 0x01000000
#define F_GETFD 1
#define F_SETFD 2
#define FD_CLOEXEC 1
#define F_GETFL 3
#define F_SETFL 4
#define F_DUPFD_CLOEXEC 67
int open(const char *path, int flags, ...);
int fcntl(int fd, int cmd, ...);
#endif
