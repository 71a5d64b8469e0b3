/*
 * snapshot.h: `stackrec snapshot PID`: the stacks of every thread of
 * another process. The pieces:
 *  - a platform backend stops one thread at a time, as briefly as it can,
 *    reads its registers and copies its stack window, then lets it go
 *    (snapshot_linux.c: ptrace + process_vm_readv; snapshot_apple.c:
 *    task_for_pid + thread_suspend, compiled for Apple targets only);
 *  - the unwinder walks each copy afterwards, with no thread stopped
 *    (snapshot_unwind.c: CFI where the image has it, frame pointers with
 *    common/stkr_fpwalk.h's rules otherwise);
 *  - the image list of the target, for the unwinder and the symbolizer
 *    (snapshot_images.c: /proc/PID/maps, build-ids);
 *  - output: text like eu-stack, --json, or a recording (snapshot.c,
 *    snapshot_write.c).
 * Thread-safety: none; one command runs.
 */
#ifndef STKR_SNAPSHOT_H
#define STKR_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "flush/symbolize.h"

/* Most PCs kept per thread (the recorder's STKR_MAX_DEPTH). */
#define STKR_SNAP_MAX_DEPTH 256
/* Most stack bytes copied per thread from its stack pointer up. */
#define STKR_SNAP_STACK_MAX (256u << 10)

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
} stkr_snap_thread;

/* One image mapped in the target (snapshot_images.c). */
typedef struct stkr_snap_image {
  stkr__symimg sym; /* path, load bias, text range, build-id */
  char *path;       /* owned (sym.path points here) */
  uint8_t build_id[64];
  void *elf;        /* Elf * (libelf) of the file, or NULL */
  void *cfi;        /* Dwarf_CFI * of its .eh_frame, or NULL */
  int fd;
} stkr_snap_image;

/* The readable mappings of the target: where each thread's stack ends. */
typedef struct stkr_snap_map {
  uint64_t lo, hi;
} stkr_snap_map;

typedef struct stkr_snap_images {
  stkr_snap_image *v;
  size_t n;
  stkr_snap_map *maps;
  size_t n_maps, cap_maps;
} stkr_snap_images;

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
 * mappings, bounding each stack copy. On failure err holds one line naming
 * the pid and the reason. Every thread is let go again on every path
 * (also if a signal arrives: catchable ones are held for the few
 * microseconds of each stop).
 * @return 0; -ESRCH (no such process, or it exited meanwhile), -EPERM
 *         (not allowed to trace it), -ENOMEM, -EIO; err says which. */
int stkr_snap_take(pid_t pid, const stkr_snap_images *im, stkr_snap *out,
                   char *err, size_t err_cap);
void stkr_snap_free(stkr_snap *s);

/* The image list and mappings of pid (snapshot_images.c). Files are
 * opened through /proc/PID/root (the target's mount namespace). Without
 * with_images only the mappings are read again (im keeps its images: a
 * series reads them once).
 * @return 0, -ESRCH, -EACCES, -ENOMEM; err says which. */
int stkr_snap_images_read(pid_t pid, stkr_snap_images *im, bool with_images,
                          char *err, size_t err_cap);
void stkr_snap_images_free(stkr_snap_images *im);
/* The image holding pc, or NULL. */
const stkr_snap_image *stkr_snap_image_of(const stkr_snap_images *im,
                                          uint64_t pc);

/* Walk t's stack copy into t->pcs (snapshot_unwind.c). */
void stkr_snap_unwind(const stkr_snap_images *im, stkr_snap_thread *t);

/* One thread's stack as recorded: its PCs (the real ones) and the frame
 * ids the frame cache gave them (flush/symbolize.h: stkr__symc_stack). */
typedef struct stkr_snap_frames {
  const uint64_t *pcs;
  uint32_t n_pcs;
  const uint32_t *frames; /* the cache's; valid for its life */
  uint32_t n_frames;
  bool truncated;
} stkr_snap_frames;

/* -o DIR (snapshot_write.c): a recording of one run's snapshots. */
typedef struct stkr_snap_writer stkr_snap_writer;
/* Create DIR (0700) if missing and the segment file of pid in it (the
 * first free seq). @return 0 or -errno (err names the path). */
int stkr_snap_writer_open(const char *dir, uint32_t pid,
                          stkr_snap_writer **out, char *err, size_t cap);
/* One snapshot as one batch: fr[i] is s->threads[i]'s stack; defs the
 * StringDefs/FrameDefs emitted for them (epoch 1: the whole file). last:
 * the final batch (a clean end). @return 0 or -errno. */
int stkr_snap_writer_add(stkr_snap_writer *w, const stkr_snap *s,
                         const stkr_snap_frames *fr,
                         const stkr_snap_images *im,
                         const stkr__symdefs *defs, bool last);
/* fsync, close and free (NULL accepted). @return 0 or -errno. */
int stkr_snap_writer_close(stkr_snap_writer *w);
const char *stkr_snap_writer_path(const stkr_snap_writer *w);

/* The name of this machine's architecture as the format spells it. */
const char *stkr_snap_arch(void);

#endif /* STKR_SNAPSHOT_H */
