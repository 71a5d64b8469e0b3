/*
 * escape.c: printing recorded bytes (payloads, names) safely, as text or
 * as JSON string contents, to a stream or into a stkr_cli_buf. See cli.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/cli.h"

static const char stkr__hex[] = "0123456789abcdef";

void stkr_cli_put_escaped(FILE *f, const uint8_t *p, size_t n) {
  size_t i;

  for (i = 0; i < n; i++) {
    uint8_t c = p[i];

    if (c == '"' || c == '\\') {
      putc('\\', f);
      putc(c, f);
    } else if (c >= 0x20 && c < 0x7f) {
      putc(c, f);
    } else {
      putc('\\', f);
      putc('x', f);
      putc(stkr__hex[c >> 4], f);
      putc(stkr__hex[c & 15], f);
    }
  }
}

void stkr_cli_put_line(FILE *f, const char *prefix, const char *msg,
                       const char *suffix) {
  fputs(prefix, f);
  stkr_cli_put_text(f, (const uint8_t *)msg, strlen(msg));
  fputs(suffix, f);
  putc('\n', f);
}

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 if the
 * bytes there are not one (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
static size_t stkr__utf8_len(const uint8_t *p, size_t n) {
  uint8_t c = p[0], lo = 0x80, hi = 0xbf;
  size_t len, i;

  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4;
  else
    return 0;
  if (len > n)
    return 0;
  if (c == 0xe0)
    lo = 0xa0; /* overlong */
  else if (c == 0xed)
    hi = 0x9f; /* UTF-16 surrogates */
  else if (c == 0xf0)
    lo = 0x90; /* overlong */
  else if (c == 0xf4)
    hi = 0x8f; /* above U+10FFFF */
  if (p[1] < lo || p[1] > hi)
    return 0;
  for (i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  return len;
}

void stkr_cli_put_text(FILE *f, const uint8_t *p, size_t n) {
  size_t i = 0, u;

  while (i < n) {
    uint8_t c = p[i];
    if (c == '\\') { /* so that the text "\xff" is not the byte 0xff */
      putc('\\', f);
      putc('\\', f);
      i++;
    } else if (c >= 0x20 && c < 0x7f) {
      putc(c, f);
      i++;
    } else if (c >= 0x80 && (u = stkr__utf8_len(p + i, n - i)) > 0) {
      fwrite(p + i, 1, u, f);
      i += u;
    } else {
      putc('\\', f);
      putc('x', f);
      putc(stkr__hex[c >> 4], f);
      putc(stkr__hex[c & 15], f);
      i++;
    }
  }
}

/* JSON's two-character escapes (RFC 8259, section 7): the letter after
 * the backslash, or 0 when c has none. */
static char stkr__json_short(uint8_t c) {
  switch (c) {
  case '"': return '"';
  case '\\': return '\\';
  case '\b': return 'b';
  case '\f': return 'f';
  case '\n': return 'n';
  case '\r': return 'r';
  case '\t': return 't';
  default: return 0;
  }
}

/* The one JSON string escaper (stkr_cli_put_json to a stream,
 * stkr_cli_buf_json_str to memory): the units of p (n bytes) that start
 * before limit (<= n), escaped into out, which must hold 6 * limit + 3
 * bytes (a unit never grows past 6 bytes per byte; a UTF-8 sequence
 * starting before limit may end 3 bytes after it). Runs of bytes that
 * need nothing are copied whole: names and paths are almost all such
 * bytes, and a test per byte was most of `atos --json`'s time.
 * @return the bytes written; *used the bytes of p consumed. */
static size_t stkr__json_escape(char *out, const uint8_t *p, size_t n,
                                size_t limit, size_t *used) {
  char *o = out;
  size_t i = 0;

  while (i < limit) {
    size_t j = i, len;
    uint8_t c;
    char e;

    while (j < limit && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' &&
           p[j] != '\\')
      j++;
    memcpy(o, p + i, j - i);
    o += j - i;
    if ((i = j) >= limit)
      break;
    c = p[i];
    if (c >= 0x80 && (len = stkr__utf8_len(p + i, n - i)) != 0) {
      memcpy(o, p + i, len); /* valid UTF-8 as it is */
      o += len;
      i += len;
      continue;
    }
    if ((e = stkr__json_short(c)) != 0) {
      *o++ = '\\';
      *o++ = e;
    } else { /* control characters, DEL, one byte of invalid UTF-8 */
      memcpy(o, "\\u00", 4);
      o[4] = stkr__hex[c >> 4];
      o[5] = stkr__hex[c & 15];
      o += 6;
    }
    i++;
  }
  *used = i;
  return (size_t)(o - out);
}

void stkr_cli_put_json(FILE *f, const uint8_t *p, size_t n) {
  char chunk[6 * 256 + 3];
  size_t used;

  while (n > 0) {
    size_t lim = n < 256 ? n : 256;

    fwrite(chunk, 1, stkr__json_escape(chunk, p, n, lim, &used), f);
    p += used;
    n -= used;
  }
}

void stkr_cli_put_json_bytes(FILE *f, const uint8_t *p, size_t n) {
  putc('"', f);
  stkr_cli_put_json(f, p, n);
  putc('"', f);
}

void stkr_cli_put_json_str(FILE *f, const char *s) {
  if (s == NULL)
    fputs("null", f);
  else
    stkr_cli_put_json_bytes(f, (const uint8_t *)s, strlen(s));
}

void stkr_cli_put_json_member(FILE *f, const char *before, const char *key,
                              const char *s) {
  fprintf(f, "%s\"%s\":", before, key);
  stkr_cli_put_json_str(f, s);
}

/* ---- stkr_cli_buf: a record built in memory, written at once ---------- */

/* Room for n more bytes; on failure the sticky error, and false. */
static bool stkr__buf_room(stkr_cli_buf *b, size_t n) {
  if (b->err)
    return false;
  if (b->cap - b->len >= n)
    return true;
  if (n > SIZE_MAX - b->len ||
      stkr_grow((void **)&b->p, &b->cap, b->len + n, 1) != 0) {
    b->err = -ENOMEM;
    return false;
  }
  return true;
}

void stkr_cli_buf_put(stkr_cli_buf *b, const char *s, size_t n) {
  /* Nothing to add: an empty buffer has no memory yet (memcpy to NULL,
   * even of 0 bytes, is undefined: UBSan, session 39). */
  if (n == 0 || !stkr__buf_room(b, n))
    return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

void stkr_cli_buf_puts(stkr_cli_buf *b, const char *s) {
  stkr_cli_buf_put(b, s, strlen(s));
}

void stkr_cli_buf_u64(stkr_cli_buf *b, uint64_t v) {
  char d[20];
  size_t k = sizeof d;

  do { /* digits from the end: as printf's %llu */
    d[--k] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  stkr_cli_buf_put(b, d + k, sizeof d - k);
}

void stkr_cli_buf_hex(stkr_cli_buf *b, uint64_t v) {
  char d[16];
  size_t k = sizeof d;

  do { /* as printf's %llx: lower case, no leading zeros */
    d[--k] = stkr__hex[v & 15];
    v >>= 4;
  } while (v);
  stkr_cli_buf_put(b, d + k, sizeof d - k);
}

void stkr_cli_buf_json_str(stkr_cli_buf *b, const char *s) {
  size_t n, used;

  if (s == NULL) {
    stkr_cli_buf_put(b, "null", 4);
    return;
  }
  n = strlen(s);
  if (n > (SIZE_MAX - 5) / 6 || !stkr__buf_room(b, 6 * n + 5)) {
    b->err = -ENOMEM;
    return;
  }
  b->p[b->len++] = '"';
  b->len += stkr__json_escape(b->p + b->len, (const uint8_t *)s, n, n, &used);
  b->p[b->len++] = '"';
}

int stkr_cli_buf_write(stkr_cli_buf *b, FILE *f) {
  int err = b->err;

  if (b->len)
    fwrite(b->p, 1, b->len, f); /* errors: the stream's, stkr_cli_flush */
  b->len = 0;
  b->err = 0;
  return err;
}

void stkr_cli_buf_free(stkr_cli_buf *b) {
  free(b->p);
  *b = (stkr_cli_buf){0};
}
