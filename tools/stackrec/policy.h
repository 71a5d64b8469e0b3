/*
 * policy.h: compliance policies (`stackrec compliance --policy FILE`).
 *
 * A policy is a JSON file of rules:
 *   {"rules": [
 *     {"id": "before-consent", "sites": "identifiers.*",
 *      "before_mark": "consent.granted"},
 *     {"id": "background-location", "sites": ["location.*", "gps.*"],
 *      "in_state": "app.background"},
 *     {"id": "too-often", "sites": "identifiers.*", "max_per_minute": 30},
 *     {"id": "no-mac", "sites": "identifiers.ioctl", "modules": "libads*"}
 *   ]}
 * (a bare array of rules is accepted too). Keys of a rule:
 *   id              required, unique: the finding's and the JUnit case's name
 *   sites           required: a glob or an array of globs (fnmatch(3)) on
 *                   site names
 *   modules         optional: glob(s) on the responsible module (attrib.h);
 *                   default every module
 *   before_mark     optional: only events before the first mark matching
 *                   this glob (in their process; marks: states.h)
 *   in_state        optional: only events while a state matching this glob
 *                   is active (e.g. "app.background", "screen.*")
 *   not_in_state    optional, instead of in_state: only events while no
 *                   state matching this glob is active ("consent.granted":
 *                   before consent, and after it was revoked)
 *   max_per_second, max_per_minute
 *                   optional numbers >= 0: the rule is broken when the
 *                   events it selects exceed this many in any sliding
 *                   window of that length (per (site, module), per process)
 *   description     optional text, shown with findings
 * The conditions select events; without a rate limit any selected event
 * breaks the rule (a forbidden API), with one only a rate above it does.
 * Malformed files are refused with "FILE:LINE:COL: what".
 *
 * Thread-safety: a loaded policy is read-only.
 */
#ifndef STKR_POLICY_H
#define STKR_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#define STKR_POLICY_MAX_RULES 64

typedef struct stkr_rule {
  char *id;
  char *description;   /* NULL if none */
  char **sites;        /* globs, n_sites >= 1 */
  size_t n_sites;
  char **modules;      /* globs; n_modules 0: every module */
  size_t n_modules;
  char *before_mark;   /* NULL if none */
  char *in_state;      /* NULL if none */
  bool not_in_state;   /* in_state came as "not_in_state": events while
                          no such state is active */
  double max_per_second; /* < 0: no limit */
  double max_per_minute; /* < 0: no limit */
} stkr_rule;

typedef struct stkr_policy {
  stkr_rule *rules;
  size_t n_rules;
} stkr_policy;

/* Load a policy file. err gets "FILE:LINE:COL: what" (malformed) or
 * "FILE: strerror" (unreadable).
 * @return 0 (*out: stkr_policy_free()), -EINVAL, -ENOMEM, or the negative
 *         errno of a file that cannot be read. */
int stkr_policy_load(const char *path, stkr_policy **out, char *err,
                     size_t errlen);

void stkr_policy_free(stkr_policy *p); /* NULL accepted */

/* Does rule r select events at this site from this module? */
bool stkr_rule_matches(const stkr_rule *r, const char *site,
                       const char *module);

/* Does one of rule r's sites globs match this site (its modules aside)? */
bool stkr_rule_matches_site(const stkr_rule *r, const char *site);

/* Does rule r have a rate limit (then it is broken only by rates)? */
static inline bool stkr_rule_has_rate(const stkr_rule *r) {
  return r->max_per_second >= 0 || r->max_per_minute >= 0;
}

#endif /* STKR_POLICY_H */
