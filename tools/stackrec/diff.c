/*
 * diff.c: `stackrec diff [OPTIONS] BASE NEW`, a CI gate between two builds'
 * soak recordings (see diff.h): call paths NEW adds, paths gone in NEW, and
 * paths whose rate changed beyond --threshold; exit 1 when NEW adds a path
 * to a sensitive site.
 *
 * Each recording is aggregated as `report` does (agg.h: one hash probe per
 * event, stacks resolved once per distinct key), then each aggregated
 * stack is reduced to its path key (site, module, function + file base
 * name per frame) and counted into one table for both sides.
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/attrib.h"
#include "tools/stackrec/boots.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/diff.h"

/* ---- the path table ------------------------------------------------------ */

/* Append s and its NUL to the key buffer. */
static int key_put(uint8_t **buf, size_t *cap, size_t *len, const char *s) {
  size_t n = strlen(s) + 1;

  if (stkr_grow((void **)buf, cap, *len + n, 1) != 0)
    return -ENOMEM;
  memcpy(*buf + *len, s, n);
  *len += n;
  return 0;
}

/* The key of stack s: site, module, then per frame its label (function,
 * or image+0xoffset) and its file's base name ("" if unknown). */
static int path_key(const stkr_agg_stack *s, const char *module, uint8_t **buf,
                    size_t *cap, size_t *len) {
  char label[512];
  size_t i;
  int err;

  *len = 0;
  if ((err = key_put(buf, cap, len, s->site)) != 0 ||
      (err = key_put(buf, cap, len, module)) != 0)
    return err;
  for (i = 0; i < s->n_frames; i++) {
    const stkr_frame *f = &s->frames[i];

    stkr_agg_frame_label(f, label, sizeof label);
    if ((err = key_put(buf, cap, len, label)) != 0 ||
        (err = key_put(buf, cap, len,
                       f->file ? stkr_attrib_base_name(f->file) : "")) != 0)
      return err;
  }
  return 0;
}

/* The path with this key, created (count 0) if new. NULL: no memory. */
static stkr_diff_path *path_get(stkr_diff *d, const uint8_t *key, size_t len,
                                const stkr_agg_stack *s, const char *module) {
  uint64_t h = stkr_hash_bytes(STKR_HASH_SEED, key, len);
  stkr_diff_path *p;
  uint8_t *copy;
  size_t pos, ix;

  for (ix = stkr_index_first(&d->path_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&d->path_ix, h, &pos)) {
    p = &d->paths[ix];
    if (p->key_len == len && memcmp(p->key, key, len) == 0)
      return p;
  }
  if (stkr_grow((void **)&d->paths, &d->cap_paths, d->n_paths + 1,
                sizeof(*d->paths)) != 0 ||
      stkr_index_reserve(&d->path_ix, d->n_paths + 1) != 0 ||
      (copy = malloc(len)) == NULL)
    return NULL;
  memcpy(copy, key, len);
  p = &d->paths[d->n_paths];
  memset(p, 0, sizeof(*p));
  p->site = s->site;
  p->module = module;
  p->frames = s->frames;
  p->n_frames = s->n_frames;
  p->key = copy;
  p->key_len = len;
  (void)stkr_index_add(&d->path_ix, h, d->n_paths++); /* reserved above */
  return p;
}

int stkr_diff_add(stkr_diff *d, int side, const stkr_agg *a,
                  const stkr_modmap *map) {
  uint8_t *key = NULL;
  size_t cap = 0, len, i;
  int err = 0;

  for (i = 0; i < a->n_stacks && err == 0; i++) {
    const stkr_agg_stack *s = &a->stacks[i];
    const char *module = stkr_attrib_module(map, s->frames, s->n_frames, NULL);
    stkr_diff_path *p;

    if ((err = path_key(s, module, &key, &cap, &len)) != 0)
      break;
    if ((p = path_get(d, key, len, s, module)) == NULL) {
      err = -ENOMEM;
      break;
    }
    p->count[side] += s->count;
  }
  free(key);
  return err;
}

/* ---- comparing ----------------------------------------------------------- */

static bool is_sensitive(const stkr_diff *d, const char *site) {
  size_t i;

  if (d->n_sensitive == 0)
    return true;
  for (i = 0; i < d->n_sensitive; i++)
    if (fnmatch(d->sensitive[i], site, 0) == 0)
      return true;
  return false;
}

/* Sensitive first, then most events (NEW, else BASE), then by key. */
static int by_weight(const void *x, const void *y) {
  const stkr_diff_path *a = *(stkr_diff_path *const *)x,
                       *b = *(stkr_diff_path *const *)y;
  uint64_t ca = a->count[1] ? a->count[1] : a->count[0];
  uint64_t cb = b->count[1] ? b->count[1] : b->count[0];
  int c = stkr_cmp_u64(b->sensitive, a->sensitive);

  if (c == 0) c = stkr_cmp_u64(cb, ca);
  return c != 0 ? c : stkr_cmp_bytes(a->key, a->key_len, b->key, b->key_len);
}

/* The largest relative change first. */
static int by_change(const void *x, const void *y) {
  const stkr_diff_path *a = *(stkr_diff_path *const *)x,
                       *b = *(stkr_diff_path *const *)y;
  double ra = a->per_min[1] / a->per_min[0], rb = b->per_min[1] / b->per_min[0];

  /* A fall to a quarter is as big a change as a rise to four times. */
  if (ra < 1)
    ra = 1 / ra;
  if (rb < 1)
    rb = 1 / rb;
  if (ra != rb)
    return ra > rb ? -1 : 1;
  return by_weight(x, y);
}

int stkr_diff_compare(stkr_diff *d) {
  size_t i;

  d->added = calloc(d->n_paths + 1, sizeof(*d->added));
  d->gone = calloc(d->n_paths + 1, sizeof(*d->gone));
  d->changed = calloc(d->n_paths + 1, sizeof(*d->changed));
  if (d->added == NULL || d->gone == NULL || d->changed == NULL)
    return -ENOMEM;
  d->rates_unknown =
      d->side[0].cap_segments != 0 || d->side[1].cap_segments != 0;
  for (i = 0; i < d->n_paths; i++) {
    stkr_diff_path *p = &d->paths[i];
    int s;

    for (s = 0; s < 2; s++)
      p->per_min[s] = (double)p->count[s] / d->side[s].minutes;
    p->sensitive = is_sensitive(d, p->site);
    if (p->count[0] == 0) {
      d->added[d->n_added++] = p;
      d->n_added_sensitive += p->sensitive;
    } else if (p->count[1] == 0) {
      d->gone[d->n_gone++] = p;
    } else if (!d->rates_unknown &&
               (p->count[0] >= d->min_count || p->count[1] >= d->min_count) &&
               (p->per_min[1] - p->per_min[0] >
                    d->threshold_pct / 100 * p->per_min[0] ||
                p->per_min[0] - p->per_min[1] >
                    d->threshold_pct / 100 * p->per_min[0])) {
      d->changed[d->n_changed++] = p;
    }
  }
  qsort(d->added, d->n_added, sizeof(*d->added), by_weight);
  qsort(d->gone, d->n_gone, sizeof(*d->gone), by_weight);
  qsort(d->changed, d->n_changed, sizeof(*d->changed), by_change);
  return 0;
}

void stkr_diff_free(stkr_diff *d) {
  STKR_FREE_EACH(d->paths, d->n_paths, key);
  free(d->paths);
  stkr_index_free(&d->path_ix);
  free(d->added);
  free(d->gone);
  free(d->changed);
}

/* ---- the command --------------------------------------------------------- */

static const char diff_help[] =
    "Usage: stackrec diff [OPTIONS] BASE NEW\n"
    "\n"
    "Compare the call paths of two recordings (e.g. soak runs of two builds):\n"
    "the paths NEW adds, those gone in NEW, and those whose rate (events per\n"
    "minute of recording time: how long any of its processes recorded, so a\n"
    "merge of runs made hours apart counts the runs, not the hours between;\n"
    "under one second counts as one second: compare runs of seconds or more)\n"
    "changed beyond the threshold (not compared when a side lost segments\n"
    "to the disk cap: their times are unknown). A call path is\n"
    "a site, the module responsible for the stack (its first frame outside\n"
    "the system's libraries) and the stack's frames, compared by function\n"
    "name and source file (base name), not by line or address, so that two\n"
    "builds match; frames without a function name compare by image+offset.\n"
    "Marks are not call paths.\n"
    "\n"
    "Options:\n"
    "  --format text|json|html  output (default text)\n"
    "  -o FILE            write there instead of stdout\n"
    "  --threshold PCT    report a rate change of more than PCT percent\n"
    "                     (default 50)\n"
    "  --min-count N      ... only for paths with at least N events on one\n"
    "                     side (default 5)\n"
    "  --sensitive GLOB   sites whose new paths fail the gate (fnmatch(3),\n"
    "                     repeatable; default: every site, since every site\n"
    "                     is a hook on an API someone chose to watch)\n"
    "  --module-map FILE  name modules by a module map (see `compliance`)\n"
    "\n"
    "Exit status: 0 no new path to a sensitive site; 1 NEW adds one (the\n"
    "gate fails), or an input lost data (damaged: the comparison cannot be\n"
    "trusted) or recorded no process (NOT COMPARED); 2 usage; 3 an input\n"
    "cannot be opened.\n";

/* One process's span on the recording's time line, and its boot
 * (boots.h; STKR_BOOT_UNKNOWN: not known, all such taken as one). */
typedef struct span {
  uint64_t boot, from, to;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;

  return stkr_cmp_u64_pair(x->boot, y->boot, x->from, y->from);
}

/* The recording time of r in ns: how long at least one of its processes
 * was recording, i.e. the union of the processes' spans (start, else first
 * event, to last event), per machine boot, summed over boots. A merge of
 * two runs made minutes apart counts their seconds, not the gap (QA: every
 * path's rate fell by 97%); processes of other machines, whose clocks are
 * unrelated, are never laid over each other. */
static uint64_t recording_ns(stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), k = 0, i;
  span *v = malloc((n ? n : 1) * sizeof *v);
  uint64_t total = 0, from = 0, to = 0;
  stkr_boots boots;

  if (v == NULL || stkr_boots_init(&boots, r) != 0) {
    free(v);
    return 0;
  }
  for (i = 0; i < n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    uint64_t origin = p->have_header && p->start_mono_ns ? p->start_mono_ns
                                                         : p->first_ts_ns;
    /* On the one time line: a machine's namespaces overlap (review). */
    if (p->events != 0 && p->last_ts_ns > origin)
      v[k++] = (span){boots.boot[i], stkr_boots_place(&boots, i, NULL, origin),
                      stkr_boots_place(&boots, i, NULL, p->last_ts_ns)};
  }
  stkr_boots_free(&boots);
  qsort(v, k, sizeof *v, span_cmp);
  for (i = 0; i < k; i++) {
    if (i > 0 && v[i].boot == v[i - 1].boot && v[i].from <= to) {
      to = v[i].to > to ? v[i].to : to; /* overlaps the run: extend it */
      continue;
    }
    total += to - from;
    from = v[i].from;
    to = v[i].to;
  }
  total += to - from;
  free(v);
  return total;
}

/* Read one recording into its aggregation and side summary. */
static int read_side(stkr_diff *d, int side, const char *input,
                     stkr_agg **agg) {
  static const stkr_agg_opts opts; /* every event, by function and line */
  stkr_reader *r;
  uint64_t ns;
  size_t n;
  int st, err;

  st = stkr_cli_open("diff", (char *const *)&input, 1, true, &r);
  if (st != 0)
    return st;
  err = stkr_agg_build(r, &opts, NULL, NULL, agg);
  if (err != 0) {
    fprintf(stderr, "stackrec diff: reading %s: %s\n", input, strerror(-err));
    stkr_reader_free(r);
    return STKR_CLI_DATA_LOST;
  }
  n = stkr_reader_process_count(r);
  ns = recording_ns(r);
  d->side[side].input = input;
  d->side[side].events = (*agg)->events;
  d->side[side].processes = n;
  /* At least a second: a few events in a blink are no rate. */
  d->side[side].minutes = (ns > 1000000000u ? (double)ns : 1e9) / 60e9;
  d->side[side].status = stkr_cli_status(r);
  d->side[side].cap_segments = (*agg)->segments_deleted;
  d->side[side].cap_events = (*agg)->cap_deleted_events;
  d->side[side].bare_events = (*agg)->bare_events;
  stkr_cli_incomplete_line(r, d->side[side].incomplete,
                           sizeof d->side[side].incomplete);
  if (n == 0) {
    /* Nothing recorded: no path can be new, and PASS would be untrue (QA,
     * session 39: an empty NEW passed, exit 0). The gate fails. */
    d->side[side].status = STKR_CLI_DATA_LOST;
    if (d->side[side].incomplete[0] == '\0')
      snprintf(d->side[side].incomplete, sizeof d->side[side].incomplete,
               "NOT RECORDED: it holds no process (a static program the "
               "hooks cannot enter, or another directory?)");
  }
  stkr_reader_free(r);
  return 0;
}

enum { O_FORMAT = 256, O_THRESHOLD, O_MIN_COUNT, O_SENSITIVE, O_MODMAP };

/* Parse the options into *d (d->sensitive has room for argc names) and
 * the rest. @return -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, stkr_diff *d,
                      const char **format, const char **out_path,
                      const char **map_path) {
  const stkr_cli_opt opts[] = {
      {"format", O_FORMAT, STKR_CLI_VALUE, NULL, NULL},
      {"threshold", O_THRESHOLD, STKR_CLI_VALUE, NULL, NULL},
      {"min-count", O_MIN_COUNT, STKR_CLI_VALUE, NULL, NULL},
      {"sensitive", O_SENSITIVE, STKR_CLI_VALUE | STKR_CLI_REPEAT, NULL, NULL},
      {"module-map", O_MODMAP, STKR_CLI_VALUE, map_path, NULL},
      {NULL, 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, out_path, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "diff", .opts = opts,
                                .help = {diff_help}};
  char *end;
  int c, st;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case O_FORMAT: {
      static const char *const formats[] = {"text", "json", "html", NULL};
      int i;
      if ((st = stkr_cli_choice_parse("diff", "--format", formats, optarg,
                                      &i)) != 0)
        return st;
      *format = formats[i];
      break;
    }
    case O_THRESHOLD:
      errno = 0;
      d->threshold_pct = strtod(optarg, &end);
      if (errno || end == optarg || *end || !(d->threshold_pct >= 0))
        return stkr_cli_usage_error(
            "diff", "--threshold wants a percentage >= 0, not '%s'", optarg);
      break;
    case O_MIN_COUNT:
      errno = 0;
      d->min_count = strtoull(optarg, &end, 10);
      if (errno || end == optarg || *end || optarg[0] == '-')
        return stkr_cli_usage_error(
            "diff", "--min-count wants a count, not '%s'", optarg);
      break;
    case O_SENSITIVE:
      if (optarg[0] == '\0') /* matches no site: a gate that never fails */
        return stkr_cli_usage_error("diff", "--sensitive wants a site "
                                    "pattern, not an empty one");
      d->sensitive[d->n_sensitive++] = optarg;
      break;
    }
  }
  if (argc - optind != 2)
    return stkr_cli_usage_error("diff", argc - optind < 2
                                            ? "needs BASE and NEW"
                                            : "too many arguments");
  return -1;
}

/* A --sensitive pattern that matches no site of either side: a typo, as
 * likely as not, and a gate that never fails (QA, session 39). Said on
 * stderr; the sites may be absent from these runs only. */
static void warn_unmatched(const stkr_diff *d) {
  for (size_t k = 0; k < d->n_sensitive; k++) {
    size_t i;
    for (i = 0; i < d->n_paths; i++)
      if (fnmatch(d->sensitive[k], d->paths[i].site, 0) == 0)
        break;
    if (i == d->n_paths && d->n_paths > 0) {
      fputs("stackrec diff: warning: --sensitive ", stderr);
      stkr_cli_put_escaped(stderr, (const uint8_t *)d->sensitive[k],
                           strlen(d->sensitive[k]));
      fputs(" matches no site of BASE or NEW\n", stderr);
    }
  }
}

/* Write the comparison in format to out_path (NULL: stdout). @return the
 * exit status: 1 when the gate fails (a sensitive path added, a side
 * damaged), or when out_path cannot be created or written (an output
 * failure, as for the other commands: not 3, which names inputs). */
static int write_result(const stkr_diff *d, const char *format,
                        const char *out_path) {
  FILE *out = stkr_cli_create("diff", out_path);
  int status = STKR_CLI_OK;

  if (out == NULL)
    return STKR_CLI_DATA_LOST;
  if (strcmp(format, "json") == 0)
    stkr_diff_put_json(out, d);
  else if (strcmp(format, "html") == 0)
    stkr_diff_put_html(out, d);
  else
    stkr_diff_put_text(out, d);
  if (d->n_added_sensitive > 0 || d->side[0].status != STKR_CLI_OK ||
      d->side[1].status != STKR_CLI_OK)
    status = STKR_CLI_DATA_LOST; /* 1: the gate fails */
  if (out != stdout) {
    /* fclose's flush names the reason (ENOSPC on /dev/full); an earlier
     * failed write leaves only ferror set. */
    if (stkr_cli_close_output("diff", out_path, out,
                              ferror(out) ? -EIO : 0) != 0)
      status = STKR_CLI_DATA_LOST;
  } else if (stkr_cli_flush("diff") != 0) {
    status = STKR_CLI_DATA_LOST;
  }
  return status;
}

int stkr_cli_diff(int argc, char **argv) {
  const char *format = "text", *out_path = NULL, *map_path = NULL;
  stkr_diff d;
  stkr_agg *agg[2] = {NULL, NULL};
  stkr_modmap *map = NULL;
  char why[512] = "";
  int s, status, err;

  memset(&d, 0, sizeof d);
  d.threshold_pct = 50;
  d.min_count = 5;
  d.sensitive = calloc((size_t)argc, sizeof(*d.sensitive));
  if (d.sensitive == NULL)
    return STKR_CLI_DATA_LOST;
  if ((status = parse_args(argc, argv, &d, &format, &out_path, &map_path)) >=
      0)
    goto done;
  char *opt_in[] = {(char *)map_path};
  if ((status = stkr_cli_check_output("diff", "-o", out_path, argv + optind,
                                      argc - optind)) != 0 ||
      (status = stkr_cli_check_output("diff", "-o", out_path, opt_in, 1)) != 0)
    goto done;
  if (map_path != NULL &&
      (err = stkr_modmap_load(map_path, &map, why, sizeof why)) != 0) {
    fprintf(stderr, "stackrec diff: %s\n",
            why[0] ? why : strerror(-err));
    status = err == -EINVAL ? STKR_CLI_USAGE : STKR_CLI_NO_INPUT;
    goto done;
  }
  for (s = 0; s < 2 && status == STKR_CLI_OK; s++)
    status = read_side(&d, s, argv[optind + s], &agg[s]);
  if (status != STKR_CLI_OK)
    goto done;
  if (stkr_diff_add(&d, STKR_DIFF_BASE, agg[0], map) != 0 ||
      stkr_diff_add(&d, STKR_DIFF_NEW, agg[1], map) != 0 ||
      stkr_diff_compare(&d) != 0) {
    fprintf(stderr, "stackrec diff: %s\n", strerror(ENOMEM));
    status = STKR_CLI_DATA_LOST;
    goto done;
  }
  warn_unmatched(&d);
  status = write_result(&d, format, out_path);
done:
  stkr_diff_free(&d);
  stkr_agg_free(agg[0]);
  stkr_agg_free(agg[1]);
  stkr_modmap_free(map);
  free(d.sensitive);
  return status;
}
