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
#include "proto/stkr_reader.h"
#include "tests/flush_util.h"

/* Sorted seqs of dir's segment files of pid; returns the count. */
size_t tf_segments(const char *dir, uint32_t pid, uint32_t *seqs, size_t max) {
  DIR *d = opendir(dir);
  struct dirent *de;
  size_t n = 0;
  if (!d) return 0;
  while ((de = readdir(d))) {
    unsigned p, s;
    int len = 0;
    if (sscanf(de->d_name, "stackrec-%u-%u.zst%n", &p, &s, &len) == 2 &&
        de->d_name[len] == '\0' && p == pid && n < max)
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
