/*
 * stkr_mark.h: what a mark name is, in one place, for recorder/ (which
 * records marks, stkr_mark), proto/ (which reads them back and writes the
 * marks file of `stackrec mark`) and tools/ (states).
 *
 * A mark is an event at a site whose name is STKR_MARK_PREFIX followed by
 * the mark's name: "mark:consent.granted". Carrying the flag in the site
 * name, rather than in a new SiteDef field, lets every layer that already
 * carries site names (the session file and recovery, segments, `stackrec
 * merge`, `stackrec symbolize`) carry marks untouched. Site names beginning
 * with "mark:" are therefore reserved for marks; the reader strips the
 * prefix and flags the event (stkr_event_view.is_mark).
 *
 * A mark name is 1 to STKR_MARK_NAME_MAX bytes of [A-Za-z0-9._-]: printable
 * in every output format without escaping, and never containing the ':' of
 * the prefix or the spaces that separate the fields of a marks file line.
 *
 * Thread-safety: pure functions.
 */
#ifndef STKR_COMMON_MARK_H
#define STKR_COMMON_MARK_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define STKR_MARK_PREFIX "mark:"
#define STKR_MARK_PREFIX_LEN 5
#ifndef STKR_MARK_NAME_MAX /* also in recorder/stackrec.h */
#define STKR_MARK_NAME_MAX 64
#endif

/* @return true if name[0..len) is a valid mark name (see above). */
static inline bool stkr_mark_name_valid(const char *name, size_t len) {
  size_t i;

  if (name == NULL || len == 0 || len > STKR_MARK_NAME_MAX)
    return false;
  for (i = 0; i < len; i++) {
    char c = name[i];

    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  return true;
}

/* If site is a mark's site name ("mark:NAME" with a valid NAME), @return
 * NAME (a pointer into site); else NULL. */
static inline const char *stkr_mark_from_site(const char *site) {
  if (site == NULL ||
      strncmp(site, STKR_MARK_PREFIX, STKR_MARK_PREFIX_LEN) != 0)
    return NULL;
  site += STKR_MARK_PREFIX_LEN;
  return stkr_mark_name_valid(site, strlen(site)) ? site : NULL;
}

#endif /* STKR_COMMON_MARK_H */
