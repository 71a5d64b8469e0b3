/*
 * symbolize.c: the frame cache (see symbolize.h).
 *
 * Why a cache per PC: resolving is expensive (libdw: microseconds per PC,
 * dladdr ~0.4 us, _NSCallStackArray more), stacks share most of their
 * frames (main, the run loop, the framework layers), and the recorder sees
 * the same few thousand stacks millions of times. So the worker resolves a
 * PC the first time any new stack contains it and never again for this
 * recording: later stacks with that PC cost one hash probe per PC, and
 * repeated stacks cost nothing here at all (the stack table already knows
 * them, so the worker never calls us).
 *
 * Storage: StringDef and FrameDef messages live in fixed-size chunks so
 * their addresses never move (a batch points at them until it is encoded);
 * ids are dense from 1, so id -> message is two array indexes. A PC's
 * frames get consecutive ids, so the PC map stores (first id, count). Each
 * message carries the epoch (segment) that last emitted it, so a new
 * segment re-emits exactly what its stacks use.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT, RTLD_NOLOAD */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_arena.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "proto/stkr_reader.h" /* STKR_PC_ASYNC */
#include "symbolize/symbolize.h"

#define CHUNK_SHIFT 10
#define CHUNK (1u << CHUNK_SHIFT)
#define STACK_ARENA_BYTES (64u * 1024u)

/* Total PCs resolved in this process (stkr__sym_resolved_total). Relaxed:
 * a statistic; readers synchronize through the worker's request mutex. */
static _Atomic uint64_t g_resolved_total;

uint64_t stkr__sym_resolved_total(void) {
  return atomic_load_explicit(&g_resolved_total, memory_order_relaxed);
}

typedef struct pcent {
  uint64_t pc;
  uint32_t first; /* frame id, from 1 */
  uint32_t n;
} pcent;


struct stkr__symc {
  stkr__symbe *be;
  /* strings: chunks of CHUNK messages, epochs by id - 1 */
  Stackrec__StringDef **str_chunks;
  size_t n_str_chunks;
  uint32_t n_strings;
  uint32_t *str_epoch;
  size_t cap_str_epoch;
  stkr_index str_ix; /* hash_str of a string -> its id - 1 */
  /* frames */
  Stackrec__FrameDef **fr_chunks;
  size_t n_fr_chunks;
  uint32_t n_frames;
  uint32_t *fr_epoch;
  size_t cap_fr_epoch;
  /* pc -> its frames: first id << 32 | how many */
  stkr_map pcs;
  /* Per-stack frame lists, each kept once by its content, [n, id...] in
   * the arena: a stack resolved again (one the worker's bounded table
   * forgot and met again; every snapshot of a thread that did not move)
   * takes the list it had, so the arena grows with distinct lists, not
   * with calls (review, session 44: +2 MB a round of 16,384 stacks). */
  uint32_t **lists;
  size_t n_lists, cap_lists;
  stkr_index list_ix; /* hash of a list's ids -> its index in lists */
  stkr_arena arena;
  uint32_t *scratch;
  size_t scratch_cap;
  uint64_t resolved;
  uint64_t named; /* of which a function was named for */
};

/* ---- demangling ---------------------------------------------------------- */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

/* __cxa_demangle is libstdc++'s (extern "C"). A C++ app has it loaded; a C
 * app that only sees mangled names through some C++ library has that
 * library's libstdc++ loaded too (RTLD_NOLOAD finds it without side
 * effects). Only as a last resort is libstdc++ loaded for us. */
static cxa_demangle_fn demangler(void) {
  static cxa_demangle_fn fn;
  static bool tried;
  if (!tried) {
    void *h;
    tried = true;
    fn = (cxa_demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!fn && ((h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD)) ||
                (h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL))))
      fn = (cxa_demangle_fn)dlsym(h, "__cxa_demangle");
  }
  return fn;
}

/* ---- Swift ---------------------------------------------------------------- */

typedef char *(*swift_demangle_fn)(const char *, size_t, char *, size_t *,
                                   uint32_t);

/* Written by the tools' main thread before any lookup, read by the one
 * thread that symbolizes: no atomics needed. */
static bool g_swift_may_load;
static uint64_t g_swift_missed;
static char g_swift_runtime[4096];

void stkr__demangle_swift_enable(void) { g_swift_may_load = true; }

uint64_t stkr__demangle_swift_missed(void) { return g_swift_missed; }

const char *stkr__demangle_swift_runtime(void) {
  return g_swift_runtime[0] ? g_swift_runtime : NULL;
}

/* The runtime's swift_demangle, looked up once. In the recorded app only
 * an already loaded runtime is used (a Swift app has it; nothing is loaded
 * into anyone else's process); the tools may load it: STACKREC_SWIFT_RUNTIME
 * (a libswiftCore.so) if set, else the Swift toolchain's, then the library
 * path. */
static swift_demangle_fn swift_demangler(void) {
  static swift_demangle_fn fn;
  static bool tried;
  if (!tried) {
    /* STACKREC_SWIFT_RUNTIME, when set, is the only candidate. */
    const char *env = getenv("STACKREC_SWIFT_RUNTIME");
    bool only = env && *env;
    const char *const cand[] = {
        only ? env : NULL,
        only ? NULL : "/opt/swift/usr/lib/swift/linux/libswiftCore.so",
        only ? NULL : "/usr/lib/swift/linux/libswiftCore.so",
        only ? NULL : "libswiftCore.so"};
    tried = true;
    fn = (swift_demangle_fn)dlsym(RTLD_DEFAULT, "swift_demangle");
    if (fn) snprintf(g_swift_runtime, sizeof g_swift_runtime, "(loaded)");
    for (size_t i = 0; !fn && g_swift_may_load && i < 4; i++) {
      void *h;
      if (!cand[i] || !(h = dlopen(cand[i], RTLD_LAZY | RTLD_LOCAL))) continue;
      if ((fn = (swift_demangle_fn)dlsym(h, "swift_demangle")))
        snprintf(g_swift_runtime, sizeof g_swift_runtime, "%s", cand[i]);
      else
        dlclose(h);
    }
  }
  return fn;
}

/* "$s..." (Swift 5), "$S" (4.2), "$e" (embedded), "_T0" (4.0), with the
 * Mach-O symbol underscore or not. */
static bool swift_mangled(const char *n) {
  if (n[0] == '_' && n[1] == '$') n++;
  return (n[0] == '$' && (n[1] == 's' || n[1] == 'S' || n[1] == 'e')) ||
         (n[0] == '_' && n[1] == 'T' && n[2] == '0');
}

static const char *demangle_swift(const char *name, char **buf, size_t *cap) {
  swift_demangle_fn fn = swift_demangler();
  char *out;
  size_t len;
  if (!fn) {
    g_swift_missed++;
    return NULL;
  }
  if (!(out = fn(name, strlen(name), NULL, NULL, 0))) return NULL;
  len = strlen(out) + 1;
  if (len > *cap) {
    char *b = realloc(*buf, len);
    if (!b) {
      free(out);
      return NULL;
    }
    *buf = b;
    *cap = len;
  }
  memcpy(*buf, out, len);
  free(out);
  return *buf;
}

const char *stkr__demangle(const char *name, char **buf, size_t *cap) {
  cxa_demangle_fn fn;
  int status = 0;
  char *out;

  if (!name) return NULL;
  if (swift_mangled(name)) return demangle_swift(name, buf, cap);
  if (name[0] != '_' || name[1] != 'Z') return NULL;
  if (!(fn = demangler())) return NULL;
  /* __cxa_demangle reallocs *buf as needed (it must be malloc'd). */
  out = fn(name, *buf, cap, &status);
  if (status != 0 || !out) return NULL;
  *buf = out;
  return out;
}

/* ---- helpers ------------------------------------------------------------- */

/* stkr_grow, the new elements zeroed (an epoch 0: never sent). */
static int grow_u32(uint32_t **a, size_t *cap, size_t need) {
  size_t old = *cap;
  int err = stkr_grow((void **)a, cap, need, sizeof **a);

  if (err == 0 && *cap > old) memset(*a + old, 0, (*cap - old) * sizeof **a);
  return err;
}

static Stackrec__StringDef *str_get(const stkr__symc *c, uint32_t id) {
  return &c->str_chunks[(id - 1) >> CHUNK_SHIFT][(id - 1) & (CHUNK - 1)];
}

static Stackrec__FrameDef *fr_get(const stkr__symc *c, uint32_t id) {
  return &c->fr_chunks[(id - 1) >> CHUNK_SHIFT][(id - 1) & (CHUNK - 1)];
}

/* Make room for message number `count` (1-based) in a chunk list. */
static int chunk_reserve(void ***chunks, size_t *n_chunks, uint32_t count,
                         size_t elem) {
  size_t need = ((size_t)count + CHUNK - 1) >> CHUNK_SHIFT;
  if (need <= *n_chunks) return 0;
  void **nc = realloc(*chunks, need * sizeof *nc);
  if (!nc) return -ENOMEM;
  *chunks = nc;
  nc[*n_chunks] = calloc(CHUNK, elem);
  if (!nc[*n_chunks]) return -ENOMEM;
  (*n_chunks)++;
  return 0;
}

/* The id of string s (NULL or "" -> 0), interning a copy if new.
 * @return 0 and *id, or -ENOMEM. */
static int intern(stkr__symc *c, const char *s, uint32_t *id) {
  static const Stackrec__StringDef def0 = STACKREC__STRING_DEF__INIT;
  uint64_t h;
  size_t pos, ix;

  *id = 0;
  if (!s || !*s) return 0;
  h = stkr_hash_bytes(STKR_HASH_SEED, s, strlen(s));
  for (ix = stkr_index_first(&c->str_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&c->str_ix, h, &pos)) {
    if (strcmp(str_get(c, (uint32_t)ix + 1)->value, s) == 0) {
      *id = (uint32_t)ix + 1;
      return 0;
    }
  }
  if (stkr_index_reserve(&c->str_ix, (size_t)c->n_strings + 1) < 0)
    return -ENOMEM;
  uint32_t nid = c->n_strings + 1;
  if (chunk_reserve((void ***)&c->str_chunks, &c->n_str_chunks, nid,
                    sizeof(Stackrec__StringDef)) < 0 ||
      grow_u32(&c->str_epoch, &c->cap_str_epoch, nid) < 0)
    return -ENOMEM;
  char *copy = strdup(s);
  if (!copy) return -ENOMEM;
  Stackrec__StringDef *d = str_get(c, nid);
  *d = def0;
  d->id = nid;
  d->value = copy;
  c->str_epoch[nid - 1] = 0;
  c->n_strings = nid;
  (void)stkr_index_add(&c->str_ix, h, nid - 1); /* reserved above */
  *id = nid;
  return 0;
}

/* ---- create / free ------------------------------------------------------- */

int stkr__symc_create(stkr__symbe *be, stkr__symc **out) {
  stkr__symc *c = calloc(1, sizeof *c);
  *out = NULL;
  if (!c) {
    stkr__symbe_free(be);
    return -ENOMEM;
  }
  c->be = be;
  *out = c;
  return 0;
}

void stkr__symc_free(stkr__symc *c) {
  if (!c) return;
  stkr__symbe_free(c->be);
  for (uint32_t id = 1; id <= c->n_strings; id++) free(str_get(c, id)->value);
  for (size_t i = 0; i < c->n_str_chunks; i++) free(c->str_chunks[i]);
  free(c->str_chunks);
  free(c->str_epoch);
  stkr_index_free(&c->str_ix);
  for (size_t i = 0; i < c->n_fr_chunks; i++) free(c->fr_chunks[i]);
  free(c->fr_chunks);
  free(c->fr_epoch);
  stkr_map_free(&c->pcs);
  free(c->lists);
  stkr_index_free(&c->list_ix);
  stkr_arena_free(&c->arena);
  free(c->scratch);
  free(c);
}

int stkr__symc_set_images(stkr__symc *c, const stkr__symimg *imgs, size_t n) {
  bool removed = false;
  int err;
  if (!c->be) return 0;
  if ((err = stkr__symbe_set_images(c->be, imgs, n, &removed)) < 0) return err;
  /* An unloaded image's PCs may belong to a different image loaded at the
   * same address later: resolve them afresh from now on. */
  if (removed) stkr__symc_forget_pcs(c);
  return 0;
}

void stkr__symc_forget_pcs(stkr__symc *c) {
  stkr_map_clear(&c->pcs);
}

uint64_t stkr__symc_resolved(const stkr__symc *c) { return c->resolved; }

uint64_t stkr__symc_named(const stkr__symc *c) { return c->named; }
uint64_t stkr__symc_frames(const stkr__symc *c) { return c->n_frames; }

bool stkr__symc_frame_named(const stkr__symc *c, uint32_t id) {
  return id >= 1 && id <= c->n_frames && fr_get(c, id)->function != 0;
}

bool stkr__symc_frame_has_file(const stkr__symc *c, uint32_t id) {
  return id >= 1 && id <= c->n_frames && fr_get(c, id)->file != 0;
}

/* ---- resolving ----------------------------------------------------------- */

/* Number the frames of `pc` (resolving it), filling *e. 0 or -ENOMEM. */
static int resolve_pc(stkr__symc *c, uint64_t pc, pcent *e) {
  static const Stackrec__FrameDef def0 = STACKREC__FRAME_DEF__INIT;
  stkr__symres res[STKR__SYM_MAX_INLINE];
  const stkr__symimg *img = NULL;
  size_t n = 0;
  uint32_t image = 0;
  int err;

  /* A Swift async resume PC (StackDef.pcs, bit 63) is a function start:
   * backends look every PC up at PC - 1, so hand them the address + 1. */
  const bool async = (pc & STKR_PC_ASYNC) != 0;
  const uint64_t addr = pc & ~STKR_PC_ASYNC;

  if (c->be)
    n = stkr__symbe_resolve(c->be, async ? addr + 1 : addr, &img, res,
                            STKR__SYM_MAX_INLINE);
  c->resolved++;
  c->named += n > 0 && res[0].function != NULL;
  atomic_fetch_add_explicit(&g_resolved_total, 1, memory_order_relaxed);
  if (n == 0) { /* image+offset only */
    res[0] = (stkr__symres){NULL, NULL, 0, 0, false};
    n = 1;
  }
  if (img && (err = intern(c, img->path, &image)) < 0) return err;

  uint32_t first = c->n_frames + 1;
  if ((err = grow_u32(&c->fr_epoch, &c->cap_fr_epoch, first + n)) < 0)
    return err;
  for (size_t k = 0; k < n; k++) {
    uint32_t id = first + (uint32_t)k, fn, file;
    /* Intern before taking the slot: a failure leaves no half frame. */
    if ((err = intern(c, res[k].function, &fn)) < 0 ||
        (err = intern(c, res[k].file, &file)) < 0 ||
        (err = chunk_reserve((void ***)&c->fr_chunks, &c->n_fr_chunks, id,
                             sizeof(Stackrec__FrameDef))) < 0)
      return err;
    Stackrec__FrameDef *d = fr_get(c, id);
    *d = def0;
    d->id = id;
    d->function = fn;
    d->file = file;
    d->line = res[k].line;
    d->column = res[k].column;
    d->image = image;
    d->offset = img ? addr - img->load_address : addr;
    /* The outermost frame of a PC is the real one, whatever the backend
     * said: StackDef.frames relies on exactly one per PC. */
    d->inlined = k + 1 < n;
    d->app = img && img->app;
    d->async = async;
    c->fr_epoch[id - 1] = 0;
  }
  c->n_frames = first + (uint32_t)n - 1;
  e->pc = pc;
  e->first = first;
  e->n = (uint32_t)n;
  return 0;
}

/* The entry of pc, resolving it if new. */
static int lookup(stkr__symc *c, uint64_t pc, pcent *out) {
  const uint64_t *v = stkr_map_find(&c->pcs, pc);
  int err;
  if (v) {
    *out = (pcent){pc, (uint32_t)(*v >> 32), (uint32_t)*v};
    return 0;
  }
  if ((err = resolve_pc(c, pc, out)) < 0) return err;
  return stkr_map_put(&c->pcs, pc, (uint64_t)out->first << 32 | out->n);
}

/* The kept list equal to c->scratch[0..n), made if new. */
static int keep_list(stkr__symc *c, size_t n, const uint32_t **frames,
                     uint32_t *n_frames) {
  uint64_t h = stkr_hash_bytes(stkr_mix64(n), c->scratch, n * sizeof(uint32_t));
  size_t pos, ix;
  uint32_t *copy;

  for (ix = stkr_index_first(&c->list_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&c->list_ix, h, &pos)) {
    const uint32_t *l = c->lists[ix];
    if (l[0] == n &&
        (n == 0 || memcmp(l + 1, c->scratch, n * sizeof *l) == 0)) {
      *frames = l + 1;
      *n_frames = (uint32_t)n;
      return 0;
    }
  }
  if (n >= UINT32_MAX ||
      stkr_grow((void **)&c->lists, &c->cap_lists, c->n_lists + 1,
                sizeof *c->lists) != 0 ||
      stkr_index_reserve(&c->list_ix, c->n_lists + 1) != 0 ||
      (copy = (uint32_t *)stkr_arena_alloc(&c->arena, (n + 1) * sizeof *copy,
                                           STACK_ARENA_BYTES)) == NULL)
    return -ENOMEM;
  copy[0] = (uint32_t)n;
  if (n) memcpy(copy + 1, c->scratch, n * sizeof *copy);
  c->lists[c->n_lists] = copy;
  (void)stkr_index_add(&c->list_ix, h, c->n_lists++); /* reserved above */
  *frames = copy + 1;
  *n_frames = (uint32_t)n;
  return 0;
}

int stkr__symc_stack(stkr__symc *c, const uint64_t *pcs, size_t n_pcs,
                     const uint32_t **frames, uint32_t *n_frames) {
  size_t n = 0;
  int err;
  for (size_t i = 0; i < n_pcs; i++) {
    pcent e;
    if ((err = lookup(c, pcs[i], &e)) < 0) return err;
    if (stkr_grow((void **)&c->scratch, &c->scratch_cap, n + e.n,
                  sizeof *c->scratch) != 0)
      return -ENOMEM;
    for (uint32_t k = 0; k < e.n; k++) c->scratch[n++] = e.first + k;
  }
  return keep_list(c, n, frames, n_frames);
}

bool stkr__symc_ready(const stkr__symc *c, const uint64_t *pcs,
                      size_t n_pcs) {
  for (size_t i = 0; i < n_pcs; i++) {
    const uint64_t pc = pcs[i] & ~STKR_PC_ASYNC;
    if (stkr_map_find(&c->pcs, pcs[i]) == NULL &&
        !(c->be && stkr__symbe_opened(c->be, pc + ((pcs[i] & STKR_PC_ASYNC) != 0))))
      return false;
  }
  return true;
}

/* ---- emission ------------------------------------------------------------ */

void stkr__symdefs_reset(stkr__symdefs *d) {
  d->n_strings = d->n_frames = 0;
  d->est_bytes = 0;
}

void stkr__symdefs_free(stkr__symdefs *d) {
  free(d->strings);
  free(d->frames);
  memset(d, 0, sizeof *d);
}

static int push(void ***arr, size_t *n, size_t *cap, void *p) {
  if (stkr_grow((void **)arr, cap, *n + 1, sizeof **arr) != 0)
    return -ENOMEM;
  (*arr)[(*n)++] = p;
  return 0;
}

static int emit_string(stkr__symc *c, uint32_t id, uint32_t epoch,
                       stkr__symdefs *out) {
  if (id == 0 || c->str_epoch[id - 1] == epoch) return 0;
  Stackrec__StringDef *d = str_get(c, id);
  if (push((void ***)&out->strings, &out->n_strings, &out->cap_strings, d) < 0)
    return -ENOMEM;
  c->str_epoch[id - 1] = epoch;
  out->est_bytes += 8 + strlen(d->value);
  return 0;
}

int stkr__symc_emit(stkr__symc *c, const uint32_t *frames, uint32_t n_frames,
                    uint32_t epoch, stkr__symdefs *out) {
  for (uint32_t i = 0; i < n_frames; i++) {
    uint32_t id = frames[i];
    if (c->fr_epoch[id - 1] == epoch) continue;
    Stackrec__FrameDef *d = fr_get(c, id);
    /* Strings first: a reader resolves a frame's strings when it applies
     * the frame. */
    if (emit_string(c, d->function, epoch, out) < 0 ||
        emit_string(c, d->file, epoch, out) < 0 ||
        emit_string(c, d->image, epoch, out) < 0 ||
        push((void ***)&out->frames, &out->n_frames, &out->cap_frames, d) < 0)
      return -ENOMEM;
    c->fr_epoch[id - 1] = epoch;
    out->est_bytes += 40;
  }
  return 0;
}
