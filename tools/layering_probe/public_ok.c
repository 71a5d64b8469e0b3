/* Probe of tools/check_layering.py: see BUILD. */
#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
int stkr_probe_public_ok(void) { return 0; }
