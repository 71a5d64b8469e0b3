/*
 * filter_opts.c: the filter options of every command that filters (see
 * filter.h), parsed in one place so that their spelling, checks and help
 * cannot drift apart between commands.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/filter.h"

const char stkr__filter_help[] =
    "  --site GLOB       only sites whose name matches (fnmatch(3), e.g.\n"
    "                    'files.*')\n"
    "  --thread NAME|TID only threads whose name matches NAME (a glob) or\n"
    "                    whose OS thread id is TID\n"
    "  --from SEC        only events at least SEC seconds after their\n"
    "                    process first started recording (decimals\n"
    "                    allowed; a program it exec'd keeps that clock)\n"
    "  --to SEC          only events less than SEC seconds after it\n"
    "  --app-only        keep only the app's own frames (its executable and\n"
    "                    STACKREC_APP_PATHS); a stack without any keeps its\n"
    "                    innermost frame; unsymbolized stacks are kept whole\n"
    "                    (not for compliance, privacy-manifest or report\n"
    "                    --by module: a call's module is its whole stack's)\n"
    "  --granularity line|function|address\n"
    "                    what makes two frames the same when stacks are\n"
    "                    merged: function, file and line (default); the\n"
    "                    function only; or also the address\n";

const stkr_cli_opt stkr__filter_opts[] = {
    {"site", STKR__OPT_SITE, STKR_CLI_VALUE, NULL, NULL},
    {"thread", STKR__OPT_THREAD, STKR_CLI_VALUE, NULL, NULL},
    {"from", STKR__OPT_FROM, STKR_CLI_VALUE, NULL, NULL},
    {"to", STKR__OPT_TO, STKR_CLI_VALUE, NULL, NULL},
    {"app-only", STKR__OPT_APP_ONLY, 0, NULL, NULL},
    {"granularity", STKR__OPT_GRANULARITY, STKR_CLI_VALUE, NULL, NULL},
    {0}};

/* Decimal seconds only: strtod also takes hex ("0x10" was 16 s: QA,
 * session 25) and leading blanks. */
static int parse_seconds(const char *s, double *out) {
  char *end;
  double v;

  if (strpbrk(s, "xX") != NULL || isspace((unsigned char)s[0]))
    return -1;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  return 0;
}

int stkr__filter_option(const char *cmd, int opt, const char *arg,
                        stkr_agg_opts *o) {
  switch (opt) {
  case STKR__OPT_SITE:
    o->site_glob = arg;
    return 0;
  case STKR__OPT_THREAD:
    if (arg[0] == '\0')
      return stkr_cli_usage_error(cmd, "--thread needs a name or id");
    o->thread_glob = arg;
    return 0;
  case STKR__OPT_FROM:
    if (parse_seconds(arg, &o->from_s) != 0)
      return stkr_cli_usage_error(
          cmd, "--from '%s' is not a number of seconds >= 0", arg);
    return 0;
  case STKR__OPT_TO:
    if (parse_seconds(arg, &o->to_s) != 0 || o->to_s <= 0)
      return stkr_cli_usage_error(
          cmd, "--to '%s' is not a number of seconds > 0", arg);
    return 0;
  case STKR__OPT_APP_ONLY:
    o->app_only = true;
    return 0;
  case STKR__OPT_GRANULARITY: {
    int g, err;

    if ((err = stkr_cli_choice_parse(cmd, "--granularity",
                                     stkr_agg_granularity_names, arg,
                                     &g)) == 0)
      o->granularity = (stkr_agg_granularity)g;
    return err;
  }
  default:
    return -1;
  }
}

int stkr__filter_check(const char *cmd, const stkr_agg_opts *o) {
  if (o->to_s > 0 && o->to_s <= o->from_s)
    return stkr_cli_usage_error(cmd, "--to %g is not after --from %g",
                                o->to_s, o->from_s);
  return 0;
}

int stkr__filter_getopt(stkr_cli_getopt_state *s, int argc, char **argv,
                        stkr_agg_opts *o) {
  int c, err;

  while ((c = stkr_cli_getopt(s, argc, argv)) != -1 &&
         c != STKR_CLI_OPT_EXIT) {
    if ((err = stkr__filter_option(s->cmd, c, optarg, o)) < 0)
      return c;
    if (err != 0) {
      s->status = err;
      return STKR_CLI_OPT_EXIT;
    }
  }
  return c;
}

int stkr__filter_args_end(const char *cmd, const stkr_agg_opts *o, int argc) {
  int err;

  if ((err = stkr__filter_check(cmd, o)) != 0)
    return err;
  if (optind >= argc)
    return stkr_cli_usage_error(cmd, "no DIR or FILE given");
  return -1;
}

int stkr__filter_parse(stkr_cli_getopt_state *s, int argc, char **argv,
                       stkr_agg_opts *o) {
  int c;

  while ((c = stkr__filter_getopt(s, argc, argv, o)) != -1)
    if (c == STKR_CLI_OPT_EXIT)
      return s->status;
  return stkr__filter_args_end(s->cmd, o, argc);
}

int stkr__filter_parse_whole_stacks(stkr_cli_getopt_state *s, int argc,
                                    char **argv, stkr_agg_opts *o) {
  int status = stkr__filter_parse(s, argc, argv, o);

  if (status < 0 && o->app_only)
    return stkr_cli_usage_error(
        s->cmd, "--app-only does not apply: a call is attributed to the "
                "first module of its whole stack that is not the system's, "
                "and without the frames it drops the call would be blamed "
                "on the app ('report --app-only' shows the app's frames)");
  return status;
}
