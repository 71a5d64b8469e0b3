/*
 * mark.c: marks (stkr_mark_site, behind the inline stkr_mark).
 *
 * A mark is an ordinary event at a site of its own, named "mark:" + the
 * mark's name (common/stkr_mark.h), so it travels through the thread's ring
 * like any event: it gets the recording's clock, the calling thread, its
 * stack, its payload, ring-file recovery and the drop accounting, and
 * stkr_event's hot path is untouched. This file only turns a mark name
 * into such a site, once per distinct name: a fixed table of
 * STKR_MAX_MARKS slots (no malloc), looked up without a lock, filled under
 * a mutex (marks are rare; stkr_mark is not a hot path).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/stkr_mark.h"
#include "recorder/stkr_internal.h"

typedef struct stkr__mark_slot {
  stkr_site site; /* site.name points at name */
  char name[STKR_MARK_PREFIX_LEN + STKR_MARK_NAME_MAX + 1];
} stkr__mark_slot;

/* Slots [0, g_marks_n) are complete. Written under g_marks_lock only: a
 * slot is filled, then g_marks_n is stored with release; lookups
 * acquire-load g_marks_n (pairs with that store) and then read only slots
 * below it, which never change again. */
static stkr__mark_slot g_marks[STKR_MAX_MARKS];
static _Atomic uint32_t g_marks_n;
static pthread_mutex_t g_marks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_marks_once = PTHREAD_ONCE_INIT;

/* A fork while another thread holds the lock would leave it held forever
 * in the child: take it around fork, as glibc does for malloc. */
static void stkr__marks_lock(void) { pthread_mutex_lock(&g_marks_lock); }
static void stkr__marks_unlock(void) { pthread_mutex_unlock(&g_marks_lock); }
static void stkr__marks_atfork(void) {
  pthread_atfork(stkr__marks_lock, stkr__marks_unlock, stkr__marks_unlock);
}

/* name is NUL-terminated (checked by the caller). */
static stkr_site *stkr__mark_find(const char *name, uint32_t n) {
  uint32_t i;

  for (i = 0; i < n; i++)
    if (strcmp(g_marks[i].name + STKR_MARK_PREFIX_LEN, name) == 0)
      return &g_marks[i].site;
  return NULL;
}

int stkr_mark_site(const char *name, stkr_site **out) {
  size_t len;
  uint32_t n;
  stkr__mark_slot *slot;
  int err;

  if (out == NULL)
    return -EINVAL;
  *out = NULL;
  if (name == NULL)
    return -EINVAL;
  len = strnlen(name, STKR_MARK_NAME_MAX + 1);
  if (!stkr_mark_name_valid(name, len))
    return -EINVAL;
  /* Pairs with the release store below. */
  n = atomic_load_explicit(&g_marks_n, memory_order_acquire);
  if ((*out = stkr__mark_find(name, n)) != NULL)
    return 0;

  pthread_once(&g_marks_once, stkr__marks_atfork);
  pthread_mutex_lock(&g_marks_lock);
  n = atomic_load_explicit(&g_marks_n, memory_order_relaxed);
  if ((*out = stkr__mark_find(name, n)) != NULL) {
    pthread_mutex_unlock(&g_marks_lock);
    return 0;
  }
  if (n >= STKR_MAX_MARKS) {
    pthread_mutex_unlock(&g_marks_lock);
    return -ENOSPC;
  }
  slot = &g_marks[n];
  memcpy(slot->name, STKR_MARK_PREFIX, STKR_MARK_PREFIX_LEN);
  memcpy(slot->name + STKR_MARK_PREFIX_LEN, name, len);
  slot->name[STKR_MARK_PREFIX_LEN + len] = '\0';
  slot->site.name = slot->name;
  slot->site.id = 0;
  /* Registered now, by the one thread creating it, so that the first mark
   * is never the event dropped by a first-use race (stkr_site_register). */
  err = stkr__site_register_mark(&slot->site);
  if (err != 0) {
    pthread_mutex_unlock(&g_marks_lock);
    return err;
  }
  atomic_store_explicit(&g_marks_n, n + 1, memory_order_release);
  pthread_mutex_unlock(&g_marks_lock);
  *out = &slot->site;
  return 0;
}

/* Marks whose event was refused (a full ring, a re-entered event, no
 * ring): a reader that does not know a mark was lost would judge the
 * events after it by the marks before it (QA, session 32: a dropped
 * app.foreground left every later event "in the background"). Added to by
 * any producer, on its drop path only (relaxed: a count); read by the
 * flush worker into each batch's Counters.marks_dropped, less its
 * session's start value (the count runs on across sessions, and a forked
 * child copies it). */
static _Atomic uint64_t g_marks_dropped;

/* In memory for the worker's Counters, and in the session file for
 * recovery after a kill. */
static void count_drop(void) {
  atomic_fetch_add_explicit(&g_marks_dropped, 1, memory_order_relaxed);
  stkr__session_mark_dropped();
}

void stkr__mark_drop_note_id(uint32_t site_id) {
  if (stkr__site_is_mark(site_id))
    count_drop();
}

void stkr__mark_drop_note(const stkr_site *site) {
  /* A mark's site is registered before its first event (stkr_mark_site):
   * its id is there to acquire. An id word that is no id (invalid, full)
   * is above STKR_MAX_SITES: no mark. */
  stkr__mark_drop_note_id(__atomic_load_n(&site->id, __ATOMIC_ACQUIRE));
}

uint64_t stkr__marks_dropped(void) {
  return atomic_load_explicit(&g_marks_dropped, memory_order_relaxed);
}
