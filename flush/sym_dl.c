/*
 * sym_dl.c: the flush worker's symbolizer entry points, loaded on demand
 * (//flush:flush_dl, linked into the preload library; embedders link the
 * symbolizer itself through //flush). See symbolize/symbolize_dl.h for why.
 *
 * The worker calls the functions of symbolize.h it always calls; here they
 * forward into the table of libstackrec_symbolize.so, which the first
 * stkr__symbe_create() loads: only in inproc mode, on the worker thread
 * (worker.c, start_symbolizer), never on a hook's thread. The module is
 * looked up next to the library this file is linked into (dladdr), so
 * `stackrec record`, the Bazel runfiles and an install (lib/stackrec/) all
 * find it without a path to configure. If it cannot be loaded the backend
 * reports -ENOTSUP with a note, and the worker records offline (PCs and the
 * image list; `stackrec symbolize` resolves them later).
 *
 * Until a backend exists no cache does, so the other forwarders see no
 * table only for empty definition lists (batch.c resets and frees them
 * whatever the mode): nothing to do then.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "flush/flush_internal.h"
#include "symbolize/symbolize_dl.h"

/* The loaded table, set once by load_module() and never unloaded. Release
 * there pairs with the acquire loads below (a forked child inherits it). */
static _Atomic(const stkr__sym_dl_api *) g_api;

static const stkr__sym_dl_api *api(void) {
  return atomic_load_explicit(&g_api, memory_order_acquire);
}

/* dlopen the module next to this library. @return the table or NULL (a
 * note says why). Only one worker exists at a time, so two loads never
 * race; if they did, both would find the same handle. */
static const stkr__sym_dl_api *load_module(void) {
  const stkr__sym_dl_api *t = api();
  char path[4096];
  Dl_info di;
  const char *slash;
  void *h;

  if (t != NULL) return t;
  if (dladdr((void *)load_module, &di) == 0 || di.dli_fname == NULL ||
      (slash = strrchr(di.dli_fname, '/')) == NULL) {
    stkr__log(STKR__LOG_OTHER, "symbolize: cannot find the directory of the "
              "recorder's library to load %s; recording offline",
              STKR__SYM_DL_FILE);
    return NULL;
  }
  if (snprintf(path, sizeof path, "%.*s/%s", (int)(slash - di.dli_fname),
               di.dli_fname, STKR__SYM_DL_FILE) >= (int)sizeof path) {
    stkr__log(STKR__LOG_OTHER, "symbolize: path of %s too long; recording "
              "offline", STKR__SYM_DL_FILE);
    return NULL;
  }
  /* No fork while the module loads (the loader-scan lock, which fork's
   * prepare handler takes): a child forked mid-dlopen inherits a module
   * half relocated, which its own dlopen then returns as loaded; its
   * worker called through the table's unrelocated pointers and the child
   * died of SIGSEGV (QA, session 20: 1-3 of 40 forks right after a first
   * event, in-process symbolization). */
  stkr__loader_scan_begin();
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  t = h != NULL ? (const stkr__sym_dl_api *)dlsym(h, STKR__SYM_DL_SYMBOL)
                : NULL;
  stkr__loader_scan_end();
  if (h == NULL) {
    const char *why = dlerror();
    stkr__log(STKR__LOG_OTHER, "symbolize: cannot load %s: %s; recording "
              "offline (stackrec symbolize resolves the stacks later)", path,
              why ? why : "unknown error");
    return NULL;
  }
  if (t == NULL || t->magic != STKR__SYM_DL_MAGIC ||
      t->size != sizeof(stkr__sym_dl_api)) {
    stkr__log(STKR__LOG_OTHER, "symbolize: %s is from another build (no "
              "matching %s); recording offline", path, STKR__SYM_DL_SYMBOL);
    dlclose(h);
    return NULL;
  }
  atomic_store_explicit(&g_api, t, memory_order_release);
  return t;
}

int stkr__symbe_create(const stkr__symbe_opts *opts, stkr__symbe **out) {
  const stkr__sym_dl_api *t = load_module();
  *out = NULL;
  return t != NULL ? t->symbe_create(opts, out) : -ENOTSUP;
}

int stkr__symc_create(stkr__symbe *be, stkr__symc **out) {
  /* A backend exists only if the module loaded. */
  return api()->symc_create(be, out);
}

void stkr__symc_free(stkr__symc *c) {
  if (c != NULL) api()->symc_free(c);
}

int stkr__symc_set_images(stkr__symc *c, const stkr__symimg *imgs, size_t n) {
  return api()->symc_set_images(c, imgs, n);
}

int stkr__symc_stack(stkr__symc *c, const uint64_t *pcs, size_t n_pcs,
                     const uint32_t **frames, uint32_t *n_frames) {
  return api()->symc_stack(c, pcs, n_pcs, frames, n_frames);
}

bool stkr__symc_ready(const stkr__symc *c, const uint64_t *pcs,
                      size_t n_pcs) {
  return api()->symc_ready(c, pcs, n_pcs);
}

int stkr__symc_emit(stkr__symc *c, const uint32_t *frames, uint32_t n_frames,
                    uint32_t epoch, stkr__symdefs *out) {
  return api()->symc_emit(c, frames, n_frames, epoch, out);
}

void stkr__symdefs_reset(stkr__symdefs *d) {
  const stkr__sym_dl_api *t = api();
  if (t != NULL) t->symdefs_reset(d);
}

void stkr__symdefs_free(stkr__symdefs *d) {
  const stkr__sym_dl_api *t = api();
  if (t != NULL) t->symdefs_free(d);
}
