/*
 * stkr_boot.h: which processes of a recording ran in one boot, so that
 * their CLOCK_MONOTONIC times may be compared (proto/'s external marks,
 * tools/' time lines).
 *
 * CLOCK_MONOTONIC restarts at each boot (and differs in a time namespace,
 * a CRIU-restored container): times of two boots are unrelated. A start
 * read on both clocks (Header.start_mono_ns/start_wall_ns, a mark's
 * mono/wall) gives the wall-clock time of its boot's mono 0. Two such
 * boot times within STKR_BOOT_SLACK_NS are one boot: the wall clock's
 * slewing moves them by far less in a run (NTP: at most 0.5 ms a second),
 * and machines that booted that close are taken for one. The slack errs on
 * the side of two boots: a boot split in two is laid out by the wall
 * clock (off by its adjustments), two boots taken for one would be off by
 * the time between them.
 *
 * Header only, libc only (common/'s rule).
 */
#ifndef STKR_BOOT_H
#define STKR_BOOT_H

#include <stdbool.h>
#include <stdint.h>

#define STKR_BOOT_SLACK_NS 2000000000ull

/* The wall-clock time (ns since 1970) of mono 0 in the boot of a pair of
 * readings taken together; 0: not known (either reading 0). */
static inline uint64_t stkr_boot_time(uint64_t mono_ns, uint64_t wall_ns) {
  return mono_ns != 0 && wall_ns > mono_ns ? wall_ns - mono_ns : 0;
}

/* Are two known boot times (stkr_boot_time, non-zero) one boot? */
static inline bool stkr_boot_same(uint64_t a, uint64_t b) {
  return (a > b ? a - b : b - a) <= STKR_BOOT_SLACK_NS;
}

#endif /* STKR_BOOT_H */
