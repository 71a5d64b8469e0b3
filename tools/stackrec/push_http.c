/*
 * push_http.c: ClickHouse's HTTP interface through libcurl (Debian's, so
 * https:// works with the system's CA store).
 *
 * libcurl is opened with dlopen on first use (see k_curl below).
 * Statements go as a POST body; an INSERT names its table and format in
 * the `query` parameter (RowBinary, or Native for events) and streams its
 * rows as a chunked body pulled
 * from a producer, gzipped (zlib, level 1) when asked: ClickHouse 18.16
 * reads `Content-Encoding: gzip` and `deflate` request bodies (not zstd:
 * "Unknown Content-Encoding", checked on the real server). The password
 * goes only through HTTP basic auth (CURLOPT_PASSWORD), never into a URL
 * or a message; messages name the server by scheme://host:port.
 */
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tools/stackrec/push.h"

#define RAW_CHUNK (256u << 10) /* rows asked of the producer at a time */

struct stkr__ch {
  CURL *curl;
  stkr__ch_opts o;
  char shown[256]; /* scheme://host:port, for messages */
  char err[1024];  /* last failure, redacted */
  char errbuf[CURL_ERROR_SIZE];
  bool quick;       /* the next request is stkr__ch_check's */
  /* stkr__ch_check_first failed: the next check answers so at once (err
   * still says why: no request in between). */
  bool first_failed;
  stkr__ch_fail first_fail;
  /* One INSERT body in flight: */
  stkr__ch_producer produce;
  void *arg;
  int produce_err;  /* the producer's negative errno, or 0 */
  bool body_done;   /* the producer returned 0 */
  z_stream z;
  bool z_live;
  uint8_t *raw;     /* producer output not yet compressed */
  size_t raw_len, raw_off;
};

/* libcurl is loaded when push first needs it, not linked: with its ~30
 * libraries (TLS, HTTP/2, LDAP, Kerberos, ...) it would add ~30 ms to the
 * start of every stackrec command, `record` included (measured here: a
 * process linking it starts in 33 ms, without it in 6 ms). Set once by
 * load_curl(), read by this file only; one push runs per process. */
static struct {
  CURLcode (*global_init)(long);
  CURL *(*easy_init)(void);
  void (*easy_cleanup)(CURL *);
  void (*easy_reset)(CURL *);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_perform)(CURL *);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  const char *(*easy_strerror)(CURLcode);
  char *(*easy_escape)(CURL *, const char *, int);
  void (*free)(void *);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
} k_curl;
static bool g_curl_init; /* k_curl loaded and curl_global_init done */

/* @return 0, or -ENOENT after printing why. */
static int load_curl(void) {
  static const char *const names[] = {
      "curl_global_init", "curl_easy_init", "curl_easy_cleanup",
      "curl_easy_reset", "curl_easy_setopt", "curl_easy_perform",
      "curl_easy_getinfo", "curl_easy_strerror", "curl_easy_escape",
      "curl_free", "curl_slist_append", "curl_slist_free_all"};
  void *syms[sizeof names / sizeof names[0]];
  _Static_assert(sizeof k_curl == sizeof syms, "k_curl: one pointer a name");
  void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  size_t i;

  if (h == NULL) {
    fprintf(stderr, "stackrec push: cannot load libcurl: %s (Debian: "
                    "apt-get install libcurl4)\n", dlerror());
    return -ENOENT;
  }
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((syms[i] = dlsym(h, names[i])) == NULL) {
      fprintf(stderr, "stackrec push: libcurl.so.4 has no %s\n", names[i]);
      return -ENOENT;
    }
  /* The struct's members are function pointers in the order of names. */
  memcpy(&k_curl, syms, sizeof k_curl);
  return 0;
}

static void shown_url(const char *url, char *out, size_t len) {
  const char *p = strstr(url, "://"), *h = p ? p + 3 : url, *e;
  const char *at;

  e = h + strcspn(h, "/?#");
  /* user:password@ is refused by push.c; drop it here too, so that no
   * message can ever carry it. */
  at = memchr(h, '@', (size_t)(e - h));
  if (at != NULL)
    h = at + 1;
  snprintf(out, len, "%.*s%.*s", p ? (int)(p + 3 - url) : 0, url,
           (int)(e - h), h);
}

int stkr__ch_create(const stkr__ch_opts *o, stkr__ch **out) {
  stkr__ch *c;

  *out = NULL;
  if (!g_curl_init) {
    if (load_curl() != 0 || k_curl.global_init(CURL_GLOBAL_DEFAULT) != 0)
      return -ENOENT;
    g_curl_init = true;
  }
  c = calloc(1, sizeof *c);
  if (c == NULL)
    return -ENOMEM;
  c->o = *o;
  c->curl = k_curl.easy_init();
  if (c->curl == NULL) {
    free(c);
    return -ENOMEM;
  }
  shown_url(o->url, c->shown, sizeof c->shown);
  *out = c;
  return 0;
}

void stkr__ch_free(stkr__ch *c) {
  if (c == NULL)
    return;
  k_curl.easy_cleanup(c->curl);
  free(c->raw);
  free(c);
}

const char *stkr__ch_error(const stkr__ch *c) { return c->err; }
const char *stkr__ch_shown_url(const stkr__ch *c) { return c->shown; }

static size_t on_body(char *p, size_t sz, size_t n, void *arg) {
  stkr__buf *b = arg;
  return stkr__buf_put(b, p, sz * n) == 0 ? sz * n : 0;
}

/* Exceptions worth another try: the server is overloaded or lost a
 * connection of its own (codes of ClickHouse 18.16's ErrorCodes.cpp). */
static bool retryable_code(int code) {
  static const int k[] = {
      159, /* TIMEOUT_EXCEEDED */
      202, /* TOO_MANY_SIMULTANEOUS_QUERIES */
      209, /* SOCKET_TIMEOUT */
      210, /* NETWORK_ERROR */
      252, /* TOO_MANY_PARTS */
      279, /* ALL_CONNECTION_TRIES_FAILED: a shard of a Distributed table */
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (code == k[i])
      return true;
  return false;
}

/* After curl_easy_perform: classify, and keep the message. */
static stkr__ch_fail finish(stkr__ch *c, CURLcode rc, const stkr__buf *resp) {
  long status = 0;
  int code = 0;
  size_t n;

  if (c->produce_err != 0) {
    snprintf(c->err, sizeof c->err, "%s", strerror(-c->produce_err));
    return STKR_CH_LOCAL;
  }
  if (rc != CURLE_OK) {
    snprintf(c->err, sizeof c->err, "%s: %s", c->shown,
             c->errbuf[0] ? c->errbuf : k_curl.easy_strerror(rc));
    n = strlen(c->err);
    while (n > 0 && c->err[n - 1] == '\n')
      c->err[--n] = '\0';
    return STKR_CH_TRANSPORT;
  }
  k_curl.easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status == 200) {
    c->err[0] = '\0';
    return STKR_CH_OK;
  }
  /* The server's own text: "Code: 60, e.displayText() = DB::Exception:
   * Table stackrec.events doesn't exist., e.what() = DB::Exception". */
  n = resp && resp->len ? resp->len : 0;
  if (n > 700)
    n = 700;
  while (n > 0 && (resp->p[n - 1] == '\n' || resp->p[n - 1] == '\r'))
    n--;
  snprintf(c->err, sizeof c->err, "%s: HTTP %ld: %.*s", c->shown, status,
           (int)n, n ? (const char *)resp->p : "(no message)");
  if (n > 6 && sscanf((const char *)resp->p, "Code: %d", &code) == 1 &&
      retryable_code(code))
    return STKR_CH_RETRYABLE_SERVER;
  return status == 503 || status == 502 || status == 504
             ? STKR_CH_RETRYABLE_SERVER
             : STKR_CH_SERVER;
}

/* The request URL: base + "?query=..." (+ settings). Statements name
 * their database themselves (it may not exist yet). */
static char *request_url(stkr__ch *c, const char *query) {
  char *q = query ? k_curl.easy_escape(c->curl, query, 0) : NULL;
  size_t len = strlen(c->o.url) + (q ? strlen(q) : 0) + 200;
  char *u = malloc(len);
  const char *sep = strchr(c->o.url, '?') ? "&" : "?";

  if (u != NULL && query == NULL)
    snprintf(u, len, "%s", c->o.url);
  else if (u != NULL && q != NULL)
    /* One INSERT is one block (one part): atomic when it holds at most
     * max_insert_block_size rows (push.c keeps it so); a Distributed
     * table forwards it before answering. */
    snprintf(u, len,
             "%s%squery=%s&max_insert_block_size=%u&insert_distributed_sync=1",
             c->o.url, sep, q, STKR_PUSH_MAX_CHUNK);
  else if (u != NULL) {
    free(u);
    u = NULL;
  }
  k_curl.free(q);
  return u;
}

static void setup(stkr__ch *c, const char *url, stkr__buf *resp) {
  k_curl.easy_reset(c->curl);
  c->errbuf[0] = '\0';
  k_curl.easy_setopt(c->curl, CURLOPT_URL, url);
  k_curl.easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
  k_curl.easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
  /* ClickHouse speaks HTTP/1.1; INSERT bodies are chunked, which HTTP/2
   * (offered over https by default) does not have. */
  k_curl.easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  k_curl.easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, 10L);
  /* The check's query is answered at once by any ClickHouse: a server that
   * accepts and never answers costs 30 s an attempt there, not --timeout
   * (QA: up to an hour with the defaults). */
  if (c->quick && (c->o.timeout_s == 0 || c->o.timeout_s > 30))
    k_curl.easy_setopt(c->curl, CURLOPT_TIMEOUT, 30L);
  else if (c->o.timeout_s > 0)
    k_curl.easy_setopt(c->curl, CURLOPT_TIMEOUT, c->o.timeout_s);
  k_curl.easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
  k_curl.easy_setopt(c->curl, CURLOPT_WRITEDATA, resp);
  if (c->o.user != NULL) {
    k_curl.easy_setopt(c->curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    k_curl.easy_setopt(c->curl, CURLOPT_USERNAME, c->o.user);
    k_curl.easy_setopt(c->curl, CURLOPT_PASSWORD,
                     c->o.password ? c->o.password : "");
  }
}

stkr__ch_fail stkr__ch_query(stkr__ch *c, const char *sql, stkr__buf *resp) {
  stkr__buf own = {0};
  stkr__buf *b = resp ? resp : &own;
  char *url = request_url(c, NULL);
  stkr__ch_fail f;
  CURLcode rc;

  if (url == NULL) {
    snprintf(c->err, sizeof c->err, "out of memory");
    return STKR_CH_LOCAL;
  }
  b->len = 0;
  c->produce_err = 0;
  setup(c, url, b);
  k_curl.easy_setopt(c->curl, CURLOPT_POSTFIELDS, sql);
  k_curl.easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(sql));
  rc = k_curl.easy_perform(c->curl);
  f = finish(c, rc, b);
  free(url);
  stkr__buf_free(&own);
  return f;
}

stkr__ch_fail stkr__ch_check_first(stkr__ch *c) {
  stkr__ch_fail f = stkr__ch_check(c);
  c->first_failed = f != STKR_CH_OK;
  c->first_fail = f;
  return f;
}

stkr__ch_fail stkr__ch_check(stkr__ch *c) {
  static const char want[] = "stackrec-1048576\n";
  stkr__buf resp = {0};
  stkr__ch_fail f;

  if (c->first_failed) {
    c->first_failed = false;
    return c->first_fail;
  }
  c->quick = true;
  f = stkr__ch_query(c, "SELECT concat('stackrec-', toString(1024 * 1024)) "
                        "FORMAT TabSeparated", &resp);
  c->quick = false;
  if (f == STKR_CH_OK &&
      (resp.len != sizeof want - 1 || memcmp(resp.p, want, resp.len) != 0)) {
    size_t n = resp.len > 60 ? 60 : resp.len;
    for (size_t i = 0; i < n; i++)
      if (resp.p[i] < 0x20 || resp.p[i] >= 0x7f) resp.p[i] = '.';
    snprintf(c->err, sizeof c->err, "%s does not answer as ClickHouse does "
             "(another service on that port, or a proxy's page?): a test "
             "query gave \"%.*s\"%s", c->shown, (int)n,
             n ? (const char *)resp.p : "", resp.len > n ? "..." : "");
    f = STKR_CH_SERVER;
  }
  stkr__buf_free(&resp);
  return f;
}

/* Pull more rows from the producer into c->raw. @return bytes, 0 at the
 * end of the body, or -1 (producer failed). */
static long pull(stkr__ch *c) {
  long n;
  if (c->body_done)
    return 0;
  n = c->produce(c->arg, c->raw, RAW_CHUNK);
  if (n < 0) {
    c->produce_err = (int)n;
    return -1;
  }
  if (n == 0)
    c->body_done = true;
  c->raw_len = (size_t)n;
  c->raw_off = 0;
  return n;
}

static size_t on_read(char *out, size_t sz, size_t nmemb, void *arg) {
  stkr__ch *c = arg;
  size_t cap = sz * nmemb;

  if (!c->o.gzip) {
    if (c->raw_off == c->raw_len && pull(c) < 0)
      return CURL_READFUNC_ABORT;
    size_t n = c->raw_len - c->raw_off < cap ? c->raw_len - c->raw_off : cap;
    memcpy(out, c->raw + c->raw_off, n);
    c->raw_off += n;
    return n;
  }
  c->z.next_out = (Bytef *)out;
  c->z.avail_out = (uInt)cap;
  while (c->z.avail_out == cap) { /* until something came out */
    int flush = Z_NO_FLUSH, zr;
    if (c->raw_off == c->raw_len && !c->body_done && pull(c) < 0)
      return CURL_READFUNC_ABORT;
    if (c->body_done && c->raw_off == c->raw_len)
      flush = Z_FINISH;
    c->z.next_in = c->raw + c->raw_off;
    c->z.avail_in = (uInt)(c->raw_len - c->raw_off);
    zr = deflate(&c->z, flush);
    c->raw_off = c->raw_len - c->z.avail_in;
    if (zr == Z_STREAM_END)
      break;
    if (zr != Z_OK && zr != Z_BUF_ERROR) {
      c->produce_err = -EIO;
      return CURL_READFUNC_ABORT;
    }
  }
  return cap - c->z.avail_out;
}

stkr__ch_fail stkr__ch_insert(stkr__ch *c, const char *table,
                              const char *format, stkr__ch_producer produce,
                              void *arg) {
  char q[1024];
  char *url;
  struct curl_slist *hdr = NULL;
  stkr__buf resp = {0};
  stkr__ch_fail f;
  CURLcode rc;

  snprintf(q, sizeof q, "INSERT INTO %s FORMAT %s", table, format);
  if (c->raw == NULL && (c->raw = malloc(RAW_CHUNK)) == NULL)
    return STKR_CH_LOCAL;
  url = request_url(c, q);
  if (url == NULL) {
    snprintf(c->err, sizeof c->err, "out of memory");
    return STKR_CH_LOCAL;
  }
  c->produce = produce;
  c->arg = arg;
  c->produce_err = 0;
  c->body_done = false;
  c->raw_len = c->raw_off = 0;
  if (c->o.gzip) {
    memset(&c->z, 0, sizeof c->z);
    /* windowBits 15 + 16: a gzip wrapper; level 1: the network is rarely
     * slower than level 6 would make the producer. */
    if (deflateInit2(&c->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
      free(url);
      return STKR_CH_LOCAL;
    }
    c->z_live = true;
    hdr = k_curl.slist_append(hdr, "Content-Encoding: gzip");
  }
  hdr = k_curl.slist_append(hdr, "Transfer-Encoding: chunked");
  /* No "Expect: 100-continue" round trip before every body. */
  hdr = k_curl.slist_append(hdr, "Expect:");
  setup(c, url, &resp);
  k_curl.easy_setopt(c->curl, CURLOPT_POST, 1L);
  k_curl.easy_setopt(c->curl, CURLOPT_READFUNCTION, on_read);
  k_curl.easy_setopt(c->curl, CURLOPT_READDATA, c);
  /* A streamed body cannot be sent twice: a pooled connection the server
   * closed (a restart) made libcurl resend on a new one and fail ("data
   * rewind wasn't possible"), a push retry each (QA, session 39). */
  k_curl.easy_setopt(c->curl, CURLOPT_FRESH_CONNECT, 1L);
  k_curl.easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdr);
  rc = k_curl.easy_perform(c->curl);
  f = finish(c, rc, &resp);
  if (c->z_live) {
    deflateEnd(&c->z);
    c->z_live = false;
  }
  k_curl.slist_free_all(hdr);
  stkr__buf_free(&resp);
  free(url);
  return f;
}
