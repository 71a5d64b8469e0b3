/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_UNISTD_H
#define STKR_SHIM_UNISTD_H
#include <stddef.h>
#include <sys/types.h>
int close(int fd);
int unlink(const char *path);
pid_t getpid(void);
int ftruncate(int fd, off_t length);
int fsync(int fd);
ssize_t pread(int fd, void *buf, size_t n, off_t off); /* ringfile.c's cache */
ssize_t write(int fd, const void *buf, size_t n);
#define SEEK_CUR 1
off_t lseek(int fd, off_t offset, int whence); /* stkr_write_all_within */
#endif
