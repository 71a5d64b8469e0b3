/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_STDLIB_H
#define STKR_SHIM_STDLIB_H
#include <stddef.h>
void arc4random_buf(void *buf, size_t nbytes);
/* tools/stackrec/snapshot_apple.c */
void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void free(void *ptr);
#endif
