/* flush_util.h: helpers for test-flush.c (in test-flush-util.c): raw
 * segment decoding with zstd + protobuf-c, and reading a recording back
 * with the reader into a plain struct. */
#ifndef STKR_TEST_FLUSH_UTIL_H
#define STKR_TEST_FLUSH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stackrec.pb-c.h"

size_t tf_segments(const char *dir, uint32_t pid, uint32_t *seqs, size_t max);
int tf_load(const char *path, Stackrec__Batch ***out, size_t *n_out);
void tf_free(Stackrec__Batch **v, size_t n);
typedef struct tf_ev {
  uint32_t pid, site_id, thread_id, stack_id;
  char site[64];
  uint64_t tid, ts_ns;
  char thread_name[32];
  uint8_t payload[256];
  size_t payload_len, n_pcs;
  bool payload_truncated, unresolved;
} tf_ev;
typedef struct tf_sum {
  uint64_t events, data_lost, warnings, attempted, drops, write_error_drops,
      unresolved;
  bool clean_end;
  uint32_t parent_pid;
} tf_sum;
int tf_read(const char *dir, void (*cb)(void *, const tf_ev *), void *arg,
            tf_sum *sum);

/* For every recording session (Header.session_id) of every process in dir
 * that ended (a batch with last=true): Counters.attempted of its last batch
 * == its events in the files + every dropped_* of those Counters. @return
 * the number of sessions checked, or -1 with the reason in `why`; sessions
 * that did not end are counted in *unended. */
int tf_accounting(const char *dir, int *unended, char *why, size_t len);

#endif
