/*
 * attrib.h: attribution of a stack to the module responsible for it: which
 * library or SDK made the call (`report --by module`, `compliance`,
 * `privacy-manifest`, `diff`).
 *
 * The responsible frame is the first one from the site outward (innermost
 * first) whose image is not the system's. System images: on Linux those
 * under /lib, /lib64, /usr/lib, /usr/lib64, the dynamic loader (ld-linux*,
 * ld-musl*), libc, and the recorder's own hook library
 * (libstackrec_preload.so); on Apple those under /usr/lib or /System.
 * A frame without an image (unknown PC) is skipped too.
 *
 * By default the module is that frame's image base name
 * ("libacme_sdk.so"). A module map (a JSON file, below) names SDKs instead:
 * the responsible frame belongs to the first entry one of whose image
 * globs matches its image (the full path or the base name, fnmatch(3)) or
 * one of whose symbol prefixes begins its function name (an Objective-C
 * method "-[PSKDevice ident]" by its class name); that is how an
 * SDK linked statically into the app gets its own name. A frame no entry
 * claims keeps its image base name.
 *
 * A stack made only of system frames is attributed to its innermost
 * frame's image base name (the system library itself was called from
 * nowhere the app owns: an interpreter, a loader); one with no image at all
 * to "?".
 *
 * Module map:
 *   {"modules": [
 *     {"name": "AcmeAnalytics", "images": ["libacme*.so", "*Acme.framework*"],
 *      "symbols": ["acme_", "ACM"]},
 *     {"name": "PaySDK", "symbols": ["pay_sdk_"]}
 *   ]}
 * Every entry needs a non-empty "name" and at least one of "images",
 * "symbols" (arrays of non-empty strings); other keys are errors (a typo
 * would otherwise silently attribute nothing).
 *
 * Thread-safety: a loaded map is read-only; share it freely.
 */
#ifndef STKR_ATTRIB_H
#define STKR_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/stkr_reader.h"

typedef struct stkr_modmap stkr_modmap;

/* Is the image at this path the system's (see above)? */
bool stkr_attrib_system_image(const char *path);

/* The base name of a path (the part after the last '/'). */
const char *stkr_attrib_base_name(const char *path);

/* Load a module map. err (if not NULL) gets a message naming the file and
 * the position: "map.json:3:17: ..." for malformed JSON or a wrong value.
 * @return 0 (*out: stkr_modmap_free()), -EINVAL (malformed), -ENOMEM, or
 *         the negative errno of a file that cannot be read. */
int stkr_modmap_load(const char *path, stkr_modmap **out, char *err,
                     size_t errlen);

/* Parse a module map from memory; name is used in messages only. */
int stkr_modmap_parse(const char *name, const char *text, size_t len,
                      stkr_modmap **out, char *err, size_t errlen);

/* Free a map. NULL is accepted. */
void stkr_modmap_free(stkr_modmap *m);

/* The module of a stack no frame of which is in a known image. */
#define STKR_ATTRIB_NO_MODULE "?"

/* The module of a stack (frames innermost first; see above). map may be
 * NULL (image base names). *unnamed (if not NULL) is set when the frame
 * that decided has no function name (an unsymbolized stack) and the map
 * has symbol prefixes that come before the entry that claimed it, or no
 * entry did: symbolized, the stack might belong to another module (QA,
 * session 33: an SDK linked into the app, recorded offline, was "app").
 * @return a string inside the frames' image strings or inside the map
 * (valid as long as they are), or STKR_ATTRIB_NO_MODULE. */
const char *stkr_attrib_module(const stkr_modmap *map, const stkr_frame *f,
                               size_t n, bool *unnamed);

#endif /* STKR_ATTRIB_H */
