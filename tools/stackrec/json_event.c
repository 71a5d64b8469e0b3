/*
 * json_event.c: one event as one JSON object per line, the format shared by
 * `stackrec dump --json` and `stackrec export --format jsonl` (so a query
 * written for one reads the other).
 */
#include <stdio.h>
#include <string.h>

#include "tools/stackrec/cli.h"

static void put_frames(FILE *f, const stkr_frame *fr, size_t n) {
  size_t i;

  fputs(",\"frames\":[", f);
  for (i = 0; i < n; i++) {
    fprintf(f, "%s{\"pc\":\"0x%llx\"", i ? "," : "",
            (unsigned long long)(fr[i].pc & ~STKR_PC_ASYNC));
    stkr_cli_put_json_member(f, ",", "function", fr[i].function);
    stkr_cli_put_json_member(f, ",", "file", fr[i].file);
    fprintf(f, ",\"line\":%u,\"column\":%u", (unsigned)fr[i].line,
            (unsigned)fr[i].column);
    stkr_cli_put_json_member(f, ",", "image", fr[i].image);
    fprintf(f, ",\"offset\":\"0x%llx\",\"inlined\":%s,\"app\":%s",
            (unsigned long long)fr[i].offset,
            fr[i].inlined ? "true" : "false", fr[i].is_app ? "true" : "false");
    /* Only on async frames: earlier consumers see no new key elsewhere. */
    fputs(fr[i].async ? ",\"async\":true}" : "}", f);
  }
  putc(']', f);
}

/* The PCs shown in "stack": all of them, or with --app-only those whose
 * function (the frame that is not inlined) is the app's; when no frame at
 * all is the app's, the innermost PC alone, like the frames. */
static void put_stack(FILE *f, const stkr_event_view *ev, bool app_only) {
  size_t i, fi = 0, shown = 0, apps = 0;
  long async_from = -1;

  if (app_only)
    for (i = 0; i < ev->n_frames; i++)
      apps += ev->frames[i].is_app;
  fputs(",\"stack\":[", f);
  for (i = 0; i < ev->n_pcs; i++) {
    bool keep = true;
    if (app_only && ev->n_frames > 0) {
      bool app = false;
      while (fi < ev->n_frames && ev->frames[fi].inlined)
        fi++;
      if (fi < ev->n_frames)
        app = ev->frames[fi++].is_app;
      keep = apps > 0 ? app : i == 0;
    }
    /* Addresses only: an async resume PC's bit 63 (STKR_PC_ASYNC) is the
     * recording's marker; "async_from" below says where they begin. */
    if (keep) {
      if ((ev->pcs[i] & STKR_PC_ASYNC) && async_from < 0)
        async_from = (long)shown;
      fprintf(f, "%s\"0x%llx\"", shown++ ? "," : "",
              (unsigned long long)(ev->pcs[i] & ~STKR_PC_ASYNC));
    }
  }
  putc(']', f);
  /* The index in "stack" where the Swift async chain (awaiting callers,
   * resume functions) begins; absent when the stack has none. */
  if (async_from >= 0)
    fprintf(f, ",\"async_from\":%ld", async_from);
}

const char *stkr_cli_shared_pid_dir(const stkr_reader *r, size_t process) {
  const stkr_process_info *p = stkr_reader_process(r, process), *q;
  if (p == NULL)
    return NULL;
  if ((process > 0 && (q = stkr_reader_process(r, process - 1)) != NULL &&
       q->pid == p->pid) ||
      ((q = stkr_reader_process(r, process + 1)) != NULL && q->pid == p->pid))
    return p->dir;
  return NULL;
}

void stkr_cli_put_event_json(FILE *f, const stkr_event_view *ev,
                             bool app_only, const stkr_frame *fr,
                             size_t n_fr, const stkr_reader *r) {
  const char *rec = r != NULL ? stkr_cli_shared_pid_dir(r, ev->process) : NULL;

  fprintf(f, "{\"ts_ns\":%llu,\"pid\":%u,", (unsigned long long)ev->ts_ns,
          (unsigned)ev->pid);
  /* Only when another input has the pid: earlier consumers see no new key
   * elsewhere. */
  if (rec != NULL) {
    stkr_cli_put_json_member(f, "", "recording", rec);
    putc(',', f);
  }
  fputs("\"site\":", f);
  stkr_cli_put_json_str(f, ev->site);
  /* Only on marks ("site" is then the mark's name): earlier consumers see
   * no new key on events. "external": set with `stackrec mark`. */
  if (ev->is_mark)
    fprintf(f, ",\"kind\":\"mark\",\"external\":%s",
            ev->thread_id == 0 && ev->n_pcs == 0 && !ev->unresolved ? "true"
                                                                   : "false");
  fprintf(f, ",\"tid\":%llu", (unsigned long long)ev->tid);
  stkr_cli_put_json_member(f, ",", "thread", ev->thread_name);
  fputs(",\"payload\":", f);
  if (ev->payload_len == 0 && !ev->payload_truncated)
    fputs("null", f);
  else
    stkr_cli_put_json_bytes(f, ev->payload, ev->payload_len);
  fprintf(f, ",\"payload_truncated\":%s",
          ev->payload_truncated ? "true" : "false");
  put_stack(f, ev, app_only);
  fprintf(f, ",\"stack_truncated\":%s",
          ev->stack_truncated ? "true" : "false");
  if (ev->n_frames > 0)
    put_frames(f, fr, n_fr);
  fputs("}\n", f);
}

