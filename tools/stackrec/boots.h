/*
 * boots.h: one time line for the processes of a recording that ran in
 * several boots: recordings of two devices merged, or a directory an app
 * recorded into before and after a reboot.
 *
 * Events carry CLOCK_MONOTONIC, which restarts at each boot: laid on one
 * line, two boots' times put a 1-second recording over days (QA, session
 * 33: compliance's last_s 999 999 s, a chrome trace of 11.6 days). Which
 * processes ran in one boot: common/stkr_boot.h, from each process's
 * start on both clocks (stkr_reader_start_clock), chained: sorted by boot
 * time, each within the slack of the one before is the same boot.
 *
 * With one boot (every recording of one machine's run), nothing moves:
 * the time line is that boot's CLOCK_MONOTONIC, exactly as recorded. With
 * several, each boot's times move by one shift (so a boot's processes keep
 * their exact order), the difference of boot times, onto the monotonic
 * clock of the boot of the earliest start: what the wall clock says of
 * when each boot's events happened. A process whose clock is not known
 * (no Header found) keeps its times.
 *
 * Thread-safety: none. Memory: two words a process.
 */
#ifndef STKR_BOOTS_H
#define STKR_BOOTS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_reader.h"

#define STKR_BOOT_UNKNOWN UINT32_MAX

typedef struct stkr_boots {
  size_t n_boots;   /* boots told apart (0: no process's clock known) */
  size_t n;         /* processes */
  int64_t *shift;   /* per process: what to add to its times, ns */
  uint32_t *boot;   /* per process: its boot, from 0 in order of their
                       wall-clock time; STKR_BOOT_UNKNOWN: not known */
} stkr_boots;

/*
 * Find the boots of r's processes (looking at each process's first batch
 * when it was not read yet; see stkr_reader_start_clock). Owns its arrays
 * until stkr_boots_free.
 * @return 0, or -ENOMEM.
 */
int stkr_boots_init(stkr_boots *b, stkr_reader *r);

/* ts of process i on the recording's time line (see above). */
uint64_t stkr_boots_place(const stkr_boots *b, size_t i, uint64_t ts);

/* NULL-safe; b may be zeroed or initialized. */
void stkr_boots_free(stkr_boots *b);

#endif /* STKR_BOOTS_H */
