/*
 * stkr_tombstones.c: the disk cap's tombstones as the reader meets them
 * (proto/stkr_format.h): which segments each says were deleted, each seq
 * once, a run's included; the accounting (stkr_accounting.c) counts them
 * in the gaps of the sessions, and names the seqs of a session's first gap
 * for its warnings. Split from stkr_reader.c.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_io.h"
#include "proto/stkr__reader.h"
#include "proto/stkr_format.h"

/* f, a tombstone of the run f->seq..last: the seqs of it that no earlier
 * tombstone of st said (one a writer left while carrying a run on, or one
 * a cap that ran without the lock put inside a run: stkr_format.h,
 * flush/segment.c) are its own, so that each seq counts once. Files are
 * read in seq order. A run says nothing of a seq that has a file: it
 * ends before the next one that may hold data (stkr__tomb_clip, when that
 * one is met; a hostile run cannot claim them all), not at a tombstone,
 * whose seqs it may well say. */
static void stkr__tomb_run(stkr__stream *st, stkr__file *f, uint32_t last) {
  f->tomb_lo = st->tomb_said >= f->seq ? st->tomb_said + 1 : f->seq;
  f->tomb_hi = last;
  if (last > st->tomb_said)
    st->tomb_said = last;
}

void stkr__tomb_clip(stkr__stream *st, const stkr__file *f) {
  size_t i = (size_t)(f - st->files);

  if (f->seq != 0 && f->seq <= st->tomb_said) {
    /* The ranges said before f are disjoint and rise (tomb_lo is past
     * the one before): back to the first that ends below f, or to the
     * last file that clipped (those before it end below it already). */
    while (i-- > st->tomb_floor) {
      stkr__file *g = &st->files[i];
      if (!g->tombstone || g->tomb_lo > g->tomb_hi)
        continue;
      if (g->tomb_hi < f->seq)
        break;
      g->tomb_hi = f->seq - 1; /* lo <= seq < f->seq */
    }
    st->tomb_said = f->seq - 1;
  }
  st->tomb_floor = (size_t)(f - st->files) + 1;
}

/* Is the open file f a tombstone of the disk cap (stkr_format.h)? Then
 * note who deleted it. A file of a tombstone's size and skippable magic
 * that is not a whole one is a damaged tombstone (QA, session 25: one
 * flipped byte of "STKRCAP1" made it a foreign frame, and the segment
 * "held no intact batch", incomplete rather than damaged): damage, said,
 * and not read either. */
bool stkr__tombstone_check(stkr_reader *r, stkr__stream *st, stkr__file *f) {
  uint8_t buf[STKR_FMT_MARKER_MAX];
  size_t got = 0;
  uint32_t by, last = 0;
  struct stat now;

  /* Its size now, not at listing: the cap may have replaced it since. */
  if (fstat(r->in.fd, &now) != 0 ||
      (now.st_size != (off_t)STKR_FMT_TOMBSTONE_SIZE &&
       now.st_size != (off_t)STKR_FMT_TOMBSTONE_RUN_SIZE) ||
      stkr_pread_all(r->in.fd, buf, (size_t)now.st_size, 0, &got) != 0 ||
      got != (size_t)now.st_size)
    return false;
  if (!stkr_fmt_tombstone_parse(buf, got, &by, &last) ||
      (last != 0 && last < f->seq)) {
    if (!stkr_fmt_is_marker_frame(buf, got)) return false;
    f->damaged_whole = true;
    st->info.damaged_batches++;
    stkr__warn(r, STKR_WARN_DAMAGED, f->path, 0, st->info.pid,
               stkr_fmt_is_lost_marker(buf, got)
                   ? "a segment lost before this recording was made: "
                     "`stackrec merge` or `symbolize` could not read it, "
                     "or none of its batches, in its input"
                   : "a damaged tombstone of the disk cap (a segment it "
                     "deleted; which process deleted it is not known)");
    return true;
  }
  f->tombstone = true;
  f->cap_deleted_by = by;
  stkr__tomb_run(st, f, last != 0 ? last : f->seq);
  /* Not a segment of the process any more: the accounting counts it as
   * deleted (segments_cap_deleted); its seq still closes the sequence. */
  st->info.segments--;
  st->info.compressed_bytes -= f->size;
  return true;
}

/* f could not be opened (-ENOENT): gone since the listing. If the run of
 * the tombstone before it (read already) now goes on over it, the cap
 * took f while this reader read (a live recording: review, session 35,
 * 18 of 40 verifies "damaged"): the run says so, f is no segment. */
bool stkr__tomb_gone(stkr__stream *st, stkr__file *f) {
  uint8_t buf[STKR_FMT_MARKER_MAX];
  size_t i = (size_t)(f - st->files), got = 0;
  uint32_t by, last = 0;
  stkr__file *g = NULL;
  int fd;

  while (i-- > 0 && g == NULL)
    if (st->files[i].tombstone && st->files[i].tomb_lo <= st->files[i].seq)
      g = &st->files[i];
  if (g == NULL || (fd = open(g->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
                                           O_CLOEXEC)) < 0)
    return false;
  (void)stkr_pread_all(fd, buf, sizeof buf, 0, &got);
  close(fd);
  if (!stkr_fmt_tombstone_parse(buf, got, &by, &last) || last < f->seq)
    return false;
  /* The run may have grown since g was read (the cap carried it on while
   * this reader read): the tombstones after g said nothing it says now. A
   * file met between them ends it (stkr__tomb_clip): then f is not said. */
  for (i = (size_t)(g - st->files) + 1; i < (size_t)(f - st->files); i++)
    if (!st->files[i].tombstone)
      return false; /* checked first: nothing changed then (review) */
  for (i = (size_t)(g - st->files) + 1; i < (size_t)(f - st->files); i++)
    if (st->files[i].tomb_lo <= last)
      st->files[i].tomb_lo = last + 1;
  if (last > g->tomb_hi)
    g->tomb_hi = last;
  if (last > st->tomb_said)
    st->tomb_said = last;
  f->tombstone = true; /* a name the run says, with nothing of its own */
  f->cap_deleted_by = by;
  f->tomb_lo = f->seq + 1;
  f->tomb_hi = f->seq;
  st->info.segments--;
  st->info.compressed_bytes -= f->size;
  return true;
}

static void stkr__seq_list_flush(stkr__seq_list *l) {
  size_t o = strlen(l->text);

  if (l->lo > l->hi)
    return;
  if (l->ranges == STKR__SEQ_LIST_RANGES)
    snprintf(l->text + o, sizeof l->text - o, ", ...");
  else if (l->ranges < STKR__SEQ_LIST_RANGES)
    snprintf(l->text + o, sizeof l->text - o,
             l->lo == l->hi ? "%s%u" : "%s%u..%u", l->ranges ? ", " : "",
             (unsigned)l->lo, (unsigned)l->hi);
  l->ranges++;
  l->lo = 1;
  l->hi = 0;
}

/* ", ..." after what l names when that is fewer than its count (and
 * something: else the warning says "among" the gap). */
static void stkr__seq_list_more(stkr__seq_list *l) {
  size_t o = strlen(l->text);

  if (l->named < l->want && l->ranges > 0 &&
      l->ranges <= STKR__SEQ_LIST_RANGES)
    snprintf(l->text + o, sizeof l->text - o, ", ...");
}

/* Add the seqs a..b to l, after every seq it holds; past its count, none
 * (a seq said twice, or a gap whose files disagree: hostile or torn). */
static void stkr__seq_list_add(stkr__seq_list *l, uint32_t a, uint32_t b) {
  if (l->named >= l->want)
    return;
  if (b - a >= l->want - l->named)
    b = a + (l->want - l->named) - 1;
  l->named += b - a + 1;
  if (l->lo <= l->hi && l->hi + 1 == a) {
    l->hi = b;
    return;
  }
  stkr__seq_list_flush(l);
  l->lo = a;
  l->hi = b;
}

/* The seqs of st in (lo, hi) that its files cover: a tombstone's (*tomb)
 * or an empty segment's, the one that holds seq c with the highest end;
 * else 0 and *next, the lowest covered seq above c (hi: none). */
static uint32_t stkr__covered(const stkr__stream *st, uint32_t lo,
                              uint32_t hi, uint32_t c, bool *tomb,
                              uint32_t *next) {
  uint32_t end = 0;
  size_t i;

  *next = hi;
  for (i = 0; i < st->n_files; i++) {
    const stkr__file *f = &st->files[i];
    uint32_t a, b;

    if (f->tombstone) {
      a = f->tomb_lo > lo ? f->tomb_lo : lo + 1;
      b = f->tomb_hi < hi ? f->tomb_hi : hi - 1;
    } else if (!f->had_batch && !f->damaged_whole) {
      a = b = f->seq; /* an empty segment (stkr__empty_between) */
    } else {
      continue;
    }
    if (a > b || a <= lo || b >= hi)
      continue;
    if (a <= c && c <= b && b >= end) {
      end = b;
      *tomb = f->tombstone;
    } else if (a > c && a < *next) {
      *next = a;
    }
  }
  return end;
}

/* The session's first gap, seq by seq as far as it is named: its
 * tombstones' seqs and the first `credit` seqs no file holds (the cap's
 * own deletions its counter tells: it deletes the oldest) into *deleted,
 * the other seqs no file holds into *missing (QA, session 37: the gap's
 * counts were named as two ranges, "244..245 missing" where 36 and 63
 * were). Bounded: a few dozen steps over the files, whatever the gap. */
void stkr__first_gap_seqs(const stkr__stream *st, uint32_t credit,
                          stkr__seq_list *deleted, stkr__seq_list *missing) {
  const uint32_t lo = st->acct.first_seq - 1, hi = st->acct.min_seg;
  uint32_t c = lo + 1, end, next, steps;
  bool tomb = false;

  for (steps = 0; c < hi && steps < 8 * STKR__SEQ_LIST_RANGES; steps++) {
    if ((end = stkr__covered(st, lo, hi, c, &tomb, &next)) != 0) {
      if (tomb)
        stkr__seq_list_add(deleted, c, end);
    } else {
      uint32_t k = next - c < credit ? next - c : credit;

      end = next - 1;
      credit -= k;
      if (k > 0)
        stkr__seq_list_add(deleted, c, c + k - 1);
      if (c + k <= end)
        stkr__seq_list_add(missing, c + k, end);
    }
    if (end >= hi - 1)
      break;
    c = end + 1;
  }
  stkr__seq_list_flush(deleted);
  stkr__seq_list_flush(missing);
  stkr__seq_list_more(deleted);
  stkr__seq_list_more(missing);
}
