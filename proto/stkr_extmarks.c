/*
 * stkr_extmarks.c: the marks of `stackrec mark` (the marks file, read by
 * stkr_marks.c) handed to each process of their directory before its
 * first event, on the clock of its instance current then
 * (common/stkr_boot.h), and the inconsistency of a mark of a boot none of
 * its instances was on, said at its end.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/stkr_boot.h"
#include "proto/stkr__reader.h"

/* The clock of st's current instance (stkr_process_info.instance_*). */
static stkr_clock_id stkr__instance_clock(const stkr__stream *st) {
  const stkr_process_info *p = &st->info;
  stkr_clock_id c = {.have_boot = p->have_header && p->instance_have_boot_id,
                     .mono_offset_ns = p->instance_mono_offset_ns};

  memcpy(c.boot, p->instance_boot_id, sizeof c.boot);
  return c;
}

/* Is m one of st's: of its directory, and of its scope if it has one? */
static bool stkr__ext_for(const stkr__stream *st, const stkr__extmark *m) {
  return m->dir_dev == st->dir_dev && m->dir_ino == st->dir_ino &&
         (m->scope == NULL || stkr__scope_has(m->scope, st->info.pid));
}

/* A mark of a boot none of st's instances was on: said once per process,
 * as inconsistent, at its end, once every instance's boot is known (QA,
 * session 35: a consent set after a reboot lay before every event,
 * unsaid; session 36: a pid used again after a reboot has the marks of
 * its second boot). It was put on the process's clock by the two wall
 * clocks, which only a sleep or a clock step between them gets wrong
 * (common/stkr_boot.h). */
void stkr__marks_ext_check(stkr_reader *r, stkr__stream *st) {
  size_t j, k;

  if (st->n_boots_seen == 0 || st->many_boots ||
      (st->warned & STKR__WARNED_MARK_BOOT))
    return;
  for (j = 0; j < st->ext_next && j < r->n_ext; j++) {
    const stkr__extmark *m = &r->ext[j];

    if (!m->clock.have_boot || !stkr__ext_for(st, m))
      continue;
    for (k = 0; k < st->n_boots_seen; k++)
      if (memcmp(m->clock.boot, st->boots_seen[k].id, sizeof m->clock.boot) ==
          0)
        break;
    if (k < st->n_boots_seen)
      continue;
    st->warned |= STKR__WARNED_MARK_BOOT;
    stkr__warn(r, STKR_WARN_INCONSISTENT, m->path, (int64_t)m->offset,
               st->info.pid,
               "mark %s was set in another boot than process %u's: placed "
               "among its events by the two wall clocks, as right as they "
               "are, or, where one cannot be real, taken as set (and so "
               "every other such mark of it)",
               m->name, (unsigned)st->info.pid);
    return;
  }
}

int stkr__marks_next_ext(stkr_reader *r, stkr__stream *st, size_t st_index,
                         stkr_event_view *ev) {
  stkr_clock_id clk;
  int64_t shift;
  size_t j;

  for (j = st->ext_next; j < r->n_ext; j++) {
    const stkr__extmark *m = &r->ext[j];

    if (!stkr__ext_for(st, m))
      continue;
    st->ext_next = j + 1;
    memset(ev, 0, sizeof(*ev)); /* rare: no need to spare the memset */
    /* On the current instance's clock: moved by the offsets from another
     * time namespace of its boot, exactly (QA, session 33: a program in a
     * CRIU-restored container, a mark set after it ended lay before its
     * events); from another boot by the wall clocks (session 36: a
     * consent given before a reboot, taken as set, lay anywhere); as set
     * when a boot is not known, or a wall clock cannot be real (1970). */
    clk = stkr__instance_clock(st);
    (void)stkr_clock_shift(&m->clock, m->ts_ns, m->wall_ns, &clk,
                           st->info.instance_start_mono_ns,
                           st->info.instance_start_wall_ns, &shift);
    ev->ts_ns = stkr_clock_add(m->ts_ns, shift);
    r->ext_clock = (stkr_mark_clock){.set_ns = m->ts_ns,
                                     .wall_ns = m->wall_ns,
                                     .have_boot_id = m->clock.have_boot,
                                     .mono_offset_ns = m->clock.mono_offset_ns};
    memcpy(r->ext_clock.boot_id, m->clock.boot, sizeof m->clock.boot);
    r->ev_ext = true;
    ev->wall_ns = m->wall_ns;
    ev->pid = st->info.pid;
    ev->process = st_index;
    ev->proc = &st->info;
    ev->site = m->name;
    ev->is_mark = true;
    ev->tid = m->setter_pid;
    ev->thread_name = "stackrec mark";
    ev->payload = m->payload_len ? m->payload : NULL;
    ev->payload_len = m->payload_len;
    ev->path = m->path;
    ev->batch_offset = m->offset;
    r->ev_stream = st; /* stkr_reader_frames: no stack, no frames */
    r->ev_stack = NULL;
    st->info.external_marks++;
    return 1;
  }
  st->ext_next = r->n_ext;
  return 0;
}

const stkr_mark_clock *stkr_reader_mark_clock(const stkr_reader *r) {
  return r != NULL && r->ev_ext ? &r->ext_clock : NULL;
}
