/*
 * merge_pids.h: which pid each input process of `stackrec merge` gets in
 * OUT, and which pid its parent is there (merge.c; merge_pids.c).
 *
 * A process keeps its pid unless a process read before it (the reader's
 * order: by pid, then by input) took it; it then gets a synthetic pid from
 * 10000000 up that no input process has. Processes whose file names give their pid get theirs at
 * stkr__mpids_init, in that order; a file not named as a segment has pid 0
 * until its first Header is read, and gets its pid then
 * (stkr__mpids_assign). Not thread-safe: the CLI's one thread.
 */
#ifndef STKR_TOOLS_MERGE_PIDS_H
#define STKR_TOOLS_MERGE_PIDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h"

#define STKR__MERGE_PID_BASE 10000000u

typedef struct stkr__mproc {
  uint32_t out_pid;
  bool assigned, renumbered;
  bool wrote;          /* merge.c: a batch or tombstone of it is in OUT */
  dev_t dev;           /* its input directory (0/0: could not be stat'ed) */
  ino_t ino;
} stkr__mproc;

typedef struct stkr__mpids {
  const stkr_reader *r;
  stkr__mproc *p;      /* by reader process index */
  size_t n;
  uint32_t *order;     /* indices of the processes named by their files, by
                          pid (then index); unnamed ones (pid 0) left out */
  size_t n_order;
  uint32_t *unnamed;   /* indices of the others */
  size_t n_unnamed;
  stkr_map taken;      /* pids given in OUT */
  stkr_map named;      /* pids of the processes named by their files */
  uint32_t next_pid;   /* next synthetic pid to try */
} stkr__mpids;

/* Set m up for r's processes (r's count is fixed while it is read) and
 * give the named ones their OUT pids. @return 0 or -ENOMEM. */
int stkr__mpids_init(stkr__mpids *m, const stkr_reader *r);
void stkr__mpids_free(stkr__mpids *m);

/* Give process ix (recorded as pid) its OUT pid, if it has none yet.
 * @return 0 or -ENOMEM. */
int stkr__mpids_assign(stkr__mpids *m, size_t ix, uint32_t pid);

/* The OUT pid of the parent (`parent`, as a Header of process ix says):
 * the OUT pid of the process of ix's own input (directory, by inode) that
 * had that pid; else `parent` itself, unless OUT has or may get a process
 * of that pid (then 0, unknown: OUT would name a stranger). */
uint32_t stkr__mpids_parent(const stkr__mpids *m, size_t ix, uint32_t parent);

/* The processes of directory (dev, ino) that wrote something into OUT,
 * with their OUT pids, into map (room for m->n). @return how many. */
size_t stkr__mpids_of_dir(const stkr__mpids *m, dev_t dev, ino_t ino,
                          stkr_pid_map *map);

#endif /* STKR_TOOLS_MERGE_PIDS_H */
