/*
 * snapshot_images.c: the images and readable mappings of another process,
 * from /proc/PID/maps, for `stackrec snapshot` (snapshot.h).
 *
 * Each file mapped executable is one image. Its load bias comes from the
 * ELF file's program headers (read through /proc/PID/root/PATH, so a
 * process in another mount namespace is read right): the executable
 * PT_LOAD whose file offset the mapping starts at gives
 * bias = mapping start - (p_vaddr rounded down to the page). The build-id
 * is the file's NT_GNU_BUILD_ID note; the symbolizer then checks any file
 * it uses against it. The file's .eh_frame CFI is kept open for the
 * unwinder. The vDSO, which is no file, is read from the target's memory
 * and opened alike (add_vdso). Read before any thread is stopped: none of
 * this is part of a thread's stop.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdw.h>

#include "common/stkr_grow.h"
#include "tools/stackrec/snapshot.h"

/* One line of /proc/PID/maps. */
typedef struct mapline {
  uint64_t lo, hi, off;
  char perms[5];
  const char *path; /* into the line buffer; "" when anonymous */
} mapline;

static bool parse_line(char *s, mapline *m) {
  int n = 0;
  unsigned long long lo, hi, off;
  if (sscanf(s, "%llx-%llx %4s %llx %*s %*s %n", &lo, &hi, m->perms, &off,
             &n) < 4 || n == 0)
    return false;
  m->lo = lo;
  m->hi = hi;
  m->off = off;
  m->path = s + n;
  s[strcspn(s, "\n")] = '\0';
  return true;
}

static int add_map(stkr_snap_map **v, size_t *n, size_t *cap, uint64_t lo,
                   uint64_t hi) {
  if (*n > 0 && (*v)[*n - 1].hi == lo) {
    (*v)[*n - 1].hi = hi; /* adjacent: one range */
    return 0;
  }
  if (stkr_grow((void **)v, cap, *n + 1, sizeof **v)) return -ENOMEM;
  (*v)[(*n)++] = (stkr_snap_map){lo, hi};
  return 0;
}

/* The NT_GNU_BUILD_ID of elf into img. */
static void read_build_id(Elf *elf, stkr_snap_image *img) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    Elf_Data *d;
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nh;
    if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE) continue;
    d = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
    if (!d) continue;
    while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 &&
          nh.n_descsz > 0 && nh.n_descsz <= sizeof img->build_id) {
        memcpy(img->build_id, (const char *)d->d_buf + desc_off,
               nh.n_descsz);
        img->sym.build_id = img->build_id;
        img->sym.build_id_len = nh.n_descsz;
        return;
      }
    }
  }
}

/* Take elf as img's: the load bias from its executable PT_LOAD that the
 * mapping m (file offset m->off) starts in, its build-id, its .eh_frame
 * CFI for the unwinder. */
static void use_elf(Elf *elf, const mapline *m, stkr_snap_image *img) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) n = 0;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
        !(ph.p_flags & PF_X))
      continue;
    uint64_t page = ph.p_align > 1 && ph.p_align <= 65536 ? ph.p_align : 4096;
    if ((ph.p_offset & ~(page - 1)) <= m->off &&
        m->off < ph.p_offset + ph.p_filesz) {
      img->sym.load_address =
          m->lo - m->off - ((ph.p_vaddr & ~(page - 1)) - (ph.p_offset & ~(page - 1)));
      break;
    }
  }
  read_build_id(elf, img);
  img->elf = elf;
  img->cfi = dwarf_getcfi_elf(elf); /* NULL: no .eh_frame (fp walk only) */
}

/* Open the image's file and find its bias from the mapping m (executable,
 * file offset m->off). Without a readable ELF file the image keeps a
 * bias of m->lo - m->off (right for every shared object linked at 0). */
static void open_file(const char *base, const mapline *m,
                      stkr_snap_image *img) {
  char path[PATH_MAX + 64];
  size_t n = 0;
  img->sym.load_address = m->lo - m->off;
  img->fd = -1;
  snprintf(path, sizeof path, "%s/root%s", base, img->path);
  img->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (img->fd < 0) return;
  Elf *elf = elf_begin(img->fd, ELF_C_READ_MMAP, NULL);
  if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &n) != 0) {
    if (elf) elf_end(elf);
    close(img->fd);
    img->fd = -1;
    return;
  }
  use_elf(elf, m, img);
}

/* A new image of im named path[0..len), for the executable mapping m.
 * @return it, or NULL (out of memory). */
static stkr_snap_image *new_image(stkr_snap_images *im, size_t *cap,
                                  const char *path, size_t len,
                                  const mapline *m) {
  stkr_snap_image *img;
  if (stkr_grow((void **)&im->v, cap, im->n + 1, sizeof *im->v))
    return NULL;
  img = &im->v[im->n];
  memset(img, 0, sizeof *img);
  img->fd = -1;
  img->path = strndup(path, len);
  if (!img->path) return NULL;
  im->n++;
  img->sym.path = img->path;
  img->sym.text_start = m->lo;
  img->sym.text_end = m->hi;
  img->sym.load_address = m->lo - m->off;
  img->map_bias = m->lo - m->off;
  return img;
}

/* The executable mapping m of a file: more text of an image of that file
 * placed alike (the same address - offset), else an image of its own. A
 * file mapped twice elsewhere (node maps its text again, on huge pages)
 * is two images: one range from the lowest to the highest took in every
 * library, anonymous JIT code and the stack between, named as the
 * executable (QA, session 26). */
static int add_exec(const char *base, stkr_snap_images *im,
                    const mapline *m, size_t *cap, bool first) {
  stkr_snap_image *img;
  const char *p = m->path;
  size_t len = strlen(p);
  static const char deleted[] = " (deleted)";

  if (len > sizeof deleted - 1 &&
      strcmp(p + len - (sizeof deleted - 1), deleted) == 0)
    len -= sizeof deleted - 1;
  for (size_t i = 0; i < im->n; i++) {
    img = &im->v[i];
    if (strlen(img->path) == len && memcmp(img->path, p, len) == 0)
      first = first || img->sym.app; /* the executable mapped again */
    if (strlen(img->path) == len && memcmp(img->path, p, len) == 0 &&
        img->map_bias == m->lo - m->off) {
      if (m->hi > img->sym.text_end) img->sym.text_end = m->hi;
      if (m->lo < img->sym.text_start) img->sym.text_start = m->lo;
      return 0;
    }
  }
  if (!(img = new_image(im, cap, p, len, m))) return -ENOMEM;
  img->sym.app = first; /* the main executable maps first */
  open_file(base, m, img);
  return 0;
}

/* Most bytes of the vDSO read: x86_64's is 8 KiB, aarch64's two pages (of
 * up to 64 KiB). A larger "[vdso]" is not read. */
#define VDSO_MAX (1u << 20)

/* The bytes of [m->lo, m->hi) of the process whose /proc directory is
 * base, read from its memory (base/mem: the right ptrace needs, which the
 * snapshot needs anyway; the target is not stopped). @return a malloc'd
 * copy, or NULL with errno set. */
static void *read_target(const char *base, const mapline *m) {
  char path[128];
  size_t len = m->hi - m->lo, got = 0;
  uint8_t *buf;
  int fd, e = 0;

  snprintf(path, sizeof path, "%.96s/mem", base);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return NULL;
  if (!(buf = malloc(len))) {
    close(fd);
    errno = ENOMEM;
    return NULL;
  }
  while (got < len && e == 0) {
    ssize_t k = pread(fd, buf + got, len - got, (off_t)(m->lo + got));
    if (k < 0 && errno != EINTR) e = errno;
    else if (k == 0) e = EIO; /* the mapping went away meanwhile */
    else if (k > 0) got += (size_t)k;
  }
  close(fd);
  if (e != 0) {
    free(buf);
    errno = e;
    return NULL;
  }
  return buf;
}

/* The vDSO (the "[vdso]" mapping m): the kernel's code in every process
 * (clock_gettime, gettimeofday, time run there), and no file. A walk by
 * frame pointers from inside it skipped its caller whenever the vDSO
 * function had no frame record at that instant: before its push of the
 * frame pointer, after its pop (x86_64's clock_gettime clears registers
 * there), or none at all (__vdso_time) -- QA: 30 of 1 600 samples of a
 * thread in clock_gettime lost frames. So it is read from the target's
 * memory once per run, before any thread is stopped, and opened as an
 * in-memory ELF: its .eh_frame walks those frames like a file's. Not
 * read (im->note says why; frame pointers there, as before): out of
 * bounds, unreadable, not ELF. @return 0 or -ENOMEM. */
static int add_vdso(pid_t pid, const char *base, stkr_snap_images *im,
                    const mapline *m, size_t *cap) {
  stkr_snap_image *img;
  void *mem;
  Elf *elf;
  size_t n;

  if (m->hi - m->lo > VDSO_MAX) {
    snprintf(im->note, sizeof im->note, "the vDSO of process %d (%" PRIu64
             " KiB) was not read: over %u KiB; frames inside it are walked "
             "by frame pointers", (int)pid, (m->hi - m->lo) >> 10,
             VDSO_MAX >> 10);
    return 0;
  }
  if (!(mem = read_target(base, m))) {
    int e = errno;
    if (e == ENOMEM) return -ENOMEM;
    /* Not ours to read, or gone: the capture says so on its own. */
    if (e != EACCES && e != EPERM && e != ESRCH && e != ENOENT)
      snprintf(im->note, sizeof im->note, "the vDSO of process %d could "
               "not be read from %s/mem: %s; frames inside it are walked by "
               "frame pointers", (int)pid, base, strerror(e));
    return 0;
  }
  elf = elf_memory(mem, m->hi - m->lo);
  if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &n) != 0) {
    if (elf) elf_end(elf);
    free(mem);
    snprintf(im->note, sizeof im->note, "the vDSO of process %d is not an "
             "ELF image; frames inside it are walked by frame pointers",
             (int)pid);
    return 0;
  }
  if (!(img = new_image(im, cap, m->path, strlen(m->path), m))) {
    elf_end(elf);
    free(mem);
    return -ENOMEM;
  }
  img->mem = mem;
  use_elf(elf, m, img);
  return 0;
}

/* The maps file of pid, opened, with the /proc directory it is in into
 * base: /proc/PID, or, when the main thread has exited (pthread_exit:
 * a zombie whose maps and root read as empty while other threads run on),
 * /proc/PID/task/TID of a thread that still has them (QA: "it has
 * exited"). NULL: errno says why. */
static FILE *open_maps(pid_t pid, char *base, size_t cap) {
  char path[128]; /* base is at most "/proc/PID/task/TID": under 64 */
  FILE *f;
  DIR *d;
  struct dirent *e;
  int c;

  snprintf(base, cap, "/proc/%d", (int)pid);
  snprintf(path, sizeof path, "%.96s/maps", base);
  if ((f = fopen(path, "re")) == NULL || (c = fgetc(f)) != EOF) {
    if (f) ungetc(c, f);
    return f;
  }
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  if ((d = opendir(path)) == NULL)
    return f; /* empty: said by the caller */
  while ((e = readdir(d)) != NULL) {
    FILE *t;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(base, cap, "/proc/%d/task/%.20s", (int)pid, e->d_name);
    snprintf(path, sizeof path, "%.96s/maps", base);
    if ((t = fopen(path, "re")) == NULL) continue;
    if ((c = fgetc(t)) != EOF) {
      ungetc(c, t);
      fclose(f);
      closedir(d);
      return t;
    }
    fclose(t);
  }
  closedir(d);
  snprintf(base, cap, "/proc/%d", (int)pid);
  return f;
}

/* Is pid a kernel thread (PF_KTHREAD in /proc/PID/stat's flags)? Its
 * maps are empty as a zombie's are (QA, session 43: "it has exited" said
 * of kthreadd). */
static bool kernel_thread(pid_t pid) {
  char path[64], st[1024];
  unsigned long flags = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return false;
  size_t n = fread(st, 1, sizeof st - 1, f);
  fclose(f);
  st[n] = '\0';
  const char *p = strrchr(st, ')'); /* after the name, which may hold ')' */
  /* ") S ppid pgrp session tty_nr tpgid flags" */
  return p != NULL &&
         sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 &&
         (flags & 0x00200000ul) != 0; /* PF_KTHREAD */
}

int stkr_snap_images_read(pid_t pid, stkr_snap_images *im, bool with_images,
                          char *err, size_t err_cap) {
  char base[96], *line = NULL;
  size_t line_cap = 0, cap_img = 0, cap_map = 0;
  bool first = true, vdso = false;
  int rc = 0;
  FILE *f;

  if (with_images) {
    memset(im, 0, sizeof *im); /* im->note too */
  } else {
    im->n_maps = im->n_xmaps = 0; /* keep the arrays */
    cap_map = im->maps ? im->cap_maps : 0;
  }
  elf_version(EV_CURRENT);
  f = open_maps(pid, base, sizeof base);
  if (!f) {
    rc = -errno;
    snprintf(err, err_cap, "process %d: cannot read %s/maps: %s", (int)pid,
             base, strerror(errno));
    return rc == -ENOENT ? -ESRCH : rc;
  }
  while (rc == 0 && getline(&line, &line_cap, f) > 0) {
    mapline m;
    if (!parse_line(line, &m)) continue;
    if (m.perms[0] == 'r')
      rc = add_map(&im->maps, &im->n_maps, &cap_map, m.lo, m.hi);
    if (rc == 0 && m.perms[2] == 'x') /* files, JIT code, the vdso */
      rc = add_map(&im->xmaps, &im->n_xmaps, &im->cap_xmaps, m.lo, m.hi);
    if (rc == 0 && with_images && m.perms[2] == 'x' && m.path[0] == '/') {
      rc = add_exec(base, im, &m, &cap_img, first);
      first = false;
    }
    /* The first "[vdso]" line only (the kernel maps one). */
    if (rc == 0 && with_images && m.perms[2] == 'x' && !vdso &&
        strcmp(m.path, "[vdso]") == 0) {
      rc = add_vdso(pid, base, im, &m, &cap_img);
      vdso = true;
    }
  }
  free(line);
  fclose(f);
  /* Each image's build-id pointer into its own array, now that im->v is
   * where it stays: taken while the array still grew, it pointed into the
   * block realloc had freed (a zombie leader's process showed every frame
   * as ?? with a "build-id mismatch" made of path bytes). */
  for (size_t i = 0; with_images && i < im->n; i++)
    if (im->v[i].sym.build_id_len > 0)
      im->v[i].sym.build_id = im->v[i].build_id;
  im->cap_maps = cap_map;
  if (rc == 0 && im->n_maps == 0) /* maps of a zombie, or not ours to read */
    rc = -ESRCH;
  if (rc == -ESRCH && kernel_thread(pid))
    snprintf(err, err_cap, "process %d is a kernel thread: it has no "
             "user-space stack to snapshot", (int)pid);
  else if (rc != 0)
    snprintf(err, err_cap, "cannot read the mappings of process %d: %s",
             (int)pid, rc == -ESRCH ? "it has exited" : strerror(-rc));
  if (rc != 0) {
    if (with_images) stkr_snap_images_free(im);
  }
  return rc;
}

void stkr_snap_images_free(stkr_snap_images *im) {
  for (size_t i = 0; i < im->n; i++) {
    stkr_snap_image *img = &im->v[i];
    if (img->cfi) dwarf_cfi_end(img->cfi);
    if (img->elf) elf_end(img->elf);
    if (img->fd >= 0) close(img->fd);
    free(img->mem); /* after elf_end: the Elf read it */
    free(img->path);
  }
  free(im->v);
  free(im->maps);
  free(im->xmaps);
  memset(im, 0, sizeof *im);
}

bool stkr_snap_executable(const stkr_snap_images *im, uint64_t pc) {
  size_t lo = 0, hi = im->n_xmaps;
  while (lo < hi) { /* the first range that ends above pc */
    size_t mid = lo + (hi - lo) / 2;
    if (im->xmaps[mid].hi <= pc) lo = mid + 1;
    else hi = mid;
  }
  return lo < im->n_xmaps && im->xmaps[lo].lo <= pc;
}

const stkr_snap_image *stkr_snap_image_of(const stkr_snap_images *im,
                                          uint64_t pc) {
  for (size_t i = 0; i < im->n; i++)
    if (pc >= im->v[i].sym.text_start && pc < im->v[i].sym.text_end)
      return &im->v[i];
  return NULL;
}
