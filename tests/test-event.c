/* test-event.c: stkr_event() end to end inside recorder/ — no flush worker:
 * the test itself plays the consumer and reads the calling thread's ring. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"
#include "tests/ring_harness.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site_a, "test.a");
STKR_SITE_DEFINE(g_site_b, "test.b");
STKR_SITE_DEFINE(g_site_a_again, "test.a");

static stkr__rconf conf(size_t ring, unsigned payload_max) {
  stkr__rconf rc = {.ring_bytes = ring, .max_depth = 64,
                    .payload_max = payload_max};
  return rc;
}

static int setup(void **state) {
  (void)state;
  return rh_start(1 << 20, 64, 16);
}

/* Known chain: c1 -> c2 -> c3 -> stkr_event. */
static uint64_t g_ret[2];
static uint64_t g_before, g_after;
static __attribute__((noinline)) int c3(const char *payload, size_t len) {
  int rc;
  g_ret[1] = (uint64_t)__builtin_return_address(0);
  g_before = stkr__clock_event(); /* the records' clock: ticks or ns */
  rc = stkr_event(&g_site_a, payload, len);
  g_after = stkr__clock_event();
  __asm__ volatile("" ::: "memory");
  return rc;
}
static __attribute__((noinline)) int c2(const char *payload, size_t len) {
  int rc;
  g_ret[0] = (uint64_t)__builtin_return_address(0);
  rc = c3(payload, len);
  __asm__ volatile("" ::: "memory");
  return rc;
}
static __attribute__((noinline)) int c1(const char *payload, size_t len) {
  int rc = c2(payload, len);
  __asm__ volatile("" ::: "memory");
  return rc;
}

static void test_event_captures_caller_stack_and_payload(void **state) {
  const stkr__record *rec;
  const uint64_t *pcs;
  (void)state;
  assert_int_equal(c1("hello", 5), 0);
  rec = stkr__ring_peek(rh_ring());
  assert_non_null(rec);
  assert_int_equal(rec->site_id, stkr__site_id(&g_site_a));
  assert_string_equal(stkr__site_name(rec->site_id), "test.a");
  pcs = stkr__record_pcs(rec);
  assert_true(rec->depth >= 4);
  /* pcs[0] is inside c3 (right after its call to stkr_event). */
  assert_true(pcs[0] > (uint64_t)(uintptr_t)&c3 &&
              pcs[0] < (uint64_t)(uintptr_t)&c3 + 512);
  assert_int_equal(pcs[1], g_ret[1]);
  assert_int_equal(pcs[2], g_ret[0]);
  assert_false(stkr__record_known(rec)); /* the stack's first event */
  assert_int_equal(stkr__record_as_full(rec)->key[0],
                   stkr__hash_pcs(pcs, rec->depth));
  assert_true(rec->ts_ns >= g_before && rec->ts_ns <= g_after);
  assert_int_equal(rec->payload_len, 5);
  assert_memory_equal(stkr__record_payload(rec), "hello", 5);
  assert_int_equal(rec->flags & STKR__REC_PAYLOAD_TRUNCATED, 0);
  stkr__ring_release(rh_ring(), rec);
  assert_null(stkr__ring_peek(rh_ring()));
}

/* Stacks once per thread: the second event of a stack is a 24-byte known
 * record naming the first's slot, with its payload; another stack (or
 * site) is full again; a stack enters the table only once its full record
 * was committed (a drop while the ring is full leaves it unknown); a reset
 * forgets every stack. */
static __attribute__((noinline)) int other_stack(const char *p, size_t n) {
  int rc = stkr_event(&g_site_a, p, n);
  __asm__ volatile("" ::: "memory");
  return rc;
}

/* One call site for every call, whatever the compiler does with a loop
 * (aarch64 gcc -O2 split c1(i < 3 ? ...) into two calls: two stacks). */
static __attribute__((noinline)) int c1_at_one_site(int i) {
  /* volatile: the arguments are loaded, never folded into two calls */
  const char *volatile p = i < 3 ? "abc" : NULL;
  volatile size_t n = i < 3 ? 3 : 0;
  int rc = c1(p, n);
  __asm__ volatile("" ::: "memory");
  return rc;
}

static const stkr__record *take(void) {
  static uint8_t copy[4096];
  const stkr__record *rec = stkr__ring_peek(rh_ring());
  assert_non_null(rec);
  assert_true(rec->size <= sizeof copy);
  memcpy(copy, rec, rec->size);
  stkr__ring_release(rh_ring(), rec);
  return (const stkr__record *)(const void *)copy;
}

static void test_known_stack_sent_once(void **state) {
  const stkr__record *rec;
  uint64_t key[2];
  uint8_t slot;
  /* volatile: a loop the compiler unrolls calls from several sites, and
   * each call site is another stack (seen on aarch64 gcc -O2). */
  volatile int i;
  (void)state;
  /* One call site, so one stack: the last of the four has no payload. */
  for (i = 0; i < 4; i++)
    assert_int_equal(c1_at_one_site(i), 0);
  rec = take();
  assert_false(stkr__record_known(rec));
  assert_true(rec->depth >= 4);
  /* The payload is new too: the slot's old key (none) and the bytes. */
  assert_int_equal(rec->size,
                   stkr__record_full_bytes(rec->depth, STKR__PEVICTED_BYTES + 3));
  assert_true(rec->flags & STKR__REC_PAYLOAD_NEW);
  assert_memory_equal(rh_payload(rec), "abc", 3);
  key[0] = stkr__record_as_full(rec)->key[0];
  key[1] = stkr__record_as_full(rec)->key[1];
  assert_int_equal(key[1], stkr_stack_key2(stkr__record_pcs(rec), rec->depth,
                                           rec->site_id, 0));
  slot = rec->slot;
  /* An empty table: the first way of the key's set. */
  assert_int_equal(slot, 2 * stkr_stack_key2_slot(key[1], STKR__KNOWN_SLOTS / 2));
  for (i = 0; i < 2; i++) {
    rec = take();
    assert_true(stkr__record_known(rec));
    /* A known stack with a known payload: the 24 bytes alone. */
    assert_int_equal(rec->size, 24);
    assert_true(rec->flags & STKR__REC_PAYLOAD_KNOWN);
    assert_int_equal(rec->depth, 0);
    assert_int_equal(rec->slot, slot);
    assert_int_equal(rec->site_id, stkr__site_id(&g_site_a));
    assert_int_equal(rec->payload_len, 3);
    assert_null(stkr__record_payload(rec));
    assert_memory_equal(rh_payload(rec), "abc", 3);
  }
  /* Without payload a known record is 24 bytes: the goal of issue 18. */
  rec = take();
  assert_true(stkr__record_known(rec));
  assert_int_equal(rec->size, 24);
  /* Another stack at the same site: full, then known. */
  for (i = 0; i < 2; i++) {
    assert_int_equal(other_stack(NULL, 0), 0);
    assert_int_equal(stkr__record_known(take()), i == 1);
  }
  /* After a reset (a new worker) every stack is sent again. */
  stkr__ring_reset(rh_ring());
  assert_int_equal(c1(NULL, 0), 0);
  rec = take();
  assert_false(stkr__record_known(rec));
  assert_int_equal(stkr__record_as_full(rec)->evicted[0], 0);
  assert_null(stkr__ring_peek(rh_ring()));
}

/* One-frame stacks (given PCs) whose keys fall in one set of the
 * known-stack table: found by trying PCs. */
static void same_set_pcs(uint64_t *pcs, unsigned n, uint32_t site) {
  unsigned want = ~0u, k = 0;
  for (uint64_t pc = 0x401000; k < n; pc += 16) {
    unsigned set = stkr_stack_key2_slot(stkr_stack_key2(&pc, 1, site, 0),
                                        STKR__KNOWN_SLOTS / 2);
    if (want == ~0u) want = set;
    if (set == want) pcs[k++] = pc;
  }
}

/* The table is two-way: two stacks of one set alternating are each sent
 * once (direct-mapped, they evicted each other at every event when they
 * shared a slot); a third evicts the older of the two (FIFO), and every
 * full record names the key it evicted. */
static void test_known_stacks_two_way(void **state) {
  uint64_t pcs[3];
  const stkr__record *rec;
  uint32_t site;
  uint8_t slot_a, slot_b;
  (void)state;

  assert_int_equal(stkr_thread_attach(), 0);
  site = stkr__site_id(&g_site_b);
  same_set_pcs(pcs, 3, site);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(stkr__record_stack(NULL, &g_site_b, &pcs[i & 1], 1,
                                        NULL, 0), 0);
    rec = take();
    assert_int_equal(stkr__record_known(rec), i >= 2);
    assert_int_equal(stkr__record_pcs(rec) != NULL && rec->depth == 1 &&
                         stkr__record_pcs(rec)[0] == pcs[i & 1],
                     i < 2);
    if (i == 0) slot_a = rec->slot;
    if (i == 1) slot_b = rec->slot;
    if (i >= 2) assert_int_equal(rec->slot, i & 1 ? slot_b : slot_a);
  }
  assert_int_equal(slot_a / 2, slot_b / 2);
  assert_int_not_equal(slot_a, slot_b);
  /* A third: into the older way (a's), which it names as evicted. */
  assert_int_equal(stkr__record_stack(NULL, &g_site_b, &pcs[2], 1, NULL, 0),
                   0);
  rec = take();
  assert_false(stkr__record_known(rec));
  assert_int_equal(rec->slot, slot_a);
  assert_int_equal(stkr__record_as_full(rec)->evicted[1],
                   stkr_stack_key2(&pcs[0], 1, site, 0));
  /* b is still known; a comes back full, into b's way now the older. */
  assert_int_equal(stkr__record_stack(NULL, &g_site_b, &pcs[1], 1, NULL, 0),
                   0);
  assert_true(stkr__record_known(take()));
  assert_int_equal(stkr__record_stack(NULL, &g_site_b, &pcs[0], 1, NULL, 0),
                   0);
  rec = take();
  assert_false(stkr__record_known(rec));
  assert_int_equal(rec->slot, slot_b);
  assert_null(stkr__ring_peek(rh_ring()));
}

static void test_dropped_full_record_stays_unknown(void **state) {
  stkr__counts c0, c1c;
  int pushed = 0, r;
  volatile int i; /* one call site per loop (see above) */
  (void)state;
  assert_int_equal(stkr_thread_attach(), 0);
  stkr__threads_counts(&c0);
  /* Fill the ring with another stack until a push drops (same payload
   * size: the same reservation). */
  while ((r = other_stack("x", 1)) == 0)
    pushed++;
  assert_int_equal(r, -EAGAIN);
  /* c1's stack is new: its full record is dropped, so it must not be
   * known; the next push after draining must carry its PCs. */
  for (i = 0; i < 2; i++) {
    assert_int_equal(c1("y", 1), i == 0 ? -EAGAIN : 0);
    while (i == 0 && stkr__ring_peek(rh_ring()) != NULL)
      (void)take();
  }
  assert_false(stkr__record_known(take()));
  stkr__threads_counts(&c1c);
  assert_int_equal(c1c.dropped_ring_full - c0.dropped_ring_full, 2);
  assert_true(pushed > 1000); /* known records: a 1 MiB ring holds many */
}

/* The process-wide cap on ring memory: a thread that would pass it gets
 * no ring, and its events are dropped and counted (dropped_other) until
 * there is room again; then it attaches and records. */
static void *capped_thread(void *arg) {
  int *rc = arg;
  rc[0] = stkr_event(&g_site_a, NULL, 0); /* attach refused */
  rc[1] = stkr_event(&g_site_a, NULL, 0); /* still no room: no retry */
  stkr__threads_set_ring_cap(0); /* the default */
  rc[2] = stkr_event(&g_site_a, NULL, 0); /* room: attaches, records */
  rc[3] = stkr__tls != STKR__THREAD_CAPPED && stkr__tls != NULL;
  return NULL;
}

/* Payloads once per thread (common/stkr_ringfile.h, "Payloads"): a
 * repeated payload is sent as its slot only; a changed one carries its
 * bytes and the slot's old key; two of one set both stay (the table is
 * two-way); a third evicts the older, which is sent again; a reset
 * forgets them; truncated payloads are interned as cut. Every record's
 * payload, read back through the mirror, is the one passed. */
static void payload_key_of(const char *p, uint64_t key[2], unsigned *set) {
  stkr_payload_key(p, strlen(p), key);
  *set = stkr_payload_key_slot(key, STKR__PKNOWN_SLOTS / 2);
}

/* The next "/tmp/<i>" (from *i on) whose payload key is in `set`. */
static void payload_in_set(unsigned set, int *i, char *buf, size_t len,
                           uint64_t key[2]) {
  unsigned s;
  for (;; (*i)++) {
    snprintf(buf, len, "/tmp/%d", *i);
    payload_key_of(buf, key, &s);
    if (s == set) break;
  }
  (*i)++;
}

static const stkr__record *take_payload(const char *want) {
  const stkr__record *rec = take();
  const uint8_t *p = rh_payload(rec);
  assert_int_equal(rec->payload_len, strlen(want));
  assert_non_null(p);
  assert_memory_equal(p, want, rec->payload_len);
  return rec;
}

static void expect_payload(const char *p, unsigned pslot, bool known,
                           const uint64_t *evicted) {
  const stkr__record *rec;
  assert_int_equal(other_stack(p, strlen(p)), 0);
  rec = take_payload(p);
  assert_int_equal(rec->pslot, pslot);
  assert_true(rec->flags & (known ? STKR__REC_PAYLOAD_KNOWN
                                  : STKR__REC_PAYLOAD_NEW));
  if (!known) assert_memory_equal(stkr__record_ppart(rec), evicted, 16);
}

static void test_known_payload_sent_once(void **state) {
  static const uint64_t none[2];
  const stkr__record *rec;
  char other[16], third[16];
  uint64_t ka[2], kb[2], kc[2];
  unsigned set, sa;
  int i = 0;
  (void)state;
  rh_payload_forget();
  payload_key_of("/etc/passwd", ka, &set);
  sa = 2 * set; /* an empty table: the set's first way */
  /* Two more payloads of its set: the third evicts. */
  payload_in_set(set, &i, other, sizeof other, kb);
  payload_in_set(set, &i, third, sizeof third, kc);
  /* One call site, one stack (each line of this test is another). */
  for (i = 0; i < 4; i++) {
    assert_int_equal(other_stack("/etc/passwd", 11), 0);
    rec = take_payload("/etc/passwd");
    assert_int_equal(rec->pslot, sa);
    if (i == 0) {
      assert_true(rec->flags & STKR__REC_PAYLOAD_NEW);
      assert_int_equal(rh_ring()->c->pknown[sa][0], ka[0]);
      assert_int_equal(rh_ring()->c->pknown[sa][1], ka[1]);
    } else {
      assert_true(rec->flags & STKR__REC_PAYLOAD_KNOWN);
      assert_int_equal(rec->size, 24);
    }
  }
  /* A new stack with a known payload: PCs, no payload bytes. */
  assert_int_equal(c1("/etc/passwd", 11), 0);
  rec = take_payload("/etc/passwd");
  assert_false(stkr__record_known(rec));
  assert_true(rec->flags & STKR__REC_PAYLOAD_KNOWN);
  assert_int_equal(rec->size, stkr__record_full_bytes(rec->depth, 0));
  /* Changing payloads: each carries its bytes until repeated. The
   * second of the set takes its empty way; both are then known. */
  expect_payload(other, sa + 1, false, none);
  expect_payload("/etc/passwd", sa, true, NULL);
  expect_payload(other, sa + 1, true, NULL);
  /* The third evicts the older, /etc/passwd, and says so; /etc/passwd,
   * sent again, evicts the then older, `other`; and so on (FIFO). */
  expect_payload(third, sa, false, ka);
  expect_payload("/etc/passwd", sa + 1, false, kb);
  expect_payload(third, sa, true, NULL);
  expect_payload(other, sa, false, kc);
  expect_payload(other, sa, true, NULL);
  expect_payload("/etc/passwd", sa + 1, true, NULL);
  /* Same bytes, another length: another payload. */
  assert_int_equal(other_stack("/etc/passwd", 4), 0);
  assert_true(take_payload("/etc")->flags & STKR__REC_PAYLOAD_NEW);
  /* Cut at payload_max (16): interned as cut, flagged each time. */
  for (i = 0; i < 2; i++) {
    assert_int_equal(other_stack("/a/rather/long/path/name", 24), 0);
    rec = take_payload("/a/rather/long/p");
    assert_true(rec->flags & STKR__REC_PAYLOAD_TRUNCATED);
    assert_true(rec->flags & (i == 0 ? STKR__REC_PAYLOAD_NEW
                                     : STKR__REC_PAYLOAD_KNOWN));
  }
  /* No payload: neither flag. */
  assert_int_equal(other_stack(NULL, 0), 0);
  rec = take();
  assert_int_equal(rec->flags & (STKR__REC_PAYLOAD_NEW | STKR__REC_PAYLOAD_KNOWN), 0);
  /* After a reset (a new worker) every payload is sent again. */
  stkr__ring_reset(rh_ring());
  rh_payload_forget();
  assert_int_equal(other_stack(other, strlen(other)), 0);
  rec = take_payload(other);
  assert_true(rec->flags & STKR__REC_PAYLOAD_NEW);
  assert_int_equal(((const uint64_t *)(const void *)stkr__record_ppart(rec))[0], 0);
  assert_null(stkr__ring_peek(rh_ring()));
}

/* A PAYLOAD_NEW record dropped for a full ring never enters the table:
 * the next event with that payload carries the bytes. */
static void test_dropped_payload_stays_unknown(void **state) {
  int r;
  (void)state;
  rh_payload_forget();
  /* Fill the ring with one repeated event, then try a new payload. */
  do {
    r = other_stack("fill", 4);
  } while (r == 0);
  assert_int_equal(r, -EAGAIN);
  assert_int_equal(other_stack("dropped", 7), -EAGAIN);
  while (stkr__ring_peek(rh_ring()) != NULL) (void)take_payload("fill");
  assert_int_equal(other_stack("dropped", 7), 0);
  assert_true(take_payload("dropped")->flags & STKR__REC_PAYLOAD_NEW);
}

static void test_ring_memory_cap(void **state) {
  stkr__counts c0, c1;
  pthread_t th;
  int rc[4];
  (void)state;
  assert_int_equal(stkr_thread_attach(), 0);
  stkr__threads_counts(&c0);
  stkr__threads_set_ring_cap(1); /* below what one more thread needs */
  assert_int_equal(pthread_create(&th, NULL, capped_thread, rc), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  stkr__threads_set_ring_cap(0); /* the default */
  assert_int_equal(rc[0], -EAGAIN); /* as documented (-ENOMEM before) */
  assert_int_equal(rc[1], -EAGAIN);
  assert_int_equal(rc[2], 0);
  assert_true(rc[3]);
  stkr__threads_counts(&c1);
  assert_int_equal(c1.dropped_other - c0.dropped_other, 2);
  assert_int_equal(c1.pushed - c0.pushed, 1);
}

/* Memory tiers (stkr__ring_tier): past an eighth of the cap a new thread
 * gets a quarter-size ring (at least 64 KiB), past 7/32 a sixteenth (at
 * least 32 KiB and the floor), instead of being refused at the cap. */
static void *tiered_thread(void *arg) {
  size_t *size = arg;
  if (stkr_event(&g_site_a, NULL, 0) == 0 && stkr__tls != NULL &&
      stkr__tls != STKR__THREAD_CAPPED)
    *size = (size_t)stkr__ring_size(&stkr__tls->ring);
  return NULL;
}

/* The ring of a thread attaching under a cap of mult times the ring
 * memory charged now (threads that exited may not be reaped yet) plus add
 * bytes; mult 0: the default cap. */
static size_t tiered_ring(uint64_t mult, uint64_t add) {
  pthread_t th;
  size_t size = 0;
  stkr__threads_set_ring_cap(mult * stkr__threads_ring_live() + add);
  assert_int_equal(pthread_create(&th, NULL, tiered_thread, &size), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  stkr__threads_set_ring_cap(0); /* the default */
  return size;
}

static void test_ring_memory_tiers(void **state) {
  const uint64_t mib = 1u << 20, kib = 1u << 10;
  (void)state;
  /* The default cap (32 MiB): 256 KiB rings up to 4 MiB, 64 KiB ones up
   * to 7 MiB, then 32 KiB (a sixteenth, at least 32 KiB), or the floor
   * rounded up to 2^n; never more than configured (the soak's 16 KiB, a
   * tiny test ring). */
  static const struct {
    size_t ring, floor;
    uint64_t live;
    size_t want;
  } tiers[] = {
      {256 << 10, 4 << 10, 0, 256 << 10},
      {256 << 10, 4 << 10, 3u << 20, 256 << 10},
      {256 << 10, 4 << 10, (4u << 20) - (100 << 10), 64 << 10}, /* +264 KiB */
      {256 << 10, 4 << 10, 5u << 20, 64 << 10},
      {256 << 10, 4 << 10, 6u << 20, 64 << 10},
      {256 << 10, 4 << 10, (7u << 20) - (50 << 10), 32 << 10}, /* +72 KiB */
      {256 << 10, 4 << 10, 20u << 20, 32 << 10},
      {256 << 10, 40 << 10, 20u << 20, 64 << 10},
      {64 << 10, 4 << 10, 5u << 20, 64 << 10},
      {64 << 10, 4 << 10, 20u << 20, 32 << 10},
      {1 << 20, 4 << 10, 5u << 20, 256 << 10},
      {16 << 10, 4 << 10, 20u << 20, 16 << 10},
      {8 << 10, 4 << 10, 20u << 20, 8 << 10},
      /* 4 MiB configured (the cap, 8 of them, is 32 MiB + 32 KiB): 4 rings
       * of it, then 4 of 1 MiB, then a sixteenth. */
      {4 << 20, 4 << 10, 12u << 20, 4 << 20},
      {4 << 20, 4 << 10, 13u << 20, 1 << 20},
      {4 << 20, 4 << 10, 19u << 20, 1 << 20},
      {4 << 20, 4 << 10, 20u << 20, 256 << 10},
  };
  for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
    assert_int_equal(stkr__ring_tier(tiers[i].ring, tiers[i].floor,
                                     tiers[i].live,
                                     tiers[i].ring == 4 << 20
                                         ? 8 * ((4u << 20) + 8192)
                                         : 32 * mib),
                     tiers[i].want);
  /* Real threads (this test's rings are 1 MiB, depth 64). A cap of twice
   * live + 1 MiB leaves no room for a 1 MiB ring under its half (the
   * first tier's end at most), room for a quarter under three quarters;
   * live + 300 KiB leaves room for a sixteenth only. */
  assert_int_equal(stkr_thread_attach(), 0);
  assert_int_equal(tiered_ring(2, mib), 256 * kib);
  assert_int_equal(tiered_ring(1, 300 * kib), 64 * kib);
  /* Room under an eighth of the default cap: the configured size. */
  assert_int_equal(tiered_ring(0, 0), 1 * mib);
}

static void test_payload_truncated_at_limit(void **state) {
  const stkr__record *rec;
  char big[100];
  (void)state;
  memset(big, 'x', sizeof big);
  assert_int_equal(stkr_event(&g_site_b, big, sizeof big), 0);
  assert_int_equal(stkr_event(&g_site_b, NULL, 0), 0);
  rec = stkr__ring_peek(rh_ring());
  assert_int_equal(rec->payload_len, 16);
  assert_true(rec->flags & STKR__REC_PAYLOAD_TRUNCATED);
  stkr__ring_release(rh_ring(), rec);
  rec = stkr__ring_peek(rh_ring());
  assert_int_equal(rec->payload_len, 0);
  assert_int_equal(rec->flags & STKR__REC_PAYLOAD_TRUNCATED, 0);
  stkr__ring_release(rh_ring(), rec);
}

static void test_same_name_same_id(void **state) {
  (void)state;
  assert_int_equal(stkr_site_register(&g_site_a), 0);
  assert_int_equal(stkr_site_register(&g_site_a_again), 0);
  assert_int_equal(stkr__site_id(&g_site_a), stkr__site_id(&g_site_a_again));
  assert_int_not_equal(stkr__site_id(&g_site_a), stkr__site_id(&g_site_b));
  {
    stkr_site bad = STKR_SITE_INIT("");
    assert_int_equal(stkr_site_register(&bad), -EINVAL);
  }
}

static void test_not_running_returns_enotconn(void **state) {
  stkr__counts before, after;
  (void)state;
  stkr__threads_counts(&before);
  stkr__recorder_stop();
  assert_int_equal(stkr_event(&g_site_a, NULL, 0), -ENOTCONN);
  stkr__threads_counts(&after);
  assert_int_equal(after.pushed, before.pushed);
  assert_null(stkr__ring_peek(rh_ring()));
}

static void test_tiny_ring_drops_and_counts(void **state) {
  stkr__rconf rc = conf(4096, 16);
  stkr__counts c;
  int i, ok = 0, dropped = 0;
  (void)state;
  /* This thread's ring already exists (1 MiB); use a fresh thread so the
   * small ring size applies. */
  stkr__recorder_stop();
  assert_int_equal(stkr__recorder_start(&rc, NULL, NULL, NULL), 0);
  stkr__ring_free(rh_ring()); /* swap in a 4 KiB ring for this thread */
  assert_int_equal(stkr__ring_init(rh_ring(), 4096, 0, 0, ""), 0);
  for (i = 0; i < 200; i++) { /* > 4096 / 32-byte known records */
    int r = stkr_event(&g_site_a, "p", 1);
    if (r == 0)
      ok++;
    else if (r == -EAGAIN)
      dropped++;
  }
  stkr__threads_counts(&c);
  assert_true(dropped > 0);
  assert_int_equal(ok + dropped, 200);
  assert_int_equal(c.pushed, (uint64_t)ok);
  assert_int_equal(c.dropped_ring_full, (uint64_t)dropped);
  /* The ring holds exactly the `ok` events. */
  {
    const stkr__record *rec;
    int n = 0;
    while ((rec = stkr__ring_peek(rh_ring())) != NULL) {
      stkr__ring_release(rh_ring(), rec);
      n++;
    }
    assert_int_equal(n, ok);
  }
}

static void test_busy_thread_drops_nested_event(void **state) {
  stkr__counts c0, c1;
  (void)state;
  assert_int_equal(stkr_thread_attach(), 0);
  stkr__threads_counts(&c0);
  atomic_store(&stkr__tls->busy, 1); /* as if a signal arrived mid-event */
  assert_int_equal(stkr_event(&g_site_a, NULL, 0), -EAGAIN);
  atomic_store(&stkr__tls->busy, 0);
  stkr__threads_counts(&c1);
  assert_int_equal(c1.dropped_reentrant, c0.dropped_reentrant + 1);
  assert_int_equal(c1.pushed, c0.pushed);
}

/* Signal storm: SIGALRM every 20 us, its handler records at site b while
 * the thread records at site a in a loop and drains its own ring. Every
 * record must be intact and every attempt accounted for. */
static volatile sig_atomic_t g_handler_calls;
static void on_alarm(int sig) {
  int saved = errno;
  (void)sig;
  g_handler_calls++;
  (void)stkr_event(&g_site_b, "sig", 3);
  errno = saved;
}

/* Every record of the storm is intact: a's or b's, with its payload, and
 * a full record's key is the hash of its PCs. */
static void check_storm_record(const stkr__record *rec) {
  uint32_t a = stkr__site_id(&g_site_a), b = stkr__site_id(&g_site_b);

  assert_true(rec->site_id == a || rec->site_id == b);
  assert_int_equal(rec->payload_len, rec->site_id == a ? 4 : 3);
  assert_memory_equal(rh_payload(rec),
                      rec->site_id == a ? "main" : "sig", rec->payload_len);
  if (!stkr__record_known(rec))
    assert_int_equal(stkr__record_as_full(rec)->key[0],
                     stkr__hash_pcs(stkr__record_pcs(rec), rec->depth));
}

static void test_signal_handler_events_never_corrupt_ring(void **state) {
  struct sigaction sa;
#if defined(__SANITIZE_THREAD__)
  /* TSan delivers a signal at the interrupted thread's next intercepted
   * call or atomic operation, nested handlers included: at a 20 us period
   * with the handler's own atomics (the ring file's drop counters added
   * two, session 21) the handlers ran back to back and the loop stopped
   * advancing (a CI run timed out at 300 s). A slower storm still nests
   * handlers in events. */
  struct itimerval it = {{0, 200}, {0, 200}};
  const uint64_t n = 30000;
#else
  struct itimerval it = {{0, 20}, {0, 20}};
  const uint64_t n = 300000;
#endif
  stkr__counts c0, c1;
  (void)state;
  assert_int_equal(stkr_thread_attach(), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  /* attempted == pushed + dropped, and every pushed record was read. */
  storm_run(&g_site_a, "main", 4, n, &it, &g_handler_calls,
            check_storm_record, &c0, &c1);
  assert_true(g_handler_calls > 0);
  print_message("signal storm: %d handler events, %llu dropped re-entrant\n",
                (int)g_handler_calls,
                (unsigned long long)(c1.dropped_reentrant - c0.dropped_reentrant));
}

/* Thread exit: the state stays registered, marked exited, with its
 * records, until the consumer reaps it. */
static stkr__thread *g_worker_state;
static void *five_events(void *arg) {
  int i;
  (void)arg;
  pthread_setname_np(pthread_self(), "five");
  for (i = 0; i < 5; i++)
    assert_int_equal(stkr_event(&g_site_a, NULL, 0), 0);
  g_worker_state = stkr__tls;
  return NULL;
}

static void test_thread_exit_keeps_records_until_reaped(void **state) {
  pthread_t th;
  stkr__thread *t;
  int n = 0, found = 0;
  const stkr__record *rec;
  (void)state;
  pthread_create(&th, NULL, five_events, NULL);
  pthread_join(th, NULL);
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t))
    found += t == g_worker_state;
  assert_int_equal(found, 1);
  t = g_worker_state;
  assert_int_equal(atomic_load(&t->exited), 1);
  assert_string_equal(t->exit_name, "five");
  while ((rec = stkr__ring_peek(&t->ring)) != NULL) {
    stkr__ring_release(&t->ring, rec);
    n++;
  }
  assert_int_equal(n, 5);
  stkr__thread_reap(t, NULL);
  for (t = stkr__threads_first(); t != NULL; t = stkr__threads_next(t))
    assert_ptr_not_equal(t, g_worker_state);
}

/* The recorder's own thread (the flush worker) is never recorded, nor
 * counted: its I/O may go through hooked functions. */
static int g_ignored_rc, g_ignored_attach_rc;
static void *ignored_thread(void *arg) {
  (void)arg;
  stkr__thread_ignore();
  g_ignored_rc = stkr_event(&g_site_a, NULL, 0);
  g_ignored_attach_rc = stkr_thread_attach();
  return NULL;
}

static void test_ignored_thread_records_nothing(void **state) {
  pthread_t th;
  stkr__counts c0, c1;
  (void)state;
  stkr__threads_counts(&c0);
  pthread_create(&th, NULL, ignored_thread, NULL);
  pthread_join(th, NULL);
  stkr__threads_counts(&c1);
  assert_int_equal(g_ignored_rc, -EPERM);
  assert_int_equal(g_ignored_attach_rc, -EPERM);
  assert_int_equal(c1.pushed, c0.pushed);
  assert_int_equal(c1.dropped_other, c0.dropped_other);
  assert_int_equal(c1.threads, c0.threads);
}

/* fork, disable mode: the child cannot record. */
static void test_fork_child_disabled(void **state) {
  pid_t pid;
  int status;
  (void)state;
  assert_int_equal(stkr_event(&g_site_a, NULL, 0), 0); /* parent record */
  pid = fork();
  if (pid == 0) {
    int ok = stkr_event(&g_site_a, NULL, 0) == -ENOTCONN &&
             stkr__ring_peek(&stkr__tls->ring) == NULL;
    _exit(ok ? 0 : 1);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_non_null(stkr__ring_peek(rh_ring())); /* parent's is intact */
}

/* fork, follow mode: the child's first event restarts the recorder in the
 * child, into an emptied ring; the parent's records are not in it. */
static int g_fork_cb_calls;
static void restart_in_child(void) {
  stkr__rconf rc = conf(1 << 20, 16);
  g_fork_cb_calls++;
  stkr__recorder_start(&rc, NULL, NULL, restart_in_child);
}

static void test_fork_child_follow(void **state) {
  stkr__rconf rc = conf(1 << 20, 16);
  pid_t pid;
  int status;
  (void)state;
  stkr__recorder_stop();
  assert_int_equal(stkr__recorder_start(&rc, NULL, NULL, restart_in_child), 0);
  assert_int_equal(stkr_event(&g_site_a, "parent", 6), 0);
  pid = fork();
  if (pid == 0) {
    const stkr__record *rec;
    int ok = stkr__ring_peek(&stkr__tls->ring) == NULL; /* parent's gone */
    ok &= stkr_event(&g_site_b, "child", 5) == 0;
    ok &= g_fork_cb_calls == 1;
    rec = stkr__ring_peek(&stkr__tls->ring);
    ok &= rec != NULL && rec->payload_len == 5;
    ok &= stkr__threads_first() == stkr__tls &&
          stkr__threads_next(stkr__tls) == NULL;
    _exit(ok ? 0 : 1);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(g_fork_cb_calls, 0);
}

TL_TEST_MAIN_EACH("event", setup, rh_stop,
                  test_event_captures_caller_stack_and_payload,
                  test_payload_truncated_at_limit, test_known_stack_sent_once,
                  test_known_stacks_two_way,
                  test_dropped_full_record_stays_unknown,
                  test_known_payload_sent_once,
                  test_dropped_payload_stays_unknown, test_ring_memory_cap,
                  test_ring_memory_tiers,
                  test_same_name_same_id, test_not_running_returns_enotconn,
                  test_tiny_ring_drops_and_counts,
                  test_busy_thread_drops_nested_event,
                  test_signal_handler_events_never_corrupt_ring,
                  test_thread_exit_keeps_records_until_reaped,
                  test_ignored_thread_records_nothing, test_fork_child_disabled,
                  test_fork_child_follow)
