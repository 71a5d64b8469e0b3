/*
 * snapshot_backend.h: what a platform backend of `stackrec snapshot`
 * provides (snapshot_linux.c: ptrace; snapshot_apple.c: Mach thread
 * calls): the registers and a copy of the stack window of every thread of
 * another process, each thread stopped only while they are read. libc
 * types only, so that the Apple backend compiles against the Darwin
 * stand-in headers (tests/test-apple-build.sh). See snapshot.h.
 * Thread-safety: none; one command runs.
 */
#ifndef STKR_SNAPSHOT_BACKEND_H
#define STKR_SNAPSHOT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The signals whose default action would kill stackrec in the middle of a
 * series: snapshot.c holds them for its whole run and takes them between
 * snapshots (the series ends, the recording gets its end, then stackrec
 * dies of the signal), and each platform's capture holds them while a
 * thread of the target is stopped. One list for the three (QA: SIGQUIT,
 * SIGUSR1, SIGPIPE and SIGALRM left a recording without its end). An
 * array initializer. */
#define STKR_SNAP_END_SIGNALS                                              \
  SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM,    \
      SIGVTALRM, SIGPROF
/* Held while a thread is stopped: those, and SIGTSTP (a ^Z would stop
 * stackrec with a thread of the target stopped). */
#define STKR_SNAP_HELD_SIGNALS STKR_SNAP_END_SIGNALS, SIGTSTP

/* Most PCs kept per thread (the recorder's STKR_MAX_DEPTH). */
#define STKR_SNAP_MAX_DEPTH 256
/* Most stack bytes copied per thread from its stack pointer up. */
#define STKR_SNAP_STACK_MAX (256u << 10) /* snapshot.c says "256 KiB" */

/* What the backend read of one thread while it was stopped. */
typedef struct stkr_snap_regs {
  uint64_t pc, sp, fp;
  uint64_t lr; /* aarch64 x30 (the innermost return address); x86_64: 0 */
} stkr_snap_regs;

typedef struct stkr_snap_thread {
  pid_t tid;
  char name[64]; /* /proc/PID/task/TID/comm ("" if unknown) */
  stkr_snap_regs regs;
  uint8_t *stack;     /* copy of [regs.sp, regs.sp + stack_len); owned */
  uint64_t stack_len;
  bool stack_cut;     /* the stack's mapping goes on past the copy (it is
                         at most STKR_SNAP_STACK_MAX): a walk that runs
                         out of it is truncated */
  /* How long the thread was stopped, bounded from both sides: stop_ns
   * from the interrupt to the end of the detach (includes the time the
   * thread took to reach its stop: an upper bound), held_ns from the stop
   * being seen to the detach (a lower bound). */
  uint64_t stop_ns, held_ns;
  uint64_t ts_mono_ns; /* CLOCK_MONOTONIC when it was stopped */
  int err;            /* 0, or -ESRCH: vanished (skipped, with a note) */
  /* The unwinder's result. */
  uint64_t pcs[STKR_SNAP_MAX_DEPTH];
  unsigned n_pcs;
  bool truncated;
  bool async_seen;    /* passed a Swift async frame: the tasks awaiting it
                         are not followed */
} stkr_snap_thread;

/* The readable mappings of the target: where each thread's stack ends. */
typedef struct stkr_snap_map {
  uint64_t lo, hi;
} stkr_snap_map;

/* One snapshot of a process. */
typedef struct stkr_snap {
  pid_t pid;
  char comm[64];
  stkr_snap_thread *threads;
  size_t n_threads;
  unsigned vanished;      /* threads that exited meanwhile (skipped) */
  uint64_t mono_ns, wall_ns; /* when it began */
  uint64_t wall_time_ns;  /* how long taking it took */
  uint64_t max_stop_ns;   /* the longest any one thread was stopped */
} stkr_snap;

/* Take a snapshot of pid (the backend). maps: the target's readable
 * mappings, sorted and merged (Linux: /proc/PID/maps; a backend that can
 * ask the kernel for the region at sp ignores them), bounding each stack
 * copy. On failure err holds one line naming
 * the pid and the reason. Every thread is let go again on every path
 * (also if a signal arrives: catchable ones are held for the few
 * microseconds of each stop).
 * @return 0; -ESRCH (no such process, or it exited meanwhile), -EPERM
 *         (not allowed to trace it), -ENOMEM, -EIO; err says which. */
/* What identifies pid's program image, into buf (cap bytes): an exec
 * changes it (Linux: /proc/PID/auxv, whose entry point and random-bytes
 * address an exec renews). @return its length, 0 when the platform has
 * none (no check), or a negative errno. */
int stkr_snap_exec_id(pid_t pid, uint8_t *buf, size_t cap);

int stkr_snap_take(pid_t pid, const stkr_snap_map *maps, size_t n_maps,
                   stkr_snap *out, char *err, size_t err_cap);
void stkr_snap_free(stkr_snap *s);

/* The name of this machine's architecture as the format spells it. */
const char *stkr_snap_arch(void);

#endif /* STKR_SNAPSHOT_BACKEND_H */
