/* Probe of tools/check_layering.py: see BUILD. */
#include "preload/preload.h"
int stkr_probe_preload_hooks(void) { return 0; }
