/*
 * replay_main.c: runs a fuzz target's LLVMFuzzerTestOneInput() on every
 * saved input as a plain test, without libFuzzer (tests/BUILD links it with
 * each tests/fuzz/fuzz_*.c under gcc, in the normal suite and under the
 * sanitizer configs).
 *
 *   replay --corpus DIR [--corpus DIR...] [--crashes DIR...]
 *
 * Every regular file under the directories (recursively; names starting
 * with '.' are skipped) is one case: it passes when the target returns
 * (a violated check aborts, a sanitizer report kills the process, and the
 * test then has no summary line and counts as failed). A --corpus
 * directory must hold at least one file; a --crashes directory may be
 * empty or missing (no crash saved: good). Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned g_passed, g_failed;
/* The test's stdout, kept aside: a target may point fd 1 elsewhere (the
 * CLI target sends its output to /dev/null). */
static FILE *g_out;

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0, n;

  if (f == NULL) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    g_failed++;
    return;
  }
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      buf = realloc(buf, cap);
      if (buf == NULL) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        exit(1);
      }
    }
    n = fread(buf + len, 1, cap - len, f);
    if (n == 0)
      break;
    len += n;
  }
  fclose(f);
  /* A copy of exactly `len` bytes, as libFuzzer passes it, so ASan sees
   * any read past the end. */
  {
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
  }
  free(buf);
  g_passed++;
}

/* @return files run under path. */
static unsigned run_tree(const char *path) {
  struct dirent **names;
  struct stat st;
  unsigned files = 0;
  int n, i;

  if (stat(path, &st) != 0)
    return 0;
  if (S_ISREG(st.st_mode)) {
    run_file(path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode))
    return 0;
  n = scandir(path, &names, NULL, by_name);
  if (n < 0)
    return 0;
  for (i = 0; i < n; i++) {
    char sub[4096];

    if (names[i]->d_name[0] != '.') {
      snprintf(sub, sizeof sub, "%s/%s", path, names[i]->d_name);
      files += run_tree(sub);
    }
    free(names[i]);
  }
  free(names);
  return files;
}

int main(int argc, char **argv) {
  int i;

  fflush(stdout);
  g_out = fdopen(dup(STDOUT_FILENO), "w");
  if (g_out == NULL)
    g_out = stdout;

  for (i = 1; i + 1 < argc; i += 2) {
    unsigned files;

    if (strcmp(argv[i], "--corpus") != 0 && strcmp(argv[i], "--crashes") != 0)
      break;
    files = run_tree(argv[i + 1]);
    fprintf(g_out, "replay: %s %s: %u file(s)\n", argv[i], argv[i + 1],
            files);
    if (files == 0 && strcmp(argv[i], "--corpus") == 0) {
      fprintf(stderr, "replay: corpus %s is empty or missing\n", argv[i + 1]);
      g_failed++;
    }
  }
  if (i != argc || argc == 1) {
    fprintf(stderr, "usage: replay --corpus DIR [--crashes DIR]...\n");
    g_failed++;
  }
  fprintf(g_out, "%u passed, %u failed\n", g_passed, g_failed);
  fflush(g_out);
  return g_failed ? 1 : 0;
}
