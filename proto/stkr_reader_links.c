/*
 * stkr_reader_links.c: one file under several names (hard links, the same
 * directory given twice, a file and its directory): read once, by inode,
 * and which name it is read under (stkr__reader.h). Split out of
 * stkr_reader.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/stkr_grow.h"
#include "common/stkr_hash.h"
#include "proto/stkr__reader.h"

/* Was a file of this inode added to r already (by any name, to any
 * stream)? If not, it is remembered, with the name it is read under (dir
 * dst, pid, seq). A file without a stat (fst NULL) is never one seen.
 * *held: the entry of the earlier name, when seen. @return 1 seen, 0
 * new, or -ENOMEM. */
int stkr__inode_seen(stkr_reader *r, const struct stat *fst,
                     const struct stat *dst, uint32_t pid, uint32_t seq,
                     struct stkr__inode **held) {
  uint64_t h, pos;
  size_t ix;

  if (fst == NULL)
    return 0;
  h = stkr_mix64((uint64_t)fst->st_ino ^ ((uint64_t)fst->st_dev << 40));
  for (ix = stkr_index_first(&r->inode_ix, h, &pos); ix != STKR_INDEX_NONE;
       ix = stkr_index_next(&r->inode_ix, h, &pos))
    if (r->inodes[ix].dev == fst->st_dev && r->inodes[ix].ino == fst->st_ino) {
      *held = &r->inodes[ix];
      return 1;
    }
  if (stkr__grow(&r->inodes, &r->cap_inodes, r->n_inodes + 1,
                 sizeof(*r->inodes)) != 0 ||
      stkr_index_reserve(&r->inode_ix, r->n_inodes + 1) != 0)
    return -ENOMEM;
  (void)stkr_index_add(&r->inode_ix, h, r->n_inodes); /* reserved */
  r->inodes[r->n_inodes++] = (struct stkr__inode){
      fst->st_dev, dst != NULL ? dst->st_dev : 0, fst->st_ino,
      dst != NULL ? dst->st_ino : 0, pid, seq};
  return 0;
}

/* A segment name (path; dir dst, pid, seq) of a file read already under
 * another, *held (a hard link: `ln`, `cp -al`): read once, and said. Of
 * one process's two names the lower seq is the one read (the file's own,
 * as a rule; a Header that says otherwise is said when it is read), which
 * listing order decided before (QA, session 40: merge kept the
 * misnamed one and its OUT missed segment 1). @return 0 or -ENOMEM. */
int stkr__hard_link(stkr_reader *r, const char *path, const struct stat *dst,
                    uint32_t pid, uint32_t seq, struct stkr__inode *held) {
  stkr__stream *st;
  uint64_t probes = 0;
  char *keep = NULL;

  if (held->dir_dev == dst->st_dev && held->dir_ino == dst->st_ino &&
      held->pid == pid && held->seq == seq)
    return 0; /* the same name, given twice (a file and its directory) */
  if (held->dir_dev == dst->st_dev && held->dir_ino == dst->st_ino &&
      held->pid == pid && seq < held->seq &&
      (st = stkr__stream_find(r, dst->st_dev, dst->st_ino, pid, &probes)) !=
          NULL) {
    for (size_t i = 0; i < st->n_files; i++) {
      stkr__file f = st->files[i];
      if (f.dev != held->dev || f.ino != held->ino || f.seq != held->seq)
        continue;
      if ((keep = strdup(path)) == NULL) return -ENOMEM;
      /* Out at i, in at seq's place (files stay sorted by seq). */
      memmove(&st->files[i], &st->files[i + 1],
              (st->n_files - i - 1) * sizeof f);
      size_t j = st->n_files - 1;
      for (; j > 0 && st->files[j - 1].seq > seq; j--)
        st->files[j] = st->files[j - 1];
      stkr__warn(r, STKR_WARN_IGNORED_FILES, f.path, -1, pid,
                 "the same file as %s (a hard link): read once, under that "
                 "name", path);
      free(f.path);
      f.path = keep;
      f.seq = seq;
      st->files[j] = f;
      /* The names' range: the moved name may have been the last. */
      st->info.first_seq = st->files[0].seq;
      st->info.last_seq = st->files[st->n_files - 1].seq;
      held->seq = seq;
      return 0;
    }
  }
  stkr__warn(r, STKR_WARN_IGNORED_FILES, path, -1, pid,
             "the same file as a segment read under another name (a hard "
             "link): read once");
  return 0;
}
