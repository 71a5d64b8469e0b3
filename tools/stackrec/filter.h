/*
 * filter.h: the one event filter of every command (--site, --thread,
 * --from/--to), so that report, every export format and the HTML page
 * count exactly the same events for the same options.
 *
 * Time window: an event's time is counted from its process's recording
 * start (Header.start_mono_ns, taken at stkr_init() before any event of
 * that process), not from the first event read: events are drained thread
 * by thread, so the first event read is not the earliest. A process whose
 * Header was never read (its first segment is lost) falls back to its
 * first event read; an event before the origin (a follow-mode child's
 * first event precedes its own init) counts as time 0.
 *
 * Thread-safety: none; one filter per reader.
 */
#ifndef STKR_FILTER_H
#define STKR_FILTER_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "proto/stkr_reader.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/cli.h"

typedef struct stkr__filter {
  const stkr_agg_opts *o;
  bool have_tid;          /* thread_glob is a decimal number ... */
  uint64_t tid;           /* ... this one (matched as a tid or a name) */
  size_t cur_process;     /* the process the caches and origin are for */
  uint64_t origin_ns;     /* its time origin; 0: not fixed yet */
  /* Name-filter results cached per (session << 32 | id) of the process
   * being read, so fnmatch runs once per site or thread, not once per
   * event: key -> 1 pass, 0 not. */
  stkr_map site_pass, thread_pass;
} stkr__filter;

/* @return 0, or -EINVAL for a bad window (from_s < 0, or 0 < to_s <=
 * from_s). o must outlive the filter. */
int stkr__filter_init(stkr__filter *f, const stkr_agg_opts *o);

/* Does ev pass --site, --thread and --from/--to? A mark (ev->is_mark)
 * always does: it is the events' context (callers that count events
 * skip marks themselves).
 * @return 1 keep, 0 skip, -EINVAL (a bad glob pattern) or -ENOMEM. */
int stkr__filter_pass(stkr__filter *f, const stkr_event_view *ev);

/* The time origin of ev's process (see above), as the window uses it. */
uint64_t stkr__filter_origin(stkr__filter *f, const stkr_event_view *ev);

/* ev's time since that origin in ns (0 before it); an event of a later
 * process with the pid, on another clock, put on the first one's
 * (stkr_process_info.instance_shift_ns). */
uint64_t stkr__filter_offset(stkr__filter *f, const stkr_event_view *ev);

void stkr__filter_free(stkr__filter *f);

/* s seconds as decimals, without an exponent or trailing zeros ("0.5",
 * "12"), into buf. @return buf. */
#define STKR__SECONDS_MAX 64
const char *stkr__filter_seconds(double s, char buf[STKR__SECONDS_MAX]);

/* The filters o sets, in words ("site identifiers.* thread main time
 * [0.5 s, end) app-only"), appended to b unescaped (the globs are the
 * user's: escape at output). @return whether o sets any. */
bool stkr__filter_describe(const stkr_agg_opts *o, stkr_cli_buf *b);

/* ---- the filter options, shared by every command that filters -------------
 * (filter_opts.c, in the stackrec binary). A command sets more_opts =
 * stkr__filter_opts in its stkr_cli_getopt_state, reads its options with
 * stkr__filter_getopt(), prints stkr__filter_help in its --help, and calls
 * stkr__filter_args_end() once the options are parsed. */
enum {
  STKR__OPT_SITE = 0x1000,
  STKR__OPT_THREAD,
  STKR__OPT_FROM,
  STKR__OPT_TO,
  STKR__OPT_APP_ONLY,
  STKR__OPT_GRANULARITY
};
/* The filter options' rows (stkr_cli_getopt_state.more_opts). */
extern const stkr_cli_opt stkr__filter_opts[];

/* The options' lines for --help. */
extern const char stkr__filter_help[];

/* Apply option `opt` (a getopt_long result) with its argument to *o.
 * @return -1 when opt is not a filter option, 0 when it was applied, or
 *         exit status 2 after printing a usage error naming cmd. */
int stkr__filter_option(const char *cmd, int opt, const char *arg,
                        stkr_agg_opts *o);

/* After parsing: the window must be well formed.
 * @return 0, or 2 after printing a usage error. */
int stkr__filter_check(const char *cmd, const stkr_agg_opts *o);

/* stkr_cli_getopt (cli.h) with the filter's options applied to *o on the
 * way. @return the next option that is not the filter's, -1 at the end,
 * or STKR_CLI_OPT_EXIT with s->status the exit status (--help, a usage
 * error, a filter option's bad value). */
int stkr__filter_getopt(stkr_cli_getopt_state *s, int argc, char **argv,
                        stkr_agg_opts *o);

/* After the options: stkr__filter_check, and at least one input left
 * (argv[optind]). @return -1 to go on, else the exit status (2). */
int stkr__filter_args_end(const char *cmd, const stkr_agg_opts *o, int argc);

/* The whole option parsing of a command whose own options are all stored
 * by its tables (str, set, choices): stkr__filter_getopt to the end, then
 * stkr__filter_args_end. @return -1 to go on, else the exit status. */
int stkr__filter_parse(stkr_cli_getopt_state *s, int argc, char **argv,
                       stkr_agg_opts *o);

/* stkr__filter_parse for a command that blames a call on a module of its
 * stack (compliance, privacy-manifest): --app-only, which drops frames
 * before the stack reaches it, is refused (QA, session 33: an SDK's calls
 * were blamed on the app, and a rule against the SDK passed). */
int stkr__filter_parse_whole_stacks(stkr_cli_getopt_state *s, int argc,
                                    char **argv, stkr_agg_opts *o);

#endif /* STKR_FILTER_H */
