/*
 * site.c: the process-wide table of hook sites.
 *
 * A site gets its id on first use, lock-free, so that registration is
 * async-signal-safe and takes no lock after a thread's first event: the
 * site's id word goes 0 -> CLAIMING -> id by compare-and-swap. A signal
 * handler (or another thread) that finds CLAIMING drops its one event
 * rather than wait. Sites are never unregistered. The recorder keeps a
 * copy of each name, never the caller's struct: a site defined in a
 * library the app dlclose'd is gone (QA, session 23: the worker, the next
 * registration and the next stkr_init read its name and died of SIGSEGV).
 */
#include <errno.h>
#include <string.h>

#include "common/stkr_mark.h"
#include "recorder/stkr_internal.h"

#define STKR__SITE_CLAIMING 0xFFFFFFFFu
#define STKR__SITE_FULL 0xFFFFFFFEu /* table was full: never retried */
#define STKR__SITE_INVALID 0xFFFFFFFDu /* refused: no name, or a mark's */

/* The names of g_site_names, bump-allocated for the life of the process
 * (untouched pages cost nothing); full, a new site gets -ENOSPC as past
 * STKR_MAX_SITES. */
#define STKR__SITE_NAMES_BYTES (1u << 20)
static char g_names[STKR__SITE_NAMES_BYTES];
static _Atomic uint32_t g_names_used;

/* g_site_names[id] for id in 1..g_site_next: the site's name (in g_names).
 * Release store after the name's bytes are copied, acquire loads by every
 * reader: a registration scans the slots with no other ordering (the
 * worker also learns the id through the ring record's acquire chain). A
 * slot may still be NULL for an id being registered right now; readers
 * skip it. */
static const char *_Atomic g_site_names[STKR_MAX_SITES + 1];
/* Ids handed out so far (fetch_add; the value is the highest id). */
static _Atomic uint32_t g_site_next;

static uint32_t stkr__site_find(const char *name) {
  uint32_t n = stkr__site_count();
  uint32_t i;

  for (i = 1; i <= n; i++) {
    /* Acquire: pairs with the release store of the slot. */
    const char *s =
        atomic_load_explicit(&g_site_names[i], memory_order_acquire);
    if (s != NULL && strcmp(s, name) == 0)
      return i;
  }
  return 0;
}

/* A copy of name in g_names, or NULL when it is full. Lock-free (a
 * compare-and-swap claims the bytes, never past the end, so the counter
 * cannot wrap however many copies are refused), async-signal-safe. */
static const char *stkr__site_name_copy(const char *name) {
  size_t len = strlen(name) + 1;
  uint32_t off = atomic_load_explicit(&g_names_used, memory_order_relaxed);

  do {
    if ((uint64_t)off + len > STKR__SITE_NAMES_BYTES)
      return NULL;
  } while (!atomic_compare_exchange_weak_explicit(
      &g_names_used, &off, off + (uint32_t)len, memory_order_relaxed,
      memory_order_relaxed));
  memcpy(g_names + off, name, len);
  return g_names + off;
}

/* The -errno of a site's id word that is no id (INVALID, FULL, CLAIMING:
 * consecutive values), else 0. A table, not branches: clang makes those a
 * jump table in the text section on x86_64, whose padding
 * test-apple-build's re-assembly comparison cannot tell from code. */
static const int k_word_err[3] = {-EINVAL, -ENOSPC, -EAGAIN};
static int word_err(uint32_t word) {
  return word >= STKR__SITE_INVALID ? k_word_err[word - STKR__SITE_INVALID]
                                    : 0;
}

/* The sites whose claim is in flight (their word CLAIMING or about to
 * be): written by each claimer (a free slot taken by compare-and-swap
 * before its word goes CLAIMING, given back once the word holds the
 * outcome), read by a fork's child (stkr__sites_after_fork), in which no
 * claimer runs on: its thread was not copied, and the site stayed
 * CLAIMING for good, each of its events dropped after a spin of
 * milliseconds (QA, session 33). More claims at once than slots go
 * unlisted: their site stays claiming in a child forked meanwhile. */
#define STKR__CLAIM_SLOTS 16
static stkr_site *_Atomic g_claims[STKR__CLAIM_SLOTS];

/* A free slot of g_claims for site, or -1. seq_cst: a fork's child must
 * find the slot whenever it finds the word CLAIMING (the word's CAS is
 * ordered after this one). */
static int stkr__claim_slot(stkr_site *site) {
  for (int i = 0; i < STKR__CLAIM_SLOTS; i++) {
    stkr_site *none = NULL;
    if (atomic_load_explicit(&g_claims[i], memory_order_relaxed) == NULL &&
        atomic_compare_exchange_strong(&g_claims[i], &none, site))
      return i;
  }
  return -1;
}

/* Release: after the word's outcome is stored, so that a claimer that
 * takes the slot next (its seq_cst CAS) follows it. A claim abandoned by a
 * longjmp keeps its slot for good (15 left; bounded). */
static void stkr__claim_done(int slot) {
  if (slot >= 0)
    atomic_store_explicit(&g_claims[slot], NULL, memory_order_release);
}

/* Relaxed throughout: the fork's child runs this alone (an atfork child
 * handler, before any thread of its own), and the fork itself ordered
 * every store the parent's threads made before it. */
void stkr__sites_after_fork(void) {
  for (int i = 0; i < STKR__CLAIM_SLOTS; i++) {
    stkr_site *site = atomic_load_explicit(&g_claims[i], memory_order_relaxed);
    uint32_t claiming = STKR__SITE_CLAIMING;
    if (site == NULL)
      continue;
    /* Its claimer is gone: 0 again, for this process to claim anew. */
    (void)__atomic_compare_exchange_n(&site->id, &claiming, 0, false,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    atomic_store_explicit(&g_claims[i], NULL, memory_order_relaxed);
  }
}

/* Bit id: site id `id` is a mark's (only mark.c claims "mark:" names).
 * Set (relaxed OR) before the id is published with release; read by a
 * producer's drop path for an id it acquired, so it sees the bit. */
static _Atomic uint64_t g_mark_ids[(STKR_MAX_SITES + 1 + 63) / 64];

bool stkr__site_is_mark(uint32_t id) {
  return id <= STKR_MAX_SITES &&
         (atomic_load_explicit(&g_mark_ids[id / 64], memory_order_relaxed) >>
          (id % 64)) & 1;
}

static int stkr__site_claimed(stkr_site *site, bool mark);

/* stkr_site_register, and for mark.c's sites (mark = true) the reserved
 * "mark:" names too. */
static int stkr__site_claim(stkr_site *site, bool mark) {
  uint32_t id, expected = 0;
  int slot, rc;

  if (site == NULL)
    return -EINVAL;
  if (site->name == NULL || site->name[0] == '\0') {
    /* Refused for good, so stkr_event says -EINVAL and counts nothing
     * (QA, session 27: -EAGAIN, counted as dropped_other). A word that is
     * no id yet, or INVALID already; a claim in flight is its own. */
    uint32_t zero = 0;
    (void)__atomic_compare_exchange_n(&site->id, &zero, STKR__SITE_INVALID,
                                      false, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED);
    return -EINVAL;
  }
  /* Pairs with the release store below, by whichever thread registered. */
  id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);
  if (id != 0)
    return word_err(id);
  slot = stkr__claim_slot(site);
  if (!__atomic_compare_exchange_n(&site->id, &expected, STKR__SITE_CLAIMING,
                                   false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)) {
    stkr__claim_done(slot);
    return word_err(expected);
  }
  rc = stkr__site_claimed(site, mark);
  stkr__claim_done(slot);
  return rc;
}

/* The rest of a claim: site's word is CLAIMING, ours to set. */
static int stkr__site_claimed(stkr_site *site, bool mark) {
  uint32_t id;

  /* "mark:" names are the marks' (common/stkr_mark.h): a site of the app
   * named so would be read as a mark (QA, session 23: a forged
   * "mark:consent.granted" turned "before consent 1" into 0). */
  if (!mark && stkr_mark_from_site(site->name) != NULL) {
    __atomic_store_n(&site->id, STKR__SITE_INVALID, __ATOMIC_RELEASE);
    return -EINVAL;
  }

  /* Two static sites with one name (a macro expanded in two places) share
   * an id, so reports group by name without extra work. */
  id = stkr__site_find(site->name);
  if (id == 0) {
    /* The id first, never given back (stkr__site_count clamps): taking
     * one back could hide a slot another thread published meanwhile with
     * a higher id (review, session 23). A name that does not fit leaves
     * its id's slot empty, which readers skip. */
    const char *name = NULL;
    id = STKR_MAX_SITES + 1; /* full: the counter goes no further (wrap) */
    if (atomic_load_explicit(&g_site_next, memory_order_relaxed) <
        STKR_MAX_SITES)
      id = atomic_fetch_add_explicit(&g_site_next, 1, memory_order_relaxed) + 1;
    if (id > STKR_MAX_SITES ||
        (name = stkr__site_name_copy(site->name)) == NULL) {
      __atomic_store_n(&site->id, STKR__SITE_FULL, __ATOMIC_RELEASE);
      return -ENOSPC;
    }
    /* Release: the name's bytes before the slot (see g_site_names). */
    atomic_store_explicit(&g_site_names[id], name, memory_order_release);
    /* Into the session file, so that recovery can name the site: a
     * memcpy into a mapping, no system call. */
    stkr__session_site_added(id, name);
  }
  if (mark)
    atomic_fetch_or_explicit(&g_mark_ids[id / 64], 1ull << (id % 64),
                             memory_order_relaxed);
  /* Pairs with the acquire loads above and in stkr_event(). */
  __atomic_store_n(&site->id, id, __ATOMIC_RELEASE);
  return 0;
}

int stkr_site_register(stkr_site *site) { return stkr__site_claim(site, false); }

int stkr__site_register_mark(stkr_site *site) {
  return stkr__site_claim(site, true);
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

  if (id != 0 && id < STKR__SITE_INVALID)
    return id;
  for (unsigned spin = 0; stkr_site_register(site) == -EAGAIN; spin++) {
    if (spin == STKR__SITE_WAIT_SPINS)
      return 0; /* dropped and counted by the caller */
    stkr__cpu_relax();
  }
  id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);
  return id < STKR__SITE_INVALID ? id : 0;
}

bool stkr__site_refused(const stkr_site *site) {
  return __atomic_load_n(&site->id, __ATOMIC_RELAXED) == STKR__SITE_INVALID;
}

uint32_t stkr__site_count(void) {
  uint32_t n = atomic_load_explicit(&g_site_next, memory_order_relaxed);
  return n > STKR_MAX_SITES ? STKR_MAX_SITES : n;
}

const char *stkr__site_name(uint32_t id) {
  if (id == 0 || id > stkr__site_count())
    return NULL;
  /* Acquire: pairs with the release store of the slot. */
  return atomic_load_explicit(&g_site_names[id], memory_order_acquire);
}
