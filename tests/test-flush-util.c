/* test-flush-util.c: helpers for test-flush.c: raw segment decoding with
 * zstd + protobuf-c, and reading a recording back with the reader into a
 * plain struct (so the test itself does not depend on the reader's types).
 * Declared in flush_util.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "proto/stackrec.pb-c.h"
#include "proto/stkr_format.h" /* tombstones */
#include "proto/stkr_reader.h"
#include "proto/stkr_recover.h"
#include "tests/flush_util.h"

/* Is dir/name the disk cap's tombstone (proto/stkr_format.h)? */
static bool is_tombstone(const char *dir, const char *name) {
  char path[4400];
  uint8_t buf[STKR_FMT_MARKER_MAX + 1];
  size_t n = 0;
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if ((f = fopen(path, "rb")) == NULL) return false;
  n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return stkr_fmt_is_tombstone(buf, n, NULL);
}

/* Sorted seqs of dir's segment files of pid that hold data (not the disk
 * cap's tombstones); returns the count. */
size_t tf_segments(const char *dir, uint32_t pid, uint32_t *seqs, size_t max) {
  DIR *d = opendir(dir);
  struct dirent *de;
  size_t n = 0;
  if (!d) return 0;
  while ((de = readdir(d))) {
    unsigned p, s;
    int len = 0;
    if (sscanf(de->d_name, "stackrec-%u-%u.zst%n", &p, &s, &len) == 2 &&
        de->d_name[len] == '\0' && p == pid && n < max &&
        !is_tombstone(dir, de->d_name))
      seqs[n++] = s;
  }
  closedir(d);
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && seqs[j - 1] > seqs[j]; j--) {
      uint32_t t = seqs[j];
      seqs[j] = seqs[j - 1];
      seqs[j - 1] = t;
    }
  return n;
}

/* Every batch of one segment file, decoded. -1 if any frame is bad. */
int tf_load(const char *path, Stackrec__Batch ***out, size_t *n_out) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  uint8_t *data;
  size_t off = 0, n = 0;
  Stackrec__Batch **v = NULL;
  if (!f) return -1;
  fstat(fileno(f), &st);
  data = malloc((size_t)st.st_size + 1);
  if (fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    fclose(f);
    free(data);
    return -1;
  }
  fclose(f);
  while (off < (size_t)st.st_size) {
    size_t fsz = ZSTD_findFrameCompressedSize(data + off, (size_t)st.st_size - off);
    unsigned long long csz = ZSTD_getFrameContentSize(data + off, fsz);
    if (ZSTD_isError(fsz) || csz == ZSTD_CONTENTSIZE_ERROR ||
        csz == ZSTD_CONTENTSIZE_UNKNOWN) {
      free(data);
      return -1;
    }
    uint8_t *raw = malloc(csz ? csz : 1);
    size_t got = ZSTD_decompress(raw, csz, data + off, fsz);
    if (ZSTD_isError(got) || got != csz) {
      free(raw);
      free(data);
      return -1;
    }
    v = realloc(v, (n + 1) * sizeof *v);
    v[n] = stackrec__batch__unpack(NULL, got, raw);
    free(raw);
    if (!v[n]) {
      free(data);
      return -1;
    }
    n++;
    off += fsz;
  }
  free(data);
  *out = v;
  *n_out = n;
  return 0;
}

void tf_free(Stackrec__Batch **v, size_t n) {
  for (size_t i = 0; i < n; i++) stackrec__batch__free_unpacked(v[i], NULL);
  free(v);
}




static void quiet_warn(void *arg, const stkr_warning *w) {
  (void)arg;
  fprintf(stderr, "reader warning: %s\n", w->message);
}

/* Read every event of dir (all pids) through the reader; cb per event.
 * Summary of the last process read in *sum. 0 or a negative errno. */
int tf_read(const char *dir, void (*cb)(void *, const tf_ev *), void *arg,
            tf_sum *sum) {
  stkr_reader *r;
  stkr_reader_opts o = {.warn = quiet_warn, .warn_arg = NULL};
  stkr_event_view ev;
  int rc = stkr_reader_open(dir, &o, &r);
  memset(sum, 0, sizeof *sum);
  if (rc < 0) return rc;
  while ((rc = stkr_reader_next(r, &ev)) == 1) {
    tf_ev e;
    memset(&e, 0, sizeof e);
    e.pid = ev.pid;
    e.site_id = ev.site_id;
    snprintf(e.site, sizeof e.site, "%s", ev.site ? ev.site : "");
    e.thread_id = ev.thread_id;
    e.stack_id = ev.stack_id;
    e.tid = ev.tid;
    e.ts_ns = ev.ts_ns;
    snprintf(e.thread_name, sizeof e.thread_name, "%s",
             ev.thread_name ? ev.thread_name : "");
    e.payload_len = ev.payload_len;
    if (ev.payload_len)
      memcpy(e.payload, ev.payload,
             ev.payload_len < sizeof e.payload ? ev.payload_len : sizeof e.payload);
    e.payload_truncated = ev.payload_truncated;
    e.n_pcs = ev.n_pcs;
    e.unresolved = ev.unresolved;
    sum->events++;
    if (cb) cb(arg, &e);
  }
  if (rc == 0) {
    stkr_reader_counts c;
    stkr_reader_get_counts(r, &c);
    sum->warnings = c.warnings;
    sum->data_lost = c.data_lost;
    for (size_t i = 0; i < stkr_reader_process_count(r); i++) {
      const stkr_process_info *p = stkr_reader_process(r, i);
      sum->attempted = p->attempted;
      sum->drops = p->drops;
      sum->write_error_drops = p->drops_write_error;
      sum->unresolved += p->unresolved_events;
      sum->clean_end = p->clean_end;
      sum->parent_pid = p->parent_pid;
    }
  }
  stkr_reader_free(r);
  return rc;
}

/* ---- accounting per session (tf_accounting) ---- */

typedef struct tf_sess {
  uint64_t id, events;
  bool ended, have_counters;
  Stackrec__Counters c; /* of the session's last batch with counters */
} tf_sess;

static int tf_account_pid(const char *dir, uint32_t pid, int *checked,
                          int *unended, char *why, size_t len) {
  uint32_t seqs[4096];
  size_t ns = tf_segments(dir, pid, seqs, 4096);
  tf_sess s[64];
  size_t n_s = 0;
  tf_sess *cur = NULL;

  for (size_t i = 0; i < ns; i++) {
    char path[4300];
    Stackrec__Batch **v;
    size_t nb;
    snprintf(path, sizeof path, "%s/stackrec-%u-%06u.zst", dir, pid, seqs[i]);
    if (tf_load(path, &v, &nb) != 0) {
      snprintf(why, len, "%s: a frame does not decode", path);
      return -1;
    }
    for (size_t b = 0; b < nb; b++) {
      Stackrec__Batch *B = v[b];
      if (B->header) {
        cur = NULL;
        for (size_t k = 0; k < n_s; k++)
          if (s[k].id == B->header->session_id) cur = &s[k];
        if (!cur && n_s < 64) {
          cur = &s[n_s++];
          memset(cur, 0, sizeof *cur);
          cur->id = B->header->session_id;
        }
      }
      if (!cur) continue; /* no Header yet: nothing to attribute */
      if (B->events) cur->events += B->events->n_thread_id;
      if (B->counters) {
        cur->c = *B->counters;
        cur->have_counters = true;
      }
      if (B->last) cur->ended = true;
    }
    tf_free(v, nb);
  }
  for (size_t k = 0; k < n_s; k++) {
    const Stackrec__Counters *c = &s[k].c;
    if (!s[k].ended || !s[k].have_counters) {
      (*unended)++;
      continue;
    }
    uint64_t dropped = c->dropped_ring_full + c->dropped_reentrant +
                       c->dropped_other + c->dropped_write_error +
                       c->dropped_exit;
    if (c->attempted != s[k].events + dropped) {
      snprintf(why, len,
               "pid %u session %llx: attempted %llu != events %llu + dropped "
               "%llu (ring full %llu, reentrant %llu, other %llu, write "
               "error %llu, exit %llu)",
               pid, (unsigned long long)s[k].id,
               (unsigned long long)c->attempted,
               (unsigned long long)s[k].events, (unsigned long long)dropped,
               (unsigned long long)c->dropped_ring_full,
               (unsigned long long)c->dropped_reentrant,
               (unsigned long long)c->dropped_other,
               (unsigned long long)c->dropped_write_error,
               (unsigned long long)c->dropped_exit);
      return -1;
    }
    (*checked)++;
  }
  return 0;
}

static void tf_quiet(void *arg, const char *line) {
  (void)arg;
  (void)line;
}

int tf_accounting(const char *dir, int *unended, char *why, size_t len) {
  DIR *d;
  /* What a bounded exit left in ring files is not lost: recovery writes it
   * out (Batch.recovered, the dead session's Header), as `stackrec record`
   * and `stackrec recover` do, before the sessions are added up. */
  stkr_recover_opts ro = {.message = tf_quiet};
  stkr_recover_stats rs;
  (void)stkr_recover_dir(dir, &ro, &rs);
  d = opendir(dir);
  struct dirent *de;
  uint32_t pids[1024];
  size_t np = 0;
  int checked = 0;

  *unended = 0;
  if (!d) {
    snprintf(why, len, "%s: cannot open", dir);
    return -1;
  }
  while ((de = readdir(d))) {
    unsigned p, q;
    int l = 0;
    bool seen = false;
    if (sscanf(de->d_name, "stackrec-%u-%u.zst%n", &p, &q, &l) != 2 ||
        de->d_name[l] != '\0')
      continue;
    for (size_t i = 0; i < np; i++) seen |= pids[i] == p;
    if (!seen && np < 1024) pids[np++] = p;
  }
  closedir(d);
  for (size_t i = 0; i < np; i++)
    if (tf_account_pid(dir, pids[i], &checked, unended, why, len) < 0)
      return -1;
  return checked;
}
