/*
 * compliance.h: `stackrec compliance`: per (site, responsible module) how
 * often, when, how fast, before consent, in the background; and the
 * findings of a policy (policy.h). One pass over the recording, on top of
 * the one aggregation (agg.h, through its on_event hook): memory grows
 * with distinct stacks and (site, module) groups, never with events.
 *
 * Times: ts values are ns on the recording's clock (CLOCK_MONOTONIC of the
 * machine, the first column of `dump`, the clock of marks); *_s values are
 * seconds since the recording started (the earliest process start).
 *
 * Peak rates are counted per process (a process's own events) over
 * sliding windows of 1 s and 60 s that move in steps of 1/32 of their
 * length: the peak is the most events in any such window (a true sliding
 * window can hold up to the events of one more step). Events read more
 * than one window later than a later event of their process (threads are
 * drained one after another within a batch, at most a flush interval
 * apart) are counted everywhere but in the peak (`late`).
 *
 * Marks and states (states.h): "before consent" is before the first mark
 * consent.granted of the event's process; "background" is while the
 * state app.background is active. A process without marks counts every
 * event before consent and none in the background. A forked child starts
 * with the marks of the process it was forked from, up to the fork
 * (inherit.h).
 *
 * Thread-safety: none; build and read on one thread.
 */
#ifndef STKR_COMPLIANCE_H
#define STKR_COMPLIANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/attrib.h"
#include "tools/stackrec/policy.h"

#define STKR_COMP_CONSENT_MARK "consent.granted"
#define STKR_COMP_BACKGROUND_STATE "app.background"

typedef struct stkr_comp_opts {
  stkr_agg_opts agg;           /* filters and granularity (on_event is
                                  compliance's own) */
  const stkr_modmap *modmap;   /* NULL: modules are image base names */
  const stkr_policy *policy;   /* NULL: no rules */
  /* NULL: a first read. A second read of the same recording passes the
   * first's (stkr_comp_take_inherit, then stkr_inherit_complete): its
   * children whose origin is read after them are judged (inherit.h). Not
   * owned. */
  struct stkr_inherit *inherit;
} stkr_comp_opts;

/* One (site, module) pair. */
typedef struct stkr_comp_group {
  const char *site;            /* owned by the agg */
  const char *module;          /* owned by the agg, the map, or static */
  uint64_t count;
  uint64_t first_ts, last_ts;  /* recording clock, ns */
  double first_s, last_s;      /* since the recording started, s */
  uint64_t peak_per_second, peak_per_minute;
  uint64_t before_consent;     /* before the first consent.granted */
  uint64_t background;         /* while app.background was active */
  uint64_t late;               /* counted, but too late for the peak */
  size_t n_stacks;
  size_t example;              /* its most frequent stack (a->stacks) */
  uint32_t n_pids;             /* processes it was seen in */
} stkr_comp_group;

/* A rule broken by one group. */
typedef struct stkr_comp_finding {
  const stkr_rule *rule;
  size_t group;                /* index into groups */
  uint64_t count;              /* events the rule selected there */
  uint64_t first_ts;           /* the first of them (recording clock) */
  double first_s;
  size_t stack;                /* the stack of that first event */
  uint64_t peak_per_second, peak_per_minute; /* of the selected events
                                  (rate rules; else 0) */
} stkr_comp_finding;

typedef struct stkr_comp {
  stkr_agg *agg;               /* the aggregation (sites, stacks, counts) */
  stkr_comp_group *groups;     /* by site, then most events first */
  size_t n_groups;
  stkr_comp_finding *findings; /* by rule (policy order), then group order */
  size_t n_findings;
  /* Per rule (policy order): groups it selects events of (matched by
   * sites/modules), to list passing cases. */
  size_t *rule_groups;
  const stkr_policy *policy;   /* the options' (not owned) */
  uint64_t origin_ns;          /* the recording's start (*_s are from it) */
  /* Monotonic clocks the processes' times are on (boots.h: boots and
   * time namespaces; 0: none known, an older writer). Above 1, times
   * (*_ts, *_s, origin_ns) lie on the clock of the earliest start, the
   * others moved onto it. */
  size_t clocks;
  uint64_t marks;              /* marks read */
  size_t consent_processes;    /* processes with a consent.granted mark */
  size_t processes_with_events;
  bool marks_supported;        /* this build reads marks (states.h) */
  /* stkr_comp_check_rules (compliance_rules.c), per rule (policy order):
   * why it could not check all of the recording, or NULL; unchecked: the
   * note says it could not see its sites at all (an error, exit 1), else
   * it is a warning. */
  char **rule_notes;
  bool *rule_unchecked;
  /* Per rule with a note: its JUnit case ("sites recorded", "events
   * judged", "sites known", "modules seen"; static strings). */
  const char **rule_case;
  size_t n_unchecked;
  uint64_t unattributed;       /* events of module STKR_ATTRIB_NO_MODULE */
  /* Events that rules on marks (before_mark, in_state) and the
   * before-consent and background figures could not judge: of processes
   * whose earliest segments the disk cap deleted (or first batches are
   * lost: damaged, never written), before any mark of the
   * kind they ask about in what is left (a consent.granted may have been
   * in the deleted part; QA, session 28: a capped soak's 36 866 events
   * after consent read "before consent", a finding, exit 1). */
  uint64_t unjudged;
  size_t unjudged_processes;
  /* Of the processes read: forked children whose origin's marks are not
   * known (inherit.h: not in the recording, or pids wrapped), judged as
   * above. */
  size_t unknown_origin_processes;
  /* Of the processes read: those that dropped a mark (a full ring:
   * stkr_process_info.marks_dropped); their events from then on are not
   * judged by rules on marks, nor counted before consent or in
   * background (QA, session 32: a dropped app.foreground made every later
   * event "in the background", 3 findings). */
  size_t marks_lost_processes;
  size_t head_lost_processes; /* ... with events unjudged, whose earliest
                                 segments (or an origin's) are gone */
  /* Forked children whose origin is read after them (inherit.h): a
   * second read, with stkr_comp_take_inherit's table completed, can
   * judge them. */
  size_t later_origins;
  struct stkr_inherit *inherit; /* the first read's, owned, when
                                   later_origins > 0 (else NULL) */
  /* Per rule (policy order): its events it could not judge so. A rule
   * with any is not checked (stkr_comp_check_rules): its pass would be
   * untrue (QA, session 31: "no findings", exit 0, JUnit green, with
   * 2 212 events before the only consent mark left out). */
  uint64_t *rule_unjudged;
  /* Events whose module is a guess: their stacks were not symbolized
   * (offline, recovered, a daemon `record` left) and the module map's
   * symbol prefixes could not be tried (stkr_attrib_module's unnamed;
   * QA, session 33: an SDK linked into the app passed a rule against
   * it, exit 0). Per rule (policy order): those of its sites, for a rule
   * with modules; a rule with any is not checked. */
  uint64_t unnamed;
  uint64_t *rule_unnamed;
  /* Events whose stack was cut short with no frame outside a system
   * image (the walk lost the outer callers: a library built without frame
   * pointers): their module is the library's, the caller is not known.
   * Per rule (policy order): those of its sites, for a rule with modules
   * that did not select them; a rule with any is not checked. */
  uint64_t cut;
  uint64_t *rule_cut;
  /* Per rule with a rate (policy order), not broken: its events that came
   * too late for the peak (tools/stackrec/rate.h: read a window after
   * newer ones, a long flush interval). Its peak may be short by them: a
   * rule with any is not checked (QA, session 41: 40 calls in a second
   * under max_per_second 30 passed as "peak 1/s", exit 0). */
  uint64_t *rule_late;
  /* What the filters kept (stkr__filter_describe, NUL-terminated; NULL:
   * no filter), set by the command: every output says it. */
  const char *filters;
} stkr_comp;

/* Read every event of r and build the answers.
 * @return 0, -EINVAL (bad filters), -ENOMEM, or the reader's hard error.
 * *out: stkr_comp_free(). */
int stkr_comp_build(stkr_reader *r, const stkr_comp_opts *o,
                    void (*progress)(uint64_t events, void *arg),
                    void *progress_arg, stkr_comp **out);

void stkr_comp_free(stkr_comp *c); /* NULL accepted */

/* After stkr_comp_build: the rules the recording could not show events of
 * (rule_notes, rule_unchecked), and the events without a module
 * (unattributed). r: the reader c was built from. @return 0 or -ENOMEM. */
int stkr_comp_check_rules(stkr_comp *c, stkr_reader *r);

/* Could the recording c was built from (r) hold events at sites of
 * category cat (len bytes: the part of a site name before its first '.')?
 * True when c read such events, when a process watched it
 * (stkr_process_info.watched), and when one did not say what it watched;
 * false when r has no process. */
bool stkr_comp_category_watched(const stkr_comp *c, stkr_reader *r,
                                const char *cat, size_t len);

/* Outputs (compliance_out.c), to f. banner: the recording's INCOMPLETE
 * line, or "" (JUnit: a test suite "recording" whose one case errs with
 * it, so that a CI gate sees it). @return 0 or -errno (write error). */
int stkr_comp_write_text(FILE *f, const stkr_comp *c, const char *banner);
int stkr_comp_write_json(FILE *f, const stkr_comp *c, const char *banner);
int stkr_comp_write_junit(FILE *f, const stkr_comp *c, const char *banner);
/* The compliance section of the HTML report (html.c calls it). */
void stkr_comp_write_html_section(FILE *f, const stkr_comp *c);

/* The inheritance table of a first read, for a second one; the caller
 * owns it (stkr_inherit_free). NULL when none. */
struct stkr_inherit *stkr_comp_take_inherit(stkr_comp *c);

/* Why events went unjudged (stkr_comp.unjudged), as words that follow
 * "processes": "whose earliest segments the disk cap deleted, or ...".
 * @return buf. */
#define STKR_COMP_WHY_MAX 512
const char *stkr_comp_unjudged_why(const stkr_comp *c, char *buf, size_t cap);

#endif /* STKR_COMPLIANCE_H */
