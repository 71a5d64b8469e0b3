/*
 * info.c: `stackrec info`: a summary of each recorded process.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/stkr_cmp.h"

#include "tools/stackrec/cli.h"

static const char info_help[] =
    "Usage: stackrec info [--json] DIR|FILE...\n"
    "\n"
    "Read the recordings completely and print, for each recorded process:\n"
    "name, pid, architecture, wall-clock time of the first event (UTC,\n"
    "ISO 8601) and the time span of the events, events, distinct stacks,\n"
    "sites (with events per site, most first), threads, events the\n"
    "recorder dropped (by cause), the accounting (attempted = written +\n"
    "dropped + recovered) and whether the recording is complete (else\n"
    "why not, as 'stackrec verify' says it), segments, batches,\n"
    "compressed bytes and bytes per event, damaged batches, and whether\n"
    "the recording ended cleanly (stkr_shutdown() wrote its last batch).\n"
    "\n"
    "Options:\n"
    "  --json      one JSON document instead: {\"processes\": [...]} with\n"
    "              the same facts, the incomplete reasons as a list\n"
    "  -h, --help  this help\n"
    "\n";

static void put_name(const char *s) {
  stkr_cli_put_escaped(stdout, (const uint8_t *)s, strlen(s));
}

/* "  <what> boot <id>[, time namespace offset <s>]" and a newline. */
static void put_clock(const char *what, const uint8_t boot[16],
                      int64_t offset_ns) {
  printf("  %s boot ", what);
  for (size_t k = 0; k < 16; k++)
    printf("%02x", boot[k]);
  if (offset_ns != 0)
    printf(", time namespace offset %+.9f s", (double)offset_ns / 1e9);
  putchar('\n');
}

static void put_wall(uint64_t wall_ns) {
  time_t secs = (time_t)(wall_ns / 1000000000u);
  char buf[64];
  struct tm tm;

  if (wall_ns == 0 || gmtime_r(&secs, &tm) == NULL ||
      strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
    fputs("unknown", stdout);
    return;
  }
  printf("%s.%09uZ", buf, (unsigned)(wall_ns % 1000000000u));
}

static int by_events_desc(const void *a, const void *b) {
  const stkr_site_info *x = a, *y = b;
  int c = stkr_cmp_u64(y->events, x->events);

  if (c == 0) c = strcmp(x->name, y->name);
  return c != 0 ? c : stkr_cmp_u64(x->id, y->id);
}

static int print_sites(const stkr_reader *r, size_t i) {
  const stkr_site_info *sites;
  stkr_site_info *sorted;
  size_t n, k;

  if (stkr_reader_sites(r, i, &sites, &n) != 0 || n == 0)
    return 0;
  sorted = malloc(n * sizeof(*sorted));
  if (sorted == NULL)
    return -ENOMEM;
  memcpy(sorted, sites, n * sizeof(*sorted));
  qsort(sorted, n, sizeof(*sorted), by_events_desc);
  for (k = 0; k < n; k++) {
    printf("    %10llu  %s", (unsigned long long)sorted[k].events,
           sorted[k].is_mark ? "mark:" : "");
    put_name(sorted[k].name);
    if (!sorted[k].defined)
      printf(" (site id %u, undefined)", (unsigned)sorted[k].id);
    putchar('\n');
  }
  free(sorted);
  return 0;
}

/* attempted == written + dropped + recovered, and what makes the process
 * incomplete (the facts `verify` reports line by line). */
static void print_accounting(const stkr_process_info *p) {
  const char *sep = "";

  printf("  accounting:  attempted %llu = written %llu + dropped %llu + "
         "recovered %llu",
         (unsigned long long)p->attempted, (unsigned long long)p->written,
         (unsigned long long)p->drops, (unsigned long long)p->recovered);
  static const stkr_cli_acct_words words = {
      " + in segments the disk cap deleted",
      {": COUNTERS OVERFLOW (damaged)\n",
       ": DOES NOT ADD UP (inconsistent counters)\n",
       " + %llu not accounted for\n", " (no counters recorded)\n", "\n"}};
  stkr_cli_put_accounting_end(p, &words);
  /* Damage too, as verify says it (QA, session 47: "complete: yes" beside
   * "damaged: 1 batch", where verify exited 1). */
  const bool damaged = stkr_cli_process_damaged(p);
  printf("  complete:    %s", p->incomplete || damaged ? "NO: " : "yes");
#define INFO_ITEM(cond, ...)                                                  \
  do {                                                                        \
    if (cond) {                                                               \
      printf("%s", sep);                                                      \
      printf(__VA_ARGS__);                                                    \
      sep = "; ";                                                             \
    }                                                                         \
  } while (0)
  INFO_ITEM(damaged, "damaged (see below)");
  INFO_ITEM(p->drops, "events dropped");
  INFO_ITEM(p->live_sessions, "%u session%s still recording",
            (unsigned)p->live_sessions, p->live_sessions == 1 ? "" : "s");
  INFO_ITEM(p->unclean_sessions > p->live_sessions,
            "%u session%s without a clean end",
            (unsigned)(p->unclean_sessions - p->live_sessions),
            p->unclean_sessions - p->live_sessions == 1 ? "" : "s");
  INFO_ITEM(p->segments_missing, "%u segment%s missing",
            (unsigned)p->segments_missing,
            p->segments_missing == 1 ? "" : "s");
  INFO_ITEM(stkr_cli_cap_deleted(p), "segments deleted by the disk cap");
  INFO_ITEM(p->dir_recreated, "directory recreated");
  INFO_ITEM(p->empty_segments, "%u segment%s without any batch",
            (unsigned)p->empty_segments, p->empty_segments == 1 ? "" : "s");
  INFO_ITEM(p->unreadable_segments, "%u segment%s unreadable",
            (unsigned)p->unreadable_segments,
            p->unreadable_segments == 1 ? "" : "s");
  INFO_ITEM(p->misnamed_segments, "%u segment%s named for another process "
            "or number", (unsigned)p->misnamed_segments,
            p->misnamed_segments == 1 ? "" : "s");
  INFO_ITEM(p->missing_batches, "batches missing");
  INFO_ITEM(p->unaccounted, "events unaccounted for");
  INFO_ITEM(p->memory_rings_lost, "died with %u ring%s in memory",
            (unsigned)p->memory_rings_lost,
            p->memory_rings_lost == 1 ? "" : "s");
  INFO_ITEM(p->stacks_lost, "%llu event%s recovered without %s stack",
            (unsigned long long)p->stacks_lost, p->stacks_lost == 1 ? "" : "s",
            p->stacks_lost == 1 ? "its" : "their");
#undef INFO_ITEM
  /* (QA, session 46: "(0 events recovered ...)" where recovery had
   * written a dead writer's last counters alone.) */
  if (p->recovered > 0)
    printf("%s(%llu events recovered from a dead writer's rings)",
           p->incomplete || damaged ? "; " : " ",
           (unsigned long long)p->recovered);
  else if (p->recovered_batches > 0)
    printf("%s(a dead writer's last counters written by recovery)",
           p->incomplete || damaged ? "; " : " ");
  putchar('\n');
}

/* Who the process is: its name, directory, parent, where its marks come
 * from, what it watched and how its stacks were unwound. */
static void print_origin(const stkr_process_info *p) {
  printf("process %u \"", (unsigned)p->pid);
  put_name(p->have_header ? p->process_name : "?");
  printf("\"");
  if (p->arch[0] != '\0') {
    printf(" (");
    put_name(p->arch);
    printf(")");
  }
  printf("\n  directory:   ");
  put_name(p->dir);
  putchar('\n');
  if (p->parent_pid)
    printf("  parent pid:  %u (forked child)\n", (unsigned)p->parent_pid);
  else if (p->os_parent_pid)
    printf("  parent pid:  %u (at its start)\n", (unsigned)p->os_parent_pid);
  /* Through a child that never recorded, the marks come from further up. */
  if (p->fork_mono_ns != 0 && p->forked_from_pid == 0)
    printf("  marks from:  unknown (its origin was not placed by merge)\n");
  else if (p->fork_mono_ns != 0 && p->forked_from_pid != p->parent_pid)
    printf("  marks from:  pid %u (as at its fork)\n",
           (unsigned)p->forked_from_pid);
  if (p->watched[0] != '\0') {
    printf("  watched:     ");
    put_name(p->watched);
    printf(" (sites of other categories were not recorded)\n");
  }
  if (p->unwind_tables)
    printf("  unwind:      tables for %u images (%u without .eh_frame, %u "
           "unusable: frame pointers there), %llu rows (%llu fall back to "
           "the frame pointer)\n",
           (unsigned)p->unwind_images, (unsigned)p->unwind_images_without_cfi,
           (unsigned)p->unwind_images_failed,
           (unsigned long long)p->unwind_rows,
           (unsigned long long)p->unwind_rows_fallback);
  if (p->unwind_tables && (p->unwind_images_cached || p->unwind_cache_rejected))
    printf("  unwind cache: %u of the tables read from the recording's cache, "
           "%u cache files refused and rebuilt\n",
           (unsigned)p->unwind_images_cached,
           (unsigned)p->unwind_cache_rejected);
}

static int print_process(const stkr_reader *r, size_t i) {
  const stkr_process_info *p = stkr_reader_process(r, i);
  uint64_t span = p->events ? p->last_ts_ns - p->first_ts_ns : 0;
  char reasons[STKR_CLI_DROP_REASONS_MAX];

  print_origin(p);
  if (p->status == -EPROTONOSUPPORT)
    printf("  status:      NOT READ: recorded in a newer format version\n");
  if (p->have_boot_id) /* which monotonic clock (common/stkr_boot.h) */
    put_clock("clock:      ", p->boot_id, p->mono_offset_ns);
  /* A later process with the pid on another clock (a reboot, another time
   * namespace): its times are put on the first one's for the duration. */
  if (p->instances > 1 && p->instance_have_boot_id &&
      (!p->have_boot_id || p->mono_offset_ns != p->instance_mono_offset_ns ||
       memcmp(p->boot_id, p->instance_boot_id, sizeof p->boot_id) != 0))
    put_clock("last clock: ", p->instance_boot_id, p->instance_mono_offset_ns);
  printf("  start:       ");
  if (p->events)
    put_wall(p->first_wall_ns);
  else
    fputs("no events", stdout);
  printf("\n  duration:    %llu.%09llu s\n",
         (unsigned long long)(span / 1000000000u),
         (unsigned long long)(span % 1000000000u));
  printf("  events:      %llu\n", (unsigned long long)p->events);
  if (p->marks || p->external_marks) /* not events: counted apart */
    printf("  marks:       %llu recorded, %llu set with `stackrec mark`\n",
           (unsigned long long)p->marks,
           (unsigned long long)p->external_marks);
  if (p->unresolved_events)
    printf("  unresolved:  %llu events with undefined site/thread/stack\n",
           (unsigned long long)p->unresolved_events);
  printf("  stacks:      %llu\n", (unsigned long long)p->stacks);
  printf("  sites:       %llu\n", (unsigned long long)p->sites);
  if (print_sites(r, i) != 0)
    return -ENOMEM;
  /* OS threads; a thread renamed while recording, or in two sessions,
   * is several definitions (QA, session 36: 5 threads said of 2). */
  printf("  threads:     %llu", (unsigned long long)p->os_threads);
  if (p->threads != p->os_threads)
    printf(" (%llu by name and session)", (unsigned long long)p->threads);
  putchar('\n');
  printf("  drops:       %llu (%s)\n", (unsigned long long)p->drops,
         stkr_cli_drop_reasons(p, reasons, sizeof reasons));
  print_accounting(p);
  printf("  segments:    %llu (seq %u-%u)", (unsigned long long)p->segments,
         (unsigned)p->first_seq, (unsigned)p->last_seq);
  if (stkr_cli_cap_deleted(p))
    printf(", %llu older deleted by the disk cap",
           (unsigned long long)stkr_cli_cap_deleted(p));
  printf("\n  batches:     %llu\n", (unsigned long long)p->batches);
  printf("  bytes:       %llu", (unsigned long long)p->compressed_bytes);
  if (p->events)
    printf(" (%.1f per event)",
           (double)p->compressed_bytes / (double)p->events);
  printf("\n  damaged:     %llu batch%s\n",
         (unsigned long long)p->damaged_batches,
         p->damaged_batches == 1 ? "" : "es");
  if (p->unreadable_segments) /* named on stderr */
    printf("  unreadable:  %u segment%s (not regular files, or cannot be "
           "opened)\n",
           (unsigned)p->unreadable_segments,
           p->unreadable_segments == 1 ? "" : "s");
  if (p->misnamed_segments) /* named on stderr */
    printf("  misnamed:    %u segment%s whose header names another process "
           "or number (read under the file's name)\n",
           (unsigned)p->misnamed_segments,
           p->misnamed_segments == 1 ? "" : "s");
  if (p->missing_batches)
    printf("  missing:     %llu batch%s (gaps in batch numbers)\n",
           (unsigned long long)p->missing_batches,
           p->missing_batches == 1 ? "" : "es");
  if (p->instances > 1) /* told by their start times (session 33) */
    printf("  sessions:    %u, of %u processes that held this pid in turn "
           "(the pid was used again)\n",
           (unsigned)p->sessions, (unsigned)p->instances);
  else if (p->sessions > 1)
    printf("  sessions:    %u (stkr_init() ran again, or the pid was "
           "reused)\n",
           (unsigned)p->sessions);
  printf("  end:         %s\n",
         p->clean_end   ? "clean"
         : p->live_tail && p->live_sessions
             ? "still being written (its last, incomplete batch is not read "
               "yet)"
         : p->live_tail ? "not clean: its last batch ends mid-write (not "
                          "read), and no writer runs here"
                        : p->live_sessions
                            ? "not yet (still recording: the process is alive)"
                            : "not clean (the process died, or its last "
                              "segment is missing)");
  return 0;
}

int stkr_cli_info(int argc, char **argv) {
  bool json = false;
  const stkr_cli_opt opts[] = {{"json", 'j', 0, NULL, &json}, {0}};
  stkr_cli_getopt_state gopt = {.cmd = "info", .opts = opts,
                                .help = {info_help, stkr_cli_exit_help},
                                .operands = "DIR or FILE"};
  unsigned long long total = 0;
  stkr_reader *r;
  stkr_event_view ev;
  size_t i, n;
  int rc, status;

  if (stkr_cli_getopt(&gopt, argc, argv) == STKR_CLI_OPT_EXIT)
    return gopt.status;
  status = stkr_cli_open("info", argv + optind, argc - optind, true, &r);
  if (status != 0)
    return status;

  while ((rc = stkr_reader_next(r, &ev)) == 1)
    total += !ev.is_mark;
  if (rc < 0) {
    fprintf(stderr, "stackrec info: reading failed: %s\n", strerror(-rc));
    stkr_reader_free(r);
    return STKR_CLI_DATA_LOST;
  }
  n = stkr_reader_process_count(r);
  if (json && stkr__info_json(r, total) != 0) {
    fprintf(stderr, "stackrec info: %s\n", strerror(ENOMEM));
    stkr_reader_free(r);
    return STKR_CLI_DATA_LOST;
  }
  for (i = 0; i < n && !json; i++) {
    if (i)
      putchar('\n');
    if (print_process(r, i) != 0) {
      fprintf(stderr, "stackrec info: %s\n", strerror(ENOMEM));
      stkr_reader_free(r);
      return STKR_CLI_DATA_LOST;
    }
  }
  if (n > 1 && !json)
    printf("\n%zu processes, %llu events\n", n, total);
  if (!json) {
    /* The findings no single process has (events still in dead writers'
     * ring files), with the others, as report's header says them. */
    char line[1024];
    if (stkr_cli_incomplete_line(r, line, sizeof line) > 0)
      printf("\n%s\n", line);
  }
  status = stkr_cli_finish("info", r, STKR_CLI_OK);
  stkr_reader_free(r);
  return status;
}
