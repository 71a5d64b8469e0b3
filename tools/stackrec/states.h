/*
 * states.h: states, the spans between a mark and its opposite, in one
 * table for every command that asks "what was true when this event was
 * recorded" (compliance, the timelines).
 *
 * The table (states.c):
 *   state              starts at          ends at
 *   consent.granted    consent.granted    consent.revoked
 *   app.background     app.background     app.foreground
 *   screen.X           screen.X           the next screen.* mark
 * A state is named by the mark that starts it; a mark that starts an
 * active state again changes nothing, an end mark of an inactive state
 * neither. A mark outside the table starts no state (it is still in the
 * history: stkr_states_seen).
 *
 * A tracker holds the marks of ONE process (reset it when the reader moves
 * to the next process: marks belong to their process, see "Marks" in
 * proto/stkr_reader.h) and answers by time stamp, not by delivery order:
 * feed it every mark (ev->is_mark) as it comes, in any order, and ask
 * about each event with the event's ts_ns. An event at the same ns as a
 * mark counts as after it. Events that the reader hands out before an
 * earlier mark (only across a drain pass of the writer, see the reader's
 * "Marks") are answered with the marks known at the time of asking.
 *
 * Memory: the marks of the current process (at most STKR_STATES_MAX_MARKS;
 * later ones are counted in stkr_states_overflow() and ignored) and their
 * distinct names. Thread-safety: none; one tracker per thread.
 */
#ifndef STKR_STATES_H
#define STKR_STATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STKR_STATE_KINDS 3           /* rows of the table */
#define STKR_STATES_MAX_MARKS 1000000

/* What was true at one instant: per row of the table, the active state's
 * name (its start mark, e.g. "app.background", "screen.Checkout"), or NULL.
 * Names are owned by the tracker. `id` names this combination within one
 * process's history: equal ids, equal states (for caching per state). */
typedef struct stkr_state_snap {
  uint32_t id;
  const char *active[STKR_STATE_KINDS];
} stkr_state_snap;

typedef struct stkr_states stkr_states;

/* Is name a state of the table (a row's start mark, or a family's prefix
 * with a name after it: "screen.Checkout")? A policy's in_state that is
 * not can never hold (QA, session 31: "app.backgrond" passed in silence). */
bool stkr_states_is_state(const char *name);

/* Has a mark of a row that state (a name or glob) can name been seen at or
 * before ts: its start or its end? Before one, a process whose earliest
 * segments are gone cannot tell whether it was in that state (its start
 * may have gone with them). */
bool stkr_states_row_seen(const stkr_states *s, const char *state,
                          uint64_t ts);

/* @return 0 or -ENOMEM; *out owned by the caller (stkr_states_free). */
int stkr_states_create(stkr_states **out);
void stkr_states_free(stkr_states *s); /* NULL accepted */

/* Forget every mark (the next process). */
void stkr_states_reset(stkr_states *s);

/* Add mark `name` (copied) at ts_ns. @return 0 or -ENOMEM. */
int stkr_states_mark(stkr_states *s, uint64_t ts_ns, const char *name);

/* The states at ts_ns (after every mark at or before it). The pointer is
 * valid until the next stkr_states_mark/reset/free. O(1) for time stamps
 * near the previous query, O(log marks) otherwise. */
const stkr_state_snap *stkr_states_at(stkr_states *s, uint64_t ts_ns);

/* Is a state matching `glob` (fnmatch(3), e.g. "app.background",
 * "screen.*", "consent.granted") active in snap? */
bool stkr_state_snap_in(const stkr_state_snap *snap, const char *glob);

/* Had a mark matching `glob` been set at or before ts_ns? ("consent was
 * granted before this event": stkr_states_seen(s, "consent.granted", ts)). */
bool stkr_states_seen(const stkr_states *s, const char *glob, uint64_t ts_ns);

/* The two questions above, cached for a reader that asks them at every
 * event: fnmatch per event and rule was the cost. A cache holds while
 * `version` (the caller's count of marks and processes: what changes the
 * answers) stays. "Seen a mark matching G by ts" is monotone in ts, so
 * two bounds answer most events; "in state G" depends only on the
 * snapshot, which changes only at marks. Zeroed: empty. */
typedef struct stkr_seen_cache {
  uint64_t version;
  uint64_t false_upto;   /* not seen at any ts <= this (valid if have_f) */
  uint64_t true_from;    /* seen at every ts >= this (valid if have_t) */
  bool have_f, have_t;
} stkr_seen_cache;

typedef struct stkr_state_cache {
  uint64_t version;
  uint32_t snap_id;
  bool valid, in;
} stkr_state_cache;

/* stkr_states_seen(s, glob, ts_ns), through c. */
bool stkr_states_seen_cached(const stkr_states *s, uint64_t version,
                             stkr_seen_cache *c, const char *glob,
                             uint64_t ts_ns);
/* stkr_state_snap_in(snap, glob), through c. */
bool stkr_state_snap_in_cached(const stkr_state_snap *snap, uint64_t version,
                               stkr_state_cache *c, const char *glob);

/* Marks held (since the last reset). */
size_t stkr_states_count(const stkr_states *s);

/* Marks ignored past STKR_STATES_MAX_MARKS since the last reset. */
uint64_t stkr_states_overflow(const stkr_states *s);

/* The row of the table that mark `name` starts or ends, its role, and
 * the state it names; -1 if none. For the timelines (a mark shown as the
 * start or the end of a span). */
typedef enum stkr_mark_role {
  STKR_MARK_OTHER = 0,
  STKR_MARK_STARTS,    /* starts state `name` (and, for screen.*, ends the
                          previous screen) */
  STKR_MARK_ENDS       /* ends the row's state */
} stkr_mark_role;
int stkr_states_row(const char *name, stkr_mark_role *role);

#endif /* STKR_STATES_H */
