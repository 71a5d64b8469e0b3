/* Probe of tools/check_layering.py: see BUILD (the dependency itself is
 * what is refused: embedders link //:stackrec, not //flush). */
int stkr_probe_flush_direct(void) { return 0; }
