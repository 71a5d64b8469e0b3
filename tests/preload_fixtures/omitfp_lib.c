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
