/*
 * symbolize_cmd.c: the `stackrec symbolize` command: its options, its
 * output directory and its summary; the run itself is symbolize.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/symbolize_run.h"

static const char symbolize_help[] =
    "Usage: stackrec symbolize [--debug-dir PATH]... [--symcache DIR] [-o OUT]\n"
    "                          DIR\n"
    "\n"
    "Resolve the PCs of a recording made with STACKREC_SYMBOLIZE=offline (or\n"
    "none) into frames: function, file:line and inlined calls, as an inproc\n"
    "recording has them. Writes a symbolized copy of every segment file of\n"
    "DIR into OUT (default: DIR-symbolized), same names, same format; DIR is\n"
    "not changed. Read OUT with 'stackrec dump --frames' or '--json'.\n"
    "\n"
    "Each image of the recording is looked up by its build-id, in order:\n"
    "  PATH/.build-id/xx/yyyy and PATH/.build-id/xx/yyyy.debug, then\n"
    "  PATH/<file name of the image>, for every --debug-dir PATH; then the\n"
    "  image's recorded path. A file is used only if its build-id matches\n"
    "  the recorded one. Separate debug info is then found by build-id\n"
    "  (PATH/.build-id, /usr/lib/debug/.build-id) or .gnu_debuglink.\n"
    "Images recorded on Apple platforms (build-id = the Mach-O LC_UUID) are\n"
    "looked up by UUID among the Mach-O files under every --debug-dir PATH:\n"
    "dSYM bundles (X.dSYM/Contents/Resources/DWARF/X), .xcarchive/dSYMs,\n"
    "loose and universal binaries (the slice with that UUID); a dSYM gives\n"
    "function, file:line and inlined calls, a binary its symbol table's\n"
    "names. A PC is looked up at PC - 1 - load address + __TEXT vmaddr.\n"
    "An image with no matching file keeps image+offset frames (never a\n"
    "guessed name) and is named in a warning on stderr (\"UUID mismatch\"\n"
    "when a file of its name has another UUID). Frames DIR already has as\n"
    "image+offset (symbolized where their image's file was missing or\n"
    "stripped: an in-process recording of a release build) are resolved\n"
    "again, and named where a file is found now. Swift names are demangled\n"
    "with the Swift runtime (STACKREC_SWIFT_RUNTIME=/path/libswiftCore.so,\n"
    "else /opt/swift/usr/lib/swift/linux); without it they stay mangled\n"
    "and a note says so.\n"
    "\n"
    "Options:\n"
    "  -d, --debug-dir PATH  also search PATH (repeatable)\n"
    "  --symcache CDIR       an ELF image whose build-id has a symbol cache\n"
    "                        CDIR/<build-id>.stkrsym (stackrec symcache\n"
    "                        build, stackrec snapshot) is answered from it,\n"
    "                        its DWARF not read (the same answers)\n"
    "  -o, --output OUT      output directory (created; must not hold\n"
    "                        segment files already, nor lie inside DIR)\n"
    "  -h, --help            this help\n"
    "\n";

#define MAX_DIRS 64

/* Parse the options: the --debug-dir PATHs into dirs (MAX_DIRS at most),
 * -o into *outdir, --symcache into *symcache. @return -1 to go on, else
 * the exit status. */
static int parse_args(int argc, char **argv, const char **dirs,
                      size_t *n_dirs, const char **outdir,
                      const char **symcache) {
  const stkr_cli_opt opts[] = {
      {"debug-dir", 'd', STKR_CLI_SHORT | STKR_CLI_VALUE | STKR_CLI_REPEAT,
       NULL, NULL},
      {"symcache", 'c', STKR_CLI_VALUE, symcache, NULL},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, outdir, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "symbolize", .opts = opts,
                                .help = {symbolize_help, stkr_cli_exit_help}};
  struct stat st;
  int c;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case 'd':
      if (*n_dirs == MAX_DIRS)
        return stkr_cli_usage_error("symbolize", "more than %d --debug-dir",
                                    MAX_DIRS);
      if (stat(optarg, &st) != 0 || !S_ISDIR(st.st_mode))
        return stkr_cli_usage_error("symbolize",
                                    "--debug-dir '%s' is not a directory",
                                    optarg);
      dirs[(*n_dirs)++] = optarg;
      break;
    }
  }
  if (optind >= argc)
    return stkr_cli_usage_error("symbolize", "no DIR given");
  if (optind + 1 < argc)
    return stkr_cli_usage_error("symbolize", "one DIR only, got '%s' too",
                                argv[optind + 1]);
  return -1;
}

/* A reader's warning about DIR's marks file: said, counted when data
 * was lost (the other warnings are the segments', said as they are read
 * or not read at all here). */
static void marks_warning(void *arg, const stkr_warning *w) {
  size_t n = strlen(w->path), m = strlen("/" STKR_MARKS_FILE);

  if (n < m || strcmp(w->path + n - m, "/" STKR_MARKS_FILE) != 0)
    return;
  fprintf(stderr, "stackrec symbolize: %s\n", w->message);
  if (w->data_lost) (*(uint64_t *)arg)++;
}

/* The lines of indir's marks file that its readers call damaged (a
 * malformed line, an "l1" line of an earlier copy's loss): the copy
 * carries them as they are, and they are damage to OUT's readers too.
 * merge, which reads its inputs, exits 1 for them; symbolize copied them
 * and exited 0 (session 40's leftover). @return how many, said. */
static uint64_t marks_damage_said(const char *indir) {
  uint64_t n = 0;
  stkr_reader_opts o = {.warn = marks_warning, .warn_arg = &n};
  stkr_reader *r = NULL;

  /* Adding a directory reads its marks file, no segment. */
  if (stkr_reader_create(&o, &r) == 0) (void)stkr_reader_add(r, indir);
  stkr_reader_free(r);
  return n;
}

/* Create outdir if need be; refuse DIR itself and a directory that holds
 * segment files already (the output would mix with them). @return 0, or
 * the exit status after the message. */
static int make_outdir(const char *indir, const char *outdir) {
  struct stat a, b;

  /* Written into DIR, OUT would change the recording it copies (QA,
   * session 40: `symbolize .` made ./.-symbolized inside it). */
  if (stat(indir, &b) == 0 && stkr_cli_path_inside(outdir, &b))
    return stkr_cli_usage_error("symbolize", "OUT '%s' is inside DIR '%s'; "
                                "give a directory outside the recording",
                                outdir, indir);
  int err = stkr_cli_check_out_dir("symbolize", outdir);
  if (err != 0)
    return err;
  if (mkdir(outdir, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "stackrec symbolize: cannot create %s: %s\n", outdir,
            strerror(errno));
    return STKR_CLI_DATA_LOST; /* an output failure: 3 names inputs */
  }
  if (stat(outdir, &a) == 0 && stat(indir, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return stkr_cli_usage_error("symbolize", "OUT '%s' is DIR itself", outdir);
  if (stkr_fmt_dir_has_segments(outdir) == 1)
    return stkr_cli_usage_error("symbolize",
                                "OUT '%s' already holds segment files; "
                                "give an empty or new directory", outdir);
  return 0;
}

/* What a run did, on stdout. */
static void print_summary(const stkr__sym_run *run, const char *outdir) {
  unsigned long long pcs = stkr__symc_resolved(run->c),
                     named = stkr__symc_named(run->c),
                     frames = stkr__symc_frames(run->c);
  /* Named, not looked up: a PC whose image has no usable file stays
   * image+offset (QA, session 39: "11 unique PCs resolved" where 9 were
   * not). */
  printf("%llu segment file%s, %llu batch%s, %llu stack%s: %llu unique PC%s, "
         "%llu named, %llu left image+offset, in %llu frame%s; written to "
         "%s\n",
         (unsigned long long)run->files, run->files == 1 ? "" : "s",
         (unsigned long long)run->batches, run->batches == 1 ? "" : "es",
         (unsigned long long)run->stacks, run->stacks == 1 ? "" : "s", pcs,
         pcs == 1 ? "" : "s", named, pcs - named, frames,
         frames == 1 ? "" : "s", outdir);
  if (run->copied_files)
    printf("%llu file%s already had frames and %s copied unchanged\n",
           (unsigned long long)run->copied_files,
           run->copied_files == 1 ? "" : "s",
           run->copied_files == 1 ? "was" : "were");
  if (run->renamed_pcs)
    printf("%llu PC%s the recording had left image+offset or without "
           "file:line %s resolved now, in %llu stack%s of %llu file%s\n",
           (unsigned long long)run->renamed_pcs, run->renamed_pcs == 1 ? "" : "s",
           run->renamed_pcs == 1 ? "was" : "were",
           (unsigned long long)run->renamed_stacks,
           run->renamed_stacks == 1 ? "" : "s",
           (unsigned long long)run->renamed_files,
           run->renamed_files == 1 ? "" : "s");
  if (run->mixed_files)
    printf("%llu file%s of an in-process recording had stacks without "
           "frames (first seen as it ended, or recovered): only those were "
           "resolved\n",
           (unsigned long long)run->mixed_files,
           run->mixed_files == 1 ? "" : "s");
}

/* An empty recording (no segment, nothing else): as every reader takes
 * it (QA: exit 1 here, 0 elsewhere), OUT is an empty recording too, with
 * the marks file if there is one. */
static int symbolize_empty(const char *indir, const char *outdir) {
  int err;

  if ((err = make_outdir(indir, outdir)) != 0)
    return err;
  char marks[PATH_MAX + sizeof STKR_MARKS_FILE + 1];
  snprintf(marks, sizeof marks, "%s/%s", outdir, STKR_MARKS_FILE);
  if (access(marks, F_OK) == 0) /* a second run would double its lines */
    return stkr_cli_usage_error("symbolize",
                                "OUT '%s' already holds %s; give an "
                                "empty or new directory", outdir,
                                STKR_MARKS_FILE);
  if ((err = stkr_marks_copy(indir, outdir)) != 0) {
    stkr_cli_marks_copy_said("symbolize", indir, err);
    return STKR_CLI_DATA_LOST;
  }
  bool marks_bad = marks_damage_said(indir) != 0;
  printf("an empty recording (no process made a watched call): nothing "
         "to symbolize; written to %s\n", outdir);
  return stkr_cli_flush("symbolize") != 0 || marks_bad ? STKR_CLI_DATA_LOST
                                                       : STKR_CLI_OK;
}

int stkr_cli_symbolize(int argc, char **argv) {
  const char *dirs[MAX_DIRS];
  size_t n_dirs = 0, n_segs = 0;
  char outbuf[PATH_MAX], *indir;
  const char *outdir = NULL, *symcache = NULL;
  stkr__sym_seg *segs = NULL;
  struct stat st;
  stkr__sym_run run;
  int err;

  if ((err = parse_args(argc, argv, dirs, &n_dirs, &outdir, &symcache)) >= 0)
    return err;
  indir = argv[optind];
  if (stat(indir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "stackrec symbolize: cannot open %s: %s\n", indir,
            stat(indir, &st) != 0 ? strerror(errno) : "not a directory");
    return STKR_CLI_NO_INPUT;
  }
  if (!outdir) {
    /* Beside DIR, named after what DIR is: "." or "DIR/." is a directory
     * with a name of its own, not "." (QA, session 40). */
    char real[PATH_MAX];
    const char *base = realpath(indir, real) != NULL ? real : indir;
    size_t l = strlen(base);
    while (l > 1 && base[l - 1] == '/') l--;
    snprintf(outbuf, sizeof outbuf, "%.*s-symbolized", (int)l, base);
    outdir = outbuf;
  }
  if ((err = stkr__sym_list_segments(indir, &segs, &n_segs)) < 0) {
    fprintf(stderr, "stackrec symbolize: cannot list %s: %s\n", indir,
            strerror(-err));
    return STKR_CLI_NO_INPUT;
  }
  if (n_segs == 0 && stkr_cli_dir_empty(indir)) {
    free(segs);
    return symbolize_empty(indir, outdir);
  }
  if (n_segs == 0) {
    fprintf(stderr, "stackrec symbolize: no segment files "
                    "(stackrec-<pid>-<seq>.zst) in %s\n", indir);
    free(segs);
    return STKR_CLI_DATA_LOST;
  }
  if ((err = make_outdir(indir, outdir)) != 0)
    goto out_segs;

  memset(&run, 0, sizeof run);
  run.cmd = "symbolize";
  run.symcache_dir = symcache;
  if ((err = stkr__sym_run_segments(&run, indir, outdir, segs, n_segs, dirs, n_dirs)) <
      0) {
    err = STKR_CLI_DATA_LOST;
    goto out_run;
  }
  print_summary(&run, outdir);
  stkr_cli_swift_note(stdout, "symbolize", "");
  err = run.status;
  /* Dead writers' events in DIR's ring files are in no segment, nor in OUT
   * (QA, session 29: exit 0 without a word). */
  char where[PATH_MAX + 8];
  snprintf(where, sizeof where, "in %s", outdir);
  if (stkr_cli_rings_left_said("symbolize", indir, where) &&
      err == STKR_CLI_OK)
    err = STKR_CLI_DATA_LOST;
  int merr = stkr_marks_copy(indir, outdir); /* `stackrec mark`'s marks */
  if (merr != 0) {
    stkr_cli_marks_copy_said("symbolize", indir, merr);
    err = STKR_CLI_DATA_LOST;
  } else if (marks_damage_said(indir) != 0) {
    err = STKR_CLI_DATA_LOST;
  }
  if (stkr_cli_flush("symbolize") != 0) err = STKR_CLI_DATA_LOST;
out_run:
  stkr__sym_run_free(&run);
out_segs:
  STKR_FREE_EACH(segs, n_segs, name);
  free(segs);
  return err;
}
