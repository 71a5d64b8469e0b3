/* Probe of tools/check_layering.py: see BUILD. */
#include "proto/stkr__reader.h"
int stkr_probe_proto_internal(void) { return 0; }
