/*
 * snapshot.c: `stackrec snapshot PID`: what every thread of another
 * process is doing, like eu-stack, with each thread stopped only while its
 * registers and stack window are copied (snapshot.h, snapshot_linux.c).
 * Output: text (per thread: TID, name, frames innermost first with
 * function and file:line), --json, or -o DIR (a recording).
 * Symbolization: the CLI's one symbolizer (//symbolize), through its
 * frame cache, so a PC seen in several threads or snapshots is resolved
 * once; images are matched by build-id.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/stkr_cmp.h"
#include "common/stkr_grow.h"
#include "tools/stackrec/attrib.h"
#include "tools/stackrec/cli.h"
#include "tools/stackrec/snapshot.h"
#include "tools/stackrec/snapshot_signals.h"
#include "tools/stackrec/symcache_dir.h"

/* Both backends (snapshot_linux.c, snapshot_apple.c) fill a stkr_snap the
 * same way, with malloc'd threads and stack copies: one free for both. */
void stkr_snap_free(stkr_snap *s) {
  if (!s) return;
  STKR_FREE_EACH(s->threads, s->n_threads, stack);
  free(s->threads);
  memset(s, 0, sizeof *s);
}

static const char snapshot_help[] =
    "Usage: stackrec snapshot [--json | -o DIR] [--count N] [--interval MS]\n"
    "                         [--fast] [--symcache DIR | --no-symcache] [-q]\n"
    "                         [--debug-dir PATH]... PID\n"
    "\n"
    "Print the call stack of every thread of process PID, innermost frame\n"
    "first, with function and file:line (like eu-stack -p PID). Each thread\n"
    "is stopped on its own, only while its registers and stack are copied\n"
    "(tens of microseconds), then walked from the copy: the threads are not\n"
    "stopped at one common instant, and no thread waits for the others.\n"
    "\n"
    "Options:\n"
    "  --json           one JSON document per snapshot (one per line):\n"
    "                   {\"pid\", \"name\", \"wall_us\", \"max_stop_us\",\n"
    "                   \"threads\": [{\"tid\", \"name\", \"stop_us\", \"held_us\",\n"
    "                   \"truncated\", \"async\", \"frames\": [{\"pc\",\n"
    "                   \"function\", \"file\", \"line\", \"image\",\n"
    "                   \"offset\"}]}]}; async: the walk passed a Swift\n"
    "                   async frame (the tasks awaiting it not followed)\n"
    "                   stop_us: from the interrupt to the detach (includes\n"
    "                   the thread's wait for a CPU to reach its stop);\n"
    "                   held_us: from its stop seen to the detach\n"
    "  -o, --output DIR write a recording into DIR (created if missing): one\n"
    "                   event per thread per snapshot at site 'snapshot', read\n"
    "                   by report, export, dump, verify\n"
    "  --count N        take N snapshots (default 1)\n"
    "  --interval MS    between snapshots (default 1000)\n"
    "  --debug-dir PATH separate debug files or binaries by build-id, as for\n"
    "                   'stackrec symbolize' (repeatable)\n"
    "  --fast           no separate debug files (/usr/lib/debug): function\n"
    "                   names from symbol tables, file:line only from images\n"
    "                   that carry their own DWARF (like eu-stack without -s;\n"
    "                   a system library's compressed debug info costs tens\n"
    "                   of milliseconds to read; a symbol cache still gives\n"
    "                   file:line)\n"
    "  --symcache DIR   symbol caches (<build-id>.stkrsym, docs/SYMCACHE.md):\n"
    "                   an image with one there is answered from it, its\n"
    "                   DWARF never read (same answers); after printing,\n"
    "                   the images read from DWARF are converted into\n"
    "                   caches there (a few per run). Default:\n"
    "                   $STACKREC_SYMCACHE (\"none\": none), else\n"
    "                   $XDG_CACHE_HOME/stackrec/symcache, else\n"
    "                   ~/.cache/stackrec/symcache\n"
    "  --no-symcache    neither read nor write symbol caches\n"
    "  -q, --quiet      no timing summary on stderr\n"
    "  -h, --help       this help\n"
    "\n"
    "Needs the right to trace PID: the same user (and ptrace_scope 0, or\n"
    "root), or CAP_SYS_PTRACE. A thread that exits meanwhile is skipped\n"
    "with a note; a process that exits is an error.\n"
    "\n"
    "Exit status: 0 done; 1 output failed; 2 usage; 3 no such process, not\n"
    "allowed to trace it, or it exited during the snapshot.\n";

typedef struct snap_run {
  bool json, quiet, fast, no_symcache;
  const char *outdir;
  const char *symcache_dir; /* NULL: none */
  char symcache_buf[4096];
  stkr__symbe *be; /* owned by cache */
  unsigned count, interval_ms;
  pid_t pid;
  const char *debug_dirs[16];
  size_t n_debug_dirs;
  stkr__symc *cache;
  stkr_snap_writer *writer;
  /* Definitions by id, as the cache emitted them (epoch 1, once each). */
  const char **strs;
  size_t cap_strs;
  const Stackrec__FrameDef **frames;
  size_t cap_frames;
  stkr__symdefs defs; /* this snapshot's new ones (for the writer) */
  unsigned notes;
  /* The program image the images were read from (stkr_snap_exec_id), read
   * before them: an exec after it is seen at the next snapshot. */
  uint8_t exec_id[1024];
  int exec_id_len;
} snap_run;

static void sym_warn(void *arg, const char *why) {
  snap_run *r = arg;
  if (!r->quiet && r->notes++ < 20)
    fprintf(stderr, "stackrec snapshot: note: %s\n", why);
}

/* Remember this batch's new definitions by id. */
static int keep_defs(snap_run *r) {
  for (size_t i = 0; i < r->defs.n_strings; i++) {
    const Stackrec__StringDef *d = r->defs.strings[i];
    size_t need = (size_t)d->id + 1, old = r->cap_strs;
    if (stkr_grow((void **)&r->strs, &r->cap_strs, need, sizeof *r->strs))
      return -ENOMEM;
    memset(r->strs + old, 0, (r->cap_strs - old) * sizeof *r->strs);
    r->strs[d->id] = d->value;
  }
  for (size_t i = 0; i < r->defs.n_frames; i++) {
    const Stackrec__FrameDef *d = r->defs.frames[i];
    size_t need = (size_t)d->id + 1, old = r->cap_frames;
    if (stkr_grow((void **)&r->frames, &r->cap_frames, need,
                  sizeof *r->frames))
      return -ENOMEM;
    memset(r->frames + old, 0, (r->cap_frames - old) * sizeof *r->frames);
    r->frames[d->id] = d;
  }
  return 0;
}

static const char *str_of(const snap_run *r, uint32_t id) {
  return id && id < r->cap_strs ? r->strs[id] : NULL;
}

/* One PC's frames are fr[0..n): inlined calls, then the function. Shown
 * as one frame: the function, at the innermost file:line. */
static void put_frame(const snap_run *r, const stkr_snap_images *im,
                      unsigned k, uint64_t pc, const uint32_t *ids, size_t n,
                      bool first) {
  const Stackrec__FrameDef *fn = r->frames[ids[n - 1]], *loc = r->frames[ids[0]];
  const stkr_snap_image *img = stkr_snap_image_of(im, pc);
  const char *func = str_of(r, fn->function), *file = str_of(r, loc->file);
  const char *image = img ? img->path : NULL;
  uint64_t off = img ? pc - img->sym.load_address : pc;

  if (r->json) {
    printf("%s{\"pc\": \"0x%" PRIx64 "\", \"function\": ", first ? "" : ", ",
           pc);
    stkr_cli_put_json_str(stdout, func);
    fputs(", \"file\": ", stdout);
    stkr_cli_put_json_str(stdout, file);
    printf(", \"line\": %u, \"image\": ", loc->line);
    stkr_cli_put_json_str(stdout, image);
    printf(", \"offset\": \"0x%" PRIx64 "\"}", off);
    return;
  }
  printf("#%-2u 0x%016" PRIx64 " %s", k, pc, func ? func : "??");
  if (file) printf(" at %s:%u", file, loc->line);
  if (image) printf(" (%s+0x%" PRIx64 ")", stkr_attrib_base_name(image), off);
  putchar('\n');
}

static void put_thread(const snap_run *r, const stkr_snap_images *im,
                       const stkr_snap_thread *t, const uint32_t *ids,
                       uint32_t n_ids, bool first) {
  size_t at = 0;
  if (r->json) {
    printf("%s{\"tid\": %d, \"name\": ", first ? "" : ", ", (int)t->tid);
    stkr_cli_put_json_str(stdout, t->name);
    printf(", \"stop_us\": %.1f, \"held_us\": %.1f, \"truncated\": %s, "
           "\"async\": %s, \"frames\": [",
           t->stop_ns / 1e3, t->held_ns / 1e3, t->truncated ? "true" : "false",
           t->async_seen ? "true" : "false");
  } else {
    /* Escaped as dump prints names: a thread may call itself "a\nb" */
    printf("TID %d (", (int)t->tid);
    stkr_cli_put_escaped(stdout, (const uint8_t *)t->name, strlen(t->name));
    printf("): stopped %.1f us (held %.1f us)\n", t->stop_ns / 1e3,
           t->held_ns / 1e3);
  }
  for (unsigned k = 0; k < t->n_pcs && at < n_ids; k++) {
    size_t n = 1;
    while (at + n <= n_ids && r->frames[ids[at + n - 1]]->inlined) n++;
    if (at + n > n_ids) break;
    put_frame(r, im, k, t->pcs[k], ids + at, n, k == 0);
    at += n;
  }
  if (r->json) fputs("]}", stdout);
  else if (t->truncated)
    printf("... (more frames: %s)\n", t->n_pcs == STKR_SNAP_MAX_DEPTH
                                           ? "depth limit"
                                           : "past the 256 KiB of stack "
                                             "copied");
  if (!r->json && t->async_seen)
    puts("(Swift async code: these are the thread's own frames; the tasks "
         "awaiting its async functions are not followed by a snapshot)");
}

/* Symbolize (and record) one snapshot, and print it. */
static int emit(snap_run *r, const stkr_snap_images *im, stkr_snap *s,
                bool last) {
  stkr_snap_frames *fr = calloc(s->n_threads + 1, sizeof *fr);
  int err = 0;

  if (!fr) return -ENOMEM;
  stkr__symdefs_reset(&r->defs);
  for (size_t i = 0; i < s->n_threads && err == 0; i++) {
    stkr_snap_thread *t = &s->threads[i];
    uint64_t look[STKR_SNAP_MAX_DEPTH];
    stkr_snap_unwind(im, t);
    memcpy(look, t->pcs, t->n_pcs * sizeof *look);
    /* The innermost PC is where the thread was, not a return address:
     * the cache looks every PC up at PC - 1, so hand it PC + 1. */
    if (t->n_pcs > 0) look[0]++;
    fr[i].pcs = t->pcs;
    fr[i].n_pcs = t->n_pcs;
    fr[i].truncated = t->truncated;
    err = stkr__symc_stack(r->cache, look, t->n_pcs, &fr[i].frames,
                           &fr[i].n_frames);
    if (err == 0)
      err = stkr__symc_emit(r->cache, fr[i].frames, fr[i].n_frames, 1,
                            &r->defs);
  }
  if (err == 0) err = keep_defs(r);
  if (err == 0 && r->writer)
    err = stkr_snap_writer_add(r->writer, s, fr, im, &r->defs, last);
  if (err == 0 && !r->outdir) {
    if (r->json) {
      printf("{\"pid\": %d, \"name\": ", (int)s->pid);
      stkr_cli_put_json_str(stdout, s->comm);
      printf(", \"wall_us\": %.1f, \"max_stop_us\": %.1f, \"threads\": [",
             s->wall_time_ns / 1e3, s->max_stop_ns / 1e3);
    } else {
      printf("PID %d (", (int)s->pid);
      stkr_cli_put_escaped(stdout, (const uint8_t *)s->comm, strlen(s->comm));
      printf("): %zu threads\n", s->n_threads);
    }
    for (size_t i = 0; i < s->n_threads; i++)
      put_thread(r, im, &s->threads[i], fr[i].frames, fr[i].n_frames, i == 0);
    fputs(r->json ? "]}\n" : "\n", stdout);
  }
  free(fr);
  return err;
}

static int parse_uint(const char *s, unsigned max, unsigned *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || errno || v > max || s[0] == '-') return -EINVAL;
  *out = (unsigned)v;
  return 0;
}

static int parse_args(snap_run *r, int argc, char **argv) {
  const stkr_cli_opt opts[] = {
      {"json", 'j', 0, NULL, &r->json},
      {"output", 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, &r->outdir, NULL},
      {"count", 'n', STKR_CLI_VALUE, NULL, NULL},
      {"interval", 'i', STKR_CLI_VALUE, NULL, NULL},
      {"debug-dir", 'd', STKR_CLI_VALUE | STKR_CLI_REPEAT, NULL, NULL},
      {"quiet", 'q', STKR_CLI_SHORT, NULL, &r->quiet},
      {"fast", 'f', 0, NULL, &r->fast},
      {"symcache", 'c', STKR_CLI_VALUE, &r->symcache_dir, NULL},
      {"no-symcache", 'C', 0, NULL, &r->no_symcache},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "snapshot", .opts = opts,
                                .help = {snapshot_help}};
  unsigned pid;
  int c;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT: /* -1: the help printed, status 0 */
      return gopt.status != 0 ? gopt.status : -1;
    case 'n':
      if (parse_uint(optarg, 1000000, &r->count) || r->count == 0)
        return stkr_cli_usage_error("snapshot", "--count '%s' is not a "
                                    "number from 1 to 1000000", optarg);
      break;
    case 'i':
      if (parse_uint(optarg, 86400000, &r->interval_ms))
        return stkr_cli_usage_error("snapshot", "--interval '%s' is not a "
                                    "number of milliseconds", optarg);
      break;
    case 'd':
      if (r->n_debug_dirs == sizeof r->debug_dirs / sizeof r->debug_dirs[0])
        return stkr_cli_usage_error("snapshot", "more than 16 --debug-dir");
      r->debug_dirs[r->n_debug_dirs++] = optarg;
      break;
    }
  }
  if (r->no_symcache && r->symcache_dir)
    return stkr_cli_usage_error("snapshot", "--symcache and --no-symcache "
                                "exclude each other");
  if (!r->no_symcache && !r->symcache_dir)
    r->symcache_dir =
        stkr_symcache_dir(r->symcache_buf, sizeof r->symcache_buf);
  if (r->no_symcache) r->symcache_dir = NULL;
  if (r->json && r->outdir)
    return stkr_cli_usage_error("snapshot", "--json and -o exclude each "
                                "other");
  if (optind + 1 != argc)
    return stkr_cli_usage_error("snapshot", optind == argc
                                                ? "no PID given"
                                                : "one PID only");
  if (parse_uint(argv[optind], INT32_MAX, &pid) || pid == 0)
    return stkr_cli_usage_error("snapshot", "'%s' is not a process id",
                                argv[optind]);
  r->pid = (pid_t)pid;
  return 0;
}

/* The medians of a series come from at most this many (stop, held)
 * pairs: every one up to it, then a uniform sample of all (reservoir
 * sampling), so that a long series does not keep 16 bytes per thread and
 * snapshot (QA, session 43, which measured ~30 in all: 1.6 GB of them for
 * a million snapshots of 100 threads). The maxima are exact. */
#define STATS_SAMPLES_MAX 65536u

typedef struct snap_stats {
  uint64_t *stops, *helds; /* the sample: pairs at one index */
  size_t n, cap, cap_h;
  uint64_t seen;           /* pairs offered to the sample */
  uint64_t rng;            /* xorshift64 state (reservoir choice) */
  uint64_t max_stop, max_held, wall_sum, vanished;
  pid_t max_tid;
} snap_stats;

static void stats_add(snap_stats *st, const stkr_snap *s) {
  st->wall_sum += s->wall_time_ns;
  st->vanished += s->vanished;
  for (size_t i = 0; i < s->n_threads; i++) {
    const stkr_snap_thread *t = &s->threads[i];
    if (t->stop_ns > st->max_stop) {
      st->max_stop = t->stop_ns;
      st->max_tid = t->tid;
    }
    if (t->held_ns > st->max_held) st->max_held = t->held_ns;
    size_t at = st->n;
    if (st->seen++ >= STATS_SAMPLES_MAX) { /* keep it with p = MAX/seen */
      st->rng ^= st->rng << 13;
      st->rng ^= st->rng >> 7;
      st->rng ^= st->rng << 17;
      uint64_t j = st->rng % st->seen;
      if (j >= st->n) continue; /* n: MAX, fewer if memory ran out */
      at = (size_t)j;
    } else if (stkr_grow((void **)&st->stops, &st->cap, st->n + 1,
                         sizeof *st->stops) != 0 ||
               stkr_grow((void **)&st->helds, &st->cap_h, st->n + 1,
                         sizeof *st->helds) != 0) {
      continue;
    } else {
      st->n++;
    }
    st->helds[at] = t->held_ns;
    st->stops[at] = t->stop_ns;
  }
}

static void stats_print(const snap_run *r, snap_stats *st, unsigned taken) {
  if (st->vanished)
    fprintf(stderr, "stackrec snapshot: note: %" PRIu64 " thread%s of "
            "process %d had exited (skipped: a main thread that called "
            "pthread_exit, or a thread that ended during the snapshot)\n",
            st->vanished, st->vanished == 1 ? "" : "s", (int)r->pid);
  if (r->quiet || st->n == 0) return;
  qsort(st->stops, st->n, sizeof *st->stops, stkr_qsort_u64);
  qsort(st->helds, st->n, sizeof *st->helds, stkr_qsort_u64);
  fprintf(stderr, "stackrec snapshot: process %d: %u snapshot%s, %.2f ms "
          "each; each thread stopped %.1f us median, %.1f us at most "
          "(thread %d; from the interrupt to the detach); held %.1f us "
          "median, %.1f us at most (from its stop seen)\n",
          (int)r->pid, taken, taken == 1 ? "" : "s",
          st->wall_sum / 1e6 / taken, st->stops[st->n / 2] / 1e3,
          st->max_stop / 1e3, (int)st->max_tid, st->helds[st->n / 2] / 1e3,
          st->max_held / 1e3);
}

/* Open the images, the symbolizer and the output. @return 0 or an exit
 * status after printing why. */
static int setup(snap_run *r, stkr_snap_images *im) {
  char root[64];
  stkr__symbe_opts so = {.debug_dirs = r->debug_dirs,
                         .n_debug_dirs = r->n_debug_dirs,
                         .offline = true, .warn = sym_warn, .warn_arg = r,
                         .no_separate_debug = r->fast,
                         .symcache_dir = r->symcache_dir, .root = root};
  stkr__symbe *be = NULL;
  char err[600];
  int e;

  if (kill(r->pid, 0) != 0 && errno == ESRCH) {
    fprintf(stderr, "stackrec snapshot: process %d: no such process\n",
            (int)r->pid);
    return STKR_CLI_NO_INPUT;
  }
  r->exec_id_len = stkr_snap_exec_id(r->pid, r->exec_id, sizeof r->exec_id);
  if ((e = stkr_snap_images_read(r->pid, im, true, err, sizeof err)) != 0) {
    if (e == -EACCES || e == -EPERM)
      fprintf(stderr, "stackrec snapshot: process %d: permission denied: "
              "not allowed to read or trace it (another user's process, a "
              "setuid program, or ptrace restricted by "
              "/proc/sys/kernel/yama/ptrace_scope; needs the same user or "
              "CAP_SYS_PTRACE)\n", (int)r->pid);
    else
      fprintf(stderr, "stackrec snapshot: %s\n", err);
    return e == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
  }
  if (im->note[0]) sym_warn(r, im->note);
  stkr__demangle_swift_enable();
  /* The target's files as it sees them (a container's): images.c read
   * their build-ids there too. */
  snprintf(root, sizeof root, "/proc/%d/root", (int)r->pid);
  if (stkr__symbe_create(&so, &be) != 0 ||
      stkr__symc_create(be, &r->cache) != 0 ||
      stkr__symc_set_images(r->cache, NULL, 0) != 0) {
    fprintf(stderr, "stackrec snapshot: out of memory\n");
    return STKR_CLI_DATA_LOST;
  }
  r->be = be; /* the cache's now, for the symbol cache fill */
  {
    stkr__symimg *si = calloc(im->n + 1, sizeof *si);
    size_t n = 0;
    if (!si) return STKR_CLI_DATA_LOST;
    /* Not the vDSO (img->mem): the symbolizer reads files only, and
     * would note at every run that it found none for "[vdso]". Its frames
     * stay unnamed, as before it was an image: [vdso]+offset in the text
     * and JSON (put_frame), the PC in a recording's FrameDef. */
    for (size_t i = 0; i < im->n; i++)
      if (!im->v[i].mem) si[n++] = im->v[i].sym;
    e = stkr__symc_set_images(r->cache, si, n);
    free(si);
    if (e != 0) return STKR_CLI_DATA_LOST;
  }
  if (r->outdir &&
      (e = stkr_snap_writer_open(r->outdir, (uint32_t)r->pid, &r->writer,
                                 err, sizeof err)) != 0) {
    fprintf(stderr, "stackrec snapshot: %s\n", err);
    return STKR_CLI_DATA_LOST; /* output, never input: 1 */
  }
  return 0;
}

/* Did the process exec another program since `id` was read? Its image
 * list, read once per run, would then name nothing right (QA, session 26:
 * a series across an exec filed one-PC stacks under the old name). */
static bool execd(pid_t pid, const uint8_t *id, int id_len) {
  uint8_t now[1024];
  int n = stkr_snap_exec_id(pid, now, sizeof now);
  return id_len > 0 && n > 0 && (n != id_len || memcmp(now, id, (size_t)n) != 0);
}

/* Did the process exec another program since its images were read? Then
 * said, with the snapshots taken before. */
static bool execd_said(const snap_run *r, unsigned taken) {
  if (!execd(r->pid, r->exec_id, r->exec_id_len))
    return false;
  fflush(stdout);
  fprintf(stderr, "stackrec snapshot: process %d exec'd another program "
          "(after %u snapshot%s): its images were read before; stopping\n",
          (int)r->pid, taken, taken == 1 ? "" : "s");
  return true;
}

static int run_series(snap_run *r, stkr_snap_images *im, snap_stats *st,
                      stkr_snap_end_signals *es, unsigned *taken) {
  char err[600];
  int rc = 0;

  for (unsigned i = 0; i < r->count && rc == 0; i++) {
    stkr_snap s;
    int e;
    if (stkr_snap_end_signal_wait(es, i > 0 ? (int64_t)r->interval_ms * 1000000 : 0))
      break;
    if (execd_said(r, i))
      return STKR_CLI_NO_INPUT;
    /* New threads have new stacks: their bounds come from the maps. */
    if (i > 0) stkr_snap_images_read(r->pid, im, false, err, sizeof err);
    e = stkr_snap_take(r->pid, im->maps, im->n_maps, &s, err, sizeof err);
    /* An exec during the capture: what was read is partly the new
     * program's, walked with the old one's maps (QA, session 43: a last
     * snapshot of one unnamed frame, counted as good). Not kept. */
    if (e != -ENOMEM && execd_said(r, i)) {
      stkr_snap_free(&s);
      return STKR_CLI_NO_INPUT;
    }
    if (e != 0) {
      fflush(stdout);
      if (e == -ESRCH && i > 0)
        fprintf(stderr, "stackrec snapshot: process %d exited (after %u "
                "snapshot%s)\n", (int)r->pid, i, i == 1 ? "" : "s");
      else
        fprintf(stderr, "stackrec snapshot: %s\n", err);
      stkr_snap_free(&s);
      return e == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
    }
    stats_add(st, &s);
    e = emit(r, im, &s, i + 1 == r->count || stkr_snap_end_signal_wait(es, 0));
    stkr_snap_free(&s);
    if (e != 0) {
      fprintf(stderr, "stackrec snapshot: %s: %s\n",
              r->writer ? stkr_snap_writer_path(r->writer) : "output",
              strerror(-e));
      rc = STKR_CLI_DATA_LOST;
    }
    ++*taken;
  }
  return rc;
}

int stkr_cli_snapshot(int argc, char **argv) {
  snap_run r = {.count = 1, .interval_ms = 1000};
  stkr_snap_images im = {0};
  snap_stats st = {.rng = 0x9e3779b97f4a7c15ull};
  stkr_snap_end_signals es;
  unsigned taken = 0;
  int rc = parse_args(&r, argc, argv), e;

  if (rc == -1) return STKR_CLI_OK; /* --help */
  if (rc != 0) return rc;
  stkr_snap_end_signals_hold(&es);
  rc = setup(&r, &im);
  if (rc == 0) rc = run_series(&r, &im, &st, &es, &taken);
  stats_print(&r, &st, taken);
  /* The output first: filling costs the next run nothing and this one
   * only after its answer. Not from --fast runs (no debug files read) nor
   * with --debug-dir (the build finds debug files in the standard places
   * only). */
  if (r.be && !r.quiet && stkr__symbe_cached(r.be))
    fprintf(stderr, "stackrec snapshot: %zu image%s answered from symbol "
            "caches in %s\n", stkr__symbe_cached(r.be),
            stkr__symbe_cached(r.be) == 1 ? "" : "s", r.symcache_dir);
  fflush(stdout);
  /* Not after an end signal: the caller wants us gone (the fill's own
   * check sees only signals still pending, and ours was taken). */
  if (rc == 0 && !es.taken && r.symcache_dir && !r.fast && !r.n_debug_dirs &&
      r.be) {
    stkr_cli_symcache_todo todo = {0};
    stkr_cli_symcache_take(r.be, &todo);
    stkr_cli_symcache_fill(&todo, r.symcache_dir, "snapshot",
                           r.quiet ? STKR_CLI_SYMCACHE_NOTES
                                   : STKR_CLI_SYMCACHE_ALL);
    stkr_cli_symcache_todo_free(&todo);
  }
  if ((e = stkr_snap_writer_close(r.writer)) != 0 && rc == 0) {
    fprintf(stderr, "stackrec snapshot: %s: %s\n", r.outdir, strerror(-e));
    rc = STKR_CLI_DATA_LOST;
  }
  if (rc == 0 && r.outdir && !r.quiet)
    fprintf(stderr, "stackrec snapshot: wrote %u snapshot%s to %s\n", taken,
            taken == 1 ? "" : "s", r.outdir);
  stkr__symc_free(r.cache);
  stkr__symdefs_free(&r.defs);
  free(r.strs);
  free(r.frames);
  free(st.stops);
  free(st.helds);
  stkr_snap_images_free(&im);
  if (rc == 0) rc = stkr_cli_flush("snapshot");
  stkr_snap_end_signals_release(&es);
  return rc;
}
