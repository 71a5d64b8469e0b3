/*
 * output_check.c: an output path that would destroy what is being read.
 *
 * QA (session 25): `export -o REC/stackrec-P-000001.zst REC` exited 0 and
 * left a recording whose segment now held the export (verify: DAMAGED);
 * report --html, compliance, privacy-manifest and diff did the same,
 * while merge and symbolize refused. One check for every command that
 * writes a file next to what it reads, the inode helpers, and merge's own
 * checks of its OUT and inputs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Can path be written? Asked before the inputs are read, which may take
 * minutes: an output that cannot be made was said only after them (QA,
 * session 46: `report --html` into a missing directory). Nothing is kept
 * or cut: a regular file is opened for writing and closed, a new one made
 * and removed again. Anything else (a FIFO, a device) is left to the
 * command's own open: opening a FIFO's reader's only writer and closing
 * it would end that reader. @return 0, or STKR_CLI_DATA_LOST after
 * stkr_cli_create's message. */
static int output_writable(const char *cmd, const char *path, bool exists,
                           const struct stat *so) {
  int fd;

  if (exists && S_ISDIR(so->st_mode)) {
    errno = EISDIR;
    fd = -1;
  } else if (exists && !S_ISREG(so->st_mode)) {
    return 0;
  } else {
    fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK |
                        (exists ? 0 : O_CREAT | O_EXCL),
              0666);
  }
  if (fd < 0) {
    if (!exists && errno == EEXIST) return 0; /* made meanwhile: its open */
    fprintf(stderr, "stackrec %s: cannot create %s: %s\n", cmd, path,
            strerror(errno));
    return STKR_CLI_DATA_LOST;
  }
  close(fd);
  if (!exists) (void)unlink(path);
  return 0;
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
  return output_writable(cmd, path, exists, &so);
}

/* ---- merge's inputs and OUT (cli.h) ---- */

bool stkr_cli_path_inside(const char *outdir, const struct stat *in) {
  char path[PATH_MAX + 8], *slash;
  struct stat st;

  if (realpath(outdir, path) == NULL) { /* not made yet: a child of its parent */
    char tmp[PATH_MAX], parent[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", outdir);
    if (realpath(dirname(tmp), parent) == NULL) return false;
    snprintf(path, sizeof path, "%s/x", parent);
  }
  /* Every ancestor of path, from its parent up to "/". */
  while ((slash = strrchr(path, '/')) != NULL) {
    if (slash == path) slash[1] = '\0';
    else *slash = '\0';
    if (stat(path, &st) == 0 && st.st_dev == in->st_dev &&
        st.st_ino == in->st_ino)
      return true;
    if (slash == path) break;
  }
  return false;
}

int stkr_cli_check_out_dir(const char *cmd, const char *out) {
  struct stat st;

  if (stat(out, &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return stkr_cli_usage_error(cmd, "OUT '%s' is not a directory", out);
    return 0;
  }
  /* A link to nowhere: mkdir would fail (EEXIST), then every write into
   * it (QA, session 40: exit 1 where a file gave 2). */
  if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode))
    return stkr_cli_usage_error(cmd, "OUT '%s' is a symbolic link that "
                                "leads nowhere", out);
  return 0;
}

int stkr_cli_merge_check_out(const char *out, char *const *in, int n) {
  struct stat so, si;
  int i;

  for (i = 0; i < n; i++)
    if (stat(in[i], &si) == 0 && S_ISDIR(si.st_mode) &&
        stkr_cli_path_inside(out, &si))
      return stkr_cli_usage_error("merge", "OUT '%s' is inside the input "
                                  "'%s': write the merge outside it", out,
                                  in[i]);
  int err = stkr_cli_check_out_dir("merge", out);
  if (err != 0 || stat(out, &so) != 0)
    return err; /* else created later: cannot be an input */
  char dir[PATH_MAX];
  for (i = 0; i < n; i++) {
    if (stat(in[i], &si) != 0)
      continue; /* reported when the input is opened */
    if (!S_ISDIR(si.st_mode) && stkr_cli_stat_dir_of(in[i], dir, &si) != 0)
      continue;
    if (stkr_cli_same_inode(&si, &so))
      return stkr_cli_usage_error(
          "merge", "OUT '%s' is the input '%s' (or holds it): write the "
          "merge to a new directory", out, in[i]);
  }
  return 0;
}

int stkr_cli_merge_check_repeats(char *const *in, int n) {
  struct stat *st = calloc((size_t)n, sizeof *st), dir;
  char dir_path[PATH_MAX];
  bool *ok = calloc((size_t)n, sizeof *ok);
  uint32_t pid, seq;
  int i, j, status = 0;

  if (st == NULL || ok == NULL) {
    free(st);
    free(ok);
    fprintf(stderr, "stackrec merge: %s\n", strerror(ENOMEM));
    return STKR_CLI_DATA_LOST;
  }
  for (j = 0; j < n; j++) /* a failed one is reported when opened */
    ok[j] = stat(in[j], &st[j]) == 0;
  for (j = 0; j < n && status == 0; j++) {
    const char *base = strrchr(in[j], '/');

    if (!ok[j])
      continue;
    for (i = 0; i < j && status == 0; i++)
      if (ok[i] && stkr_cli_same_inode(&st[i], &st[j]))
        status = stkr_cli_usage_error(
            "merge", "'%s' is the input '%s' again (the same %s): give each "
            "input once", in[j], in[i],
            S_ISDIR(st[j].st_mode) ? "directory" : "file");
    base = base ? base + 1 : in[j];
    if (status != 0 || S_ISDIR(st[j].st_mode) ||
        stkr_fmt_segment_parse(base, &pid, &seq) != 0 ||
        stkr_cli_stat_dir_of(in[j], dir_path, &dir) != 0)
      continue;
    for (i = 0; i < n && status == 0; i++)
      if (ok[i] && S_ISDIR(st[i].st_mode) && stkr_cli_same_inode(&st[i], &dir))
        status = stkr_cli_usage_error(
            "merge", "'%s' is a segment file of the input '%s': give each "
            "input once", in[j], in[i]);
  }
  free(st);
  free(ok);
  return status;
}
