/*
 * verify.c: `stackrec verify`: check every segment of recordings and say
 * what is damaged where.
 *
 * The reader already checks everything a recording can get wrong, as it
 * reads: each zstd frame's content checksum (a frame without one is
 * refused), protobuf decoding within a memory budget, the format version,
 * the consistency of each batch's event columns, definitions redefined
 * differently, frames that do not fit their stack's PCs. verify reads
 * every event and reports each of its warnings as one line, plus, per
 * batch, events whose site, thread or stack id has no definition (the
 * reader only counts those per process). Memory stays bounded like the
 * reader's; nothing is kept per event.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"

static const char verify_help[] =
    "Usage: stackrec verify DIR|FILE...\n"
    "\n"
    "Check every segment of the recordings: each batch's zstd frame and\n"
    "its content checksum, its protobuf decoding and format version, the\n"
    "consistency of its event columns, and that every site, thread, stack,\n"
    "frame and string id used is defined. Prints one line per problem:\n"
    "  damaged: FILE: offset N: REASON          (data lost: exit 1)\n"
    "  inconsistent: FILE: offset N: REASON     (ids or names that do not\n"
    "                                            agree: exit 1)\n"
    "  note: ...                                (nothing damaged: ignored\n"
    "                                            files, empty segments, a\n"
    "                                            recording still being\n"
    "                                            written, gaps in batch\n"
    "                                            numbers, segments the disk\n"
    "                                            cap deleted)\n"
    "then one line per process (segments, batches, events, and 'intact' or\n"
    "what is wrong) and a last line 'intact' or 'DAMAGED: N problems'.\n"
    "\n"
    "The incomplete last batch of a recording still being written (the end\n"
    "of the last segment of a process that has not ended cleanly) is a\n"
    "note, not damage.\n"
    "\n"
    "Options:\n"
    "  -h, --help  this help\n"
    "\n"
    "Exit status:\n"
    "  0  every segment is intact\n"
    "  1  damage or an inconsistency was found, no recording was found,\n"
    "     or output failed\n"
    "  2  usage error\n"
    "  3  an input cannot be opened\n";

typedef struct verify_run {
  uint64_t problems; /* lines that make the exit status 1 */
  uint64_t notes;
  /* Events with undefined ids in the current batch (reported per batch). */
  const char *ub_path;
  uint64_t ub_off, ub_events;
  uint32_t ub_site, ub_thread, ub_stack;
  char ub_pathbuf[4096];
} verify_run;

static void on_warning(void *arg, const stkr_warning *w) {
  verify_run *v = arg;

  stkr_cli_progress_pause();
  switch (w->kind) {
  case STKR_WARN_UNRESOLVED:
    /* The per-batch lines (flush_unresolved) say it, with offsets. */
    return;
  case STKR_WARN_IGNORED_FILES:
  case STKR_WARN_NO_SEGMENTS:
  case STKR_WARN_EMPTY_FILE:
  case STKR_WARN_LIVE_TAIL:
    v->notes++;
    printf("note: %s\n", w->message);
    return;
  case STKR_WARN_INCONSISTENT:
    v->problems++;
    printf("inconsistent: %s\n", w->message);
    return;
  default:
    v->problems++;
    printf("damaged: %s\n", w->message);
    return;
  }
}

static void flush_unresolved(verify_run *v) {
  if (v->ub_events == 0)
    return;
  v->problems++;
  stkr_cli_progress_pause();
  printf("damaged: %s: offset %llu: %llu event%s of this batch refer%s to "
         "ids with no definition (the first: site %u, thread %u, stack %u)\n",
         v->ub_pathbuf, (unsigned long long)v->ub_off,
         (unsigned long long)v->ub_events, v->ub_events == 1 ? "" : "s",
         v->ub_events == 1 ? "s" : "",
         (unsigned)v->ub_site, (unsigned)v->ub_thread,
         (unsigned)v->ub_stack);
  v->ub_events = 0;
}

static void on_unresolved(verify_run *v, const stkr_event_view *ev) {
  if (v->ub_events != 0 &&
      (ev->batch_offset != v->ub_off || strcmp(ev->path, v->ub_pathbuf) != 0))
    flush_unresolved(v);
  if (v->ub_events++ == 0) {
    snprintf(v->ub_pathbuf, sizeof v->ub_pathbuf, "%s", ev->path);
    v->ub_off = ev->batch_offset;
    v->ub_site = ev->site_id;
    v->ub_thread = ev->thread_id;
    v->ub_stack = ev->stack_id;
  }
}

static void print_process(verify_run *v, const stkr_process_info *p) {
  bool bad = p->damaged_batches || p->unresolved_events || p->status != 0;
  const char *sep = "";

  printf("process %u \"", (unsigned)p->pid);
  stkr_cli_put_escaped(stdout, (const uint8_t *)p->process_name,
                       strlen(p->process_name));
  printf("\" in ");
  stkr_cli_put_escaped(stdout, (const uint8_t *)p->dir, strlen(p->dir));
  printf(": %llu segment%s, %llu batch%s, %llu event%s: ",
         (unsigned long long)p->segments, p->segments == 1 ? "" : "s",
         (unsigned long long)p->batches, p->batches == 1 ? "" : "es",
         (unsigned long long)p->events, p->events == 1 ? "" : "s");
  if (!bad)
    printf("intact");
  if (p->status != 0) {
    printf("NOT READ (%s)", p->status == -EPROTONOSUPPORT
                                ? "newer format version"
                                : strerror(-p->status));
    sep = ", ";
  }
  if (p->damaged_batches) {
    printf("%sDAMAGED (%llu batch%s lost)", sep,
           (unsigned long long)p->damaged_batches,
           p->damaged_batches == 1 ? "" : "es");
    sep = ", ";
  }
  if (p->unresolved_events)
    printf("%s%llu event%s with undefined ids", sep,
           (unsigned long long)p->unresolved_events,
           p->unresolved_events == 1 ? "" : "s");
  if (p->live_tail)
    printf(", still being written");
  putchar('\n');
  if (p->segments_deleted) {
    v->notes++;
    printf("note: process %u: %llu older segment%s deleted by the disk cap "
           "while recording (counted by the recorder, not damage)\n",
           (unsigned)p->pid, (unsigned long long)p->segments_deleted,
           p->segments_deleted == 1 ? "" : "s");
  }
  if (p->missing_batches) {
    v->notes++;
    printf("note: process %u: %llu batch%s missing (gaps in batch numbers: "
           "dropped on write errors, older segments deleted by the disk "
           "cap, or damaged)\n",
           (unsigned)p->pid, (unsigned long long)p->missing_batches,
           p->missing_batches == 1 ? "" : "es");
  }
}

int stkr_cli_verify(int argc, char **argv) {
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  verify_run v;
  stkr_reader_opts opts = {.warn = on_warning, .warn_arg = &v,
                           .lazy_frames = true};
  stkr_cli_progress prog;
  stkr_event_view ev;
  stkr_reader *r;
  uint64_t events = 0, segments = 0;
  size_t i, n;
  int c, rc, status;

  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (c == 'h') {
      fputs(verify_help, stdout);
      return stkr_cli_flush("verify");
    }
    return stkr_cli_usage_error("verify", "unknown option '%s'",
                                argv[optind - 1]);
  }
  if (optind >= argc)
    return stkr_cli_usage_error("verify", "no DIR or FILE given");

  memset(&v, 0, sizeof v);
  if ((rc = stkr_reader_create(&opts, &r)) != 0) {
    fprintf(stderr, "stackrec verify: %s\n", strerror(-rc));
    return STKR_CLI_DATA_LOST;
  }
  for (i = (size_t)optind; i < (size_t)argc; i++) {
    rc = stkr_reader_add(r, argv[i]);
    if (rc != 0) {
      fflush(stdout);
      fprintf(stderr, "stackrec verify: cannot open %s: %s\n", argv[i],
              rc == -EINVAL ? "not a directory or regular file"
                            : strerror(-rc));
      stkr_reader_free(r);
      return rc == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
    }
  }

  stkr_cli_progress_init(&prog, "verify");
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (ev.unresolved)
      on_unresolved(&v, &ev);
    if ((++events & 0xFFFFF) == 0)
      stkr_cli_progress_update(&prog, events, "checked");
  }
  stkr_cli_progress_done(&prog);
  flush_unresolved(&v);
  if (rc < 0) {
    fflush(stdout);
    fprintf(stderr, "stackrec verify: reading failed: %s\n", strerror(-rc));
    stkr_reader_free(r);
    return STKR_CLI_DATA_LOST;
  }
  n = stkr_reader_process_count(r);
  for (i = 0; i < n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    segments += p->segments;
    print_process(&v, p);
  }
  if (n == 0) {
    v.problems++;
    printf("DAMAGED: no recording found\n");
  } else if (v.problems == 0) {
    printf("intact: %zu process%s, %llu segment%s, %llu event%s\n", n,
           n == 1 ? "" : "es", (unsigned long long)segments,
           segments == 1 ? "" : "s", (unsigned long long)events,
           events == 1 ? "" : "s");
  } else {
    printf("DAMAGED: %llu problem%s in %zu process%s, %llu segment%s\n",
           (unsigned long long)v.problems, v.problems == 1 ? "" : "s", n,
           n == 1 ? "" : "es", (unsigned long long)segments,
           segments == 1 ? "" : "s");
  }
  status = v.problems ? STKR_CLI_DATA_LOST : STKR_CLI_OK;
  if (stkr_cli_flush("verify") != 0)
    status = STKR_CLI_DATA_LOST;
  stkr_reader_free(r);
  return status;
}
