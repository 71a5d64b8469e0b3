/*
 * info_json.c: `stackrec info --json`: the summary of every process as one
 * JSON document, for scripts and dashboards (jq, DuckDB's read_json):
 *
 *   {"processes": [{"pid", "name", "arch", "directory", "watched" (the
 *     categories it watched, comma-separated; "" when not said), "parent_pid",
 *     "os_parent_pid" (the OS's parent at its start, exec'd programs too;
 *     0: not said),
 *     "forked_from_pid", "fork_mono_ns" (a forked child: whose marks it
 *     started with, and when; 0: not said),
 *     "sessions", "instances" (processes that held the pid in turn, told
 *     by their start times; 0: no Header read), "session_id" (hex string),
 *     "boot_id" (32 hex digits, "" when not known), "mono_offset_ns" (its
 *     time namespace's: which monotonic clock its times are on),
 *     "unwind" (when the process
 *     walked with unwind tables: {"images", "images_failed",
 *     "images_without_cfi", "rows", "rows_fallback", "images_cached",
 *     "cache_rejected"}), "start_wall_ns", "first_wall_ns", "duration_ns",
 *     "events", "marks", "external_marks", "unresolved_events", "stacks",
 *     "threads" (OS threads), "thread_definitions" (a renamed thread once
 *     per name, summed over sessions), "sites": [{"name", "events"}, ...]
 *     (most first),
 *     "drops": {"ring_full", "reentrant", "other", "write_error", "exit",
 *       "total"},
 *     "accounting": {"attempted", "written", "dropped", "recovered",
 *       "unaccounted", "cap_deleted" (events in segments the disk cap
 *       deleted, when known), "adds_up"},
 *     "complete", "incomplete": [reasons...],
 *     "segments", "first_seq", "last_seq", "segments_deleted", "batches",
 *     "compressed_bytes", "damaged_batches", "missing_batches",
 *     "cap_deleted_batches",
 *     "unreadable_segments", "misnamed_segments",
 *     "end": "clean" | "live" | "cut off" | "not clean", "newer_format"}],
 *   "processes_count", "events",
 *   the recording as a whole: "complete" (false when anything makes it
 *   incomplete, a process's finding or not), "incomplete" (the INCOMPLETE
 *   line the text views print, or null), "ring_files" ({"sessions",
 *   "events"}: what dead writers left in ring files, not in any segment),
 *   "unrecorded_processes" (processes of the tree that recorded nothing)}
 *
 * Names are JSON strings (invalid UTF-8 as \u00XX, see stkr_cli_put_json);
 * numbers are exact integers (64-bit counters may exceed what a double
 * holds exactly: consumers that care read them as integers).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"

#include "tools/stackrec/cli.h"

static void put_u64(const char *key, uint64_t v, bool comma) {
  printf("%s\"%s\":%" PRIu64, comma ? "," : "", key, v);
}

/* A run of integer members: a table reads as the document's field list. */
typedef struct u64_member {
  const char *key;
  uint64_t v;
} u64_member;

/* Each member after a comma, except the first when it opens an object. */
static void put_u64s(const u64_member *m, size_t n, bool opens_object) {
  size_t k;

  for (k = 0; k < n; k++)
    put_u64(m[k].key, m[k].v, k > 0 || !opens_object);
}

static int by_events_desc(const void *a, const void *b) {
  const stkr_site_info *x = a, *y = b;

  int c = stkr_cmp_u64(y->events, x->events);

  return c != 0 ? c : strcmp(x->name, y->name);
}

static int put_sites(const stkr_reader *r, size_t i) {
  const stkr_site_info *sites;
  stkr_site_info *sorted;
  size_t n, k;

  if (stkr_reader_sites(r, i, &sites, &n) != 0)
    n = 0;
  sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (sorted == NULL)
    return -ENOMEM;
  if (n != 0) { /* a process without sites may have no array at all */
    memcpy(sorted, sites, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_events_desc);
  }
  fputs(",\"sites\":[", stdout);
  for (k = 0; k < n; k++) {
    stkr_cli_put_json_member(stdout, k ? ",{" : "{", "name", sorted[k].name);
    if (sorted[k].is_mark) /* a mark's site: "events" are its marks */
      fputs(",\"mark\":true", stdout);
    put_u64("events", sorted[k].events, true);
    putchar('}');
  }
  putchar(']');
  free(sorted);
  return 0;
}

static void put_incomplete(const stkr_process_info *p) {
  const char *sep = "";

  fputs(",\"incomplete\":[", stdout);
#define REASON(cond, text)          \
  do {                              \
    if (cond) {                     \
      printf("%s\"%s\"", sep, text); \
      sep = ",";                    \
    }                               \
  } while (0)
  REASON(stkr_cli_process_damaged(p), "damaged");
  REASON(p->drops, "events dropped");
  REASON(p->live_sessions, "session still recording");
  REASON(p->unclean_sessions > p->live_sessions, "session without a clean end");
  REASON(p->segments_missing, "segments missing");
  REASON(stkr_cli_cap_deleted(p), "segments deleted by the disk cap");
  REASON(p->dir_recreated, "directory recreated");
  REASON(p->empty_segments, "segments without any batch");
  REASON(p->unreadable_segments, "segments unreadable");
  REASON(p->misnamed_segments, "segments named for another process or "
                               "number");
  REASON(p->missing_batches, "batches missing");
  REASON(p->unaccounted, "events unaccounted for");
  REASON(p->memory_rings_lost, "died with rings in memory");
  REASON(p->stacks_lost, "events recovered without their stack");
#undef REASON
  putchar(']');
}

static int put_process(const stkr_reader *r, size_t i) {
  const stkr_process_info *p = stkr_reader_process(r, i);
  const u64_member counts[] = {
      {"start_wall_ns", p->start_wall_ns},
      {"first_wall_ns", p->first_wall_ns},
      {"duration_ns", p->events ? p->last_ts_ns - p->first_ts_ns : 0},
      {"events", p->events},       {"marks", p->marks},
      {"external_marks", p->external_marks},
      {"unresolved_events", p->unresolved_events},
      {"stacks", p->stacks},       {"threads", p->os_threads},
      {"thread_definitions", p->threads}};
  const u64_member unwind[] = {
      {"images", p->unwind_images},
      {"images_failed", p->unwind_images_failed},
      {"images_without_cfi", p->unwind_images_without_cfi},
      {"rows", p->unwind_rows},
      {"rows_fallback", p->unwind_rows_fallback},
      {"images_cached", p->unwind_images_cached},
      {"cache_rejected", p->unwind_cache_rejected}};
  const u64_member drops[] = {
      {"ring_full", p->drops_ring_full}, {"reentrant", p->drops_reentrant},
      {"other", p->drops_other},         {"write_error", p->drops_write_error},
      {"exit", p->drops_exit},           {"total", p->drops}};
  const u64_member accounting[] = {
      {"attempted", p->attempted}, {"written", p->written},
      {"dropped", p->drops},       {"recovered", p->recovered},
      {"unaccounted", p->unaccounted},
      {"cap_deleted", p->cap_deleted_events}};
  const u64_member files[] = {
      {"segments", p->segments},   {"first_seq", p->first_seq},
      {"last_seq", p->last_seq},
      /* As info's text and verify count them (QA, session 31: another
       * process's cap deleting them showed 0 here): */
      {"segments_deleted", stkr_cli_cap_deleted(p)},
      {"batches", p->batches},     {"compressed_bytes", p->compressed_bytes},
      {"damaged_batches", p->damaged_batches},
      {"missing_batches", p->missing_batches},
      {"cap_deleted_batches", p->cap_deleted_batches},
      {"unreadable_segments", p->unreadable_segments},
      {"misnamed_segments", p->misnamed_segments}};

  printf("{\"pid\":%u,\"name\":", (unsigned)p->pid);
  stkr_cli_put_json_str(stdout, p->have_header ? p->process_name : "");
  stkr_cli_put_json_member(stdout, ",", "arch", p->arch ? p->arch : "");
  stkr_cli_put_json_member(stdout, ",", "directory", p->dir ? p->dir : "");
  stkr_cli_put_json_member(stdout, ",", "watched", p->watched);
  printf(",\"parent_pid\":%u,\"os_parent_pid\":%u,\"forked_from_pid\":%u,"
         "\"fork_mono_ns\":%" PRIu64
         ",\"sessions\":%u,\"instances\":%u,\"session_id\":\"%016" PRIx64
         "\"",
         (unsigned)p->parent_pid, (unsigned)p->os_parent_pid,
         (unsigned)p->forked_from_pid,
         p->fork_mono_ns, (unsigned)p->sessions, (unsigned)p->instances,
         p->session_id);
  /* Which monotonic clock its times are on (README, "Processes on
   * several monotonic clocks"): "" when not known. */
  fputs(",\"boot_id\":\"", stdout);
  for (size_t k = 0; p->have_boot_id && k < sizeof p->boot_id; k++)
    printf("%02x", p->boot_id[k]);
  printf("\",\"mono_offset_ns\":%" PRId64, p->mono_offset_ns);
  if (p->unwind_tables) {
    fputs(",\"unwind\":{", stdout);
    put_u64s(unwind, sizeof unwind / sizeof unwind[0], true);
    putchar('}');
  }
  put_u64s(counts, sizeof counts / sizeof counts[0], false);
  if (put_sites(r, i) != 0)
    return -ENOMEM;
  fputs(",\"drops\":{", stdout);
  put_u64s(drops, sizeof drops / sizeof drops[0], true);
  fputs("},\"accounting\":{", stdout);
  put_u64s(accounting, sizeof accounting / sizeof accounting[0], true);
  printf(",\"adds_up\":%s}", p->counters_overflow || p->accounting_mismatches ||
                                     p->unaccounted
                                 ? "false"
                                 : "true");
  printf(",\"complete\":%s",
         p->incomplete || stkr_cli_process_damaged(p) ? "false" : "true");
  put_incomplete(p);
  put_u64s(files, sizeof files / sizeof files[0], false);
  printf(",\"end\":\"%s\",\"newer_format\":%s}",
         /* "live" with or without a batch being written (the text's
          * "still being written" and "not yet"; QA, session 29: a live
          * process without one was "not clean"). */
         p->clean_end       ? "clean"
         : p->live_sessions ? "live"
         : p->live_tail     ? "cut off"
                            : "not clean",
         p->status == -EPROTONOSUPPORT ? "true" : "false");
  return 0;
}

int stkr__info_json(const stkr_reader *r, uint64_t events) {
  size_t i, n = stkr_reader_process_count(r);

  fputs("{\"processes\":[", stdout);
  for (i = 0; i < n; i++) {
    fputs(i ? ",\n" : "\n", stdout);
    if (put_process(r, i) != 0)
      return -ENOMEM;
  }
  printf("],\n\"processes_count\":%zu,\"events\":%" PRIu64, n, events);
  /* What no single process has (QA, session 29: processes that recorded
   * nothing and events in ring files were in every text view but here,
   * and every process said "complete": true). */
  char line[1024];
  uint64_t ring_events, ring_sessions =
      stkr_cli_reader_rings_left(r, &ring_events);
  bool incomplete = stkr_cli_incomplete_line(r, line, sizeof line) > 0;
  printf(",\n\"complete\":%s,\"incomplete\":", incomplete ? "false" : "true");
  stkr_cli_put_json_str(stdout, incomplete ? line : NULL);
  printf(",\"ring_files\":{\"sessions\":%" PRIu64 ",\"events\":%" PRIu64
         "},\"unrecorded_processes\":%zu}\n",
         ring_sessions, ring_events, stkr_reader_unrecorded_count(r));
  return 0;
}
