/*
 * clock.c: the event clock (see stkr_internal.h): a raw counter read on
 * the hot path when it can be trusted, converted to CLOCK_MONOTONIC ns on
 * the flush worker.
 *
 * Trust is decided once, at recorder start:
 *  - x86_64: CPUID 0x80000007 EDX bit 8 (invariant TSC: constant rate in
 *    every P- and C-state, synchronized across cores by the platform);
 *  - aarch64 (Linux): cntvct_el0, the generic timer the kernel's own
 *    CLOCK_MONOTONIC runs on, at cntfrq_el0 Hz (works under qemu-user too);
 *  - elsewhere (Apple: mach_absolute_time is not wired up yet), or when
 *    the check below fails: CLOCK_MONOTONIC, as before.
 * Then a calibration of ~0.2 ms pairs counter and CLOCK_MONOTONIC reads:
 * the counter must advance with the clock at a plausible rate (10 MHz to
 * 10 GHz; on aarch64 within 1% of cntfrq_el0), or the session falls back
 * to CLOCK_MONOTONIC.
 *
 * A calibration is two anchors at least 0.2 ms apart, and the first need
 * not be this process's (issue 9: the 0.2 ms spin was ~10% of a short
 * recorded process). A later session, and a forked child, start from the
 * calibration the process has (the child inherits its parent's); a process
 * exec'd in a recording starts from the first anchor and rate the
 * recording's first process stored (DIR/.stackrec-cache/clock). One fresh
 * anchor then completes it, without a spin, when it is at least 0.2 ms
 * after the earlier one and the rate the two give agrees with the stored
 * rate within 1% (and is plausible, as above): a stale file (another boot,
 * another machine) fails that test and the spin runs as before.
 *
 * Conversion error: each anchor is a counter read between two clock reads
 * (their midpoint), good to half their distance (~20 ns here). The rate
 * starts from the 0.2 ms calibration (off by up to ~1e-4, aarch64: exact
 * from cntfrq_el0) and is re-measured by the worker over the whole session
 * at every pass (after 1 s of session, ~1e-7). A record is converted with
 * the latest anchor, at most one pass old (flush_interval_ms, 1 ms under
 * pressure), so its error is about 20 ns + age * rate error: under 50 us in
 * the first second of a session, under 1 us after it at the default 200 ms
 * interval. Records of one thread keep their order unless two fall into
 * different passes within that error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_hash.h"

#include "recorder/stkr_internal.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

bool stkr__clock_counter;
/* The start's calibration and its generation: written at recorder start,
 * read by the worker at each pass (it may already run), under g_cal_mu. */
static pthread_mutex_t g_cal_mu = PTHREAD_MUTEX_INITIALIZER;
static stkr_clock_cal g_cal;
static uint32_t g_cal_gen;
/* Tests only; read at start. */
static bool g_forbid_counter;

void stkr__clock_allow_counter(bool allow) { g_forbid_counter = !allow; }

void stkr__clock_forget_after_fork(void) {
  /* The parent's worker may have held it at fork time; only the forking
   * thread exists here (pthread_mutex_init is what an atfork child
   * handler may do, as thread.c does with its reap lock). */
  pthread_mutex_init(&g_cal_mu, NULL);
}

/* A counter read between two clock reads: the pair of a fresh anchor.
 * Returns the distance between the clock reads (the anchor's error bound
 * times two). */
static uint64_t anchor(uint64_t *t, uint64_t *ns) {
  uint64_t a = stkr__clock_mono_ns();
  *t = stkr__clock_counter_read();
  uint64_t b = stkr__clock_mono_ns();
  *ns = a + (b - a) / 2;
  return b - a;
}

/* The best anchor of a few tries (the one with the closest clock reads:
 * a preemption between them would widen its error). */
static void good_anchor(uint64_t *t, uint64_t *ns) {
  uint64_t best = anchor(t, ns);
  for (int i = 1; i < 5; i++) {
    uint64_t tt, nn, w = anchor(&tt, &nn);
    if (w < best) {
      best = w;
      *t = tt;
      *ns = nn;
    }
  }
}

static bool counter_claimed(uint64_t *hz) {
  *hz = 0;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
    return false;
  __cpuid(0x80000007u, a, b, c, d);
  (void)a;
  (void)b;
  (void)c;
  return (d & (1u << 8)) != 0;
#elif defined(__aarch64__) && !defined(__APPLE__)
  uint64_t f;
  __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
  *hz = f;
  return f >= 1000000u;
#else
  return false;
#endif
}

static uint64_t rate_mult(uint64_t dns, uint64_t dt) {
  return (uint64_t)(((unsigned __int128)dns << 32) / dt);
}

#define CAL_MIN_NS 200000u /* the shortest calibration: 0.2 ms */

/* The calibration from the first anchor (t0, ns0) to the last (t1, ns1),
 * into *c (kind COUNTER) if the counter advanced with the clock at a
 * plausible rate; hz: the counter's known frequency (0: none). */
static bool cal_from(uint64_t t0, uint64_t ns0, uint64_t t1, uint64_t ns1,
                     uint64_t hz, stkr_clock_cal *c) {
  uint64_t dt, dns;
  if (t1 <= t0 || ns1 <= ns0) return false;
  dt = t1 - t0;
  dns = ns1 - ns0;
  /* Plausible rates only: 10 MHz .. 10 GHz. */
  if (dt < dns / 100 || dt > dns * 10) return false;
  if (hz != 0) {
    /* A known frequency: take it, if the measurement agrees to 1%. */
    uint64_t expect = (uint64_t)((unsigned __int128)dns * hz / 1000000000u);
    if (dt <= expect - expect / 100 || dt >= expect + expect / 100)
      return false;
    c->mult = rate_mult(1000000000u, hz);
  } else {
    c->mult = rate_mult(dns, dt);
  }
  c->kind = STKR_CLOCK_COUNTER;
  c->t0 = t0;
  c->ns0 = ns0;
  c->t1 = t1;
  c->ns1 = ns1;
  return true;
}

#define CLOCK_MAGIC "STKRCLK1"

uint64_t stkr__clock_file_check(const stkr__clock_file *f) {
  return stkr_mix64(f->t0 ^ stkr_mix64(f->ns0 ^ stkr_mix64(f->mult)));
}

void stkr__clock_forget(void) {
  pthread_mutex_lock(&g_cal_mu);
  memset(&g_cal, 0, sizeof g_cal);
  pthread_mutex_unlock(&g_cal_mu);
}

/* An earlier anchor and rate: this process's last calibration (a later
 * session, or a forked child's inherited one), else the recording's file
 * (*from_file: it was consulted, so a fresh calibration should be stored
 * for the processes after this one). */
static bool prior_anchor(stkr__clock_file *p, bool *from_file) {
  void *buf;
  size_t len;

  *from_file = false;
  pthread_mutex_lock(&g_cal_mu);
  if (g_cal.kind == STKR_CLOCK_COUNTER) {
    p->t0 = g_cal.t0;
    p->ns0 = g_cal.ns0;
    p->mult = g_cal.mult;
  }
  pthread_mutex_unlock(&g_cal_mu);
  if (p->mult != 0) return true;
  *from_file = true;
  if (stkr__cache_read("clock", sizeof *p, &buf, &len) != 0) return false;
  if (len == sizeof *p) memcpy(p, buf, sizeof *p);
  free(buf);
  return len == sizeof *p && memcmp(p->magic, CLOCK_MAGIC, 8) == 0 &&
         p->check == stkr__clock_file_check(p) && p->mult != 0;
}

/* Complete a calibration from an earlier anchor with one fresh anchor (no
 * spin). @return false if that anchor is too recent, or the rate the two
 * give is implausible or 1% off the earlier calibration's. */
static bool cal_reuse(const stkr__clock_file *p, uint64_t hz, stkr_clock_cal *c) {
  uint64_t t, ns, m;
  good_anchor(&t, &ns);
  if (ns < p->ns0 || ns - p->ns0 < CAL_MIN_NS || !cal_from(p->t0, p->ns0, t, ns, hz, c))
    return false;
  m = hz ? c->mult : rate_mult(ns - p->ns0, t - p->t0);
  return m > p->mult - p->mult / 100 && m < p->mult + p->mult / 100;
}

void stkr__clock_setup(bool allow_counter) {
  stkr_clock_cal c = {0};
  uint64_t hz, t0, ns0, t_end, ns_end;
  stkr__clock_file prior = {0};
  bool from_file = false;

  c.kind = STKR_CLOCK_MONO;
  if (allow_counter && !g_forbid_counter && counter_claimed(&hz)) {
    if (!(prior_anchor(&prior, &from_file) && cal_reuse(&prior, hz, &c))) {
      good_anchor(&t0, &ns0);
      /* ~0.2 ms of clock time (a spin: no sleep on the app's thread). */
      do
        good_anchor(&t_end, &ns_end);
      while (ns_end - ns0 < CAL_MIN_NS && ns_end >= ns0);
      if (cal_from(t0, ns0, t_end, ns_end, hz, &c) && from_file) {
        /* For the recording's later processes (best effort). */
        stkr__clock_file f = {.t0 = c.t0, .ns0 = c.ns0, .mult = c.mult};
        memcpy(f.magic, CLOCK_MAGIC, 8);
        f.check = stkr__clock_file_check(&f);
        (void)stkr__cache_write("clock", &f, sizeof f);
      }
    }
  }
  if (c.kind != STKR_CLOCK_COUNTER)
    memset(&c, 0, sizeof c);
  pthread_mutex_lock(&g_cal_mu);
  g_cal = c;
  g_cal_gen++;
  pthread_mutex_unlock(&g_cal_mu);
  stkr__clock_counter = c.kind == STKR_CLOCK_COUNTER;
  stkr__session_clock(&c);
}

uint32_t stkr__clock_cal_get(stkr_clock_cal *out, uint32_t have_gen) {
  uint32_t gen;
  pthread_mutex_lock(&g_cal_mu);
  gen = g_cal_gen;
  if (gen != have_gen)
    *out = g_cal;
  pthread_mutex_unlock(&g_cal_mu);
  return gen;
}

void stkr__clock_recal(stkr_clock_cal *c) {
  uint64_t t, ns;

  if (c->kind != STKR_CLOCK_COUNTER)
    return;
  good_anchor(&t, &ns);
  if (t <= c->t1 || ns <= c->ns1)
    return; /* no time passed (or a counter that went back): keep it */
  /* The rate over the whole session, once it is long enough to beat the
   * start's (10 ms: 50 times the calibration). A known frequency
   * (aarch64) is exact already, but measuring costs nothing and also
   * absorbs CLOCK_MONOTONIC's NTP slew, which the files' ns follow. */
  if (ns - c->ns0 >= 10000000u && t > c->t0)
    c->mult = rate_mult(ns - c->ns0, t - c->t0);
  c->t1 = t;
  c->ns1 = ns;
  stkr__session_clock(c);
}
