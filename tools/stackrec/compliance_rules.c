/*
 * compliance_rules.c: what a policy's rules could not see in a recording
 * (compliance.h, stkr_comp_check_rules). A rule that selects nothing
 * passes, and that pass is only true when the recording could have shown
 * the events. Three ways it could not (each passed, "no findings", exit 0,
 * before: QA, sessions 26 and 33):
 *
 * - Its sites belong to a category no process watched: the hook library
 *   records only STACKREC_CATEGORIES (`reasons` is off by default), and
 *   each process's Header says which (stkr_process_info.watched). A
 *   site's category is its name before the first '.'; a glob whose part
 *   before its first '.' is a plain name ("reasons.*") names one. Such a
 *   rule is NOT CHECKED: an error in every output and exit 1.
 * - Its modules globs match no module of the events read: a typo, or an
 *   image name where a module map named the SDK ("libads*" for "AdsSDK").
 *   A warning: a policy may name SDKs this app does not have.
 *
 * - Its sites' events have stacks never symbolized (offline, recovered)
 *   and a module map's symbol prefixes could have claimed them: which
 *   module made them is a guess (QA, session 33: an SDK linked into the
 *   app, recorded offline, passed a rule against it). NOT CHECKED too.
 *
 * Events without a module (no frame in a known image: a library unloaded
 * before the recording listed it) are counted apart: no modules glob can
 * select them.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "preload/match.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/compliance.h"
#include "tools/stackrec/reasons.h"

/* The category a site glob names, as its length (0: none or not plain). */
static size_t glob_category(const char *g) {
  size_t i;

  for (i = 0; g[i] != '\0' && g[i] != '.'; i++)
    if (!((g[i] >= 'a' && g[i] <= 'z') || (g[i] >= '0' && g[i] <= '9') ||
          g[i] == '_' || g[i] == '-'))
      return 0;
  return g[i] == '.' ? i : 0;
}

/* Is cat (len bytes) in the comma-separated list? */
static bool in_list(const char *list, const char *cat, size_t len) {
  const char *p = list;

  while (*p != '\0') {
    size_t n = strcspn(p, ",");
    if (n == len && strncmp(p, cat, len) == 0) return true;
    p += n + (p[n] == ',');
  }
  return false;
}

bool stkr_comp_category_watched(const stkr_comp *c, stkr_reader *r,
                                const char *cat, size_t len) {
  /* Events of it were read: whatever the Headers say (review, session 26:
   * an app whose watched named other categories), it was recorded. */
  for (size_t g = 0; g < c->n_groups; g++)
    if (strncmp(c->groups[g].site, cat, len) == 0 &&
        c->groups[g].site[len] == '.')
      return true;
  size_t i, n = stkr_reader_process_count(r);

  for (i = 0; i < n; i++) {
    const char *w = stkr_reader_process(r, i)->watched;
    if (w[0] == '\0' || in_list(w, cat, len)) return true;
  }
  /* With no process, nothing was watched (QA, session 31: a static
   * program the hooks cannot enter, or a wrong -o, passed every rule). */
  return false;
}

/* The categories of rule's site globs that no process watched, into b:
 * the first UNWATCHED_SHOWN, each once, then "and more". Compared with the
 * ones listed only, not with every glob before (QA, session 31: 500 000
 * globs ran for minutes). */
#define UNWATCHED_SHOWN 8
/* A glob whose category part is a glob too ("f*.*", "[f]iles.open"): the
 * category of the first hook site it matches, if every hook site it
 * matches is of an unwatched category (all of them one category: a
 * pattern across several is left alone), into *len. @return that site's
 * name, or NULL (QA, session 41: "f*.*" on a recording without files
 * passed, where "files.*" was not checked). */
static const char *glob_unwatched_category(const stkr_comp *c, stkr_reader *r,
                                           const char *g, size_t *len) {
  const char *first = NULL, *name;
  size_t first_len = 0;

  for (size_t k = 0; (name = stkr__pl_known_site(k)) != NULL; k++) {
    size_t cl = strcspn(name, ".");
    if (fnmatch(g, name, 0) != 0) continue;
    if (first != NULL && (cl != first_len || strncmp(name, first, cl) != 0))
      return NULL;
    if (first == NULL && stkr_comp_category_watched(c, r, name, cl))
      return NULL;
    first = name;
    first_len = cl;
  }
  *len = first_len;
  return first;
}

static bool unwatched_sites(const stkr_comp *c, stkr_reader *r,
                            const stkr_rule *rule,
                            stkr_cli_buf *b, size_t *n_out) {
  const char *shown[UNWATCHED_SHOWN];
  size_t shown_len[UNWATCHED_SHOWN];
  size_t i, j, n = 0;
  bool more = false;

  for (i = 0; i < rule->n_sites; i++) {
    const char *g = rule->sites[i];
    size_t len = glob_category(g);
    bool again = false;

    if (len == 0 && (g = glob_unwatched_category(c, r, g, &len)) == NULL)
      continue;
    for (j = 0; j < n && !again; j++) /* each category once */
      again = shown_len[j] == len && strncmp(shown[j], g, len) == 0;
    if (again || stkr_comp_category_watched(c, r, g, len)) continue;
    if (n == UNWATCHED_SHOWN) {
      more = true;
      continue;
    }
    if (n > 0) stkr_cli_buf_puts(b, ", ");
    stkr_cli_buf_put(b, g, len);
    shown[n] = g;
    shown_len[n++] = len;
  }
  if (more) stkr_cli_buf_puts(b, " and more");
  *n_out = n;
  return n > 0;
}

/* Is g (len bytes) one of the hook library's categories, in any case
 * ("Identifiers.*" is a typo too)? */
static bool is_our_category(const char *g, size_t len) {
  for (unsigned cat = 0; len > 0 && cat < STKR__PL_CAT_COUNT; cat++)
    if (strlen(stkr__pl_cat_name(cat)) == len &&
        strncasecmp(stkr__pl_cat_name(cat), g, len) == 0)
      return true;
  return false;
}

/* Does g match a site the hook library records, a required-reason API
 * site (reasons.<api>, reasons.h; review: reasons.NSUserDefaults warned)
 * or a site of the events read? */
static bool site_known(const stkr_comp *c, const char *g) {
  const char *name;
  size_t k;

  for (k = 0; (name = stkr__pl_known_site(k)) != NULL; k++)
    if (fnmatch(g, name, 0) == 0) return true;
  for (k = 0; k < stkr_reason_category_count; k++)
    for (const char *const *a = stkr_reason_categories[k].apis; *a; a++) {
      char site[128];
      snprintf(site, sizeof site, STKR_REASONS_CATEGORY ".%s", *a);
      if (fnmatch(g, site, 0) == 0) return true;
    }
  for (k = 0; k < c->n_groups; k++)
    if (fnmatch(g, c->groups[k].site, 0) == 0) return true;
  return false;
}

/* What is wrong with site pattern g, or NULL (an app's own sites may be
 * named anything: only what cannot be meant is said). */
static const char *site_pattern_flaw(const stkr_comp *c, const char *g) {
  const char *dot = strchr(g, '.');
  size_t len = dot != NULL ? (size_t)(dot - g) : strlen(g);

  if (g[0] == ' ' || g[0] == '\t' || (*g && (g[strlen(g) - 1] == ' ' ||
                                             g[strlen(g) - 1] == '\t')))
    return "has a space at its start or end";
  if (dot == NULL && g[strcspn(g, "*?[")] == '\0') {
    /* A bare category ("identifiers") names no site (QA, session 39). */
    if (is_our_category(g, len))
      return "names a category, not a site (sites are category.name: add "
             "\".*\" for all of them)";
    return site_known(c, g) ? NULL
                            : "matches no site the hook library records, "
                              "nor any of the events read (sites are "
                              "category.name)";
  }
  if (dot == NULL || !is_our_category(g, len) || site_known(c, g))
    return NULL;
  return "matches no site the hook library records, nor any of the events "
         "read";
}

/* After a dotted pattern in one of our categories: " (its sites in that
 * category: a, b)". */
static void put_category_sites(stkr_cli_buf *b, const char *g) {
  const char *dot = strchr(g, '.'), *name;
  size_t len = dot != NULL ? (size_t)(dot - g) : 0, k, n;

  if (len == 0 || !is_our_category(g, len)) return;
  stkr_cli_buf_puts(b, " (its sites in that category: ");
  for (k = n = 0; (name = stkr__pl_known_site(k)) != NULL; k++) {
    if (strncasecmp(name, g, len) != 0 || name[len] != '.') continue;
    if (n++ > 0) stkr_cli_buf_puts(b, ", ");
    stkr_cli_buf_puts(b, name);
  }
  stkr_cli_buf_puts(b, ")");
}

/* Site patterns of rule's that cannot be meant: a typo, as likely as not
 * (QA, session 31: "identifiers.hostname" for identifiers.gethostname
 * selected nothing and passed in silence; session 39: only the first was
 * said, and "identifiers", " identifiers.uname" passed). A warning. Into
 * b: the first TYPOS_SHOWN, each with why, then how many more. */
#define TYPOS_SHOWN 4
static bool unknown_sites(const stkr_comp *c, const stkr_rule *rule,
                          stkr_cli_buf *b) {
  size_t n = 0;

  for (size_t i = 0; i < rule->n_sites; i++) {
    const char *g = rule->sites[i], *why = site_pattern_flaw(c, g);
    if (why == NULL) continue;
    if (n++ >= TYPOS_SHOWN) continue;
    stkr_cli_buf_puts(b, n == 1 ? "its sites pattern " : "; pattern ");
    stkr_cli_buf_puts(b, g);
    stkr_cli_buf_puts(b, " ");
    stkr_cli_buf_puts(b, why);
    put_category_sites(b, g);
  }
  if (n > TYPOS_SHOWN) {
    stkr_cli_buf_puts(b, "; and ");
    stkr_cli_buf_u64(b, n - TYPOS_SHOWN);
    stkr_cli_buf_puts(b, " more such patterns");
  }
  return n > 0;
}

/* Were all events of rule's sites left out by the filters? None of them
 * passed (a group of a site of its: then its modules took none, not the
 * filters; review, session 39), but the sites read before filtering
 * (every process's, marks aside) have some. Only asked of a filtered rule
 * that selected nothing. */
static bool filtered_out(const stkr_comp *c, stkr_reader *r,
                         const stkr_rule *rule) {
  size_t i, k, n, np = stkr_reader_process_count(r);
  const stkr_site_info *si;

  for (i = 0; i < c->n_groups; i++)
    if (stkr_rule_matches_site(rule, c->groups[i].site)) return false;

  for (i = 0; i < np; i++)
    if (stkr_reader_sites(r, i, &si, &n) == 0)
      for (k = 0; k < n; k++)
        if (!si[k].is_mark && si[k].events > 0 && si[k].name != NULL &&
            stkr_rule_matches_site(rule, si[k].name))
          return true;
  return false;
}

/* Rule i's events whose module is a guess (per_rule: stkr_comp's
 * rule_unnamed, rule_cut; NULL: none): "N" and why into b. @return
 * whether it has any. */
static bool guess_note(stkr_cli_buf *b, const uint64_t *per_rule, size_t i,
                       const char *why) {
  if (per_rule == NULL || per_rule[i] == 0) return false;
  stkr_cli_buf_u64(b, per_rule[i]);
  stkr_cli_buf_puts(b, why);
  return true;
}

/* "the filters (site x.*)": c->filters in a rule's note. */
static void put_filters_said(const stkr_comp *c, stkr_cli_buf *b) {
  stkr_cli_buf_puts(b, "the filters (");
  stkr_cli_buf_puts(b, c->filters != NULL ? c->filters : "");
  stkr_cli_buf_puts(b, ")");
}

/* Was a mark matching glob read (any process's, `stackrec mark`'s too)? */
static bool mark_seen(const stkr_comp *c, const char *glob) {
  if (c->agg->marks_not_kept > 0) return true; /* not all names kept */
  /* A glob, as before_mark is matched (states.h; review, session 39:
   * "consent.*" was said never set). */
  for (size_t i = 0; i < c->agg->n_marks; i++)
    if (fnmatch(glob, c->agg->marks[i].name, 0) == 0) return true;
  return false;
}

/* Does any group's module match one of rule's modules globs? */
static bool modules_seen(const stkr_comp *c, const stkr_rule *rule) {
  size_t i, j;

  for (i = 0; i < c->n_groups; i++)
    for (j = 0; j < rule->n_modules; j++)
      if (fnmatch(rule->modules[j], c->groups[i].module, 0) == 0) return true;
  return false;
}

/* Up to 6 distinct modules of the events read, for the warning. */
static void list_modules(const stkr_comp *c, stkr_cli_buf *b) {
  size_t i, j, n = 0;

  for (i = 0; i < c->n_groups && n <= 6; i++) {
    const char *m = c->groups[i].module;
    bool again = false;
    for (j = 0; j < i && !again; j++) again = strcmp(c->groups[j].module, m) == 0;
    if (again) continue;
    if (n++ > 0) stkr_cli_buf_puts(b, ", ");
    stkr_cli_buf_puts(b, n == 7 ? "..." : m);
  }
  if (n == 0) stkr_cli_buf_puts(b, "none");
}

/* "its modules patterns match no module of the events read (...)". */
static void put_modules_note(const stkr_comp *c, stkr_cli_buf *b) {
  stkr_cli_buf_puts(b, "its modules patterns match no module of the "
                    "events read (");
  list_modules(c, b);
  stkr_cli_buf_puts(b, ")");
}

/* Note `more` (NULL: none) after b's: "; and " between them. */
static void append_note(stkr_cli_buf *b, const stkr_cli_buf *more) {
  if (more == NULL || more->len == 0)
    return;
  if (b->len > 0)
    stkr_cli_buf_puts(b, "; and ");
  stkr_cli_buf_put(b, more->p, more->len);
}

/* Why rule i could not see its events, into b, with its typo note (typo:
 * empty when none) beside: @return its JUnit case, or NULL (it could). An
 * error: the rule is not checked, exit 1. */
static const char *error_note(const stkr_comp *c, stkr_reader *r, size_t i,
                              stkr_cli_buf *b, const stkr_cli_buf *typo) {
  const stkr_rule *rule = &c->policy->rules[i];
  stkr_cli_buf cats = {0};
  size_t n_cats = 0;
  const char *junit = NULL;

  if (stkr_reader_process_count(r) == 0) {
    stkr_cli_buf_puts(b, "the recording holds no process: nothing was "
                      "recorded (a static program the hooks cannot enter, "
                      "or another directory?)");
    return "sites recorded";
  }
  if (c->agg->filtered && c->agg->events == 0 && c->agg->events_read > 0) {
    /* A filter's typo (--thread nosuch) or a window past the end made
     * every rule pass (QA, session 39). */
    put_filters_said(c, b);
    stkr_cli_buf_puts(b, " left none of the ");
    stkr_cli_buf_u64(b, c->agg->events_read);
    stkr_cli_buf_puts(b, " events read: nothing was judged");
    junit = "events judged";
  } else if (unwatched_sites(c, r, rule, &cats, &n_cats)) {
    stkr_cli_buf_puts(b, n_cats == 1 ? "no process watched category "
                                     : "no process watched categories ");
    stkr_cli_buf_put(b, cats.p, cats.len);
    stkr_cli_buf_puts(b, ", so its events there could not be recorded "
                      "(stackrec record --categories)");
    junit = "sites recorded";
  } else if (c->rule_unjudged != NULL && c->rule_unjudged[i] > 0) {
    char why[STKR_COMP_WHY_MAX];
    stkr_cli_buf_u64(b, c->rule_unjudged[i]);
    stkr_cli_buf_puts(b, " of its events, in processes ");
    stkr_cli_buf_puts(b, stkr_comp_unjudged_why(c, why, sizeof why));
    stkr_cli_buf_puts(b, ", could not be judged: the mark it asks about "
                      "may have gone with them");
    junit = "events judged";
  } else if (c->rule_late != NULL && c->rule_late[i] > 0) {
    stkr_cli_buf_u64(b, c->rule_late[i]);
    stkr_cli_buf_puts(b, " of its events were read too late for its peak "
                      "rate (a batch of one thread came a whole window "
                      "after newer events: a long STACKREC_FLUSH_MS), so "
                      "the peak may be higher than it could count");
    junit = "events judged";
  } else if (guess_note(b, c->rule_unnamed, i,
                        " of its events have stacks never symbolized, so "
                        "the module map's symbol prefixes could not say "
                        "which module made them: run 'stackrec "
                        "symbolize' on the recording first")) {
    junit = "stacks symbolized";
  } else if (guess_note(b, c->rule_cut, i,
                        " of its events have stacks cut short inside "
                        "system libraries (the walk lost their outer "
                        "callers: a library built without frame "
                        "pointers), so which module made them is not "
                        "known")) {
    junit = "stacks whole";
  }
  stkr_cli_buf_free(&cats);
  if (junit != NULL)
    append_note(b, typo);
  return junit;
}

/* What may make rule i match nothing, or count every event, into b (typo:
 * its typo note, empty when none): @return its JUnit case, or NULL. A
 * warning: the exit status is not changed. */
static const char *warning_note(const stkr_comp *c, stkr_reader *r, size_t i,
                                stkr_cli_buf *b, const stkr_cli_buf *typo) {
  const stkr_rule *rule = &c->policy->rules[i];
  const bool modules_none = rule->n_modules > 0 && !modules_seen(c, rule);

  if (typo->len > 0) {
    append_note(b, typo);
    if (modules_none) {
      stkr_cli_buf_puts(b, "; and ");
      put_modules_note(c, b);
    }
    return "sites known";
  }
  if (modules_none) {
    put_modules_note(c, b);
    return "modules seen";
  }
  if (c->agg->filtered && c->rule_groups[i] == 0 && filtered_out(c, r, rule)) {
    put_filters_said(c, b);
    stkr_cli_buf_puts(b, " left out every event of its sites: it judged "
                      "none");
    return "events judged";
  }
  if (rule->before_mark != NULL && !mark_seen(c, rule->before_mark)) {
    stkr_cli_buf_puts(b, "its before_mark ");
    stkr_cli_buf_puts(b, rule->before_mark);
    stkr_cli_buf_puts(b, " was never set in the recording: every event of "
                      "its sites counts as before it");
    return "mark seen";
  }
  return NULL;
}

int stkr_comp_check_rules(stkr_comp *c, stkr_reader *r) {
  const stkr_policy *p = c->policy;
  size_t i;

  for (i = 0; i < c->n_groups; i++)
    if (strcmp(c->groups[i].module, STKR_ATTRIB_NO_MODULE) == 0)
      c->unattributed += c->groups[i].count;
  if (p == NULL || p->n_rules == 0) return 0;
  if ((c->rule_notes = calloc(p->n_rules, sizeof *c->rule_notes)) == NULL ||
      (c->rule_unchecked = calloc(p->n_rules, sizeof *c->rule_unchecked)) ==
          NULL ||
      (c->rule_case = calloc(p->n_rules, sizeof *c->rule_case)) == NULL)
    return -ENOMEM;
  for (i = 0; i < p->n_rules; i++) {
    stkr_cli_buf b = {0}, typo = {0};
    /* A typo is said beside any other note, never hidden behind it
     * (review, sessions 31 and 32). */
    if (stkr_reader_process_count(r) > 0)
      (void)unknown_sites(c, &p->rules[i], &typo);
    const char *junit = error_note(c, r, i, &b, &typo);
    const bool unchecked = junit != NULL; /* an error, exit 1 */

    if (junit == NULL)
      junit = warning_note(c, r, i, &b, &typo);
    if (typo.err != 0) b.err = typo.err;
    stkr_cli_buf_free(&typo);
    if (junit != NULL) {
      c->rule_case[i] = junit;
      c->rule_unchecked[i] = unchecked;
      c->n_unchecked += unchecked;
    }
    if (b.len == 0 && b.err == 0) continue;
    stkr_cli_buf_put(&b, "", 1); /* the NUL */
    if (b.err != 0) {
      stkr_cli_buf_free(&b);
      return -ENOMEM;
    }
    c->rule_notes[i] = b.p; /* owned by c now */
  }
  return 0;
}
