/*
 * testlib.c: see testlib.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include "tests/testlib.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

void tl_slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  size_t n = 0;

  if (f != NULL) {
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
  }
  buf[n] = '\0';
}

void tl_fmt(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap)
    fail_msg("tl_fmt: %d bytes do not fit in %zu: %.80s...", n, cap, buf);
}

char *tl_slurp_alloc(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;

  if (f == NULL)
    fail_msg("cannot open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  assert_true(n >= 0);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  if (len != NULL)
    *len = (size_t)n;
  return buf;
}

int tl_mkdtemp(char *dir, size_t cap, const char *tag) {
  const char *t = getenv("TEST_TMPDIR");
  int n = snprintf(dir, cap, "%s/%s-XXXXXX", t != NULL ? t : "/tmp", tag);

  if (n < 0 || (size_t)n >= cap) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return mkdtemp(dir) != NULL ? 0 : -1;
}

int tl_rm_rf(const char *dir) {
  char cmd[4200];
  int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);

  if (n < 0 || (size_t)n >= sizeof cmd || strchr(dir, '\'') != NULL)
    return -1; /* not a path this shell line can quote */
  return system(cmd) == 0 ? 0 : -1;
}

const char *tl_fresh(const char *dir, const char *tag) {
  static char buf[4096];
  static int n;

  snprintf(buf, sizeof buf, "%s/%s-%d", dir, tag, ++n);
  return buf;
}

/* Calls fn(dir, name, arg) for each entry of dir whose name ends in suffix
 * (and is longer). @return how many. */
static int tl_each_suffix(const char *dir, const char *suffix,
                          void (*fn)(const char *, const char *, void *),
                          void *arg) {
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t sl = strlen(suffix);
  int n = 0;

  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0) {
      if (fn != NULL)
        fn(dir, e->d_name, arg);
      n++;
    }
  }
  closedir(d);
  return n;
}

int tl_count_files(const char *dir, const char *suffix) {
  return tl_each_suffix(dir, suffix, NULL, NULL);
}

typedef struct tl_path {
  char *out;
  size_t cap;
} tl_path;

static void tl_keep_path(const char *dir, const char *name, void *arg) {
  const tl_path *p = arg;

  snprintf(p->out, p->cap, "%s/%s", dir, name);
}

void tl_find_file(const char *dir, const char *suffix, char *out, size_t cap) {
  tl_path p = {out, cap};

  out[0] = '\0';
  tl_each_suffix(dir, suffix, tl_keep_path, &p);
  assert_true(out[0] != '\0');
}

static int write_mode(const char *path, const char *text, const char *mode) {
  FILE *f = fopen(path, mode);

  if (f == NULL)
    return -1;
  fputs(text, f);
  return fclose(f) == 0 ? 0 : -1;
}

int tl_write_file(const char *path, const char *text) {
  return write_mode(path, text, "w");
}

int tl_append_file(const char *path, const char *text) {
  return write_mode(path, text, "a");
}

int tl_write_bytes(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ssize_t k = fd < 0 ? -1 : write(fd, data, len);

  if (fd >= 0 && close(fd) != 0) return -1;
  return k == (ssize_t)len ? 0 : -1;
}

double tl_now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int tl_vsh(const tl_capture *c, const char *fmt, va_list ap) {
  /* Commands name a few paths of at most 4 KiB each. */
  static char cmd[32768], full[32768 + 8600];
  char o[4200], e[4200];
  const char *dir = c->dir ? c->dir : getenv("TEST_TMPDIR");
  int st;

  vsnprintf(cmd, sizeof cmd, fmt, ap);
  snprintf(o, sizeof o, "%s/sh.out", dir ? dir : "/tmp");
  snprintf(e, sizeof e, "%s/sh.err", dir ? dir : "/tmp");
  snprintf(full, sizeof full, "%s >'%s' 2>'%s'", cmd, o, e);
  st = system(full);
  tl_slurp(o, c->out, c->out_cap);
  tl_slurp(e, c->err, c->err_cap);
  if (WIFEXITED(st))
    return WEXITSTATUS(st);
  if (c->fail_if_killed)
    fail_msg("%s: killed (status %#x)\n%s", cmd, st, c->err);
  fprintf(stderr, "%s: did not exit (status %#x)\n%s\n", cmd, st, c->err);
  return c->killed;
}

int tl_sh(const tl_capture *c, const char *fmt, ...) {
  va_list ap;
  int st;

  va_start(ap, fmt);
  st = tl_vsh(c, fmt, ap);
  va_end(ap);
  return st;
}

const char *tl_runfile(char *buf, size_t cap, const char *rel) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");

  snprintf(buf, cap, "%.2000s/%.100s/%s", src ? src : ".",
           ws ? ws : "stackrec", rel);
  return buf;
}

int tl_hook_paths(const char *tag, char *bin, size_t bin_cap, char *lib,
                  size_t lib_cap, char *tmp, size_t tmp_cap) {
  const char *t = getenv("TEST_TMPDIR");

  tl_runfile(bin, bin_cap, "tools/stackrec");
  tl_runfile(lib, lib_cap, "preload/libstackrec_preload.so");
  snprintf(tmp, tmp_cap, "%.2000s/%s", t ? t : "/tmp", tag);
  mkdir(tmp, 0700);
  if (access(bin, X_OK) != 0 || access(lib, R_OK) != 0) {
    fprintf(stderr, "missing %s or %s\n", bin, lib);
    return -1;
  }
  return 0;
}

typedef struct tl_rt {
  char *out;
  size_t cap;
} tl_rt;

static int tl_find_asan(struct dl_phdr_info *info, size_t size, void *arg) {
  const tl_rt *rt = arg;
  const char *b = strrchr(info->dlpi_name, '/');

  (void)size;
  b = b ? b + 1 : info->dlpi_name;
  if (strncmp(b, "libasan", 7) != 0)
    return 0;
  snprintf(rt->out, rt->cap, "%s", info->dlpi_name);
  return 1;
}

void tl_asan_runtime(char *out, size_t cap) {
  tl_rt rt = {out, cap};

  out[0] = '\0';
  dl_iterate_phdr(tl_find_asan, &rt);
}

void tl_run_child(int (*body)(void *arg), void *arg) {
  pid_t pid = fork();
  int st = 0;

  assert_true(pid >= 0);
  if (pid == 0)
    _exit(body(arg));
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("child %d: status %#x, expected exit 0", (int)pid, st);
}

int tl_system(const char *fmt, ...) {
  char cmd[16384];
  va_list ap;
  int st;

  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tl_count(const char *hay, const char *needle) {
  int n = 0;

  for (; (hay = strstr(hay, needle)) != NULL; hay += strlen(needle))
    n++;
  return n;
}

void tl__assert_has(const char *s, const char *const *texts) {
  for (; *texts != NULL; texts++)
    if (strstr(s, *texts) == NULL)
      fail_msg("no \"%s\" in:\n%s", *texts, s);
}

/* How many names the comma-separated list holds (as the preprocessor
 * spells #__VA_ARGS__: "a, b, c"); each is cut out in place (list is a
 * copy) and the first cap of them put into out. */
static size_t split_names(char *list, const char **out, size_t cap) {
  size_t n = 0;

  for (char *p = list; p != NULL && *p != '\0'; n++) {
    char *comma = strchr(p, ',');

    if (comma != NULL)
      *comma = '\0';
    while (*p == ' ')
      p++;
    if (n < cap)
      out[n] = p;
    p = comma != NULL ? comma + 1 : NULL;
  }
  return n;
}

char tl_dir[256];

/* The group tl_run_group runs: tl_make_dir's tag. */
static const char *g_group = "test";

int tl_make_dir(void **state) {
  (void)state;
  return tl_mkdtemp(tl_dir, sizeof tl_dir, g_group);
}

int tl_rm_dir(void **state) {
  (void)state;
  return tl_rm_rf(tl_dir);
}

const char *tl_group(void) { return g_group; }

int tl_run_group(const char *group, tl_fixture_fn group_setup,
                 tl_fixture_fn group_teardown, const tl_cases *runs) {
  size_t total = 0, nruns = 0, n = 0;
  int status = 1;

  g_group = group;

  for (const tl_cases *r = runs; r->names != NULL; r++, nruns++)
    for (size_t i = 0; r->tests != NULL ? r->tests[i] != NULL : i < r->n_rows;
         i++)
      total++;

  /* cmocka keeps pointers to the names while the group runs: one copy of
   * each run's list, cut into names, lives until the end. */
  struct CMUnitTest *tests = calloc(total + 1, sizeof *tests);
  const char **names = calloc(total + 1, sizeof *names);
  char **lists = calloc(nruns + 1, sizeof *lists);

  if (tests == NULL || names == NULL || lists == NULL)
    goto out;
  for (size_t k = 0; k < nruns; k++) {
    const tl_cases *r = &runs[k];
    size_t count = 0;

    if (r->tests != NULL) { /* TL_CASES: the functions' names, as written */
      while (r->tests[count] != NULL)
        count++;
      lists[k] = strdup(r->names);
      if (lists[k] == NULL ||
          split_names(lists[k], names + n, total - n) != count) {
        fprintf(stderr, "%s: \"%s\" does not name %zu test functions\n",
                group, r->names, count);
        goto out;
      }
    }
    for (size_t i = 0; i < (r->tests != NULL ? count : r->n_rows); i++, n++) {
      /* TL_TABLE: each row names its case and is its state. */
      const char *row =
          r->tests == NULL ? (const char *)r->rows + i * r->row_size : NULL;

      if (row != NULL)
        memcpy(&names[n], row, sizeof names[n]);
      tests[n].name = names[n];
      tests[n].test_func = row != NULL ? r->row_test : r->tests[i];
      tests[n].setup_func = r->setup;
      tests[n].teardown_func = r->teardown;
      tests[n].initial_state = (void *)row;
    }
  }
  status = _cmocka_run_group_tests(group, tests, n, group_setup,
                                   group_teardown);
out:
  for (size_t k = 0; lists != NULL && k < nruns; k++)
    free(lists[k]);
  free(lists);
  free(names);
  free(tests);
  return status;
}

static int main_bias(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  *(uintptr_t *)arg = (uintptr_t)info->dlpi_addr;
  return 1; /* the main program comes first */
}

int tl_exe_section(const char *name, uintptr_t *addr, size_t *size) {
  size_t len = 0;
  char *f = tl_slurp_alloc("/proc/self/exe", &len);
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
  const Elf64_Shdr *sh;
  uintptr_t bias = 0;
  int rc = -1;

  if (f == NULL || len < sizeof *eh || eh->e_shoff > len ||
      eh->e_shnum > (len - eh->e_shoff) / sizeof *sh ||
      eh->e_shstrndx >= eh->e_shnum)
    goto out;
  sh = (const Elf64_Shdr *)(f + eh->e_shoff);
  dl_iterate_phdr(main_bias, &bias);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    size_t at = sh[eh->e_shstrndx].sh_offset + sh[i].sh_name;
    if (at + strlen(name) + 1 <= len && strcmp(f + at, name) == 0) {
      *addr = bias + (uintptr_t)sh[i].sh_addr;
      *size = (size_t)sh[i].sh_size;
      rc = 0;
      break;
    }
  }
out:
  free(f);
  return rc;
}
