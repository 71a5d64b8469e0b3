/*
 * record_notify.c: the STACKREC_NOTIFY channel of `stackrec record`: the
 * socket the processes of the recorded tree report to, the notices read
 * from it, and the processes of the tree still running at the end (their
 * environment holds the channel's name). Linux only, as record is.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_pid.h"
#include "common/stkr_elfkind.h"
#include "common/stkr_which.h"
#include "proto/stkr_format.h"
#include "proto/stkr_recover.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/record.h"

/* An abstract unix datagram socket the hooks of every process report to
 * when they cannot record (preload.c: init_failed); "NAME/TOKEN" goes into
 * STACKREC_NOTIFY (common/stkr_notify.h: a notice must carry the token).
 * Abstract names ignore file permissions: a process that dropped its
 * privileges can still send. @return the fd (close-on-exec, non-blocking),
 * or -1: then failures are said on the program's stderr as without
 * record, which is worse but not silent. */
int stkr__rec_notify_open(char *name, size_t cap) {
  struct sockaddr_un sa;
  unsigned long long rnd[2];
  int fd, buf = 1 << 20;
  FILE *f = fopen("/dev/urandom", "re");

  if (f == NULL || fread(rnd, sizeof rnd, 1, f) != 1) {
    /* No urandom: guessable, said once (a stranger could forge notices). */
    fprintf(stderr, "stackrec record: no /dev/urandom: the notice channel's "
                    "token is guessable\n");
    rnd[0] = (unsigned long long)time(NULL);
    rnd[1] = (unsigned long long)getpid() * 0x9e3779b97f4a7c15ull ^ rnd[0];
  }
  if (f != NULL)
    fclose(f);
  snprintf(name, cap, "stackrec-record-%d-%08x/%016llx", (int)getpid(),
           (unsigned)rnd[0], rnd[1]);
  size_t nlen = strcspn(name, "/");
  if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
    return -1;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path + 1, name, nlen); /* sun_path[0] = 0 */
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (bind(fd, (struct sockaddr *)&sa,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nlen)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Read every queued notice: "token\tpid\tname\terrno\twhat"
 * (common/stkr_notify.h). One without the tree's token is counted as
 * foreign, not believed. */
void stkr__rec_notify_drain(int fd, stkr__rec_notices *nt) {
  const char *slash = strchr(nt->tree, '/');
  const char *token = slash != NULL ? slash + 1 : "";
  size_t tlen = strlen(token);
  char buf[1024];
  ssize_t n;

  if (fd < 0)
    return;
  while ((n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT)) >= 0 ||
         errno == EINTR) {
    stkr__rec_notice *m;
    char *pid, *name, *err, *what;
    if (n < 0)
      continue;
    buf[n] = '\0';
    if (tlen == 0 || strncmp(buf, token, tlen) != 0 || buf[tlen] != '\t' ||
        (name = strchr((pid = buf + tlen + 1), '\t')) == NULL ||
        (err = strchr(name + 1, '\t')) == NULL ||
        (what = strchr(err + 1, '\t')) == NULL) {
      nt->foreign++;
      continue;
    }
    *name++ = *err++ = *what++ = '\0';
    if (nt->n == STKR__REC_MAX_NOTICES) {
      nt->more++;
      /* Not listed, but named in the recording at once, as it will be
       * read: a process each. */
      if (atoi(err) != 0 &&
          (nt->dir == NULL ||
           stkr_unrecorded_append(nt->dir, (uint32_t)atoi(pid), name,
                                  what) != 0))
        nt->more_unrecorded++;
      continue;
    }
    m = &nt->v[nt->n++];
    memset(m, 0, sizeof *m);
    m->pid = atoi(pid);
    m->err = atoi(err);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->what, sizeof m->what, "%s", what);
    /* Into the recording now: a record killed before its end (SIGKILL,
     * the OOM killer) took these with it, and the recording verified
     * complete (QA, session 41). Not into a directory that took the name
     * since (`mv DIR DIR.1; mkdir DIR`): the end writes those. */
    if (m->err != 0 && nt->dir != NULL &&
        (nt->lock < 0 || stkr_recover_lock_is_at(nt->lock, nt->dir)))
      m->in_marks = stkr_unrecorded_append(nt->dir, (uint32_t)m->pid,
                                           m->name, m->what) == 0;
  }
}

void stkr__rec_unrecorded_write(const char *dir, const stkr__rec_notices *nt) {
  size_t i;
  int err = 0;

  for (i = 0; i < nt->n && err == 0; i++)
    if (nt->v[i].err != 0 && !nt->v[i].in_marks)
      err = stkr_unrecorded_append(dir, (uint32_t)nt->v[i].pid, nt->v[i].name,
                                   nt->v[i].what);
  if (nt->more_unrecorded && err == 0) { /* one line, not one each */
    char why[160];
    snprintf(why, sizeof why, "%llu more processes recorded nothing (not "
             "listed: more notices than record keeps)",
             (unsigned long long)nt->more_unrecorded);
    err = stkr_unrecorded_append(dir, 0, "", why);
  }
  if (err != 0)
    fprintf(stderr, "stackrec record: cannot name the processes that "
                    "recorded nothing in %s/%s: %s\n", dir, STKR_MARKS_FILE,
            strerror(-err));
}

/* The pid of a file of a process in a recording directory: a segment
 * (tombstones too), or a ring or session file left for recovery. */
static bool file_pid(const char *name, uint32_t *pid) {
  size_t len = strlen(name);

  if (stkr_fmt_segment_parse(name, pid, NULL) == 0)
    return true;
  if (strncmp(name, "stackrec-", 9) != 0 ||
      !((len > 8 && strcmp(name + len - 8, ".session") == 0) ||
        (len > 5 && strcmp(name + len - 5, ".ring") == 0)))
    return false;
  *pid = (uint32_t)strtoul(name + 9, NULL, 10);
  return true;
}

/* The pids of dir's files of processes (file_pid), sorted, into *out
 * (malloc'd). @return how many, or -1 when dir could not be read whole
 * (then no process may be said to have left nothing). */
static ssize_t file_pids(const char *dir, uint64_t **out) {
  DIR *d = opendir(dir);
  struct dirent *e;
  size_t n = 0, cap = 0;
  uint32_t pid;

  *out = NULL;
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    if (!file_pid(e->d_name, &pid))
      continue;
    if (stkr_grow((void **)out, &cap, n + 1, sizeof **out) != 0) {
      closedir(d);
      return -1;
    }
    (*out)[n++] = pid;
  }
  closedir(d);
  if (n > 0)
    qsort(*out, n, sizeof **out, stkr_qsort_u64);
  return (ssize_t)n;
}

/* Did a notice of nt say that process pid records nothing (err != 0)? */
static bool named_unrecorded(const stkr__rec_notices *nt, int pid) {
  for (size_t i = 0; i < nt->n; i++)
    if (nt->v[i].pid == pid && nt->v[i].err != 0)
      return true;
  return false;
}

void stkr__rec_vanished_write(const char *dir, const stkr__rec_notices *nt) {
  uint64_t *pids = NULL, key;
  ssize_t n_pids = 0;
  size_t i, j;
  bool scanned = false;
  int err = 0;
  /* The notes name the directory as the processes resolved it. */
  char *real = realpath(dir, NULL);
  const char *where = real != NULL ? real : dir;

  for (i = 0; i < nt->n && err == 0; i++) {
    const stkr__rec_notice *m = &nt->v[i];
    char why[768];
    bool again = false;

    /* A note about writing into this directory (a followed child's own
     * stkr_init may record elsewhere), from a process that is gone and
     * was not named already as one that records nothing. */
    if (m->err != 0 || m->pid <= 0 || strstr(m->what, where) == NULL ||
        stkr_pid_alive((uint32_t)m->pid) || named_unrecorded(nt, m->pid))
      continue;
    for (j = 0; j < i && !again; j++)
      again = nt->v[j].pid == m->pid;
    if (again)
      continue;
    if (!scanned) {
      n_pids = file_pids(dir, &pids);
      scanned = true;
    }
    if (n_pids < 0)
      break; /* unreadable: no one is said to have left nothing */
    key = (uint64_t)m->pid;
    if (n_pids > 0 &&
        bsearch(&key, pids, (size_t)n_pids, sizeof *pids, stkr_qsort_u64) !=
            NULL)
      continue;
    snprintf(why, sizeof why, "its events were lost, how many is not known: "
             "it ended before any of its segments reached the disk (its "
             "note: %s)", m->what);
    err = stkr_unrecorded_append(dir, (uint32_t)m->pid, m->name, why);
  }
  free(pids);
  free(real);
  if (err != 0)
    fprintf(stderr, "stackrec record: cannot name the processes that left "
                    "nothing in %s/%s: %s\n", dir, STKR_MARKS_FILE,
            strerror(-err));
}

/* Whether process `pid`'s environment holds `var` (1) or else `var2` (2)
 * ("NAME=value"): read entry by entry, whatever its size. No permission,
 * or gone: 0. */
static int environ_has(const char *pid, const char *var, const char *var2) {
  char path[300], *entry = NULL; /* pid: a /proc entry name */
  size_t cap = 0;
  int found = 0;
  FILE *fp;

  snprintf(path, sizeof path, "/proc/%s/environ", pid);
  if ((fp = fopen(path, "re")) == NULL)
    return 0;
  while (found != 1 && getdelim(&entry, &cap, '\0', fp) > 0)
    if (strcmp(entry, var) == 0) found = 1;
    else if (strcmp(entry, var2) == 0) found = 2;
  free(entry);
  fclose(fp);
  return found;
}

#define LIVE_LISTED 8

/* The processes started under this recording that are still running now
 * that CMD has ended (a daemon, a job put in the background): whatever
 * they record from now on is in no summary, and their files stay
 * unresolved. Found by their environment (STACKREC_NOTIFY, unique to this
 * run, or STACKREC_DIR naming dir: a daemon started with `env -u
 * STACKREC_NOTIFY` records there too; QA, session 28), so even those that
 * have not recorded anything yet are named. fn(arg, pid, name) for each;
 * @return how many. */
static size_t live_each(const stkr__rec_notices *nt, const char *dir,
                        void (*fn)(void *arg, const char *pid,
                                   const char *name),
                        void *arg) {
  char var[96], var2[PATH_MAX + 16], name[17];
  uint64_t ours = 0, theirs;
  size_t n = 0;
  struct dirent *de;
  DIR *d;

  if (nt->tree[0] == '\0' || (d = opendir("/proc")) == NULL)
    return 0;
  (void)stkr_pid_start_time((uint32_t)getpid(), &ours);
  snprintf(var, sizeof var, "STACKREC_NOTIFY=%s", nt->tree);
  snprintf(var2, sizeof var2, "STACKREC_DIR=%s",
           nt->env_dir != NULL ? nt->env_dir : dir);
  while ((de = readdir(d)) != NULL) {
    char path[sizeof de->d_name + 16];
    FILE *cf;
    int how;
    if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
        atoll(de->d_name) == (long long)getpid() ||
        (how = environ_has(de->d_name, var, var2)) == 0)
      continue;
    /* By STACKREC_DIR alone: only a process started since record was
     * (a shell that exported the variable before is not of the tree). */
    if (how == 2 && (ours == 0 ||
                     stkr_pid_start_time((uint32_t)strtoul(de->d_name, NULL,
                                                           10),
                                         &theirs) != 0 ||
                     theirs < ours))
      continue;
    snprintf(path, sizeof path, "/proc/%s/comm", de->d_name);
    name[0] = '\0';
    if ((cf = fopen(path, "re")) != NULL) {
      if (fgets(name, sizeof name, cf) != NULL)
        name[strcspn(name, "\n")] = '\0';
      fclose(cf);
    }
    fn(arg, de->d_name, name);
    n++;
  }
  closedir(d);
  return n;
}

typedef struct live_list {
  char pids[LIVE_LISTED][16], names[LIVE_LISTED][17];
  size_t n;
} live_list;

static void live_keep(void *arg, const char *pid, const char *name) {
  live_list *l = arg;
  if (l->n < LIVE_LISTED) {
    snprintf(l->pids[l->n], sizeof l->pids[l->n], "%.15s", pid);
    snprintf(l->names[l->n], sizeof l->names[l->n], "%s", name);
    l->n++;
  }
}

void stkr__rec_print_live(FILE *f, const stkr__rec_notices *nt,
                          const char *dir) {
  live_list l = {.n = 0};
  size_t n = live_each(nt, dir, live_keep, &l);

  if (n == 0)
    return;
  fprintf(f, "%zu process%s started under the recording %s still running:",
          n, n == 1 ? "" : "es", n == 1 ? "is" : "are");
  for (size_t i = 0; i < l.n; i++) {
    fprintf(f, "%s %s (", i ? "," : "", l.pids[i]);
    stkr_cli_put_escaped(f, (const uint8_t *)l.names[i], strlen(l.names[i]));
    fputc(')', f);
  }
  if (n > LIVE_LISTED)
    fprintf(f, " and %zu more", n - LIVE_LISTED);
  fprintf(f, "; what %s from now on is not in this summary: read ",
          n == 1 ? "it records" : "they record");
  stkr_cli_put_escaped(f, (const uint8_t *)dir, strlen(dir));
  fprintf(f, " again once %s\n", n == 1 ? "it ends" : "they end");
}

typedef struct live_note {
  const char *dir;
  int err;
  uint32_t *pids; /* every one written, for symbolize: its files wait */
  size_t n, cap;
} live_note;

static void live_write(void *arg, const char *pid, const char *name) {
  live_note *w = arg;
  uint32_t p = (uint32_t)strtoul(pid, NULL, 10);
  int err = stkr_running_append(w->dir, p, name);
  /* Kept whether or not its line could be written (its files may still
   * grow either way); not when it ended meanwhile. Out of memory: not
   * kept, its files then resolved while it may still write. */
  if (err != -ESRCH && stkr_grow((void **)&w->pids, &w->cap, w->n + 1,
                                 sizeof *w->pids) == 0)
    w->pids[w->n++] = p;
  /* -ESRCH: it ended meanwhile, nothing to say. */
  if (err != 0 && err != -ESRCH && w->err == 0)
    w->err = err;
}

size_t stkr__rec_running_write(const char *dir, const stkr__rec_notices *nt,
                               uint32_t **pids) {
  live_note w = {dir, 0, NULL, 0, 0};

  (void)live_each(nt, dir, live_write, &w);
  *pids = w.pids;
  if (w.err != 0)
    fprintf(stderr, "stackrec record: cannot note the processes still "
                    "running in %s/%s: %s (verify cannot tell that the "
                    "recording may still grow)\n",
            dir, STKR_MARKS_FILE, strerror(-w.err));
  return w.n;
}

/* ---- a statically linked CMD ---------------------------------------------
 * LD_PRELOAD works through the dynamic loader: a program without one (no
 * PT_INTERP) runs with no hooks, and its calls are in no file. Before, its
 * recording looked complete (QA, session 21: a CGO_ENABLED=0 Go program
 * read ~/.ssh 2 000 times, verify said intact). Its dynamically linked
 * children are recorded as usual. */


/* The program headers of ELF64 file path: its interpreter's path into
 * interp (cap bytes; "" when none), whether it has a PT_LOAD, its type.
 * @return false when path is not a readable ELF64 file (a script, 32-bit:
 * not judged). */
static bool elf_interp(const char *path, char *interp, size_t cap,
                       bool *loads, unsigned *type) {
  Elf64_Ehdr e;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  bool ok;

  interp[0] = '\0';
  *loads = false;
  if (fd < 0)
    return false;
  ok = pread(fd, &e, sizeof e, 0) == (ssize_t)sizeof e &&
       memcmp(e.e_ident, ELFMAG, SELFMAG) == 0 &&
       e.e_ident[EI_CLASS] == ELFCLASS64 && e.e_phentsize == sizeof(Elf64_Phdr);
  for (unsigned i = 0; ok && i < e.e_phnum && i < 256; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(e.e_phoff + (uint64_t)i * sizeof ph)) !=
        (ssize_t)sizeof ph)
      break;
    *loads |= ph.p_type == PT_LOAD;
    if (ph.p_type == PT_INTERP && ph.p_filesz < cap &&
        pread(fd, interp, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz)
      interp[ph.p_filesz] = '\0';
    else if (ph.p_type == PT_INTERP)
      snprintf(interp, cap, "?"); /* one it names, unreadable: not static */
  }
  close(fd);
  *type = ok ? e.e_type : 0;
  return ok;
}

/* Whether path is an ELF executable with no program interpreter, other
 * than the dynamic loader itself (it has none either, but honours
 * LD_PRELOAD: `record -- /lib64/ld-linux-x86-64.so.2 PROG`), which is
 * the interpreter our own binary names. */
static bool static_elf(const char *path) {
  char interp[256], ours[256];
  struct stat a, b;
  unsigned type;
  bool loads;

  if (!elf_interp(path, interp, sizeof interp, &loads, &type) ||
      interp[0] != '\0' || !loads || (type != ET_EXEC && type != ET_DYN))
    return false;
  return !(elf_interp("/proc/self/exe", ours, sizeof ours, &loads, &type) &&
           ours[0] != '\0' && stat(ours, &a) == 0 && stat(path, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

void stkr__rec_note_static(const char *cmd, int pid, stkr__rec_notices *nt) {
  char path[4096];
  const char *base;
  stkr__rec_notice *m;
  stkr_elf_kind kind;

  if (!stkr_which(cmd, getenv("PATH"), path, sizeof path) ||
      ((kind = stkr_program_kind(-1, path)) == STKR_ELF_OURS &&
       !static_elf(path)))
    return;
  if (nt->n == STKR__REC_MAX_NOTICES) {
    nt->more++;
    nt->more_unrecorded++;
    return;
  }
  m = &nt->v[nt->n++];
  memset(m, 0, sizeof *m);
  m->pid = pid;
  m->err = ENOEXEC;
  m->static_cmd = kind == STKR_ELF_OURS;
  base = strrchr(path, '/');
  snprintf(m->name, sizeof m->name, "%.16s", base != NULL ? base + 1 : path);
  if (kind != STKR_ELF_OURS) /* run without the hooks in LD_PRELOAD */
    snprintf(m->what, sizeof m->what, "%.300s is (or its #! interpreter "
             "is) a program of %s, which cannot load the hook library: "
             "neither its calls nor those of the programs it starts are "
             "recorded", path,
             kind == STKR_ELF_OTHER_CLASS ? "the other ELF class (32-bit "
                                            "beside 64-bit, or the reverse)"
                                          : "another machine");
  else
    snprintf(m->what, sizeof m->what, "%.300s is statically linked (no "
             "dynamic loader), so LD_PRELOAD cannot load the hooks into it: "
             "its own calls are not recorded (its dynamically linked "
             "children are)", path);
}

void stkr__rec_static_settle(const char *dir, stkr__rec_notices *nt) {
  for (size_t i = 0; i < nt->n; i++) {
    stkr__rec_notice *m = &nt->v[i];
    char prefix[32];
    struct dirent *de;
    DIR *d;
    bool recorded = false;

    if (!m->static_cmd || (d = opendir(dir)) == NULL)
      continue;
    snprintf(prefix, sizeof prefix, "stackrec-%d-", m->pid);
    while (!recorded && (de = readdir(d)) != NULL)
      recorded = strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    if (!recorded)
      continue;
    m->err = 0;
    snprintf(m->what, sizeof m->what, "statically linked, it ran without "
             "the hooks until it exec'd a program that has them: its own "
             "calls before that exec are not recorded");
  }
}
