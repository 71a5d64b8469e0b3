/*
 * policy.c: compliance policy files (policy.h), read with the tools' one
 * JSON reader (json.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/json.h"
#include "tools/stackrec/policy.h"
#include "tools/stackrec/states.h"

static void rule_free(stkr_rule *r) {
  free(r->id);
  free(r->description);
  stkr_json_strings_free(r->sites, r->n_sites);
  stkr_json_strings_free(r->modules, r->n_modules);
  free(r->before_mark);
  free(r->in_state);
}

void stkr_policy_free(stkr_policy *p) {
  size_t i;

  if (p == NULL)
    return;
  for (i = 0; i < p->n_rules; i++)
    rule_free(&p->rules[i]);
  free(p->rules);
  free(p);
}

/* One string value (not an array) into *out. */
static int one_string(const stkr_json *v, const char *what, const char *file,
                      char **out, char *err, size_t errlen) {
  char **v1;
  size_t n;
  int rc = stkr_json_strings(v, false, what, file, &v1, &n, err, errlen);

  if (rc != 0) {
    stkr_json_strings_free(v1, n);
    return rc;
  }
  *out = v1[0];
  free(v1);
  return 0;
}

static int limit(const stkr_json *v, const char *what, const char *file,
                 double *out, char *err, size_t errlen) {
  if (v->type != STKR_JSON_NUMBER || !(v->num >= 0) || !isfinite(v->num))
    return stkr_json_error(err, errlen, file, v,
                           "%s must be a number >= 0", what);
  *out = v->num;
  return 0;
}

static int parse_rule(const char *file, const stkr_json *o, stkr_rule *r,
                      char *err, size_t errlen) {
  const stkr_json *state = NULL;
  size_t i;
  int rc = 0;

  r->max_per_second = r->max_per_minute = -1;
  if (o->type != STKR_JSON_OBJECT)
    return stkr_json_error(err, errlen, file, o, "a rule must be an object");
  for (i = 0; i < o->n && rc == 0; i++) {
    const char *k = o->keys[i];
    const stkr_json *v = &o->items[i];

    if (strcmp(k, "id") == 0 && r->id == NULL)
      rc = one_string(v, "\"id\"", file, &r->id, err, errlen);
    else if (strcmp(k, "description") == 0 && r->description == NULL)
      rc = one_string(v, "\"description\"", file, &r->description, err, errlen);
    else if (strcmp(k, "sites") == 0 && r->sites == NULL)
      rc = stkr_json_strings(v, true, "\"sites\"", file, &r->sites,
                             &r->n_sites, err, errlen);
    else if (strcmp(k, "modules") == 0 && r->modules == NULL)
      rc = stkr_json_strings(v, true, "\"modules\"", file, &r->modules,
                             &r->n_modules, err, errlen);
    else if (strcmp(k, "before_mark") == 0 && r->before_mark == NULL)
      rc = one_string(v, "\"before_mark\"", file, &r->before_mark, err, errlen);
    else if ((strcmp(k, "in_state") == 0 || strcmp(k, "not_in_state") == 0) &&
             r->in_state == NULL) {
      r->not_in_state = k[0] == 'n';
      rc = one_string(v, r->not_in_state ? "\"not_in_state\"" : "\"in_state\"",
                      file, &r->in_state, err, errlen);
      state = v;
    }
    else if (strcmp(k, "max_per_second") == 0 && r->max_per_second < 0)
      rc = limit(v, "\"max_per_second\"", file, &r->max_per_second, err,
                 errlen);
    else if (strcmp(k, "max_per_minute") == 0 && r->max_per_minute < 0)
      rc = limit(v, "\"max_per_minute\"", file, &r->max_per_minute, err,
                 errlen);
    else
      /* A typo ("before_consent") would otherwise select every event. */
      rc = stkr_json_error(err, errlen, file, v,
                           "unknown or repeated key \"%s\" (known: id, "
                           "sites, modules, before_mark, in_state or "
                           "not_in_state, max_per_second, max_per_minute, "
                           "description)",
                           k);
  }
  if (rc != 0)
    return rc;
  if (r->id == NULL)
    return stkr_json_error(err, errlen, file, o, "a rule needs an \"id\"");
  if (r->sites == NULL)
    return stkr_json_error(err, errlen, file, o,
                           "rule \"%s\" needs \"sites\"", r->id);
  /* A state outside the table never holds: the rule would select nothing
   * and pass, whatever the recording (QA, session 31: a typo). */
  if (r->in_state != NULL && !stkr_states_is_state(r->in_state))
    return stkr_json_error(err, errlen, file, state,
                           "\"%s\": \"%s\" is no state (states: "
                           "consent.granted, app.background, screen.NAME)",
                           r->not_in_state ? "not_in_state" : "in_state",
                           r->in_state);
  return 0;
}

static int from_tree(const char *file, const stkr_json *root, void *obj,
                     char *err, size_t errlen) {
  stkr_policy *p = obj;
  const stkr_json *rules = root;
  size_t i, j;
  int rc;

  if (root->type == STKR_JSON_OBJECT) {
    for (i = 0; i < root->n; i++)
      if (strcmp(root->keys[i], "rules") != 0 ||
          stkr_json_get(root, "rules") != &root->items[i])
        return stkr_json_error(err, errlen, file, &root->items[i],
                               "unknown or repeated key \"%s\" (known: "
                               "rules)", root->keys[i]);
    if ((rules = stkr_json_get(root, "rules")) == NULL)
      return stkr_json_error(err, errlen, file, root, "no \"rules\" array");
  }
  if (rules->type != STKR_JSON_ARRAY)
    return stkr_json_error(err, errlen, file, rules,
                           "expected {\"rules\": [...]} or an array of rules");
  if (rules->n > STKR_POLICY_MAX_RULES)
    return stkr_json_error(err, errlen, file, &rules->items[STKR_POLICY_MAX_RULES],
                           "more than %d rules", STKR_POLICY_MAX_RULES);
  if (rules->n > 0 && (p->rules = calloc(rules->n, sizeof *p->rules)) == NULL)
    return -ENOMEM;
  for (i = 0; i < rules->n; i++) {
    p->n_rules = i + 1; /* freed whole on failure */
    if ((rc = parse_rule(file, &rules->items[i], &p->rules[i], err,
                         errlen)) != 0)
      return rc;
    for (j = 0; j < i; j++)
      if (strcmp(p->rules[j].id, p->rules[i].id) == 0)
        return stkr_json_error(err, errlen, file, &rules->items[i],
                               "rule id \"%s\" used twice", p->rules[i].id);
  }
  return 0;
}

static void policy_free(void *obj) { stkr_policy_free(obj); }

static const stkr_json_doc_type policy_doc = {
    sizeof(stkr_policy), from_tree, policy_free};

int stkr_policy_load(const char *path, stkr_policy **out, char *err,
                     size_t errlen) {
  return stkr_json_read_doc(&policy_doc, path, NULL, 0, out, err, errlen);
}

static bool any_glob(char *const *globs, size_t n, const char *s) {
  size_t i;

  for (i = 0; i < n; i++)
    if (fnmatch(globs[i], s, 0) == 0)
      return true;
  return false;
}

bool stkr_rule_matches_site(const stkr_rule *r, const char *site) {
  return any_glob(r->sites, r->n_sites, site);
}

bool stkr_rule_matches(const stkr_rule *r, const char *site,
                       const char *module) {
  return stkr_rule_matches_site(r, site) &&
         (r->n_modules == 0 || any_glob(r->modules, r->n_modules, module));
}
