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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/html.h"

static const char report_help[] =
    "Usage: stackrec report [OPTIONS] DIR|FILE...\n"
    "\n"
    "Which sites fired, how often, and from which call paths. Sites are\n"
    "ranked by events; under each, its distinct call stacks (innermost frame\n"
    "first) with their events and share of the site, most first. Site names\n"
    "of the form CATEGORY.API (as 'stackrec record' writes them) are grouped\n"
    "by category. Stacks are merged by content: the same frames (function\n"
    "names; image+offset where unknown) at the same site count as one stack\n"
    "across processes, runs and recordings given together.\n"
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
    "Options:\n"
    "  --site GLOB       only sites whose name matches (fnmatch(3), e.g.\n"
    "                    'files.*')\n"
    "  --thread NAME|TID only threads whose name matches NAME (a glob) or\n"
    "                    whose OS thread id is TID\n"
    "  --from SEC        only events at least SEC seconds after their\n"
    "                    process's first event (decimals allowed)\n"
    "  --to SEC          only events less than SEC seconds after it\n"
    "  --app-only        keep only the app's own frames (its executable and\n"
    "                    STACKREC_APP_PATHS); a stack without any keeps its\n"
    "                    innermost frame; unsymbolized stacks are kept whole\n"
    "  --top N           at most N stacks per site (in --tree: N callees per\n"
    "                    node), then one line for the rest; 0: all\n"
    "                    (default 10)\n"
    "  --tree            a caller->callee tree per site instead: outermost\n"
    "                    frame first, each node with its events and share\n"
    "                    of the site\n"
    "  --html FILE       write the self-contained HTML report (flame graph\n"
    "                    per site, site table, drop summary) to FILE instead\n"
    "                    of the stacks; the '#' lines still go to stdout\n"
    "  -h, --help        this help\n"
    "\n";

typedef struct report_opts {
  stkr_agg_opts agg;
  bool tree;
  size_t top;
  const char *html;
  const char *site, *thread; /* as given, for the filters line */
  const char *from, *to;
} report_opts;

/* ---- output helpers -------------------------------------------------------- */

static void put_str(const char *s) {
  stkr_cli_put_escaped(stdout, (const uint8_t *)s, strlen(s));
}

static void put_events(uint64_t n) {
  printf("%llu event%s", (unsigned long long)n, n == 1 ? "" : "s");
}

static double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* One frame: FUNCTION (FILE:LINE), IMAGE+0xOFF or 0xPC; file and line
 * only if show_file / show_line. */
static void put_frame(const stkr_frame *f, bool show_file, bool show_line,
                      bool inlined) {
  if (f->function != NULL) {
    put_str(f->function);
    if (show_file && f->file != NULL) {
      fputs(" (", stdout);
      put_str(f->file);
      if (show_line && f->line)
        printf(":%u", (unsigned)f->line);
      putchar(')');
    }
  } else {
    char label[1024];
    put_str(stkr_agg_frame_label(f, label, sizeof label));
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
    put_events(k->count);
    printf(", %.2f%%", pct(k->count, s->count));
    if (k->n_pids > 1)
      printf(", in %u processes", (unsigned)k->n_pids);
    if (k->truncated)
      fputs(", walk stopped at max depth", stdout);
    fputs(":\n", stdout);
    if (k->n_frames == 0)
      printf("%*s(no stack)\n", ind + 4, "");
    for (f = 0; f < k->n_frames; f++) {
      printf("%*s", ind + 4, "");
      put_frame(&k->frames[f], true, true, k->frames[f].inlined);
      putchar('\n');
    }
  }
  for (; i < s->n_stacks; i++)
    rest += s->stacks[i]->count;
  if (n < s->n_stacks) {
    printf("%*s... %zu more stack%s: ", ind, "", s->n_stacks - n,
           s->n_stacks - n == 1 ? "" : "s");
    put_events(rest);
    printf(", %.2f%%\n", pct(rest, s->count));
  }
}

/* ---- tree: caller -> callee ------------------------------------------------ */

/* Frame d of k counted from the outermost, or NULL past its end. */
static const stkr_frame *root_at(const stkr_agg_stack *k, size_t d) {
  return d < k->n_frames ? &k->frames[k->n_frames - 1 - d] : NULL;
}

static int cmp_label_at(const stkr_agg_stack *x, const stkr_agg_stack *y,
                        size_t d) {
  const stkr_frame *fx = root_at(x, d), *fy = root_at(y, d);
  char lx[1024], ly[1024];

  if (fx == NULL || fy == NULL)
    return (fx != NULL) - (fy != NULL);
  if (fx->function != NULL && fy->function != NULL)
    return fx->function == fy->function ? 0 /* interned by agg.c */
                                        : strcmp(fx->function, fy->function);
  return strcmp(stkr_agg_frame_label(fx, lx, sizeof lx),
                stkr_agg_frame_label(fy, ly, sizeof ly));
}

/* Root-first, label by label: equal call paths become neighbours. */
static int cmp_root_first(const void *pa, const void *pb) {
  const stkr_agg_stack *x = *(const stkr_agg_stack *const *)pa;
  const stkr_agg_stack *y = *(const stkr_agg_stack *const *)pb;
  size_t d;
  int c;

  for (d = 0; d < x->n_frames || d < y->n_frames; d++)
    if ((c = cmp_label_at(x, y, d)) != 0)
      return c;
  return 0;
}

typedef struct tgroup {
  size_t lo, hi; /* range of the sorted stacks */
  uint64_t count;
} tgroup;

static int group_order(const void *pa, const void *pb) {
  const tgroup *x = pa, *y = pb;

  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  return x->lo < y->lo ? -1 : x->lo > y->lo; /* label order */
}

typedef struct tctx {
  const stkr_agg_stack **v;
  uint64_t site_count;
  int width; /* digits of site_count */
  int ind;
  size_t top;
} tctx;

/* The nodes at depth d for stacks [lo, hi) (which share frames 0..d-1).
 * @return 0 or -ENOMEM. */
static int tree_level(const tctx *t, size_t lo, size_t hi, size_t d) {
  tgroup *g;
  size_t ng = 0, i, j, shown;
  uint64_t rest = 0;
  int err = 0;

  g = malloc((hi - lo) * sizeof *g);
  if (g == NULL)
    return -ENOMEM;
  for (i = lo; i < hi; i = j) {
    for (j = i + 1; j < hi && cmp_label_at(t->v[i], t->v[j], d) == 0; j++)
      ;
    if (root_at(t->v[i], d) == NULL && d > 0)
      continue; /* stacks that end at the parent: counted there */
    g[ng].lo = i;
    g[ng].hi = j;
    g[ng].count = 0;
    for (; i < j; i++)
      g[ng].count += t->v[i]->count;
    ng++;
  }
  qsort(g, ng, sizeof *g, group_order);
  shown = t->top && ng > t->top ? t->top : ng;
  for (i = 0; i < shown && err == 0; i++) {
    const stkr_frame *f = root_at(t->v[g[i].lo], d);
    bool same_file = true, same_line = true, inlined = true;

    printf("%*s%7.2f%%  %*llu  %*s", t->ind, "", pct(g[i].count, t->site_count),
           t->width, (unsigned long long)g[i].count, (int)(2 * d), "");
    if (f == NULL) {
      fputs("(no stack)\n", stdout);
      continue;
    }
    /* File and line only where every stack of the node agrees. */
    for (j = g[i].lo; j < g[i].hi; j++) {
      const stkr_frame *o = root_at(t->v[j], d);
      same_file = same_file && o->file == f->file;
      same_line = same_line && o->line == f->line;
      inlined = inlined && o->inlined;
    }
    put_frame(f, same_file, same_line, inlined);
    putchar('\n');
    err = tree_level(t, g[i].lo, g[i].hi, d + 1);
  }
  for (i = shown; i < ng; i++)
    rest += g[i].count;
  if (shown < ng && err == 0) {
    printf("%*s%7.2f%%  %*llu  %*s... %zu more\n", t->ind, "",
           pct(rest, t->site_count), t->width, (unsigned long long)rest,
           (int)(2 * d), "", ng - shown);
  }
  free(g);
  return err;
}

static int print_tree(const stkr_agg_site *s, const report_opts *o, int ind) {
  tctx t;
  char digits[32];
  int err;

  if (s->n_stacks == 0)
    return 0;
  t.v = malloc(s->n_stacks * sizeof *t.v);
  if (t.v == NULL)
    return -ENOMEM;
  memcpy(t.v, s->stacks, s->n_stacks * sizeof *t.v);
  qsort(t.v, s->n_stacks, sizeof *t.v, cmp_root_first);
  t.site_count = s->count;
  t.width = snprintf(digits, sizeof digits, "%llu",
                     (unsigned long long)s->count);
  t.ind = ind;
  t.top = o->top;
  err = tree_level(&t, 0, s->n_stacks, 0);
  free(t.v);
  return err;
}

/* ---- sites and categories --------------------------------------------------- */

typedef struct category {
  const char *name; /* the first site's name; len bytes of it */
  size_t len;
  uint64_t count;
  size_t first;     /* index into the sorted site order */
  size_t n;
} category;

static size_t cat_len(const char *site) {
  const char *dot = strchr(site, '.');
  return dot ? (size_t)(dot - site) : strlen(site);
}

static int cat_order(const void *pa, const void *pb) {
  const category *x = pa, *y = pb;
  size_t n = x->len < y->len ? x->len : y->len;
  int c;

  if (x->count != y->count)
    return x->count > y->count ? -1 : 1;
  if ((c = memcmp(x->name, y->name, n)) != 0)
    return c;
  return x->len < y->len ? -1 : x->len > y->len;
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

static int print_site(const stkr_agg *a, const stkr_agg_site *s,
                      const report_opts *o, int ind) {
  printf("%*s", ind, "");
  put_str(s->name);
  fputs(": ", stdout);
  put_events(s->count);
  printf(", %.2f%%, %zu stack%s\n", pct(s->count, a->events), s->n_stacks,
         s->n_stacks == 1 ? "" : "s");
  if (o->tree)
    return print_tree(s, o, ind + 2);
  print_stacks(s, o, ind + 2);
  return 0;
}

static int print_sites(const stkr_agg *a, const report_opts *o) {
  const stkr_agg_site **v;
  category *c;
  size_t i, j, nc = 0;
  bool dotted = false;
  int err = 0;

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
    c[nc].first = i;
    for (j = i; j < a->n_sites && cat_len(v[j]->name) == c[nc].len &&
                memcmp(v[j]->name, c[nc].name, c[nc].len) == 0;
         j++)
      c[nc].count += v[j]->count;
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
    put_str(name);
    free(name);
    fputs(": ", stdout);
    put_events(c[i].count);
    printf(", %.2f%%, %zu site%s\n", pct(c[i].count, a->events), c[i].n,
           c[i].n == 1 ? "" : "s");
    for (j = 0; j < c[i].n && err == 0; j++)
      err = print_site(a, v[c[i].first + j], o, 2);
  }
  free(v);
  free(c);
  return err;
}

/* ---- header --------------------------------------------------------------- */

static void print_header(const stkr_agg *a, const report_opts *o) {
  bool filtered = o->site || o->thread || o->from || o->to || o->agg.app_only;

  printf("# ");
  put_events(a->events);
  printf(" from %zu process%s, %zu site%s, %zu distinct stack%s\n",
         a->n_processes, a->n_processes == 1 ? "" : "es", a->n_sites,
         a->n_sites == 1 ? "" : "s", a->n_stacks, a->n_stacks == 1 ? "" : "s");
  if (a->drops)
    printf("# DROPPED: %llu event%s lost by the recorder, not counted below "
           "(ring full %llu, reentrant %llu, other %llu, write error %llu)\n",
           (unsigned long long)a->drops, a->drops == 1 ? " was" : "s were",
           (unsigned long long)a->drops_ring_full,
           (unsigned long long)a->drops_reentrant,
           (unsigned long long)a->drops_other,
           (unsigned long long)a->drops_write_error);
  if (a->segments_deleted)
    printf("# DELETED: %llu older segment file%s deleted by the disk cap; "
           "their events are not counted\n",
           (unsigned long long)a->segments_deleted,
           a->segments_deleted == 1 ? "" : "s");
  if (a->damaged_batches)
    printf("# DAMAGED: %llu batch%s could not be read (named on stderr); "
           "their events are not counted\n",
           (unsigned long long)a->damaged_batches,
           a->damaged_batches == 1 ? "" : "es");
  if (a->missing_batches)
    printf("# MISSING: %llu batch%s (gaps in batch numbers)\n",
           (unsigned long long)a->missing_batches,
           a->missing_batches == 1 ? "" : "es");
  if (a->unresolved_events)
    printf("# UNRESOLVED: %llu event%s refer to undefined sites, threads or "
           "stacks (shown as \"?\")\n",
           (unsigned long long)a->unresolved_events,
           a->unresolved_events == 1 ? "" : "s");
  if (a->unsupported_processes)
    printf("# NOT READ: %zu process%s recorded in a newer format version\n",
           a->unsupported_processes,
           a->unsupported_processes == 1 ? "" : "es");
  if (a->live_processes)
    printf("# LIVE: %zu process%s still being written; the last, "
           "incomplete batch is not counted\n",
           a->live_processes, a->live_processes == 1 ? " is" : "es are");
  if (filtered) {
    fputs("# filters:", stdout);
    if (o->site) {
      fputs(" site ", stdout);
      put_str(o->site);
    }
    if (o->thread) {
      fputs(" thread ", stdout);
      put_str(o->thread);
    }
    if (o->from || o->to) {
      printf(" time [%s s, ", o->from ? o->from : "0");
      if (o->to)
        printf("%s s)", o->to);
      else
        fputs("end)", stdout);
    }
    if (o->agg.app_only)
      fputs(" app-only", stdout);
    printf(": %llu of %llu events\n", (unsigned long long)a->events,
           (unsigned long long)a->events_read);
  }
  if (a->events && !o->html)
    printf("# percentages: categories and sites of all %llu events shown, "
           "%s\n",
           (unsigned long long)a->events,
           o->tree ? "tree nodes of their site" : "stacks of their site");
}

/* ---- the command --------------------------------------------------------- */

static int parse_seconds(const char *s, double *out) {
  char *end;
  double v;

  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  return 0;
}

static void on_progress(uint64_t events, void *arg) {
  stkr_cli_progress_update(arg, events, NULL);
}

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
  f = fopen(o->html, "w");
  if (f == NULL) {
    fprintf(stderr, "stackrec report: cannot create %s: %s\n", o->html,
            strerror(errno));
    return STKR_CLI_DATA_LOST;
  }
  err = stkr_html_write_banner(f, a, title, banner);
  if (fclose(f) != 0 && err == 0)
    err = -errno;
  if (err != 0) {
    fprintf(stderr, "stackrec report: writing %s: %s\n", o->html,
            strerror(-err));
    return STKR_CLI_DATA_LOST;
  }
  printf("# HTML report written to ");
  put_str(o->html);
  putchar('\n');
  return 0;
}

int stkr_cli_report(int argc, char **argv) {
  enum { O_SITE = 256, O_THREAD, O_FROM, O_TO, O_APP, O_TOP, O_TREE, O_HTML };
  static const struct option longopts[] = {
      {"site", required_argument, NULL, O_SITE},
      {"thread", required_argument, NULL, O_THREAD},
      {"from", required_argument, NULL, O_FROM},
      {"to", required_argument, NULL, O_TO},
      {"app-only", no_argument, NULL, O_APP},
      {"top", required_argument, NULL, O_TOP},
      {"tree", no_argument, NULL, O_TREE},
      {"html", required_argument, NULL, O_HTML},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  report_opts o;
  stkr_cli_progress prog;
  stkr_reader *r;
  stkr_agg *a = NULL;
  char banner[1024];
  int c, err, status;

  memset(&o, 0, sizeof o);
  o.top = 10;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case O_SITE:
      o.site = o.agg.site_glob = optarg;
      break;
    case O_THREAD:
      if (optarg[0] == '\0')
        return stkr_cli_usage_error("report", "--thread needs a name or id");
      o.thread = o.agg.thread_glob = optarg;
      break;
    case O_FROM:
      if (parse_seconds(optarg, &o.agg.from_s) != 0)
        return stkr_cli_usage_error(
            "report", "--from '%s' is not a number of seconds >= 0", optarg);
      o.from = optarg;
      break;
    case O_TO:
      if (parse_seconds(optarg, &o.agg.to_s) != 0 || o.agg.to_s <= 0)
        return stkr_cli_usage_error(
            "report", "--to '%s' is not a number of seconds > 0", optarg);
      o.to = optarg;
      break;
    case O_APP:
      o.agg.app_only = true;
      break;
    case O_TOP: {
      char *end;
      unsigned long long v;
      errno = 0;
      v = strtoull(optarg, &end, 10);
      if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-')
        return stkr_cli_usage_error("report", "--top '%s' is not a count",
                                    optarg);
      o.top = (size_t)v;
      break;
    }
    case O_TREE:
      o.tree = true;
      break;
    case O_HTML:
      o.html = optarg;
      break;
    case 'h':
      fputs(report_help, stdout);
      fputs(stkr_cli_exit_help, stdout);
      return stkr_cli_flush("report");
    case ':':
      return stkr_cli_usage_error("report", "option '%s' needs a value",
                                  argv[optind - 1]);
    default:
      return stkr_cli_usage_error("report", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (o.to && o.agg.to_s <= o.agg.from_s)
    return stkr_cli_usage_error("report", "--to %s is not after --from %s",
                                o.to, o.from ? o.from : "0");
  if (optind >= argc)
    return stkr_cli_usage_error("report", "no DIR or FILE given");
  status = stkr_cli_open("report", argv + optind, argc - optind, true, &r);
  if (status != 0)
    return status;

  stkr_cli_progress_init(&prog, "report");
  err = stkr_agg_build(r, &o.agg, on_progress, &prog, &a);
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
    if (print_sites(a, &o) != 0) {
      fprintf(stderr, "stackrec report: %s\n", strerror(ENOMEM));
      status = STKR_CLI_DATA_LOST;
    }
  }
  if (status == 0)
    status = stkr_cli_status(r);
  if (stkr_cli_flush("report") != 0)
    status = STKR_CLI_DATA_LOST;
  stkr_agg_free(a);
  stkr_reader_free(r);
  return status;
}
