/*
 * test-preload.c: `stackrec record` and the LD_PRELOAD hooks end to end.
 * The fixtures in tests/preload_fixtures/ are ordinary programs (no
 * stackrec inside); each is recorded, the recording read back with the
 * reader, and checked event by event: site, payload, count, and the first
 * PCs, which must lie inside the fixture function that made the call
 * (function ranges from `nm -S`, placed at the load address the recording
 * lists for the fixture's image: the fixtures are PIE). Threads, signals
 * and process trees: test-preload-procs.c; the shared helpers:
 * tests/preload_run.h.
 */
#define _GNU_SOURCE
#include "tests/preload_run.h"
#include "tests/testlib.h"

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
  assert_null(strstr(g_err, "[cut short]")); /* whole stacks */
  rec_free(&r);
}

/* A stack cut at the depth limit says so in the summary, as in report and
 * folded (QA, session 30: "... (64 frames)" read as a whole stack). */
static void test_summary_marks_cut_stacks(void **state) {
  (void)state;
  int rc = record(fresh("cut"), "--depth 2", "all_apis", "all");
  if (rc != 0) fail_msg("record exited %d:\n%s", rc, g_err);
  if (strstr(g_err, "[cut short]") == NULL)
    fail_msg("no stack of the summary marked cut:\n%s", g_err);
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

/* (void *)8 and 4095 where a path or an address goes: every hooked call
 * fails with EFAULT under the recorder too, as plainly (SIGSEGV in the
 * hooks before: QA, session 24). All categories: stat's hook too. */
static void test_unreadable_arguments(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* The sanitizers' own interceptors read the path first (ASan's fopen:
   * SIGSEGV in internal_strlen, with no hook library at all). */
  fprintf(stderr, "skipped under a sanitizer: its interceptors read the "
          "argument\n");
  skip();
  return;
#endif
  if (record(fresh("badptr"), "-q --categories all", "all_apis", "badptr") !=
      0)
    fail_msg("badptr: %s", g_err);
}

/* What a program changed before its first watched call, which starts the
 * recording (QA, session 24): a descriptor limit it lowered to 16 (it
 * opens as many files as plainly: the recorder's descriptors took two of
 * its numbers before), and its root directory (chroot: the recording's
 * path was made and filled inside the jail), also in a forked child of a
 * recording process. Each is not recorded, with a note. */
static void test_program_changed_its_setup(void **state) {
  char plain[256], jail[4200], inside[8400];
  struct stat st;
  (void)state;

#if SANITIZED
  /* LeakSanitizer's end fails under a limit of 16, and in a jail without
   * /proc: exit 1 with no hook library at all. */
  (void)plain, (void)jail, (void)inside, (void)st;
  fprintf(stderr, "skipped under a sanitizer (its exit needs descriptors "
          "and /proc)\n");
  skip();
  return;
#endif
  assert_int_equal(sh("'%s/all_apis' lowfd", g_fx_dir), 0);
  tl_fmt(plain, sizeof plain, "%s", g_out);
  assert_non_null(strstr(plain, "opened "));
  /* Identifiers only: the fixture's constructor reads a watched variable
   * (the recording would start before the limit is lowered). */
  assert_int_equal(record(fresh("lowfd"), "-c identifiers", "all_apis", "lowfd"),
                   0);
  if (strstr(g_out, plain) == NULL)
    fail_msg("plainly \"%s\", recorded: %s", plain, g_out);
  if (strstr(g_err, "lowered its descriptor limit") == NULL)
    fail_msg("no note of the lowered limit: %s", g_err);

  if (geteuid() != 0) {
    fprintf(stderr, "chroot: skipped (not root)\n");
    return;
  }
  for (int child = 0; child < 2; child++) {
    const char *dir = fresh(child ? "chroot-child" : "chroot");
    snprintf(jail, sizeof jail, "%s-jail", dir);
    assert_int_equal(mkdir(jail, 0755), 0);
    snprintf(inside, sizeof inside, "chroot '%s'%s", jail,
             child ? " child" : "");
    assert_int_equal(record(dir, "-c identifiers", "all_apis", inside), 0);
    snprintf(inside, sizeof inside, "%s%s", jail, dir);
    if (stat(inside, &st) == 0)
      fail_msg("%s: the recording's path was made inside the jail",
               child ? "forked child" : "process");
    assert_non_null(strstr(g_err, "changed its root directory"));
  }
}

/* A program that forbids itself the time-stamp counter (before its first
 * watched call, and after) or enters seccomp's strict mode after one: it
 * runs as plainly (SIGSEGV and SIGKILL before: QA, session 24), and the
 * recording says it stopped, or never started. */
static void test_program_sandboxes_itself(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* TSan's runtime reads the clock itself (a SIGSEGV without the TSC). */
  fprintf(stderr, "skipped under TSan: its runtime reads the clock\n");
  skip();
  return;
#endif
#if defined(__x86_64__)
  if (record(fresh("notsc"), "-c identifiers", "all_apis", "notsc") != 0)
    fail_msg("notsc: %s", g_err);
  assert_non_null(strstr(g_err, "not recorded: it called prctl(PR_SET_TSC"));
  if (record(fresh("notsc-first"), "-c identifiers", "all_apis",
             "notsc first") != 0)
    fail_msg("notsc first: %s", g_err);
  assert_non_null(strstr(g_err, "recording stopped: the program called "
                                "prctl(PR_SET_TSC"));
#endif
  if (record(fresh("strict"), "-c identifiers", "all_apis", "strict") != 0)
    fail_msg("strict: %s", g_err);
  assert_non_null(strstr(g_out, "strict ok"));
  assert_non_null(strstr(g_err, "prctl(PR_SET_SECCOMP)"));
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
  /* Usage errors (2) and a hook library that is not there (125): the
   * status, and what stderr names. */
  static const struct {
    const char *env, *args; /* before `stackrec record`, after it */
    int status;
    const char *says;
  } refused[] = {
      {"", "", 2, "no command given"},
      {"", "--categories files,camera -- true", 2,
       "category \"camera\" at offset 6"},
      /* Given, but empty: refused like ",," (QA: it meant the default). */
      {"", "--categories '' -- true", 2, "--categories: no category given"},
      {"", "--depth 0 -- true", 2, "--depth"},
      {"STACKREC_PRELOAD=/nonexistent/lib.so", "-- true", 125,
       "STACKREC_PRELOAD=/nonexistent/lib.so"},
  };
  const char *dir = fresh("err");
  (void)state;

  assert_int_equal(sh("'%s' record -o '%s' -- /nonexistent/cmd", g_bin, dir),
                   127);
  assert_non_null(strstr(g_err, "cannot run /nonexistent/cmd"));
  /* No directory left behind by a command that never ran (it was, empty);
   * one that existed stays. */
  assert_int_equal(access(dir, F_OK), -1);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(sh("'%s' record -o '%s' -- /nonexistent/cmd", g_bin, dir),
                   127);
  assert_int_equal(access(dir, F_OK), 0);
  /* An empty directory: fine to reuse; after a recording, refused. */
  assert_int_equal(record(dir, "-q", "all_apis", "exit 0"), 0);
  /* Exit statuses: record's --help (3 the directory, 2 usage). */
  assert_int_equal(record(dir, "-q", "all_apis", "exit 0"), 3);
  assert_non_null(strstr(g_err, "already holds a recording"));
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    int rc = sh("%s '%s' record %s", refused[i].env, g_bin, refused[i].args);
    if (rc != refused[i].status || strstr(g_err, refused[i].says) == NULL)
      fail_msg("record %s: exit %d (want %d), stderr without \"%s\": %s",
               refused[i].args, rc, refused[i].status, refused[i].says, g_err);
  }
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

/* A statically linked CMD (Debian's ldconfig is static-pie): the hooks
 * cannot load into it. record says so in the marks file, and verify calls
 * the recording incomplete (QA, session 21: a static Go program's 4 000
 * reads of ~/.ssh went unrecorded, and verify said intact). */
static void test_static_cmd_named(void **state) {
  const char *dir = fresh("static");
  (void)state;

  /* Only where ldconfig is a static ELF (Debian's; elsewhere a script
   * may wrap it), and the dynamic loader as CMD is not named (it honours
   * LD_PRELOAD though it has no interpreter of its own). */
  if (sh("head -c 4 /sbin/ldconfig | grep -q ELF && ! readelf -l "
         "/sbin/ldconfig | grep -q 'program interpreter'") != 0) {
    fprintf(stderr, "SKIP: /sbin/ldconfig is not a static ELF here\n");
    skip();
  }
  assert_int_equal(sh("'%s' record -q -o '%s' -- /sbin/ldconfig -p", g_bin,
                      dir),
                   0);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);
  assert_non_null(strstr(g_out, "(ldconfig) recorded nothing, unable to: "
                                "/sbin/ldconfig is statically linked"));
  /* A dynamic one is not named, nor the loader running one. */
  dir = fresh("dynamic");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/true", g_bin, dir), 0);
  assert_null(strstr(g_err, "statically linked"));
  dir = fresh("loader");
  assert_int_equal(sh("'%s' record -q -o '%s' -- \"$(readelf -l /bin/true | "
                      "sed -n 's/.*program interpreter: \\(.*\\)]/\\1/p')\" "
                      "'%s/all_apis' exit 0", g_bin, dir, g_fx_dir), 0);
  assert_null(strstr(g_err, "statically linked"));
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 0);
}

/* QA (session 28): a program started without the hooks (`env -i`, `env
 * -u LD_PRELOAD`, a set-user-ID program of another owner) records nothing,
 * and the recording looked complete (verify 0). The exec that starts it
 * now tells record, which names it; verify: incomplete. A failed exec and
 * one that keeps the hooks tell nothing. */
static void test_exec_without_hooks_named(void **state) {
  const char *dir = fresh("escape");
  char suid[4200];
  (void)state;

  if (sh("command -v env >/dev/null") != 0) skip();
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c 'env -i "
                      "/bin/cat /etc/hostname >/dev/null; env -u LD_PRELOAD "
                      "cat /etc/hostname >/dev/null; env -i /no/such/file "
                      "2>/dev/null; env FOO=1 cat /etc/hostname >/dev/null; "
                      "echo done'", g_bin, dir), 0);
  assert_string_equal(g_out, "done\n");
  assert_non_null(strstr(g_err, "(env) recorded nothing: its exec of "
                                "/bin/cat starts a program the hooks are not "
                                "in (LD_PRELOAD, which loads the hooks, is "
                                "not in the environment it is given)"));
  assert_null(strstr(g_err, "/no/such/file"));
  /* Two notes exactly: env FOO=1 keeps the hooks. */
  const char *at = g_err;
  int notes = 0;
  while ((at = strstr(at, "starts a program the hooks are not in")) != NULL)
    notes++, at++;
  assert_int_equal(notes, 2);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);

  /* A set-user-ID copy owned by another: root only, and not in the ASan
   * build (there the copy could not be made: cp, chown and chmod with the
   * sanitized hooks preloaded exit 1 without a word). */
#if defined(__SANITIZE_ADDRESS__)
  return;
#endif
  if (geteuid() != 0) return;
  snprintf(suid, sizeof suid, "%s/cat-suid", g_tmp);
  if (sh("cp /bin/cat '%s' && chown nobody '%s' && chmod 4755 '%s'", suid,
         suid, suid) != 0)
    fail_msg("cannot make %s: %s", suid, g_err);
  dir = fresh("escape-suid");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c '%s /etc/hostname "
                      ">/dev/null'", g_bin, dir, suid), 0);
  assert_non_null(strstr(g_err, "it is a set-user-ID or set-group-ID "
                                "program"));
  /* A set-user-ID script: Linux ignores the bit, its interpreter has the
   * hooks; nothing to say. */
  snprintf(suid, sizeof suid, "%s/script-suid", g_tmp);
  if (sh("printf '#!/bin/sh\\ncat /etc/hostname >/dev/null\\n' > '%s' && "
         "chown nobody '%s' && chmod 4755 '%s'", suid, suid, suid) != 0)
    fail_msg("cannot make %s: %s", suid, g_err);
  dir = fresh("escape-script");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c '%s'", g_bin, dir,
                      suid), 0);
  assert_null(strstr(g_err, "hooks are not in"));
}

/* QA (session 33): a program whose loader cannot load the hook library
 * (a 32-bit one; one exec'd into a chroot without it) ran unrecorded with
 * "ERROR: ld.so: object ... cannot be preloaded ...: ignored." in its
 * stderr, and verify said 0. Now record (for CMD) and the exec hook (for
 * what a process execs) leave the library out of its LD_PRELOAD and name
 * it; its stderr is its own. The 32-bit program is built here against
 * the i386 libc (libc6-i386), without startup files. */
static void test_programs_that_cannot_load_the_hooks(void **state) {
  char m32[4200], jail[4200];
  (void)state;

#if SANITIZED
  /* The sanitizer runtime in LD_PRELOAD has the same trouble, ours aside. */
  (void)m32, (void)jail;
  skip();
#endif
  snprintf(m32, sizeof m32, "%s/m32", g_tmp);
  if (access("/lib/ld-linux.so.2", X_OK) != 0 ||
      sh("printf 'int uname(void *); int puts(const char *); void exit(int);\n"
         "void _start(void) { char u[400]; uname(u); puts(\"hello32\"); "
         "exit(3); }\n' > '%s.c' && cc -m32 -fno-pie -no-pie -nostartfiles "
         "-nostdlib -o '%s' '%s.c' /usr/lib32/libc.so.6 "
         "-Wl,-dynamic-linker,/lib/ld-linux.so.2", m32, m32, m32) != 0) {
    fprintf(stderr, "skipped: no i386 runtime to build against: %s\n", g_err);
    skip();
  }
  /* A script run by it; a helper that execs with a hand-made environment
   * holding LD_PRELOAD twice, ours last (the loader uses the last: QA,
   * session 34); a copy of it at a path of ~1 100 bytes (the note kept its
   * path and lost its reason). */
  char longdir[1300];
  tl_fmt(longdir, sizeof longdir, "%s/%0200d/%0200d/%0200d/%0200d/%0200d",
           g_tmp, 0, 1, 2, 3, 4);
  assert_int_equal(sh("printf '#!%s\\n' > '%s.sh' && chmod +x '%s.sh' && "
                      "printf '#include <unistd.h>\\nextern char **environ;\\n"
                      "int main(int c, char **v) { char *e[4096] = "
                      "{\"LD_PRELOAD=\"}; int n = 1; (void)c;\\n"
                      "for (char **p = environ; *p && n < 4094; p++) e[n++] = "
                      "*p; e[n] = 0; execve(v[1], v + 1, e); return 9; }\\n' "
                      "> '%s-env.c' && cc -o '%s-env' '%s-env.c' && "
                      "mkdir -p '%s' && cp '%s' '%s/m32'",
                      m32, m32, m32, m32, m32, m32, longdir, m32, longdir),
                   0);
  const char *const how[] = {
      "CMD", "'%s' record -q -o '%s' -- '%s'",
      "exec'd by sh", "'%s' record -q -o '%s' -- /bin/sh -c 'exec %s'",
      /* every mention goes (review, session 34) */
      "named twice", "'%s' record -q -o '%s' -- /bin/sh -c 'exec env "
      "LD_PRELOAD=\"$LD_PRELOAD:$LD_PRELOAD\" %s'",
      "a script's interpreter", "'%s' record -q -o '%s' -- /bin/sh -c "
      "'%s.sh'",
      "ours the last of two", "'%s' record -q -o '%s' -- /bin/sh -c "
      "'exec %s-env /bin/sh -c \"exec %s\"'",
      "a long path", "'%s' record -q -o '%s' -- /bin/sh -c 'exec %s/m32'"};
  for (size_t k = 0; k < sizeof how / sizeof *how; k += 2) {
    const char *dir = fresh("m32");
    const char *arg = k == 10 ? longdir : m32;
    assert_int_equal(sh(how[k + 1], g_bin, dir, arg, arg), 3);
    assert_string_equal(g_out, "hello32\n");
    if (strstr(g_err, "ld.so") != NULL ||
        strstr(g_err, "recorded nothing") == NULL ||
        strstr(g_err, "the other ELF class") == NULL)
      fail_msg("%s: %s", how[k], g_err);
    assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);
  }
  /* A chroot without the library (root only): dash and what it needs. */
  if (geteuid() != 0 || access("/usr/sbin/chroot", X_OK) != 0) return;
  snprintf(jail, sizeof jail, "%s/jail", g_tmp);
  assert_int_equal(sh("mkdir -p '%s/bin' && cp /bin/dash '%s/bin/' && "
                      "for l in $(ldd /bin/dash | grep -o '/[^ ]*'); do "
                      "mkdir -p \"%s$(dirname $l)\" && cp -L $l \"%s$l\"; done",
                      jail, jail, jail, jail),
                   0);
  const char *dir = fresh("chroot");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c \"/usr/sbin/chroot "
                      "'%s' /bin/dash -c 'echo in-jail; exit 4' "
                      "2>'%s/jail.err'\"", g_bin, dir, jail, g_tmp),
                   4);
  assert_string_equal(g_out, "in-jail\n");
  assert_non_null(strstr(g_err, "cannot be opened from this process (a "
                                "chroot"));
  assert_int_equal(sh("cat '%s/jail.err'", g_tmp), 0);
  assert_string_equal(g_out, ""); /* the loader's error went there */
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);
}

/* QA (session 33): a child that posix_spawn starts with an environment
 * without the hooks (Python's os.posix_spawn(..., {}); Rust's env_clear;
 * system() after unsetenv) ran unrecorded, unnamed, verify 0: glibc's
 * spawn calls its own execve, which no hook sees. The spawn hook names the
 * child; one that keeps the environment tells nothing. */
static void test_spawn_without_hooks_named(void **state) {
  const char *dir = fresh("spawn");
  (void)state;

  if (access("/usr/bin/python3", X_OK) != 0) skip();
#if defined(__SANITIZE_THREAD__)
  skip(); /* the TSan runtime cannot be preloaded into Python */
#endif
  assert_int_equal(
      sh("'%s' record -q -o '%s' -- /usr/bin/python3 -c 'import os\n"
         "for env in ({}, dict(os.environ)):\n"
         "  os.waitpid(os.posix_spawn(\"/bin/cat\", [\"cat\", "
         "\"/etc/hostname\"], env), 0)' >/dev/null",
         g_bin, dir),
      0);
  if (strstr(g_err, "(cat) recorded nothing: started by posix_spawn from ") ==
          NULL ||
      strstr(g_err, "/bin/cat, a program the hooks are not in (LD_PRELOAD") ==
          NULL)
    fail_msg("the spawned child is not named:\n%s", g_err);
  assert_int_equal(tl_count(g_err, "started by posix_spawn"), 1);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);
}

/* QA (session 28): a process of the tree whose environment lost
 * STACKREC_DIR (`env -u`) made the default ./stackrec-out in its working
 * directory, among the program's files, and verify said complete; under
 * `ulimit -s 16` the hooks' constructor died of SIGSEGV, cat under 32 KiB
 * in its start (and `stackrec record` itself under 20). Now each is a
 * process that recorded nothing, with its reason; and a limit under 1 MiB
 * (96 KiB) still records, the main thread's start on a helper thread. */
static void test_lost_dir_and_small_stack(void **state) {
  char cwd[4200], made[4300];
  const char *dir = fresh("lostdir");
  (void)state;

#if defined(__SANITIZE_THREAD__)
  skip(); /* /bin/sh cannot host the TSan-built hooks */
#endif
  snprintf(cwd, sizeof cwd, "%s", fresh("lostdir-cwd"));
  assert_int_equal(mkdir(cwd, 0700), 0);
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c 'cd %s && env -u "
                      "STACKREC_DIR cat /etc/shadow >/dev/null; echo rc=$?'",
                      g_bin, dir, cwd), 0);
  assert_string_equal(g_out, "rc=0\n");
  assert_non_null(strstr(g_err, "(cat) recorded nothing: not recorded, nor "
                                "its forked children: STACKREC_DIR was "
                                "removed"));
  snprintf(made, sizeof made, "%s/stackrec-out", cwd);
  assert_int_equal(access(made, F_OK), -1);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);
  /* Every STACKREC_* gone but LD_PRELOAD kept (a harness's minimal
   * environment; QA, session 41: the grandchild recorded into
   * ./stackrec-out, verify 0): not in its LD_PRELOAD, named. */
  dir = fresh("lostall");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c 'cd %s && env -i "
                      "LD_PRELOAD=\"$LD_PRELOAD\" /bin/cat /etc/shadow "
                      ">/dev/null; echo rc=$?'", g_bin, dir, cwd), 0);
  assert_string_equal(g_out, "rc=0\n");
  assert_non_null(strstr(g_err, "keeps the hook library in LD_PRELOAD but "
                                "not the recording's settings"));
  assert_int_equal(access(made, F_OK), -1);
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 4);

  /* 32 KiB: plain cat runs (the environment's strings count in the
   * limit, so less is not safe for it either); recorded, it died. */
  dir = fresh("smallstack");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c 'ulimit -s 32 && "
                      "cat /etc/shadow >/dev/null; echo rc=$?'", g_bin, dir),
                   0);
  assert_string_equal(g_out, "rc=0\n");
  assert_non_null(strstr(g_err, "(cat) recorded nothing: not recorded, nor "
                                "its forked children: its stack limit "
                                "(RLIMIT_STACK 32 KiB) is below 64 KiB"));
  dir = fresh("stack96k");
  assert_int_equal(sh("'%s' record -q -o '%s' -- /bin/sh -c 'ulimit -s 96 && "
                      "cat /etc/shadow >/dev/null; echo rc=$?'", g_bin, dir),
                   0);
  assert_string_equal(g_out, "rc=0\n");
  assert_int_equal(sh("'%s' verify '%s'", g_bin, dir), 0);
  /* record itself under a limit it cannot raise (its command then runs on
   * a thread of its own stack), the program's limit as given. 64 KiB, not
   * the 20 where record died before: how much of the limit the exec's
   * environment and the loader leave varies with the environment, and at
   * 20 a run under bazel died before main now and then. Not in sanitizer
   * builds: their runtime's own start needs more. */
  if (SANITIZED) return;
  assert_int_equal(sh("ulimit -s 64 && '%s' record -q -o '%s' -- /bin/sh -c "
                      "'ulimit -s'", g_bin, fresh("stack64rec")), 0);
  assert_string_equal(g_out, "64\n");
}

/* creat and freopen on watched paths are recorded, as "open" and "fopen"
 * (QA, session 41: neither was). */
static void test_creat_and_freopen(void **state) {
  const char *dir = fresh("reopen");
  char created[4300];
  rec r;
  (void)state;

  assert_int_equal(record(dir, "", "all_apis", "reopen"), 0);
  assert_non_null(strstr(g_out, "reopen ok"));
  snprintf(created, sizeof created, "%s/.ssh/created_by_creat", g_home);
  rec_load(&r, dir);
  size_t opened = 0, reopened = 0;
  for (size_t i = 0; i < r.n; i++) /* and the constructor's getenv */
    if (strcmp(r.evs[i].site, "files.open") == 0)
      opened += strcmp(r.evs[i].payload, created) == 0 ? 1 : 100;
    else if (strcmp(r.evs[i].site, "files.fopen") == 0)
      reopened += strcmp(r.evs[i].payload, "/etc/passwd") == 0 ? 1 : 100;
  if (opened != 1 || reopened != 1)
    fail_msg("creat %zu, freopen %zu of %zu events", opened, reopened, r.n);
  rec_free(&r);
}

TL_TEST_MAIN("preload", setup, NULL, test_all_apis, test_creat_and_freopen,
             test_summary_marks_cut_stacks, test_exit_status,
             test_unreadable_arguments, test_program_changed_its_setup,
             test_program_sandboxes_itself,
             test_categories_and_depth, test_default_dir_and_discovery,
             test_errors, test_bad_config, test_privacy_probe,
             test_static_cmd_named, test_exec_without_hooks_named,
             test_spawn_without_hooks_named,
             test_programs_that_cannot_load_the_hooks,
             test_lost_dir_and_small_stack)
