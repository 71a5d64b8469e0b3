/*
 * dump.c: `stackrec dump`: one line per event, as text or JSON lines.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/export.h"
#include "tools/stackrec/filter.h"

static const char dump_help[] =
    "Usage: stackrec dump [--json] [--frames] [--limit N] [FILTERS]\n"
    "                     DIR|FILE...\n"
    "\n"
    "Print every event of the recordings, one line each, in recording\n"
    "order: processes by pid, then segments, then batches; within a\n"
    "batch, its marks first (events after a mark by the clock come after\n"
    "it; times may go back across threads). Marks set with `stackrec\n"
    "mark` come before a process's first event or mark (or at its end),\n"
    "whenever they were set: sort by TS_NS to place them among events.\n"
    "\n"
    "Text lines:\n"
    "  TS_NS SITE TID(THREAD) PAYLOAD stack=0xPC,0xPC,... [truncated]\n"
    "  TS_NS is CLOCK_MONOTONIC ns of the recording process; PAYLOAD is\n"
    "  \"...\" with '\"' and '\\' backslash-escaped and other non-printable\n"
    "  bytes as \\xNN, followed by [truncated] if the recorder cut it, or -\n"
    "  for none; undefined sites, threads and stacks print as ?. A PC\n"
    "  written a0x... is a Swift async resume function (an awaiting caller);\n"
    "  [truncated]: the walk stopped before the stack's end (the recorder's\n"
    "  max depth, a library loaded a moment before, a handler on its\n"
    "  alternate signal stack): the outermost callers are missing (with no\n"
    "  PC: the event was made off the thread's stack, a coroutine's).\n"
    "\n"
    "Options:\n"
    "  --json      one JSON object per line instead, with the keys ts_ns,\n"
    "              pid, site, tid, thread, payload (string or null),\n"
    "              payload_truncated, stack (array of \"0x...\" strings),\n"
    "              stack_truncated, and frames when the stack was\n"
    "              symbolized: innermost first, one or more per PC (the\n"
    "              calls inlined there, then the function containing it),\n"
    "              each {pc, function, file, line, column,\n"
    "              image, offset, inlined, app} with pc and offset as\n"
    "              \"0x...\" strings, unknown strings null, unknown line\n"
    "              and column 0; bytes that are not valid UTF-8 appear as\n"
    "              \\u00XX\n"
    "  --frames    text: after each event, one line per frame:\n"
    "                \"    FUNCTION (FILE:LINE)\" ([inlined] for a call\n"
    "              inlined at that PC), or \"    IMAGE+0xOFFSET\" when the\n"
    "              function is unknown\n"
    "  -n, --limit N\n"
    "              stop after N events (of those the filters keep); a\n"
    "              note on stderr says the rest was not read, nor checked\n"
    "  -h, --help  this help\n"
    "\n"
    "Filters (the same as every other command's; --granularity changes\n"
    "nothing here):\n";

static const char dump_help_more[] =
    "  With --app-only, stack= shows only the app's PCs too (a stack\n"
    "  with none of the app's: its innermost PC); a stack without frames\n"
    "  is printed whole.\n"
    "\n";

typedef struct dump_opts {
  bool json;
  bool frames;
  bool app_only;
  bool limited;
  unsigned long long limit;
} dump_opts;

/* Is the next PC kept? With --app-only and frames: if its frame (the one
 * that is not inlined) is the app's, or, in a stack with no app frame,
 * if it is the innermost (stkr_agg_app_frames). fi walks the frames
 * alongside; none_app: the stack has no app frame. */
static bool keep_pc(const dump_opts *o, const stkr_event_view *ev,
                    size_t *fi, bool none_app) {
  bool app = true, first = *fi == 0;
  if (ev->n_frames == 0)
    return true;
  while (*fi < ev->n_frames && ev->frames[*fi].inlined)
    (*fi)++;
  if (*fi < ev->n_frames)
    app = ev->frames[(*fi)++].is_app;
  return !o->app_only || app || (none_app && first);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* The frames fs[0..n) (--app-only's already chosen), one a line. */
static void text_frames(FILE *f, const stkr_frame *fs, size_t n) {
  size_t i;

  for (i = 0; i < n; i++) {
    const stkr_frame *fr = &fs[i];
    fputs("    ", f);
    if (fr->function) {
      stkr_cli_put_escaped(f, (const uint8_t *)fr->function,
                           strlen(fr->function));
      if (fr->file) {
        fputs(" (", f);
        stkr_cli_put_escaped(f, (const uint8_t *)fr->file, strlen(fr->file));
        if (fr->line)
          fprintf(f, ":%u", (unsigned)fr->line);
        putc(')', f);
      }
    } else if (fr->image) {
      const char *b = base_name(fr->image);
      stkr_cli_put_escaped(f, (const uint8_t *)b, strlen(b));
      fprintf(f, "+0x%llx", (unsigned long long)fr->offset);
    } else {
      fprintf(f, "0x%llx", (unsigned long long)(fr->pc & ~STKR_PC_ASYNC));
    }
    if (fr->inlined)
      fputs(" [inlined]", f);
    if (fr->async)
      fputs(" [async]", f); /* a Swift awaiting caller (resume function) */
    putc('\n', f);
  }
}

static int dump_text(FILE *f, const dump_opts *o, const stkr_event_view *ev,
                     stkr_frame **scratch, size_t *scratch_cap) {
  const stkr_frame *fr;
  size_t i, n_fr;
  bool none_app = o->app_only && ev->n_frames != 0;

  for (i = 0; none_app && i < ev->n_frames; i++)
    none_app = !ev->frames[i].is_app;
  if (stkr__app_frames(ev->frames, ev->n_frames, o->app_only, scratch,
                       scratch_cap, &fr, &n_fr) != 0)
    return -ENOMEM;

  fprintf(f, "%llu ", (unsigned long long)ev->ts_ns);
  if (ev->is_mark) /* as its site is named on disk */
    fputs("mark:", f);
  stkr_cli_put_escaped(f, (const uint8_t *)ev->site, strlen(ev->site));
  if (ev->thread_name[0] == '?' && ev->thread_name[1] == '\0' && ev->tid == 0)
    fputs(" ?(?) ", f);
  else {
    fprintf(f, " %llu(", (unsigned long long)ev->tid);
    stkr_cli_put_escaped(f, (const uint8_t *)ev->thread_name,
                         strlen(ev->thread_name));
    fputs(") ", f);
  }
  if (ev->payload_len == 0 && !ev->payload_truncated) {
    putc('-', f);
  } else {
    putc('"', f);
    stkr_cli_put_escaped(f, ev->payload, ev->payload_len);
    putc('"', f);
    if (ev->payload_truncated)
      fputs("[truncated]", f);
  }
  fputs(" stack=", f);
  if (ev->n_pcs == 0)
    putc(ev->unresolved ? '?' : '-', f);
  {
    size_t fi = 0, shown = 0;
    for (i = 0; i < ev->n_pcs; i++)
      if (keep_pc(o, ev, &fi, none_app)) /* "a": a Swift async resume PC */
        fprintf(f, "%s%s0x%llx", shown++ ? "," : "",
                ev->pcs[i] & STKR_PC_ASYNC ? "a" : "",
                (unsigned long long)(ev->pcs[i] & ~STKR_PC_ASYNC));
    if (ev->n_pcs && !shown)
      putc('-', f);
  }
  if (ev->stack_truncated) /* the walk stopped at max_depth (QA) */
    fputs(" [truncated]", f);
  putc('\n', f);
  if (o->frames)
    text_frames(f, fr, n_fr);
  return 0;
}

/* The shared JSON form (json_event.c), with --app-only's frames chosen as
 * every other command chooses them (stkr__app_frames). */
static int dump_json(FILE *f, const dump_opts *o, const stkr_event_view *ev,
                     const stkr_reader *r, stkr_frame **scratch,
                     size_t *scratch_cap) {
  const stkr_frame *fr;
  size_t n_fr;

  if (stkr__app_frames(ev->frames, ev->n_frames, o->app_only, scratch,
                       scratch_cap, &fr, &n_fr) != 0)
    return -ENOMEM;
  stkr_cli_put_event_json(f, ev, o->app_only, fr, n_fr, r);
  return 0;
}

/* Parse a decimal count; the whole string must be digits. */
static int parse_count(const char *s, unsigned long long *out) {
  char *end;

  if (s[0] < '0' || s[0] > '9')
    return -EINVAL;
  errno = 0;
  *out = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return -EINVAL;
  return 0;
}

int stkr_cli_dump(int argc, char **argv) {
  stkr_frame *scratch = NULL;
  size_t scratch_cap = 0;
  unsigned long long printed = 0;
  dump_opts o = {false, false, false, false, 0};
  const stkr_cli_opt opts[] = {
      {"json", 'j', 0, NULL, &o.json},
      {"frames", 'f', 0, NULL, &o.frames},
      {"limit", 'n', STKR_CLI_SHORT | STKR_CLI_VALUE, NULL, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {
      .cmd = "dump", .opts = opts, .more_opts = stkr__filter_opts,
      .help = {dump_help, stkr__filter_help, dump_help_more,
               stkr_cli_exit_help},
      .operands = "DIR or FILE"};
  stkr_agg_opts filt;
  stkr__filter f;
  stkr_reader *r;
  stkr_event_view ev;
  /* 1: as if an event were read; --limit 0 reads none, and must still
   * reach the "stopped after --limit" note (QA, session 29: it printed
   * nothing and said nothing). */
  int c, rc = 1, status;

  memset(&filt, 0, sizeof filt);
  while ((c = stkr__filter_getopt(&gopt, argc, argv, &filt)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case 'n':
      if (parse_count(optarg, &o.limit) != 0)
        return stkr_cli_usage_error("dump", "--limit wants a number, not '%s'",
                                    optarg);
      o.limited = true;
      break;
    }
  }
  /* QA (session 25): the README says every command filters alike; dump
   * refused --site and --from. */
  if ((status = stkr__filter_args_end("dump", &filt, argc)) >= 0)
    return status;
  o.app_only = filt.app_only;
  status = stkr_cli_open("dump", argv + optind, argc - optind, false, &r);
  if (status != 0)
    return status;
  if (stkr__filter_init(&f, &filt) != 0) { /* checked above: cannot fail */
    stkr_reader_free(r);
    return STKR_CLI_USAGE;
  }

  while (!(o.limited && printed >= o.limit) &&
         (rc = stkr_reader_next(r, &ev)) == 1) {
    int keep = stkr__filter_pass(&f, &ev);
    if (keep < 0) {
      rc = keep;
      break;
    }
    if (keep == 0)
      continue;
    if ((o.json ? dump_json(stdout, &o, &ev, r, &scratch, &scratch_cap)
                : dump_text(stdout, &o, &ev, &scratch, &scratch_cap)) != 0) {
      rc = -ENOMEM;
      break;
    }
    /* Marks are context, not events (QA, session 33: --site X --limit 3
     * printed 3 marks and no event of X). */
    printed += !ev.is_mark;
  }
  if (rc == 1) /* cut by --limit: anything left? */
    rc = stkr_reader_next(r, &ev);
  if (rc < 0) {
    fflush(stdout);
    fprintf(stderr, "stackrec dump: reading failed: %s\n", strerror(-rc));
    status = STKR_CLI_DATA_LOST;
  }
  if (rc == 0) /* read to the end (not cut by --limit) */
    stkr_cli_note_left_out(r, "dump", "the dump");
  else if (rc == 1) /* cut by --limit: the accounting was not reached */
    fprintf(stderr, "stackrec dump: stopped after --limit %llu event%s: the "
            "rest of the recording was not read, so whether it is complete "
            "(drops, missing or damaged parts) is not known here: 'stackrec "
            "verify' tells\n", (unsigned long long)o.limit,
            o.limit == 1 ? "" : "s");
  status = stkr_cli_finish("dump", r, status);
  stkr__filter_free(&f);
  free(scratch);
  stkr_reader_free(r);
  return status;
}
