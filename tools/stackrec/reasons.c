/*
 * reasons.c: the one catalogue of Apple's required-reason API categories
 * (reasons.h). Sources: Apple's "Describing use of required reason API"
 * (categories, APIs and reason codes as of 2024). On Linux the libc
 * members are recorded by preload/hooks_stat.c (category `reasons`).
 */
#include <string.h>

#include "tools/stackrec/reasons.h"

#define SITE_PREFIX STKR_REASONS_CATEGORY "."

static const char *const file_timestamp[] = {
    /* libc: hooked on Linux (preload/hooks_stat.c) */
    "stat", "fstat", "lstat", "fstatat", "statx",
    /* Apple only */
    "getattrlist", "fgetattrlist", "getattrlistat", "getattrlistbulk",
    "creationDate", "modificationDate", "fileModificationDate",
    "contentModificationDateKey", "creationDateKey", NULL};
static const char *const boot_time[] = {"systemUptime", "mach_absolute_time",
                                        NULL};
static const char *const disk_space[] = {
    /* libc: hooked on Linux */
    "statfs", "fstatfs", "statvfs", "fstatvfs",
    /* Apple only */
    "getattrlist", "volumeAvailableCapacityKey",
    "volumeAvailableCapacityForImportantUsageKey",
    "volumeAvailableCapacityForOpportunisticUsageKey", "volumeTotalCapacityKey",
    "systemFreeSize", "systemSize", NULL};
static const char *const keyboards[] = {"activeInputModes", NULL};
static const char *const user_defaults[] = {"NSUserDefaults", NULL};

const stkr_reason_category stkr_reason_categories[] = {
    {"NSPrivacyAccessedAPICategoryFileTimestamp", "FileTimestamp",
     file_timestamp, "DDA9.1, C617.1, 3B52.1, 0A2A.1"},
    {"NSPrivacyAccessedAPICategorySystemBootTime", "SystemBootTime", boot_time,
     "35F9.1, 8FFB.1, 3D61.1"},
    {"NSPrivacyAccessedAPICategoryDiskSpace", "DiskSpace", disk_space,
     "85F4.1, E174.1, 7D9E.1, B728.1"},
    {"NSPrivacyAccessedAPICategoryActiveKeyboards", "ActiveKeyboards",
     keyboards, "3EC4.1, 54BD.1"},
    {"NSPrivacyAccessedAPICategoryUserDefaults", "UserDefaults", user_defaults,
     "CA92.1, 1C8F.1, C56D.1, AC6B.1"},
};
const size_t stkr_reason_category_count =
    sizeof stkr_reason_categories / sizeof stkr_reason_categories[0];

const stkr_reason_category *stkr_reason_of_site(const char *site) {
  const char *api;
  size_t i, k;

  if (strncmp(site, SITE_PREFIX, sizeof SITE_PREFIX - 1) != 0)
    return NULL;
  api = site + sizeof SITE_PREFIX - 1;
  /* getattrlist reads timestamps or volume capacity, depending on the
   * attributes asked for: the first category listing an API wins, so a
   * hook that knows better records at a site of its own. */
  for (i = 0; i < stkr_reason_category_count; i++)
    for (k = 0; stkr_reason_categories[i].apis[k] != NULL; k++)
      if (strcmp(api, stkr_reason_categories[i].apis[k]) == 0)
        return &stkr_reason_categories[i];
  return NULL;
}

const stkr_reason_category *stkr_reason_by_type(const char *type) {
  size_t i;

  for (i = 0; i < stkr_reason_category_count; i++)
    if (strcmp(type, stkr_reason_categories[i].type) == 0)
      return &stkr_reason_categories[i];
  return NULL;
}
