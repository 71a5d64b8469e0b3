/*
 * test-preload.c: `stackrec record` and the LD_PRELOAD hooks end to end.
 * The fixtures in tests/preload_fixtures/ are ordinary programs (no
 * stackrec inside); each is recorded, the recording read back with the
 * reader, and checked event by event: site, payload, count, and the first
 * PCs, which must lie inside the fixture function that made the call
 * (function ranges from `nm -S`, placed at the load address the recording
 * lists for the fixture's image: the fixtures are PIE).
 */
#define _GNU_SOURCE
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

/* Built with --config=asan or --config=tsan? */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

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

/* A fresh directory name under TEST_TMPDIR (not created). */
static const char *fresh(const char *tag) {
  static char buf[4096];
  static int n;
  snprintf(buf, sizeof buf, "%s/%s-%d", g_tmp, tag, ++n);
  return buf;
}

/* `stackrec record -o DIR [opts] -- FIXTURE args`. */
static int record(const char *dir, const char *opts, const char *fixture,
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
} ev;

typedef struct rec {
  stkr_reader *r;
  ev *evs;
  size_t n;
} rec;

static void rec_load(rec *out, const char *dir) {
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
    memcpy(e->pcs, v.pcs, (v.n_pcs < 4 ? v.n_pcs : 4) * sizeof(uint64_t));
    e->stack_truncated = v.stack_truncated;
    e->tid = v.tid;
  }
  assert_int_equal(rc, 0);
}

static void rec_free(rec *r) {
  stkr_reader_free(r->r);
  free(r->evs);
}

/* Events with this site and payload (payload NULL: any); pid 0: any. */
static size_t count(const rec *r, uint32_t pid, const char *site,
                    const char *payload) {
  size_t i, n = 0;
  for (i = 0; i < r->n; i++)
    n += (pid == 0 || r->evs[i].pid == pid) &&
         strcmp(r->evs[i].site, site) == 0 &&
         (payload == NULL || strcmp(r->evs[i].payload, payload) == 0);
  return n;
}

static const ev *find(const rec *r, uint32_t pid, const char *site,
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

static const stkr_process_info *proc_of(const rec *r, uint32_t pid) {
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

static void load_syms(const char *fixture) {
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

static void fn_range(const char *fixture, const char *fn, uint64_t *start,
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
static bool pc_in(const rec *r, size_t proc, uint64_t pc, const char *fixture,
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
static size_t app_pc(const rec *r, const ev *e) {
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

static void assert_first_pc(const rec *r, const ev *e, const char *fixture,
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

static int setup(void **state) {
  const char *tmp = getenv("TEST_TMPDIR");
  char p[4300];
  (void)state;

  tl_runfile(g_bin, sizeof g_bin, "tools/stackrec");
  tl_runfile(g_lib, sizeof g_lib, "preload/libstackrec_preload.so");
  tl_runfile(g_fx_dir, sizeof g_fx_dir, "tests/preload_fixtures");
  tl_runfile(g_probe, sizeof g_probe, "tools/demo/privacy_probe.py");
  snprintf(g_tmp, sizeof g_tmp, "%.2000s/preload", tmp ? tmp : "/tmp");
  mkdir(g_tmp, 0700);
  if (access(g_bin, X_OK) != 0 || access(g_lib, R_OK) != 0) {
    fprintf(stderr, "missing %s or %s\n", g_bin, g_lib);
    return -1;
  }
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

/* ---- every API ------------------------------------------------------------ */

typedef struct expect {
  const char *site, *payload, *fn, *caller;
} expect;

static void test_all_apis(void **state) {
  const char *dir = fresh("all");
  char port_payload[64], path[7][4400];
  int port = 0, ipv6;
  rec r;
  size_t i, n_expect;
  (void)state;

  assert_int_equal(record(dir, "", "all_apis", "all"), 0);
  assert_non_null(strstr(g_out, "checks ok"));
  assert_int_equal(sscanf(strstr(g_out, "port "), "port %d", &port), 1);
  ipv6 = strstr(g_out, "ipv6 yes") != NULL;
  snprintf(port_payload, sizeof port_payload, "127.0.0.1:%d", port);
#define HP(i, rel) (snprintf(path[i], sizeof path[i], "%s/%s", g_home, rel), path[i])
  {
    const expect all[] = {
        {"environment.getenv", "STKR_FIXTURE_CTOR", "fx_ctor", "ctor"},
        {"files.open", HP(0, ".ssh/id_fixture"), "fx_open", "run_all"},
        {"files.open", HP(1, ".ssh/missing"), "fx_open_missing", "run_all"},
        {"files.open", HP(2, ".ssh/created"), "fx_open_creat", "run_all"},
        {"files.open", "/etc/passwd", "fx_open64", "run_all"},
        {"identifiers.open", "/etc/machine-id", "fx_open_2", "run_all"},
        {"identifiers.open", "/sys/class/net/lo/address", "fx_open64_2",
         "run_all"},
        {"files.openat", HP(3, ".gnupg/pubring.kbx"), "fx_openat", "run_all"},
        {"devices.openat", "/dev/video0", "fx_openat64", "run_all"},
        {"devices.openat", "/dev/snd/controlC0", "fx_openat_2", "run_all"},
        {"identifiers.openat", "/var/lib/dbus/machine-id", "fx_openat64_2",
         "run_all"},
        {"files.fopen", HP(4, ".ssh/id_fixture"), "fx_fopen", "run_all"},
        {"files.fopen", HP(5, ".mozilla/firefox/profiles.ini"), "fx_fopen64",
         "run_all"},
        {"identifiers.gethostname", "", "fx_gethostname", "run_all"},
        {"identifiers.gethostname", "", "fx_gethostname_chk", "run_all"},
        {"identifiers.uname", "", "fx_uname", "run_all"},
        {"identifiers.getifaddrs", "", "fx_getifaddrs", "run_all"},
        {"identifiers.ioctl", "SIOCGIFHWADDR lo", "fx_ioctl", "run_all"},
        {"network.getaddrinfo", "127.0.0.1:9", "fx_getaddrinfo", "run_all"},
        {"network.connect", port_payload, "fx_connect", "run_all"},
        {"environment.getenv", "HOME", "fx_getenv", "run_all"},
        {"environment.secure_getenv", "STKR_FIXTURE_SECRET",
         "fx_secure_getenv", "run_all"},
        /* The caller of a signal handler is the kernel's trampoline, and
         * of an atexit handler libc (no frame pointers): first PC only. */
        {"files.open", HP(6, ".ssh/from_signal_handler"), "fx_sighandler",
         NULL},
        {"identifiers.uname", "", "fx_atexit", NULL},
        {"network.connect", "[::1]:1", "fx_connect6", "run_all"},
    };
    n_expect = sizeof all / sizeof all[0] - (ipv6 ? 0 : 1);
    rec_load(&r, dir);
    /* Exactly these events: nothing from the recorder's own libc calls,
     * nothing for the calls that are not sensitive (fx_not_sensitive). */
    if (r.n != n_expect) {
      for (i = 0; i < r.n; i++)
        fprintf(stderr, "  got %s \"%s\"\n", r.evs[i].site, r.evs[i].payload);
      fail_msg("%zu events, expected %zu", r.n, n_expect);
    }
    for (i = 0; i < n_expect; i++) {
      size_t k, hits = 0;
      /* Two expectations may share site and payload (gethostname twice,
       * uname twice): each must own one event whose first PC is its fn. */
      for (k = 0; k < r.n; k++)
        if (strcmp(r.evs[k].site, all[i].site) == 0 &&
            strcmp(r.evs[k].payload, all[i].payload) == 0 &&
            r.evs[k].n_pcs > app_pc(&r, &r.evs[k]) &&
            pc_in(&r, r.evs[k].proc, r.evs[k].pcs[app_pc(&r, &r.evs[k])],
                  "all_apis", all[i].fn)) {
          assert_first_pc(&r, &r.evs[k], "all_apis", all[i].fn, all[i].caller);
          hits++;
        }
      if (hits != 1)
        fail_msg("%s \"%s\" from %s: %zu events", all[i].site,
                 all[i].payload, all[i].fn, hits);
    }
  }
#undef HP
  assert_int_equal(stkr_reader_process_count(r.r), 1);
  assert_true(stkr_reader_process(r.r, 0)->clean_end);
  assert_int_equal(stkr_reader_process(r.r, 0)->drops, 0);
  /* The summary (stderr) names categories, APIs, payloads and the dir. */
  assert_non_null(strstr(g_err, "exited with status 0"));
  assert_non_null(strstr(g_err, "identifiers "));
  assert_non_null(strstr(g_err, "\"SIOCGIFHWADDR lo\""));
  assert_non_null(strstr(g_err, "\"/etc/machine-id\""));
  assert_non_null(strstr(g_err, dir));
  assert_non_null(strstr(g_err, "dropped: 0"));
  /* Recorded offline, symbolized by record at the end: the summary's top
   * stacks name the fixture's functions, not image+offset (issue 14).
   * (Which of uname's two one-event stacks is "top" is a tie.) */
  if (strstr(g_err, "fx_gethostname") == NULL ||
      strstr(g_err, " < run_all") == NULL ||
      strstr(g_err, "all_apis+0x") != NULL) {
    fprintf(stderr, "%s", g_err);
    fail_msg("summary without function names (above)");
  }
  rec_free(&r);
}

/* ---- status, options, errors ---------------------------------------------- */

static void test_exit_status(void **state) {
  (void)state;
  if (record(fresh("exit"), "", "all_apis", "exit 7") != 7)
    fail_msg("exit 7: %s", g_err);
  assert_non_null(strstr(g_err, "exited with status 7"));
  if (record(fresh("kill"), "", "all_apis", "kill 15") != 128 + 15)
    fail_msg("kill 15: %s", g_err);
  assert_non_null(strstr(g_err, "killed by signal 15"));
  assert_int_equal(record(fresh("kill"), "-q", "all_apis", "kill 9"), 128 + 9);
  assert_string_equal(g_err, ""); /* -q: no summary */
}

static void test_categories_and_depth(void **state) {
  const char *dir = fresh("cats");
  rec r;
  size_t i;
  (void)state;

  assert_int_equal(
      record(dir, "--categories network,environment", "all_apis", "all"), 0);
  rec_load(&r, dir);
  assert_true(r.n >= 5);
  for (i = 0; i < r.n; i++)
    if (strncmp(r.evs[i].site, "network.", 8) != 0 &&
        strncmp(r.evs[i].site, "environment.", 12) != 0)
      fail_msg("event %s recorded with --categories network,environment",
               r.evs[i].site);
  assert_int_equal(count(&r, 0, "network.getaddrinfo", "127.0.0.1:9"), 1);
  rec_free(&r);

  dir = fresh("depth");
  assert_int_equal(record(dir, "--depth 1 -c files", "all_apis", "all"), 0);
  rec_load(&r, dir);
  assert_int_equal(count(&r, 0, "files.open", "/etc/passwd"), 1);
  for (i = 0; i < r.n; i++) {
    assert_int_equal(r.evs[i].n_pcs, 1);
    assert_true(r.evs[i].stack_truncated);
    assert_int_equal(strncmp(r.evs[i].site, "files.", 6), 0);
  }
  assert_first_pc(&r, find(&r, 0, "files.open", "/etc/passwd"), "all_apis",
                  "fx_open64", NULL);
  rec_free(&r);
}

static void test_default_dir_and_discovery(void **state) {
  const char *cwd = fresh("cwd");
  DIR *d;
  struct dirent *de;
  int found = 0;
  (void)state;

  assert_int_equal(mkdir(cwd, 0700), 0);
  /* No -o: a new directory named after the command, in the current
   * directory. No STACKREC_PRELOAD: found next to the binary. */
  assert_int_equal(sh("cd '%s' && env -u STACKREC_PRELOAD '%s' record -- "
                      "'%s/all_apis' exit 0",
                      cwd, g_bin, g_fx_dir),
                   0);
  d = opendir(cwd);
  assert_non_null(d);
  while ((de = readdir(d)) != NULL)
    found += strncmp(de->d_name, "stackrec-all_apis-", 18) == 0;
  closedir(d);
  assert_int_equal(found, 1);
  /* uname from "exit 0", getenv from the fixture's constructor. */
  if (strstr(g_err, "events: 2 ") == NULL)
    fail_msg("summary without \"events: 2 \":\n%s", g_err);
}

static void test_errors(void **state) {
  const char *dir = fresh("err");
  (void)state;

  assert_int_equal(sh("'%s' record -o '%s' -- /nonexistent/cmd", g_bin, dir),
                   127);
  assert_non_null(strstr(g_err, "cannot run /nonexistent/cmd"));
  /* The directory now exists (empty): fine to reuse; after a recording,
   * refused. */
  assert_int_equal(record(dir, "-q", "all_apis", "exit 0"), 0);
  /* Exit statuses: record's --help (3 the directory, 2 usage). */
  assert_int_equal(record(dir, "-q", "all_apis", "exit 0"), 3);
  assert_non_null(strstr(g_err, "already holds a recording"));
  assert_int_equal(sh("'%s' record", g_bin), 2);
  assert_non_null(strstr(g_err, "no command given"));
  assert_int_equal(sh("'%s' record --categories files,camera -- true", g_bin),
                   2);
  assert_non_null(strstr(g_err, "category \"camera\" at offset 6"));
  assert_int_equal(sh("'%s' record --depth 0 -- true", g_bin), 2);
  assert_non_null(strstr(g_err, "--depth"));
  assert_int_equal(sh("STACKREC_PRELOAD=/nonexistent/lib.so '%s' record -- "
                      "true",
                      g_bin),
                   125);
  assert_non_null(strstr(g_err, "STACKREC_PRELOAD=/nonexistent/lib.so"));
}

/* The library alone, misconfigured: it says why and records nothing; the
 * program runs exactly as without it. */
static void test_bad_config(void **state) {
  const char *cwd = fresh("badcfg");
  struct stat st;
  char p[4200];
  (void)state;

  assert_int_equal(mkdir(cwd, 0700), 0);
  assert_int_equal(sh("cd '%s' && LD_PRELOAD=\"${LD_PRELOAD:+$LD_PRELOAD:}%s\" "
                      "STACKREC_CATEGORIES=files,bogus '%s/all_apis' all",
                      cwd, g_lib, g_fx_dir),
                   0);
  assert_non_null(strstr(g_out, "checks ok"));
  assert_non_null(strstr(g_err, "invalid category \"bogus\" at offset 6"));
  assert_non_null(strstr(g_err, "recording nothing"));
  snprintf(p, sizeof p, "%s/stackrec-out", cwd);
  assert_int_equal(stat(p, &st), -1);

  assert_int_equal(sh("cd '%s' && LD_PRELOAD=\"${LD_PRELOAD:+$LD_PRELOAD:}%s\" "
                      "STACKREC_ENV_NAMES='A,,B' '%s/all_apis' exit 0",
                      cwd, g_lib, g_fx_dir),
                   0);
  assert_non_null(strstr(g_err, "empty name at offset 2"));
}

/* ---- threads, signals, process trees ------------------------------------- */

static void test_threads(void **state) {
  const char *dir = fresh("threads");
  char missing[4200];
  uint64_t tids[8];
  size_t i, k, n_tids = 0;
  rec r;
  (void)state;

  assert_int_equal(record(dir, "-q", "threads", "threads"), 0);
  snprintf(missing, sizeof missing, "%s/.ssh/thread-missing", g_home);
  rec_load(&r, dir);
  assert_int_equal(r.n, 1600);
  assert_int_equal(count(&r, 0, "files.open", missing), 800);
  assert_int_equal(count(&r, 0, "environment.getenv", "HOME"), 800);
  for (i = 0; i < r.n; i++) {
    assert_first_pc(&r, &r.evs[i], "threads", "fx_thread_body", NULL);
    for (k = 0; k < n_tids && tids[k] != r.evs[i].tid; k++)
      ;
    if (k == n_tids) {
      assert_true(n_tids < 8);
      tids[n_tids++] = r.evs[i].tid;
    }
  }
  assert_int_equal(n_tids, 4);
  assert_int_equal(stkr_reader_process(r.r, 0)->drops, 0);
  assert_int_equal(stkr_reader_process(r.r, 0)->threads, 4);
  rec_free(&r);
}

static void test_signal_stress(void **state) {
  const char *dir = fresh("sig");
  const stkr_process_info *p;
  char alarm_path[4200];
  int loop = 0, alarms = 0;
  size_t i, n_loop, n_alarm;
  rec r;
  (void)state;

  /* A ring the loop cannot fill: the drops left are handlers that
   * interrupted an event (counted, never corrupting anything). */
  setenv("STACKREC_RING_BYTES", "16M", 1);
  i = (size_t)record(dir, "-q", "threads", "sigstress");
  unsetenv("STACKREC_RING_BYTES");
  if (i != 0)
    fail_msg("sigstress: status %zu\n%s", i, g_err);
  assert_int_equal(sscanf(g_out, "loop %d alarms %d", &loop, &alarms), 2);
  snprintf(alarm_path, sizeof alarm_path, "%s/.ssh/from-alarm", g_home);
  rec_load(&r, dir);
  p = stkr_reader_process(r.r, 0);
  n_loop = count(&r, 0, "environment.getenv", "HOME");
  n_alarm = count(&r, 0, "files.open", alarm_path);
  assert_int_equal(n_loop + n_alarm, r.n);
  assert_int_equal(n_loop + n_alarm + p->drops, (size_t)(loop + alarms));
  assert_int_equal(p->drops, p->drops_reentrant + p->drops_ring_full);
  for (i = 0; i < r.n; i++)
    assert_first_pc(&r, &r.evs[i], "threads",
                    strcmp(r.evs[i].site, "files.open") == 0 ? "fx_alarm"
                                                             : "fx_loop",
                    NULL);
  rec_free(&r);
}

static void test_fork_exec(void **state) {
  const char *dir = fresh("fork");
  unsigned c[6] = {0};
  const stkr_process_info *p;
  char path[3][4200];
  uint32_t parent;
  const ev *e;
  rec r;
  int i;
  (void)state;

#if defined(__SANITIZE_THREAD__)
  /* A forked child starts its own flush worker: TSan does not support
   * threads started after a multi-threaded fork (as in test-record). */
  fprintf(stderr, "TSan: no threads after a multi-threaded fork: skipped\n");
  skip();
#endif
  assert_int_equal(record(dir, "-q", "forker", "tree"), 0);
  assert_non_null(strstr(g_out, "tree ok"));
  for (i = 1; i <= 5; i++) {
    char key[8];
    const char *at;
    snprintf(key, sizeof key, "c%d ", i);
    at = strstr(g_out, key);
    assert_non_null(at);
    c[i] = (unsigned)strtoul(at + 3, NULL, 10);
  }
  snprintf(path[0], sizeof path[0], "%s/.ssh/child-fork", g_home);
  snprintf(path[1], sizeof path[1], "%s/.ssh/before-exec", g_home);
  snprintf(path[2], sizeof path[2], "%s/.ssh/before-failed", g_home);
  rec_load(&r, dir);
  assert_int_equal(stkr_reader_process_count(r.r), 6);
  assert_int_equal(r.n, 9);

  /* The parent: before, and after the vfork child exec'd (its exec hook
   * must not have shut the shared recorder down). */
  e = find(&r, 0, "environment.getenv", "HOME");
  parent = e->pid;
  assert_first_pc(&r, e, "forker", "fx_parent_before", "main");
  assert_first_pc(&r, find(&r, parent, "environment.getenv",
                           "STKR_FIXTURE_AFTER"),
                  "forker", "fx_parent_after", "main");
  assert_true(proc_of(&r, parent)->clean_end);

  /* c1: fork, follow mode, _exit: the _exit hook ends the session
   * (stkr_shutdown_for_exit), with its last batch. */
  p = proc_of(&r, c[1]);
  assert_int_equal(p->parent_pid, parent);
  assert_true(p->clean_end);
  assert_first_pc(&r, find(&r, c[1], "files.open", path[0]), "forker",
                  "fx_child_fork", "main");

  /* c2: fork + exec: the new image records from its constructor on. */
  assert_int_equal(count(&r, c[2], "identifiers.gethostname", NULL), 1);
  assert_first_pc(&r, find(&r, c[2], "identifiers.gethostname", NULL),
                  "forker", "fx_execd", "main");
  assert_true(proc_of(&r, c[2])->clean_end);

  /* c3: vfork + exec. */
  assert_first_pc(&r, find(&r, c[3], "identifiers.getifaddrs", NULL),
                  "forker", "fx_vforked", "main");

  /* c4: recorded as a forked child, then exec'd: two sessions, both
   * ended cleanly. */
  p = proc_of(&r, c[4]);
  assert_int_equal(p->sessions, 2);
  assert_true(p->clean_end);
  assert_first_pc(&r, find(&r, c[4], "files.open", path[1]), "forker",
                  "fx_child_before_exec", "main");
  assert_first_pc(&r, find(&r, c[4], "environment.secure_getenv",
                           "STKR_FIXTURE_AFTER_EXEC"),
                  "forker", "fx_after_exec", "main");

  /* c5: the exec failed (ENOENT checked by the fixture): recording went
   * on in a new session. */
  p = proc_of(&r, c[5]);
  assert_int_equal(p->sessions, 2);
  assert_first_pc(&r, find(&r, c[5], "files.open", path[2]), "forker",
                  "fx_child_before_failed_exec", "main");
  assert_first_pc(&r, find(&r, c[5], "identifiers.uname", NULL), "forker",
                  "fx_after_failed_exec", "main");
  rec_free(&r);
}

/* ---- the README's main job ------------------------------------------------ */

static void test_privacy_probe(void **state) {
  const char *dir = fresh("probe");
  rec r;
  (void)state;

  if (access("/usr/bin/python3", X_OK) != 0) {
    fprintf(stderr, "no /usr/bin/python3: skipped\n");
    skip();
  }
#if defined(__SANITIZE_THREAD__)
  fprintf(stderr, "TSan: the hooks cannot run in Python: skipped\n");
  skip();
#endif
  /* Under ASan, Python (not ours) would fail LeakSanitizer's exit check. */
  if (sh("%s'%s' record -o '%s' -- /usr/bin/python3 '%s'",
         SANITIZED ? "ASAN_OPTIONS=detect_leaks=0 " : "", g_bin, dir,
         g_probe) != 0)
    fail_msg("privacy_probe.py: %s", g_err);
  rec_load(&r, dir);
  assert_int_equal(count(&r, 0, "identifiers.open", "/etc/machine-id"), 1);
  assert_int_equal(count(&r, 0, "files.open", "/etc/passwd"), 1);
  assert_true(count(&r, 0, "identifiers.gethostname", NULL) >= 1);
  assert_true(count(&r, 0, "identifiers.uname", NULL) >= 2); /* + child */
  assert_int_equal(count(&r, 0, "identifiers.ioctl", "SIOCGIFHWADDR lo"), 1);
  assert_int_equal(count(&r, 0, "network.connect", NULL), 1);
  assert_int_equal(strncmp(find(&r, 0, "network.connect", NULL)->payload,
                           "127.0.0.1:", 10),
                   0);
  assert_true(count(&r, 0, "environment.getenv", "HOME") >= 1);
  assert_true(stkr_reader_process_count(r.r) >= 2); /* the `uname` child */
  assert_non_null(strstr(g_err, "network "));
  assert_non_null(strstr(g_err, "\"/etc/machine-id\""));
  rec_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_apis),
      cmocka_unit_test(test_exit_status),
      cmocka_unit_test(test_categories_and_depth),
      cmocka_unit_test(test_default_dir_and_discovery),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_signal_stress),
      cmocka_unit_test(test_fork_exec),
      cmocka_unit_test(test_privacy_probe),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
