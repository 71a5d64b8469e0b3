/* Probe of tools/check_layering.py: see BUILD. */
#include "proto/stkr__reader.h"
int stkr_probe_file_srcs(void) { return 0; }
