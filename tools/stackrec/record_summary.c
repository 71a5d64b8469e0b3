/*
 * record_summary.c: the summary `stackrec record` prints on stderr once
 * the command has ended: events per category and API with their payloads,
 * each API's most frequent stack (function and file:line when the
 * recording has frames, image+offset otherwise), and the processes that
 * recorded nothing, with the reason each gave (record.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/record.h"

#define N_CATEGORIES STKR__PL_CAT_COUNT

#define TOP_FRAMES 4   /* frames shown of each API's top stack */
#define MAX_PAYLOADS 8 /* distinct payloads tracked per API */
#define SHOW_PAYLOADS 3

typedef struct stack_agg {
  size_t proc;   /* reader's process index */
  uint64_t hash; /* of all PCs: the stack's identity within the process */
  uint64_t count;
  size_t n_pcs;
  uint64_t pcs[TOP_FRAMES];
  char *frames; /* "fn (file:line) < ..." of the first frames, or NULL */
} stack_agg;

typedef struct payload_agg {
  uint8_t *bytes;
  size_t len;
  uint64_t count;
} payload_agg;

typedef struct site_agg {
  char *name;
  unsigned cat; /* index in k_categories, or N_CATEGORIES */
  uint64_t events;
  stack_agg *stacks;
  size_t n_stacks, cap_stacks;
  payload_agg pay[MAX_PAYLOADS];
  size_t n_pay;
  uint64_t pay_other; /* events whose payload was not tracked */
} site_agg;

/* Open addressing: (site, proc, hash) -> index into that site's stacks. */
typedef struct slot {
  uint64_t hash;
  size_t site, proc, idx; /* idx + 1; 0 = empty */
} slot;

typedef struct summary {
  site_agg *sites;
  size_t n_sites, cap_sites;
  slot *tab;
  size_t tab_cap, tab_used;
  uint64_t events, warnings;
} summary;

static uint64_t hash_pcs(const uint64_t *pcs, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  size_t i;

  for (i = 0; i < n; i++) {
    h ^= pcs[i];
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

static size_t slot_of(const summary *s, uint64_t hash, size_t site,
                      size_t proc) {
  size_t i = (size_t)(hash ^ (site * 0x9E3779B97F4A7C15ull) ^ proc) &
             (s->tab_cap - 1);

  while (s->tab[i].idx != 0 &&
         !(s->tab[i].hash == hash && s->tab[i].site == site &&
           s->tab[i].proc == proc))
    i = (i + 1) & (s->tab_cap - 1);
  return i;
}

static int tab_grow(summary *s) {
  size_t cap = s->tab_cap ? s->tab_cap * 2 : 1024, i;
  slot *old = s->tab, *tab = calloc(cap, sizeof *tab);
  size_t old_cap = s->tab_cap;

  if (tab == NULL)
    return -ENOMEM;
  s->tab = tab;
  s->tab_cap = cap;
  for (i = 0; i < old_cap; i++)
    if (old[i].idx != 0)
      s->tab[slot_of(s, old[i].hash, old[i].site, old[i].proc)] = old[i];
  free(old);
  return 0;
}

static unsigned category_of(const char *site) {
  size_t len = strcspn(site, ".");
  unsigned i;

  for (i = 0; i < N_CATEGORIES; i++)
    if (strlen(stkr__pl_cat_name(i)) == len &&
        strncmp(site, stkr__pl_cat_name(i), len) == 0)
      return i;
  return N_CATEGORIES;
}

/* The first TOP_FRAMES functions of a symbolized stack, as one line:
 * "fn (file.c:12) < caller (file.c:40) < ...". Inlined frames count as
 * frames (they are calls the source shows). @return malloc'd text, or
 * NULL when the stack has no frames (image+offset is printed instead). */
static char *frames_text(const stkr_frame *fr, size_t n) {
  char *buf = NULL;
  size_t len = 0, k, shown = 0;
  FILE *f;

  if (n == 0 || (f = open_memstream(&buf, &len)) == NULL)
    return NULL;
  for (k = 0; k < n && shown < TOP_FRAMES; k++, shown++) {
    const char *file = fr[k].file ? strrchr(fr[k].file, '/') : NULL;
    fputs(k ? " < " : " ", f);
    if (fr[k].function != NULL) {
      stkr_cli_put_escaped(f, (const uint8_t *)fr[k].function,
                           strlen(fr[k].function));
    } else {
      const char *im = fr[k].image ? strrchr(fr[k].image, '/') : NULL;
      im = im ? im + 1 : fr[k].image ? fr[k].image : "?";
      stkr_cli_put_escaped(f, (const uint8_t *)im, strlen(im));
      fprintf(f, "+0x%llx", (unsigned long long)fr[k].offset);
    }
    file = file ? file + 1 : fr[k].file;
    if (file != NULL) {
      fputs(" (", f);
      stkr_cli_put_escaped(f, (const uint8_t *)file, strlen(file));
      if (fr[k].line)
        fprintf(f, ":%u", (unsigned)fr[k].line);
      fputc(')', f);
    }
  }
  if (n > shown)
    fprintf(f, " < ... (%zu frames)", n);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

static site_agg *site_get(summary *s, const char *name) {
  size_t i;
  site_agg *a;

  for (i = 0; i < s->n_sites; i++)
    if (strcmp(s->sites[i].name, name) == 0)
      return &s->sites[i];
  if (s->n_sites == s->cap_sites) {
    size_t cap = s->cap_sites ? s->cap_sites * 2 : 16;
    site_agg *n = realloc(s->sites, cap * sizeof *n);
    if (n == NULL)
      return NULL;
    s->sites = n;
    s->cap_sites = cap;
  }
  a = &s->sites[s->n_sites];
  memset(a, 0, sizeof *a);
  if ((a->name = strdup(name)) == NULL)
    return NULL;
  a->cat = category_of(name);
  s->n_sites++;
  return a;
}

static int add_event(summary *s, stkr_reader *r, const stkr_event_view *ev) {
  site_agg *a = site_get(s, ev->site);
  uint64_t h = hash_pcs(ev->pcs, ev->n_pcs);
  size_t si, k;
  slot *sl;

  if (a == NULL)
    return -ENOMEM;
  si = (size_t)(a - s->sites);
  a->events++;
  s->events++;
  if (s->tab_used * 2 >= s->tab_cap && tab_grow(s) != 0)
    return -ENOMEM;
  sl = &s->tab[slot_of(s, h, si, ev->process)];
  if (sl->idx == 0) {
    stack_agg *st;
    if (a->n_stacks == a->cap_stacks) {
      size_t cap = a->cap_stacks ? a->cap_stacks * 2 : 8;
      stack_agg *n = realloc(a->stacks, cap * sizeof *n);
      if (n == NULL)
        return -ENOMEM;
      a->stacks = n;
      a->cap_stacks = cap;
    }
    st = &a->stacks[a->n_stacks];
    memset(st, 0, sizeof *st);
    st->proc = ev->process;
    st->hash = h;
    st->n_pcs = ev->n_pcs;
    memcpy(st->pcs, ev->pcs,
           (ev->n_pcs < TOP_FRAMES ? ev->n_pcs : TOP_FRAMES) * sizeof(uint64_t));
    {
      /* Frames once per distinct stack (the reader is lazy about them). */
      const stkr_frame *fr;
      size_t nf;
      if (stkr_reader_frames(r, &fr, &nf) == 0 && nf != 0)
        st->frames = frames_text(fr, nf);
    }
    sl->hash = h;
    sl->site = si;
    sl->proc = ev->process;
    sl->idx = ++a->n_stacks;
    s->tab_used++;
  }
  a->stacks[sl->idx - 1].count++;

  for (k = 0; k < a->n_pay; k++)
    if (a->pay[k].len == ev->payload_len &&
        memcmp(a->pay[k].bytes, ev->payload, ev->payload_len) == 0) {
      a->pay[k].count++;
      return 0;
    }
  if (ev->payload_len == 0 || a->n_pay == MAX_PAYLOADS) {
    if (ev->payload_len != 0)
      a->pay_other++;
    return 0;
  }
  if ((a->pay[k].bytes = malloc(ev->payload_len)) == NULL)
    return -ENOMEM;
  memcpy(a->pay[k].bytes, ev->payload, ev->payload_len);
  a->pay[k].len = ev->payload_len;
  a->pay[k].count = 1;
  a->n_pay++;
  return 0;
}

static void summary_free(summary *s) {
  size_t i, k;

  for (i = 0; i < s->n_sites; i++) {
    free(s->sites[i].name);
    for (k = 0; k < s->sites[i].n_stacks; k++)
      free(s->sites[i].stacks[k].frames);
    free(s->sites[i].stacks);
    for (k = 0; k < s->sites[i].n_pay; k++)
      free(s->sites[i].pay[k].bytes);
  }
  free(s->sites);
  free(s->tab);
}

static int by_category_then_events(const void *x, const void *y) {
  const site_agg *a = x, *b = y;

  if (a->cat != b->cat)
    return a->cat < b->cat ? -1 : 1;
  if (a->events != b->events)
    return a->events > b->events ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int by_count_desc(const void *x, const void *y) {
  const payload_agg *a = x, *b = y;
  return a->count != b->count ? (a->count > b->count ? -1 : 1) : 0;
}

/* One PC as "image+0xoffset" (the image's base name), from the images the
 * process recorded; raw "0x..." if none contains it. */
static void put_pc(FILE *f, const stkr_reader *r, size_t proc, uint64_t pc) {
  const stkr_image_info *im;
  size_t n, i;

  if (stkr_reader_images(r, proc, &im, &n) == 0)
    for (i = 0; i < n; i++)
      if (pc >= im[i].text_start && pc < im[i].text_end) {
        const char *b = strrchr(im[i].path, '/');
        b = b ? b + 1 : im[i].path;
        stkr_cli_put_escaped(f, (const uint8_t *)b, strlen(b));
        fprintf(f, "+0x%llx",
                (unsigned long long)(pc - im[i].load_address));
        return;
      }
  fprintf(f, "0x%llx", (unsigned long long)pc);
}

static void print_site(FILE *f, site_agg *a) {
  const char *api = strchr(a->name, '.');
  size_t k;
  int pad;

  api = (a->cat < N_CATEGORIES && api) ? api + 1 : a->name;
  pad = 14 - (int)strlen(api);
  fprintf(f, "    ");
  stkr_cli_put_escaped(f, (const uint8_t *)api, strlen(api));
  fprintf(f, "%*s %6llu event%s %4zu stack%s", pad > 1 ? pad : 1, "",
          (unsigned long long)a->events, a->events == 1 ? " " : "s",
          a->n_stacks, a->n_stacks != 1 ? "s" : a->n_pay ? " " : "");
  qsort(a->pay, a->n_pay, sizeof a->pay[0], by_count_desc);
  for (k = 0; k < a->n_pay && k < SHOW_PAYLOADS; k++) {
    fprintf(f, "%s\"", k ? ", " : "  ");
    stkr_cli_put_escaped(f, a->pay[k].bytes, a->pay[k].len);
    fputc('"', f);
    if (a->pay[k].count > 1)
      fprintf(f, " x%llu", (unsigned long long)a->pay[k].count);
  }
  if (a->n_pay > SHOW_PAYLOADS || a->pay_other)
    fputs(", ...", f);
  fputc('\n', f);
}

static void print_top_stack(FILE *f, const stkr_reader *r, const site_agg *a) {
  const stack_agg *top = NULL;
  size_t k;

  for (k = 0; k < a->n_stacks; k++)
    if (top == NULL || a->stacks[k].count > top->count)
      top = &a->stacks[k];
  if (top == NULL)
    return;
  fprintf(f, "  ");
  stkr_cli_put_escaped(f, (const uint8_t *)a->name, strlen(a->name));
  fprintf(f, "%*s %llux pid %u:",
          strlen(a->name) < 24 ? (int)(24 - strlen(a->name)) : 1, "", (unsigned long long)top->count,
          (unsigned)stkr_reader_process(r, top->proc)->pid);
  if (top->frames != NULL) {
    fputs(top->frames, f);
    fputc('\n', f);
    return;
  }
  for (k = 0; k < top->n_pcs && k < TOP_FRAMES; k++) {
    fputs(k ? " < " : " ", f);
    put_pc(f, r, top->proc, top->pcs[k]);
  }
  if (top->n_pcs > TOP_FRAMES)
    fprintf(f, " < ... (%zu frames)", top->n_pcs);
  if (top->n_pcs == 0)
    fputs(" (no frames)", f);
  fputc('\n', f);
}

static void count_warning(void *arg, const stkr_warning *w) {
  summary *s = arg;

  /* An empty segment is a process that had nothing to write yet. */
  if (w->kind == STKR_WARN_EMPTY_FILE)
    return;
  s->warnings++;
  fprintf(stderr, "stackrec record: warning: %s\n", w->message);
}

/* A message from another process: printable as it is, control bytes as
 * \xNN (a message must not move the terminal's cursor). */
static void put_text(FILE *f, const char *s) {
  for (; *s != '\0'; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      fprintf(f, "\\x%02x", (unsigned char)*s);
    else
      fputc(*s, f);
}

/* The processes that recorded nothing, with their reasons. */
static void print_notices(FILE *f, const stkr__rec_notices *nt) {
  size_t i;

  for (i = 0; i < nt->n; i++) {
    const stkr__rec_notice *m = &nt->v[i];
    fprintf(f, "process %d (", m->pid);
    stkr_cli_put_escaped(f, (const uint8_t *)m->name, strlen(m->name));
    fputs(") recorded nothing: ", f);
    put_text(f, m->what);
    fputc('\n', f);
  }
  if (nt->more)
    fprintf(f, "%llu more processes recorded nothing (not listed)\n",
            (unsigned long long)nt->more);
}

void stkr__record_summary(const char *dir, const stkr__rec_notices *nt,
                          FILE *f) {
  summary s;
  stkr_reader_opts opts = {.warn = count_warning, .warn_arg = &s,
                           .lazy_frames = true};
  stkr_reader *r = NULL;
  stkr_event_view ev;
  uint64_t drops = 0, stacks = 0;
  size_t n_proc, with_events = 0, i;
  unsigned cat = N_CATEGORIES + 1;
  int rc;

  memset(&s, 0, sizeof s);
  fprintf(f, "recording: ");
  stkr_cli_put_escaped(f, (const uint8_t *)dir, strlen(dir));
  fputc('\n', f);
  if ((rc = stkr_reader_open(dir, &opts, &r)) != 0) {
    fprintf(f, "stackrec record: cannot read the recording: %s\n",
            strerror(-rc));
    print_notices(f, nt);
    return;
  }
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    if ((rc = add_event(&s, r, &ev)) != 0)
      break;
  if (rc < 0) {
    fprintf(f, "stackrec record: reading the recording failed: %s\n",
            strerror(-rc));
    goto out;
  }
  n_proc = stkr_reader_process_count(r);
  for (i = 0; i < n_proc; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    drops += p->drops;
    stacks += p->stacks;
    with_events += p->events != 0;
  }
  fprintf(f, "processes: %zu (%zu with events)  events: %llu  distinct "
             "stacks: %llu  dropped: %llu\n",
          n_proc, with_events, (unsigned long long)s.events,
          (unsigned long long)stacks, (unsigned long long)drops);
  print_notices(f, nt);
  if (n_proc == 0) {
    fprintf(f, "no process recorded anything: was the hook library loaded?"
               " (static and setuid programs ignore LD_PRELOAD)\n");
    goto out;
  }
  if (s.n_sites > 1)
    qsort(s.sites, s.n_sites, sizeof s.sites[0], by_category_then_events);
  for (i = 0; i < s.n_sites; i++) {
    if (s.sites[i].cat != cat) {
      uint64_t total = 0;
      size_t j;
      cat = s.sites[i].cat;
      for (j = i; j < s.n_sites && s.sites[j].cat == cat; j++)
        total += s.sites[j].events;
      fprintf(f, "  %-16s %6llu event%s\n",
              cat < N_CATEGORIES ? stkr__pl_cat_name(cat) : "(other sites)",
              (unsigned long long)total, total == 1 ? "" : "s");
    }
    print_site(f, &s.sites[i]);
  }
  if (s.n_sites != 0) {
    fprintf(f, "top stack of each API (innermost first; function (file:line)"
               ", or image+offset where unresolved):\n");
    for (i = 0; i < s.n_sites; i++)
      print_top_stack(f, r, &s.sites[i]);
  }
  fprintf(f, "more: stackrec report DIR (all call stacks per category and "
             "API), stackrec info DIR, stackrec dump DIR\n");
out:
  stkr_reader_free(r);
  summary_free(&s);
}

