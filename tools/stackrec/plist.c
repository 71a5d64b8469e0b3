/*
 * plist.c: the XML property-list subset of privacy manifests (plist.h).
 * A hand-written scanner: tags, text and the few markup declarations a
 * plist holds, on json.h's scanner (stkr_scan). Errors name the line and
 * column where the scanner stood.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/plist.h"

typedef stkr_scan scan;
#define fail stkr_scan_fail
#define nomem stkr_scan_nomem
#define advance stkr_scan_advance

static bool starts(const scan *s, const char *lit) {
  size_t n = strlen(lit);
  return (size_t)(s->end - s->p) >= n && memcmp(s->p, lit, n) == 0;
}

/* Skip to just after `until`; false if it never comes. */
static bool skip_past(scan *s, const char *until) {
  while (s->p < s->end) {
    if (starts(s, until)) {
      advance(s, strlen(until));
      return true;
    }
    advance(s, 1);
  }
  return false;
}

/* Whitespace, comments, the XML declaration and a DOCTYPE. */
static int skip_misc(scan *s) {
  for (;;) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
                             *s->p == '\r' || *s->p == '\n'))
      advance(s, 1);
    if (starts(s, "<!--")) {
      if (!skip_past(s, "-->"))
        return fail(s, "unterminated comment");
    } else if (starts(s, "<?")) {
      if (!skip_past(s, "?>"))
        return fail(s, "unterminated <?...?>");
    } else if (starts(s, "<!DOCTYPE")) {
      if (!skip_past(s, ">"))
        return fail(s, "unterminated <!DOCTYPE");
    } else {
      return 0;
    }
  }
}

/* A tag at '<': its name into buf; *close for </x>, *empty for <x/>. */
static int read_tag(scan *s, char *buf, size_t cap, bool *close, bool *empty) {
  size_t n = 0;

  if (s->p >= s->end || *s->p != '<')
    return fail(s, "expected an element");
  advance(s, 1);
  *close = s->p < s->end && *s->p == '/';
  if (*close)
    advance(s, 1);
  while (s->p < s->end && ((*s->p >= 'a' && *s->p <= 'z') ||
                           (*s->p >= 'A' && *s->p <= 'Z'))) {
    if (n + 1 >= cap)
      return fail(s, "element name too long");
    buf[n++] = *s->p;
    advance(s, 1);
  }
  buf[n] = '\0';
  if (n == 0)
    return fail(s, "expected an element name");
  /* <plist version="1.0">: attributes only there (and ignored). */
  if (strcmp(buf, "plist") == 0 && !*close)
    while (s->p < s->end && *s->p != '>' && *s->p != '/' && *s->p != '<')
      advance(s, 1);
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n'))
    advance(s, 1);
  *empty = !*close && starts(s, "/>");
  if (*empty)
    advance(s, 1);
  if (s->p >= s->end || *s->p != '>')
    return fail(s, "malformed <%s%s> tag", *close ? "/" : "", buf);
  advance(s, 1);
  return 0;
}

/* Text up to the next '<', entities decoded, into a malloc'd string. */
static int read_text(scan *s, char **out) {
  const char *q = s->p;
  char *o, *buf;

  while (q < s->end && *q != '<') {
    /* XML allows no control character but tab, newline and return (QA: a
     * NUL inside <string> was read, where plistlib refuses the file). */
    if ((unsigned char)*q < 0x20 && *q != '\t' && *q != '\n' && *q != '\r') {
      advance(s, (size_t)(q - s->p));
      return fail(s, "a control character (0x%02x), not allowed in XML",
                  (unsigned char)*q);
    }
    q++;
  }
  if ((buf = malloc((size_t)(q - s->p) + 1)) == NULL)
    return nomem(s);
  o = buf;
  while (s->p < q) {
    if (*s->p != '&') {
      *o++ = *s->p;
      advance(s, 1);
      continue;
    }
    {
      static const struct { const char *e; char c; } ents[] = {
          {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'},
          {"&apos;", '\''}};
      size_t i;
      for (i = 0; i < 5 && !starts(s, ents[i].e); i++)
        ;
      if (i < 5) {
        *o++ = ents[i].c;
        advance(s, strlen(ents[i].e));
        continue;
      }
      if (starts(s, "&#")) {
        /* A character reference: at most the bytes it spells, which fit
         * (its own text is longer than its UTF-8). */
        unsigned long cp;
        char *endp;
        bool hex = s->p + 2 < q && s->p[2] == 'x';
        cp = strtoul(s->p + (hex ? 3 : 2), &endp, hex ? 16 : 10);
        if (endp >= q || *endp != ';' || cp == 0 || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp < 0xE000) || cp == 0xFFFE || cp == 0xFFFF ||
            (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r')) {
          free(buf);
          return fail(s, "bad character reference");
        }
        if (cp < 0x80) {
          *o++ = (char)cp;
        } else if (cp < 0x800) {
          *o++ = (char)(0xC0 | cp >> 6);
          *o++ = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          *o++ = (char)(0xE0 | cp >> 12);
          *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
          *o++ = (char)(0x80 | (cp & 0x3F));
        } else {
          *o++ = (char)(0xF0 | cp >> 18);
          *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
          *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
          *o++ = (char)(0x80 | (cp & 0x3F));
        }
        advance(s, (size_t)(endp + 1 - s->p));
        continue;
      }
      free(buf);
      return fail(s, "unknown entity");
    }
  }
  *o = '\0';
  *out = buf;
  return 0;
}

/* Whitespace and comments between the items of a container. */
static int skip_between(scan *s) {
  for (;;) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
                             *s->p == '\r' || *s->p == '\n'))
      advance(s, 1);
    if (!starts(s, "<!--"))
      return 0;
    if (!skip_past(s, "-->"))
      return fail(s, "unterminated comment");
  }
}

static int parse_value(scan *s, stkr_json *v, int depth);

static int cmp_key(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The same key twice in dict v: which one counts differs between readers
 * (plistlib the last, this reader the first: QA), so neither is taken.
 * Sorted, not compared pairwise: a hostile dict may hold many keys. */
static int check_keys(scan *s, const stkr_json *v) {
  char **k;
  int rc = 0;

  if (v->n < 2)
    return 0;
  if ((k = malloc(v->n * sizeof *k)) == NULL)
    return nomem(s);
  memcpy(k, v->keys, v->n * sizeof *k);
  qsort(k, v->n, sizeof *k, cmp_key);
  for (size_t i = 1; i < v->n && rc == 0; i++)
    if (strcmp(k[i - 1], k[i]) == 0)
      rc = fail(s, "<key>%s</key> twice in the <dict> that ends here",
                k[i]);
  free(k);
  return rc;
}

/* <dict>...</dict> or <array>...</array>, after the opening tag. */
static int parse_items(scan *s, stkr_json *v, int depth) {
  const bool dict = v->type == STKR_JSON_OBJECT;
  size_t cap = 0, kcap = 0;

  if (depth >= STKR_PLIST_MAX_DEPTH)
    return fail(s, "nested deeper than %d", STKR_PLIST_MAX_DEPTH);
  for (;;) {
    char tag[32], *key = NULL;
    bool close, empty;

    if (skip_between(s) != 0)
      return s->rc;
    if (starts(s, "</")) {
      if (read_tag(s, tag, sizeof tag, &close, &empty) != 0)
        return s->rc;
      if (strcmp(tag, dict ? "dict" : "array") != 0)
        return fail(s, "</%s> closes <%s>", tag, dict ? "dict" : "array");
      return dict ? check_keys(s, v) : 0;
    }
    if (s->p >= s->end)
      return fail(s, "unterminated <%s>", dict ? "dict" : "array");
    if (dict) {
      if (read_tag(s, tag, sizeof tag, &close, &empty) != 0)
        return s->rc;
      if (strcmp(tag, "key") != 0 || close || empty)
        return fail(s, "expected <key> in <dict>, found <%s%s>",
                    close ? "/" : "", tag);
      if (read_text(s, &key) != 0)
        return s->rc;
      if (read_tag(s, tag, sizeof tag, &close, &empty) != 0 ||
          strcmp(tag, "key") != 0 || !close) {
        free(key);
        return fail(s, "expected </key>");
      }
      if (skip_between(s) != 0) {
        free(key);
        return s->rc;
      }
    }
    if (stkr_json_append(v, &cap, &kcap, dict, key) == NULL) {
      free(key);
      return nomem(s);
    }
    if (starts(s, "</"))
      return fail(s, "<key>%s</key> has no value", key ? key : "");
    if (parse_value(s, &v->items[v->n - 1], depth + 1) != 0)
      return s->rc;
  }
}

static int parse_value(scan *s, stkr_json *v, int depth) {
  char tag[32], end[32];
  bool close, empty;

  v->line = s->line;
  v->col = (unsigned)(s->p - s->line_start) + 1;
  if (read_tag(s, tag, sizeof tag, &close, &empty) != 0)
    return s->rc;
  if (close)
    return fail(s, "unexpected </%s>", tag);
  if (strcmp(tag, "dict") == 0 || strcmp(tag, "array") == 0) {
    v->type = tag[0] == 'd' ? STKR_JSON_OBJECT : STKR_JSON_ARRAY;
    return empty ? 0 : parse_items(s, v, depth);
  }
  if (strcmp(tag, "true") == 0 || strcmp(tag, "false") == 0) {
    if (!empty)
      return fail(s, "<%s> must be empty: <%s/>", tag, tag);
    v->type = STKR_JSON_BOOL;
    v->b = tag[0] == 't';
    return 0;
  }
  if (strcmp(tag, "string") != 0 && strcmp(tag, "integer") != 0 &&
      strcmp(tag, "real") != 0 && strcmp(tag, "date") != 0 &&
      strcmp(tag, "data") != 0)
    return fail(s, "unknown element <%s>", tag);
  v->type = STKR_JSON_STRING;
  if (empty) {
    v->str = strdup("");
    return v->str ? 0 : nomem(s);
  }
  if (read_text(s, &v->str) != 0)
    return s->rc;
  if (read_tag(s, end, sizeof end, &close, &empty) != 0)
    return s->rc;
  if (!close || strcmp(end, tag) != 0)
    return fail(s, "<%s> closed by <%s%s>", tag, close ? "/" : "", end);
  return 0;
}

int stkr_plist_parse(const char *name, const char *text, size_t len,
                     stkr_json **out, char *err, size_t errlen) {
  scan s = stkr_scan_start(name, text, len, err, errlen);
  stkr_json *v;
  char tag[32];
  bool close, empty;

  *out = NULL;
  if (len > STKR_PLIST_MAX_BYTES)
    return fail(&s, "over %u bytes", STKR_PLIST_MAX_BYTES);
  if ((v = calloc(1, sizeof *v)) == NULL)
    return nomem(&s);
  if (skip_misc(&s) == 0 && read_tag(&s, tag, sizeof tag, &close, &empty) == 0) {
    if (strcmp(tag, "plist") != 0 || close || empty)
      fail(&s, "expected <plist>, found <%s%s>", close ? "/" : "", tag);
    else if (skip_between(&s) == 0 && parse_value(&s, v, 0) == 0 &&
             skip_between(&s) == 0 &&
             (read_tag(&s, tag, sizeof tag, &close, &empty) != 0 || !close ||
              strcmp(tag, "plist") != 0))
      fail(&s, "expected </plist> after the one value");
    else if (s.rc == 0 && skip_misc(&s) == 0 && s.p < s.end)
      fail(&s, "text after </plist>");
  }
  if (s.rc != 0) {
    stkr_json_free(v);
    return s.rc;
  }
  *out = v;
  return 0;
}

int stkr_plist_load(const char *path, stkr_json **out, char *err,
                    size_t errlen) {
  return stkr_text_file_parse(path, STKR_PLIST_MAX_BYTES, stkr_plist_parse,
                              out, err, errlen);
}
