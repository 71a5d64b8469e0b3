/*
 * test-offstack.c: events made off the thread's own stack, read back: in a
 * signal handler running on an alternate signal stack (SA_ONSTACK, as crash
 * handlers run), the handler's frames, walked within that stack; on a stack
 * of the app's own (a makecontext coroutine's), which cannot be walked
 * safely, an empty stack marked truncated. Before, both were empty stacks
 * that looked whole (QA, session 23). Both walks: frame pointers and the
 * unwind tables (`stackrec record`'s); with the tables, a handler whose
 * code has no frame pointers is walked whole (QA, session 24: the
 * frame-pointer walk there kept its innermost frame alone).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/hostile_fixtures/hostile.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_alt, "offstack.altstack");
STKR_SITE_DEFINE(g_coro, "offstack.coroutine");

static volatile int g_rc = -1000;

static __attribute__((noinline)) void on_usr1(int sig) {
  (void)sig;
  g_rc = stkr_event(&g_alt, NULL, 0);
  __asm__ volatile("" ::: "memory");
}

/* Into code built without frame pointers (tests/hostile_fixtures), whose
 * rbp / x29 carry data at the event. */
static __attribute__((noinline)) void on_usr1_nofp(int sig) {
  (void)sig;
  g_rc = hostile_nofp_pressure(7);
  __asm__ volatile("" ::: "memory");
}

static ucontext_t g_main_uc, g_coro_uc;

static __attribute__((noinline)) void coro_body(void) {
  g_rc = stkr_event(&g_coro, NULL, 0);
  __asm__ volatile("" ::: "memory");
}

/* The one event at site: its PCs (n) and whether it is marked truncated. */
static void read_event(const char *site, size_t *n, bool *truncated) {
  stkr_reader *r;
  stkr_event_view ev;
  int found = 0;

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while (stkr_reader_next(r, &ev) == 1)
    if (strcmp(ev.site, site) == 0) {
      found++;
      *n = ev.n_pcs;
      *truncated = ev.stack_truncated;
    }
  stkr_reader_free(r);
  assert_int_equal(found, 1);
}

static void record(void (*body)(void), stkr_unwind_mode unwind) {
  stkr_config cfg = {.size = sizeof cfg, .dir = tl_dir,
                     .symbolize = STKR_SYMBOLIZE_NONE, .unwind = unwind};
  tl_rm_rf(tl_dir);
  assert_int_equal(stkr_init(&cfg), 0);
  assert_int_equal(stkr_thread_attach(), 0); /* bounds of this thread */
  body();
  assert_int_equal(g_rc, 0);
  assert_int_equal(stkr_shutdown(), 0);
}

static void raise_with(void (*handler)(int)) {
  static char stack[64 << 10];
  stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_ONSTACK;
  assert_int_equal(sigaltstack(&ss, NULL), 0);
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  raise(SIGUSR1);
  ss.ss_flags = SS_DISABLE;
  assert_int_equal(sigaltstack(&ss, NULL), 0);
}

static void raise_on_altstack(void) { raise_with(on_usr1); }
static void raise_on_altstack_nofp(void) { raise_with(on_usr1_nofp); }

static void run_coroutine(void) {
  static char stack[64 << 10];
  assert_int_equal(getcontext(&g_coro_uc), 0);
  g_coro_uc.uc_stack.ss_sp = stack;
  g_coro_uc.uc_stack.ss_size = sizeof stack;
  g_coro_uc.uc_link = &g_main_uc;
  makecontext(&g_coro_uc, coro_body, 0);
  assert_int_equal(swapcontext(&g_main_uc, &g_coro_uc), 0);
}

/* body's one event at site, with each walk: between min_pcs and max_pcs
 * PCs, and marked truncated (not a whole stack: false before). */
static void expect_offstack(void (*body)(void), const char *site,
                            size_t min_pcs, size_t max_pcs) {
  static const stkr_unwind_mode walks[] = {STKR_UNWIND_FP, STKR_UNWIND_TABLES};
  for (size_t i = 0; i < 2; i++) {
    size_t n = 0;
    bool truncated = false;
    record(body, walks[i]);
    read_event(site, &n, &truncated);
    if (n < min_pcs || n > max_pcs || !truncated)
      fail_msg("%s, walk %d: %zu PCs, truncated %d", site, (int)walks[i], n,
               truncated);
  }
}

/* The handler's frames at least (0 before); the interrupted code's are
 * not in. */
static void test_alternate_signal_stack(void **state) {
  (void)state;
  expect_offstack(raise_on_altstack, "offstack.altstack", 1, 1000);
}

/* hostile_nofp_pressure, on_usr1_nofp, the trampoline: the tables walk
 * them within the alternate stack (1 PC before: the frame-pointer walk
 * that stood in for them stopped at the data in rbp). */
static void test_handler_without_frame_pointers(void **state) {
  size_t n = 0;
  bool truncated = false;
  (void)state;
  record(raise_on_altstack_nofp, STKR_UNWIND_TABLES);
  read_event("hostile.nofp", &n, &truncated);
  if (n < 3 || !truncated)
    fail_msg("%zu PCs, truncated %d", n, truncated);
}

static void test_coroutine_stack(void **state) {
  (void)state;
  expect_offstack(run_coroutine, "offstack.coroutine", 0, 0);
}

TL_TEST_MAIN_EACH("offstack", tl_make_dir, NULL, test_alternate_signal_stack,
                  test_handler_without_frame_pointers, test_coroutine_stack)
