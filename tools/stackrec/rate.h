/*
 * rate.h: the peak event rate over a sliding window, in constant memory
 * (`compliance`: peak per second and per minute, max_per_* rules).
 *
 * The window (W ns) moves in steps of one bucket (W / STKR_RATE_STEPS):
 * the peak is the most events in any STKR_RATE_STEPS consecutive buckets.
 * Events may arrive out of time order (a recording is drained thread by
 * thread): an event counts in the peak when it arrives before the windows
 * holding it are closed, which happens one whole window after the newest
 * event seen; an event older than that is counted in `late` instead. The
 * ring holds 4 windows' buckets. Per event: a compare when the event is
 * in the newest bucket, a division otherwise.
 *
 * Thread-safety: none.
 */
#ifndef STKR_RATE_H
#define STKR_RATE_H

#include <stdbool.h>
#include <stdint.h>

#define STKR_RATE_STEPS 32u
#define STKR_RATE_RING (4u * STKR_RATE_STEPS)

typedef struct stkr_rate {
  uint64_t width;     /* bucket width, ns (W / STKR_RATE_STEPS) */
  bool started;
  uint64_t head;      /* newest bucket index (ts / width) seen */
  uint64_t head_lo;   /* head * width: the newest bucket's start ... */
  uint64_t head_hi;   /* ... and end (a compare, not a division) */
  uint64_t closed;    /* windows ending at buckets < closed are counted */
  uint64_t sum;       /* events in the window ending at closed - 1 */
  uint64_t peak;
  uint64_t late;
  uint32_t b[STKR_RATE_RING]; /* events per bucket, by index % RING */
} stkr_rate;

/* A tracker for windows of window_ns (a multiple of STKR_RATE_STEPS). */
void stkr_rate_init(stkr_rate *r, uint64_t window_ns);

/* One event at ts (ns). */
void stkr_rate_add_slow(stkr_rate *r, uint64_t ts);
static inline void stkr_rate_add(stkr_rate *r, uint64_t ts) {
  if (__builtin_expect(ts >= r->head_lo && ts < r->head_hi, 1))
    r->b[r->head % STKR_RATE_RING]++;
  else
    stkr_rate_add_slow(r, ts);
}

/* Close every window (the end of a process's events) and start afresh;
 * the peak and late counts are kept. */
void stkr_rate_finish(stkr_rate *r);

#endif /* STKR_RATE_H */
