/*
 * agg_runs.c: one time line per process tree for the timelines
 * (agg_runs.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/agg_runs.h"

/* A process by (directory, pid), for finding a parent. */
typedef struct proc_key {
  const char *dir;
  uint32_t pid;
  size_t i;
} proc_key;

static int by_dir_pid(const void *a, const void *b) {
  const proc_key *x = a, *y = b;
  int c = strcmp(x->dir, y->dir);
  return c != 0 ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Process i's parent in its directory (several with that pid: the
 * first), or SIZE_MAX. */
static size_t parent_of(const proc_key *v, size_t n, const char *dir,
                        uint32_t pid) {
  proc_key key = {dir, pid, 0};
  const proc_key *k = bsearch(&key, v, n, sizeof *v, by_dir_pid);

  while (k != NULL && k > v && by_dir_pid(k - 1, &key) == 0)
    k--;
  return k != NULL ? k->i : SIZE_MAX;
}

/* Process i's tree root's start on the boots line: up the chain of
 * parents in its directory, the forked-from one (Header.parent_pid) or
 * else the OS's at its start (Header.os_parent_pid: an exec'd program),
 * while the parent's start is known, on the same boot (another boot is no
 * parent: a pid used again) and no later than the child's (a pid used
 * again, or a reaper). A parent whose clock is not known (its start
 * written after an unshare(CLONE_NEWTIME) of its own: common/stkr_boot.h)
 * is passed through to its own parent when its wall clock start lies
 * between (QA, session 38: `unshare -T -f python3` in a script drew
 * python3 from its own start, 0.5 s early). A cycle (pids used again) is
 * cut at 64 steps. */
static uint64_t root_start(stkr__agg_runs *u, stkr_reader *r,
                           const proc_key *v, const stkr_start_clock *c,
                           size_t n, size_t i) {
  size_t j = i, at = i, k, depth = 0; /* j: the root so far; at: the walk */
  uint64_t passed_wall = UINT64_MAX; /* the last passed-through start */
  uint32_t up;

  while ((up = c[at].parent_pid ? c[at].parent_pid : c[at].os_parent_pid) &&
         depth++ < 64 &&
         (k = parent_of(v, n, stkr_reader_process(r, at)->dir, up)) !=
             SIZE_MAX &&
         k != at && k != j && c[k].mono_ns != 0) {
    if (u->boots.boot[k] != u->boots.boot[j] && !c[k].have_boot_id &&
        c[j].have_boot_id) {
      if (c[k].wall_ns == 0 || c[k].wall_ns > c[at].wall_ns)
        break;
      at = k; /* passed through: its clock is not known */
      passed_wall = c[k].wall_ns;
      continue;
    }
    /* After a pass: the next is no later than the one passed (a pid used
     * again between them is not its parent). */
    if (c[k].wall_ns > passed_wall || u->boots.boot[k] != u->boots.boot[j] ||
        u->boots.boot[k] == STKR_BOOT_UNKNOWN ||
        stkr_boots_place(&u->boots, k, NULL, c[k].mono_ns) >
            stkr_boots_place(&u->boots, j, NULL, c[j].mono_ns))
      break;
    j = at = k;
    passed_wall = UINT64_MAX;
  }
  return stkr_boots_place(&u->boots, j, NULL, c[j].mono_ns);
}

int stkr__agg_runs_init(stkr__agg_runs *u, stkr_reader *r) {
  size_t n = stkr_reader_process_count(r), i;
  stkr_start_clock *c;
  proc_key *v;
  int err;

  *u = (stkr__agg_runs){0};
  if (n < 2)
    return 0;
  if ((err = stkr_boots_init(&u->boots, r)) != 0)
    return err;
  u->origin = calloc(n, sizeof *u->origin);
  v = malloc(n * sizeof *v);
  c = calloc(n, sizeof *c);
  if (u->origin == NULL || v == NULL || c == NULL) {
    free(v);
    free(c);
    stkr__agg_runs_free(u);
    return -ENOMEM;
  }
  for (i = 0; i < n; i++) {
    (void)stkr_reader_start_clock(r, i, &c[i]);
    v[i] = (proc_key){stkr_reader_process(r, i)->dir,
                      stkr_reader_process(r, i)->pid, i};
  }
  qsort(v, n, sizeof *v, by_dir_pid);
  for (i = 0; i < n; i++)
    if (c[i].mono_ns != 0) /* no start: counts from its own (the filter's) */
      u->origin[i] = root_start(u, r, v, c, n, i);
  free(v);
  free(c);
  u->on = true;
  return 0;
}

bool stkr__agg_runs_offset(stkr__agg_runs *u, size_t i,
                           const stkr_process_info *p, uint64_t ts,
                           uint64_t *t_ns) {
  uint64_t at;

  if (!u->on || i >= u->boots.n || u->origin[i] == 0)
    return false;
  at = stkr_boots_place(&u->boots, i, p, ts);
  *t_ns = at > u->origin[i] ? at - u->origin[i] : 0;
  return true;
}

void stkr__agg_runs_free(stkr__agg_runs *u) {
  if (u == NULL)
    return;
  stkr_boots_free(&u->boots);
  free(u->origin);
  *u = (stkr__agg_runs){0};
}

static int by_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Process i's line: its tree root's start, or (its own start unknown) a
 * line of its own (the filter's origin). */
static uint64_t line_of(const stkr__agg_runs *u, size_t i) {
  return u->origin[i] != 0 ? u->origin[i] : UINT64_MAX - i;
}

size_t stkr__agg_runs_trees(const stkr__agg_runs *u, const uint8_t *with,
                            size_t with_bytes, const stkr_agg_mark *marks,
                            size_t n_marks) {
  size_t n = 0, trees = 0, i;
  uint64_t *o;

  if (!u->on)
    return 1;
  if ((o = malloc((u->boots.n + n_marks) * sizeof *o)) == NULL)
    return 0;
  for (i = 0; i < u->boots.n && i / 8 < with_bytes; i++)
    if (with[i / 8] & (1u << (i % 8)))
      o[n++] = line_of(u, i);
  for (i = 0; i < n_marks; i++) /* a mark's tree may have no event drawn */
    if (marks[i].process < u->boots.n)
      o[n++] = line_of(u, marks[i].process);
  qsort(o, n, sizeof *o, by_u64);
  for (i = 0; i < n; i++)
    trees += i == 0 || o[i] != o[i - 1];
  free(o);
  return trees;
}
