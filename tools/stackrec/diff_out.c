/*
 * diff_out.c: the result of `stackrec diff` as text, JSON and HTML (see
 * diff.h). Each path shows its site, module, counts and rates on both
 * sides, and its frames (innermost first) as function (file:line), or
 * image+0xoffset when the function is unknown.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/diff.h"
#include "tools/stackrec/html.h"

static const char *side_name[2] = {"base", "new"};

static void text_str(FILE *f, const char *s) {
  stkr_cli_put_escaped(f, (const uint8_t *)s, strlen(s));
}

/* How the text and the HTML mark up the header's items and the names in
 * them (input paths, site names). */
typedef struct markup {
  const char *item, *item_end;   /* around a header line */
  const char *name, *name_end;   /* around a name */
  const char *frame, *frame_end; /* around a frame of a path */
  const char *file, *file_end;   /* around a frame's file:line */
  void (*put)(FILE *f, const char *s); /* a name, escaped */
} markup;

static const markup text_markup = {"# ", "\n", "", "", "        ", "\n",
                                   " (", ")", text_str};
static const markup html_markup = {
    "<li>", "</li>\n", "<code>", "</code>", "<li>", "</li>",
    " <span class=\"file\">", "</span>", stkr_html_put_text};

/* A path's frames, innermost first: function (file:line), or image+0xoff
 * when the function is unknown. */
static void put_frames(FILE *f, const stkr_diff_path *p, const markup *m) {
  char label[512];
  size_t i;

  for (i = 0; i < p->n_frames; i++) {
    const stkr_frame *fr = &p->frames[i];

    fputs(m->frame, f);
    m->put(f, stkr_agg_frame_label(fr, label, sizeof label));
    if (fr->function != NULL && fr->file != NULL) {
      fputs(m->file, f);
      m->put(f, fr->file);
      if (fr->line)
        fprintf(f, ":%u", (unsigned)fr->line);
      fputs(m->file_end, f);
    }
    fputs(m->frame_end, f);
  }
}

/* The inputs and the thresholds, in one wording for the text and the HTML;
 * the last item (the sensitive sites) is left open for the caller. */
static void put_inputs(FILE *f, const stkr_diff *d, const markup *m) {
  size_t i;

  for (i = 0; i < 2; i++) {
    fprintf(f, "%s%s: %s", m->item, side_name[i], m->name);
    m->put(f, d->side[i].input);
    fprintf(f, "%s: %" PRIu64 " events from %zu process%s, %.4g min%s",
            m->name_end, d->side[i].events, d->side[i].processes,
            d->side[i].processes == 1 ? "" : "es", d->side[i].minutes,
            m->item_end);
  }
  fprintf(f, "%srate changes over %g%% (paths with at least %" PRIu64
             " events); sensitive sites: ",
          m->item, d->threshold_pct, d->min_count);
  if (d->n_sensitive == 0)
    fputs("every site", f);
  for (i = 0; i < d->n_sensitive; i++) {
    fputs(i ? ", " : "", f);
    fputs(m->name, f);
    m->put(f, d->sensitive[i]);
    fputs(m->name_end, f);
  }
}

/* Side s's rate of p into buf (4 digits; JSON: 6), or "?" (JSON: null)
 * when that side lost
 * segments to the disk cap: its events over a recording time that counts
 * the deleted segments' would read far too low (QA, session 29: ~10x,
 * printed next to "not compared"). */
static const char *rate(const stkr_diff *d, const stkr_diff_path *p, int s,
                        bool json, char *buf, size_t len) {
  if (d->side[s].cap_segments != 0)
    return json ? "null" : "?";
  snprintf(buf, len, "%.*g", json ? 6 : 4, p->per_min[s]);
  return buf;
}

/* ---- text ------------------------------------------------------------------ */

static void text_path(FILE *f, const stkr_diff *d, char sign,
                      const stkr_diff_path *p) {
  char r0[32], r1[32];
  fprintf(f, "  %c ", sign);
  text_str(f, p->site);
  fputs(p->sensitive ? " [sensitive]" : "", f);
  fputs(" module ", f);
  text_str(f, p->module);
  fprintf(f, ": %" PRIu64 " -> %" PRIu64 " events, %s -> %s per min\n",
          p->count[0], p->count[1], rate(d, p, 0, false, r0, sizeof r0),
          rate(d, p, 1, false, r1, sizeof r1));
  put_frames(f, p, &text_markup);
}

/* " (but BASE/NEW is INCOMPLETE: ...)" after the gate's verdict, if so. */
static bool any_incomplete(const stkr_diff *d) {
  return d->side[0].incomplete[0] != '\0' || d->side[1].incomplete[0] != '\0';
}

/* Why no rate was compared (stkr_diff.rates_unknown), into buf. */
static const char *rates_unknown_why(const stkr_diff *d, char *buf,
                                     size_t cap) {
  size_t n = 0;
  for (int i = 0; i < 2; i++)
    if (d->side[i].cap_segments != 0 && n < cap)
      n += (size_t)snprintf(buf + n, cap - n,
                            "%s%s lost %llu segments (%llu events) to the "
                            "disk cap", n ? "; " : "", i ? "NEW" : "BASE",
                            (unsigned long long)d->side[i].cap_segments,
                            (unsigned long long)d->side[i].cap_events);
  if (n < cap)
    snprintf(buf + n, cap - n, ", whose times are unknown: rates over its "
             "recording time would be wrong");
  return buf;
}

/* Side i's NOT SYMBOLIZED line (without "# "), into buf; "" if its stacks
 * were all symbolized. Such paths match only image+offset of the same
 * build, so against a symbolized side every one is new and gone (QA,
 * session 33: the gate failed on one binary's one path, nothing said why). */
static const char *unsymbolized_line(const stkr_diff *d, int i, char *buf,
                                     size_t cap) {
  const stkr_diff_side *s = &d->side[i];
  buf[0] = '\0';
  if (s->bare_events != 0)
    snprintf(buf, cap, "NOT SYMBOLIZED: %llu of %llu events have stacks "
             "never symbolized (PCs only): their paths match the other "
             "side's only by image+offset, in the same build; 'stackrec "
             "symbolize' names them", (unsigned long long)s->bare_events,
             (unsigned long long)s->events);
  return buf;
}

/* What follows the gate's verdict: why it may not be true, or "". */
static const char *gate_caveat(const stkr_diff *d) {
  if (any_incomplete(d))
    return " (an input is INCOMPLETE: paths may be missing or their rates "
           "wrong)";
  if (d->side[0].bare_events != 0 || d->side[1].bare_events != 0)
    return " (an input is NOT SYMBOLIZED: a path may be new only by its "
           "addresses)";
  return "";
}

/* "BASE", "NEW" or "BASE and NEW": the side(s) holding no process (the
 * gate compares nothing then: diff.c fails it), or NULL. */
static const char *empty_sides(const stkr_diff *d) {
  static const char *const names[4] = {NULL, "BASE", "NEW", "BASE and NEW"};
  return names[(d->side[0].processes == 0) | (d->side[1].processes == 0) << 1];
}

void stkr_diff_put_text(FILE *f, const stkr_diff *d) {
  size_t i;

  for (i = 0; i < 2; i++) {
    char line[400];
    if (d->side[i].incomplete[0] != '\0')
      fprintf(f, "# %s %s\n", i ? "NEW" : "BASE", d->side[i].incomplete);
    if (unsymbolized_line(d, (int)i, line, sizeof line)[0] != '\0')
      fprintf(f, "# %s %s\n", i ? "NEW" : "BASE", line);
  }
  put_inputs(f, d, &text_markup);
  fprintf(f, "\n\nNEW PATHS: %zu (%zu to a sensitive site)\n", d->n_added,
          d->n_added_sensitive);
  for (i = 0; i < d->n_added; i++)
    text_path(f, d, '+', d->added[i]);
  fprintf(f, "\nGONE PATHS: %zu%s\n", d->n_gone,
          d->side[1].cap_segments != 0 && d->n_gone != 0
              ? " (NEW lost segments to the disk cap: a gone path may be in "
                "them)"
              : "");
  for (i = 0; i < d->n_gone; i++)
    text_path(f, d, '-', d->gone[i]);
  if (d->rates_unknown) {
    char why[400];
    fprintf(f, "\nRATE CHANGED: not compared (%s)\n",
            rates_unknown_why(d, why, sizeof why));
  } else {
    fprintf(f, "\nRATE CHANGED: %zu\n", d->n_changed);
  }
  for (i = 0; i < d->n_changed; i++)
    text_path(f, d, '~', d->changed[i]);
  if (empty_sides(d) != NULL)
    fprintf(f, "\nNOT COMPARED: %s recorded no process\n", empty_sides(d));
  else if (d->n_added_sensitive > 0)
    fprintf(f, "\nFAIL: NEW adds %zu path%s to a sensitive site%s\n",
            d->n_added_sensitive, d->n_added_sensitive == 1 ? "" : "s",
            gate_caveat(d));
  else
    fprintf(f, "\nPASS: no new path to a sensitive site%s\n",
            gate_caveat(d));
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_path(FILE *f, const stkr_diff *d, const stkr_diff_path *p,
                      bool first) {
  char r0[32], r1[32];
  size_t i;

  stkr_cli_put_json_member(f, first ? "\n  {" : ",\n  {", "site", p->site);
  stkr_cli_put_json_member(f, ",", "module", p->module);
  fprintf(f,
          ",\"sensitive\":%s,\"base_count\":%" PRIu64 ",\"new_count\":%" PRIu64
          ",\"base_per_min\":%s,\"new_per_min\":%s,\"frames\":[",
          p->sensitive ? "true" : "false", p->count[0], p->count[1],
          rate(d, p, 0, true, r0, sizeof r0),
          rate(d, p, 1, true, r1, sizeof r1));
  for (i = 0; i < p->n_frames; i++) {
    const stkr_frame *fr = &p->frames[i];

    stkr_cli_put_json_member(f, i ? ",{" : "{", "function", fr->function);
    stkr_cli_put_json_member(f, ",", "file", fr->file);
    fprintf(f, ",\"line\":%u", (unsigned)fr->line);
    stkr_cli_put_json_member(
        f, ",", "image", fr->image ? stkr_attrib_base_name(fr->image) : NULL);
    fprintf(f, ",\"offset\":\"0x%" PRIx64 "\"}", fr->offset);
  }
  fputs("]}", f);
}

static void json_list(FILE *f, const stkr_diff *d, const char *name,
                      stkr_diff_path *const *v, size_t n) {
  size_t i;

  fprintf(f, ",\n\"%s\":[", name);
  for (i = 0; i < n; i++)
    json_path(f, d, v[i], i == 0);
  fputs(n ? "\n]" : "]", f);
}

void stkr_diff_put_json(FILE *f, const stkr_diff *d) {
  size_t i;

  fputs("{", f);
  for (i = 0; i < 2; i++) {
    fprintf(f, "%s\"%s\":{\"input\":", i ? ",\n" : "", side_name[i]);
    stkr_cli_put_json_str(f, d->side[i].input);
    fprintf(f,
            ",\"events\":%" PRIu64 ",\"processes\":%zu,\"minutes\":%.6g,"
            "\"intact\":%s,\"complete\":%s",
            d->side[i].events, d->side[i].processes, d->side[i].minutes,
            d->side[i].status == 0 ? "true" : "false",
            d->side[i].incomplete[0] == '\0' ? "true" : "false");
    if (d->side[i].incomplete[0] != '\0')
      stkr_cli_put_json_member(f, ",", "incomplete", d->side[i].incomplete);
    fprintf(f, ",\"unsymbolized_events\":%" PRIu64 "}",
            d->side[i].bare_events);
  }
  fprintf(f, ",\n\"threshold_pct\":%g,\"min_count\":%" PRIu64 ",\"sensitive\":[",
          d->threshold_pct, d->min_count);
  for (i = 0; i < d->n_sensitive; i++) {
    fputs(i ? "," : "", f);
    stkr_cli_put_json_str(f, d->sensitive[i]);
  }
  fputs("]", f);
  json_list(f, d, "added", d->added, d->n_added);
  json_list(f, d, "gone", d->gone, d->n_gone);
  json_list(f, d, "changed", d->changed, d->n_changed);
  if (d->rates_unknown) {
    char why[400];
    stkr_cli_put_json_member(f, ",\n", "rates_not_compared",
                             rates_unknown_why(d, why, sizeof why));
  }
  fprintf(f,
          ",\n\"summary\":{\"added\":%zu,\"added_sensitive\":%zu,\"gone\":%zu,"
          "\"changed\":%zu},\n\"gate\":\"%s\"}\n",
          d->n_added, d->n_added_sensitive, d->n_gone, d->n_changed,
          empty_sides(d) != NULL ? "not_compared"
          : d->n_added_sensitive ? "fail" : "pass");
}

/* ---- HTML ------------------------------------------------------------------ */

static void html_table(FILE *f, const stkr_diff *d, const char *title,
                       const char *cls, stkr_diff_path *const *v, size_t n) {
  static const char *const cols[] = {
      "site",     "module",   "=base events", "=new events",
      "=base /min", "=new /min", "call path (innermost first)"};
  char attrs[64];
  size_t i;

  fprintf(f, "<h2>%s: %zu</h2>\n", title, n);
  if (n == 0)
    return;
  snprintf(attrs, sizeof attrs, "class=\"%s\"", cls);
  STKR_HTML_TABLE_OPEN(f, attrs, cols);
  for (i = 0; i < n; i++) {
    const stkr_diff_path *p = v[i];

    fputs(p->sensitive ? "<tr class=\"sensitive\"><td>" : "<tr><td>", f);
    stkr_html_put_text(f, p->site);
    fputs("</td><td>", f);
    stkr_html_put_text(f, p->module);
    char r0[32], r1[32];
    fprintf(f,
            "</td><td>%" PRIu64 "</td><td>%" PRIu64
            "</td><td>%s</td><td>%s</td><td><ol>",
            p->count[0], p->count[1], rate(d, p, 0, false, r0, sizeof r0),
            rate(d, p, 1, false, r1, sizeof r1));
    put_frames(f, p, &html_markup);
    fputs("</ol></td></tr>\n", f);
  }
  stkr_html_table_close(f);
}

void stkr_diff_put_html(FILE *f, const stkr_diff *d) {
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        "<title>stackrec diff</title><style>"
        "body{font:14px system-ui,sans-serif;margin:1.5em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:3px 6px;vertical-align:top;text-align:left}"
        "tr.sensitive td:first-child{font-weight:bold;color:#a12}"
        "ol{margin:0;padding-left:1.5em}.file{color:#666}"
        ".gate.fail{color:#a12}.gate.pass{color:#184}"
        "</style></head><body>\n<h1>stackrec diff</h1>\n<ul>\n",
        f);
  put_inputs(f, d, &html_markup);
  fputs("</li>\n</ul>\n", f);
  for (int i = 0; i < 2; i++) {
    char line[400];
    if (d->side[i].incomplete[0] != '\0') {
      fprintf(f, "<p class=\"gate fail\">%s ", i ? "NEW" : "BASE");
      stkr_html_put_text(f, d->side[i].incomplete);
      fputs("</p>\n", f);
    }
    if (unsymbolized_line(d, i, line, sizeof line)[0] != '\0') {
      fprintf(f, "<p class=\"incomplete\">%s ", i ? "NEW" : "BASE");
      stkr_html_put_text(f, line);
      fputs("</p>\n", f);
    }
  }
  if (empty_sides(d) != NULL)
    fprintf(f, "<p class=\"gate fail\" id=\"gate\">NOT COMPARED: %s "
               "recorded no process</p>\n", empty_sides(d));
  else if (d->n_added_sensitive > 0)
    fprintf(f, "<p class=\"gate fail\" id=\"gate\">FAIL: NEW adds %zu path%s "
               "to a sensitive site%s</p>\n",
            d->n_added_sensitive, d->n_added_sensitive == 1 ? "" : "s",
            gate_caveat(d));
  else
    fprintf(f, "<p class=\"gate pass\" id=\"gate\">PASS: no new path to a "
               "sensitive site%s</p>\n",
            gate_caveat(d));
  html_table(f, d, "New paths", "added", d->added, d->n_added);
  html_table(f, d, "Gone paths", "gone", d->gone, d->n_gone);
  if (d->rates_unknown) {
    char why[400];
    fputs("<p class=\"incomplete\">Rates not compared: ", f);
    stkr_html_put_text(f, rates_unknown_why(d, why, sizeof why));
    fputs("</p>\n", f);
  } else {
    html_table(f, d, "Rate changed", "changed", d->changed, d->n_changed);
  }
  fputs("</body></html>\n", f);
}
