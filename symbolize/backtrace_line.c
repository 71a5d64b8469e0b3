/*
 * backtrace_line.c: the function name in a line of Apple's backtrace
 * format (symbolize.h), which _NSCallStackArray's descriptions share with
 * backtrace_symbols() (Libc, gen/backtrace.c):
 *
 *   "<index> <image> 0x<address> <symbol> + <offset>"
 *
 * the image padded to 35 columns. Where dladdr() found no symbol, Libc puts
 * something else in the symbol's place, with the offset counted from the
 * image's start: the image's own name (a stripped app: every frame of it
 * would be called "MyApp"), the image's UUID (a name the shared cache
 * redacted), "<redacted>" (older releases) or an address. And a stripped
 * image that still exports its header's symbol gets that:
 * "_mh_execute_header + 123456". None of these is a function's name: such
 * frames stay image+offset, which `stackrec symbolize` with the dSYM
 * resolves again. Portable (no Apple header), so that it is tested on
 * Linux against the lines Libc writes.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "symbolize/symbolize.h"

/* Is s[0..len) a UUID as uuid_unparse writes it (8-4-4-4-12 hex)? */
static bool is_uuid(const char *s, size_t len) {
  if (len != 36) return false;
  for (size_t i = 0; i < len; i++)
    if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-'
                                                : !isxdigit((unsigned char)s[i]))
      return false;
  return true;
}

bool stkr__backtrace_header_symbol(const char *s, size_t len) {
  static const char *const names[] = {"mh_execute_header", "mh_dylib_header",
                                      "mh_bundle_header", "mh_dylinker_header"};
  while (len > 0 && *s == '_') s++, len--;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (len == strlen(names[i]) && memcmp(s, names[i], len) == 0) return true;
  return false;
}

/* The address field: " 0x" and hex digits up to a space, after the index
 * and the image (which may hold spaces: "My App"). @return its start, or
 * NULL. */
static const char *address_field(const char *s, const char **after) {
  for (const char *p = strstr(s, " 0x"); p != NULL; p = strstr(p + 1, " 0x")) {
    const char *q = p + 3;
    while (isxdigit((unsigned char)*q)) q++;
    if (q > p + 3 && *q == ' ') {
      *after = q;
      return p + 1;
    }
  }
  return NULL;
}

const char *stkr__backtrace_line_symbol(const char *line, char *buf,
                                        size_t cap) {
  const char *p = line, *image, *image_end, *sym, *end, *plus;
  size_t len, image_len;

  while (*p == ' ') p++;
  while (isdigit((unsigned char)*p)) p++; /* the index */
  while (*p == ' ') p++;
  image = p;
  if ((image_end = address_field(image, &sym)) == NULL) return NULL;
  while (image_end > image && image_end[-1] == ' ') image_end--;
  image_len = (size_t)(image_end - image);
  /* The last " + " (a name may hold one: an operator's), looked for from
   * the space after the address, so that an empty symbol is one. */
  end = sym + strlen(sym);
  for (plus = strstr(sym, " + "); plus != NULL; plus = strstr(plus + 1, " + "))
    end = plus;
  while (*sym == ' ' && sym < end) sym++;
  len = (size_t)(end - sym);
  if (len == 0 || len >= cap || (sym[0] == '0' && sym[1] == 'x') ||
      (len == image_len && memcmp(sym, image, len) == 0) ||
      is_uuid(sym, len) || (len == 10 && memcmp(sym, "<redacted>", 10) == 0) ||
      stkr__backtrace_header_symbol(sym, len))
    return NULL;
  memcpy(buf, sym, len);
  buf[len] = '\0';
  return buf;
}
