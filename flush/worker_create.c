/*
 * worker_create.c: a flush worker built (its wake, files, directory and the
 * recovery of the dead sessions found there) before its thread starts, and
 * freed after its thread was joined or never started. worker.c starts,
 * runs and ends it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_mkdir.h"
#include "flush/worker.h"
#include "proto/stkr_recover.h"

void stkr__worker_free(stkr__worker *w) {
  /* Failure paths: no ring holds anything worth keeping (no-op after
   * stkr_shutdown closed the session). */
  stkr__session_close(false, 0);
  if (w->wake_unsettled) { /* its semaphore stays: stkr__wake_disarm */
    stkr__wake_keep(w);
    return;
  }
  stkr__seg_free(&w->seg);
  stkr__stacktab_free(&w->stacks);
  stkr__batch_free(&w->bb);
  stkr__images_free(&w->imgs);
  stkr__symc_free(w->symc);
  stkr_fmt_buf_free(&w->out);
  if (w->cctx) ZSTD_freeCCtx(w->cctx);
  free(w->thread_seen);
  stkr__config_free(&w->cfg);
  stkr__wake_destroy(&w->wake);
  pthread_mutex_destroy(&w->req_mu);
  pthread_cond_destroy(&w->req_cv);
  pthread_mutex_destroy(&w->stats_mu);
  free(w);
}

static void recover_note(void *arg, const char *line) {
  (void)arg;
  stkr__log(STKR__LOG_OTHER, "recovery: %s", line);
}

/* The embedded case of crash-proof rings: sessions that died in this
 * directory (the previous run, SIGKILLed or crashed) are written out now.
 * Bounded and never fatal: a few sessions per start, and at most
 * STKR__RECOVER_BUDGET_MS of the app's stkr_init(); what is left stays in
 * its ring files for the next start or `stackrec recover` (a session whose
 * segments held millions of distinct payloads kept an app's start for
 * 3.6 s and 660 MB: QA, session 17). */
#define STKR__RECOVER_BUDGET_MS 200
static void recover_dir(stkr__worker *w) {
  stkr_recover_opts o = {.max_sessions = 8,
                         .budget_ms = STKR__RECOVER_BUDGET_MS,
                         .message = recover_note};
  stkr_recover_stats st;
  const char *notify = stkr_config_env("STACKREC_NOTIFY");

  /* Under `stackrec record` (its notice channel), which recovers the
   * directory every 10 s and at its end: only a dead session of this
   * pid (recycled), which must come before our own segments. Every
   * process of a tree probed every live session's lock at its start, so
   * a tree of many concurrent processes paid for their number squared
   * (QA, session 44: 300 at once). */
  if (notify != NULL && notify[0] != '\0') o.only_pid = w->sess.pid;
  int err = stkr_recover_dir(w->cfg.dir, &o, &st);
  if (err < 0)
    stkr__log(STKR__LOG_OTHER, "recovery in %s: %s", w->cfg.dir,
              strerror(-err));
}

void stkr__worker_recover_session(const char *dir, uint64_t session) {
  stkr_recover_opts o = {.only_session = session, .message = recover_note};
  stkr_recover_stats st;
  int err;

  if (session == 0 || dir == NULL)
    return;
  if ((err = stkr_recover_dir(dir, &o, &st)) < 0)
    stkr__log(STKR__LOG_OTHER, "recovery in %s: %s", dir, strerror(-err));
}

/* The session file (and with it, file-backed rings). Failure only costs
 * crash-proofing: rings fall back to anonymous memory. */
static void open_session(stkr__worker *w) {
  int err = stkr__session_open(w->cfg.dir, &w->sess);
  if (err < 0)
    stkr__log(STKR__LOG_OTHER, "cannot create a session file in %s: %s; rings "
              "are not crash-proof", w->cfg.dir, strerror(-err));
}

int stkr__worker_create(stkr__fconfig *cfg, const stkr__fork_origin *origin,
                        stkr__worker **out) {
  stkr__worker *w = calloc(1, sizeof *w);
  int err;

  if (!w) {
    stkr__config_free(cfg);
    return -ENOMEM;
  }
  w->cfg = *cfg;
  cfg->dir = NULL;
  cfg->app_paths = NULL;
  cfg->symcache_dir = NULL;
  w->seg.fd = -1; /* worker_free may run before stkr__seg_init: not fd 0 */
  stkr__session_template(&w->cfg, origin, &w->sess);
  pthread_mutex_init(&w->req_mu, NULL);
  pthread_cond_init(&w->req_cv, NULL);
  pthread_mutex_init(&w->stats_mu, NULL);
  if ((err = stkr__wake_init(&w->wake)) < 0) {
    pthread_mutex_destroy(&w->req_mu);
    pthread_cond_destroy(&w->req_cv);
    pthread_mutex_destroy(&w->stats_mu);
    stkr__config_free(&w->cfg);
    free(w);
    return err;
  }
  w->req_tail = &w->req_head;
  w->epoch = stkr__new_epoch();
  w->marks_dropped_base = stkr__marks_dropped();
  w->seg_first = true;
  stkr__batch_init(&w->bb);

  if ((err = stkr__stacktab_init(&w->stacks)) < 0) goto fail;
  if (!(w->cctx = ZSTD_createCCtx())) {
    err = -ENOMEM;
    goto fail;
  }
  if ((err = stkr_mkdir_p(w->cfg.dir, 0700)) < 0) {
    stkr__log(STKR__LOG_CONFIG, "cannot create directory %s: %s", w->cfg.dir,
              strerror(-err));
    goto fail;
  }
  /* Absolute from here on: the app may chdir() later, and segment paths
   * are rebuilt for every new file (a dirfd would not survive the
   * directory being removed and recreated). A forked child's is its
   * parent's, resolved already: realpath would cost it a system call for
   * every component. */
  const bool follow = origin != NULL && origin->follow_start;
  char *abs = follow && w->cfg.dir[0] == '/'
                  ? NULL
                  : realpath(w->cfg.dir, NULL);
  if (abs) {
    free(w->cfg.dir);
    w->cfg.dir = abs;
  }
  /* Before our own segments: a dead session of a recycled pid gets its
   * recovered segment first, and ours continue after it. Not in a forked
   * child (follow mode): its parent, alive, did it at its own start. */
  if (!follow) recover_dir(w);
  if ((err = stkr__seg_init(&w->seg, w->cfg.dir, w->sess.pid,
                            w->cfg.set.segment_bytes,
                            w->cfg.set.disk_cap_bytes)) < 0)
    goto fail;
  /* Open the first file now so that stkr_init reports an unusable
   * directory; its first batch (the Header) is written by the first drain. */
  if ((err = stkr__seg_open_next(&w->seg)) < 0) {
    stkr__log(STKR__LOG_CONFIG, "cannot create a segment file in %s: %s",
              w->cfg.dir, strerror(-err));
    goto fail;
  }
  w->session_first_seq = w->seg.seq;
  open_session(w);
  stkr__loader_scan_begin();
  (void)stkr__images_refresh(&w->imgs);
  stkr__loader_scan_end();
  *out = w;
  return 0;

fail:
  /* The first segment file, if any, is empty: seg_free removes it. */
  stkr__worker_free(w);
  return err;
}
