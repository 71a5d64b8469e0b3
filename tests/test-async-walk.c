/* test-async-walk.c: the walk along Swift async context chains
 * (recorder/walk.c).
 *
 * Synthetic part: an array stands in for the thread's stack (as in
 * test-walk.c), with a tagged frame record whose context word points at
 * contexts on the heap; every guard is exercised (no running task, null,
 * misaligned, implausible or in-stack links, cycles, max depth, skip).
 *
 * Compiler part: tests/async_fixtures/chain.c, built at run time with clang
 * (swiftasynccall, -fswift-async-fp=always), makes real extended frame
 * records; the walk from a probe called at the bottom must record the sync
 * return addresses, then the resume functions of hand-made contexts, in
 * order and exactly. STKR_ASYNC_FIXTURE names a prebuilt fixture (the
 * aarch64 run); otherwise STKR_CLANG (default clang-14) builds one.
 *
 * End to end: the same frames recorded through stkr_event, symbolized by
 * the worker and read back: the resume functions' own names (looked up at
 * their start, not at PC - 1), marked async, after the sync frames; and
 * `stackrec dump --json` shows the marker and "async_from". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"
#include "tests/cli_run.h"
#include "tests/testlib.h"

_Static_assert(STKR_PC_ASYNC == STKR__PC_ASYNC, "one async PC bit");

#define TAG (1ull << 60)
#define A STKR__PC_ASYNC

/* The runtime's AsyncContext prefix: {Parent, ResumeParent}. */
typedef struct actx {
  struct actx *parent;
  uint64_t resume;
} __attribute__((aligned(16))) actx;

#define WORDS 256
static uint64_t g_mem[WORDS] __attribute__((aligned(16)));
#define LO ((uintptr_t)&g_mem[0])
#define HI ((uintptr_t)&g_mem[WORDS])
#define AT(word) ((uintptr_t)&g_mem[(word)])

static actx g_ctx[64]; /* "heap": outside the stack array */
static int g_task_word;
static void *task_running(void) { return &g_task_word; }
static void *task_none(void) { return NULL; }

static int setup(void **state) {
  (void)state;
  stkr__walk_set_task_fn(task_running);
  return 0;
}

/* Stack: frames at words 0, 8, 16 returning to 0x1000+i; the record at
 * word 16 is tagged and its context word (word 15) points at g_ctx[0];
 * contexts 0..n-1 resume at 0x402000+i, each the child of the next. */
static void build(unsigned n_ctx) {
  unsigned i;
  memset(g_mem, 0, sizeof g_mem);
  memset(g_ctx, 0, sizeof g_ctx);
  g_mem[0] = AT(8), g_mem[1] = 0x1000;
  g_mem[8] = AT(16), g_mem[9] = 0x1001;
  g_mem[15] = (uintptr_t)&g_ctx[0];
  g_mem[16] = AT(24) | TAG, g_mem[17] = 0x1002; /* dropped when followed */
  g_mem[24] = 0, g_mem[25] = 0x1003;
  for (i = 0; i < n_ctx; i++) {
    g_ctx[i].parent = i + 1 < n_ctx ? &g_ctx[i + 1] : NULL;
    g_ctx[i].resume = 0x402000 + i;
  }
}

static unsigned g_probe_calls; /* task probes made (task_counted) */

static unsigned walk(unsigned skip, uint64_t *pcs, unsigned max, bool *trunc) {
  uint64_t h, h_keyed, fold2, *again = malloc(8u * (max ? max : 1));
  bool trunc2;
  unsigned probes = g_probe_calls;
  unsigned n = stkr__walk(AT(0), LO, HI, skip, pcs, max, &h, trunc);
  assert_int_equal(h, stkr__hash_pcs(pcs, n));
  /* The hot path's keyed walk: same PCs and hash, and the key's second
   * half as recovery recomputes it (the async give-back included). */
  probes = g_probe_calls - probes;
  assert_non_null(again);
  assert_int_equal(stkr__walk_keyed(AT(0), LO, HI, skip, again, max, &h_keyed,
                                    &fold2, &trunc2), n);
  g_probe_calls -= probes; /* the tests count one walk's probes */
  assert_int_equal(h_keyed, h);
  assert_int_equal(trunc2, *trunc);
  assert_memory_equal(again, pcs, 8u * n);
  assert_int_equal(stkr_stack_key2_final(fold2, n, 7, *trunc),
                   stkr_stack_key2(pcs, n, 7, *trunc));
  free(again);
  return n;
}

static void test_chain_followed(void **state) {
  uint64_t pcs[64];
  bool trunc;
  unsigned i, n;
  (void)state;
  build(5);
  n = walk(0, pcs, 64, &trunc);
  assert_int_equal(n, 7);
  assert_false(trunc);
  assert_int_equal(pcs[0], 0x1000);
  assert_int_equal(pcs[1], 0x1001);
  for (i = 0; i < 5; i++)
    assert_int_equal(pcs[2 + i], (0x402000 + i) | A);
}

static void test_no_task_no_chain(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  build(5);
  /* No Swift runtime, or no task on this thread: the tagged frame is an
   * ordinary last frame, and the context word is never read through. */
  g_mem[15] = 0x40; /* would fault if dereferenced */
  stkr__walk_set_task_fn(NULL);
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  assert_int_equal(pcs[2], 0x1002);
  stkr__walk_set_task_fn(task_none);
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  assert_int_equal(pcs[2], 0x1002);
  stkr__walk_set_task_fn(task_running);
}

static void test_unmapped_context_not_read_without_task(void **state) {
  uint64_t pcs[64];
  bool trunc;
  void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  (void)state;
  assert_true(page != MAP_FAILED);
  build(1);
  g_mem[15] = (uintptr_t)page;
  stkr__walk_set_task_fn(task_none);
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  stkr__walk_set_task_fn(task_running);
  munmap(page, 4096);
}

static void *task_counted(void) {
  g_probe_calls++;
  return &g_task_word;
}

/* The context word (on the stack) is checked before the Swift runtime is
 * asked: a tagged-looking word with an implausible context never costs
 * the runtime call (on Linux, a __tls_get_addr). */
static void test_probe_only_for_plausible_context(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  stkr__walk_set_task_fn(task_counted);
  g_probe_calls = 0;
  build(2);
  g_mem[15] = 0x20;
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  g_mem[15] = (uintptr_t)&g_ctx[0] + 8;
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  assert_int_equal(g_probe_calls, 0);
  build(2);
  assert_int_equal(walk(0, pcs, 64, &trunc), 4);
  assert_int_equal(g_probe_calls, 1); /* once per walk, not per context */
  stkr__walk_set_task_fn(task_running);
}

static void test_bad_first_context(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  /* An implausible first context: not followed, the frame stays ordinary. */
  build(3);
  g_mem[15] = (uintptr_t)&g_ctx[0] + 8; /* misaligned */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  g_mem[15] = 0; /* null */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  g_mem[15] = 0x20; /* page zero */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  g_mem[15] = AT(64); /* on the thread's stack: contexts are on the heap */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  g_mem[15] = 0x00FF000000000000ull; /* above user space */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  assert_int_equal(pcs[2], 0x1002);
}

static void test_bad_links_end_chain(void **state) {
  uint64_t pcs[64];
  bool trunc;
  (void)state;
  build(5);
  g_ctx[2].parent = (actx *)((uintptr_t)&g_ctx[3] + 8); /* misaligned */
  assert_int_equal(walk(0, pcs, 64, &trunc), 5);
  assert_int_equal(pcs[4], 0x402002 | A);
  build(5);
  g_ctx[1].parent = (actx *)AT(32); /* into the stack */
  assert_int_equal(walk(0, pcs, 64, &trunc), 4);
  build(5);
  g_ctx[3].resume = 0; /* no resume function: the chain ends before it */
  assert_int_equal(walk(0, pcs, 64, &trunc), 5);
  assert_int_equal(pcs[4], 0x402002 | A);
  build(5);
  g_ctx[1].resume = AT(40); /* a "function" on the stack */
  assert_int_equal(walk(0, pcs, 64, &trunc), 3);
  build(5);
  g_ctx[0].resume = 0x40; /* page zero */
  assert_int_equal(walk(0, pcs, 64, &trunc), 2);
}

static void test_cycles_end_chain(void **state) {
  uint64_t pcs[256];
  bool trunc;
  unsigned n, len;
  (void)state;
  build(1);
  g_ctx[0].parent = &g_ctx[0]; /* self loop */
  n = walk(0, pcs, 256, &trunc);
  assert_true(n <= 2 + 3);
  assert_false(trunc);
  for (len = 2; len <= 40; len++) {
    build(len);
    g_ctx[len - 1].parent = &g_ctx[len / 2]; /* a loop after a tail */
    n = walk(0, pcs, 256, &trunc);
    /* Brent's check meets the cycle within a few laps, far below max. */
    assert_false(trunc);
    assert_true(n >= 2 + len);
    assert_true(n <= 2 + 4 * len + 4);
  }
}

static void test_max_depth_and_skip(void **state) {
  uint64_t pcs[64];
  bool trunc;
  unsigned n;
  (void)state;
  build(10);
  n = walk(0, pcs, 6, &trunc);
  assert_int_equal(n, 6);
  assert_true(trunc);
  assert_int_equal(pcs[5], 0x402003 | A);
  n = walk(0, pcs, 12, &trunc);
  assert_int_equal(n, 12);
  assert_false(trunc); /* exactly max, and nothing after */
  n = walk(4, pcs, 64, &trunc); /* skip runs on into the async part */
  assert_int_equal(n, 8);
  assert_int_equal(pcs[0], 0x402002 | A);
  build(40);
  n = walk(0, pcs, 64, &trunc);
  assert_int_equal(n, 42);
  assert_int_equal(pcs[41], 0x402027 | A);
}

static void test_hash_covers_async_part(void **state) {
  uint64_t pcs[64], h1, h2;
  bool trunc;
  unsigned n1, n2;
  (void)state;
  build(4);
  n1 = stkr__walk(AT(0), LO, HI, 0, pcs, 64, &h1, &trunc);
  g_ctx[3].resume = 0x402099;
  n2 = stkr__walk(AT(0), LO, HI, 0, pcs, 64, &h2, &trunc);
  assert_int_equal(n1, n2);
  assert_int_not_equal(h1, h2);
  /* The bit counts: the same addresses as return addresses differ. */
  pcs[2] &= ~A;
  assert_int_not_equal(stkr__hash_pcs(pcs, n2), h2);
}

static void test_random_chains_never_fault(void **state) {
  static actx heap[128];
  uint64_t pcs[256];
  bool trunc;
  unsigned round, i;
  (void)state;
  srand(4242);
  /* Links point into the context array (some misaligned) or are
   * implausible (small, or above user space), never wild-but-plausible:
   * that case is the stated residual risk (walk.c). */
  for (round = 0; round < 20000; round++) {
    build(0);
    g_mem[15] = (uintptr_t)&heap[(unsigned)rand() % 128];
    for (i = 0; i < 128; i++) {
      unsigned k = (unsigned)rand() % 6;
      heap[i].parent = k == 0   ? NULL
                       : k == 1 ? (actx *)(uintptr_t)((uint64_t)rand() << 50)
                       : k == 2 ? (actx *)((uintptr_t)&heap[rand() % 128] + 8)
                                : &heap[(unsigned)rand() % 128];
      heap[i].resume = (unsigned)rand() % 8 == 0 ? 0 : 0x400000 + (unsigned)rand();
    }
    assert_true(walk(0, pcs, 256, &trunc) <= 256);
  }
}

/* ---- frames made by the compiler ---------------------------------------- */
typedef struct fx_ctx {
  struct fx_ctx *parent;
  void (*resume)(void);
} __attribute__((aligned(16))) fx_ctx;
typedef void (*fx_probe_fn)(void *arg);

typedef struct probe_out {
  uint64_t pcs[64];
  unsigned n;
  bool trunc;
  uint64_t ret; /* our return address: into fx_sync */
} probe_out;

__attribute__((noinline)) static void probe(void *arg) {
  probe_out *o = arg;
  uintptr_t lo, hi;
  uint64_t h;

  o->ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
  if (stkr__stack_bounds(&lo, &hi) != 0)
    return;
  o->n = stkr__walk((uintptr_t)__builtin_frame_address(0), lo, hi, 0, o->pcs,
                    64, &h, &o->trunc);
  __asm__ volatile("" ::: "memory");
}

/* The fixture: prebuilt (STKR_ASYNC_FIXTURE) or built now with clang. NULL
 * (and *why set) when no compiler can make swiftasynccall frames. */
static void *load_fixture(char *why, size_t len) {
  const char *pre = getenv("STKR_ASYNC_FIXTURE");
  const char *cc = getenv("STKR_CLANG");
  const char *tmp = getenv("TEST_TMPDIR");
  char so[512], cmd[2048];
  void *h;
  int st;

  if (pre != NULL && pre[0] != '\0') {
    snprintf(so, sizeof so, "%s", pre);
  } else {
    if (cc == NULL || cc[0] == '\0')
      cc = "clang-14";
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", cc);
    if (system(cmd) != 0) {
      snprintf(why, len, "%s not found: install clang-14 (tools/install-deps.sh)", cc);
      return NULL;
    }
    snprintf(so, sizeof so, "%s/async_chain.so", tmp ? tmp : "/tmp");
    snprintf(cmd, sizeof cmd,
             "%s -O1 -fPIC -shared -fno-omit-frame-pointer "
             "-fno-optimize-sibling-calls -fswift-async-fp=always -Wall "
             "-Werror -o %s tests/async_fixtures/chain.c",
             cc, so);
    st = system(cmd);
    if (st != 0) /* the compiler exists: this is a failure */
      fail_msg("building the fixture failed: %s", cmd);
  }
  h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    fail_msg("dlopen %s: %s", so, dlerror());
  return h;
}

static void test_compiler_made_frames(void **state) {
  char why[512] = "";
  void *h = load_fixture(why, sizeof why);
  void (*run)(fx_ctx *, fx_probe_fn, void *);
  void *volatile *ret_into_inner;
  void (*resume[4])(void);
  static fx_ctx ctx[8];
  probe_out o;
  unsigned i;
  (void)state;

  if (h == NULL) {
    print_message("SKIPPED compiler-made frames: %s\n", why);
    skip();
  }
  *(void **)&run = dlsym(h, "fx_run");
  ret_into_inner = dlsym(h, "fx_ret_into_inner");
  for (i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "fx_resume_%u", i + 1);
    *(void **)&resume[i] = dlsym(h, name);
    assert_non_null(resume[i]);
  }
  assert_non_null(run);
  assert_non_null(ret_into_inner);
  /* The innermost function's context resumes its caller; the chain goes
   * four levels up, past the three physical async frames. */
  memset(ctx, 0, sizeof ctx);
  for (i = 0; i < 4; i++) {
    ctx[i].parent = i + 1 < 4 ? &ctx[i + 1] : NULL;
    ctx[i].resume = resume[i];
  }
  memset(&o, 0, sizeof o);
  run(ctx, probe, &o);
  assert_int_equal(o.n, 2 + 4);
  assert_false(o.trunc);
  assert_int_equal(o.pcs[0], o.ret);
  assert_int_equal(o.pcs[1], (uint64_t)(uintptr_t)*ret_into_inner);
  for (i = 0; i < 4; i++)
    assert_int_equal(o.pcs[2 + i], (uint64_t)(uintptr_t)resume[i] | A);

  /* Without a running task the same frames end the walk at the innermost
   * async frame's own record (its return into fx_async_mid). */
  stkr__walk_set_task_fn(task_none);
  memset(&o, 0, sizeof o);
  run(ctx, probe, &o);
  stkr__walk_set_task_fn(task_running);
  assert_int_equal(o.n, 3);
  assert_int_equal(o.pcs[1], (uint64_t)(uintptr_t)*ret_into_inner);
  assert_int_equal(o.pcs[2] & A, 0);
  dlclose(h);
}

STKR_SITE_DEFINE(g_site, "test.async");

static void probe_event(void *arg) {
  *(int *)arg = stkr_event(&g_site, "x", 1);
  __asm__ volatile("" ::: "memory");
}

static void test_recorded_symbolized_read_back(void **state) {
  char why[512] = "", dir[4096];
  void *h = load_fixture(why, sizeof why);
  void (*run)(fx_ctx *, fx_probe_fn, void *);
  static fx_ctx ctx[8];
  stkr_config cfg;
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int rc = -1;
  size_t i, k, events = 0;
  (void)state;

  if (h == NULL) {
    print_message("SKIPPED compiler-made frames: %s\n", why);
    skip();
  }
  *(void **)&run = dlsym(h, "fx_run");
  assert_non_null(run);
  memset(ctx, 0, sizeof ctx);
  for (i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "fx_resume_%zu", i + 1);
    ctx[i].parent = i + 1 < 4 ? &ctx[i + 1] : NULL;
    *(void **)&ctx[i].resume = dlsym(h, name);
    assert_non_null(ctx[i].resume);
  }
  assert_int_equal(tl_mkdtemp(dir, sizeof dir, "async-rec"), 0);
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  assert_int_equal(stkr_init(&cfg), 0);
  run(ctx, probe_event, &rc);
  assert_int_equal(rc, 0);
  assert_int_equal(stkr_shutdown(), 0);

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1) {
    size_t real = 0, first_async = SIZE_MAX;
    events++;
    /* PCs: sync ones, then exactly the four resume functions, tagged. */
    assert_true(ev.n_pcs >= 6);
    for (i = 0; i < 4; i++)
      assert_int_equal(ev.pcs[ev.n_pcs - 4 + i],
                       (uint64_t)(uintptr_t)ctx[i].resume | STKR_PC_ASYNC);
    for (i = 0; i + 4 < ev.n_pcs; i++)
      assert_int_equal(ev.pcs[i] & STKR_PC_ASYNC, 0);
    assert_non_null(ev.frames);
    for (k = 0; k < ev.n_frames; k++) {
      const stkr_frame *f = &ev.frames[k];
      if (f->inlined)
        continue;
      if (f->async && first_async == SIZE_MAX)
        first_async = real;
      if (real >= ev.n_pcs - 4) {
        char want[16];
        snprintf(want, sizeof want, "fx_resume_%zu", real - (ev.n_pcs - 4) + 1);
        assert_true(f->async);
        assert_non_null(f->function);
        assert_string_equal(f->function, want);
      } else {
        assert_false(f->async);
      }
      real++;
    }
    assert_int_equal(first_async, ev.n_pcs - 4);
  }
  assert_int_equal(events, 1);
  stkr_reader_free(r);

  /* The aarch64 cross run (tests/aarch64/run.sh) has no stackrec tool:
   * STKR_NO_CLI leaves this part out there; under Bazel it always runs. */
  if (getenv("STKR_NO_CLI") != NULL) {
    dlclose(h);
    return;
  }
  assert_int_equal(cr_setup(), 0);
  assert_int_equal(cr_run("dump --json '%s'", dir), 0);
  cr_assert_has(cr_out,
                "\"function\":\"fx_resume_1\"",
                "\"async\":true",
                "\"async_from\":");
  assert_null(strstr(cr_out, "\"0x80")); /* no tagged value as an address */
  /* The HTML frame table flags them (8: async; not the app's image). */
  {
    static char html[1 << 20];
    assert_int_equal(cr_html(dir, html, sizeof html), 0);
    assert_non_null(strstr(html, "[\"fx_resume_1\",\"\",8,"));
    assert_non_null(strstr(html, "[\"fx_resume_4\",\"\",8,"));
  }
  dlclose(h);
}

TL_TEST_MAIN_EACH("async-walk", setup, NULL, test_chain_followed,
                  test_no_task_no_chain,
                  test_unmapped_context_not_read_without_task,
                  test_probe_only_for_plausible_context, test_bad_first_context,
                  test_bad_links_end_chain, test_cycles_end_chain,
                  test_max_depth_and_skip, test_hash_covers_async_part,
                  test_random_chains_never_fault, test_compiler_made_frames,
                  test_recorded_symbolized_read_back)
