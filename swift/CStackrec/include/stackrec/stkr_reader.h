/* See stackrec.h here: `#include <stackrec/stkr_reader.h>` from a C target
 * that depends on CStackrec. The header is the repository's own. */
#include "../../../../proto/stkr_reader.h"
