/*
 * record_setup.c: what `stackrec record` checks and prepares before the
 * command runs (record.c runs it): the hook library, the recording
 * directory and its lock, the STACKREC_* values, the child's LD_PRELOAD.
 * Setup is loud: each failure is printed (naming the path or variable)
 * and returned as record's exit status, and the command never runs.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_elfkind.h"
#include "common/stkr_io.h"
#include "common/stkr_mkdir.h"
#include "preload/match.h"
#include "proto/stkr_format.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/record.h"

int stkr__rec_error(const char *fmt, ...) {
  va_list ap;

  fputs("stackrec record: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return STKR__REC_FAILED;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Does the ELF file at fd define the dynamic symbol `name` (in .dynsym,
 * as the loader would find it)? Only for a 64-bit object of this machine;
 * bounded reads, no mapping. @return 1, 0, or -1 (not such an object). */
static int elf_defines(int fd, const char *name) {
  Elf64_Ehdr eh;
  Elf64_Shdr sh, str;
  struct stat st;
  size_t want = strlen(name) + 1;
  char buf[64];

  if (fstat(fd, &st) != 0 ||
      pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN ||
      stkr_elf_kind_of(fd, NULL) != STKR_ELF_OURS ||
      eh.e_shentsize != sizeof sh || eh.e_shnum > 4096 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > 256 || eh.e_phoff > (uint64_t)st.st_size ||
      eh.e_phnum * sizeof(Elf64_Phdr) > (uint64_t)st.st_size - eh.e_phoff)
    return -1;
  /* What the loader maps must be in the file (a copy cut or overwritten
   * made the loader print into the command's stderr: QA, session 47). */
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) !=
        (ssize_t)sizeof ph)
      return -1;
    if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) &&
        (ph.p_offset > (uint64_t)st.st_size ||
         ph.p_filesz > (uint64_t)st.st_size - ph.p_offset))
      return -1;
  }
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) !=
        (ssize_t)sizeof sh)
      return -1;
    if (sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_link >= eh.e_shnum || sh.sh_entsize != sizeof(Elf64_Sym) ||
        sh.sh_size / sizeof(Elf64_Sym) > (uint64_t)st.st_size ||
        pread(fd, &str, sizeof str,
              (off_t)(eh.e_shoff + sh.sh_link * sizeof str)) !=
            (ssize_t)sizeof str)
      return -1;
    for (uint64_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
      Elf64_Sym sym;
      if (pread(fd, &sym, sizeof sym, (off_t)(sh.sh_offset + k * sizeof sym)) !=
          (ssize_t)sizeof sym)
        return -1;
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= str.sh_size ||
          want > sizeof buf ||
          pread(fd, buf, want, (off_t)(str.sh_offset + sym.st_name)) !=
              (ssize_t)want)
        continue;
      if (memcmp(buf, name, want) == 0) return 1;
    }
    return 0;
  }
  return 0;
}

/* Is path the hook library, one this machine's loader takes? Anything
 * else given as STACKREC_PRELOAD ran the command unrecorded: a text file
 * made the loader write its complaint into the command's stderr, another
 * library recorded nothing, and verify said an empty recording is intact
 * (QA, session 47). The hook library defines getenv (preload/exports.map);
 * libstackrec_symbolize.so and libm do not. @return 0, or why not. */
static const char *not_hook_library(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), r;

  if (fd < 0) return strerror(errno);
  r = elf_defines(fd, "getenv");
  close(fd);
  return r < 0   ? "not a 64-bit shared library of this machine"
         : r == 0 ? "a shared library, but not stackrec's hook library "
                    "(it defines no getenv)"
                  : NULL;
}

int stkr__rec_find_preload(char *out, size_t cap) {
  /* The first: Bazel's runfiles of //tools:stackrec (a data dependency,
   * so `bazel build //tools:stackrec` brings the library along). */
  static const char *const rel[] = {"stackrec.runfiles/stackrec/preload/" STKR__REC_PRELOAD_NAME,
                                    "../preload/" STKR__REC_PRELOAD_NAME, STKR__REC_PRELOAD_NAME,
                                    "../lib/stackrec/" STKR__REC_PRELOAD_NAME};
  const char *env = getenv("STACKREC_PRELOAD");
  /* Static (called once, before any thread): ~25 KB that a program
   * started with `ulimit -s 32` does not have on its stack (record died of
   * SIGSEGV here). */
  static char exe[PATH_MAX], cand[PATH_MAX + 64], tried[4 * (PATH_MAX + 64)];
  char *slash;
  size_t i;

  if (env != NULL && env[0] != '\0') {
    const char *why;
    if (!is_file(env) || realpath(env, out) == NULL)
      return stkr__rec_error("STACKREC_PRELOAD=%s: %s", env,
                       errno ? strerror(errno) : "not a regular file");
    if ((why = not_hook_library(out)) != NULL)
      return stkr__rec_error("STACKREC_PRELOAD=%s: %s", env, why);
    return 0;
  }
  tried[0] = '\0';
  if (realpath("/proc/self/exe", exe) == NULL)
    return stkr__rec_error("cannot find %s: /proc/self/exe: %s; set "
                     "STACKREC_PRELOAD",
                     STKR__REC_PRELOAD_NAME, strerror(errno));
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
  return stkr__rec_error("cannot find %s (tried %s); build "
                   "//preload:%s or set STACKREC_PRELOAD",
                   STKR__REC_PRELOAD_NAME, tried, STKR__REC_PRELOAD_NAME);
}

/* Can we (and so the command, which runs as we do) create files in dir
 * and write into them? Tried, not guessed from mode bits: a read-only file
 * system or an ACL answers too, and a full one (a block written: QA,
 * session 33, a recording made on a full file system held an empty marks
 * file and no segment, and verify called it complete). @return 0 or
 * -errno. */
static int dir_usable(const char *dir) {
  char probe[PATH_MAX], block[4096];
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  struct stat st;
  int fd, err;

  if (stat(dir, &st) != 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return -ENOTDIR;
  if ((size_t)snprintf(probe, sizeof probe, "%s/" STKR_CLI_PROBE_PREFIX
                       "XXXXXX", dir) >= sizeof probe)
    return -ENAMETOOLONG;
  if ((fd = mkostemp(probe, O_CLOEXEC)) < 0)
    return -errno;
  /* Not zeros, which a compressing file system stores in no block; and
   * under a small RLIMIT_FSIZE, EFBIG, not SIGXFSZ (which would kill us),
   * and no refusal: that limit is the command's (review, session 34). */
  memset(block, 'x', sizeof block);
  sigaction(SIGXFSZ, &ign, &old);
  err = stkr_write_all(fd, block, sizeof block);
  sigaction(SIGXFSZ, &old, NULL);
  if (err == -EFBIG)
    err = 0;
  if (close(fd) != 0 && err == 0 && errno != EINTR)
    err = -errno; /* NFS says ENOSPC at close */
  (void)unlink(probe);
  return err;
}

/* Room kept in the marks file for record's own lines at its end (the
 * processes that recorded nothing, and why): on a disk that filled up
 * while the command ran, those lines were the only trace of a process
 * whose every event failed to reach a file, and they failed too (QA,
 * session 36: a recording of 200 calls read as complete and empty, verify
 * 0). Not counted in the file's size (FALLOC_FL_KEEP_SIZE); given back by
 * stkr__rec_marks_release. Best effort: without fallocate (NFS, tmpfs
 * before Linux 3.5) or under RLIMIT_FSIZE, none. */
#define STKR__REC_MARKS_RESERVE (64 * 1024)

#if defined(__linux__)
/* DIR's marks file, opened with `flags` (and never through a link, nor
 * as a controlling terminal), if it is a regular file. @return the
 * descriptor, or -1. */
static int open_marks(const char *dir, int flags, struct stat *st) {
  char path[PATH_MAX];
  int fd;

  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, STKR_MARKS_FILE) >=
          sizeof path ||
      (fd = open(path, flags | O_WRONLY | O_CLOEXEC | O_NOFOLLOW |
                           O_NONBLOCK | O_NOCTTY,
                 0600)) < 0)
    return -1;
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}
#endif

void stkr__rec_marks_reserve(const char *dir) {
#if defined(__linux__)
  struct stat st;
  int fd = open_marks(dir, O_CREAT | O_APPEND, &st);

  if (fd < 0)
    return;
  if (stkr_fsize_room((uint64_t)st.st_size + STKR__REC_MARKS_RESERVE))
    (void)fallocate(fd, FALLOC_FL_KEEP_SIZE, st.st_size,
                    STKR__REC_MARKS_RESERVE);
  close(fd);
#else
  (void)dir;
#endif
}

void stkr__rec_marks_release(const char *dir, bool never_ran) {
#if defined(__linux__)
  char path[PATH_MAX];
  struct stat st;
  bool locked;
  int fd = open_marks(dir, 0, &st);

  if (fd < 0)
    return;
  /* What lies past its size is freed by a truncation to its size, taken
   * under an exclusive flock: an appender (stkr_append_line: a `stackrec
   * mark`, a process still running) holds a shared one while it writes,
   * so the size read here stays the end until the truncation (before, a
   * line appended between the two was cut: session 37's note). Busy for
   * 20 ms: the reserve stays. */
  locked = stkr_flock_within(fd, LOCK_EX, 20) && fstat(fd, &st) == 0;
  if (locked)
    (void)ftruncate(fd, st.st_size);
  /* A command that never ran leaves no directory of ours behind: the
   * marks file made for the reserve goes too, if nothing was written
   * (under the lock: no line on its way into it). */
  if (locked && never_ran && st.st_size == 0 &&
      (size_t)snprintf(path, sizeof path, "%s/%s", dir, STKR_MARKS_FILE) <
          sizeof path)
    (void)unlink(path);
  close(fd);
#else
  (void)dir;
  (void)never_ran;
#endif
}

/* The length of path's longest prefix that exists (its last component
 * cut at a time), so that a refusal removes only what it made. */
static size_t existing_prefix(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  struct stat st;

  if (n >= sizeof buf)
    return n;
  memcpy(buf, path, n + 1);
  while (n > 0 && stat(buf, &st) != 0) {
    while (n > 0 && buf[n - 1] == '/') n--;
    while (n > 0 && buf[n - 1] != '/') n--;
    buf[n] = '\0';
  }
  return n;
}

/* rmdir path, then its parents, while longer than keep bytes (QA, session
 * 34: -o a/b/c refused left a and a/b behind). Stops at the first that
 * will not go (not empty: not only ours). */
static void remove_made(const char *path, size_t keep) {
  char buf[PATH_MAX];
  size_t n = strlen(path);

  if (n >= sizeof buf)
    return;
  memcpy(buf, path, n + 1);
  while (n > keep && rmdir(buf) == 0) {
    while (n > 0 && buf[n - 1] == '/') n--;
    while (n > 0 && buf[n - 1] != '/') n--;
    buf[n] = '\0';
  }
}

int stkr__rec_make_dir(const char *opt, const char *cmd, char *out,
                       size_t cap, int *lock) {
  char name[PATH_MAX], base[64];
  const char *b = strrchr(cmd, '/');
  size_t n = 0;
  int err;

  size_t existed = 0; /* of opt: the part that was there before us */

  if (opt != NULL) {
    existed = existing_prefix(opt);
    if ((err = stkr_mkdir_p(opt, 0700)) < 0 || (err = dir_usable(opt)) < 0) {
      stkr__rec_error("-o %s: cannot use it as the recording directory: %s", opt,
                strerror(-err));
      remove_made(opt, existed); /* ours, and empty: not left behind */
      return STKR__REC_BAD_DIR;
    }
    if (stkr_fmt_dir_has_segments(opt) == 1) {
      stkr__rec_error("-o %s: already holds a recording (stackrec-*.zst); "
                "choose another directory, or remove it",
                opt);
      return STKR__REC_BAD_DIR;
    }
    /* The processes' shared files (pools, caches, the lock) go in
     * DIR/.stackrec-cache: a link there sent them elsewhere, left behind
     * after the run (QA, session 47: 7 pooled ring files, 1.8 MB). */
    char cache[PATH_MAX];
    if ((err = stkr_recover_cache_check(opt, cache, sizeof cache)) < 0) {
      stkr__rec_error("-o %s: %s is not a directory of its own (%s): the "
                      "recording's shared files would go elsewhere; remove "
                      "it, or choose another directory",
                      opt, cache, err == -ELOOP ? "a symbolic link"
                                                : strerror(-err));
      return STKR__REC_BAD_DIR;
    }
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
      if (mkdir(name, 0700) == 0) {
        if ((err = dir_usable(name)) < 0) {
          stkr__rec_error("cannot use directory %s: %s", name,
                          strerror(-err));
          (void)rmdir(name);
          return STKR__REC_BAD_DIR;
        }
        break;
      }
      if (errno != EEXIST || k == 100) {
        stkr__rec_error("cannot create directory %s: %s", name, strerror(errno));
        return STKR__REC_BAD_DIR;
      }
    }
  }
  /* Room under it for every file its processes make (QA, session 47: a
   * 4 040-byte path recorded without ring files, and recovery failed). */
  if (realpath(name, out) != NULL && strlen(out) > stkr_recover_dir_max()) {
    stkr__rec_error("%s: its path is %zu bytes long, more than the %zu its "
                    "processes' ring and session files leave room for; "
                    "choose a shorter one",
                    name, strlen(out), stkr_recover_dir_max());
    /* What we made, as a refused -o's: never a directory that was there. */
    if (opt != NULL) remove_made(opt, existed);
    else (void)rmdir(name);
    return STKR__REC_BAD_DIR;
  }
  /* One record per directory: held until record's very end (close-on-
   * exec, so never the command's). Recording starts at a first event, so a
   * second record found no segment yet and went ahead. A file system
   * without locks (ENOLCK, ENOSYS: NFS without lockd, some FUSE) records
   * as before, unlocked. A `stackrec recover` holds it for the moments it
   * removes a killed record's leftovers: waited for, a second at most
   * (before, a record starting then was refused: session 37's note). */
  for (int tries = 0;
       (err = stkr_recover_lock_dir(name)) == -EWOULDBLOCK && tries < 100;
       tries++) {
    struct timespec ms10 = {0, 10000000};
    nanosleep(&ms10, NULL);
  }
  if (err == -EWOULDBLOCK) {
    stkr__rec_error("-o %s: another stackrec record is recording into it "
                    "(its lock held for a second); choose another "
                    "directory", name);
    return STKR__REC_BAD_DIR;
  }
  /* Asked again under the lock: a record that held it while we waited
   * (its program's first event came after our first look) has left its
   * recording here, and two records' summaries counted each other's
   * processes (QA, session 47: 5 of 6 runs started 50 ms apart). */
  if (opt != NULL && stkr_fmt_dir_has_segments(name) == 1) {
    stkr_recover_unlock_dir(name, err >= 0 ? err : -1); /* no lock left */
    stkr__rec_error("-o %s: already holds a recording (stackrec-*.zst), "
                    "made by another stackrec record that ended while this "
                    "one waited for it; choose another directory",
                    opt);
    return STKR__REC_BAD_DIR;
  }
  /* Going on unlocked is for file systems without locks only; a lock
   * file that cannot be made (a directory or a link put in its place)
   * left two records free to write into one directory (QA, session 47). */
  if (err < 0 && err != -ENOLCK && err != -ENOSYS && err != -EOPNOTSUPP) {
    stkr__rec_error("-o %s: cannot take its lock (%s/.stackrec-cache/"
                    "record.lock): %s; choose another directory",
                    name, name, strerror(-err));
    return STKR__REC_BAD_DIR;
  }
  *lock = err;
  stkr__rec_marks_reserve(name);
  /* Absolute: processes of the tree may change directory. */
  if (realpath(name, out) == NULL || strlen(out) >= cap) {
    stkr__rec_error("%s: %s", name, strerror(errno));
    return STKR__REC_BAD_DIR;
  }
  return 0;
}

int stkr__rec_check_env(const char *cats_opt) {
  static stkr__pl_names names; /* large; only parsed, never used */
  char why[512];
  unsigned mask;
  int err;

  if ((err = stkr_config_check_env(why, sizeof why)) != 0) {
    stkr__rec_error("%s", err == -EINVAL ? why : stkr_strerror(err));
    return STKR__REC_USAGE;
  }
  if (stkr__pl_parse_categories(getenv("STACKREC_CATEGORIES"), &mask, why,
                                sizeof why) != 0) {
    if (cats_opt != NULL)
      stkr_cli_usage_error("record", "--categories: %s", why);
    else
      stkr__rec_error("invalid STACKREC_CATEGORIES=\"%s\": %s",
                getenv("STACKREC_CATEGORIES"), why);
    return STKR__REC_USAGE;
  }
  if (stkr__pl_names_parse(getenv("STACKREC_ENV_NAMES"), &names, why,
                           sizeof why) != 0) {
    stkr__rec_error("invalid STACKREC_ENV_NAMES=\"%s\": %s",
              getenv("STACKREC_ENV_NAMES"), why);
    return STKR__REC_USAGE;
  }
  return 0;
}

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

char *stkr__rec_preload_list(const char *ours, const char *old) {
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
