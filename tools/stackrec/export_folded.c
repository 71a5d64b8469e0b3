/*
 * export_folded.c: `stackrec export --format folded`: collapsed stacks, the
 * input of flamegraph.pl, speedscope and inferno.
 *
 * One line per distinct stack: the site as the root frame, then the frames
 * from the outermost to the leaf, joined by ';', a space and the event
 * count. Those tools split a line at its last space (the count) and the
 * rest at ';', so a name may hold spaces but not ';' (written as ':', as
 * stackcollapse-perf.pl does) nor a line break or other control character
 * (written as '?'). Lines are sorted, and lines that became equal through
 * that replacement are added up, so the output is canonical. A stack the
 * walk cut at max_depth has a frame "[truncated]" between the site and its
 * outermost frame: the root of what follows is not the program's (QA: it
 * looked like a whole stack).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/export.h"

typedef struct line {
  char *stack; /* "site;root;...;leaf", sanitized */
  uint64_t count;
} line;

/* Append name to the memstream, sanitized (see above); "" becomes "?". */
static void put_name(FILE *f, const char *name) {
  const unsigned char *p = (const unsigned char *)name;

  if (*p == '\0') {
    putc('?', f);
    return;
  }
  for (; *p; p++) {
    if (*p == ';')
      putc(':', f);
    else if (*p < 0x20 || *p == 0x7f)
      putc('?', f);
    else
      putc(*p, f);
  }
}

static int by_stack(const void *a, const void *b) {
  return strcmp(((const line *)a)->stack, ((const line *)b)->stack);
}

int stkr__export_folded(stkr__export *x) {
  stkr_agg_opts o = x->filt;
  stkr_agg *a = NULL;
  line *lines = NULL;
  size_t i, n = 0, k;
  int err;

  o.by_thread = false;
  err = stkr_agg_build(x->r, &o, stkr__progress, x, &a);
  if (err != 0)
    return err;
  lines = calloc(a->n_stacks ? a->n_stacks : 1, sizeof *lines);
  if (lines == NULL) {
    stkr_agg_free(a);
    return -ENOMEM;
  }
  for (i = 0; i < a->n_stacks; i++) {
    const stkr_agg_stack *s = &a->stacks[i];
    char label[1024], *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);

    if (m == NULL) {
      err = -ENOMEM;
      break;
    }
    put_name(m, s->site);
    if (s->truncated)
      fputs(";[truncated]", m);
    for (k = s->n_frames; k-- > 0;) {
      putc(';', m);
      put_name(m, stkr_agg_frame_text(&s->frames[k], a->granularity, label,
                                      sizeof label));
    }
    if (fclose(m) != 0 || buf == NULL) {
      free(buf);
      err = -ENOMEM;
      break;
    }
    lines[n].stack = buf;
    lines[n++].count = s->count;
  }
  if (err == 0) {
    qsort(lines, n, sizeof *lines, by_stack);
    for (i = 0; i < n; i = k) {
      uint64_t count = lines[i].count;
      for (k = i + 1; k < n && strcmp(lines[k].stack, lines[i].stack) == 0;
           k++)
        count += lines[k].count;
      fprintf(x->out, "%s %llu\n", lines[i].stack, (unsigned long long)count);
    }
    x->events_out = a->events;
  }
  STKR_FREE_EACH(lines, n, stack);
  free(lines);
  stkr_agg_free(a);
  return err;
}
