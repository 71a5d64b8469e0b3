/*
 * stkr_marks_running.c: the marks file's "r1" lines, processes of a
 * recorded tree still running when `stackrec record` ended (see
 * stkr_reader.h, "processes still running"): written by record, read by
 * the reader, which tells whether each is alive now.
 *
 * Why a line and a liveness test rather than a file per process: such a
 * process may not have recorded anything yet (its session file, whose lock
 * tells a live writer, exists only from its first watched call), and
 * `record` must not wait for it. The start time with the boot id names the
 * process itself, not its pid, which the system may give to another one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_pid.h"
#include "proto/stkr__reader.h"

#define BOOT_ID_HEX 32

/* This boot's id: /proc/sys/kernel/random/boot_id without its dashes, into
 * out (BOOT_ID_HEX + 1 bytes). @return 0, or -1 when not known. */
static int boot_id(char out[BOOT_ID_HEX + 1]) {
#if defined(__linux__)
  char buf[64];
  size_t n = 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

  if (f == NULL)
    return -1;
  if (fgets(buf, sizeof buf, f) == NULL)
    buf[0] = '\0';
  fclose(f);
  for (const char *p = buf; *p != '\0' && *p != '\n'; p++) {
    if (*p == '-')
      continue;
    if (n == BOOT_ID_HEX || !((*p >= '0' && *p <= '9') ||
                              (*p >= 'a' && *p <= 'f')))
      return -1;
    out[n++] = *p;
  }
  out[n] = '\0';
  return n == BOOT_ID_HEX ? 0 : -1;
#else
  (void)out;
  return -1;
#endif
}


const char *stkr__running_line(stkr_reader *r, const char *path,
                               const char *p, const char *end, bool *nomem) {
  struct stkr__marks_dir *md = &r->mdirs[r->n_mdirs - 1];
  const char *tok[5], *why = NULL;
  size_t len[5];
  uint64_t pid, start, now_start;
  char boot[BOOT_ID_HEX + 1];
  stkr_running_info u;

  if (stkr__marks_fields(p, end, tok, len, 5) != 5)
    return "not 5 space-separated fields (r1 pid boot-id start name)";
  if (stkr__parse_u64(tok[1], tok[1] + len[1], &pid) != 0 || pid > UINT32_MAX)
    return "pid is not a decimal number";
  if (len[2] != BOOT_ID_HEX || strspn(tok[2], "0123456789abcdef") < len[2])
    return "boot id is not 32 lower-case hex digits";
  if (stkr__parse_u64(tok[3], tok[3] + len[3], &start) != 0)
    return "start time is not a decimal number";
  memset(&u, 0, sizeof u);
  u.pid = (uint32_t)pid;
  if ((u.name = stkr__unhex(tok[4], len[4], &why)) == NULL) {
    if (why == NULL)
      *nomem = true;
    return why;
  }
  if (boot_id(boot) != 0 || memcmp(boot, tok[2], BOOT_ID_HEX) != 0) {
    u.other_boot = true;
  } else {
    int err = stkr_pid_start_time(u.pid, &now_start);
    /* Unreadable (/proc with hidepid, another user's process): cannot
     * tell, as on another machine; never "ended". */
    u.other_boot = err != 0 && err != -ESRCH;
    /* And not a zombie: one nobody reaped yet has ended, its files are
     * closed (QA, session 31: a grandchild whose parent exec'd `sleep`
     * was "still running" for as long as the sleep lasted). */
    u.alive = err == 0 && now_start == start && stkr_pid_alive(u.pid);
  }
  /* One line per process: merged copies of one run name it twice. */
  for (size_t i = 0; i < r->n_running; i++)
    if (r->running[i].pid == u.pid && r->running[i].start == start &&
        memcmp(r->running[i].boot, tok[2], BOOT_ID_HEX) == 0) {
      free((char *)u.name);
      return NULL;
    }
  u.start = start;
  memcpy(u.boot, tok[2], BOOT_ID_HEX);
  /* One copy of the path per file, shared with its "u1" lines. */
  if (md->path == NULL)
    md->path = strdup(path);
  u.path = md->path;
  if (u.path == NULL || stkr__grow(&r->running, &r->cap_running,
                                   r->n_running + 1, sizeof *r->running)) {
    free((char *)u.name);
    *nomem = true;
    return NULL;
  }
  r->running[r->n_running++] = u;
  return NULL;
}

size_t stkr_reader_running_count(const stkr_reader *r) {
  return r != NULL ? r->n_running : 0;
}

const stkr_running_info *stkr_reader_running(const stkr_reader *r,
                                             size_t i) {
  return r != NULL && i < r->n_running ? &r->running[i] : NULL;
}

int stkr_running_append(const char *dir, uint32_t pid, const char *name) {
  char line[96 + 2 * 255], boot[BOOT_ID_HEX + 1], *path;
  uint64_t start;
  size_t n;
  int err;

  if (dir == NULL || name == NULL)
    return -EINVAL;
  if ((err = stkr_pid_start_time(pid, &start)) != 0)
    return err;
  if (boot_id(boot) != 0)
    return -EIO;
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0)
    return -ENOMEM;
  n = (size_t)snprintf(line, sizeof line, "r1 %u %s %llu ", (unsigned)pid,
                       boot, (unsigned long long)start);
  n += stkr__put_hex(line + n, name, 255);
  line[n++] = '\n';
  err = stkr__marks_append(path, line, n);
  free(path);
  return err;
}
