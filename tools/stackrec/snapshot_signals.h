/*
 * snapshot_signals.h: how a `stackrec snapshot` series ends on a signal
 * (snapshot_signals.c). SIGINT, SIGTERM, SIGHUP, SIGQUIT and the like
 * (STKR_SNAP_END_SIGNALS) during a series: finish the snapshot under way,
 * close the recording cleanly, then die of the signal as the caller
 * expects. A signal ignored or blocked by whoever started us (nohup,
 * `trap '' PIPE`, a blocked mask) is left so: it would not have ended us.
 * One thread only (the command's), not async-signal-safe.
 */
#ifndef STKR_SNAPSHOT_SIGNALS_H
#define STKR_SNAPSHOT_SIGNALS_H

#include <signal.h>
#include <stdint.h>

typedef struct stkr_snap_end_signals {
  sigset_t set; /* the end signals watched */
  sigset_t old; /* the mask as we found it */
  int taken;    /* the one taken, 0 none yet */
} stkr_snap_end_signals;

/* Start watching, before anything a signal should not cut short. */
void stkr_snap_end_signals_hold(stkr_snap_end_signals *es);
/* Take an end signal, waiting up to wait_ns for one (0: only look).
 * @return the signal (kept: later calls return it at once), 0 none came. */
int stkr_snap_end_signal_wait(stkr_snap_end_signals *es, int64_t wait_ns);
/* The last call: after an end signal, die of it (its default action) and
 * of no other pending beside it; otherwise the mask as we found it. */
void stkr_snap_end_signals_release(stkr_snap_end_signals *es);

#endif /* STKR_SNAPSHOT_SIGNALS_H */
