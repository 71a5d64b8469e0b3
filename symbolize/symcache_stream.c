/*
 * symcache_stream.c: the symbol cache build's walk over a whole file
 * (stkr__dw_walk, see symbolize_dwarf.h), driving symcache_walk.c's CU
 * reader and answers.
 *
 * Streamed (the default where the DWARF allows): each CU is answered as
 * soon as it is read and its arrays reused, in three threads: two read
 * CUs with libdw (every other CU each; one reader on one core), the third
 * answers them in order and builds the file, a CU or two behind. Else (CUs out of address order, bounds before their CU's
 * batch) the whole file is read first, then answered. Every way gives the
 * same answers in the same order, hence the same file
 * (tests/test-symcache.c builds each fixture every way).
 *
 * Only compiled where there is no dyld (like the other Linux backends).
 */
#if !defined(__APPLE__)

#include <dwarf.h>
#include <errno.h>
#include <gelf.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "symbolize/symcache_walk.h"
#include "symbolize/symbolize_dwarf.h"

/* Answer the interval starting at a (bounds come in increasing order):
 * a new range unless it answers as the one before (about half do: a line
 * row that repeats the line, a block boundary); then that one goes on. */
static void answer(walk *w, uint64_t a) {
  stkr__symframe *fr = w->fr[w->fcur], *prev = w->fr[!w->fcur];
  size_t n = stkr__wk_frames(w, a, fr);
  if (w->nomem || w->restart || w->rc) return;
  if (n == w->prev_n && memcmp(fr, prev, n * sizeof *fr) == 0) return;
  w->rc = w->ops->range(w->ops->arg, a, fr, n);
  w->prev_n = n;
  w->fcur = !w->fcur;
}

/* Bytes of .debug_info read through one libdw handle (see walk_cus). */
#define HANDLE_SPAN ((Dwarf_Off)4 << 20)

static void cu_done(walk *w, uint64_t end);
static void hand_over(walk *rw);
static bool mine(const walk *w);
static void skip_cu(walk *w);

/* A handle of our own over elf. Readers share the ELF image, whose
 * sections libelf loads (and may decompress) on first use, in
 * dwarf_begin_elf: one at a time. After that each handle reads its own
 * copies of the section pointers, and dwarf_end frees only its own. */
static Dwarf *begin_handle(walk *w, Elf *elf) {
  if (w->em) pthread_mutex_lock(w->em);
  Dwarf *d = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
  if (w->em) pthread_mutex_unlock(w->em);
  return d;
}

static void end_handle(walk *w, Dwarf *d) {
  if (w->em) pthread_mutex_lock(w->em);
  dwarf_end(d);
  if (w->em) pthread_mutex_unlock(w->em);
}

/* Every CU of dw, in .debug_info order. libdw keeps what it read of each
 * CU (abbreviations, line table, file list, the CU itself) until
 * dwarf_end: about 200 MB on a 100 MB dSYM, most of the build's page
 * faults, though each CU is done with when the next one starts. So the
 * CUs are read through handles of our own over dw's ELF image, each ended
 * after HANDLE_SPAN bytes (dwarf_begin_elf takes microseconds; nothing the
 * walk keeps points into a handle's memory across CUs: names are in the
 * image's string sections, DIEs referred to are kept by offset, file
 * names are per CU). dw itself is left as it was. ranges_only: each CU's
 * DIE ranges alone (cu_ranges), else its whole walk. */
static void walk_cus(walk *w, Dwarf *dw, bool ranges_only) {
  Elf *elf = dwarf_getelf(dw);
  Dwarf *own = NULL;
  Dwarf_Off off = 0, next, own_from = 0;
  size_t hsize, k = 0;
  Dwarf_Addr base, lo, hi;
  while (!w->nomem && !w->restart && !w->rc) {
    if (elf && (!own || off - own_from >= HANDLE_SPAN)) {
      if (own) end_handle(w, own);
      own = begin_handle(w, elf);
      own_from = off;
    }
    Dwarf *h = own ? own : dw; /* (no handle of our own: dw's) */
    if (dwarf_nextcu(h, off, &next, &hsize, NULL, NULL, NULL) != 0) break;
    if (dwarf_offdie(h, off + hsize, &w->cudie)) {
      if (ranges_only) { /* as walk_cu reads them, CU ordinal k */
        ptrdiff_t ro = 0;
        while ((ro = dwarf_ranges(&w->cudie, ro, &base, &lo, &hi)) > 0) {
          if (hi <= lo) continue;
          stkr__addrs_add(&w->up, lo);
          stkr__addrs_add(&w->up, hi);
          if (MORE(w, w->curanges, w->n_curanges, w->cap_curanges))
            w->curanges[w->n_curanges++] = (wk_curange){lo, hi, k};
        }
        k++;
      } else if (!mine(w)) {
        skip_cu(w); /* another reader's */
      } else {
        stkr__wk_cu(w);
        if (w->pipe && !w->nomem) hand_over(w);
        else if (w->stream && !w->nomem && w->n_cus)
          cu_done(w, w->batch_end[w->n_cus - 1]);
      }
    }
    off = next;
  }
  if (own) end_handle(w, own);
  if (ranges_only && !w->nomem &&
      !(w->batch_end = malloc((k ? k : 1) * sizeof *w->batch_end)))
    w->nomem = true;
  if (ranges_only) w->n_all_cus = k;
}

/* Sort the addresses of b and keep each in [lo, hi) once. */
static void bounds_sort(stkr__addrs *b, uint64_t lo, uint64_t hi) {
  size_t k = 0;
  stkr__wk_sort(b->v, b->n);
  for (size_t i = 0; i < b->n; i++)
    if (b->v[i] >= lo && b->v[i] < hi && (k == 0 || b->v[i] != b->v[k - 1]))
      b->v[k++] = b->v[i];
  b->n = k;
}

/* Streamed: the CU ranges first (curanges, every CU's batch end). @return
 * false when streaming cannot give the whole-file answers: unless each CU
 * (in .debug_info order) ends where or before the next one with ranges
 * starts, an address's CU may be one not read yet. */
static bool cu_ranges(walk *w, Dwarf *dw) {
  walk_cus(w, dw, true);
  if (w->nomem || w->n_curanges == 0) return false;
  uint64_t end = 0, next = w->hi;
  size_t n = w->n_all_cus;
  for (size_t i = 0; i < w->n_curanges;) { /* (in CU order) */
    size_t cu = w->curanges[i].cu;
    uint64_t cu_lo = UINT64_MAX, cu_hi = 0;
    for (; i < w->n_curanges && w->curanges[i].cu == cu; i++) {
      if (w->curanges[i].lo < cu_lo) cu_lo = w->curanges[i].lo;
      if (w->curanges[i].hi > cu_hi) cu_hi = w->curanges[i].hi;
    }
    if (cu_lo < end) return false;
    end = cu_hi;
  }
  /* CU k's batch: up to where the next CU with ranges starts. */
  for (size_t k = n, i = w->n_curanges; k-- > 0;) {
    uint64_t first = UINT64_MAX;
    for (; i > 0 && w->curanges[i - 1].cu == k; i--)
      if (w->curanges[i - 1].lo < first) first = w->curanges[i - 1].lo;
    w->batch_end[k] = next;
    if (first != UINT64_MAX) next = first;
  }
  if (w->n_curanges > 1)
    qsort(w->curanges, w->n_curanges, sizeof *w->curanges, stkr__wk_cmp_curange);
  return true;
}

/* Streamed: the CU just walked is answered, [frontier, end: its batch
 * end), with every bound known there, then its arrays are emptied. */
static void cu_done(walk *w, uint64_t end) {
  size_t nb = 0;
  w->batch.n = 0;
  for (size_t i = 0; i < w->a.bounds.n; i++) {
    uint64_t b = w->a.bounds.v[i];
    if (b < w->lo || b >= w->hi) continue;
    if (b < w->frontier) { /* answered already without it */
      w->restart = true;
      return;
    }
    if (b < end) {
      stkr__addrs_add(&w->batch, b);
    } else {
      stkr__addrs_add(&w->carry, b);
      if (b < w->carry_min) w->carry_min = b;
    }
  }
  if (w->carry.n > 65536) w->restart = true; /* bounds far from their CU */
  if (w->carry_min < end) {
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; i < w->carry.n; i++) {
      uint64_t b = w->carry.v[i];
      if (b < end) stkr__addrs_add(&w->batch, b);
      else {
        w->carry.v[nb++] = b;
        if (b < min) min = b;
      }
    }
    w->carry.n = nb;
    w->carry_min = min;
  }
  for (; w->up_i < w->up.n && w->up.v[w->up_i] < end; w->up_i++)
    stkr__addrs_add(&w->batch, w->up.v[w->up_i]);
  if (w->batch.nomem || w->carry.nomem) w->nomem = true;
  bounds_sort(&w->batch, w->lo, w->hi);
  for (size_t i = 0; i < w->batch.n && !w->nomem && !w->restart && !w->rc; i++)
    answer(w, w->batch.v[i]);
  w->frontier = end;
  w->a.bounds.n = 0;
  w->a.n_nodes = w->a.n_ranges = w->a.n_subs = w->a.n_rows = 0;
}

/* .debug_line's size: about 4.6 bytes per row in clang's output. */
static size_t line_bytes(Dwarf *dw) {
  Elf *elf = dwarf_getelf(dw);
  Elf_Scn *scn = NULL;
  size_t shstrndx;
  if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return 0;
  while ((scn = elf_nextscn(elf, scn)) != NULL) {
    GElf_Shdr sh;
    const char *name;
    if (gelf_getshdr(scn, &sh) &&
        (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
        strcmp(name, ".debug_line") == 0)
      return sh.sh_size;
  }
  return 0;
}

int stkr__dw_walk_mode = 0, stkr__dw_walk_streamed = 0;

/* ---- streamed in threads ------------------------------------------------ */

/* Readers: libdw's part of the walk became the longer one (about 64 % of
 * a build's CPU on a 100 MB dSYM against 36 % answering), so with two
 * readers, each taking every other CU, the answering thread stops
 * waiting for one. */
#define READERS 2

/* One CU's arrays, handed from a reader to the answering thread. */
typedef struct wk_set {
  wk_arrays a;
  wk_cu cu;
  size_t ordinal;
  uint32_t n_local; /* the reader's strings then (wk_local.n) */
} wk_set;

/* The hand-over: two sets per reader, each either the reader's to fill
 * (not full) or the answering thread's (full). CU ordinal k is read by
 * reader k % n_readers, and each reader's sets are filled in turn, so the
 * answering thread takes them in CU order. */
typedef struct wk_pipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t n_readers;
  wk_set set[READERS][2];
  bool full[READERS][2]; /* under mu: set by a reader, cleared by the answerer */
  bool done[READERS];    /* under mu: the reader read its last CU (reader) */
  bool stop;             /* under mu: the answerer gave up (answerer) */
  size_t next[READERS];  /* the set each reader fills next (reader only) */
  walk *reader[READERS];
  wk_local *local[READERS];
  uint32_t *tr[READERS]; /* (answerer) each reader's id translation */
  size_t n_tr[READERS];
  uint32_t n_done[READERS]; /* (answerer) each reader's strings translated */
  Dwarf *dw;
} wk_pipe;

/* w reads the CU it is at (the n_cus-th): in one thread every CU, with
 * several readers every n_readers-th. */
static bool mine(const walk *w) {
  return !w->pipe || w->n_cus % w->pipe->n_readers == w->reader_id;
}

/* Another reader's CU: counted (ordinals are every reader's), not read. */
static void skip_cu(walk *w) {
  if (!MORE(w, w->cus, w->n_cus, w->cap_cus)) return;
  memset(&w->cus[w->n_cus++], 0, sizeof *w->cus);
}

/* Trade w's CU arrays for s's (the other side's, emptied). */
static void swap_set(walk *w, wk_set *s) {
  wk_arrays t = w->a;
  w->a = s->a;
  s->a = t;
}

/* A reader, after each of its CUs: wait for a free set, put the CU
 * there. */
static void hand_over(walk *rw) {
  wk_pipe *p = rw->pipe;
  size_t r = rw->reader_id, i = p->next[r];
  wk_set *s = &p->set[r][i];
  pthread_mutex_lock(&p->mu);
  while (p->full[r][i] && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
  bool stop = p->stop;
  pthread_mutex_unlock(&p->mu);
  if (stop) {
    rw->restart = true; /* (ends walk_cus) */
    return;
  }
  swap_set(rw, s); /* the set is the reader's until marked full */
  s->cu = rw->cus[rw->n_cus - 1];
  s->ordinal = rw->n_cus - 1;
  s->n_local = p->local[r]->n;
  pthread_mutex_lock(&p->mu);
  p->full[r][i] = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  p->next[r] ^= 1;
}

static void *reader_main(void *arg) {
  walk *rw = arg;
  wk_pipe *p = rw->pipe;
  walk_cus(rw, p->dw, false);
  pthread_mutex_lock(&p->mu);
  p->done[rw->reader_id] = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* The strings reader r interned since its last set (ids n_done[r] to
 * upto), interned into ops' table now, in order: most are new to it, and
 * each new one's index slot is a miss, so the slot of the string DIST
 * ahead is prefetched (its hash is the reader's). Ids of w->local. */
#define DIST 16
static void translate_new(walk *w, wk_pipe *p, size_t r, uint32_t upto) {
  const wk_local *l = w->local;
  const stkr__symwalk_ops *o = w->ops;
  uint32_t from = p->n_done[r];
  if (!o->intern_hashed || !o->intern_soon || upto <= from) return;
  if (upto > w->n_tr) {
    size_t old = w->n_tr;
    if (stkr_grow((void **)&w->tr, &w->n_tr, upto, sizeof *w->tr) != 0) {
      w->nomem = true;
      return;
    }
    memset(w->tr + old, 0xff, (w->n_tr - old) * sizeof *w->tr); /* NONE */
  }
  for (uint32_t id = from; id < upto && id < from + DIST; id++)
    o->intern_soon(o->arg, l->hash[id >> 16][id & 0xffff]);
  for (uint32_t id = from; id < upto; id++) {
    uint32_t ahead = id + DIST;
    if (ahead < upto) o->intern_soon(o->arg, l->hash[ahead >> 16][ahead & 0xffff]);
    const char *str = l->table[id >> 16][id & 0xffff];
    if (w->tr[id] != NONE) continue;
    w->tr[id] = o->intern_hashed(o->arg, str, strlen(str),
                                 l->hash[id >> 16][id & 0xffff]);
    if (w->tr[id] == NONE) {
      w->nomem = true;
      return;
    }
  }
  p->n_done[r] = upto;
}

/* Answer set s of reader r (CU ordinal k), as cu_done in one thread,
 * with r's strings. */
static void answer_set(walk *w, wk_pipe *p, size_t r, wk_set *s, size_t k) {
  if (s->ordinal != k || k >= w->n_all_cus) {
    w->restart = true; /* more CUs than cu_ranges saw */
    return;
  }
  w->local = p->local[r];
  w->tr = p->tr[r];
  w->n_tr = p->n_tr[r];
  translate_new(w, p, r, s->n_local);
  swap_set(w, s);
  w->cus[k] = s->cu;
  w->n_cus = k + 1;
  cu_done(w, w->batch_end[k]);
  swap_set(w, s);
  p->tr[r] = w->tr;
  p->n_tr[r] = w->n_tr;
  w->tr = NULL;
  w->n_tr = 0;
  w->local = NULL;
}

/* The answering thread: the sets in CU order. */
static void answer_sets(walk *w, wk_pipe *p) {
  size_t i[READERS] = {0};
  for (size_t k = 0;; k++) {
    size_t r = k % p->n_readers;
    wk_set *s = &p->set[r][i[r]];
    pthread_mutex_lock(&p->mu);
    while (!p->full[r][i[r]] && !p->done[r]) pthread_cond_wait(&p->cv, &p->mu);
    bool have = p->full[r][i[r]];
    pthread_mutex_unlock(&p->mu);
    /* (reader r read its last CU without k: there is no CU k, nor after) */
    if (!have) return;
    answer_set(w, p, r, s, k);
    bool quit = w->nomem || w->restart || w->rc;
    pthread_mutex_lock(&p->mu);
    p->full[r][i[r]] = false;
    if (quit) p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    i[r] ^= 1;
    if (quit) return;
  }
}

/* The reader's ops->intern: a copy, numbered (wk_local). */
static uint32_t local_intern(void *arg, const char *s) {
  wk_local *l = arg;
  size_t len = strlen(s) + 1;
  uint32_t id = l->n;
  if (id >= 4096u << 16) return NONE;
  if (l->blk_used + len > l->blk_cap) {
    size_t cap = len > ((size_t)1 << 20) ? len : (size_t)1 << 20;
    char *b = malloc(cap);
    if (!b || stkr_grow((void **)&l->blocks, &l->cap_blocks, l->n_blocks + 1,
                        sizeof *l->blocks) != 0) {
      free(b);
      return NONE;
    }
    l->blocks[l->n_blocks++] = l->blk = b;
    l->blk_used = 0;
    l->blk_cap = cap;
  }
  if (!l->table[id >> 16] &&
      !(l->table[id >> 16] = malloc(65536 * sizeof *l->table[0])))
    return NONE;
  if (!l->hash[id >> 16] &&
      !(l->hash[id >> 16] = malloc(65536 * sizeof *l->hash[0])))
    return NONE;
  char *d = l->blk + l->blk_used;
  memcpy(d, s, len);
  l->blk_used += len;
  l->table[id >> 16][id & 0xffff] = d;
  l->hash[id >> 16][id & 0xffff] = stkr_hash_bytes(STKR_HASH_SEED, s, len - 1);
  return l->n++;
}

static void local_free(wk_local *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_blocks; i++) free(l->blocks[i]);
  free(l->blocks);
  for (size_t i = 0; i < 4096; i++) {
    free(l->table[i]);
    free(l->hash[i]);
  }
  free(l);
}

static void walk_init(walk *w, const stkr__symspan *syms, size_t n_syms,
                      uint64_t lo, uint64_t hi, const stkr__symwalk_ops *ops);

/* The pipe's readers set up (their walks, their strings), or freed. */
static bool readers_init(walk *w, wk_pipe *p, stkr__symwalk_ops *lops,
                         pthread_mutex_t *dm, pthread_mutex_t *em) {
  for (size_t r = 0; r < p->n_readers; r++) {
    walk *rw = p->reader[r] = malloc(sizeof *rw);
    if (!rw) return false;
    p->local[r] = calloc(1, sizeof *p->local[r]);
    lops[r] = (stkr__symwalk_ops){local_intern, NULL, NULL, p->local[r], NULL,
                                  w->ops->as_compiled, NULL, NULL};
    walk_init(rw, w->syms, w->n_syms, w->lo, w->hi, &lops[r]);
    if (!p->local[r]) return false;
    rw->stream = true;
    rw->pipe = p;
    rw->reader_id = r;
    rw->dm = dm;
    rw->em = p->n_readers > 1 ? em : NULL;
  }
  return true;
}

static void readers_free(wk_pipe *p) {
  for (size_t r = 0; r < p->n_readers; r++) {
    if (p->reader[r]) stkr__wk_free(p->reader[r]);
    free(p->reader[r]);
    local_free(p->local[r]);
    free(p->tr[r]);
    for (int i = 0; i < 2; i++) {
      const wk_arrays *a = &p->set[r][i].a;
      STKR_FREE_ALL(a->nodes, a->ranges, a->subs, a->rows, a->bounds.v);
    }
  }
}

/* Streamed in threads: this one answers, READERS readers (one on one
 * core) read the CUs ahead (most of libdw's time), each every other CU.
 * @return false when the readers could not start (nothing done: the
 * caller streams in one thread). */
static bool walk_threaded(walk *w, Dwarf *dw) {
  wk_pipe *p = calloc(1, sizeof *p);
  pthread_mutex_t dm = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t em = PTHREAD_MUTEX_INITIALIZER;
  pthread_t t[READERS];
  stkr__symwalk_ops lops[READERS];
  size_t started = 0;
  if (!p) return false;
  p->n_readers = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? READERS : 1;
  p->dw = dw;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if ((w->cus = calloc(w->n_all_cus ? w->n_all_cus : 1, sizeof *w->cus)) &&
      readers_init(w, p, lops, &dm, &em)) {
    w->cap_cus = w->n_all_cus ? w->n_all_cus : 1;
    w->dm = &dm;
    while (started < p->n_readers &&
           pthread_create(&t[started], NULL, reader_main,
                          p->reader[started]) == 0)
      started++;
    if (started == p->n_readers) {
      answer_sets(w, p);
    } else { /* (not all started: those that did stop at their first CU) */
      pthread_mutex_lock(&p->mu);
      p->stop = true;
      pthread_cond_broadcast(&p->cv);
      pthread_mutex_unlock(&p->mu);
    }
    for (size_t r = 0; r < started; r++) {
      pthread_join(t[r], NULL);
      if (p->reader[r]->nomem) w->nomem = true;
    }
  }
  bool ok = started == p->n_readers;
  readers_free(p);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  w->dm = NULL;
  if (!ok) { /* as it was */
    free(w->cus);
    w->cus = NULL;
    w->cap_cus = 0;
    w->nomem = false; /* (a reader's, which the caller's walk redoes) */
  }
  free(p);
  return ok;
}

/* Streamed: each CU answered as soon as it is read, its arrays reused by
 * the next (the whole file's rows, scope trees and boundaries were most of
 * the build's memory, and answering from arrays just written hits the
 * cache). An address's answer needs the CU holding it (found among all CU
 * ranges, read first: cu_ranges) and the bounds below it, so this gives
 * the whole-file answers when CUs come in address order and each CU's
 * bounds lie at or past where the previous CU's batch ended; the first
 * bound that does not restarts the build as a whole file (ops->restart). */
static void walk_streamed(walk *w, Dwarf *dw) {
  w->stream = true;
  if (!cu_ranges(w, dw)) {
    w->restart = true;
    return;
  }
  for (size_t i = 0; i < w->n_syms; i++) {
    stkr__addrs_add(&w->up, w->syms[i].lo);
    stkr__addrs_add(&w->up, w->syms[i].hi);
  }
  stkr__addrs_add(&w->up, w->lo);
  if (w->up.nomem) {
    w->nomem = true;
    return;
  }
  bounds_sort(&w->up, w->lo, w->hi);
  w->frontier = w->lo;
  w->carry_min = UINT64_MAX;
  w->rc = w->ops->expect(w->ops->arg, w->up.n + line_bytes(dw) / 4);
  w->two_threads = !w->rc && stkr__dw_walk_mode != 3 && walk_threaded(w, dw);
  if (!w->rc && !w->two_threads) walk_cus(w, dw, false);
  if (stkr__dw_walk_mode == 2) w->restart = true; /* the test of restart */
  if (w->nomem || w->restart || w->rc) return;
  /* What no batch reached (the last CU's batch ends at hi: only when the
   * walk met fewer CUs than cu_ranges). */
  w->a.bounds.n = 0;
  if (w->frontier < w->hi) cu_done(w, w->hi);
}

/* The whole file at once: every CU read, then every interval answered. */
static void walk_whole(walk *w, Dwarf *dw) {
  for (size_t i = 0; i < w->n_syms; i++) {
    stkr__addrs_add(&w->a.bounds, w->syms[i].lo);
    stkr__addrs_add(&w->a.bounds, w->syms[i].hi);
  }
  stkr__addrs_add(&w->a.bounds, w->lo);
  if (dw) walk_cus(w, dw, false);
  if (w->n_curanges > 1)
    qsort(w->curanges, w->n_curanges, sizeof *w->curanges, stkr__wk_cmp_curange);
  if (w->nomem || w->a.bounds.nomem) {
    w->nomem = true;
    return;
  }
  bounds_sort(&w->a.bounds, w->lo, w->hi);
  w->rc = w->ops->expect(w->ops->arg, w->a.bounds.n);
  for (size_t i = 0; i < w->a.bounds.n && !w->rc && !w->nomem; i++)
    answer(w, w->a.bounds.v[i]);
}

static void walk_init(walk *w, const stkr__symspan *syms, size_t n_syms,
                      uint64_t lo, uint64_t hi, const stkr__symwalk_ops *ops) {
  memset(w, 0, sizeof *w);
  w->ops = ops;
  w->syms = syms;
  w->n_syms = n_syms;
  w->lo = lo;
  w->hi = hi;
  w->prev_n = SIZE_MAX; /* none yet */
}

int stkr__dw_walk(Dwarf *dw, const stkr__symspan *syms, size_t n_syms,
                  uint64_t lo, uint64_t hi, const stkr__symwalk_ops *ops) {
  walk w;
  int rc;
  walk_init(&w, syms, n_syms, lo, hi, ops);
  stkr__dw_walk_streamed = 0;
  if (dw && ops->restart && stkr__dw_walk_mode != 1) {
    walk_streamed(&w, dw);
    stkr__dw_walk_streamed = w.restart ? 0 : w.two_threads ? 2 : 1;
    if (w.restart && !w.nomem && !w.rc) {
      stkr__wk_free(&w);
      walk_init(&w, syms, n_syms, lo, hi, ops);
      w.rc = ops->restart(ops->arg);
      if (!w.rc) walk_whole(&w, dw);
    }
  } else {
    walk_whole(&w, dw);
  }
  rc = w.rc ? w.rc : w.nomem ? -ENOMEM : 0;
  stkr__wk_free(&w);
  return rc;
}

#endif /* !__APPLE__ */
