/*
 * mark.c: `stackrec mark DIR NAME [PAYLOAD]`: a test harness that drives a
 * program under `stackrec record -o DIR` says "the user consented now"
 * (consent.granted), "the app went to the background" (app.background),
 * ... The mark is one line appended to DIR's marks file
 * (proto/stkr_reader.h, stkr_mark_append), time-stamped with the clock the
 * recorder stamps events with; every reader merges it into every process of
 * DIR (see "Marks" in stkr_reader.h). It works while the program records
 * and after it ended, and never touches the program or its files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/stkr_reader.h"
#include "tools/stackrec/cli.h"

static const char usage[] =
    "usage: stackrec mark DIR NAME [PAYLOAD]\n"
    "\n"
    "Set mark NAME (1 to 64 of [A-Za-z0-9._-], e.g. consent.granted,\n"
    "consent.revoked, app.background, app.foreground, screen.Checkout) now\n"
    "in the recording in DIR, with an optional PAYLOAD (up to 4096 bytes).\n"
    "For a harness driving a program under 'stackrec record -o DIR'; DIR\n"
    "must exist (record creates it before the program starts).\n"
    "\n"
    "Ordering: a mark is ordered against events by the recording's clock\n"
    "(CLOCK_MONOTONIC, read here when the mark is set: one clock for every\n"
    "process on the machine; a process in a time namespace gets the mark\n"
    "moved by the namespaces' offsets, which the line records). An event\n"
    "recorded after this command started is after the mark; one recorded\n"
    "before it returned may be either side.\n"
    "Such a mark belongs to every process recorded in DIR: readers hand it\n"
    "to each of them (dump, export --format jsonl: kind \"mark\").\n"
    "\n"
    "Exit status: 0 set; 1 the marks file could not be written; 2 usage\n"
    "(invalid NAME, PAYLOAD too long); 3 DIR is not a directory that can\n"
    "be written.\n";

int stkr_cli_mark(int argc, char **argv) {
  const char *dir, *name, *payload = NULL;
  struct stat st;
  int i = 1, err;

  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return stkr_cli_flush("mark");
    }
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    return stkr_cli_usage_error("mark", "unknown option '%s'", argv[i]);
  }
  if (argc - i < 2)
    return stkr_cli_usage_error("mark", "missing %s",
                                argc - i < 1 ? "DIR and NAME" : "NAME");
  if (argc - i > 3)
    return stkr_cli_usage_error("mark", "too many arguments (from '%s')",
                                argv[i + 3]);
  dir = argv[i];
  name = argv[i + 1];
  if (argc - i == 3)
    payload = argv[i + 2];
  if (stat(dir, &st) != 0) {
    fprintf(stderr, "stackrec mark: %s: %s\n", dir, strerror(errno));
    return STKR_CLI_NO_INPUT;
  }
  if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "stackrec mark: %s: not a directory\n", dir);
    return STKR_CLI_NO_INPUT;
  }
  err = stkr_mark_append(dir, name, payload, payload ? strlen(payload) : 0);
  if (err == -EINVAL) {
    if (payload != NULL && strlen(payload) > STKR_MARKS_MAX_PAYLOAD)
      return stkr_cli_usage_error("mark", "PAYLOAD is %zu bytes (at most %d)",
                                  strlen(payload), STKR_MARKS_MAX_PAYLOAD);
    return stkr_cli_usage_error(
        "mark", "invalid mark name '%s' (1 to 64 of [A-Za-z0-9._-])", name);
  }
  if (err != 0) {
    fprintf(stderr, "stackrec mark: %s/%s: %s\n", dir, STKR_MARKS_FILE,
            err == -ENXIO ? "not a regular file" : strerror(-err));
    return err == -EACCES || err == -EPERM || err == -EROFS ||
                   err == -ENOENT || err == -ENOTDIR
               ? STKR_CLI_NO_INPUT
               : STKR_CLI_DATA_LOST;
  }
  return STKR_CLI_OK;
}
