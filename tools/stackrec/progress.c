/*
 * progress.c: a progress line on stderr for long reads (see cli.h).
 *
 * Only when stderr is a terminal (a log file or a pipe must not fill with
 * carriage returns), and only once the work has taken about a second, so
 * quick commands print nothing at all. The line is rewritten in place at
 * most four times a second and erased when the work is done.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/stackrec/cli.h"

/* The progress line on the terminal now, if any: a warning erases it
 * first (stkr_cli_progress_pause), so the two never share a line. */
static stkr_cli_progress *g_shown;

static double now_s(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void stkr_cli_progress_init(stkr_cli_progress *p, const char *cmd) {
  memset(p, 0, sizeof *p);
  p->cmd = cmd;
  p->tty = isatty(STDERR_FILENO) == 1;
  p->start = p->last = now_s();
}

void stkr_cli_progress_update(stkr_cli_progress *p, uint64_t events,
                              const char *what) {
  double t;

  if (!p->tty)
    return;
  t = now_s();
  if (t - p->start < 1.0 || t - p->last < 0.25)
    return;
  p->last = t;
  p->shown = true;
  g_shown = p;
  fprintf(stderr, "\rstackrec %s: %.1f M events %s (%.0f s)\033[K", p->cmd,
          (double)events / 1e6, what ? what : "read", t - p->start);
  fflush(stderr);
}

void stkr_cli_progress_cb(uint64_t events, void *arg) {
  stkr_cli_progress_update(arg, events, NULL);
}

void stkr_cli_progress_done(stkr_cli_progress *p) {
  if (p->shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  p->shown = false;
  if (g_shown == p)
    g_shown = NULL;
}

void stkr_cli_progress_pause(void) {
  if (g_shown != NULL)
    stkr_cli_progress_done(g_shown);
}

int stkr_cli_read_all(stkr_reader *r, const char *cmd, const char *what,
                      void (*on_event)(const stkr_event_view *ev, void *arg),
                      void *arg, uint64_t *events) {
  stkr_cli_progress prog;
  stkr_event_view ev;
  uint64_t n = 0, marks = 0;
  int rc;

  stkr_cli_progress_init(&prog, cmd);
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    if (on_event != NULL)
      on_event(&ev, arg);
    marks += ev.is_mark;
    if ((++n & 0xFFFFF) == 0)
      stkr_cli_progress_update(&prog, n, what);
  }
  stkr_cli_progress_done(&prog);
  if (events != NULL) /* marks are not events (QA: verify counted them) */
    *events = n - marks;
  return rc;
}
