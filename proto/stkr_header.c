/*
 * stkr_header.c: what a batch's Header tells the reader of its process
 * (stkr_process_info): its name (a chain across exec), what it watched,
 * when it started, its unwind tables, and the session's accounting
 * (stkr__acct_header). Split from stkr_batch.c.
 */
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "proto/stkr__reader.h"

/* A pid that exec'd another program has a session per image: its name
 * becomes the chain, "bash > python3" (QA: a whole python3 run showed as
 * "bash", the name of the image it was exec'd from). Bounded: a hostile
 * file's headers cannot grow it past STKR__NAME_CHAIN_MAX. Cosmetic on
 * failure (out of memory: the name stays). */
#define STKR__NAME_CHAIN_MAX 256
static void stkr__name_chain_add(stkr__stream *st, const char *next) {
  const char *cur = st->process_name, *last;
  size_t cur_len, next_len;
  char *grown;

  if (next == NULL || next[0] == '\0' || cur == NULL)
    return;
  last = strrchr(cur, '>');
  last = last != NULL && last > cur && last[-1] == ' ' && last[1] == ' '
             ? last + 2
             : cur;
  cur_len = strlen(cur);
  next_len = strnlen(next, STKR__NAME_CHAIN_MAX);
  if (strcmp(last, next) == 0 || cur_len + 3 + next_len > STKR__NAME_CHAIN_MAX)
    return;
  if ((grown = malloc(cur_len + 3 + next_len + 1)) == NULL)
    return;
  memcpy(grown, cur, cur_len);
  memcpy(grown + cur_len, " > ", 3);
  memcpy(grown + cur_len + 3, next, next_len);
  grown[cur_len + 3 + next_len] = '\0';
  free(st->process_name);
  st->process_name = grown;
  st->info.process_name = grown;
}

/* Header.watched into st->info.watched: the first Header's, kept while
 * every later Header says the same; one that says another thing (or a
 * value past STKR_FMT_WATCHED_MAX, or no memory) makes it "" for good:
 * then anything may have been watched. */
static void stkr__apply_watched(stkr__stream *st, const char *w, bool first) {
  if (w == NULL) w = "";
  if (st->watched_mixed) return;
  if (first) {
    if (w[0] == '\0') return;
    if (strnlen(w, STKR_FMT_WATCHED_MAX) < STKR_FMT_WATCHED_MAX &&
        (st->watched = strdup(w)) != NULL)
      st->info.watched = st->watched;
    else
      st->watched_mixed = true;
    return;
  }
  if (strcmp(st->watched != NULL ? st->watched : "", w) == 0) return;
  st->watched_mixed = true;
  free(st->watched);
  st->watched = NULL;
  st->info.watched = "";
}

/* Keep boot id b among the stream's instances' boots (distinct). */
static void stkr__boot_seen(stkr__stream *st, const uint8_t *b) {
  for (size_t i = 0; i < st->n_boots_seen; i++)
    if (memcmp(st->boots_seen[i].id, b, sizeof st->boots_seen[i].id) == 0)
      return;
  if (stkr_grow((void **)&st->boots_seen, &st->cap_boots_seen,
                st->n_boots_seen + 1, sizeof *st->boots_seen) != 0) {
    st->many_boots = true;
    return;
  }
  memcpy(st->boots_seen[st->n_boots_seen++].id, b, sizeof st->boots_seen[0].id);
}

/* Another process with this pid (stkr_process_info.instances): a start
 * time that differs from the current instance's. Unknown times (0) never
 * begin one: an older writer's sessions stay one process, as before. */
static void stkr__apply_instance(stkr__stream *st, const Stackrec__Header *h) {
  stkr_process_info *in = &st->info;

  if (in->instances != 0 &&
      (h->process_start == 0 || st->proc_start == 0 ||
       h->process_start == st->proc_start)) {
    if (st->proc_start == 0)
      st->proc_start = h->process_start;
    return;
  }
  in->instances++;
  stkr_map_clear(&st->tids); /* another process: its own threads */
  st->proc_start = h->process_start;
  in->instance_start_mono_ns = h->start_mono_ns;
  in->instance_start_wall_ns = h->start_wall_ns;
  in->instance_forked_from_pid = h->forked_from_pid;
  in->instance_fork_mono_ns = h->fork_mono_ns;
  /* Its own clock: a restarted container's pid 1 after a reboot, or
   * restored into another time namespace (QA, session 35: placed by the
   * first launch's clock, 100 000 s for a 0.3 s recording). */
  in->instance_have_boot_id = h->boot_id.len == sizeof in->instance_boot_id;
  memset(in->instance_boot_id, 0, sizeof in->instance_boot_id);
  if (in->instance_have_boot_id) {
    memcpy(in->instance_boot_id, h->boot_id.data, sizeof in->instance_boot_id);
    stkr__boot_seen(st, h->boot_id.data);
  }
  in->instance_mono_offset_ns = h->mono_offset_ns;
  in->instance_shift_ns = 0;
  if (in->instances > 1) { /* (the first Header's fields are set by now) */
    stkr_clock_id cur = {.have_boot = in->instance_have_boot_id,
                         .mono_offset_ns = in->instance_mono_offset_ns};
    stkr_clock_id first = {.have_boot = in->have_boot_id,
                           .mono_offset_ns = in->mono_offset_ns};
    memcpy(cur.boot, in->instance_boot_id, sizeof cur.boot);
    memcpy(first.boot, in->boot_id, sizeof first.boot);
    (void)stkr_clock_shift(&cur, h->start_mono_ns, h->start_wall_ns, &first,
                           in->start_mono_ns, in->start_wall_ns,
                           &in->instance_shift_ns);
  }
}

void stkr__apply_header(stkr_reader *r, stkr__stream *st,
                        const Stackrec__Header *h, const char *path,
                        uint64_t off) {
  stkr__apply_watched(st, h->watched, !st->info.have_header);
  if (st->info.have_header && st->process_name != NULL)
    stkr__name_chain_add(st, h->process_name);
  if (!st->info.have_header) {
    char *name = stkr__strdup0(h->process_name), *arch = stkr__strdup0(h->arch);

    if (name == NULL || arch == NULL) { /* cosmetic: stay with "" */
      free(name);
      free(arch);
    } else {
      st->process_name = name;
      st->arch = arch;
      st->info.process_name = name;
      st->info.arch = arch;
    }
    st->info.have_header = true;
    st->info.parent_pid = h->parent_pid;
    st->info.os_parent_pid = h->os_parent_pid;
    st->info.forked_from_pid = h->forked_from_pid;
    st->info.fork_mono_ns = h->fork_mono_ns;
    st->info.start_mono_ns = h->start_mono_ns;
    st->info.start_wall_ns = h->start_wall_ns;
    st->info.have_boot_id = h->boot_id.len == sizeof st->info.boot_id;
    if (st->info.have_boot_id)
      memcpy(st->info.boot_id, h->boot_id.data, sizeof st->info.boot_id);
    st->info.mono_offset_ns = h->mono_offset_ns;
  }
  stkr__apply_instance(st, h);
  if (h->unwind_tables != NULL) {
    st->info.unwind_tables = true;
    st->info.unwind_images = h->unwind_tables->images;
    st->info.unwind_images_failed = h->unwind_tables->images_failed;
    st->info.unwind_images_without_cfi = h->unwind_tables->images_without_cfi;
    st->info.unwind_rows = h->unwind_tables->rows;
    st->info.unwind_rows_fallback = h->unwind_tables->rows_fallback;
    st->info.unwind_images_cached = h->unwind_tables->images_cached;
    st->info.unwind_cache_rejected = h->unwind_tables->cache_rejected;
  }
  stkr__acct_header(r, st, h, path, off);
  if (!st->have_session) {
    st->have_session = true;
    st->sess_mono = h->start_mono_ns;
    st->sess_wall = h->start_wall_ns;
    if (!st->have_sync && h->start_wall_ns != 0) {
      st->have_sync = true;
      st->sync_mono = h->start_mono_ns;
      st->sync_wall = h->start_wall_ns;
    }
  }
  if (st->anon && st->info.pid == 0)
    st->info.pid = h->pid; /* (a named file's pid is its name's: stkr__misnamed) */
}
