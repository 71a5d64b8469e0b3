/*
 * match.c: what the hooks consider sensitive: paths, environment names and
 * category lists. Pure functions over static tables; no recorder, no
 * allocation, async-signal-safe matching (the hooks may run in signal
 * handlers).
 *
 * Cost model: every open/fopen/getenv of the process passes through here,
 * and nearly all of them are not sensitive. A path is rejected after two
 * byte loads unless its second byte is the second byte of some pattern
 * ('e' for /etc/..., 'd' for /dev/..., 'h' for /home/..., the second byte
 * of $HOME, ...); a name after one byte load unless some watched name
 * starts with its first byte. Only then do we compare strings.
 *
 * The catalogue (keep preload/README.md in sync):
 *   identifiers  /etc/machine-id, /var/lib/dbus/machine-id,
 *                /sys/class/net/<if>/address (MAC address),
 *                /sys/class/dmi/id/{product_uuid,product_serial,board_serial}
 *                and the same under /sys/devices/virtual/dmi/id/
 *   files        /etc/shadow, /etc/gshadow, /etc/passwd,
 *                /etc/ssh/ssh_host_<...> (host keys); under a home directory
 *                ($HOME, /home/<user>, /root): .ssh, .gnupg, .mozilla,
 *                .config/google-chrome, .config/chromium,
 *                .config/BraveSoftware, snap/firefox,
 *                .local/share/keyrings, .pki/nssdb, .password-store
 *   devices      /dev/video<N>, anything under /dev/snd/ and /dev/v4l/
 */
#include <stdio.h>
#include <string.h>

#include "preload/match.h"

#include "common/stkr_path.h"

static const char *const k_cat_names[STKR__PL_CAT_COUNT] = {
    "identifiers", "network", "files", "devices", "environment", "reasons"};

const char *stkr__pl_cat_name(unsigned c) {
  return c < STKR__PL_CAT_COUNT ? k_cat_names[c] : NULL;
}

size_t stkr__pl_cat_list(unsigned mask, char *buf, size_t len) {
  size_t at = 0;
  unsigned c;

  if (len == 0) return 0;
  buf[0] = '\0';
  for (c = 0; c < STKR__PL_CAT_COUNT; c++) {
    size_t n = strlen(k_cat_names[c]) + (at != 0);
    if (!(mask & STKR__PL_CAT_BIT(c))) continue;
    if (at + n >= len) return 0;
    snprintf(buf + at, len - at, "%s%s", at != 0 ? "," : "", k_cat_names[c]);
    at += n;
  }
  return at;
}

/* ---- paths ------------------------------------------------------------------ */

enum {
  K_EXACT,  /* the whole path */
  K_PREFIX, /* path starts with the pattern */
  K_DIR,    /* the pattern itself, or anything below it ("x" or "x/...") */
  K_IFADDR  /* "/sys/class/net/" + one component + "/address" */
};

typedef struct pattern {
  const char *s;
  unsigned char len, kind, cat;
} pattern;

#define P(str, kind, cat) {str, sizeof(str) - 1, kind, cat}
/* The machine's identifying DMI files, under either of its directories. */
#define DMI_IDS(dir)                                                       \
  P(dir "product_uuid", K_EXACT, STKR__PL_CAT_IDENTIFIERS),                \
      P(dir "product_serial", K_EXACT, STKR__PL_CAT_IDENTIFIERS),          \
      P(dir "board_serial", K_EXACT, STKR__PL_CAT_IDENTIFIERS)

/* Absolute patterns. */
static const pattern k_abs[] = {
    P("/etc/machine-id", K_EXACT, STKR__PL_CAT_IDENTIFIERS),
    P("/var/lib/dbus/machine-id", K_EXACT, STKR__PL_CAT_IDENTIFIERS),
    P("/sys/class/net/", K_IFADDR, STKR__PL_CAT_IDENTIFIERS),
    DMI_IDS("/sys/class/dmi/id/"),
    DMI_IDS("/sys/devices/virtual/dmi/id/"), /* where the class links to */
    P("/etc/shadow", K_EXACT, STKR__PL_CAT_FILES),
    P("/etc/gshadow", K_EXACT, STKR__PL_CAT_FILES),
    P("/etc/passwd", K_EXACT, STKR__PL_CAT_FILES),
    P("/etc/ssh/ssh_host_", K_PREFIX, STKR__PL_CAT_FILES),
    P("/dev/video", K_PREFIX, STKR__PL_CAT_DEVICES),
    P("/dev/snd/", K_PREFIX, STKR__PL_CAT_DEVICES),
    P("/dev/v4l/", K_PREFIX, STKR__PL_CAT_DEVICES),
};

/* Relative to a home directory; all K_DIR, all files (H says it once, so a
 * new entry cannot differ by mistake). */
#define H(str) P(str, K_DIR, STKR__PL_CAT_FILES)
static const pattern k_home[] = {
    H(".ssh"),
    H(".gnupg"),
    H(".mozilla"),
    H(".config/google-chrome"),
    H(".config/chromium"),
    H(".config/BraveSoftware"),
    H("snap/firefox"),
    H(".local/share/keyrings"),
    H(".pki/nssdb"),
    H(".password-store"),
};

#undef H
#undef DMI_IDS
#undef P

#define N_ABS (sizeof k_abs / sizeof k_abs[0])
#define N_HOME (sizeof k_home / sizeof k_home[0])

static void set_bit(uint64_t *bits, unsigned char c) {
  bits[c >> 6] |= 1ull << (c & 63);
}

void stkr__pl_paths_init(stkr__pl_paths *p, const char *home) {
  size_t i, len;

  memset(p, 0, sizeof *p);
  for (i = 0; i < N_ABS; i++)
    set_bit(p->first, (unsigned char)k_abs[i].s[1]);
  set_bit(p->first, 'h'); /* /home/<user>/... */
  set_bit(p->first, 'r'); /* /root/... */
  if (home == NULL || home[0] != '/')
    return;
  /* In its plain form, as the paths are read ("/srv//me/" is "/srv/me"). */
  char plain[sizeof p->home];
  len = stkr_path_lexical(home, plain, sizeof plain);
  if (len <= 1)
    return; /* "/" would make every path a home path; too long: ignored */
  memcpy(p->home, plain, len);
  p->home[len] = '\0';
  p->home_len = len;
  set_bit(p->first, (unsigned char)p->home[1]);
}

static bool match_one(const pattern *pt, const char *s) {
  if (strncmp(s, pt->s, pt->len) != 0)
    return false;
  switch (pt->kind) {
  case K_EXACT:
    return s[pt->len] == '\0';
  case K_PREFIX:
    return true;
  case K_DIR:
    return s[pt->len] == '\0' || s[pt->len] == '/';
  case K_IFADDR: {
    const char *slash = strchr(s + pt->len, '/');
    return slash != NULL && slash != s + pt->len &&
           strcmp(slash, "/address") == 0;
  }
  }
  return false;
}

/* `tail` is what follows "<home>/". */
static unsigned home_class(const char *tail) {
  size_t i;

  /* Every home pattern starts with '.' or 's'. */
  if (tail[0] != '.' && tail[0] != 's')
    return STKR__PL_PATH_NONE;
  for (i = 0; i < N_HOME; i++)
    if (k_home[i].s[0] == tail[0] && k_home[i].s[1] == tail[1] &&
        match_one(&k_home[i], tail))
      return k_home[i].cat + 1u;
  return STKR__PL_PATH_NONE;
}

/* The class of a path in its plain form whose first byte after '/' passed
 * the filter (stkr__pl_paths.first). */
static unsigned class_slow(const stkr__pl_paths *p, const char *path) {
  size_t i;

  if (p->home_len != 0 && strncmp(path, p->home, p->home_len) == 0 &&
      path[p->home_len] == '/') {
    unsigned c = home_class(path + p->home_len + 1);
    if (c != STKR__PL_PATH_NONE)
      return c;
  }
  if (strncmp(path, "/home/", 6) == 0) {
    const char *slash = strchr(path + 6, '/');
    return slash != NULL && slash != path + 6 ? home_class(slash + 1)
                                              : STKR__PL_PATH_NONE;
  }
  if (strncmp(path, "/root/", 6) == 0)
    return home_class(path + 6);
  for (i = 0; i < N_ABS; i++)
    if (k_abs[i].s[1] == path[1] && match_one(&k_abs[i], path))
      return k_abs[i].cat + 1u;
  return STKR__PL_PATH_NONE;
}

/* The class of path's plain form. Apart, and not inlined, so that its
 * buffer is on the stack only for a path that needs it: an open of any
 * other path costs a thread with little stack left nothing more. */
__attribute__((noinline)) static unsigned
class_plain(const stkr__pl_paths *p, const char *path) {
  char buf[STKR__PL_CLEAN_MAX];

  if (stkr_path_lexical(path, buf, sizeof buf) == 0)
    return STKR__PL_PATH_NONE;
  unsigned char c = (unsigned char)buf[1];
  if (!(p->first[c >> 6] & (1ull << (c & 63))))
    return STKR__PL_PATH_NONE;
  return class_slow(p, buf);
}

unsigned stkr__pl_path_class_abs(const stkr__pl_paths *p, const char *path) {
  unsigned char c;

  /* One scan of the path's bytes on every open of an absolute path. */
  if (stkr_path_unclean(path, STKR__PL_PATH_SCAN_MAX))
    return class_plain(p, path);
  c = (unsigned char)path[1];
  if (!(p->first[c >> 6] & (1ull << (c & 63))))
    return STKR__PL_PATH_NONE;
  return class_slow(p, path);
}

/* ---- environment names --------------------------------------------------- */

/* Names that identify the user or lead to secrets. */
const char stkr__pl_default_env_names[] =
    "HOME,USER,LOGNAME,SSH_AUTH_SOCK,GNUPGHOME,XAUTHORITY,"
    "DBUS_SESSION_BUS_ADDRESS";

static int names_err(char *err, size_t errlen, const char *s, size_t off,
                     const char *why) {
  /* The value last, and cut: the reason must survive a long list. */
  snprintf(err, errlen, "invalid STACKREC_ENV_NAMES: %s at offset %zu of "
           "\"%.80s%s\"", why, off, s, strlen(s) > 80 ? "..." : "");
  return -EINVAL;
}

int stkr__pl_names_parse(const char *s, stkr__pl_names *out, char *err,
                         size_t errlen) {
  size_t pos = 0, used = 0;

  if (errlen > 0)
    err[0] = '\0';
  memset(out, 0, sizeof *out);
  if (s == NULL || s[0] == '\0')
    s = stkr__pl_default_env_names;
  for (;;) {
    size_t start = pos, len;
    bool prefix = false;

    while (s[pos] != '\0' && s[pos] != ',') {
      if (s[pos] == '=')
        return names_err(err, errlen, s, pos, "'=' in a name");
      if (s[pos] == '*' && s[pos + 1] != '\0' && s[pos + 1] != ',')
        return names_err(err, errlen, s, pos, "'*' not at the end of a name");
      pos++;
    }
    len = pos - start;
    if (len == 0)
      return names_err(err, errlen, s, start, "empty name");
    if (s[pos - 1] == '*') {
      prefix = true;
      len--;
    }
    if (prefix && len == 0) {
      out->all = true;
    } else {
      if (out->n == STKR__PL_NAMES_MAX)
        return names_err(err, errlen, s, start, "more than 64 names");
      if (used + len + 1 > sizeof out->buf)
        return names_err(err, errlen, s, start, "list longer than 1023 bytes");
      memcpy(out->buf + used, s + start, len);
      out->buf[used + len] = '\0';
      out->e[out->n].off = (uint16_t)used;
      out->e[out->n].len = (uint16_t)len;
      out->e[out->n].prefix = prefix;
      out->n++;
      used += len + 1;
      set_bit(out->first, (unsigned char)s[start]);
    }
    if (s[pos] == '\0')
      return 0;
    pos++; /* the comma */
  }
}

bool stkr__pl_names_match_slow(const stkr__pl_names *w, const char *name) {
  unsigned i;

  for (i = 0; i < w->n; i++) {
    const char *e = w->buf + w->e[i].off;
    size_t len = w->e[i].len;
    if (strncmp(name, e, len) == 0 && (w->e[i].prefix || name[len] == '\0'))
      return true;
  }
  return false;
}

/* ---- categories ---------------------------------------------------------- */

int stkr__pl_parse_categories(const char *s, unsigned *mask, char *err,
                              size_t errlen) {
  size_t pos = 0;
  unsigned m = 0, c;

  if (errlen > 0)
    err[0] = '\0';
  if (s == NULL || s[0] == '\0') {
    *mask = STKR__PL_CAT_DEFAULT;
    return 0;
  }
  if (strcmp(s, "all") == 0) {
    *mask = STKR__PL_CAT_ALL;
    return 0;
  }
  for (;;) {
    size_t start = pos, len;

    while (s[pos] != '\0' && s[pos] != ',')
      pos++;
    len = pos - start;
    if (len == 3 && strncmp(s + start, "all", 3) == 0) {
      m |= STKR__PL_CAT_ALL;
      goto next;
    }
    for (c = 0; c < STKR__PL_CAT_COUNT; c++)
      if (strlen(k_cat_names[c]) == len &&
          strncmp(s + start, k_cat_names[c], len) == 0)
        break;
    if (c == STKR__PL_CAT_COUNT) {
      snprintf(err, errlen,
               "invalid category \"%.*s\" at offset %zu of STACKREC_CATEGORIES"
               " (known: identifiers, network, files, devices, environment, "
               "reasons, all)",
               len > 40 ? 40 : (int)len, s + start, start);
      return -EINVAL;
    }
    m |= STKR__PL_CAT_BIT(c);
  next:
    if (s[pos] == '\0')
      break;
    pos++;
  }
  *mask = m;
  return 0;
}

/* ---- sites --------------------------------------------------------------- */

#define KNOWN_NAME(sym, name) name,
#define KNOWN_FILE_NAME(cat, name) name,
#define KNOWN_FILE_API(api) STKR__PL_FILE_SITES(KNOWN_FILE_NAME, api)
static const char *const g_known_sites[] = {
    STKR__PL_SITES(KNOWN_NAME) STKR__PL_FILE_APIS(KNOWN_FILE_API)};
#undef KNOWN_NAME
#undef KNOWN_FILE_NAME
#undef KNOWN_FILE_API

const char *stkr__pl_known_site(size_t i) {
  return i < sizeof g_known_sites / sizeof g_known_sites[0] ? g_known_sites[i]
                                                            : NULL;
}
