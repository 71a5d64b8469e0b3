/*
 * test-record-notices.c: the notices `stackrec record` prints of the
 * processes of its tree (QA, session 33): `-q` says how many it did not
 * list, as the full summary does; a process name with a TAB is named,
 * escaped, and its notice is still one of a process that recorded
 * nothing; a note about a long recording path keeps its reason; notices
 * from outside the recorded tree are not believed.
 * Processes that record nothing are made with a malformed
 * STACKREC_RING_BYTES (each says "cannot start recording").
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cli_run.h"
#include "tests/record_env.h"
#include "tests/testlib.h"

static int setup(void **state) {
  (void)state;
  return record_env_setup("recnotices");
}

/* Lines of text holding needle. */
static int count_lines(const char *text, const char *needle) {
  int n = 0;
  for (const char *l = text; l != NULL && *l != '\0';) {
    const char *end = strchr(l, '\n');
    size_t len = end != NULL ? (size_t)(end - l) : strlen(l);
    const char *hit = strstr(l, needle);
    n += hit != NULL && hit < l + len;
    l = end != NULL ? end + 1 : NULL;
  }
  return n;
}

/* 70 processes that record nothing: record keeps 64 notices. With -q it
 * listed those 64 and never said that 6 more came (a -q user counted 64
 * failures); now it says so, as the summary does. */
static void test_quiet_says_how_many_more(void **state) {
  (void)state;
  if (!HOOKS_IN_SYSTEM_PROGRAMS) skip(); /* sh hosts the hooks */
  for (int quiet = 0; quiet < 2; quiet++) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", fresh("many"));
    assert_int_equal(
        cr_run("record %s -o '%s' -- /bin/sh -c 'i=0; while [ $i -lt 70 ]; "
               "do STACKREC_RING_BYTES=12Q /bin/sh -c \"exit 0\"; "
               "i=$((i + 1)); done'",
               quiet ? "-q" : "", dir),
        0);
    if (count_lines(cr_err, "recorded nothing: cannot start recording") !=
            64 ||
        strstr(cr_err, "6 more notices (not listed; the processes that "
                       "recorded nothing are all named in the recording: "
                       "info, verify)") == NULL)
      fail_msg("%s:\n%.3000s", quiet ? "-q" : "summary", cr_err);
    if (quiet)
      assert_int_equal(count_lines(cr_err, "stackrec record: 6 more notices"),
                       1);
    /* The 6 are in the recording each, not as one line "6 more" that
     * readers took for one process (QA, session 34: 65 of 75). */
    assert_int_equal(cr_run("info '%s'", dir), 0);
    cr_assert_has(cr_out, "70 processes of the tree recorded nothing");
  }
}

/* A program whose name holds a TAB (its file's name: comm) that records
 * nothing. The notice's fields are TAB-separated: the name's tail became
 * the errno field, the notice an ordinary note ("(a): 13<TAB>cannot
 * start ..."). Now the name is "a?b" and the notice says it recorded
 * nothing, in -q and in the summary. */
static void test_tab_in_a_process_name(void **state) {
  char prog[4200];
  (void)state;
  if (!HOOKS_IN_SYSTEM_PROGRAMS) skip();
  snprintf(prog, sizeof prog, "%s/a\tb", fresh("tabname"));
  assert_int_equal(tl_system("mkdir -p \"$(dirname '%s')\" && cp /bin/sh '%s'",
                             prog, prog),
                   0);
  for (int quiet = 0; quiet < 2; quiet++) {
    assert_int_equal(cr_run("record %s -o '%s' -- /bin/sh -c "
                            "'STACKREC_RING_BYTES=12Q \"%s\" -c \"exit 0\"'",
                            quiet ? "-q" : "", fresh("tab"), prog),
                     0);
    if (strstr(cr_err, "(a?b) recorded nothing: cannot start recording") ==
            NULL ||
        strchr(cr_err, '\t') != NULL)
      fail_msg("%s:\n%.3000s", quiet ? "-q" : "summary", cr_err);
  }
}

/* A note about a recording path of 482 bytes: it was cut at 448 bytes,
 * the path first, and its reason was lost ("cannot create a session file
 * in /tmp/.../g..."). Now the middle of the text goes: "... : File too
 * large; rings are not crash-proof" stays. */
static void test_long_path_keeps_the_reason(void **state) {
  char dir[4200];
  size_t n;
  (void)state;
  if (!HOOKS_IN_SYSTEM_PROGRAMS) skip();
  n = (size_t)snprintf(dir, sizeof dir, "%s", fresh("longpath"));
  for (char c = 'e'; n < 470; c++) {
    dir[n++] = '/';
    for (int k = 0; k < 150; k++) dir[n++] = c;
    dir[n] = '\0';
  }
  assert_int_equal(tl_system("mkdir -p '%s'", dir), 0);
  assert_int_equal(cr_run("record -q -o '%s/rec' -- /bin/sh -c 'ulimit -f 1; "
                          "uname >/dev/null'",
                          dir),
                   0);
  if (strstr(cr_err, "cannot create a session file in ") == NULL ||
      strstr(cr_err, "...") == NULL ||
      strstr(cr_err, ": File too large; rings are not crash-proof") == NULL)
    fail_msg("%.3000s", cr_err);
}

/* Notices from outside the recorded tree: record's socket name is in
 * /proc/net/unix for every local user to see, so a stranger sent
 * "process 4242 recorded nothing" and record wrote it into the recording
 * (verify 4). A notice must now carry the token that only the tree's
 * environment holds; one in the old format and one with a wrong token are
 * counted and ignored. */
static void test_foreign_notices(void **state) {
  const char *dir = fresh("foreign");
  int rc;
  (void)state;

  if (!HOOKS_IN_SYSTEM_PROGRAMS || access("/usr/bin/python3", X_OK) != 0) {
    fprintf(stderr, "skipped: no hooks in system programs, or no python3\n");
    return;
  }
  rc = tl_sh(&cr_capture,
             "(R='%s'; D='%s'; \"$R\" record -o \"$D\" -- /bin/sh -c "
             "'while [ ! -e \"$0\" ]; do sleep 0.02; done; "
             "cat /etc/hostname >/dev/null' \"$D.go\" & P=$!; N=; i=0; "
             "while [ -z \"$N\" ] && [ $i -lt 1500 ]; do "
             "N=$(grep -o \"@stackrec-record-$P-[0-9a-f]*\" /proc/net/unix "
             "| head -1); i=$((i+1)); sleep 0.02; done; "
             "/usr/bin/python3 -c 'import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
             "for m in (b\"4242\\tevil\\t13\\tforged\",\n"
             "          b\"0123456789abcdef\\t4243\\tevil\\t13\\tforged\"):\n"
             "  s.sendto(m, \"\\0\" + sys.argv[1][1:])' \"$N\"; "
             "touch \"$D.go\"; wait $P; s=$?; rm -f \"$D.go\"; exit $s)",
             cr_bin, dir);
  if (rc != 0)
    fail_msg("record: exit %d\n%s%s", rc, cr_out, cr_err);
  cr_assert_has(cr_err, "2 notices without the recording's token ignored: "
                        "not from the recorded tree");
  if (strstr(cr_err, "process 4242") != NULL ||
      strstr(cr_err, "process 4243") != NULL)
    fail_msg("a forged notice was believed:\n%s", cr_err);
  assert_int_equal(cr_run("verify '%s'", dir), 0);
}

TL_TEST_MAIN("record-notices", setup, NULL, test_quiet_says_how_many_more,
             test_tab_in_a_process_name, test_long_path_keeps_the_reason,
             test_foreign_notices)
