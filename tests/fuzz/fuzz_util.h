/*
 * fuzz_util.h: what the fuzz targets (tests/fuzz/fuzz_*.c) share: a check
 * that aborts with a message (libFuzzer and the replay test both treat an
 * abort as a failure), and input files in memory.
 *
 * Each target defines LLVMFuzzerTestOneInput(); it is linked either with
 * libFuzzer (tests/fuzz/build.sh, clang) or with replay_main.c, which feeds
 * it every saved corpus and crash file as a plain test (tests/BUILD, gcc).
 */
#ifndef STKR_FUZZ_UTIL_H
#define STKR_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* An invariant of the code under test: violated means a bug. */
#define FZ_CHECK(cond)                                                      \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                       \
      abort();                                                              \
    }                                                                       \
  } while (0)

/* Put data in an in-memory file and name it by its /proc/self/fd path,
 * which the reader opens like any file. @return the fd (close it), or -1. */
static inline int fz_memfile(const uint8_t *data, size_t size, char *path,
                             size_t path_len) {
  int fd = memfd_create("stackrec-fuzz", MFD_CLOEXEC);
  size_t off = 0;

  if (fd < 0)
    return -1;
  while (off < size) {
    ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)n;
  }
  snprintf(path, path_len, "/proc/self/fd/%d", fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
