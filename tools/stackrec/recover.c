/*
 * recover.c: `stackrec recover [--dry-run] DIR...`: write out the ring files
 * that recording processes left behind when they died (SIGKILL, a crash, the
 * OS killing them), see proto/stkr_recover.h. `stackrec record` and the next
 * stkr_init() on a directory do the same on their own; this command is for
 * recordings pulled off a device, or a directory whose program was killed
 * outside `record`.
 *
 * Exit status: 0 nothing left to recover (all recovered, or nothing found;
 * sessions whose writer still runs are left alone and mentioned), 4 with
 * --dry-run when dead sessions wait for recovery (the recording is intact
 * but incomplete until then), 1 when a session could not be written out or
 * ring records were damaged (lost), 2 usage, 3 a DIR cannot be opened.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/stkr_recover.h"
#include "tools/stackrec/cli.h"

#ifndef STKR_CLI_INCOMPLETE
#define STKR_CLI_INCOMPLETE 4 /* intact but incomplete (see the brief) */
#endif

static const char usage[] =
    "usage: stackrec recover [--dry-run] DIR...\n"
    "\n"
    "Write out the events that recording processes which died (SIGKILL, a\n"
    "crash, the OS killing them) left in their ring files in DIR, into a new\n"
    "segment per process marked 'recovered', then delete those ring files.\n"
    "Events already in a segment are not written twice. Ring files of\n"
    "processes that still run are left alone. What a 'stackrec record'\n"
    "killed at its end or its start left (temporary files of its\n"
    "symbolization, its probe of DIR, its lock) is removed too, unless a\n"
    "record still writes into DIR.\n"
    "\n"
    "  --dry-run   count what would be recovered; write and delete nothing\n"
    "\n"
    "Exit status: 0 nothing left to recover; 4 (--dry-run) dead processes'\n"
    "ring files wait for recovery; 1 a process's events could not be written\n"
    "out, or ring records were damaged; 2 usage; 3 a DIR cannot be opened.\n";


/* What a `record` killed at its end leaves beside the recording: the
 * temporary files of its in-place symbolization (each a whole copy of a
 * segment; the segments themselves stay whole, unsymbolized: symbolize.c)
 * and a stale record.lock. Removed only when no record holds dir (its
 * lock: one still running is left alone); a dry run counts them. The
 * marks file's 64 KiB reserve stays: giving it back (a truncation to its
 * size) could cut a line `stackrec mark` appends meanwhile (review).
 * @return how many files (and their bytes in *bytes). */
static uint64_t record_leftovers(const char *dir, bool dry, uint64_t *bytes) {
  int lock = dry ? -1 : stkr_recover_lock_dir(dir);
  uint64_t n = 0;
  struct dirent *e;
  DIR *d;

  *bytes = 0;
  if (lock == -ELOOP || lock == -ENOTDIR) {
    char line[PATH_MAX + 160];
    snprintf(line, sizeof line, "%s/.stackrec-cache is not a directory of "
             "its own (a link?): left alone, and nothing made or removed "
             "through it", dir);
    stkr_cli_put_line(stderr, "stackrec recover: warning: ", line, "");
  }
  /* A dry run asks without making or changing anything. */
  if ((dry ? stkr_recover_record_running(dir) : lock < 0) ||
      (d = opendir(dir)) == NULL) {
    stkr_recover_unlock_dir(dir, lock);
    return 0;
  }
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    if ((!stkr_cli_symbolize_is_temp(e->d_name) &&
         strncmp(e->d_name, STKR_CLI_PROBE_PREFIX,
                 sizeof STKR_CLI_PROBE_PREFIX - 1) != 0) ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) ||
        (!dry && unlinkat(dirfd(d), e->d_name, 0) != 0))
      continue;
    n++;
    *bytes += (uint64_t)st.st_size;
  }
  closedir(d);
  /* The lock's file goes with it, and a stale one a killed record left. */
  stkr_recover_unlock_dir(dir, lock);
  return n;
}

/* Recovery's messages name files of the recording, whose names are
 * anyone's: escaped, never a terminal's control sequence (QA, session
 * 40). */
static void note(void *arg, const char *line) {
  (void)arg;
  stkr_cli_put_line(stderr, "stackrec recover: ", line, "");
}

int stkr_cli_recover(int argc, char **argv) {
  stkr_recover_opts o = {.message = note};
  int i, status = STKR_CLI_OK, ndirs = 0;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return stkr_cli_flush("recover");
    }
    if (strcmp(argv[i], "--dry-run") == 0)
      o.dry_run = true;
    else if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (argv[i][0] == '-')
      return stkr_cli_usage_error("recover", "unknown option '%s'", argv[i]);
    else
      break;
  }
  if (i >= argc)
    return stkr_cli_usage_error("recover", "missing DIR");
  for (; i < argc; i++, ndirs++) {
    stkr_recover_stats st;
    uint64_t left, left_bytes;
    int err = stkr_recover_dir(argv[i], &o, &st);
    if (err < 0) {
      char line[PATH_MAX + 128];
      snprintf(line, sizeof line, "cannot open %s: %s", argv[i],
               strerror(-err));
      stkr_cli_put_line(stderr, "stackrec recover: ", line, "");
      if (status == STKR_CLI_OK || status == STKR_CLI_INCOMPLETE)
        status = STKR_CLI_NO_INPUT;
      continue;
    }
    stkr_cli_put_text(stdout, (const uint8_t *)argv[i], strlen(argv[i]));
    printf(": %s %" PRIu64 " events of %" PRIu64 " dead process session%s "
           "(%" PRIu64 " ring files, %" PRIu64 " already written skipped)",
           o.dry_run ? "would recover" : "recovered", st.events,
           st.sessions_recovered, st.sessions_recovered == 1 ? "" : "s",
           st.rings, st.duplicates);
    if (!o.dry_run) /* a dry run writes none: "into 0 segments" misled */
      printf(" into %" PRIu64 " segment%s", st.segments_written,
             st.segments_written == 1 ? "" : "s");
    if (st.drops_found)
      printf("; %" PRIu64 " event%s they dropped after their last batch %s "
             "counted", st.drops_found, st.drops_found == 1 ? "" : "s",
             o.dry_run ? "would be" : "now");
    if (st.empty_rings_removed)
      printf("; %" PRIu64 " empty ring file%s of ended sessions %s",
             st.empty_rings_removed, st.empty_rings_removed == 1 ? "" : "s",
             o.dry_run ? "would be removed" : "removed");
    if (st.sessions_ended_clean)
      printf("; the files of %" PRIu64 " session%s that ended with "
             "everything written (not allowed to remove them: privileges "
             "dropped?) %s", st.sessions_ended_clean,
             st.sessions_ended_clean == 1 ? "" : "s",
             o.dry_run ? "would be removed" : "removed");
    if (st.sessions_live)
      printf("; %" PRIu64 " session%s still recording, left alone",
             st.sessions_live, st.sessions_live == 1 ? "" : "s");
    if ((left = record_leftovers(argv[i], o.dry_run, &left_bytes)) != 0)
      printf("; %" PRIu64 " temporary file%s (%" PRIu64 " bytes) of a "
             "'stackrec record' killed while it symbolized or started %s",
             left,
             left == 1 ? "" : "s", left_bytes,
             o.dry_run ? "would be removed" : "removed");
    if (st.sessions_failed || st.damaged_rings || st.orphans)
      printf("; %" PRIu64 " not recovered, %" PRIu64 " damaged ring%s (%" PRIu64
             " bytes lost), %" PRIu64 " unusable file%s",
             st.sessions_failed, st.damaged_rings,
             st.damaged_rings == 1 ? "" : "s", st.lost_bytes, st.orphans,
             st.orphans == 1 ? "" : "s");
    printf("\n");
    if (st.sessions_failed || st.damaged_rings || st.orphans)
      status = status == STKR_CLI_NO_INPUT ? status : STKR_CLI_DATA_LOST;
    else if (o.dry_run && st.sessions_recovered && status == STKR_CLI_OK)
      status = STKR_CLI_INCOMPLETE;
  }
  if (stkr_cli_flush("recover") != 0) return STKR_CLI_DATA_LOST;
  return status;
}

static void note_record(void *arg, const char *line) {
  if (!*(const bool *)arg)
    stkr_cli_put_line(stderr, "stackrec record: ", line, "");
}

void stkr_cli_recover_after_record(const char *dir, bool quiet) {
  stkr_recover_opts o = {.message = note_record, .message_arg = &quiet};
  stkr_recover_stats st;

  int err = stkr_recover_remove_cache(dir);

  if (err < 0 && !quiet)
    fprintf(stderr, "stackrec record: cannot remove %s/.stackrec-cache (the "
            "unwind tables its processes shared): %s\n", dir, strerror(-err));
  if (stkr_recover_dir(dir, &o, &st) < 0 || quiet)
    return;
  if (st.events > 0)
    fprintf(stderr, "stackrec record: recovered %" PRIu64 " events from the "
            "ring files of %" PRIu64 " process session%s that ended without "
            "writing them\n", st.events, st.sessions_recovered,
            st.sessions_recovered == 1 ? "" : "s");
  if (st.drops_found > 0)
    /* Not only at an end: a process that lost its files (its descriptors
     * taken over) drops into its rings for the rest of its run (QA,
     * session 47: 49 122 "after the last batch" of a run that wrote
     * none). */
    fprintf(stderr, "stackrec record: %" PRIu64 " event%s dropped that no "
            "batch of their process counted (after its last batch: calls "
            "made while it ended, drops of one that died, or of one that "
            "could no longer write its files), now counted (see 'stackrec "
            "verify')\n", st.drops_found, st.drops_found == 1 ? "" : "s");
}

uint64_t stkr_cli_rings_left(const char *path,
                             void (*message)(void *arg, const char *line),
                             void *arg, uint64_t *events, uint64_t *drops) {
  stkr_recover_opts o = {.dry_run = true, .message = message,
                         .message_arg = arg};
  stkr_recover_stats st;
  struct stat sb;

  *events = 0;
  if (drops != NULL)
    *drops = 0;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
      stkr_recover_dir(path, &o, &st) != 0)
    return 0;
  *events = st.events;
  if (drops != NULL)
    *drops = st.drops_found;
  return st.sessions_recovered;
}

/* A dry run's note, for rings_left_said: "stackrec CMD: " and the line,
 * escaped. */
static void note_for(void *arg, const char *line) {
  char prefix[48];
  snprintf(prefix, sizeof prefix, "stackrec %s: ", (const char *)arg);
  stkr_cli_put_line(stderr, prefix, line, "");
}

bool stkr_cli_rings_left_said(const char *cmd, const char *dir,
                              const char *where) {
  uint64_t events = 0, sessions = 0;
  stkr_recover_opts o = {.dry_run = true, .message = note_for,
                         .message_arg = (void *)cmd};
  stkr_recover_stats st;
  struct stat sb;

  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
      stkr_recover_dir(dir, &o, &st) != 0)
    return false;
  /* Ring files that no recovery can use (no session file, damaged: each
   * named above by the dry run) are data lost too (QA, session 40: merge
   * and symbolize said nothing of them, exit 0). */
  const bool unread = st.orphans != 0 || st.sessions_failed != 0;
  if (unread) /* (some may be read by a later recovery: said above) */
    fprintf(stderr, "stackrec %s: ring files in the directory that no "
            "recovery can read now (named above): their events are not %s\n",
            cmd, where);
  sessions = st.sessions_recovered;
  events = st.events;
  if (sessions != 0)
    fprintf(stderr, "stackrec %s: %s: %llu event%s of %llu dead writer%s "
            "still in ring files, not %s: run 'stackrec recover %s' and %s "
            "again\n", cmd, dir, (unsigned long long)events,
            events == 1 ? "" : "s", (unsigned long long)sessions,
            sessions == 1 ? "" : "s", where, dir, cmd);
  return sessions != 0 || unread;
}
