/*
 * stkr_copies.c: inputs that are copies of one recording
 * (stkr_reader_find_copies, stkr_reader.h).
 *
 * A process of one recording holds a session id (Header.session_id, random
 * at each stkr_init) no other process shares. Two inputs whose processes
 * of one pid start with the same session are two copies of one recording
 * (a device's directory pulled twice, a merge's OUT beside one of its
 * inputs); read both and every event of it counts twice (QA, session 33:
 * `report rec copy` said 20 events of a run that made 10, verify intact).
 * Only processes whose pid another input also has are looked at, and
 * each through its first readable segment's first batch: an input set
 * of distinct pids costs nothing.
 *
 * The same look at a process's first batch gives its start on both clocks
 * before it is read (stkr_reader_start_clock), for views that lay
 * processes of several boots on one time line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stkr__reader.h"
#include "proto/stkr_format.h"

/* Stop once the first batch is in (its Header applied): a non-zero
 * return ends the reading. */
static int first_batch_only(void *arg, const stkr_batch_view *b) {
  (void)arg, (void)b;
  return 1;
}

/* Damage in a file peeked at is said when it is read for real. */
static void quiet(void *arg, const stkr_warning *w) { (void)arg, (void)w; }

/* The first Header among st's first segment files, looked at once and
 * kept in st (stkr__reader.h, peek_*): its clock from the first Header
 * found, its session id from the first that has one (an older writer's
 * has none). At most 4 files are read (files are sorted by seq, and a
 * copy made after the disk cap deleted the first ones starts later in the
 * same session); tombstones and unreadable files are passed over, not
 * counted. */
void stkr__peek_header(stkr__stream *st) {
  size_t read = 0;

  if (st->peeked)
    return;
  st->peeked = true;
  for (size_t i = 0; i < st->n_files && read < 4; i++) {
    stkr_reader_opts o = {.warn = quiet, .batch = first_batch_only};
    const stkr_process_info *p;
    stkr_event_view ev;
    stkr_reader *r;

    if (st->files[i].unreadable || st->files[i].size <= STKR_FMT_MARKER_MAX ||
        stkr_reader_create(&o, &r) != 0)
      continue;
    read++;
    r->no_marks = true;
    if (stkr_reader_add(r, st->files[i].path) != 0) {
      stkr_reader_free(r);
      continue;
    }
    (void)stkr_reader_next(r, &ev);
    p = stkr_reader_process(r, 0);
    if (p != NULL && p->have_header && !st->peek_clock.mono_ns) {
      st->peek_clock = (stkr_start_clock){
          .mono_ns = p->start_mono_ns, .wall_ns = p->start_wall_ns,
          .have_boot_id = p->have_boot_id,
          .mono_offset_ns = p->mono_offset_ns,
          .parent_pid = p->parent_pid,
          .os_parent_pid = p->os_parent_pid};
      memcpy(st->peek_clock.boot_id, p->boot_id, sizeof p->boot_id);
    }
    if (p != NULL && p->have_header && p->session_id != 0)
      st->peek_sid = p->session_id;
    stkr_reader_free(r);
    if (st->peek_sid != 0)
      return;
  }
}

int stkr_reader_start_clock(stkr_reader *r, size_t i, stkr_start_clock *out) {
  const stkr_process_info *p;
  stkr__stream *st;

  if (r == NULL || i >= r->n_streams || out == NULL)
    return -EINVAL;
  st = r->streams[i];
  p = &st->info;
  if (p->have_header) {
    *out = (stkr_start_clock){.mono_ns = p->start_mono_ns,
                              .wall_ns = p->start_wall_ns,
                              .have_boot_id = p->have_boot_id,
                              .mono_offset_ns = p->mono_offset_ns,
                              .parent_pid = p->parent_pid,
          .os_parent_pid = p->os_parent_pid};
    memcpy(out->boot_id, p->boot_id, sizeof p->boot_id);
    return 0;
  }
  stkr__peek_header(st);
  *out = st->peek_clock;
  return 0;
}

/* Streams [from, to) share a pid: two of them, in different directories,
 * that start with one session? */
static int copies_in_run(const stkr_reader *r, size_t from, size_t to,
                         size_t *first, size_t *second, uint64_t *sid) {
  uint64_t *s = calloc(to - from, sizeof *s);
  int found = 0;

  if (s == NULL)
    return -ENOMEM;
  for (size_t i = from; i < to && !found; i++) {
    stkr__stream *a = r->streams[i];
    stkr__peek_header(a);
    if ((s[i - from] = a->peek_sid) == 0)
      continue;
    for (size_t j = from; j < i && !found; j++) {
      const stkr__stream *b = r->streams[j];
      if (s[j - from] == s[i - from] &&
          (a->dir_dev != b->dir_dev || a->dir_ino != b->dir_ino)) {
        *first = j;
        *second = i;
        *sid = s[i - from];
        found = 1;
      }
    }
  }
  free(s);
  return found;
}

int stkr_reader_find_copies(stkr_reader *r, size_t *first, size_t *second,
                            uint64_t *session_id) {
  size_t i, j;

  if (r == NULL || first == NULL || second == NULL || session_id == NULL)
    return -EINVAL;
  if (r->started)
    return -EBUSY;
  for (i = 0; i < r->n_streams; i = j) {
    bool other_dir = false;
    for (j = i + 1; j < r->n_streams &&
                    r->streams[j]->info.pid == r->streams[i]->info.pid;
         j++)
      other_dir |= r->streams[j]->dir_dev != r->streams[i]->dir_dev ||
                   r->streams[j]->dir_ino != r->streams[i]->dir_ino;
    /* A file not named as a segment has no pid until read: not compared. */
    if (!other_dir || r->streams[i]->anon)
      continue;
    int rc = copies_in_run(r, i, j, first, second, session_id);
    if (rc != 0)
      return rc;
  }
  return 0;
}
