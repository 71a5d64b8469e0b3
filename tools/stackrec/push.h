/*
 * push.h: `stackrec push`, recordings into ClickHouse (issue 16).
 *
 * push.c       one recording at a time: chunks, ranges, retries
 * push_args.c  options, the password
 * push_http.c  libcurl: queries, streamed INSERTs (gzip), server errors
 * push_rows.c  RowBinary rows, content hashes of frames, stacks and names
 * push_native.c  the events of a chunk as one Native block, in key order
 * push_schema.c  the tables (docs/fleet.md shows the same text)
 *
 * Not thread-safe: one push runs per process.
 */
#ifndef STKR_PUSH_H
#define STKR_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stkr_map.h" /* stacks, seen rows, a chunk's sites */
#include "proto/stkr_reader.h"

/* ---- a growing byte buffer (RowBinary rows, response bodies) ---- */
typedef struct stkr__buf {
  uint8_t *p;
  size_t len, cap;
} stkr__buf;

/* @return 0 or -ENOMEM (b unchanged). */
int stkr__buf_put(stkr__buf *b, const void *p, size_t n);
void stkr__buf_free(stkr__buf *b);

/* RowBinary values (push_rows.c). Each @return 0 or -ENOMEM. */
int stkr__rb_u8(stkr__buf *b, uint8_t v);
int stkr__rb_u16(stkr__buf *b, uint16_t v);
int stkr__rb_u32(stkr__buf *b, uint32_t v);
int stkr__rb_u64(stkr__buf *b, uint64_t v);
int stkr__rb_varint(stkr__buf *b, uint64_t v);
/* v as LEB128 (RowBinary's and Native's lengths) into out. @return bytes
 * written, 1 to 10. */
size_t stkr__leb128(uint8_t out[10], uint64_t v);
int stkr__rb_str(stkr__buf *b, const char *s); /* NULL: "" */
int stkr__rb_bytes(stkr__buf *b, const void *p, size_t n);


/* ---- the connection (push_http.c) ---- */
typedef struct stkr__ch stkr__ch;

typedef struct stkr__ch_opts {
  const char *url;      /* http[s]://HOST:PORT[/], no credentials */
  const char *user;     /* NULL: the server's default user */
  const char *password; /* NULL: none. Sent by HTTP basic auth only */
  const char *database;
  bool gzip;            /* Content-Encoding: gzip for INSERT bodies */
  long timeout_s;       /* per request, 0: none */
} stkr__ch_opts;

/* What a failed request was: a transport failure (server gone, refused,
 * timed out) is worth retrying; an exception from the server mostly not. */
typedef enum stkr__ch_fail {
  STKR_CH_OK = 0,
  STKR_CH_TRANSPORT, /* curl could not complete the exchange */
  STKR_CH_SERVER,    /* the server answered with an error (its message) */
  STKR_CH_RETRYABLE_SERVER, /* an error the server may not repeat (too
                               many parts, network, timeout) */
  STKR_CH_LOCAL      /* out of memory, the body producer failed */
} stkr__ch_fail;

/* @return 0, -ENOMEM, or -ENOENT (libcurl.so.4 could not be loaded or
 * initialized; said on stderr). *out owns it. */
int stkr__ch_create(const stkr__ch_opts *o, stkr__ch **out);
void stkr__ch_free(stkr__ch *c);

/* The last failure's message (the server's text, or curl's), redacted:
 * never holds the password. "" when none. */
const char *stkr__ch_error(const stkr__ch *c);

/* The URL as shown in messages: scheme://host[:port] only. */
const char *stkr__ch_shown_url(const stkr__ch *c);

/* Run one statement (SELECT, CREATE, OPTIMIZE); the response body lands
 * in *resp (may be NULL). @return the failure kind. */
stkr__ch_fail stkr__ch_query(stkr__ch *c, const char *sql, stkr__buf *resp);

/* Is it ClickHouse that answers? A query whose answer only a SQL server
 * computes (a proxy's page, or any server that says 200 to everything,
 * made push report success while nothing was stored: QA). @return
 * STKR_CH_OK, the query's failure, or STKR_CH_SERVER (error says what
 * came back). */
stkr__ch_fail stkr__ch_check(stkr__ch *c);
/* stkr__ch_check before the first attempt (the schema's column queries
 * follow it): a failure is also the answer of the next stkr__ch_check,
 * the first attempt's, which sends nothing then, so that a server that
 * never answers costs one capped request per attempt, not two (QA,
 * session 47: 60 s with --retries 0). */
stkr__ch_fail stkr__ch_check_first(stkr__ch *c);

/* Fills buf (cap > 0) with the next bytes of an INSERT body. @return the
 * number of bytes (0: the body is complete), or a negative errno that
 * aborts the request (STKR_CH_LOCAL). */
typedef long (*stkr__ch_producer)(void *arg, uint8_t *buf, size_t cap);

/* INSERT INTO <table> FORMAT <format> (RowBinary or Native) with a body
 * pulled from produce (chunked transfer, gzipped when the connection says
 * so): nothing is buffered beyond a few hundred KiB. @return the failure
 * kind. */
stkr__ch_fail stkr__ch_insert(stkr__ch *c, const char *table,
                              const char *format, stkr__ch_producer produce,
                              void *arg);

/* ---- schema (push_schema.c) ---- */

/* The tables, as a NULL-terminated list of statements for database db
 * (cluster non-NULL: also the *_all Distributed tables over it). Each
 * statement is malloc'ed; free with stkr__schema_free. NULL: -ENOMEM. */
char **stkr__schema(const char *db, const char *cluster);
void stkr__schema_free(char **stmts);

/* Columns of each table in RowBinary order (what push_rows.c writes). */
extern const char stkr__cols_events[], stkr__cols_recordings[],
    stkr__cols_site_names[], stkr__cols_threads[], stkr__cols_payloads[],
    stkr__cols_marks[], stkr__cols_stacks[], stkr__cols_frames[],
    stkr__cols_images[], stkr__cols_sites[], stkr__cols_processes[],
    stkr__cols_drops[], stkr__cols_pushes[];
/* processes' and recordings' columns without those added since
 * (stkr__added_columns): what push writes into a table made by an older
 * stackrec, not yet migrated. */
extern const char stkr__cols_processes_v1[], stkr__cols_recordings_v1[];
/* Bits of stkr__schema_added_columns' *missing, by stkr__added_columns. */
#define STKR__ADDED_OS_PARENT (1u << 0)
#define STKR__ADDED_IDENTITY (1u << 1)

/* s as the inside of a ClickHouse string literal (' and \ escaped), cut
 * to fit out (cap bytes, NUL-terminated). */
void stkr__sql_quote(char *out, size_t cap, const char *s);

/* Was `recording` pushed already (rows of `table`, db.recordings or its
 * _all) as another recording than `identity` (the content hash push
 * gives a recording: device, build, first process and session)?
 * @return 1 yes (its identity into other), 0 no (or only rows of an older
 * push, without one), -1 not known (the server did not answer). */
int stkr__schema_identity_clash(stkr__ch *ch, const char *table,
                                const char *recording, const char *identity,
                                char *other, size_t cap);

/* A column added to a table after its first release, at the table's end. */
typedef struct stkr__added_column {
  const char *table, *column, *type;
} stkr__added_column;
extern const stkr__added_column stkr__added_columns[];
extern const size_t stkr__n_added_columns;

/* ---- content hashes and dimension rows (push_rows.c) ---- */

/* What names a recording in the tables (push_rows.c): --build, else the
 * hex build-id of the first image of process proc (the main executable);
 * --device, else the host name; --recording, else a hash of device,
 * build and that process's pid, session and start times; and its
 * identity, the hash of those four alone (recordings.identity: the same
 * whoever pushes it). r NULL: nothing read ("unknown"). */
struct stkr__push_opts; /* below */
typedef struct stkr__push_names {
  char build[160], device[160], recording[80], identity[17];
} stkr__push_names;
void stkr__push_names_of(const struct stkr__push_opts *o, const stkr_reader *r,
                         size_t proc, stkr__push_names *out);

/* Identity of what one recording pushes, fixed per recording. */
typedef struct stkr__push_ids {
  const char *build, *device, *recording;
} stkr__push_ids;

/* The dimension rows of one pass over a reader: stacks (by process,
 * session and stack id, each resolved once into a content hash) with
 * their frames, and the names events refer to by id (sites, threads,
 * payloads). Rows of what was not sent yet are kept until the caller takes
 * them (stkr__dims_take). */
typedef struct stkr__dims stkr__dims;

int stkr__dims_create(stkr__dims **out);
void stkr__dims_free(stkr__dims *m);

/* The content hash of the current event's stack (0: no stack), adding
 * its stacks/frames rows on first sight. @return 0 or -ENOMEM. */
int stkr__dims_stack(stkr__dims *m, stkr_reader *r,
                     const stkr_event_view *ev, const stkr__push_ids *id,
                     uint64_t *hash);

/* Kinds of names, each a table of (id, name). */
typedef enum stkr__dim_kind {
  STKR_DIM_SITE,    /* site_names (site, name) */
  STKR_DIM_THREAD,  /* threads (thread, name) */
  STKR_DIM_PAYLOAD, /* payloads (payload, value, truncated) */
  STKR_DIM_STACK,   /* stacks: rows only, ids from stkr__dims_stack */
  STKR_DIM_FRAME,   /* frames: rows only */
  STKR_DIM_KINDS
} stkr__dim_kind;

/* The id of a name of the given kind (a content hash of its bytes and,
 * for payloads, the truncated flag): the same in every recording, never 0.
 * Empty bytes (and not truncated) are id 0, no row. Queues the row on
 * first sight. @return 0 or -ENOMEM. */
int stkr__dims_name(stkr__dims *m, stkr__dim_kind kind, const void *p,
                    size_t len, bool truncated, uint64_t *id);

/* Swap the pending RowBinary rows of each kind (columns
 * stkr__dim_cols[kind]) into out[kind], whose old bytes are dropped and
 * whose memory is reused for the next rows. */
void stkr__dims_take(stkr__dims *m, stkr__buf out[STKR_DIM_KINDS]);

/* Table and columns of each kind's rows. */
extern const char *const stkr__dim_table[STKR_DIM_KINDS];
extern const char *const stkr__dim_cols[STKR_DIM_KINDS];

/* The hash of a recording id as stored in events.rec (recordings maps it
 * back). Never 0. */
uint64_t stkr__rec_id(const char *recording);

/* The summary rows of a whole reader (read to the end): images, sites,
 * processes, drops, appended to the four buffers; processes' rows in
 * stkr__cols_processes' columns, or stkr__cols_processes_v1's when
 * procs_v1. @return 0 or -ENOMEM. */
int stkr__rows_summary(const stkr_reader *r, const stkr__push_ids *id,
                       bool procs_v1,
                       stkr__buf *images, stkr__buf *sites,
                       stkr__buf *procs, stkr__buf *drops);

/* ---- events as a Native block (push_native.c) ---- */

/* One events row; rec is the block's. Written by the caller, encoded in
 * the order of stkr__cols_events. */
typedef struct stkr__ev_row {
  uint64_t n, tid, thread, site, ts, ts_mono, stack, payload;
  uint32_t pid;
  uint16_t day;
  uint8_t stack_truncated;
} stkr__ev_row;

/* The events of one chunk, sent as one Native block ordered by the table's
 * sorting key (site, rec, pid, n) as far as the input allows: rows are
 * bucketed by site, stable, so a chunk read in (pid, n) order arrives
 * sorted and the server skips its own sort. Memory: one array per column,
 * 79 bytes a row with the site buckets and the order. */
typedef struct stkr__evblock stkr__evblock;

int stkr__evblock_create(stkr__evblock **out);
void stkr__evblock_free(stkr__evblock *b);
/* Empty the block for rows of recording id rec. */
void stkr__evblock_reset(stkr__evblock *b, uint64_t rec);
size_t stkr__evblock_rows(const stkr__evblock *b);
/* Append a row. @return 0 or -ENOMEM. */
int stkr__evblock_add(stkr__evblock *b, const stkr__ev_row *row);
/* Order the rows and start encoding. @return 0 or -ENOMEM. */
int stkr__evblock_seal(stkr__evblock *b);
/* A stkr__ch_producer (arg: the block) of the sealed block in Native
 * format. */
long stkr__evblock_produce(void *arg, uint8_t *buf, size_t cap);

/* ---- options (push_args.c) ---- */

/* Events a chunk (one events INSERT, one part on the server) holds by
 * default, and at most (= the max_insert_block_size push sends, so that
 * a chunk stays one block). Larger chunks mean fewer parts for the
 * server to merge while a bulk load runs (docs/fleet.md, Performance),
 * at ~80 bytes an event of push's memory per chunk (measured). */
#define STKR_PUSH_DEFAULT_CHUNK 1048576u
#define STKR_PUSH_MAX_CHUNK 8388608u
#define STKR_PUSH_MAX_STREAMS 4u

typedef struct stkr__push_opts {
  stkr__ch_opts ch;
  const char *device, *build, *recording, *cluster;
  bool create_schema, print_schema, quiet;
  uint32_t chunk, streams, retries, retry_wait_ms, test_delay_ms;
  int first_dir; /* argv index of the first DIR */
} stkr__push_opts;

/* Columns added since a table was made (stkr__added_columns), asked of
 * system.columns: with o->create_schema each missing one is added to the
 * table and to its _all; else push fills the older table without it and
 * says so on stderr. @return a STKR_CLI_* exit status; *missing: a bit
 * (STKR__ADDED_*) for each added column the table push writes lacks. */
int stkr__schema_added_columns(stkr__ch *ch, const stkr__push_opts *o,
                               unsigned *missing);
/* --create-schema: the database and tables (stkr__schema). @return a
 * STKR_CLI_* exit status, said on stderr. */
int stkr__schema_create(stkr__ch *ch, const stkr__push_opts *o);
/* --print-schema: the statements on stdout. @return an exit status. */
int stkr__schema_print(const stkr__push_opts *o);

/* Parse and check argv; the password (if any) lands in pw[pw_len] and
 * o->ch.password points at it or at the environment. @return -1 to go on,
 * or the exit status (help printed, usage error said). */
int stkr__push_args(int argc, char **argv, stkr__push_opts *o, char *pw,
                    size_t pw_len);

#endif
