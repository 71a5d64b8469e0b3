/* Probe of tools/check_layering.py: see BUILD. */
#include "proto/stkr_format.h"
int stkr_probe_proto_format(void) { return 0; }
