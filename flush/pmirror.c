/*
 * pmirror.c: the flush worker's mirror of each thread's known-payload table
 * (flush_internal.h; the producer's side: common/stkr_ringfile.h,
 * "Payloads"). Worker only: no locks.
 */
#include <stdlib.h>
#include <string.h>

#include "flush/flush_internal.h"

static stkr__pmirror *g_pmirrors; /* worker only */

void stkr__pmirror_free(stkr__thread *t) {
  stkr__pmirror *m = t->w_payloads;
  if (m == NULL) return;
  if (m->prev) m->prev->next = m->next;
  else g_pmirrors = m->next;
  if (m->next) m->next->prev = m->prev;
  for (unsigned i = 0; i < STKR__PKNOWN_SLOTS; i++) free(m->bytes[i]);
  free(m);
  t->w_payloads = NULL;
}

/* The producer's table was cleared (new recording, fork): so is ours. The
 * buffers are kept for the slots' next payloads. */
void stkr__pmirror_check_stale(stkr__thread *t) {
  if (!t->w_payloads_stale) return;
  if (t->w_payloads != NULL)
    memset(t->w_payloads->len, 0, sizeof t->w_payloads->len);
  t->w_payloads_stale = false;
}

/* A PAYLOAD_NEW record's bytes become its slot's. Out of memory: the slot
 * is left unknown, and its PAYLOAD_KNOWN records are counted as dropped
 * (dropped_worker) until the producer sends the bytes again. */
void stkr__pmirror_learn(stkr__thread *t, unsigned slot, const uint8_t *p,
                         uint16_t len) {
  stkr__pmirror *m = t->w_payloads;
  if (m == NULL) {
    if ((m = t->w_payloads = calloc(1, sizeof *m)) == NULL) return;
    m->next = g_pmirrors;
    if (g_pmirrors) g_pmirrors->prev = m;
    g_pmirrors = m;
  }
  m->len[slot] = 0;
  if (m->cap[slot] < len) {
    uint16_t cap = len < 32 ? 32 : len;
    uint8_t *nb = realloc(m->bytes[slot], cap);
    if (nb == NULL) return;
    m->bytes[slot] = nb;
    m->cap[slot] = cap;
  }
  memcpy(m->bytes[slot], p, len);
  m->len[slot] = len;
}
