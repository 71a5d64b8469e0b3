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

#include "symbolize/symbolize.h"
#include "tools/stackrec/snapshot_backend.h"

/* One image mapped in the target (snapshot_images.c). */
typedef struct stkr_snap_image {
  stkr__symimg sym; /* path, load bias, text range, build-id */
  char *path;       /* owned (sym.path points here) */
  uint8_t build_id[64];
  void *elf;        /* Elf * (libelf) of the file, or NULL */
  void *cfi;        /* Dwarf_CFI * of its .eh_frame, or NULL */
  int fd;
  /* The image's bytes as read from the target's memory, under elf (owned):
   * the vDSO, which is no file ("[vdso]"). NULL for a file. Not given to
   * the symbolizer, which reads files only (its frames stay unnamed). */
  void *mem;
  uint64_t map_bias; /* lo - file offset of its first executable mapping:
                        a mapping of the file placed alike is more of it */
} stkr_snap_image;

typedef struct stkr_snap_images {
  stkr_snap_image *v;
  size_t n;
  stkr_snap_map *maps;   /* readable ranges: where stacks may be */
  size_t n_maps, cap_maps;
  stkr_snap_map *xmaps;  /* executable ranges: where a PC may be */
  size_t n_xmaps, cap_xmaps;
  char note[256]; /* "" or why the vDSO is no image (for a note) */
} stkr_snap_images;

/* The image list and mappings of pid (snapshot_images.c). Files are
 * opened through /proc/PID/root (the target's mount namespace); the vDSO
 * is read from the target's memory (im->note says why not, if not). Without
 * with_images only the mappings are read again (im keeps its images: a
 * series reads them once).
 * @return 0, -ESRCH, -EACCES, -ENOMEM; err says which. */
int stkr_snap_images_read(pid_t pid, stkr_snap_images *im, bool with_images,
                          char *err, size_t err_cap);
void stkr_snap_images_free(stkr_snap_images *im);
/* Is pc inside an executable mapping (a file's text, JIT code, the
 * vdso)? */
bool stkr_snap_executable(const stkr_snap_images *im, uint64_t pc);
/* The image holding pc, or NULL. */
const stkr_snap_image *stkr_snap_image_of(const stkr_snap_images *im,
                                          uint64_t pc);

/* Walk t's stack copy into t->pcs (snapshot_unwind.c). */
void stkr_snap_unwind(const stkr_snap_images *im, stkr_snap_thread *t);

/* One thread's stack as recorded: its PCs (the real ones) and the frame
 * ids the frame cache gave them (symbolize/symbolize.h: stkr__symc_stack). */
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
 * the final batch (a clean end; else close writes one). @return 0 or
 * -errno. */
int stkr_snap_writer_add(stkr_snap_writer *w, const stkr_snap *s,
                         const stkr_snap_frames *fr,
                         const stkr_snap_images *im,
                         const stkr__symdefs *defs, bool last);
/* End the recording, fsync, close and free (NULL accepted): a series that
 * ended before its last snapshot (a signal, the target's exit) gets an
 * end batch of its own, so that verify sees a clean end; a file that got
 * no batch at all (the first snapshot failed) is removed. @return 0 or
 * -errno. */
int stkr_snap_writer_close(stkr_snap_writer *w);
const char *stkr_snap_writer_path(const stkr_snap_writer *w);

#endif /* STKR_SNAPSHOT_H */
