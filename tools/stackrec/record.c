/*
 * record.c: `stackrec record`: run a command under the privacy hooks
 * (libstackrec_preload.so, see preload/README.md) and summarize what it
 * touched.
 *
 * The command runs as our child with LD_PRELOAD naming the hook library
 * and STACKREC_DIR an absolute recording directory, so every process of
 * its tree (forked or exec'd, whatever its working directory) writes its
 * own files into the same directory. We wait for it, then read the
 * directory with the public reader and print the summary on stderr (stdout
 * belongs to the command). Exit status: the command's (128 + signal if it
 * was killed), or 125/126/127 when it could not be run, as timeout(1) and
 * env(1) do, so a script cannot mistake our failure for the command's.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/stackrec/cli.h"

#define REC_FAILED 125     /* stackrec record itself failed */
#define REC_CANNOT_EXEC 126
#define REC_NOT_FOUND 127

#define PRELOAD_NAME "libstackrec_preload.so"

static const char record_help[] =
    "Usage: stackrec record [-o DIR] [--depth N] [--categories LIST] [-q]\n"
    "                       [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with the privacy hooks preloaded (" PRELOAD_NAME ") and\n"
    "record the call stack of every sensitive libc call it makes, in every\n"
    "process of its tree; then print a summary on stderr: events per\n"
    "category and API, the payloads (paths, addresses, names), distinct\n"
    "stacks, drops, and for each API its most frequent stack as\n"
    "image+offset return addresses.\n"
    "\n"
    "Categories: identifiers (machine-id, MAC, hostname, uname), network\n"
    "(connect, getaddrinfo), files (~/.ssh, browser profiles, keyrings,\n"
    "/etc/shadow, /etc/passwd), devices (camera, microphone), environment\n"
    "(getenv of the names in STACKREC_ENV_NAMES). The full catalogue is in\n"
    "preload/README.md.\n"
    "\n"
    "Options:\n"
    "  -o, --output DIR   recording directory (created; must not hold a\n"
    "                     recording already). Default:\n"
    "                     ./stackrec-CMD-YYYYMMDD-HHMMSS\n"
    "  -d, --depth N      frames per stack, 1-256 (default 64)\n"
    "  -c, --categories LIST\n"
    "                     comma-separated categories to record, or \"all\"\n"
    "                     (default)\n"
    "  -q, --quiet        no summary; only record\n"
    "  -h, --help         this help\n"
    "\n"
    "The hook library is looked up in $STACKREC_PRELOAD, then next to the\n"
    "stackrec binary (../preload/, ./, ../lib/stackrec/). It goes first in\n"
    "LD_PRELOAD, before what the environment preloads already (but after\n"
    "sanitizer runtimes, which must be first). Every other\n"
    "STACKREC_* variable (STACKREC_ENV_NAMES, STACKREC_FORK, ...) is passed\n"
    "on to the hooks.\n"
    "\n"
    "Exit status: CMD's exit status, or 128+N if it was killed by signal\n"
    "N; 125 if stackrec record failed (usage, no hook library, no\n"
    "directory), 126 if CMD cannot be executed, 127 if it was not found.\n";

static const char *const k_categories[] = {"identifiers", "network", "files",
                                           "devices", "environment"};
#define N_CATEGORIES (sizeof k_categories / sizeof k_categories[0])

static int rec_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int rec_error(const char *fmt, ...) {
  va_list ap;

  fputs("stackrec record: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return REC_FAILED;
}

/* ---- setup ----------------------------------------------------------------- */

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The hook library, as an absolute path in out. @return 0 or REC_FAILED
 * after printing why. */
static int find_preload(char *out, size_t cap) {
  static const char *const rel[] = {"../preload/" PRELOAD_NAME, PRELOAD_NAME,
                                    "../lib/stackrec/" PRELOAD_NAME};
  const char *env = getenv("STACKREC_PRELOAD");
  char exe[PATH_MAX], cand[PATH_MAX + 64], tried[3 * (PATH_MAX + 64)] = "";
  char *slash;
  size_t i;

  if (env != NULL && env[0] != '\0') {
    if (!is_file(env) || realpath(env, out) == NULL)
      return rec_error("STACKREC_PRELOAD=%s: %s", env,
                       errno ? strerror(errno) : "not a regular file");
    return 0;
  }
  if (realpath("/proc/self/exe", exe) == NULL)
    return rec_error("cannot find %s: /proc/self/exe: %s; set "
                     "STACKREC_PRELOAD",
                     PRELOAD_NAME, strerror(errno));
  slash = strrchr(exe, '/');
  if (slash != NULL)
    *slash = '\0';
  for (i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
    if (is_file(cand) && realpath(cand, out) != NULL && strlen(out) < cap)
      return 0;
    snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s",
             i ? ", " : "", cand);
  }
  return rec_error("cannot find %s (tried %s); build "
                   "//preload:%s or set STACKREC_PRELOAD",
                   PRELOAD_NAME, tried, PRELOAD_NAME);
}

static int mkdir_p(const char *path) {
  char buf[PATH_MAX];
  size_t len = strlen(path), i;

  if (len == 0 || len >= sizeof buf)
    return -ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  for (i = 1; i < len; i++) {
    if (buf[i] != '/')
      continue;
    buf[i] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return -errno;
    buf[i] = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}

/* Does dir hold segment files already? */
static bool holds_recording(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  bool found = false;

  if (d == NULL)
    return false;
  while (!found && (de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    found = strncmp(de->d_name, "stackrec-", 9) == 0 && n > 4 &&
            strcmp(de->d_name + n - 4, ".zst") == 0;
  }
  closedir(d);
  return found;
}

/* Create the recording directory (default name from cmd); absolute path
 * in out. @return 0 or REC_FAILED after printing why. */
static int make_dir(const char *opt, const char *cmd, char *out, size_t cap) {
  char name[PATH_MAX], base[64];
  const char *b = strrchr(cmd, '/');
  size_t n = 0;
  int err;

  if (opt != NULL) {
    if ((err = mkdir_p(opt)) < 0)
      return rec_error("cannot create directory %s: %s", opt, strerror(-err));
    if (holds_recording(opt))
      return rec_error("%s already holds a recording (stackrec-*.zst); "
                       "choose another directory with -o, or remove it",
                       opt);
    snprintf(name, sizeof name, "%s", opt);
  } else {
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32];
    unsigned k;

    /* The command's base name, reduced to characters safe in a path. */
    for (b = b ? b + 1 : cmd; *b != '\0' && n < sizeof base - 1; b++)
      base[n++] = (strchr("-_.", *b) || (*b >= '0' && *b <= '9') ||
                   (*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z'))
                      ? *b
                      : '_';
    base[n] = '\0';
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (k = 1;; k++) {
      if (k == 1)
        snprintf(name, sizeof name, "stackrec-%s-%s", base, stamp);
      else
        snprintf(name, sizeof name, "stackrec-%s-%s-%u", base, stamp, k);
      if (mkdir(name, 0700) == 0)
        break;
      if (errno != EEXIST || k == 100)
        return rec_error("cannot create directory %s: %s", name,
                         strerror(errno));
    }
  }
  /* Absolute: processes of the tree may change directory. */
  if (realpath(name, out) == NULL || strlen(out) >= cap)
    return rec_error("%s: %s", name, strerror(errno));
  return 0;
}

static int check_categories(const char *list) {
  const char *p = list;

  if (strcmp(list, "all") == 0)
    return 0;
  for (;;) {
    size_t len = strcspn(p, ","), i;
    for (i = 0; i < N_CATEGORIES; i++)
      if (strlen(k_categories[i]) == len && strncmp(p, k_categories[i], len) == 0)
        break;
    if (i == N_CATEGORIES && !(len == 3 && strncmp(p, "all", 3) == 0))
      return stkr_cli_usage_error(
          "record",
          "--categories: unknown category \"%.*s\" at offset %zu (known: "
          "identifiers, network, files, devices, environment, all)",
          (int)len, p, (size_t)(p - list));
    if (p[len] == '\0')
      return 0;
    p += len + 1;
  }
}

/* ---- run ------------------------------------------------------------------ */

/* Is this LD_PRELOAD entry a sanitizer runtime? Those must come first in
 * the initial library list (ASan refuses to run otherwise). */
static bool is_sanitizer_runtime(const char *entry, size_t len) {
  static const char *const k[] = {"libasan", "libtsan", "liblsan",
                                  "libubsan", "libhwasan", "libclang_rt."};
  const char *b = entry;
  size_t i;

  for (i = 0; i < len; i++)
    if (entry[i] == '/')
      b = entry + i + 1;
  for (i = 0; i < sizeof k / sizeof k[0]; i++)
    if ((size_t)(entry + len - b) >= strlen(k[i]) &&
        strncmp(b, k[i], strlen(k[i])) == 0)
      return true;
  return false;
}

/* The child's LD_PRELOAD: the hooks first, so the app's calls reach them
 * directly (a hook in front of ours would shift the first recorded frame),
 * then whatever the user preloads; but sanitizer runtimes from the user's
 * list before everything. Entries are separated by ':' or ' ', as ld.so
 * reads them. @return a malloc'd string, or NULL. */
static char *preload_list(const char *ours, const char *old) {
  size_t cap = strlen(ours) + (old ? strlen(old) : 0) + 2, n = 0, pass;
  char *out = malloc(cap);

  if (out == NULL)
    return NULL;
  out[0] = '\0';
  for (pass = 0; pass < 3; pass++) {
    const char *p = old ? old : "";
    if (pass == 1) {
      n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? ":" : "", ours);
      continue;
    }
    while (*p != '\0') {
      size_t len = strcspn(p, ": ");
      if (len != 0 && is_sanitizer_runtime(p, len) == (pass == 0))
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s", n ? ":" : "",
                              (int)len, p);
      p += len;
      if (*p != '\0')
        p++;
    }
  }
  return out;
}

/* Run argv with the hooks; @return its wait status via *status, or an exit
 * code (125) on failure. */
static int run(char **argv, const char *preload, const char *dir,
               const char *depth, const char *cats, int *status) {
  struct sigaction ign, old_int, old_quit;
  pid_t pid;
  int fds[2], err = 0;
  ssize_t k;

  /* The child reports a failed exec through a close-on-exec pipe: EOF
   * means the exec succeeded. */
  if (pipe2(fds, O_CLOEXEC) != 0)
    return rec_error("pipe: %s", strerror(errno));
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return rec_error("fork: %s", strerror(errno));
  }
  if (pid == 0) {
    char *lp = preload_list(preload, getenv("LD_PRELOAD"));

    close(fds[0]);
    if (lp == NULL || setenv("LD_PRELOAD", lp, 1) != 0 ||
        setenv("STACKREC_DIR", dir, 1) != 0 ||
        (depth && setenv("STACKREC_DEPTH", depth, 1) != 0) ||
        (cats && setenv("STACKREC_CATEGORIES", cats, 1) != 0)) {
      err = errno;
    } else {
      execvp(argv[0], argv);
      err = errno;
    }
    k = write(fds[1], &err, sizeof err);
    (void)k;
    _exit(err == ENOENT ? REC_NOT_FOUND : REC_CANNOT_EXEC);
  }
  close(fds[1]);
  /* Like system(3): a ^C goes to the command (our process group's
   * foreground job); we stay to print what it recorded. */
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  do
    k = read(fds[0], &err, sizeof err);
  while (k < 0 && errno == EINTR);
  close(fds[0]);
  while (waitpid(pid, status, 0) < 0) {
    if (errno != EINTR) {
      sigaction(SIGINT, &old_int, NULL);
      sigaction(SIGQUIT, &old_quit, NULL);
      return rec_error("waitpid: %s", strerror(errno));
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (k == (ssize_t)sizeof err) {
    rec_error("cannot run %s: %s", argv[0], strerror(err));
    return err == ENOENT ? REC_NOT_FOUND : REC_CANNOT_EXEC;
  }
  return 0;
}

/* ---- summary --------------------------------------------------------------- */

#define TOP_FRAMES 4   /* frames shown of each API's top stack */
#define MAX_PAYLOADS 8 /* distinct payloads tracked per API */
#define SHOW_PAYLOADS 3

typedef struct stack_agg {
  size_t proc;   /* reader's process index */
  uint64_t hash; /* of all PCs: the stack's identity within the process */
  uint64_t count;
  size_t n_pcs;
  uint64_t pcs[TOP_FRAMES];
} stack_agg;

typedef struct payload_agg {
  uint8_t *bytes;
  size_t len;
  uint64_t count;
} payload_agg;

typedef struct site_agg {
  char *name;
  unsigned cat; /* index in k_categories, or N_CATEGORIES */
  uint64_t events;
  stack_agg *stacks;
  size_t n_stacks, cap_stacks;
  payload_agg pay[MAX_PAYLOADS];
  size_t n_pay;
  uint64_t pay_other; /* events whose payload was not tracked */
} site_agg;

/* Open addressing: (site, proc, hash) -> index into that site's stacks. */
typedef struct slot {
  uint64_t hash;
  size_t site, proc, idx; /* idx + 1; 0 = empty */
} slot;

typedef struct summary {
  site_agg *sites;
  size_t n_sites, cap_sites;
  slot *tab;
  size_t tab_cap, tab_used;
  uint64_t events, warnings;
} summary;

static uint64_t hash_pcs(const uint64_t *pcs, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  size_t i;

  for (i = 0; i < n; i++) {
    h ^= pcs[i];
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

static size_t slot_of(const summary *s, uint64_t hash, size_t site,
                      size_t proc) {
  size_t i = (size_t)(hash ^ (site * 0x9E3779B97F4A7C15ull) ^ proc) &
             (s->tab_cap - 1);

  while (s->tab[i].idx != 0 &&
         !(s->tab[i].hash == hash && s->tab[i].site == site &&
           s->tab[i].proc == proc))
    i = (i + 1) & (s->tab_cap - 1);
  return i;
}

static int tab_grow(summary *s) {
  size_t cap = s->tab_cap ? s->tab_cap * 2 : 1024, i;
  slot *old = s->tab, *tab = calloc(cap, sizeof *tab);
  size_t old_cap = s->tab_cap;

  if (tab == NULL)
    return -ENOMEM;
  s->tab = tab;
  s->tab_cap = cap;
  for (i = 0; i < old_cap; i++)
    if (old[i].idx != 0)
      s->tab[slot_of(s, old[i].hash, old[i].site, old[i].proc)] = old[i];
  free(old);
  return 0;
}

static unsigned category_of(const char *site) {
  size_t len = strcspn(site, "."), i;

  for (i = 0; i < N_CATEGORIES; i++)
    if (strlen(k_categories[i]) == len && strncmp(site, k_categories[i], len) == 0)
      return (unsigned)i;
  return N_CATEGORIES;
}

static site_agg *site_get(summary *s, const char *name) {
  size_t i;
  site_agg *a;

  for (i = 0; i < s->n_sites; i++)
    if (strcmp(s->sites[i].name, name) == 0)
      return &s->sites[i];
  if (s->n_sites == s->cap_sites) {
    size_t cap = s->cap_sites ? s->cap_sites * 2 : 16;
    site_agg *n = realloc(s->sites, cap * sizeof *n);
    if (n == NULL)
      return NULL;
    s->sites = n;
    s->cap_sites = cap;
  }
  a = &s->sites[s->n_sites];
  memset(a, 0, sizeof *a);
  if ((a->name = strdup(name)) == NULL)
    return NULL;
  a->cat = category_of(name);
  s->n_sites++;
  return a;
}

static int add_event(summary *s, const stkr_event_view *ev) {
  site_agg *a = site_get(s, ev->site);
  uint64_t h = hash_pcs(ev->pcs, ev->n_pcs);
  size_t si, k;
  slot *sl;

  if (a == NULL)
    return -ENOMEM;
  si = (size_t)(a - s->sites);
  a->events++;
  s->events++;
  if (s->tab_used * 2 >= s->tab_cap && tab_grow(s) != 0)
    return -ENOMEM;
  sl = &s->tab[slot_of(s, h, si, ev->process)];
  if (sl->idx == 0) {
    stack_agg *st;
    if (a->n_stacks == a->cap_stacks) {
      size_t cap = a->cap_stacks ? a->cap_stacks * 2 : 8;
      stack_agg *n = realloc(a->stacks, cap * sizeof *n);
      if (n == NULL)
        return -ENOMEM;
      a->stacks = n;
      a->cap_stacks = cap;
    }
    st = &a->stacks[a->n_stacks];
    memset(st, 0, sizeof *st);
    st->proc = ev->process;
    st->hash = h;
    st->n_pcs = ev->n_pcs;
    memcpy(st->pcs, ev->pcs,
           (ev->n_pcs < TOP_FRAMES ? ev->n_pcs : TOP_FRAMES) * sizeof(uint64_t));
    sl->hash = h;
    sl->site = si;
    sl->proc = ev->process;
    sl->idx = ++a->n_stacks;
    s->tab_used++;
  }
  a->stacks[sl->idx - 1].count++;

  for (k = 0; k < a->n_pay; k++)
    if (a->pay[k].len == ev->payload_len &&
        memcmp(a->pay[k].bytes, ev->payload, ev->payload_len) == 0) {
      a->pay[k].count++;
      return 0;
    }
  if (ev->payload_len == 0 || a->n_pay == MAX_PAYLOADS) {
    if (ev->payload_len != 0)
      a->pay_other++;
    return 0;
  }
  if ((a->pay[k].bytes = malloc(ev->payload_len)) == NULL)
    return -ENOMEM;
  memcpy(a->pay[k].bytes, ev->payload, ev->payload_len);
  a->pay[k].len = ev->payload_len;
  a->pay[k].count = 1;
  a->n_pay++;
  return 0;
}

static void summary_free(summary *s) {
  size_t i, k;

  for (i = 0; i < s->n_sites; i++) {
    free(s->sites[i].name);
    free(s->sites[i].stacks);
    for (k = 0; k < s->sites[i].n_pay; k++)
      free(s->sites[i].pay[k].bytes);
  }
  free(s->sites);
  free(s->tab);
}

static int by_category_then_events(const void *x, const void *y) {
  const site_agg *a = x, *b = y;

  if (a->cat != b->cat)
    return a->cat < b->cat ? -1 : 1;
  if (a->events != b->events)
    return a->events > b->events ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int by_count_desc(const void *x, const void *y) {
  const payload_agg *a = x, *b = y;
  return a->count != b->count ? (a->count > b->count ? -1 : 1) : 0;
}

/* One PC as "image+0xoffset" (the image's base name), from the images the
 * process recorded; raw "0x..." if none contains it. */
static void put_pc(FILE *f, const stkr_reader *r, size_t proc, uint64_t pc) {
  const stkr_image_info *im;
  size_t n, i;

  if (stkr_reader_images(r, proc, &im, &n) == 0)
    for (i = 0; i < n; i++)
      if (pc >= im[i].text_start && pc < im[i].text_end) {
        const char *b = strrchr(im[i].path, '/');
        b = b ? b + 1 : im[i].path;
        stkr_cli_put_escaped(f, (const uint8_t *)b, strlen(b));
        fprintf(f, "+0x%llx",
                (unsigned long long)(pc - im[i].load_address));
        return;
      }
  fprintf(f, "0x%llx", (unsigned long long)pc);
}

static void print_site(FILE *f, site_agg *a) {
  const char *api = strchr(a->name, '.');
  size_t k;
  int pad;

  api = (a->cat < N_CATEGORIES && api) ? api + 1 : a->name;
  pad = 14 - (int)strlen(api);
  fprintf(f, "    ");
  stkr_cli_put_escaped(f, (const uint8_t *)api, strlen(api));
  fprintf(f, "%*s %6llu event%s %4zu stack%s", pad > 1 ? pad : 1, "",
          (unsigned long long)a->events, a->events == 1 ? " " : "s",
          a->n_stacks, a->n_stacks != 1 ? "s" : a->n_pay ? " " : "");
  qsort(a->pay, a->n_pay, sizeof a->pay[0], by_count_desc);
  for (k = 0; k < a->n_pay && k < SHOW_PAYLOADS; k++) {
    fprintf(f, "%s\"", k ? ", " : "  ");
    stkr_cli_put_escaped(f, a->pay[k].bytes, a->pay[k].len);
    fputc('"', f);
    if (a->pay[k].count > 1)
      fprintf(f, " x%llu", (unsigned long long)a->pay[k].count);
  }
  if (a->n_pay > SHOW_PAYLOADS || a->pay_other)
    fputs(", ...", f);
  fputc('\n', f);
}

static void print_top_stack(FILE *f, const stkr_reader *r, const site_agg *a) {
  const stack_agg *top = NULL;
  size_t k;

  for (k = 0; k < a->n_stacks; k++)
    if (top == NULL || a->stacks[k].count > top->count)
      top = &a->stacks[k];
  if (top == NULL)
    return;
  fprintf(f, "  ");
  stkr_cli_put_escaped(f, (const uint8_t *)a->name, strlen(a->name));
  fprintf(f, "%*s %llux pid %u:",
          strlen(a->name) < 24 ? (int)(24 - strlen(a->name)) : 1, "", (unsigned long long)top->count,
          (unsigned)stkr_reader_process(r, top->proc)->pid);
  for (k = 0; k < top->n_pcs && k < TOP_FRAMES; k++) {
    fputs(k ? " < " : " ", f);
    put_pc(f, r, top->proc, top->pcs[k]);
  }
  if (top->n_pcs > TOP_FRAMES)
    fprintf(f, " < ... (%zu frames)", top->n_pcs);
  if (top->n_pcs == 0)
    fputs(" (no frames)", f);
  fputc('\n', f);
}

static void count_warning(void *arg, const stkr_warning *w) {
  summary *s = arg;

  /* An empty segment is a process that had nothing to write yet. */
  if (w->kind == STKR_WARN_EMPTY_FILE)
    return;
  s->warnings++;
  fprintf(stderr, "stackrec record: warning: %s\n", w->message);
}

/* Read dir and print the summary on f. Best effort: a reading problem is
 * reported, never changes the exit status (that is the command's). */
static void stkr_record_summary(const char *dir, FILE *f) {
  summary s;
  stkr_reader_opts opts = {.warn = count_warning, .warn_arg = &s};
  stkr_reader *r = NULL;
  stkr_event_view ev;
  uint64_t drops = 0, stacks = 0;
  size_t n_proc, with_events = 0, i;
  unsigned cat = N_CATEGORIES + 1;
  int rc;

  memset(&s, 0, sizeof s);
  fprintf(f, "recording: ");
  stkr_cli_put_escaped(f, (const uint8_t *)dir, strlen(dir));
  fputc('\n', f);
  if ((rc = stkr_reader_open(dir, &opts, &r)) != 0) {
    fprintf(f, "stackrec record: cannot read the recording: %s\n",
            strerror(-rc));
    return;
  }
  while ((rc = stkr_reader_next(r, &ev)) == 1)
    if ((rc = add_event(&s, &ev)) != 0)
      break;
  if (rc < 0) {
    fprintf(f, "stackrec record: reading the recording failed: %s\n",
            strerror(-rc));
    goto out;
  }
  n_proc = stkr_reader_process_count(r);
  for (i = 0; i < n_proc; i++) {
    const stkr_process_info *p = stkr_reader_process(r, i);
    drops += p->drops;
    stacks += p->stacks;
    with_events += p->events != 0;
  }
  fprintf(f, "processes: %zu (%zu with events)  events: %llu  distinct "
             "stacks: %llu  dropped: %llu\n",
          n_proc, with_events, (unsigned long long)s.events,
          (unsigned long long)stacks, (unsigned long long)drops);
  if (n_proc == 0) {
    fprintf(f, "no process recorded anything: was the hook library loaded?"
               " (static and setuid programs ignore LD_PRELOAD)\n");
    goto out;
  }
  if (s.n_sites > 1)
    qsort(s.sites, s.n_sites, sizeof s.sites[0], by_category_then_events);
  for (i = 0; i < s.n_sites; i++) {
    if (s.sites[i].cat != cat) {
      uint64_t total = 0;
      size_t j;
      cat = s.sites[i].cat;
      for (j = i; j < s.n_sites && s.sites[j].cat == cat; j++)
        total += s.sites[j].events;
      fprintf(f, "  %-16s %6llu event%s\n",
              cat < N_CATEGORIES ? k_categories[cat] : "(other sites)",
              (unsigned long long)total, total == 1 ? "" : "s");
    }
    print_site(f, &s.sites[i]);
  }
  if (s.n_sites != 0) {
    fprintf(f, "top stack of each API (innermost first; return addresses "
               "as image+offset):\n");
    for (i = 0; i < s.n_sites; i++)
      print_top_stack(f, r, &s.sites[i]);
  }
  fprintf(f, "more: stackrec report DIR (all call stacks per category and "
             "API), stackrec info DIR, stackrec dump DIR\n");
out:
  stkr_reader_free(r);
  summary_free(&s);
}

int stkr_cli_record(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'},
      {"depth", required_argument, NULL, 'd'},
      {"categories", required_argument, NULL, 'c'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *out_opt = NULL, *depth = NULL, *cats = NULL;
  char preload[PATH_MAX], dir[PATH_MAX];
  bool quiet = false;
  int c, rc, status;

  opterr = 0;
  optind = 1;
  /* '+': stop at CMD, so its own options stay its own. */
  while ((c = getopt_long(argc, argv, "+o:d:c:qh", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      out_opt = optarg;
      if (out_opt[0] == '\0') {
        stkr_cli_usage_error("record", "-o: empty directory name");
        return REC_FAILED;
      }
      break;
    case 'd': {
      char *end;
      unsigned long v;
      errno = 0;
      v = strtoul(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || errno ||
          v < 1 || v > 256) {
        stkr_cli_usage_error("record", "--depth: \"%s\" is not a number in "
                                       "1-256", optarg);
        return REC_FAILED;
      }
      depth = optarg;
      break;
    }
    case 'c':
      if (check_categories(optarg) != 0)
        return REC_FAILED;
      cats = optarg;
      break;
    case 'q':
      quiet = true;
      break;
    case 'h':
      fputs(record_help, stdout);
      return stkr_cli_flush("record") == 0 ? 0 : REC_FAILED;
    default:
      stkr_cli_usage_error("record", "unknown option '%s'", argv[optind - 1]);
      return REC_FAILED;
    }
  }
  if (optind >= argc) {
    stkr_cli_usage_error("record", "no command given");
    return REC_FAILED;
  }
  if ((rc = find_preload(preload, sizeof preload)) != 0)
    return rc;
  if (strchr(preload, ':') != NULL || strchr(preload, ' ') != NULL)
    return rec_error("the hook library path %s contains ':' or ' ', which "
                     "LD_PRELOAD cannot express",
                     preload);
  if ((rc = make_dir(out_opt, argv[optind], dir, sizeof dir)) != 0)
    return rc;
  if ((rc = run(argv + optind, preload, dir, depth, cats, &status)) != 0)
    return rc;
  stkr_cli_recover_after_record(dir, quiet); /* killed processes' rings */

  if (WIFEXITED(status))
    rc = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    rc = 128 + WTERMSIG(status);
  else
    rc = REC_FAILED;
  if (!quiet) {
    if (WIFSIGNALED(status))
      fprintf(stderr, "stackrec record: %s was killed by signal %d (%s)\n",
              argv[optind], WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
      fprintf(stderr, "stackrec record: %s exited with status %d\n",
              argv[optind], rc);
    stkr_record_summary(dir, stderr);
  }
  return rc;
}
