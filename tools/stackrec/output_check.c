/*
 * output_check.c: an output path that would destroy what is being read.
 *
 * QA (session 25): `export -o REC/stackrec-P-000001.zst REC` exited 0 and
 * left a recording whose segment now held the export (verify: DAMAGED);
 * report --html, compliance, privacy-manifest and diff did the same,
 * while merge and symbolize refused. One check for every command that
 * writes a file next to what it reads, and the inode helpers merge's own
 * checks use.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/stkr_format.h"
#include "proto/stkr_reader.h"
#include "tools/stackrec/cli.h"

int stkr_cli_stat_dir_of(const char *path, char *dir, struct stat *st) {
  const char *slash = strrchr(path, '/');

  if (slash == NULL)
    snprintf(dir, PATH_MAX, ".");
  else
    snprintf(dir, PATH_MAX, "%.*s", (int)(slash - path) + (slash == path),
             path);
  return stat(dir, st) == 0 ? 0 : -1;
}

bool stkr_cli_same_inode(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* A name a recording directory's reader or recovery takes as its own. */
static bool recording_name(const char *base) {
  uint32_t pid, seq;
  size_t n = strlen(base);
  return stkr_fmt_segment_parse(base, &pid, &seq) == 0 ||
         strcmp(base, STKR_MARKS_FILE) == 0 ||
         (n > 8 && strcmp(base + n - 8, ".session") == 0) ||
         (n > 5 && strcmp(base + n - 5, ".ring") == 0);
}

/* Would writing path (which exists: *so; its directory: *sd, if in_dir)
 * destroy input in? @return "the same file as", "a file of", or NULL. */
static const char *clobbers(const char *in, bool exists, const struct stat *so,
                            bool in_dir, const struct stat *sd) {
  struct stat si, sdi;
  char dir[PATH_MAX];

  if (in == NULL || stat(in, &si) != 0) return NULL; /* said when opened */
  if (exists && stkr_cli_same_inode(so, &si)) return "the same file as";
  if (!in_dir) return NULL;
  /* A directory is the recording; a file's recording is its directory
   * (the reader takes its marks file, recovery its ring files, there). */
  if (S_ISDIR(si.st_mode)) return stkr_cli_same_inode(sd, &si) ? "a file of" : NULL;
  if (stkr_cli_stat_dir_of(in, dir, &sdi) == 0 && stkr_cli_same_inode(sd, &sdi))
    return "a file of the recording of";
  return NULL;
}

int stkr_cli_check_output(const char *cmd, const char *opt, const char *path,
                          char *const *inputs, int n) {
  struct stat so, sd;
  char dir[PATH_MAX];
  const char *slash, *base, *how;
  bool exists, in_dir;

  if (path == NULL || strcmp(path, "-") == 0) return 0;
  if (path[0] == '\0')
    return stkr_cli_usage_error(cmd, "%s: empty file name", opt);
  exists = stat(path, &so) == 0;
  slash = strrchr(path, '/');
  base = slash != NULL ? slash + 1 : path;
  in_dir = recording_name(base) && stkr_cli_stat_dir_of(path, dir, &sd) == 0;
  for (int i = 0; i < n; i++)
    if ((how = clobbers(inputs[i], exists, &so, in_dir, &sd)) != NULL)
      return stkr_cli_usage_error(
          cmd, "%s '%s' is %s the input '%s': write it elsewhere", opt, path,
          how, inputs[i]);
  return 0;
}
