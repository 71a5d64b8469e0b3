/* Darwin stand-in (tests/apple_shim/sdk/README). BSD errno values. */
#ifndef STKR_SHIM_ERRNO_H
#define STKR_SHIM_ERRNO_H
extern int *__error(void);
#define errno (*__error())
#define EPERM 1
#define ENOENT 2
#define ESRCH 3
#define ENXIO 6
#define E2BIG 7
#define EINTR 4
#define EIO 5
#define EBADF 9
#define EDEADLK 11
#define ENOMEM 12
#define EBUSY 16
#define EINVAL 22
#define EMFILE 24
#define EFBIG 27
#define ENOSPC 28
#define EAGAIN 35
#define EALREADY 37
#define ENOTCONN 57
#define ETIMEDOUT 60
#define ENAMETOOLONG 63
#define ENOSYS 78
#endif
