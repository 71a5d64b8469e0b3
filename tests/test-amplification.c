/*
 * test-amplification.c: what a hostile recording can make a reader
 * allocate is bounded by its own size. Two crafted files, run through
 * `stackrec report` and `stackrec verify` in child processes whose peak
 * RSS (getrusage of the child) is compared with a run on a small normal
 * recording:
 *
 *   - many events, each with its own undefined site id (issue 9: 2 M of
 *     them made `report` take 11 s and 1.76 GB for a 41 MB file): undefined
 *     ids must not each create per-id state;
 *   - one StackDef with far more PCs than the writer's hard cap
 *     (STKR_MAX_DEPTH, 256; issue 9: 4 M PCs took 520 MB): damage, named
 *     with file and offset, not a 32 MB allocation.
 *
 * The bound is generous (a multiple of the file size on top of the
 * baseline), so the test measures amplification, not allocator noise. The
 * figures are printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

#define PID 777u

/* Under a sanitizer the tool's RSS is the sanitizer's (quarantine, shadow
 * memory): the bounds are checked in the plain build only; the statuses and
 * warnings in every build. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_BOUND(cond) \
  print_message("  (RSS bound not checked under a sanitizer)\n")
#else
#define RSS_BOUND(cond) assert_true(cond)
#endif

static int setup(void **state) {
  (void)state;
  return cr_setup();
}

/* Run `stackrec CMD DIR` in a child, output to files. @return its peak RSS
 * in KiB; *status its exit status. */
static long run_rss(const char *cmd, const char *dir, int *status,
                    char *out, size_t outlen) {
  char o[4200];
  struct rusage ru;
  pid_t pid;
  int ws;

  snprintf(o, sizeof o, "%s/%s.out", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR")
                                                            : "/tmp", cmd);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    if (fd < 0)
      _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(cr_bin, cr_bin, cmd, dir, (char *)NULL);
    _exit(127);
  }
  assert_int_equal(wait4(pid, &ws, 0, &ru), pid);
  assert_true(WIFEXITED(ws));
  *status = WEXITSTATUS(ws);
  tl_slurp(o, out, outlen);
  return ru.ru_maxrss;
}

static uint64_t dir_bytes(const char *dir, uint32_t pid, uint32_t nseg) {
  uint64_t n = 0;
  uint32_t k;

  for (k = 1; k <= nseg; k++) {
    char p[4200];
    struct stat st;

    snprintf(p, sizeof p, "%s/stackrec-%u-%06u.zst", dir, (unsigned)pid,
             (unsigned)k);
    if (stat(p, &st) == 0)
      n += (uint64_t)st.st_size;
  }
  return n;
}

/* A small normal recording: the baseline RSS of each command. */
static long baseline(const char *cmd) {
  const char *d = fx_tmpdir("amp-base");
  char out[4096];
  int st;

  assert_int_equal(fx_std_write(d, PID), 0);
  return run_rss(cmd, d, &st, out, sizeof out);
}

/* nb batches of ne events; every event has its own site id, none defined
 * (thread 1 and stack 1 are). */
static void write_undefined_sites(const char *d, int nb, int ne) {
  static const uint32_t one[] = {1};
  fx_ev *ev = calloc((size_t)ne, sizeof *ev);
  stkr_fmt_buf buf = {0};
  int k, i;

  assert_non_null(ev);
  for (k = 0; k < nb; k++) {
    fx_batch b = {0};

    for (i = 0; i < ne; i++) {
      ev[i].delta = 1;
      ev[i].site = 1000 + (uint32_t)(k * ne + i);
      ev[i].thread = 1;
      ev[i].stack = 1;
    }
    b.seq = (uint64_t)k + 1;
    b.header = k == 0;
    b.segment_seq = 1;
    b.threads = b.stacks = one;
    b.n_threads = b.n_stacks = k == 0;
    b.base_ts = 1000;
    b.evs = ev;
    b.n_evs = (size_t)ne;
    b.last = k == nb - 1;
    assert_int_equal(fx_encode(&b, &buf), 0);
  }
  assert_int_equal(fx_write_segment(d, PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
  free(ev);
}

static void test_undefined_site_ids(void **state) {
  const char *dd = fx_tmpdir("amp-sites");
  char d[4096], out[1 << 14];
  long base_report, base_verify, rss;
  uint64_t bytes;
  int st;
  (void)state;

  snprintf(d, sizeof d, "%s", dd);
  base_report = baseline("report");
  base_verify = baseline("verify");
  write_undefined_sites(d, 8, 50000); /* 400 k distinct undefined ids */
  bytes = dir_bytes(d, PID, 1);

  rss = run_rss("report", d, &st, out, sizeof out);
  print_message("undefined site ids: %llu-byte file, 400000 ids: report "
                "peak RSS %ld KiB (baseline %ld KiB), exit %d\n",
                (unsigned long long)bytes, rss, base_report, st);
  assert_int_equal(st, 1); /* events with undefined ids: data lost */
  assert_non_null(strstr(out, "400000 events refer to undefined"));
  /* Per-id state would be >= 400 k x ~100 bytes = 40 MB. */
  RSS_BOUND((uint64_t)(rss - base_report) * 1024 <= 4 * bytes + (4u << 20));

  rss = run_rss("verify", d, &st, out, sizeof out);
  print_message("  verify peak RSS %ld KiB (baseline %ld KiB), exit %d\n",
                rss, base_verify, st);
  assert_int_equal(st, 1);
  RSS_BOUND((uint64_t)(rss - base_verify) * 1024 <= 4 * bytes + (4u << 20));
}

/* One batch defining stack 1 with n PCs (the writer never writes more
 * than 256), then a good batch. */
static size_t write_deep_stack(const char *d, size_t n) {
  Stackrec__Batch b = STACKREC__BATCH__INIT;
  Stackrec__Header h = STACKREC__HEADER__INIT;
  Stackrec__StackDef sd = STACKREC__STACK_DEF__INIT, *sdp = &sd;
  stkr_fmt_buf buf = {0};
  uint64_t *pcs = malloc(n * sizeof *pcs);
  size_t i, off;
  static const uint32_t one[] = {1};
  static const fx_ev ev[] = {{0, 1, 1, 1, NULL, 0, false}};
  fx_batch good = {.seq = 2, .sites = one, .n_sites = 1, .threads = one,
                   .n_threads = 1, .stacks = one, .n_stacks = 1,
                   .base_ts = 5, .evs = ev, .n_evs = 1, .last = true};

  assert_non_null(pcs);
  for (i = 0; i < n; i++)
    pcs[i] = 0x400000 + i * 16; /* distinct: no compression miracle */
  h.format_version = STKR_FORMAT_VERSION;
  h.pid = PID;
  h.segment_seq = 1;
  h.start_mono_ns = FX_START_MONO;
  h.start_wall_ns = FX_START_WALL;
  sd.id = 1;
  sd.pcs = pcs;
  sd.n_pcs = n;
  b.seq = 1;
  b.header = &h;
  b.stacks = &sdp;
  b.n_stacks = 1;
  assert_int_equal(stkr_fmt_encode_batch(&b, NULL, 3, &buf), 0);
  off = buf.len;
  assert_int_equal(fx_encode(&good, &buf), 0);
  assert_int_equal(fx_write_segment(d, PID, 1, &buf), 0);
  stkr_fmt_buf_free(&buf);
  free(pcs);
  return off;
}

static void test_deep_stack_is_damage(void **state) {
  const char *dd = fx_tmpdir("amp-deep");
  char d[4096], out[1 << 14], want[4400];
  long base_report, rss;
  uint64_t bytes;
  int st;
  (void)state;

  snprintf(d, sizeof d, "%s", dd);
  base_report = baseline("report");
  write_deep_stack(d, 2000000);
  bytes = dir_bytes(d, PID, 1);
  rss = run_rss("report", d, &st, out, sizeof out);
  print_message("stack of 2000000 PCs: %llu-byte file: report peak RSS %ld "
                "KiB (baseline %ld KiB), exit %d\n",
                (unsigned long long)bytes, rss, base_report, st);
  assert_int_equal(st, 1);
  snprintf(want, sizeof want,
           "stackrec: warning: %s/stackrec-%u-000001.zst: offset 0: damaged "
           "batch (stack 1 has 2000000 PCs, more than the writer's maximum "
           "256), skipped\n", d, PID);
  assert_non_null(strstr(out, want));
  /* The good batch after it is still read. */
  assert_non_null(strstr(out, "# 1 event from 1 process"));
  /* Decoding the 16 MB of PCs is bounded by the decode budget; keeping a
   * copy of them is not needed. */
  RSS_BOUND((uint64_t)(rss - base_report) * 1024 <= 40u << 20);

  /* Exactly at the cap: fine. */
  dd = fx_tmpdir("amp-deep-ok");
  snprintf(d, sizeof d, "%s", dd);
  write_deep_stack(d, 256);
  rss = run_rss("report", d, &st, out, sizeof out);
  assert_int_equal(st, 0);
}

TL_TEST_MAIN("amplification", setup, NULL, test_undefined_site_ids,
             test_deep_stack_is_damage)
