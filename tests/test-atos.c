/*
 * test-atos.c: `stackrec atos` against llvm-symbolizer (the oracle) on the
 * Mach-O fixtures (tests/apple/fixtures.sh): every byte address of the
 * code of each slice of a universal dSYM (arm64, arm64e, x86_64), a thin
 * dSYM, a DWARF 5 one, a binary without dSYM (symbol table names), an
 * Objective-C dylib (names as they are, with and without dSYM), and an
 * ELF file (tests/symfixture); function, file, line, column and every
 * inlined frame must be equal (tests/apple/compare.py). Also: -l address
 * math, the slice chosen by -arch, atos's text lines, --json, errors
 * (universal file without -arch, unknown arch, a damaged file named with
 * its offset, bad addresses), and Swift names demangled through the
 * runtime, equal to swift-demangle's, or left mangled with a note when
 * the runtime is absent.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/apple/macho_test.h"
#include "tests/testlib.h"

static int compare(const char *obj, const char *arch, const char *extra) {
  int rc = mt_sh("python3 '%s/tests/apple/compare.py' '%s' '%s' %s 1 %s",
                 mt_src, mt_tool, obj, arch, extra ? extra : "");
  fprintf(stderr, "%s%s", mt_out, mt_err);
  return rc;
}

static void test_universal_dsym_every_slice(void **state) {
  char obj[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(obj, sizeof obj, "%s/App.dSYM/Contents/Resources/DWARF/App", mt_fx);
  assert_int_equal(compare(obj, "arm64", NULL), 0);
  assert_int_equal(compare(obj, "arm64e", NULL), 0);
  assert_int_equal(compare(obj, "x86_64", NULL), 0);
}

static void test_thin_and_dwarf5(void **state) {
  char obj[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(obj, sizeof obj, "%s/App-arm64.dSYM/Contents/Resources/DWARF/App-arm64",
           mt_fx);
  assert_int_equal(compare(obj, "-", NULL), 0);
  snprintf(obj, sizeof obj, "%s/D5-arm64.dSYM/Contents/Resources/DWARF/D5-arm64",
           mt_fx);
  assert_int_equal(compare(obj, "-", NULL), 0);
}

/* No dSYM: names from the symbol table (llvm-symbolizer would find
 * App.dSYM next to App, so a copy elsewhere). */
static void test_symbol_table_only(void **state) {
  char obj[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("mkdir -p '%s/nodsym' && cp '%s/App' '%s/App-x86_64' "
                         "'%s/nodsym/'", mt_fx, mt_fx, mt_fx, mt_fx), 0);
  snprintf(obj, sizeof obj, "%s/nodsym/App", mt_fx);
  assert_int_equal(compare(obj, "arm64", NULL), 0);
  snprintf(obj, sizeof obj, "%s/nodsym/App-x86_64", mt_fx);
  assert_int_equal(compare(obj, "-", NULL), 0);
  /* Says so. */
  assert_int_equal(mt_sh("'%s' atos -o '%s' 0x100004000", mt_tool, obj), 0);
  assert_non_null(strstr(mt_err, "has no DWARF"));
}

/* 400,000 names at one address (aliases, as identical-code folding
 * leaves them): indexed in one pass over them. Each looked past all the
 * others before, ~50 s here (QA, session 30); bounded loosely. */
static void test_many_aliases(void **state) {
  char obj[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(obj, sizeof obj, "%s/aliases-arm64", mt_fx);
  assert_int_equal(mt_sh("python3 '%s/tests/apple/aliases.py' '%s/App-arm64' "
                         "'%s' 400000", mt_src, mt_fx, obj), 0);
  double t0 = tl_now_s();
  assert_int_equal(mt_sh("timeout 120 '%s' atos -o '%s' 0x100004000", mt_tool,
                         obj), 0);
  double took = tl_now_s() - t0;
  if (strstr(mt_out, "alias") == NULL) /* (its "_" dropped, as atos does) */
    fail_msg("no alias named: %s%s", mt_out, mt_err);
  if (took > 20.0)
    fail_msg("atos took %.1f s over 400,000 aliases", took);
  remove(obj);
}

/* C++ members with internal linkage (a class in an anonymous namespace),
 * which GCC gives no linkage name: named with their namespaces and
 * classes from the DWARF, by the DWARF path and from a symbol cache alike
 * (QA, session 30: both were "read", one stack under --granularity
 * function; fails without). */
static void test_cxx_without_linkage_names(void **state) {
  const char *const fns[2] = {"_ZN12_GLOBAL__N_16Camera4readEv",
                              "_ZN12_GLOBAL__N_18Contacts4readEv"};
  const char *const want[2] = {"(anonymous namespace)::Camera::read (in ",
                               "(anonymous namespace)::Contacts::read (in "};
  (void)state;
  assert_int_equal(mt_sh(
      "cd '%s' && printf '%%s\\n' '#include <cstdlib>' 'volatile int sink;' "
      "'namespace {' "
      "'struct Camera { __attribute__((noinline)) static void read() { sink += "
      "getenv(\"A\") != nullptr; } };' "
      "'struct Contacts { __attribute__((noinline)) static void read() { sink "
      "+= getenv(\"B\") != nullptr; } };' '}' "
      "'int main() { Camera::read(); Contacts::read(); return 0; }' > anon.cc "
      "&& g++ -g -O0 -o anon anon.cc && rm -rf anon-cache && "
      "'%s' symcache build anon -o anon-cache >/dev/null", mt_tmp, mt_tool), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(mt_sh("cd '%s' && nm anon | awk '$3 == \"%s\" {print $1}'",
                           mt_tmp, fns[i]), 0);
    unsigned long long a = strtoull(mt_out, NULL, 16);
    assert_true(a != 0);
    /* + 8: inside the function (atos looks an address up as it is); from
     * the DWARF, then from the cache */
    for (int c = 0; c < 2; c++) {
      assert_int_equal(mt_sh("cd '%s' && '%s' atos -o %s 0x%llx", mt_tmp,
                             mt_tool, c ? "anon-cache/*.stkrsym" : "anon",
                             a + 8), 0);
      if (strncmp(mt_out, want[i], strlen(want[i])) != 0)
        fail_msg("%s (%s): %s", fns[i], c ? "cache" : "DWARF", mt_out);
    }
  }
}

/* A pointer-authenticated arm64e address (bits above 47 set, as an LR
 * from lldb or a crash report has them): answered as the plain address,
 * and said (QA, session 30: printed back as is; fails without). */
static void test_pac_address(void **state) {
  char want[1024];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("'%s' atos -o '%s/App' -arch arm64e 0x1000042c0",
                         mt_tool, mt_fx), 0);
  snprintf(want, sizeof want, "%s", mt_out);
  assert_non_null(strstr(want, " (in App)"));
  assert_int_equal(mt_sh("'%s' atos -o '%s/App' -arch arm64e 0x002a0001000042c0",
                         mt_tool, mt_fx), 0);
  assert_string_equal(mt_out, want);
  assert_non_null(strstr(mt_err, "0x002a0001000042c0: bits above bit 46 "
                                 "cleared (pointer authentication): 0x1000042c0"));
}

/* A function of size 0 (an assembly stub without .size, as glibc's
 * signal trampoline __restore_rt) names its first byte, in a gap between
 * sized functions only (QA, session 30: the trampoline of a handler's
 * stack was "libc.so.6+0x3c051"; fails without). */
static void test_elf_zero_size_stub(void **state) {
  (void)state;
  assert_int_equal(mt_sh(
      "cd '%s' && printf '%%s\\n' 'int main(void) { return 0; }' "
      "'__asm__(\".text\\n.globl zero_stub\\n.type zero_stub, @function\\n"
      "zero_stub:\\n nop\\n ret\\n\");' > zs.c && "
      "cc -O0 -o zs zs.c && nm zs | awk '$3 == \"zero_stub\" {print $1}'",
      mt_tmp), 0);
  unsigned long long a = strtoull(mt_out, NULL, 16);
  assert_true(a != 0);
  assert_int_equal(mt_sh("cd '%s' && '%s' atos -o zs 0x%llx", mt_tmp, mt_tool,
                         a), 0);
  if (strncmp(mt_out, "zero_stub (in zs)", 17) != 0)
    fail_msg("atos of zero_stub: %s", mt_out);
}

/* Objective-C names as they are, from the dSYM and from the symbol
 * table alone. */
static void test_objc(void **state) {
  char obj[4200];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  snprintf(obj, sizeof obj, "%s/Objc-arm64.dSYM/Contents/Resources/DWARF/"
           "Objc-arm64", mt_fx);
  assert_int_equal(compare(obj, "-", NULL), 0);
  assert_int_equal(mt_sh("cp '%s/Objc-arm64' '%s/nodsym/' 2>/dev/null || "
                         "(mkdir -p '%s/nodsym' && cp '%s/Objc-arm64' "
                         "'%s/nodsym/')", mt_fx, mt_fx, mt_fx, mt_fx, mt_fx), 0);
  snprintf(obj, sizeof obj, "%s/nodsym/Objc-arm64", mt_fx);
  assert_int_equal(compare(obj, "-", NULL), 0);
  assert_int_equal(mt_sh("'%s' atos -o '%s/Objc-arm64.dSYM' -i 0x4000 0x4014",
                         mt_tool, mt_fx), 0);
  assert_non_null(strstr(mt_out, "-[Probe bump:] (in Objc-arm64) (probe.m:7)\n"));
  assert_non_null(strstr(mt_out, "+[Probe make] (in Objc-arm64) (probe.m:8)\n"));
}

static void test_elf(void **state) {
  char obj[4200];
  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* The sanitizer builds of the fixture split functions into "f.cold"
   * parts; llvm-symbolizer names the outermost frame there after the
   * symbol ("main.cold"), we after the DWARF subprogram ("main"). The
   * plain build has no such parts and is compared in full. */
  fprintf(stderr, "SKIP: sanitizer build (f.cold parts: the symbol-table "
                  "name override of llvm-symbolizer; compared in the plain "
                  "run)\n");
  skip();
#endif
  snprintf(obj, sizeof obj, "%s/tests/symfixture/symfixture", mt_src);
  assert_int_equal(compare(obj, "-", "--elf-symtab-files"), 0);
}

/* An ELF file cut short (a copy or download interrupted) is named as such,
 * exit 3, by atos and by symcache build (QA, session 26: atos printed bare
 * addresses, exit 0; symcache build wrote an empty cache, exit 0, that then
 * hid the real debug info). */
static void test_elf_cut_short(void **state) {
  (void)state;
  for (int i = 0; i < 3; i++) {
    static const char *const keep[] = {"64", "1000", "-100"};
    /* In a subshell: mt_sh sends the command's stdout to its capture. */
    assert_int_equal(mt_sh("(f='%s/tests/symfixture/symfixture' n=%s; "
                           "[ $n -lt 0 ] && n=$(( $(stat -c %%s \"$f\") + n )); "
                           "head -c $n \"$f\" > '%s/elfcut')", mt_src, keep[i],
                           mt_tmp), 0);
    assert_int_equal(mt_sh("'%s' atos -o '%s/elfcut' 0x1000", mt_tool, mt_tmp),
                       3);
    if (strstr(mt_err, "/elfcut: an ELF file cut short: ") == NULL)
      fail_msg("atos of %s bytes: \"%s\"", keep[i], mt_err);
    assert_int_equal(mt_sh("'%s' symcache build '%s/elfcut' -o '%s/elfcut.d'",
                           mt_tool, mt_tmp, mt_tmp), 3);
    assert_non_null(strstr(mt_err, "an ELF file cut short: "));
  }
  /* A stripped binary whose separate debug file (by .gnu_debuglink) is
   * cut short: a cache of its symbol table, and a warning naming the
   * debug file (it was skipped without a word). */
  assert_int_equal(mt_sh("(cd '%s' && cp '%s/tests/symfixture/symfixture' s && "
                         "chmod u+w s && objcopy --only-keep-debug s s.debug && "
                         "objcopy --strip-debug --add-gnu-debuglink=s.debug s && "
                         "head -c 3000 s.debug > s.cut && mv s.cut s.debug)",
                         mt_tmp, mt_src), 0);
  assert_int_equal(mt_sh("'%s' symcache build '%s/s' -o '%s/s.d'", mt_tool,
                         mt_tmp, mt_tmp), 0);
  if (strstr(mt_err, "its separate debug file was not used (") == NULL ||
      strstr(mt_err, "s.debug: cut short: ") == NULL)
    fail_msg("symcache build: \"%s\"", mt_err);
}

/* -l: an address in a process that loaded the image elsewhere. */
static void test_load_address(void **state) {
  char a[256], b[256];
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("cd '%s' && '%s' atos -o App.dSYM -arch arm64 -i "
                         "0x100004100 0x100004404", mt_fx, mt_tool), 0);
  snprintf(a, sizeof a, "%s", mt_out);
  assert_non_null(strstr(a, "entry (in App) (main.c:"));
  /* Slide 0x4a80000: the same answers. */
  assert_int_equal(mt_sh("cd '%s' && '%s' atos -o App.dSYM -arch arm64 -i "
                         "-l 0x104a80000 0x104a84100 104a84404", mt_fx,
                         mt_tool), 0);
  snprintf(b, sizeof b, "%s", mt_out);
  assert_string_equal(a, b);
  /* From stdin, the same. */
  assert_int_equal(mt_sh("cd '%s' && printf '0x104a84100\\n  0x104a84404\\n' | "
                         "'%s' atos -o App.dSYM -arch arm64 -i -l 0x104a80000",
                         mt_fx, mt_tool), 0);
  assert_string_equal(a, mt_out);
  /* Below the load address: nothing, the address itself. */
  assert_int_equal(mt_sh("'%s' atos -o '%s/App.dSYM' -arch arm64 -l "
                         "0x104a80000 0x1000", mt_tool, mt_fx), 0);
  assert_string_equal(mt_out, "0x1000\n");
}

static void test_json_and_arch(void **state) {
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  assert_int_equal(mt_sh("'%s' atos -o '%s/App' -arch x86_64 --json 0x1 ",
                         mt_tool, mt_fx), 0);
  assert_string_equal(mt_out, "{\"address\": \"0x1\", \"frames\": []}\n");
  /* Another arch, another answer, from the one dSYM. */
  assert_int_equal(mt_sh("'%s' atos -o '%s/App.dSYM' -arch x86_64 --json -i "
                         "0x100000290", mt_tool, mt_fx), 0);
  assert_non_null(strstr(mt_out, "{\"address\": \"0x100000290\", \"frames\": "
                                 "[{\"function\": \""));
  assert_non_null(strstr(mt_out, "\"inlined\": false}]}\n"));
}

static void test_errors(void **state) {
  (void)state;
  MT_SKIP_IF_NO_FIXTURES();
  /* A universal file needs -arch: the slices are listed. */
  assert_int_equal(mt_sh("'%s' atos -o '%s/App' 0x100004000", mt_tool, mt_fx),
                   3);
  assert_non_null(strstr(mt_err, "choose a slice with -arch"));
  assert_non_null(strstr(mt_err, "arm64e ("));
  assert_int_equal(mt_sh("'%s' atos -o '%s/App' -arch ppc 0x1", mt_tool, mt_fx),
                   2);
  assert_int_equal(mt_sh("'%s' atos -o '%s/App-arm64' -arch x86_64 0x1",
                         mt_tool, mt_fx), 3);
  assert_non_null(strstr(mt_err, "no x86_64 slice"));
  assert_int_equal(mt_sh("'%s' atos 0x1", mt_tool), 2);
  assert_int_equal(mt_sh("'%s' atos -o /nonexistent/x 0x1", mt_tool), 3);
  assert_int_equal(mt_sh("'%s' atos -o '%s/App-arm64' zzz", mt_tool, mt_fx), 2);
  assert_non_null(strstr(mt_err, "'zzz' is not a hexadecimal address"));
  /* A damaged dSYM: the file and the offset are named. */
  assert_int_equal(mt_sh("head -c 3000 '%s/App-arm64.dSYM/Contents/Resources/"
                         "DWARF/App-arm64' > '%s/cut' && '%s' atos -o '%s/cut' "
                         "0x1", mt_fx, mt_tmp, mt_tool, mt_tmp), 3);
  assert_non_null(strstr(mt_err, "/cut: offset "));
  /* A bundle of another name than its DWARF file: that one file. Two
   * files in it: both named, and how to choose (QA: "not ... a .dSYM
   * bundle"). */
  assert_int_equal(mt_sh("d='%s/Renamed.dSYM/Contents/Resources/DWARF' && "
                         "mkdir -p \"$d\" && cp '%s/Objc-arm64.dSYM/Contents/"
                         "Resources/DWARF/Objc-arm64' \"$d/\" && '%s' atos -o "
                         "'%s/Renamed.dSYM' 0x4000", mt_tmp, mt_fx, mt_tool,
                         mt_tmp), 0);
  assert_non_null(strstr(mt_out, "-[Probe bump:] (in Objc-arm64)"));
  assert_int_equal(mt_sh("cp '%s/App-arm64' '%s/Renamed.dSYM/Contents/"
                         "Resources/DWARF/' && '%s' atos -o '%s/Renamed.dSYM' "
                         "0x4000", mt_fx, mt_tmp, mt_tool, mt_tmp), 3);
  assert_non_null(strstr(mt_err, "with 2 DWARF files ("));
  assert_non_null(strstr(mt_err, "Objc-arm64"));
  assert_non_null(strstr(mt_err, "App-arm64"));
}

/* Swift: a real binary from swiftc (ELF, the same mangling as on Apple
 * platforms); every function symbol's name equals swift-demangle's. */
static void test_swift(void **state) {
  static char want[1 << 16];
  const char *bin = "/opt/swift/usr/bin";
  (void)state;
  if (access("/opt/swift/usr/bin/swiftc", X_OK) != 0) {
    fprintf(stderr, "SKIP: no Swift toolchain at /opt/swift\n");
    skip();
  }
  assert_int_equal(mt_sh(
      "cd '%s' && cat > sw.swift <<'EOF'\n"
      "struct Box<T> { var value: T\n"
      "  func map<U>(_ f: (T) -> U) -> Box<U> { return Box<U>(value: f(value)) } }\n"
      "final class Counter { var n = 0\n"
      "  @inline(never) func bump(by k: Int) -> Int { n += k; return n } }\n"
      "@inline(never) func work(_ xs: [Int]) -> Int {\n"
      "  let c = Counter(); var s = 0\n"
      "  for x in xs { s += c.bump(by: x) }\n"
      "  return s + Box(value: s).map { $0 * 2 }.value }\n"
      "print(work(Array(0..<CommandLine.arguments.count)))\n"
      "EOF\n"
      "%s/swiftc -g -O sw.swift -o sw && %s/llvm-nm -n --defined-only sw | "
      "awk '$2 ~ /^[tT]$/ && $3 ~ /^[$]s/ {print $1, $3}' > syms && "
      "awk '{print $2}' syms | %s/swift-demangle --no-sugar",
      mt_tmp, bin, bin, bin), 0);
  snprintf(want, sizeof want, "%s", mt_out);
  assert_true(strstr(want, "sw.Counter.bump(by: Swift.Int) -> Swift.Int") != NULL);
  assert_int_equal(mt_sh("cd '%s' && awk '{print \"0x\" $1}' syms | '%s' atos "
                         "-o sw | sed 's/ (in sw).*//'", mt_tmp, mt_tool), 0);
  assert_string_equal(mt_out, want);
  assert_int_equal(mt_sh("cd '%s' && awk '{print \"0x\" $1}' syms | '%s' atos "
                         "-o sw | grep -c '(sw.swift:'", mt_tmp, mt_tool), 0);
  assert_true(atoi(mt_out) >= 3); /* file:line from swiftc's DWARF */
  /* No runtime: names stay mangled, and the output says so. */
  assert_int_equal(mt_sh("cd '%s' && awk '{print \"0x\" $1}' syms | "
                         "STACKREC_SWIFT_RUNTIME=/nonexistent.so '%s' atos -o sw",
                         mt_tmp, mt_tool), 0);
  assert_non_null(strstr(mt_out, "$s2sw7CounterC4bump2byS2i_tF (in sw)"));
  assert_non_null(strstr(mt_err, "Swift names left mangled"));
  /* ... naming the variable's path that did not load (QA, session 39: "no
   * Swift runtime found; set STACKREC_SWIFT_RUNTIME", as if unset). */
  assert_non_null(strstr(mt_err, "STACKREC_SWIFT_RUNTIME=/nonexistent.so is "
                                 "no Swift runtime that loads"));
}

/* A Go program with C code of its own (cgo): its .debug_aranges lists only
 * the gcc-compiled C units, and libdw's lookup through it gave every Go
 * function a C unit's file:line (QA, session 21: main.main at
 * gcc_mmap.c:37). main.main + 5 is in main.go, as `go tool addr2line`
 * says. */
static void test_go_cgo(void **state) {
  const char *go = "/usr/bin/go";
  (void)state;
  if (access(go, X_OK) != 0) {
    fprintf(stderr, "SKIP: no Go toolchain (tools/install-deps.sh --tests "
                    "installs golang-go)\n");
    skip();
  }
  assert_int_equal(mt_sh(
      "mkdir -p '%s/gocgo' && cd '%s/gocgo' && cat > main.go <<'EOF'\n"
      "package main\n\n"
      "/*\n#include <stdlib.h>\n"
      "static int probe(void) { return getenv(\"HOME\") != NULL; }\n*/\n"
      "import \"C\"\nimport \"fmt\"\n\n"
      "func main() {\n\tn := 0\n\tfor i := 0; i < 10; i++ {\n"
      "\t\tn += int(C.probe())\n\t}\n\tfmt.Println(n)\n}\n"
      "EOF\n"
      "printf 'module gocgo\\ngo 1.19\\n' > go.mod && "
      "HOME=\"$PWD\" GOCACHE=\"$PWD/cache\" GOPATH=\"$PWD/path\" "
      "GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1 "
      "CC=gcc %s build -o prog . && "
      "HOME=\"$PWD\" GOCACHE=\"$PWD/cache\" %s tool nm prog | "
      "awk '$3 == \"main.main\" {print $1}'",
      mt_tmp, mt_tmp, go, go), 0);
  unsigned long long a = strtoull(mt_out, NULL, 16);
  assert_true(a != 0);
  assert_int_equal(mt_sh("cd '%s/gocgo' && '%s' atos -o prog 0x%llx", mt_tmp,
                         mt_tool, a + 5), 0);
  if (strstr(mt_out, "main.main (in prog) (main.go:") == NULL)
    fail_msg("atos of main.main + 5: %s", mt_out);
}

MT_TEST_MAIN("atos", 6, 12, NULL, test_universal_dsym_every_slice,
             test_thin_and_dwarf5, test_symbol_table_only, test_many_aliases,
             test_objc, test_elf, test_elf_zero_size_stub,
             test_cxx_without_linkage_names, test_elf_cut_short,
             test_load_address, test_json_and_arch, test_pac_address,
             test_errors, test_swift, test_go_cgo)
