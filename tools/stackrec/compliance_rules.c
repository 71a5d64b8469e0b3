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

    if (len == 0) continue;
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

/* A site pattern of rule's, in one of the hook library's categories, that
 * matches no site it records nor any site of the events read: a typo, as
 * likely as not (QA, session 31: "identifiers.hostname" for
 * identifiers.gethostname selected nothing and passed in silence). An
 * app's own sites may be named anything, so a warning. The first such
 * pattern into b. */
static bool unknown_sites(const stkr_comp *c, const stkr_rule *rule,
                          stkr_cli_buf *b) {
  for (size_t i = 0; i < rule->n_sites; i++) {
    const char *g = rule->sites[i], *name, *dot = strchr(g, '.');
    size_t len = dot != NULL ? (size_t)(dot - g) : 0, k, n;
    bool ours = false, known = false;

    /* Its category, in any case ("Identifiers.*" is a typo too). */
    for (unsigned cat = 0; len > 0 && cat < STKR__PL_CAT_COUNT && !ours; cat++)
      ours = strlen(stkr__pl_cat_name(cat)) == len &&
             strncasecmp(stkr__pl_cat_name(cat), g, len) == 0;
    if (!ours) continue;
    for (k = 0; !known && (name = stkr__pl_known_site(k)) != NULL; k++)
      known = fnmatch(g, name, 0) == 0;
    /* And the required-reason APIs an iOS app's own hooks record as
     * reasons.<api> (reasons.h; review: reasons.NSUserDefaults warned). */
    for (k = 0; !known && k < stkr_reason_category_count; k++)
      for (const char *const *a = stkr_reason_categories[k].apis;
           !known && *a != NULL; a++) {
        char site[128];
        snprintf(site, sizeof site, STKR_REASONS_CATEGORY ".%s", *a);
        known = fnmatch(g, site, 0) == 0;
      }
    for (k = 0; !known && k < c->n_groups; k++)
      known = fnmatch(g, c->groups[k].site, 0) == 0;
    if (known) continue;
    stkr_cli_buf_puts(b, "its sites pattern ");
    stkr_cli_buf_puts(b, g);
    stkr_cli_buf_puts(b, " matches no site the hook library records, nor "
                      "any of the events read (its sites in that category: ");
    for (k = n = 0; (name = stkr__pl_known_site(k)) != NULL; k++) {
      if (strncasecmp(name, g, len) != 0 || name[len] != '.') continue;
      if (n++ > 0) stkr_cli_buf_puts(b, ", ");
      stkr_cli_buf_puts(b, name);
    }
    stkr_cli_buf_puts(b, ")");
    return true;
  }
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
    const stkr_rule *rule = &p->rules[i];
    stkr_cli_buf b = {0}, cats = {0}, typo = {0};
    size_t n_cats = 0;
    /* A typo is said beside any other note, never hidden behind it
     * (review, sessions 31 and 32). */
    const bool typo_seen = stkr_reader_process_count(r) > 0 &&
                           unknown_sites(c, rule, &typo);

    const char *junit = NULL; /* the note's JUnit case */
    bool unchecked = true;      /* an error, exit 1; else a warning */

    if (stkr_reader_process_count(r) == 0) {
      stkr_cli_buf_puts(&b, "the recording holds no process: nothing was "
                        "recorded (a static program the hooks cannot "
                        "enter, or another directory?)");
      junit = "sites recorded";
    } else if (unwatched_sites(c, r, rule, &cats, &n_cats)) {
      stkr_cli_buf_puts(&b, n_cats == 1 ? "no process watched category "
                                        : "no process watched categories ");
      stkr_cli_buf_put(&b, cats.p, cats.len);
      stkr_cli_buf_puts(&b, ", so its events there could not be recorded "
                        "(stackrec record --categories)");
      append_note(&b, typo_seen ? &typo : NULL);
      junit = "sites recorded";
    } else if (c->rule_unjudged != NULL && c->rule_unjudged[i] > 0) {
      char why[STKR_COMP_WHY_MAX];
      stkr_cli_buf_u64(&b, c->rule_unjudged[i]);
      stkr_cli_buf_puts(&b, " of its events, in processes ");
      stkr_cli_buf_puts(&b, stkr_comp_unjudged_why(c, why, sizeof why));
      stkr_cli_buf_puts(&b, ", could not be judged: the mark it asks about "
                        "may have gone with them");
      append_note(&b, typo_seen ? &typo : NULL);
      junit = "events judged";
    } else if (c->rule_unnamed != NULL && c->rule_unnamed[i] > 0) {
      stkr_cli_buf_u64(&b, c->rule_unnamed[i]);
      stkr_cli_buf_puts(&b, " of its events have stacks never symbolized, "
                        "so the module map's symbol prefixes could not say "
                        "which module made them: run 'stackrec symbolize' "
                        "on the recording first");
      append_note(&b, typo_seen ? &typo : NULL);
      junit = "stacks symbolized";
    } else if (typo_seen) {
      append_note(&b, &typo);
      if (rule->n_modules > 0 && !modules_seen(c, rule)) {
        stkr_cli_buf_puts(&b, "; and ");
        put_modules_note(c, &b);
      }
      junit = "sites known";
      unchecked = false;
    } else if (rule->n_modules > 0 && !modules_seen(c, rule)) {
      put_modules_note(c, &b);
      junit = "modules seen";
      unchecked = false;
    }
    if (typo.err != 0) b.err = typo.err;
    stkr_cli_buf_free(&typo);
    if (junit != NULL) {
      c->rule_case[i] = junit;
      c->rule_unchecked[i] = unchecked;
      c->n_unchecked += unchecked;
    }
    stkr_cli_buf_free(&cats);
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
