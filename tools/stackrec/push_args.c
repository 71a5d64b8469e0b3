/*
 * push_args.c: the options of `stackrec push`: parsed, checked (no
 * credentials in argv, names that go into statements unquoted), and the
 * password read from the environment or a file only its owner may read.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/stackrec/cli.h"
#include "tools/stackrec/push.h"

static const char push_help[] =
    "Usage: stackrec push --url http[s]://HOST:PORT [OPTIONS] DIR...\n"
    "\n"
    "Stream recordings into ClickHouse (18.16 or later) over its HTTP\n"
    "interface, gzip-compressed: events as integer ids (Native blocks),\n"
    "the names they stand for in recordings, site_names, threads,\n"
    "payloads, stacks and frames; marks, images, sites, processes, drops\n"
    "and pushes (docs/fleet.md).\n"
    "Each DIR is one recording. Pushing a recording again adds nothing;\n"
    "a push cut off (server gone) is retried and resumes where it stopped.\n"
    "A recording `stackrec record` is still writing is not pushed (its\n"
    "stacks are named at record's end); an empty one has nothing to push.\n"
    "\n"
    "Options:\n"
    "  --url URL          the server (no user:password@ in it)\n"
    "  --database NAME    default stackrec\n"
    "  --device ID        default this host's name\n"
    "  --build ID         default the hex build-id of the first image of\n"
    "                     the first process (the main executable)\n"
    "  --recording ID     default a hash of device, build and the first\n"
    "                     process's pid, session and start time (its\n"
    "                     identity); an ID another recording was pushed\n"
    "                     under is refused (exit 2)\n"
    "  --create-schema    create the database and tables if missing (with\n"
    "                     no DIR: only that)\n"
    "  --cluster NAME     also the *_all Distributed tables over cluster\n"
    "                     NAME (remote_servers), and push into those\n"
    "  --print-schema     print the CREATE statements and exit\n"
    "  --user NAME        password from $STACKREC_CH_PASSWORD or\n"
    "  --password-file F  (mode 0600 or stricter); never an argument\n"
    "  --compress gzip|none  request bodies (default gzip)\n"
    "  --chunk-events N   rows per INSERT (one part on the server),\n"
    "                     default 1048576, at most 8388608\n"
    "  --streams N        events INSERTs in flight at once, 1 to 4\n"
    "                     (default 1); memory: N + 1 chunks of 80 bytes\n"
    "                     an event\n"
    "  --retries N        attempts after a failure, default 5\n"
    "  --retry-wait MS    first wait, doubled each time (at most 10 s);\n"
    "                     default 500\n"
    "  --timeout SEC      per request, default 600 (30 at most for the first\n"
    "                     of each attempt: is it ClickHouse that answers?)\n"
    "  -q, --quiet        no summary line per recording\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit status: 0 every recording pushed and intact; 1 a server error,\n"
    "retries exhausted, input damaged (its intact batches are pushed, the\n"
    "rest named on stderr), or a recording record is still writing; 2\n"
    "usage (also a --recording id another recording has); 3 an input\n"
    "cannot be opened.\n";

/* ---- options ---- */

/* The password: $STACKREC_CH_PASSWORD, or a file no one else may read.
 * @return 0, or an exit status after printing why (never the password). */
static int read_password(const char *file, char *buf, size_t len,
                         const char **out) {
  struct stat st;
  ssize_t n;
  int fd;

  *out = NULL;
  if (file == NULL) {
    *out = getenv("STACKREC_CH_PASSWORD");
    return 0;
  }
  /* O_NONBLOCK: a FIFO would block the open until a writer came (QA,
   * session 26: forever); it is refused below as not a regular file. */
  fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "stackrec push: --password-file %s: %s\n", file,
            strerror(errno));
    if (fd >= 0)
      close(fd);
    return STKR_CLI_NO_INPUT;
  }
  if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
    close(fd);
    return stkr_cli_usage_error(
        "push", "--password-file %s: %s (mode %04o); chmod 600 it", file,
        S_ISREG(st.st_mode) ? "others may read or change it"
                            : "not a regular file",
        (unsigned)(st.st_mode & 07777));
  }
  n = read(fd, buf, len - 1);
  close(fd);
  if (n < 0) {
    fprintf(stderr, "stackrec push: --password-file %s: %s\n", file,
            strerror(errno));
    return STKR_CLI_NO_INPUT;
  }
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  buf[n] = '\0';
  *out = buf;
  return 0;
}

static int parse_u32(const char *opt, const char *s, uint32_t lo,
                     uint32_t hi, uint32_t *out) {
  char *end;
  unsigned long long v;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *s == '\0' || *end != '\0' || *s == '-' || v < lo ||
      v > hi)
    return stkr_cli_usage_error("push", "%s '%s': a number from %u to %u",
                                opt, s, lo, hi);
  *out = (uint32_t)v;
  return 0;
}

/* The URL: http or https, no credentials in it (argv is public). */
static int check_url(const char *u) {
  const char *h = strstr(u, "://"), *e;
  if (h == NULL || (strncmp(u, "http://", 7) != 0 &&
                    strncmp(u, "https://", 8) != 0))
    return stkr_cli_usage_error("push", "--url: http://HOST:PORT or "
                                        "https://HOST:PORT");
  h += 3;
  e = h + strcspn(h, "/?#");
  if (memchr(h, '@', (size_t)(e - h)) != NULL || strcasestr(u, "password="))
    return stkr_cli_usage_error(
        "push", "--url: credentials in the URL are refused (process lists "
                "show arguments): use --user and $STACKREC_CH_PASSWORD or "
                "--password-file");
  /* HOST, [IPv6] or HOST:PORT (1-65535): a malformed one was tried, with
   * its retries, for 15 s before libcurl said so (QA, session 47). No
   * space or control character anywhere (libcurl refuses them as late). */
  for (const char *c = u; *c != '\0'; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f)
      return stkr_cli_usage_error("push", "--url: a space or a control "
                                          "character in it");
  const char *port = NULL;
  if (*h == '[') {
    const char *close = memchr(h, ']', (size_t)(e - h));
    char addr[64] = "";
    struct in6_addr a6;
    if (close != NULL && (size_t)(close - h - 1) < sizeof addr) {
      memcpy(addr, h + 1, (size_t)(close - h - 1));
      addr[strcspn(addr, "%")] = '\0'; /* a zone (%25eth0) is libcurl's */
    }
    if (close == NULL || (close + 1 != e && close[1] != ':') ||
        inet_pton(AF_INET6, addr, &a6) != 1)
      return stkr_cli_usage_error("push", "--url %s: a bracketed host is an "
                                          "IPv6 address, closed by ']' "
                                          "([::1]:8123)", u);
    if (close + 1 != e) port = close + 2;
  } else {
    const char *colon = memchr(h, ':', (size_t)(e - h));
    if ((colon != NULL ? colon : e) == h)
      return stkr_cli_usage_error("push", "--url %s: no host", u);
    if (colon != NULL) port = colon + 1;
  }
  if (port != NULL) {
    unsigned long v = 0;
    const char *d = port;
    for (; d < e && *d >= '0' && *d <= '9' && v <= 65535; d++)
      v = v * 10 + (unsigned long)(*d - '0');
    if (d == port || d != e || v == 0 || v > 65535)
      return stkr_cli_usage_error("push", "--url %s: the port must be a "
                                          "number from 1 to 65535", u);
  }
  return 0;
}

/* Database and cluster names go into statements unquoted: plain
 * identifiers only. */
static int check_name(const char *opt, const char *s) {
  const char *c = s;
  for (; *c; c++)
    if (!(*c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
          (*c >= 'A' && *c <= 'Z')))
      break;
  if (*s == '\0' || *c != '\0')
    return stkr_cli_usage_error("push", "%s '%s': letters, digits and _ only",
                                opt, s);
  return 0;
}

/* The getopt loop. @return -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, stkr__push_opts *o,
                         const char **pwfile) {
  const unsigned V = STKR_CLI_VALUE;
  const stkr_cli_opt opts[] = {
      /* stored as given */
      {"url", 'U', V, &o->ch.url, NULL},
      {"database", 'D', V, &o->ch.database, NULL},
      {"device", 'd', V, &o->device, NULL},
      {"build", 'b', V, &o->build, NULL},
      {"recording", 'R', V, &o->recording, NULL},
      {"create-schema", 'S', 0, NULL, &o->create_schema},
      {"cluster", 'C', V, &o->cluster, NULL},
      {"print-schema", 'P', 0, NULL, &o->print_schema},
      {"user", 'u', V, &o->ch.user, NULL},
      {"password-file", 'p', V | STKR_CLI_EXACT, pwfile, NULL},
      {"quiet", 'q', STKR_CLI_SHORT, NULL, &o->quiet},
      /* checked below */
      {"compress", 'z', V, NULL, NULL},
      {"chunk-events", 'c', V, NULL, NULL},
      {"streams", 's', V, NULL, NULL},
      {"retries", 'r', V, NULL, NULL},
      {"retry-wait", 'w', V, NULL, NULL},
      {"timeout", 't', V, NULL, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "push", .opts = opts,
                                .help = {push_help}};
  uint32_t t;
  int c, st;

  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case 'z': {
      static const char *const kinds[] = {"gzip", "none", NULL};
      int i;
      if ((st = stkr_cli_choice_parse("push", "--compress", kinds, optarg,
                                      &i)) != 0)
        return st;
      o->ch.gzip = i == 0;
      break;
    }
    case 'c':
      if ((st = parse_u32("--chunk-events", optarg, 1, STKR_PUSH_MAX_CHUNK, &o->chunk)))
        return st;
      break;
    case 's':
      if ((st = parse_u32("--streams", optarg, 1, STKR_PUSH_MAX_STREAMS,
                          &o->streams)))
        return st;
      break;
    case 'r':
      if ((st = parse_u32("--retries", optarg, 0, 100, &o->retries)))
        return st;
      break;
    case 'w':
      if ((st = parse_u32("--retry-wait", optarg, 1, 60000,
                          &o->retry_wait_ms)))
        return st;
      break;
    case 't':
      if ((st = parse_u32("--timeout", optarg, 0, 86400, &t)))
        return st;
      o->ch.timeout_s = t;
      break;
    }
  }
  o->first_dir = optind;
  return -1;
}

int stkr__push_args(int argc, char **argv, stkr__push_opts *o, char *pw,
                    size_t pw_len) {
  const char *pwfile = NULL, *env;
  int st;

  *o = (stkr__push_opts){.ch = {.database = "stackrec", .gzip = true,
                                .timeout_s = 600},
                         .chunk = STKR_PUSH_DEFAULT_CHUNK,
                         .streams = 1,
                         .retries = 5,
                         .retry_wait_ms = 500};
  pw[0] = '\0';
  if ((st = parse_options(argc, argv, o, &pwfile)) >= 0)
    return st;
  if ((st = check_name("--database", o->ch.database)) != 0 ||
      (o->cluster != NULL && (st = check_name("--cluster", o->cluster)) != 0))
    return st;
  if (o->print_schema)
    return -1;
  if (o->ch.url == NULL)
    return stkr_cli_usage_error("push", "--url is required");
  if ((st = check_url(o->ch.url)) != 0)
    return st;
  if (optind >= argc && !o->create_schema)
    return stkr_cli_usage_error("push", "no recording given");
  /* An empty id would be every such push's one recording (QA, session
   * 39); an empty device or build, no name at all. */
  if ((o->recording != NULL && o->recording[0] == '\0') ||
      (o->device != NULL && o->device[0] == '\0') ||
      (o->build != NULL && o->build[0] == '\0'))
    return stkr_cli_usage_error("push", "--recording, --device and --build "
                                "take a non-empty value");
  /* One id names one recording (a second DIR would be refused as
   * another's only after the first went in), and is kept whole. */
  if (o->recording != NULL && argc - optind > 1)
    return stkr_cli_usage_error("push", "--recording names one recording: "
                                "give one DIR with it");
  if (o->recording != NULL && strlen(o->recording) > 79)
    return stkr_cli_usage_error("push", "--recording takes at most 79 "
                                "bytes");
  if ((st = read_password(pwfile, pw, pw_len, &o->ch.password)) != 0)
    return st;
  if (o->ch.password != NULL && o->ch.user == NULL)
    o->ch.user = "default"; /* a password alone is the default user's */
  if ((env = getenv("STACKREC_PUSH_TEST_DELAY_MS")) != NULL)
    o->test_delay_ms = (uint32_t)atoi(env); /* tests: a window to kill in */
  return -1;
}
