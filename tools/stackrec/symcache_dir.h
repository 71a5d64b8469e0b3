/*
 * symcache_dir.h: the CLI's symbol cache directory (symcache_dir.c), read
 * and filled by `stackrec snapshot` and `stackrec record`.
 * Not thread-safe; the CLI is single-threaded.
 */
#ifndef STKR_SYMCACHE_DIR_H
#define STKR_SYMCACHE_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_symcache_dir.h" /* the default directory */
#include "symbolize/symbolize.h"

/* The images a backend answered from their DWARF: what a fill would turn
 * into caches. Owns its strings; free with stkr_cli_symcache_todo_free. */
typedef struct stkr_cli_symcache_item {
  char *file; /* the file the DWARF was read from (or beside) */
  uint8_t build_id[64];
  size_t build_id_len;
} stkr_cli_symcache_item;
typedef struct stkr_cli_symcache_todo {
  stkr_cli_symcache_item *v;
  size_t n, cap;
  bool oom; /* some were left out (no memory): the next run fills them */
} stkr_cli_symcache_todo;

/* Append be's images read from DWARF to t (be may be freed after; NULL:
 * nothing). Out of memory leaves images out, never fails. */
void stkr_cli_symcache_take(stkr__symbe *be, stkr_cli_symcache_todo *t);
void stkr_cli_symcache_todo_free(stkr_cli_symcache_todo *t);

/* What stkr_cli_symcache_fill says on stderr, as "stackrec CMD: ...". */
#define STKR_CLI_SYMCACHE_SILENT 0 /* nothing */
#define STKR_CLI_SYMCACHE_NOTES 1  /* only what could not be written */
#define STKR_CLI_SYMCACHE_ALL 2    /* and what was written */

/* Write DIR/<build-id>.stkrsym for the images of t (at most a few per run,
 * none started after 2 s, none once SIGINT/TERM/HUP/QUIT is pending: a
 * caller that blocks them, as record does, is being asked to stop),
 * creating DIR; failures are a note, never an error. Call after the output is printed: it costs this run ~0.15 s per
 * libc-sized library, and the next runs nothing. */
void stkr_cli_symcache_fill(const stkr_cli_symcache_todo *t, const char *dir,
                            const char *cmd, unsigned verbosity);

#endif /* STKR_SYMCACHE_DIR_H */
