/*
 * stkr__recover.h: internals shared by stkr_recover.c (directory, names,
 * ring decoder) and stkr_recover_session.c (one dead session -> segment).
 * Not public.
 */
#ifndef STKR__RECOVER_H
#define STKR__RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/stkr__reader.h"
#include "proto/stkr_recover.h"

#define STKR__RC_PATH_MAX 4096

typedef struct stkr__rc_file {
  uint32_t pid;
  uint64_t sid;
  uint32_t thread; /* 0: the session file */
} stkr__rc_file;

typedef struct stkr__rc_seg {
  uint32_t pid, seq;
} stkr__rc_seg;

typedef struct stkr__rc {
  const char *dir;
  stkr_recover_opts opts;
  stkr_recover_stats *st;
  stkr__rc_file *files; /* ring and session files, sorted */
  size_t n_files, cap_files;
  stkr__rc_seg *segs;   /* segment files in dir */
  size_t n_segs, cap_segs;
} stkr__rc;

void stkr__rc_msg(stkr__rc *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int stkr__rc_parse_name(const char *s, uint32_t *pid, uint64_t *sid,
                        uint32_t *thread);
int stkr__rc_read_file(int fd, uint64_t max, uint8_t **data, uint64_t *len);
/* dir/<name of (pid, sid, thread)> into buf (STKR__RC_PATH_MAX bytes). */
void stkr__rc_path(const stkr__rc *rc, char *buf, uint32_t pid, uint64_t sid,
                   uint32_t thread);
/* Recover one session whose session file is rc->files-entry (pid, sid) and
 * whose rings are rings[0..n). Returns 1 when the session was dead (and
 * recovered or tried), 0 when it was live or gone, <0 on a hard error. */
int stkr__rc_session(stkr__rc *rc, const stkr__rc_file *rings, size_t n);

#endif /* STKR__RECOVER_H */
