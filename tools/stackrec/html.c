/*
 * html.c: `stackrec report --html`, one self-contained HTML page.
 *
 * The page holds everything it needs: the style sheet and the script
 * (tools/stackrec/report.{css,js}, compiled in as C arrays by the
 * //tools:report_assets genrule), and the data as JSON in a
 * <script type="application/json"> element. A Content-Security-Policy
 * meta tag forbids every network fetch, so opening a report can never
 * reach out, even if a recorded name tried to.
 *
 * What the page shows without JavaScript is written here as plain HTML: the
 * summary, the drop summary (always present; it says plainly when nothing
 * was dropped) and the site table. The flame graphs are drawn by report.js
 * from the JSON: a frame table (label, file:line, flags, image) and, per
 * site, its stacks as [count, frame index root ... leaf]. Frames are
 * deduplicated so the JSON grows with distinct frames and stacks, not with
 * stack depth times stacks times name length.
 *
 * Recorded strings are untrusted: in HTML text every <, >, &, " and ' is an
 * entity; in the JSON every < > & is a \u escape, so no name can close the
 * <script> element or open a comment in it. Bytes that are not valid UTF-8
 * become the code point of the same value in both (as `dump --json` does),
 * so a name reads the same in the table and in the graph.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_map.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/hangs.h"
#include "tools/stackrec/html.h"

/* From //tools:report_assets (generated from report.js and report.css). */
extern const char stkr__report_js[];
extern const size_t stkr__report_js_len;
extern const char stkr__report_css[];
extern const size_t stkr__report_css_len;

/* Sites whose flame graph is open when the page loads; the others are
 * drawn when opened, which keeps pages with hundreds of sites quick. */
#define STKR__HTML_OPEN_SITES 12

/* ---- escaping ----------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid.
 * Overlong forms, surrogates and code points above U+10FFFF are invalid. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  size_t len, i;
  uint32_t cp;

  if (p[0] < 0x80)
    return 1;
  if (p[0] >= 0xC2 && p[0] <= 0xDF)
    len = 2, cp = p[0] & 0x1F;
  else if (p[0] >= 0xE0 && p[0] <= 0xEF)
    len = 3, cp = p[0] & 0x0F;
  else if (p[0] >= 0xF0 && p[0] <= 0xF4)
    len = 4, cp = p[0] & 0x07;
  else
    return 0;
  if (n < len)
    return 0;
  for (i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
    return 0;
  return len;
}

/* s as HTML text (or attribute value). NULL writes nothing. */
static void put_html(FILE *out, const char *s);

void stkr_html_put_text(FILE *out, const char *s) { put_html(out, s); }

void stkr_html_table_open(FILE *out, const char *attrs,
                          const char *const *cols, size_t n_cols) {
  fprintf(out, "<table%s%s><thead><tr>", attrs && *attrs ? " " : "",
          attrs ? attrs : "");
  for (size_t i = 0; i < n_cols; i++)
    fprintf(out, cols[i][0] == '=' ? "<th class=\"num\">%s</th>" : "<th>%s</th>",
            cols[i] + (cols[i][0] == '='));
  fputs("</tr></thead><tbody>\n", out);
}

void stkr_html_table_close(FILE *out) { fputs("</tbody></table>\n", out); }

static void put_html(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = s ? strlen(s) : 0, i = 0, k;

  while (i < n) {
    unsigned char c = p[i];
    switch (c) {
    case '<': fputs("&lt;", out); i++; continue;
    case '>': fputs("&gt;", out); i++; continue;
    case '&': fputs("&amp;", out); i++; continue;
    case '"': fputs("&quot;", out); i++; continue;
    case '\'': fputs("&#39;", out); i++; continue;
    default: break;
    }
    k = c < 0x20 || c == 0x7F ? 0 : utf8_len(p + i, n - i);
    if (k == 0) {
      /* A control character (not allowed as text) or a byte that is no
       * UTF-8: \xNN, as the text report shows it (QA, session 39: two
       * control bytes both read U+FFFD, and 0xff read as "ÿ"). */
      fprintf(out, "\\x%02x", c);
      i++;
      continue;
    }
    if (k == 3 && c == 0xEF && p[i + 1] == 0xBF && p[i + 2] >= 0xBE) {
      /* U+FFFE, U+FFFF: no XML character, and this text goes into JUnit
       * XML too (QA, session 39: a file name with U+FFFE made compliance's
       * JUnit not well-formed). */
      fputs("&#xFFFD;", out);
      i += k;
      continue;
    }
    fwrite(p + i, 1, k, out);
    i += k;
  }
}

/* The inside of a JSON string for s, safe inside <script>. */
static void put_json_body(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  size_t n = strlen((const char *)p), i = 0, k;

  while (i < n) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc(c, out);
      i++;
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7F) {
      fprintf(out, "\\u%04x", c);
      i++;
    } else if ((k = utf8_len(p + i, n - i)) == 0) {
      fprintf(out, "\\u%04x", c); /* invalid UTF-8: the byte's code point */
      i++;
    } else {
      /* U+2028/2029 are valid in JSON but not in older JS string
       * literals; escape them so the blob is safe either way. */
      if (k == 3 && c == 0xE2 && p[i + 1] == 0x80 &&
          (p[i + 2] == 0xA8 || p[i + 2] == 0xA9))
        fprintf(out, "\\u%04x", p[i + 2] == 0xA8 ? 0x2028 : 0x2029);
      else
        fwrite(p + i, 1, k, out);
      i += k;
    }
  }
}

/* s as a JSON string ("" for NULL). */
static void put_json(FILE *out, const char *s) {
  fputc('"', out);
  put_json_body(out, s);
  fputc('"', out);
}

/* 1234567 as "1,234,567". */
static const char *fmt_count(uint64_t v, char buf[32]) {
  char tmp[24];
  int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v), i, o = 0;

  for (i = 0; i < n; i++) {
    if (i > 0 && (n - i) % 3 == 0)
      buf[o++] = ',';
    buf[o++] = tmp[i];
  }
  buf[o] = '\0';
  return buf;
}

/* part of whole as "12.3%" ("<0.1%" for a small non-zero part, ">99.9%"
 * for a part short of the whole: QA, session 36, "100.0%" for 5 780 of
 * 5 782 events hid the other two). */
static const char *fmt_pct(uint64_t part, uint64_t whole, char buf[16]) {
  double p = whole ? 100.0 * (double)part / (double)whole : 0;

  if (part > 0 && p < 0.1)
    snprintf(buf, 16, "&lt;0.1%%");
  else if (part < whole && p >= 99.95)
    snprintf(buf, 16, "&gt;99.9%%");
  else
    snprintf(buf, 16, "%.1f%%", p);
  return buf;
}

/* "N event" or "N events". */
static const char *fmt_events(uint64_t n, char buf[40]) {
  char c[32];
  snprintf(buf, 40, "%s event%s", fmt_count(n, c), n == 1 ? "" : "s");
  return buf;
}

/* ---- the frame table ------------------------------------------------------ */

/* One distinct frame as the page shows it. */
typedef struct hframe {
  char *label;       /* stkr_agg_frame_text() at the agg's granularity
                        (report.js merges boxes by it), owned */
  const char *file;  /* owned by the agg */
  uint32_t line;
  const char *image; /* base name, inside the agg's string */
  unsigned flags;    /* 1 inlined, 2 app, 4 no function name, 8 async */
} hframe;

typedef struct ftab {
  hframe *v;
  size_t n, vcap;
  stkr_index ix; /* hash of a frame's fields -> index into v */
  stkr_agg_granularity g;
} ftab;

static uint64_t fnv(uint64_t h, const char *s) {
  for (; s && *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
  return (h ^ 0xFF) * 0x100000001B3ull; /* field separator */
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* The index of f in t, added if new. @return index, or -ENOMEM. */
static int64_t ftab_get(ftab *t, const stkr_frame *f) {
  char label[512];
  hframe k;
  uint64_t h;
  size_t pos, ix;

  memset(&k, 0, sizeof k);
  stkr_agg_frame_text(f, t->g, label, sizeof label);
  k.file = f->file;
  k.line = f->line;
  if (f->image != NULL) {
    const char *base = strrchr(f->image, '/');
    k.image = base ? base + 1 : f->image;
  }
  k.flags = (f->inlined ? 1u : 0) | (f->is_app ? 2u : 0) |
            (f->function == NULL ? 4u : 0) | (f->async ? 8u : 0);
  /* Finished by the index (stkr_index mixes every hash). */
  h = fnv(fnv(fnv(0xCBF29CE484222325ull, label), k.file), k.image) ^
      ((uint64_t)k.line << 3 | k.flags);

  for (ix = stkr_index_first(&t->ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&t->ix, h, &pos)) {
    const hframe *o = &t->v[ix];
    if (o->line == k.line && o->flags == k.flags &&
        strcmp(o->label, label) == 0 && same_str(o->file, k.file) &&
        same_str(o->image, k.image))
      return (int64_t)ix;
  }
  if (stkr_index_reserve(&t->ix, t->n + 1) != 0 ||
      stkr_grow((void **)&t->v, &t->vcap, t->n + 1, sizeof *t->v) != 0)
    return -ENOMEM;
  k.label = strdup(label);
  if (k.label == NULL)
    return -ENOMEM;
  t->v[t->n] = k;
  (void)stkr_index_add(&t->ix, h, t->n); /* reserved above */
  return (int64_t)t->n++;
}

static void ftab_free(ftab *t) {
  STKR_FREE_EACH(t->v, t->n, label);
  free(t->v);
  stkr_index_free(&t->ix);
}

/* ---- page parts ------------------------------------------------------------ */

/* The marks (not events), listed once; report.js draws them on every
 * timeline from the JSON blob. */
static void put_marks(FILE *out, const stkr_agg *a) {
  size_t i, shown = a->n_marks < 20 ? a->n_marks : 20;
  char b1[32];

  if (a->marks_read == 0)
    return;
  fprintf(out, "<p class=\"marks\">%s mark%s (not counted as events)",
          fmt_count(a->marks_read, b1), a->marks_read == 1 ? "" : "s");
  for (i = 0; i < shown; i++) {
    fprintf(out, "%s<span class=\"mark\">%.3f s ", i ? ", " : ": ",
            (double)a->marks[i].t_ns / 1e9);
    put_html(out, a->marks[i].name);
    if (a->marks[i].external)
      fputs(" (stackrec mark)", out);
    else
      fprintf(out, " (pid %u)", (unsigned)a->marks[i].pid);
    fputs("</span>", out);
  }
  fputs(a->n_marks > shown || a->marks_not_kept ? ", &hellip;" : "", out);
  if (a->timeline_trees > 1) /* as report's --timeline says it */
    fprintf(out, ". The timelines draw %zu process trees (launches, or a "
            "merge's inputs) each from its own start, and a mark on its "
            "own tree's line",
            a->timeline_trees);
  fputs("</p>\n", out);
}

static void put_summary(FILE *out, const stkr_agg *a) {
  char b1[32], b2[32], b3[32];
  /* Filtered: the processes the events shown came from (report.c). */
  size_t np = a->filtered ? a->n_processes_with_events : a->n_processes;

  char ev[40];

  fprintf(out, "<p class=\"summary\">%s at %s site%s, %s distinct "
          "stack%s, from %zu process%s",
          fmt_events(a->events, ev), fmt_count(a->n_sites, b2),
          a->n_sites == 1 ? "" : "s", fmt_count(a->n_distinct, b3),
          a->n_distinct == 1 ? "" : "s", np, np == 1 ? "" : "es");
  if (a->events != a->events_read)
    fprintf(out, " (%s of the %s events read passed the filters)",
            fmt_count(a->events, b1), fmt_count(a->events_read, b2));
  fputs(".</p>\n", out);
  put_marks(out, a);
}

static void put_drops(FILE *out, const stkr_agg *a) {
  const struct {
    const char *cause, *why;
    uint64_t n;
  } causes[] = {
      {"ring full", "the thread's ring buffer was full", a->drops_ring_full},
      {"re-entrant", "an event inside an event, e.g. from a signal handler",
       a->drops_reentrant},
      {"write error", "the recorder could not write its segment files",
       a->drops_write_error},
      {"other", "e.g. two threads registering a site at once",
       a->drops_other},
      {"exit",
       "calls made while the process ended, after the recorder stopped; "
       "or still in the rings when the bounded exit's time ran out",
       a->drops_exit},
  };
  char b1[32], b2[16];
  size_t i;
  bool lost = a->drops > 0 || a->damaged_batches > 0 ||
              a->misnamed_segments > 0;

  fprintf(out, "<section id=\"drops\" class=\"drops %s\">\n",
          lost ? "lost" : "none");
  if (a->drops == 0) {
    fputs("<p>No dropped events: the recorder wrote every event it "
          "captured.</p>\n", out);
  } else {
    fprintf(out, "<p>%s events were dropped by the recorder (%s of the "
            "events captured) and are missing from this report.</p>\n",
            fmt_count(a->drops, b1),
            fmt_pct(a->drops, a->drops + a->events_read, b2));
    static const char *const cols[] = {"Cause", "=Dropped events", ""};
    STKR_HTML_TABLE_OPEN(out, NULL, cols);
    for (i = 0; i < sizeof causes / sizeof causes[0]; i++) {
      fprintf(out, "<tr><td>%s</td><td class=\"num\">%s</td><td>%s</td>"
              "</tr>\n", causes[i].cause, fmt_count(causes[i].n, b1),
              causes[i].why);
    }
    stkr_html_table_close(out);
  }
  if (a->damaged_batches > 0)
    fprintf(out, "<p>%s damaged or truncated batch%s could not be read: "
            "the events in %s are missing too.</p>\n",
            fmt_count(a->damaged_batches, b1),
            a->damaged_batches == 1 ? "" : "es",
            a->damaged_batches == 1 ? "it" : "them");
  if (a->misnamed_segments > 0)
    fprintf(out, "<p>%s segment file%s named for another process or "
            "number than %s header says: read under the file's name, "
            "%s events may be another process's.</p>\n",
            fmt_count(a->misnamed_segments, b1),
            a->misnamed_segments == 1 ? " is" : "s are",
            a->misnamed_segments == 1 ? "its" : "their",
            a->misnamed_segments == 1 ? "its" : "their");
  fputs("</section>\n", out);
}

static void put_site_table(FILE *out, const stkr_agg *a) {
  static const char *const site_cols[] = {"=#", "Site", "=Events",
                                          "=% of total", "=Stacks", ""};
  char b1[32], b2[16], b3[32];
  size_t i;

  fputs("<section id=\"sites\"><h2>Sites</h2>\n", out);
  if (a->n_sites == 0) {
    fputs("<p>No events in this report.</p></section>\n", out);
    return;
  }
  STKR_HTML_TABLE_OPEN(out, "class=\"sites\"", site_cols);
  for (i = 0; i < a->n_sites; i++) {
    const stkr_agg_site *s = &a->sites[i];
    double w = a->events ? 100.0 * (double)s->count / (double)a->events : 0;
    fprintf(out, "<tr><td class=\"num\">%zu</td><td class=\"name\">"
            "<a href=\"#site-%zu\">", i + 1, i);
    stkr_html_put_text(out, s->name);
    fprintf(out, "</a></td><td class=\"num\">%s</td><td class=\"num\">%s"
            "</td><td class=\"num\">%s</td><td class=\"bar\"><span "
            "style=\"width:%.2f%%\"></span></td></tr>\n",
            fmt_count(s->count, b1), fmt_pct(s->count, a->events, b2),
            fmt_count(s->n_stacks, b3), w);
  }
  stkr_html_table_close(out);
  fputs("</section>\n", out);
}

/* Payloads shown per site, most frequent first; the rest behind one
 * more click (all the aggregation kept: a one-off path read among
 * thousands of common ones is often the finding; QA, session 36). */
#define STKR__HTML_PAYLOADS 50
#define STKR__HTML_PAYLOADS_MORE 1000

/* One payload's row. Bytes that are not printable ASCII are shown as
 * \xNN, as in the text report. @return false when out of memory. */
static bool put_payload_row(FILE *out, const stkr_agg_site *s,
                            const stkr_agg_payload *p) {
  char b1[32], b2[16], *esc = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&esc, &len);

  if (m == NULL)
    return false;
  stkr_cli_put_text(m, p->data, p->len);
  if (fclose(m) != 0) {
    free(esc);
    return false;
  }
  fprintf(out, "<tr><td class=\"num\">%s</td><td class=\"num\">%s</td>"
          "<td class=\"name\">", fmt_count(p->count, b1),
          fmt_pct(p->count, s->count, b2));
  stkr_html_put_text(out, esc);
  if (p->truncated) /* a prefix: cut at payload_max (report.c) */
    fputs("<span class=\"trunc\" title=\"cut at payload_max: the "
          "rest was not recorded\">\u2026</span>", out);
  fputs("</td></tr>\n", out);
  free(esc);
  return true;
}

/* The site's payloads (files, variables, addresses it touched): a table
 * under its flame graph. */
static void put_payloads(FILE *out, const stkr_agg_site *s) {
  static const char *const cols[] = {"=Events", "=% of site", "Payload"};
  char b1[32], b2[16];
  size_t i, n = s->n_payloads;
  uint64_t rest = s->payload_events;

  if (s->payload_events == 0)
    return;
  fprintf(out, "<details class=\"payloads\"><summary>Payloads: %zu%s "
          "distinct, in %s of its events</summary>\n",
          n, s->more_payload_events ? "+" : "",
          fmt_count(s->payload_events, b1));
  STKR_HTML_TABLE_OPEN(out, "class=\"pl\"", cols);
  for (i = 0; i < n && i < STKR__HTML_PAYLOADS; i++) {
    if (!put_payload_row(out, s, &s->payloads[i]))
      break;
    rest -= s->payloads[i].count;
  }
  stkr_html_table_close(out);
  if (i < n) {
    /* The rest, up to STKR__HTML_PAYLOADS_MORE rows (a page stays a few
     * MB at most); past the cap's events are said below, not here. */
    size_t upto = n - i > STKR__HTML_PAYLOADS_MORE
                      ? i + STKR__HTML_PAYLOADS_MORE
                      : n;
    fprintf(out, "<details class=\"payloads\"><summary>%zu more payload%s, "
            "in %s of its events (%s)</summary>\n", n - i,
            n - i == 1 ? "" : "s",
            fmt_count(rest - s->more_payload_events, b1),
            fmt_pct(rest - s->more_payload_events, s->count, b2));
    STKR_HTML_TABLE_OPEN(out, "class=\"pl\"", cols);
    for (; i < upto; i++) {
      if (!put_payload_row(out, s, &s->payloads[i]))
        break;
      rest -= s->payloads[i].count;
    }
    stkr_html_table_close(out);
    if (i < n)
      fprintf(out, "<p class=\"more\">%zu more not shown: `stackrec export "
              "--format jsonl` has every event's payload.</p>\n", n - i);
    fputs("</details>\n", out);
  }
  if (i == n && rest > 0) /* past the aggregation's cap */
    fprintf(out, "<p class=\"more\">%s of its events (%s) had payloads past "
            "the %d distinct kept: counted, not named.</p>\n",
            fmt_count(rest, b1), fmt_pct(rest, s->count, b2),
            STKR_AGG_MAX_PAYLOADS);
  fputs("</details>\n", out);
}

static void put_flame_sections(FILE *out, const stkr_agg *a) {
  char b2[16], ev[40];
  size_t i;

  if (a->n_sites == 0)
    return;
  fputs("<section id=\"flames\"><h2>Flame graphs</h2>\n"
        "<p class=\"legend\">Each site is the top row; its callers' stacks "
        "go down, outermost caller first, widths proportional to events. "
        "Click a frame to zoom in, the site or an upper row to zoom out; "
        "Esc resets. Hover for counts."
        "<span style=\"background:hsl(30,85%,60%)\"></span>app code"
        "<span style=\"background:hsl(205,50%,70%)\"></span>libraries"
        "<span style=\"background:hsl(210,6%,78%)\"></span>no symbol</p>\n"
        "<noscript><p>The flame graphs need JavaScript; the tables above "
        "do not.</p></noscript>\n"
        "<form class=\"search\" id=\"search\"><label>Function: <input "
        "type=\"search\" name=\"q\" placeholder=\"part of a frame's name\">"
        "</label> <button type=\"submit\">Callers and callees</button> "
        "<span class=\"hits\"></span></form>\n"
        "<div id=\"sandwich\" hidden></div>\n", out);
  for (i = 0; i < a->n_sites; i++) {
    const stkr_agg_site *s = &a->sites[i];
    fprintf(out, "<details class=\"site\" id=\"site-%zu\"%s><summary>"
            "<span class=\"name\">", i,
            i < STKR__HTML_OPEN_SITES ? " open" : "");
    stkr_html_put_text(out, s->name);
    fprintf(out, "</span> <span class=\"count\">&mdash; %s, %s of "
            "total</span></summary>\n<div class=\"timeline\" "
            "data-site=\"%zu\"></div>\n<div class=\"toolbar\"><button "
            "type=\"button\" class=\"reset\" hidden>Reset zoom</button>"
            "</div>\n<div class=\"flame\" data-site=\"%zu\"></div>\n"
            "<div class=\"status\"></div>\n",
            fmt_events(s->count, ev), fmt_pct(s->count, a->events, b2), i,
            i);
    put_payloads(out, s);
    fputs("</details>\n", out);
  }
  fputs("</section>\n", out);
}

/* The JSON blob (see report.js for its shape). */
static int put_data(FILE *out, const stkr_agg *a) {
  ftab t;
  size_t i, j, k;
  int err = 0;

  memset(&t, 0, sizeof t);
  t.g = a->granularity;
  fprintf(out, "<script type=\"application/json\" id=\"stkr-data\">"
          "{\"version\":1,\"events\":%" PRIu64 ",\"bucket_ns\":%" PRIu64
          ",\"sites\":[", a->events, a->timeline_bucket_ns);
  for (i = 0; i < a->n_sites && err == 0; i++) {
    const stkr_agg_site *s = &a->sites[i];
    fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
    put_json(out, s->name);
    fprintf(out, ",\"count\":%" PRIu64, s->count);
    if (s->timeline != NULL) {
      fputs(",\"timeline\":[", out);
      for (j = 0; j < a->timeline_buckets; j++)
        fprintf(out, "%s%" PRIu64, j ? "," : "", s->timeline[j]);
      fputc(']', out);
    }
    fputs(",\"stacks\":[", out);
    for (j = 0; j < s->n_stacks && err == 0; j++) {
      const stkr_agg_stack *st = s->stacks[j];
      fprintf(out, "%s[%" PRIu64, j ? "," : "", st->count);
      /* The agg's frames are innermost first; the tree wants root first,
       * and a stack cut short its "[truncated]" root (QA, session 27: its
       * outermost kept frame was drawn as a root with no caller). */
      if (st->truncated && st->n_frames > 0) {
        int64_t idx = ftab_get(&t, &stkr_agg_cut_frame);
        if (idx < 0) {
          err = (int)idx;
          break;
        }
        fprintf(out, ",%" PRId64, idx);
      }
      for (k = st->n_frames; k-- > 0;) {
        int64_t idx = ftab_get(&t, &st->frames[k]);
        if (idx < 0) {
          err = (int)idx;
          break;
        }
        fprintf(out, ",%" PRId64, idx);
      }
      fputc(']', out);
    }
    fputs("]}", out);
  }
  /* The watchdog's hangs, drawn on its sites' timelines (hangs.c). */
  fputs("],\n\"hangs\":", out);
  stkr__hangs_json(a, out);
  fputs(",\n\"frames\":[", out);
  for (i = 0; i < t.n && err == 0; i++) {
    const hframe *f = &t.v[i];
    fputs(i ? ",\n[" : "\n[", out);
    put_json(out, f->label);
    fputc(',', out);
    fputc('"', out);
    put_json_body(out, f->file);
    if (f->file != NULL && f->line > 0)
      fprintf(out, ":%" PRIu32, f->line);
    fputc('"', out);
    fprintf(out, ",%u,", f->flags);
    put_json(out, f->image);
    fputc(']', out);
  }
  /* [t_ns on the timelines' line (agg_runs.h), name, external] */
  fputs("],\n\"marks\":[", out);
  for (i = 0; i < a->n_marks; i++) {
    fprintf(out, "%s[%" PRIu64 ",", i ? "," : "", a->marks[i].t_ns);
    put_json(out, a->marks[i].name);
    fprintf(out, ",%s]", a->marks[i].external ? "true" : "false");
  }
  fputs("]}</script>\n", out);
  ftab_free(&t);
  return err;
}

int stkr_html_write(FILE *out, const stkr_agg *a, const char *title) {
  return stkr_html_write_banner(out, a, title, NULL);
}

int stkr_html_write_banner(FILE *out, const stkr_agg *a, const char *title,
                           const char *banner) {
  return stkr_html_write_sections(out, a, title, banner, NULL, NULL);
}

int stkr_html_write_sections(FILE *out, const stkr_agg *a, const char *title,
                             const char *banner, stkr_html_section_fn extra,
                             void *extra_arg) {
  int err;

  if (out == NULL || a == NULL)
    return -EINVAL;
  if (title == NULL || title[0] == '\0')
    title = "stackrec report";
  errno = 0;
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        /* No fetch of any kind: the page is complete as it is. */
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
        "'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, "
        "initial-scale=1\">\n<meta name=\"generator\" content=\"stackrec\">\n"
        "<title>", out);
  stkr_html_put_text(out, title);
  fputs("</title>\n<style>\n", out);
  fwrite(stkr__report_css, 1, stkr__report_css_len, out);
  fputs("</style></head>\n<body>\n<header><h1>", out);
  stkr_html_put_text(out, title);
  fputs("</h1>\n", out);
  if (banner != NULL && banner[0] != '\0') {
    /* Before anything else: the numbers below are not the whole story. */
    fputs("<p class=\"incomplete\" role=\"alert\"><strong>", out);
    stkr_html_put_text(out, banner);
    fputs("</strong></p>\n", out);
  }
  put_summary(out, a);
  fputs("</header>\n", out);
  if (extra != NULL)
    extra(out, extra_arg);
  put_drops(out, a);
  put_site_table(out, a);
  put_flame_sections(out, a);
  fputs("<div id=\"tip\" class=\"tip\" hidden></div>\n", out);
  err = put_data(out, a);
  if (err != 0)
    return err;
  fputs("<script>\n", out);
  fwrite(stkr__report_js, 1, stkr__report_js_len, out);
  fputs("</script>\n</body></html>\n", out);
  if (fflush(out) != 0 || ferror(out))
    return -(errno ? errno : EIO);
  return 0;
}
