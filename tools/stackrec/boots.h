/*
 * boots.h: one time line for the processes of a recording whose times are
 * on several monotonic clocks: recordings of two devices merged, a
 * directory an app recorded into before and after a reboot, a program in
 * a time namespace.
 *
 * Events carry CLOCK_MONOTONIC, one clock per boot and time namespace:
 * laid on one line, two devices' times put a 1-second recording over days
 * (QA, session 33: compliance's last_s 999 999 s, a chrome trace of 11.6
 * days). Which clock a process's times are on: its first Header's boot id
 * and time namespace offset (stkr_reader_start_clock, common/stkr_boot.h);
 * a later process with its pid (stkr_process_info.instances), its own.
 *
 * Processes of one clock keep their times exactly, across any sleep. With
 * one clock (every recording of one machine's run) nothing moves. With
 * several, each clock's times move by one shift (so a clock's processes
 * keep their exact order) onto the clock of the earliest start (by the
 * wall clock): by the difference of the offsets, exactly, for another
 * namespace of the same boot; for another boot, onto that boot's earliest
 * start's clock so, then by one shift for the whole boot (its namespaces
 * keep their order): the difference of the boots' wall-clock times (wall
 * - mono at their earliest starts), as right as the wall clocks were and
 * off by any sleep before those starts. A process whose boot is not
 * known (an older writer, Apple) is never moved.
 *
 * Thread-safety: none. Memory: a few words a process.
 */
#ifndef STKR_BOOTS_H
#define STKR_BOOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_boot.h"
#include "proto/stkr_reader.h"

#define STKR_BOOT_UNKNOWN UINT32_MAX

/* The earliest start of one known boot (boots.c). */
typedef struct stkr_boot_rep stkr_boot_rep;

typedef struct stkr_boots {
  size_t n_clocks;  /* distinct known clocks (0: none known), later
                       instances' (stkr_boots_place) included */
  size_t n;         /* processes */
  int64_t *shift;   /* per process: what to add to its first instance's
                       times, ns */
  /* Per process: its boot (its namespaces' clocks included), from 0;
   * processes whose boot is not known are grouped by the wall clock
   * (within STKR_BOOT_SLACK_NS), numbered after those, never moved. For
   * sums per machine (diff's recording time); STKR_BOOT_UNKNOWN: no start
   * known. Of the first instance. */
  uint32_t *boot;
  /* Per process: the instance (stkr_process_info.instances) cur_shift is
   * for, and that shift: a pid used again on another clock (after a
   * reboot, in another time namespace) is placed by each instance's. */
  uint32_t *inst;
  int64_t *cur_shift;
  /* The earliest start of each known boot, the reference first (the
   * earliest of all, by the wall clock: its clock never moves). */
  stkr_boot_rep *reps;
  size_t n_reps, cap_reps, last_rep;
  stkr_clock_id *clocks; /* the distinct known clocks */
  size_t cap_clocks;
} stkr_boots;

/*
 * Find the clocks of r's processes (looking at each process's first batch
 * when it was not read yet; see stkr_reader_start_clock). Owns its arrays
 * until stkr_boots_free.
 * @return 0, or -ENOMEM.
 */
int stkr_boots_init(stkr_boots *b, stkr_reader *r);

/* ts of process i on the recording's time line (see above); never 0 for a
 * ts that was not (saturating at 1 and UINT64_MAX). p: the process's
 * summary as the event of ts found it (stkr_event_view.proc), for its
 * instance's clock; NULL: ts is of its first instance. */
uint64_t stkr_boots_place(stkr_boots *b, size_t i,
                          const stkr_process_info *p, uint64_t ts);

/* An external mark (m: stkr_reader_mark_clock) on the clock of p's
 * current instance, into *ts: within one boot by the offsets (exact),
 * from another boot by the wall clocks, as set when a boot is not known
 * (common/stkr_boot.h; as the reader hands it out for the instance
 * current then). @return false for a mark of another boot that cannot be
 * placed (a wall clock that cannot be real, 1970): no relation to the
 * instance's times is known (*ts as set). */
bool stkr_boots_mark_at(const stkr_mark_clock *m, const stkr_process_info *p,
                        uint64_t *ts);

/* The recording's start on the time line: the earliest process start
 * (a process whose Header was lost: its first event); 0 if none. Once r
 * has been read. */
uint64_t stkr_boots_origin(stkr_boots *b, const stkr_reader *r);

/* NULL-safe; b may be zeroed or initialized. */
void stkr_boots_free(stkr_boots *b);

#endif /* STKR_BOOTS_H */
