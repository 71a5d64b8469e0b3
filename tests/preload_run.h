/*
 * preload_run.h: what the preload tests share (test-preload.c, the hooks
 * and `stackrec record` on one program; test-preload-procs.c, threads,
 * signals and process trees): the paths of the tool, the hook library and
 * the fixtures, running `stackrec record`, reading a recording back into
 * plain structs, the fixture's function ranges (`nm -S`) and the setup
 * (a home with a key in it, the environment, the ASan runtime).
 * Header-only (static functions): each test binary includes it once.
 */
#ifndef STKR_TEST_PRELOAD_RUN_H
#define STKR_TEST_PRELOAD_RUN_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/testlib.h"

/* Inputs at most 2 KiB, so that every path built from them fits 4 KiB. */
static char g_bin[4096], g_lib[4096], g_fx_dir[4096], g_tmp[2048];
static char g_home[2100], g_probe[4096];
static char g_out[1 << 16], g_err[1 << 16];
static const tl_capture g_sh = {g_out, sizeof g_out, g_err, sizeof g_err,
                                g_tmp, true, -1};
/* Run a shell command line; stdout/stderr land in g_out/g_err. @return the
 * exit status (killed: fails the test). */
#define sh(...) tl_sh(&g_sh, __VA_ARGS__)

/* ---- running ---------------------------------------------------------------- */

/* A fresh directory name under g_tmp (not created). */
#define fresh(tag) tl_fresh(g_tmp, (tag))

/* `stackrec record -o DIR [opts] -- FIXTURE args`. */
static __attribute__((unused))
int record(const char *dir, const char *opts, const char *fixture,
           const char *args) {
  return sh("'%s' record -o '%s' %s -- '%s/%s' %s", g_bin, dir, opts,
            g_fx_dir, fixture, args);
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct ev {
  uint32_t pid;
  size_t proc;
  char site[64];
  char payload[512];
  uint64_t pcs[4];
  size_t n_pcs;
  bool stack_truncated;
  uint64_t tid;
  char thread_name[32];
} ev;

typedef struct rec {
  stkr_reader *r;
  ev *evs;
  size_t n;
} rec;

static __attribute__((unused)) void rec_load(rec *out, const char *dir) {
  stkr_event_view v;
  size_t cap = 0;
  int rc;

  memset(out, 0, sizeof *out);
  assert_int_equal(stkr_reader_open(dir, NULL, &out->r), 0);
  while ((rc = stkr_reader_next(out->r, &v)) == 1) {
    ev *e;
    if (out->n == cap) {
      cap = cap ? cap * 2 : 256;
      out->evs = realloc(out->evs, cap * sizeof *out->evs);
      assert_non_null(out->evs);
    }
    e = &out->evs[out->n++];
    memset(e, 0, sizeof *e);
    e->pid = v.pid;
    e->proc = v.process;
    snprintf(e->site, sizeof e->site, "%s", v.site);
    snprintf(e->payload, sizeof e->payload, "%.*s", (int)v.payload_len,
             v.payload ? (const char *)v.payload : "");
    e->n_pcs = v.n_pcs;
    if (v.n_pcs) /* an event without a stack has no PC array at all */
      memcpy(e->pcs, v.pcs, (v.n_pcs < 4 ? v.n_pcs : 4) * sizeof(uint64_t));
    e->stack_truncated = v.stack_truncated;
    e->tid = v.tid;
    snprintf(e->thread_name, sizeof e->thread_name, "%s",
             v.thread_name ? v.thread_name : "");
  }
  assert_int_equal(rc, 0);
}

static __attribute__((unused)) void rec_free(rec *r) {
  stkr_reader_free(r->r);
  free(r->evs);
}

/* Events with this site and payload (payload NULL: any); pid 0: any. */
static __attribute__((unused))
size_t count(const rec *r, uint32_t pid, const char *site,
             const char *payload) {
  size_t i, n = 0;
  for (i = 0; i < r->n; i++)
    n += (pid == 0 || r->evs[i].pid == pid) &&
         strcmp(r->evs[i].site, site) == 0 &&
         (payload == NULL || strcmp(r->evs[i].payload, payload) == 0);
  return n;
}

static __attribute__((unused))
const ev *find(const rec *r, uint32_t pid, const char *site,
               const char *payload) {
  size_t i;
  for (i = 0; i < r->n; i++)
    if ((pid == 0 || r->evs[i].pid == pid) &&
        strcmp(r->evs[i].site, site) == 0 &&
        (payload == NULL || strcmp(r->evs[i].payload, payload) == 0))
      return &r->evs[i];
  fail_msg("no event %s \"%s\" (pid %u)", site, payload ? payload : "*",
           (unsigned)pid);
  return NULL;
}

static __attribute__((unused))
const stkr_process_info *proc_of(const rec *r, uint32_t pid) {
  size_t i, n = stkr_reader_process_count(r->r);
  for (i = 0; i < n; i++)
    if (stkr_reader_process(r->r, i)->pid == pid)
      return stkr_reader_process(r->r, i);
  fail_msg("no process %u in the recording", (unsigned)pid);
  return NULL;
}

/* ---- symbols ----------------------------------------------------------------- */

/* Function symbols of the fixtures, from `nm -S` (run once per fixture:
 * the tests check thousands of PCs). */
typedef struct sym {
  char fixture[32], name[64];
  uint64_t start, end; /* [start, end) as offsets in the file */
} sym;
static sym *g_syms;
static size_t g_n_syms;

static __attribute__((unused)) void load_syms(const char *fixture) {
  char cmd[4600], line[512];
  size_t cap = 0;
  FILE *p;

  snprintf(cmd, sizeof cmd, "nm -S --defined-only '%s/%s'", g_fx_dir, fixture);
  p = popen(cmd, "r");
  assert_non_null(p);
  while (fgets(line, sizeof line, p) != NULL) {
    unsigned long long v, sz;
    char type, name[256];
    if (sscanf(line, "%llx %llx %c %255s", &v, &sz, &type, name) != 4 ||
        strlen(name) >= sizeof g_syms[0].name)
      continue;
    if (g_n_syms == cap) {
      cap = g_n_syms + 256;
      g_syms = realloc(g_syms, cap * sizeof *g_syms);
      assert_non_null(g_syms);
    }
    snprintf(g_syms[g_n_syms].fixture, sizeof g_syms[0].fixture, "%.31s",
             fixture);
    snprintf(g_syms[g_n_syms].name, sizeof g_syms[0].name, "%.63s", name);
    g_syms[g_n_syms].start = v;
    g_syms[g_n_syms].end = v + sz;
    g_n_syms++;
  }
  assert_int_equal(pclose(p), 0);
}

static __attribute__((unused))
void fn_range(const char *fixture, const char *fn, uint64_t *start,
              uint64_t *end) {
  size_t i;
  int pass;

  for (pass = 0; pass < 2; pass++) {
    bool known = false;
    for (i = 0; i < g_n_syms; i++) {
      if (strcmp(g_syms[i].fixture, fixture) != 0)
        continue;
      known = true;
      if (strcmp(g_syms[i].name, fn) == 0) {
        *start = g_syms[i].start;
        *end = g_syms[i].end;
        return;
      }
    }
    if (known)
      break;
    load_syms(fixture);
  }
  fail_msg("nm: no symbol %s in %s", fn, fixture);
}

/* Does pc (recorded in process `proc`) lie inside fixture's function fn?
 * The image that contains pc must be the fixture; the offset from its load
 * address must fall in fn's range. */
static __attribute__((unused))
bool pc_in(const rec *r, size_t proc, uint64_t pc, const char *fixture,
           const char *fn) {
  const stkr_image_info *im;
  uint64_t start = 0, end = 0;
  size_t n, i;

  fn_range(fixture, fn, &start, &end);
  assert_int_equal(stkr_reader_images(r->r, proc, &im, &n), 0);
  for (i = 0; i < n; i++) {
    const char *b = strrchr(im[i].path, '/');
    b = b ? b + 1 : im[i].path;
    if (pc >= im[i].text_start && pc < im[i].text_end &&
        strcmp(b, fixture) == 0)
      return pc - im[i].load_address >= start && pc - im[i].load_address < end;
  }
  return false;
}

/* Index of the app's first PC in e: 0, but under a sanitizer build its
 * runtime may intercept the call before our hook does (ASan intercepts
 * uname, getifaddrs, ...): then its interceptor's frame comes first. */
static __attribute__((unused)) size_t app_pc(const rec *r, const ev *e) {
  const stkr_image_info *im;
  size_t n, i;

  if (!SANITIZED || e->n_pcs < 2 ||
      stkr_reader_images(r->r, e->proc, &im, &n) != 0)
    return 0;
  for (i = 0; i < n; i++) {
    const char *b = strrchr(im[i].path, '/');
    b = b ? b + 1 : im[i].path;
    if (e->pcs[0] >= im[i].text_start && e->pcs[0] < im[i].text_end)
      return strncmp(b, "libasan", 7) == 0 || strncmp(b, "libtsan", 7) == 0;
  }
  return 0;
}

static __attribute__((unused))
void assert_first_pc(const rec *r, const ev *e, const char *fixture,
                     const char *fn, const char *caller) {
  size_t k = app_pc(r, e);

  if (e->n_pcs <= k || !pc_in(r, e->proc, e->pcs[k], fixture, fn))
    fail_msg("%s \"%s\": first PC %#llx not in %s", e->site, e->payload,
             (unsigned long long)(e->n_pcs > k ? e->pcs[k] : 0), fn);
  if (caller != NULL &&
      (e->n_pcs < k + 2 || !pc_in(r, e->proc, e->pcs[k + 1], fixture, caller)))
    fail_msg("%s \"%s\": second PC %#llx not in %s", e->site, e->payload,
             (unsigned long long)(e->n_pcs > k + 1 ? e->pcs[k + 1] : 0),
             caller);
}

/* ---- setup ---------------------------------------------------------------- */

/* Under --config=asan the hook library needs the ASan runtime first in
 * the initial library list of every program it is preloaded into: find
 * the runtime this test runs with and preload it (stackrec record keeps
 * sanitizer runtimes in front of the hooks). The TSan runtime cannot be
 * preloaded into programs built without it (it crashes /bin/sh): under
 * --config=tsan only the fixtures (built with TSan) host the hooks, and
 * the Python demo is skipped. */
#if defined(__SANITIZE_ADDRESS__)
static char g_san_rt[1024];
#endif

static __attribute__((unused)) int setup(void **state) {
  char p[4300];
  (void)state;

  if (tl_hook_paths("preload", g_bin, sizeof g_bin, g_lib, sizeof g_lib,
                    g_tmp, sizeof g_tmp) != 0)
    return -1;
  tl_runfile(g_fx_dir, sizeof g_fx_dir, "tests/preload_fixtures");
  tl_runfile(g_probe, sizeof g_probe, "tools/demo/privacy_probe.py");
  /* A home with a key in it: the files category must see ~/.ssh. */
  snprintf(g_home, sizeof g_home, "%s/home", g_tmp);
  mkdir(g_home, 0700);
  snprintf(p, sizeof p, "%s/.ssh", g_home);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/.ssh/id_fixture", g_home);
  assert_int_equal(tl_write_file(p, "fixture-key\n"), 0);
  setenv("HOME", g_home, 1);
  setenv("STACKREC_PRELOAD", g_lib, 1);
  setenv("STACKREC_ENV_NAMES", "HOME,STKR_FIXTURE_*", 1);
  setenv("STKR_FIXTURE_SECRET", "s3cret", 1);
  unsetenv("STACKREC_DIR");
  unsetenv("STACKREC_CATEGORIES");
  unsetenv("STACKREC_FORK");
  unsetenv("STACKREC_DEPTH");
  /* What gets recorded is checked here, not how fast the end is (that is
   * tests/test-exit.c): on a loaded machine, or under a sanitizer, a
   * process's end may need more than the default 100 ms budget. */
  setenv("STACKREC_EXIT_MS", "5000", 1);
  unsetenv("LD_PRELOAD");
#if defined(__SANITIZE_ADDRESS__)
  {
    tl_asan_runtime(g_san_rt, sizeof g_san_rt);
    if (g_san_rt[0] == '\0') {
      fprintf(stderr, "sanitizer build, but no sanitizer runtime loaded\n");
      return -1;
    }
    setenv("LD_PRELOAD", g_san_rt, 1);
  }
#endif
  return 0;
}

#endif
