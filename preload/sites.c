/*
 * The hook library's sites: the one table of preload.h (STKR__PL_SITES)
 * defined here, and every site registered at the constructor.
 */
#include "preload/preload.h"

/* The recorder looks for this (recorder/event.c, stkr__pin_image): the
 * hook library is never unloaded, so it needs no RTLD_NODELETE mark. */
const char stkr__hook_library_image = 1;

#define STKR__PL_SITE_DEF(name, str)                                           \
  stkr_site stkr__pl_site_##name = STKR_SITE_INIT(str);
STKR__PL_SITES(STKR__PL_SITE_DEF)
#undef STKR__PL_SITE_DEF

void stkr__pl_register_sites(void) {
#define STKR__PL_SITE_PTR(name, str) &stkr__pl_site_##name,
  stkr_site *const all[] = {STKR__PL_SITES(STKR__PL_SITE_PTR)};
#undef STKR__PL_SITE_PTR
  size_t i;

  for (i = 0; i < sizeof all / sizeof all[0]; i++)
    (void)stkr_site_register(all[i]);
  stkr__pl_register_file_sites();
}
