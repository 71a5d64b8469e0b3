/*
 * symbolize_dl.c: the one exported symbol of libstackrec_symbolize.so, the
 * table through which flush/sym_dl.c calls the symbolizer (see
 * symbolize_dl.h). Everything else in the module is local
 * (symbolize_dl.map), so its copy of the symbolizer and of the format code
 * never clashes with the preload library's or an app's.
 */
#include "symbolize/symbolize_dl.h"

__attribute__((visibility("default"))) extern const stkr__sym_dl_api
    stkr__sym_dl_v1;

const stkr__sym_dl_api stkr__sym_dl_v1 = {
    .magic = STKR__SYM_DL_MAGIC,
    .size = sizeof(stkr__sym_dl_api),
    .symbe_create = stkr__symbe_create,
    .symc_create = stkr__symc_create,
    .symc_free = stkr__symc_free,
    .symc_set_images = stkr__symc_set_images,
    .symc_stack = stkr__symc_stack,
    .symc_emit = stkr__symc_emit,
    .symdefs_reset = stkr__symdefs_reset,
    .symdefs_free = stkr__symdefs_free,
};
