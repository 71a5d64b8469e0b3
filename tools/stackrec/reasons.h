/*
 * reasons.h: Apple's "required-reason" API categories (privacy manifest
 * key NSPrivacyAccessedAPITypes), the APIs in each, and the stackrec hook
 * sites that record them. One table (reasons.c) serves `compliance`,
 * `privacy-manifest` and the documentation (docs/COMPLIANCE.md).
 *
 * A site belongs to a category when its name is one of the category's
 * sites: `reasons.<api>` for every API listed (the names the preload
 * library records on Linux, e.g. reasons.stat, reasons.statfs, and the
 * names an iOS app's own hooks should use, e.g. reasons.systemUptime,
 * reasons.NSUserDefaults), so a site is in at most one category.
 *
 * Thread-safety: read-only data.
 */
#ifndef STKR_REASONS_H
#define STKR_REASONS_H

#include <stddef.h>

/* The category of all their sites (the part before the '.'): what a
 * recording must have watched (stkr_process_info.watched) to show them. */
#define STKR_REASONS_CATEGORY "reasons"

typedef struct stkr_reason_category {
  const char *type;     /* NSPrivacyAccessedAPICategoryFileTimestamp ... */
  const char *short_name; /* "FileTimestamp" */
  /* The APIs Apple lists for it, NULL-terminated; each is recorded at the
   * site "reasons.<api>". */
  const char *const *apis;
  /* Apple's reason codes for a person to choose from (documentation only:
   * a draft manifest never picks one). */
  const char *reason_codes;
} stkr_reason_category;

/* The five categories, in Apple's order. */
extern const stkr_reason_category stkr_reason_categories[];
extern const size_t stkr_reason_category_count;

/* The category a site records, or NULL. */
const stkr_reason_category *stkr_reason_of_site(const char *site);

/* A category by its NSPrivacyAccessedAPIType value, or NULL. */
const stkr_reason_category *stkr_reason_by_type(const char *type);

#endif /* STKR_REASONS_H */
