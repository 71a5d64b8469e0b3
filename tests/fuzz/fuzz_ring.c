/*
 * fuzz_ring.c: the ring file decoder of recovery (stkr_ring_parse in
 * proto/stkr_recover.c) on arbitrary bytes, as a file a dead recorder (or a
 * damaged disk, or an attacker) left behind.
 *
 * Checked besides "no crash, no hang, nothing read outside the input":
 * records come at strictly increasing positions between tail and head,
 * their PCs and payload lie inside the input, a known record (format 2:
 * a stack sent once per thread) has no PCs and a slot inside the table, a
 * full one room for its key, a payload-known one (format 3) no payload
 * bytes handed out, there are never more records than the ring
 * holds 24-byte headers, and a refused or damaged file always
 * says why. The first 8 input bytes, when there are more than a header's
 * worth, also pick the dedupe position ("from"), so that path is fuzzed too.
 */
#include "tests/fuzz/fuzz_util.h"

#include <errno.h>
#include <string.h>

#include "common/stkr_ringfile.h"
#include "proto/stkr_recover.h"

typedef struct fz_ring {
  const uint8_t *data;
  size_t size;
  uint64_t n, last_pos;
  stkr_ring_info *info;
} fz_ring;

static int on_rec(void *arg, const stkr_ring_rec *r) {
  fz_ring *c = arg;
  const uint8_t *pcs = (const uint8_t *)r->pcs;

  FZ_CHECK(c->n == 0 || r->pos > c->last_pos);
  FZ_CHECK(r->size >= 24 && r->size % 8 == 0);
  FZ_CHECK(r->slot < STKR_RINGFILE_KNOWN_SLOTS);
  if (r->flags & STKR_RINGREC_KNOWN)
    FZ_CHECK(r->depth == 0 && r->hash == 0 && r->key2 == 0);
  else
    FZ_CHECK(r->size >= 56);
  FZ_CHECK(pcs >= c->data && pcs + 8u * r->depth <= c->data + c->size);
  FZ_CHECK(r->pslot < STKR_RINGFILE_PKNOWN_SLOTS);
  if (r->flags & STKR_RINGREC_PAYLOAD_KNOWN) /* the slot's: none here */
    FZ_CHECK(r->payload == NULL && r->payload_len != 0);
  else
    FZ_CHECK(r->payload >= c->data &&
             r->payload + r->payload_len <= c->data + c->size);
  FZ_CHECK(r->site_id != 0);
  c->last_pos = r->pos;
  c->n++;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stkr_ring_info info;
  fz_ring c = {data, size, 0, 0, &info};
  uint64_t dups = 0, lost = 0, bad = 0, from = 0;
  const char *why = NULL;
  /* A copy: the decoder wants 8-byte alignment, as a malloc'd or mapped
   * file has; libFuzzer's buffer may not. */
  uint8_t *copy = malloc(size ? size : 1);
  int rc;

  FZ_CHECK(copy != NULL);
  memcpy(copy, data, size);
  c.data = copy;
  if (size > 4096 + 8)
    memcpy(&from, data + size - 8, 8); /* the tail bytes pick "from" */
  rc = stkr_ring_parse(copy, size, from, &info, on_rec, &c, &dups, &lost, &bad,
                       &why);
  FZ_CHECK(rc == 0 || rc == 1 || rc == -EINVAL);
  if (rc != 0) FZ_CHECK(why != NULL && why[0] != '\0');
  if (rc >= 0) {
    FZ_CHECK(info.ring_size >= 64 && (info.ring_size & (info.ring_size - 1)) == 0);
    FZ_CHECK(info.tail <= info.head && info.head - info.tail <= info.ring_size);
    FZ_CHECK(c.n + dups <= info.ring_size / 24);
    FZ_CHECK(lost <= info.head - info.tail);
    if (rc == 1) FZ_CHECK(bad < size && lost > 0);
  }
  free(copy);
  return 0;
}
