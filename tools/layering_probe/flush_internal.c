/* Probe of tools/check_layering.py: see BUILD. */
#include "flush/flush_internal.h"
int stkr_probe_flush_internal(void) { return 0; }
