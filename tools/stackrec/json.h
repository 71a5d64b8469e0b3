/*
 * json.h: the one small JSON reader of the tools, for the files a person
 * writes and hands to a command: the module map (attrib.h) and the
 * compliance policy (policy.h). Its tree (stkr_json) is also the tree
 * plist.h reads a property list into, so both share one set of accessors.
 *
 * A whole document is parsed into a tree. Every node keeps the line and
 * column where it starts, so that a command can name the position of a
 * value that is well-formed JSON but wrong for it ("rule 3: sites must be
 * a string"). Bounded: documents over STKR_JSON_MAX_BYTES and nesting over
 * STKR_JSON_MAX_DEPTH are refused; memory is linear in the input.
 * Strings are decoded (escapes, \uXXXX with surrogate pairs) to UTF-8; a
 * string holding \u0000 is refused (every consumer wants C strings).
 * Numbers are doubles (strtod).
 *
 * Thread-safety: none needed; a tree is immutable once parsed.
 */
#ifndef STKR_JSON_H
#define STKR_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define STKR_JSON_MAX_BYTES (16u << 20)
#define STKR_JSON_MAX_DEPTH 64

typedef enum stkr_json_type {
  STKR_JSON_NULL = 0,
  STKR_JSON_BOOL,
  STKR_JSON_NUMBER,
  STKR_JSON_STRING,
  STKR_JSON_ARRAY,
  STKR_JSON_OBJECT
} stkr_json_type;

typedef struct stkr_json stkr_json;
struct stkr_json {
  stkr_json_type type;
  unsigned line, col;  /* where the value starts, both from 1 */
  bool b;              /* BOOL */
  double num;          /* NUMBER */
  char *str;           /* STRING (NUL-terminated, UTF-8) */
  size_t n;            /* ARRAY, OBJECT: number of items */
  stkr_json *items;    /* ARRAY, OBJECT: the values */
  char **keys;         /* OBJECT: the key of each item */
};

/* Parse len bytes. On a syntax error, err (if not NULL) gets
 * "LINE:COL: what" (cut to errlen).
 * @return 0 (*out owned by the caller: stkr_json_free()), -EINVAL (syntax,
 *         size or depth; err says where), -ENOMEM. */
int stkr_json_parse(const char *text, size_t len, stkr_json **out, char *err,
                    size_t errlen);

/* Read and parse a file. err gets "PATH:LINE:COL: what" for a syntax
 * error, "PATH: strerror" when the file cannot be read.
 * @return 0, -EINVAL (malformed), -ENOMEM, or the negative errno of the
 *         failed open/read (-ENOENT, -EACCES, -EISDIR ...). */
int stkr_json_load(const char *path, stkr_json **out, char *err,
                   size_t errlen);

/* Read a whole regular file of at most max bytes (the readers' bound),
 * for a parser: *out gets the bytes plus a NUL (malloc'd, the caller's),
 * *len their count. err (if not NULL) gets "PATH: what".
 * @return 0, -EINVAL (not a regular file, or over max), -ENOMEM, or the
 *         negative errno of the failed open/read (-ENOENT, -EISDIR ...). */
int stkr_text_file_read(const char *path, size_t max, char **out,
                        size_t *len, char *err, size_t errlen);

/* A parser of a whole text (stkr_plist_parse, the JSON reader): name is
 * what its messages call the text ("PATH:LINE:COL: what" in err). */
typedef int (*stkr_text_parse_fn)(const char *name, const char *text,
                                  size_t len, stkr_json **out, char *err,
                                  size_t errlen);

/* Read path (stkr_text_file_read, at most max bytes) and parse it: the one
 * file-loading path of every reader (stkr_json_load, stkr_plist_load).
 * @return 0, or what the read or the parser returned (*out NULL). */
int stkr_text_file_parse(const char *path, size_t max,
                         stkr_text_parse_fn parse, stkr_json **out, char *err,
                         size_t errlen);

/* The value of key in an object (the first one), or NULL (also when obj is
 * not an object). */
const stkr_json *stkr_json_get(const stkr_json *obj, const char *key);

/* The JSON type's name ("string", "object" ...) for messages. */
const char *stkr_json_type_name(stkr_json_type t);

/* The text scanner under this JSON reader and the plist scanner
 * (plist.c): where it stands, and the first failure.
 * Thread-safety: one per parse. */
typedef struct stkr_scan {
  const char *p, *end;    /* the rest of the text */
  unsigned line;          /* p's line, from 1 */
  const char *line_start; /* the first byte of p's line (columns) */
  const char *name;       /* prefixed to messages ("FILE:"), or NULL */
  char *err;              /* the first failure's message; may be NULL */
  size_t errlen;
  int rc;                 /* the first failure: -EINVAL or -ENOMEM */
} stkr_scan;

/* A scanner at the start of text[0, len), messages named `name`. A UTF-8
 * byte order mark is passed over (editors on Windows and Xcode may write
 * one; RFC 8259 lets a reader ignore it): invisible in an editor, so line
 * 1's columns count from after it. */
static inline stkr_scan stkr_scan_start(const char *name, const char *text,
                                        size_t len, char *err,
                                        size_t errlen) {
  stkr_scan s = {text, text + len, 1, text, name, err, errlen, 0};
  if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
    s.p = s.line_start = text + 3;
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  return s;
}

/* Move n bytes on (not past the end), counting lines. */
void stkr_scan_advance(stkr_scan *s, size_t n);

/* The first failure (later ones keep it): s->rc = -EINVAL and err gets
 * "[NAME:]LINE:COL: <message>" at s->p. @return s->rc. */
int stkr_scan_fail(stkr_scan *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Out of memory (unless a failure came first): s->rc = -ENOMEM and err
 * says so. @return s->rc. */
int stkr_scan_nomem(stkr_scan *s);

/* For a value that is well-formed JSON but wrong for the caller: err gets
 * "FILE:LINE:COL: <message>" with at's position. @return -EINVAL. */
int stkr_json_error(char *err, size_t errlen, const char *file,
                    const stkr_json *at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* A string, or (if arrays) an array of strings, every one non-empty, as
 * a malloc'd array of copies in *out (*n of them; stkr_json_strings_free
 * frees them, also after a failure). what names the value in messages
 * ("\"sites\"").
 * @return 0, -EINVAL (err as stkr_json_error), -ENOMEM. */
int stkr_json_strings(const stkr_json *v, bool arrays, const char *what,
                      const char *file, char ***out, size_t *n, char *err,
                      size_t errlen);

/* Free what stkr_json_strings made: each of the n copies and the array
 * (v may be NULL). */
void stkr_json_strings_free(char **v, size_t n);

/* A document type read from JSON (a policy, a module map): how to turn a
 * parsed tree into the object. from_tree fills a calloc'd object of size
 * bytes (name: the file, for messages; err as stkr_json_error) and may
 * leave it half-built on failure: free_obj frees it whole. */
typedef struct stkr_json_doc_type {
  size_t size;
  int (*from_tree)(const char *name, const stkr_json *root, void *obj,
                   char *err, size_t errlen);
  void (*free_obj)(void *obj);
} stkr_json_doc_type;

/* Read one document of type t: parse text (len bytes, name names it in
 * messages) or, when text is NULL, load the file at name; then build the
 * object. out points to the caller's pointer to it (a stkr_policy **, a
 * stkr_modmap **): set to the object, or NULL on failure. err gets
 * "NAME:LINE:COL: what" (or "NAME: strerror", "NAME: out of memory").
 * @return 0 (the object the caller's: t->free_obj), -EINVAL (malformed),
 *         -ENOMEM, or the negative errno of a failed open/read. */
int stkr_json_read_doc(const stkr_json_doc_type *t, const char *name,
                       const char *text, size_t len, void *out, char *err,
                       size_t errlen);

/* For a parser building a tree (this JSON reader, the plist scanner):
 * append a zeroed item to the array or object v (*cap, *kcap: the
 * capacities of its items and keys), keyed with key when keyed (an
 * object's item: v then owns key). Counted at once, so that freeing v
 * frees it and whatever the caller puts into it.
 * @return the item, or NULL when out of memory (key still the caller's). */
stkr_json *stkr_json_append(stkr_json *v, size_t *cap, size_t *kcap,
                            bool keyed, char *key);

/* Free a tree. NULL is accepted. */
void stkr_json_free(stkr_json *v);

#endif /* STKR_JSON_H */
