/*
 * breakdown.c: events by thread, process, payload or module (breakdown.h).
 *
 * Rows are found by sorting the stacks by key (no hash table: this runs
 * once per report over the distinct stacks, not over events).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"

#include "tools/stackrec/attrib.h"
#include "tools/stackrec/breakdown.h"
#include "tools/stackrec/cli.h"

const char *const stkr_agg_by_names[] = {"site",    "thread", "process",
                                         "payload", "module", NULL};

void stkr_agg_by_opts(stkr_agg_by by, stkr_agg_opts *o) {
  o->by_thread = o->by_thread || by == STKR_BY_THREAD;
  o->by_process = o->by_process || by == STKR_BY_PROCESS;
  o->by_payload = o->by_payload || by == STKR_BY_PAYLOAD;
}

const char *stkr_agg_stack_module(const stkr_agg_stack *s) {
  return stkr_attrib_module(NULL, s->frames, s->n_frames, NULL);
}

/* The printable key of stack s under `by`: names and payloads escaped as
 * every text output escapes them (escape.c). @return a malloc'd string or
 * NULL (out of memory). */
static char *key_of(const stkr_agg_stack *s, stkr_agg_by by) {
  const char *name = NULL;
  char *k = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&k, &len);

  if (m == NULL)
    return NULL;
  switch (by) {
  case STKR_BY_THREAD:
    /* The name alone: thread_label adds the row's tid. */
    name = s->thread && s->thread[0] ? s->thread : "?";
    stkr_cli_put_escaped(m, (const uint8_t *)name, strlen(name));
    break;
  case STKR_BY_PROCESS:
    name = s->process && s->process[0] ? s->process : "?";
    stkr_cli_put_escaped(m, (const uint8_t *)name, strlen(name));
    fprintf(m, " (pid %u", (unsigned)s->pid);
    if (s->process_dir != NULL) { /* another process has its pid */
      fputs(", ", m);
      stkr_cli_put_escaped(m, (const uint8_t *)s->process_dir,
                           strlen(s->process_dir));
    }
    putc(')', m);
    break;
  case STKR_BY_PAYLOAD:
    if (s->payload_len == 0) {
      fputs("(no payload)", m);
      break;
    }
    putc('"', m);
    stkr_cli_put_escaped(m, s->payload, s->payload_len);
    fputs(s->payload_truncated ? "\"..." : "\"", m);
    break;
  default:
    name = stkr_agg_stack_module(s);
    stkr_cli_put_escaped(m, (const uint8_t *)name, strlen(name));
    break;
  }
  if (fclose(m) != 0) {
    free(k);
    return NULL;
  }
  return k;
}

typedef struct keyed {
  char *key;
  const stkr_agg_stack *s;
} keyed;

/* A by-thread row's key: the threads' name, and their tid when every
 * stack of the row [i, e) was seen on that one thread. Threads of one name
 * are one row (a pool's workers), where a tid would be true of one of
 * them only (QA, session 17: "fair (tid 15604)" for three threads' 13.7 M
 * events). @return a malloc'd string or NULL. */
static char *thread_label(const keyed *v, size_t i, size_t e) {
  bool one = true;
  char *out = NULL;
  for (size_t k = i; k < e && one; k++)
    one = !v[k].s->several_tids && v[k].s->tid == v[i].s->tid &&
          v[k].s->tid_proc == v[i].s->tid_proc;
  if (one ? asprintf(&out, "%s (tid %llu)", v[i].key,
                     (unsigned long long)v[i].s->tid) < 0
          : asprintf(&out, "%s (several threads)", v[i].key) < 0)
    return NULL;
  return out;
}

static int by_key_then_site(const void *pa, const void *pb) {
  const keyed *x = pa, *y = pb;
  int c = strcmp(x->key, y->key);
  return c ? c : strcmp(x->s->site, y->s->site);
}

static int by_count(const void *pa, const void *pb) {
  const stkr_agg_row *x = pa, *y = pb;
  int c = stkr_cmp_u64(y->count, x->count);
  return c != 0 ? c : strcmp(x->key, y->key);
}

int stkr_agg_breakdown(const stkr_agg *a, stkr_agg_by by, stkr_agg_row **rows,
                       size_t *n) {
  keyed *v;
  stkr_agg_row *out;
  size_t i, j, k, nr = 0;

  *rows = NULL;
  *n = 0;
  if (by == STKR_BY_SITE || (unsigned)by > STKR_BY_MODULE)
    return -EINVAL;
  if (a->n_stacks == 0)
    return 0;
  v = calloc(a->n_stacks, sizeof *v);
  out = calloc(a->n_stacks, sizeof *out);
  if (v == NULL || out == NULL)
    goto nomem;
  for (i = 0; i < a->n_stacks; i++) {
    v[i].s = &a->stacks[i];
    if ((v[i].key = key_of(&a->stacks[i], by)) == NULL)
      goto nomem;
  }
  qsort(v, a->n_stacks, sizeof *v, by_key_then_site);
  for (i = 0; i < a->n_stacks; i = j) {
    const char *key = v[i].key;
    stkr_agg_row *r = &out[nr];
    size_t e = i;

    while (e < a->n_stacks && strcmp(v[e].key, key) == 0)
      e++;
    r->key = by == STKR_BY_THREAD ? thread_label(v, i, e) : strdup(key);
    if (r->key == NULL)
      goto nomem;
    nr++;
    for (j = i; j < a->n_stacks && strcmp(v[j].key, key) == 0; j = k) {
      /* The stacks of one site under this key: [j, k). */
      const char *site = v[j].s->site;
      uint64_t site_count = 0;
      for (k = j; k < a->n_stacks && strcmp(v[k].key, key) == 0 &&
                  strcmp(v[k].s->site, site) == 0;
           k++) {
        site_count += v[k].s->count;
        r->n_stacks++;
      }
      r->count += site_count;
      r->n_sites++;
      if (site_count > r->top_site_count) {
        r->top_site = site;
        r->top_site_count = site_count;
      }
    }
  }
  STKR_FREE_EACH(v, a->n_stacks, key);
  free(v);
  qsort(out, nr, sizeof *out, by_count);
  *rows = out;
  *n = nr;
  return 0;
nomem:
  if (v != NULL)
    STKR_FREE_EACH(v, a->n_stacks, key);
  free(v);
  stkr_agg_rows_free(out, nr);
  return -ENOMEM;
}

void stkr_agg_rows_free(stkr_agg_row *rows, size_t n) {
  if (rows == NULL)
    return;
  STKR_FREE_EACH(rows, n, key);
  free(rows);
}
