/*
 * compliance_cmd.c: `stackrec compliance DIR... [--policy FILE]
 * [--module-map FILE] [--format text|json|junit|html] [-o FILE]`
 * (compliance.h does the work).
 *
 * Exit status: 0 no finding and all input read, 1 a rule was broken (or
 * recorded data was lost, or the output could not be written), 2 usage
 * error or a malformed policy or module map (the message names the file
 * and line:column), 3 an input (recording, policy or map) cannot be
 * opened.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/compliance.h"
#include "tools/stackrec/filter.h"
#include "tools/stackrec/html.h"
#include "tools/stackrec/inherit.h"

static const char help[] =
    "Usage: stackrec compliance [--policy FILE] [--module-map FILE]\n"
    "                           [--format text|json|junit|html] [-o FILE]\n"
    "                           [filters] DIR|FILE...\n"
    "\n"
    "Per (site, responsible module): events, first and last time, peak rate\n"
    "per second and per minute, events before the first consent.granted\n"
    "mark and while app.background was active, an example stack; and the\n"
    "rules of a policy that the recording breaks (findings).\n"
    "\n"
    "  --policy FILE      rules (JSON): {\"rules\": [{\"id\": \"before-consent\",\n"
    "                     \"sites\": \"identifiers.*\", \"before_mark\":\n"
    "                     \"consent.granted\"}, ...]}; also in_state (or\n"
    "                     not_in_state), max_per_second, max_per_minute,\n"
    "                     modules\n"
    "  --module-map FILE  SDK names for images and symbol prefixes (JSON):\n"
    "                     {\"modules\": [{\"name\": \"Acme\", \"images\":\n"
    "                     [\"libacme*\"], \"symbols\": [\"acme_\"]}]}\n"
    "  --format FMT       text (default), json (\"findings\": [{rule, site,\n"
    "                     module, count, first_ts, stack}]), junit (a\n"
    "                     testsuite per rule, a failed testcase per\n"
    "                     finding), html (the report page with a compliance\n"
    "                     section)\n"
    "  -o FILE            write there instead of stdout\n"
    "  (docs/COMPLIANCE.md has the details)\n";

static const char help_exit[] =
    "Exit status of compliance: 0 no finding, 1 a rule was broken (or data\n"
    "lost), 2 usage error or malformed policy / module map, 3 an input\n"
    "cannot be opened.\n";

/* --format's names, in the order of out_format. */
typedef enum { FMT_TEXT, FMT_JSON, FMT_JUNIT, FMT_HTML } out_format;
static const char *const format_names[] = {"text", "json", "junit", "html",
                                           NULL};

static void html_section(FILE *out, void *arg) {
  stkr_comp_write_html_section(out, arg);
}

/* Load the policy and the map: @return 0, or the exit status after the
 * message. */
static int load_inputs(const char *policy_path, const char *map_path,
                       stkr_policy **pol, stkr_modmap **map) {
  char err[512];
  int rc;

  if (policy_path != NULL &&
      (rc = stkr_policy_load(policy_path, pol, err, sizeof err)) != 0)
    return stkr_cli_load_error("compliance", "policy", err, rc);
  if (map_path != NULL &&
      (rc = stkr_modmap_load(map_path, map, err, sizeof err)) != 0)
    return stkr_cli_load_error("compliance", "module map", err, rc);
  return 0;
}

static int write_out(FILE *f, const stkr_comp *c, int fmt,
                     const char *banner) {
  switch (fmt) {
  case FMT_JSON:
    return stkr_comp_write_json(f, c, banner);
  case FMT_JUNIT:
    return stkr_comp_write_junit(f, c, banner);
  case FMT_HTML:
    return stkr_html_write_sections(f, c->agg, "stackrec compliance", banner,
                                    html_section, (void *)c);
  default:
    return stkr_comp_write_text(f, c, banner);
  }
}

/* The second read's warnings: the first said them. */
static void quiet_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  (void)w;
}

/* Forked children whose origin was read after them (a parent that merge
 * renumbered, pids that wrapped) were left unjudged: read the recording
 * once more, with the first read's table of every process's marks, and
 * judge them (QA, session 32). The first read said its warnings; this one
 * is quiet. *r and *c are replaced. @return 0 or a negative errno. */
static int read_again(char *const *paths, int n, stkr_comp_opts *o,
                      stkr_reader **r, stkr_comp **c) {
  stkr_reader_opts ro = {.warn = quiet_warn, .lazy_frames = true};
  stkr_inherit *h = stkr_comp_take_inherit(*c);
  int err = stkr_inherit_complete(h, *r);

  stkr_comp_free(*c);
  *c = NULL;
  stkr_reader_free(*r);
  *r = NULL;
  if (err == 0 && stkr_cli_open_opts("compliance", &ro, paths, n, r) != 0)
    err = -EIO;
  if (err == 0) {
    o->inherit = h;
    err = stkr_comp_build(*r, o, NULL, NULL, c);
    o->inherit = NULL;
  }
  stkr_inherit_free(h);
  return err;
}

/* Parse the options into *o (and the rest). @return -1 to go on, else the
 * exit status. */
static int parse_args(int argc, char **argv, stkr_comp_opts *o,
                      const char **policy, const char **map, int *fmt,
                      const char **output) {
  enum { O_POLICY = 256, O_MAP, O_FORMAT };
  const stkr_cli_opt opts[] = {
      {"policy", O_POLICY, STKR_CLI_VALUE, policy, NULL},
      {"module-map", O_MAP, STKR_CLI_VALUE, map, NULL},
      {"format", O_FORMAT, STKR_CLI_VALUE, NULL, NULL},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, output, NULL},
      {0}};
  const stkr_cli_choice choices[] = {{O_FORMAT, format_names, fmt}, {0}};
  stkr_cli_getopt_state gopt = {
      .cmd = "compliance", .opts = opts, .more_opts = stkr__filter_opts,
      .choices = choices, .help = {help, stkr__filter_help, help_exit}};

  return stkr__filter_parse_whole_stacks(&gopt, argc, argv, &o->agg);
}

/* What compliance_rules.c found, on stderr too: the output may go to a
 * file or a CI dashboard nobody opens when the gate passes. */
static void warn_rules(const stkr_comp *c) {
  size_t i;

  for (i = 0; c->policy != NULL && i < c->policy->n_rules; i++)
    if (c->rule_notes[i] != NULL) {
      fprintf(stderr, "stackrec compliance: %s: rule ",
              c->rule_unchecked[i] ? "error" : "warning");
      stkr_cli_put_escaped(stderr, (const uint8_t *)c->policy->rules[i].id,
                           strlen(c->policy->rules[i].id));
      /* A warning's JUnit case says what it is about (a typo, modules,
       * filters, a mark never set). */
      fprintf(stderr, " %s: ",
              c->rule_unchecked[i] ? "not checked"
              : strcmp(c->rule_case[i], "mark seen") == 0
                  ? "may count every event"
                  : "may match nothing");
      /* The note lists module names, which come from the recording. */
      stkr_cli_put_escaped(stderr, (const uint8_t *)c->rule_notes[i],
                           strlen(c->rule_notes[i]));
      fputc('\n', stderr);
    }
}

int stkr_cli_compliance(int argc, char **argv) {
  const char *policy_path = NULL, *map_path = NULL, *output = NULL;
  int fmt = FMT_TEXT;
  stkr_policy *pol = NULL;
  stkr_modmap *map = NULL;
  stkr_comp_opts o;
  stkr_comp *c = NULL;
  stkr_cli_progress prog;
  stkr_reader *r = NULL;
  char banner[1024];
  stkr_cli_buf filters = {0};
  FILE *f = stdout;
  int status, err;

  memset(&o, 0, sizeof o);
  status = parse_args(argc, argv, &o, &policy_path, &map_path, &fmt, &output);
  if (status >= 0)
    return status;
  char *opt_in[] = {(char *)policy_path, (char *)map_path};
  if ((status = stkr_cli_check_output("compliance", "-o", output,
                                      argv + optind, argc - optind)) != 0 ||
      (status = stkr_cli_check_output("compliance", "-o", output, opt_in,
                                      2)) != 0)
    return status;
  if ((status = load_inputs(policy_path, map_path, &pol, &map)) != 0)
    goto out;
  o.policy = pol;
  o.modmap = map;
  /* Only the HTML page shows payloads and timelines. */
  o.agg.no_site_details = fmt != FMT_HTML;
  status = stkr_cli_open("compliance", argv + optind, argc - optind, true, &r);
  if (status != 0)
    goto out;
  stkr_cli_progress_init(&prog, "compliance");
  err = stkr_comp_build(r, &o, stkr_cli_progress_cb, &prog, &c);
  stkr_cli_progress_done(&prog);
  if (err == 0 && c->later_origins > 0)
    err = read_again(argv + optind, argc - optind, &o, &r, &c);
  if (err == -EINVAL) {
    status = stkr_cli_usage_error("compliance",
                                  "invalid pattern in --site or --thread");
    goto out;
  }
  if (err != 0) {
    fprintf(stderr, "stackrec compliance: reading failed: %s\n",
            strerror(-err));
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  if (stkr__filter_describe(&o.agg, &filters)) {
    stkr_cli_buf_put(&filters, "", 1); /* the NUL */
    if (filters.err == 0)
      c->filters = filters.p;
  }
  if ((err = stkr_comp_check_rules(c, r)) != 0) {
    fprintf(stderr, "stackrec compliance: %s\n", strerror(-err));
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  warn_rules(c);
  if (pol != NULL && pol->n_rules == 0) /* QA, session 39: silent */
    fprintf(stderr, "stackrec compliance: warning: policy %s has no rules: "
            "nothing is judged\n", policy_path);
  /* Consent and background come from marks, and a mark can be in what
   * was lost: with its segment gone, every event read as before consent
   * (QA, session 22: "before consent" 201 where 78 were, a background rule
   * passed with 0 of 33). The figures are kept, and said to be unsure. */
  if (stkr_cli_incomplete_line(r, banner, sizeof banner) > 0)
    snprintf(banner + strlen(banner), sizeof banner - strlen(banner),
             "; before-consent and background figures assume no mark was "
             "lost");
  if ((f = stkr_cli_create("compliance", output)) == NULL) {
    status = STKR_CLI_DATA_LOST;
    goto out;
  }
  err = write_out(f, c, fmt, banner);
  if ((status = stkr_cli_close_output("compliance", output, f, err)) != 0)
    goto out;
  status = stkr_cli_status(r);
  if (c->n_findings > 0 || c->n_unchecked > 0)
    status = STKR_CLI_FINDINGS;
out:
  stkr_comp_free(c);
  stkr_reader_free(r);
  stkr_policy_free(pol);
  stkr_modmap_free(map);
  stkr_cli_buf_free(&filters);
  return status;
}
