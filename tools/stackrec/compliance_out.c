/*
 * compliance_out.c: `stackrec compliance` output as text, JSON, JUnit XML
 * and the HTML report's compliance section (compliance.h).
 *
 * JUnit: one <testsuite> per rule, one <testcase> per (site, module) the
 * rule selects (by its sites and modules globs); a case that broke the
 * rule holds a <failure> with the count, first time and example stack, so
 * CI dashboards show each finding as a failed case. A rule that selects
 * no group at all gets one passing case ("no matching events"), so every
 * rule of the policy is visible.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/compliance.h"
#include "tools/stackrec/html.h"

#define FRAME_TEXT 1024
#define STACK_LINES 8 /* frames shown of an example stack in text */

static int done(FILE *f) {
  if (fflush(f) != 0 || ferror(f))
    return -(errno ? errno : EIO);
  return 0;
}

static void put_str(FILE *f, const char *s) {
  stkr_cli_put_escaped(f, (const uint8_t *)s, strlen(s));
}

static const stkr_agg_stack *stack_at(const stkr_comp *c, size_t i) {
  return &c->agg->stacks[i];
}

/* A string escaped as a format wants it (text, XML, HTML). */
typedef void (*put_fn)(FILE *f, const char *s);

/* How every format names a finding: the rule's id, the site and the
 * module, each escaped by put after its separator in sep ("  [", "] ",
 * " from " in text; a table row's cells in HTML; a testcase's attributes
 * in JUnit). */
static void put_finding_names(FILE *f, put_fn put, const char *const sep[3],
                              const stkr_rule *r, const stkr_comp_group *g) {
  fputs(sep[0], f);
  put(f, r->id);
  fputs(sep[1], f);
  put(f, g->site);
  fputs(sep[2], f);
  put(f, g->module);
}

/* Each rule note (compliance_rules.c): sep[0] before a rule not checked,
 * sep[1] before a warning, then the rule's id, sep[2], the note escaped
 * by put, and sep[3]. */
static void put_rule_notes(FILE *f, const stkr_comp *c, put_fn put,
                           const char *const sep[4]) {
  size_t i;

  for (i = 0; c->rule_notes != NULL && i < c->policy->n_rules; i++)
    if (c->rule_notes[i] != NULL) {
      fputs(sep[c->rule_unchecked[i] ? 0 : 1], f);
      put(f, c->policy->rules[i].id);
      fputs(sep[2], f);
      put(f, c->rule_notes[i]);
      fputs(sep[3], f);
    }
}

/* What a finding means, in words ("before consent.granted", ...). */
static void put_condition(FILE *f, const stkr_rule *r) {
  const char *sep = "";

  if (r->before_mark != NULL) {
    fputs("before ", f);
    put_str(f, r->before_mark);
    sep = ", ";
  }
  if (r->in_state != NULL) {
    fprintf(f, "%s%sin ", sep, r->not_in_state ? "not " : "");
    put_str(f, r->in_state);
    sep = ", ";
  }
  if (r->max_per_second >= 0) {
    fprintf(f, "%smore than %g per second", sep, r->max_per_second);
    sep = ", ";
  }
  if (r->max_per_minute >= 0)
    fprintf(f, "%smore than %g per minute", sep, r->max_per_minute);
  if (r->before_mark == NULL && r->in_state == NULL && !stkr_rule_has_rate(r))
    fputs("any call", f);
}

static void put_stack_text(FILE *f, const stkr_agg_stack *s, const char *ind,
                           size_t max) {
  char buf[FRAME_TEXT];
  size_t i;

  for (i = 0; i < s->n_frames && i < max; i++) {
    fputs(ind, f);
    put_str(f, stkr_agg_frame_text(&s->frames[i], STKR_AGG_BY_LINE, buf,
                                   sizeof buf));
    putc('\n', f);
  }
  if (s->n_frames > max)
    fprintf(f, "%s... %zu more frame%s\n", ind, s->n_frames - max,
            s->n_frames - max == 1 ? "" : "s");
  if (s->truncated) /* report's words (QA, session 39: compliance had none) */
    fprintf(f, "%s[stack cut short: outer callers missing]\n", ind);
}

const char *stkr_comp_unjudged_why(const stkr_comp *c, char *buf, size_t cap) {
  static const char *const text[3] = {
      "whose earliest segments the disk cap deleted (or whose first "
      "batches are lost: damaged, or never written)",
      "forked from a process not in the recording (whose marks they "
      "started with)",
      "that dropped a mark, or whose origin did (a full ring)"};
  const bool why[3] = {
      c->head_lost_processes > 0 ||
          (c->unknown_origin_processes == 0 && c->marks_lost_processes == 0),
      c->unknown_origin_processes > 0, c->marks_lost_processes > 0};
  size_t n = 0;

  buf[0] = '\0';
  for (int i = 0; i < 3; i++)
    if (why[i] && n < cap)
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", or " : "",
                            text[i]);
  return buf;
}

/* The events no rule on marks could judge (stkr_comp.unjudged), as a line
 * of text or an HTML paragraph. */
static void put_unjudged(FILE *f, const stkr_comp *c, bool html) {
  char why[STKR_COMP_WHY_MAX];

  if (c->unjudged == 0) return;
  fprintf(f, "%s%" PRIu64 " event%s of %zu process%s %s were not judged by "
          "rules on marks, nor counted before consent or in background: a "
          "mark of theirs may have been lost%s",
          html ? "<p class=\"incomplete\">" : "\n", c->unjudged,
          c->unjudged == 1 ? "" : "s", c->unjudged_processes,
          c->unjudged_processes == 1 ? "" : "es",
          stkr_comp_unjudged_why(c, why, sizeof why),
          html ? "</p>\n" : "\n");
}

/* The events whose module is a guess (stkr_comp.unnamed), as a line of
 * text or an HTML paragraph. */
static void put_unnamed(FILE *f, const stkr_comp *c, bool html) {
  if (c->unnamed == 0) return;
  fprintf(f, "%s%" PRIu64 " event%s with stacks never symbolized (PCs only: "
          "recorded offline, recovered, or left by record): the module "
          "map's symbol prefixes could not name their module; 'stackrec "
          "symbolize' names them%s",
          html ? "<p class=\"incomplete\">" : "# NOT SYMBOLIZED: ",
          c->unnamed, c->unnamed == 1 ? "" : "s", html ? ".</p>\n" : "\n");
}

/* The events whose stacks end inside system libraries (stkr_comp.cut),
 * as a line of text or an HTML paragraph. */
static void put_cut(FILE *f, const stkr_comp *c, bool html) {
  if (c->cut == 0) return;
  fprintf(f, "%s%" PRIu64 " event%s with stacks cut short inside system "
          "libraries (the walk lost their outer callers): each is counted "
          "under the library where its stack ends, not under its caller%s",
          html ? "<p class=\"incomplete\">" : "# CUT SHORT: ", c->cut,
          c->cut == 1 ? "" : "s", html ? ".</p>\n" : "\n");
}

/* The filters and what they kept, between pre and post, escaped by put:
 * a line of text, an HTML paragraph, a JUnit testcase's name. */
static void put_filters(FILE *f, const stkr_comp *c, put_fn put,
                        const char *pre, const char *post) {
  if (c->filters == NULL) return;
  fputs(pre, f);
  put(f, c->filters);
  fprintf(f, ": %" PRIu64 " of %" PRIu64 " events judged", c->agg->events,
          c->agg->events_read);
  if (strstr(c->filters, "time [") != NULL)
    fputs(" (--from/--to count from each process's start; the times here "
          "from the recording's)", f);
  fputs(post, f);
}

/* Processes on several monotonic clocks (stkr_comp.clocks): how their
 * times are laid out, as a line of text or an HTML paragraph. */
static void put_boots(FILE *f, const stkr_comp *c, bool html) {
  if (c->clocks < 2) return;
  fprintf(f, "%sprocesses on %zu monotonic clocks (devices, reboots or time "
          "namespaces): times are seconds since the earliest start, each "
          "clock's placed by its boot's wall-clock time or its namespace's "
          "offset%s",
          html ? "<p>" : "# CLOCKS: ", c->clocks, html ? ".</p>\n" : "\n");
}

/* ---- text -------------------------------------------------------------------- */

int stkr_comp_write_text(FILE *f, const stkr_comp *c, const char *banner) {
  static const char *const text_sep[3] = {"  [", "] ", " from "};
  static const char *const text_notes[4] = {"# NOT CHECKED: rule ",
                                            "# WARNING: rule ", ": ", "\n"};
  size_t i;

  if (banner != NULL && banner[0] != '\0')
    fprintf(f, "# %s\n", banner);
  put_filters(f, c, put_str, "# filters: ", "\n");
  put_rule_notes(f, c, put_str, text_notes);
  if (c->unattributed > 0)
    fprintf(f, "# UNATTRIBUTED: %" PRIu64 " event%s without a module (no "
            "frame in a known image: a library unloaded before the "
            "recording listed it, or no frame at all); no modules pattern "
            "selects them\n",
            c->unattributed, c->unattributed == 1 ? "" : "s");
  put_unnamed(f, c, false);
  put_cut(f, c, false);
  put_boots(f, c, false);
  fprintf(f, "# %" PRIu64 " events, %zu (site, module) pairs, %" PRIu64
          " marks; %zu of %zu processes with events saw %s%s\n",
          c->agg->events, c->n_groups, c->marks, c->consent_processes,
          c->processes_with_events, STKR_COMP_CONSENT_MARK,
          c->marks_supported ? "" : " (this build reads no marks)");
  fputs("# times: seconds since the recording started; peaks: most events "
        "in a sliding window, per process\n",
        f);
  for (i = 0; i < c->n_groups; i++) {
    const stkr_comp_group *g = &c->groups[i];

    if (i == 0 || strcmp(g->site, c->groups[i - 1].site) != 0) {
      put_str(f, g->site);
      fputs(":\n", f);
    }
    fputs("  ", f);
    put_str(f, g->module);
    fprintf(f, ": %" PRIu64 " event%s in %u process%s, first %.3f s, last "
            "%.3f s, peak %" PRIu64 "/s %" PRIu64 "/min, before consent %"
            PRIu64 ", in background %" PRIu64 "\n",
            g->count, g->count == 1 ? "" : "s", g->n_pids,
            g->n_pids == 1 ? "" : "es", g->first_s,
            g->last_s, g->peak_per_second, g->peak_per_minute,
            g->before_consent, g->background);
    put_stack_text(f, stack_at(c, g->example), "      ", 3);
  }
  put_unjudged(f, c, false);
  if (c->n_findings == 0) {
    if (c->n_unchecked > 0)
      fprintf(f, "\nno findings, but %zu rule%s not checked (above)\n",
              c->n_unchecked, c->n_unchecked == 1 ? "" : "s");
    else
      fputs("\nno findings\n", f);
    return done(f);
  }
  fprintf(f, "\n%zu finding%s:\n", c->n_findings, c->n_findings == 1 ? "" : "s");
  for (i = 0; i < c->n_findings; i++) {
    const stkr_comp_finding *x = &c->findings[i];
    const stkr_comp_group *g = &c->groups[x->group];

    put_finding_names(f, put_str, text_sep, x->rule, g);
    fputs(": ", f);
    put_condition(f, x->rule);
    fprintf(f, ": %" PRIu64 " event%s, first at %.3f s", x->count,
            x->count == 1 ? "" : "s", x->first_s);
    if (stkr_rule_has_rate(x->rule))
      fprintf(f, ", peak %" PRIu64 "/s %" PRIu64 "/min", x->peak_per_second,
              x->peak_per_minute);
    putc('\n', f);
    put_stack_text(f, stack_at(c, x->stack), "      ", STACK_LINES);
  }
  return done(f);
}

/* ---- JSON -------------------------------------------------------------------- */

/* "[frames...],"stack_truncated":B" (the walk cut short: report's "stack
 * cut short", jsonl's stack_truncated). */
static void put_stack_json(FILE *f, const stkr_agg_stack *s) {
  size_t i;

  putc('[', f);
  for (i = 0; i < s->n_frames; i++) {
    const stkr_frame *fr = &s->frames[i];
    char buf[FRAME_TEXT];

    stkr_cli_put_json_member(f, i ? ",{" : "{", "function",
                             stkr_agg_frame_label(fr, buf, sizeof buf));
    if (fr->file != NULL) {
      stkr_cli_put_json_member(f, ",", "file", fr->file);
      if (fr->line != 0)
        fprintf(f, ",\"line\":%" PRIu32, fr->line);
    }
    if (fr->image != NULL)
      stkr_cli_put_json_member(f, ",", "image", fr->image);
    putc('}', f);
  }
  fprintf(f, "],\"stack_truncated\":%s", s->truncated ? "true" : "false");
}

/* "unattributed":N,"rule_notes":[{"rule","checked","why"}...], then the
 * groups' opening. checked false: the rule could not see its sites. */
static void put_rule_notes_json(FILE *f, const stkr_comp *c) {
  const char *sep = "";
  size_t i;

  fprintf(f, "\"unattributed\":%" PRIu64 ",\"rule_notes\":[",
          c->unattributed);
  for (i = 0; c->rule_notes != NULL && i < c->policy->n_rules; i++)
    if (c->rule_notes[i] != NULL) {
      stkr_cli_put_json_member(f, *sep ? ",{" : "{", "rule",
                               c->policy->rules[i].id);
      fprintf(f, ",\"checked\":%s", c->rule_unchecked[i] ? "false" : "true");
      stkr_cli_put_json_member(f, ",", "why", c->rule_notes[i]);
      putc('}', f);
      sep = ",";
    }
  fputs("],\n\"groups\":[", f);
}

int stkr_comp_write_json(FILE *f, const stkr_comp *c, const char *banner) {
  size_t i;

  fprintf(f, "{\"version\":1,\"incomplete\":");
  if (banner != NULL && banner[0] != '\0')
    stkr_cli_put_json_str(f, banner);
  else
    fputs("null", f);
  fprintf(f, ",\"events\":%" PRIu64 ",\"marks\":%" PRIu64
          ",\"processes_with_events\":%zu,\"consent_processes\":%zu,"
          "\"marks_supported\":%s,\"unjudged\":%" PRIu64
          ",\"unjudged_processes\":%zu,\"unknown_origin_processes\":%zu,"
          "\"marks_lost_processes\":%zu,\"unnamed\":%" PRIu64
          ",\"cut_short\":%" PRIu64 ",\"clocks\":%zu,\"events_read\":%" PRIu64
          ",\"filters\":",
          c->agg->events, c->marks, c->processes_with_events,
          c->consent_processes, c->marks_supported ? "true" : "false",
          c->unjudged, c->unjudged_processes, c->unknown_origin_processes,
          c->marks_lost_processes, c->unnamed, c->cut, c->clocks,
          c->agg->events_read);
  if (c->filters != NULL)
    stkr_cli_put_json_str(f, c->filters);
  else
    fputs("null", f);
  putc(',', f);
  put_rule_notes_json(f, c);
  for (i = 0; i < c->n_groups; i++) {
    const stkr_comp_group *g = &c->groups[i];
    stkr_cli_put_json_member(f, i ? ",\n{" : "\n{", "site", g->site);
    stkr_cli_put_json_member(f, ",", "module", g->module);
    fprintf(f, ",\"count\":%" PRIu64 ",\"first_ts\":%" PRIu64
            ",\"last_ts\":%" PRIu64 ",\"first_s\":%.9f,\"last_s\":%.9f,"
            "\"peak_per_second\":%" PRIu64 ",\"peak_per_minute\":%" PRIu64
            ",\"before_consent\":%" PRIu64 ",\"background\":%" PRIu64
            ",\"late\":%" PRIu64 ",\"stacks\":%zu,\"processes\":%u,"
            "\"stack\":",
            g->count, g->first_ts, g->last_ts, g->first_s, g->last_s,
            g->peak_per_second, g->peak_per_minute, g->before_consent,
            g->background, g->late, g->n_stacks, g->n_pids);
    put_stack_json(f, stack_at(c, g->example));
    putc('}', f);
  }
  fputs("],\n\"findings\":[", f);
  for (i = 0; i < c->n_findings; i++) {
    const stkr_comp_finding *x = &c->findings[i];
    const stkr_comp_group *g = &c->groups[x->group];
    stkr_cli_put_json_member(f, i ? ",\n{" : "\n{", "rule", x->rule->id);
    stkr_cli_put_json_member(f, ",", "site", g->site);
    stkr_cli_put_json_member(f, ",", "module", g->module);
    fprintf(f, ",\"count\":%" PRIu64 ",\"first_ts\":%" PRIu64
            ",\"first_s\":%.9f", x->count, x->first_ts, x->first_s);
    if (stkr_rule_has_rate(x->rule))
      fprintf(f, ",\"peak_per_second\":%" PRIu64 ",\"peak_per_minute\":%"
              PRIu64, x->peak_per_second, x->peak_per_minute);
    fputs(",\"stack\":", f);
    put_stack_json(f, stack_at(c, x->stack));
    putc('}', f);
  }
  fputs("]}\n", f);
  return done(f);
}

/* ---- JUnit ------------------------------------------------------------------- */

static void put_xml(FILE *f, const char *s) { stkr_html_put_text(f, s); }

/* The finding of rule r at group g, or NULL. */
static const stkr_comp_finding *finding_at(const stkr_comp *c,
                                           const stkr_rule *r, size_t g) {
  size_t i;

  for (i = 0; i < c->n_findings; i++)
    if (c->findings[i].rule == r && c->findings[i].group == g)
      return &c->findings[i];
  return NULL;
}

static void put_junit_failure(FILE *f, const stkr_comp *c,
                              const stkr_comp_finding *x) {
  const stkr_agg_stack *s = stack_at(c, x->stack);
  char msg[512], buf[FRAME_TEXT];
  size_t i;

  snprintf(msg, sizeof msg, "%" PRIu64 " event%s, first at %.3f s", x->count,
           x->count == 1 ? "" : "s", x->first_s);
  fputs("      <failure type=\"", f);
  put_xml(f, x->rule->id);
  fputs("\" message=\"", f);
  put_xml(f, msg);
  fputs("\">", f);
  put_xml(f, x->rule->description ? x->rule->description : x->rule->id);
  fputs("\n", f);
  for (i = 0; i < s->n_frames; i++) {
    fputs("  ", f);
    put_xml(f, stkr_agg_frame_text(&s->frames[i], STKR_AGG_BY_LINE, buf,
                                   sizeof buf));
    fputs("\n", f);
  }
  if (s->truncated)
    fputs("  [stack cut short: outer callers missing]\n", f);
  fputs("</failure>\n", f);
}

int stkr_comp_write_junit(FILE *f, const stkr_comp *c, const char *banner) {
  static const char *const junit_sep[3] = {
      "    <testcase classname=\"stackrec.compliance.", "\" name=\"", " from "};
  const stkr_policy *p = c->policy;
  size_t r, i, tests = 0;
  bool incomplete = banner != NULL && banner[0] != '\0';

  for (r = 0; p != NULL && r < p->n_rules; r++)
    tests += (c->rule_groups[r] ? c->rule_groups[r] : 1) +
             (c->rule_notes[r] != NULL);
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<testsuites name=\"stackrec compliance\" tests=\"%zu\" "
          "failures=\"%zu\" errors=\"%zu\">\n",
          tests + incomplete + (c->filters != NULL), c->n_findings,
          incomplete + c->n_unchecked);
  /* What the rules judged, on the dashboard too (QA, session 39: a
   * filter's typo left every rule green, and nothing said so). */
  if (c->filters != NULL) {
    fputs("  <testsuite name=\"filters\" tests=\"1\" failures=\"0\" "
          "errors=\"0\">\n    <testcase classname=\"stackrec.compliance\" "
          "name=\"", f);
    put_filters(f, c, put_xml, "filters: ", "");
    fputs("\"/>\n  </testsuite>\n", f);
  }
  /* The rules below judged what was read: an incomplete recording is an
   * error of its own, not a pass (QA, session 22). */
  if (incomplete) {
    fputs("  <testsuite name=\"recording\" tests=\"1\" failures=\"0\" "
          "errors=\"1\">\n    <testcase classname=\"stackrec.compliance\" "
          "name=\"recording complete\">\n      <error message=\"", f);
    put_xml(f, banner);
    fputs("\"/>\n    </testcase>\n  </testsuite>\n", f);
  }
  for (r = 0; p != NULL && r < p->n_rules; r++) {
    const stkr_rule *rule = &p->rules[r];
    size_t fails = 0;

    for (i = 0; i < c->n_findings; i++)
      fails += c->findings[i].rule == rule;
    fputs("  <testsuite name=\"", f);
    put_xml(f, rule->id);
    fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%d\">\n",
            (c->rule_groups[r] ? c->rule_groups[r] : 1) +
                (c->rule_notes[r] != NULL),
            fails, c->rule_unchecked[r] ? 1 : 0);
    /* A rule that could not see its sites errs (its pass would be
     * untrue); one whose modules match nothing is skipped, said why. */
    if (c->rule_notes[r] != NULL) {
      fprintf(f, "    <testcase classname=\"stackrec.compliance\" "
              "name=\"%s\">\n      <%s message=\"",
              c->rule_case[r],
              c->rule_unchecked[r] ? "error" : "skipped");
      put_xml(f, c->rule_notes[r]);
      fputs("\"/>\n    </testcase>\n", f);
    }
    if (c->rule_groups[r] == 0)
      fputs("    <testcase classname=\"stackrec.compliance\" "
            "name=\"no matching events\"/>\n", f);
    for (i = 0; i < c->n_groups; i++) {
      const stkr_comp_group *g = &c->groups[i];
      const stkr_comp_finding *x;
      if (!stkr_rule_matches(rule, g->site, g->module))
        continue;
      x = finding_at(c, rule, i);
      put_finding_names(f, put_xml, junit_sep, rule, g);
      fputs(x != NULL ? "\">\n" : "\"/>\n", f);
      if (x != NULL) {
        put_junit_failure(f, c, x);
        fputs("    </testcase>\n", f);
      }
    }
    fputs("  </testsuite>\n", f);
  }
  fputs("</testsuites>\n", f);
  return done(f);
}

/* ---- HTML section ------------------------------------------------------------ */

static void put_html_stack(FILE *f, const stkr_agg_stack *s) {
  char buf[FRAME_TEXT];
  size_t i;

  fputs("<ol class=\"stack\">", f);
  for (i = 0; i < s->n_frames; i++) {
    fputs("<li>", f);
    stkr_html_put_text(f, stkr_agg_frame_text(&s->frames[i], STKR_AGG_BY_LINE,
                                              buf, sizeof buf));
    fputs("</li>", f);
  }
  fputs("</ol>", f);
  if (s->truncated) /* not a numbered frame */
    fputs("<p class=\"cut\">[stack cut short: outer callers missing]</p>",
          f);
}

void stkr_comp_write_html_section(FILE *f, const stkr_comp *c) {
  static const char *const html_sep[3] = {"<tr class=\"finding\"><td>",
                                          "</td><td>", "</td><td>"};
  static const char *const html_notes[4] = {
      "<p class=\"incomplete\">Not checked: rule ", "<p>Warning: rule ", ": ",
      "</p>\n"};
  static const char *const group_cols[] = {
      "site",   "module",   "=events",          "=first (s)", "=last (s)",
      "=peak/s", "=peak/min", "=before consent", "=background"};
  size_t i;

  fprintf(f, "<section id=\"compliance\"><h2>Compliance</h2>\n"
          "<p>%zu finding%s; %" PRIu64 " marks read; %zu of %zu processes "
          "with events saw %s.</p>\n",
          c->n_findings, c->n_findings == 1 ? "" : "s", c->marks,
          c->consent_processes, c->processes_with_events,
          STKR_COMP_CONSENT_MARK);
  put_rule_notes(f, c, stkr_html_put_text, html_notes);
  put_unjudged(f, c, true);
  put_unnamed(f, c, true);
  put_cut(f, c, true);
  put_filters(f, c, stkr_html_put_text, "<p>Filters: ", ".</p>\n");
  put_boots(f, c, true);
  if (c->unattributed > 0)
    fprintf(f, "<p>%" PRIu64 " event%s without a module (no frame in a known "
            "image); no modules pattern selects them.</p>\n",
            c->unattributed, c->unattributed == 1 ? "" : "s");
  if (c->n_findings > 0) {
    static const char *const cols[] = {"rule", "site", "module", "=events",
                                       "=first (s)", "condition", "stack"};
    STKR_HTML_TABLE_OPEN(f, "id=\"findings\"", cols);
    for (i = 0; i < c->n_findings; i++) {
      const stkr_comp_finding *x = &c->findings[i];
      const stkr_comp_group *g = &c->groups[x->group];
      put_finding_names(f, stkr_html_put_text, html_sep, x->rule, g);
      fprintf(f, "</td><td class=\"num\">%" PRIu64 "</td><td class=\"num\">%.3f"
              "</td><td>", x->count, x->first_s);
      if (x->rule->before_mark)
        stkr_html_put_text(f, "before "), stkr_html_put_text(f, x->rule->before_mark);
      else if (x->rule->in_state)
        stkr_html_put_text(f, x->rule->not_in_state ? "not in " : "in "),
            stkr_html_put_text(f, x->rule->in_state);
      else if (stkr_rule_has_rate(x->rule))
        fprintf(f, "peak %" PRIu64 "/s, %" PRIu64 "/min", x->peak_per_second,
                x->peak_per_minute);
      else
        fputs("any call", f);
      fputs("</td><td>", f);
      put_html_stack(f, stack_at(c, x->stack));
      fputs("</td></tr>\n", f);
    }
    stkr_html_table_close(f);
  }
  STKR_HTML_TABLE_OPEN(f, "id=\"compliance-groups\"", group_cols);
  for (i = 0; i < c->n_groups; i++) {
    const stkr_comp_group *g = &c->groups[i];
    fputs("<tr><td>", f);
    stkr_html_put_text(f, g->site);
    fputs("</td><td>", f);
    stkr_html_put_text(f, g->module);
    fprintf(f, "</td><td class=\"num\">%" PRIu64 "</td><td class=\"num\">%.3f</td>"
            "<td class=\"num\">%.3f</td><td class=\"num\">%" PRIu64 "</td>"
            "<td class=\"num\">%" PRIu64 "</td><td class=\"num\">%" PRIu64 "</td>"
            "<td class=\"num\">%" PRIu64 "</td></tr>\n",
            g->count, g->first_s, g->last_s, g->peak_per_second,
            g->peak_per_minute, g->before_consent, g->background);
  }
  stkr_html_table_close(f);
  fputs("</section>\n", f);
}
