/*
 * symcache.c: `stackrec symcache build`: convert the DWARF (and symbol
 * table) of Mach-O builds once into per-build symbol caches,
 * DIR/<UUID>.stkrsym (format: docs/SYMCACHE.md; symbolize/symcache.c), which
 * `stackrec symbolize --debug-dir DIR` and `stackrec atos --symcache DIR`
 * (or -o FILE.stkrsym) use in place of the DWARF when one matches; and of
 * ELF builds into DIR/<build-id>.stkrsym (symbolize/symcache_elf.c), which
 * `stackrec snapshot --symcache DIR` uses.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/stkr_mkdir.h"
#include "symbolize/symbolize.h"
#include "tools/stackrec/cli.h"

static const char symcache_help[] =
    "Usage: stackrec symcache build [-arch ARCH] DSYM_OR_BINARY... -o DIR\n"
    "\n"
    "Convert each build's DWARF (a .dSYM bundle, the DWARF file in one, or\n"
    "a Mach-O binary: its symbol table) once into a symbol cache,\n"
    "DIR/<UUID>.stkrsym: sorted address ranges, each with its function,\n"
    "file:line:column and inline chain, over interned strings; mapped and\n"
    "checked whole on load (docs/SYMCACHE.md). One file per slice of a\n"
    "universal input (only ARCH's with -arch); a .dSYM bundle holding\n"
    "several DWARF files gives each one's. 'stackrec symbolize\n"
    "--debug-dir DIR' and 'stackrec atos --symcache DIR' (or -o FILE) use a\n"
    "cache whose UUID matches, before any dSYM; the answers are the same.\n"
    "An ELF file (a program or shared library with a GNU build-id) gives\n"
    "DIR/<build-id in hex>.stkrsym, from its own DWARF or its separate debug\n"
    "file (/usr/lib/debug/.build-id/xx/yyyy.debug, or .gnu_debuglink), with\n"
    "the answers of the ELF symbolizer (file names as compiled); 'stackrec\n"
    "snapshot --symcache DIR' uses those.\n"
    "\n"
    "Options:\n"
    "  -o DIR           output directory (created)\n"
    "  -arch ARCH       only this slice: arm64, arm64e, x86_64\n"
    "  -h, --help       this help\n"
    "\n"
    "Exit status: 0 every input converted, 1 writing failed, 2 usage error,\n"
    "3 an input cannot be opened, or has no UUID or build-id.\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One slice of one input. @return exit status. */
static int build_one(stkr__symfile *f, const char *dir) {
  stkr__symfile_info info;
  stkr__symcache_stats st;
  char path[4200], uuid[65], err[1024];
  double t0 = now(), dt;
  int rc;
  stkr__symfile_get_info(f, &info);
  if (!info.macho) { /* ELF: named by its GNU build-id, in hex */
    uint8_t id[32];
    int n = stkr__symelf_build_id(info.path, id, sizeof id);
    if (n <= 0) {
      fprintf(stderr, "stackrec symcache: %s: no GNU build-id: a cache "
              "could never be matched\n", info.path);
      return STKR_CLI_NO_INPUT;
    }
    stkr__symcache_elf_name(id, (size_t)n, uuid, sizeof uuid);
  } else if (!info.has_uuid) {
    fprintf(stderr, "stackrec symcache: %s: no LC_UUID: a cache could "
            "never be matched\n", info.path);
    return STKR_CLI_NO_INPUT;
  } else {
    snprintf(uuid, sizeof uuid,
             "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
             info.uuid[0], info.uuid[1], info.uuid[2], info.uuid[3],
             info.uuid[4], info.uuid[5], info.uuid[6], info.uuid[7],
             info.uuid[8], info.uuid[9], info.uuid[10], info.uuid[11],
             info.uuid[12], info.uuid[13], info.uuid[14], info.uuid[15]);
  }
  snprintf(path, sizeof path, "%s/%s%s", dir, uuid, STKR__SYMCACHE_EXT);
  if ((rc = stkr__symcache_write(f, path, &st, err, sizeof err)) < 0) {
    fprintf(stderr, "stackrec symcache: %s\n", err);
    return rc == -ENOTSUP ? STKR_CLI_NO_INPUT : STKR_CLI_DATA_LOST;
  }
  dt = now() - t0;
  if (st.debug_not_used[0] != '\0')
    fprintf(stderr, "stackrec symcache: warning: %s: its separate debug file "
            "was not used (%s): the cache holds the symbol table's names "
            "only\n", info.path, st.debug_not_used);
  printf("%s (%s, %s): %llu ranges, %llu frames, %llu bytes of strings; "
         "%.1f MB of DWARF -> %.1f MB in %.2f s (%.1f MB of DWARF/s)\n",
         path, info.path, info.arch ? info.arch : "?",
         (unsigned long long)st.ranges, (unsigned long long)st.frames,
         (unsigned long long)st.string_bytes, (double)st.dwarf_bytes / 1048576,
         (double)st.file_bytes / 1048576, dt,
         dt > 0 ? (double)st.dwarf_bytes / 1048576 / dt : 0.0);
  return 0;
}

/* Input `in` into caches in dir: a file, or one slice (arch) of it, or
 * each known slice of a universal file. *no_slice (may be NULL): set, and
 * nothing said, when the file lacks arch's slice (one file of a bundle).
 * @return 0 or STKR_CLI_* bits. */
static int build_input(const char *in, const char *arch, const char *dir,
                       bool *no_slice) {
  static const char *const archs[] = {"arm64", "arm64e", "x86_64"};
  stkr__symfile *f;
  char err[1024];
  int rc = stkr__symfile_open(in, arch, NULL, &f, err, sizeof err);
  int status = 0, got = 0;

  if (rc == 0) {
    status = build_one(f, dir);
    stkr__symfile_free(f);
    return status;
  }
  if (!arch && rc == -ENOENT && strstr(err, "universal file")) {
    for (size_t k = 0; k < sizeof archs / sizeof archs[0]; k++) {
      if (stkr__symfile_open(in, archs[k], NULL, &f, err, sizeof err) != 0)
        continue;
      status |= build_one(f, dir);
      stkr__symfile_free(f);
      got++;
    }
    if (got) return status;
  }
  if (no_slice != NULL && arch != NULL && strstr(err, " slice (it has: ")) {
    *no_slice = true;
    return 0;
  }
  fprintf(stderr, "stackrec symcache: %s\n", err);
  return rc == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
}

/* A .dSYM bundle whose Contents/Resources/DWARF holds several files (a
 * merged bundle): each is a build of its own, so each is converted (the
 * symbolizer, given the bundle, would take the one of the bundle's name,
 * or refuse); with -arch, the files that have that slice, and an error
 * only if none has. Anything else: build_input. */
static int build_bundle(const char *in, const char *arch, const char *dir) {
  char dw[4096], path[4096 + 256];
  struct dirent *e;
  DIR *d;
  size_t n = 0, lacking = 0;
  int status = 0;

  snprintf(dw, sizeof dw, "%s/Contents/Resources/DWARF", in);
  if ((d = opendir(dw)) == NULL)
    return build_input(in, arch, dir, NULL);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && n < 2) break; /* one file: the symbolizer's choice */
    rewinddir(d);
    while ((e = readdir(d)) != NULL) {
      struct stat st;
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s", dw, e->d_name);
      if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      bool no_slice = false;
      if (pass == 0) n++;
      else status |= build_input(path, arch, dir, &no_slice);
      lacking += no_slice;
    }
  }
  closedir(d);
  if (n < 2) return build_input(in, arch, dir, NULL);
  if (lacking == n) {
    fprintf(stderr, "stackrec symcache: %s: none of its %zu DWARF files has "
            "a %s slice\n", in, n, arch);
    status |= STKR_CLI_NO_INPUT;
  }
  return status;
}

int stkr_cli_symcache(int argc, char **argv) {
  const char *dir = NULL, *arch = NULL;
  const stkr_cli_opt opts[] = {
      {NULL, 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, &dir, NULL},
      {"arch", 'a', STKR_CLI_VALUE, &arch, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "symcache", .opts = opts,
                                .help = {symcache_help}, .long_only = true};
  int status = 0, rc;

  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(symcache_help, stdout);
    return stkr_cli_flush("symcache");
  }
  if (argc < 2 || strcmp(argv[1], "build") != 0)
    return stkr_cli_usage_error("symcache", "expected 'build'");
  argc--;
  argv++;
  if (stkr_cli_getopt(&gopt, argc, argv) == STKR_CLI_OPT_EXIT)
    return gopt.status;
  if (!dir) return stkr_cli_usage_error("symcache", "no -o DIR given");
  if (optind >= argc)
    return stkr_cli_usage_error("symcache", "no DSYM_OR_BINARY given");
  if ((rc = stkr_mkdir_p(dir, 0755)) != 0) {
    fprintf(stderr, "stackrec symcache: cannot create %s: %s\n", dir,
            strerror(-rc));
    return STKR_CLI_DATA_LOST;
  }
  stkr__demangle_swift_enable();
  for (int i = optind; i < argc; i++)
    status |= build_bundle(argv[i], arch, dir);
  stkr_cli_swift_note(stderr, "symcache", " in the caches");
  if (stkr_cli_flush("symcache") != 0) return STKR_CLI_DATA_LOST;
  /* Mixed failures: the most serious (3 over 1) is not knowable from an
   * OR; report 3 if any input could not be used, else 1. */
  return status & STKR_CLI_NO_INPUT ? STKR_CLI_NO_INPUT : status;
}
