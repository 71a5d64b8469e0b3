/*
 * stkr_elfkind.h: is a file a program into which this build's libraries
 * cannot be loaded (an ELF of the other class, byte order or machine: a
 * 32-bit program beside a 64-bit hook library)? LD_PRELOAD naming such a
 * library makes the loader print "ERROR: ld.so: object ... cannot be
 * preloaded (wrong ELF class ...): ignored." into the program's stderr
 * (QA, session 33), so `stackrec record` (for its command) and the exec
 * hooks (for what a process execs) leave the library out of such a
 * program's LD_PRELOAD and say it records nothing.
 *
 * libc only, header-only. Linux (ELF); elsewhere never foreign.
 * Thread-safety: none needed (reads the file only).
 */
#ifndef STKR_COMMON_ELFKIND_H
#define STKR_COMMON_ELFKIND_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <elf.h>
#include <fcntl.h>
#endif

typedef enum stkr_elf_kind {
  STKR_ELF_OURS = 0,      /* ours, or not ELF at all */
  STKR_ELF_OTHER_CLASS,   /* 32-bit beside 64-bit, or the reverse */
  STKR_ELF_OTHER_MACHINE  /* another byte order or e_machine */
} stkr_elf_kind;

/* The kind of the program in fd (>= 0) or else at path. An unreadable
 * file is STKR_ELF_OURS: the exec will say what is wrong. errno is kept. */
static inline stkr_elf_kind stkr_elf_kind_of(int fd, const char *path) {
#if defined(__linux__)
  unsigned char h[20]; /* e_ident, e_type, e_machine: one layout in both */
  const unsigned char our_class = sizeof(void *) == 8 ? ELFCLASS64
                                                       : ELFCLASS32;
  const uint16_t one = 1;
  const unsigned char our_data =
      *(const unsigned char *)&one == 1 ? ELFDATA2LSB : ELFDATA2MSB;
  int own = -1, saved = errno;
  ssize_t got;
  uint16_t machine;

  if (fd < 0 && (fd = own = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return STKR_ELF_OURS;
  got = pread(fd, h, sizeof h, 0);
  if (own >= 0) close(own);
  errno = saved;
  if (got != (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0)
    return STKR_ELF_OURS;
  if (h[EI_CLASS] != our_class)
    return STKR_ELF_OTHER_CLASS;
  if (h[EI_DATA] != our_data)
    return STKR_ELF_OTHER_MACHINE;
  memcpy(&machine, h + 18, sizeof machine);
#if defined(__x86_64__)
  return machine == EM_X86_64 ? STKR_ELF_OURS : STKR_ELF_OTHER_MACHINE;
#elif defined(__aarch64__)
  return machine == EM_AARCH64 ? STKR_ELF_OURS : STKR_ELF_OTHER_MACHINE;
#elif defined(__i386__)
  return machine == EM_386 ? STKR_ELF_OURS : STKR_ELF_OTHER_MACHINE;
#else
  (void)machine;
  return STKR_ELF_OURS;
#endif
#else
  (void)fd;
  (void)path;
  return STKR_ELF_OURS;
#endif
}

/* The kind of what an exec of the file in fd (>= 0) or at path runs: the
 * file itself, or for a script ("#!INTERP ...") its interpreter, the
 * program the loader starts (QA, session 34: a script of a 32-bit
 * interpreter got the loader's error). One level: an interpreter that is
 * a script itself is not followed. errno is kept. */
static inline stkr_elf_kind stkr_program_kind(int fd, const char *path) {
#if defined(__linux__)
  char line[256], *p, *end;
  int own = -1, saved = errno;
  ssize_t got;

  if (fd < 0 && (fd = own = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return STKR_ELF_OURS;
  got = pread(fd, line, sizeof line - 1, 0);
  errno = saved;
  if (got < 2 || line[0] != '#' || line[1] != '!') {
    stkr_elf_kind k = stkr_elf_kind_of(fd, path);
    if (own >= 0) close(own);
    return k;
  }
  if (own >= 0) close(own);
  line[got] = '\0';
  for (p = line + 2; *p == ' ' || *p == '\t'; p++) {
  }
  for (end = p; *end != '\0' && *end != ' ' && *end != '\t' && *end != '\n';
       end++) {
  }
  if (end == p || *end == '\0') /* none, or a line longer than we read */
    return STKR_ELF_OURS;
  *end = '\0';
  return stkr_elf_kind_of(-1, p);
#else
  (void)fd;
  (void)path;
  return STKR_ELF_OURS;
#endif
}

#endif /* STKR_COMMON_ELFKIND_H */
