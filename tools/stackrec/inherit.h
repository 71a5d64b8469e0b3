/*
 * inherit.h: the marks a forked child starts with.
 *
 * A process forked in follow mode starts as a copy of the memory of the
 * recording process it was forked from, so with what that process had
 * marked by then: consent granted before the fork is granted in the child
 * too (QA, session 31: a child forked after consent.granted counted all
 * of its events "before consent", a finding). The child's Header says
 * from which process and when (stkr_process_info.forked_from_pid,
 * fork_mono_ns); this gives it that process's marks up to then, its own
 * inherited ones included (a chain of forks).
 *
 * Use with a states tracker (states.h), which holds one process's marks,
 * while reading processes in the reader's order: stkr_inherit_begin at each
 * process's first event (after the previous one's stkr_inherit_end),
 * stkr_inherit_load once its Header is read (stkr_process_info.have_header:
 * a `stackrec mark` mark is handed out before the process's first segment
 * is opened; QA, session 32: loading then found no fork time and gave the
 * child nothing), then stkr_inherit_mark for each of its own marks. The
 * reader visits processes in ascending pid order, so a parent is read
 * before its children but where pids wrapped around or merge renumbered
 * it (stkr_inherit_complete makes a second read know them): such a
 * child, and one whose origin is not in the recording, gets
 * STKR_INHERIT_UNKNOWN (its marks before its own are not known: judge as
 * for a process whose earliest segments are gone).
 *
 * Memory: the own marks of every process read so far that had some (names
 * interned: a second read may use another reader), at most
 * 1,000,000 in all; a few words a process. Time: a child's chain of
 * origins, at most 64 deep, and their marks, at most 20,000,000 marks
 * over all children (past that, children are unknown). Thread-safety:
 * none.
 */
#ifndef STKR_INHERIT_H
#define STKR_INHERIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_reader.h"
#include "tools/stackrec/states.h"

typedef struct stkr_inherit stkr_inherit;

/* What stkr_inherit_begin found. */
typedef enum stkr_inherit_from {
  STKR_INHERIT_NONE = 0, /* not a forked child (or an older writer) */
  STKR_INHERIT_KNOWN,    /* a forked child: its origin's marks are fed */
  STKR_INHERIT_UNKNOWN,  /* a forked child whose origin was not read */
  STKR_INHERIT_HEAD_LOST, /* known, but an origin's earliest marks are
                             unknown (the disk cap took its head) */
  STKR_INHERIT_MARKS_LOST /* known, but an origin dropped a mark (a full
                             ring), maybe before the fork */
} stkr_inherit_from;

/* @return 0 or -ENOMEM; *out owned by the caller (stkr_inherit_free). */
int stkr_inherit_create(stkr_inherit **out);

/* Children whose origin is read after them (pids wrapped, or renumbered by
 * merge) were unknown. A whole read keeps the own marks of every process:
 * stkr_inherit_complete then makes h answer for any origin in a second
 * read of the same recording, and keep nothing more (QA, session 32:
 * a merge that renumbered a parent left its children unjudged). r: the
 * first read's reader, read to its end (its summaries are complete).
 * @return (later_origins) how many children had an origin read after
 * them; (complete) 0 or -ENOMEM. */
size_t stkr_inherit_later_origins(const stkr_inherit *h);
int stkr_inherit_complete(stkr_inherit *h, const stkr_reader *r);
void stkr_inherit_free(stkr_inherit *h); /* NULL accepted */

/* Process `process` of a reader begins. */
void stkr_inherit_begin(stkr_inherit *h, size_t process);

/* The marks the current process inherited are added to `states` (its
 * marks so far, in any order: the tracker orders by time); call once,
 * when its Header is read. *from says what was found.
 * @return 0 or -ENOMEM. */
int stkr_inherit_load(stkr_inherit *h, const stkr_reader *r,
                      stkr_states *states, stkr_inherit_from *from);

/* A mark the current process set itself (not a `stackrec mark` one, which
 * reaches its children directly). @return 0 or -ENOMEM. */
int stkr_inherit_mark(stkr_inherit *h, uint64_t ts_ns, const char *name);

/* The current process is read: its own marks are kept for its children.
 * @return 0 or -ENOMEM. h may be NULL (then every call does nothing). */
int stkr_inherit_end(stkr_inherit *h);

#endif /* STKR_INHERIT_H */
