/*
 * omitfp_lib.c: a library built without frame pointers that omitfp loads
 * with dlopen after recording started (tests/test-unwind-record.c): its
 * image has no unwind table until the recorder's worker sees it.
 */
#include <unistd.h>

#include "omitfp.h"

static volatile int g_lib_sink;

OMITFP_LEAF(lib_inner, g_lib_sink)
OMITFP_LINK(lib_outer, lib_inner, 1, g_lib_sink)
/* A link that keeps its caller's frame pointer (dlfresh.c): from
 * lib_inner, fp still points at the record of the caller's frame. */
OMITFP_LINK(lib_keep_outer, lib_inner, 0, g_lib_sink)
