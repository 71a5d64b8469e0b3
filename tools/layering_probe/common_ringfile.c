/* Probe of tools/check_layering.py: see BUILD. */
#include "common/stkr_ringfile.h"
int stkr_probe_common_ringfile(void) { return 0; }
