/*
 * plist.h: a small bounded reader of XML property lists, the subset a
 * privacy manifest (PrivacyInfo.xcprivacy) uses: <plist> holding one
 * value; <dict> of <key>/value pairs, <array>, <string>, <true/>,
 * <false/>; <integer>, <real>, <date> and <data> are read as text. The
 * XML declaration, a DOCTYPE and comments are skipped; the five named
 * entities and numeric character references are decoded. Anything else
 * (attributes on values, mixed content, other elements) is an error naming
 * the line and column. Bounded: files over STKR_PLIST_MAX_BYTES and nesting over
 * STKR_PLIST_MAX_DEPTH are refused.
 *
 * Thread-safety: a tree is immutable once parsed.
 */
#ifndef STKR_PLIST_H
#define STKR_PLIST_H

#include <stddef.h>

#include "tools/stackrec/json.h"

#define STKR_PLIST_MAX_BYTES (16u << 20)
#define STKR_PLIST_MAX_DEPTH 64

/* The tree is json.h's (one tree type and one set of accessors for both
 * readers: stkr_json_get, stkr_json_free): <dict> is an OBJECT, <array>
 * an ARRAY, <true/> and <false/> a BOOL, <string> a STRING, and so are
 * <integer>, <real>, <date> and <data> (their text). Every node has the
 * line and column where its element starts. */

/* Read a file. err gets "PATH:LINE:COL: what" (malformed) or "PATH: what".
 * @return 0 (*out: the root value, stkr_json_free()), -EINVAL, -ENOMEM,
 *         or the negative errno of a file that cannot be read. */
int stkr_plist_load(const char *path, stkr_json **out, char *err,
                    size_t errlen);

/* The same from memory; name is used in messages. */
int stkr_plist_parse(const char *name, const char *text, size_t len,
                     stkr_json **out, char *err, size_t errlen);

#endif /* STKR_PLIST_H */
