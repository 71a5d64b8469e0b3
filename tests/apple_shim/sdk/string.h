/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_STRING_H
#define STKR_SHIM_STRING_H
#include <stddef.h>
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memset(void *b, int c, size_t len);
int strcmp(const char *s1, const char *s2);
int memcmp(const void *a, const void *b, size_t n); /* recorder/clock.c */
size_t strlen(const char *s);
size_t strnlen(const char *s, size_t maxlen);
char *strncpy(char *restrict dst, const char *restrict src, size_t len);
char *strerror(int errnum);
#endif
