/*
 * symbolize_run.h: one run of `stackrec symbolize` over a recording's
 * segment files (symbolize.c), shared with the command that sets it up
 * and prints its summary (symbolize_cmd.c) and with `stackrec record`'s
 * symbolization in place (stkr_cli_symbolize_in_place, cli.h).
 *
 * Thread-safety: none.
 */
#ifndef STKR_SYMBOLIZE_RUN_H
#define STKR_SYMBOLIZE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zstd.h>

#include "proto/stkr_format.h"
#include "symbolize/symbolize.h"
#include "tools/stackrec/symbolize_canon.h"
#include "tools/stackrec/symbolize_mixed.h"

typedef struct stkr__sym_seg {
  char *name;
  uint32_t pid, seq;
  bool waited; /* in place: its writer was running (run_segments) */
} stkr__sym_seg;

typedef struct stkr__sym_run {
  bool quiet; /* record -q: warnings (an image without symbols) unsaid */
  /* In place: the processes of the recorded tree still running (record's
   * list), whose files may still grow. */
  const uint32_t *running;
  size_t n_running;
  stkr__symc *c;
  ZSTD_DCtx *dctx;
  stkr_fmt_pballoc pballoc; /* bounds what decoding one batch may take */
  ZSTD_CCtx *cctx;
  stkr_fmt_buf out;
  uint8_t *dbuf;
  size_t dbuf_cap;
  uint32_t epoch;
  uint64_t files, batches, stacks, damaged, copied_files, live_files;
  uint32_t live_pid; /* the writer of the first file left (in place) */
  int status;
  bool in_place;  /* rewrite each file where it is (stackrec record) */
  bool new_proc;  /* no image list seen yet for the current process */
  uint64_t session_id; /* of the last Header read */
  const char *cmd; /* "symbolize" or "record": prefix of messages */
  const char *symcache_dir; /* --symcache, or NULL */
  stkr__symbe *be; /* the backend, owned by c (stkr__symc_create) */
  char **pending;  /* in place: names whose ".NAME.tmp" awaits its rename */
  size_t n_pending, cap_pending;
  stkr__canon canon; /* one image list for every process */
  bool mixed; /* the file has frames: only its bare stacks are resolved,
                 their definitions moved (symbolize_mixed.h) */
  uint64_t mixed_files;
  /* Not in place: frames written as image+offset are resolved again, the
   * ids added from id_base up, above every id of the recording
   * (find_id_base). */
  bool rename;
  bool no_room; /* the recording's ids leave no room above them: files
                   with frames are copied as they are */
  uint32_t id_base;
  stkr__sym_scan scan; /* the current file's frames */
  uint64_t renamed_pcs, renamed_stacks, renamed_files, renamed_now;
} stkr__sym_run;

/* The segment files of dir, sorted by pid then seq (*out: free each
 * name, then the array). @return 0 or -errno. */
int stkr__sym_list_segments(const char *dir, stkr__sym_seg **out, size_t *n);

/* Symbolize segs (sorted by pid, seq) of indir into outdir (ignored in
 * place) with one frame cache for all of them. @return 0, or -errno
 * (hard: out of memory, a file not written). */
int stkr__sym_run_segments(stkr__sym_run *run, const char *indir,
                           const char *outdir, stkr__sym_seg *segs,
                           size_t n_segs, const char **dirs, size_t n_dirs);

/* Everything run holds (not run itself). */
void stkr__sym_run_free(stkr__sym_run *run);

#endif /* STKR_SYMBOLIZE_RUN_H */
