/*
 * rate.c: peak rate over a sliding window (rate.h).
 *
 * Buckets [closed - STEPS, head] are kept in the ring (at most 2 windows,
 * the ring holds 4). `sum` is the number of events in the window ending at
 * bucket closed - 1, kept up to date as windows close one bucket at a time.
 */
#include <string.h>

#include "tools/stackrec/rate.h"

void stkr_rate_init(stkr_rate *r, uint64_t window_ns) {
  memset(r, 0, sizeof *r);
  r->width = window_ns / STKR_RATE_STEPS;
  if (r->width == 0)
    r->width = 1;
}

/* Bucket y's count (0 past the newest bucket: its slot holds older data). */
static uint64_t bucket(const stkr_rate *r, uint64_t y) {
  return y > r->head ? 0 : r->b[y % STKR_RATE_RING];
}

/* Close the windows ending at buckets closed .. upto. */
static void close_until(stkr_rate *r, uint64_t upto) {
  while (r->closed <= upto) {
    uint64_t e = r->closed;

    if (e >= STKR_RATE_STEPS && e - STKR_RATE_STEPS + 1 > r->head) {
      /* Every later window lies wholly after the newest event: empty. */
      r->sum = 0;
      r->closed = upto + 1;
      return;
    }
    r->sum += bucket(r, e);
    if (e >= STKR_RATE_STEPS)
      r->sum -= bucket(r, e - STKR_RATE_STEPS);
    if (r->sum > r->peak)
      r->peak = r->sum;
    r->closed++;
  }
}

static void set_head(stkr_rate *r, uint64_t y) {
  r->head = y;
  r->head_lo = y * r->width;
  r->head_hi = r->head_lo + r->width;
}

void stkr_rate_add_slow(stkr_rate *r, uint64_t ts) {
  uint64_t y = ts / r->width, k;

  if (!r->started) {
    memset(r->b, 0, sizeof r->b);
    r->started = true;
    r->closed = y;
    r->sum = 0;
    set_head(r, y);
  } else if (y > r->head) {
    if (y >= STKR_RATE_STEPS)
      close_until(r, y - STKR_RATE_STEPS);
    /* The slots of buckets head+1 .. y held buckets a ring older. */
    for (k = r->head + 1; k <= y && k - r->head <= STKR_RATE_RING; k++)
      r->b[k % STKR_RATE_RING] = 0;
    set_head(r, y);
  } else if (y + STKR_RATE_STEPS - 1 < r->closed) {
    r->late++; /* every window holding it is closed */
    return;
  } else if (y < r->closed) {
    r->sum++; /* inside the running window: keep it exact */
  }
  r->b[y % STKR_RATE_RING]++;
}

void stkr_rate_finish(stkr_rate *r) {
  if (!r->started)
    return;
  close_until(r, r->head + STKR_RATE_STEPS - 1);
  r->started = false;
  r->head_lo = r->head_hi = 0; /* the next event takes the slow path */
}
