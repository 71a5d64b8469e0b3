/*
 * symbolize_canon.c: one image list for every process (symbolize_canon.h).
 *
 * The backend keeps an image's symbols while the image stays in its list
 * with the same path, load address and build-id. Processes of a tree map
 * the same files at other addresses (ASLR after each exec), so a list per
 * process would load libc's debug info (~30 ms, ~17 MB) once per process.
 * Instead every image gets a canonical address range of its own, keyed by
 * build-id (or path and load address when it has none), far above any
 * user-space address (>= 2^62), and the backend gets the union of all of
 * them, which only grows: each image is loaded once per run, and a PC,
 * moved by its process's delta, is cached once for all processes. Offsets
 * (pc - load address) are unchanged, and so is every frame written; the
 * recorded PCs are never touched. A PC outside its process's images stays
 * as it is, below 2^57, so it can never land in a canonical range.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "proto/stkr_reader.h" /* STKR_PC_ASYNC */
#include "tools/stackrec/symbolize_canon.h"

#define CANON_BASE (1ull << 62)
#define CANON_ALIGN (1ull << 21)

typedef struct stkr__canon_map {
  uint64_t text_start, text_end; /* real, in the current process */
  uint64_t delta;                /* canonical - real */
} proc_map;

static stkr__canon_img *canon_find(stkr__canon *k, const Stackrec__Image *im) {
  for (size_t i = 0; i < k->n_img; i++) {
    stkr__canon_img *c = &k->img[i];
    if (im->build_id.len ? (c->build_id_len == im->build_id.len &&
                            memcmp(c->build_id, im->build_id.data,
                                   im->build_id.len) == 0)
                         : (c->build_id_len == 0 && c->load == im->load_address &&
                            strcmp(c->path, im->path ? im->path : "") == 0))
      return c;
  }
  return NULL;
}

/* A new canonical image for im (the i-th of its list), after the others.
 * @return it, NULL when out of memory (*err = -ENOMEM) or when no address
 * range is left (*err = 0: its PCs stay unresolved). */
static stkr__canon_img *canon_add(stkr__canon *k, const Stackrec__Image *im,
                                  bool app, int *err) {
  uint64_t span = (im->text_end - im->load_address + CANON_ALIGN) &
                  ~(CANON_ALIGN - 1);
  stkr__canon_img *c;

  *err = -ENOMEM;
  if (stkr_grow((void **)&k->img, &k->cap_img, k->n_img + 1, sizeof *k->img))
    return NULL;
  if (k->next_base < CANON_BASE) k->next_base = CANON_BASE;
  if (span > UINT64_MAX - k->next_base) {
    *err = 0;
    return NULL;
  }
  c = &k->img[k->n_img];
  memset(c, 0, sizeof *c);
  if (!(c->path = strdup(im->path ? im->path : ""))) return NULL;
  if (im->build_id.len != 0) /* no build-id: data may be NULL */
    memcpy(c->build_id, im->build_id.data, im->build_id.len);
  c->build_id_len = im->build_id.len;
  c->load = im->load_address;
  c->base = k->next_base;
  c->text_lo = im->text_start - im->load_address;
  c->text_hi = im->text_end - im->load_address;
  c->app = app;
  k->next_base += span;
  k->n_img++;
  return c;
}

/* Does [lo, hi) overlap an entry of m[0..n)? */
static bool map_overlaps(const proc_map *m, size_t n, uint64_t lo, uint64_t hi) {
  for (size_t i = 0; i < n; i++)
    if (lo < m[i].text_end && m[i].text_start < hi) return true;
  return false;
}

int stkr__canon_set_process(stkr__canon *k, const Stackrec__Batch *b,
                            bool same_process) {
  bool any_app = false, grew = false;
  size_t i, n_old = same_process ? k->n_map : 0;
  /* The new list first (its entries win), then the old one's after it. */
  proc_map *m = malloc((b->n_images + n_old + 1) * sizeof *m);
  proc_map *old = k->map;
  int err;

  if (!m) return -ENOMEM;
  k->map = m;
  k->n_map = 0;
  for (i = 0; i < b->n_images; i++) any_app |= b->images[i]->app;
  for (i = 0; i < b->n_images; i++) {
    const Stackrec__Image *im = b->images[i];
    stkr__canon_img *c;
    if (im->text_end <= im->text_start || im->text_start < im->load_address ||
        im->build_id.len > sizeof c->build_id)
      continue; /* unusable: its PCs stay unresolved */
    if (!(c = canon_find(k, im))) {
      /* Recordings from before Image.app: the main executable is first. */
      if (!(c = canon_add(k, im, any_app ? im->app : i == 0, &err))) {
        if (err < 0) {
          free(old);
          return err;
        }
        continue;
      }
      grew = true;
    }
    k->map[k->n_map++] = (proc_map){im->text_start, im->text_end,
                                    c->base - im->load_address};
  }
  /* Images of the earlier list that the new one does not overlap: most
   * likely unloaded since (their PCs mean nothing else now), newest kept
   * first, at most STKR__CANON_KEEP beyond the new list. */
  size_t listed = k->n_map;
  for (i = 0; i < n_old && k->n_map - listed < STKR__CANON_KEEP; i++)
    if (!map_overlaps(k->map, listed, old[i].text_start, old[i].text_end))
      k->map[k->n_map++] = old[i];
  free(old);
  return grew;
}

void stkr__canon_unknown_process(stkr__canon *k) { k->n_map = 0; }

const uint64_t *stkr__canon_pcs(stkr__canon *k, const uint64_t *pcs, size_t n) {
  if (n > k->cap_pcs) {
    uint64_t *p = realloc(k->pcs, n * sizeof *p);
    if (!p) return NULL;
    k->pcs = p;
    k->cap_pcs = n;
  }
  for (size_t i = 0; i < n; i++) {
    /* A Swift async resume PC keeps its marker bit (the resolver looks it
     * up at the function start); only the address moves. */
    const uint64_t flag = pcs[i] & STKR_PC_ASYNC, addr = pcs[i] & ~STKR_PC_ASYNC;
    k->pcs[i] = pcs[i];
    for (size_t j = 0; j < k->n_map; j++)
      if (addr >= k->map[j].text_start && addr < k->map[j].text_end) {
        k->pcs[i] = (addr + k->map[j].delta) | flag;
        break;
      }
  }
  return k->pcs;
}

void stkr__canon_free(stkr__canon *k) {
  STKR_FREE_EACH(k->img, k->n_img, path);
  free(k->img);
  free(k->map);
  free(k->pcs);
}
