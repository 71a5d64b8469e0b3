/* Stand-in for the SDK's <stdio.h>: what tools/stackrec/snapshot_apple.c
 * uses (see README). */
#ifndef STKR_SHIM_STDIO_H
#define STKR_SHIM_STDIO_H
#include <stddef.h>
int snprintf(char *restrict str, size_t size, const char *restrict format,
             ...) __attribute__((format(printf, 3, 4)));
int rename(const char *from, const char *to); /* recorder/ringfile.c */
/* tools/stackrec/snapshot_signals.c: fflush(NULL) before dying of a
 * signal. FILE is opaque here. */
typedef struct __sFILE FILE;
int fflush(FILE *stream);
#endif
