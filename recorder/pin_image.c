/*
 * pin_image.c: keeps the image that holds the recorder mapped for the
 * rest of the process (stkr_internal.h), called once at the first start.
 * Split from event.c, which is the hot path.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stddef.h>

#include "recorder/stkr_internal.h"

/* Defined by the hook library only (preload/sites.c), which the loader
 * loads at start-up and never unloads: no pin there. Run as the loader's
 * own program (`ld.so PROGRAM`), the dlopen below made glibc allocate what
 * it never frees, and LeakSanitizer then failed the recorded program. A
 * weak reference within one image: the hook library exports no stkr_
 * symbol, so another copy of the recorder never binds to it. */
#if defined(__linux__) /* the hook library is Linux's (LD_PRELOAD) */
extern const char stkr__hook_library_image __attribute__((weak));
#endif

/* Keep the image that holds this code mapped for the rest of the process.
 * Every thread that recorded carries a thread-exit callback into it (the
 * pthread key destructors of thread.c and sample.c, which no key delete
 * could retract from threads that are running), so a host that dlcloses a
 * plugin embedding the recorder, through its own copy or through a
 * libstackrec.so only the plugin needed, unmapped that code under them:
 * the next such thread to end jumped into nothing (QA, session 29:
 * SIGSEGV in __nptl_deallocate_tsd). RTLD_NOLOAD | RTLD_NODELETE loads
 * nothing: it marks the image found, and the host's dlclose then leaves
 * it mapped (for the main executable it changes nothing). A failure
 * leaves the image as it was. */
void stkr__pin_image(void) {
  Dl_info di;

#if defined(__linux__)
  if (&stkr__hook_library_image != NULL)
    return;
#endif

  /* The name as the image was loaded (a relative one too: the loader
   * matches it among the loaded images first). */
  if (dladdr((void *)stkr__pin_image, &di) != 0 && di.dli_fname != NULL &&
      di.dli_fname[0] != '\0')
    (void)dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}
