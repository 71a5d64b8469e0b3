/*
 * plist.h: a small bounded reader of XML property lists, the subset a
 * privacy manifest (PrivacyInfo.xcprivacy) uses: <plist> holding one
 * value; <dict> of <key>/value pairs, <array>, <string>, <true/>,
 * <false/>; <integer>, <real>, <date> and <data> are read as text. The
 * XML declaration, a DOCTYPE and comments are skipped; the five named
 * entities and numeric character references are decoded. Anything else
 * (attributes on values, mixed content, other elements) is an error naming
 * the line. Bounded: files over STKR_PLIST_MAX_BYTES and nesting over
 * STKR_PLIST_MAX_DEPTH are refused.
 *
 * Thread-safety: a tree is immutable once parsed.
 */
#ifndef STKR_PLIST_H
#define STKR_PLIST_H

#include <stddef.h>

#define STKR_PLIST_MAX_BYTES (16u << 20)
#define STKR_PLIST_MAX_DEPTH 64

typedef enum stkr_plist_type {
  STKR_PLIST_DICT = 0,
  STKR_PLIST_ARRAY,
  STKR_PLIST_STRING, /* also integer, real, date, data: their text */
  STKR_PLIST_BOOL
} stkr_plist_type;

typedef struct stkr_plist stkr_plist;
struct stkr_plist {
  stkr_plist_type type;
  unsigned line;      /* where its element starts */
  char *text;         /* STRING: decoded text; BOOL: "true" or "false" */
  size_t n;           /* DICT, ARRAY: items */
  stkr_plist *items;
  char **keys;        /* DICT: the key of each item */
};

/* Read a file. err gets "PATH:LINE: what" (malformed) or "PATH: strerror".
 * @return 0 (*out: the root value, stkr_plist_free()), -EINVAL, -ENOMEM,
 *         or the negative errno of a file that cannot be read. */
int stkr_plist_load(const char *path, stkr_plist **out, char *err,
                    size_t errlen);

/* The same from memory; name is used in messages. */
int stkr_plist_parse(const char *name, const char *text, size_t len,
                     stkr_plist **out, char *err, size_t errlen);

/* The value of key in a dict, or NULL. */
const stkr_plist *stkr_plist_get(const stkr_plist *dict, const char *key);

void stkr_plist_free(stkr_plist *v); /* NULL accepted */

#endif /* STKR_PLIST_H */
