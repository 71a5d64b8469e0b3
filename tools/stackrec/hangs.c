/*
 * hangs.c: the hang watchdog's events gathered by hang and by stack
 * (hangs.h). Hangs are few (one per freeze of a watched thread), so a
 * plain array searched from its end is enough.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/hangs.h"

#define SITE_HANG "watchdog.hang"
#define SITE_RECOVERED "watchdog.recovered"

typedef struct hang_run {
  size_t stack;     /* merged stack index in the agg */
  uint64_t samples; /* identical samples in the run */
} hang_run;

typedef struct hang {
  uint32_t pid;
  uint64_t tid;
  char thread[32];
  uint64_t id;
  bool recovered;
  uint64_t ms;       /* recovered: the total; else the longest run's */
  uint64_t samples;  /* recovered: its count; else the runs' sum */
  uint64_t start_ns; /* since the process's origin */
  hang_run *runs;
  size_t n_runs, cap_runs;
} hang;

struct stkr__hangs {
  hang *v;
  size_t n, cap;
};

stkr__hangs *stkr__hangs_create(void) { return calloc(1, sizeof(stkr__hangs)); }

void stkr__hangs_free(stkr__hangs *h) {
  if (h == NULL)
    return;
  STKR_FREE_EACH(h->v, h->n, runs);
  free(h->v);
  free(h);
}

bool stkr__hangs_site(const char *site) {
  /* Asked for every event: the first byte rules out nearly every site. */
  if (site[0] != SITE_HANG[0])
    return false;
  return strcmp(site, SITE_HANG) == 0 || strcmp(site, SITE_RECOVERED) == 0;
}

/* "key=N" in the payload; false when absent or not a number. */
static bool field(const stkr_event_view *ev, const char *key, uint64_t *out) {
  size_t klen = strlen(key), i = 0, n = ev->payload_len;
  const char *p = (const char *)ev->payload;

  while (i < n) {
    if (n - i > klen && memcmp(p + i, key, klen) == 0 && p[i + klen] == '=') {
      uint64_t v = 0;
      size_t j = i + klen + 1, d = 0;
      for (; j < n && p[j] >= '0' && p[j] <= '9' && d < 19; j++, d++)
        v = v * 10 + (uint64_t)(p[j] - '0');
      if (d == 0)
        return false;
      *out = v;
      return true;
    }
    while (i < n && p[i] != ' ')
      i++;
    i++;
  }
  return false;
}

static hang *find(stkr__hangs *h, const stkr_event_view *ev, uint64_t id) {
  hang *g;

  for (size_t i = h->n; i-- > 0;) {
    g = &h->v[i];
    if (g->id == id && g->pid == ev->pid && g->tid == ev->tid)
      return g;
  }
  if (stkr_grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v) != 0)
    return NULL;
  g = &h->v[h->n++];
  memset(g, 0, sizeof *g);
  g->pid = ev->pid;
  g->tid = ev->tid;
  g->id = id;
  g->start_ns = UINT64_MAX;
  snprintf(g->thread, sizeof g->thread, "%s", ev->thread_name);
  return g;
}

int stkr__hangs_add(stkr__hangs *h, const stkr_event_view *ev, size_t stack,
                    uint64_t t_ns) {
  uint64_t id, ms = 0, samples = 0, start;
  bool recovered = strcmp(ev->site, SITE_RECOVERED) == 0;
  hang *g;

  if (h == NULL || !field(ev, "hang", &id))
    return 0; /* not the watchdog's format: left to the site table */
  (void)field(ev, "ms", &ms);
  (void)field(ev, "samples", &samples);
  if ((g = find(h, ev, id)) == NULL)
    return -ENOMEM;
  start = t_ns > ms * 1000000u ? t_ns - ms * 1000000u : 0;
  if (recovered) {
    g->recovered = true;
    g->ms = ms;
    g->samples = samples;
    g->start_ns = start;
    return 0;
  }
  if (stkr_grow((void **)&g->runs, &g->cap_runs, g->n_runs + 1,
                sizeof *g->runs) != 0)
    return -ENOMEM;
  g->runs[g->n_runs].stack = stack;
  g->runs[g->n_runs].samples = samples;
  g->n_runs++;
  if (!g->recovered) {
    if (ms > g->ms)
      g->ms = ms;
    g->samples += samples;
    if (start < g->start_ns)
      g->start_ns = start;
  }
  return 0;
}

/* One stack's share of the hangs. */
typedef struct by_stack {
  size_t stack;
  uint64_t samples, hangs, longest_ms;
} by_stack;

static int by_samples(const void *pa, const void *pb) {
  const by_stack *a = pa, *b = pb;
  if (a->samples != b->samples)
    return a->samples < b->samples ? 1 : -1;
  return stkr_cmp_u64(a->stack, b->stack);
}

static void put_secs(uint64_t ms) { printf("%.2f s", (double)ms / 1000.0); }

int stkr__hangs_print(const stkr_agg *a, size_t top) {
  const stkr__hangs *h = a->hangs_;
  by_stack *s = NULL;
  size_t ns = 0, caps = 0, i, j, k, longest = 0, open = 0;
  uint64_t all_ms = 0, all_samples = 0;
  char buf[1024];

  if (h == NULL || h->n == 0)
    return 0;
  for (i = 0; i < h->n; i++) {
    const hang *g = &h->v[i];
    all_ms += g->ms;
    open += !g->recovered;
    if (g->ms > h->v[longest].ms)
      longest = i;
    for (j = 0; j < g->n_runs; j++) {
      const hang_run *r = &g->runs[j];
      all_samples += r->samples;
      for (k = 0; k < ns && s[k].stack != r->stack; k++)
        ;
      if (k == ns) {
        if (stkr_grow((void **)&s, &caps, ns + 1, sizeof *s) != 0) {
          free(s);
          return -ENOMEM;
        }
        memset(&s[ns++], 0, sizeof *s);
        s[k].stack = r->stack;
      }
      s[k].samples += r->samples;
      /* Count the hang once per stack, even with several runs of it. */
      bool again = false;
      for (size_t q = 0; q < j; q++)
        again = again || g->runs[q].stack == r->stack;
      if (!again) {
        s[k].hangs++;
        if (g->ms > s[k].longest_ms)
          s[k].longest_ms = g->ms;
      }
    }
  }
  qsort(s, ns, sizeof *s, by_samples);

  printf("\nHangs (watchdog): %zu hang%s, ", h->n, h->n == 1 ? "" : "s");
  put_secs(all_ms);
  printf(" in all, longest ");
  put_secs(h->v[longest].ms);
  printf(" (pid %" PRIu32 ", thread %" PRIu64 ")", h->v[longest].pid,
         h->v[longest].tid);
  if (open != 0)
    printf("; %zu not recovered when the recording ended (at least)", open);
  printf("\n  stacks where hung threads were sampled, most samples first:\n");
  for (k = 0; k < ns && k < top; k++) {
    const stkr_agg_stack *st = &a->stacks[s[k].stack];
    printf("  %" PRIu64 " sample%s (%.2f%%) in %" PRIu64 " hang%s, longest ",
           s[k].samples, s[k].samples == 1 ? "" : "s",
           all_samples ? 100.0 * (double)s[k].samples / (double)all_samples
                       : 0.0,
           s[k].hangs, s[k].hangs == 1 ? "" : "s");
    put_secs(s[k].longest_ms);
    putchar('\n');
    for (j = 0; j < st->n_frames && j < 16; j++) {
      fputs("      ", stdout);
      fputs(stkr_agg_frame_text(&st->frames[j], a->granularity, buf,
                                sizeof buf),
            stdout);
      putchar('\n');
    }
    if (st->n_frames > 16)
      printf("      ... %zu more frame%s\n", st->n_frames - 16,
             st->n_frames - 16 == 1 ? "" : "s");
  }
  if (ns > top)
    printf("  ... %zu more stacks (--top)\n", ns - top);
  printf("  each hang:\n");
  for (i = 0; i < h->n && i < 100; i++) {
    const hang *g = &h->v[i];
    printf("    pid %" PRIu32 " thread %" PRIu64 " \"", g->pid, g->tid);
    stkr_cli_put_escaped(stdout, (const uint8_t *)g->thread,
                         strlen(g->thread));
    printf("\" hang %" PRIu64 ": ", g->id);
    put_secs(g->ms);
    printf("%s from ", g->recovered ? "" : " or more");
    put_secs(g->start_ns == UINT64_MAX ? 0 : g->start_ns / 1000000u);
    printf(", %" PRIu64 " sample%s, %zu stack%s, %s\n", g->samples,
           g->samples == 1 ? "" : "s", g->n_runs, g->n_runs == 1 ? "" : "s",
           g->recovered ? "recovered" : "not recovered");
  }
  if (h->n > 100)
    printf("    ... %zu more hangs\n", h->n - 100);
  free(s);
  return 0;
}

void stkr__hangs_json(const stkr_agg *a, FILE *out) {
  const stkr__hangs *h = a->hangs_;

  fputc('[', out);
  for (size_t i = 0; h != NULL && i < h->n; i++) {
    const hang *g = &h->v[i];
    fprintf(out,
            "%s{\"pid\":%" PRIu32 ",\"tid\":%" PRIu64 ",\"thread\":\"",
            i ? "," : "", g->pid, g->tid);
    stkr_cli_put_json(out, (const uint8_t *)g->thread, strlen(g->thread));
    fprintf(out,
            "\",\"hang\":%" PRIu64 ",\"start_ms\":%" PRIu64
            ",\"ms\":%" PRIu64 ",\"samples\":%" PRIu64
            ",\"recovered\":%s,\"stacks\":[",
            g->id, g->start_ns == UINT64_MAX ? 0 : g->start_ns / 1000000u,
            g->ms, g->samples, g->recovered ? "true" : "false");
    for (size_t j = 0; j < g->n_runs; j++)
      fprintf(out, "%s%zu", j ? "," : "", g->runs[j].stack);
    fputs("]}", out);
  }
  fputc(']', out);
}
