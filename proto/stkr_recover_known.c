/*
 * stkr_recover_known.c: which stack a known record of a dead writer's ring
 * refers to (common/stkr_ringfile.h, "Records", says why this is sound).
 *
 * Per ring, in ring order from the tail:
 *   - the key each slot held at the tail (stkr__rck_ring_begin): the
 *     `evicted` key of the slot's first full record in [tail, head), else
 *     the file's table entry;
 *   - a full record (duplicates below RingPos.end included: known records
 *     after it may still refer to it) makes its PCs the slot's stack
 *     (stkr__rck_full);
 *   - a known record takes its slot's stack (stkr__rck_resolve): PCs from
 *     the ring, or, for a key sent before the tail, the session's
 *     segments, read once per session and only when first needed (a
 *     crash's rings usually resolve alone; a long recording's segments can
 *     be many).
 * Payloads the same way, with their own table ("Payloads"): a
 * PAYLOAD_NEW record's bytes become its pslot's (stkr__rck_payload_new), a
 * PAYLOAD_KNOWN record takes them (stkr__rck_payload), else the bytes of
 * the slot's key at the tail among the segments' event payloads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "common/stkr_ringfile.h"
#include "proto/stkr__recover.h"

void stkr__rck_free(stkr__rck *k) {
  STKR_FREE_EACH(k->seg, k->n_seg, pcs);
  STKR_FREE_EACH(k->pseg, k->n_pseg, bytes);
  free(k->pseg);
  stkr_index_free(&k->pseg_ix);
  stkr_map_free(&k->want_s);
  stkr_map_free(&k->want_p);
  stkr_index_free(&k->seg_ix);
  free(k->seg);
  free(k->cur_path);
  memset(k, 0, sizeof *k);
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static int note_evicted(void *arg, const stkr_ring_rec *r) {
  stkr__rck *k = arg;
  if (!(r->flags & STKR_RINGREC_KNOWN) && !k->first_seen[r->slot]) {
    k->first_seen[r->slot] = true;
    k->pre[r->slot][0] = r->evicted[0];
    k->pre[r->slot][1] = r->evicted[1];
  }
  if ((r->flags & STKR_RINGREC_PAYLOAD_NEW) && !k->pfirst_seen[r->pslot]) {
    k->pfirst_seen[r->pslot] = true;
    k->ppre[r->pslot][0] = r->pevicted[0];
    k->ppre[r->pslot][1] = r->pevicted[1];
  }
  return 0;
}

void stkr__rck_ring_begin(stkr__rck *k, const uint8_t *data, uint64_t len) {
  stkr_ring_info info;
  uint64_t dups, lost, bad_pos;
  const char *why;

  memset(k->first_seen, 0, sizeof k->first_seen);
  memset(k->cur, 0, sizeof k->cur);
  memset(k->pfirst_seen, 0, sizeof k->pfirst_seen);
  memset(k->pcur_len, 0, sizeof k->pcur_len);
  /* The parser validated the header already (hdr_bytes, within len,
   * covers both tables). */
  for (unsigned i = 0; i < STKR_RINGFILE_KNOWN_SLOTS; i++) {
    k->pre[i][0] = rd64(data + STKR_RINGFILE_KNOWN_OFF + 16u * i);
    k->pre[i][1] = rd64(data + STKR_RINGFILE_KNOWN_OFF + 16u * i + 8);
  }
  for (unsigned i = 0; i < STKR_RINGFILE_PKNOWN_SLOTS; i++) {
    k->ppre[i][0] = rd64(data + STKR_RINGFILE_PKNOWN_OFF + 16u * i);
    k->ppre[i][1] = rd64(data + STKR_RINGFILE_PKNOWN_OFF + 16u * i + 8);
  }
  /* A bad record ends this pass where it ends the real one. */
  (void)stkr_ring_parse(data, len, 0, &info, note_evicted, k, &dups, &lost,
                        &bad_pos, &why);
}

void stkr__rck_full(stkr__rck *k, const stkr_ring_rec *r) {
  k->cur[r->slot] = *r; /* its pcs point into the ring's data: kept alive */
  k->cur[r->slot].size = 1; /* set */
}

void stkr__rck_payload_new(stkr__rck *k, const stkr_ring_rec *r) {
  k->pcur[r->pslot] = r->payload;
  k->pcur_len[r->pslot] = r->payload_len;
}

/* ---- the session's segments' stacks and payloads, by key --------------- */

/* A 128-bit key in the want maps, folded to 64 bits: a collision keeps an
 * entry too many, or marks a wanted key found early (so the reading may
 * stop before the segment that has it: that record is then unresolved,
 * counted, never resolved wrongly, as lookups compare all 128 bits; at
 * 2^-64 per pair). Never 0 (one code path in stkr_map). Also the hash
 * that the segments' stacks and payloads are indexed by (key_find). */
static uint64_t want_key(const uint64_t key[2]) {
  uint64_t h = key[0] ^ stkr_mix64(key[1]);
  return h ? h : 1;
}

static int want_add(stkr__rck *k, stkr_map *m, const uint64_t key[2]) {
  uint64_t *v;
  int rc;
  if (key[0] == 0 && key[1] == 0) return 0; /* an empty slot */
  if ((rc = stkr_map_add(m, want_key(key), &v)) < 0) return rc;
  k->n_want += rc == 1; /* new */
  return 0;
}

int stkr__rck_want_ring(stkr__rck *k, const uint8_t *data, uint64_t len) {
  int err = 0;
  stkr__rck_ring_begin(k, data, len);
  for (unsigned i = 0; i < STKR_RINGFILE_KNOWN_SLOTS && err == 0; i++)
    err = want_add(k, &k->want_s, k->pre[i]);
  for (unsigned i = 0; i < STKR_RINGFILE_PKNOWN_SLOTS && err == 0; i++)
    err = want_add(k, &k->want_p, k->ppre[i]);
  return err;
}

/* Is key wanted? Marks it found the first time. */
static bool wanted(stkr__rck *k, stkr_map *m, const uint64_t key[2]) {
  uint64_t *v = stkr_map_find(m, want_key(key));
  if (v == NULL) return false;
  if (*v == 0) {
    *v = 1;
    k->n_found++;
  }
  return true;
}

/* The record of key among the records at recs (`size` bytes each, each
 * starting with its uint64_t key[2]: stkr__rck_stack, stkr__rck_pbytes),
 * which x indexes by want_key (both halves: a stack's key[0] is the hash
 * its file says, which a hostile file may repeat): its index, or
 * STKR_INDEX_NONE. */
_Static_assert(offsetof(stkr__rck_stack, key) == 0, "key_find");
_Static_assert(offsetof(stkr__rck_pbytes, key) == 0, "key_find");
static size_t key_find(const stkr_index *x, const void *recs, size_t size,
                       const uint64_t key[2]) {
  uint64_t h = want_key(key);
  size_t pos, ix;

  for (ix = stkr_index_first(x, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(x, h, &pos)) {
    const uint64_t *k = (const uint64_t *)((const char *)recs + ix * size);
    if (k[0] == key[0] && k[1] == key[1]) return ix;
  }
  return STKR_INDEX_NONE;
}

static size_t pseg_find(const stkr__rck *k, const uint64_t key[2]) {
  return key_find(&k->pseg_ix, k->pseg, sizeof *k->pseg, key);
}

static size_t seg_find(const stkr__rck *k, const uint64_t key[2]) {
  return key_find(&k->seg_ix, k->seg, sizeof *k->seg, key);
}

/* Every payload of a batch of the session, once per distinct key. */
static int pseg_add_batch(stkr__rck *k, const Stackrec__Events *e) {
  size_t off = 0;
  if (e == NULL) return 0;
  for (size_t i = 0; i < e->n_payload_len; i++) {
    uint32_t len = e->payload_len[i];
    uint64_t key[2];
    if (len > e->payload_data.len - off) return 0; /* not one of ours */
    const uint8_t *p = e->payload_data.data + off;
    off += len;
    if (len == 0 || len > 0xFFFF) continue;
    stkr_payload_key(p, len, key);
    if (!wanted(k, &k->want_p, key) || pseg_find(k, key) != STKR_INDEX_NONE)
      continue;
    if (stkr__grow(&k->pseg, &k->cap_pseg, k->n_pseg + 1, sizeof *k->pseg) != 0)
      return -ENOMEM;
    stkr__rck_pbytes *d = &k->pseg[k->n_pseg];
    if ((d->bytes = malloc(len)) == NULL) return -ENOMEM;
    memcpy(d->bytes, p, len);
    d->key[0] = key[0];
    d->key[1] = key[1];
    d->len = (uint16_t)len;
    if (stkr_index_add(&k->pseg_ix, want_key(key), k->n_pseg) != 0) {
      free(d->bytes);
      return -ENOMEM;
    }
    k->n_pseg++;
  }
  return 0;
}


static int seg_add(stkr__rck *k, const Stackrec__StackDef *d) {
  uint64_t key[2] = {d->hash, stkr_stack_key2(d->pcs, (unsigned)d->n_pcs,
                                               d->site_id, d->truncated)};

  if (d->n_pcs > 0xFFFF || !wanted(k, &k->want_s, key))
    return 0; /* not one of ours, or no ring looks it up */
  if (seg_find(k, key) != STKR_INDEX_NONE)
    return 0; /* defined again in a later segment: same stack */
  if (stkr__grow(&k->seg, &k->cap_seg, k->n_seg + 1, sizeof *k->seg) != 0 ||
      stkr_index_reserve(&k->seg_ix, k->n_seg + 1) != 0)
    return -ENOMEM;
  stkr__rck_stack *s = &k->seg[k->n_seg];
  if ((s->pcs = malloc(d->n_pcs ? 8u * d->n_pcs : 1)) == NULL)
    return -ENOMEM;
  if (d->n_pcs)
    memcpy(s->pcs, d->pcs, 8u * d->n_pcs);
  s->key[0] = key[0];
  s->key[1] = key[1];
  s->depth = (uint16_t)d->n_pcs;
  s->site = d->site_id;
  s->truncated = d->truncated;
  (void)stkr_index_add(&k->seg_ix, want_key(key), k->n_seg++); /* reserved */
  return 0;
}

static void silent(void *arg, const stkr_warning *w) {
  (void)arg;
  (void)w;
}

static int seg_batch(void *arg, const stkr_batch_view *v) {
  stkr__rck *k = arg;
  stkr_fmt_pballoc pa;
  Stackrec__Batch *b;
  int err = 0;

  if (stkr__rc_expired(k->deadline_ns))
    return -ETIMEDOUT;
  stkr_fmt_pballoc_init(&pa, STKR_FMT_MAX_DECODED_BYTES);
  if ((b = stackrec__batch__unpack(&pa.pb, v->len, v->data)) == NULL)
    return 0; /* the reader validated it; out of memory here: skip */
  if (k->cur_path == NULL || strcmp(k->cur_path, v->path) != 0) {
    free(k->cur_path);
    k->cur_path = strdup(v->path);
    k->cur_match = false;
  }
  /* As in scan_batch: a segment's Header says whose batches follow. */
  if (b->header != NULL)
    k->cur_match = b->header->session_id == k->sid;
  if (k->cur_match) {
    for (size_t i = 0; i < b->n_stacks && err == 0; i++)
      err = seg_add(k, b->stacks[i]);
    if (err == 0) err = pseg_add_batch(k, b->events);
  }
  stackrec__batch__free_unpacked(b, &pa.pb);
  return err;
}

/* Newest first, until every wanted key is found: a ring's slots hold
 * stacks and payloads it sent lately, most often in the newest segment. */
static int seg_load(stkr__rck *k, stkr__rc *rc, uint32_t pid) {
  stkr_reader_opts o = {.warn = silent, .lazy_frames = true,
                        .batch = seg_batch, .batch_arg = k};
  char path[STKR__RC_PATH_MAX];
  uint32_t *seqs;
  size_t n;
  int err = stkr__rc_seqs_desc(rc, pid, &seqs, &n);

  for (size_t i = 0; i < n && err >= 0 && k->n_found < k->n_want; i++) {
    char name[STKR_FMT_SEGMENT_NAME_MAX];
    stkr_reader *r = NULL;
    stkr_event_view ev;

    stkr_fmt_segment_name(name, sizeof name, pid, seqs[i]);
    snprintf(path, sizeof path, "%s/%s", rc->dir, name);
    if ((err = stkr_reader_create(&o, &r)) != 0)
      break;
    if (stkr_reader_add(r, path) == 0) /* gone meanwhile: next one */
      while ((err = stkr_reader_next(r, &ev)) == 1) {
      }
    stkr_reader_free(r);
    /* A damaged segment gives what it can; only memory and the budget
     * end the reading. */
    if (err != -ENOMEM && err != -ETIMEDOUT)
      err = 0;
  }
  free(seqs);
  return err;
}

/* The session's segments' stacks and payloads, read on first need. */
static int seg_ensure(stkr__rck *k, stkr__rc *rc, uint32_t pid) {
  if (k->loaded)
    return 0;
  k->loaded = true;
  return seg_load(k, rc, pid);
}

int stkr__rck_resolve(stkr__rck *k, stkr__rc *rc, uint32_t pid,
                      const stkr_ring_rec *r, stkr_ring_rec *out) {
  const uint64_t *key = k->pre[r->slot];
  size_t ix;
  int err;

  if (k->cur[r->slot].size != 0) {
    *out = k->cur[r->slot];
    return 1;
  }
  if (key[0] == 0 && key[1] == 0)
    return 0; /* the slot was empty at the tail: a damaged ring */
  if ((err = seg_ensure(k, rc, pid)) < 0)
    return err;
  if ((ix = seg_find(k, key)) == STKR_INDEX_NONE)
    return 0;
  const stkr__rck_stack *s = &k->seg[ix];
  memset(out, 0, sizeof *out);
  out->site_id = s->site;
  out->hash = s->key[0];
  out->key2 = s->key[1];
  out->pcs = s->pcs;
  out->depth = s->depth;
  out->flags = s->truncated ? STKR_RINGREC_STACK_TRUNCATED : 0;
  return 1;
}

int stkr__rck_payload(stkr__rck *k, stkr__rc *rc, uint32_t pid,
                      const stkr_ring_rec *r, const uint8_t **out) {
  const uint64_t *key = k->ppre[r->pslot];
  size_t ix;
  int err;

  if (k->pcur_len[r->pslot] != 0) {
    if (k->pcur_len[r->pslot] != r->payload_len) return 0; /* damaged */
    *out = k->pcur[r->pslot];
    return 1;
  }
  if (key[0] == 0 && key[1] == 0)
    return 0; /* the slot was empty at the tail: a damaged ring */
  if ((err = seg_ensure(k, rc, pid)) < 0)
    return err;
  if ((ix = pseg_find(k, key)) == STKR_INDEX_NONE ||
      k->pseg[ix].len != r->payload_len)
    return 0;
  *out = k->pseg[ix].bytes;
  return 1;
}
