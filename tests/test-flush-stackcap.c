/* test-flush-stackcap.c: the worker's stack table is bounded
 * (stkr_config.stack_table_bytes, flush/stacktable.c and drain_batch.c's
 * renewal): a session that meets far more distinct stacks than its table
 * holds writes every event with its own stack, the forgotten stacks
 * defined again when met again; readers see the same content under more
 * ids, never two contents under one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"
#include "tools/bench/call_chain.h"

STKR_SITE_DEFINE(g_cap_site, "stackcap.walk");

enum { LEVELS = 11, STACKS = 1 << LEVELS, ROUNDS = 3 };

/* The leaf of call_chain.h's chains: each event's payload names its own
 * chain (2^LEVELS distinct stacks). */
static int record(uint32_t bits) {
  return stkr_event(&g_cap_site, &bits, sizeof bits);
}
static int level(int n, uint32_t bits) { return call_chain(n, bits, record); }

typedef struct seen {
  uint64_t pcs[64];
  size_t n_pcs;
  uint32_t events;
} seen;

/* Check ev against what earlier events of its chain (its payload) came
 * with: the same innermost `cmp` PCs (0: the whole stack), whatever id. */
static void check_event(seen *by_bits, const stkr_event_view *ev, size_t cmp) {
  uint32_t b;
  seen *s;

  assert_false(ev->unresolved);
  assert_int_equal(ev->payload_len, sizeof b);
  memcpy(&b, ev->payload, sizeof b);
  assert_true(b < STACKS);
  assert_true(ev->n_pcs > 2 * LEVELS + 1 && ev->n_pcs <= 64);
  if (cmp == 0) cmp = ev->n_pcs;
  s = &by_bits[b];
  if (s->events++ == 0) {
    memcpy(s->pcs, ev->pcs, ev->n_pcs * sizeof *ev->pcs);
    s->n_pcs = ev->n_pcs;
  } else {
    if (cmp == ev->n_pcs) assert_int_equal(ev->n_pcs, s->n_pcs);
    assert_memory_equal(ev->pcs, s->pcs, cmp * sizeof *ev->pcs);
  }
}

static void test_more_stacks_than_the_table_holds(void **state) {
  stkr_config cfg = STKR_CONFIG_INIT;
  stkr_reader *r = NULL;
  stkr_event_view ev;
  stkr_stats st;
  seen *by_bits = calloc(STACKS, sizeof *by_bits);
  uint32_t *ids_seen = calloc(8 * STACKS * ROUNDS, sizeof *ids_seen);
  size_t n_ids = 0, events = 0;
  int rc;
  (void)state;

  assert_non_null(by_bits);
  assert_non_null(ids_seen);
  cfg.dir = tl_dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  cfg.flush_interval_ms = 3600 * 1000;
  /* The floor: ~200 stacks of this depth, a tenth of the 2,048 met. */
  cfg.stack_table_bytes = 64 << 10;
  assert_int_equal(stkr_init(&cfg), 0);
  /* Every stack once per round, so that the rounds after the first meet
   * stacks the table forgot; a barrier every 256 events keeps the ring
   * from overflowing (drops are not what this is about). */
  for (int round = 0; round < ROUNDS; round++)
    for (uint32_t b = 0; b < STACKS; b++) {
      assert_true(level(LEVELS, b) > 0);
      if (b % 256 == 255) assert_int_equal(stkr_flush(), 0);
    }
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(st.attempted, STACKS * ROUNDS);
  assert_int_equal(st.written, STACKS * ROUNDS);
  assert_int_equal(st.dropped, 0);

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (ev.is_mark) continue;
    check_event(by_bits, &ev, 0);
    size_t i;
    for (i = 0; i < n_ids && ids_seen[i] != ev.stack_id; i++) {
    }
    if (i == n_ids) ids_seen[n_ids++] = ev.stack_id;
    events++;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(events, STACKS * ROUNDS);
  /* Two chains never share PCs (no merge): compare neighbours' innermost
   * differing level, i.e. that no two bits values had equal stacks. */
  for (uint32_t b = 0; b < STACKS; b++) {
    assert_int_equal(by_bits[b].events, ROUNDS);
    if (b > 0)
      assert_false(by_bits[b].n_pcs == by_bits[b - 1].n_pcs &&
                   memcmp(by_bits[b].pcs, by_bits[b - 1].pcs,
                          by_bits[b].n_pcs * sizeof(uint64_t)) == 0);
  }
  /* The table was renewed: stacks came under more ids than there are
   * stacks (an unbounded table gives each exactly one id). The reader
   * counts them once each, by content. */
  assert_true(n_ids > STACKS);
  assert_int_equal(stkr_reader_process_count(r), 1);
  assert_int_equal(stkr_reader_process(r, 0)->stacks, STACKS);
  stkr_reader_free(r);
  free(by_bits);
  free(ids_seen);
}

enum { THREADS = 4 };

static void *walker(void *arg) {
  uint32_t first = (uint32_t)(uintptr_t)arg;
  /* Each thread its own quarter, twice, from the far end the second time,
   * so the renewals find every thread's mirror half full of others. */
  for (int round = 0; round < 2; round++)
    for (uint32_t k = 0; k < STACKS / THREADS; k++) {
      uint32_t b = first + (round ? STACKS / THREADS - 1 - k : k);
      if (level(LEVELS, b) <= 0) return (void *)1;
      if (k % 64 == 63 && stkr_flush() != 0) return (void *)1;
    }
  return NULL;
}

/* Renewals while four threads send stacks: every thread's mirror is
 * remapped, so every event still comes with its own chain. */
static void test_renewals_with_threads(void **state) {
  stkr_config cfg = STKR_CONFIG_INIT;
  pthread_t th[THREADS];
  stkr_reader *r = NULL;
  stkr_event_view ev;
  stkr_stats st;
  seen *by_bits = calloc(STACKS, sizeof *by_bits);
  size_t events = 0;
  int rc;
  (void)state;

  assert_non_null(by_bits);
  cfg.dir = tl_dir;
  cfg.symbolize = STKR_SYMBOLIZE_NONE;
  cfg.stack_table_bytes = 64 << 10;
  assert_int_equal(stkr_init(&cfg), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, walker,
                                    (void *)(uintptr_t)(i * (STACKS / THREADS))),
                     0);
  for (int i = 0; i < THREADS; i++) {
    void *ret;
    assert_int_equal(pthread_join(th[i], &ret), 0);
    assert_null(ret);
  }
  assert_int_equal(stkr_flush(), 0);
  assert_int_equal(stkr_stats_get(&st), 0);
  assert_int_equal(stkr_shutdown(), 0);
  assert_int_equal(st.attempted, 2 * STACKS);
  assert_int_equal(st.written, 2 * STACKS);

  assert_int_equal(stkr_reader_open(tl_dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (ev.is_mark) continue;
    /* Compared up to the thread's own function: above it the frame
     * walk goes through glibc's start_thread, built without frame
     * pointers, whose rbp points anywhere in the thread's stack. */
    check_event(by_bits, &ev, 2 * LEVELS + 1);
    events++;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(events, 2 * STACKS);
  for (uint32_t b = 0; b < STACKS; b++) assert_int_equal(by_bits[b].events, 2);
  /* At least one stack a number (more where the walk's tail differed). */
  assert_true(stkr_reader_process(r, 0)->stacks >= STACKS);
  stkr_reader_free(r);
  free(by_bits);
}

TL_TEST_MAIN_EACH("flush-stackcap", tl_make_dir, tl_rm_dir,
             test_more_stacks_than_the_table_holds,
             test_renewals_with_threads)
