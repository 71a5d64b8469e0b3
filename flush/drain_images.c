/*
 * drain_images.c: what the worker does with images (runs on the worker
 * thread only, within a pass or at its start): a new image list marks the
 * app's images and goes to the symbolizer and the unwind tables; the
 * symbolizer's start; a new stack's frames resolved once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flush/worker.h"

/* A new image list: mark the app's images (the main executable, listed
 * first, and those under STACKREC_APP_PATHS) and hand the list to the
 * symbolizer, before any stack of this pass is resolved. */
void stkr__drain_images_changed(stkr__worker *w) {
  stkr__symimg *si = NULL;
  if (w->imgs.gen == w->imgs_gen_app) return;
  w->imgs_gen_app = w->imgs.gen;
  for (size_t i = 0; i < w->imgs.n; i++) {
    Stackrec__Image *im = &w->imgs.imgs[i];
    im->app = i == 0 || stkr__app_path_match(w->cfg.app_paths, im->path);
  }
  if (!w->symc) return;
  if (w->imgs.n && !(si = calloc(w->imgs.n, sizeof *si))) goto fail;
  for (size_t i = 0; i < w->imgs.n; i++) {
    const Stackrec__Image *im = &w->imgs.imgs[i];
    si[i] = (stkr__symimg){im->path, im->load_address, im->text_start,
                           im->text_end, im->build_id.data, im->build_id.len,
                           im->app};
  }
  if (stkr__symc_set_images(w->symc, si, w->imgs.n) < 0) goto fail;
  free(si);
  return;
fail:
  free(si);
  w->imgs_gen_app = 0; /* try again next pass */
  stkr__log(STKR__LOG_OTHER, "symbolize: out of memory for the image list");
}

void stkr__drain_unwind_tables(stkr__worker *w) {
  stkr__unwind_update u;
  int err;

  if (w->cfg.set.unwind != STKR_UNWIND_TABLES ||
      (w->imgs_gen_unwind != 0 && w->imgs_gen_unwind == w->imgs.gen))
    return;
  /* Tried once per image list: a failure leaves the frame-pointer walk
   * (or the previous tables) until the list changes again. */
  w->imgs_gen_unwind = w->imgs.gen ? w->imgs.gen : 1;
  if ((err = stkr__unwind_tables_update(&u)) < 0) {
    stkr__log(STKR__LOG_OTHER, "unwind tables: %s; stacks are walked with "
              "frame pointers", err == -ENOSYS ? "not supported here"
                                                : strerror(-err));
    return;
  }
  if (u.kept_old)
    stkr__log(STKR__LOG_OTHER, "unwind tables: a thread stayed inside one "
              "event for over %u ms; the replaced tables are kept",
              STKR__UW_GRACE_MS);
  stackrec__unwind_tables__init(&w->uw_pb);
  w->uw_pb.images = u.images;
  w->uw_pb.images_failed = u.failed;
  w->uw_pb.images_without_cfi = u.without_cfi;
  w->uw_pb.rows = u.rows;
  w->uw_pb.rows_fallback = u.rows_fallback;
  w->uw_pb.table_bytes = u.table_bytes;
  w->uw_pb.images_cached = u.cache_loaded;
  w->uw_pb.cache_rejected = u.cache_rejected;
  w->uw_have = true;
}

/* The symbolizer's notes (an image whose file cannot be used): rate-limited
 * like every other message of ours. */
static void sym_warn(void *arg, const char *why) {
  (void)arg;
  stkr__log(STKR__LOG_OTHER, "symbolize: %s", why);
}

void stkr__drain_start_symbolizer(stkr__worker *w) {
  stkr__symbe *be = NULL;
  stkr__symbe_opts so = {.warn = sym_warn, .symcache_dir = w->cfg.symcache_dir};
  if (w->cfg.set.symbolize != STKR_SYMBOLIZE_INPROC) return;
  if (stkr__symbe_create(&so, &be) == 0) (void)stkr__symc_create(be, &w->symc);
  if (w->symc == NULL) w->cfg.set.symbolize = STKR_SYMBOLIZE_OFFLINE;
}

/* The frames of a stack new to the recording: the only place the worker
 * does symbol work (each unique PC once, in the symbolizer's cache). */
void stkr__drain_symbolize_stack(stkr__worker *w, stkr__stack *s) {
  int err = stkr__symc_stack(w->symc, s->pcs, s->depth, &s->frames,
                             &s->n_frames);
  if (err < 0) {
    s->frames = NULL;
    s->n_frames = 0; /* the stack keeps its PCs only */
    stkr__log(STKR__LOG_OTHER, "symbolize: %s", strerror(-err));
  }
}
