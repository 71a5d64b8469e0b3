/*
 * test-export.c: `stackrec export` (//tools:stackrec) on a recording made
 * in this process (test-export-util.h): folded stacks line by line, JSON
 * lines against `dump --json` and parsed back, the Chrome trace validated
 * against the Trace Event Format's rules, the filters giving the same
 * events in every format, errors and damaged input. The pprof format has
 * its own binary (test-export-pprof.c), which needs go.
 *
 * JSON is checked by python3 (its json module is a strict parser); the
 * checkers print one tab-separated line per fact, compared here.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/test-export-util.h"
#include "tests/testlib.h"

static char g_python[1024];

/* The Trace Event Format ("JSON Object Format"): an object with a
 * traceEvents array; every event has a string name and ph, integer pid
 * and tid and a numeric ts; "M" (metadata) events carry args.name;
 * instant events a scope s of g, p or t; "sf" names a key of the
 * stackFrames object, whose entries have a string name and category and
 * an optional parent that is itself a key. args.stack (our addition, for
 * Perfetto) must list the sf chain leaf first. */
static const char chrome_check[] =
    "import json, sys, collections\n"
    "errs = []\n"
    "bad = errs.append\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "if not isinstance(d, dict): sys.exit('top level is not an object')\n"
    "ev = d.get('traceEvents'); sf = d.get('stackFrames', {})\n"
    "if not isinstance(ev, list): sys.exit('traceEvents is not an array')\n"
    "if not isinstance(sf, dict): sys.exit('stackFrames is not an object')\n"
    "def isint(v): return isinstance(v, int) and not isinstance(v, bool)\n"
    "def isnum(v): return isinstance(v, (int, float)) and not "
    "isinstance(v, bool)\n"
    "for k, f in sf.items():\n"
    "  if not isinstance(f, dict) or not isinstance(f.get('name'), str) "
    "or not isinstance(f.get('category'), str):\n"
    "    bad('stackFrames[%s]: needs string name and category' % k)\n"
    "  elif 'parent' in f and str(f['parent']) not in sf:\n"
    "    bad('stackFrames[%s]: parent %r does not exist' % (k, f['parent']))\n"
    "def chain(k):\n"
    "  out = []\n"
    "  while k is not None and len(out) <= len(sf):\n"
    "    f = sf[k]; out.append(f['name'])\n"
    "    k = str(f['parent']) if 'parent' in f else None\n"
    "  if k is not None: bad('stackFrames: a cycle through %s' % k)\n"
    "  return out\n"
    "tname = {}; pname = {}; inst = []\n"
    "for i, e in enumerate(ev):\n"
    "  if not isinstance(e, dict): bad('event %d: not an object' % i); "
    "continue\n"
    "  if not (isinstance(e.get('name'), str) and isinstance(e.get('ph'), "
    "str) and isint(e.get('pid')) and isint(e.get('tid')) and "
    "isnum(e.get('ts'))):\n"
    "    bad('event %d: name, ph, pid, tid or ts missing or mistyped: %r' % "
    "(i, e)); continue\n"
    "  if e['ph'] == 'M':\n"
    "    a = e.get('args')\n"
    "    if not isinstance(a, dict) or not isinstance(a.get('name'), str):\n"
    "      bad('event %d: metadata without args.name' % i)\n"
    "    elif e['name'] == 'thread_name': tname[(e['pid'], e['tid'])] = "
    "a['name']\n"
    "    elif e['name'] == 'process_name': pname[e['pid']] = a['name']\n"
    "    else: bad('event %d: unknown metadata %s' % (i, e['name']))\n"
    "  elif e['ph'] in ('i', 'I'):\n"
    "    if e.get('s', 't') not in ('g', 'p', 't'): bad('event %d: scope' % "
    "i)\n"
    "    inst.append(e)\n"
    "  else: bad('event %d: unexpected ph %r' % (i, e['ph']))\n"
    "counts = collections.Counter(); stacks = collections.Counter()\n"
    "for e in inst:\n"
    "  key = (e['pid'], e['tid'])\n"
    "  if key not in tname: bad('no thread_name for %r' % (key,))\n"
    "  if e['pid'] not in pname: bad('no process_name for %d' % e['pid'])\n"
    "  a = e.get('args', {})\n"
    "  counts[(a.get('thread') or tname.get(key, '?'), e['name'])] += 1\n"
    "  if 'sf' in e:\n"
    "    if str(e['sf']) not in sf: bad('sf %r does not exist' % e['sf']); "
    "continue\n"
    "    c = chain(str(e['sf']))\n"
    "    if e.get('args', {}).get('stack') != c: bad('args.stack %r is not "
    "the sf chain %r' % (e.get('args', {}).get('stack'), c))\n"
    "    stacks[(e['name'], '<'.join(c))] += 1\n"
    "for m in errs[:20]: print('ERROR', m)\n"
    "for (t, n), c in sorted(counts.items()): print('event\\t%s\\t%s\\t%d' "
    "% (t, n, c))\n"
    "for (n, s), c in sorted(stacks.items()): print('stack\\t%s\\t%s\\t%d' "
    "% (n, s, c))\n"
    "print('total\\t%d' % len(inst))\n"
    "sys.exit(1 if errs else 0)\n";

/* JSON lines: every line one object with dump --json's keys in order,
 * values of the right types; prints (thread, site, frames, PCs) counts. */
static const char jsonl_check[] =
    "import json, sys, collections, re\n"
    "keys = ['ts_ns','pid','site','tid','thread','payload',"
    "'payload_truncated','stack','stack_truncated']\n"
    "fkeys = ['pc','function','file','line','column','image','offset',"
    "'inlined','app']\n"
    "errs = []; counts = collections.Counter(); n = 0\n"
    "def isint(v): return isinstance(v, int) and not isinstance(v, bool)\n"
    "for i, line in enumerate(open(sys.argv[1], encoding='utf-8')):\n"
    "  o = json.loads(line); n += 1\n"
    "  if list(o) not in (keys, keys + ['frames']): errs.append('line %d: "
    "keys %r' % (i + 1, list(o))); continue\n"
    "  ok = isint(o['ts_ns']) and isint(o['pid']) and isint(o['tid']) and "
    "isinstance(o['site'], str) and isinstance(o['thread'], str) and "
    "isinstance(o['payload_truncated'], bool) and "
    "isinstance(o['stack_truncated'], bool) and "
    "re.fullmatch(r'p[0-9]+', o['payload'] or '') and "
    "all(re.fullmatch(r'0x[0-9a-f]+', p) for p in o['stack'])\n"
    "  if not ok: errs.append('line %d: bad values %r' % (i + 1, o))\n"
    "  fr = o.get('frames', [])\n"
    "  if any(list(f) != fkeys for f in fr): errs.append('line %d: frame "
    "keys' % (i + 1))\n"
    "  funcs = '<'.join(f['function'] or '?' for f in fr)\n"
    "  counts[(o['thread'], o['site'], funcs, len(o['stack']))] += 1\n"
    "for m in errs[:20]: print('ERROR', m)\n"
    "for k, c in sorted(counts.items()): print('event\\t%s\\t%s\\t%s\\t%d\\t"
    "%d' % (k + (c,)))\n"
    "print('total\\t%d' % n)\n"
    "sys.exit(1 if errs else 0)\n";

static int setup(void **state) {
  (void)state;
  if (rec_make("export") != 0)
    return -1;
  if (tl_write_file(tmp_path("chrome_check.py"), chrome_check) != 0 ||
      tl_write_file(tmp_path("jsonl_check.py"), jsonl_check) != 0)
    return -1;
  return 0;
}

/* Run a checker on file; its output in g_out. @return its exit status. */
static int check(const char *script, const char *file) {
  if (g_python[0] == '\0' &&
      find_program("python3", g_python, sizeof g_python) != 0) {
    g_python[0] = '\0'; /* every test says why, not just the first */
    fail_msg("python3 is not installed (tools/install-deps.sh installs it)");
  }
  return sh("'%s' '%s' '%s'", g_python, tmp_path(script), file);
}

static void assert_has(const char *text, const char *want) {
  if (strstr(text, want) == NULL)
    fail_msg("want \"%s\" in:\n%s", want, text);
}

/* ---- folded ------------------------------------------------------------------- */
/* The recording's max_depth is 3: every stack was cut, and says so with a
 * "[truncated]" frame under its site.
 * The exact-label checks below use --granularity function: a build with
 * debug info (the sanitizer configurations are -c dbg) adds " file:line"
 * to every frame at the default granularity (test-export-pprof checks
 * that default). */

static const char folded_all[] =
    "exp.read;[truncated];exp_alpha_main;exp_mid_a;exp_hook 40\n"
    "exp.read;[truncated];exp_beta_main;exp_mid_a;exp_hook 10\n"
    "exp.write;[truncated];exp_alpha_main;exp_mid_b;exp_hook 20\n"
    "exp:odd name;[truncated];exp_beta_main;exp_mid_c;exp_hook 5\n";

static void test_folded_exact_lines(void **state) {
  (void)state;

  assert_int_equal(sh("'%s' export --format folded --granularity function '%s'", g_tool, g_rec), 0);
  assert_string_equal(g_err, "");
  /* Site first, root to leaf, ';' in the site written as ':', sorted. */
  assert_string_equal(g_out, folded_all);
  /* --app-only: every frame here is the app's; nothing changes. */
  assert_int_equal(
      sh("'%s' export -f folded --app-only --granularity function '%s'",
         g_tool, g_rec),
      0);
  assert_string_equal(g_out, folded_all);
  /* -o: the file, nothing on stdout, no temporary file left. */
  assert_int_equal(sh("'%s' export --format=folded --granularity=function "
                      "-o '%s' '%s'", g_tool,
                      tmp_path("f.txt"), g_rec),
                   0);
  assert_string_equal(g_out, "");
  tl_slurp(tmp_path("f.txt"), g_out, sizeof g_out);
  assert_string_equal(g_out, folded_all);
  sh("ls '%s' | grep -c tmp-", g_tmp);
  assert_string_equal(g_out, "0\n");
  /* Links planted where a temporary name once was predictable (FILE.tmp-
   * and the next pids: QA, session 40, export wrote through one into any
   * file of the user's): never followed; the output is a new file with
   * the mode a plain create gives, the link's target untouched. */
  assert_int_equal(sh("(cd '%s' && echo precious > victim && python3 -c "
                      "\"import os; n = int(open('/proc/sys/kernel/"
                      "ns_last_pid').read()); [os.symlink('victim', "
                      "'out.txt.tmp-%%d' %% p) for p in range(n, n + 300)]\")",
                      g_tmp), 0);
  assert_int_equal(sh("(cd '%s' && umask 022 && '%s' export -f folded -o "
                      "out.txt '%s' && cat victim && stat -c %%a out.txt && "
                      "test ! -L out.txt)", g_tmp, g_tool, g_rec), 0);
  assert_string_equal(g_out, "precious\n644\n");
  sh("(cd '%s' && rm -f out.txt.tmp-* victim out.txt)", g_tmp);
}

static void test_folded_filters(void **state) {
  (void)state;

  assert_int_equal(
      sh("'%s' export --format folded --granularity function --site 'exp.r*' '%s'", g_tool, g_rec),
      0);
  assert_string_equal(g_out,
                      "exp.read;[truncated];exp_alpha_main;exp_mid_a;exp_hook 40\n"
                      "exp.read;[truncated];exp_beta_main;exp_mid_a;exp_hook 10\n");
  assert_int_equal(sh("'%s' export --format folded --granularity function --thread exp-beta '%s'",
                      g_tool, g_rec),
                   0);
  assert_string_equal(g_out,
                      "exp.read;[truncated];exp_beta_main;exp_mid_a;exp_hook 10\n"
                      "exp:odd name;[truncated];exp_beta_main;exp_mid_c;exp_hook 5\n");
  assert_int_equal(sh("'%s' export --format folded --granularity function --thread %llu '%s'",
                      g_tool, (unsigned long long)g_tid_alpha, g_rec),
                   0);
  assert_string_equal(g_out,
                      "exp.read;[truncated];exp_alpha_main;exp_mid_a;exp_hook 40\n"
                      "exp.write;[truncated];exp_alpha_main;exp_mid_b;exp_hook 20\n");
  /* Beta ran 0.5 s after alpha, just after the process started
   * recording. */
  assert_int_equal(sh("'%s' export --format folded --granularity function --from 0.25 '%s'", g_tool,
                      g_rec),
                   0);
  assert_string_equal(g_out,
                      "exp.read;[truncated];exp_beta_main;exp_mid_a;exp_hook 10\n"
                      "exp:odd name;[truncated];exp_beta_main;exp_mid_c;exp_hook 5\n");
}

/* ---- jsonl ---------------------------------------------------------------- */

static void test_jsonl_is_dump_json_and_parses(void **state) {
  static char dump[1 << 20];
  (void)state;

  assert_int_equal(sh("'%s' dump --json '%s'", g_tool, g_rec), 0);
  memcpy(dump, g_out, sizeof dump);
  assert_int_equal(sh("'%s' export --format jsonl -o '%s' '%s'", g_tool,
                      tmp_path("e.jsonl"), g_rec),
                   0);
  tl_slurp(tmp_path("e.jsonl"), g_out, sizeof g_out);
  assert_true(strlen(g_out) > 1000);
  assert_string_equal(g_out, dump); /* same keys, same values */

  assert_int_equal(check("jsonl_check.py", tmp_path("e.jsonl")), 0);
  assert_has(g_out, "event\texp-alpha\texp.read\t"
                    "exp_hook<exp_mid_a<exp_alpha_main\t3\t40\n");
  assert_has(g_out, "event\texp-alpha\texp.write\t"
                    "exp_hook<exp_mid_b<exp_alpha_main\t3\t20\n");
  assert_has(g_out, "event\texp-beta\texp.read\t"
                    "exp_hook<exp_mid_a<exp_beta_main\t3\t10\n");
  assert_has(g_out, "event\texp-beta\texp;odd name\t"
                    "exp_hook<exp_mid_c<exp_beta_main\t3\t5\n");
  assert_has(g_out, "total\t75\n");

  /* -o FILE.zst: the same bytes, zstd-compressed with a checksum. */
  assert_int_equal(sh("'%s' export --format jsonl -o '%s' '%s'", g_tool,
                      tmp_path("e.jsonl.zst"), g_rec),
                   0);
  assert_int_equal(sh("zstd -q -t '%s' && zstd -q -dc '%s' | cmp - '%s'",
                      tmp_path("e.jsonl.zst"), tmp_path("e.jsonl.zst"),
                      tmp_path("e.jsonl")),
                   0);
}

/* ---- chrome --------------------------------------------------------------- */

static void test_chrome_trace_is_valid(void **state) {
  (void)state;

  assert_int_equal(sh("'%s' export --format chrome --granularity function -o '%s' '%s'", g_tool,
                      tmp_path("t.json"), g_rec),
                   0);
  if (check("chrome_check.py", tmp_path("t.json")) != 0)
    fail_msg("invalid trace:\n%s%s", g_out, g_err);
  /* Per thread track (named by thread_name metadata), per site. */
  assert_has(g_out, "event\texp-alpha\texp.read\t40\n");
  assert_has(g_out, "event\texp-alpha\texp.write\t20\n");
  assert_has(g_out, "event\texp-beta\texp.read\t10\n");
  assert_has(g_out, "event\texp-beta\texp;odd name\t5\n");
  /* Stacks through stackFrames, leaf first. */
  assert_has(g_out, "stack\texp.read\texp_hook<exp_mid_a<exp_alpha_main\t40\n");
  assert_has(g_out, "stack\texp.write\texp_hook<exp_mid_b<exp_alpha_main\t"
                    "20\n");
  assert_has(g_out, "stack\texp;odd name\texp_hook<exp_mid_c<exp_beta_main\t"
                    "5\n");
  assert_has(g_out, "total\t75\n");
  /* ts is the recording's monotonic clock in microseconds: beta's events
   * come 0.5 s after alpha's first. */
  tl_slurp(tmp_path("t.json"), g_out, sizeof g_out);
  assert_null(strstr(g_out, "\"ts\":-"));
  /* max_depth 3: every event's stack was cut, and says so in its args
   * (QA, session 24: nothing marked the cut in the trace). */
  {
    size_t cut = 0;
    for (const char *q = g_out; (q = strstr(q, "\"stack_truncated\":true")); q++)
      cut++;
    assert_int_equal(cut, 75);
  }
  {
    const char *a = strstr(g_out, "{\"name\":\"exp.read\"");
    const char *b = strstr(g_out, "{\"name\":\"exp;odd name\"");
    double ta, tb;
    assert_non_null(a);
    assert_non_null(b);
    ta = strtod(strstr(a, "\"ts\":") + 5, NULL);
    tb = strtod(strstr(b, "\"ts\":") + 5, NULL);
    assert_true(ta > 0);
    assert_true(tb - ta >= 500000.0 && tb - ta < 60e6);
  }
}

/* ---- the same events in every format ------------------------------------------- */

/* Events in the folded output (the sum of the counts). */
static long folded_total(const char *s) {
  long n = 0;
  for (; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL) {
    const char *e = s + strcspn(s, "\n");
    while (e > s && e[-1] != ' ')
      e--;
    if (e > s)
      n += strtol(e, NULL, 10); /* the count after the line's last space */
  }
  return n;
}

static long checker_total(void) {
  const char *t = strstr(g_out, "total\t");
  return t ? strtol(t + 6, NULL, 10) : -1;
}

static void test_filters_keep_the_same_events_everywhere(void **state) {
  char tid[64];
  struct {
    const char *opts;
    long want;
  } cases[] = {
      {"", 75},
      {"--site exp.read", 50},
      {"--site 'exp;*'", 5},
      {"--thread exp-beta", 15},
      {"--thread 'exp-*'", 75},
      {tid, 60},
      {"--from 0.25", 15},
      {"--to 0.25", 60},
      {"--from 0.25 --site exp.read", 10},
      {"--thread nobody", 0},
      {"--app-only --site exp.write", 20},
  };
  size_t i;
  (void)state;

  snprintf(tid, sizeof tid, "--thread %llu", (unsigned long long)g_tid_alpha);
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *o = cases[i].opts;
    long n;
    assert_int_equal(sh("'%s' export --format folded %s '%s'", g_tool, o,
                        g_rec),
                     0);
    if ((n = folded_total(g_out)) != cases[i].want)
      fail_msg("folded %s: %ld events, want %ld", o, n, cases[i].want);
    assert_int_equal(sh("'%s' export --format jsonl %s -o '%s' '%s'", g_tool,
                        o, tmp_path("c.jsonl"), g_rec),
                     0);
    assert_int_equal(check("jsonl_check.py", tmp_path("c.jsonl")), 0);
    if ((n = checker_total()) != cases[i].want)
      fail_msg("jsonl %s: %ld events, want %ld", o, n, cases[i].want);
    assert_int_equal(sh("'%s' export --format chrome %s -o '%s' '%s'",
                        g_tool, o, tmp_path("c.json"), g_rec),
                     0);
    if (check("chrome_check.py", tmp_path("c.json")) != 0)
      fail_msg("chrome %s: invalid:\n%s%s", o, g_out, g_err);
    if ((n = checker_total()) != cases[i].want)
      fail_msg("chrome %s: %ld events, want %ld", o, n, cases[i].want);
  }
}

/* ---- errors ---------------------------------------------------------------- */

static void test_usage_errors_and_help(void **state) {
  (void)state;

  assert_int_equal(sh("'%s' export --help", g_tool), 0);
  assert_has(g_out, "Usage: stackrec export --format pprof|folded|chrome|"
                    "jsonl");
  assert_has(g_out, "Exit status:\n");
  assert_has(g_out, "  2  usage error\n");
  assert_int_equal(sh("'%s' export '%s'", g_tool, g_rec), 2);
  assert_has(g_err, "--format pprof|folded|chrome|jsonl is required");
  assert_int_equal(sh("'%s' export --format svg '%s'", g_tool, g_rec), 2);
  assert_has(g_err, "unknown format 'svg'");
  assert_int_equal(sh("'%s' export --format folded --bogus '%s'", g_tool,
                      g_rec),
                   2);
  assert_has(g_err, "unknown option '--bogus'");
  assert_int_equal(sh("'%s' export --format folded --from -1 '%s'", g_tool,
                      g_rec),
                   2);
  assert_has(g_err, "--from '-1' is not a number of seconds >= 0");
  assert_int_equal(sh("'%s' export --format folded --from 2 --to 1 '%s'",
                      g_tool, g_rec),
                   2);
  assert_has(g_err, "--to 1 is not after --from 2");
  assert_int_equal(sh("'%s' export --format folded", g_tool), 2);
  assert_has(g_err, "no DIR or FILE given");
  assert_int_equal(sh("'%s' export --format folded -o", g_tool), 2);
  assert_has(g_err, "option '-o' needs a value");
}

static void test_input_and_output_errors(void **state) {
  const char *keep = tmp_path("keep.txt");
  (void)state;

  /* A missing input: exit 3, and an existing -o file is left alone
   * (inputs are opened first). */
  assert_int_equal(tl_write_file(keep, "old\n"), 0);
  assert_int_equal(sh("'%s' export --format folded -o '%s' '%s/nothing'",
                      g_tool, keep, g_tmp),
                   3);
  assert_has(g_err, "/nothing: No such file or directory");
  tl_slurp(keep, g_out, sizeof g_out);
  assert_string_equal(g_out, "old\n");
  /* An output that cannot be created: exit 1, naming it. */
  assert_int_equal(sh("'%s' export --format chrome -o '%s/no/dir/t.json' "
                      "'%s'",
                      g_tool, g_tmp, g_rec),
                   1);
  assert_has(g_err, "cannot create ");
  assert_has(g_err, "/no/dir/t.json: No such file or directory");
  /* A full device: the write error is reported, exit 1. */
  if (access("/dev/full", W_OK) == 0) {
    assert_int_equal(sh("'%s' export --format jsonl -o /dev/full '%s'",
                        g_tool, g_rec),
                     1);
    assert_has(g_err, "writing /dev/full: No space left on device");
  }
  /* Through a link: its target gets the output, the link stays (QA,
   * session 47: renamed over, the link became a file and its target, or
   * `-o /dev/stdout > file`, got nothing). */
  {
    char target[4200], link[4200];
    struct stat st;
    snprintf(target, sizeof target, "%s/link-target.txt", g_tmp);
    snprintf(link, sizeof link, "%s/link.txt", g_tmp);
    assert_int_equal(tl_write_file(target, "old\n"), 0);
    (void)unlink(link);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(sh("'%s' export --format folded -o '%s' '%s'", g_tool,
                        link, g_rec),
                     0);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    tl_slurp(target, g_out, sizeof g_out);
    assert_null(strstr(g_out, "old\n"));
    assert_true(strlen(g_out) > 0);
  }
}

/* A damaged segment: a warning naming the file and offset, exit 1, and an
 * export of every intact event that still loads. */
static void *renaming_main(void *arg) {
  pthread_setname_np(pthread_self(), "ren-1");
  for (int i = 0; i < 3; i++) exp_mid_a(&g_site_read, i);
  pthread_setname_np(pthread_self(), "ren-2");
  stkr_thread_renamed();
  for (int i = 0; i < 4; i++) exp_mid_a(&g_site_read, i);
  return arg;
}

/* A thread that renamed itself: its track keeps the first name (one
 * thread_name per track), its later events say the new one in
 * args.thread, which the checker counts them under (QA, session 22: all 7
 * showed as ren-1, where report --by thread had ren-1 3 and ren-2 4). */
static void test_chrome_renamed_thread(void **state) {
  stkr_config cfg = {.dir = tmp_path("renamed"), .flush_interval_ms = 20};
  pthread_t th;
  (void)state;

  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(pthread_create(&th, NULL, renaming_main, NULL), 0);
  pthread_join(th, NULL);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(sh("'%s' export --format chrome -o '%s' '%s'", g_tool,
                      tmp_path("ren.json"), tmp_path("renamed")), 0);
  if (check("chrome_check.py", tmp_path("ren.json")) != 0)
    fail_msg("invalid trace:\n%s%s", g_out, g_err);
  assert_has(g_out, "event\tren-1\texp.read\t3\n");
  assert_has(g_out, "event\tren-2\texp.read\t4\n");
  assert_int_equal(checker_total(), 7);
}

static void test_damaged_input_still_exports(void **state) {
  const char *dir = tmp_path("damaged");
  char seg[1400];
  FILE *f;
  long size;
  (void)state;

  assert_int_equal(sh("cp -r '%s' '%s' && ls '%s'", g_rec, dir, dir), 0);
  g_out[strcspn(g_out, "\n")] = '\0';
  snprintf(seg, sizeof seg, "%s/%.100s", dir, g_out);
  f = fopen(seg, "r+b");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  assert_true(size > 64);
  {
    /* A byte in the middle of the first batch, when a second follows it
     * (the next zstd magic): damage the reader must say. A byte of the
     * last batch may instead read as a write cut off at the file's end
     * (a block size past it), which is not damage: CI once flipped such a
     * byte at size / 2, and export rightly said 0. */
    static const unsigned char magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    unsigned char *buf = malloc((size_t)size);
    long at = size / 2;
    int c;
    assert_non_null(buf);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    for (long k = 4; k + 4 <= size; k++)
      if (memcmp(buf + k, magic, 4) == 0) {
        at = k / 2;
        break;
      }
    free(buf);
    fseek(f, at, SEEK_SET);
    c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x5a, f);
  }
  fclose(f);

  assert_int_equal(sh("'%s' export --format chrome -o '%s' '%s'", g_tool,
                      tmp_path("d.json"), dir),
                   1);
  assert_has(g_err, seg);
  assert_has(g_err, "offset");
  if (check("chrome_check.py", tmp_path("d.json")) != 0)
    fail_msg("invalid trace from damaged input:\n%s%s", g_out, g_err);
  assert_true(checker_total() >= 0 && checker_total() <= 75);
}

/* Two recordings whose processes have one pid (two containers, devices
 * or runs; here this process records the same work again, into another
 * directory: a copy would be refused, test-copies.c): two processes
 * everywhere, told apart by their directory (QA, session 27: one row in
 * --by process, one chrome track). */
static void test_same_pid_two_recordings(void **state) {
  char copy[1200], want[1400];
  (void)state;

  snprintf(copy, sizeof copy, "%s", tmp_path("rec-again"));
  assert_int_equal(rec_record(copy, 0, 0), 0);
  assert_int_equal(sh("'%s' report --by process '%s' '%s'", g_tool, g_rec,
                      copy), 0);
  assert_has(g_out, "process: 2 distinct");
  snprintf(want, sizeof want, "(pid %d, %s) (exp.read: 50)", (int)getpid(),
           copy);
  assert_has(g_out, want);
  snprintf(want, sizeof want, "(pid %d, %s) (exp.read: 50)", (int)getpid(),
           g_rec);
  assert_has(g_out, want);
  assert_int_equal(sh("'%s' export --format chrome -o '%s' '%s' '%s'", g_tool,
                      tmp_path("two.json"), g_rec, copy), 0);
  if (check("chrome_check.py", tmp_path("two.json")) != 0)
    fail_msg("invalid trace:\n%s%s", g_out, g_err);
  assert_has(g_out, "total\t150\n");
  tl_slurp(tmp_path("two.json"), g_out, sizeof g_out);
  assert_int_equal(tl_count(g_out, "\"name\":\"process_name\""), 2);
  snprintf(want, sizeof want, "\"pid\":%d,", (int)getpid());
  assert_has(g_out, want);
  assert_has(g_out, "\"pid\":4194305,");
  /* jsonl and dump --json: a "recording" key, only then (QA, session 33:
   * none, so GROUP BY pid merged the two). */
  assert_int_equal(sh("'%s' export --format jsonl '%s' '%s'", g_tool, g_rec,
                      copy), 0);
  snprintf(want, sizeof want, "\"pid\":%d,\"recording\":\"%s\",",
           (int)getpid(), copy);
  assert_has(g_out, want);
  snprintf(want, sizeof want, "\"pid\":%d,\"recording\":\"%s\",",
           (int)getpid(), g_rec);
  assert_has(g_out, want);
  assert_int_equal(sh("'%s' dump --json '%s' '%s'", g_tool, g_rec, copy), 0);
  assert_has(g_out, want);
  assert_int_equal(sh("'%s' export --format jsonl '%s'", g_tool, g_rec), 0);
  assert_null(strstr(g_out, "\"recording\""));
}

TL_TEST_MAIN("export", setup, NULL, test_folded_exact_lines,
             test_folded_filters, test_jsonl_is_dump_json_and_parses,
             test_chrome_trace_is_valid,
             test_filters_keep_the_same_events_everywhere,
             test_usage_errors_and_help, test_input_and_output_errors,
             test_chrome_renamed_thread, test_damaged_input_still_exports,
             test_same_pid_two_recordings)
