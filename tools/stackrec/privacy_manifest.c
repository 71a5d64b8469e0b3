/* placeholder, written next */
#include "tools/stackrec/cli.h"
int stkr_cli_privacy_manifest(int argc, char **argv) { (void)argc; (void)argv; return 2; }
