/*
 * json.c: a small bounded JSON reader (json.h). Recursive descent with a
 * depth limit; positions are tracked as line and column (in bytes, from 1)
 * so errors point where an editor would.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "tools/stackrec/json.h"

typedef stkr_scan parser;
#define fail stkr_scan_fail
#define nomem stkr_scan_nomem

/* The byte at p, printable or as \xNN (never raw: a stray byte of UTF-8
 * would garble the message). */
static int unexpected(parser *ps) {
  unsigned char c = (unsigned char)*ps->p;
  return c > ' ' && c < 0x7f ? fail(ps, "unexpected character '%c'", c)
                             : fail(ps, "unexpected byte \\x%02x", c);
}

static unsigned col_of(const parser *ps, const char *at) {
  return (unsigned)(at - ps->line_start) + 1;
}

stkr_json *stkr_json_append(stkr_json *v, size_t *cap, size_t *kcap,
                            bool keyed, char *key) {
  if ((keyed && stkr_grow((void **)&v->keys, kcap, v->n + 1,
                          sizeof *v->keys)) ||
      stkr_grow((void **)&v->items, cap, v->n + 1, sizeof *v->items))
    return NULL;
  memset(&v->items[v->n], 0, sizeof *v->items);
  if (keyed)
    v->keys[v->n] = key;
  return &v->items[v->n++];
}

/* The one failure message: "[NAME:]LINE:COL: <message>", if *rc is 0. */
static int vfail_at(int *rc, char *err, size_t errlen, const char *name,
                    unsigned line, unsigned col, const char *fmt, va_list ap) {
  int k = 0;

  if (*rc != 0)
    return *rc;
  *rc = -EINVAL;
  if (err == NULL || errlen == 0)
    return *rc;
  if (name != NULL)
    k = snprintf(err, errlen, "%s:", name);
  if (k >= 0 && (size_t)k < errlen)
    k += snprintf(err + k, errlen - (size_t)k, "%u:%u: ", line, col);
  if (k >= 0 && (size_t)k < errlen)
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
  return *rc;
}

int stkr_scan_fail(stkr_scan *s, const char *fmt, ...) {
  va_list ap;
  int rc;

  va_start(ap, fmt);
  rc = vfail_at(&s->rc, s->err, s->errlen, s->name, s->line, col_of(s, s->p),
                fmt, ap);
  va_end(ap);
  return rc;
}

int stkr_scan_nomem(stkr_scan *s) {
  if (s->rc != 0)
    return s->rc;
  s->rc = -ENOMEM;
  if (s->err != NULL && s->errlen > 0)
    snprintf(s->err, s->errlen, "%s%sout of memory", s->name ? s->name : "",
             s->name ? ": " : "");
  return s->rc;
}

void stkr_scan_advance(stkr_scan *s, size_t n) {
  for (; n > 0 && s->p < s->end; n--, s->p++)
    if (*s->p == '\n') {
      s->line++;
      s->line_start = s->p + 1;
    }
}

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
                             *ps->p == '\r' || *ps->p == '\n'))
    stkr_scan_advance(ps, 1);
}

static int hex4(parser *ps, unsigned *out) {
  unsigned v = 0;
  int i;

  if (ps->end - ps->p < 4)
    return fail(ps, "truncated \\u escape");
  for (i = 0; i < 4; i++) {
    char c = ps->p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return fail(ps, "bad hex digit in \\u escape");
  }
  ps->p += 4;
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* At '"': the decoded string (malloc'd) into *out. Decoded text is never
 * longer than its source, so one allocation of the source length does. */
static int parse_string(parser *ps, char **out) {
  const char *q = ps->p + 1;
  char *buf, *o;

  while (q < ps->end && *q != '"') /* find the end, skipping escapes */
    q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
  if (q >= ps->end)
    return fail(ps, "unterminated string");
  if ((buf = malloc((size_t)(q - ps->p))) == NULL)
    return nomem(ps);
  o = buf;
  ps->p++;
  while (*ps->p != '"') {
    unsigned char c = (unsigned char)*ps->p;
    unsigned cp, lo;

    if (c < 0x20) {
      free(buf);
      return fail(ps, "control character in string (escape it)");
    }
    if (c != '\\') {
      *o++ = (char)c;
      ps->p++;
      continue;
    }
    ps->p++;
    switch (*ps->p++) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u':
      if (hex4(ps, &cp) != 0)
        goto bad;
      if (cp >= 0xD800 && cp < 0xDC00) {
        if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
          fail(ps, "unpaired surrogate in \\u escape");
          goto bad;
        }
        ps->p += 2;
        if (hex4(ps, &lo) != 0)
          goto bad;
        if (lo < 0xDC00 || lo > 0xDFFF) {
          fail(ps, "unpaired surrogate in \\u escape");
          goto bad;
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        fail(ps, "unpaired surrogate in \\u escape");
        goto bad;
      } else if (cp == 0) {
        fail(ps, "\\u0000 in string");
        goto bad;
      }
      o += put_utf8(o, cp);
      break;
    default:
      ps->p--;
      fail(ps, "bad escape '\\%c'", *ps->p);
      goto bad;
    }
  }
  ps->p++;
  *o = '\0';
  *out = buf;
  return 0;
bad:
  free(buf);
  return ps->rc;
}

static int parse_value(parser *ps, stkr_json *v, int depth);

/* At '[' or '{': the items (and keys) until the closing bracket. */
static int parse_container(parser *ps, stkr_json *v, int depth) {
  const bool obj = *ps->p == '{';
  const char close = obj ? '}' : ']';
  size_t cap = 0, kcap = 0;

  if (depth >= STKR_JSON_MAX_DEPTH)
    return fail(ps, "nested deeper than %d", STKR_JSON_MAX_DEPTH);
  v->type = obj ? STKR_JSON_OBJECT : STKR_JSON_ARRAY;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) {
    ps->p++;
    return 0;
  }
  for (;;) {
    char *key = NULL;

    skip_ws(ps);
    if (obj && (ps->p >= ps->end || *ps->p != '"'))
      return fail(ps, "expected a string key");
    if (obj && parse_string(ps, &key) != 0)
      return ps->rc;
    /* Counted before the value is parsed, so a failure frees the key and
     * whatever the value made. */
    if (stkr_json_append(v, &cap, &kcap, obj, key) == NULL) {
      free(key);
      return nomem(ps);
    }
    if (obj) {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':')
        return fail(ps, "expected ':' after key \"%s\"", key);
      ps->p++;
    }
    if (parse_value(ps, &v->items[v->n - 1], depth + 1) != 0)
      return ps->rc;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) {
      ps->p++;
      return 0;
    }
    return fail(ps, "expected ',' or '%c'", close);
  }
}

static int parse_literal(parser *ps, const char *word) {
  size_t n = strlen(word);

  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
    return unexpected(ps);
  ps->p += n;
  return 0;
}

static int parse_number(parser *ps, stkr_json *v) {
  char buf[64], *endp;
  const char *q = ps->p;
  size_t n;

  if (q < ps->end && *q == '-')
    q++;
  if (q >= ps->end || *q < '0' || *q > '9')
    return unexpected(ps);
  while (q < ps->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' ||
                         *q == 'E' || *q == '+' || *q == '-'))
    q++;
  n = (size_t)(q - ps->p);
  if (n >= sizeof buf)
    return fail(ps, "number too long");
  memcpy(buf, ps->p, n);
  buf[n] = '\0';
  v->num = strtod(buf, &endp);
  if (*endp != '\0' || (buf[0] == '0' && n > 1 && buf[1] >= '0' &&
                        buf[1] <= '9') ||
      (buf[0] == '-' && buf[1] == '0' && n > 2 && buf[2] >= '0' &&
       buf[2] <= '9'))
    return fail(ps, "malformed number '%s'", buf);
  v->type = STKR_JSON_NUMBER;
  ps->p = q;
  return 0;
}

static int parse_value(parser *ps, stkr_json *v, int depth) {
  skip_ws(ps);
  v->line = ps->line;
  v->col = col_of(ps, ps->p);
  if (ps->p >= ps->end)
    return fail(ps, "unexpected end of input");
  switch (*ps->p) {
  case '{':
  case '[':
    return parse_container(ps, v, depth);
  case '"':
    v->type = STKR_JSON_STRING;
    return parse_string(ps, &v->str);
  case 't':
    v->type = STKR_JSON_BOOL;
    v->b = true;
    return parse_literal(ps, "true");
  case 'f':
    v->type = STKR_JSON_BOOL;
    return parse_literal(ps, "false");
  case 'n':
    return parse_literal(ps, "null");
  default:
    return parse_number(ps, v);
  }
}

static void free_inner(stkr_json *v) {
  size_t i;

  free(v->str);
  for (i = 0; i < v->n; i++) {
    free_inner(&v->items[i]);
    if (v->keys != NULL)
      free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

void stkr_json_free(stkr_json *v) {
  if (v == NULL)
    return;
  free_inner(v);
  free(v);
}

int stkr_json_parse(const char *text, size_t len, stkr_json **out, char *err,
                    size_t errlen) {
  parser ps = stkr_scan_start(NULL, text, len, err, errlen);
  stkr_json *v;

  *out = NULL;
  if (len > STKR_JSON_MAX_BYTES)
    return fail(&ps, "document over %u bytes", STKR_JSON_MAX_BYTES);
  if ((v = calloc(1, sizeof *v)) == NULL)
    return nomem(&ps);
  if (parse_value(&ps, v, 0) == 0) {
    skip_ws(&ps);
    if (ps.p < ps.end)
      fail(&ps, "text after the document");
  }
  if (ps.rc != 0) {
    stkr_json_free(v);
    return ps.rc;
  }
  *out = v;
  return 0;
}

int stkr_text_file_read(const char *path, size_t max, char **out,
                        size_t *len, char *err, size_t errlen) {
  struct stat st;
  char *buf = NULL;
  size_t n = 0;
  ssize_t k;
  int fd, rc;

  *out = NULL;
  *len = 0;
  /* Only a regular file is opened: a FIFO would wait for a writer, a
   * device could be anything. */
  if ((fd = stkr_open_regular(path, 0)) == -EINVAL) {
    if (err != NULL)
      snprintf(err, errlen, "%s: not a regular file", path);
    /* Cannot be opened as one: exit 3 as for a missing file, not 2, which
     * says its text is malformed (QA, session 31: a directory). */
    return -ENXIO;
  }
  if (fd < 0 || fstat(fd, &st) != 0) {
    rc = fd < 0 ? fd : -errno;
    if (fd >= 0) close(fd);
    goto io_error;
  }
  if ((uint64_t)st.st_size > max) {
    close(fd);
    if (err != NULL)
      snprintf(err, errlen, "%s: over %zu bytes", path, max);
    return -EINVAL;
  }
  if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
    close(fd);
    if (err != NULL)
      snprintf(err, errlen, "%s: out of memory", path);
    return -ENOMEM;
  }
  /* The file may change size under us: read at most what was stat'ed. */
  while (n < (size_t)st.st_size &&
         (k = read(fd, buf + n, (size_t)st.st_size - n)) != 0) {
    if (k < 0) {
      if (errno == EINTR)
        continue;
      rc = -errno;
      free(buf);
      close(fd);
      goto io_error;
    }
    n += (size_t)k;
  }
  close(fd);
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
io_error:
  if (err != NULL)
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
  return rc;
}

/* stkr_json_parse with err as "NAME:LINE:COL: what": the shape of
 * stkr_text_parse_fn, so that a file and a text given in memory read alike. */
static int parse_named(const char *name, const char *text, size_t len,
                       stkr_json **out, char *err, size_t errlen) {
  char msg[256];
  int rc = stkr_json_parse(text, len, out, msg, sizeof msg);

  if (rc != 0 && err != NULL)
    snprintf(err, errlen, "%s:%s", name, msg);
  return rc;
}

int stkr_text_file_parse(const char *path, size_t max,
                         stkr_text_parse_fn parse, stkr_json **out, char *err,
                         size_t errlen) {
  char *buf;
  size_t n;
  int rc;

  *out = NULL;
  if ((rc = stkr_text_file_read(path, max, &buf, &n, err, errlen)) != 0)
    return rc;
  rc = parse(path, buf, n, out, err, errlen);
  free(buf);
  return rc;
}

int stkr_json_load(const char *path, stkr_json **out, char *err,
                   size_t errlen) {
  return stkr_text_file_parse(path, STKR_JSON_MAX_BYTES, parse_named, out,
                              err, errlen);
}

int stkr_json_read_doc(const stkr_json_doc_type *t, const char *name,
                       const char *text, size_t len, void *out, char *err,
                       size_t errlen) {
  stkr_json *root;
  void *obj = NULL;
  int rc;

  /* out is a T **: written with memcpy, as the T * it is. */
  memcpy(out, &obj, sizeof obj);
  rc = text == NULL ? stkr_json_load(name, &root, err, errlen)
                   : parse_named(name, text, len, &root, err, errlen);
  if (rc != 0)
    return rc;
  if ((obj = calloc(1, t->size)) == NULL) {
    stkr_json_free(root);
    return -ENOMEM;
  }
  rc = t->from_tree(name, root, obj, err, errlen);
  stkr_json_free(root);
  if (rc != 0) {
    if (rc == -ENOMEM && err != NULL)
      snprintf(err, errlen, "%s: out of memory", name);
    t->free_obj(obj);
    return rc;
  }
  memcpy(out, &obj, sizeof obj);
  return 0;
}

const stkr_json *stkr_json_get(const stkr_json *obj, const char *key) {
  size_t i;

  if (obj == NULL || obj->type != STKR_JSON_OBJECT)
    return NULL;
  for (i = 0; i < obj->n; i++)
    if (strcmp(obj->keys[i], key) == 0)
      return &obj->items[i];
  return NULL;
}

const char *stkr_json_type_name(stkr_json_type t) {
  static const char *const names[] = {"null",   "boolean", "number",
                                      "string", "array",   "object"};
  return (unsigned)t < 6 ? names[t] : "?";
}

int stkr_json_error(char *err, size_t errlen, const char *file,
                    const stkr_json *at, const char *fmt, ...) {
  va_list ap;
  int rc = 0;

  va_start(ap, fmt);
  vfail_at(&rc, err, errlen, file, at->line, at->col, fmt, ap);
  va_end(ap);
  return rc;
}

int stkr_json_strings(const stkr_json *v, bool arrays, const char *what,
                      const char *file, char ***out, size_t *n, char *err,
                      size_t errlen) {
  const stkr_json *items = v;
  size_t i, count = 1;

  *out = NULL;
  *n = 0;
  if (v->type == STKR_JSON_ARRAY && arrays) {
    if (v->n == 0)
      return stkr_json_error(err, errlen, file, v, "empty array for %s",
                             what);
    items = v->items;
    count = v->n;
  } else if (v->type != STKR_JSON_STRING) {
    return stkr_json_error(err, errlen, file, v, "%s must be a string%s",
                           what, arrays ? " or an array of strings" : "");
  }
  for (i = 0; i < count; i++)
    if (items[i].type != STKR_JSON_STRING || items[i].str[0] == '\0')
      return stkr_json_error(err, errlen, file, &items[i],
                             "expected a non-empty string in %s", what);
  if ((*out = calloc(count, sizeof **out)) == NULL)
    return -ENOMEM;
  for (i = 0; i < count; i++) {
    if (((*out)[i] = strdup(items[i].str)) == NULL)
      return -ENOMEM; /* *n copies made: the caller frees them */
    *n = i + 1;
  }
  return 0;
}

void stkr_json_strings_free(char **v, size_t n) {
  size_t i;

  for (i = 0; i < n; i++)
    free(v[i]);
  free(v);
}
