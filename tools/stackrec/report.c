/*
 * report.c: `stackrec report`: like `perf report` for hook sites. Sites
 * ranked by events, grouped by category when their names are
 * "category.api" (what `stackrec record` writes), each with its distinct
 * call stacks, or a caller->callee tree (--tree); or the self-contained
 * HTML report (--html, html.c). The events are aggregated by agg.c:
 * streaming, memory grows with distinct stacks only.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"

#include "tools/stackrec/agg.h"
#include "tools/stackrec/attrib.h" /* stkr_attrib_base_name */
#include "tools/stackrec/cli.h"
#include "tools/stackrec/breakdown.h"
#include "tools/stackrec/filter.h"
#include "tools/stackrec/hangs.h"
#include "tools/stackrec/report.h"
#include "tools/stackrec/html.h"

static const char report_help[] =
    "Usage: stackrec report [OPTIONS] DIR|FILE...\n"
    "\n"
    "Which sites fired, how often, and from which call paths. Sites are\n"
    "ranked by events; under each, its distinct call stacks (innermost frame\n"
    "first) with their events and share of the site, most first. Site names\n"
    "of the form CATEGORY.API (as 'stackrec record' writes them) are grouped\n"
    "by category. Stacks are merged by content: the same frames (function,\n"
    "file and line, see --granularity; image+offset where unknown) at the\n"
    "same site count as one stack across processes, runs and recordings\n"
    "given together.\n"
    "\n"
    "A frame prints as FUNCTION (FILE:LINE), as IMAGE+0xOFFSET when the\n"
    "function is unknown, or as 0xPC outside any known image; [inlined]\n"
    "marks a call inlined into the frame below it. A line is shown only if\n"
    "it is true of every event merged into that stack.\n"
    "\n"
    "Lines starting with '#' come first. The very first, when the input\n"
    "is damaged or incomplete, says so: '# INCOMPLETE: ...' with the facts\n"
    "'stackrec verify' reports (events dropped by reason, sessions without\n"
    "a clean end, missing or deleted segments, a recreated directory); the\n"
    "HTML page shows the same line at its top. Then the totals, then,\n"
    "whenever any apply, DROPPED (events the recorder lost, by cause),\n"
    "DELETED (older segments removed by the disk cap), DAMAGED (batches\n"
    "that could not be read; named on stderr), MISSING, UNRESOLVED, NOT\n"
    "READ (newer format) and LIVE (a recording still being written: its\n"
    "last, incomplete batch is not counted), then the filters in effect.\n"
    "\n"
    "Options:\n";

static const char report_help_more[] =
    "  --timeline        under each site, its events over time: one\n"
    "                    character per bucket (from each process's start,\n"
    "                    a forked child's from its tree's root's; at most\n"
    "                    128 buckets, as wide as the recording needs)\n"
    "                    and the peak rate\n"
    "  --sort events|stacks|name\n"
    "                    order of categories, sites and --by rows: most\n"
    "                    events first (default), most distinct stacks\n"
    "                    first, or by name\n"
    "  --by thread|process|payload|module\n"
    "                    instead of the sites: a table of events per thread,\n"
    "                    process, payload or module (the image of a stack's\n"
    "                    innermost frame that is not the system's: libc,\n"
    "                    /lib, /usr/lib are skipped), each with its stacks,\n"
    "                    sites and most frequent site; at most --top rows\n"
    "  --top N           at most N stacks per site (in --tree: N callees per\n"
    "                    node), then one line for the rest; 0: all\n"
    "                    (default 10)\n"
    "  --tree            a caller->callee tree per site instead: outermost\n"
    "                    frame first, each node (a frame at --granularity)\n"
    "                    with its events and share of the site; a node's\n"
    "                    own calls beside its callees are a '(here)' line\n"
    "  --html FILE       write the self-contained HTML report (flame graph\n"
    "                    per site, site table, drop summary) to FILE instead\n"
    "                    of the stacks; the '#' lines still go to stdout\n"
    "  -h, --help        this help\n"
    "\n"
    "With the hang watchdog's sites (watchdog.hang, watchdog.recovered) the\n"
    "report ends with a Hangs section: the stacks hung threads were sampled\n"
    "in, most samples first (--top of them), then each hang with its\n"
    "duration; the HTML page draws the hangs on those sites' timelines.\n"
    "\n";

/* ---- output helpers -------------------------------------------------------- */

void stkr__report_put_str(const char *s) {
  stkr_cli_put_escaped(stdout, (const uint8_t *)s, strlen(s));
}

/* Seconds as decimals, without an exponent or trailing zeros. */
static void put_seconds(double s) {
  char buf[STKR__SECONDS_MAX];
  fputs(stkr__filter_seconds(s, buf), stdout);
}

void stkr__report_put_events(uint64_t n) {
  printf("%llu event%s", (unsigned long long)n, n == 1 ? "" : "s");
}

double stkr__report_pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One frame: FUNCTION (FILE:LINE), IMAGE+0xOFF or 0xPC; file and line
 * only if show_file / show_line. */
void stkr__report_put_frame(const stkr_frame *f, bool show_file,
                            bool show_line, bool inlined, bool show_addr) {
  if (f->function != NULL) {
    stkr__report_put_str(f->function);
    if (show_file && f->file != NULL) {
      fputs(" (", stdout);
      stkr__report_put_str(f->file);
      if (show_line && f->line)
        printf(":%u", (unsigned)f->line);
      putchar(')');
    }
  } else {
    char label[1024];
    stkr__report_put_str(stkr_agg_frame_label(f, label, sizeof label));
  }
  /* --granularity address: what tells two merged stacks apart (QA,
   * session 22: two stacks printed alike). An unnamed frame's label is its
   * address already. */
  if (show_addr && f->function != NULL) {
    if (f->image != NULL)
      printf(" [%s+0x%" PRIx64 "]", stkr_attrib_base_name(f->image),
             f->offset);
    else
      printf(" [0x%" PRIx64 "]", f->pc);
  }
  if (inlined)
    fputs(" [inlined]", stdout);
}

/* ---- flat: stacks under each site ---------------------------------------- */

static void print_stacks(const stkr_agg_site *s, const report_opts *o,
                         int ind) {
  size_t i, n = s->n_stacks;
  uint64_t rest = 0;

  if (o->top && n > o->top)
    n = o->top;
  for (i = 0; i < n; i++) {
    const stkr_agg_stack *k = s->stacks[i];
    size_t f;

    printf("%*s", ind, "");
    stkr__report_put_events(k->count);
    printf(", %.2f%%", stkr__report_pct(k->count, s->count));
    if (k->n_pids > 1)
      printf(", in %u processes", (unsigned)k->n_pids);
    if (k->truncated)
      fputs(", stack cut short (outer callers missing)", stdout);
    fputs(":\n", stdout);
    if (k->n_frames == 0)
      printf("%*s(no stack)\n", ind + 4, "");
    for (f = 0; f < k->n_frames; f++) {
      printf("%*s", ind + 4, "");
      stkr__report_put_frame(&k->frames[f], true, true, k->frames[f].inlined,
                             o->agg.granularity == STKR_AGG_BY_ADDRESS);
      putchar('\n');
    }
  }
  for (; i < s->n_stacks; i++)
    rest += s->stacks[i]->count;
  if (n < s->n_stacks) {
    printf("%*s... %zu more stack%s: ", ind, "", s->n_stacks - n,
           s->n_stacks - n == 1 ? "" : "s");
    stkr__report_put_events(rest);
    printf(", %.2f%%\n", stkr__report_pct(rest, s->count));
  }
}

/* ---- categories ------------------------------------------------------------ */

typedef struct category {
  const char *name; /* the first site's name; len bytes of it */
  size_t len;
  uint64_t count;
  size_t stacks;    /* distinct stacks of its sites */
  size_t first;     /* index into the sorted site order */
  size_t n;
} category;

static size_t cat_len(const char *site) {
  const char *dot = strchr(site, '.');
  return dot ? (size_t)(dot - site) : strlen(site);
}

/* --sort, for the qsort comparators below (the tool is single-threaded). */
static sort_key g_sort;

static int cat_order(const void *pa, const void *pb) {
  const category *x = pa, *y = pb;
  int c = 0;

  if (g_sort == SORT_STACKS) c = stkr_cmp_u64(y->stacks, x->stacks);
  if (c == 0 && g_sort != SORT_NAME) c = stkr_cmp_u64(y->count, x->count);
  return c != 0 ? c : stkr_cmp_bytes(x->name, x->len, y->name, y->len);
}

/* Sites ordered by category (in no particular order yet), then as the agg
 * ranks them. */
static int site_by_cat(const void *pa, const void *pb) {
  const stkr_agg_site *x = *(const stkr_agg_site *const *)pa;
  const stkr_agg_site *y = *(const stkr_agg_site *const *)pb;
  size_t lx = cat_len(x->name), ly = cat_len(y->name);
  int c = memcmp(x->name, y->name, lx < ly ? lx : ly);

  if (c != 0 || lx != ly)
    return c != 0 ? c : (lx < ly ? -1 : 1);
  return x < y ? -1 : x > y; /* the agg's order */
}

/* What the site touched: its most frequent payloads (files, variables,
 * addresses), at most --top of them, then one line for the rest. */
static void print_payloads(const stkr_agg_site *s, const report_opts *o,
                           int ind) {
  size_t i, n = s->n_payloads;
  uint64_t shown = 0;

  if (s->payload_events == 0)
    return;
  printf("%*spayloads: %zu%s distinct, in %llu of its events\n", ind, "",
         s->n_payloads, s->more_payload_events ? "+" : "",
         (unsigned long long)s->payload_events);
  if (o->top && n > o->top)
    n = o->top;
  for (i = 0; i < n; i++) {
    const stkr_agg_payload *p = &s->payloads[i];
    printf("%*s%8llu  %6.2f%%  \"", ind + 2, "", (unsigned long long)p->count,
           stkr__report_pct(p->count, s->count));
    stkr_cli_put_escaped(stdout, p->data, p->len);
    /* As --by payload marks it (breakdown.c): only a prefix was kept. */
    fputs(p->truncated ? "\"...\n" : "\"\n", stdout);
    shown += p->count;
  }
  if (shown < s->payload_events)
    printf("%*s%8llu  %6.2f%%  (%zu%s other payloads)\n", ind + 2, "",
           (unsigned long long)(s->payload_events - shown),
           stkr__report_pct(s->payload_events - shown, s->count), s->n_payloads - n,
           s->more_payload_events ? "+" : "");
}

/* Seconds, short: "250 ms", "1.5 s", "2 min". */
static void put_duration(uint64_t ns) {
  if (ns < 1000000000ull)
    printf("%g ms", (double)ns / 1e6);
  else if (ns < 120000000000ull)
    printf("%g s", (double)ns / 1e9);
  else
    printf("%g min", (double)ns / 60e9);
}

/* Under a timeline: '^' in each bucket where a mark was set (the marks
 * are listed in the header); nothing when there is no mark. */
static void print_mark_row(const stkr_agg *a, int ind) {
  char row[STKR_TL_BUCKETS + 1];
  size_t i, n = a->timeline_buckets, any = 0;

  if (a->n_marks == 0 || n == 0 || n > STKR_TL_BUCKETS ||
      a->timeline_bucket_ns == 0)
    return;
  memset(row, ' ', n);
  row[n] = '\0';
  for (i = 0; i < a->n_marks; i++) {
    uint64_t b = a->marks[i].t_ns / a->timeline_bucket_ns;
    if (b < n) {
      row[b] = '^';
      any++;
    }
  }
  if (any && a->timeline_trees > 1)
    /* Several launches, or a merge's inputs: a mark stands on its own
     * tree's line, beside the others' events only by that convention
     * (QA, session 38: one input's consent drawn before another input's
     * events, which never saw it). */
    printf("%*s %s  marks (each on its own process tree's line; %zu trees "
           "here, each from its own start)\n", ind, "", row,
           a->timeline_trees);
  else if (any)
    printf("%*s %s  marks\n", ind, "", row);
}

/* --timeline: the site's events per bucket as a row of block characters
 * (eight heights, scaled to the site's fullest bucket). */
static void print_timeline(const stkr_agg *a, const stkr_agg_site *s,
                           int ind) {
  static const char *const bars[] = {" ",  "\u2581", "\u2582", "\u2583",
                                     "\u2584", "\u2585", "\u2586", "\u2587",
                                     "\u2588"};
  uint64_t peak = 0;
  size_t i, n = a->timeline_buckets;

  if (s->timeline == NULL || n == 0)
    return;
  for (i = 0; i < n; i++)
    if (s->timeline[i] > peak)
      peak = s->timeline[i];
  printf("%*stimeline: 0-", ind, "");
  put_duration(a->timeline_bucket_ns * n);
  fputs(" after start, ", stdout);
  put_duration(a->timeline_bucket_ns);
  printf(" a character, peak %llu (%.4g/s)\n%*s|", (unsigned long long)peak,
         (double)peak * 1e9 / (double)a->timeline_bucket_ns, ind, "");
  for (i = 0; i < n; i++) {
    uint64_t v = s->timeline[i];
    /* Any event at all shows (height 1 at least), the peak is full (8):
     * QA, the peak was drawn at 7 of 8, and a peak of 1 at the lowest. */
    size_t h = v == 0      ? 0
               : peak <= 1 ? 8
                           : 1 + (size_t)((v - 1) * 7 / (peak - 1));
    fputs(bars[h], stdout);
  }
  fputs("|\n", stdout);
  print_mark_row(a, ind);
}

static int print_site(const stkr_agg *a, const stkr_agg_site *s,
                      const report_opts *o, int ind) {
  int err = 0;

  printf("%*s", ind, "");
  stkr__report_put_str(s->name);
  fputs(": ", stdout);
  stkr__report_put_events(s->count);
  printf(", %.2f%%, %zu stack%s\n", stkr__report_pct(s->count, a->events), s->n_stacks,
         s->n_stacks == 1 ? "" : "s");
  if (o->tree)
    err = stkr__report_tree(s, o, ind + 2);
  else
    print_stacks(s, o, ind + 2);
  print_payloads(s, o, ind + 2);
  if (o->timeline)
    print_timeline(a, s, ind + 2);
  return err;
}

/* Sites in --sort order (the agg ranks them by events, then name). */
static int site_order(const void *pa, const void *pb) {
  const stkr_agg_site *x = pa, *y = pb;
  int c = 0;

  if (g_sort == SORT_STACKS) c = stkr_cmp_u64(y->n_stacks, x->n_stacks);
  if (c == 0 && g_sort != SORT_NAME) c = stkr_cmp_u64(y->count, x->count);
  return c != 0 ? c : strcmp(x->name, y->name);
}

/* --by: one table of events per key instead of the sites. */
static int print_breakdown(const stkr_agg *a, const report_opts *o) {
  static const char *const what[] = {"site", "thread", "process", "payload",
                                     "module"};
  stkr_agg_row *rows;
  size_t n, i, shown;
  int err = stkr_agg_breakdown(a, o->by, &rows, &n);

  if (err != 0)
    return err;
  if (g_sort == SORT_STACKS || g_sort == SORT_NAME) {
    /* Rows come most events first; re-rank as asked (stable enough:
     * keys are distinct). */
    for (i = 1; i < n; i++)
      for (size_t k = i; k > 0; k--) {
        stkr_agg_row *x = &rows[k - 1], *y = &rows[k], t;
        bool swap = g_sort == SORT_NAME ? strcmp(x->key, y->key) > 0
                                        : x->n_stacks < y->n_stacks;
        if (!swap)
          break;
        t = *x;
        *x = *y;
        *y = t;
      }
  }
  shown = o->top && n > o->top ? o->top : n;
  printf("\n%s: %zu distinct\n", what[o->by], n);
  printf("  %10s  %7s  %6s  %5s  %s\n", "events", "%", "stacks", "sites",
         "key (most frequent site)");
  for (i = 0; i < shown; i++) {
    printf("  %10llu  %6.2f%%  %6zu  %5zu  ", (unsigned long long)rows[i].count,
           stkr__report_pct(rows[i].count, a->events), rows[i].n_stacks, rows[i].n_sites);
    fputs(rows[i].key, stdout); /* escaped already */
    fputs(" (", stdout);
    stkr__report_put_str(rows[i].top_site ? rows[i].top_site : "?");
    printf(": %llu)\n", (unsigned long long)rows[i].top_site_count);
  }
  if (shown < n) {
    uint64_t rest = 0;
    for (i = shown; i < n; i++)
      rest += rows[i].count;
    printf("  %10llu  %6.2f%%  ... %zu more\n", (unsigned long long)rest,
           stkr__report_pct(rest, a->events), n - shown);
  }
  stkr_agg_rows_free(rows, n);
  return 0;
}

static int print_sites(const stkr_agg *a, const report_opts *o) {
  const stkr_agg_site **v;
  category *c;
  size_t i, j, nc = 0;
  bool dotted = false;
  int err = 0;

  if (o->by != STKR_BY_SITE)
    return print_breakdown(a, o);
  if (g_sort != SORT_EVENTS)
    qsort(a->sites, a->n_sites, sizeof *a->sites, site_order);
  for (i = 0; i < a->n_sites; i++)
    dotted = dotted || strchr(a->sites[i].name, '.') != NULL;
  if (!dotted) {
    for (i = 0; i < a->n_sites && err == 0; i++) {
      putchar('\n');
      err = print_site(a, &a->sites[i], o, 0);
    }
    return err;
  }
  v = malloc(a->n_sites * sizeof *v);
  c = malloc(a->n_sites * sizeof *c);
  if (v == NULL || c == NULL) {
    free(v);
    free(c);
    return -ENOMEM;
  }
  for (i = 0; i < a->n_sites; i++)
    v[i] = &a->sites[i];
  qsort(v, a->n_sites, sizeof *v, site_by_cat);
  for (i = 0; i < a->n_sites; i = j) {
    c[nc].name = v[i]->name;
    c[nc].len = cat_len(v[i]->name);
    c[nc].count = 0;
    c[nc].stacks = 0;
    c[nc].first = i;
    for (j = i; j < a->n_sites && cat_len(v[j]->name) == c[nc].len &&
                memcmp(v[j]->name, c[nc].name, c[nc].len) == 0;
         j++) {
      c[nc].count += v[j]->count;
      c[nc].stacks += v[j]->n_stacks;
    }
    c[nc].n = j - i;
    nc++;
  }
  qsort(c, nc, sizeof *c, cat_order);
  for (i = 0; i < nc && err == 0; i++) {
    char *name = strndup(c[i].name, c[i].len);
    if (name == NULL) {
      err = -ENOMEM;
      break;
    }
    putchar('\n');
    stkr__report_put_str(name);
    free(name);
    fputs(": ", stdout);
    stkr__report_put_events(c[i].count);
    printf(", %.2f%%, %zu site%s\n", stkr__report_pct(c[i].count, a->events), c[i].n,
           c[i].n == 1 ? "" : "s");
    for (j = 0; j < c[i].n && err == 0; j++)
      err = print_site(a, v[c[i].first + j], o, 2);
  }
  free(v);
  free(c);
  return err;
}

/* ---- header --------------------------------------------------------------- */

/* "# TAG: N noun[s] what", when n is not 0 (plural: the noun's ending). */
static void put_loss(const char *tag, unsigned long long n, const char *noun,
                     const char *plural, const char *what) {
  if (n != 0)
    printf("# %s: %llu %s%s %s\n", tag, n, noun, n == 1 ? "" : plural, what);
}

/* Does mark a come before b in the list: by the time shown (after its
 * process's start, or its process tree's root's, as the timelines count:
 * agg_runs.h; across processes that started apart it is not the
 * recording clock's order), then by pid? */
static bool mark_before(const stkr_agg_mark *a, const stkr_agg_mark *b) {
  return a->t_ns != b->t_ns ? a->t_ns < b->t_ns : a->pid < b->pid;
}

static void print_header(const stkr_agg *a, const report_opts *o) {
  const stkr_agg_opts *f = &o->agg;

  printf("# ");
  stkr__report_put_events(a->events);
  /* Filtered: the processes the events shown came from (QA, session 22:
   * "36 events from 2 processes", all of one). */
  size_t np = a->filtered ? a->n_processes_with_events : a->n_processes;
  printf(" from %zu process%s, %zu site%s, %zu distinct stack%s\n",
         np, np == 1 ? "" : "es", a->n_sites,
         a->n_sites == 1 ? "" : "s", a->n_distinct,
         a->n_distinct == 1 ? "" : "s");
  if (a->drops)
    printf("# DROPPED: %llu event%s lost by the recorder, not counted below "
           "(ring full %llu, reentrant %llu, other %llu, write error %llu, "
           "exit %llu)\n",
           (unsigned long long)a->drops, a->drops == 1 ? " was" : "s were",
           (unsigned long long)a->drops_ring_full,
           (unsigned long long)a->drops_reentrant,
           (unsigned long long)a->drops_other,
           (unsigned long long)a->drops_write_error,
           (unsigned long long)a->drops_exit);
  char deleted[128], n_events[48];
  snprintf(deleted, sizeof deleted, "deleted by the disk cap%s; their events "
           "are not counted", stkr_cli_cap_events(a->cap_deleted_events,
                                                  n_events, sizeof n_events));
  put_loss("DELETED", a->segments_deleted, "older segment file", "s",
           deleted);
  put_loss("DAMAGED", a->damaged_batches, "batch", "es",
           "could not be read (named on stderr); their events are not "
           "counted");
  put_loss("INCONSISTENT", a->misnamed_segments, "segment file", "s",
           "named for another process or number than its header says "
           "(named on stderr): read under the file's name, its events may "
           "be another process's");
  put_loss("MISSING", a->missing_batches, "batch", "es",
           "(gaps in batch numbers)");
  put_loss("UNRESOLVED", a->unresolved_events, "event", "s",
           "refer to undefined sites, threads or stacks (shown as \"?\")");
  put_loss("NOT READ", a->unsupported_processes, "process", "es",
           "recorded in a newer format version");
  if (a->bare_events) /* not a loss: what `stackrec symbolize` can add */
    printf("# NOT SYMBOLIZED: %llu event%s of %zu stack%s with PCs only "
           "(image+offset: recorded offline, or first seen as the recording "
           "ended); 'stackrec symbolize' names them\n",
           (unsigned long long)a->bare_events, a->bare_events == 1 ? "" : "s",
           a->bare_stacks, a->bare_stacks == 1 ? "" : "s");
  if (a->live_processes)
    printf("# LIVE: %zu process%s still being written; the last, "
           "incomplete batch is not counted\n",
           a->live_processes, a->live_processes == 1 ? " is" : "es are");
  /* The same cut without a running writer is no live recording (QA: a
   * dead writer's torn file said LIVE). */
  if (a->cut_processes)
    printf("# CUT OFF: %zu process%s last batch ends mid-write and is not "
           "counted; no writer runs here (it stopped mid-batch, or the files "
           "were copied while it wrote)\n",
           a->cut_processes, a->cut_processes == 1 ? "'s" : "es'");
  stkr_cli_buf desc = {0};
  if (stkr__filter_describe(f, &desc) && desc.err == 0) {
    fputs("# filters: ", stdout);
    stkr_cli_put_escaped(stdout, (const uint8_t *)desc.p, desc.len);
    printf(": %llu of %llu events\n", (unsigned long long)a->events,
           (unsigned long long)a->events_read);
  }
  stkr_cli_buf_free(&desc);
  if (a->marks_read) {
    /* Marks are the events' context, never counted as events. The first
     * ten by the time shown (they are kept by process: QA, session 22,
     * found 1.5 s listed before 1.0 s). */
    size_t i, shown = a->n_marks < 10 ? a->n_marks : 10;
    const stkr_agg_mark *first[10];
    printf("# marks (not counted as events): %llu", (unsigned long long)a->marks_read);
    for (i = 0; i < a->n_marks; i++) {
      const stkr_agg_mark *m = &a->marks[i];
      size_t k = i < shown ? i : shown;
      if (k == shown && !mark_before(m, first[shown - 1])) continue;
      if (k == shown) k--;
      for (; k > 0 && mark_before(m, first[k - 1]); k--) first[k] = first[k - 1];
      first[k] = m;
    }
    for (i = 0; i < shown; i++) {
      printf("%s", i ? ", " : ": ");
      put_seconds((double)first[i]->t_ns / 1e9);
      printf(" s ");
      stkr__report_put_str(first[i]->name);
      if (first[i]->external)
        printf(" (stackrec mark)");
      else
        printf(" (pid %u)", (unsigned)first[i]->pid);
    }
    if (a->n_marks > shown || a->marks_not_kept)
      printf(", ...");
    putchar('\n');
  }
  if (a->events && !o->html)
    printf("# percentages: categories and sites of all %llu events shown, "
           "%s\n",
           (unsigned long long)a->events,
           o->tree ? "tree nodes of their site" : "stacks of their site");
}

/* ---- the command --------------------------------------------------------- */

static int write_html(const stkr_agg *a, const report_opts *o,
                      char *const *inputs, int n, const char *banner) {
  char title[512];
  size_t len;
  FILE *f;
  int i, err;

  len = (size_t)snprintf(title, sizeof title, "stackrec report:");
  for (i = 0; i < n && len < sizeof title; i++)
    len += (size_t)snprintf(title + len, sizeof title - len, " %s",
                            inputs[i]);
  if ((f = stkr_cli_create("report", o->html)) == NULL)
    return STKR_CLI_DATA_LOST;
  err = stkr_html_write_banner(f, a, title, banner);
  if (stkr_cli_close_output("report", o->html, f, err) != 0)
    return STKR_CLI_DATA_LOST;
  printf("# HTML report written to ");
  stkr__report_put_str(o->html);
  putchar('\n');
  return 0;
}

/* Parse the options into *o. @return -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, report_opts *o) {
  enum { O_TOP = 256, O_TREE, O_HTML, O_SORT, O_BY, O_TIMELINE };
  const stkr_cli_opt opts[] = {
      {"sort", O_SORT, STKR_CLI_VALUE, NULL, NULL},
      {"by", O_BY, STKR_CLI_VALUE, NULL, NULL},
      {"timeline", O_TIMELINE, 0, NULL, &o->timeline},
      {"top", O_TOP, STKR_CLI_VALUE, NULL, NULL},
      {"tree", O_TREE, 0, NULL, &o->tree},
      {"html", O_HTML, STKR_CLI_VALUE, &o->html, NULL},
      {0}};
  static const char *const sort_names[] = {"events", "stacks", "name", NULL};
  int sort = SORT_EVENTS, by = STKR_BY_SITE;
  const stkr_cli_choice choices[] = {
      {O_SORT, sort_names, &sort}, {O_BY, stkr_agg_by_names, &by}, {0}};
  stkr_cli_getopt_state gopt = {
      .cmd = "report", .opts = opts, .more_opts = stkr__filter_opts,
      .choices = choices,
      .help = {report_help, stkr__filter_help, report_help_more,
               stkr_cli_exit_help}};
  int c, err;

  while ((c = stkr__filter_getopt(&gopt, argc, argv, &o->agg)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case O_TOP: {
      char *end;
      unsigned long long v;
      errno = 0;
      v = strtoull(optarg, &end, 10);
      if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-')
        return stkr_cli_usage_error("report", "--top '%s' is not a count",
                                    optarg);
      o->top = (size_t)v;
      break;
    }
    }
  }
  o->sort = (sort_key)sort; /* in the order of sort_names */
  o->by = (stkr_agg_by)by;
  if ((err = stkr__filter_args_end("report", &o->agg, argc)) >= 0)
    return err;
  if (o->by != STKR_BY_SITE && (o->tree || o->html != NULL))
    return stkr_cli_usage_error("report", "--by goes with neither --tree "
                                          "nor --html");
  /* A module is its whole stack's (attrib.h): without the frames
   * --app-only drops, every call is the app's (QA, session 33). */
  if (o->by == STKR_BY_MODULE && o->agg.app_only)
    return stkr_cli_usage_error("report", "--by module does not go with "
                                          "--app-only: a call's module is "
                                          "found on its whole stack");
  return -1;
}

int stkr_cli_report(int argc, char **argv) {
  report_opts o;
  stkr_cli_progress prog;
  stkr_reader *r;
  stkr_agg *a = NULL;
  char banner[1024];
  int err, status;

  memset(&o, 0, sizeof o);
  o.top = 10;
  if ((status = parse_args(argc, argv, &o)) >= 0)
    return status;
  g_sort = o.sort;
  stkr_agg_by_opts(o.by, &o.agg);
  if ((status = stkr_cli_check_output("report", "--html", o.html,
                                      argv + optind, argc - optind)) != 0)
    return status;
  status = stkr_cli_open("report", argv + optind, argc - optind, true, &r);
  if (status != 0)
    return status;

  stkr_cli_progress_init(&prog, "report");
  err = stkr_agg_build(r, &o.agg, stkr_cli_progress_cb, &prog, &a);
  stkr_cli_progress_done(&prog);
  if (err == -EINVAL) {
    stkr_reader_free(r);
    return stkr_cli_usage_error("report", "invalid pattern in --site or "
                                          "--thread");
  }
  if (err != 0) {
    fprintf(stderr, "stackrec report: reading failed: %s\n", strerror(-err));
    stkr_reader_free(r);
    return STKR_CLI_DATA_LOST;
  }
  /* First of all: whether what follows is the whole story. */
  if (stkr_cli_incomplete_line(r, banner, sizeof banner) > 0)
    printf("# %s\n", banner);
  print_header(a, &o);
  if (o.html != NULL) {
    status = write_html(a, &o, argv + optind, argc - optind, banner);
  } else {
    if (a->events == 0)
      puts(a->events_read ? "# no event matches the filters"
                          : "# no events");
    if (print_sites(a, &o) != 0 ||
        (o.by == STKR_BY_SITE && stkr__hangs_print(a, o.top) != 0)) {
      fprintf(stderr, "stackrec report: %s\n", strerror(ENOMEM));
      status = STKR_CLI_DATA_LOST;
    }
  }
  status = stkr_cli_finish("report", r, status);
  stkr_agg_free(a);
  stkr_reader_free(r);
  return status;
}
