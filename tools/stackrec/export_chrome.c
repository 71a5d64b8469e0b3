/*
 * export_chrome.c: `stackrec export --format chrome`: Trace Event Format
 * JSON (the "JSON Object Format" of the Trace Event Format document), read
 * by Perfetto UI and chrome://tracing.
 *
 *   {"traceEvents":[ ...events... ],
 *    "stackFrames":{"1":{"name":..,"category":..[,"parent":N]}, ...},
 *    "displayTimeUnit":"ms", "otherData":{...}}
 *
 * Every recorded event becomes a thread-scoped instant event ("ph":"i",
 * "s":"t") named after its site, on the track of its pid/tid; "M" events
 * name each process and thread the first time it appears. Time stamps are
 * the recording's CLOCK_MONOTONIC in microseconds (with ns decimals), as
 * recorded: one clock for every process of a machine, never negative, and
 * exact whatever order the events are read in (they are drained thread by
 * thread, so the first event read is not the earliest). The viewers show
 * time from the earliest event. Processes on several monotonic clocks
 * (merged devices, a reboot, a time namespace) are laid on one line
 * (boots.h): otherData.clocks says how many.
 *
 * The stack goes two ways, because the two viewers read different ones:
 * "sf" names the leaf node of a tree of frames in "stackFrames" (the
 * format's documented way, shown by chrome://tracing), and args.stack lists
 * the frames leaf first as strings (Perfetto's JSON import ignores
 * stackFrames, but shows args).
 *
 * Memory: the tree of frames, the threads seen and one cache entry per
 * distinct stack (its sf id and rendered args) — never per event. The
 * cache is keyed by (process, session, stack id): ids restart with each
 * recording session of a pid.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "tools/stackrec/boots.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/export.h"

typedef struct node {
  uint64_t parent;       /* node id, 0 for a root frame */
  const char *category;  /* inside the map's key copy */
  const char *name;
} node;

typedef struct cached {
  uint64_t sf;           /* leaf node id, 0: no frames */
  char *args_stack;      /* "\"stack\":[...]" or NULL */
} cached;

/* A process's track: its pid in the trace (renumbered when an earlier
 * process took its own), and the reader's index of the process. */
typedef struct track_proc {
  uint32_t pid;
  size_t process;
} track_proc;

typedef struct chrome {
  stkr__export *x;
  FILE *out;
  stkr__map tracks;      /* "p<pid>" / "t<pid>:<tid>" seen */
  stkr__map stacks;      /* (process, session, stack id) -> cache index */
  cached *cache;
  size_t n_cache, cap_cache;
  stkr__map nodes_by_key; /* parent | category \0 name -> node id */
  node *nodes;            /* nodes[id - 1] */
  size_t n_nodes, cap_nodes;
  stkr_frame *pcframes;   /* frames made up for an unsymbolized stack */
  size_t cap_pcframes;
  stkr_frame *scratch;    /* --app-only selection */
  size_t cap_scratch;
  bool first_event_out;   /* the first traceEvents element is written */
  /* track_pid: the last process seen and its track's pid, and the next
   * pid for a process whose own an earlier one took. */
  size_t last_process;
  uint32_t last_pid, next_pid;
  track_proc *procs;      /* the process tracks, in order seen */
  size_t n_procs, cap_procs;
  stkr_boots boots;       /* processes of several clocks on one line */
  stkr_agg_images imgs;   /* where unsymbolized PCs lie */
} chrome;

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static void sep(chrome *c) {
  fputs(c->first_event_out ? ",\n" : "\n", c->out);
  c->first_event_out = true;
}

/* The pid of ev's process track: its own, unless another process of the
 * reader (another directory: two containers, devices or runs; QA, session
 * 27: their events shared one track) took it first; then a pid above any
 * Linux pid (PID_MAX_LIMIT is 2^22), its process named with its directory.
 * @return it, or 0 when out of memory. */
static uint32_t track_pid(chrome *c, const stkr_event_view *ev) {
  char key[64];
  uint64_t v = (uint64_t)ev->process + 1;
  int len, rc;

  if (c->last_pid != 0 && c->last_process == ev->process)
    return c->last_pid;
  len = snprintf(key, sizeof key, "q%u", (unsigned)ev->pid);
  if ((rc = stkr__map_put(&c->tracks, key, (size_t)len, &v, NULL)) < 0)
    return 0;
  c->last_process = ev->process;
  c->last_pid = ev->pid;
  if (v != (uint64_t)ev->process + 1) { /* another process's pid */
    len = snprintf(key, sizeof key, "x%zu", ev->process);
    v = c->next_pid ? c->next_pid : (1u << 22) + 1;
    if ((rc = stkr__map_put(&c->tracks, key, (size_t)len, &v, NULL)) < 0)
      return 0;
    if (rc == 0)
      c->next_pid = (uint32_t)v + 1;
    c->last_pid = (uint32_t)v;
  }
  return c->last_pid;
}

/* Metadata events naming the process and the thread, once each. A track
 * keeps the name its thread had first (a thread_name event names the
 * whole track): @return 1 when ev's thread is named otherwise now (it
 * renamed itself: put_event then says its name in the event's args; QA,
 * session 22: 12 events of a thread renamed from wk-1 to wk-2 all showed
 * as wk-1), 0, or -ENOMEM. */
static int name_tracks(chrome *c, const stkr_event_view *ev) {
  char key[64];
  uint64_t v = 0, name_hash;
  int rc, len;
  uint32_t pid = track_pid(c, ev);

  if (pid == 0)
    return -ENOMEM;
  len = snprintf(key, sizeof key, "p%u", (unsigned)pid);
  if ((rc = stkr__map_put(&c->tracks, key, (size_t)len, &v, NULL)) < 0)
    return rc;
  if (rc == 0) {
    /* Named after the last event (put_process_names): a pid that exec'd
     * has its later programs' names only once their segments are read. */
    if (stkr_grow((void **)&c->procs, &c->cap_procs, c->n_procs + 1,
                  sizeof *c->procs) != 0)
      return -ENOMEM;
    c->procs[c->n_procs++] = (track_proc){pid, ev->process};
  }
  len = snprintf(key, sizeof key, "t%u:%llu", (unsigned)pid,
                 (unsigned long long)ev->tid);
  name_hash = stkr_hash_bytes(STKR_HASH_SEED, ev->thread_name,
                              strlen(ev->thread_name));
  v = name_hash;
  if ((rc = stkr__map_put(&c->tracks, key, (size_t)len, &v, NULL)) < 0)
    return rc;
  if (rc == 1)
    return v != name_hash;
  sep(c);
  fprintf(c->out,
          "{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":%u,"
          "\"tid\":%llu,\"args\":{\"name\":",
          (unsigned)pid, (unsigned long long)ev->tid);
  if (ev->thread_name[0] != '\0' && strcmp(ev->thread_name, "?") != 0)
    stkr_cli_put_json_str(c->out, ev->thread_name);
  else
    fprintf(c->out, "\"tid %llu\"", (unsigned long long)ev->tid);
  fputs("}}", c->out);
  return 0;
}

/* The node for (parent, frame), added if new. @return its id, or 0 when
 * out of memory. */
static uint64_t node_id(chrome *c, uint64_t parent, const stkr_frame *f) {
  char label[1024], *key = NULL;
  const char *cat = f->image ? base_name(f->image) : "unknown", *copy;
  size_t cl = strlen(cat), ll, len;
  uint64_t id = c->n_nodes + 1;
  int rc;

  stkr_agg_frame_text(f, c->x->filt.granularity, label, sizeof label);
  ll = strlen(label);
  len = sizeof parent + cl + 1 + ll;
  key = malloc(len);
  if (key == NULL)
    return 0;
  memcpy(key, &parent, sizeof parent);
  memcpy(key + sizeof parent, cat, cl + 1);
  memcpy(key + sizeof parent + cl + 1, label, ll);
  rc = stkr__map_put(&c->nodes_by_key, key, len, &id, &copy);
  free(key);
  if (rc < 0)
    return 0;
  if (rc == 0) {
    if (stkr_grow((void **)&c->nodes, &c->cap_nodes, c->n_nodes + 1,
                  sizeof *c->nodes) != 0)
      return 0; /* the map entry stays, unused: harmless */
    c->nodes[c->n_nodes].parent = parent;
    c->nodes[c->n_nodes].category = copy + sizeof parent;
    c->nodes[c->n_nodes].name = copy + sizeof parent + cl + 1;
    c->n_nodes++;
  }
  return id;
}

/* The cache entry of the current event's stack, made on first sight.
 * @return its index, or a negative errno. */
static long stack_entry(chrome *c, const stkr_event_view *ev) {
  struct {
    uint64_t process;
    uint32_t session, stack;
  } key;
  const stkr_frame *f, *fr;
  size_t n, n_fr, i;
  uint64_t idx = c->n_cache, parent = 0;
  cached e = {0, NULL};
  int rc;

  memset(&key, 0, sizeof key);
  key.process = ev->process;
  key.session = ev->proc->sessions;
  key.stack = ev->stack_id;
  rc = stkr__map_put(&c->stacks, &key, sizeof key, &idx, NULL);
  if (rc < 0)
    return rc;
  if (rc == 1)
    return (long)idx;

  if (stkr_reader_frames(c->x->r, &f, &n) != 0)
    return -ENOMEM;
  fr = f;
  n_fr = n;
  if (n == 0 && ev->n_pcs > 0) {
    /* Unsymbolized: one frame per PC, placed in its image as
     * stkr_agg_build does (image+offset, the same in every run of a
     * build; QA, session 36: 0xPC, category "unknown"); whether a PC is
     * the app's is unknown, so --app-only keeps them all. */
    if (c->cap_pcframes < ev->n_pcs) {
      stkr_frame *p = realloc(c->pcframes, ev->n_pcs * sizeof *p);
      if (p == NULL)
        return -ENOMEM;
      c->pcframes = p;
      c->cap_pcframes = ev->n_pcs;
    }
    memset(c->pcframes, 0, ev->n_pcs * sizeof *c->pcframes);
    for (i = 0; i < ev->n_pcs; i++) { /* without the async marker bit */
      const uint64_t pc = ev->pcs[i] & ~STKR_PC_ASYNC;
      const stkr_image_info *im =
          stkr_agg_image_of(&c->imgs, c->x->r, ev->process, pc);
      c->pcframes[i].pc = c->pcframes[i].offset = pc;
      if (im != NULL) {
        c->pcframes[i].image = im->path;
        c->pcframes[i].offset = pc - im->load_address;
      }
    }
    fr = c->pcframes;
    n_fr = ev->n_pcs;
  } else if (stkr__app_frames(f, n, c->x->filt.app_only, &c->scratch,
                              &c->cap_scratch, &fr, &n_fr) != 0) {
    return -ENOMEM;
  }
  if (n_fr > 0) {
    char label[1024];
    size_t len = 0;
    FILE *m;

    for (i = n_fr; i-- > 0;) /* root first */
      if ((parent = node_id(c, parent, &fr[i])) == 0)
        return -ENOMEM;
    e.sf = parent;
    m = open_memstream(&e.args_stack, &len);
    if (m == NULL)
      return -ENOMEM;
    fputs("\"stack\":[", m);
    for (i = 0; i < n_fr; i++) {
      if (i)
        putc(',', m);
      stkr_cli_put_json_str(m, stkr_agg_frame_text(&fr[i], c->x->filt.granularity,
                                                   label, sizeof label));
    }
    putc(']', m);
    if (fclose(m) != 0 || e.args_stack == NULL) {
      free(e.args_stack);
      return -ENOMEM;
    }
  }
  if (stkr_grow((void **)&c->cache, &c->cap_cache, c->n_cache + 1,
                sizeof *c->cache) != 0) {
    free(e.args_stack);
    return -ENOMEM;
  }
  c->cache[c->n_cache] = e;
  return (long)c->n_cache++;
}

/* Signed ns as microseconds with three decimals, exactly. */
static void put_us(FILE *f, uint64_t ns) {
  fprintf(f, "%llu.%03u", (unsigned long long)(ns / 1000),
          (unsigned)(ns % 1000));
}

/* The head of an instant event ("ph":"i") of ev, up to its tid: scope 't'
 * (its thread's track) or 'p' (a line across its process). */
static void put_instant(chrome *c, const stkr_event_view *ev, const char *cat,
                        char scope) {
  sep(c);
  fputs("{\"name\":", c->out);
  stkr_cli_put_json_str(c->out, ev->site);
  fprintf(c->out, ",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"%c\",\"ts\":", cat,
          scope);
  uint32_t pid = track_pid(c, ev);

  put_us(c->out, stkr_boots_place(&c->boots, ev->process, ev->proc, ev->ts_ns));
  fprintf(c->out, ",\"pid\":%u,\"tid\":%llu",
          (unsigned)(pid ? pid : ev->pid), /* 0: out of memory */
          (unsigned long long)ev->tid);
}

static int put_event(chrome *c, const stkr_event_view *ev) {
  const cached *e = NULL;
  bool any_arg = false, renamed;
  long idx;
  int rc;

  if ((rc = name_tracks(c, ev)) < 0)
    return rc;
  renamed = rc == 1;
  if (ev->n_pcs > 0) {
    if ((idx = stack_entry(c, ev)) < 0)
      return (int)idx;
    e = &c->cache[idx];
  }
  put_instant(c, ev, "stackrec", 't');
  if (e != NULL && e->sf != 0)
    fprintf(c->out, ",\"sf\":%llu", (unsigned long long)e->sf);
  fputs(",\"args\":{", c->out);
  if (renamed) {
    stkr_cli_put_json_member(c->out, "", "thread", ev->thread_name);
    any_arg = true;
  }
  if (ev->payload_len > 0 || ev->payload_truncated) {
    if (any_arg)
      putc(',', c->out);
    fputs("\"payload\":", c->out);
    stkr_cli_put_json_bytes(c->out, ev->payload, ev->payload_len);
    if (ev->payload_truncated)
      fputs(",\"payload_truncated\":true", c->out);
    any_arg = true;
  }
  if (ev->stack_truncated) { /* folded's "[truncated]" frame, jsonl's key */
    if (any_arg)
      putc(',', c->out);
    fputs("\"stack_truncated\":true", c->out);
    any_arg = true;
  }
  if (e != NULL && e->args_stack != NULL) {
    if (any_arg)
      putc(',', c->out);
    fputs(e->args_stack, c->out);
  }
  fputs("}}", c->out);
  return 0;
}

/* A mark: a process-wide instant event ("s":"p", a line across the
 * process's tracks), category "mark", not counted as an event. */
static void put_mark(chrome *c, const stkr_event_view *ev) {
  put_instant(c, ev, "mark", 'p');
  fputs(",\"args\":{", c->out);
  if (ev->payload_len > 0) {
    fputs("\"payload\":", c->out);
    stkr_cli_put_json_bytes(c->out, ev->payload, ev->payload_len);
  }
  fputs("}}", c->out);
}

/* The process_name metadata of every process track, with the names the
 * reader gives once everything is read: a pid that exec'd is "app > exe"
 * as in info, report and pprof (QA, session 31: its first program's name
 * only). A renumbered one is said with its own pid and directory. */
static int put_process_names(chrome *c) {
  for (size_t i = 0; i < c->n_procs; i++) {
    const stkr_process_info *p =
        stkr_reader_process(c->x->r, c->procs[i].process);
    const char *pn = p != NULL ? p->process_name : NULL;
    uint32_t pid = c->procs[i].pid;

    sep(c);
    fprintf(c->out,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":%u,"
            "\"tid\":%u,\"args\":{\"name\":",
            (unsigned)pid, (unsigned)pid);
    if (p != NULL && pid != p->pid) { /* renumbered: said with its directory */
      char *name = NULL;
      size_t nlen = 0;
      FILE *m = open_memstream(&name, &nlen);
      if (m == NULL)
        return -ENOMEM;
      fprintf(m, "%s (pid %u, %s)", pn != NULL && pn[0] ? pn : "?",
              (unsigned)p->pid, p->dir ? p->dir : "?");
      if (fclose(m) != 0)
        return -ENOMEM;
      stkr_cli_put_json_str(c->out, name);
      free(name);
    } else if (pn != NULL && pn[0] != '\0') {
      stkr_cli_put_json_str(c->out, pn);
    } else {
      fprintf(c->out, "\"pid %u\"", (unsigned)pid);
    }
    fputs("}}", c->out);
  }
  return 0;
}

static void put_tail(chrome *c, uint64_t events) {
  size_t i, np = stkr_reader_process_count(c->x->r);
  uint64_t drops = 0, wall = 0;

  fputs("\n],\n\"stackFrames\":{", c->out);
  for (i = 0; i < c->n_nodes; i++) {
    const node *n = &c->nodes[i];
    fprintf(c->out, "%s\n\"%zu\":{\"name\":", i ? "," : "", i + 1);
    stkr_cli_put_json_str(c->out, n->name);
    stkr_cli_put_json_member(c->out, ",", "category", n->category);
    if (n->parent != 0)
      fprintf(c->out, ",\"parent\":%llu", (unsigned long long)n->parent);
    putc('}', c->out);
  }
  for (i = 0; i < np; i++) {
    const stkr_process_info *p = stkr_reader_process(c->x->r, i);
    drops += p->drops;
    if (p->first_wall_ns != 0 && (wall == 0 || p->first_wall_ns < wall))
      wall = p->first_wall_ns;
  }
  fprintf(c->out,
          "},\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"generator\":"
          "\"stackrec export\",\"events\":%llu,\"dropped_events\":%llu,"
          "\"first_wall_ns\":%llu,\"clocks\":%zu",
          (unsigned long long)events, (unsigned long long)drops,
          (unsigned long long)wall, c->boots.n_clocks);
  /* What else the recording lost, as the pprof comment says it. */
  char line[1024];
  if (stkr_cli_incomplete_line(c->x->r, line, sizeof line) > 0)
    stkr_cli_put_json_member(c->out, ",", "incomplete", line);
  fputs("}}\n", c->out);
}

int stkr__export_chrome(stkr__export *x) {
  chrome c;
  stkr__filter filt;
  stkr_event_view ev;
  uint64_t read = 0;
  int rc, err = 0;

  memset(&c, 0, sizeof c);
  c.x = x;
  c.out = x->out;
  if (stkr__filter_init(&filt, &x->filt) != 0)
    return -EINVAL;
  if (stkr_boots_init(&c.boots, x->r) != 0) {
    stkr__filter_free(&filt);
    return -ENOMEM;
  }
  fputs("{\"traceEvents\":[", c.out);
  while ((rc = stkr_reader_next(x->r, &ev)) == 1) {
    if ((++read & 0xFFFF) == 0) {
      stkr__progress(read, x);
      if (ferror(c.out)) /* e.g. disk full: stop reading, export.c says */
        break;
    }
    if (ev.is_mark) {
      put_mark(&c, &ev);
      continue;
    }
    err = stkr__filter_pass(&filt, &ev);
    if (err < 0)
      break;
    if (err == 0)
      continue;
    if ((err = put_event(&c, &ev)) != 0)
      break;
    x->events_out++;
  }
  if (err == 0 && rc < 0)
    err = rc;
  if (err == 0)
    err = put_process_names(&c);
  if (err == 0)
    put_tail(&c, x->events_out);
  STKR_FREE_EACH(c.cache, c.n_cache, args_stack);
  STKR_FREE_ALL(c.cache, c.procs, c.nodes, c.pcframes, c.scratch);
  stkr__map_free(&c.tracks);
  stkr__map_free(&c.stacks);
  stkr__map_free(&c.nodes_by_key);
  stkr_boots_free(&c.boots);
  stkr_agg_images_free(&c.imgs);
  stkr__filter_free(&filt);
  return err;
}
