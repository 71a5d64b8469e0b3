/*
 * export_jsonl.c: `stackrec export --format jsonl`: one JSON object per
 * event, for jq, DuckDB, ClickHouse.
 *
 * The objects have exactly the keys and value forms of `stackrec dump
 * --json` (ts_ns, pid, site, tid, thread, payload, payload_truncated,
 * stack, stack_truncated, and frames when the stack was symbolized), so a
 * query written for one reads the other; export adds the filters, -o and
 * the --app-only rule of the other formats (a stack without app frames
 * keeps its innermost one). Streaming: nothing is kept between events.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/export.h"

int stkr__export_jsonl(stkr__export *x) {
  stkr__filter filt;
  stkr_event_view ev;
  stkr_frame *scratch = NULL;
  size_t scratch_cap = 0;
  uint64_t read = 0;
  int rc, err = 0;

  if (stkr__filter_init(&filt, &x->filt) != 0)
    return -EINVAL;
  while ((rc = stkr_reader_next(x->r, &ev)) == 1) {
    const stkr_frame *fr;
    size_t n_fr;

    if ((++read & 0xFFFFF) == 0)
      stkr__progress(read, x);
    if ((err = stkr__filter_pass(&filt, &ev)) <= 0) {
      if (err < 0)
        break;
      continue;
    }
    err = stkr__app_frames(ev.frames, ev.n_frames, x->filt.app_only,
                           &scratch, &scratch_cap, &fr, &n_fr);
    if (err != 0)
      break;
    stkr_cli_put_event_json(x->out, &ev, x->filt.app_only, fr, n_fr, x->r);
    x->events_out += !ev.is_mark; /* a mark is printed, kind "mark" */
  }
  if (err == 0 && rc < 0)
    err = rc;
  free(scratch);
  stkr__filter_free(&filt);
  return err;
}
