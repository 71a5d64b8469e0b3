/* Probe of tools/check_layering.py: see BUILD. */
#include "recorder/stkr_internal.h"
int stkr_probe_recorder_internal(void) { return 0; }
