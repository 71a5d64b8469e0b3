/*
 * symbolize_dl.h: the symbolizer as a module loaded on demand
 * (libstackrec_symbolize.so), for the preload library.
 *
 * Why: the symbolizer links libdw, libelf and through them libstdc++,
 * liblzma, libbz2 and libz. Loading those costs every process that loads
 * the hook library several milliseconds at exec, though only in-process
 * symbolization (STACKREC_SYMBOLIZE=inproc) uses them; `stackrec record`
 * records offline. So the preload library links //flush:flush_dl, whose
 * flush/sym_dl.c defines the flush worker's few symbolizer entry points
 * (the names of symbolize.h) as forwarders into this table, and dlopens the
 * module the first time the worker creates a backend. Embedders keep
 * linking the symbolizer itself (//flush).
 *
 * The module exports one symbol, STKR__SYM_DL_SYMBOL, a const table; the
 * loader checks `size` and `magic` (a module from another build is refused,
 * never called).
 */
#ifndef STKR_SYMBOLIZE_DL_H
#define STKR_SYMBOLIZE_DL_H

#include <stdint.h>

#include "symbolize/symbolize.h"

/* File name of the module, looked up next to the library that loads it. */
#define STKR__SYM_DL_FILE "libstackrec_symbolize.so"
#define STKR__SYM_DL_SYMBOL "stkr__sym_dl_v1"
/* Bump with any change of this table or of the types it passes. */
#define STKR__SYM_DL_MAGIC 0x53594d3145ull /* "SYM1E" */

/* The module's functions, in one list: the table's fields below take
 * their types from the declarations in symbolize.h (so the two cannot
 * drift apart), and symbolize_dl.c fills the table from the same list. */
#define STKR__SYM_DL_FUNCS(X)                                                \
  X(symbe_create) X(symc_create) X(symc_free) X(symc_set_images)             \
  X(symc_stack) X(symc_ready) X(symc_emit) X(symdefs_reset) X(symdefs_free)

#define STKR__SYM_DL_FIELD(name) __typeof__(stkr__##name) *name;

typedef struct stkr__sym_dl_api {
  uint64_t magic; /* STKR__SYM_DL_MAGIC */
  uint32_t size;  /* sizeof(stkr__sym_dl_api) of the module's build */
  STKR__SYM_DL_FUNCS(STKR__SYM_DL_FIELD)
} stkr__sym_dl_api;

#endif /* STKR_SYMBOLIZE_DL_H */
