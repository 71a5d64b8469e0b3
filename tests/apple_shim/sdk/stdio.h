/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_STDIO_H
#define STKR_SHIM_STDIO_H
#include <stddef.h>
int snprintf(char *str, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
#endif
