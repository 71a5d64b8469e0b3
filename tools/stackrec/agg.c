/*
 * agg.c: events aggregated by call stack (see agg.h for the design).
 *
 * Level 1 (per event): a hash table keyed by (session, site id, stack
 * id[, thread id]) of the process being read leads to the event's merged
 * stack, whose count goes up: one probe on small integers per event. Ids
 * restart in every recording session of a process (stkr_reader.h), hence
 * the session in the key. The table is emptied when the reader moves on to
 * the next process (it never comes back), so it never holds more than one
 * process's keys.
 * Level 2 (once per new level-1 key): the stack's frames are taken from the
 * reader (strings interned, so nothing depends on the reader afterwards)
 * and looked up by content (site name, frame labels[, thread name]) among
 * the stacks so far: the same content from any process, session or run is
 * one stack. Memory: the distinct stacks, plus one process's keys.
 * At the end the stacks are grouped by site and sorted.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/agg.h"

/* ---- small helpers ------------------------------------------------------ */

static uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  size_t i;

  for (i = 0; i < n; i++)
    h = (h ^ c[i]) * 0x100000001B3ull; /* FNV-1a */
  return h;
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
  size_t n = *cap ? *cap : 16;
  void *q;

  if (need <= *cap)
    return 0;
  while (n < need) {
    if (n > SIZE_MAX / 2 / size)
      return -ENOMEM;
    n *= 2;
  }
  q = realloc(*p, n * size);
  if (q == NULL)
    return -ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

/* ---- interned strings --------------------------------------------------- */

typedef struct strtab {
  char **slot;
  size_t cap, n; /* cap: power of two */
} strtab;

/* The table's copy of s (NULL stays NULL; NULL also on ENOMEM, which the
 * caller tells apart by s != NULL). */
static const char *intern(strtab *t, const char *s) {
  uint64_t h;
  size_t i;
  char *c;

  if (s == NULL)
    return NULL;
  if ((t->n + 1) * 2 > t->cap) {
    size_t ncap = t->cap ? t->cap * 2 : 256, k;
    char **ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
      return NULL;
    for (k = 0; k < t->cap; k++) {
      if (t->slot[k] == NULL)
        continue;
      i = mix64(hash_bytes(0, t->slot[k], strlen(t->slot[k]))) & (ncap - 1);
      while (ns[i] != NULL)
        i = (i + 1) & (ncap - 1);
      ns[i] = t->slot[k];
    }
    free(t->slot);
    t->slot = ns;
    t->cap = ncap;
  }
  h = mix64(hash_bytes(0, s, strlen(s)));
  for (i = h & (t->cap - 1); t->slot[i] != NULL; i = (i + 1) & (t->cap - 1))
    if (strcmp(t->slot[i], s) == 0)
      return t->slot[i];
  c = strdup(s);
  if (c == NULL)
    return NULL;
  t->slot[i] = c;
  t->n++;
  return c;
}

static void strtab_free(strtab *t) {
  size_t i;

  for (i = 0; i < t->cap; i++)
    free(t->slot[i]);
  free(t->slot);
}

/* ---- filters: cached pass/fail per site or thread ----------------------- */

/* Does (process, session, id) pass a name filter? Cached so fnmatch runs
 * once per site or thread, not once per event. */
typedef struct passent {
  uint64_t ps; /* process << 32 | session; 0 = empty slot (session >= 1) */
  uint32_t id;
  bool pass;
} passent;

typedef struct passcache {
  passent *v;
  size_t cap, n;
} passcache;

static size_t pass_hash(uint64_t ps, uint32_t id, size_t cap) {
  return mix64(ps * 0x9E3779B97F4A7C15ull ^ id) & (cap - 1);
}

static int pass_get(const passcache *c, uint64_t ps, uint32_t id,
                    bool *pass) {
  size_t i;

  if (c->cap == 0)
    return 0;
  for (i = pass_hash(ps, id, c->cap); c->v[i].ps != 0;
       i = (i + 1) & (c->cap - 1))
    if (c->v[i].ps == ps && c->v[i].id == id) {
      *pass = c->v[i].pass;
      return 1;
    }
  return 0;
}

static int pass_put(passcache *c, uint64_t ps, uint32_t id, bool pass) {
  size_t i;

  if ((c->n + 1) * 2 > c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 64, k;
    passent *nv = calloc(ncap, sizeof *nv);
    if (nv == NULL)
      return -ENOMEM;
    for (k = 0; k < c->cap; k++) {
      if (c->v[k].ps == 0)
        continue;
      i = pass_hash(c->v[k].ps, c->v[k].id, ncap);
      while (nv[i].ps != 0)
        i = (i + 1) & (ncap - 1);
      nv[i] = c->v[k];
    }
    free(c->v);
    c->v = nv;
    c->cap = ncap;
  }
  for (i = pass_hash(ps, id, c->cap); c->v[i].ps != 0;
       i = (i + 1) & (c->cap - 1))
    ;
  c->v[i].ps = ps;
  c->v[i].id = id;
  c->v[i].pass = pass;
  c->n++;
  return 0;
}

static void pass_clear(passcache *c) {
  free(c->v);
  memset(c, 0, sizeof *c);
}

/* ---- the builder ------------------------------------------------------------ */

/* Level 1, for the process being read: (session, site id, stack id,
 * thread id) -> its merged stack. Emptied when the reader moves on to the
 * next process (it never comes back to one), so it holds one process's
 * keys at a time. */
typedef struct raw {
  uint32_t session, site_id, stack_id, thread_id;
  size_t merged; /* index + 1 into a->stacks; 0 = empty slot */
} raw;

typedef struct builder {
  const stkr_agg_opts *o;
  stkr_agg *a;
  strtab strs;
  size_t cur_process; /* the process being read (raws are its keys) */
  uint64_t first_ts;  /* its first event's time + 1 (0: none yet) */
  raw *raws;
  size_t raw_cap, raw_n;
  /* Level 2: every distinct stack (a->stacks), indexed by content. */
  size_t stack_cap;
  uint64_t *hashes;    /* content hash of a->stacks[i] */
  uint32_t *last_proc; /* process + 1 a->stacks[i] was last seen in */
  size_t *cslot;       /* index + 1 into a->stacks; 0 = empty */
  size_t cslot_cap;
  stkr_frame *tmp;     /* the frames of the key being added */
  size_t tmp_cap;
  passcache site_pass, thread_pass;
  bool have_tid;       /* thread_glob is a decimal number */
  uint64_t tid_filter; /* ... this one */
  /* Images of one process sorted by text_start, to place the PCs of
   * unsymbolized stacks (rebuilt when the process or its list changes). */
  size_t img_process, img_n;
  const stkr_image_info *img_of;
  const stkr_image_info **img_sorted;
  size_t img_cap;
} builder;

/* fnmatch that tells a bad pattern apart: 1 match, 0 no match, -EINVAL. */
static int match(const char *pattern, const char *s) {
  int rc = fnmatch(pattern, s, 0);

  if (rc == 0)
    return 1;
  return rc == FNM_NOMATCH ? 0 : -EINVAL;
}

static int thread_passes(builder *b, const stkr_event_view *ev) {
  if (b->have_tid && ev->tid == b->tid_filter)
    return 1;
  return match(b->o->thread_glob, ev->thread_name);
}

static int img_by_start(const void *pa, const void *pb) {
  const stkr_image_info *x = *(const stkr_image_info *const *)pa;
  const stkr_image_info *y = *(const stkr_image_info *const *)pb;

  return x->text_start < y->text_start ? -1 : x->text_start > y->text_start;
}

/* The image of process `process` whose text holds pc, or NULL. With
 * overlapping images (several sessions of one pid) the one starting
 * closest below pc is taken. */
static const stkr_image_info *image_of(builder *b, stkr_reader *r,
                                       size_t process, uint64_t pc) {
  const stkr_image_info *imgs, *im;
  size_t n, lo, hi, i;

  if (stkr_reader_images(r, process, &imgs, &n) != 0 || n == 0)
    return NULL;
  if (b->img_process != process || b->img_n != n || b->img_of != imgs) {
    if (grow((void **)&b->img_sorted, &b->img_cap, n,
             sizeof *b->img_sorted) != 0)
      return NULL; /* only a label is lost: the raw PC is shown */
    for (i = 0; i < n; i++)
      b->img_sorted[i] = &imgs[i];
    qsort(b->img_sorted, n, sizeof *b->img_sorted, img_by_start);
    b->img_process = process;
    b->img_n = n;
    b->img_of = imgs;
  }
  lo = 0;
  hi = n; /* first image with text_start > pc */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->img_sorted[mid]->text_start <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  im = b->img_sorted[lo - 1];
  /* A return address may sit just past the last instruction. */
  return pc <= im->text_end ? im : NULL;
}

/* The current event's frames (app-only applied) into b->tmp.
 * @return the number of frames, or -ENOMEM. */
static long take_frames(builder *b, stkr_reader *r,
                        const stkr_event_view *ev) {
  const stkr_frame *f;
  size_t n, i, k = 0, keep = 0;

  if (stkr_reader_frames(r, &f, &n) != 0)
    return -ENOMEM;
  if (grow((void **)&b->tmp, &b->tmp_cap, n ? n : ev->n_pcs,
           sizeof *b->tmp) != 0)
    return -ENOMEM;
  if (n == 0) {
    /* Unsymbolized (offline/none mode): one frame per PC, placed in its
     * image when the recording's image list has it, so the label
     * (image+offset) is the same in every process and run of a build.
     * Whether a frame is the app's is not known: --app-only keeps all. */
    for (i = 0; i < ev->n_pcs; i++) {
      const stkr_image_info *im = image_of(b, r, ev->process, ev->pcs[i]);
      stkr_frame *c = &b->tmp[i];

      memset(c, 0, sizeof *c);
      c->pc = ev->pcs[i];
      c->offset = ev->pcs[i];
      if (im != NULL) {
        if ((c->image = intern(&b->strs, im->path)) == NULL)
          return -ENOMEM;
        c->offset = ev->pcs[i] - im->load_address;
      }
    }
    return (long)ev->n_pcs;
  }
  if (b->o->app_only)
    for (i = 0; i < n; i++)
      keep += f[i].is_app;
  for (i = 0; i < n; i++) {
    stkr_frame c = f[i];
    if (b->o->app_only && keep > 0 && !c.is_app)
      continue;
    c.function = intern(&b->strs, c.function);
    c.file = intern(&b->strs, c.file);
    c.image = intern(&b->strs, c.image);
    if ((f[i].function && !c.function) || (f[i].file && !c.file) ||
        (f[i].image && !c.image))
      return -ENOMEM;
    b->tmp[k++] = c;
    if (b->o->app_only && keep == 0 && !c.inlined)
      break; /* no app frame at all: keep the innermost PC's frames */
  }
  return (long)k;
}

const char *stkr_agg_frame_label(const stkr_frame *f, char *buf, size_t len) {
  if (f->function != NULL) {
    snprintf(buf, len, "%s", f->function);
  } else if (f->image != NULL) {
    const char *base = strrchr(f->image, '/');
    snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : f->image,
             f->offset);
  } else {
    snprintf(buf, len, "0x%" PRIx64, f->pc);
  }
  return buf;
}

#define LABEL_MAX 1024

static uint64_t content_hash(const char *site, const char *thread,
                             const stkr_frame *f, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  char label[LABEL_MAX];
  size_t i;

  h = hash_bytes(h, site, strlen(site) + 1);
  if (thread != NULL)
    h = hash_bytes(h, thread, strlen(thread) + 1);
  for (i = 0; i < n; i++) {
    stkr_agg_frame_label(&f[i], label, sizeof label);
    h = hash_bytes(h, label, strlen(label) + 1);
  }
  return mix64(h);
}

/* Compare two frame lists by label, frame by frame from the innermost (as
 * stored). @return <0, 0, >0. */
static int cmp_frames(const stkr_frame *x, size_t nx, const stkr_frame *y,
                      size_t ny) {
  char lx[LABEL_MAX], ly[LABEL_MAX];
  size_t i;
  int c;

  for (i = 0; i < nx && i < ny; i++) {
    if (x[i].function != NULL && y[i].function != NULL) {
      /* The label is the name; interned: same pointer, same name. */
      if (x[i].function != y[i].function &&
          (c = strcmp(x[i].function, y[i].function)) != 0)
        return c;
      continue;
    }
    c = strcmp(stkr_agg_frame_label(&x[i], lx, sizeof lx),
               stkr_agg_frame_label(&y[i], ly, sizeof ly));
    if (c != 0)
      return c;
  }
  return nx < ny ? -1 : nx > ny;
}

/* Occurrences merged into one stack may place a frame's function at other
 * lines (another call site in it, another build): never show a line that
 * is not true of every event. */
static void reconcile(stkr_frame *keep, const stkr_frame *other, size_t n) {
  size_t i;

  for (i = 0; i < n; i++) {
    if (keep[i].file != other[i].file) {
      keep[i].file = NULL;
      keep[i].line = keep[i].column = 0;
    } else if (keep[i].line != other[i].line) {
      keep[i].line = keep[i].column = 0;
    } else if (keep[i].column != other[i].column) {
      keep[i].column = 0;
    }
    keep[i].inlined = keep[i].inlined && other[i].inlined;
    keep[i].is_app = keep[i].is_app || other[i].is_app;
  }
}

/* Put a->stacks[idx] into the content index. */
static int cslot_put(builder *b, size_t idx) {
  size_t i, k;

  if ((b->a->n_stacks + 1) * 2 > b->cslot_cap) {
    size_t ncap = b->cslot_cap ? b->cslot_cap * 2 : 1024;
    size_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
      return -ENOMEM;
    for (k = 0; k < b->cslot_cap; k++) {
      if (b->cslot[k] == 0)
        continue;
      for (i = b->hashes[b->cslot[k] - 1] & (ncap - 1); ns[i] != 0;
           i = (i + 1) & (ncap - 1))
        ;
      ns[i] = b->cslot[k];
    }
    free(b->cslot);
    b->cslot = ns;
    b->cslot_cap = ncap;
  }
  for (i = b->hashes[idx] & (b->cslot_cap - 1); b->cslot[i] != 0;
       i = (i + 1) & (b->cslot_cap - 1))
    ;
  b->cslot[i] = idx + 1;
  return 0;
}

/* The merged stack (index) with the current event's content, made if new.
 * Runs once per new level-1 key, not per event. */
static int merged_stack(builder *b, stkr_reader *r, const stkr_event_view *ev,
                        size_t *out) {
  stkr_agg *a = b->a;
  const char *site = intern(&b->strs, ev->site), *thread = NULL;
  uint32_t proc = (uint32_t)ev->process + 1;
  stkr_agg_stack *s;
  long n = take_frames(b, r, ev);
  uint64_t h;
  size_t i;

  if (site == NULL || n < 0)
    return -ENOMEM;
  if (b->o->by_thread && (thread = intern(&b->strs, ev->thread_name)) == NULL)
    return -ENOMEM;
  h = content_hash(site, thread, b->tmp, (size_t)n);
  for (i = b->cslot_cap ? h & (b->cslot_cap - 1) : 0;
       b->cslot_cap && b->cslot[i] != 0; i = (i + 1) & (b->cslot_cap - 1)) {
    size_t k = b->cslot[i] - 1;

    s = &a->stacks[k];
    if (b->hashes[k] != h || s->site != site || s->thread != thread ||
        s->n_frames != (size_t)n ||
        cmp_frames(s->frames, s->n_frames, b->tmp, (size_t)n) != 0)
      continue;
    reconcile((stkr_frame *)s->frames, b->tmp, (size_t)n);
    s->truncated = s->truncated || ev->stack_truncated;
    /* The reader goes process by process: a process not seen last is new
     * to this stack. */
    if (b->last_proc[k] != proc) {
      b->last_proc[k] = proc;
      s->n_pids++;
    }
    *out = k;
    return 0;
  }
  i = a->n_stacks;
  if (i + 1 > b->stack_cap) {
    size_t cap = b->stack_cap;
    uint64_t *nh;
    uint32_t *nl;

    if (grow((void **)&a->stacks, &cap, i + 1, sizeof *a->stacks) != 0 ||
        (nh = realloc(b->hashes, cap * sizeof *nh)) == NULL)
      return -ENOMEM;
    b->hashes = nh;
    if ((nl = realloc(b->last_proc, cap * sizeof *nl)) == NULL)
      return -ENOMEM;
    b->last_proc = nl;
    b->stack_cap = cap;
  }
  s = &a->stacks[i];
  memset(s, 0, sizeof *s);
  if (n > 0) {
    stkr_frame *f = malloc((size_t)n * sizeof *f);
    if (f == NULL)
      return -ENOMEM;
    memcpy(f, b->tmp, (size_t)n * sizeof *f);
    s->frames = f;
  }
  s->n_frames = (size_t)n;
  s->site = site;
  s->thread = thread;
  s->tid = b->o->by_thread ? ev->tid : 0;
  s->n_pids = 1;
  s->truncated = ev->stack_truncated;
  b->hashes[i] = h;
  b->last_proc[i] = proc;
  a->n_stacks++;
  if (cslot_put(b, i) != 0)
    return -ENOMEM;
  *out = i;
  return 0;
}

static size_t raw_hash(uint32_t session, uint32_t site, uint32_t stack,
                       uint32_t thread, size_t cap) {
  return mix64(((uint64_t)site << 32 | stack) ^
               ((uint64_t)session << 32 | thread) * 0x9E3779B97F4A7C15ull) &
         (cap - 1);
}

/* The reader moved on to another process: the last one's keys are never
 * seen again, so level 1 and the filter caches start empty. */
static void new_process(builder *b, size_t process) {
  free(b->raws);
  b->raws = NULL;
  b->raw_cap = b->raw_n = 0;
  pass_clear(&b->site_pass);
  pass_clear(&b->thread_pass);
  b->first_ts = 0;
  b->cur_process = process;
}

/* Count the event: one hash probe on its ids, except for a new key. */
static int count_event(builder *b, stkr_reader *r, const stkr_event_view *ev) {
  /* Undefined ids key as 0: a file may hold any number of bogus ones. */
  uint32_t session = ev->proc->sessions;
  uint32_t site = ev->site_undefined ? 0 : ev->site_id;
  uint32_t stack = ev->stack_undefined ? 0 : ev->stack_id;
  uint32_t thread =
      b->o->by_thread && !ev->thread_undefined ? ev->thread_id : 0;
  size_t i, merged;
  raw *w;
  int err;

  if (b->raw_cap != 0) {
    for (i = raw_hash(session, site, stack, thread, b->raw_cap);
         b->raws[i].merged != 0; i = (i + 1) & (b->raw_cap - 1)) {
      w = &b->raws[i];
      if (w->stack_id == stack && w->site_id == site &&
          w->thread_id == thread && w->session == session) {
        b->a->stacks[w->merged - 1].count++;
        return 0;
      }
    }
  }
  if ((err = merged_stack(b, r, ev, &merged)) != 0)
    return err;
  b->a->stacks[merged].count++;
  if ((b->raw_n + 1) * 2 > b->raw_cap) {
    size_t ncap = b->raw_cap ? b->raw_cap * 2 : 256, k;
    raw *nv = calloc(ncap, sizeof *nv);
    if (nv == NULL)
      return -ENOMEM;
    for (k = 0; k < b->raw_cap; k++) {
      if (b->raws[k].merged == 0)
        continue;
      w = &b->raws[k];
      for (i = raw_hash(w->session, w->site_id, w->stack_id, w->thread_id,
                        ncap);
           nv[i].merged != 0; i = (i + 1) & (ncap - 1))
        ;
      nv[i] = *w;
    }
    free(b->raws);
    b->raws = nv;
    b->raw_cap = ncap;
  }
  for (i = raw_hash(session, site, stack, thread, b->raw_cap);
       b->raws[i].merged != 0; i = (i + 1) & (b->raw_cap - 1))
    ;
  w = &b->raws[i];
  w->session = session;
  w->site_id = site;
  w->stack_id = stack;
  w->thread_id = thread;
  w->merged = merged + 1;
  b->raw_n++;
  return 0;
}

/* ---- the end: sites, in order --------------------------------------------- */

/* Site name, then most events first, then content: a total order, so the
 * output does not depend on qsort or on hash order. */
static int stack_order(const void *pa, const void *pb) {
  const stkr_agg_stack *x = *(const stkr_agg_stack *const *)pa;
  const stkr_agg_stack *y = *(const stkr_agg_stack *const *)pb;
  int c;

  if (x->site != y->site && (c = strcmp(x->site, y->site)) != 0)
    return c;
  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  if (x->thread != y->thread &&
      (c = strcmp(x->thread ? x->thread : "", y->thread ? y->thread : "")))
    return c;
  if ((c = cmp_frames(x->frames, x->n_frames, y->frames, y->n_frames)) != 0)
    return c;
  return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int site_order(const void *pa, const void *pb) {
  const stkr_agg_site *x = pa, *y = pb;

  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The sites, each with its stacks in order. */
static int group_sites(stkr_agg *a) {
  const stkr_agg_stack **all;
  size_t i, j, k = 0, cap = 0;

  if (a->n_stacks == 0)
    return 0;
  all = malloc(a->n_stacks * sizeof *all);
  if (all == NULL)
    return -ENOMEM;
  for (i = 0; i < a->n_stacks; i++)
    all[i] = &a->stacks[i];
  qsort(all, a->n_stacks, sizeof *all, stack_order);
  for (i = 0; i < a->n_stacks; i = j) {
    stkr_agg_site *s;

    for (j = i + 1; j < a->n_stacks && all[j]->site == all[i]->site; j++)
      ;
    if (grow((void **)&a->sites, &cap, k + 1, sizeof *a->sites) != 0)
      goto nomem;
    s = &a->sites[k];
    memset(s, 0, sizeof *s);
    a->n_sites = ++k;
    s->name = all[i]->site;
    s->stacks = malloc((j - i) * sizeof *s->stacks);
    if (s->stacks == NULL)
      goto nomem;
    memcpy(s->stacks, all + i, (j - i) * sizeof *s->stacks);
    s->n_stacks = j - i;
    for (; i < j; i++)
      s->count += all[i]->count;
  }
  free(all);
  qsort(a->sites, a->n_sites, sizeof *a->sites, site_order);
  return 0;
nomem:
  free(all);
  return -ENOMEM;
}

/* ---- build ---------------------------------------------------------------- */

static void sum_processes(stkr_agg *a, const stkr_reader *r) {
  size_t i;

  a->n_processes = stkr_reader_process_count(r);
  for (i = 0; i < a->n_processes; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    a->drops += p->drops;
    a->drops_ring_full += p->drops_ring_full;
    a->drops_reentrant += p->drops_reentrant;
    a->drops_other += p->drops_other;
    a->drops_write_error += p->drops_write_error;
    a->damaged_batches += p->damaged_batches;
    a->missing_batches += p->missing_batches;
    a->segments_deleted += p->segments_deleted;
    a->unresolved_events += p->unresolved_events;
    a->live_processes += p->live_tail;
    a->unsupported_processes += p->status != 0;
  }
}

/* Is ev inside the time window? b->first_ts is the time of the current
 * process's first event read (+1; 0: none yet). Events of one batch are in
 * drain order (thread by thread), so one a few ms older than the first
 * read may come later: it counts as time 0, not as negative. */
static bool in_window(builder *b, const stkr_event_view *ev) {
  const stkr_agg_opts *o = b->o;
  double t;

  if (b->first_ts == 0)
    b->first_ts = ev->ts_ns + 1;
  t = ev->ts_ns + 1 > b->first_ts
          ? (double)(ev->ts_ns + 1 - b->first_ts) / 1e9
          : 0.0;
  return t >= o->from_s && (o->to_s <= 0 || t < o->to_s);
}

int stkr_agg_build(stkr_reader *r, const stkr_agg_opts *opts,
                   void (*progress)(uint64_t events, void *arg),
                   void *progress_arg, stkr_agg **out) {
  static const stkr_agg_opts none;
  builder b;
  stkr_event_view ev;
  int rc, err = 0;

  if (r == NULL || out == NULL)
    return -EINVAL;
  *out = NULL;
  memset(&b, 0, sizeof b);
  b.cur_process = SIZE_MAX;
  b.o = opts ? opts : &none;
  if (b.o->from_s < 0 || (b.o->to_s > 0 && b.o->to_s <= b.o->from_s))
    return -EINVAL;
  b.a = calloc(1, sizeof *b.a);
  if (b.a == NULL)
    return -ENOMEM;
  if (b.o->thread_glob != NULL) {
    char *end;
    unsigned long long v = strtoull(b.o->thread_glob, &end, 10);
    if (*end == '\0' && end != b.o->thread_glob &&
        b.o->thread_glob[0] != '-') {
      b.have_tid = true;
      b.tid_filter = v;
    }
  }

  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    uint64_t ps = (uint64_t)ev.process << 32 | ev.proc->sessions;
    bool pass;

    if (ev.process != b.cur_process)
      new_process(&b, ev.process);
    b.a->events_read++;
    if (progress != NULL && (b.a->events_read & 0xFFFFF) == 0)
      progress(b.a->events_read, progress_arg);
    if ((b.o->from_s > 0 || b.o->to_s > 0) && !in_window(&b, &ev))
      continue;
    if (b.o->site_glob != NULL) {
      uint32_t sid = ev.site_undefined ? 0 : ev.site_id; /* see above */

      if (!pass_get(&b.site_pass, ps, sid, &pass)) {
        int m = match(b.o->site_glob, ev.site);
        if (m < 0 || pass_put(&b.site_pass, ps, sid, m == 1) != 0) {
          err = m < 0 ? m : -ENOMEM;
          break;
        }
        pass = m == 1;
      }
      if (!pass)
        continue;
    }
    if (b.o->thread_glob != NULL) {
      uint32_t tid = ev.thread_undefined ? 0 : ev.thread_id;

      if (!pass_get(&b.thread_pass, ps, tid, &pass)) {
        int m = thread_passes(&b, &ev);
        if (m < 0 || pass_put(&b.thread_pass, ps, tid, m == 1)) {
          err = m < 0 ? m : -ENOMEM;
          break;
        }
        pass = m == 1;
      }
      if (!pass)
        continue;
    }
    b.a->events++;
    if ((err = count_event(&b, r, &ev)) != 0)
      break;
  }
  if (err == 0 && rc < 0)
    err = rc;
  if (err == 0)
    err = group_sites(b.a);
  if (err == 0)
    sum_processes(b.a, r);
  new_process(&b, SIZE_MAX); /* frees level 1 and the filter caches */
  free(b.hashes);
  free(b.last_proc);
  free(b.cslot);
  free(b.tmp);
  free(b.img_sorted);
  /* The strings live as long as the aggregation: park the table in it. */
  if (err == 0 && (b.a->strs_ = malloc(sizeof b.strs)) == NULL)
    err = -ENOMEM;
  if (err != 0) {
    stkr_agg_free(b.a);
    strtab_free(&b.strs);
    return err;
  }
  memcpy(b.a->strs_, &b.strs, sizeof b.strs);
  *out = b.a;
  return 0;
}

void stkr_agg_free(stkr_agg *a) {
  size_t i;

  if (a == NULL)
    return;
  for (i = 0; i < a->n_sites; i++)
    free(a->sites[i].stacks);
  for (i = 0; i < a->n_stacks; i++)
    free((void *)a->stacks[i].frames);
  free(a->sites);
  free(a->stacks);
  if (a->strs_ != NULL) {
    strtab_free(a->strs_);
    free(a->strs_);
  }
  free(a);
}
