/*
 * stkr_batch.c: turning one decompressed Batch into definitions, counters
 * and events (see proto/stackrec.proto for the layout).
 *
 * A batch is checked as a whole before any of it is used: if its event
 * columns disagree in length, or the payload lengths do not add up to the
 * payload bytes, the batch is reported damaged and dropped entirely, so a
 * half-trusted batch never leaves half-applied state behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_map.h"
#include "common/stkr_mark.h"
#include "proto/stkr__reader.h"

/* Most images a process may list; a corrupt or hostile file could otherwise
 * make the (linear) duplicate check quadratic. */
#define STKR__MAX_IMAGES 65536

/* ---- definitions --------------------------------------------------------- */

/* Index of site `id`, creating an undefined placeholder ("?") if needed so
 * events can be counted per site before (or without) its definition. */
static int stkr__site_slot(stkr__stream *st, uint32_t id, uint32_t *idx) {
  stkr_site_info *s;

  if (stkr__idmap_get(&st->site_map, id, idx))
    return 0;
  s = stkr__grow_slot(&st->sites, &st->cap_sites, st->n_sites,
                      sizeof(*st->sites));
  if (s == NULL)
    return -ENOMEM;
  s->id = id;
  s->name = "?";
  if (stkr_map_put(&st->site_map, id, (uint32_t)st->n_sites) != 0)
    return -ENOMEM;
  *idx = (uint32_t)st->n_sites++;
  return 0;
}

void stkr__conflict(stkr_reader *r, stkr__stream *st, const char *path,
                           uint64_t off, const char *what, uint32_t id) {
  stkr__warn_once(r, st, STKR__WARNED_CONFLICT, STKR_WARN_INCONSISTENT, path,
                  (int64_t)off,
                  "%s %u redefined differently; keeping the first "
                  "definition (further conflicts not reported)",
                  what, (unsigned)id);
}

void stkr__bad_id(stkr_reader *r, stkr__stream *st, const char *path,
                         uint64_t off, const char *what) {
  stkr__warn_once(r, st, STKR__WARNED_BAD_ID, STKR_WARN_INCONSISTENT, path,
                  (int64_t)off, "%s definition with id 0 ignored", what);
}

/* Is d_name (a SiteDef name as written) the name of site entry s? Mark
 * entries hold the name without its "mark:" prefix. */
static bool stkr__site_name_is(const stkr_site_info *s, const char *d_name) {
  if (d_name == NULL)
    d_name = "";
  if (s->is_mark) {
    if (strncmp(d_name, STKR_MARK_PREFIX, STKR_MARK_PREFIX_LEN) != 0)
      return false;
    d_name += STKR_MARK_PREFIX_LEN;
  }
  return strcmp(s->name, d_name) == 0;
}

static int stkr__apply_site(stkr_reader *r, stkr__stream *st,
                            const Stackrec__SiteDef *d, const char *path,
                            uint64_t off) {
  stkr_site_info *s;
  uint32_t idx;
  char *name;
  int err;

  if (d->id == 0) {
    stkr__bad_id(r, st, path, off, "site");
    return 0;
  }
  if (st->sites_before > 0 && !stkr__idmap_get(&st->site_map, d->id, &idx)) {
    /* A later session: the same site (by name) keeps one entry, so the
     * per-site counts add up over the sessions of the process. */
    size_t k;

    for (k = 0; k < st->sites_before; k++)
      if (st->sites[k].defined && stkr__site_name_is(&st->sites[k], d->name)) {
        if (stkr_map_put(&st->site_map, d->id, (uint32_t)k) != 0)
          return -ENOMEM;
        return st->sites[k].is_mark ? stkr__marks_site(st, NULL, d->id) : 0;
      }
  }
  if (stkr__site_slot(st, d->id, &idx) != 0)
    return -ENOMEM;
  s = &st->sites[idx];
  if (s->defined) {
    if (!stkr__site_name_is(s, d->name))
      stkr__conflict(r, st, path, off, "site", d->id);
    return 0;
  }
  if ((name = stkr__strdup0(d->name)) == NULL)
    return -ENOMEM;
  s->name = name;
  s->defined = true;
  if ((err = stkr__marks_site(st, s, d->id)) != 0)
    return err;
  if (!s->is_mark) /* marks are counted apart (stkr_process_info) */
    st->info.sites++;
  return 0;
}

static int stkr__apply_thread(stkr__stream *st, const Stackrec__ThreadDef *d) {
  stkr__rd_thread *t;
  uint32_t idx;
  char *name;

  if ((name = stkr__strdup0(d->name)) == NULL)
    return -ENOMEM;
  if (stkr__idmap_get(&st->thread_map, d->id, &idx)) {
    /* A thread is re-sent when it is renamed or exits: latest wins. */
    t = &st->threads[idx];
    free(t->name);
  } else {
    /* An OS thread once (os_threads), whatever its definitions: a rename
     * is a new one (QA, session 36: info said 5 threads of 2). */
    uint64_t *seen;
    int added = d->tid != 0 ? stkr_map_add(&st->tids, d->tid, &seen) : 1;
    if (added < 0 ||
        stkr__grow_indexed(&st->threads, &st->cap_threads, st->n_threads,
                           sizeof(*st->threads)) != 0 ||
        stkr_map_put(&st->thread_map, d->id, (uint32_t)st->n_threads)) {
      free(name);
      return -ENOMEM;
    }
    t = &st->threads[st->n_threads++];
    st->info.threads++;
    st->info.os_threads += (uint64_t)added;
  }
  t->id = d->id;
  t->tid = d->tid;
  t->name = name;
  t->exited = d->exited;
  return 0;
}

static int stkr__apply_stack(stkr_reader *r, stkr__stream *st,
                             const Stackrec__StackDef *d, const char *path,
                             uint64_t off) {
  stkr__rd_stack *s;
  uint32_t idx;

  if (stkr__idmap_get(&st->stack_map, d->id, &idx)) {
    s = &st->stacks[idx];
    if (s->n_pcs != d->n_pcs || s->site_id != d->site_id ||
        (d->n_pcs && memcmp(s->pcs, d->pcs, d->n_pcs * sizeof(uint64_t))))
      stkr__conflict(r, st, path, off, "stack", d->id);
    return 0;
  }
  s = stkr__grow_slot(&st->stacks, &st->cap_stacks, st->n_stacks,
                      sizeof(*st->stacks));
  if (s == NULL)
    return -ENOMEM;
  if (d->n_pcs) {
    s->pcs = malloc(d->n_pcs * sizeof(uint64_t));
    if (s->pcs == NULL)
      return -ENOMEM;
    memcpy(s->pcs, d->pcs, d->n_pcs * sizeof(uint64_t));
  }
  s->id = d->id;
  s->n_pcs = d->n_pcs;
  s->hash = d->hash;
  s->truncated = d->truncated;
  s->site_id = d->site_id;
  if (stkr__stack_frames(r, st, s, d, path, off) != 0 ||
      stkr_map_put(&st->stack_map, d->id, (uint32_t)st->n_stacks) != 0) {
    free(s->pcs);
    free(s->frames);
    return -ENOMEM;
  }
  st->n_stacks++;
  if (st->n_mark_ids != 0 && d->site_id != 0) {
    int m = stkr__marks_stack(st, d->id, d->site_id);
    if (m != 0) /* -ENOMEM, or a mark's stack: not counted among stacks */
      return m < 0 ? m : 0;
  }
  /* Distinct by content: a session or a recovered segment defines its
   * stacks anew under new ids (QA, session 29: info said 8 where every
   * view found 4). */
  /* The site by its entry (sites merge by name across sessions), not its
   * id, which means another site in another session. */
  uint32_t site;
  uint64_t site_key = stkr__idmap_get(&st->site_map, d->site_id, &site)
                          ? (uint64_t)site + 1u
                          : ~(uint64_t)d->site_id;
  uint64_t *seen;
  int added = stkr_map_add(
      &st->stack_keys,
      stkr_hash_bytes(stkr_mix64(site_key), d->pcs,
                      d->n_pcs * sizeof(uint64_t)),
      &seen);
  if (added < 0)
    return added;
  st->info.stacks += (uint64_t)added;
  return 0;
}

static int stkr__apply_image(stkr_reader *r, stkr__stream *st,
                             const Stackrec__Image *d, const char *path,
                             uint64_t off) {
  const char *dpath = d->path ? d->path : "";
  stkr_image_info *im;
  size_t i;

  for (i = 0; i < st->n_images; i++) {
    im = &st->images[i];
    if (im->load_address == d->load_address &&
        im->text_start == d->text_start && im->text_end == d->text_end &&
        strcmp(im->path, dpath) == 0)
      return 0;
  }
  if (st->n_images >= STKR__MAX_IMAGES) {
    stkr__warn_once(r, st, STKR__WARNED_IMAGES, STKR_WARN_INCONSISTENT, path,
                    (int64_t)off, "more than %u images; later ones ignored",
                    STKR__MAX_IMAGES);
    return 0;
  }
  if (stkr__grow(&st->images, &st->cap_images, st->n_images + 1,
                 sizeof(*st->images)) != 0)
    return -ENOMEM;
  im = &st->images[st->n_images];
  memset(im, 0, sizeof(*im));
  im->path = strdup(dpath);
  if (im->path == NULL)
    return -ENOMEM;
  if (d->build_id.len) {
    uint8_t *b = malloc(d->build_id.len);

    if (b == NULL) {
      free((char *)im->path);
      return -ENOMEM;
    }
    memcpy(b, d->build_id.data, d->build_id.len);
    im->build_id = b;
    im->build_id_len = d->build_id.len;
  }
  im->load_address = d->load_address;
  im->text_start = d->text_start;
  im->text_end = d->text_end;
  st->n_images++;
  return 0;
}

/* ---- batches ----------------------------------------------------------- */

/* @return NULL if the events columns are consistent, else why not. */
static const char *stkr__check_events(const Stackrec__Events *e) {
  size_t n, i;
  uint64_t sum = 0;

  if (e == NULL)
    return NULL;
  n = e->n_ts_delta_ns;
  /* site_id may be empty: each event's site is then its stack's. */
  if ((e->n_site_id != n && e->n_site_id != 0) || e->n_thread_id != n ||
      e->n_stack_id != n)
    return "event columns differ in length";
  if (e->n_payload_len != 0 && e->n_payload_len != n)
    return "payload_len column differs in length";
  for (i = 0; i < e->n_payload_len; i++)
    sum += e->payload_len[i]; /* n * 2^32 cannot overflow 64 bits */
  if (sum != e->payload_data.len)
    return "payload lengths do not add up to the payload bytes";
  for (i = 0; i < e->n_payload_truncated; i++)
    if (e->payload_truncated[i] >= n)
      return "payload_truncated index out of range";
  return NULL;
}

/* Definitions a writer never makes and that would cost a reader more than
 * their share: a stack deeper than the recorder's hard cap. @return 0 if
 * fine, else writes why into why[] and returns 1. */
static int stkr__check_defs(const Stackrec__Batch *b, char *why, size_t len) {
  size_t i;

  for (i = 0; i < b->n_stacks; i++) {
    const Stackrec__StackDef *d = b->stacks[i];

    if (d->n_pcs > STKR_FMT_MAX_DEPTH) {
      snprintf(why, len, "stack %u has %zu PCs, more than the writer's "
               "maximum %u", (unsigned)d->id, d->n_pcs,
               (unsigned)STKR_FMT_MAX_DEPTH);
      return 1;
    }
    if (d->n_frames > STKR_FMT_MAX_STACK_FRAMES) {
      snprintf(why, len, "stack %u has %zu frames, more than %u",
               (unsigned)d->id, d->n_frames,
               (unsigned)STKR_FMT_MAX_STACK_FRAMES);
      return 1;
    }
  }
  return 0;
}


/* Is the current file a copy of another segment file? Its header h names
 * (pid, segment) other than its file name, and the file of that name in
 * the recording holds the same bytes: counting both counted its events
 * twice (QA, session 25: a segment copied under another number gave 1457
 * events where the program made 1201, with report and export exiting 0).
 * Then it is damage, said once, and the caller skips every batch of the
 * file. Otherwise (a file renamed, two names swapped, a foreign tool's
 * file) the difference is said once and the file read under its name. In
 * a file not named as a segment (anon), a second pid is said too. */
static bool stkr__misnamed(stkr_reader *r, stkr__stream *st,
                           const Stackrec__Header *h, const char *path,
                           uint64_t off, uint32_t file_seq) {
  bool pid_differs = st->anon ? st->info.pid != 0 && h->pid != st->info.pid
                              : h->pid != st->info.pid;
  bool seq_differs = file_seq != 0 && h->segment_seq != file_seq;

  if (!pid_differs && !seq_differs) return false;
  if (!st->anon && stkr__segment_copy_of(r, st, h->pid, h->segment_seq)) {
    st->files[r->cur_file].damaged_whole = true;
    stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, st->info.pid,
               "header says process %u, segment %u: a copy of that "
               "segment's file, not read (its events would be counted "
               "twice)",
               (unsigned)h->pid, (unsigned)h->segment_seq);
    return true;
  }
  if (!st->files[r->cur_file].misnamed) {
    st->files[r->cur_file].misnamed = true;
    st->info.misnamed_segments++;
  }
  if (pid_differs)
    stkr__warn_once(r, st, STKR__WARNED_PID, STKR_WARN_INCONSISTENT, path,
                    (int64_t)off, "header says pid %u, file name says %u",
                    (unsigned)h->pid, (unsigned)st->info.pid);
  if (seq_differs)
    stkr__warn_once(r, st, STKR__WARNED_SEQ, STKR_WARN_INCONSISTENT, path,
                    (int64_t)off, "header says segment %u, file name says %u",
                    (unsigned)h->segment_seq, (unsigned)file_seq);
  return false;
}

static int stkr__apply_defs(stkr_reader *r, stkr__stream *st,
                            const Stackrec__Batch *b, const char *path,
                            uint64_t off) {
  size_t i;

  for (i = 0; i < b->n_sites; i++)
    if (stkr__apply_site(r, st, b->sites[i], path, off) != 0)
      return -ENOMEM;
  /* Strings, then the frames that use them, then the stacks that use
   * those (stackrec.proto). */
  for (i = 0; i < b->n_strings; i++)
    if (stkr__apply_string(r, st, b->strings[i], path, off) != 0)
      return -ENOMEM;
  for (i = 0; i < b->n_frames; i++)
    if (stkr__apply_frame(r, st, b->frames[i], path, off) != 0)
      return -ENOMEM;
  for (i = 0; i < b->n_threads; i++) {
    if (b->threads[i]->id == 0) {
      stkr__bad_id(r, st, path, off, "thread");
      continue;
    }
    if (stkr__apply_thread(st, b->threads[i]) != 0)
      return -ENOMEM;
  }
  for (i = 0; i < b->n_stacks; i++) {
    if (b->stacks[i]->id == 0) {
      stkr__bad_id(r, st, path, off, "stack");
      continue;
    }
    if (stkr__apply_stack(r, st, b->stacks[i], path, off) != 0)
      return -ENOMEM;
  }
  for (i = 0; i < b->n_images; i++)
    if (stkr__apply_image(r, st, b->images[i], path, off) != 0)
      return -ENOMEM;
  return 0;
}

/* Forget the ids of the session that ended; bank its counters. */
static void stkr__session_reset(stkr__stream *st) {
  size_t i;

  if (!st->sess_clean)
    st->unclean_before = true;
  st->sess_clean = false;
  st->info.end_ts_ns = 0; /* the process goes on: a later session's end */

  /* Site entries stay (they hold the counts); only their ids go. */
  stkr_map_free(&st->site_map);
  st->sites_before = st->n_sites;
  stkr_map_free(&st->thread_map);
  STKR_FREE_EACH(st->threads, st->n_threads, name);
  st->n_threads = 0;
  stkr_map_free(&st->stack_map);
  for (i = 0; i < st->n_stacks; i++) {
    free(st->stacks[i].pcs);
    free(st->stacks[i].frames);
  }
  st->n_stacks = 0;
  stkr_map_free(&st->frame_map);
  st->n_frames = 0;
  stkr_map_free(&st->string_map);
  for (i = 0; i < st->n_strings; i++)
    free(st->strings[i]);
  st->n_strings = 0;
  st->n_mark_ids = 0; /* the site entries keep is_mark */
  st->n_mark_stacks = 0;
  st->many_mark_stacks = false;

  st->have_batch_seq = false;
  st->have_session = false;
  st->have_sync = false;
  st->info.sessions++;
}

/* Does batch b start a new recording session of st's pid? */
static bool stkr__is_new_session(const stkr__stream *st,
                                 const Stackrec__Batch *b) {
  const Stackrec__Header *h = b->header;

  if (h != NULL && st->have_session &&
      (h->start_mono_ns != st->sess_mono || h->start_wall_ns != st->sess_wall))
    return true;
  /* Session ids, when both are known, name the session outright. */
  if (h != NULL && st->have_session && h->session_id != 0 &&
      st->acct.session_id != 0 && h->session_id != st->acct.session_id)
    return true;
  /* Without a readable header (damaged first batch): numbers restart. */
  return st->have_batch_seq && b->seq != 0 && b->seq <= st->last_batch_seq;
}

void stkr__batch_release(stkr_reader *r) {
  if (r->batch != NULL)
    stackrec__batch__free_unpacked(r->batch, &r->pballoc.pb);
  r->batch = NULL;
  r->ev_idx = r->ev_count = 0;
}

int stkr__batch_load(stkr_reader *r, stkr__stream *st, const char *path,
                     uint64_t off) {
  uint32_t file_seq = st->files[r->cur_file].seq;
  Stackrec__Batch *b;
  const Stackrec__Events *e;
  const char *why;
  char whybuf[128];
  size_t i, n;

  stkr__batch_release(r);
  r->ev_frames_of = NULL; /* definitions may move or go */
  r->ev_stream = NULL;
  r->ev_stack = NULL;
  r->pballoc.refused = false;
  b = stackrec__batch__unpack(&r->pballoc.pb, r->dbuf.len, r->dbuf.data);
  if (b == NULL && r->pballoc.refused) {
    st->info.damaged_batches++;
    stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, st->info.pid,
               "damaged batch (would need over %u MiB to decode %zu "
               "bytes), skipped",
               (unsigned)(STKR_FMT_MAX_DECODED_BYTES >> 20), r->dbuf.len);
    return STKR__BATCH_SKIPPED;
  }
  if (b == NULL) {
    /* protobuf-c does not say why; the zstd checksum passed, so this is a
     * writer bug or a foreign file rather than disk damage. */
    st->info.damaged_batches++;
    stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, st->info.pid,
               "damaged batch (not a valid Batch message, %zu bytes), "
               "skipped",
               r->dbuf.len);
    return STKR__BATCH_SKIPPED;
  }
  if (b->header != NULL &&
      b->header->format_version != STKR_FORMAT_VERSION) {
    uint32_t v = b->header->format_version;

    st->info.status = -EPROTONOSUPPORT;
    stkr__warn(r, STKR_WARN_UNSUPPORTED, path, (int64_t)off, st->info.pid,
               v > STKR_FORMAT_VERSION
                   ? "format version %u is newer than this reader "
                     "supports (%u); rest of process skipped"
                   : "invalid format version %u (this reader reads %u); "
                     "rest of process skipped",
               (unsigned)v, (unsigned)STKR_FORMAT_VERSION);
    stackrec__batch__free_unpacked(b, &r->pballoc.pb);
    return STKR__BATCH_UNSUPPORTED;
  }
  if (stkr__check_defs(b, whybuf, sizeof(whybuf)) != 0)
    why = whybuf;
  else
    why = stkr__check_events(b->events);
  if (why != NULL) {
    st->info.damaged_batches++;
    stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, st->info.pid,
               "damaged batch (%s), skipped", why);
    stackrec__batch__free_unpacked(b, &r->pballoc.pb);
    return STKR__BATCH_SKIPPED;
  }

  if (st->files[r->cur_file].damaged_whole ||
      (b->header != NULL &&
       stkr__misnamed(r, st, b->header, path, off, file_seq))) {
    st->info.damaged_batches++;
    stackrec__batch__free_unpacked(b, &r->pballoc.pb);
    return STKR__BATCH_SKIPPED;
  }
  if (st->info.sessions == 0) {
    st->info.sessions = 1;
    stkr__acct_begin(st);
  } else if (stkr__is_new_session(st, b)) {
    stkr__acct_end(r, st); /* before the reset forgets how it ended */
    stkr__session_reset(st);
  }
  if (b->header != NULL)
    stkr__apply_header(r, st, b->header, path, off);
  if (stkr__apply_defs(r, st, b, path, off) != 0) {
    stackrec__batch__free_unpacked(b, &r->pballoc.pb);
    return -ENOMEM;
  }
  stkr__acct_counters(st, b, r->cur_file);

  e = b->events;
  n = e ? e->n_ts_delta_ns : 0;
  /* A batch's marks first (see "Marks" in stkr_reader.h): the columns are
   * reordered once here, so handing out events costs nothing more. */
  if (st->n_mark_ids != 0 && n != 0 && stkr__marks_first(st, b) != 0) {
    stackrec__batch__free_unpacked(b, &r->pballoc.pb);
    return -ENOMEM;
  }
  if (e != NULL && e->n_payload_truncated) {
    size_t bytes = n / 8 + 1;

    if (stkr__grow(&r->trunc_bits, &r->trunc_cap, bytes, 1) != 0) {
      stackrec__batch__free_unpacked(b, &r->pballoc.pb);
      return -ENOMEM;
    }
    memset(r->trunc_bits, 0, bytes);
    for (i = 0; i < e->n_payload_truncated; i++)
      r->trunc_bits[e->payload_truncated[i] / 8] |=
          (uint8_t)(1u << (e->payload_truncated[i] % 8));
  }
  r->batch = b;
  r->batch_off = off;
  r->ev_idx = 0;
  r->ev_count = n;
  r->ev_thread_ix = 0;
  r->ev_ts = e ? e->base_ts_ns : 0;
  r->payload_pos = 0;
  return STKR__BATCH_OK;
}

/* ev's site (ev->site_id; s: its stack, or NULL). Site 0 (no column and
 * an unknown stack) counts under "?" like any undefined id. Undefined ids
 * share one "?" entry (id 0): per-id state for ids nobody defined would
 * let a file of distinct bogus ids make the reader (and every tool keyed
 * by site) allocate per event. A stack's own site: the entry its first
 * event found (stkr__rd_stack.site_ix). @return 0 or -ENOMEM. */
static inline int stkr__event_site(stkr__stream *st, stkr__rd_stack *s,
                                   stkr_event_view *ev) {
  uint32_t idx;

  if (s != NULL && s->site_ix != 0 && ev->site_id == s->site_id) {
    idx = s->site_ix - 1;
  } else if (stkr__idmap_get(&st->site_map, ev->site_id, &idx)) {
    if (s != NULL && ev->site_id == s->site_id)
      s->site_ix = idx + 1;
  } else if (stkr__site_slot(st, 0, &idx) != 0) {
    return -ENOMEM;
  }
  ev->site = st->sites[idx].name;
  ev->is_mark = st->sites[idx].is_mark;
  st->sites[idx].events++;
  if (!st->sites[idx].defined) {
    ev->unresolved = true;
    ev->site_undefined = true;
  }
  return 0;
}

/* ev's thread (ev->thread_id). In a run of one thread's events, the entry
 * found for its first (stkr_reader.ev_thread_ix). */
static inline void stkr__event_thread(stkr_reader *r, const stkr__stream *st,
                                      stkr_event_view *ev) {
  uint32_t idx;

  if (r->ev_thread_ix == 0 || ev->thread_id != r->ev_thread_id) {
    r->ev_thread_id = ev->thread_id;
    r->ev_thread_ix =
        stkr__idmap_get(&st->thread_map, ev->thread_id, &idx) ? idx + 1 : 0;
  }
  if (r->ev_thread_ix != 0) {
    ev->tid = st->threads[r->ev_thread_ix - 1].tid;
    ev->thread_name = st->threads[r->ev_thread_ix - 1].name;
  } else {
    ev->thread_name = "?";
    ev->unresolved = true;
    ev->thread_undefined = true;
  }
}

int stkr__batch_event(stkr_reader *r, stkr__stream *st, size_t st_index,
                      stkr_event_view *ev) {
  const Stackrec__Events *e = r->batch->events;
  stkr_process_info *info = &st->info;
  size_t i = r->ev_idx;
  uint32_t idx;

  /* The fields set only conditionally below; the rest always are. No
   * memset: a 168-byte rep stos per event was ~6% of `stackrec report`.
   * A field added to stkr_event_view must be reset here (the assert is a
   * reminder). */
  _Static_assert(sizeof(stkr_event_view) == 168,
                 "reset every new stkr_event_view field here");
  ev->wall_ns = 0;
  ev->tid = 0;
  ev->pcs = NULL;
  ev->n_pcs = 0;
  ev->stack_truncated = false;
  ev->payload = NULL;
  ev->payload_len = 0;
  ev->payload_truncated = false;
  ev->unresolved = false;
  ev->site_undefined = ev->thread_undefined = ev->stack_undefined = false;
  ev->stack_lost = false;
  ev->frames = NULL;
  ev->n_frames = 0;
  /* Unsigned wrap-around adds a negative delta correctly. */
  r->ev_ts += (uint64_t)e->ts_delta_ns[i];
  ev->ts_ns = r->ev_ts;
  if (st->have_sync)
    ev->wall_ns = st->sync_wall + (uint64_t)(r->ev_ts - st->sync_mono);
  ev->pid = info->pid;
  ev->process = st_index;
  ev->proc = info;
  ev->path = r->in.path;
  ev->batch_offset = r->batch_off;

  ev->stack_id = e->stack_id[i];
  ev->site_id = e->n_site_id ? e->site_id[i] : 0;
  stkr__rd_stack *s = NULL;
  if (stkr__idmap_get(&st->stack_map, ev->stack_id, &idx)) {
    s = &st->stacks[idx];

    ev->n_pcs = s->n_pcs;
    ev->pcs = ev->n_pcs ? s->pcs : NULL;
    ev->stack_truncated = s->truncated;
    if (!e->n_site_id)
      ev->site_id = s->site_id;
    r->ev_stream = st;
    r->ev_stack = s;
    if (s->n_frames && !r->opts.lazy_frames) {
      if (stkr__event_frames(r, st, s) != 0)
        return -ENOMEM;
      ev->frames = r->ev_frames;
      ev->n_frames = s->n_frames;
    }
  } else {
    r->ev_stream = st;
    r->ev_stack = NULL;
    ev->unresolved = true;
    ev->stack_undefined = true;
    /* Recovery writes stack 0 for an event it kept without its stack (its
     * definition went with a failed write or a deleted segment: QA,
     * session 31, "damaged" after a full disk). Lost, not damage. */
    ev->stack_lost = ev->stack_id == 0 && r->batch->recovered;
  }

  if (stkr__event_site(st, s, ev) != 0)
    return -ENOMEM;
  ev->thread_id = e->thread_id[i];
  stkr__event_thread(r, st, ev);

  if (e->n_payload_len) {
    ev->payload_len = e->payload_len[i];
    if (ev->payload_len)
      ev->payload = e->payload_data.data + r->payload_pos;
    r->payload_pos += ev->payload_len;
  }
  if (e->n_payload_truncated)
    ev->payload_truncated = (r->trunc_bits[i / 8] >> (i % 8)) & 1;

  if (__builtin_expect(ev->is_mark, 0)) {
    info->marks++; /* marks are not events: first/last_ts are events' */
  } else {
    /* On the first instance's clock (a pid used again on another one). */
    const uint64_t t = __builtin_expect(info->instance_shift_ns == 0, 1)
                           ? ev->ts_ns
                           : stkr_clock_add(ev->ts_ns, info->instance_shift_ns);
    if (info->events == 0 || t < info->first_ts_ns) {
      info->first_ts_ns = t;
      info->first_wall_ns = ev->wall_ns;
    }
    if (info->events == 0 || t > info->last_ts_ns)
      info->last_ts_ns = t;
    info->events++;
  }
  /* Lost only when the stack alone is missing: an undefined site or
   * thread beside it is damage. */
  if (ev->stack_lost && (ev->site_undefined || ev->thread_undefined))
    ev->stack_lost = false;
  if (ev->stack_lost)
    info->stacks_lost++;
  else if (ev->unresolved)
    info->unresolved_events++;
  r->ev_idx++;
  return 0;
}

void stkr__stream_free(stkr__stream *st) {
  size_t i;

  if (st == NULL)
    return;
  STKR_FREE_EACH(st->files, st->n_files, path);
  for (i = 0; i < st->n_sites; i++)
    if (st->sites[i].defined)
      free((char *)st->sites[i].name);
  STKR_FREE_EACH(st->threads, st->n_threads, name);
  for (i = 0; i < st->n_stacks; i++) {
    free(st->stacks[i].pcs);
    free(st->stacks[i].frames);
  }
  for (i = 0; i < st->n_strings; i++)
    free(st->strings[i]);
  STKR_FREE_EACH(st->images, st->n_images, path);
  STKR_FREE_EACH(st->images, st->n_images, build_id);
  stkr_map_free(&st->tids);
  stkr_map_free(&st->stack_keys);
  stkr_map_free(&st->site_map);
  stkr_map_free(&st->thread_map);
  stkr_map_free(&st->stack_map);
  stkr_map_free(&st->frame_map);
  stkr_map_free(&st->string_map);
  STKR_FREE_ALL(st->files, st->sites, st->mark_ids, st->mark_stacks,
                st->boots_seen, st->threads, st->stacks, st->frames,
                st->frame_ids, st->strings, st->images, st->dir,
                st->process_name, st->arch, st->watched, st);
}
