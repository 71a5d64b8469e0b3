/*
 * recover_util.h: what the recovery tests share (tests/recover_util.c):
 * scratch directories, children that record into file-backed rings and
 * die by SIGKILL, recovery (proto/stkr_recover.h) with its messages
 * collected, and the recovered directory read back. Every event the tests'
 * children record is at g_site ("recover.test"); a 4-byte payload is a
 * sequence number (record_seq), read back "exactly once".
 */
#ifndef STKR_TEST_RECOVER_UTIL_H
#define STKR_TEST_RECOVER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"

extern stkr_site g_site;

/* The group's scratch root (tl_mkdtemp). @return 0 or -1. */
int recover_setup(const char *tag);
/* A cmocka group setup: recover_setup named after the running group
 * (tl_group), failing the group if the root cannot be made. */
int recover_group_setup(void **state);

/* A new empty directory under the root, its path into out. */
void new_dir(char *out, size_t cap);

/* ---- reading back ---- */

typedef struct readback {
  uint64_t events;
  uint32_t *seen;     /* by payload value (u32), for "exactly once" */
  uint32_t *thread_of; /* by payload value: the event's thread id */
  size_t n_seen;
  uint64_t by_byte[256]; /* 1-byte payloads: events per value */
  uint64_t warnings_lost;
  uint64_t warnings_inconsistent; /* e.g. a stack id defined twice */
  uint64_t stack_of[4];           /* stack id of the events of helper i */
  uint64_t helper_events[4];
  /* 4-byte payloads (record_seq: one call chain): their stack */
  uint64_t seq_stack, seq_other_stack, seq_no_stack, seq_site_bad;
  uint64_t ts_min, ts_max; /* over all events */
} readback;

/* Read dir back into rb (seen/thread_of sized n_seen); rb_free it. */
void read_dir(const char *dir, readback *rb, size_t n_seen);
void rb_free(readback *rb);

/* dir holds `events` events, among them the payloads 0..n-1 once each. */
void assert_read_once(const char *dir, uint64_t events, uint32_t n);
/* Events the segments of dir hold now (ring files are not read). A child
 * that flushed and went on recording may have had part of the rest
 * written too before it died: a pass that finds a ring an eighth full
 * puts the worker in its pressure mode (passes every 1 ms), and on a
 * loaded machine one of those can run before the kill. Recovery must then
 * write exactly the others. */
uint64_t events_in_segments(const char *dir);

/* ---- recording children ---- */

/* Record the sequence numbers from..from+n-1 (exit 91 when one fails). */
void record_seq(uint32_t from, uint32_t n);

/* stkr_flush(), then the calling thread's ring file and the session file
 * get back the counted drops they had before it, as if the process died
 * between the flushed batch's write(2) and the worker's note of what it
 * counted (common/stkr_ringfile.h, "pending"). @return stkr_flush's. */
int flush_then_unnote_drops(void);

/* Every ring file of this process and the session file get pending drops
 * (common/stkr_ringfile.h, "pending") for a batch numbered one past the
 * session's last, counting every drop so far: as if the process died
 * after the worker stored them and before that batch reached the disk. */
void pend_unwritten_drops(void);

/* Fork: the child starts recording with cfg (exit 90 if it cannot), runs
 * body(arg) and dies by SIGKILL, leaving its ring files behind; the parent
 * waits for it. @return the child's wait status. */
int run_killed_child(const stkr_config *cfg, void (*body)(void *),
                     void *arg);

/* The same into a new directory (its path into dir), cfg's dir set to it
 * and a flush_interval_ms of 0 made an hour (flushes are the body's). */
int run_killed_child_in_new_dir(char *dir, size_t cap, stkr_config cfg,
                                void (*body)(void *), void *arg);

/* Into a new directory: a child records n1 events, flushes, (optionally,
 * `rewind`) rewinds its ring file's tail to where it was before the flush,
 * as if it died between the batch's write(2) and the tail store, records
 * n2 more and dies by SIGKILL. */
void run_child_die(char *dir, size_t cap, uint32_t n1, uint32_t n2,
                   bool rewind);

/* ---- recovery ---- */

typedef struct msgs {
  int n;
  char last[1024];
} msgs;

/* stkr_recover_opts.message for a msgs (arg): counts, keeps the last. */
void recover_msg_cb(void *arg, const char *line);
/* stkr_recover_dir on dir (dry: dry_run), its messages into m. */
void recover(const char *dir, bool dry, stkr_recover_stats *st, msgs *m);
/* Segment files of dir marked as a session's final one (by mode,
 * STKR_FMT_SEGMENT_IS_FINAL). */
int final_segments(const char *dir);

/* A killed child's recording and its recovery. */
typedef struct recovery {
  char dir[300];
  stkr_recover_stats st;
  msgs ms;
} recovery;

/* run_killed_child_in_new_dir into r->dir, then recover (not dry) into
 * r->st and r->ms. @return the child's wait status. */
int kill_and_recover(recovery *r, stkr_config cfg, void (*body)(void *),
                     void *arg);

#endif
