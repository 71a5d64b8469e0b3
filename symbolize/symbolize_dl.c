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

#define ENTRY(name) .name = stkr__##name,

const stkr__sym_dl_api stkr__sym_dl_v1 = {
    .magic = STKR__SYM_DL_MAGIC,
    .size = sizeof(stkr__sym_dl_api),
    STKR__SYM_DL_FUNCS(ENTRY)
};
