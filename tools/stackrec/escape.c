/*
 * escape.c: printing recorded bytes (payloads, names) safely, as text or
 * as JSON string contents. See cli.h.
 */
#include <stdio.h>
#include <string.h>

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

static void stkr__put_u00(FILE *f, uint8_t c) {
  fputs("\\u00", f);
  putc(stkr__hex[c >> 4], f);
  putc(stkr__hex[c & 15], f);
}

/* JSON's two-character escapes (RFC 8259, section 7): the byte in from is
 * written as a backslash and the letter at the same index of to. */
static const char k_json_short_from[] = "\"\\\b\f\n\r\t";
static const char k_json_short_to[] = "\"\\bfnrt";

void stkr_cli_put_json(FILE *f, const uint8_t *p, size_t n) {
  const char *esc;
  size_t i = 0;

  while (i < n) {
    uint8_t c = p[i];
    size_t len;

    if (c >= 0x80) {
      len = stkr__utf8_len(p + i, n - i);
      if (len == 0) {
        stkr__put_u00(f, c); /* one byte of invalid UTF-8 */
        i++;
      } else {
        fwrite(p + i, 1, len, f);
        i += len;
      }
      continue;
    }
    if ((esc = memchr(k_json_short_from, c, sizeof k_json_short_from - 1))) {
      putc('\\', f);
      putc(k_json_short_to[esc - k_json_short_from], f);
    } else if (c < 0x20 || c == 0x7f) {
      stkr__put_u00(f, c);
    } else {
      putc(c, f);
    }
    i++;
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
