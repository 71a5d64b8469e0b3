/* For C targets of a Swift package that depend on CStackrec: SwiftPM puts
 * swift/CStackrec/include on their include path, so that
 * `#include <stackrec/stackrec.h>` works as with the CMake install and
 * pkg-config (QA: the directory held only the module map). The header is
 * the repository's own. */
#include "../../../../recorder/stackrec.h"
