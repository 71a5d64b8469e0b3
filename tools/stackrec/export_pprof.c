/*
 * export_pprof.c: `stackrec export --format pprof`: the recording as a
 * gzipped pprof profile (tools/stackrec/profile.proto), for `go tool pprof`
 * and the viewers that read that format.
 *
 * Built from the aggregation (agg.h) by stack and thread:
 *   - one Sample per distinct (site, thread, process, payload, stack):
 *     value = events, sample type events/count, string labels "site",
 *     "thread", "process", "payload" ("..." after a cut one; all as
 *     UTF-8 text, control and invalid bytes as \xNN) and "recording" (the
 *     directory, for a pid two processes read share), numeric label
 *     "pid", so processes and payloads never merge silently and
 *     `pprof -tagfocus` can pick them;
 *   - one Location per distinct PC (image, offset and what it resolved
 *     to), listed leaf first in Sample.location_id; the calls inlined at a
 *     PC are extra Line entries, innermost first, the function containing
 *     the PC last (pprof's convention);
 *   - one Function per (name, source file): name and system_name are the
 *     recorded (demangled) name, the only one the recording has;
 *   - one Mapping per image path, from the first process that loaded it:
 *     its text range, file name and build-id in hex. A frame of an image
 *     gets the address load_address + offset in that mapping, so frames of
 *     other processes (other ASLR bases) land at the same place. The
 *     mapping's file_offset is the text segment's link-time address, which
 *     is its file offset as GNU ld and lld lay out PIE executables and
 *     shared libraries (a recording holds no program headers).
 *   - frames with no known function keep their address but no Line, the
 *     pprof form of "not symbolized", and their mapping says
 *     has_functions = false, so `pprof -symbolize=local` with the binaries
 *     at hand can still name them.
 * Events the recorder dropped are noted in a comment.
 *
 * Memory: the aggregation, plus tables that grow with distinct locations,
 * functions and strings; the serialized profile is streamed through zlib
 * (never held whole).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/stkr_grow.h"
#include "common/stkr_hex.h"
#include "tools/stackrec/export.h"
#include "tools/pprof_pb/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

/* An image as mapped in the first process that loaded it. */
typedef struct image {
  pb_mapping m;
  uint64_t load_address;
  uint64_t locs, with_func, with_file, with_line; /* its locations */
} image;

typedef struct location {
  pb_location l;
  pb_line *lines;    /* l.line points into this */
} location;

typedef struct pp {
  stkr__export *x;
  stkr_agg *a;
  stkr__map strs;      /* string -> index */
  const char **strv;   /* index -> the map's copy */
  size_t n_str, cap_str;
  stkr__map img_by_path;
  image *imgs;
  size_t n_imgs, cap_imgs;
  stkr__map fn_by_key; /* name \0 file -> id */
  pb_function *fns;
  size_t n_fns, cap_fns;
  stkr__map loc_by_key;
  location *locs;
  size_t n_locs, cap_locs;
  char *key;           /* scratch for location keys */
  size_t key_len, key_cap;
  bool oom;
} pp;

/* The string table index of s (added if new); 0 ("") when out of memory,
 * with p->oom set. */
static int64_t str(pp *p, const char *s) {
  uint64_t idx = p->n_str;
  const char *copy;
  int rc;

  if (s == NULL || s[0] == '\0')
    return 0;
  rc = stkr__map_put(&p->strs, s, strlen(s), &idx, &copy);
  if (rc < 0)
    goto oom;
  if (rc == 0) {
    if (stkr_grow((void **)&p->strv, &p->cap_str, p->n_str + 1,
                  sizeof *p->strv))
      goto oom; /* (the map keeps an entry past the table: p->oom ends it) */
    p->strv[p->n_str++] = copy;
  }
  return (int64_t)idx;
oom:
  p->oom = true;
  return 0;
}

/* ---- images -> mappings -------------------------------------------------- */

/* Processes with events first: pprof names the profile after the first
 * mapping ("File: dash" when a shell that recorded nothing came first). */
static int add_images(pp *p) {
  stkr_reader *r = p->x->r;
  size_t i, k, n_proc = stkr_reader_process_count(r);

  for (size_t step = 0; step < 2 * n_proc; step++) {
    const stkr_image_info *im;
    size_t n;
    i = step % n_proc;
    if ((stkr_reader_process(r, i)->events > 0) != (step < n_proc) ||
        stkr_reader_images(r, i, &im, &n) != 0)
      continue;
    for (k = 0; k < n; k++) {
      uint64_t idx = p->n_imgs;
      const char *path = im[k].path ? im[k].path : "";
      image *g;
      int rc = stkr__map_put(&p->img_by_path, path, strlen(path), &idx, NULL);
      if (rc < 0)
        return -ENOMEM;
      if (rc == 1)
        continue; /* the first process's mapping stands for all */
      if (stkr_grow((void **)&p->imgs, &p->cap_imgs, p->n_imgs + 1, sizeof *g))
        return -ENOMEM;
      g = &p->imgs[p->n_imgs++];
      memset(g, 0, sizeof *g);
      perftools__profiles__mapping__init(&g->m);
      g->m.id = p->n_imgs;
      g->m.memory_start = im[k].text_start;
      g->m.memory_limit = im[k].text_end;
      g->m.file_offset = im[k].text_start - im[k].load_address;
      g->m.filename = str(p, path);
      g->load_address = im[k].load_address;
      if (im[k].build_id_len > 0) {
        char hex[2 * 64 + 1];
        (void)stkr_hex(hex, sizeof hex, im[k].build_id, im[k].build_id_len);
        g->m.build_id = str(p, hex);
      }
    }
  }
  return p->oom ? -ENOMEM : 0;
}

static image *image_of(pp *p, const char *path) {
  uint64_t idx;

  if (path == NULL ||
      !stkr__map_get(&p->img_by_path, path, strlen(path), &idx))
    return NULL;
  return &p->imgs[idx];
}

/* ---- functions and locations ------------------------------------------ */

static uint64_t function_id(pp *p, const stkr_frame *f) {
  const char *file = f->file ? f->file : "";
  size_t nl = strlen(f->function), fl = strlen(file);
  char *key = malloc(nl + 1 + fl);
  uint64_t id = p->n_fns + 1;
  pb_function *fn;
  int rc;

  if (key == NULL)
    return 0;
  memcpy(key, f->function, nl + 1);
  memcpy(key + nl + 1, file, fl);
  rc = stkr__map_put(&p->fn_by_key, key, nl + 1 + fl, &id, NULL);
  free(key);
  if (rc != 0)
    return rc == 1 ? id : 0;
  if (stkr_grow((void **)&p->fns, &p->cap_fns, p->n_fns + 1, sizeof *fn))
    return 0;
  fn = &p->fns[p->n_fns++];
  perftools__profiles__function__init(fn);
  fn->id = id;
  fn->name = fn->system_name = str(p, f->function);
  fn->filename = str(p, file);
  return p->oom ? 0 : id;
}

static void key_put(pp *p, const void *d, size_t n) {
  if (p->key_len + n > p->key_cap &&
      stkr_grow((void **)&p->key, &p->key_cap, p->key_len + n, 1) != 0) {
    p->oom = true;
    return;
  }
  memcpy(p->key + p->key_len, d, n);
  p->key_len += n;
}

static void key_str(pp *p, const char *s) {
  if (s == NULL)
    key_put(p, "\1", 1); /* unknown, unlike "" */
  else
    key_put(p, s, strlen(s) + 1);
}

/* The Location of one PC: frames f[0..n), the calls inlined there
 * (innermost first) and the function containing it. @return its id, or 0
 * when out of memory. */
static uint64_t location_id(pp *p, const stkr_frame *f, size_t n) {
  const stkr_frame *pc = &f[n - 1];
  image *img = image_of(p, pc->image);
  uint64_t id = p->n_locs + 1;
  location *loc;
  size_t i, nl = 0;
  int rc;

  p->key_len = 0;
  key_str(p, pc->image);
  key_put(p, img ? &pc->offset : &pc->pc, sizeof pc->pc);
  for (i = 0; i < n; i++) {
    key_str(p, f[i].function);
    key_str(p, f[i].file);
    key_put(p, &f[i].line, sizeof f[i].line);
    nl += f[i].function != NULL;
  }
  if (p->oom)
    return 0;
  rc = stkr__map_put(&p->loc_by_key, p->key, p->key_len, &id, NULL);
  if (rc != 0)
    return rc == 1 ? id : 0;
  if (stkr_grow((void **)&p->locs, &p->cap_locs, p->n_locs + 1, sizeof *loc))
    return 0;
  loc = &p->locs[p->n_locs++];
  memset(loc, 0, sizeof *loc);
  perftools__profiles__location__init(&loc->l);
  loc->l.id = id;
  loc->l.address = img ? img->load_address + pc->offset : pc->pc;
  if (img != NULL) {
    loc->l.mapping_id = img->m.id;
    img->locs++;
    img->with_func += nl > 0;
    img->with_file += nl > 0 && pc->file != NULL;
    img->with_line += nl > 0 && pc->line != 0;
  }
  if (nl > 0) {
    size_t k = 0;
    loc->lines = calloc(nl, sizeof *loc->lines);
    loc->l.line = calloc(nl, sizeof *loc->l.line);
    if (loc->lines == NULL || loc->l.line == NULL)
      return 0; /* freed with the others */
    for (i = 0; i < n; i++) {
      pb_line *ln;
      if (f[i].function == NULL)
        continue;
      ln = &loc->lines[k];
      perftools__profiles__line__init(ln);
      ln->function_id = function_id(p, &f[i]);
      if (ln->function_id == 0)
        return 0;
      ln->line = f[i].line;
      ln->column = f[i].column;
      loc->l.line[k++] = ln;
    }
    loc->l.n_line = k;
  }
  return p->oom ? 0 : id;
}

/* ---- gzip output ------------------------------------------------------- */

/* A ProtobufCBuffer that deflates what protobuf-c packs into the file.
 * Input is staged, since protobuf-c appends a few bytes at a time. */
typedef struct gz_out {
  ProtobufCBuffer base; /* first: protobuf-c calls base.append */
  z_stream z;
  FILE *f;
  int err;              /* 0, or the first zlib error */
  size_t staged;
  uint8_t in[1 << 16], out[1 << 16];
} gz_out;

static void gz_run(gz_out *g, int flush) {
  int zr;

  g->z.next_in = g->in;
  g->z.avail_in = (uInt)g->staged;
  do {
    g->z.next_out = g->out;
    g->z.avail_out = sizeof g->out;
    zr = deflate(&g->z, flush);
    if (zr == Z_STREAM_ERROR) {
      g->err = zr;
      return;
    }
    fwrite(g->out, 1, sizeof g->out - g->z.avail_out, g->f);
  } while (g->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
  g->staged = 0;
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  gz_out *g = (gz_out *)b;

  while (len > 0 && g->err == 0) {
    size_t n = sizeof g->in - g->staged;
    if (n > len)
      n = len;
    memcpy(g->in + g->staged, data, n);
    g->staged += n;
    data += n;
    len -= n;
    if (g->staged == sizeof g->in)
      gz_run(g, Z_NO_FLUSH);
  }
}

static int write_gz(pb_profile *prof, FILE *f) {
  gz_out *g = calloc(1, sizeof *g);
  int err;

  if (g == NULL)
    return -ENOMEM;
  g->base.append = gz_append;
  g->f = f;
  /* windowBits 15 + 16: a gzip header and trailer, not zlib's. */
  if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    free(g);
    return -ENOMEM;
  }
  protobuf_c_message_pack_to_buffer(&prof->base, &g->base);
  if (g->err == 0)
    gz_run(g, Z_FINISH);
  err = g->err ? -EIO : 0;
  deflateEnd(&g->z);
  free(g);
  return err;
}

/* ---- the profile ----------------------------------------------------------- */

/* Labels per sample: site, thread, pid, process, recording (the directory,
 * when two processes read have one pid), payload and, for a stack the
 * walk cut short, stack_truncated = "true" (folded's "[truncated]" frame;
 * pprof -traces and -tagfocus show it); for a payload cut at payload_max,
 * payload_truncated = "true" (its text ends "..." too, which a payload
 * may end with of its own: QA, session 39). */
#define N_LABELS 8

/* The string-table index of bytes as a label's text (stkr_cli_put_text:
 * UTF-8 as recorded, a backslash doubled, control and invalid bytes as
 * \xNN), "..." after a
 * cut payload; -1 when out of memory. */
static int64_t text_str(pp *p, const void *bytes, size_t n, bool cut) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  int64_t id;

  if (m == NULL)
    return -1;
  stkr_cli_put_text(m, bytes, n);
  if (cut)
    fputs("...", m);
  if (fclose(m) != 0 || buf == NULL) {
    free(buf);
    return -1;
  }
  id = str(p, buf);
  free(buf);
  return id;
}

/* A name (site, thread, process, directory) as a label's text: most are
 * printable ASCII already, taken without a copy. */
static int64_t name_str(pp *p, const char *name) {
  const unsigned char *c;

  for (c = (const unsigned char *)name; *c >= 0x20 && *c < 0x7f; c++)
    ;
  return *c == '\0' ? str(p, name) : text_str(p, name, strlen(name), false);
}

/* The string ids of the label keys (pprof labels every sample with them). */
typedef struct label_keys {
  int64_t site, thread, pid, process, recording, payload, truncated,
      payload_truncated;
} label_keys;

/* Stack s as sample sm: one Location per PC, leaf first, into ids (from
 * *n_ids on), its count into *value, its labels into lb (N_LABELS).
 * @return 0 or -1 (out of memory). */
static int add_sample(pp *p, const stkr_agg_stack *s, const label_keys *k,
                      pb_sample *sm, pb_label *lb, uint64_t *ids,
                      size_t *n_ids, int64_t *value) {
  size_t nl = 0, l, at = 0;

  perftools__profiles__sample__init(sm);
  sm->location_id = &ids[*n_ids];
  while (at < s->n_frames) {
    size_t end = at;
    uint64_t id;
    while (end < s->n_frames && s->frames[end].inlined)
      end++;
    if (end < s->n_frames)
      end++; /* the function containing the PC */
    if ((id = location_id(p, &s->frames[at], end - at)) == 0)
      return -1;
    ids[(*n_ids)++] = id;
    sm->n_location_id++;
    at = end;
  }
  *value = (int64_t)s->count;
  sm->value = value;
  sm->n_value = 1;
  for (l = 0; l < N_LABELS; l++)
    perftools__profiles__label__init(&lb[l]);
  /* pprof's strings are UTF-8 text: names and payloads as recorded but
   * for control bytes and invalid UTF-8 (\xNN), so a newline in a thread
   * name cannot split `pprof -tags` and -tagfocus matches a path's own
   * text (QA, session 27). */
  const char *site = s->site[0] ? s->site : "?";
  const char *thread = s->thread && s->thread[0] ? s->thread : "?";
  const char *process = s->process && s->process[0] ? s->process : "?";
  lb[nl].key = k->site;
  if ((lb[nl++].str = name_str(p, site)) < 0)
    return -1;
  lb[nl].key = k->thread;
  if ((lb[nl++].str = name_str(p, thread)) < 0)
    return -1;
  lb[nl].key = k->pid;
  lb[nl++].num = s->pid;
  lb[nl].key = k->process;
  if ((lb[nl++].str = name_str(p, process)) < 0)
    return -1;
  if (s->process_dir != NULL) { /* another process has its pid */
    lb[nl].key = k->recording;
    if ((lb[nl++].str = name_str(p, s->process_dir)) < 0)
      return -1;
  }
  if (s->payload_len > 0) {
    if ((lb[nl].str = text_str(p, s->payload, s->payload_len,
                               s->payload_truncated)) < 0)
      return -1;
    lb[nl++].key = k->payload;
    if (s->payload_truncated) {
      lb[nl].key = k->payload_truncated;
      lb[nl++].str = str(p, "true");
    }
  }
  if (s->truncated) {
    lb[nl].key = k->truncated;
    lb[nl++].str = str(p, "true");
  }
  sm->label = calloc(nl, sizeof *sm->label);
  if (sm->label == NULL)
    return -1;
  for (l = 0; l < nl; l++)
    sm->label[l] = &lb[l];
  sm->n_label = nl;
  return 0;
}

/* The profile's time span (wall clock) and comments (what was exported,
 * what the recorder dropped, and the recording's INCOMPLETE line: the
 * file goes to a ticket without the stderr that said it; QA, session 33),
 * over every process read. comments has room for 3. */
static void span_and_comments(pp *p, pb_profile *prof, int64_t *comments) {
  stkr_reader *r = p->x->r;
  size_t i, n_proc = stkr_reader_process_count(r);
  uint64_t first_wall = 0, last_wall = 0, drops = 0;
  char note[1024];

  for (i = 0; i < n_proc; i++) {
    const stkr_process_info *pi = stkr_reader_process(r, i);
    drops += pi->drops;
    if (pi->first_wall_ns == 0)
      continue;
    if (first_wall == 0 || pi->first_wall_ns < first_wall)
      first_wall = pi->first_wall_ns;
    if (pi->first_wall_ns + (pi->last_ts_ns - pi->first_ts_ns) > last_wall)
      last_wall = pi->first_wall_ns + (pi->last_ts_ns - pi->first_ts_ns);
  }
  prof->time_nanos = (int64_t)first_wall;
  prof->duration_nanos = (int64_t)(last_wall - first_wall);
  prof->comment = comments;
  prof->n_comment = 0;
  snprintf(note, sizeof note,
           "stackrec export: %llu events of %llu read, %zu processes",
           (unsigned long long)p->a->events,
           (unsigned long long)p->a->events_read, p->a->n_processes);
  comments[prof->n_comment++] = str(p, note);
  if (drops > 0) {
    snprintf(note, sizeof note,
             "%llu events were dropped by the recorder and are not in this "
             "profile",
             (unsigned long long)drops);
    comments[prof->n_comment++] = str(p, note);
  }
  if (stkr_cli_incomplete_line(r, note, sizeof note) > 0)
    comments[prof->n_comment++] = str(p, note);
}

static int build_and_write(pp *p) {
  stkr_agg *a = p->a;
  pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
  pb_value_type vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *vtp = &vt;
  pb_value_type pt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
  pb_sample *samples = NULL, **samplep = NULL;
  pb_label *labels = NULL;
  pb_mapping **mapp = NULL;
  pb_location **locp = NULL;
  pb_function **fnp = NULL;
  uint64_t *ids = NULL;
  int64_t *values = NULL, comments[3];
  label_keys keys;
  size_t i, n_ids = 0;
  int err = -ENOMEM;

  /* string_table[0] must be "" (str() maps "" and NULL to it). */
  if (stkr_grow((void **)&p->strv, &p->cap_str, 1, sizeof *p->strv) != 0)
    goto out;
  p->strv[p->n_str++] = "";
  if (add_images(p) != 0)
    goto out;
  vt.type = pt.type = str(p, "events");
  vt.unit = pt.unit = str(p, "count");
  keys.site = str(p, "site");
  keys.thread = str(p, "thread");
  keys.pid = str(p, "pid");
  keys.process = str(p, "process");
  keys.recording = str(p, "recording");
  keys.payload = str(p, "payload");
  keys.truncated = str(p, "stack_truncated");
  keys.payload_truncated = str(p, "payload_truncated");
  for (i = 0; i < a->n_stacks; i++)
    n_ids += a->stacks[i].n_frames;
  samples = calloc(a->n_stacks + 1, sizeof *samples);
  samplep = calloc(a->n_stacks + 1, sizeof *samplep);
  labels = calloc(N_LABELS * a->n_stacks + 1, sizeof *labels);
  values = calloc(a->n_stacks + 1, sizeof *values);
  ids = calloc(n_ids + 1, sizeof *ids);
  if (samples == NULL || samplep == NULL || labels == NULL ||
      values == NULL || ids == NULL)
    goto out;

  n_ids = 0;
  for (i = 0; i < a->n_stacks; i++) {
    if (add_sample(p, &a->stacks[i], &keys, &samples[i],
                   &labels[N_LABELS * i], ids, &n_ids, &values[i]) != 0)
      goto out;
    samplep[i] = &samples[i];
  }

  /* Mappings: an image whose every location is named has functions (and
   * file names / line numbers likewise): pprof then leaves it alone. */
  mapp = calloc(p->n_imgs + 1, sizeof *mapp);
  locp = calloc(p->n_locs + 1, sizeof *locp);
  fnp = calloc(p->n_fns + 1, sizeof *fnp);
  if (mapp == NULL || locp == NULL || fnp == NULL)
    goto out;
  for (i = 0; i < p->n_imgs; i++) {
    image *g = &p->imgs[i];
    g->m.has_functions = g->locs > 0 && g->with_func == g->locs;
    g->m.has_filenames = g->locs > 0 && g->with_file == g->locs;
    g->m.has_line_numbers = g->locs > 0 && g->with_line == g->locs;
    g->m.has_inline_frames = g->m.has_line_numbers; /* DWARF was read */
    mapp[i] = &g->m;
  }
  for (i = 0; i < p->n_locs; i++)
    locp[i] = &p->locs[i].l;
  for (i = 0; i < p->n_fns; i++)
    fnp[i] = &p->fns[i];

  span_and_comments(p, &prof, comments);
  if (p->oom)
    goto out;

  prof.n_sample_type = 1;
  prof.sample_type = &vtp;
  prof.n_sample = a->n_stacks;
  prof.sample = samplep;
  prof.n_mapping = p->n_imgs;
  prof.mapping = mapp;
  prof.n_location = p->n_locs;
  prof.location = locp;
  prof.n_function = p->n_fns;
  prof.function = fnp;
  prof.n_string_table = p->n_str;
  prof.string_table = (char **)p->strv;
  prof.period_type = &pt;
  prof.period = 1;
  prof.default_sample_type = vt.type;
  err = write_gz(&prof, p->x->out);
  p->x->events_out = a->events;

out:
  if (samples != NULL)
    STKR_FREE_EACH(samples, a->n_stacks, label);
  STKR_FREE_ALL(samples, samplep, labels, values, ids, mapp, locp, fnp);
  return err;
}

int stkr__export_pprof(stkr__export *x) {
  stkr_agg_opts o = x->filt;
  pp p = {.x = x};
  size_t i;
  int err;

  o.by_thread = true;
  o.by_process = true;
  o.by_payload = true;
  err = stkr_agg_build(x->r, &o, stkr__progress, x, &p.a);
  if (err != 0)
    return err;
  stkr__progress_end(x);
  err = build_and_write(&p);
  for (i = 0; i < p.n_locs; i++) {
    free(p.locs[i].lines);
    free(p.locs[i].l.line);
  }
  STKR_FREE_ALL(p.locs, p.fns, p.imgs, p.strv, p.key);
  stkr__map_free(&p.strs);
  stkr__map_free(&p.img_by_path);
  stkr__map_free(&p.fn_by_key);
  stkr__map_free(&p.loc_by_key);
  stkr_agg_free(p.a);
  return err;
}
