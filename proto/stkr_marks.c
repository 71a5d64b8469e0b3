/*
 * stkr_marks.c: marks in the reader (see "Marks" in stkr_reader.h).
 *
 * Two sources: marks the process recorded (events at "mark:NAME" sites,
 * common/stkr_mark.h), moved to the front of each batch's columns so that
 * they are handed out first; and the marks file of `stackrec mark` (STKR_MARKS_FILE), read
 * once per directory when it is added, and handed to every process of that
 * directory before its first event (stkr_extmarks.c). The marks file's format is defined
 * here too (stkr_mark_append writes it), so writer and reader are one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_boot.h"
#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "common/stkr_notify.h"
#include "common/stkr_io.h"
#include "common/stkr_mark.h"
#include "proto/stkr__reader.h"

/* ---- marks recorded by the process --------------------------------------- */

static bool stkr__is_mark_id(const stkr__stream *st, uint32_t id) {
  size_t i;

  for (i = 0; i < st->n_mark_ids; i++)
    if (st->mark_ids[i] == id)
      return true;
  return false;
}

int stkr__marks_site(stkr__stream *st, stkr_site_info *s, uint32_t id) {
  if (s != NULL) {
    const char *name = stkr_mark_from_site(s->name);

    if (name == NULL)
      return 0; /* an ordinary site */
    /* The entry's name is owned (stkr__strdup0): strip it in place. */
    memmove((char *)s->name, name, strlen(name) + 1);
    s->is_mark = true;
  }
  if (stkr__is_mark_id(st, id))
    return 0;
  if (stkr__grow(&st->mark_ids, &st->cap_mark_ids, st->n_mark_ids + 1,
                 sizeof(*st->mark_ids)) != 0)
    return -ENOMEM;
  st->mark_ids[st->n_mark_ids++] = id;
  return 0;
}

#define STKR__MAX_MARK_STACKS 64

int stkr__marks_stack(stkr__stream *st, uint32_t id, uint32_t site_id) {
  if (!stkr__is_mark_id(st, site_id))
    return 0;
  if (st->many_mark_stacks)
    return 1;
  if (st->n_mark_stacks >= STKR__MAX_MARK_STACKS) {
    st->many_mark_stacks = true;
    return 1;
  }
  if (stkr__grow(&st->mark_stacks, &st->cap_mark_stacks,
                 st->n_mark_stacks + 1, sizeof(*st->mark_stacks)) != 0)
    return -ENOMEM;
  st->mark_stacks[st->n_mark_stacks++] = id;
  return 1;
}

/* Is event i of e a mark? By its site column, else by its stack: a few
 * compares against the mark stacks (a lookup when there are many). */
static bool stkr__event_is_mark(const stkr__stream *st,
                                const Stackrec__Events *e, size_t i) {
  uint32_t idx, stack = e->stack_id[i];
  size_t k;

  if (e->n_site_id)
    return stkr__is_mark_id(st, e->site_id[i]);
  if (st->many_mark_stacks)
    return stkr__idmap_get(&st->stack_map, stack, &idx) &&
           stkr__is_mark_id(st, st->stacks[idx].site_id);
  for (k = 0; k < st->n_mark_stacks; k++)
    if (st->mark_stacks[k] == stack)
      return true;
  return false;
}

/* Permute the n-entry column col by ord (new position j holds old entry
 * ord[j]), through tmp. */
static void stkr__permute_u32(uint32_t *col, const uint32_t *ord,
                              uint32_t *tmp, size_t n) {
  size_t j;

  for (j = 0; j < n; j++)
    tmp[j] = col[ord[j]];
  memcpy(col, tmp, n * sizeof(*col));
}

int stkr__marks_first(const stkr__stream *st, Stackrec__Batch *b) {
  Stackrec__Events *e = b->events;
  size_t n = e->n_ts_delta_ns, i, j = 0, k, lead = 0;
  uint32_t *ord, *tmp, *inv;
  uint64_t *ts, *pos, t, prev;
  uint8_t *pay = NULL;
  bool any = false;

  /* Rare: most batches hold no mark, or only marks at their start. */
  for (i = 0; i < n; i++)
    if (stkr__event_is_mark(st, e, i)) {
      if (i != lead++) {
        any = true;
        break;
      }
    }
  if (!any)
    return 0;
  ord = malloc(n * 3 * sizeof(*ord));
  ts = malloc(n * 2 * sizeof(*ts));
  if (e->payload_data.len != 0)
    pay = malloc(e->payload_data.len);
  if (ord == NULL || ts == NULL || (e->payload_data.len != 0 && pay == NULL)) {
    free(ord);
    free(ts);
    free(pay);
    return -ENOMEM;
  }
  tmp = ord + n;
  inv = ord + 2 * n;
  pos = ts + n;
  /* Absolute times and payload offsets in the old order. */
  for (i = 0, t = e->base_ts_ns, k = 0; i < n; i++) {
    t += (uint64_t)e->ts_delta_ns[i]; /* wraps like the reader's sum */
    ts[i] = t;
    pos[i] = k;
    if (e->n_payload_len)
      k += e->payload_len[i];
  }
  /* The new order: marks (in batch order), then the other events. */
  for (i = 0; i < n; i++)
    if (stkr__event_is_mark(st, e, i))
      ord[j++] = (uint32_t)i;
  for (i = 0; i < n; i++)
    if (!stkr__event_is_mark(st, e, i))
      ord[j++] = (uint32_t)i;
  for (j = 0, prev = e->base_ts_ns; j < n; j++) {
    e->ts_delta_ns[j] = (int64_t)(ts[ord[j]] - prev);
    prev = ts[ord[j]];
    inv[ord[j]] = (uint32_t)j;
  }
  if (e->n_payload_len) {
    for (j = 0, k = 0; j < n; j++) {
      uint32_t len = e->payload_len[ord[j]];

      memcpy(pay + k, e->payload_data.data + pos[ord[j]], len);
      k += len;
    }
    if (k != 0)
      memcpy(e->payload_data.data, pay, k);
    stkr__permute_u32(e->payload_len, ord, tmp, n);
  }
  if (e->n_site_id)
    stkr__permute_u32(e->site_id, ord, tmp, n);
  stkr__permute_u32(e->thread_id, ord, tmp, n);
  stkr__permute_u32(e->stack_id, ord, tmp, n);
  for (i = 0; i < e->n_payload_truncated; i++)
    e->payload_truncated[i] = inv[e->payload_truncated[i]];
  free(ord);
  free(ts);
  free(pay);
  return 0;
}

/* ---- the marks file ------------------------------------------------------ */

static int stkr__hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

int stkr__parse_u64(const char *p, const char *end, uint64_t *out) {
  uint64_t v = 0;

  if (p == end || end - p > 20)
    return -1;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
      return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  *out = v;
  return 0;
}

/* A mark line's clock field, "<boot id: 32 hex>:<offset ns>" or "-"
 * (stkr_mark_append). @return 0, or -1 if malformed. */
static int stkr__parse_clock(const char *p, size_t len, stkr_clock_id *c) {
  uint64_t off;
  bool neg;

  memset(c, 0, sizeof *c);
  if (len == 1 && p[0] == '-')
    return 0;
  if (len < 34 || stkr_boot_parse_id(p, 32, c->boot) != 32 || p[32] != ':')
    return -1;
  neg = p[33] == '-';
  if (stkr__parse_u64(p + 33 + neg, p + len, &off) != 0 || off > INT64_MAX)
    return -1;
  c->have_boot = true;
  c->mono_offset_ns = neg ? -(int64_t)off : (int64_t)off;
  return 0;
}

/* Parse one line [p, end) (no newline) into *m. @return NULL, or why not. */
static const char *stkr__parse_line(const char *p, const char *end,
                                    stkr__extmark *m) {
  const char *tok[7];
  size_t len[7], i, n;
  uint64_t pid;

  n = stkr__marks_fields(p, end, tok, len, 7);
  if (n != 6 && n != 7)
    return "not 6 or 7 space-separated fields (m1 mono wall pid name "
           "payload [clock])";
  if (n == 7 && stkr__parse_clock(tok[6], len[6], &m->clock) != 0)
    return "clock is not \"-\" or \"<32 hex digits>:<ns>\"";
  if (len[0] != 2 || memcmp(tok[0], "m1", 2) != 0)
    return "unknown line version (expected \"m1\")";
  if (stkr__parse_u64(tok[1], tok[1] + len[1], &m->ts_ns) != 0 ||
      stkr__parse_u64(tok[2], tok[2] + len[2], &m->wall_ns) != 0)
    return "time stamps are not decimal numbers";
  if (stkr__parse_u64(tok[3], tok[3] + len[3], &pid) != 0 || pid > UINT32_MAX)
    return "pid is not a decimal number";
  m->setter_pid = (uint32_t)pid;
  if (!stkr_mark_name_valid(tok[4], len[4]))
    return "invalid mark name (1 to 64 of [A-Za-z0-9._-])";
  if (len[5] == 1 && tok[5][0] == '-') {
    m->payload_len = 0;
  } else if (len[5] == 0 || len[5] % 2 != 0 ||
             len[5] / 2 > STKR_MARKS_MAX_PAYLOAD) {
    return "payload is not \"-\" or up to 4096 bytes of lower-case hex";
  } else {
    for (i = 0; i < len[5]; i++)
      if (stkr__hexval((unsigned char)tok[5][i]) < 0)
        return "payload is not lower-case hex";
    m->payload_len = len[5] / 2;
  }
  if ((m->name = strndup(tok[4], len[4])) == NULL)
    return NULL; /* the caller sees name == NULL: -ENOMEM */
  if (m->payload_len != 0) {
    if ((m->payload = malloc(m->payload_len)) == NULL) {
      free(m->name);
      m->name = NULL;
      return NULL;
    }
    for (i = 0; i < m->payload_len; i++)
      m->payload[i] = (uint8_t)(stkr__hexval(tok[5][2 * i]) * 16 +
                                stkr__hexval(tok[5][2 * i + 1]));
  }
  return NULL;
}

static int stkr__ext_cmp(const void *a, const void *b) {
  const stkr__extmark *x = a, *y = b;
  int c = stkr_cmp_u64(x->dir_dev, y->dir_dev);

  if (c == 0) c = stkr_cmp_u64(x->dir_ino, y->dir_ino);
  if (c == 0) c = stkr_cmp_u64(x->ts_ns, y->ts_ns);
  /* One marks file's lines together, in file order (path is shared). */
  if (c == 0) c = stkr_cmp_u64((uintptr_t)x->path, (uintptr_t)y->path);
  return c != 0 ? c : stkr_cmp_u64(x->offset, y->offset);
}

/* Decode field [p, p + n) of a "u1" line ("-" or lower-case hex) into a
 * new string. @return it, NULL for no memory; *why set when malformed. */
char *stkr__unhex(const char *p, size_t n, const char **why) {
  char *out;
  size_t i;

  if (n == 1 && p[0] == '-')
    n = 0;
  else if (n == 0 || n % 2 != 0) {
    *why = "a field is not \"-\" or lower-case hex";
    return NULL;
  }
  for (i = 0; i < n; i++)
    if (stkr__hexval((unsigned char)p[i]) < 0) {
      *why = "a field is not lower-case hex";
      return NULL;
    }
  if ((out = malloc(n / 2 + 1)) == NULL)
    return NULL;
  for (i = 0; i < n / 2; i++) {
    out[i] = (char)(stkr__hexval(p[2 * i]) * 16 + stkr__hexval(p[2 * i + 1]));
    if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
      out[i] = '?'; /* one line of plain text: no NUL, newline or escape
                       (a forged "intact" line in verify's output) */
  }
  out[n / 2] = '\0';
  return out;
}

/* A "u1 <pid> <name> <reason>" line [p, end) of marks file path into
 * r->unrec. @return NULL, or why it is malformed; *nomem on -ENOMEM. */
size_t stkr__marks_fields(const char *p, const char *end, const char **tok,
                          size_t *len, size_t max) {
  size_t k = 0;

  for (;;) {
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (k == max)
      return max + 1;
    tok[k] = p;
    len[k++] = (size_t)((sp ? sp : end) - p);
    if (sp == NULL)
      return k;
    p = sp + 1;
  }
}

static const char *stkr__unrec_line(stkr_reader *r, const char *path,
                                    const char *p, const char *end,
                                    bool *nomem) {
  struct stkr__marks_dir *md = &r->mdirs[r->n_mdirs - 1];
  const char *tok[4], *why = NULL;
  size_t len[4];
  uint64_t pid;
  stkr_unrecorded_info u;

  if (stkr__marks_fields(p, end, tok, len, 4) != 4)
    return "not 4 space-separated fields (u1 pid name reason)";
  if (stkr__parse_u64(tok[1], tok[1] + len[1], &pid) != 0 || pid > UINT32_MAX)
    return "pid is not a decimal number";
  memset(&u, 0, sizeof u);
  u.pid = (uint32_t)pid;
  u.name = stkr__unhex(tok[2], len[2], &why);
  if (why == NULL && u.name != NULL)
    u.reason = stkr__unhex(tok[3], len[3], &why);
  /* One copy of the path per file: a hostile file of short lines must not
   * cost a path per line. */
  if (why == NULL && u.reason != NULL && md->path == NULL)
    md->path = strdup(path);
  u.path = md->path;
  if (why == NULL && (u.reason == NULL || u.path == NULL ||
                      stkr__grow(&r->unrec, &r->cap_unrec, r->n_unrec + 1,
                                 sizeof *r->unrec) != 0))
    *nomem = true;
  if (why != NULL || *nomem) {
    free((char *)u.name);
    free((char *)u.reason);
    return why;
  }
  /* A pid the file named already: the same process after an exec (a line
   * per program it ran), one process, its names chained as a process's
   * are ("sh > git"; QA, session 29: counted twice). A pid reused by
   * another process in one recording is counted once too. */
  uint32_t at;
  if (stkr__idmap_get(&md->unrec_pids, u.pid, &at)) {
    stkr_unrecorded_info *o = &r->unrec[at];
    char *chain = NULL;
    size_t olen = strlen(o->name);
    /* Bounded: a hostile file's lines of one pid must not grow it without
     * end (the chain stops at ~200 bytes, marked " > ..."). */
    bool full = olen >= 200;
    if (!(full && olen >= 6 && strcmp(o->name + olen - 6, " > ...") == 0) &&
        strcmp(o->name, u.name) != 0 && u.name[0] != '\0') {
      if (asprintf(&chain, "%s > %s", o->name, full ? "..." : u.name) < 0)
        *nomem = true;
      else {
        free((char *)o->name);
        o->name = chain;
      }
    }
    free((char *)u.name);
    free((char *)u.reason);
    return NULL;
  }
  if (stkr_map_put(&md->unrec_pids, u.pid, (uint32_t)r->n_unrec) != 0) {
    *nomem = true;
    free((char *)u.name);
    free((char *)u.reason);
    return NULL;
  }
  r->unrec[r->n_unrec++] = u;
  return NULL;
}

/* Parse the text buf[0, len) of marks file `path` into r->ext. */
static int stkr__marks_parse(stkr_reader *r, const char *path,
                             const struct stat *dst, const char *buf,
                             size_t len, const char **owned_path) {
  const stkr__scope *scope = NULL; /* of the last "s1" line: none yet */
  size_t off = 0, lines = 0;

  while (off < len) {
    const char *nl = memchr(buf + off, '\n', len - off);
    const char *why;
    stkr__extmark m;

    if (nl == NULL) {
      stkr__warn(r, STKR_WARN_LIVE_TAIL, path, (int64_t)off, 0,
                 "last mark line has no newline (still being written, or "
                 "its writer stopped); not read");
      break;
    }
    if (buf[off] == '#' || nl == buf + off) {
      off = (size_t)(nl - buf) + 1;
      continue;
    }
    if (lines++ >= STKR_MARKS_MAX) {
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, 0,
                 "more than %d marks; the rest ignored", STKR_MARKS_MAX);
      break;
    }
    memset(&m, 0, sizeof(m));
    /* "l1": marks lost before a copy was made (stkr_marks_copy: the
     * input's marks file could not be read whole). */
    if (nl - (buf + off) >= 3 && memcmp(buf + off, "l1 ", 3) == 0) {
      const char *bad = NULL;
      char *what = stkr__unhex(buf + off + 3, (size_t)(nl - buf - off - 3),
                               &bad);
      if (what == NULL && bad == NULL)
        return -ENOMEM;
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, 0,
                 "marks lost before this copy was made: the input's marks "
                 "file: %s", what != NULL ? what : "could not be read");
      free(what);
      off = (size_t)(nl - buf) + 1;
      continue;
    }
    /* "r1": a process still running when record ended
     * (stkr_marks_running.c). */
    if (nl - (buf + off) >= 3 && memcmp(buf + off, "r1 ", 3) == 0) {
      bool nomem = false;
      why = stkr__running_line(r, path, buf + off, nl, &nomem);
      if (nomem)
        return -ENOMEM;
      if (why != NULL)
        stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, 0,
                   "malformed line of a process still running: %s; skipped",
                   why);
      off = (size_t)(nl - buf) + 1;
      continue;
    }
    /* "u1": a process that recorded nothing; "s1": the scope of the
     * marks after it (stkr_marks_scope.c). */
    if (nl - (buf + off) >= 3 && (memcmp(buf + off, "u1 ", 3) == 0 ||
                                  memcmp(buf + off, "s1 ", 3) == 0)) {
      bool nomem = false, unrec = buf[off] == 'u';
      why = unrec ? stkr__unrec_line(r, path, buf + off, nl, &nomem)
                  : stkr__marks_scope_line(r, buf + off, nl, &scope, &nomem);
      if (nomem)
        return -ENOMEM;
      if (why != NULL)
        stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, 0, "%s: %s; %s",
                   unrec ? "malformed line of a process that recorded "
                           "nothing"
                         : "malformed scope line",
                   why, unrec ? "skipped"
                              : "the marks up to the next scope line are "
                                "skipped");
      off = (size_t)(nl - buf) + 1;
      continue;
    }
    why = stkr__parse_line(buf + off, nl, &m);
    if (why != NULL) {
      stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)off, 0,
                 "malformed mark line: %s; skipped", why);
    } else if (m.name == NULL) {
      return -ENOMEM;
    } else {
      if (stkr__grow(&r->ext, &r->cap_ext, r->n_ext + 1, sizeof(*r->ext)) !=
          0) {
        free(m.name);
        free(m.payload);
        return -ENOMEM;
      }
      if (*owned_path == NULL) {
        if ((*owned_path = strdup(path)) == NULL) {
          free(m.name);
          free(m.payload);
          return -ENOMEM;
        }
        m.path_owner = true;
      }
      m.path = *owned_path;
      m.dir_dev = dst->st_dev;
      m.dir_ino = dst->st_ino;
      m.offset = off;
      m.scope = scope;
      r->ext[r->n_ext++] = m;
      r->counts.external_marks++;
    }
    off = (size_t)(nl - buf) + 1;
  }
  return 0;
}

/* Its directory's marks file's damage into every process of the
 * directory read so far (stkr_process_info.marks_damaged). */
static void stkr__marks_damage_to_streams(stkr_reader *r, dev_t dev,
                                          ino_t ino, uint64_t damaged) {
  for (size_t i = 0; damaged != 0 && i < r->n_streams; i++)
    if (r->streams[i]->dir_dev == dev && r->streams[i]->dir_ino == ino)
      r->streams[i]->info.marks_damaged = damaged;
}

int stkr__marks_load_dir(stkr_reader *r, const char *dir,
                         const struct stat *dst) {
  const char *owned_path = NULL;
  char *path, *buf = NULL;
  struct stat fst;
  size_t len = 0, i;
  int fd, err = 0, rerr;
  const uint64_t lost0 = r->counts.data_lost; /* this file's warnings: */

  if (r->no_marks)
    return 0;
  for (i = 0; i < r->n_mdirs; i++)
    if (r->mdirs[i].dev == dst->st_dev && r->mdirs[i].ino == dst->st_ino) {
      /* Read already: a segment file of it added since gets its count. */
      stkr__marks_damage_to_streams(r, dst->st_dev, dst->st_ino,
                                    r->mdirs[i].damaged);
      return 0;
    }
  if (stkr__grow(&r->mdirs, &r->cap_mdirs, r->n_mdirs + 1,
                 sizeof *r->mdirs) != 0)
    return -ENOMEM;
  r->mdirs[r->n_mdirs++] = (struct stkr__marks_dir){.dev = dst->st_dev,
                                                    .ino = dst->st_ino};
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0)
    return -ENOMEM;
  /* Never a FIFO or device: opening a FIFO waited for a writer (QA). */
  fd = stkr_open_regular(path, O_NOFOLLOW);
  if (fd == -EINVAL)
    stkr__warn(r, STKR_WARN_IO, path, -1, 0, "not a regular file; ignored");
  else if (fd < 0 && fd != -ENOENT)
    stkr__warn(r, STKR_WARN_IO, path, -1, 0, "cannot open: %s; marks "
               "set with `stackrec mark` not read", strerror(-fd));
  if (fd < 0) {
    free(path);
    goto counted;
  }
  if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
    stkr__warn(r, STKR_WARN_IO, path, -1, 0, "not a regular file; ignored");
    goto out;
  }
  len = (uint64_t)fst.st_size > STKR_MARKS_MAX_BYTES ? STKR_MARKS_MAX_BYTES
                                                     : (size_t)fst.st_size;
  if (len == 0)
    goto out;
  if ((buf = malloc(len)) == NULL) {
    err = -ENOMEM;
    goto out;
  }
  if ((rerr = stkr_pread_all(fd, buf, len, 0, &i)) < 0)
    stkr__warn(r, STKR_WARN_IO, path, (int64_t)i, 0,
               "read failed: %s; rest of the marks not read",
               strerror(-rerr));
  len = i;
  if ((uint64_t)fst.st_size > STKR_MARKS_MAX_BYTES)
    stkr__warn(r, STKR_WARN_DAMAGED, path, (int64_t)len, 0,
               "marks file over %u MiB; the rest ignored",
               (unsigned)(STKR_MARKS_MAX_BYTES >> 20));
  err = stkr__marks_parse(r, path, dst, buf, len, &owned_path);
  if (r->n_ext > 1)
    qsort(r->ext, r->n_ext, sizeof(*r->ext), stkr__ext_cmp);
out:
  free(buf);
  close(fd);
  free(path);
counted:
  /* (mdirs may have moved: found again) */
  for (i = 0; i < r->n_mdirs; i++)
    if (r->mdirs[i].dev == dst->st_dev && r->mdirs[i].ino == dst->st_ino)
      r->mdirs[i].damaged = r->counts.data_lost - lost0;
  stkr__marks_damage_to_streams(r, dst->st_dev, dst->st_ino,
                                r->counts.data_lost - lost0);
  return err;
}

void stkr__marks_free(stkr_reader *r) {
  size_t i;

  for (i = 0; i < r->n_ext; i++) {
    free(r->ext[i].name);
    free(r->ext[i].payload);
    if (r->ext[i].path_owner)
      free((char *)r->ext[i].path);
  }
  free(r->ext);
  for (i = 0; i < r->n_scopes; i++) {
    free(r->scopes[i]->v);
    free(r->scopes[i]);
  }
  free(r->scopes);
  for (i = 0; i < r->n_unrec; i++) {
    free((char *)r->unrec[i].name);
    free((char *)r->unrec[i].reason);
  }
  free(r->unrec);
  STKR_FREE_EACH(r->running, r->n_running, name);
  free(r->running);
  for (i = 0; i < r->n_mdirs; i++) {
    free(r->mdirs[i].path);
    stkr_map_free(&r->mdirs[i].unrec_pids);
  }
  free(r->mdirs);
}

size_t stkr_reader_unrecorded_count(const stkr_reader *r) {
  return r != NULL ? r->n_unrec : 0;
}

const stkr_unrecorded_info *stkr_reader_unrecorded(const stkr_reader *r,
                                                   size_t i) {
  return r != NULL && i < r->n_unrec ? &r->unrec[i] : NULL;
}

/* ---- writing ------------------------------------------------------------- */

int stkr__marks_append(const char *path, const void *buf, size_t n) {
  return stkr_append_line(path, buf, n);
}

int stkr_mark_append(const char *dir, const char *name, const void *payload,
                     size_t len) {
  static const char hex[] = "0123456789abcdef";
  struct timespec mono, wall;
  stkr_clock_id clk;
  char *path, *line;
  size_t n, i, cap;
  int err;

  if (dir == NULL || name == NULL || (payload == NULL && len != 0) ||
      !stkr_mark_name_valid(name, strnlen(name, STKR_MARK_NAME_MAX + 1)) ||
      len > STKR_MARKS_MAX_PAYLOAD)
    return -EINVAL;
  cap = 160 + STKR_MARK_NAME_MAX + 2 * len; /* + the clock: 55 at most */
  if ((line = malloc(cap)) == NULL)
    return -ENOMEM;
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0) {
    free(line);
    return -ENOMEM;
  }
  /* The clocks of the recorder (recorder/platform_linux.c), and which
   * monotonic clock this is (common/stkr_boot.h). */
  stkr_clock_id_read(&clk);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &wall);
  n = (size_t)snprintf(
      line, cap, "m1 %" PRIu64 " %" PRIu64 " %u %s ",
      (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec,
      (uint64_t)wall.tv_sec * 1000000000u + (uint64_t)wall.tv_nsec,
      (unsigned)getpid(), name);
  if (len == 0)
    line[n++] = '-';
  for (i = 0; i < len; i++) {
    line[n++] = hex[((const uint8_t *)payload)[i] >> 4];
    line[n++] = hex[((const uint8_t *)payload)[i] & 15];
  }
  line[n++] = ' ';
  if (clk.have_boot) {
    for (i = 0; i < sizeof clk.boot; i++) {
      line[n++] = hex[clk.boot[i] >> 4];
      line[n++] = hex[clk.boot[i] & 15];
    }
    n += (size_t)snprintf(line + n, cap - n, ":%" PRId64, clk.mono_offset_ns);
  } else {
    line[n++] = '-';
  }
  line[n++] = '\n';
  err = stkr__marks_append(path, line, n);
  free(path);
  free(line);
  return err;
}

/* s (cut to max bytes) as lower-case hex at out, or "-" when empty.
 * @return the bytes written (out holds 2 * max + 1). */
size_t stkr__put_hex(char *out, const char *s, size_t max) {
  static const char hex[] = "0123456789abcdef";
  size_t i, n = strnlen(s, max);

  if (n == 0) {
    out[0] = '-';
    return 1;
  }
  for (i = 0; i < n; i++) {
    out[2 * i] = hex[(unsigned char)s[i] >> 4];
    out[2 * i + 1] = hex[(unsigned char)s[i] & 15];
  }
  return 2 * n;
}

int stkr_unrecorded_append(const char *dir, uint32_t pid, const char *name,
                           const char *reason) {
  char line[32 + 2 * 255 + 2 * 1023], *path;
  size_t n;
  int err;

  if (dir == NULL || name == NULL || reason == NULL)
    return -EINVAL;
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0)
    return -ENOMEM;
  n = stkr_notify_u1_line(line, (long)pid, name, 255, reason, 1023);
  err = stkr__marks_append(path, line, n);
  free(path);
  return err;
}

int stkr__marks_read(const char *dir, char **buf, size_t *len,
                     const char **damaged) {
  char *path = NULL;
  struct stat st;
  int in, err = 0;

  *len = 0;
  *buf = NULL;
  *damaged = NULL;
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0)
    return -ENOMEM;
  if ((*buf = malloc(STKR_MARKS_MAX_BYTES)) == NULL) {
    free(path);
    return -ENOMEM;
  }
  if ((in = stkr_open_regular(path, O_NOFOLLOW)) < 0) {
    /* None, or not a regular file (the readers say so): nothing. */
    err = in == -ENOENT || in == -EINVAL ? 0 : in;
    if (in == -EINVAL) *damaged = "not a regular file";
  } else {
    /* A read error keeps what was read before it. */
    (void)stkr_pread_all(in, *buf, STKR_MARKS_MAX_BYTES, 0, len);
    if (fstat(in, &st) == 0 && (uint64_t)st.st_size > STKR_MARKS_MAX_BYTES)
      *damaged = "longer than a reader reads: the rest left out";
    close(in);
  }
  while (*len > 0 && (*buf)[*len - 1] != '\n') /* a line being written */
    (*len)--;
  free(path);
  return err;
}

int stkr__marks_put_lost(const char *dir, const char *why) {
  char line[8 + 2 * 255], *path;
  size_t n = 3;
  int err;

  memcpy(line, "l1 ", 3);
  n += stkr__put_hex(line + n, why, 255);
  line[n++] = '\n';
  if (asprintf(&path, "%s/%s", dir, STKR_MARKS_FILE) < 0)
    return -ENOMEM;
  err = stkr__marks_append(path, line, n);
  free(path);
  return err != 0 ? err : -EBADMSG;
}

int stkr_marks_copy(const char *from_dir, const char *to_dir) {
  char *to = NULL, *buf = NULL;
  const char *damaged;
  size_t len;
  int err = stkr__marks_read(from_dir, &buf, &len, &damaged);

  if (err == 0 && len > 0) {
    if (asprintf(&to, "%s/%s", to_dir, STKR_MARKS_FILE) < 0)
      err = -ENOMEM;
    else
      err = stkr__marks_append(to, buf, len);
  }
  /* What the input's readers called damaged, its copy's say too (QA,
   * session 40: symbolize dropped a FIFO marks file without a word). */
  if (err == 0 && damaged != NULL)
    err = stkr__marks_put_lost(to_dir, damaged);
  free(buf);
  free(to);
  return err;
}
