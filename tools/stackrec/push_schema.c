/*
 * push_schema.c: the ClickHouse tables of `stackrec push` (docs/fleet.md
 * shows the same statements; `stackrec push --print-schema` prints them).
 *
 * Written for ClickHouse 18.16 (Debian 12): no LowCardinality (19.x), no
 * DateTime64 (20.x), no insert deduplication outside Replicated tables.
 * So re-pushing is made harmless twice over: the `pushes` table says which
 * event ranges a recording has committed (push skips them), and every
 * table is a ReplacingMergeTree whose sorting key is the row's identity,
 * so a range sent twice (the server committed it but its answer was lost)
 * collapses at the next merge (or under FINAL / OPTIMIZE ... FINAL).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/push.h"

/* Column lists in the order push_rows.c writes them. */
const char stkr__cols_events[] =
    "day, rec, pid, n, tid, thread, site, ts, ts_mono, stack, payload, "
    "stack_truncated";
/* recordings' columns before identity was added (session 39). */
#define COLS_RECORDINGS_V1 "rec, recording, build, device"
const char stkr__cols_recordings_v1[] = COLS_RECORDINGS_V1;
const char stkr__cols_recordings[] = COLS_RECORDINGS_V1 ", identity";
const char stkr__cols_site_names[] = "site, name";
const char stkr__cols_threads[] = "thread, name";
const char stkr__cols_payloads[] = "payload, value, truncated";
const char stkr__cols_marks[] =
    "day, rec, pid, n, tid, ts, ts_mono, name, payload";
const char stkr__cols_stacks[] = "build, stack, depth, frames, path, module";
const char stkr__cols_frames[] =
    "build, frame, function, file, line, column, image, module, offset, "
    "inlined, app, async";
const char stkr__cols_images[] =
    "build, device, recording, pid, path, build_id, load_address, "
    "text_start, text_end";
const char stkr__cols_sites[] = "build, device, recording, pid, site, events";
/* processes' columns of a table made before os_parent_pid was added
 * (session 39), which push still fills when the table was not migrated. */
#define COLS_PROCESSES_V1                                                   \
  "build, device, recording, pid, parent_pid, name, arch, start_wall, "    \
  "events, attempted, drops, sessions, clean_end, incomplete, "            \
  "damaged_batches, unaccounted"
const char stkr__cols_processes_v1[] = COLS_PROCESSES_V1;
const char stkr__cols_processes[] = COLS_PROCESSES_V1 ", os_parent_pid";
const char stkr__cols_drops[] =
    "build, device, recording, pid, reason, events";
const char stkr__cols_pushes[] = "recording, pid, first, last, pushed_at";

/* name, columns and engine of each table; %1$s is the database. The
 * sharding key keeps every copy of a row on one shard, so that the
 * per-shard ReplacingMergeTree can collapse it. */
static const struct {
  const char *name, *body, *shard_key;
} k_tables[] = {
    /* Fixed-width ids only (a row is 79 bytes): the server copies Native
     * columns instead of parsing strings, and its sort finds each block
     * already in key order (push_native.c sends it so). The strings are in
     * the small dimension tables below, each row pushed once. */
    {"events",
     "(day Date, rec UInt64, pid UInt32, n UInt64, tid UInt64, "
     "thread UInt64, site UInt64, ts UInt64, ts_mono UInt64, stack UInt64, "
     "payload UInt64, stack_truncated UInt8) "
     "ENGINE = ReplacingMergeTree PARTITION BY day "
     "ORDER BY (site, rec, pid, n)",
     "cityHash64(rec, pid, intDiv(n, 256))"},
    {"recordings",
     "(rec UInt64, recording String, build String, device String, "
     "identity String) "
     "ENGINE = ReplacingMergeTree ORDER BY rec",
     "rec"},
    {"site_names",
     "(site UInt64, name String) "
     "ENGINE = ReplacingMergeTree ORDER BY site",
     "site"},
    {"threads",
     "(thread UInt64, name String) "
     "ENGINE = ReplacingMergeTree ORDER BY thread",
     "thread"},
    {"payloads",
     "(payload UInt64, value String, truncated UInt8) "
     "ENGINE = ReplacingMergeTree ORDER BY payload",
     "payload"},
    {"marks",
     "(day Date, rec UInt64, pid UInt32, n UInt64, tid UInt64, ts UInt64, "
     "ts_mono UInt64, name String, payload String) "
     "ENGINE = ReplacingMergeTree PARTITION BY day "
     "ORDER BY (rec, pid, n)",
     "cityHash64(rec)"},
    {"stacks",
     "(build String, stack UInt64, depth UInt16, frames Array(UInt64), "
     "path Array(String), module String) "
     "ENGINE = ReplacingMergeTree ORDER BY (build, stack)",
     "cityHash64(build, stack)"},
    {"frames",
     "(build String, frame UInt64, function String, file String, "
     "line UInt32, column UInt32, image String, module String, "
     "offset UInt64, inlined UInt8, app UInt8, async UInt8) "
     "ENGINE = ReplacingMergeTree ORDER BY (build, frame)",
     "cityHash64(build, frame)"},
    {"images",
     "(build String, device String, recording String, pid UInt32, "
     "path String, build_id String, load_address UInt64, "
     "text_start UInt64, text_end UInt64) "
     "ENGINE = ReplacingMergeTree "
     "ORDER BY (build, path, build_id, device, recording, pid)",
     "cityHash64(recording)"},
    {"sites",
     "(build String, device String, recording String, pid UInt32, "
     "site String, events UInt64) "
     "ENGINE = ReplacingMergeTree(events) "
     "ORDER BY (build, site, device, recording, pid)",
     "cityHash64(recording)"},
    {"processes",
     "(build String, device String, recording String, pid UInt32, "
     "parent_pid UInt32, name String, arch String, start_wall UInt64, "
     "events UInt64, attempted UInt64, drops UInt64, sessions UInt32, "
     "clean_end UInt8, incomplete UInt8, damaged_batches UInt64, "
     "unaccounted UInt64, os_parent_pid UInt32) "
     "ENGINE = ReplacingMergeTree(events) "
     "ORDER BY (build, device, recording, pid)",
     "cityHash64(recording)"},
    {"drops",
     "(build String, device String, recording String, pid UInt32, "
     "reason String, events UInt64) "
     "ENGINE = ReplacingMergeTree(events) "
     "ORDER BY (build, device, recording, pid, reason)",
     "cityHash64(recording)"},
    {"pushes",
     "(recording String, pid UInt32, first UInt64, last UInt64, "
     "pushed_at DateTime) "
     "ENGINE = ReplacingMergeTree ORDER BY (recording, pid, first, last)",
     "cityHash64(recording)"},
};
#define N_TABLES (sizeof k_tables / sizeof k_tables[0])

/* Columns added after a table's first release, each at its table's end
 * (a table made earlier lacks them until `push --create-schema` adds
 * them: ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS, so push.c asks
 * system.columns first). */
const stkr__added_column stkr__added_columns[] = {
    {"processes", "os_parent_pid", "UInt32"}, /* STKR__ADDED_OS_PARENT */
    {"recordings", "identity", "String"},     /* STKR__ADDED_IDENTITY */
};
const size_t stkr__n_added_columns =
    sizeof stkr__added_columns / sizeof stkr__added_columns[0];

static char *fmt(const char *f, const char *a, const char *b, const char *c,
                 const char *d) {
  int n = snprintf(NULL, 0, f, a, b, c, d);
  char *s = n < 0 ? NULL : malloc((size_t)n + 1);

  if (s != NULL)
    snprintf(s, (size_t)n + 1, f, a, b, c, d);
  return s;
}

char **stkr__schema(const char *db, const char *cluster) {
  size_t n = 0, i, max = 1 + 2 * N_TABLES + 1;
  char **s = calloc(max, sizeof *s);

  if (s == NULL)
    return NULL;
  if ((s[n++] = fmt("CREATE DATABASE IF NOT EXISTS %s", db, "", "", "")) ==
      NULL)
    goto oom;
  for (i = 0; i < N_TABLES; i++)
    if ((s[n++] = fmt("CREATE TABLE IF NOT EXISTS %s.%s %s%s", db,
                      k_tables[i].name, k_tables[i].body, "")) == NULL)
      goto oom;
  for (i = 0; cluster != NULL && i < N_TABLES; i++) {
    char head[512];
    snprintf(head, sizeof head,
             "CREATE TABLE IF NOT EXISTS %s.%s_all AS %s.%s ENGINE = ", db,
             k_tables[i].name, db, k_tables[i].name);
    if ((s[n++] = fmt("%sDistributed(%s, %s, %s", head, cluster, db,
                      k_tables[i].name)) == NULL)
      goto oom;
    /* The sharding key, appended (fmt takes four strings). */
    {
      size_t l = strlen(s[n - 1]), k = strlen(k_tables[i].shard_key);
      char *t = realloc(s[n - 1], l + k + 4);
      if (t == NULL)
        goto oom;
      snprintf(t + l, k + 4, ", %s)", k_tables[i].shard_key);
      s[n - 1] = t;
    }
  }
  return s;
oom:
  stkr__schema_free(s);
  return NULL;
}

void stkr__schema_free(char **stmts) {
  if (stmts == NULL)
    return;
  for (size_t i = 0; stmts[i] != NULL; i++)
    free(stmts[i]);
  free(stmts);
}

/* Whether db.table has column col: 1 yes, 0 no, -1 not known (no answer,
 * stkr__ch_error says why; or no such table, or none of its columns shown
 * to this user: the inserts will tell). Names are push_args.c's checked
 * identifiers or ours. */
static int has_column(stkr__ch *ch, const char *db, const char *table,
                      const char *col) {
  char sql[512], line[64] = "";
  stkr__buf resp = {0};
  unsigned long long has = 0, cols = 0;
  int ans = -1;

  snprintf(sql, sizeof sql,
           "SELECT countIf(name = '%s'), count() FROM system.columns WHERE "
           "database = '%s' AND table = '%s' FORMAT TabSeparated",
           col, db, table);
  if (stkr__ch_query(ch, sql, &resp) == STKR_CH_OK && resp.len > 0)
    snprintf(line, sizeof line, "%.*s",
             (int)(resp.len < sizeof line ? resp.len : sizeof line - 1),
             (const char *)resp.p); /* the answer is not NUL-terminated */
  if (sscanf(line, "%llu\t%llu", &has, &cols) == 2 && cols > 0)
    ans = has > 0;
  stkr__buf_free(&resp);
  return ans;
}

/* push.h. Per added column, the table and (with a cluster) its _all. */
int stkr__schema_added_columns(stkr__ch *ch, const stkr__push_opts *o,
                               unsigned *missing) {
  const char *db = o->ch.database;

  *missing = 0;
  /* The check first, capped at 30 s as each attempt's first request is:
   * these queries, push's first requests, had the whole --timeout (600 s
   * by default) each, and a server that accepted and never answered held
   * push for many minutes before its first attempt (QA, session 47). No
   * ClickHouse there: not known, and push_dir's attempts say why. */
  if (stkr__ch_check_first(ch) != STKR_CH_OK) return STKR_CLI_OK;
  for (size_t i = 0; i < stkr__n_added_columns; i++) {
    const stkr__added_column *c = &stkr__added_columns[i];
    for (int all = 0; all <= (o->cluster != NULL); all++) {
      char t[160], sql[512];
      int has;
      snprintf(t, sizeof t, "%s%s", c->table, all ? "_all" : "");
      if ((has = has_column(ch, db, t, c->column)) != 0)
        continue; /* there, or not known: the inserts will tell */
      if (!o->create_schema) {
        /* The table push inserts into decides (a shard's table without
         * it fails that shard's inserts, as any schema mismatch does). */
        if (all == (o->cluster != NULL)) {
          *missing |= 1u << i;
          fprintf(stderr, "stackrec push: %s.%s has no column %s (made by "
                  "an older stackrec): pushed without it; `stackrec push "
                  "--create-schema` adds it\n", db, t, c->column);
        }
        continue;
      }
      snprintf(sql, sizeof sql, "ALTER TABLE %s.%s ADD COLUMN %s %s", db, t,
               c->column, c->type);
      if (stkr__ch_query(ch, sql, NULL) != STKR_CH_OK) {
        fprintf(stderr, "stackrec push: adding column %s to %s.%s: %s\n",
                c->column, db, t, stkr__ch_error(ch));
        return STKR_CLI_DATA_LOST;
      }
    }
  }
  return STKR_CLI_OK;
}

void stkr__sql_quote(char *out, size_t cap, const char *s) {
  size_t n = 0;

  for (; *s != '\0' && n + 3 <= cap; s++) {
    if (*s == '\'' || *s == '\\')
      out[n++] = '\\';
    out[n++] = *s;
  }
  if (cap > 0)
    out[n] = '\0';
}

int stkr__schema_identity_clash(stkr__ch *ch, const char *table,
                                const char *recording, const char *identity,
                                char *other, size_t cap) {
  char sql[1024], lit[600];
  stkr__buf resp = {0};
  int clash = -1;

  stkr__sql_quote(lit, sizeof lit, recording);
  snprintf(sql, sizeof sql,
           "SELECT DISTINCT identity FROM %s WHERE recording = '%s' "
           "FORMAT TabSeparated", table, lit);
  if (stkr__ch_query(ch, sql, &resp) == STKR_CH_OK) {
    const char *p = (const char *)resp.p, *end = p + resp.len;
    clash = 0;
    while (p != NULL && p < end && clash == 0) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
      /* An empty one: pushed by a stackrec from before identities. */
      if (len > 0 && (len != strlen(identity) ||
                      memcmp(p, identity, len) != 0)) {
        clash = 1;
        snprintf(other, cap, "%.*s", (int)len, p);
      }
      p = nl ? nl + 1 : NULL;
    }
  }
  stkr__buf_free(&resp);
  return clash;
}

/* push.h */
int stkr__schema_create(stkr__ch *ch, const stkr__push_opts *o) {
  char **s = stkr__schema(o->ch.database, o->cluster);
  int status = STKR_CLI_OK;
  if (s == NULL)
    return STKR_CLI_DATA_LOST;
  if (stkr__ch_check(ch) != STKR_CH_OK) {
    fprintf(stderr, "stackrec push: creating the schema: %s\n",
            stkr__ch_error(ch));
    stkr__schema_free(s);
    return STKR_CLI_DATA_LOST;
  }
  for (size_t i = 0; s[i] != NULL; i++)
    if (stkr__ch_query(ch, s[i], NULL) != STKR_CH_OK) {
      fprintf(stderr, "stackrec push: creating the schema: %s\n",
              stkr__ch_error(ch));
      status = STKR_CLI_DATA_LOST;
      break;
    }
  stkr__schema_free(s);
  return status;
}

int stkr__schema_print(const stkr__push_opts *o) {
  char **s = stkr__schema(o->ch.database, o->cluster);
  if (s == NULL)
    return STKR_CLI_DATA_LOST;
  for (size_t i = 0; s[i] != NULL; i++)
    printf("%s;\n", s[i]);
  stkr__schema_free(s);
  return stkr_cli_flush("push");
}
