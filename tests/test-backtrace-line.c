/*
 * test-backtrace-line.c: the function name in a line of Apple's backtrace
 * format (symbolize/backtrace_line.c), which the in-process Apple
 * symbolizer reads from _NSCallStackArray. The lines are Libc's format
 * (gen/backtrace.c: "%-4d%-35s 0x%016lx %s + %lu"), filled as Libc fills
 * it for each case dladdr leaves: a symbol, none (the image's name), a
 * name the shared cache redacted (the image's UUID, or "<redacted>"), no
 * image (an address), and a stripped image's header symbol.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "symbolize/symbolize.h"
#include "tests/testlib.h"

/* One line as Libc writes it. */
static const char *line(int frame, const char *image, uint64_t addr,
                        const char *symbol, unsigned long off) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%-4d%-35s 0x%016llx %s + %lu", frame, image,
           (unsigned long long)addr, symbol, off);
  return buf;
}

static const char *sym(const char *l) {
  static char name[256];
  return stkr__backtrace_line_symbol(l, name, sizeof name);
}

static void names_kept(void **state) {
  (void)state;
  assert_string_equal(sym(line(0, "CoreFoundation", 0x1804c1234,
                               "__exceptionPreprocess", 164)),
                      "__exceptionPreprocess");
  assert_string_equal(sym(line(3, "UIKitCore", 0x1b2c3d4e5,
                               "-[UIApplication sendEvent:]", 312)),
                      "-[UIApplication sendEvent:]");
  assert_string_equal(sym(line(12, "MyApp", 0x102a1c3b4, "$s5MyApp3fooyyF", 20)),
                      "$s5MyApp3fooyyF");
  /* An operator's " + " stays in the name: the offset is the last one. */
  assert_string_equal(sym("7   libc++.1.dylib                      "
                          "0x00000001a0b0c0d0 operator + (int) + 8"),
                      "operator + (int)");
  /* An image with a space in its name ("My App"). */
  assert_string_equal(sym(line(2, "My App", 0x100004000, "main", 40)), "main");
  /* Frame numbers past 999 push the image one column on. */
  assert_string_equal(sym(line(1000, "MyApp", 0x100004000, "deep", 4)),
                      "deep");
}

static void no_symbol_no_name(void **state) {
  (void)state;
  /* A stripped app: Libc writes the image's name, offset from its start. */
  assert_null(sym(line(4, "MyApp", 0x102a1c3b4, "MyApp", 17332)));
  assert_null(sym(line(4, "My App", 0x102a1c3b4, "My App", 17332)));
  /* A name the shared cache redacted: the image's UUID (newer Libc)... */
  assert_null(sym(line(5, "libsystem_c.dylib", 0x1a2b3c4d5,
                       "5A3C0D3B-5A1E-3A3B-9C1D-0123456789AB", 4660)));
  /* ... or "<redacted>" (older). */
  assert_null(sym(line(5, "libsystem_c.dylib", 0x1a2b3c4d5, "<redacted>",
                       4660)));
  /* No image: an address, or Libc's "0x0". */
  assert_null(sym(line(6, "???", 0x1000, "0x0", 4096)));
  assert_null(sym(line(6, "???", 0x1000, "0xdeadbeef", 12)));
  /* A stripped image that still exports its header's symbol. */
  assert_null(sym(line(7, "MyApp", 0x102a1c3b4, "_mh_execute_header",
                       123456)));
  assert_null(sym(line(7, "MyApp", 0x102a1c3b4, "__mh_execute_header", 12)));
  assert_null(sym(line(8, "Plugin", 0x10400000, "_mh_bundle_header", 12)));
  assert_null(sym(line(8, "libfoo.dylib", 0x10500000, "__mh_dylib_header", 8)));
  /* A name that merely starts like one is a name. */
  assert_string_equal(sym(line(9, "MyApp", 0x100004000, "mh_execute_headers",
                               2)),
                      "mh_execute_headers");
}

static void malformed_lines(void **state) {
  char small[8];
  (void)state;
  assert_null(sym(""));
  assert_null(sym("MyApp"));
  assert_null(sym("0   MyApp   0x  main + 4"));   /* no address digits */
  assert_null(sym("0   MyApp   0x1234"));         /* nothing after it */
  assert_null(sym("0   MyApp   0x1234  + 4"));    /* an empty symbol */
  /* A name longer than the buffer: none rather than a cut one. */
  assert_null(stkr__backtrace_line_symbol(
      line(0, "MyApp", 0x1000, "a_long_function_name", 4), small,
      sizeof small));
  assert_string_equal(stkr__backtrace_line_symbol(
                          line(0, "MyApp", 0x1000, "shortfn", 4), small,
                          sizeof small),
                      "shortfn");
}

TL_TEST_MAIN("backtrace-line", NULL, NULL, names_kept, no_symbol_no_name,
             malformed_lines)
