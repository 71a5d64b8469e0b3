/*
 * stkr_recover_scan.c: what a dead session's segments already hold (step 3
 * of stkr_recover.c's comment): the ring positions written, the counters,
 * the highest stack id and batch number, the image list, and a torn tail.
 * Split from stkr_recover_session.c, which builds the recovered segment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "proto/stkr__recover.h"

static int scan_batch(void *arg, const stkr_batch_view *v) {
  stkr__rc_scan *s = arg;
  stkr_fmt_pballoc *pa = malloc(sizeof *pa);
  Stackrec__Batch *b;
  bool keep = false;

  if (pa == NULL)
    return -ENOMEM;
  if (stkr__rc_expired(s->deadline_ns)) {
    free(pa);
    return -ETIMEDOUT;
  }
  stkr_fmt_pballoc_init(pa, STKR_FMT_MAX_DECODED_BYTES);
  b = stackrec__batch__unpack(&pa->pb, v->len, v->data);
  if (b == NULL) {
    free(pa);
    return 0; /* the reader validated it; out of memory here: skip */
  }
  if (s->cur_path == NULL || strcmp(s->cur_path, v->path) != 0) {
    free(s->cur_path);
    s->cur_path = strdup(v->path);
    s->cur_match = false;
  }
  if (b->header != NULL) {
    const Stackrec__Header *h = b->header;
    s->cur_match = h->session_id != 0
                       ? h->session_id == s->sid
                       : h->start_mono_ns == s->start_mono &&
                             h->start_wall_ns == s->start_wall;
    if (s->cur_match && (s->first_seq == 0 || h->segment_seq < s->first_seq))
      s->first_seq = h->segment_seq;
  }
  if (s->cur_match) {
    s->recovered_before |= b->recovered;
    if (b->header != NULL && b->header->session_first_seq != 0)
      s->first_seq = b->header->session_first_seq;
    uint64_t n_events = b->events ? b->events->n_thread_id : 0;
    for (size_t i = 0; i < b->n_ring_pos; i++) {
      const Stackrec__RingPos *p = b->ring_pos[i];
      uint32_t idx;
      if (stkr__idmap_get(&s->pos_map, p->thread_id, &idx)) {
        s->ends[idx] = stkr__rc_max(s->ends[idx], p->end);
      } else if (stkr__grow(&s->ends, &s->cap_ends, s->n_ends + 1,
                            sizeof *s->ends) == 0 &&
                 stkr_map_put(&s->pos_map, p->thread_id, s->n_ends) == 0) {
        s->ends[s->n_ends++] = p->end;
      } else {
        s->err = -ENOMEM;
      }
    }
    for (size_t i = 0; i < b->n_stacks; i++)
      if (b->stacks[i]->id > s->max_stack)
        s->max_stack = b->stacks[i]->id;
    s->max_batch_seq = stkr__rc_max(s->max_batch_seq, b->seq);
    /* The writer's own batches only: an earlier recovery numbers its
     * batches after the writer's note, past a pending batch the writer
     * never wrote (review, session 22). */
    if (!b->recovered) {
      s->found_batch_seq = stkr__rc_max(s->found_batch_seq, b->seq);
      s->writer_matched = true;
      s->writer_last |= b->last;
    }
    for (size_t i = 0; i < b->n_drops; i++) {
      if (b->recovered &&
          stkr_map_put(&s->recovered_drops, b->drops[i]->thread_id, 1) != 0)
        s->err = -ENOMEM;
      s->ring_full += b->drops[i]->ring_full;
      s->reentrant += b->drops[i]->reentrant;
      s->other += b->drops[i]->other;
    }
    /* Events an earlier recovery wrote: recovered, not written (its
     * batches' Counters.written is the writer's written, which stands even
     * where the writer's own segments are gone: review, session 22). */
    if (b->recovered) s->recovered_events += n_events;
    if (b->counters != NULL) {
      const Stackrec__Counters *c = b->counters;
      s->written = stkr__rc_max(s->written,
                         b->recovered ? c->written : c->written + n_events);
      s->dropped_write_error = stkr__rc_max(s->dropped_write_error,
                                     c->dropped_write_error);
      s->segments_deleted =
          stkr__rc_max(s->segments_deleted, c->segments_deleted);
      s->c_ring_full = stkr__rc_max(s->c_ring_full, c->dropped_ring_full);
      s->c_reentrant = stkr__rc_max(s->c_reentrant, c->dropped_reentrant);
      s->c_other = stkr__rc_max(s->c_other, c->dropped_other);
      s->c_lost_bytes = stkr__rc_max(s->c_lost_bytes, c->recovery_lost_bytes);
      s->c_exit = stkr__rc_max(s->c_exit, c->dropped_exit);
    }
    /* The newest segment's latest: segments are read newest first, the
     * batches of each in order. */
    if (b->n_images > 0 && (s->images == NULL || s->images_seg == s->cur_seg)) {
      s->images_seg = s->cur_seg;
      if (s->images != NULL) {
        stackrec__batch__free_unpacked(s->images, &s->images_alloc->pb);
        free(s->images_alloc);
      }
      s->images = b;
      s->images_alloc = pa;
      keep = true;
    }
  }
  if (!keep) {
    stackrec__batch__free_unpacked(b, &pa->pb);
    free(pa);
  }
  return 0;
}

/* Quiet, but notes a frame cut off at the end of a segment (the reader's
 * STKR_WARN_LIVE_TAIL: its writer died inside its write(2)). */
static void silent(void *arg, const stkr_warning *w) {
  stkr__rc_scan *s = arg;
  /* Any segment read, not only the newest: a recovery killed mid-write
   * leaves its fragment under the next one's segment, which reads as
   * damage once a later recovery cuts only its own newest (review,
   * session 22). */
  if (w->kind == STKR_WARN_LIVE_TAIL && w->offset >= 0 &&
      s->n_torn < sizeof s->torn / sizeof s->torn[0] &&
      (s->torn[s->n_torn] = strdup(w->path)) != NULL)
    s->torn_off[s->n_torn++] = (uint64_t)w->offset;
}

static int by_seq_desc(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int stkr__rc_seqs_desc(const stkr__rc *rc, uint32_t pid, uint32_t **out,
                       size_t *n_out) {
  uint32_t *seqs = NULL;
  size_t n = 0, cap = 0;

  *out = NULL;
  *n_out = 0;
  for (size_t i = 0; i < rc->n_segs; i++) {
    if (rc->segs[i].pid != pid) continue;
    if (stkr__grow(&seqs, &cap, n + 1, sizeof *seqs) != 0) {
      free(seqs);
      return -ENOMEM;
    }
    seqs[n++] = rc->segs[i].seq;
  }
  if (n > 1) qsort(seqs, n, sizeof *seqs, by_seq_desc);
  *out = seqs;
  *n_out = n;
  return 0;
}

/* The session's newest segment of its writer is enough (bounded work,
 * whatever the recording's size): the worker releases ring space after
 * every batch it writes, so only the last batch written can be unreleased
 * (RingPos), the last batch carries the totals (Counters), and the session
 * file notes the highest stack id and Batch.seq. Segments of this pid are
 * read newest first until one holds a batch of the writer's own (a later
 * session of a recycled pid, or a torn newest file, is skipped); every
 * recovered segment newer than it is read on the way: each earlier
 * recovery that died before removing its inputs left one, with where it
 * ended (QA, session 22: stopping at the newest recovered one read events
 * of an older one again). A session whose writer wrote no batch has all
 * of its pid's segments read: a start's budget may not reach its end, and
 * defers it once (marked), for `stackrec recover` or `record`. */
int stkr__rc_scan_segments(stkr__rc *rc, uint32_t pid, stkr__rc_scan *s) {
  stkr_reader_opts o = {.warn = silent, .warn_arg = s, .lazy_frames = true,
                        .batch = scan_batch, .batch_arg = s};
  char path[STKR__RC_PATH_MAX];
  uint32_t *seqs;
  size_t n;
  int err = stkr__rc_seqs_desc(rc, pid, &seqs, &n);

  for (size_t i = 0; i < n && !s->writer_matched && err == 0; i++) {
    char name[STKR_FMT_SEGMENT_NAME_MAX];
    stkr_reader *r = NULL;
    stkr_event_view ev;

    stkr_fmt_segment_name(name, sizeof name, pid, seqs[i]);
    snprintf(path, sizeof path, "%s/%s", rc->dir, name);
    if ((err = stkr_reader_create(&o, &r)) != 0) break;
    s->cur_seg = i;
    if (stkr_reader_add(r, path) == 0) /* gone meanwhile: next one */
      while ((err = stkr_reader_next(r, &ev)) == 1) {
      }
    stkr_reader_free(r);
    free(s->cur_path);
    s->cur_path = NULL;
    if (err > 0) err = 0;
  }
  free(seqs);
  return err < 0 ? err : s->err;
}

void stkr__rc_scan_free(stkr__rc_scan *s) {
  stkr_map_free(&s->pos_map);
  stkr_map_free(&s->recovered_drops);
  free(s->ends);
  if (s->images != NULL) {
    stackrec__batch__free_unpacked(s->images, &s->images_alloc->pb);
    free(s->images_alloc);
  }
  free(s->cur_path);
  for (size_t i = 0; i < s->n_torn; i++) free(s->torn[i]);
}
