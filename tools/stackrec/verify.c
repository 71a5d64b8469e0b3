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
#include <limits.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/stkr_recover.h"
#include "tools/stackrec/cli.h"

static const char verify_help[] =
    "Usage: stackrec verify DIR|FILE...\n"
    "\n"
    "Check every segment of the recordings: each batch's zstd frame and\n"
    "its content checksum, its protobuf decoding and format version, the\n"
    "consistency of its event columns, that every site, thread, stack,\n"
    "frame and string id used is defined, and that the recording is\n"
    "complete. Prints one line per finding:\n"
    "  damaged: FILE: offset N: REASON          (data lost: exit 1)\n"
    "  inconsistent: FILE: offset N: REASON     (ids, names or counters that\n"
    "                                            do not agree: exit 1)\n"
    "  incomplete: FILE: REASON                 (intact, but events are\n"
    "                                            missing: exit 4)\n"
    "  note: ...                                (nothing lost: ignored\n"
    "                                            files, a batch being\n"
    "                                            written, recovered batches)\n"
    "then per process a line (segments, batches, events, and 'intact',\n"
    "'INCOMPLETE' or what is damaged) and its accounting:\n"
    "  attempted == written + dropped (by reason) + recovered\n"
    "and a last line 'intact', 'INCOMPLETE: ...' or 'DAMAGED: ...'.\n"
    "\n"
    "Incomplete means any of: events dropped (ring full, reentrant, write\n"
    "error, other, exit); a session without a clean end (killed, crashed,\n"
    "_exit, or its last segment missing), or still recording (its process\n"
    "alive, its session file there); segments missing from a\n"
    "session's sequence, or deleted by the disk cap; a recording directory\n"
    "recreated mid-run; a segment file without any batch; events attempted\n"
    "but neither written nor counted; a process of `stackrec record`'s\n"
    "tree that could not record at all (named in the marks file). Batches\n"
    "recovered from the ring files\n"
    "of a writer that died count as written: complete, with a note.\n"
    "\n"
    "Options:\n"
    "  -h, --help  this help\n"
    "\n"
    "Exit status:\n"
    "  0  every segment is intact and the recording is complete\n"
    "  1  damage or an inconsistency was found, no recording was found\n"
    "     (an empty directory is an empty recording: 0), or output failed\n"
    "  2  usage error\n"
    "  3  an input cannot be opened\n"
    "  4  intact but incomplete (see above)\n";

typedef struct verify_run {
  uint64_t problems;   /* lines that make the exit status 1 */
  uint64_t incomplete; /* lines that make it 4 (when not 1) */
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
  case STKR_WARN_EMPTY_FILE:
    /* Whether it loses anything is the accounting's finding (a
     * STKR_WARN_INCOMPLETE at the process's end): a dead writer's empty
     * first segment whose rings were recovered loses nothing. */
    v->notes++;
    stkr_cli_put_line(stdout, "note: ", w->message,
                      ": a segment without any batch (its writer ended "
                      "before its first flush, or has just started)");
    return;
  case STKR_WARN_INCOMPLETE:
    v->incomplete++;
    stkr_cli_put_line(stdout, "incomplete: ", w->message, "");
    return;
  case STKR_WARN_NO_SEGMENTS:
    if (stkr_cli_inputs_empty())
      return; /* an empty recording: the last line says so */
    /* fall through */
  case STKR_WARN_IGNORED_FILES:
  case STKR_WARN_LIVE_TAIL:
    v->notes++;
    stkr_cli_put_line(stdout, "note: ", w->message, "");
    return;
  case STKR_WARN_INCONSISTENT:
    v->problems++;
    stkr_cli_put_line(stdout, "inconsistent: ", w->message, "");
    return;
  default:
    v->problems++;
    stkr_cli_put_line(stdout, "damaged: ", w->message, "");
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

/* Each event read (stkr_cli_read_all): the unresolved ones are reported. */
static void check_event(const stkr_event_view *ev, void *arg) {
  /* A stack recovery could not keep is lost, not damage: counted and
   * said by the reader (stkr_process_info.stacks_lost). */
  if (ev->unresolved && !ev->stack_lost)
    on_unresolved(arg, ev);
}

static const char *plural(uint64_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

/* "incomplete: process PID: N noun[s] what", counted, when n is not 0. */
static void put_incomplete(verify_run *v, uint32_t pid, uint64_t n,
                           const char *noun, const char *many,
                           const char *what) {
  if (n == 0)
    return;
  v->incomplete++;
  printf("incomplete: process %u: %llu %s%s %s\n", (unsigned)pid,
         (unsigned long long)n, noun, plural(n, "", many), what);
}

void stkr_cli_put_accounting_end(const stkr_process_info *p,
                                 const stkr_cli_acct_words *w) {
  if (p->cap_deleted_events)
    printf("%s %llu", w->cap, (unsigned long long)p->cap_deleted_events);
  if (p->counters_overflow)
    fputs(w->verdict[0], stdout);
  else if (p->accounting_mismatches)
    fputs(w->verdict[1], stdout);
  else if (p->unaccounted)
    printf(w->verdict[2], (unsigned long long)p->unaccounted);
  else if (p->attempted == 0 && p->written != 0)
    fputs(w->verdict[3], stdout);
  else
    fputs(w->verdict[4], stdout);
}

const char *stkr_cli_drop_reasons(const stkr_process_info *p, char *buf,
                                  size_t len) {
  snprintf(buf, len,
           "ring full %llu, reentrant %llu, other %llu, write error %llu, "
           "exit %llu",
           (unsigned long long)p->drops_ring_full,
           (unsigned long long)p->drops_reentrant,
           (unsigned long long)p->drops_other,
           (unsigned long long)p->drops_write_error,
           (unsigned long long)p->drops_exit);
  return buf;
}

/* The process's accounting: attempted == written + dropped + recovered
 * (+ what the disk cap deleted, when known). */
static void print_accounting(verify_run *v, const stkr_process_info *p) {
  char reasons[STKR_CLI_DROP_REASONS_MAX], why[256];

  if (p->batches == 0) {
    printf("  accounting: no batch read\n");
    return;
  }
  stkr_cli_drop_reasons(p, reasons, sizeof reasons);
  printf("  accounting: attempted %llu, written %llu, dropped %llu (%s), "
         "recovered %llu",
         (unsigned long long)p->attempted, (unsigned long long)p->written,
         (unsigned long long)p->drops, reasons,
         (unsigned long long)p->recovered);
  static const stkr_cli_acct_words words = {
      ", in segments the disk cap deleted",
      {": COUNTERS OVERFLOW\n", ": DOES NOT ADD UP\n",
       ": %llu not accounted for\n", " (no counters recorded)\n",
       ": adds up\n"}};
  stkr_cli_put_accounting_end(p, &words);
  snprintf(why, sizeof why, "dropped by the recorder (%s)", reasons);
  put_incomplete(v, p->pid, p->drops, "event", "s", why);
  put_incomplete(v, p->pid, p->memory_rings_lost, "thread", "s",
                 "recording into memory (no ring file could be made) when "
                 "the process died: what was not flushed is lost, how many "
                 "events is not known");
  put_incomplete(v, p->pid, p->missing_batches, "batch", "es",
                 "missing (gaps in batch numbers: failed writes, deleted or "
                 "lost segments, or damage)");
  /* Deleted segments the sequence check could not place (e.g. older
   * writers without Header.session_first_seq). */
  if (p->segments_deleted > p->segments_cap_deleted)
    put_incomplete(v, p->pid, p->segments_deleted - p->segments_cap_deleted,
                   "segment", "s", "deleted by the disk cap while recording");
  if (p->recovered_batches && p->recovered == 0 && p->clean_end) {
    /* A clean end whose files stayed for drops counted after its last
     * batch: calls its threads made while it ended (recorder/ringfile.c). */
    v->notes++;
    printf("note: process %u: drops counted after its last batch (calls "
           "made while it ended) were written by recovery\n",
           (unsigned)p->pid);
  } else if (p->recovered_batches) {
    v->notes++;
    printf("note: process %u: %llu event%s in %llu batch%s recovered from "
           "the ring files of a writer that died or ran out of time at its "
           "exit%s\n",
           (unsigned)p->pid, (unsigned long long)p->recovered,
           plural(p->recovered, "", "s"),
           (unsigned long long)p->recovered_batches,
           plural(p->recovered_batches, "", "es"),
           /* Not when something else makes it incomplete (QA, session
            * 31: said beside four INCOMPLETE findings). */
           p->incomplete ? "" : " (complete thanks to recovery)");
  }
}

bool stkr_cli_process_damaged(const stkr_process_info *p) {
  return p->damaged_batches || p->unresolved_events || p->status != 0 ||
         p->counters_overflow || p->accounting_mismatches ||
         p->unreadable_segments;
}

static void print_process(verify_run *v, const stkr_process_info *p) {
  bool bad = stkr_cli_process_damaged(p);
  const char *sep = "";

  printf("process %u \"", (unsigned)p->pid);
  stkr_cli_put_escaped(stdout, (const uint8_t *)p->process_name,
                       strlen(p->process_name));
  printf("\" in ");
  stkr_cli_put_escaped(stdout, (const uint8_t *)p->dir, strlen(p->dir));
  printf(": %llu segment%s, %llu batch%s, %llu event%s",
         (unsigned long long)p->segments, plural(p->segments, "", "s"),
         (unsigned long long)p->batches, plural(p->batches, "", "es"),
         (unsigned long long)p->events, plural(p->events, "", "s"));
  if (p->marks || p->external_marks) /* not events: counted apart */
    printf(", %llu mark%s", (unsigned long long)(p->marks + p->external_marks),
           plural(p->marks + p->external_marks, "", "s"));
  fputs(": ", stdout);
  if (!bad) {
    printf(p->incomplete ? "intact, INCOMPLETE" : "intact");
    sep = ", ";
  }
  if (p->status != 0) {
    printf("NOT READ (%s)", p->status == -EPROTONOSUPPORT
                                ? "newer format version"
                                : strerror(-p->status));
    sep = ", ";
  }
  /* What was lost or could not be used, each with its count. */
  const struct {
    uint64_t n;
    const char *before, *noun, *plural, *after;
  } parts[] = {
      {p->damaged_batches, "DAMAGED (", "batch", "es", " lost)"},
      {p->unreadable_segments, "", "segment", "s", " unreadable"},
      {p->unresolved_events, "", "event", "s", " with undefined ids"},
  };
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (parts[i].n == 0) continue;
    printf("%s%s%llu %s%s%s", sep, parts[i].before,
           (unsigned long long)parts[i].n, parts[i].noun,
           plural(parts[i].n, "", parts[i].plural), parts[i].after);
    sep = ", ";
  }
  if (p->counters_overflow || p->accounting_mismatches)
    printf("%sinconsistent counters", sep);
  if (p->live_tail)
    printf(p->live_sessions ? ", still being written"
                            : ", last batch cut off mid-write");
  putchar('\n');
  print_accounting(v, p);
}

/* ---- the completeness line of report, report --html and info ---------- */

typedef struct sumbuf {
  char *p;
  size_t len, cap;
} sumbuf;

static void sum_add(sumbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sum_add(sumbuf *b, const char *fmt, ...) {
  va_list ap;
  int n;

  if (b->len >= b->cap)
    return;
  va_start(ap, fmt);
  n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  if (n > 0)
    b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

static void ring_note_quiet(void *arg, const char *line) {
  (void)arg; /* verify names damaged ring files; this line only counts */
  (void)line;
}

/* (cli.h) QA: report, info, compliance and export totals were short of
 * these without a word, where verify said so. */
uint64_t stkr_cli_reader_rings_left(const stkr_reader *r, uint64_t *events) {
  enum { MAX_DIRS = 64 }; /* distinct directories looked at */
  const char *seen[MAX_DIRS];
  size_t n_seen = 0, i, k, n = stkr_reader_process_count(r);
  uint64_t sessions = 0;

  *events = 0;
  for (i = 0; i < n && n_seen < MAX_DIRS; i++) {
    const char *dir = stkr_reader_process(r, i)->dir;
    uint64_t ev;
    if (dir == NULL)
      continue;
    for (k = 0; k < n_seen && strcmp(seen[k], dir) != 0; k++) {
    }
    if (k < n_seen)
      continue;
    seen[n_seen++] = dir;
    sessions += stkr_cli_rings_left(dir, ring_note_quiet, NULL, &ev, NULL);
    *events += ev;
  }
  return sessions;
}

void stkr_cli_note_left_out(const stkr_reader *r, const char *cmd,
                            const char *where) {
  size_t i, n = stkr_reader_process_count(r);
  uint64_t drops = 0;

  for (i = 0; i < n; i++)
    drops += stkr_reader_process(r, i)->drops;
  if (drops > 0)
    fprintf(stderr,
            "stackrec %s: note: %llu events were dropped by the recorder "
            "(ring full, re-entered, write errors); they are not in %s\n",
            cmd, (unsigned long long)drops, where);
  uint64_t events, sessions = stkr_cli_reader_rings_left(r, &events);
  if (sessions > 0)
    fprintf(stderr,
            "stackrec %s: note: %llu events of %llu dead writer%s are still "
            "in ring files; they are not in %s (run 'stackrec recover' "
            "first)\n",
            cmd, (unsigned long long)events, (unsigned long long)sessions,
            sessions == 1 ? "" : "s", where);
  /* The rest of what verify would call incomplete or damaged (a batch cut
   * off, a missing segment, a session without a clean end, ...): QA,
   * session 22, export, dump and privacy-manifest said nothing of a
   * recording verify called incomplete. */
  char line[1024];
  if (stkr_cli_incomplete_line(r, line, sizeof line) > 0)
    fprintf(stderr, "stackrec %s: note: the recording is %s; %s may lack "
            "what it lost ('stackrec verify' names it)\n",
            cmd, line, where);
}

/* The incomplete and damaged processes of r, summed for the line. */
typedef struct inc_sums {
  stkr_process_info sum; /* the drops by reason */
  uint64_t drops, unclean, live, missing, capdel, capdel_events, recreated;
  uint64_t empty, batches, unaccounted, damaged, bad, unreadable;
  uint64_t unresolved, cut, memory_rings, stacks_lost, misnamed;
  uint64_t marks; /* marks files' problems, each directory's once */
  size_t np;
  uint32_t first_pids[3];
} inc_sums;

/* Was dir among seen[0..*n) (else added, while there is room: past it,
 * each is new)? */
#define DIRS_SEEN 64
static bool dir_seen(const char **seen, size_t *n, const char *dir) {
  for (size_t k = 0; dir != NULL && k < *n; k++)
    if (strcmp(seen[k], dir) == 0) return true;
  if (dir != NULL && *n < DIRS_SEEN) seen[(*n)++] = dir;
  return false;
}

/* @return how many processes were summed into *t. */
static size_t sum_incomplete(const stkr_reader *r, inc_sums *t) {
  size_t i, np, n = stkr_reader_process_count(r), n_seen = 0;
  const char *seen[DIRS_SEEN];

  memset(t, 0, sizeof *t);
  for (i = 0; i < n; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    bool dmg = stkr_cli_process_damaged(p);

    /* Its directory's, not its own: counted once per directory (review,
     * session 39: the largest of two inputs' said one). */
    if (p->marks_damaged && !dir_seen(seen, &n_seen, p->dir))
      t->marks += p->marks_damaged;
    if (!p->incomplete && !dmg)
      continue;
    np = ++t->np;
    t->drops += p->drops;
    t->sum.drops_ring_full += p->drops_ring_full;
    t->sum.drops_reentrant += p->drops_reentrant;
    t->sum.drops_other += p->drops_other;
    t->sum.drops_write_error += p->drops_write_error;
    t->sum.drops_exit += p->drops_exit;
    t->unclean += p->unclean_sessions - p->live_sessions;
    t->live += p->live_sessions;
    t->missing += p->segments_missing;
    t->capdel += stkr_cli_cap_deleted(p);
    t->capdel_events += p->cap_deleted_events;
    t->recreated += p->dir_recreated;
    t->empty += p->empty_segments;
    t->batches += p->missing_batches;
    t->unaccounted += p->unaccounted;
    t->damaged += p->damaged_batches;
    t->unreadable += p->unreadable_segments;
    t->unresolved += p->unresolved_events;
    t->memory_rings += p->memory_rings_lost;
    t->stacks_lost += p->stacks_lost;
    t->misnamed += p->misnamed_segments;
    /* A last batch cut off mid-write with no writer left to finish it
     * (report's "CUT OFF"): its events are not counted (QA, session 26:
     * compliance said "no findings" of a recording whose one batch of
     * 3 000 events was cut, naming only the unclean end). */
    t->cut += p->live_tail && p->live_sessions == 0;
    t->bad += dmg;
    if (np <= 3) t->first_pids[np - 1] = p->pid;
  }
  return t->np;
}

size_t stkr_cli_incomplete_line(const stkr_reader *r, char *buf, size_t len) {
  char reasons[STKR_CLI_DROP_REASONS_MAX];
  char events_buf[48];
  size_t i, n = stkr_reader_process_count(r), np;
  inc_sums t;
  sumbuf b = {buf, 0, len};
  const char *sep = " ";
  uint64_t ring_events, ring_sessions;
  size_t unrec = stkr_reader_unrecorded_count(r);
  const stkr_unrecorded_info *u0 = stkr_reader_unrecorded(r, 0);
  const stkr_running_info *r0 = NULL;
  size_t running = stkr_cli_running_alive(r, &r0);

  if (len == 0)
    return 0;
  ring_sessions = stkr_cli_reader_rings_left(r, &ring_events);
  buf[0] = '\0';
  np = sum_incomplete(r, &t);
  if (np == 0 && ring_sessions == 0 && unrec == 0 && running == 0 &&
      t.marks == 0)
    return 0;
  /* "0 of 14 processes" read as a contradiction when only the tree's
   * processes that recorded nothing made it incomplete (QA, session 31). */
  if (np > 0)
    sum_add(&b, "INCOMPLETE: %zu of %zu process%s", np, n, n == 1 ? "" : "es");
  else
    sum_add(&b, "INCOMPLETE");
  /* Which (QA, session 22: report's line named neither file nor process;
   * verify's per-process lines do). */
  for (i = 0; i < np && i < 3; i++)
    sum_add(&b, "%s%u", i ? ", " : np == 1 ? " (pid " : " (pids ",
            (unsigned)t.first_pids[i]);
  sum_add(&b, "%s:", np > 3 ? ", ...)" : np ? ")" : "");
#define SUM_ITEM(cond, ...)                                                   \
  do {                                                                        \
    if (cond) {                                                               \
      sum_add(&b, "%s", sep);                                                 \
      sum_add(&b, __VA_ARGS__);                                               \
      sep = "; ";                                                             \
    }                                                                         \
  } while (0)
  SUM_ITEM(t.bad, "%llu damaged (%llu batch%s lost", (unsigned long long)t.bad,
           (unsigned long long)t.damaged, t.damaged == 1 ? "" : "es");
  if (t.bad && t.unreadable)
    sum_add(&b, ", %llu segment%s unreadable", (unsigned long long)t.unreadable,
            t.unreadable == 1 ? "" : "s");
  /* Events read whose site, thread or stack was defined in what was lost:
   * no rule or filter on sites can select them. */
  if (t.bad && t.unresolved)
    sum_add(&b, ", %llu event%s unresolved", (unsigned long long)t.unresolved,
            t.unresolved == 1 ? "" : "s");
  if (t.bad)
    sum_add(&b, ")");
  /* A mark lost with them (consent.granted) changes what the marks say
   * (QA, session 39: verify DAMAGED, report and the HTML page clean). */
  SUM_ITEM(t.marks, "DAMAGED marks file: %llu problem%s reading it (named "
           "on stderr; a mark may be lost)", (unsigned long long)t.marks,
           t.marks == 1 ? "" : "s");
  SUM_ITEM(t.drops, "%llu event%s dropped (%s)", (unsigned long long)t.drops,
           t.drops == 1 ? "" : "s",
           stkr_cli_drop_reasons(&t.sum, reasons, sizeof reasons));
  SUM_ITEM(t.live, "%llu session%s still recording (the process is alive)",
           (unsigned long long)t.live, t.live == 1 ? "" : "s");
  SUM_ITEM(t.unclean, "%llu session%s without a clean end (killed, crashed "
           "or _exit)", (unsigned long long)t.unclean,
           t.unclean == 1 ? "" : "s");
  SUM_ITEM(t.cut, "%llu last batch%s cut off mid-write, not counted",
           (unsigned long long)t.cut, t.cut == 1 ? "" : "es");
  SUM_ITEM(t.unaccounted,
           "%llu event%s unaccounted for (never written, or in missing "
           "segments)",
           (unsigned long long)t.unaccounted, t.unaccounted == 1 ? "" : "s");
  SUM_ITEM(t.memory_rings, "%llu thread%s recording into memory when "
           "the process died (what was not flushed is lost, how much is "
           "not known)", (unsigned long long)t.memory_rings,
           t.memory_rings == 1 ? "" : "s");
  SUM_ITEM(t.stacks_lost, "%llu event%s recovered without %s stack (sent "
           "once, in a batch that is gone)", (unsigned long long)t.stacks_lost,
           t.stacks_lost == 1 ? "" : "s", t.stacks_lost == 1 ? "its" : "their");
  SUM_ITEM(t.missing, "%llu segment%s missing", (unsigned long long)t.missing,
           t.missing == 1 ? "" : "s");
  SUM_ITEM(t.capdel, "%llu segment%s deleted by the disk cap%s",
           (unsigned long long)t.capdel, t.capdel == 1 ? "" : "s",
           stkr_cli_cap_events(t.capdel_events, events_buf, sizeof events_buf));
  SUM_ITEM(t.recreated, "recording directory recreated %llu time%s",
           (unsigned long long)t.recreated, t.recreated == 1 ? "" : "s");
  /* A copy or a renamed file (QA, session 47: the line ended at its
   * colon, naming nothing, when this was all there was). */
  SUM_ITEM(t.misnamed, "%llu segment%s named for another process or "
           "number", (unsigned long long)t.misnamed,
           t.misnamed == 1 ? "" : "s");
  SUM_ITEM(t.empty, "%llu segment%s without any batch",
           (unsigned long long)t.empty, t.empty == 1 ? "" : "s");
  SUM_ITEM(t.batches, "%llu batch%s missing", (unsigned long long)t.batches,
           t.batches == 1 ? "" : "es");
  SUM_ITEM(ring_sessions, "%llu event%s of %llu dead writer%s still in ring "
           "files, not read (run 'stackrec recover')",
           (unsigned long long)ring_events, ring_events == 1 ? "" : "s",
           (unsigned long long)ring_sessions, ring_sessions == 1 ? "" : "s");
  SUM_ITEM(unrec, "%zu process%s of the tree recorded nothing, unable to "
           "(process %u (%s): %s)", unrec, unrec == 1 ? "" : "es",
           (unsigned)u0->pid, u0->name, u0->reason);
  SUM_ITEM(running, "%zu process%s of the tree still running since record "
           "ended, which may record more (process %u (%s))", running,
           running == 1 ? "" : "es", (unsigned)r0->pid, r0->name);
#undef SUM_ITEM
  return b.len;
}

static void ring_message(void *arg, const char *line) {
  verify_run *v = arg;
  v->problems++;
  stkr_cli_put_line(stdout, "damaged: ", line, "");
}

/* Ring files that writers which died left behind (crash-proof rings): the
 * events in them were accepted but are in no segment until `stackrec
 * recover` (or `record`, or the next stkr_init) writes them out. Checked
 * without writing anything (a dry run works on read-only copies). */
static void check_rings(verify_run *v, const char *path) {
  uint64_t events, drops,
      sessions = stkr_cli_rings_left(path, ring_message, v, &events, &drops);
  char line[3 * PATH_MAX];

  /* A `stackrec record` killed before its end leaves its lock: its end's
   * work (recovery, symbolization) was not done, which nothing said (QA,
   * session 41). A note: what was lost is said by its own check. */
  if (stkr_recover_has_lock_file(path) && !stkr_recover_record_running(path)) {
    snprintf(line, sizeof line, "%s: the `stackrec record` that wrote it "
             "ended before finishing (killed? its lock, .stackrec-cache/"
             "record.lock, is left): no recovery or symbolization at its "
             "end; 'stackrec recover %s' clears this", path, path);
    stkr_cli_put_line(stdout, "note: ", line, "");
  }
  if (sessions == 0)
    return;
  /* Their drops no written batch counts (a full disk's failed writes):
   * the accounting above does not hold them yet (QA, session 39: 5 699 of
   * 8 000 events lost to write errors, and verify said "adds up"). */
  /* Lines that name path twice: made whole, then written escaped (a
   * directory's name may hold a terminal's escape sequence; QA, session
   * 40). */
  if (drops > 0) {
    snprintf(line, sizeof line, "%s: %llu event%s that dead writers dropped "
             "(ring full, failed writes, calls refused while they ended) are "
             "counted only in their ring and session files: the accounting "
             "above leaves them out until 'stackrec recover %s'", path, (unsigned long long)drops,
             plural(drops, "", "s"), path);
    stkr_cli_put_line(stdout, "incomplete: ", line, "");
  }
  v->incomplete++;
  if (events == 0) /* only the final counters to write (QA: "0 events") */
    snprintf(line, sizeof line, "%s: %llu dead writer%s left ring files that "
             "hold no event, only what ends %s session: run 'stackrec "
             "recover %s'", path, (unsigned long long)sessions,
             plural(sessions, "", "s"), sessions == 1 ? "its" : "their", path);
  else
    snprintf(line, sizeof line, "%s: %llu event%s of %llu dead writer%s still "
             "in ring files, in no segment yet: run 'stackrec recover %s'",
             path, (unsigned long long)events, plural(events, "", "s"),
             (unsigned long long)sessions, plural(sessions, "", "s"), path);
  stkr_cli_put_line(stdout, "incomplete: ", line, "");
}

/* The processes that recorded nothing because they could not, as record
 * named them in the marks file: their events are in no file. */
static void check_unrecorded(verify_run *v, const stkr_reader *r) {
  enum { SHOWN = 20 };
  size_t i, n = stkr_reader_unrecorded_count(r);

  for (i = 0; i < n && i < SHOWN; i++) {
    const stkr_unrecorded_info *u = stkr_reader_unrecorded(r, i);
    printf("incomplete: process %u (%s) recorded nothing, unable to: %s "
           "(named in %s)\n", (unsigned)u->pid, u->name, u->reason, u->path);
  }
  if (n > SHOWN)
    printf("incomplete: %zu more processes recorded nothing, unable to\n",
           n - SHOWN);
  v->incomplete += n;
}

size_t stkr_cli_running_alive(const stkr_reader *r,
                              const stkr_running_info **first) {
  size_t i, n = 0;

  for (i = 0; i < stkr_reader_running_count(r); i++) {
    const stkr_running_info *u = stkr_reader_running(r, i);
    if (!u->alive) continue;
    if (n++ == 0 && first != NULL) *first = u;
  }
  return n;
}

/* The processes of the tree that outlived record (its "r1" lines): alive
 * now, they may record more, so the recording is not complete yet (QA,
 * session 21: verify said intact, exit 0, and 3 s later the directory
 * held 3 processes and 5 events, not 2 and 1). Ended, they are not named:
 * what they recorded is in the directory like any process's. */
static void check_running(verify_run *v, const stkr_reader *r) {
  enum { SHOWN = 20 };
  size_t i, alive = 0, noted = 0, n = stkr_reader_running_count(r);

  for (i = 0; i < n; i++) {
    const stkr_running_info *u = stkr_reader_running(r, i);
    if (u->alive && alive++ < SHOWN)
      printf("incomplete: process %u (%s) of the recorded tree is still "
             "running since stackrec record ended: it may record more "
             "(named in %s)\n", (unsigned)u->pid, u->name, u->path);
    else if (u->other_boot && noted++ < SHOWN)
      printf("note: process %u (%s) was still running when stackrec record "
             "ended; whether it still is cannot be told here (another boot "
             "or machine, or its /proc entry unreadable; named in %s)\n",
             (unsigned)u->pid, u->name, u->path);
  }
  if (alive > SHOWN)
    printf("incomplete: %zu more processes of the recorded tree are still "
           "running\n", alive - SHOWN);
  v->incomplete += alive;
}

int stkr_cli_verify(int argc, char **argv) {
  stkr_cli_getopt_state gopt = {.cmd = "verify", .help = {verify_help},
                                .operands = "DIR or FILE"};
  verify_run v;
  stkr_reader_opts opts = {.warn = on_warning, .warn_arg = &v,
                           .lazy_frames = true, .incomplete = on_warning,
                           .incomplete_arg = &v};
  stkr_reader *r;
  uint64_t events, segments = 0;
  size_t i, n;
  int rc, status;

  /* No option but --help: anything else ends with a usage error. */
  if (stkr_cli_getopt(&gopt, argc, argv) == STKR_CLI_OPT_EXIT)
    return gopt.status;

  memset(&v, 0, sizeof v);
  if ((status = stkr_cli_open_opts("verify", &opts, argv + optind,
                                   argc - optind, &r)) != 0)
    return status;
  rc = stkr_cli_read_all(r, "verify", "checked", check_event, &v, &events);
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
  for (i = (size_t)optind; i < (size_t)argc; i++)
    check_rings(&v, argv[i]);
  check_unrecorded(&v, r);
  check_running(&v, r);
  if (n == 0 && stkr_cli_inputs_empty() && v.incomplete != 0) {
    printf("INCOMPLETE: 0 processes recorded anything, %llu finding%s\n",
           (unsigned long long)v.incomplete, plural(v.incomplete, "", "s"));
  } else if (n == 0 && stkr_cli_inputs_empty()) {
    /* record's directory when no process made a watched call: complete. */
    printf("intact: 0 processes, an empty recording (no process made a "
           "watched call)\n");
  } else if (n == 0) {
    v.problems++;
    printf("DAMAGED: no recording found\n");
  } else if (v.problems == 0 && v.incomplete != 0) {
    uint64_t np = 0;

    for (i = 0; i < n; i++)
      np += stkr_reader_process(r, i)->incomplete;
    printf("INCOMPLETE: %llu finding%s in %llu of %zu process%s, %llu "
           "segment%s, %llu event%s read\n",
           (unsigned long long)v.incomplete, plural(v.incomplete, "", "s"),
           (unsigned long long)np, n, n == 1 ? "" : "es",
           (unsigned long long)segments, plural(segments, "", "s"),
           (unsigned long long)events, plural(events, "", "s"));
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
  status = v.problems     ? STKR_CLI_DATA_LOST
           : v.incomplete ? STKR_CLI_INCOMPLETE
                          : STKR_CLI_OK;
  if (stkr_cli_flush("verify") != 0)
    status = STKR_CLI_DATA_LOST;
  stkr_reader_free(r);
  return status;
}
