/* test-unwind.c: compact unwind tables and the hybrid walk (unwind/).
 *
 *  - oracle: stacks through a chain built -O2 -fomit-frame-pointer
 *    (tests/unwind_fixtures/chain.c: recursion, alloca, every callee-saved
 *    register, a qsort callback inside libc), walked with tables built for
 *    every loaded image, equal frame for frame to libunwind's
 *    unw_backtrace up to main, __libc_start_call_main and beyond; on the
 *    main thread and on a pthread (start_thread, clone3); with and without
 *    the per-thread row cache; stacks walked from inside glibc's
 *    getaddrinfo (a leaf in the fixture's forwarding malloc). On aarch64
 *    (tests/aarch64/run.sh, qemu) glibc's backtrace() is the oracle;
 *  - gdb's backtrace as a second oracle (x86_64, where gdb may trace);
 *  - aarch64 signal frames: a CFI-less trampoline (the vdso's, a copy of
 *    it here) found by its instructions and crossed through the ucontext;
 *  - a frame-pointer walk alone stops in the chain (so the oracle can fail);
 *  - hostile stacks never make the walk read outside [lo, hi) (run it
 *    under --config=asan);
 *  - the publication pointer hands back the previous set.
 * Tables built from files (python3's images, hostile .eh_frame bytes):
 * test-unwind-eh-frame.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#if defined(UWT_ORACLE_GLIBC)
/* tests/aarch64/run.sh: no libunwind for arm64 here; glibc's backtrace()
 * (libgcc's DWARF unwinder) is the oracle instead. */
#include <execinfo.h>
#define unw_backtrace(buf, n) backtrace((buf), (n))
#else
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/testlib.h"
#include "tests/unwind_fixtures/chain.h"
#include "common/stkr_hash.h"
#include "tests/unwind_fixtures/gai.h"
#include "tests/testlib.h"
#include "unwind/unwind.h"

#define MAXF 160

typedef struct shot {
  const stkr__uw_set *set;
  stkr__uw_cache *cache; /* NULL: no row cache */
  uintptr_t lo, hi;
  uint64_t ours[MAXF];
  void *theirs[MAXF];
  unsigned n_ours, n_theirs, fallbacks;
  unsigned fold_from, fold_bad; /* cached walks fold the hashes from here; wrong folds */
} shot;

/* Does fold hold the stack key's hashes of pcs[fold->from .. n)? */
static int fold_ok(const stkr__uw_fold *fold, const uint64_t *pcs, unsigned n) {
  uint64_t h1 = STKR_STACK_HASH_SEED, h2 = STKR_KEY2_SEED;
  for (unsigned i = fold->from; i < n; i++) {
    h1 = stkr_stack_hash_step(h1, pcs[i]);
    h2 = stkr_stack_key2_step(h2, pcs[i]);
  }
  return h1 == fold->h1 && h2 == fold->h2;
}

static void stack_bounds(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t a;
  void *addr;
  size_t size;
  assert_int_equal(pthread_getattr_np(pthread_self(), &a), 0);
  assert_int_equal(pthread_attr_getstack(&a, &addr, &size), 0);
  pthread_attr_destroy(&a);
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
}

/* The leaf: capture our registers, then both walks from here. */
__attribute__((noinline)) static void leaf(void *arg) {
  shot *s = arg;
  uintptr_t r[4];
  stkr__uw_regs regs;

  uwc_capture(r);
  regs = (stkr__uw_regs){r[0], r[1], r[2], r[3]};
  if (s->cache != NULL) { /* as the recorder walks: the hashes folded */
    stkr__uw_fold fold = {s->fold_from, 0, 0, false};
    s->n_ours = stkr__unwind_walk_folded(s->set, s->cache, &regs, s->lo, s->hi, s->ours, MAXF,
                                         &fold, &s->fallbacks);
    s->fold_bad += !fold_ok(&fold, s->ours, s->n_ours);
  } else {
    s->n_ours = stkr__unwind_walk_cached(s->set, NULL, &regs, s->lo, s->hi, s->ours, MAXF,
                                         &s->fallbacks);
  }
  s->n_theirs = (unsigned)unw_backtrace(s->theirs, MAXF);
  __asm__ volatile("" ::: "memory");
}

static const char *name_of(uintptr_t pc) {
  Dl_info di;
  if (dladdr((void *)(pc - 1), &di) && di.dli_sname) return di.dli_sname;
  return "?";
}

static void dump(const shot *s) {
  unsigned i;
  for (i = 0; i < s->n_ours || i < s->n_theirs; i++)
    fprintf(stderr, "  %2u ours %#14lx %-24s theirs %#14lx %s\n", i,
            i < s->n_ours ? (unsigned long)s->ours[i] : 0ul,
            i < s->n_ours ? name_of(s->ours[i]) : "",
            i < s->n_theirs ? (unsigned long)(uintptr_t)s->theirs[i] : 0ul,
            i < s->n_theirs ? name_of((uintptr_t)s->theirs[i]) : "");
}

static int is_trampoline(const stkr__uw_set *set, uintptr_t pc);

/* What ours holds for theirs[j] (libunwind's exact pcs): the signal
 * trampoline's pc and the pc it interrupted + 1 (StackDef.pcs: readers
 * look every pc up at pc - 1), every other pc as it is. */
static uint64_t as_ours(const shot *s, unsigned j) {
  uintptr_t pc = (uintptr_t)s->theirs[j];
  if (is_trampoline(s->set, pc) || (j > 0 && is_trampoline(s->set, (uintptr_t)s->theirs[j - 1])))
    return pc + 1;
  return pc;
}

/* ours[1..] must equal theirs[k..] for the k where the leaf's caller
 * appears (theirs starts inside unw_backtrace's own frames, ours at the
 * capture point in leaf), to the end of both. */
static int compare(const shot *s) {
  unsigned k, i;
  if (s->n_ours < 2) return -1;
  for (k = 0; k < s->n_theirs && k < 4; k++)
    if ((uintptr_t)s->theirs[k] == s->ours[1]) break;
  if (k == s->n_theirs || k == 4) return -2;
  if (s->n_ours - 1 != s->n_theirs - k) return -3;
  for (i = 1; i < s->n_ours; i++)
    if (s->ours[i] != as_ours(s, k + i - 1)) return -(int)(10 + i);
  return 0;
}

static stkr__uw_set *g_set;

static int setup(void **state) {
  unsigned failed = 99;
  (void)state;
  if (stkr__unwind_set_build_loaded(&g_set, &failed) != 0) return -1;
#if defined(__aarch64__)
  /* The chain's kernel-like trampoline (no CFI, as the vdso's): qemu-user
   * 7.2 has no vdso for the builder to find it in. */
  if (stkr__unwind_set_add_sigtramp(g_set, (uintptr_t)uwc_sigtramp) != 0) return -1;
#endif
  fprintf(stderr, "loaded images: %u tables, %u failed, %u without CFI; %llu rows (%llu fallback), "
          "%llu table bytes for %llu .eh_frame bytes (%.2fx)\n",
          g_set->n, failed, g_set->images_without_cfi, (unsigned long long)g_set->total.rows,
          (unsigned long long)g_set->total.rows_fallback,
          (unsigned long long)g_set->total.table_bytes,
          (unsigned long long)g_set->total.eh_frame_bytes,
          (double)g_set->total.table_bytes / (double)g_set->total.eh_frame_bytes);
  return failed == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  stkr__unwind_set_free(g_set);
  return 0;
}

/* Is return address pc a signal trampoline the walk crosses? */
static int is_trampoline(const stkr__uw_set *set, uintptr_t pc) {
  uint32_t i;
  for (i = 0; i < set->n_sigtramp; i++)
    if (set->sigtramp[i] == pc || set->sigtramp[i] + 1 == pc) return 1; /* theirs, ours */
  return stkr__unwind_table_find(stkr__unwind_set_find(set, pc - 1), pc - 1) == STKR__UW_SIGNAL;
}

/* Many stacks of every shape and depth, each equal to libunwind's. */
static unsigned run_oracle(unsigned rounds) {
  unsigned i, bad = 0, through_libc = 0, through_signal = 0;
  shot s;

  stkr__uw_cache *cache = calloc(1, sizeof *cache);

  memset(&s, 0, sizeof s);
  s.set = g_set;
  stack_bounds(&s.lo, &s.hi);
  for (i = 0; i < rounds; i++) {
    int depth = (int)(i % 41);
    unsigned shape = i % 16;
    int rc;
    s.cache = (i / 16) % 2 ? cache : NULL; /* every shape both ways */
    s.fold_from = i % 5;
    uwc_run(depth, shape, leaf, &s);
    rc = compare(&s);
    if (rc != 0) {
      if (bad++ < 3) {
        fprintf(stderr, "depth %d shape %u: mismatch %d\n", depth, shape, rc);
        dump(&s);
      }
    }
    /* A qsort path must go through libc's frames (msort) and out again. */
    if (shape & 4) {
      Dl_info di;
      unsigned j;
      for (j = 0; j < s.n_ours; j++)
        if (dladdr((void *)(uintptr_t)(s.ours[j] - 1), &di) && di.dli_fname &&
            strstr(di.dli_fname, "libc.so")) {
          through_libc++;
          break;
        }
    }
    /* A signal path must cross the trampoline: its SIGNAL row (x86_64:
     * glibc's __restore_rt has CFI) or the set's CFI-less trampoline. */
    if (shape & 8) {
      unsigned j;
      for (j = 1; j < s.n_ours; j++)
        if (is_trampoline(g_set, s.ours[j])) {
          through_signal++;
          break;
        }
    }
    assert_true(s.n_ours >= (unsigned)depth + 4);
  }
  assert_int_equal(through_libc, rounds / 2);
  assert_int_equal(through_signal, rounds / 2);
  assert_int_equal(s.fold_bad, 0); /* the folded hashes equal the PCs' */
  free(cache);
  return bad;
}

static void test_oracle_main_thread(void **state) {
  (void)state;
  assert_int_equal(run_oracle(2000), 0);
}

static void *thread_main(void *arg) {
  *(unsigned *)arg = run_oracle(400);
  return NULL;
}

static void test_oracle_pthread(void **state) {
  pthread_t t;
  unsigned bad = 99;
  (void)state;
#if defined(__SANITIZE_THREAD__)
  /* libunwind's per-thread trace cache destructor crashes inside TSan's
   * pthread_mutex_lock interceptor when the thread exits (libunwind 1.6.2,
   * gcc 12 TSan): a libunwind/TSan clash, not the walk's. */
  fprintf(stderr, "skipped under TSan: libunwind's thread-exit destructor faults in TSan's mutex interceptor\n");
  skip();
#endif
  assert_int_equal(pthread_create(&t, NULL, thread_main, &bad), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(bad, 0);
}

/* Stacks walked from inside glibc's getaddrinfo: the leaf runs in each of
 * the first mallocs getaddrinfo's internals make (the NSS "files" lookup of
 * localhost, the /etc/hosts and /etc/gai.conf reads, the result list; see
 * tests/unwind_fixtures/gai.c), each stack equal to unw_backtrace's to the
 * end, and each through libc below the leaf. */
typedef struct gai_run {
  shot s;
  unsigned stacks, bad, in_libc;
} gai_run;

static int in_libc(uintptr_t pc) {
  Dl_info di;
  return dladdr((void *)(pc - 1), &di) && di.dli_fname && strstr(di.dli_fname, "libc.so");
}

__attribute__((noinline)) static void gai_leaf(void *arg) {
  gai_run *g = arg;
  unsigned j;
  int rc;
  leaf(&g->s);
  rc = compare(&g->s);
  g->stacks++;
  if (rc != 0 && g->bad++ < 3) {
    fprintf(stderr, "getaddrinfo stack %u: mismatch %d\n", g->stacks, rc);
    dump(&g->s);
  }
  /* ours[0] leaf, [1] here, [2] fire, [3] malloc, then libc's internals. */
  for (j = 4; j < g->s.n_ours; j++)
    if (in_libc(g->s.ours[j])) {
      g->in_libc++;
      break;
    }
  __asm__ volatile("" ::: "memory");
}

static void test_oracle_getaddrinfo(void **state) {
  static const struct {
    const char *node, *service;
    int family, flags;
  } q[] = {
      {"localhost", NULL, AF_UNSPEC, 0},
      {"localhost", "80", AF_INET, AI_CANONNAME},
      {"localhost", NULL, AF_INET6, AI_ADDRCONFIG},
      {"127.0.0.1", "443", AF_UNSPEC, AI_NUMERICHOST | AI_NUMERICSERV},
  };
  gai_run *g = calloc(1, sizeof *g);
  stkr__uw_cache *cache = calloc(1, sizeof *cache);
  stkr__uw_set *set = NULL;
  struct addrinfo hints;
  unsigned i, fired = 0, failed = 99;
  int rc;
  (void)state;

  /* A first lookup loads whatever NSS needs (with "hosts: files dns",
   * nothing: both are in libc 2.36), then the tables are built for every
   * image loaded now. */
  memset(&hints, 0, sizeof hints);
  assert_int_equal(uwg_getaddrinfo("localhost", NULL, &hints, 0, gai_leaf, g, &rc), 0);
  assert_int_equal(stkr__unwind_set_build_loaded(&set, &failed), 0);
  assert_int_equal(failed, 0);
  g->s.set = set;
  stack_bounds(&g->s.lo, &g->s.hi);
  for (i = 0; i < 2 * sizeof q / sizeof q[0]; i++) {
    unsigned k = i % (sizeof q / sizeof q[0]), n;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = q[k].family;
    hints.ai_flags = q[k].flags;
    hints.ai_socktype = SOCK_STREAM;
    g->s.cache = i >= sizeof q / sizeof q[0] ? cache : NULL; /* each query both ways */
    n = uwg_getaddrinfo(q[k].node, q[k].service, &hints, 24, gai_leaf, g, &rc);
    fprintf(stderr, "getaddrinfo(%s, %s, family %d, flags %#x) = %d (%s): %u stacks from its "
            "mallocs\n", q[k].node, q[k].service ? q[k].service : "NULL", q[k].family,
            (unsigned)q[k].flags, rc, rc ? gai_strerror(rc) : "ok", n);
    if (k == 3) assert_int_equal(rc, 0); /* numeric: needs no /etc/hosts */
    fired += n;
  }
  fprintf(stderr, "getaddrinfo: %u stacks, %u equal to the oracle's, %u through libc\n",
          g->stacks, g->stacks - g->bad, g->in_libc);
  assert_int_equal(g->stacks, fired);
  assert_true(fired >= 16);
  assert_int_equal(g->bad, 0);
  assert_int_equal(g->in_libc, fired);
  stkr__unwind_set_free(set);
  free(cache);
  free(g);
}

/* gdb's backtrace as a second oracle: tests/unwind_fixtures/gdb_chain.c
 * walks its own stack at a leaf under the chain (each shape: recursion,
 * alloca, every callee-saved register, qsort, a signal handler), writes
 * the PCs, then stops in uwg_stop, where gdb has a breakpoint; gdb's frame
 * PCs ($pc in each frame, past main to _start) from the leaf's caller on
 * must be ours. Skipped, saying so, where gdb is missing or may not trace. */
#define GDB_WALKS 8
static const char *const gdb_specs[GDB_WALKS] = {"3:0",  "12:3", "6:5",  "0:1",
                                                 "7:4",  "4:8",  "2:12", "20:6"};

/* The gdb script: break in uwg_stop, and at each of the GDB_WALKS stops
 * print every physical frame's pc as "@pc 0x... SIGTRAMP". Physical frames
 * only: gdb shows each function inlined at a pc as a frame of its own with
 * the same pc (glibc's msort_with_tmp, qsort), and adds "tail call frames"
 * it infers from DWARF call-site entries (a pthread_kill that jumped to
 * __pthread_kill_implementation) that are not on the stack. */
static void write_gdb_script(const char *script) {
  char cmd[4096];
  size_t at = (size_t)snprintf(cmd, sizeof cmd,
                               "set disable-randomization off\nset backtrace past-main on\n"
                               "set pagination off\nhandle SIGUSR2 nostop noprint pass\n"
                               "break uwg_stop\npython\ndef uwg_frames():\n"
                               "    f = gdb.newest_frame()\n    while f is not None:\n"
                               "        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):\n"
                               "            print('@pc %%#x %%d' %% (f.pc(), f.type() == gdb.SIGTRAMP_FRAME))\n"
                               "        f = f.older()\nend\nrun\nbt\n");
  for (unsigned k = 0; k < GDB_WALKS; k++)
    at += (size_t)snprintf(cmd + at, sizeof cmd - at, "python uwg_frames()\ncontinue\n");
  assert_true(at < sizeof cmd);
  assert_int_equal(tl_write_file(script, cmd), 0);
}

/* gdb's frames in its output: "@pc 0x..." lines, a block per breakpoint
 * hit, into theirs[hit][]. The trampoline's pc and the one it interrupted
 * are exact: ours hold them + 1 (StackDef.pcs), and so do these. */
static void parse_gdb_frames(char *out, uint64_t (*theirs)[MAXF],
                             unsigned *n_theirs) {
  char *p, *save = NULL;
  int blk = -1, sig = 0, after_sig = 0;

  for (p = strtok_r(out, "\n", &save); p != NULL; p = strtok_r(NULL, "\n", &save)) {
    unsigned long long v;
    if (strncmp(p, "Breakpoint 1, ", 14) == 0) {
      blk++;
      after_sig = 0;
      assert_true(blk < GDB_WALKS);
    } else if (blk >= 0 && sscanf(p, "@pc %llx %d", &v, &sig) == 2 &&
               n_theirs[blk] < MAXF) {
      theirs[blk][n_theirs[blk]++] = v + (sig || after_sig);
      after_sig = sig;
    } else if (blk == 0 && p[0] == '#') {
      fprintf(stderr, "  gdb: %.150s\n", p); /* the first backtrace, for the log */
    }
  }
  assert_int_equal(blk + 1, GDB_WALKS);
}

static void test_oracle_gdb(void **state) {
  enum { CAP = 1 << 17 };
  const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  char bin[4096], pcs_path[4096], script[4096], cmd[8192], line[4096], *out = malloc(CAP), *err = malloc(CAP);
  char *ours_text;
  tl_capture c = {out, CAP, err, CAP, NULL, false, -1};
  static uint64_t theirs[GDB_WALKS][MAXF];
  unsigned n_theirs[GDB_WALKS] = {0}, k, i, walks = 0, frames = 0;
  int st;
  FILE *f;
  (void)state;

#if defined(UWT_ORACLE_GLIBC)
  fprintf(stderr, "skipped: no gdb for the aarch64 guest under qemu-user\n");
  free(out), free(err);
  skip();
  return;
#endif
  if (tl_sh(&c, "command -v gdb") != 0) {
    fprintf(stderr, "skipped: gdb is not installed (tools/install-deps.sh)\n");
    free(out), free(err);
    skip();
    return;
  }
  tl_runfile(bin, sizeof bin, "tests/unwind_gdb_chain");
  snprintf(pcs_path, sizeof pcs_path, "%s/gdb_chain.pcs", tmp);
  snprintf(script, sizeof script, "%s/gdb_chain.gdb", tmp);
  write_gdb_script(script);
  {
    size_t at = (size_t)snprintf(cmd, sizeof cmd, "timeout 300 gdb -q -nx -batch -x '%s' --args '%s' '%s'",
                                 script, bin, pcs_path);
    for (k = 0; k < GDB_WALKS; k++)
      at += (size_t)snprintf(cmd + at, sizeof cmd - at, " %s", gdb_specs[k]);
    assert_true(at < sizeof cmd);
  }
  unlink(pcs_path);
  st = tl_sh(&c, "%s", cmd);
  if (strstr(out, "Breakpoint 1, ") == NULL &&
      (strstr(out, "ptrace") || strstr(err, "ptrace") || strstr(err, "Operation not permitted"))) {
    fprintf(stderr, "skipped: gdb may not trace here (ptrace refused):\n%.2000s%.2000s\n", out, err);
    free(out), free(err);
    skip();
    return;
  }
  if (strstr(err, "Python scripting is not supported") != NULL) {
    fprintf(stderr, "skipped: this gdb has no Python (needed to tell inlined frames apart)\n");
    free(out), free(err);
    skip();
    return;
  }
  if (st != 0) fprintf(stderr, "gdb exited %d:\n%.4000s\n%.4000s\n", st, out, err);
  assert_int_equal(st, 0);
  parse_gdb_frames(out, theirs, n_theirs);
  ours_text = tl_slurp_alloc(pcs_path, NULL);
  f = fmemopen(ours_text, strlen(ours_text), "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f) != NULL) {
    uint64_t ours[MAXF];
    unsigned n = 0;
    int used = 0, at;
    char *q;
    assert_int_equal(sscanf(line, "walk %u:%n", &k, &used), 1);
    assert_true(k < GDB_WALKS && used > 0);
    for (q = line + used; n < MAXF; q += at) {
      unsigned long long v;
      if (sscanf(q, " %llx%n", &v, &at) != 1) break;
      ours[n++] = v;
    }
    /* theirs[0] is uwg_stop, [1] the leaf: ours start at the leaf's caller. */
    int same = n_theirs[k] == n + 2 && memcmp(ours, theirs[k] + 2, n * sizeof ours[0]) == 0;
    if (!same) {
      fprintf(stderr, "walk %u (%s): %u PCs, gdb %u frames after the leaf\n", k, gdb_specs[k], n,
              n_theirs[k] >= 2 ? n_theirs[k] - 2 : 0);
      for (i = 0; i < n || i + 2 < n_theirs[k]; i++)
        fprintf(stderr, "  %2u ours %#14llx gdb %#14llx\n", i,
                i < n ? (unsigned long long)ours[i] : 0ull,
                i + 2 < n_theirs[k] ? (unsigned long long)theirs[k][i + 2] : 0ull);
    }
    assert_true(same);
    assert_true(n >= 6); /* through the chain, main and libc to _start */
    walks++;
    frames += n;
  }
  fclose(f);
  fprintf(stderr, "gdb: %u walks, %u frames, each equal to gdb's backtrace\n", walks, frames);
  assert_int_equal(walks, GDB_WALKS);
  free(ours_text);
  free(out);
  free(err);
}

/* The aarch64 signal trampoline without CFI: found by its two
 * instructions (4-aligned, both in bounds), kept in the set; and on
 * aarch64, without it in the set, a walk from a handler does not get past
 * it (so the oracle's signal shapes test the trampoline step). */
static void test_sigtramp(void **state) {
  static const uint32_t seq[2] = {0xd2801168u, 0xd4000001u}; /* mov x8, #139; svc #0 */
  uint8_t code[64];
  stkr__uw_set *s = calloc(1, sizeof *s);
  unsigned i;
  (void)state;

  memset(code, 0, sizeof code);
  memcpy(code + 18, seq, 8); /* not 4-aligned: not an instruction pair */
  assert_int_equal(stkr__unwind_find_sigtramp(code, sizeof code, 0x1000), 0);
  memcpy(code + 40, seq, 4); /* only the first instruction */
  assert_int_equal(stkr__unwind_find_sigtramp(code, sizeof code, 0x1000), 0);
  memcpy(code + 56, seq, 8); /* the last 8 bytes */
  assert_int_equal(stkr__unwind_find_sigtramp(code, sizeof code, 0x1000), 0x1000 + 56);
  assert_int_equal(stkr__unwind_find_sigtramp(code, 63, 0x1000), 0); /* cut by one byte */
  assert_int_equal(stkr__unwind_find_sigtramp(code + 2, 62, 0x1002), 0x1000 + 56); /* realigned */
  assert_int_equal(stkr__unwind_find_sigtramp(code, 4, 0x1000), 0);

  assert_int_equal(stkr__unwind_set_add_sigtramp(NULL, 0x1000), -EINVAL);
  assert_int_equal(stkr__unwind_set_add_sigtramp(s, 0), -EINVAL);
  for (i = 0; i < STKR__UW_SIGTRAMP_MAX; i++)
    assert_int_equal(stkr__unwind_set_add_sigtramp(s, 0x1000 + 8 * i), 0);
  assert_int_equal(stkr__unwind_set_add_sigtramp(s, 0x1000), 0); /* already there */
  assert_int_equal(stkr__unwind_set_add_sigtramp(s, 0x9000), -ENOSPC);
  assert_int_equal(s->n_sigtramp, STKR__UW_SIGTRAMP_MAX);
  stkr__unwind_set_free(s);

#if defined(__aarch64__)
  {
    shot sh;
    uint32_t saved = g_set->n_sigtramp;
    memset(&sh, 0, sizeof sh);
    sh.set = g_set;
    stack_bounds(&sh.lo, &sh.hi);
    uwc_run(3, 8, leaf, &sh);
    assert_int_equal(compare(&sh), 0);
    g_set->n_sigtramp = 0;
    uwc_run(3, 8, leaf, &sh);
    g_set->n_sigtramp = saved;
    assert_int_not_equal(compare(&sh), 0);
  }
#endif
}

/* Without tables (a NULL set: every frame by frame pointer) the same walk
 * does not get through the chain: the oracle above has something to find. */
static void test_fp_only_stops_early(void **state) {
  shot s;
  (void)state;
  memset(&s, 0, sizeof s);
  s.set = NULL;
  stack_bounds(&s.lo, &s.hi);
  uwc_run(10, 0, leaf, &s);
  assert_true(s.n_ours < 10);
  assert_int_not_equal(compare(&s), 0);
}

/* Random stacks under real tables: no read outside [lo, hi) (the stack is
 * a heap block exactly that big, so ASan would see one), always ends. */
static void test_hostile_stacks(void **state) {
  enum { WORDS = 2048 };
  uint64_t rng = 12345, pcs[64];
  unsigned round, i;
  uintptr_t text = (uintptr_t)qsort;
  stkr__uw_cache *cache = calloc(1, sizeof *cache);
  (void)state;

  for (round = 0; round < 3000; round++) {
    uintptr_t *mem = malloc(WORDS * sizeof *mem);
    uintptr_t lo = (uintptr_t)mem, hi = lo + WORDS * sizeof *mem;
    stkr__uw_regs r;
    for (i = 0; i < WORDS; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      switch (rng >> 62) {
      case 0: mem[i] = lo + ((rng >> 20) % (WORDS * 8)); break; /* stack-ish */
      case 1: mem[i] = text + ((rng >> 20) % 65536) - 32768; break; /* code-ish */
      case 2: mem[i] = (uintptr_t)(rng >> 3); break;
      default: mem[i] = 0;
      }
    }
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    r.pc = text + (rng >> 40) % 4096;
    r.sp = lo + ((rng >> 8) % WORDS) * 8 - (round % 2);
    r.fp = mem[(rng >> 24) % WORDS];
    r.lr = mem[(rng >> 32) % WORDS];
    /* Twice with the cache (the second walk takes the fast loop wherever
     * the first filled it), once without. */
    uint64_t again[64];
    stkr__uw_fold fold = {round % 4, 0, 0, false};
    unsigned n = stkr__unwind_walk(g_set, &r, lo, hi, pcs, 64, NULL);
    assert_true(n >= 1 && n <= 64);
    memset(again, 0xA5, sizeof again); /* every PC written, pcs[0] too */
    assert_int_equal(stkr__unwind_walk_cached(g_set, cache, &r, lo, hi, again, 64, NULL), n);
    assert_memory_equal(again, pcs, n * sizeof pcs[0]);
    memset(again, 0xA5, sizeof again);
    assert_int_equal(stkr__unwind_walk_cached(g_set, cache, &r, lo, hi, again, 64, NULL), n);
    assert_memory_equal(again, pcs, n * sizeof pcs[0]);
    /* Folded, twice (the memo's stored folds, for another start than the
     * walks above recorded them with, then for its own). */
    memset(again, 0xA5, sizeof again);
    assert_int_equal(stkr__unwind_walk_folded(g_set, cache, &r, lo, hi, again, 64, &fold, NULL), n);
    assert_memory_equal(again, pcs, n * sizeof pcs[0]);
    assert_true(fold_ok(&fold, pcs, n));
    memset(again, 0xA5, sizeof again);
    assert_int_equal(stkr__unwind_walk_folded(g_set, cache, &r, lo, hi, again, 64, &fold, NULL), n);
    assert_memory_equal(again, pcs, n * sizeof pcs[0]);
    assert_true(fold_ok(&fold, pcs, n));
    /* The same first pc on a changed stack: the memo must notice. */
    mem[(rng >> 5) % WORDS] ^= (uintptr_t)1 << ((rng >> 17) % 48);
    n = stkr__unwind_walk(g_set, &r, lo, hi, pcs, 64, NULL);
    assert_int_equal(stkr__unwind_walk_cached(g_set, cache, &r, lo, hi, again, 64, NULL), n);
    assert_memory_equal(again, pcs, n * sizeof pcs[0]);
    free(mem);
  }
  free(cache);
}

/* A thread stopped in a lazy PLT entry (a signal, a sample: the PLT is
 * where a call to another image goes first, so a busy thread is often
 * caught there). Its CFA is GNU ld's expression on rip (docs/UNWIND.md);
 * as a FALLBACK row the walk followed rbp, still the calling function's,
 * and lost that caller (seen in test-snapshot under TSan, whose
 * instrumented loops call through the PLT all the time). Each entry of
 * this executable's .plt but PLT0, at its first byte (return address on
 * top of the stack) and at its last (under the entry's push): the next pc
 * is the planted return address. */
static void test_plt_entry(void **state) {
#if defined(__x86_64__)
  uintptr_t plt, pc, mem[16];
  size_t size, entries = 0;
  const uintptr_t ra = (uintptr_t)&test_hostile_stacks + 5;
  uint64_t pcs[8];
  (void)state;

  assert_int_equal(tl_exe_section(".plt", &plt, &size), 0);
  for (pc = plt + 16; pc + 16 <= plt + size; pc += 16) {
    uint32_t row = stkr__unwind_table_find(stkr__unwind_set_find(g_set, pc), pc);
    assert_true(STKR__UW_IS_PLT(row));
    for (unsigned at = 0; at < 16; at += 15) {
      stkr__uw_regs r = {.pc = pc + at, .sp = (uintptr_t)&mem[4], .fp = 0};
      memset(mem, 0, sizeof mem);
      mem[at < STKR__UW_PLT_K(row) ? 4 : 5] = ra;
      unsigned n = stkr__unwind_walk(g_set, &r, (uintptr_t)mem,
                                     (uintptr_t)(mem + 16), pcs, 2, NULL);
      if (n != 2 || pcs[0] != r.pc || pcs[1] != ra)
        fail_msg("PLT entry %#lx + %u: %u pcs, %#llx %#llx (want %#lx)",
                 (unsigned long)pc, at, n, (unsigned long long)pcs[0],
                 n > 1 ? (unsigned long long)pcs[1] : 0ull, (unsigned long)ra);
    }
    entries++;
  }
  assert_true(entries > 0);
#else
  (void)state;
  skip(); /* the lazy PLT's CFA expression is x86_64's */
#endif
}

static void test_publish_swaps(void **state) {
  stkr__uw_slot slot = {NULL};
  stkr__uw_set *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  (void)state;
  assert_null(stkr__unwind_set_current(&slot));
  assert_null(stkr__unwind_publish(&slot, a));
  assert_ptr_equal(stkr__unwind_set_current(&slot), a);
  assert_ptr_equal(stkr__unwind_publish(&slot, b), a);
  assert_ptr_equal(stkr__unwind_set_current(&slot), b);
  assert_ptr_equal(stkr__unwind_publish(&slot, NULL), b);
  stkr__unwind_set_free(a);
  stkr__unwind_set_free(b);
  /* An empty set finds nothing; a NULL set neither. */
  assert_null(stkr__unwind_set_find(NULL, (uintptr_t)qsort));
  assert_non_null(stkr__unwind_set_find(g_set, (uintptr_t)qsort));
}

TL_TEST_MAIN("unwind", setup, teardown, test_oracle_main_thread,
             test_oracle_pthread, test_oracle_getaddrinfo, test_oracle_gdb,
             test_sigtramp, test_fp_only_stops_early, test_hostile_stacks,
             test_plt_entry, test_publish_swaps)
