/*
 * site.c: the process-wide table of hook sites.
 *
 * A site gets its id on first use, lock-free, so that registration is
 * async-signal-safe and takes no lock after a thread's first event: the
 * site's id word goes 0 -> CLAIMING -> id by compare-and-swap. A signal
 * handler (or another thread) that finds CLAIMING drops its one event
 * rather than wait. Sites are never unregistered: they are static objects
 * that live as long as the process.
 */
#include <errno.h>
#include <string.h>

#include "recorder/stkr_internal.h"

#define STKR__SITE_CLAIMING 0xFFFFFFFFu
#define STKR__SITE_FULL 0xFFFFFFFEu /* table was full: never retried */

/* g_sites[id] for id in 1..g_site_next. A slot is written (relaxed) before
 * the release store of its site's id word; whoever learns the id through
 * an acquire chain (the producer via site->id, the worker via the ring
 * record that carries the id) then sees the slot. A slot may still be NULL
 * for an id being registered right now; readers skip it. */
static stkr_site *_Atomic g_sites[STKR_MAX_SITES + 1];
/* Ids handed out so far (fetch_add; the value is the highest id). */
static _Atomic uint32_t g_site_next;

static uint32_t stkr__site_find(const char *name) {
  uint32_t n = stkr__site_count();
  uint32_t i;

  for (i = 1; i <= n; i++) {
    stkr_site *s = atomic_load_explicit(&g_sites[i], memory_order_relaxed);
    if (s != NULL && strcmp(s->name, name) == 0)
      return i;
  }
  return 0;
}

int stkr_site_register(stkr_site *site) {
  uint32_t id, expected = 0;

  if (site == NULL || site->name == NULL || site->name[0] == '\0')
    return -EINVAL;
  /* Pairs with the release store below, by whichever thread registered. */
  id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);
  if (id == STKR__SITE_CLAIMING)
    return -EAGAIN;
  if (id == STKR__SITE_FULL)
    return -ENOSPC;
  if (id != 0)
    return 0;
  if (!__atomic_compare_exchange_n(&site->id, &expected, STKR__SITE_CLAIMING,
                                   false, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
    return expected == STKR__SITE_CLAIMING ? -EAGAIN
           : expected == STKR__SITE_FULL  ? -ENOSPC
                                          : 0;

  /* Two static sites with one name (a macro expanded in two places) share
   * an id, so reports group by name without extra work. */
  id = stkr__site_find(site->name);
  if (id == 0) {
    id = atomic_fetch_add_explicit(&g_site_next, 1, memory_order_relaxed) + 1;
    if (id > STKR_MAX_SITES) {
      atomic_fetch_sub_explicit(&g_site_next, 1, memory_order_relaxed);
      __atomic_store_n(&site->id, STKR__SITE_FULL, __ATOMIC_RELEASE);
      return -ENOSPC;
    }
    atomic_store_explicit(&g_sites[id], site, memory_order_relaxed);
    /* Into the session file, so that recovery can name the site: a
     * memcpy into a mapping, no system call. */
    stkr__session_site_added(id, site->name);
  }
  /* Pairs with the acquire loads above and in stkr_event(). */
  __atomic_store_n(&site->id, id, __ATOMIC_RELEASE);
  return 0;
}

/* How long an event waits for another thread's registration of its site:
 * the claimer copies the name into the session file's mapping (a page
 * fault), which a loaded machine can stretch; every event of the site on
 * every other thread was dropped meanwhile (50 of 200 in one run of
 * examples/pkgconfig). Bounded, because the claimer may be this very
 * thread, interrupted by the signal handler that is waiting. */
#define STKR__SITE_WAIT_SPINS (1u << 16)

uint32_t stkr__site_id(stkr_site *site) {
  uint32_t id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);

  if (id != 0 && id < STKR__SITE_FULL)
    return id;
  for (unsigned spin = 0; stkr_site_register(site) == -EAGAIN; spin++) {
    if (spin == STKR__SITE_WAIT_SPINS)
      return 0; /* dropped and counted by the caller */
    stkr__cpu_relax();
  }
  id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);
  return id < STKR__SITE_FULL ? id : 0;
}

uint32_t stkr__site_count(void) {
  uint32_t n = atomic_load_explicit(&g_site_next, memory_order_relaxed);
  return n > STKR_MAX_SITES ? STKR_MAX_SITES : n;
}

const char *stkr__site_name(uint32_t id) {
  stkr_site *s;

  if (id == 0 || id > stkr__site_count())
    return NULL;
  /* Relaxed is enough: see the comment at g_sites. */
  s = atomic_load_explicit(&g_sites[id], memory_order_relaxed);
  return s != NULL ? s->name : NULL;
}
