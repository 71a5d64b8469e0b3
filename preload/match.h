/*
 * match.h: the pure matchers of the LD_PRELOAD hook library: the category
 * table and its list parser, sensitive paths, watched environment names.
 * No recorder, no state: async-signal-safe where marked, no allocation.
 *
 * The one contract of preload/ outside the hook library (//preload:match,
 * visible to //tools:__pkg__): `stackrec record` checks STACKREC_CATEGORIES
 * and STACKREC_ENV_NAMES with these parsers before it runs CMD, and names
 * its summary's categories from this table, so that the tool and the hooks
 * cannot disagree. Everything else of the library is in preload.h
 * (internal: the hooks' state, real functions, stkr__pl_record).
 *
 * Thread-safety: every function is reentrant; a stkr__pl_paths or
 * stkr__pl_names is read-only once set up.
 */
#ifndef STKR_PRELOAD_MATCH_H
#define STKR_PRELOAD_MATCH_H

#include <errno.h> /* the parsers return -EINVAL */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- categories ---------------------------------------------------------- */

enum {
  STKR__PL_CAT_IDENTIFIERS = 0,
  STKR__PL_CAT_NETWORK = 1,
  STKR__PL_CAT_FILES = 2,
  STKR__PL_CAT_DEVICES = 3,
  STKR__PL_CAT_ENVIRONMENT = 4,
  STKR__PL_CAT_REASONS = 5, /* Apple's required-reason APIs (hooks_stat.c) */
  STKR__PL_CAT_COUNT = 6
};
#define STKR__PL_CAT_BIT(c) (1u << (c))
#define STKR__PL_CAT_ALL ((1u << STKR__PL_CAT_COUNT) - 1u)
/* What an unset or empty STACKREC_CATEGORIES records: every category but
 * `reasons`, whose stat calls are too frequent to record unasked (see
 * hooks_stat.c). "all" records them too. */
#define STKR__PL_CAT_DEFAULT (STKR__PL_CAT_ALL & ~STKR__PL_CAT_BIT(STKR__PL_CAT_REASONS))

/* "identifiers", "network", ... for category c (NULL if out of range). */
const char *stkr__pl_cat_name(unsigned c);

/* The names of mask's categories in table order, comma-separated
 * ("identifiers,network,files"): what the recording says it watched
 * (stkr_config.watched). @return the length written, or 0 (buf "") when
 * it does not fit len. */
size_t stkr__pl_cat_list(unsigned mask, char *buf, size_t len);

/*
 * Parse a category list: "all", or names separated by commas
 * ("files,network"). NULL or "" means STKR__PL_CAT_DEFAULT.
 * @return 0 with *mask set, or -EINVAL with a message naming the offending
 *         name and its byte offset in err (always NUL-terminated).
 */
int stkr__pl_parse_categories(const char *s, unsigned *mask, char *err,
                              size_t errlen);

/* ---- sites --------------------------------------------------------------- */

/* Every site of the hook library that has one category: (name, site name).
 * The file hooks' sites, one per category of the path, are hooks_files.c's
 * g_open/g_openat/g_fopen (STKR__PL_FILE_SITES below). A site name is
 * "<category>.<api>". */
#define STKR__PL_SITES(X)                                                      \
  X(getenv, "environment.getenv")                                              \
  X(secure_getenv, "environment.secure_getenv")                                \
  X(gethostname, "identifiers.gethostname")                                    \
  X(uname, "identifiers.uname")                                                \
  X(getifaddrs, "identifiers.getifaddrs")                                      \
  X(ioctl, "identifiers.ioctl")                                                \
  X(connect, "network.connect")                                                \
  X(getaddrinfo, "network.getaddrinfo")                                        \
  X(stat, "reasons.stat")                                                      \
  X(fstat, "reasons.fstat")                                                    \
  X(lstat, "reasons.lstat")                                                    \
  X(fstatat, "reasons.fstatat")                                                \
  X(statx, "reasons.statx")                                                    \
  X(statfs, "reasons.statfs")                                                  \
  X(fstatfs, "reasons.fstatfs")                                                \
  X(statvfs, "reasons.statvfs")                                                \
  X(fstatvfs, "reasons.fstatvfs")

/* The file hooks' sites (hooks_files.c): each API once per category a
 * path can have, X(category, site name). */
#define STKR__PL_FILE_SITES(X, api)                                            \
  X(STKR__PL_CAT_IDENTIFIERS, "identifiers." api)                              \
  X(STKR__PL_CAT_FILES, "files." api)                                          \
  X(STKR__PL_CAT_DEVICES, "devices." api)
#define STKR__PL_FILE_APIS(X) X("open") X("openat") X("fopen")

/* The name of every site the hook library records, by index from 0 (the
 * two tables above); NULL past the last. For `compliance`: a policy's
 * site pattern that matches none of them, in one of the hook library's
 * categories, is likely a typo. */
const char *stkr__pl_known_site(size_t i);

/* ---- sensitive paths ----------------------------------------------------- */

/* What a path is, as the category that records it (+1), or 0 for "not
 * sensitive". Only identifiers, files and devices classify paths. */
#define STKR__PL_PATH_NONE 0u

#define STKR__PL_HOME_MAX 512

typedef struct stkr__pl_paths {
  /* Bit c set: some pattern's path[1] is the byte c ("/e..." -> 'e'). A
   * clear bit rejects the path after two byte loads. */
  uint64_t first[4];
  char home[STKR__PL_HOME_MAX]; /* $HOME without trailing '/'; "" if unset */
  size_t home_len;
} stkr__pl_paths;

/* Set up the matcher for the given $HOME (NULL or "" or "/": no HOME
 * patterns beyond /home/<user> and /root). Never fails: a HOME longer than
 * STKR__PL_HOME_MAX is ignored (/home/<user> and /root still match). */
void stkr__pl_paths_init(stkr__pl_paths *p, const char *home);

/* A pointer the app passed that cannot be read: NULL, or in the first
 * page, which the kernel never maps (mmap_min_addr). The call itself then
 * fails with EFAULT, so a hook must not read it first (QA, session 24:
 * open((char *)8, ...) and connect(fd, (void *)8, 16) died of SIGSEGV
 * under the recorder, and returned EFAULT plainly). A bad pointer
 * elsewhere (an unmapped page) still faults in the hook: telling it apart
 * would cost a system call per event. */
static inline bool stkr__pl_unreadable(const void *p) {
  return (uintptr_t)p < 4096u;
}

/* The class of an absolute path (path[0] == '/'): one not in its plain
 * form (it holds "//", a "." or ".." component) by its plain form alone
 * (common/stkr_path.h: read lexically, none of it looked up), so that
 * "/dev/snd/../../etc/machine-id" is an identifier, not a device. Its
 * bytes are scanned up to STKR__PL_PATH_SCAN_MAX (PATH_MAX, what the
 * kernel takes): one without a NUL there is read as written, as before;
 * one whose plain form does not fit STKR__PL_CLEAN_MAX is not classified. */
#define STKR__PL_PATH_SCAN_MAX 4096
#define STKR__PL_CLEAN_MAX 1024
unsigned stkr__pl_path_class_abs(const stkr__pl_paths *p, const char *path);

/*
 * Classify a path as an open/fopen would see it: STKR__PL_CAT_x + 1, or 0.
 * Only absolute paths are matched (a relative path, or one relative to a
 * directory fd, is not resolved: resolving would cost a system call on
 * every open). One written another way ("/etc//passwd", "/usr/../etc/
 * passwd", as "%s/%s" of "/etc/" makes) is read in its plain form (QA,
 * session 41: none of them was recorded); links are not followed, nor
 * /proc/self/root. Async-signal-safe; no allocation.
 */
static inline unsigned stkr__pl_path_class(const stkr__pl_paths *p,
                                           const char *path) {
  if (stkr__pl_unreadable(path) || path[0] != '/')
    return STKR__PL_PATH_NONE;
  return stkr__pl_path_class_abs(p, path);
}

/* ---- watched environment names -------------------------------------------- */

#define STKR__PL_NAMES_MAX 64
#define STKR__PL_NAMES_CHARS 1024

typedef struct stkr__pl_names {
  uint64_t first[4];  /* bit c: some entry starts with byte c */
  bool all;           /* "*": every name is watched */
  unsigned n;
  struct {
    uint16_t off, len; /* into buf */
    bool prefix;       /* "AWS_*": len bytes are a prefix */
  } e[STKR__PL_NAMES_MAX];
  char buf[STKR__PL_NAMES_CHARS];
} stkr__pl_names;

/* The watch list used when STACKREC_ENV_NAMES is unset or empty. */
extern const char stkr__pl_default_env_names[];

/*
 * Parse a watch list: names separated by commas; a name ending in '*'
 * matches every name with that prefix; "*" alone matches everything.
 * NULL or "" gives the default list.
 * @return 0, or -EINVAL (empty name, '=' in a name, '*' not at the end,
 *         more than STKR__PL_NAMES_MAX names or STKR__PL_NAMES_CHARS bytes)
 *         with a message naming the byte offset in err.
 */
int stkr__pl_names_parse(const char *s, stkr__pl_names *out, char *err,
                         size_t errlen);

/* Is `name` watched? Async-signal-safe; no allocation. */
bool stkr__pl_names_match_slow(const stkr__pl_names *w, const char *name);
static inline bool stkr__pl_names_match(const stkr__pl_names *w,
                                        const char *name) {
  unsigned char c = (unsigned char)name[0];

  if (w->all)
    return true;
  if (!(w->first[c >> 6] & (1ull << (c & 63))))
    return false;
  return stkr__pl_names_match_slow(w, name);
}

#endif /* STKR_PRELOAD_MATCH_H */
