/*
 * test-recover-hostile.c: ring and session files are hostile input to
 * recovery (a crash mid-write, a damaged disk, a file pulled off a device,
 * or a crafted one). Truncated at every offset, thousands of byte flips,
 * absurd sizes: recovery never crashes, reads nothing outside the file,
 * keeps memory bounded by the file's real size, and says which file and
 * which offset was bad. Records before a bad one are still recovered.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/stkr_ringfile.h"
#include "proto/stkr_reader.h"
#include "proto/stkr_recover.h"
#include "recorder/stackrec.h"
#include "tests/testlib.h"

STKR_SITE_DEFINE(g_site, "hostile.ring");

static char g_root[256];
static char g_src[300]; /* a dead session's files, kept pristine */
static char g_ring_name[128], g_sess_name[128];
static uint8_t *g_ring, *g_sess;
static size_t g_ring_len, g_sess_len;
#define N_EVENTS 200

static int count_rec(void *arg, const stkr_ring_rec *r) {
  (void)r;
  ++*(uint64_t *)arg;
  return 0;
}

/* A child records N_EVENTS (payload: the 4-byte index mod 16, so that
 * most records are PAYLOAD_KNOWN: common/stkr_ringfile.h, "Payloads") and
 * dies by SIGKILL. */
static int setup(void **state) {
  struct dirent *e;
  DIR *d;
  int status;
  char path[1024];
  (void)state;

  assert_int_equal(tl_mkdtemp(g_root, sizeof g_root, "rh"), 0);
  snprintf(g_src, sizeof g_src, "%s/src", g_root);
  assert_int_equal(mkdir(g_src, 0700), 0);
  pid_t p = fork();
  if (p == 0) {
    /* 64 KiB keeps the 200 records below half the ring: past half the
     * producer wakes the worker, which (when the child is slow, as under
     * TSan) drains records into a segment before the kill. */
    stkr_config cfg = {.dir = g_src, .flush_interval_ms = 3600000,
                       .ring_bytes = 64 << 10, .payload_max = 16};
    if (stkr_init(&cfg) != 0) _exit(90);
    for (uint32_t i = 0; i < N_EVENTS; i++) {
      uint32_t v = i % 16;
      stkr_event(&g_site, &v, 4);
    }
    kill(getpid(), SIGKILL);
  }
  assert_int_equal(waitpid(p, &status, 0), p);
  /* The worker makes a few ring files ahead for threads to come: the
   * recording thread's is the one holding records. */
  assert_non_null(d = opendir(g_src));
  uint64_t best = 0;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".ring") == 0) {
      stkr_ring_info info;
      uint64_t dups, lost, bad, n = 0;
      const char *why;
      size_t len;
      uint8_t *p;
      snprintf(path, sizeof path, "%s/%s", g_src, e->d_name);
      p = (uint8_t *)tl_slurp_alloc(path, &len);
      if (stkr_ring_parse(p, len, 0, &info, count_rec, &n, &dups, &lost, &bad,
                          &why) == 0 && (n > best || g_ring_name[0] == 0)) {
        best = n;
        snprintf(g_ring_name, sizeof g_ring_name, "%.100s", e->d_name);
      }
      free(p);
    }
    if (l > 8 && strcmp(e->d_name + l - 8, ".session") == 0)
      snprintf(g_sess_name, sizeof g_sess_name, "%.100s", e->d_name);
  }
  closedir(d);
  assert_true(g_ring_name[0] && g_sess_name[0]);
  snprintf(path, sizeof path, "%s/%s", g_src, g_ring_name);
  g_ring = (uint8_t *)tl_slurp_alloc(path, &g_ring_len);
  snprintf(path, sizeof path, "%s/%s", g_src, g_sess_name);
  g_sess = (uint8_t *)tl_slurp_alloc(path, &g_sess_len);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free(g_ring);
  free(g_sess);
  return 0;
}

/* ---- the decoder ---------------------------------------------------------- */

typedef struct seen {
  uint64_t n, last_end;
} seen;

static int on_rec(void *arg, const stkr_ring_rec *r) {
  seen *s = arg;
  /* Everything handed out lies inside the buffer it came from: touch it
   * (ASan checks each byte). */
  volatile uint64_t sum = 0;
  for (unsigned i = 0; i < r->depth; i++) sum += r->pcs[i];
  if (r->payload != NULL) /* NULL: a PAYLOAD_KNOWN record's, not here */
    for (unsigned i = 0; i < r->payload_len; i++) sum += r->payload[i];
  else
    assert_true(r->flags & STKR_RINGREC_PAYLOAD_KNOWN);
  (void)sum;
  s->n++;
  s->last_end = r->pos + r->size;
  return 0;
}

static int parse(const uint8_t *p, size_t len, seen *s, uint64_t *lost,
                 const char **why) {
  stkr_ring_info info;
  uint64_t dups, bad;
  /* A private copy of exactly len bytes: ASan sees any read past it. */
  uint8_t *copy = malloc(len ? len : 1);
  assert_non_null(copy);
  memcpy(copy, p, len);
  memset(s, 0, sizeof *s);
  int rc = stkr_ring_parse(copy, len, 0, &info, on_rec, s, &dups, lost, &bad,
                           why);
  free(copy);
  return rc;
}

static void test_intact(void **state) {
  seen s;
  uint64_t lost;
  const char *why;
  (void)state;
  assert_int_equal(parse(g_ring, g_ring_len, &s, &lost, &why), 0);
  assert_int_equal(s.n, N_EVENTS);
}

/* Cut at every offset: the header is refused (a clear reason) or the
 * records that fit are returned; never more than were written. */
static void test_truncated_everywhere(void **state) {
  (void)state;
  for (size_t cut = 0; cut < g_ring_len; cut++) {
    seen s;
    uint64_t lost;
    const char *why;
    int rc = parse(g_ring, cut, &s, &lost, &why);
    if (rc < 0)
      assert_non_null(why);
    assert_true(s.n <= N_EVENTS);
  }
}

/* Random byte flips, 3000 files: no crash, nothing read outside. */
static void test_byte_flips(void **state) {
  uint8_t *m = malloc(g_ring_len);
  unsigned seed = 12345;
  uint64_t refused = 0, damaged = 0;
  (void)state;
  assert_non_null(m);
  for (int round = 0; round < 3000; round++) {
    seen s;
    uint64_t lost;
    const char *why;
    memcpy(m, g_ring, g_ring_len);
    int flips = 1 + (int)(rand_r(&seed) % 8);
    for (int f = 0; f < flips; f++) {
      /* Half of the flips hit the header page and the first records,
       * where they matter most. */
      size_t at = (rand_r(&seed) & 1) ? (size_t)(rand_r(&seed) % 4200)
                                       : rand_r(&seed) % g_ring_len;
      m[at] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
    }
    int rc = parse(m, g_ring_len, &s, &lost, &why);
    refused += rc < 0;
    damaged += rc == 1;
  }
  print_message("3000 flipped ring files: %llu refused, %llu ended at a bad "
                "record\n", (unsigned long long)refused,
                (unsigned long long)damaged);
  free(m);
}

/* Absurd fields: a ring size past the file, a head far past the tail. */
static void test_absurd_fields(void **state) {
  uint8_t *m = malloc(g_ring_len);
  stkr_ringfile_meta meta;
  seen s;
  uint64_t lost, v;
  const char *why;
  (void)state;
  assert_non_null(m);
  memcpy(m, g_ring, g_ring_len);
  memcpy(&meta, m, sizeof meta);
  meta.ring_size = (uint64_t)1 << 40;
  memcpy(m, &meta, sizeof meta);
  assert_int_equal(parse(m, g_ring_len, &s, &lost, &why), -EINVAL);
  memcpy(m, g_ring, g_ring_len);
  v = UINT64_MAX - 7;
  memcpy(m + STKR_RINGFILE_HEAD_OFF, &v, 8);
  assert_int_equal(parse(m, g_ring_len, &s, &lost, &why), -EINVAL);
  assert_non_null(strstr(why, "head"));
  free(m);
}

/* ---- whole recoveries ----------------------------------------------------- */

typedef struct msgs {
  int n;
  bool named; /* every message named a file of ours */
  char last[1024];
} msgs;

static void msg_cb(void *arg, const char *line) {
  msgs *m = arg;
  m->n++;
  if (!strstr(line, g_ring_name) && !strstr(line, g_sess_name))
    m->named = false;
  snprintf(m->last, sizeof m->last, "%s", line);
}

/* A fresh copy of the dead session with one file replaced by `data`. */
static int g_variants; /* recover_variant's last: <g_root>/v<g_variants> */
static void recover_variant(const char *which, const uint8_t *data, size_t len,
                            stkr_recover_stats *st, msgs *m) {
  char dir[400], path[1024];
  stkr_recover_opts o = {.message = msg_cb, .message_arg = m};

  snprintf(dir, sizeof dir, "%s/v%d", g_root, ++g_variants);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  bool ring = strcmp(which, "ring") == 0, sess = strcmp(which, "session") == 0;
  assert_int_equal(
      tl_write_bytes(path, ring ? data : g_ring, ring ? len : g_ring_len), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(
      tl_write_bytes(path, sess ? data : g_sess, sess ? len : g_sess_len), 0);
  memset(m, 0, sizeof *m);
  m->named = true;
  assert_int_equal(stkr_recover_dir(dir, &o, st), 0);
}

static void test_recover_truncated_files(void **state) {
  (void)state;
  /* Every 97th offset of each file, and the interesting edges. */
  for (int f = 0; f < 2; f++) {
    const char *which = f ? "session" : "ring";
    size_t len = f ? g_sess_len : g_ring_len;
    for (size_t cut = 0; cut < len; cut += (cut < 4200 ? 97 : 4099)) {
      stkr_recover_stats st;
      msgs m;
      recover_variant(which, f ? g_sess : g_ring, cut, &st, &m);
      assert_true(st.events <= N_EVENTS);
      assert_true(m.named);
      if (st.events < N_EVENTS) {
        assert_true(m.n > 0); /* a loss is never silent */
        assert_non_null(strstr(m.last, "offset"));
      }
    }
  }
  /* The intact pair recovers everything, silently. */
  stkr_recover_stats st;
  msgs m;
  recover_variant("ring", g_ring, g_ring_len, &st, &m);
  assert_int_equal(st.events, N_EVENTS);
  assert_int_equal(m.n, 0);
}

static void count_recovery_loss(void *arg, const stkr_warning *w) {
  if (w->kind == STKR_WARN_DAMAGED && w->data_lost &&
      strstr(w->message, "bytes of the dead writer's ring records damaged"))
    ++*(int *)arg;
}

/* QA (session 25): recovery said "N bytes of records lost" and exited 1,
 * but the segment it wrote added up (attempted = written + dropped +
 * recovered, from what it could read): verify said intact, info
 * "complete: yes", report nothing. Its Counters now carry the lost bytes,
 * and a reader counts the session damaged: the ring damaged from its
 * 3000th byte of records on, one warning, one damaged batch's worth. */
static void test_recovery_loss_is_damage(void **state) {
  uint8_t *bad = malloc(g_ring_len);
  stkr_reader_opts ro = {.warn = count_recovery_loss};
  stkr_recover_stats st;
  stkr_event_view ev;
  stkr_reader *rd = NULL;
  char dir[400];
  int warned = 0;
  msgs m;
  (void)state;

  assert_non_null(bad);
  memcpy(bad, g_ring, g_ring_len);
  for (size_t i = STKR_RINGFILE_HDR_BYTES + 3000; i < g_ring_len; i++)
    bad[i] ^= 0xA5;
  recover_variant("ring", bad, g_ring_len, &st, &m);
  free(bad);
  assert_true(st.lost_bytes > 0);
  assert_true(st.events < N_EVENTS);
  snprintf(dir, sizeof dir, "%s/v%d", g_root, g_variants);
  ro.warn_arg = &warned;
  assert_int_equal(stkr_reader_open(dir, &ro, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) {
  }
  assert_int_equal(warned, 1);
  assert_int_equal(stkr_reader_process(rd, 0)->damaged_batches, 1);
  stkr_reader_free(rd);
}

/* A ring of the dead session that cannot be used (emptied, here; also a
 * FIFO, a file unreadable to the user, one larger than a ring can be) is
 * kept, never removed with the session's other files, and its loss is in
 * the recovered segment's counters: a reader calls the session damaged,
 * and a later recovery (verify's dry run) names the file left alone (QA,
 * session 40: a ring unreadable to the user running recover was deleted
 * with its 1 783 events, and the recording then verified intact). */
static void test_unusable_ring_kept(void **state) {
  stkr_reader_opts ro = {.warn = count_recovery_loss};
  stkr_recover_stats st;
  stkr_event_view ev;
  stkr_reader *rd = NULL;
  char dir[400], path[1024];
  struct stat sb;
  int warned = 0;
  msgs m;
  (void)state;

  recover_variant("ring", g_ring, 0, &st, &m);
  assert_int_equal(st.orphans, 1);
  assert_int_equal(st.events, 0);
  assert_non_null(strstr(m.last, "file kept"));
  snprintf(dir, sizeof dir, "%s/v%d", g_root, g_variants);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(stat(path, &sb), 0); /* still there */
  ro.warn_arg = &warned;
  assert_int_equal(stkr_reader_open(dir, &ro, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) {
  }
  assert_int_equal(warned, 1);
  assert_true(stkr_reader_process(rd, 0)->damaged_batches >= 1);
  stkr_reader_free(rd);
  /* Left alone, without its session file, it is named every time. */
  stkr_recover_opts o = {.dry_run = true, .message = msg_cb,
                         .message_arg = &m};
  memset(&m, 0, sizeof m);
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.orphans, 1);
  assert_int_equal(m.n, 1);
  assert_non_null(strstr(m.last, g_ring_name));
  assert_non_null(strstr(m.last, "without its session file"));
}

/* The same after a ring that could be used (review, session 40: the
 * loss went into no batch when an earlier ring had written one, and the
 * segment read intact). */
static void test_unusable_ring_after_a_good_one(void **state) {
  stkr_reader_opts ro = {.warn = count_recovery_loss};
  stkr_recover_opts o = {0};
  stkr_recover_stats st;
  stkr_event_view ev;
  stkr_reader *rd = NULL;
  char dir[400], path[1024], bad[160];
  const char *dash = strrchr(g_ring_name, '-');
  int warned = 0;
  (void)state;

  assert_non_null(dash);
  snprintf(bad, sizeof bad, "%.*s-99.ring", (int)(dash - g_ring_name),
           g_ring_name);
  snprintf(dir, sizeof dir, "%s/good-then-bad", g_root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(path, g_ring, g_ring_len), 0);
  snprintf(path, sizeof path, "%s/%s", dir, bad);
  assert_int_equal(tl_write_bytes(path, g_ring, 100), 0); /* cut short */
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(tl_write_bytes(path, g_sess, g_sess_len), 0);
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.events, N_EVENTS);
  assert_int_equal(st.orphans, 1);
  ro.warn_arg = &warned;
  assert_int_equal(stkr_reader_open(dir, &ro, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) {
  }
  assert_int_equal(warned, 1);
  stkr_reader_free(rd);
}

/* A ring the user running recover cannot open (root's, 0600, to a
 * recovery run as nobody) is not lost yet: kept with its session file, so
 * that a recovery that can open it gets its records (QA, session 40: kept
 * without it, they could never be recovered). Root only (skipped else). */
static void test_unopenable_ring_recovered_later(void **state) {
  char dir[400], path[1024];
  stkr_recover_opts o = {0};
  stkr_recover_stats st;
  struct stat sb;
  int status;
  (void)state;

  if (geteuid() != 0) skip();
  /* Under /tmp: the test's own directory may be under one nobody cannot
   * enter (/root's). */
  snprintf(dir, sizeof dir, "/tmp/stkr-notmine-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(tl_write_bytes(path, g_sess, g_sess_len), 0);
  assert_int_equal(chown(path, 65534, 65534), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(path, g_ring, g_ring_len), 0);
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(chown(dir, 65534, 65534), 0);
  pid_t p = fork();
  if (p == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(90);
    _exit(stkr_recover_dir(dir, &o, &st) == 0 && st.sessions_failed == 1 &&
                  st.events == 0
              ? 0
              : 91);
  }
  assert_int_equal(waitpid(p, &status, 0), p);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(stat(path, &sb), 0); /* the session file stays */
  assert_int_equal(tl_count_files(dir, ".zst"), 0); /* no empty segment */
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.events, N_EVENTS);
  assert_int_equal(st.orphans, 0);
  tl_rm_rf(dir);
}

/* A sparse ring file of 3 GiB: refused by its size before any allocation
 * (memory stays bounded by what a real ring can be). */
static void test_recover_huge_sparse(void **state) {
  char dir[400], path[1024];
  stkr_recover_stats st;
  msgs m = {.named = true};
  stkr_recover_opts o = {.message = msg_cb, .message_arg = &m};
  (void)state;

  snprintf(dir, sizeof dir, "%s/huge", g_root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(path, g_ring, g_ring_len), 0);
  assert_int_equal(truncate(path, (off_t)3 << 30), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(tl_write_bytes(path, g_sess, g_sess_len), 0);
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.events, 0);
  assert_int_equal(st.orphans, 1);
  assert_true(m.n == 1 && m.named);
  assert_non_null(strstr(m.last, "too large"));
}

/* Ring files without their session file: one that holds records, or is
 * not whole, is an orphan (kept, counted: `stackrec recover` exits 1); an
 * empty one (head == tail: a ring handed on while its session closed) is
 * removed (a dry run only counts it). */
static void ring_alone(const char *name, const uint8_t *ring, size_t len,
                       bool dry, uint64_t orphans, uint64_t removed,
                       bool stays) {
  char dir[400], path[1024];
  stkr_recover_stats st;
  stkr_recover_opts o = {.dry_run = dry};
  struct stat sb;

  snprintf(dir, sizeof dir, "%s/%s", g_root, name);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(path, ring, len), 0);
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.orphans, orphans);
  assert_int_equal(st.empty_rings_removed, removed);
  assert_int_equal(st.events, 0);
  assert_int_equal(stat(path, &sb) == 0, stays);
}

static void test_ring_without_session(void **state) {
  uint8_t *empty = malloc(g_ring_len);
  uint64_t head;
  (void)state;

  assert_non_null(empty);
  memcpy(empty, g_ring, g_ring_len);
  memcpy(&head, empty + STKR_RINGFILE_HEAD_OFF, 8);
  assert_true(head != 0); /* the fixture's ring holds its records */
  memcpy(empty + STKR_RINGFILE_TAIL_OFF, &head, 8);
  ring_alone("alone-full", g_ring, g_ring_len, false, 1, 0, true);
  ring_alone("alone-cut", empty, STKR_RINGFILE_HDR_BYTES - 1, false, 1, 0,
             true);
  ring_alone("alone-empty-dry", empty, g_ring_len, true, 0, 1, true);
  ring_alone("alone-empty", empty, g_ring_len, false, 0, 1, false);
  free(empty);
}

/* A link in place of DIR/.stackrec-cache: recover makes, reads and
 * removes nothing through it (QA, session 40: its record.lock, a stale one
 * of another recording, was deleted through the link). */
static void test_cache_dir_link_not_followed(void **state) {
  char dir[400], outside[400], path[1024];
  stkr_recover_stats st;
  stkr_recover_opts o = {0};
  struct stat sb;
  int fd;
  (void)state;

  snprintf(dir, sizeof dir, "%s/cache-link", g_root);
  snprintf(outside, sizeof outside, "%s/cache-outside", g_root);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(outside, 0700), 0);
  snprintf(path, sizeof path, "%s/record.lock", outside);
  assert_int_equal(tl_write_bytes(path, "precious\n", 9), 0);
  snprintf(path, sizeof path, "%s/.stackrec-cache", dir);
  assert_int_equal(symlink("../cache-outside", path), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(path, g_ring, g_ring_len), 0);
  snprintf(path, sizeof path, "%s/%s", dir, g_sess_name);
  assert_int_equal(tl_write_bytes(path, g_sess, g_sess_len), 0);

  fd = stkr_recover_lock_dir(dir);
  assert_true(fd == -ELOOP || fd == -ENOTDIR);
  stkr_recover_unlock_dir(dir, fd);
  assert_false(stkr_recover_has_lock_file(dir));
  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.events, N_EVENTS); /* the session itself: recovered */
  snprintf(path, sizeof path, "%s/record.lock", outside);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_size, 9);
}

/* A torn last batch in a segment that has another hard link (a backup
 * made with `cp -al`): recovery leaves it, and says so; the other name
 * keeps every byte (QA, session 40: the truncation in place cut the
 * backup too), and the events are read once. */
static void test_torn_tail_of_a_linked_segment(void **state) {
  char dir[400], bak[400], seg[1024], lpath[1024], name[256] = "";
  stkr_recover_stats st;
  stkr_recover_opts o = {0};
  struct dirent *e;
  struct stat a, b;
  size_t len;
  uint8_t *data;
  DIR *d;
  (void)state;

  assert_non_null(d = opendir(g_src));
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, "stackrec-", 9) == 0 &&
        strstr(e->d_name, ".zst") != NULL)
      snprintf(name, sizeof name, "%s", e->d_name);
  closedir(d);
  if (name[0] == '\0') skip(); /* no first batch written: nothing torn */
  snprintf(dir, sizeof dir, "%s/torn-linked", g_root);
  snprintf(bak, sizeof bak, "%s/torn-backup", g_root);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(bak, 0700), 0);
  snprintf(seg, sizeof seg, "%s/%s", g_src, name);
  data = (uint8_t *)tl_slurp_alloc(seg, &len);
  assert_true(len > 24);
  /* The segment, then the first 20 bytes of a frame: a torn batch. */
  uint8_t *torn = malloc(len + 20);
  assert_non_null(torn);
  memcpy(torn, data, len);
  memcpy(torn + len, data, 20);
  snprintf(seg, sizeof seg, "%s/%s", dir, name);
  assert_int_equal(tl_write_bytes(seg, torn, len + 20), 0);
  snprintf(lpath, sizeof lpath, "%s/%s", bak, name);
  assert_int_equal(link(seg, lpath), 0);
  snprintf(seg, sizeof seg, "%s/%s", dir, g_ring_name);
  assert_int_equal(tl_write_bytes(seg, g_ring, g_ring_len), 0);
  snprintf(seg, sizeof seg, "%s/%s", dir, g_sess_name);
  assert_int_equal(tl_write_bytes(seg, g_sess, g_sess_len), 0);

  assert_int_equal(stkr_recover_dir(dir, &o, &st), 0);
  assert_int_equal(st.events, N_EVENTS);
  snprintf(seg, sizeof seg, "%s/%s", dir, name);
  assert_int_equal(stat(seg, &a), 0);
  assert_int_equal(stat(lpath, &b), 0);
  /* Neither name changed; the events are read once. */
  assert_int_equal(a.st_size, len + 20);
  assert_int_equal(b.st_size, len + 20);
  assert_int_equal(a.st_ino, b.st_ino);
  stkr_reader *rd = NULL;
  stkr_event_view ev;
  uint64_t n = 0;
  assert_int_equal(stkr_reader_open(dir, NULL, &rd), 0);
  while (stkr_reader_next(rd, &ev) == 1) n++;
  assert_int_equal(n, N_EVENTS);
  stkr_reader_free(rd);
  free(torn);
  free(data);
}

TL_TEST_MAIN("recover-hostile", setup, teardown, test_intact,
             test_truncated_everywhere, test_byte_flips, test_absurd_fields,
             test_recover_truncated_files, test_recovery_loss_is_damage,
             test_recover_huge_sparse, test_ring_without_session,
             test_unusable_ring_kept, test_unusable_ring_after_a_good_one,
             test_cache_dir_link_not_followed,
             test_torn_tail_of_a_linked_segment,
             test_unopenable_ring_recovered_later)
