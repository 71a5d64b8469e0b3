/*
 * push.h: `stackrec push`, recordings into ClickHouse (issue 16).
 *
 * push.c       options, the password, one recording at a time, retries
 * push_http.c  libcurl: queries, streamed INSERTs (gzip), server errors
 * push_rows.c  RowBinary rows, content hashes of frames and stacks
 * push_schema.c  the tables (docs/fleet.md shows the same text)
 *
 * Not thread-safe: one push runs per process.
 */
#ifndef STKR_PUSH_H
#define STKR_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Fills buf (cap > 0) with the next bytes of an INSERT body. @return the
 * number of bytes (0: the body is complete), or a negative errno that
 * aborts the request (STKR_CH_LOCAL). */
typedef long (*stkr__ch_producer)(void *arg, uint8_t *buf, size_t cap);

/* INSERT INTO <table> FORMAT RowBinary with a body pulled from produce
 * (chunked transfer, gzipped when the connection says so): nothing is
 * buffered beyond a few hundred KiB. @return the failure kind. */
stkr__ch_fail stkr__ch_insert(stkr__ch *c, const char *table,
                              stkr__ch_producer produce, void *arg);

/* ---- schema (push_schema.c) ---- */

/* The tables, as a NULL-terminated list of statements for database db
 * (cluster non-NULL: also the *_all Distributed tables over it). Each
 * statement is malloc'ed; free with stkr__schema_free. NULL: -ENOMEM. */
char **stkr__schema(const char *db, const char *cluster);
void stkr__schema_free(char **stmts);

/* Columns of each table in RowBinary order (what push_rows.c writes). */
extern const char stkr__cols_events[], stkr__cols_stacks[],
    stkr__cols_frames[], stkr__cols_images[], stkr__cols_sites[],
    stkr__cols_processes[], stkr__cols_drops[], stkr__cols_pushes[];

/* ---- content hashes and dimension rows (push_rows.c) ---- */

/* Identity of what one recording pushes, fixed per recording. */
typedef struct stkr__push_ids {
  const char *build, *device, *recording;
} stkr__push_ids;

/* Stacks of one reader, by (process, session, stack id), each resolved
 * once into a content hash; the rows of stacks and frames not written
 * yet are kept in `stacks` and `frames` until the caller sends them. */
typedef struct stkr__stackmap stkr__stackmap;

int stkr__stackmap_create(stkr__stackmap **out);
void stkr__stackmap_free(stkr__stackmap *m);

/* The content hash of the current event's stack (0: no stack), adding
 * its stacks/frames rows on first sight. @return 0 or -ENOMEM. */
int stkr__stackmap_get(stkr__stackmap *m, stkr_reader *r,
                       const stkr_event_view *ev, const stkr__push_ids *id,
                       uint64_t *hash);

/* The pending rows (RowBinary) of stacks and frames; the caller sends
 * them and calls stkr__stackmap_sent. */
stkr__buf *stkr__stackmap_rows(stkr__stackmap *m, bool frames);
void stkr__stackmap_sent(stkr__stackmap *m);

/* One events row. n: the event's ordinal in its process. */
int stkr__row_event(stkr__buf *b, const stkr__push_ids *id,
                    const stkr_event_view *ev, uint64_t stack, uint64_t n);

/* The summary rows of a whole reader (read to the end): images, sites,
 * processes, drops, appended to the four buffers. @return 0 or -ENOMEM. */
int stkr__rows_summary(const stkr_reader *r, const stkr__push_ids *id,
                       stkr__buf *images, stkr__buf *sites,
                       stkr__buf *procs, stkr__buf *drops);

#endif
