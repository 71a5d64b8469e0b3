/*
 * symcache_dir.c: the CLI's symbol cache directory (cli.h; the format:
 * docs/SYMCACHE.md), read and filled by `stackrec snapshot` and by
 * `stackrec record` at its end.
 *
 * Why: with file:line, resolving stacks spends most of its CPU reading
 * the DWARF of the libraries they pass through (libc's separate debug
 * file: ~50 ms of decompression and DIE walking), every run again. The
 * backend answers an image from DIR/<build-id>.stkrsym when there is one
 * (symbolize_elf.c, the answers are the same); after a run has printed
 * its output, the images it had to read from DWARF are converted into
 * caches there, so the next run on any program using them skips their
 * DWARF. The fill is bounded (at most FILL_MAX images per run, none
 * started after FILL_BUDGET_NS; each one pass over its DWARF: libc's 9.5
 * MB in ~0.15 s), and a cache that cannot be written is a note: the run
 * already succeeded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/stkr_grow.h"
#include "common/stkr_mkdir.h"
#include "common/stkr_symcache_dir.h"
#include "tools/stackrec/symcache_dir.h"

/* Most caches one run writes, and the time after which it starts no other
 * (a build takes ~10 ms per MB of DWARF: libc's 9.5 MB in ~0.15 s, a
 * browser engine's gigabyte would take ten seconds): a process maps tens
 * of libraries, and the output is already printed; the rest are written
 * by the next runs. */
#define FILL_MAX 8
#define FILL_BUDGET_NS 2000000000ull

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- what to fill: taken from the backend before it is freed ---------- */

static void take_one(void *arg, const stkr__symimg *img, const char *file) {
  stkr_cli_symcache_todo *t = arg;
  stkr_cli_symcache_item *it;
  size_t n = img->build_id_len;

  if (t->oom || n == 0 || n > sizeof it->build_id) return;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 8;
    void *v = realloc(t->v, cap * sizeof *t->v);
    if (v == NULL) {
      t->oom = true;
      return;
    }
    t->v = v;
    t->cap = cap;
  }
  it = &t->v[t->n];
  if ((it->file = strdup(file)) == NULL) {
    t->oom = true;
    return;
  }
  memcpy(it->build_id, img->build_id, n);
  it->build_id_len = n;
  t->n++;
}

void stkr_cli_symcache_take(stkr__symbe *be, stkr_cli_symcache_todo *t) {
  if (be != NULL) stkr__symbe_each_from_dwarf(be, take_one, t);
}

void stkr_cli_symcache_todo_free(stkr_cli_symcache_todo *t) {
  STKR_FREE_EACH(t->v, t->n, file);
  free(t->v);
  memset(t, 0, sizeof *t);
}

/* ---- the fill ------------------------------------------------------------ */

/* A signal that means "stop" is pending: held by a caller that blocks them
 * (record, once CMD has ended; snapshot, for its whole run), so the fill
 * would otherwise keep the user waiting for images they no longer want
 * (libc: ~0.15 s each). */
static bool stop_asked(void) {
  static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
    if (sigismember(&pending, stops[i]) == 1) return true;
  return false;
}

typedef struct fill {
  const char *dir;
  uint64_t t0;
  unsigned written, failed, skipped;
  uint64_t bytes;
  char first_err[1200];
} fill;

static void fill_one(fill *fl, const stkr_cli_symcache_item *it) {
  char hexid[2 * 64 + 1], path[4400], err[1200];
  stkr__symcache_stats st;
  stkr__symfile *f;
  int rc;

  if (fl->written + fl->failed >= FILL_MAX ||
      mono_ns() - fl->t0 > FILL_BUDGET_NS) {
    fl->skipped++;
    return;
  }
  stkr__symcache_elf_name(it->build_id, it->build_id_len, hexid,
                          sizeof hexid);
  snprintf(path, sizeof path, "%s/%s" STKR__SYMCACHE_EXT, fl->dir, hexid);
  rc = stkr__symfile_open(it->file, NULL, NULL, &f, err, sizeof err);
  if (rc == 0) {
    rc = stkr__symcache_write(f, path, &st, err, sizeof err);
    stkr__symfile_free(f);
  }
  if (rc == 0) {
    fl->written++;
    fl->bytes += st.file_bytes;
  } else if (fl->failed++ == 0) {
    snprintf(fl->first_err, sizeof fl->first_err, "%s", err);
  }
}

void stkr_cli_symcache_fill(const stkr_cli_symcache_todo *t, const char *dir,
                            const char *cmd, unsigned verbosity) {
  fill fl = {.dir = dir, .t0 = mono_ns()};
  int rc;

  if (t->n == 0) return; /* every image from a cache (or none has DWARF) */
  if ((rc = stkr_mkdir_p(dir, 0755)) != 0) {
    if (verbosity >= STKR_CLI_SYMCACHE_NOTES)
      fprintf(stderr, "stackrec %s: note: symbol cache directory %s: %s (no "
              "caches written)\n", cmd, dir, strerror(-rc));
    return;
  }
  for (size_t i = 0; i < t->n; i++) {
    if (stop_asked()) {
      /* The user wants out (record holds these signals, and drops them
       * when it exits): a cache is an optimization, the next run's. */
      if (verbosity >= STKR_CLI_SYMCACHE_NOTES)
        fprintf(stderr, "stackrec %s: note: %zu symbol cache%s not written: "
                "a signal to stop arrived (the next run writes %s)\n", cmd,
                t->n - i, t->n - i == 1 ? "" : "s",
                t->n - i == 1 ? "it" : "them");
      break;
    }
    fill_one(&fl, &t->v[i]);
  }
  if (fl.failed && verbosity >= STKR_CLI_SYMCACHE_NOTES)
    fprintf(stderr, "stackrec %s: note: %u symbol cache%s not written: %s\n",
            cmd, fl.failed, fl.failed == 1 ? "" : "s", fl.first_err);
  if (fl.written && verbosity >= STKR_CLI_SYMCACHE_ALL)
    fprintf(stderr, "stackrec %s: wrote %u symbol cache%s (%.1f MB) to %s "
            "in %.2f s%s\n", cmd, fl.written, fl.written == 1 ? "" : "s",
            (double)fl.bytes / 1048576, dir,
            (double)(mono_ns() - fl.t0) / 1e9,
            fl.skipped ? " (more in the next runs)" : "");
}
