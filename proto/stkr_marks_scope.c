/*
 * stkr_marks_scope.c: which processes a line of the marks file belongs to.
 *
 * A mark line of `stackrec mark` belongs to every process recorded in its
 * directory. `stackrec merge` puts several directories' processes into one,
 * so it writes each input's mark lines with a seventh field naming the
 * processes (OUT's pids) of that input:
 *
 *   m1 <mono> <wall> <setter pid> <name> <payload> pids=<P|P-Q>[,<P|P-Q>...]
 *
 * Without it, a consent mark of one run would reach every other run's
 * processes in OUT (QA: compliance then said "no findings" for a run that
 * never saw consent). The field is parsed here for the reader
 * (stkr__scope_parse, stkr__scope_has) and written here for merge
 * (stkr_marks_copy_scoped), so writer and reader are one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "proto/stkr__reader.h"

size_t stkr__marks_split(const char *p, const char *end, const char **tok,
                         size_t *len, size_t max) {
  size_t k = 0;

  while (k < max && p <= end) {
    const char *sp = memchr(p, ' ', (size_t)(end - p));

    tok[k] = p;
    len[k] = (size_t)((sp ? sp : end) - p);
    k++;
    if (sp == NULL)
      return tok[k - 1] + len[k - 1] == end ? k : max + 1;
    p = sp + 1;
  }
  return max + 1; /* more fields than max (or none) */
}

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

  return x->lo < y->lo ? -1 : x->lo > y->lo;
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

const char *stkr__scope_parse(const char *p, const char *end,
                              stkr__pid_range **out, size_t *n) {
  stkr__pid_range *v = NULL;
  size_t cap = 0, k = 0;

  *out = NULL;
  *n = 0;
  if (end - p < 6 || memcmp(p, "pids=", 5) != 0)
    return "the seventh field is not pids=P[-Q][,...]";
  for (p += 5;; p++) {
    stkr__pid_range r;

    if (parse_pid(&p, end, &r.lo) != 0)
      break;
    r.hi = r.lo;
    if (p < end && *p == '-' && (++p, parse_pid(&p, end, &r.hi) != 0 ||
                                 r.hi < r.lo))
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
  return "the seventh field is not pids=P[-Q][,...] (decimal pids above 0)";
}

bool stkr__scope_has(const stkr__pid_range *v, size_t n, uint32_t pid) {
  size_t lo = 0, hi = n;

  while (lo < hi) { /* the first range whose hi >= pid */
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid].hi < pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && v[lo].lo <= pid;
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

static int map_from_cmp(const void *a, const void *b) {
  const stkr_pid_map *x = a, *y = b;

  return x->from < y->from ? -1 : x->from > y->from;
}

/* Line [p, end) (a mark line: "m1 " and 6 or 7 fields) into o with the
 * scope OUT gives it: the pids map sends its processes to (those of its own
 * scope, when it has one). Nothing when none of them is in OUT. */
static void put_scoped(outbuf *o, const char *p, const char *end,
                       const stkr_pid_map *map, size_t n_map,
                       stkr__pid_range *tmp) {
  const char *tok[7];
  size_t len[7], k = stkr__marks_split(p, end, tok, len, 7), n = 0, i;
  stkr__pid_range *scope = NULL;
  size_t n_scope = 0;
  char num[32];

  if (k == 7) {
    const char *why = stkr__scope_parse(tok[6], tok[6] + len[6], &scope,
                                        &n_scope);
    if (why == NULL && scope == NULL) {
      o->nomem = true;
      return;
    }
    if (why != NULL)
      k = 0; /* malformed: copied as it is, and readers say so, as before */
  }
  if (k != 6 && k != 7) {
    put(o, p, (size_t)(end - p));
    put(o, "\n", 1);
    return;
  }
  for (i = 0; i < n_map; i++)
    if (k == 6 || stkr__scope_has(scope, n_scope, map[i].from))
      tmp[n++] = (stkr__pid_range){map[i].to, map[i].to};
  free(scope);
  n = ranges_normalize(tmp, n);
  if (n == 0)
    return; /* a mark of no process of OUT */
  put(o, p, (size_t)(tok[5] + len[5] - p));
  for (i = 0; i < n; i++) {
    int w = tmp[i].lo == tmp[i].hi
                ? snprintf(num, sizeof num, "%s%u", i ? "," : " pids=",
                           (unsigned)tmp[i].lo)
                : snprintf(num, sizeof num, "%s%u-%u", i ? "," : " pids=",
                           (unsigned)tmp[i].lo, (unsigned)tmp[i].hi);
    put(o, num, (size_t)w);
  }
  put(o, "\n", 1);
}

int stkr_marks_copy_scoped(const char *from_dir, const char *to_dir,
                           const stkr_pid_map *map, size_t n_map) {
  char *from = NULL, *to = NULL, *buf = NULL;
  stkr_pid_map *m = NULL;
  stkr__pid_range *tmp = NULL;
  outbuf o = {0};
  size_t len = 0, off = 0;
  int in = -1, err = 0;

  if (from_dir == NULL || to_dir == NULL || (map == NULL && n_map != 0))
    return -EINVAL;
  if (asprintf(&from, "%s/%s", from_dir, STKR_MARKS_FILE) < 0 ||
      asprintf(&to, "%s/%s", to_dir, STKR_MARKS_FILE) < 0 ||
      (buf = malloc(STKR_MARKS_MAX_BYTES)) == NULL ||
      (m = malloc((n_map ? n_map : 1) * sizeof *m)) == NULL ||
      (tmp = malloc((n_map ? n_map : 1) * sizeof *tmp)) == NULL) {
    err = -ENOMEM;
    goto out;
  }
  if ((in = stkr_open_regular(from, O_NOFOLLOW)) < 0) {
    /* None, or not a regular file (the readers say so): nothing to copy. */
    err = in == -ENOENT || in == -EINVAL ? 0 : in;
    goto out;
  }
  if (n_map != 0)
    memcpy(m, map, n_map * sizeof *m);
  qsort(m, n_map, sizeof *m, map_from_cmp);
  /* A read error keeps what was read before it. */
  (void)stkr_pread_all(in, buf, STKR_MARKS_MAX_BYTES, 0, &len);
  while (off < len) {
    char *nl = memchr(buf + off, '\n', len - off);

    if (nl == NULL)
      break; /* a line being written */
    if (nl - (buf + off) >= 3 && memcmp(buf + off, "m1 ", 3) == 0)
      put_scoped(&o, buf + off, nl, m, n_map, tmp);
    else /* comments, "u1" lines (pids outside any process), the rest */
      put(&o, buf + off, (size_t)(nl + 1 - (buf + off)));
    off = (size_t)(nl - buf) + 1;
  }
  if (o.nomem)
    err = -ENOMEM;
  else if (o.len > 0)
    err = stkr__marks_append(to, o.p, o.len);
out:
  if (in >= 0)
    close(in);
  free(o.p);
  free(tmp);
  free(m);
  free(buf);
  free(from);
  free(to);
  return err;
}
