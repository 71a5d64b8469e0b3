/*
 * symrec.h: writing small SYMBOLIZED recordings for the agg, report and
 * merge tests: sites, threads, stacks given as lists of frames (function,
 * file, line, inlined, app), events. Encoded with the real writer code
 * (stkr_fmt_encode_batch), one batch, like an inproc-mode recording.
 *
 * pc_base lets two "builds" of one program put the same functions at
 * other addresses: their stacks must still merge by frames.
 * In tests/symrec.c, over fixture.c's encoder (fx_encode_events).
 */
#ifndef STKR_TEST_SYMREC_H
#define STKR_TEST_SYMREC_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/stkr_format.h"

typedef struct sr_frame {
  const char *fn;   /* NULL: unknown function (shown as image+offset) */
  const char *file; /* NULL: unknown */
  uint32_t line;
  bool inlined;     /* a call inlined at the next PC's frame */
  bool app;
} sr_frame;

typedef struct sr_stack {
  uint32_t site;     /* 1-based index into sr_rec.sites */
  const sr_frame *f; /* innermost first; each frame that is not inlined
                        takes one PC */
  size_t n;
  bool truncated;
} sr_stack;

typedef struct sr_event {
  uint32_t stack;  /* 1-based index into sr_rec.stacks */
  uint32_t thread; /* 1-based index into sr_rec.threads */
  int64_t delta;   /* ns after the previous event */
} sr_event;

typedef struct sr_rec {
  uint32_t pid;
  const char *name;       /* process name */
  uint64_t pc_base;       /* stack s, PC k: pc_base + 0x100 * s + 0x10 * k */
  uint64_t start_ns;      /* header start and first event time */
  const char *const *sites;
  size_t n_sites;
  const char *const *threads; /* names; thread i (from 0) has tid
                                 1000 + i + 1, or tids[i] */
  const uint64_t *tids;       /* NULL: as said (equal tids: a rename) */
  size_t n_threads;
  const sr_stack *stacks;
  size_t n_stacks;
  const sr_event *evs;
  size_t n_evs;
  bool last;              /* clean end */
  uint64_t ring_full;     /* a Drops message with this many, if not 0 */
  uint32_t parent_pid;    /* the header's (0: not a forked child) */
  /* The same stacks with their PCs only (an offline or recovered batch:
   * no frames), as segment `seq` (0: 1), marked recovered if so. */
  bool raw, recovered;
  uint32_t seq;
} sr_rec;

#define SR_APP_IMAGE "/opt/app/bin/app"
#define SR_LIB_IMAGE "/usr/lib/libc.so.6"
#define SR_MAX 512

/* Append the recording's one batch to out. @return 0 or -errno. */
int sr_encode(const sr_rec *r, stkr_fmt_buf *out);

/* Write r as dir/stackrec-<pid>-000001.zst. @return 0 or -errno. */
int sr_write(const char *dir, const sr_rec *r);

/* The standard symbolized recording of process `pid` (name "app", a clean
 * end), its app image at pc_base. Sites files.open, files.stat,
 * network.connect; threads main, io; 8 events on 4 stacks:
 *   1  files.open       open_config (app/config.c:12) < libc_wrapper (libc)
 *                       < load (app/load.c:30, inlined) < main (:40)
 *                       x4: main at t=0, 10, 70 ns, io at 20
 *   2  files.open       __libc_open < __libc_start (libc only) x1
 *   3  files.stat       stat_it (app/stat.c:7) < main (:44), truncated x1
 *   4  network.connect  an unknown app frame < main (:50) x2
 * (times in ns after start_ns = 1 s). */
sr_rec sr_std(uint32_t pid, uint64_t pc_base);

/* r written into a fresh fx_tmpdir(tag). @return the directory
 * (fx_tmpdir's buffer: copy it to keep it past the next call), or NULL. */
const char *sr_dir(const char *tag, const sr_rec *r);

/* sr_std(pid, pc_base) written into a fresh fx_tmpdir(tag). @return the
 * directory (fx_tmpdir's buffer: copy it to keep it past the next call),
 * or NULL. */
const char *sr_std_dir(const char *tag, uint32_t pid, uint64_t pc_base);

#endif
