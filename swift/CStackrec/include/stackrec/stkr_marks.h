/* See stackrec.h here: `#include <stackrec/stkr_marks.h>` from a C target
 * that depends on CStackrec (stkr_reader.h includes it too). The header
 * is the repository's own. */
#include "../../../../proto/stkr_marks.h"
