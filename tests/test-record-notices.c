/*
 * test-record-notices.c: the notices `stackrec record` prints of the
 * processes of its tree (QA, session 33): `-q` says how many it did not
 * list, as the full summary does; a process name with a TAB is named,
 * escaped, and its notice is still one of a process that recorded
 * nothing; a note about a long recording path keeps its reason.
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
    assert_int_equal(
        cr_run("record %s -o '%s' -- /bin/sh -c 'i=0; while [ $i -lt 70 ]; "
               "do STACKREC_RING_BYTES=12Q /bin/sh -c \"exit 0\"; "
               "i=$((i + 1)); done'",
               quiet ? "-q" : "", fresh("many")),
        0);
    if (count_lines(cr_err, "recorded nothing: cannot start recording") !=
            64 ||
        strstr(cr_err, "6 more notices (not listed; verify names how many "
                       "processes recorded nothing)") == NULL)
      fail_msg("%s:\n%.3000s", quiet ? "-q" : "summary", cr_err);
    if (quiet)
      assert_int_equal(count_lines(cr_err, "stackrec record: 6 more notices"),
                       1);
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

TL_TEST_MAIN("record-notices", setup, NULL, test_quiet_says_how_many_more,
             test_tab_in_a_process_name, test_long_path_keeps_the_reason)
