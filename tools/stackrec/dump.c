/*
 * dump.c: `stackrec dump`: one line per event, as text or JSON lines.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"

static const char dump_help[] =
    "Usage: stackrec dump [--json] [--limit N] DIR|FILE...\n"
    "\n"
    "Print every event of the recordings, one line each, in recording\n"
    "order: processes by pid, then segments, then batches.\n"
    "\n"
    "Text lines:\n"
    "  TS_NS SITE TID(THREAD) PAYLOAD stack=0xPC,0xPC,...\n"
    "  TS_NS is CLOCK_MONOTONIC ns of the recording process; PAYLOAD is\n"
    "  \"...\" with '\"' and '\\' backslash-escaped and other non-printable\n"
    "  bytes as \\xNN, followed by [truncated] if the recorder cut it, or -\n"
    "  for none; undefined sites, threads and stacks print as ?.\n"
    "\n"
    "Options:\n"
    "  --json      one JSON object per line instead, with the keys ts_ns,\n"
    "              pid, site, tid, thread, payload (string or null),\n"
    "              payload_truncated, stack (array of \"0x...\" strings)\n"
    "              and stack_truncated; bytes that are not valid UTF-8\n"
    "              appear as \\u00XX\n"
    "  -n, --limit N\n"
    "              stop after N events\n"
    "  -h, --help  this help\n"
    "\n";

typedef struct dump_opts {
  bool json;
  bool limited;
  unsigned long long limit;
} dump_opts;

static void dump_text(FILE *f, const stkr_event_view *ev) {
  size_t i;

  fprintf(f, "%llu ", (unsigned long long)ev->ts_ns);
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
  for (i = 0; i < ev->n_pcs; i++)
    fprintf(f, "%s0x%llx", i ? "," : "", (unsigned long long)ev->pcs[i]);
  putc('\n', f);
}

static void dump_json(FILE *f, const stkr_event_view *ev) {
  size_t i;

  fprintf(f, "{\"ts_ns\":%llu,\"pid\":%u,\"site\":\"",
          (unsigned long long)ev->ts_ns, (unsigned)ev->pid);
  stkr_cli_put_json(f, (const uint8_t *)ev->site, strlen(ev->site));
  fprintf(f, "\",\"tid\":%llu,\"thread\":\"", (unsigned long long)ev->tid);
  stkr_cli_put_json(f, (const uint8_t *)ev->thread_name,
                    strlen(ev->thread_name));
  fputs("\",\"payload\":", f);
  if (ev->payload_len == 0 && !ev->payload_truncated) {
    fputs("null", f);
  } else {
    putc('"', f);
    stkr_cli_put_json(f, ev->payload, ev->payload_len);
    putc('"', f);
  }
  fprintf(f, ",\"payload_truncated\":%s,\"stack\":[",
          ev->payload_truncated ? "true" : "false");
  for (i = 0; i < ev->n_pcs; i++)
    fprintf(f, "%s\"0x%llx\"", i ? "," : "", (unsigned long long)ev->pcs[i]);
  fprintf(f, "],\"stack_truncated\":%s}\n",
          ev->stack_truncated ? "true" : "false");
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
  static const struct option longopts[] = {
      {"json", no_argument, NULL, 'j'},
      {"limit", required_argument, NULL, 'n'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  unsigned long long printed = 0;
  dump_opts o = {false, false, 0};
  stkr_reader *r;
  stkr_event_view ev;
  int c, rc = 0, status;

  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":hn:", longopts, NULL)) != -1) {
    switch (c) {
    case 'j':
      o.json = true;
      break;
    case 'n':
      if (parse_count(optarg, &o.limit) != 0)
        return stkr_cli_usage_error("dump", "--limit wants a number, not '%s'",
                                    optarg);
      o.limited = true;
      break;
    case 'h':
      fputs(dump_help, stdout);
      fputs(stkr_cli_exit_help, stdout);
      return stkr_cli_flush("dump");
    case ':':
      return stkr_cli_usage_error("dump", "option '%s' needs a value",
                                  argv[optind - 1]);
    default:
      return stkr_cli_usage_error("dump", "unknown option '%s'",
                                  argv[optind - 1]);
    }
  }
  if (optind >= argc)
    return stkr_cli_usage_error("dump", "no DIR or FILE given");
  status = stkr_cli_open("dump", argv + optind, argc - optind, &r);
  if (status != 0)
    return status;

  while (!(o.limited && printed >= o.limit) &&
         (rc = stkr_reader_next(r, &ev)) == 1) {
    if (o.json)
      dump_json(stdout, &ev);
    else
      dump_text(stdout, &ev);
    printed++;
  }
  if (rc < 0) {
    fflush(stdout);
    fprintf(stderr, "stackrec dump: reading failed: %s\n", strerror(-rc));
    status = STKR_CLI_DATA_LOST;
  } else {
    status = stkr_cli_status(r);
  }
  if (stkr_cli_flush("dump") != 0)
    status = STKR_CLI_DATA_LOST;
  stkr_reader_free(r);
  return status;
}
