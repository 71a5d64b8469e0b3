/*
 * stkr_marks_scope.c: which processes the marks of a marks file belong to.
 *
 * A mark line of `stackrec mark` belongs to every process recorded in its
 * directory. `stackrec merge` puts several directories' processes into one,
 * so it writes each input's mark lines inside a scope: a line
 *
 *   s1 pids=<P|P-Q>[,<P|P-Q>...]
 *
 * before them names the processes (OUT's pids) of that input, and "s1 -"
 * after them returns to the whole directory (for `stackrec mark OUT ...`
 * later). A scope is written once per input, not per mark, so the file
 * grows with the marks plus the processes, not their product. Without it,
 * a consent mark of one run reached every other run's processes in OUT
 * (QA: compliance then said "no findings" for a run that never saw
 * consent). Parsed here for the reader (stkr__marks_scope_line) and
 * written here for merge (stkr_marks_copy_scoped): writer and reader are
 * one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "proto/stkr__reader.h"

const stkr__scope stkr__scope_none = {NULL, 0};

/* A decimal pid at *p (1 to 2^32 - 1), *p moved past it. @return 0 or -1. */
static int parse_pid(const char **p, const char *end, uint32_t *out) {
  uint64_t v = 0;
  const char *q = *p;

  while (q < end && *q >= '0' && *q <= '9' && q - *p < 11)
    v = v * 10 + (uint64_t)(*q++ - '0');
  if (q == *p || v == 0 || v > UINT32_MAX)
    return -1;
  *out = (uint32_t)v;
  *p = q;
  return 0;
}

static int range_cmp(const void *a, const void *b) {
  const stkr__pid_range *x = a, *y = b;

  return stkr_cmp_u64(x->lo, y->lo);
}

/* Sort v and merge ranges that overlap or touch. @return the new count. */
static size_t ranges_normalize(stkr__pid_range *v, size_t n) {
  size_t i, o = 0;

  if (n == 0)
    return 0;
  qsort(v, n, sizeof *v, range_cmp);
  for (i = 1; i < n; i++) {
    if (v[o].hi == UINT32_MAX || v[i].lo <= v[o].hi + 1) {
      if (v[i].hi > v[o].hi)
        v[o].hi = v[i].hi;
    } else {
      v[++o] = v[i];
    }
  }
  return o + 1;
}

/* "pids=P[-Q][,...]" at [p, end) into *out (malloc'd, normalized), *n.
 * @return NULL (*out NULL: no memory), or why it is malformed. */
static const char *parse_pids(const char *p, const char *end,
                              stkr__pid_range **out, size_t *n) {
  stkr__pid_range *v = NULL;
  size_t cap = 0, k = 0;

  *out = NULL;
  *n = 0;
  if (end - p < 6 || memcmp(p, "pids=", 5) != 0)
    return "not \"s1 -\" or \"s1 pids=P[-Q][,...]\"";
  for (p += 5;; p++) {
    stkr__pid_range r;

    if (parse_pid(&p, end, &r.lo) != 0)
      break;
    r.hi = r.lo;
    if (p < end && *p == '-' &&
        (++p, parse_pid(&p, end, &r.hi) != 0 || r.hi < r.lo))
      break;
    if (stkr_grow((void **)&v, &cap, k + 1, sizeof *v) != 0) {
      free(v);
      return NULL; /* *out NULL and no reason: -ENOMEM */
    }
    v[k++] = r;
    if (p == end) {
      *out = v;
      *n = ranges_normalize(v, k);
      return NULL;
    }
    if (*p != ',')
      break;
  }
  free(v);
  return "not \"s1 -\" or \"s1 pids=P[-Q][,...]\" (decimal pids above 0, "
         "ranges low-high)";
}

/* Line [p, end) starting "s1 ": *all (the whole directory) or the ranges.
 * @return NULL (v NULL and !*all: no memory), or why it is malformed. */
static const char *parse_scope(const char *p, const char *end,
                               stkr__pid_range **v, size_t *n, bool *all) {
  p += 3;
  *all = end - p == 1 && *p == '-';
  *v = NULL;
  *n = 0;
  return *all ? NULL : parse_pids(p, end, v, n);
}

const char *stkr__marks_scope_line(stkr_reader *r, const char *p,
                                   const char *end, const stkr__scope **cur,
                                   bool *nomem) {
  stkr__scope *sc;
  stkr__pid_range *v;
  size_t n;
  bool all;
  const char *why = parse_scope(p, end, &v, &n, &all);

  if (why != NULL) {
    *cur = &stkr__scope_none; /* no one, rather than someone else */
    return why;
  }
  if (all) {
    *cur = NULL;
    return NULL;
  }
  if (v == NULL) {
    *nomem = true;
    return NULL;
  }
  sc = malloc(sizeof *sc);
  if (sc == NULL || stkr__grow(&r->scopes, &r->cap_scopes, r->n_scopes + 1,
                               sizeof *r->scopes) != 0) {
    free(v);
    free(sc);
    *nomem = true;
    return NULL;
  }
  sc->v = v;
  sc->n = n;
  r->scopes[r->n_scopes++] = sc;
  *cur = sc;
  return NULL;
}

bool stkr__scope_has(const stkr__scope *s, uint32_t pid) {
  size_t lo = 0, hi = s->n;

  while (lo < hi) { /* the first range whose hi >= pid */
    size_t mid = lo + (hi - lo) / 2;
    if (s->v[mid].hi < pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < s->n && s->v[lo].lo <= pid;
}

/* ---- merge's copy --------------------------------------------------------- */

typedef struct {
  char *p;
  size_t len, cap;
  bool nomem;
} outbuf;

static void put(outbuf *o, const char *s, size_t n) {
  if (o->nomem || stkr_grow((void **)&o->p, &o->cap, o->len + n + 1, 1) != 0) {
    o->nomem = true;
    return;
  }
  memcpy(o->p + o->len, s, n);
  o->len += n;
}

/* Where a copy stands: the input's scope at this line, and OUT's. */
typedef struct {
  const stkr_pid_map *map;
  size_t n_map;
  stkr__pid_range *in, *tmp; /* the input's scope (NULL: all); scratch */
  size_t n_in;
  bool in_none;              /* a malformed scope line: no one */
  outbuf field;              /* OUT's scope of the input's, "s1 pids=..." */
  bool field_due;            /* the input's scope changed since */
  bool out_scoped;           /* OUT's file is inside a scope of ours */
  outbuf *written;           /* the scope line last written, or len 0 */
} copy_state;

/* OUT's scope line for the input's current scope (c->field): the map's
 * `to` pids whose `from` pid it holds. Length 0: none of them. */
static void out_scope(copy_state *c) {
  size_t i, n = 0;
  char num[32];

  c->field.len = 0;
  c->field_due = false;
  if (c->in_none)
    return;
  for (i = 0; i < c->n_map; i++) {
    stkr__scope s = {c->in, c->n_in};
    if (c->in == NULL || stkr__scope_has(&s, c->map[i].from))
      c->tmp[n++] = (stkr__pid_range){c->map[i].to, c->map[i].to};
  }
  n = ranges_normalize(c->tmp, n);
  for (i = 0; i < n; i++) {
    int w = c->tmp[i].lo == c->tmp[i].hi
                ? snprintf(num, sizeof num, "%s%u", i ? "," : "s1 pids=",
                           (unsigned)c->tmp[i].lo)
                : snprintf(num, sizeof num, "%s%u-%u", i ? "," : "s1 pids=",
                           (unsigned)c->tmp[i].lo, (unsigned)c->tmp[i].hi);
    put(&c->field, num, (size_t)w);
  }
  put(&c->field, "\n", 1);
}

/* Mark line [p, end] (its newline included) into o, inside OUT's scope of
 * the input's: a scope line first when it is not the one written last;
 * nothing when the mark belongs to no process of OUT. */
static void put_mark(outbuf *o, copy_state *c, const char *p,
                     const char *nl) {
  if (c->field_due)
    out_scope(c);
  if (c->field.len <= 1) /* "\n" alone: no process */
    return;
  if (c->written->len != c->field.len ||
      memcmp(c->written->p, c->field.p, c->field.len) != 0) {
    put(o, c->field.p, c->field.len);
    c->written->len = 0;
    put(c->written, c->field.p, c->field.len);
    c->out_scoped = true;
  }
  put(o, p, (size_t)(nl + 1 - p));
}

/* A "u1 <pid> ..." line [p, nl] under the pid the map gives it in OUT: a
 * process that recorded something before it could record no more (an
 * exec'd image refused) is in the map, and merge may have renumbered it
 * (QA, session 21: OUT named the old pid twice and the new one never). A
 * pid the map does not hold (the process recorded nothing at all) keeps
 * its number. ("r1" lines keep theirs: a reader tests that pid's
 * liveness in /proc.) */
static void put_unrecorded(outbuf *o, const copy_state *c, const char *p,
                           const char *nl) {
  const char *q = p + 3, *end;
  uint64_t pid = 0;
  char num[16];

  for (end = q; end < nl && *end >= '0' && *end <= '9' && end - q < 10; end++)
    pid = pid * 10 + (uint64_t)(*end - '0');
  if (end > q && end < nl && *end == ' ')
    for (size_t i = 0; i < c->n_map; i++)
      if (c->map[i].from == pid) {
        int n = snprintf(num, sizeof num, "u1 %u", (unsigned)c->map[i].to);
        put(o, num, (size_t)n);
        put(o, end, (size_t)(nl + 1 - end));
        return;
      }
  put(o, p, (size_t)(nl + 1 - p));
}

int stkr_marks_copy_scoped(const char *from_dir, const char *to_dir,
                           const stkr_pid_map *map, size_t n_map) {
  char *to = NULL, *buf = NULL;
  const char *damaged = NULL;
  outbuf o = {0}, written = {0};
  copy_state c = {.map = map, .n_map = n_map, .field_due = true,
                  .written = &written};
  size_t len = 0, off = 0;
  int err;

  if (from_dir == NULL || to_dir == NULL || (map == NULL && n_map != 0))
    return -EINVAL;
  if ((err = stkr__marks_read(from_dir, &buf, &len, &damaged)) != 0 ||
      len == 0)
    goto out;
  if ((c.tmp = malloc((n_map ? n_map : 1) * sizeof *c.tmp)) == NULL) {
    err = -ENOMEM;
    goto out;
  }
  while (off < len && !o.nomem && !c.field.nomem && !written.nomem) {
    char *p = buf + off, *nl = memchr(p, '\n', len - off);
    bool all;

    off = (size_t)(nl - buf) + 1; /* stkr__marks_read: whole lines */
    if (nl - p >= 3 && memcmp(p, "s1 ", 3) == 0) {
      free(c.in);
      c.in_none = parse_scope(p, nl, &c.in, &c.n_in, &all) != NULL;
      if (!c.in_none && !all && c.in == NULL) {
        o.nomem = true;
        break;
      }
      c.field_due = true;
    } else if (nl - p >= 3 && memcmp(p, "m1 ", 3) == 0) {
      put_mark(&o, &c, p, nl);
    } else if (nl - p >= 3 && memcmp(p, "u1 ", 3) == 0) {
      put_unrecorded(&o, &c, p, nl);
    } else { /* comments, the rest */
      put(&o, p, (size_t)(nl + 1 - p));
    }
  }
  if (c.out_scoped)
    put(&o, "s1 -\n", 5); /* later lines: the whole directory again */
  if (o.nomem || c.field.nomem || written.nomem)
    err = -ENOMEM;
  else if (o.len > 0 && asprintf(&to, "%s/%s", to_dir, STKR_MARKS_FILE) < 0)
    err = -ENOMEM;
  else if (o.len > 0)
    err = stkr__marks_append(to, o.p, o.len);
out:
  /* As stkr_marks_copy: the input's damage is its copy's. */
  if (err == 0 && damaged != NULL)
    err = stkr__marks_put_lost(to_dir, damaged);
  STKR_FREE_ALL(o.p, written.p, c.field.p, c.in, c.tmp, buf, to);
  return err;
}
