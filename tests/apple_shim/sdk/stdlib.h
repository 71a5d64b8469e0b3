/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_STDLIB_H
#define STKR_SHIM_STDLIB_H
#include <stddef.h>
void arc4random_buf(void *buf, size_t nbytes);
#endif
