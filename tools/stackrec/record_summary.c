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

#include "common/stkr_cmp.h"

#include "preload/match.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/record.h"

#define N_CATEGORIES STKR__PL_CAT_COUNT

#define TOP_FRAMES 4   /* frames shown of each API's top stack */
#define SHOW_PAYLOADS 3

/* What the summary keeps besides the aggregation (agg.h does the
 * counting: sites, stacks merged by content, payloads per site). */
typedef struct summary {
  uint64_t warnings;
} summary;

static unsigned category_of(const char *site) {
  size_t len = strcspn(site, ".");
  unsigned i;

  for (i = 0; i < N_CATEGORIES; i++)
    if (strlen(stkr__pl_cat_name(i)) == len &&
        strncmp(site, stkr__pl_cat_name(i), len) == 0)
      return i;
  return N_CATEGORIES;
}

static int by_category_then_events(const void *x, const void *y) {
  const stkr_agg_site *a = *(const stkr_agg_site *const *)x;
  const stkr_agg_site *b = *(const stkr_agg_site *const *)y;
  int c = stkr_cmp_u64(category_of(a->name), category_of(b->name));

  if (c == 0) c = stkr_cmp_u64(b->count, a->count);
  return c != 0 ? c : strcmp(a->name, b->name);
}

static void print_site(FILE *f, const stkr_agg_site *a) {
  const char *api = strchr(a->name, '.');
  size_t k;
  int pad;

  api = (category_of(a->name) < N_CATEGORIES && api) ? api + 1 : a->name;
  pad = 14 - (int)strlen(api);
  fprintf(f, "    ");
  stkr_cli_put_escaped(f, (const uint8_t *)api, strlen(api));
  fprintf(f, "%*s %6llu event%s %4zu stack%s", pad > 1 ? pad : 1, "",
          (unsigned long long)a->count, a->count == 1 ? " " : "s",
          a->n_stacks, a->n_stacks != 1 ? "s" : a->n_payloads ? " " : "");
  for (k = 0; k < a->n_payloads && k < SHOW_PAYLOADS; k++) {
    fprintf(f, "%s\"", k ? ", " : "  ");
    stkr_cli_put_escaped(f, a->payloads[k].data, a->payloads[k].len);
    fputc('"', f);
    if (a->payloads[k].count > 1)
      fprintf(f, " x%llu", (unsigned long long)a->payloads[k].count);
  }
  if (a->n_payloads > SHOW_PAYLOADS || a->more_payload_events)
    fputs(", ...", f);
  fputc('\n', f);
}

/* The site's most frequent stack, its first TOP_FRAMES frames innermost
 * first: function (file:line), or image+offset where unresolved. */
static void print_top_stack(FILE *f, const stkr_agg_site *a) {
  const stkr_agg_stack *top = a->n_stacks ? a->stacks[0] : NULL;
  size_t k, len = strlen(a->name);

  if (top == NULL)
    return;
  fprintf(f, "  ");
  stkr_cli_put_escaped(f, (const uint8_t *)a->name, len);
  fprintf(f, "%*s %llux", len < 24 ? (int)(24 - len) : 1, "",
          (unsigned long long)top->count);
  if (top->n_pids > 1)
    fprintf(f, " in %u processes", (unsigned)top->n_pids);
  fputc(':', f);
  for (k = 0; k < top->n_frames && k < TOP_FRAMES; k++) {
    const stkr_frame *fr = &top->frames[k];
    const char *file = fr->file ? strrchr(fr->file, '/') : NULL;
    char label[1024];

    fputs(k ? " < " : " ", f);
    stkr_agg_frame_label(fr, label, sizeof label);
    stkr_cli_put_escaped(f, (const uint8_t *)label, strlen(label));
    file = file ? file + 1 : fr->file;
    if (file != NULL) {
      fputs(" (", f);
      stkr_cli_put_escaped(f, (const uint8_t *)file, strlen(file));
      if (fr->line)
        fprintf(f, ":%u", (unsigned)fr->line);
      fputc(')', f);
    }
  }
  if (top->n_frames > TOP_FRAMES)
    fprintf(f, " < ... (%zu frames)", top->n_frames);
  if (top->n_frames == 0)
    fputs(" (no frames)", f);
  /* As report and folded mark it: callers are missing, not the stack's
   * end (QA, session 30: "(64 frames)" read as a whole stack). */
  if (top->truncated)
    fputs(" [cut short]", f);
  fputc('\n', f);
}

static void count_warning(void *arg, const stkr_warning *w) {
  summary *s = arg;

  /* An empty segment is a process that had nothing to write yet; no
   * segment at all, processes that made no watched call (said below). */
  if (w->kind == STKR_WARN_EMPTY_FILE || w->kind == STKR_WARN_NO_SEGMENTS)
    return;
  s->warnings++;
  stkr_cli_put_line(stderr, "stackrec record: warning: ", w->message, "");
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

void stkr__rec_print_notices(FILE *f, const stkr__rec_notices *nt,
                             const char *prefix) {
  size_t i;

  for (i = 0; i < nt->n; i++) {
    const stkr__rec_notice *m = &nt->v[i];
    fprintf(f, "%sprocess %d (", prefix, m->pid);
    stkr_cli_put_escaped(f, (const uint8_t *)m->name, strlen(m->name));
    fputs(stkr__rec_notice_text(m), f);
    put_text(f, m->what);
    fputc('\n', f);
  }
  if (nt->more)
    fprintf(f, "%s%llu more notices (not listed; the processes that "
            "recorded nothing are all named in the recording: info, "
            "verify)\n", prefix, (unsigned long long)nt->more);
  if (nt->foreign)
    fprintf(f, "%s%llu notice%s without the recording's token ignored: not "
            "from the recorded tree\n", prefix,
            (unsigned long long)nt->foreign, nt->foreign == 1 ? "" : "s");
}

void stkr__record_summary(const char *dir, const stkr__rec_notices *nt,
                          FILE *f) {
  summary s = {0};
  stkr_reader_opts opts = {.warn = count_warning, .warn_arg = &s,
                           .lazy_frames = true};
  stkr_reader *r = NULL;
  stkr_agg *a = NULL;
  const stkr_agg_site **v = NULL;
  uint64_t drops = 0;
  size_t n_proc, with_events = 0, i;
  unsigned cat = N_CATEGORIES + 1;
  char line[1024];
  int rc;

  fprintf(f, "recording: ");
  stkr_cli_put_escaped(f, (const uint8_t *)dir, strlen(dir));
  fputc('\n', f);
  if ((rc = stkr_reader_open(dir, &opts, &r)) != 0) {
    fprintf(f, "stackrec record: cannot read the recording: %s\n",
            strerror(-rc));
    stkr__rec_print_notices(f, nt, "");
    return;
  }
  if ((rc = stkr_agg_build(r, NULL, NULL, NULL, &a)) != 0) {
    fprintf(f, "stackrec record: reading the recording failed: %s\n",
            strerror(-rc));
    goto out;
  }
  n_proc = stkr_reader_process_count(r);
  for (i = 0; i < n_proc; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    drops += p->drops;
    with_events += p->events != 0;
  }
  fprintf(f, "processes: %zu (%zu with events)  events: %llu  distinct "
             "stacks: %llu  dropped: %llu\n",
          n_proc, with_events, (unsigned long long)a->events,
          /* the aggregation's count, as `report` says it: a sum of each
           * process's own stacks counted a stack shared by several
           * processes (or rewritten by a recovery) once per copy */
          (unsigned long long)a->n_distinct, (unsigned long long)drops);
  if (a->marks_read) /* marks: not events, listed as set */
    fprintf(f, "marks: %llu (e.g. set with `stackrec mark`; not counted as "
               "events)\n",
            (unsigned long long)a->marks_read);
  if (stkr_cli_incomplete_line(r, line, sizeof line) > 0)
    fprintf(f, "%s\n", line);
  stkr__rec_print_notices(f, nt, "");
  stkr__rec_print_live(f, nt, dir);
  if (n_proc == 0) {
    bool unable = nt->more_unrecorded != 0;
    for (i = 0; i < nt->n && !unable; i++)
      unable = nt->v[i].err != 0;
    if (unable) /* said above, with the reasons: no guessing */
      fprintf(f, "no process recorded anything\n");
    else
      fprintf(f, "no process recorded anything: none made a watched call "
                 "(a process writes nothing until its first), or the hook "
                 "library was not loaded (static and setuid programs ignore "
                 "LD_PRELOAD)\n");
    goto out;
  }
  if (a->n_sites != 0 && (v = malloc(a->n_sites * sizeof *v)) == NULL) {
    fprintf(f, "stackrec record: %s\n", strerror(ENOMEM));
    goto out;
  }
  for (i = 0; i < a->n_sites; i++)
    v[i] = &a->sites[i];
  if (a->n_sites > 1)
    qsort(v, a->n_sites, sizeof *v, by_category_then_events);
  for (i = 0; i < a->n_sites; i++) {
    if (category_of(v[i]->name) != cat) {
      uint64_t total = 0;
      size_t j;
      cat = category_of(v[i]->name);
      for (j = i; j < a->n_sites && category_of(v[j]->name) == cat; j++)
        total += v[j]->count;
      fprintf(f, "  %-16s %6llu event%s\n",
              cat < N_CATEGORIES ? stkr__pl_cat_name(cat) : "(other sites)",
              (unsigned long long)total, total == 1 ? "" : "s");
    }
    print_site(f, v[i]);
  }
  if (a->n_sites != 0) {
    fprintf(f, "top stack of each API (innermost first; function (file:line)"
               ", or image+offset where unresolved):\n");
    for (i = 0; i < a->n_sites; i++)
      print_top_stack(f, v[i]);
  }
  fprintf(f, "more: stackrec report DIR (all call stacks per category and "
             "API), stackrec info DIR, stackrec dump DIR\n");
out:
  free(v);
  stkr_agg_free(a);
  stkr_reader_free(r);
}
