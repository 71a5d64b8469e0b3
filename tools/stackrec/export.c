/*
 * export.c: `stackrec export`: options, input and output, dispatch to a
 * format writer (export_*.c), and the helpers they share (export.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/export.h"

static const char export_help[] =
    "Usage: stackrec export --format pprof|folded|chrome|jsonl [-o FILE]\n"
    "                       [--site GLOB] [--thread NAME|TID]\n"
    "                       [--from SEC] [--to SEC] [--app-only]\n"
    "                       [--granularity line|function|address]\n"
    "                       DIR|FILE...\n"
    "\n"
    "Write the events of the recordings in a format other tools read.\n"
    "\n"
    "Formats:\n"
    "  pprof   gzipped profile.proto for `go tool pprof` and other pprof\n"
    "          viewers: sample type events/count, one sample per distinct\n"
    "          stack, thread, process and payload; labels \"site\",\n"
    "          \"thread\", \"pid\", \"process\" and \"payload\";\n"
    "          locations leaf first, inlined calls as extra Line entries\n"
    "          (innermost first), functions with name and source file,\n"
    "          mappings with file name and hex build-id. Binary: needs -o\n"
    "          FILE or a stdout that is not a terminal\n"
    "  folded  collapsed stacks for flamegraph.pl, speedscope, inferno:\n"
    "          one line per distinct stack, \"SITE;ROOT;...;LEAF COUNT\",\n"
    "          sorted; ';' in a name becomes ':' and control characters '?'\n"
    "  chrome  Trace Event Format JSON for Perfetto UI and chrome://tracing:\n"
    "          one instant event per recorded event on its thread's track\n"
    "          (thread_name and process_name metadata events), ts the\n"
    "          recording's monotonic clock in microseconds, the stack as \"sf\" (into\n"
    "          the stackFrames dictionary) and as args.stack (leaf first)\n"
    "  jsonl   one JSON object per event, the keys of `stackrec dump\n"
    "          --json`; \"frames\" is present when the stack was symbolized\n"
    "\n"
    "A frame is named by its function, or IMAGE+0xOFFSET when unknown, or\n"
    "0xPC when not even its image is known. pprof and folded add up the\n"
    "events of equal stacks across processes and recordings.\n"
    "\n"
    "Options:\n"
    "  -f, --format FMT  the output format (required)\n"
    "  -o, --output FILE write FILE (replaced only when complete); '-' or\n"
    "                    no -o: stdout. A FILE ending in .zst is written\n"
    "                    zstd-compressed (zstd -d reads it)\n"
    "  -h, --help        this help\n";

static const char export_help_more[] =
    "\n"
    "Events dropped by the recorder are not in any export; their count is\n"
    "printed on stderr whenever there were any.\n"
    "\n";

typedef int (*writer_fn)(stkr__export *x);

static const struct {
  const char *name;
  writer_fn fn;
  bool binary;      /* refuse a terminal as stdout */
  bool lazy_frames; /* see stkr_reader_opts */
} formats[] = {
    {"pprof", stkr__export_pprof, true, true},
    {"folded", stkr__export_folded, false, true},
    {"chrome", stkr__export_chrome, false, true},
    {"jsonl", stkr__export_jsonl, false, false},
};

/* ---- progress ------------------------------------------------------------ */

void stkr__progress(uint64_t events, void *arg) {
  stkr__export *x = arg;

  stkr_cli_progress_update(&x->progress, events, NULL);
}

void stkr__progress_end(stkr__export *x) {
  stkr_cli_progress_done(&x->progress);
}

int stkr__app_frames(const stkr_frame *f, size_t n, bool app_only,
                     stkr_frame **scratch, size_t *scratch_cap,
                     const stkr_frame **out, size_t *n_out) {
  size_t i;

  *out = f;
  *n_out = n;
  if (!app_only || n == 0)
    return 0;
  for (i = 0; i < n && f[i].is_app; i++)
    ;
  if (i == n)
    return 0; /* all the app's */
  if (*scratch_cap < n) {
    stkr_frame *s = realloc(*scratch, n * sizeof *s);
    if (s == NULL)
      return -ENOMEM;
    *scratch = s;
    *scratch_cap = n;
  }
  *n_out = stkr_agg_app_frames(f, n, *scratch);
  *out = *scratch;
  return 0;
}

/* ---- map ------------------------------------------------------------------- */

/* The index of key in m, or STKR_INDEX_NONE. */
static size_t map_find(const stkr__map *m, uint64_t h, const void *key,
                       size_t len) {
  size_t pos, i;

  for (i = stkr_index_first(&m->ix, h, &pos); i != STKR_INDEX_NONE;
       i = stkr_index_next(&m->ix, h, &pos))
    if (m->v[i].len == len && memcmp(m->v[i].key, key, len) == 0)
      return i;
  return STKR_INDEX_NONE;
}

int stkr__map_put(stkr__map *m, const void *key, size_t len, uint64_t *val,
                  const char **key_copy) {
  uint64_t h = stkr_hash_bytes(STKR_HASH_SEED, key, len);
  size_t i = map_find(m, h, key, len);
  stkr__map_ent *e;

  if (i != STKR_INDEX_NONE) {
    *val = m->v[i].val;
    if (key_copy != NULL)
      *key_copy = m->v[i].key;
    return 1;
  }
  if (stkr_grow((void **)&m->v, &m->cap, m->n + 1, sizeof *m->v) != 0 ||
      stkr_index_reserve(&m->ix, m->n + 1) != 0)
    return -ENOMEM;
  e = &m->v[m->n];
  if ((e->key = malloc(len + 1)) == NULL)
    return -ENOMEM;
  memcpy(e->key, key, len);
  e->key[len] = '\0';
  e->len = len;
  e->val = *val;
  (void)stkr_index_add(&m->ix, h, m->n++); /* reserved above */
  if (key_copy != NULL)
    *key_copy = e->key;
  return 0;
}

int stkr__map_get(const stkr__map *m, const void *key, size_t len,
                  uint64_t *val) {
  size_t i = map_find(m, stkr_hash_bytes(STKR_HASH_SEED, key, len), key, len);

  if (i == STKR_INDEX_NONE)
    return 0;
  *val = m->v[i].val;
  return 1;
}

void stkr__map_free(stkr__map *m) {
  STKR_FREE_EACH(m->v, m->n, key);
  free(m->v);
  stkr_index_free(&m->ix);
  memset(m, 0, sizeof *m);
}

/* ---- the command ------------------------------------------------------------- */

/* A number of seconds, >= 0. */
/* Where the output goes: stdout, a device or FIFO as is, or a regular file
 * through a temporary name in the same directory, renamed into place only
 * when complete (no half-written profile under the final name). */
typedef struct output {
  const char *path; /* NULL: stdout */
  char *tmp;        /* the temporary name, or NULL (written in place) */
  FILE *f;
} output;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Open the output: stdout, or path (through a temporary name), zstd-
 * compressed when path ends in ".zst". */
static int output_open(output *o, const char *path) {
  struct stat st;

  memset(o, 0, sizeof *o);
  if (path == NULL || strcmp(path, "-") == 0) {
    o->f = stdout;
    return 0;
  }
  o->path = path;
  /* A link (/dev/stdout, /proc/self/fd/N, a user's own) is written
   * through, as the other commands' outputs are: renamed over, the link
   * itself was replaced, and `-o /dev/stdout > file` left the file empty
   * (QA, session 47). Only a plain name gets the temporary file. */
  if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    o->f = fopen(path, "wb");
  } else {
    /* Made by mkostemp (O_CREAT | O_EXCL: never through a link someone
     * put under the name, which a plain open would have written; QA,
     * session 40: a link planted at FILE.tmp-PID in a shared directory
     * let export overwrite any file of the user's), with the mode a
     * plain create would have given it. */
    int fd;
    mode_t um = umask(0);
    umask(um);
    if (asprintf(&o->tmp, "%s.tmp-XXXXXX", path) < 0) {
      o->tmp = NULL;
      errno = ENOMEM;
      return -ENOMEM;
    }
    if ((fd = mkostemp(o->tmp, O_CLOEXEC)) < 0) {
      o->f = NULL;
    } else if (fchmod(fd, 0666 & ~um) != 0 ||
               (o->f = fdopen(fd, "wb")) == NULL) {
      int saved = errno;
      close(fd);
      unlink(o->tmp);
      errno = saved;
      o->f = NULL;
    }
  }
  if (o->f != NULL && ends_with(path, ".zst")) {
    FILE *z = stkr_cli_zstd_writer(o->f);
    if (z == NULL) {
      int saved = errno;
      fclose(o->f);
      if (o->tmp != NULL)
        unlink(o->tmp);
      errno = saved;
    }
    o->f = z;
  }
  if (o->f == NULL) {
    int err = -errno;
    fprintf(stderr, "stackrec export: cannot create %s: %s\n", path,
            strerror(errno));
    free(o->tmp);
    o->tmp = NULL;
    return err;
  }
  return 0;
}

/* Finish the output: flush, close, rename into place (ok) or remove the
 * temporary file (!ok). @return 0, or 1 after printing why writing
 * failed. */
static int output_close(output *o, bool ok) {
  const char *name = o->path ? o->path : "stdout";
  int status = 0;

  if (fflush(o->f) != 0 || ferror(o->f)) {
    fprintf(stderr, "stackrec export: writing %s: %s\n", name,
            strerror(errno ? errno : EIO));
    status = STKR_CLI_DATA_LOST;
  }
  if (o->f != stdout && fclose(o->f) != 0 && status == 0) {
    fprintf(stderr, "stackrec export: writing %s: %s\n", name,
            strerror(errno));
    status = STKR_CLI_DATA_LOST;
  }
  if (o->tmp != NULL) {
    if (ok && status == 0 && rename(o->tmp, o->path) != 0) {
      fprintf(stderr, "stackrec export: cannot rename %s to %s: %s\n",
              o->tmp, o->path, strerror(errno));
      status = STKR_CLI_DATA_LOST;
    }
    if (!ok || status != 0)
      unlink(o->tmp);
    free(o->tmp);
  }
  return status;
}

int stkr_cli_export(int argc, char **argv) {
  const char *format = NULL, *out_path = NULL;
  const stkr_cli_opt opts[] = {
      {"format", 'f', STKR_CLI_SHORT | STKR_CLI_VALUE, &format, NULL},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, &out_path, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {
      .cmd = "export", .opts = opts, .more_opts = stkr__filter_opts,
      .help = {export_help, stkr__filter_help, export_help_more,
               stkr_cli_exit_help}};
  stkr__export x;
  output out;
  size_t fi, nf = sizeof formats / sizeof formats[0];
  int err, status;

  memset(&x, 0, sizeof x);
  if (stkr__filter_getopt(&gopt, argc, argv, &x.filt) == STKR_CLI_OPT_EXIT)
    return gopt.status;
  if (format == NULL)
    return stkr_cli_usage_error("export",
                                "--format pprof|folded|chrome|jsonl is "
                                "required");
  for (fi = 0; fi < nf && strcmp(formats[fi].name, format) != 0; fi++)
    ;
  if (fi == nf)
    return stkr_cli_usage_error(
        "export", "unknown format '%s' (pprof, folded, chrome or jsonl)",
        format);
  if ((err = stkr__filter_args_end("export", &x.filt, argc)) >= 0)
    return err;
  if (formats[fi].binary && (out_path == NULL || strcmp(out_path, "-") == 0) &&
      isatty(STDOUT_FILENO))
    return stkr_cli_usage_error(
        "export", "%s output is binary: give -o FILE or redirect stdout",
        format);

  if ((status = stkr_cli_check_output("export", "-o", out_path, argv + optind,
                                      argc - optind)) != 0)
    return status;
  status = stkr_cli_open("export", argv + optind, argc - optind,
                         formats[fi].lazy_frames, &x.r);
  if (status != 0)
    return status;
  if (output_open(&out, out_path) != 0) {
    stkr_reader_free(x.r);
    return STKR_CLI_DATA_LOST;
  }
  x.out = out.f;
  x.out_name = out_path && strcmp(out_path, "-") != 0 ? out_path : "stdout";
  stkr_cli_progress_init(&x.progress, "export");

  err = formats[fi].fn(&x);
  stkr__progress_end(&x);
  if (err != 0) {
    fprintf(stderr, "stackrec export: %s\n",
            err == -ENOMEM ? "out of memory" : strerror(-err));
    output_close(&out, false);
    stkr_reader_free(x.r);
    return STKR_CLI_DATA_LOST;
  }
  status = stkr_cli_status(x.r);
  /* Keep the export when some input was damaged: it holds every intact
   * event, and the exit status says that data was lost. */
  if (output_close(&out, true) != 0)
    status = STKR_CLI_DATA_LOST;
  stkr_cli_note_left_out(x.r, "export", "the export");
  stkr_reader_free(x.r);
  return status;
}
