/*
 * states.c: the state table and the per-process tracker (states.h).
 *
 * The tracker keeps the process's marks sorted by time and, for each
 * prefix of them, the snapshot of the states after it (snaps[k]: after the
 * first k marks). A query is then a search for how many marks are at or
 * before ts, which for time stamps near the previous query (the reader
 * hands out events nearly in time order) is a comparison or two.
 */
#include "tools/stackrec/states.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"

/* THE table: what starts and what ends each state. A row with a prefix
 * (family) is a set of exclusive states: each mark with the prefix starts
 * its own and ends the previous one. */
typedef struct stkr__state_row {
  const char *start;  /* the start mark, or the family's prefix */
  const char *end;    /* the end mark; NULL for a family */
  bool family;
} stkr__state_row;

static const stkr__state_row g_rows[STKR_STATE_KINDS] = {
    {"consent.granted", "consent.revoked", false},
    {"app.background", "app.foreground", false},
    {"screen.", NULL, true},
};

/* Can state (a name or a glob: "app.*", "screen.Check*") name a state of
 * row? A family's states are its prefix and a name: a glob agrees with it
 * when its literal part before the first wildcard does. */
static bool names_row(const char *state, const stkr__state_row *row) {
  const size_t lit = strcspn(state, "*?["), pl = strlen(row->start);

  if (!row->family)
    return fnmatch(state, row->start, 0) == 0;
  return strncmp(state, row->start, lit < pl ? lit : pl) == 0 &&
         (state[lit] != '\0' || lit > pl);
}

bool stkr_states_is_state(const char *name) {
  for (size_t i = 0; i < STKR_STATE_KINDS; i++)
    if (names_row(name, &g_rows[i]))
      return true;
  return false;
}

typedef struct stkr__hmark {
  uint64_t ts;
  const char *name; /* interned */
} stkr__hmark;

typedef struct stkr__name {
  char *name;
  uint64_t first_ts; /* earliest mark of that name */
} stkr__name;

struct stkr_states {
  stkr__hmark *marks;      /* sorted by ts (ties: arrival order) */
  size_t n, cap;
  stkr_state_snap *snaps;  /* n + 1 of them */
  size_t cap_snaps;
  stkr__name *names;       /* distinct names, for interning and seen() */
  size_t n_names, cap_names;
  size_t cursor;           /* snaps index answered last */
  uint64_t overflow;
};

int stkr_states_create(stkr_states **out) {
  stkr_states *s = calloc(1, sizeof(*s));

  if (s == NULL)
    return -ENOMEM;
  if (stkr_grow((void **)&s->snaps, &s->cap_snaps, 1, sizeof(*s->snaps)) != 0) {
    free(s);
    return -ENOMEM;
  }
  memset(&s->snaps[0], 0, sizeof(s->snaps[0]));
  *out = s;
  return 0;
}

void stkr_states_reset(stkr_states *s) {
  STKR_FREE_EACH(s->names, s->n_names, name);
  s->n_names = 0;
  s->n = 0;
  s->cursor = 0;
  s->overflow = 0;
  memset(&s->snaps[0], 0, sizeof(s->snaps[0]));
}

void stkr_states_free(stkr_states *s) {
  if (s == NULL)
    return;
  stkr_states_reset(s);
  free(s->names);
  free(s->marks);
  free(s->snaps);
  free(s);
}

/* The interned copy of name, its first_ts lowered to ts. */
static const char *stkr__intern(stkr_states *s, const char *name,
                                uint64_t ts) {
  size_t i;
  char *copy;

  for (i = 0; i < s->n_names; i++)
    if (strcmp(s->names[i].name, name) == 0) {
      if (ts < s->names[i].first_ts)
        s->names[i].first_ts = ts;
      return s->names[i].name;
    }
  if (stkr_grow((void **)&s->names, &s->cap_names, s->n_names + 1,
                     sizeof(*s->names)) != 0 ||
      (copy = strdup(name)) == NULL)
    return NULL;
  s->names[s->n_names].name = copy;
  s->names[s->n_names].first_ts = ts;
  s->n_names++;
  return copy;
}

static void stkr__apply(stkr_state_snap *snap, const char *name) {
  size_t r;

  for (r = 0; r < STKR_STATE_KINDS; r++) {
    const stkr__state_row *row = &g_rows[r];

    if (row->family) {
      if (strncmp(name, row->start, strlen(row->start)) == 0)
        snap->active[r] = name;
    } else if (strcmp(name, row->start) == 0) {
      snap->active[r] = name;
    } else if (strcmp(name, row->end) == 0) {
      snap->active[r] = NULL;
    }
  }
}

int stkr_states_mark(stkr_states *s, uint64_t ts, const char *name) {
  const char *in;
  size_t p, k;

  if (s->n >= STKR_STATES_MAX_MARKS) {
    s->overflow++;
    return 0;
  }
  if ((in = stkr__intern(s, name, ts)) == NULL ||
      stkr_grow((void **)&s->marks, &s->cap, s->n + 1, sizeof(*s->marks)) != 0 ||
      stkr_grow((void **)&s->snaps, &s->cap_snaps, s->n + 2,
                     sizeof(*s->snaps)) != 0)
    return -ENOMEM;
  /* After every mark at or before ts: usually at the end. */
  for (p = s->n; p > 0 && s->marks[p - 1].ts > ts; p--)
    ;
  memmove(&s->marks[p + 1], &s->marks[p], (s->n - p) * sizeof(*s->marks));
  s->marks[p].ts = ts;
  s->marks[p].name = in;
  s->n++;
  for (k = p + 1; k <= s->n; k++) {
    s->snaps[k] = s->snaps[k - 1];
    s->snaps[k].id = (uint32_t)k;
    stkr__apply(&s->snaps[k], s->marks[k - 1].name);
  }
  s->cursor = 0;
  return 0;
}

const stkr_state_snap *stkr_states_at(stkr_states *s, uint64_t ts) {
  size_t c = s->cursor, lo, hi;

  /* snaps[c] answers ts when marks[c-1].ts <= ts < marks[c].ts. */
  if ((c == 0 || s->marks[c - 1].ts <= ts) &&
      (c == s->n || s->marks[c].ts > ts))
    return &s->snaps[c];
  if (c < s->n && s->marks[c].ts <= ts &&
      (c + 1 == s->n || s->marks[c + 1].ts > ts)) {
    s->cursor = c + 1;
    return &s->snaps[c + 1];
  }
  /* Binary search: the number of marks at or before ts. */
  lo = 0;
  hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;

    if (s->marks[mid].ts <= ts)
      lo = mid + 1;
    else
      hi = mid;
  }
  s->cursor = lo;
  return &s->snaps[lo];
}

static bool stkr__match(const char *glob, const char *name) {
  if (strpbrk(glob, "*?[") == NULL)
    return strcmp(glob, name) == 0;
  return fnmatch(glob, name, 0) == 0;
}

bool stkr_state_snap_in(const stkr_state_snap *snap, const char *glob) {
  size_t r;

  for (r = 0; r < STKR_STATE_KINDS; r++)
    if (snap->active[r] != NULL && stkr__match(glob, snap->active[r]))
      return true;
  return false;
}

bool stkr_states_seen(const stkr_states *s, const char *glob, uint64_t ts) {
  size_t i;

  for (i = 0; i < s->n_names; i++)
    if (s->names[i].first_ts <= ts && stkr__match(glob, s->names[i].name))
      return true;
  return false;
}

bool stkr_states_row_seen(const stkr_states *s, const char *state,
                          uint64_t ts) {
  for (size_t i = 0; i < s->n_names; i++) {
    stkr_mark_role role;
    int r;
    if (s->names[i].first_ts > ts ||
        (r = stkr_states_row(s->names[i].name, &role)) < 0)
      continue;
    /* A mark of a row that state can name, start or end. */
    if (names_row(state, &g_rows[r]))
      return true;
  }
  return false;
}

size_t stkr_states_count(const stkr_states *s) { return s->n; }

uint64_t stkr_states_overflow(const stkr_states *s) { return s->overflow; }

int stkr_states_row(const char *name, stkr_mark_role *role) {
  size_t r;

  for (r = 0; r < STKR_STATE_KINDS; r++) {
    const stkr__state_row *row = &g_rows[r];

    if (row->family ? strncmp(name, row->start, strlen(row->start)) == 0
                    : strcmp(name, row->start) == 0) {
      *role = STKR_MARK_STARTS;
      return (int)r;
    }
    if (!row->family && strcmp(name, row->end) == 0) {
      *role = STKR_MARK_ENDS;
      return (int)r;
    }
  }
  *role = STKR_MARK_OTHER;
  return -1;
}

bool stkr_states_seen_cached(const stkr_states *s, uint64_t version,
                             stkr_seen_cache *c, const char *glob,
                             uint64_t ts_ns) {
  bool v;

  if (c->version != version) {
    memset(c, 0, sizeof *c);
    c->version = version;
  }
  if (c->have_f && ts_ns <= c->false_upto)
    return false;
  if (c->have_t && ts_ns >= c->true_from)
    return true;
  v = stkr_states_seen(s, glob, ts_ns);
  if (v && (!c->have_t || ts_ns < c->true_from)) {
    c->true_from = ts_ns;
    c->have_t = true;
  } else if (!v && (!c->have_f || ts_ns > c->false_upto)) {
    c->false_upto = ts_ns;
    c->have_f = true;
  }
  return v;
}

bool stkr_state_snap_in_cached(const stkr_state_snap *snap, uint64_t version,
                               stkr_state_cache *c, const char *glob) {
  if (!c->valid || c->version != version || c->snap_id != snap->id) {
    c->in = stkr_state_snap_in(snap, glob);
    c->version = version;
    c->snap_id = snap->id;
    c->valid = true;
  }
  return c->in;
}
