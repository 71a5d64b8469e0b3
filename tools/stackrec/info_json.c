/*
 * info_json.c: `stackrec info --json`: the summary of every process as one
 * JSON document, for scripts and dashboards (jq, DuckDB's read_json):
 *
 *   {"processes": [{"pid", "name", "arch", "directory", "parent_pid",
 *     "sessions", "session_id" (hex string), "unwind" (when the process
 *     walked with unwind tables: {"images", "images_failed",
 *     "images_without_cfi", "rows", "rows_fallback"}), "start_wall_ns",
 *     "first_wall_ns", "duration_ns", "events", "unresolved_events",
 *     "stacks", "threads", "sites": [{"name", "events"}, ...] (most first),
 *     "drops": {"ring_full", "reentrant", "other", "write_error", "exit",
 *       "total"},
 *     "accounting": {"attempted", "written", "dropped", "recovered",
 *       "unaccounted", "adds_up"},
 *     "complete", "incomplete": [reasons...],
 *     "segments", "first_seq", "last_seq", "segments_deleted", "batches",
 *     "compressed_bytes", "damaged_batches", "missing_batches",
 *     "end": "clean" | "live" | "not clean", "newer_format"}],
 *   "processes_count", "events"}
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

#include "tools/stackrec/cli.h"

static void put_u64(const char *key, uint64_t v, bool comma) {
  printf("%s\"%s\":%" PRIu64, comma ? "," : "", key, v);
}

static int by_events_desc(const void *a, const void *b) {
  const stkr_site_info *x = a, *y = b;

  if (x->events != y->events)
    return x->events > y->events ? -1 : 1;
  return strcmp(x->name, y->name);
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
  REASON(p->drops, "events dropped");
  REASON(p->unclean_sessions, "session without a clean end");
  REASON(p->segments_missing, "segments missing");
  REASON(p->segments_deleted, "segments deleted by the disk cap");
  REASON(p->dir_recreated, "directory recreated");
  REASON(p->empty_segments, "segments without any batch");
  REASON(p->missing_batches, "batches missing");
  REASON(p->unaccounted, "events unaccounted for");
#undef REASON
  putchar(']');
}

static int put_process(const stkr_reader *r, size_t i) {
  const stkr_process_info *p = stkr_reader_process(r, i);

  printf("{\"pid\":%u,\"name\":", (unsigned)p->pid);
  stkr_cli_put_json_str(stdout, p->have_header ? p->process_name : "");
  stkr_cli_put_json_member(stdout, ",", "arch", p->arch ? p->arch : "");
  stkr_cli_put_json_member(stdout, ",", "directory", p->dir ? p->dir : "");
  printf(",\"parent_pid\":%u,\"sessions\":%u,\"session_id\":\"%016" PRIx64
         "\"",
         (unsigned)p->parent_pid, (unsigned)p->sessions, p->session_id);
  if (p->unwind_tables)
    printf(",\"unwind\":{\"images\":%u,\"images_failed\":%u,"
           "\"images_without_cfi\":%u,\"rows\":%llu,\"rows_fallback\":%llu,"
           "\"images_cached\":%u,\"cache_rejected\":%u}",
           (unsigned)p->unwind_images, (unsigned)p->unwind_images_failed,
           (unsigned)p->unwind_images_without_cfi,
           (unsigned long long)p->unwind_rows,
           (unsigned long long)p->unwind_rows_fallback,
           (unsigned)p->unwind_images_cached,
           (unsigned)p->unwind_cache_rejected);
  put_u64("start_wall_ns", p->start_wall_ns, true);
  put_u64("first_wall_ns", p->first_wall_ns, true);
  put_u64("duration_ns", p->events ? p->last_ts_ns - p->first_ts_ns : 0,
          true);
  put_u64("events", p->events, true);
  put_u64("marks", p->marks, true);
  put_u64("external_marks", p->external_marks, true);
  put_u64("unresolved_events", p->unresolved_events, true);
  put_u64("stacks", p->stacks, true);
  put_u64("threads", p->threads, true);
  if (put_sites(r, i) != 0)
    return -ENOMEM;
  fputs(",\"drops\":{", stdout);
  put_u64("ring_full", p->drops_ring_full, false);
  put_u64("reentrant", p->drops_reentrant, true);
  put_u64("other", p->drops_other, true);
  put_u64("write_error", p->drops_write_error, true);
  put_u64("exit", p->drops_exit, true);
  put_u64("total", p->drops, true);
  fputs("},\"accounting\":{", stdout);
  put_u64("attempted", p->attempted, false);
  put_u64("written", p->written, true);
  put_u64("dropped", p->drops, true);
  put_u64("recovered", p->recovered, true);
  put_u64("unaccounted", p->unaccounted, true);
  printf(",\"adds_up\":%s}", p->counters_overflow || p->accounting_mismatches ||
                                     p->unaccounted
                                 ? "false"
                                 : "true");
  printf(",\"complete\":%s", p->incomplete ? "false" : "true");
  put_incomplete(p);
  put_u64("segments", p->segments, true);
  put_u64("first_seq", p->first_seq, true);
  put_u64("last_seq", p->last_seq, true);
  put_u64("segments_deleted", p->segments_deleted, true);
  put_u64("batches", p->batches, true);
  put_u64("compressed_bytes", p->compressed_bytes, true);
  put_u64("damaged_batches", p->damaged_batches, true);
  put_u64("missing_batches", p->missing_batches, true);
  printf(",\"end\":\"%s\",\"newer_format\":%s}",
         p->clean_end ? "clean" : p->live_tail ? "live" : "not clean",
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
  printf("],\n\"processes_count\":%zu,\"events\":%" PRIu64 "}\n", n, events);
  return 0;
}
