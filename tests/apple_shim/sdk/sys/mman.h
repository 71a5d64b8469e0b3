/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_SYS_MMAN_H
#define STKR_SHIM_SYS_MMAN_H
#include <stddef.h>
#include <sys/types.h>
#define PROT_NONE 0x00
#define PROT_READ 0x01
#define PROT_WRITE 0x02
#define MAP_SHARED 0x0001
#define MAP_PRIVATE 0x0002
#define MAP_FIXED 0x0010
#define MAP_ANON 0x1000
#define MAP_ANONYMOUS MAP_ANON
#define MAP_FAILED ((void *)-1)
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset);
int munmap(void *addr, size_t len);
#endif
