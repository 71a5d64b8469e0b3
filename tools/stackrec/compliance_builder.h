/*
 * compliance_builder.h: the state `stackrec compliance` keeps while it
 * reads (compliance.c) and finishes with (compliance_finish.c). Private to
 * those two files.
 */
#ifndef STKR_COMPLIANCE_BUILDER_H
#define STKR_COMPLIANCE_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_map.h"
#include "tools/stackrec/boots.h"
#include "tools/stackrec/compliance.h"
#include "tools/stackrec/rate.h"

#if __has_include("tools/stackrec/states.h")
#include "tools/stackrec/inherit.h"
#include "tools/stackrec/states.h"
#define HAVE_STATES 1
#else
/* Built without the marks branch: no marks can be read, so no state is
 * ever active and no mark ever seen (every event is before consent). */
#define HAVE_STATES 0
#endif

#define NS_PER_S 1000000000ull

/* In builder.stack_group: the stack's module is a guess, its frames
 * unnamed (stkr_attrib_module's unnamed). Groups number far below it. */
#define STACK_UNNAMED 0x80000000u
/* ... its frames are all in system images: an event of it whose walk was
 * cut short (per event: stkr_event_view.stack_truncated) was made by a
 * caller not known, its module being the library where it ended (QA,
 * session 39: python's uuid.getnode() MAC read was libuuid.so.1's, and a
 * rule on python3* passed). */
#define STACK_SYSONLY 0x40000000u
#define STACK_FLAGS (STACK_UNNAMED | STACK_SYSONLY)

/* Per (group, rule) while reading. */
typedef struct rule_state {
  uint64_t count;
  uint64_t first_ts;
  size_t stack;
  stkr_rate *rate;          /* [0] per second, [1] per minute: only for a
                               rate rule that selects the group (~1 KiB) */
  uint32_t rate_proc;       /* process + 1 the windows belong to */
} rule_state;

typedef struct group_state {
  stkr_rate per_s, per_min;
  uint32_t rate_proc;       /* process + 1 the windows belong to */
  uint32_t last_proc;       /* process + 1 last seen (n_pids) */
  uint64_t rules;           /* bit r: rule r selects this group */
  /* bit r: rule r has modules and its sites match this group's: an
   * unsymbolized stack here might have been its module's (unnamed). */
  uint64_t rules_by_site;
} group_state;

typedef struct builder {
  const stkr_comp_opts *o;
  stkr_comp *c;
  size_t n_rules;
  uint32_t *stack_group;    /* per agg stack: group + 1, 0 unknown; ORed
                               with STACK_UNNAMED */
  size_t stack_group_cap;
  group_state *gs;          /* per group */
  rule_state *rs;           /* per group: n_rules of them */
  size_t group_cap;
  stkr_index group_ix;      /* hash of (site, module) -> group */
  const stkr_reader *r;
  size_t cur_process;
  /* The current process's earliest segments were deleted by the disk cap,
   * or it is a forked child whose origin's marks are not known (inherit.h):
   * what its marks were before its first kept event is unknown. */
  bool proc_head_lost;
  bool proc_unjudged;       /* ... and an event of it was not judged */
  /* The current process dropped a mark before the event being read
   * (stkr_process_info.marks_dropped): what was true since is unknown. */
  bool proc_marks_lost;
  bool proc_marks;          /* the current process has marks */
  bool proc_inherit_due;    /* ... and its inherited ones are not loaded:
                               its Header is not read yet (inherit.h) */
  bool proc_consent;        /* ... a consent.granted among them */
  bool proc_events;
  uint32_t proc_instance;   /* stkr_process_info.instances it is at */
  uint64_t proc_drops_base; /* marks_dropped when that instance began */
  /* Processes of several clocks on one time line (boots.h): first_ts,
   * last_ts and the origin; marks, states and rates use each process's
   * own clock. */
  stkr_boots boots;
#if HAVE_STATES
  /* The current pid's `stackrec mark` marks (names copied): a process
   * that takes the pid again starts with those set after its start, on
   * its own clock (set: where each was set). */
  struct ext_mark { stkr_mark_clock set; char *name; } *ext;
  size_t n_ext, cap_ext;
  stkr_states *states;
  stkr_inherit *inherit;
  uint64_t version;         /* + 1 at every mark and process */
  /* Cached answers (states.h), valid while version stays. */
  stkr_seen_cache consent;  /* consent.granted seen */
  stkr_state_cache background; /* in app.background */
  stkr_seen_cache *rule_seen;  /* per rule: before_mark */
  stkr_state_cache *rule_in;   /* per rule: in_state */
#endif
} builder;

/* The group of agg stack `stack` known so far, or -1. */
static inline long known_group(const builder *b, size_t stack) {
  if (stack >= b->stack_group_cap || b->stack_group[stack] == 0)
    return -1;
  return (long)(b->stack_group[stack] & ~STACK_FLAGS) - 1;
}

/* Rates closed, examples picked, groups sorted, findings listed
 * (compliance_finish.c). 0 or -ENOMEM. */
int stkr__comp_finish(builder *b);

#endif /* STKR_COMPLIANCE_BUILDER_H */
