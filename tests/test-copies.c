/*
 * test-copies.c: two inputs that are copies of one recording
 * (stkr_reader_find_copies, proto/stkr_copies.c; QA, session 33: every
 * reader counted each event twice, verify said intact, while merge
 * refused the same inputs). On recordings written with the fixture
 * encoder (tests/fixture.h): a process, its copy, the copy of a later
 * segment only (its first deleted by the disk cap), and the same pid in
 * another recording with a session of its own (pid 1 of two containers).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/cli_run.h"
#include "tests/fixture.h"
#include "tests/testlib.h"

/* pid 7 session 0x5eed: g_rec, its copy g_copy, and g_later (segment 2 of
 * that session only); pid 7 session 0x0abc: g_other. */
static char g_rec[4096], g_copy[4096], g_later[4096], g_other[4096];

static int setup(void **state) {
  (void)state;
  if (cr_setup() != 0) return -1;
  snprintf(g_rec, sizeof g_rec, "%s", fx_tmpdir("copies-rec"));
  snprintf(g_copy, sizeof g_copy, "%s", fx_tmpdir("copies-copy"));
  snprintf(g_later, sizeof g_later, "%s", fx_tmpdir("copies-later"));
  snprintf(g_other, sizeof g_other, "%s", fx_tmpdir("copies-other"));
  if (fx_write_one(g_rec, &(fx_one){.pid = 7, .session_id = 0x5eed}) != 0 ||
      tl_system("cp -p '%s'/* '%s'/", g_rec, g_copy) != 0 ||
      fx_write_one(g_later, &(fx_one){.pid = 7, .session_id = 0x5eed,
                                      .segment_seq = 2}) != 0 ||
      fx_write_one(g_other, &(fx_one){.pid = 7, .session_id = 0x0abc}) != 0)
    return -1;
  return 0;
}

/* The reader over inputs a, b (and c if not NULL), and what it finds. */
static int find(const char *a, const char *b, const char *c, size_t *first,
                size_t *second, uint64_t *sid) {
  stkr_reader *r = NULL;
  int rc;

  assert_int_equal(stkr_reader_create(NULL, &r), 0);
  assert_int_equal(stkr_reader_add(r, a), 0);
  assert_int_equal(stkr_reader_add(r, b), 0);
  if (c != NULL) assert_int_equal(stkr_reader_add(r, c), 0);
  rc = stkr_reader_find_copies(r, first, second, sid);
  stkr_reader_free(r);
  return rc;
}

static void test_reader_finds_copies(void **state) {
  size_t a = 9, b = 9;
  uint64_t sid = 0;
  stkr_reader *r = NULL;
  stkr_event_view ev;
  (void)state;

  assert_int_equal(find(g_rec, g_copy, NULL, &a, &b, &sid), 1);
  assert_int_equal(a, 0);
  assert_int_equal(b, 1);
  assert_int_equal(sid, 0x5eed);
  /* The same session from its second segment on: a copy too. */
  assert_int_equal(find(g_rec, g_later, NULL, &a, &b, &sid), 1);
  /* Among others: the other session of pid 7 first. */
  assert_int_equal(find(g_other, g_rec, g_copy, &a, &b, &sid), 1);
  assert_int_equal(a, 1);
  assert_int_equal(b, 2);
  /* pid 7 of another recording: not a copy. */
  assert_int_equal(find(g_rec, g_other, NULL, &a, &b, &sid), 0);
  /* Misuse. */
  assert_int_equal(stkr_reader_find_copies(NULL, &a, &b, &sid), -EINVAL);
  assert_int_equal(stkr_reader_open(g_rec, NULL, &r), 0);
  assert_int_equal(stkr_reader_find_copies(r, &a, NULL, &sid), -EINVAL);
  assert_int_equal(stkr_reader_find_copies(r, &a, &b, &sid), 0);
  assert_int_equal(stkr_reader_next(r, &ev), 1);
  assert_int_equal(stkr_reader_find_copies(r, &a, &b, &sid), -EBUSY);
  stkr_reader_free(r);
}

/* Every command that reads refuses copies, exit 2, naming both inputs
 * and the session; two recordings of one pid are read as before. */
static void test_commands_refuse_copies(void **state) {
  static const char *const cmds[] = {
      "report", "verify", "info", "export --format jsonl", "dump",
      "compliance", "privacy-manifest", "export --format pprof -o /dev/null"};
  char want[9000];
  (void)state;

  snprintf(want, sizeof want, "'%s' and '%s' hold the same recording "
           "session 0000000000005eed of pid 7: copies of one recording?",
           g_rec, g_copy);
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    if (cr_run("%s '%s' '%s'", cmds[i], g_rec, g_copy) != 2 ||
        strstr(cr_err, want) == NULL)
      fail_msg("%s: %s", cmds[i], cr_err);
  }
  assert_int_equal(cr_run("verify '%s' '%s'", g_rec, g_other), 0);
  cr_assert_has(cr_out, "2 processes");
  /* One input given twice is still one input (read once). */
  assert_int_equal(cr_run("verify '%s' '%s'", g_rec, g_rec), 0);
}

/* A segment file given again under another name in another directory (a
 * symbolic link, a hard link) beside its own directory: one file, read
 * once (QA, session 34: every event counted twice, verify intact). */
static void test_same_file_by_another_name(void **state) {
  char links[4096];
  stkr_reader *r = NULL;
  stkr_event_view ev;
  int events = 0;
  (void)state;

  snprintf(links, sizeof links, "%s", fx_tmpdir("copies-links"));
  assert_int_equal(tl_system("mkdir -p '%s' && for f in '%s'/stackrec-*.zst; "
                             "do ln -s \"$f\" '%s'/sym.zst; ln \"$f\" "
                             "'%s'/hard.zst; done", links, g_rec, links, links),
                   0);
  assert_int_equal(stkr_reader_create(NULL, &r), 0);
  assert_int_equal(stkr_reader_add(r, g_rec), 0);
  char p[4200];
  snprintf(p, sizeof p, "%s/sym.zst", links);
  assert_int_equal(stkr_reader_add(r, p), 0);
  snprintf(p, sizeof p, "%s/hard.zst", links);
  assert_int_equal(stkr_reader_add(r, p), 0);
  assert_int_equal(stkr_reader_add(r, links), 0);
  while (stkr_reader_next(r, &ev) == 1) events++;
  assert_int_equal(stkr_reader_process_count(r), 1);
  assert_int_equal(events, 1);
  stkr_reader_free(r);
  assert_int_equal(cr_run("verify '%s' '%s/sym.zst'", g_rec, links), 0);
  cr_assert_has(cr_out, "1 process");
}

/* Names of one file inside a recording (QA, session 40): a hard link of
 * a segment under a later seq of its process is read once, said, and
 * under the lower seq whatever the listing's order (merge had kept the
 * later name, and its OUT missed segment 1); links of two processes'
 * segment names to one device are each a loss (said once before). */
static void test_names_of_one_file(void **state) {
  char d[4096], out[4200], dev[4096];
  (void)state;

  snprintf(d, sizeof d, "%s", fx_tmpdir("copies-hardlink"));
  snprintf(out, sizeof out, "%s.merged", d);
  assert_int_equal(tl_system("cp -p '%s'/* '%s'/ && ln '%s/stackrec-7-000001"
                             ".zst' '%s/stackrec-7-000002.zst'", g_rec, d, d,
                             d), 0);
  assert_int_equal(cr_run("verify '%s'", d), 0);
  cr_assert_has(cr_out, "(a hard link): read once");
  assert_int_equal(cr_run("merge -o '%s' '%s'", out, d), 0);
  assert_int_equal(tl_system("test -f '%s/stackrec-7-000001.zst' && ! test "
                             "-e '%s/stackrec-7-000002.zst'", out, out), 0);
  assert_int_equal(cr_run("verify '%s'", out), 0);

  snprintf(dev, sizeof dev, "%s", fx_tmpdir("copies-devlinks"));
  assert_int_equal(tl_system("cp -p '%s'/* '%s'/ && for n in 8-000001 "
                             "8-000002 9-000001; do ln -s /dev/zero "
                             "'%s'/stackrec-$n.zst; done", g_rec, dev, dev),
                   0);
  assert_int_equal(cr_run("verify '%s'", dev), 1);
  cr_assert_has(cr_out, "stackrec-8-000001.zst: unreadable segment");
  cr_assert_has(cr_out, "stackrec-8-000002.zst: unreadable segment");
  cr_assert_has(cr_out, "stackrec-9-000001.zst: unreadable segment");
}

TL_TEST_MAIN("copies", setup, NULL, test_reader_finds_copies,
             test_commands_refuse_copies, test_same_file_by_another_name,
             test_names_of_one_file)
