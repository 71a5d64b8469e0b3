/*
 * config.c: the effective recorder configuration.
 *
 * Precedence (stackrec.h): built-in default < STACKREC_* environment <
 * non-zero struct field. A malformed environment value is an error, not a
 * silent fallback to the default: a preloaded recorder configured only by
 * the environment would otherwise record with settings nobody asked for.
 *
 * Environment rules:
 *  - an unset or empty variable means "not set";
 *  - numbers are decimal; sizes (ring, segment, disk cap) also accept a K, M
 *    or G suffix (binary: 1K = 1024), upper or lower case, optionally
 *    followed by "B"/"iB" ("64KiB" is 65536);
 *  - 0 is rejected where 0 in the struct would mean "use the default"
 *    (everything but STACKREC_SKIP), since "0" in the environment then
 *    cannot mean what its writer meant (e.g. "no disk cap").
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_boot.h"
#include "common/stkr_symcache_dir.h"
#include "flush/flush_internal.h"

#if defined(__APPLE__)
#include <crt_externs.h> /* a dylib reaches environ through this */
#define environ (*_NSGetEnviron())
#else
extern char **environ;
#endif

/* Smallest ring we hand to recorder/, which requires room for four maximal
 * records (max_depth PCs and a payload_max payload; records never split
 * across the ring's end). A smaller request is rounded up, not refused:
 * the ring size is a tuning knob, and the bound depends on two others. */
static size_t min_ring_bytes(unsigned depth, unsigned payload_max) {
  /* A full record (its PCs) is what must fit: recorder/'s own check. */
  size_t rec = sizeof(stkr__record_full) + (size_t)depth * 8 + payload_max +
               STKR__PEVICTED_BYTES + 8;
  size_t min = 4 * rec;
  return min < 4096 ? 4096 : min;
}

static size_t round_pow2(size_t v) {
  size_t p = 1;
  while (p < v && p <= SIZE_MAX / 2) p <<= 1;
  return p;
}

int stkr__parse_size(const char *s, uint64_t *out) {
  const char *p = s;
  uint64_t v = 0, mult = 1;
  if (*p < '0' || *p > '9') return -EINVAL; /* no sign, no blanks */
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -EINVAL;
    v = v * 10 + d;
  }
  switch (*p) {
  case 'k': case 'K': mult = 1ull << 10; p++; break;
  case 'm': case 'M': mult = 1ull << 20; p++; break;
  case 'g': case 'G': mult = 1ull << 30; p++; break;
  default: break;
  }
  if (mult != 1) {
    if (p[0] == 'i' && p[1] == 'B') p += 2;
    else if (p[0] == 'B') p++;
  }
  if (*p != '\0') return -EINVAL;
  if (v > UINT64_MAX / mult) return -EINVAL;
  *out = v * mult;
  return 0;
}

static int parse_uint(const char *s, uint64_t *out) {
  const char *p = s;
  uint64_t v = 0;
  if (*p < '0' || *p > '9') return -EINVAL;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -EINVAL;
    v = v * 10 + d;
  }
  if (*p != '\0') return -EINVAL;
  *out = v;
  return 0;
}

/* The STACKREC_* variables stkr_config_freeze_env took: "NAME=VALUE"
 * strings, NULL-terminated, in one block; NULL until then. Set once
 * (release, by the CAS), never changed or freed, so a reader (acquire)
 * may keep what it found. */
static _Atomic(char **) g_frozen_env;

int stkr_config_freeze_env(void) {
  static const char prefix[] = "STACKREC_";
  size_t n = 0, bytes = 0, k = 0;
  char **v, **e, **none = NULL, *p;

  for (e = environ; e != NULL && *e != NULL; e++)
    if (strncmp(*e, prefix, sizeof prefix - 1) == 0) {
      n++;
      bytes += strlen(*e) + 1;
    }
  if ((v = malloc((n + 1) * sizeof *v + bytes)) == NULL) return -ENOMEM;
  p = (char *)(v + n + 1);
  for (e = environ; e != NULL && *e != NULL && k < n; e++)
    if (strncmp(*e, prefix, sizeof prefix - 1) == 0) {
      size_t len = strlen(*e) + 1;
      memcpy(p, *e, len);
      v[k++] = p;
      p += len;
    }
  v[k] = NULL;
  if (!atomic_compare_exchange_strong_explicit(&g_frozen_env, &none, v,
                                               memory_order_acq_rel,
                                               memory_order_acquire))
    free(v); /* frozen already: the first copy stays */
  return 0;
}

const char *stkr_config_env(const char *name) {
  char **v = atomic_load_explicit(&g_frozen_env, memory_order_acquire);
  size_t n;

  if (name == NULL) return NULL; /* as unset (QA, session 39: SIGSEGV) */
  n = strlen(name);
  if (v == NULL) return getenv(name);
  for (; *v != NULL; v++)
    if (strncmp(*v, name, n) == 0 && (*v)[n] == '=') return *v + n + 1;
  return NULL;
}

static const char *env(const char *name) {
  const char *v = stkr_config_env(name);
  return (v && *v) ? v : NULL;
}

/* Set only by stkr_config_check_env, on its own thread, for the length of
 * its call: bad_env then writes the message here instead of logging it. */
static __thread char *t_check_why;
static __thread size_t t_check_len;

static int bad_env(const char *name, const char *value, const char *why) {
  if (t_check_why != NULL) {
    snprintf(t_check_why, t_check_len, "invalid %s=\"%s\": %s", name, value,
             why);
    return -EINVAL;
  }
  /* Not rate-limited: stkr_init runs once and the user must see this. */
  stkr__log(STKR__LOG_CONFIG, "invalid %s=\"%s\": %s", name, value, why);
  return -EINVAL;
}

static int bad_field(const char *name, unsigned long long v, const char *why) {
  stkr__log(STKR__LOG_CONFIG, "invalid stkr_config.%s=%llu: %s", name, v, why);
  return -EINVAL;
}

/* Read a numeric variable into *out if set. `size` enables suffixes;
 * values outside [lo, hi] are rejected. */
static int env_num(const char *name, bool size, uint64_t lo, uint64_t hi,
                   uint64_t *out, bool *set) {
  const char *v = env(name);
  uint64_t x;
  *set = false;
  if (!v) return 0;
  if ((size ? stkr__parse_size(v, &x) : parse_uint(v, &x)) != 0)
    return bad_env(name, v, size ? "expected a number with an optional K, M "
                                   "or G suffix"
                                 : "expected a decimal number");
  if (x < lo || x > hi) {
    char why[96];
    snprintf(why, sizeof why, "out of range [%llu, %llu]",
             (unsigned long long)lo, (unsigned long long)hi);
    return bad_env(name, v, why);
  }
  *out = x;
  *set = true;
  return 0;
}

/* The 0.3 layout, what size 0 means: every field up to exit_ms. Fields
 * are only ever appended, so this stays what it is as the struct grows. */
#define CONFIG_SIZE_0_3 (offsetof(stkr_config, exit_ms) + sizeof(unsigned))

/* Copy the caller's config into *own, reading only the `size` bytes the
 * caller declared (see "ABI rules" in stackrec.h); fields it does not know
 * stay 0, their default. A caller newer than this library may pass a larger
 * struct as long as every field this library does not know is unset. */
static int config_copy_sized(const stkr_config *in, stkr_config *own) {
  size_t size = in->size ? in->size : CONFIG_SIZE_0_3;

  memset(own, 0, sizeof *own);
  if (size < CONFIG_SIZE_0_3)
    return bad_field("size", size, "smaller than the 0.3 layout");
  if (size > sizeof *own) {
    const unsigned char *extra = (const unsigned char *)in + sizeof *own;
    for (size_t i = 0; i < size - sizeof *own; i++)
      if (extra[i] != 0) {
        stkr__log(STKR__LOG_CONFIG,
                  "stkr_config.size=%zu: byte %zu is set, but this library "
                  "(%s) knows only %zu bytes of stkr_config",
                  size, sizeof *own + i, STKR_VERSION_STRING, sizeof *own);
        return -E2BIG;
      }
    size = sizeof *own;
  }
  memcpy(own, in, size);
  return 0;
}

/* The defaults, before the environment and the struct. */
static const stkr__fconfig k_defaults = {
    .set =
        {
            .ring_bytes = STKR__DEFAULT_RING_BYTES,
            .max_depth = STKR__DEFAULT_DEPTH,
            .skip_frames = 0,
            .flush_interval_ms = STKR__DEFAULT_FLUSH_MS,
            .segment_bytes = STKR__DEFAULT_SEGMENT_BYTES,
            .disk_cap_bytes = STKR__DEFAULT_DISK_CAP_BYTES,
            .payload_max = STKR__DEFAULT_PAYLOAD_MAX,
            .fork_mode = STKR_FORK_DISABLE,
            .symbolize = STKR_SYMBOLIZE_INPROC,
            .exit_ms = STKR__DEFAULT_EXIT_MS,
            .unwind = STKR_UNWIND_FP,
            .stack_table_bytes = STKR__DEFAULT_STACK_TABLE_BYTES,
        },
};

/* The STACKREC_* variables over the defaults (*dir: STACKREC_DIR, owned by
 * the environment). @return 0, or -EINVAL after logging which variable. */
static int config_from_env(stkr__fconfig *c, const char **dir) {
  uint64_t x;
  bool set;
  int err;
  const char *v;

  /* Upper bounds keep values within the struct's types and
   * the recorder's hard caps; a 1 TiB ring is not a typo we want to mmap. */
  if ((v = env("STACKREC_DIR")) != NULL) *dir = v;
  if ((err = env_num("STACKREC_RING_BYTES", true, 1, 1ull << 30, &x, &set)))
    return err;
  if (set) c->set.ring_bytes = (size_t)x;
  if ((err = env_num("STACKREC_DEPTH", false, 1, STKR_MAX_DEPTH, &x, &set)))
    return err;
  if (set) c->set.max_depth = (unsigned)x;
  if ((err = env_num("STACKREC_SKIP", false, 0, STKR_MAX_DEPTH, &x, &set)))
    return err;
  if (set) c->set.skip_frames = (unsigned)x;
  if ((err = env_num("STACKREC_FLUSH_MS", false, 1, 3600000, &x, &set)))
    return err;
  if (set) c->set.flush_interval_ms = (unsigned)x;
  /* At most 1 GiB: what `stackrec symbolize` reads of a segment (QA,
   * session 40: a 1.2 GB segment could be recorded but not symbolized). */
  if ((err = env_num("STACKREC_SEGMENT_BYTES", true, 1, 1ull << 30, &x, &set)))
    return err;
  if (set) c->set.segment_bytes = x;
  if ((err = env_num("STACKREC_DISK_CAP_BYTES", true, 1, UINT64_MAX, &x,
                     &set)))
    return err;
  if (set) c->set.disk_cap_bytes = x;
  if ((err = env_num("STACKREC_PAYLOAD_MAX", true, 1, STKR_MAX_PAYLOAD, &x,
                     &set)))
    return err;
  if (set) c->set.payload_max = (unsigned)x;
  /* No "unbounded" value: an exit that waits on the recorder is exactly
   * what the budget prevents (stackrec.h). */
  if ((err = env_num("STACKREC_EXIT_MS", false, 1, STKR__MAX_EXIT_MS, &x,
                     &set)))
    return err;
  if (set) c->set.exit_ms = (unsigned)x;
  if ((err = env_num("STACKREC_STACK_TABLE_BYTES", true,
                     STKR__MIN_STACK_TABLE_BYTES, STKR__MAX_STACK_TABLE_BYTES,
                     &x, &set)))
    return err;
  if (set) c->set.stack_table_bytes = x;
  if ((v = env("STACKREC_FORK")) != NULL) {
    if (strcasecmp(v, "disable") == 0) c->set.fork_mode = STKR_FORK_DISABLE;
    else if (strcasecmp(v, "follow") == 0) c->set.fork_mode = STKR_FORK_FOLLOW;
    else return bad_env("STACKREC_FORK", v, "expected \"disable\" or \"follow\"");
  }
  if ((v = env("STACKREC_UNWIND")) != NULL) {
    if (strcasecmp(v, "fp") == 0) c->set.unwind = STKR_UNWIND_FP;
    else if (strcasecmp(v, "tables") == 0) c->set.unwind = STKR_UNWIND_TABLES;
    else return bad_env("STACKREC_UNWIND", v, "expected \"fp\" or \"tables\"");
  }
  if ((v = env("STACKREC_SYMBOLIZE")) != NULL) {
    if (strcasecmp(v, "inproc") == 0) c->set.symbolize = STKR_SYMBOLIZE_INPROC;
    else if (strcasecmp(v, "offline") == 0)
      c->set.symbolize = STKR_SYMBOLIZE_OFFLINE;
    else if (strcasecmp(v, "none") == 0) c->set.symbolize = STKR_SYMBOLIZE_NONE;
    else return bad_env("STACKREC_SYMBOLIZE", v,
                        "expected \"inproc\", \"offline\" or \"none\"");
  }
  /* Read by the sampler at its first use: refused here, where stkr_init
   * and record's check say so (QA, session 23: accepted, and only
   * stkr_thread_self failed later, silently). */
  if ((v = env("STACKREC_SAMPLE_SIGNAL")) != NULL &&
      stkr__sample_signal_parse(v) < 0)
    return bad_env("STACKREC_SAMPLE_SIGNAL", v,
                   "expected N, RTMIN+N or RTMAX-N, a real-time signal");
  return 0;
}

/* stkr_config.watched into c->watched: category names ([a-z0-9_-]) and
 * commas, shorter than STKR_WATCHED_MAX. The struct's pointer is not kept
 * (c->set.watched stays NULL): the caller's string may go after init. */
static int watched_from_struct(const char *w, stkr__fconfig *c) {
  size_t i;

  if (w == NULL) return 0;
  for (i = 0; w[i] != '\0'; i++) {
    char ch = w[i];
    if (i + 1 >= sizeof c->watched) {
      stkr__log(STKR__LOG_CONFIG, "invalid stkr_config.watched: longer than "
                "%d bytes", STKR_WATCHED_MAX - 1);
      return -EINVAL;
    }
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '-' || ch == ',')) {
      stkr__log(STKR__LOG_CONFIG, "invalid stkr_config.watched: byte %zu is "
                "not one of [a-z0-9_-,]", i);
      return -EINVAL;
    }
  }
  memcpy(c->watched, w, i + 1);
  return 0;
}

/* The caller's struct over the environment: set fields win (*dir: the
 * caller's string). @return 0, or -EINVAL after logging which field. */
static int config_from_struct(const stkr_config *in, stkr__fconfig *c,
                              const char **dir) {
  if (in->dir) {
    if (!*in->dir) {
      stkr__log(STKR__LOG_CONFIG, "invalid stkr_config.dir: empty string");
      return -EINVAL;
    }
    *dir = in->dir;
  }
  /* Each set field wins when `ok` holds, else the call fails naming it. */
#define TAKE(field, ok, why)                                                   \
  do {                                                                         \
    if (in->field) {                                                           \
      if (!(ok))                                                               \
        return bad_field(#field, (unsigned long long)in->field, why);          \
      c->set.field = in->field;                                                \
    }                                                                          \
  } while (0)
  TAKE(ring_bytes, in->ring_bytes <= (1ull << 30), "at most 1 GiB");
  TAKE(max_depth, in->max_depth <= STKR_MAX_DEPTH, "above STKR_MAX_DEPTH");
  TAKE(skip_frames, in->skip_frames <= STKR_MAX_DEPTH, "above STKR_MAX_DEPTH");
  TAKE(flush_interval_ms, in->flush_interval_ms <= 3600000, "above one hour");
  TAKE(segment_bytes, in->segment_bytes <= (1ull << 30), "at most 1 GiB");
  TAKE(disk_cap_bytes, true, "");
  TAKE(payload_max, in->payload_max <= STKR_MAX_PAYLOAD,
       "above STKR_MAX_PAYLOAD");
  TAKE(fork_mode,
       in->fork_mode == STKR_FORK_DISABLE || in->fork_mode == STKR_FORK_FOLLOW,
       "expected STKR_FORK_DISABLE or STKR_FORK_FOLLOW");
  TAKE(symbolize,
       in->symbolize == STKR_SYMBOLIZE_INPROC ||
           in->symbolize == STKR_SYMBOLIZE_OFFLINE ||
           in->symbolize == STKR_SYMBOLIZE_NONE,
       "expected STKR_SYMBOLIZE_INPROC, _OFFLINE or _NONE");
  TAKE(unwind,
       in->unwind == STKR_UNWIND_FP || in->unwind == STKR_UNWIND_TABLES,
       "expected STKR_UNWIND_FP or STKR_UNWIND_TABLES");
  TAKE(exit_ms, in->exit_ms <= STKR__MAX_EXIT_MS, "above one minute");
  TAKE(stack_table_bytes,
       in->stack_table_bytes >= STKR__MIN_STACK_TABLE_BYTES &&
           in->stack_table_bytes <= STKR__MAX_STACK_TABLE_BYTES,
       "expected 64 KiB to 1 GiB");
#undef TAKE
  return watched_from_struct(in->watched, c);
}

/* path made absolute against the working directory now (the worker opens
 * caches long after, when the app may have changed directory), strdup'd.
 * A working directory that cannot be had leaves it relative.
 * @return 0 or -ENOMEM. */
static int absolute_dup(const char *path, char **out) {
  char cwd[PATH_MAX];
  size_t n;
  if (path[0] == '/' || getcwd(cwd, sizeof cwd) == NULL) {
    *out = strdup(path);
    return *out ? 0 : -ENOMEM;
  }
  n = strlen(cwd) + 1 + strlen(path) + 1;
  if ((*out = malloc(n)) == NULL) return -ENOMEM;
  snprintf(*out, n, "%s/%s", cwd, path);
  return 0;
}

int stkr__config_build(const stkr_config *in, stkr__fconfig *out) {
  stkr_config own;
  stkr__fconfig c;
  int err;
  const char *dir = STKR__DEFAULT_DIR, *v;
  char cache_dir[PATH_MAX];

  memset(&own, 0, sizeof own);
  if (in && (err = config_copy_sized(in, &own)) < 0) return err;
  c = k_defaults;
  if ((err = config_from_env(&c, &dir)) != 0) return err;
  if ((err = config_from_struct(&own, &c, &dir)) != 0) return err;

  /* Rounded up to a power of two (the ring masks offsets) and to a size
   * that fits the largest record twice. */
  if (c.set.ring_bytes < min_ring_bytes(c.set.max_depth, c.set.payload_max))
    c.set.ring_bytes = min_ring_bytes(c.set.max_depth, c.set.payload_max);
  c.set.ring_bytes = round_pow2(c.set.ring_bytes);

  c.dir = strdup(dir);
  if (!c.dir) return -ENOMEM;
  {
    struct stat root;
    if (stat("/", &root) == 0) {
      c.root_dev = (uint64_t)root.st_dev;
      c.root_ino = (uint64_t)root.st_ino;
    }
  }
  if ((v = env("STACKREC_APP_PATHS")) != NULL && !(c.app_paths = strdup(v))) {
    free(c.dir);
    return -ENOMEM;
  }
  /* Read by inproc symbolization only; any other mode never opens it. A
   * directory that does not exist or holds no cache for an image is no
   * error: that image's DWARF is read as before. */
  if (c.set.symbolize == STKR_SYMBOLIZE_INPROC &&
      stkr_symcache_dir_own(cache_dir, sizeof cache_dir,
                            stkr_config_env("STACKREC_SYMCACHE")) != NULL &&
      (err = absolute_dup(cache_dir, &c.symcache_dir)) < 0) {
    stkr__config_free(&c);
    return err;
  }
  *out = c;
  return 0;
}

static int dup_or_null(const char *s, char **out) {
  *out = s ? strdup(s) : NULL;
  return s && !*out ? -ENOMEM : 0;
}

int stkr__config_dup(const stkr__fconfig *src, stkr__fconfig *dst) {
  *dst = *src;
  dst->app_paths = dst->symcache_dir = NULL;
  if ((dst->dir = strdup(src->dir)) == NULL ||
      dup_or_null(src->app_paths, &dst->app_paths) != 0 ||
      dup_or_null(src->symcache_dir, &dst->symcache_dir) != 0) {
    stkr__config_free(dst);
    return -ENOMEM;
  }
  return 0;
}

unsigned stkr_version(void) { return STKR_VERSION_NUMBER; }

const char *stkr_version_string(void) { return STKR_VERSION_STRING; }

int stkr_config_check_env(char *why, size_t len) {
  stkr__fconfig c;
  char none[1];
  int err;

  /* The same parse stkr_init does, so a launcher (stackrec record) refuses
   * exactly what the recorder would. */
  t_check_why = (why != NULL && len != 0) ? why : none;
  t_check_len = (why != NULL && len != 0) ? len : sizeof none;
  t_check_why[0] = '\0';
  err = stkr__config_build(NULL, &c);
  t_check_why = NULL;
  t_check_len = 0;
  if (err == 0) stkr__config_free(&c);
  return err;
}

void stkr__config_free(stkr__fconfig *c) {
  free(c->dir);
  c->dir = NULL;
  free(c->app_paths);
  c->app_paths = NULL;
  free(c->symcache_dir);
  c->symcache_dir = NULL;
}

/* The names fit their fields: arch and mode names are short, process_name
 * is as long as stkr__process_name's buffer. */
void stkr__session_template(const stkr__fconfig *cfg,
                            const stkr__fork_origin *origin,
                            stkr_sessfile_hdr *s) {
  const stkr_config *set = &cfg->set;

  memset(s, 0, sizeof *s);
  s->pid = (uint32_t)getpid();
  if (origin != NULL) {
    s->parent_pid = origin->parent_pid;
    s->forked_from_pid = origin->forked_from_pid;
    s->fork_mono_ns = origin->fork_mono_ns;
  }
  s->start_mono_ns = stkr__clock_mono_ns();
  s->start_wall_ns = stkr__clock_wall_ns();
  s->process_start = stkr__process_start();
  s->os_parent_pid = (uint32_t)getppid();
  {
    stkr_clock_id clk; /* which CLOCK_MONOTONIC: common/stkr_boot.h */
    stkr_clock_id_read(&clk);
    if (clk.have_boot) memcpy(s->boot_id, clk.boot, sizeof s->boot_id);
    s->mono_offset_ns = clk.mono_offset_ns;
  }
  /* One id for the session's segments and its ring files (ringfile.c). */
  s->session_id = stkr__session_id_new();
  stkr__process_name(s->process_name, sizeof s->process_name);
  snprintf(s->arch, sizeof s->arch, "%s", stkr__arch_name());
  snprintf(s->symbolize, sizeof s->symbolize, "%s",
           stkr__symbolize_mode_name(set->symbolize));
#define STKR__COPY(f) s->f = set->f;
  STKR_SESS_CONFIG_FIELDS(STKR__COPY)
#undef STKR__COPY
  memcpy(s->watched, cfg->watched, sizeof s->watched);
}
