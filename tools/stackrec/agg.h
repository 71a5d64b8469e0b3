/*
 * agg.h: a recording's events aggregated by call stack, for `report` and
 * the exports (pprof, folded, HTML).
 *
 * Two levels, so that per-event work is one hash probe on small integers:
 * events are counted through a key (process, session, site id, stack id[,
 * thread id]); the first time a key is seen, its stack is resolved to
 * names and frames and merged by content (site name + frame labels [+
 * thread name]) with the stacks so far, which is what makes stacks from
 * several processes, or several runs of one build, add up. A frame's label is its function name, or
 * image+offset when unknown (stable across ASLR), or the raw PC when
 * neither is known. Unsymbolized stacks (offline/none mode) get one frame
 * per PC, placed in its image from the recording's image list (so they
 * merge across runs by image+offset too).
 * Memory grows with distinct stacks (plus the keys of the one process
 * being read), never with events or with the number of processes.
 *
 * Thread-safety: none; one aggregation per thread.
 */
#ifndef STKR_AGG_H
#define STKR_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stkr_reader.h"

/* What makes two frames the same when stacks are merged (as pprof's
 * -functions / -lines / -addresses). */
typedef enum stkr_agg_granularity {
  STKR_AGG_BY_LINE = 0,  /* function, source file and line (the default):
                            two calls from one function at other lines are
                            two stacks */
  STKR_AGG_BY_FUNCTION,  /* function name only */
  STKR_AGG_BY_ADDRESS    /* image + offset (the PC) as well */
} stkr_agg_granularity;

/* Their names, by value ("line", "function", "address"), NULL-ended: the
 * values of --granularity (stkr_cli_choice_parse). */
extern const char *const stkr_agg_granularity_names[];

typedef struct stkr_agg stkr_agg;

typedef struct stkr_agg_opts {
  const char *site_glob;   /* fnmatch(3) pattern on site names; NULL: all */
  const char *thread_glob; /* pattern on thread names, or a decimal tid
                              (then also matched as a name); NULL: all */
  double from_s, to_s;     /* keep events in [from_s, to_s) seconds after
                              their process's recording start (filter.h);
                              to_s <= 0: no upper bound. from_s < 0 or 0 < to_s <=
                              from_s is -EINVAL. */
  bool app_only;           /* drop non-app frames (a stack with no app frame
                              keeps its innermost PC's frames, so it stays
                              attributable); unsymbolized stacks, whose
                              frames are not known to be the app's or not,
                              are kept whole */
  bool by_thread;          /* keep threads apart (pprof's thread label) */
  bool by_process;         /* keep processes apart (pid and name) */
  bool by_payload;         /* keep payloads apart (each distinct payload
                              its own stack: memory then grows with
                              distinct (stack, payload) pairs) */
  stkr_agg_granularity granularity;
  /* Called for every event that passes the filters, once it is counted,
   * with the index of its merged stack in a->stacks (stable: stacks are
   * only appended while building; the array itself may move, so keep the
   * index). NULL: none. @return 0, or a negative errno that stops the
   * build (stkr_agg_build returns it). `compliance` keeps its per-event
   * statistics this way on top of the one aggregation. */
  int (*on_event)(void *arg, const stkr_agg *a, const stkr_event_view *ev,
                  size_t stack);
  void *on_event_arg;
  /* Keep no per-site payloads and timelines (sites' payloads and timeline
   * stay empty): for commands that show neither (compliance's text, JSON
   * and JUnit), a tenth of the per-event work. */
  bool no_site_details;
} stkr_agg_opts;

/* on_event's stack for a mark (is_mark, proto/stkr_reader.h): marks are
 * passed unfiltered, in the order read, and are not events. */
#define STKR_AGG_MARK SIZE_MAX

/* One distinct call stack at one site (and thread, with by_thread). */
typedef struct stkr_agg_stack {
  const char *site;
  const char *thread;      /* by_thread: the thread's name ("" if none) */
  uint64_t tid;            /* by_thread: its OS thread id (of the first
                              thread seen, when several threads of that
                              name merged) */
  uint32_t tid_proc;       /* by_thread: the process of that tid (reader
                              index + 1: two processes of one pid, in two
                              containers, are two) */
  bool several_tids;       /* by_thread: events of more than one thread
                              of that name (then tid names one of them);
                              one tid in two processes is two threads */
  /* Innermost first; strings owned by the agg. pc and offset are those of
   * the first occurrence; file/line/column are cleared where merged
   * occurrences disagree (another call site in the function, another
   * build), so a line shown is true of every event counted here. */
  const stkr_frame *frames;
  size_t n_frames;
  uint64_t count;          /* events */
  uint32_t n_pids;         /* distinct processes it was seen in */
  bool truncated;          /* the walk was cut short (some events) */
  bool bare;               /* its frames were made from its PCs: the
                              recording never resolved it (offline mode,
                              or first seen as the session ended) */
  /* by_process: the process (else 0 and NULL). */
  uint32_t pid;
  const char *process;
  /* by_process: its recording directory when another process read has
   * the same pid (two containers, devices or runs: QA, session 27, their
   * rows were one), else NULL. */
  const char *process_dir;
  /* by_payload: the payload (else NULL, 0). Owned by the agg. */
  const uint8_t *payload;
  size_t payload_len;
  bool payload_truncated;
} stkr_agg_stack;

/* One payload seen at a site, with its events. */
typedef struct stkr_agg_payload {
  const uint8_t *data;     /* owned by the agg */
  size_t len;
  uint64_t count;
  bool truncated;          /* cut at payload_max: data is a prefix */
} stkr_agg_payload;

/* A site and its stacks, most frequent first (ties in a fixed order: by
 * thread, then frames: bare PCs, names, then image+offset). */
typedef struct stkr_agg_site {
  const char *name;
  uint64_t count;
  const stkr_agg_stack **stacks;
  size_t n_stacks;
  /* The site's payloads, most events first (then by bytes). The first
   * STKR_AGG_MAX_PAYLOADS distinct payloads of a site are told apart; the
   * events of later new ones add up in more_payload_events. Events
   * without a payload are not here. */
  const stkr_agg_payload *payloads;
  size_t n_payloads;
  uint64_t more_payload_events;
  uint64_t payload_events;  /* events of this site that had a payload */
  /* Events per time bucket (stkr_agg.timeline_buckets of them, each
   * timeline_bucket_ns wide, from the start of the event's process tree;
   * see timeline.h). NULL when the site has no event. */
  const uint64_t *timeline;
} stkr_agg_site;

#define STKR_TL_BUCKETS 128

/* A mark (proto/stkr_reader.h "Marks"): not an event, not counted in any
 * site; kept for the timelines. A mark set with `stackrec mark` reaches
 * every process; it is kept once (its first process). */
typedef struct stkr_agg_mark {
  const char *name;        /* interned, e.g. "consent.granted" */
  uint64_t ts_ns;          /* the recording clock */
  uint64_t t_ns;           /* after its process's origin (filter.h) */
  size_t process;          /* reader index of its process */
  uint32_t pid;
  bool external;           /* set with `stackrec mark` (no thread/stack) */
} stkr_agg_mark;

/* Set with `stackrec mark` (delivered to every process of its directory),
 * not by the process: no thread, no stack. */
static inline bool stkr_agg_mark_external(const stkr_event_view *ev) {
  return ev->thread_id == 0 && ev->n_pcs == 0 && !ev->unresolved;
}

#define STKR_AGG_MAX_MARKS 100000 /* kept; later ones only counted */

#define STKR_AGG_MAX_PAYLOADS 4096

struct stkr_agg {
  stkr_agg_site *sites;    /* most events first, then by name */
  size_t n_sites;
  stkr_agg_stack *stacks;  /* every stack (the sites point into this) */
  size_t n_stacks;
  /* Distinct stacks by site and frames (at the granularity): the one
   * figure every view prints as "N distinct stacks". n_stacks is more
   * when by_thread, by_process or by_payload keep copies of a stack
   * apart. */
  size_t n_distinct;
  uint64_t events_read;    /* every event the reader delivered */
  uint64_t events;         /* of which passed the filters */
  /* Lost by the recorder, summed over every process read (never
   * filtered: a drop has no site or stack). */
  uint64_t drops, drops_ring_full, drops_reentrant, drops_other,
      drops_write_error, drops_exit;
  uint64_t damaged_batches; /* the reader's count, summed */
  uint64_t misnamed_segments; /* the reader's count, summed */
  size_t n_processes;
  size_t n_processes_with_events; /* with an event that passed the filters */
  bool filtered;             /* built with a filter (site, thread, time,
                                app-only): counts are of what passed */
  void *strs_;              /* private: the interned strings */
  void *framelists_;        /* private: the stacks' frames, a list shared by
                               stacks of equal frames (agg_framelist.h) */
  /* Also summed over the processes (stkr_process_info): */
  uint64_t missing_batches;  /* gaps in batch numbers */
  uint64_t segments_deleted; /* older segments the disk cap deleted */
  uint64_t cap_deleted_events; /* the events they held, when known */
  uint64_t unresolved_events; /* events with an undefined id (site "?") */
  uint64_t bare_events;      /* events of bare stacks (stkr_agg_stack.bare) */
  size_t bare_stacks;
  size_t live_processes;     /* still being written (live_tail, and the
                                writer runs: live_sessions) */
  size_t cut_processes;      /* live_tail with no writer running here: it
                                stopped mid-batch, or the files were copied
                                while it wrote */
  size_t unsupported_processes; /* newer format: not read */
  stkr_agg_granularity granularity; /* the one it was built with */
  void *payloads_;           /* private: the payload table */
  void *timeline_;           /* private: the timelines */
  uint64_t timeline_bucket_ns;
  size_t timeline_buckets;   /* buckets up to the last non-empty one */
  size_t timeline_trees;     /* process trees of the events counted, each
                                drawn from its own start (agg_runs.h) */
  void *hangs_;              /* private: the watchdog's hangs (hangs.h) */
  stkr_agg_mark *marks;      /* by process, then as read */
  size_t n_marks, cap_marks;
  uint64_t marks_read;       /* marks (not in events_read); a `stackrec
                                mark` mark once, not once per process */
  uint64_t marks_not_kept;   /* past STKR_AGG_MAX_MARKS */
};

/*
 * Read every event of r (which must not have been read from yet) and
 * aggregate them. progress, if not NULL, is called every 2^20 events with
 * the count so far (for a progress line on a terminal).
 * @return 0, -EINVAL (bad arguments, time window or glob), -ENOMEM, or the
 *         reader's hard error. *out is owned by the caller: stkr_agg_free().
 */
int stkr_agg_build(stkr_reader *r, const stkr_agg_opts *opts,
                   void (*progress)(uint64_t events, void *arg),
                   void *progress_arg, stkr_agg **out);

/* Free an aggregation. NULL is accepted. */
void stkr_agg_free(stkr_agg *a);

/* The frame a view puts above the outermost kept frame of a stack the
 * walk cut short (stkr_agg_stack.truncated): "[truncated]", as folded's
 * frame, so that frame is never drawn as a thread's entry point. */
extern const stkr_frame stkr_agg_cut_frame;

/* A frame's label as used for merging and display: the function name,
 * else "image+0xoffset" (image base name), else "0xPC". Writes into buf
 * (always NUL-terminated) and returns buf. */
const char *stkr_agg_frame_label(const stkr_frame *f, char *buf, size_t len);

/* Where the PCs of an unsymbolized stack lie: one process's images
 * (stkr_reader_images) sorted by text_start, sorted again only when the
 * process or its list changes. Zeroed: empty. */
typedef struct stkr_agg_images {
  size_t process, n;
  const stkr_image_info *of;
  const stkr_image_info **sorted;
  size_t cap;
} stkr_agg_images;

/* The image of process `process` whose text holds pc, or NULL (none, or
 * no memory: only a label is lost, the raw PC is shown). With overlapping
 * images (several sessions of one pid) the one starting closest below pc
 * is taken. */
const stkr_image_info *stkr_agg_image_of(stkr_agg_images *m, stkr_reader *r,
                                         size_t process, uint64_t pc);
void stkr_agg_images_free(stkr_agg_images *m);

/* --app-only's frames of f[0..n) (innermost first), one rule for every
 * view: the app's frames (is_app), or, when there is none, the innermost
 * PC's frames (its inlined calls and the function containing them), so
 * that the event stays attributable (QA, session 36: jsonl, chrome and
 * dump kept the innermost frame alone or nothing, report and folded the
 * whole PC). Copied into out (n frames of room; out may be f).
 * @return the number kept. */
size_t stkr_agg_app_frames(const stkr_frame *f, size_t n, stkr_frame *out);

/* A frame's text at a granularity: the label, then for STKR_AGG_BY_LINE
 * " file:line" (file's base name) when known, for STKR_AGG_BY_ADDRESS also
 * " image+0xoffset" (or " 0xPC"). Frames that merge have equal texts, and
 * frames that do not, differ. Writes into buf and returns it. */
const char *stkr_agg_frame_text(const stkr_frame *f, stkr_agg_granularity g,
                                char *buf, size_t len);

#endif /* STKR_AGG_H */
