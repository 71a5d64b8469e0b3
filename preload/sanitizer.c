/*
 * sanitizer.c: what the hook library tells a sanitizer runtime in the
 * programs it is preloaded into. Empty outside sanitizer builds.
 */
#if defined(__SANITIZE_THREAD__)
/* TSan builds only (the test suite's tsan phase): the sanitizer's hook for
 * built-in suppressions, exported by exports.map so that it takes the place
 * of libtsan's empty default in every recorded program.
 *
 * Why: in inproc mode the worker dlopens libdw, whose TLS is dynamic. A
 * thread that touches such TLS writes its own DTV; when it ends, glibc
 * caches its stack and DTV and hands both to a later thread, which frees
 * them at its end (_dl_deallocate_tls). Both steps are ordered by glibc's
 * stack-cache lock, which TSan does not see (ld.so and libc are not
 * instrumented), so it reported the free as racing with the first thread's
 * write (a recorded exit_busy run, 1 in ~40 under load). Only that frame
 * is named, so a race in our code is still reported. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) {
  return "race:_dl_deallocate_tls\n";
}
#endif
