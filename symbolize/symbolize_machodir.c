/*
 * symbolize_machodir.c: finding the Mach-O file of an image by its UUID
 * (see symbolize.h, stkr__machodir). The debug directories are walked
 * once: every regular file that starts with a Mach-O magic (dSYM bundles'
 * Contents/Resources/DWARF/<name>, .xcarchive/dSYMs/, loose and universal
 * binaries) is mapped for a moment and each 64-bit slice's LC_UUID noted,
 * with whether it carries DWARF; every symbol cache (<UUID>.stkrsym,
 * symcache.c) is checked and noted. An image then costs one lookup, and
 * takes a symbol cache first, then a dSYM, then a binary.
 *
 * Never a wrong name: a file is used only for the slice whose UUID equals
 * the recorded one; a file of the image's name with another UUID is named
 * in the warning ("UUID mismatch").
 *
 * Only compiled where there is no dyld (symbolize_apple.c has Apple's).
 */
#if !defined(__APPLE__)

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_grow.h"
#include "common/stkr_io.h"
#include "macho/macho.h"
#include "symbolize/symbolize.h"
#include "symbolize/symbolize_dwarf.h"

#define MAX_DEPTH 8         /* dir/X.xcarchive/dSYMs/X.dSYM/Contents/... */
#define MAX_FILES 200000u   /* bounds the walk of each --debug-dir */
#define MAX_DAMAGED 4       /* damaged Mach-O files named in a warning */
#define MAX_VISITED 4096    /* directories, for links that loop */

typedef struct uent {
  uint8_t uuid[16];
  int rank; /* 2 a symbol cache, 1 a dSYM (DWARF), 0 a binary (symtab) */
  char *path;
} uent;

struct stkr__machodir {
  uent *e;
  size_t n, cap;
  size_t files;     /* entries looked at, all dirs */
  size_t dir_files; /* ... in the --debug-dir being walked */
  /* A Mach-O file that could not be read may be the one an image lacks:
   * the warning names the first few (QA, session 30: a dSYM cut in half
   * gave "no dSYM found", the file never named). */
  char *damaged[MAX_DAMAGED];
  size_t n_damaged;
  /* The first --debug-dir whose walk stopped at MAX_FILES (said too). */
  char *cut;
  /* Directories walked (device, inode): links are followed, once. */
  struct { dev_t dev; ino_t ino; } visited[MAX_VISITED];
  size_t n_visited;
};

/* Note a Mach-O file that does not parse, with why. */
static void note_damaged(stkr__machodir *d, const char *path, const char *err) {
  char *m;
  if (d->n_damaged == MAX_DAMAGED) return;
  if (asprintf(&m, "%s (%s)", path, err) >= 0) d->damaged[d->n_damaged++] = m;
}

static int add(stkr__machodir *d, const uint8_t *uuid, int rank,
               const char *path) {
  if (stkr_grow((void **)&d->e, &d->cap, d->n + 1, sizeof *d->e) != 0)
    return -ENOMEM;
  if (!(d->e[d->n].path = strdup(path))) return -ENOMEM;
  memcpy(d->e[d->n].uuid, uuid, 16);
  d->e[d->n++].rank = rank;
  return 0;
}

/* Note the UUIDs of a file's slices, if it is Mach-O. */
static int scan_file(stkr__machodir *d, const char *path) {
  int fd = stkr_open_regular_high(path, 0), rc = 0; /* (walk: regular) */
  uint8_t magic[8];
  struct stat st;
  stkr_macho_slice sl[STKR_MACHO_MAX_SLICES];
  size_t n = 0;
  void *map;
  char err[256];

  if (fd < 0) return 0;
  if (fstat(fd, &st) != 0 ||
      pread(fd, magic, sizeof magic, 0) != (ssize_t)sizeof magic) {
    close(fd);
    return 0;
  }
  if (memcmp(magic, STKR__SYMCACHE_MAGIC, 8) == 0) {
    /* A symbol cache: checked whole here, so a damaged one is skipped
     * (named in a warning if nothing else serves its image). */
    stkr__symcache *c;
    stkr__symfile_info info;
    if (stkr__symcache_open(fd, path, &c, err, sizeof err) == 0) {
      stkr__symcache_info(c, &info);
      if (info.has_uuid) rc = add(d, info.uuid, 2, path);
      stkr__symcache_free(c);
    } else {
      note_damaged(d, path, err); /* QA, session 39: it never was */
    }
    close(fd);
    return rc;
  }
  if (!stkr_macho_is_macho(magic, sizeof magic)) {
    close(fd);
    return 0;
  }
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return 0;
  if (stkr_macho_slices(map, (size_t)st.st_size, sl, STKR_MACHO_MAX_SLICES,
                        &n, err, sizeof err) != 0)
    note_damaged(d, path, err);
  else
    for (size_t i = 0; i < n && rc == 0; i++) {
      stkr_macho_image im;
      if (stkr_macho_parse(map, (size_t)st.st_size, &sl[i], &im, err,
                           sizeof err) != 0) {
        note_damaged(d, path, err); /* named when an image finds nothing */
        continue;
      }
      if (im.has_uuid)
        rc = add(d, im.uuid,
                 stkr_macho_section_find(&im, "__DWARF", "__debug_info") ? 1 : 0,
                 path);
      stkr_macho_image_free(&im);
    }
  munmap(map, (size_t)st.st_size);
  return rc;
}

/* Has the directory st been walked? Else note it (false). A directory
 * past the table is walked again: bounded by MAX_DEPTH and MAX_FILES. */
static bool visited(stkr__machodir *d, const struct stat *st) {
  for (size_t i = 0; i < d->n_visited; i++)
    if (d->visited[i].dev == st->st_dev && d->visited[i].ino == st->st_ino)
      return true;
  if (d->n_visited < MAX_VISITED) {
    d->visited[d->n_visited].dev = st->st_dev;
    d->visited[d->n_visited++].ino = st->st_ino;
  }
  return false;
}

/* Symbolic links are followed (a folder of links to dSYMs is common: QA,
 * session 30), each directory once (a link to an ancestor would loop). */
static int walk(stkr__machodir *d, const char *dir, int depth) {
  DIR *dp;
  struct dirent *de;
  struct stat st;
  int rc = 0;
  if (depth > MAX_DEPTH || stat(dir, &st) != 0 || visited(d, &st) ||
      !(dp = opendir(dir)))
    return 0;
  while (rc == 0 && (de = readdir(dp)) != NULL) {
    char p[4096];
    if (de->d_name[0] == '.' &&
        (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
      continue;
    if (d->dir_files >= MAX_FILES) break; /* said by the caller */
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p)
      continue;
    if (stat(p, &st) != 0) continue; /* (a dangling link) */
    d->files++;
    d->dir_files++;
    if (S_ISDIR(st.st_mode)) rc = walk(d, p, depth + 1);
    else if (S_ISREG(st.st_mode)) rc = scan_file(d, p);
  }
  closedir(dp);
  return rc;
}

int stkr__machodir_scan(const char *const *dirs, size_t n,
                        stkr__machodir **out) {
  stkr__machodir *d = calloc(1, sizeof *d);
  int rc = 0;
  *out = NULL;
  if (!d) return -ENOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    d->dir_files = 0;
    rc = walk(d, dirs[i], 0);
    if (rc == 0 && d->dir_files >= MAX_FILES && !d->cut &&
        !(d->cut = strdup(dirs[i])))
      rc = -ENOMEM;
  }
  if (rc < 0) {
    stkr__machodir_free(d);
    return rc;
  }
  *out = d;
  return 0;
}

void stkr__machodir_free(stkr__machodir *d) {
  if (!d) return;
  STKR_FREE_EACH(d->e, d->n, path);
  for (size_t i = 0; i < d->n_damaged; i++) free(d->damaged[i]);
  free(d->cut);
  free(d->e);
  free(d);
}

static const char *base_of(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

int stkr__machodir_open(stkr__machodir *d, const char *image_path,
                        const uint8_t uuid[16], stkr__symfile **out,
                        char *why, size_t cap) {
  char want[37], got[37], err[512] = "";
  const uent *best = NULL;
  int rc;

  *out = NULL;
  stkr_macho_uuid_str(uuid, want);
  for (size_t i = 0; d && i < d->n; i++)
    if (memcmp(d->e[i].uuid, uuid, 16) == 0 && (!best || best->rank < d->e[i].rank))
      best = &d->e[i];
  if (best) {
    rc = stkr__symfile_open(best->path, NULL, uuid, out, err, sizeof err);
    if (rc == 0 || rc == -ENOMEM) return rc;
    snprintf(why, cap, "%s", err);
    return -ENOENT;
  }
  /* The recorded path, if this machine has it (a shared build tree). */
  if (image_path[0] == '/' && access(image_path, R_OK) == 0) {
    rc = stkr__symfile_open(image_path, NULL, uuid, out, err, sizeof err);
    if (rc == 0 || rc == -ENOMEM) return rc;
    snprintf(why, cap, "UUID mismatch or unreadable: %s", err);
    return -ENOENT;
  }
  for (size_t i = 0; d && i < d->n; i++)
    if (strcmp(base_of(d->e[i].path), base_of(image_path)) == 0) {
      /* Every slice's UUID of that file (a universal file has several:
       * QA, session 30, named only its first, another architecture's). */
      char uuids[4 * 40] = "";
      size_t n_uuids = 0, used = 0;
      for (size_t k = i; k < d->n && n_uuids < 4; k++) {
        if (strcmp(d->e[k].path, d->e[i].path) != 0) continue;
        stkr_macho_uuid_str(d->e[k].uuid, got);
        int w = snprintf(uuids + used, sizeof uuids - used, "%s%s",
                         n_uuids ? ", " : "", got);
        if (w < 0 || (size_t)w >= sizeof uuids - used) break;
        used += (size_t)w;
        n_uuids++;
      }
      snprintf(why, cap, "UUID mismatch: recorded %s, but %s has UUID%s %s",
               want, d->e[i].path, n_uuids > 1 ? "s" : "", uuids);
      return -ENOENT;
    }
  /* The caller tries ELF files with this id next and uses this message
   * if none matches either. */
  int w = snprintf(why, cap, "no dSYM or Mach-O file with UUID %s (nor an "
                   "ELF file with that build-id) found%s", want,
                   d && d->files ? " in the debug dirs" : " (give --debug-dir)");
  size_t used = w > 0 && (size_t)w < cap ? (size_t)w : cap ? cap - 1 : 0;
  for (size_t i = 0; d && i < d->n_damaged && used + 1 < cap; i++) {
    w = snprintf(why + used, cap - used, "%s%s", i ? "; " :
                 "; Mach-O files or symbol caches that could not be read: ",
                 d->damaged[i]);
    used += w > 0 && (size_t)w < cap - used ? (size_t)w : cap - used - 1;
  }
  if (d && d->cut && used + 1 < cap)
    snprintf(why + used, cap - used, "; the walk of %s stopped after %u "
             "entries, the rest not looked at", d->cut, MAX_FILES);
  return -ENOENT;
}

#endif /* !__APPLE__ */
