/*
 * hooks_dl.c: dlopen and dlclose, watched (not recorded): each tells the
 * recorder that the process's images are changing (stkr_images_changed),
 * so that its worker lists a new image and builds its unwind table within
 * milliseconds, not at its next pass (STACKREC_FLUSH_MS, 200 ms by
 * default). Before this, a call made through a library soon after it was
 * loaded (Python's ctypes calling getenv through libffi) had a stack that
 * ended inside that library: its frames had no table yet.
 *
 * dlopen must stay a tail call. glibc's dlopen resolves a relative name
 * with the RUNPATH of the object that called it, and expands $ORIGIN
 * against it, taking the caller from its own return address: a C wrapper
 * calling on would make this library the caller. So dlopen is a few
 * instructions of assembly: save the two arguments, ask
 * stkr__pl_dlopen_target for libc's dlopen (it also gives the hint), restore
 * them and jump there, with the program's return address still on the
 * stack. The hint comes before the load; the worker's passes every 1 ms
 * until the image list changes (worker.c) find the image once it is listed.
 *
 * dlclose's caller does not matter: a plain wrapper, the rings drained
 * before the call (drain_before_unload), the hint after it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <unistd.h>

#include "preload/preload.h"

typedef void *(*stkr__pl_dlopen_fn)(const char *file, int mode);

/* libc's dlopen unavailable (resolution re-entered itself on this thread:
 * stkr__pl_resolve's own dlopen of libc): fail that one call as dlopen
 * fails, rather than jump to NULL. */
static void *dlopen_unavailable(const char *file, int mode) {
  (void)file;
  (void)mode;
  return NULL;
}

/* Called by the dlopen below, with the program's arguments saved: the
 * hint, then where to jump. Hidden: a direct call from the assembly. */
__attribute__((visibility("hidden"), used)) stkr__pl_dlopen_fn
stkr__pl_dlopen_target(void) {
  int saved = errno;
  void *p = stkr__pl_real(STKR__PL_R_dlopen);

  stkr_images_changed();
  errno = saved;
  return p != NULL ? (stkr__pl_dlopen_fn)p : dlopen_unavailable;
}

#if defined(__x86_64__)
/* Entry: rsp = 8 mod 16. Two pushes and 8 bytes keep the call aligned. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        ".cfi_startproc\n"
        "  pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  call stkr__pl_dlopen_target\n"
        "  addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  jmp *%rax\n"
        ".cfi_endproc\n"
        ".size dlopen, .-dlopen\n");
#elif defined(__aarch64__)
/* A frame record for the call; x0/x1 saved beside it; x16 (IP0, free for
 * exactly this) carries the target across the restore. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, %function\n"
        ".p2align 2\n"
        "dlopen:\n"
        ".cfi_startproc\n"
        "  stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 29, -32\n"
        ".cfi_offset 30, -24\n"
        "  mov x29, sp\n"
        "  stp x0, x1, [sp, #16]\n"
        "  bl stkr__pl_dlopen_target\n"
        "  mov x16, x0\n"
        "  ldp x0, x1, [sp, #16]\n"
        "  ldp x29, x30, [sp], #32\n"
        ".cfi_def_cfa_offset 0\n"
        ".cfi_restore 29\n"
        ".cfi_restore 30\n"
        "  br x16\n"
        ".cfi_endproc\n"
        ".size dlopen, .-dlopen\n");
#endif

/* At most this long before each dlclose (stkr_flush_timeout). */
#define STKR__PL_UNLOAD_FLUSH_MS 100

/* Before an unload: the rings drained and their stacks defined while the
 * library is still listed. The worker resolves a record's PCs against the
 * images of the moment it reads it, so a record of the library's frames
 * read after the unload lost its names, or took those of a library loaded
 * at the same address next (QA, session 29: two plugins loaded in turn at
 * one address, each closed right after its calls: all of the first one's
 * events named as the second's functions in some runs, unnamed in the
 * others; verify said intact). Not on the recorder's own calls (the
 * guard), nor in a vfork child, which shares the parent's recorder. */
static void drain_before_unload(void) {
  if (!stkr__pl_ready() || stkr__pl_guard || getpid() != stkr__pl_pid)
    return;
  stkr__pl_guard++;
  (void)stkr_flush_timeout(STKR__PL_UNLOAD_FLUSH_MS);
  stkr__pl_guard--;
}

int dlclose(void *handle) {
  int (*real)(void *) = (int (*)(void *))stkr__pl_real(STKR__PL_R_dlclose);
  int rc, saved;

  if (real == NULL)
    return 0; /* resolution re-entered (see above): the handle stays open */
  saved = errno;
  drain_before_unload();
  errno = saved;
  rc = real(handle);
  saved = errno;
  stkr_images_changed();
  errno = saved;
  return rc;
}
